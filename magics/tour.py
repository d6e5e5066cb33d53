"""The tour without a browser: ``python -m jaxkit`` or the ``jaxkit-tour`` command.

Runs the quickstart's examples (jit, grad, vmap), measures the speedups on this machine,
prints the jaxpr, the gradient check and a table of timings, and writes a chart to
``jaxkit_tour.png`` (``--out`` to change it; skipped without matplotlib).
"""
from __future__ import annotations

import argparse

import numpy as np

import jaxkit as jax
import jaxkit.numpy as jnp
from jaxkit import random
from jaxkit.magics import render
from jaxkit.magics.progress import TerminalProgress
from jaxkit.magics.reports import vmap_timeit_report
from jaxkit.magics.timing import format_seconds, time_call


def selu(x, alpha=1.67, lmbda=1.05):
    return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)


def sum_logistic(x):
    return jnp.sum(1.0 / (1.0 + jnp.exp(-x)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="jaxkit-tour", description=__doc__)
    parser.add_argument("--out", default="jaxkit_tour.png", help="where to write the chart")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    args = parser.parse_args(argv)
    repeat = 2 if args.quick else 5

    print(f"jaxkit {jax.__version__} on {jax.devices()}\n")
    key = random.PRNGKey(0)

    print("1. jit: trace once, compile with XLA, reuse")
    x = random.normal(key, (1_000_000,))
    print(jax.make_jaxpr(selu)(x[:3]))
    selu_jit = jax.jit(selu)
    eager = time_call(lambda: selu(x), repeat=repeat)
    jitted = time_call(lambda: selu_jit(x), repeat=repeat)
    print(f"   selu on 1e6 floats: eager {eager}, jit {jitted}, "
          f"speedup {eager.best / jitted.best:.1f}x\n")

    print("2. grad: derivatives, checked against the closed form")
    x_small = jnp.arange(3.0)
    g = jax.grad(sum_logistic)(x_small)
    s = 1 / (1 + np.exp(-np.arange(3.0)))
    print(f"   grad(sum_logistic)({x_small}) = {g}")
    print(f"   closed form sigmoid*(1-sigmoid)    = {(s * (1 - s)).astype(np.float32)}\n")

    print("3. vmap: per-example code, batched")
    mat = random.normal(key, (150, 100))

    def apply_matrix(v):
        return jnp.dot(mat, v)

    def by_hand(vs):
        return jnp.dot(vs, mat.T)

    sizes = [1, 10, 100] if args.quick else [1, 10, 100, 1000]
    with TerminalProgress("timing apply_matrix") as bar:  # the longest step: show it moving
        report = vmap_timeit_report(apply_matrix, [jnp.ones(100)], "apply_matrix", 0, sizes,
                                    by_hand, repeat=2 if args.quick else 3,
                                    progress=lambda msg: bar.update(f"timing apply_matrix: {msg}"))
    rows, header = report.rows()
    print(render.text_table(rows, header))
    srows, sheader = report.speedup_rows()
    print("\n   speedup over the Python loop")
    print(render.text_table(srows, sheader))

    if render.matplotlib_available():
        fig = report.chart()
        fig.savefig(args.out, dpi=110, bbox_inches="tight")
        print(f"\nchart written to {args.out}")
    print(f"\njit(selu) best time {format_seconds(jitted.best)}; done.")


if __name__ == "__main__":
    main()
