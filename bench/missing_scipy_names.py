"""Print, for each submodule of ``jax.scipy`` and the rest of JAX's numerical surface
(``jax.lax``, ``jax.ops``, ``jax.image``, ``jax.experimental.ode``), the public names jaxkit
lacks (needs the test extra: it imports jax as the reference).

    python bench/missing_scipy_names.py

Submodules jaxkit does not have yet are reported whole; names left out on purpose are listed
with the reason and not counted.
"""
from __future__ import annotations

import importlib
import pkgutil



def _public_submodules() -> list[str]:
    """Every public submodule of jax.scipy, found by walking the package (a fixed list missed
    spatial.transform), relative to it: ["cluster", "cluster.vq", ...]."""
    import jax.scipy
    names = []
    for info in pkgutil.walk_packages(jax.scipy.__path__, "jax.scipy."):
        relative = info.name[len("jax.scipy."):]
        if not any(part.startswith("_") for part in relative.split(".")):
            names.append(relative)
    return sorted(names)

# Modules outside jax.scipy, compared the same way.
NUMERICAL_MODULES = ["jax.lax", "jax.ops", "jax.image", "jax.experimental.ode"]

_ODE_HELPER = ("a module-level helper or import of JAX's own solver, not in JAX's API docs "
               "(which list odeint only); jaxkit's solver works on pytrees, not raveled arrays")
INTENTIONALLY_MISSING: dict[str, str] = {
    f"jax.experimental.ode.{n}": _ODE_HELPER for n in (
        "abs2", "api_util", "custom_derivatives", "fit_4th_order_polynomial",
        "initial_step_size", "interp_fit_dopri", "jax", "lu", "map", "mean_error_ratio", "op",
        "optimal_step_size", "promote_dtypes_inexact", "ravel_first_arg", "ravel_first_arg_",
        "ravel_pytree", "runge_kutta_step", "safe_map", "safe_zip", "tree_leaves", "tree_map",
        "zip",)}


def public(module) -> set[str]:
    return {n for n in dir(module) if not n.startswith("_")}


def _ours(label: str):
    try:
        return importlib.import_module("jaxkit" + label[len("jax"):])
    except ImportError:
        return None


def main() -> int:
    total_names = total_missing = total_listed = 0
    print(f"{'module':<36}{'jax':>6}{'jaxkit':>8}{'missing':>9}")
    rows = []
    labels = [f"jax.scipy.{name}" for name in _public_submodules()] + NUMERICAL_MODULES
    for label in labels:
        ref = importlib.import_module(label)
        names = public(ref)
        ours = _ours(label)
        have = public(ours) if ours is not None else set()
        missing = sorted(names - have)
        rows.append((label, names, missing))
    for label, names, missing in rows:
        counted = [m for m in missing if f"{label}.{m}" not in INTENTIONALLY_MISSING]
        total_names += len(names)
        total_missing += len(counted)
        total_listed += len(missing) - len(counted)
        print(f"{label:<36}{len(names):>6}{len(names) - len(missing):>8}{len(counted):>9}")
        for m in missing:
            reason = INTENTIONALLY_MISSING.get(f"{label}.{m}")
            print(f"    missing: {label}.{m}" + (f"  (listed: {reason})" if reason else ""))
    print(f"{total_names} public names in these modules; {total_missing} missing "
          f"without a listed reason, {total_listed} listed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
