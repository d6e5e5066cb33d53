"""Sweep: does ``make_jaxpr(jnp.F)`` print the same jaxpr in jaxkit as in JAX 0.10.2?

    python bench/jnp_jaxpr_sweep.py [-v] [NAME ...]

For every public callable that ``jax.numpy`` and ``jaxkit.numpy`` share, traces one small
standard call in each library and compares the printed jaxprs after renaming variables in
order of first appearance (so only the equations, primitives and parameters count). The call
is an explicit case below where the function needs particular arguments, otherwise the first
of the generic argument lists (``x``, ``x, x``, ``v``...) that JAX accepts. Prints the names
that differ (``-v``: with both texts) and, last, the counts: same / different / jaxkit error /
not traceable in JAX (skipped). With names, sweeps only those.
"""
from __future__ import annotations

import re
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import jaxkit
import jaxkit.numpy as knp

X = np.arange(6, dtype=np.float32).reshape(2, 3)  # the generic array operand
V = np.array([3.0, 1.0, 2.0], np.float32)  # the generic vector operand
IX = np.array([[1, 0, 2], [2, 1, 0]], np.int32)
SQ = np.array([[2.0, 1.0], [1.0, 3.0]], np.float32)
B = np.array([[True, False, True], [False, True, True]])

# Generic calls, tried in order: (traced operands, function of the namespace and operands).
GENERIC = [
    ((X,), lambda N, f, x: f(x)),
    ((X, X), lambda N, f, x, y: f(x, y)),
    ((V,), lambda N, f, v: f(v)),
    ((V, V), lambda N, f, v, w: f(v, w)),
    ((X, X, X), lambda N, f, x, y, z: f(x, y, z)),
    ((IX,), lambda N, f, i: f(i)),
    ((IX, IX), lambda N, f, i, j: f(i, j)),
    ((SQ,), lambda N, f, s: f(s)),
    ((), lambda N, f: f(3)),
    ((), lambda N, f: f((2, 3))),
]

