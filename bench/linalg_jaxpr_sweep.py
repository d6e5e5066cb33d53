"""Sweep: do ``jnp.linalg`` and ``jax.scipy.linalg`` stage the same jaxprs in jaxkit as in JAX
0.10.2?

    python bench/linalg_jaxpr_sweep.py [-v] [NAME ...]

For every public callable that ``jax.numpy.linalg`` (``np.NAME``) or ``jax.scipy.linalg``
(``sp.NAME``) shares with jaxkit, traces one small call in each library and compares the
printed jaxprs after renaming variables in order of first appearance (as
``jnp_jaxpr_sweep.py`` does). The call is an explicit case below where the function needs
particular arguments, otherwise the first generic argument list (a square matrix, two square
matrices, a matrix and a vector...) that JAX accepts. Prints the cases that differ (``-v``:
with both texts) and, last, the counts: same / different / jaxkit error / skipped (not
traceable in JAX). With names (``np.solve``, ``sp.lu_solve``), sweeps only those.
"""
from __future__ import annotations

import sys
import warnings

import jax
import numpy as np

import jaxkit
from jnp_jaxpr_sweep import compare, report

# A symmetric positive definite matrix, so every factorisation traces.
A = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32)
R = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0]], np.float32)  # a rectangular matrix
B = np.array([1.0, 2.0, 3.0], np.float32)
BM = np.arange(6, dtype=np.float32).reshape(3, 2)
PIV = np.array([2, 2, 2], np.int32)

GENERIC = [
    ((A,), lambda f, a: f(a)),
    ((A, B), lambda f, a, b: f(a, b)),
    ((A, A), lambda f, a, b: f(a, b)),
    ((B,), lambda f, b: f(b)),
    ((B, B), lambda f, a, b: f(a, b)),
    ((R,), lambda f, r: f(r)),
    ((), lambda f: f(3)),
]

# name -> list of (label, traced operands, function of (linalg namespace, *operands)).
CASES = {
    "np.solve": [("vec", (A, B), lambda L, a, b: L.solve(a, b)),
                 ("mat", (A, BM), lambda L, a, b: L.solve(a, b))],
    "np.lstsq": [("", (R, B[:2]), lambda L, a, b: L.lstsq(a, b))],
    "np.pinv": [("square", (A,), lambda L, a: L.pinv(a)), ("rect", (R,), lambda L, r: L.pinv(r))],
    "np.svd": [("", (R,), lambda L, r: L.svd(r)),
               ("novec", (R,), lambda L, r: L.svd(r, compute_uv=False))],
    "np.qr": [("", (R,), lambda L, r: L.qr(r)), ("r", (R,), lambda L, r: L.qr(r, mode="r"))],
    "np.matrix_power": [("", (A,), lambda L, a: L.matrix_power(a, 3))],
    "np.tensorsolve": [("", (A, B), lambda L, a, b: L.tensorsolve(a, b))],
    "np.tensorinv": [("", (A,), lambda L, a: L.tensorinv(a, 1))],
    "sp.lu_solve": [("", (A, PIV, B), lambda L, lu, p, b: L.lu_solve((lu, p), b))],
    "sp.cho_solve": [("", (A, B), lambda L, c, b: L.cho_solve((c, True), b))],
    "sp.solve_triangular": [("lower", (A, B), lambda L, a, b: L.solve_triangular(a, b,
                                                                                  lower=True)),
                            ("trans", (A, BM), lambda L, a, b: L.solve_triangular(a, b,
                                                                                  trans=1))],
    "sp.solve": [("", (A, B), lambda L, a, b: L.solve(a, b)),
                 ("pos", (A, B), lambda L, a, b: L.solve(a, b, assume_a="pos"))],
    "sp.eigh": [("", (A,), lambda L, a: L.eigh(a)),
                ("vals", (A,), lambda L, a: L.eigh(a, eigvals_only=True))],
    "sp.svd": [("", (R,), lambda L, r: L.svd(r))],
    "sp.qr": [("", (R,), lambda L, r: L.qr(r))],
    "sp.lu": [("", (A,), lambda L, a: L.lu(a))],
    "sp.expm": [("", (A,), lambda L, a: L.expm(a))],
    "sp.cholesky": [("", (A,), lambda L, a: L.cholesky(a))],
    "sp.cho_factor": [("", (A,), lambda L, a: L.cho_factor(a))],
    "sp.block_diag": [("", (A, R), lambda L, a, r: L.block_diag(a, r))],
    "sp.toeplitz": [("", (B,), lambda L, b: L.toeplitz(b))],
    "sp.hessenberg": [("", (A,), lambda L, a: L.hessenberg(a))],
    "sp.schur": [("", (A,), lambda L, a: L.schur(a))],
    "sp.rsf2csf": [("", (A, A), lambda L, t, z: L.rsf2csf(t, z))],
    "sp.polar": [("", (A,), lambda L, a: L.polar(a))],
    "sp.sqrtm": [("", (A,), lambda L, a: L.sqrtm(a))],
    "sp.funm": [("", (A,), lambda L, a: L.funm(a, lambda x: x * x))],
    "sp.expm_frechet": [("", (A, A), lambda L, a, e: L.expm_frechet(a, e))],
    "sp.eigh_tridiagonal": [("", (B, B[:2]), lambda L, d, e: L.eigh_tridiagonal(
        d, e, eigvals_only=True))],
    "sp.solve_sylvester": [("", (A, A, A), lambda L, a, b, c: L.solve_sylvester(a, b, c))],
}

NAMESPACES = {"np": (jax.numpy.linalg, jaxkit.numpy.linalg),
              "sp": (jax.scipy.linalg, jaxkit.scipy.linalg)}


def _text(J, L, operands, call) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return str(J.make_jaxpr(lambda *ops: call(L, *ops))(*operands))


def _cases(qualname, jax_ns):
    if qualname in CASES:
        return CASES[qualname]
    fun_name = qualname.split(".", 1)[1]
    for ops, call in GENERIC:
        generic = (lambda c, n: lambda L, *o: c(getattr(L, n), *o))(call, fun_name)
        try:
            _text(jax, jax_ns, ops, generic)
        except Exception:  # noqa: BLE001 - JAX refuses this argument list
            continue
        return [("", ops, generic)]
    return []


def sweep(names, verbose=False):
    same, differ, kerror, skipped = [], [], [], []
    for qualname in names:
        jax_ns, our_ns = NAMESPACES[qualname.split(".", 1)[0]]
        cases = _cases(qualname, jax_ns)
        if not cases:
            skipped.append(qualname)
            continue
        for label, ops, call in cases:
            case = f"{qualname}[{label}]" if label else qualname
            compare(case, lambda: _text(jax, jax_ns, ops, call),
                    lambda: _text(jaxkit, our_ns, ops, call), verbose,
                    (same, differ, kerror, skipped))
    report(same, differ, kerror, skipped)
    return same, differ, kerror, skipped


def main(argv):
    verbose = "-v" in argv
    names = [a for a in argv if not a.startswith("-")]
    if not names:
        for prefix, (jax_ns, our_ns) in NAMESPACES.items():
            names += sorted(f"{prefix}.{n}" for n in dir(jax_ns) if not n.startswith("_")
                            and callable(getattr(jax_ns, n))
                            and not isinstance(getattr(jax_ns, n), type)
                            and callable(getattr(our_ns, n, None)))
    sweep(names, verbose)


if __name__ == "__main__":
    main(sys.argv[1:])
