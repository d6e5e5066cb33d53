"""Tracing cost of name stacks: ``make_jaxpr`` of a 200-equation function, without scopes and
with a ``named_scope`` around every second equation pair.

Run it on two checkouts to compare them (``PYTHONPATH=<checkout> python bench/...``): every
equation records the current name stack, so the unscoped time is the overhead every program
pays, and the scoped one what ``named_scope`` (a Flax module) adds.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import jaxkit  # noqa: E402
import jaxkit.numpy as jnp  # noqa: E402
from _timing import best_per_call  # noqa: E402

N_LAYERS = 100  # two equations each (sin, mul)


def plain(x):
    for _ in range(N_LAYERS):
        x = jnp.sin(x) * 1.5
    return x


def scoped(x):
    for i in range(N_LAYERS):
        with jaxkit.named_scope(f"layer{i % 4}"):
            x = jnp.sin(x) * 1.5
    return x


def main() -> None:
    x = jnp.ones(8)
    for f in (plain, scoped):
        assert len(jaxkit.make_jaxpr(f)(x).eqns) == 2 * N_LAYERS
    best = best_per_call({"plain": lambda: jaxkit.make_jaxpr(plain)(x),
                          "scoped": lambda: jaxkit.make_jaxpr(scoped)(x)},
                         number=5, windows=int(sys.argv[1]) if len(sys.argv) > 1 else 30)
    for name, sec in best.items():
        print(f"make_jaxpr, {2 * N_LAYERS} equations, {name}: {sec * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