# Explicit cases: name -> list of (label, traced operands, function of (N, *operands)).
CASES = {
    "where": [("3arg", (B, X, X), lambda N, c, x, y: N.where(c, x, y)),
              ("scalar", (B, X), lambda N, c, x: N.where(c, x, 0.0)),
              ("size", (B,), lambda N, c: N.where(c, size=3))],
    "select": [("", (B, X), lambda N, c, x: N.select([c, ~c], [x, -x], 1.0))],
    "pad": [("constant", (X,), lambda N, x: N.pad(x, 1)),
            ("constant_value", (X,), lambda N, x: N.pad(x, ((1, 0), (0, 2)), constant_values=3)),
            ("edge", (X,), lambda N, x: N.pad(x, 1, mode="edge")),
            ("reflect", (X,), lambda N, x: N.pad(x, 1, mode="reflect")),
            ("symmetric", (X,), lambda N, x: N.pad(x, 1, mode="symmetric")),
            ("wrap", (X,), lambda N, x: N.pad(x, 1, mode="wrap")),
            ("linear_ramp", (X,), lambda N, x: N.pad(x, 1, mode="linear_ramp")),
            ("maximum", (X,), lambda N, x: N.pad(x, 1, mode="maximum")),
            ("mean", (X,), lambda N, x: N.pad(x, 1, mode="mean")),
            ("empty", (X,), lambda N, x: N.pad(x, 1, mode="empty"))],
    "trace": [("", (X,), lambda N, x: N.trace(x)),
              ("offset", (X,), lambda N, x: N.trace(x, 1))],
    "searchsorted": [("", (V, X), lambda N, v, x: N.searchsorted(N.sort(v), x)),
                     ("right", (V, X), lambda N, v, x: N.searchsorted(v, x, side="right")),
                     ("compare_all", (V, X), lambda N, v, x: N.searchsorted(
                         v, x, method="compare_all")),
                     ("sort", (V, X), lambda N, v, x: N.searchsorted(v, x, method="sort"))],
    "insert": [("", (V,), lambda N, v: N.insert(v, 1, 5.0)),
               ("axis", (X,), lambda N, x: N.insert(x, 1, 5.0, axis=1)),
               ("many", (V,), lambda N, v: N.insert(v, np.array([0, 2]), 5.0))],
    "delete": [("", (V,), lambda N, v: N.delete(v, 1)),
               ("axis", (X,), lambda N, x: N.delete(x, 1, axis=1)),
               ("array", (V,), lambda N, v: N.delete(v, np.array([0, 2]))),
               ("slice", (X,), lambda N, x: N.delete(x, slice(0, 2), axis=1))],
    "partition": [("", (X,), lambda N, x: N.partition(x, 1))],
    "argpartition": [("", (X,), lambda N, x: N.argpartition(x, 1))],
    "choose": [("", (IX, X), lambda N, i, x: N.choose(
        N.clip(i, 0, 1), [x, -x])),
               ("clip", (IX, X), lambda N, i, x: N.choose(i, [x, -x, x], mode="clip"))],
    "block": [("", (X,), lambda N, x: N.block([[x, x], [x, x]])),
              ("1d", (V,), lambda N, v: N.block([v, v]))],
    "diff": [("", (X,), lambda N, x: N.diff(x)),
             ("n2", (X,), lambda N, x: N.diff(x, n=2, axis=0)),
             ("prepend", (X,), lambda N, x: N.diff(x, prepend=0.0))],
    "ediff1d": [("", (V,), lambda N, v: N.ediff1d(v, to_begin=1.0))],
    "cumsum": [("", (X,), lambda N, x: N.cumsum(x)),
               ("axis", (X,), lambda N, x: N.cumsum(x, axis=1)),
               ("int", (IX,), lambda N, i: N.cumsum(i, axis=0))],
    "cumprod": [("", (X,), lambda N, x: N.cumprod(x, axis=1))],
    "cumulative_sum": [("", (X,), lambda N, x: N.cumulative_sum(x, axis=1)),
                       ("initial", (X,), lambda N, x: N.cumulative_sum(
                           x, axis=1, include_initial=True))],
    "cumulative_prod": [("", (X,), lambda N, x: N.cumulative_prod(x, axis=1))],
    "nancumsum": [("", (X,), lambda N, x: N.nancumsum(x, axis=1))],
    "nancumprod": [("", (X,), lambda N, x: N.nancumprod(x, axis=1))],
    "histogram": [("", (V,), lambda N, v: N.histogram(v, bins=3)),
                  ("range", (V,), lambda N, v: N.histogram(v, bins=3, range=(0.0, 4.0)))],
    "histogram_bin_edges": [("", (V,), lambda N, v: N.histogram_bin_edges(v, bins=3))],
    "histogram2d": [("", (V,), lambda N, v: N.histogram2d(v, v, bins=2))],
    "histogramdd": [("", (X,), lambda N, x: N.histogramdd(x.T, bins=2))],
    "bincount": [("", (), lambda N: N.bincount(np.array([0, 1, 1, 3]), length=4))],
    "digitize": [("", (X, V), lambda N, x, v: N.digitize(x, N.sort(v)))],
    "linspace": [("", (), lambda N: N.linspace(0.0, 1.0, 5)),
                 ("traced", (V,), lambda N, v: N.linspace(v[0], v[1], 4)),
                 ("noend", (), lambda N: N.linspace(0, 1, 5, endpoint=False))],
    "logspace": [("", (), lambda N: N.logspace(0.0, 2.0, 3))],
    "geomspace": [("", (), lambda N: N.geomspace(1.0, 100.0, 3))],
    "meshgrid": [("", (V,), lambda N, v: N.meshgrid(v, v[:2])),
                 ("ij", (V,), lambda N, v: N.meshgrid(v, v[:2], indexing="ij"))],
    "triu": [("", (X,), lambda N, x: N.triu(x)), ("k", (X,), lambda N, x: N.triu(x, 1))],
    "tril": [("", (X,), lambda N, x: N.tril(x)), ("k", (X,), lambda N, x: N.tril(x, -1))],
    "einsum": [("matmul", (X,), lambda N, x: N.einsum("ij,kj->ik", x, x)),
               ("trace", (SQ,), lambda N, s: N.einsum("ii", s)),
               ("three", (X, SQ), lambda N, x, s: N.einsum("ij,ik,kl->jl", x, x, s)),
               ("outer", (V,), lambda N, v: N.einsum("i,j->ij", v, v))],
    "clip": [("", (X,), lambda N, x: N.clip(x, 1, 4))],
    "round": [("", (X,), lambda N, x: N.round(x, 1))],
    "repeat": [("", (X,), lambda N, x: N.repeat(x, 2, axis=1))],
    "concatenate": [("", (X,), lambda N, x: N.concatenate([x, x], axis=1))],
    "stack": [("", (X,), lambda N, x: N.stack([x, x]))],
    "reshape": [("", (X,), lambda N, x: N.reshape(x, (3, 2)))],
    "transpose": [("", (X,), lambda N, x: N.transpose(x))],
    "moveaxis": [("", (X,), lambda N, x: N.moveaxis(x, 0, 1))],
    "swapaxes": [("", (X,), lambda N, x: N.swapaxes(x, 0, 1))],
    "expand_dims": [("", (X,), lambda N, x: N.expand_dims(x, 1))],
    "squeeze": [("", (X,), lambda N, x: N.squeeze(x[:1]))],
    "broadcast_to": [("", (V,), lambda N, v: N.broadcast_to(v, (2, 3)))],
    "tensordot": [("", (X,), lambda N, x: N.tensordot(x, x.T, 1))],
    "argsort": [("", (X,), lambda N, x: N.argsort(x))],
    "sort": [("", (X,), lambda N, x: N.sort(x, axis=0))],
    "lexsort": [("", (X,), lambda N, x: N.lexsort(x))],
    "unique": [("size", (V,), lambda N, v: N.unique(v, size=3))],
    "nonzero": [("size", (X,), lambda N, x: N.nonzero(x, size=3))],
    "argwhere": [("size", (X,), lambda N, x: N.argwhere(x, size=3))],
    "flatnonzero": [("size", (X,), lambda N, x: N.flatnonzero(x, size=3))],
    "percentile": [("", (X,), lambda N, x: N.percentile(x, 50))],
    "quantile": [("", (X,), lambda N, x: N.quantile(x, 0.5))],
    "nanpercentile": [("", (X,), lambda N, x: N.nanpercentile(x, 50))],
    "nanquantile": [("", (X,), lambda N, x: N.nanquantile(x, 0.5))],
    "median": [("", (X,), lambda N, x: N.median(x))],
    "average": [("weights", (X,), lambda N, x: N.average(x, axis=1, weights=x[0]))],
    "interp": [("", (V,), lambda N, v: N.interp(v, N.array([0.0, 2.0, 4.0]), v))],
    "convolve": [("", (V,), lambda N, v: N.convolve(v, v))],
    "correlate": [("", (V,), lambda N, v: N.correlate(v, v))],
    "polyval": [("", (V,), lambda N, v: N.polyval(v, v))],
    "eye": [("", (), lambda N: N.eye(3)), ("k", (), lambda N: N.eye(2, 3, k=1))],
    "tri": [("", (), lambda N: N.tri(3))],
    "identity": [("", (), lambda N: N.identity(2))],
    "arange": [("", (), lambda N: N.arange(5)), ("float", (), lambda N: N.arange(0.0, 1.0, 0.25))],
    "full": [("", (), lambda N: N.full((2, 3), 1.5))],
    "indices": [("", (), lambda N: N.indices((2, 3)))],
    "diag": [("", (V,), lambda N, v: N.diag(v)), ("2d", (X,), lambda N, x: N.diag(x))],
    "diagonal": [("", (X,), lambda N, x: N.diagonal(x))],
    "diagflat": [("", (V,), lambda N, v: N.diagflat(v))],
    "fill_diagonal": [("", (SQ,), lambda N, s: N.fill_diagonal(s, 0.0, inplace=False))],
    "vander": [("", (V,), lambda N, v: N.vander(v))],
    "outer": [("", (V,), lambda N, v: N.outer(v, v))],
    "cross": [("", (V,), lambda N, v: N.cross(v, v))],
    "put": [("", (V,), lambda N, v: N.put(v, np.array([0]), 1.0, inplace=False))],
    "place": [("", (V,), lambda N, v: N.place(v, v > 1, 0.0, inplace=False))],
    "piecewise": [("", (V,), lambda N, v: N.piecewise(v, [v < 2], [lambda t: -t, 0.0]))],
    "apply_along_axis": [("", (X,), lambda N, x: N.apply_along_axis(N.sum, 1, x))],
    "apply_over_axes": [("", (X,), lambda N, x: N.apply_over_axes(N.sum, x, [0]))],
    "gradient": [("", (X,), lambda N, x: N.gradient(x))],
    "trapezoid": [("", (V,), lambda N, v: N.trapezoid(v))],
    "compress": [("", (V,), lambda N, v: N.compress(np.array([True, False, True]), v))],
    "extract": [("size", (V,), lambda N, v: N.extract(v > 1, v, size=2))],
    "count_nonzero": [("", (X,), lambda N, x: N.count_nonzero(x))],
    "array_equal": [("", (X,), lambda N, x: N.array_equal(x, x))],
    "allclose": [("", (X,), lambda N, x: N.allclose(x, x))],
    "isclose": [("", (X,), lambda N, x: N.isclose(x, x))],
    "ravel_multi_index": [("", (), lambda N: N.ravel_multi_index(
        (N.array([0, 1]), N.array([2, 0])), (2, 3)))],
    "unravel_index": [("", (), lambda N: N.unravel_index(N.array([1, 4]), (2, 3)))],
    "take_along_axis": [("", (X, IX), lambda N, x, i: N.take_along_axis(x, i, axis=1))],
    "matrix_transpose": [("", (X,), lambda N, x: N.matrix_transpose(x))],
    "astype": [("", (X,), lambda N, x: N.astype(x, np.int32))],
    "nan_to_num": [("", (X,), lambda N, x: N.nan_to_num(x))],
    "angle": [("", (X,), lambda N, x: N.angle(x))],
    "unwrap": [("", (V,), lambda N, v: N.unwrap(v))],
    "rollaxis": [("", (X,), lambda N, x: N.rollaxis(x, 1))],
    "tril_indices_from": [("", (SQ,), lambda N, s: N.tril_indices_from(s))],
    "triu_indices_from": [("", (SQ,), lambda N, s: N.triu_indices_from(s))],
    "tril_indices": [("", (), lambda N: N.tril_indices(3))],
    "triu_indices": [("", (), lambda N: N.triu_indices(3))],
    "diag_indices": [("", (), lambda N: N.diag_indices(3))],
    "mask_indices": [("", (), lambda N: N.mask_indices(3, N.triu))],
    "frombuffer": [],
    "fromfunction": [("", (), lambda N: N.fromfunction(lambda i, j: i + j, (2, 3)))],
    "setdiff1d": [("size", (V,), lambda N, v: N.setdiff1d(v, v[:1], size=3))],
    "union1d": [("size", (V,), lambda N, v: N.union1d(v, v, size=3))],
    "intersect1d": [("size", (V,), lambda N, v: N.intersect1d(v, v, size=3))],
    "setxor1d": [("size", (V,), lambda N, v: N.setxor1d(v, v, size=3))],
    "isin": [("", (V,), lambda N, v: N.isin(v, v[:2]))],
    "in1d": [],
    "trim_zeros": [],
    "cov": [("", (X,), lambda N, x: N.cov(x))],
    "corrcoef": [("", (X,), lambda N, x: N.corrcoef(x))],
    "var": [("", (X,), lambda N, x: N.var(x, axis=1))],
    "std": [("", (X,), lambda N, x: N.std(x, axis=1))],
    "ptp": [("", (X,), lambda N, x: N.ptp(x, axis=1))],
}


