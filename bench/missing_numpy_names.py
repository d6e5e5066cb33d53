"""Print the public names of ``jax.numpy``, ``jax.numpy.linalg`` and ``jax.numpy.fft`` that
jaxkit lacks (needs the test extra: it imports jax as the reference).

    python bench/missing_numpy_names.py

Names that jaxkit leaves out on purpose are listed with the reason and not counted.
"""
from __future__ import annotations

import jax.numpy
import jax.numpy.fft
import jax.numpy.linalg

import jaxkit.numpy
import jaxkit.numpy.fft
import jaxkit.numpy.linalg

INTENTIONALLY_MISSING = {
    "jax.numpy.from_dlpack": "DLPack exchange is not supported by the jaxkit runtime",
}


def public(module) -> set[str]:
    return {n for n in dir(module) if not n.startswith("_")}


def main() -> int:
    missing = []
    for ref, ours in ((jax.numpy, jaxkit.numpy), (jax.numpy.linalg, jaxkit.numpy.linalg),
                      (jax.numpy.fft, jaxkit.numpy.fft)):
        for name in sorted(public(ref) - public(ours)):
            if isinstance(getattr(ref, name), type(jax.numpy)):
                continue  # submodules are compared separately
            missing.append(f"{ref.__name__}.{name}")
    counted = [m for m in missing if m not in INTENTIONALLY_MISSING]
    total = sum(len(public(m)) for m in (jax.numpy, jax.numpy.linalg, jax.numpy.fft))
    print(f"{total} public names in jax.numpy, jax.numpy.linalg and jax.numpy.fft")
    for m in missing:
        reason = INTENTIONALLY_MISSING.get(m)
        print(f"  missing: {m}" + (f"  (listed: {reason})" if reason else ""))
    print(f"{len(counted)} missing without a listed reason, {len(missing) - len(counted)} "
          "listed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