def _normalise(text: str) -> str:
    """Renames variables (``a``, ``bt``...) in order of first appearance, so two jaxprs that
    differ only in how they name variables compare equal. A variable is a name bound as
    ``name:type``; its uses are the same word not followed by ``[`` or ``=``."""
    binders = set(re.findall(r"\b([a-z]+):", text))

    def block(part: str) -> str:
        names: dict[str, str] = {}

        def rename(m):
            word = m.group(0)
            if word not in binders:
                return word
            return names.setdefault(word, f"v{len(names)}")

        return re.sub(r"(?<![\w.'\"])[a-z]+\b(?![\[=])", rename, part)

    # Each shared ``let name = {...} in`` jaxpr and the main one are renamed on their own (JAX
    # names variables afresh across them, jaxkit reuses the names of the first use).
    parts = re.split(r"(?m)^(?=let \w+ = \{|\{ lambda)", text)
    return "".join(block(p) for p in parts)


def _text(J, N, name, operands, call) -> str:
    fun = getattr(N, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return str(J.make_jaxpr(lambda *ops: call(N, *ops) if name in CASES
                                else call(N, fun, *ops))(*operands))


def _cases(name):
    if name in CASES:
        return [(label, ops, call) for label, ops, call in CASES[name]]
    return None


def compare(case, want_text, got_text, verbose, tally) -> None:
    """Record ``case`` in ``tally`` (same, differ, kerror, skipped): JAX's text first (a case
    JAX cannot trace with these arguments is skipped), then jaxkit's (an error is reported)."""
    same, differ, kerror, skipped = tally
    try:
        want = want_text()
    except Exception:  # noqa: BLE001 - not traceable in JAX with these arguments
        skipped.append(case)
        return
    try:
        got = got_text()
    except Exception as e:  # noqa: BLE001 - reported as a jaxkit error
        kerror.append(case)
        print(f"ERROR {case}: {type(e).__name__}: {str(e)[:200]}")
        return
    if _normalise(want) == _normalise(got):
        same.append(case)
        return
    differ.append(case)
    print(f"DIFF  {case}")
    if verbose:
        print("  jax:\n    " + want.replace("\n", "\n    "))
        print("  jaxkit:\n    " + got.replace("\n", "\n    "))


def report(same, differ, kerror, skipped) -> None:
    print(f"same {len(same)} / different {len(differ)} / jaxkit error {len(kerror)} / "
          f"skipped {len(skipped)} (cases {len(same) + len(differ) + len(kerror)})")


def sweep(names, verbose=False):
    same, differ, kerror, skipped = [], [], [], []
    for name in names:
        cases = _cases(name)
        if cases is None:
            # The first generic call JAX traces.
            for ops, call in GENERIC:
                try:
                    _text(jax, jnp, name, ops, call)
                except Exception:  # noqa: BLE001 - JAX refuses this argument list
                    continue
                cases = [("", ops, call)]
                break
            else:
                skipped.append(name)
                continue
        for label, ops, call in cases:
            case = f"{name}[{label}]" if label else name
            compare(case, lambda: _text(jax, jnp, name, ops, call),
                    lambda: _text(jaxkit, knp, name, ops, call), verbose,
                    (same, differ, kerror, skipped))
    report(same, differ, kerror, skipped)
    return same, differ, kerror, skipped


def main(argv):
    verbose = "-v" in argv
    names = [a for a in argv if not a.startswith("-")]
    if not names:
        names = sorted(n for n in dir(jnp) if not n.startswith("_")
                       and callable(getattr(jnp, n)) and not isinstance(getattr(jnp, n), type)
                       and callable(getattr(knp, n, None)))
    sweep(names, verbose)


if __name__ == "__main__":
    main(sys.argv[1:])
