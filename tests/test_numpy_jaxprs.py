"""Jaxprs of jnp's structural functions print as JAX 0.10.2's: the same nested ``jit``
equations (``_flip``, ``_roll_static``, ``_take``...), the same primitives (``tile``,
``unstack``, ``split`` with JAX's ``np.int64`` sizes) and parameters, for int, float, bool,
complex and PRNG-key operands. JAX's text is made by the oracle at test time; ``make_jaxpr``
compiles nothing, so the table is cheap."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import jaxkit
import jaxkit.experimental
import jaxkit.numpy as knp
import jaxkit.scipy.linalg

jax = pytest.importorskip("jax")
jnp = jax.numpy
pytest.importorskip("jax.experimental")
pytest.importorskip("jax.scipy.linalg")

# Operand kinds: every record runs once per kind. "key" is a (2, 3) array of threefry keys,
# built by each library from the same seed.
KINDS = ("int32", "float32", "bool", "complex64", "key")


def _operand(J, kind: str, shape: tuple[int, ...]):
    if kind == "key":
        return J.random.split(J.random.key(0), int(np.prod(shape))).reshape(shape)
    return np.arange(int(np.prod(shape))).reshape(shape).astype(kind)


# (name, make(np_or_jnp) -> function of one operand, operand shape, kinds it runs for). The
# function closes over the static arguments, so only the operand is traced.
IDX = np.array([0, -1], np.int32)
RECORDS = [
    ("flip", lambda N: lambda x: N.flip(x), (2, 3), KINDS),
    ("flip_axis", lambda N: lambda x: N.flip(x, axis=-1), (2, 3), KINDS),
    ("flip_axes_list", lambda N: lambda x: N.flip(x, [0, 1]), (2, 3), KINDS),
    ("fliplr", lambda N: lambda x: N.fliplr(x), (2, 3), KINDS),
    ("flipud", lambda N: lambda x: N.flipud(x), (2, 3), KINDS),
    ("rot90", lambda N: lambda x: N.rot90(x), (2, 3), KINDS),
    ("rot90_k2", lambda N: lambda x: N.rot90(x, 2), (2, 3), KINDS),
    ("roll_flat", lambda N: lambda x: N.roll(x, 1), (2, 3), KINDS),
    ("roll_axis", lambda N: lambda x: N.roll(x, -1, axis=1), (2, 3), KINDS),
    ("roll_axes", lambda N: lambda x: N.roll(x, (1, 2), axis=(0, 1)), (2, 3), KINDS),
    ("roll_zero", lambda N: lambda x: N.roll(x, 0, axis=0), (2, 3), KINDS),
    ("roll_traced_shift", lambda N: lambda x: N.roll(x, N.sum(N.ones(2, "int32")), axis=1),
     (2, 3), KINDS),
    ("take_flat", lambda N: lambda x: N.take(x, IDX), (2, 3), KINDS),
    ("take_axis", lambda N: lambda x: N.take(x, IDX, axis=1), (2, 3), KINDS),
    ("take_scalar_index", lambda N: lambda x: N.take(x, 1), (2, 3), KINDS),
    ("take_clip", lambda N: lambda x: N.take(x, IDX, axis=0, mode="clip"), (2, 3), KINDS),
    ("take_unsigned", lambda N: lambda x: N.take(x, IDX.astype(np.uint32)), (2, 3),
     ("float32",)),
    ("take_along_axis_no_wrap", lambda N: lambda x: N.take_along_axis(
        x, np.array([[0, -1]] * 2, np.int8), axis=1, wrap_negative_indices=False), (2, 3), KINDS),
    ("atleast_1d", lambda N: lambda x: N.atleast_1d(x), (), KINDS),
    ("atleast_2d", lambda N: lambda x: N.atleast_2d(x), (3,), KINDS),
    ("atleast_3d", lambda N: lambda x: N.atleast_3d(x), (3,), KINDS),
    ("atleast_3d_2d", lambda N: lambda x: N.atleast_3d(x), (2, 3), KINDS),
    ("atleast_2d_many", lambda N: lambda x: N.atleast_2d(x, x[0]), (2, 3), KINDS),
    ("vstack", lambda N: lambda x: N.vstack([x, x]), (3,), KINDS),
    ("hstack", lambda N: lambda x: N.hstack((x, x)), (2, 3), KINDS),
    ("dstack", lambda N: lambda x: N.dstack([x, x]), (2, 3), KINDS),
    ("column_stack", lambda N: lambda x: N.column_stack([x, x]), (3,), KINDS),
    ("tile", lambda N: lambda x: N.tile(x, 2), (2, 3), KINDS),
    ("tile_more_reps", lambda N: lambda x: N.tile(x, (2, 1, 2)), (2, 3), KINDS),
    ("tile_scalar", lambda N: lambda x: N.tile(x, (3,)), (), KINDS),
    ("resize", lambda N: lambda x: N.resize(x, (3, 4)), (2, 3), KINDS),
    ("resize_same_size", lambda N: lambda x: N.resize(x, 6), (2, 3), KINDS),
    ("split", lambda N: lambda x: N.split(x, 3, axis=1), (2, 3), KINDS),
    ("split_indices", lambda N: lambda x: N.split(x, [1, 2]), (3,), KINDS),
    ("array_split", lambda N: lambda x: N.array_split(x, 2, axis=1), (2, 3), KINDS),
    ("hsplit", lambda N: lambda x: N.hsplit(x, [1]), (2, 3), KINDS),
    ("vsplit", lambda N: lambda x: N.vsplit(x, 2), (2, 3), KINDS),
    ("kron", lambda N: lambda x: N.kron(x, x), (2, 3), ("int32", "float32", "complex64")),
    ("vmap_tile", lambda N: lambda x: (jax if N is jnp else jaxkit).vmap(
        lambda r: N.tile(r, 3), in_axes=1)(x), (2, 3), KINDS),
    ("unstack", lambda N: lambda x: N.unstack(x, axis=1), (2, 3), KINDS),
    # Functions JAX wraps in a plain jit stage a jit[name=...] equation (aliases too: acosh
    # stages arccosh's), with JAX's bodies.
    ("acosh", lambda N: lambda x: N.acosh(x), (2, 3), ("float32",)),
    ("signbit_copysign", lambda N: lambda x: N.copysign(x, -x), (2, 3), ("float32",)),
    ("hypot", lambda N: lambda x: N.hypot(x, x[0]), (2, 3), ("float32",)),
    ("plain_jit_unary", lambda N: lambda x: (N.rint(x), N.trunc(x), N.isinf(x), N.sinc(x),
                                             N.modf(x)), (2, 3), ("float32",)),
    ("plain_jit_binary", lambda N: lambda x: (N.fmod(x, 2), N.heaviside(x, 0.5)), (2, 3),
     ("float32",)),
    ("bitwise_count", lambda N: lambda x: N.bitwise_count(x), (2, 3), ("int32",)),
    ("count_nonzero", lambda N: lambda x: N.count_nonzero(x, axis=1), (2, 3), KINDS[:4]),
    ("matvec", lambda N: lambda x: N.matvec(x, x[0]), (2, 3), ("float32", "complex64")),
    ("vecmat", lambda N: lambda x: N.vecmat(x[:, 0], x), (2, 3), ("float32", "complex64")),
    ("select", lambda N: lambda x: N.select([x > 1, x < 4], [x, -x], 1), (2, 3),
     ("int32", "float32")),
    ("nonzero_size", lambda N: lambda x: N.nonzero(x, size=4, fill_value=-1), (2, 3),
     KINDS[:4]),
    ("argwhere_size", lambda N: lambda x: N.argwhere(x, size=2), (2, 3), ("int32",)),
    ("trace", lambda N: lambda x: (N.trace(x), N.trace(x, 1)), (2, 3), KINDS[:4]),
    ("pad_constant", lambda N: lambda x: N.pad(x, ((1, 0), (0, 2)), constant_values=3),
     (2, 3), KINDS[:4]),
    ("pad_modes", lambda N: lambda x: [N.pad(x, 1, mode=m) for m in (
        "edge", "wrap", "reflect", "symmetric", "empty", "maximum", "mean", "linear_ramp")],
     (2, 3), ("float32",)),
    ("diff", lambda N: lambda x: (N.diff(x), N.diff(x, n=2, axis=0), N.diff(x, prepend=0)),
     (2, 3), ("int32", "float32", "bool")),
    ("cumulative_sum", lambda N: lambda x: N.cumulative_sum(x, axis=1, include_initial=True),
     (2, 3), ("int32", "float32", "bool")),
    ("meshgrid", lambda N: lambda x: (N.meshgrid(x[0], x[1, :2]),
                                      N.meshgrid(x[0], x[1], indexing="ij", sparse=True)),
     (2, 3), ("float32",)),
    ("stack_rows_of_array", lambda N: lambda x: (N.concatenate(x), N.hstack(x),
                                                 N.concatenate(x[None], axis=1)), (2, 3),
     KINDS[:4]),
    ("full_weak_fill", lambda N: lambda x: N.full((2,), 1.5) + x[0, :2], (2, 3), ("float32",)),
    ("around_fmin_ptp", lambda N: lambda x: (N.around(x, 1), N.fmin(x, x[0]), N.ptp(x, 1)),
     (2, 3), ("float32",)),
    ("isin", lambda N: lambda x: (N.isin(x, x[0, :2]), N.isin(x, x[1], invert=True)), (2, 3),
     ("int32", "float32")),
    ("partition", lambda N: lambda x: (N.partition(x, 1), N.partition(x, 0, axis=0)), (2, 3),
     ("int32", "float32")),
    ("choose", lambda N: lambda x: N.choose(np.array([[0, 2, 1], [1, 0, 3]]), [x, -x, x[0]],
                                            mode="clip"), (2, 3), ("int32", "float32")),
    ("block", lambda N: lambda x: N.block([[x, x[:, :1]], [x[:1], x[:1, :1]]]), (2, 3),
     KINDS[:4]),
    ("delete_static", lambda N: lambda x: (N.delete(x, 1, axis=1), N.delete(x, -1)), (2, 3),
     KINDS),
    ("indices", lambda N: lambda x: (N.indices((2, 3)), N.indices((2, 3), sparse=True)), (),
     ("int32",)),
    ("tri_indices", lambda N: lambda x: (N.tril_indices(3), N.triu_indices(3, 1, 4),
                                         N.tril_indices_from(x, -1)), (2, 3), ("float32",)),
    ("insert", lambda N: lambda x: (N.insert(x, 1, 5.0, axis=1), N.insert(x[0], IDX, x[1, :2])),
     (2, 3), ("int32", "float32")),
    ("trapezoid_vecdot_diagflat", lambda N: lambda x: (N.trapezoid(x), N.vecdot(x, x),
                                                       N.diagflat(x[0], 1)), (2, 3),
     ("float32", "complex64")),
    ("gcd", lambda N: lambda x: N.gcd(x, x[0]), (2, 3), ("int32",)),
    ("lcm", lambda N: lambda x: N.lcm(x, 3), (2, 3), ("int32",)),
    ("nanarg_cross_average", lambda N: lambda x: (
        N.nanargmax(x, 1), N.nanargmin(x), N.cross(x, x[::-1]),
        N.average(x, axis=1, weights=x[0])), (2, 3), ("float32",)),
    ("linspace", lambda N: lambda x: (N.linspace(x[0, 0], x[1], 4), N.linspace(0, 1, 3),
                                      N.logspace(0.0, x[0, 1], 3), N.geomspace(1.0, x[1], 2)),
     (2, 3), ("float32",)),
    # Searching and statistics (issue #22, jnpjx3): JAX's algorithms, nested jits and scans.
    ("searchsorted", lambda N: lambda x: (
        N.searchsorted(x[0], x), N.searchsorted(x[1], x[0], side="right", method="sort"),
        N.searchsorted(x[0], x[1, 0], method="scan_unrolled"),
        N.searchsorted(x[0], x, method="compare_all")), (2, 3),
     ("int32", "float32", "complex64")),
    ("digitize", lambda N: lambda x: (N.digitize(x, x[0]), N.digitize(x[1], x[0], right=True)),
     (2, 3), ("int32", "float32")),
    ("interp", lambda N: lambda x: (N.interp(x, x[0], x[1]), N.interp(
        x[0], x[1], x[0], left=-1.0, right="extrapolate"), N.interp(x[1], x[0], x[1], period=4)),
     (2, 3), ("int32", "float32")),
    ("histogram", lambda N: lambda x: (N.histogram(x, 3), N.histogram(
        x[0], 2, range=(0, 4), weights=x[1], density=True), N.histogram_bin_edges(x, 4)),
     (2, 3), ("int32", "float32")),
    ("histogramdd", lambda N: lambda x: (N.histogramdd(x.T, 2), N.histogram2d(
        x[0], x[1], [2, 3], weights=x[0], density=True)), (2, 3), ("float32",)),
    ("quantiles", lambda N: lambda x: (
        N.quantile(x, 0.5), N.percentile(x, np.array([10, 50]), axis=1, method="nearest"),
        N.median(x, axis=(0, 1), keepdims=True), N.quantile(x, 0.3, axis=1, weights=x[0],
                                                            method="inverted_cdf")),
     (2, 3), ("int32", "float32")),
    ("nanquantiles", lambda N: lambda x: (
        N.nanquantile(x, 0.5), N.nanpercentile(x, np.array([10, 50]), axis=1, keepdims=True),
        N.nanmedian(x, axis=0), N.nanquantile(x, 0.3, axis=1, method="inverted_cdf")),
     (2, 3), ("float32",)),
    ("nanvar_nanstd", lambda N: lambda x: (N.nanvar(x), N.nanstd(x, axis=1, ddof=1),
                                           N.nanvar(x, axis=0, keepdims=True, where=x != 1)),
     (2, 3), ("int32", "float32", "complex64")),
    ("lexsort_sort_complex", lambda N: lambda x: (N.lexsort(x), N.lexsort((x[0], x[1])),
                                                  N.sort_complex(x), N.argpartition(x, 1)),
     (2, 3), ("int32", "float32")),
    ("iterate_traced", lambda N: lambda x: tuple(x), (2, 3), KINDS),
    ("gradient_unwrap", lambda N: lambda x: (
        N.gradient(x), N.gradient(x, 2.0, axis=1), N.gradient(x[0], x[1]), N.unwrap(x),
        N.unwrap(x, discont=1.0, period=3, axis=0)), (2, 3), ("int32", "float32")),
]

# Set operations with size=, stacking rows of an array, arange, einsum's repeated labels,
# convolutions and polynomials, put/place/fill_diagonal, and the vmapped reductions and
# broadcasts inside them (np.int64 parameters, as JAX's batching rules make them).
RECORDS += [
    ("unique_size", lambda N: lambda x: (N.unique(x, size=3), N.unique(
        x, size=4, fill_value=-1, return_index=True, return_inverse=True,
        return_counts=True)), (6,), ("int32", "float32")),
    ("set_ops_size", lambda N: lambda x: (
        N.union1d(x, x[::-1], size=3), N.setdiff1d(x, x[:1], size=3),
        N.intersect1d(x, x[1:], size=2), N.setxor1d(x, x[:2], size=3)), (4,),
     ("int32", "float32")),
    ("intersect1d_indices", lambda N: lambda x: (
        N.intersect1d(x, x[1:], size=2, return_indices=True),
        N.intersect1d(x, x[1:], size=2, assume_unique=True, return_indices=True),
        N.setxor1d(x, x[:2], size=3, assume_unique=True)), (4,), ("float32",)),
    ("stack_rows_2d", lambda N: lambda x: (N.vstack(x), N.dstack(x), N.column_stack(x),
                                           N.concat(x)), (2, 3), KINDS[:4]),
    ("arange", lambda N: lambda x: (N.arange(0.0, 1.0, 0.25) + x[0], N.arange(2, 7),
                                    N.arange(5, step=2), N.arange(0, 3, 1, np.float16)), (2,),
     ("float32",)),
    ("einsum_repeated", lambda N: lambda x: (N.einsum("ii", x), N.einsum("ii->i", x),
                                             N.einsum("ii,ij->j", x, x)), (2, 2),
     ("int32", "float32")),
    ("convolve_correlate", lambda N: lambda x: (
        N.convolve(x, x[:2]), N.convolve(x[:2], x, mode="same"),
        N.correlate(x[:2], x, mode="full"), N.correlate(x, x, mode="valid")), (3,),
     ("float32", "complex64")),
    ("polynomials", lambda N: lambda x: (
        N.polyval(x, x), N.polyder(x), N.polyder(x, 2), N.poly(x), N.polymul(x, x[:2]),
        N.polydiv(x, x[:2])), (3,), ("float32",)),
    ("polyder_2d", lambda N: lambda x: N.polyder(x), (2, 3), ("float32",)),
    ("roots", lambda N: lambda x: (N.roots(3.0), N.roots(x, strip_zeros=False)), (3,),
     ("float32",)),
    ("put_place_fill_diagonal", lambda N: lambda x: (
        N.put(x, np.array([0, 4]), x[0, :1], inplace=False),
        N.put(x, np.array([-1]), 9, mode="wrap", inplace=False),
        N.place(x, x > 1, x[1], inplace=False),
        N.fill_diagonal(x, x[0, :2], inplace=False)), (2, 3), ("int32", "float32")),
    ("delete_index_array", lambda N: lambda x: (N.delete(x, np.array([0, 2]), axis=1),
                                                x[np.array([1, -1])]), (2, 3), KINDS[:4]),
    ("vmapped_reductions", lambda N: lambda x: (
        N.apply_along_axis(N.sum, 1, x), N.apply_along_axis(N.max, 0, x)), (2, 3),
     ("int32", "float32")),
    ("extract_compress_size", lambda N: lambda x: (
        N.extract(x > 1, x, size=2), N.compress(x[0] > 0, x, axis=1, size=1, fill_value=7)),
     (2, 3), ("int32", "float32")),
    ("frexp_ldexp_spacing_i0", lambda N: lambda x: (
        N.frexp(x), N.ldexp(x, np.array([1, -2, 3], np.int32)), N.spacing(x), N.i0(x)),
     (2, 3), ("float32",)),
    ("packbits", lambda N: lambda x: (N.packbits(x), N.packbits(x, axis=1, bitorder="little")),
     (2, 3), ("int32", "bool")),
]


def _text(J, N, make, shape, kind) -> str:
    try:
        return str(J.make_jaxpr(make(N))(_operand(J, kind, shape)))
    except Exception as e:  # noqa: BLE001 - the error class is compared with JAX's
        return f"error: {type(e).__name__}"


@pytest.mark.parametrize("name,make,shape,kinds", RECORDS, ids=[r[0] for r in RECORDS])
def test_jaxpr_text_matches_jax(name, make, shape, kinds):
    for kind in kinds:
        want = _text(jax, jnp, make, shape, kind)
        assert not want.startswith("error"), (kind, want)
        assert _text(jaxkit, knp, make, shape, kind) == want, kind


# Jaxprs of code beyond jnp's structural functions (issue 22): random samplers on typed and raw
# keys, jnp.linalg/jax.scipy.linalg factorizations and LU/Cholesky solves, vmap of a cond or
# switch whose index is batched (a select_n over all branches), and jnp.array of host data under
# a trace (a tracer, as JAX's). (name, make(J) -> (function, operands)); one make_jaxpr each.
SPD = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32)
VEC = np.array([1.0, 2.0, 3.0], np.float32)
PIV = np.array([2, 2, 2], np.int32)
PRED = np.array([True, False])
MAT = np.arange(6, dtype=np.float32).reshape(2, 3)


def _samplers(J, key):
    R = J.random
    return (R.randint(key, (3,), 0, 10), R.ball(key, 2), R.beta(key, 2.0, 3.0, (3,)),
            R.binomial(key, 5.0, 0.3, (3,)), R.choice(key, 5, (2,)),
            R.generalized_normal(key, 2.0, (3,)), R.multinomial(key, 4.0, VEC / VEC.sum()),
            R.multivariate_normal(key, VEC, SPD), R.orthogonal(key, 2), R.uniform(key))


def _cond_vmaps(J, p, x):
    L = J.lax
    return (J.vmap(lambda p, x: L.cond(p, lambda x: x * 2.0, lambda x: -x, x))(p, x),
            J.vmap(lambda p: L.cond(p, lambda x: J.numpy.sin(x), lambda x: x, x[0]))(p),
            J.vmap(lambda i, x: L.switch(i, [lambda x: x, lambda x: x + 1.0, lambda x: x * x],
                                         x))(p.astype(np.int32) * 2, x),
            J.vmap(lambda p, n: L.cond(p, lambda n: n + 1, lambda n: n * 2, n))(
                p, p.astype(np.int32)),
            J.vmap(lambda x: L.cond(True, lambda x: x, lambda x: -x, x))(x))


OTHER_RECORDS = [
    ("random_typed_key", lambda J: (lambda k: _samplers(J, k), (J.random.key(0),))),
    ("random_raw_key", lambda J: (lambda k: _samplers(J, k), (J.random.PRNGKey(0),))),
    ("numpy_linalg", lambda J: (lambda a, r: (
        J.numpy.linalg.cholesky(a), J.numpy.linalg.qr(r), J.numpy.linalg.eigh(a),
        J.numpy.linalg.svd(r), J.numpy.linalg.slogdet(a), J.numpy.linalg.det(a),
        J.numpy.linalg.matrix_power(a, 3), J.numpy.linalg.matrix_power(a, 5),
        J.numpy.linalg.matrix_rank(a), J.numpy.linalg.matrix_rank(r, 0.5)), (SPD, MAT))),
    ("scipy_linalg_solves", lambda J: (lambda a, p, b: (
        J.scipy.linalg.lu_solve((a, p), b), J.scipy.linalg.lu_solve((a, p), b, trans=1),
        J.scipy.linalg.cho_solve((a, True), b), J.scipy.linalg.cho_solve((a, False), b),
        J.scipy.linalg.cho_factor(a), J.scipy.linalg.cholesky(a, lower=True),
        J.scipy.linalg.solve_triangular(a, b, lower=True), J.scipy.linalg.pascal(3)),
        (SPD, PIV, VEC))),
    ("vmap_cond_batched_index", lambda J: (lambda p, x: _cond_vmaps(J, p, x), (PRED, MAT))),
    ("piecewise", lambda J: (lambda x: J.numpy.piecewise(x, [x < 2], [0.0, lambda v: -v]),
                             (VEC,))),
    ("array_of_host_data_traced", lambda J: (lambda x: (
        x + J.numpy.asarray(3.0), x * J.numpy.array(2), J.numpy.array([1.0, 2.0, 3.0]) * x,
        J.numpy.asarray(np.float32(2)) * x, J.numpy.asarray(VEC) + x,
        J.numpy.asarray(3.0, dtype=np.int32)), (VEC,))),
]


@pytest.mark.parametrize("name,make", OTHER_RECORDS, ids=[r[0] for r in OTHER_RECORDS])
def test_other_jaxprs_match_jax(name, make):
    fun, args = make(jax)
    want = str(jax.make_jaxpr(fun)(*args))
    fun, args = make(jaxkit)
    assert str(jaxkit.make_jaxpr(fun)(*args)) == want


def test_array_of_host_data_under_traces_as_jax():
    """jnp.array/asarray of host data: a tracer under jit (JAX's ends with a conversion bound on
    the current trace), a concrete array eagerly, under ensure_compile_time_eval and under vmap
    of eager code."""
    def kinds(J):
        seen = []

        def note(x):
            seen.append(isinstance(x, J.core.Tracer))
            return x
        J.jit(lambda y: note(J.numpy.asarray(3.0)) + note(J.numpy.array(VEC)) + y)(1.0)
        note(J.numpy.asarray(3.0))
        with J.ensure_compile_time_eval():
            note(J.numpy.asarray(3.0))
        J.vmap(lambda y: note(J.numpy.array(2.0)) * y)(VEC)
        return seen
    assert kinds(jaxkit) == kinds(jax) == [True, True, False, False, False]


def test_vmap_of_cond_with_io_effect_refused_as_jax():
    """A batched index runs every branch: JAX refuses branches with an IO effect (for any
    index), with NotImplementedError."""
    def f(J):
        def branch(x):
            J.experimental.io_callback(lambda v: None, None, x)
            return x
        return J.vmap(lambda p, x: J.lax.cond(p, branch, lambda x: -x, x))
    with pytest.raises(NotImplementedError) as want:
        jax.make_jaxpr(f(jax))(PRED, MAT)
    with pytest.raises(NotImplementedError) as got:
        jaxkit.make_jaxpr(f(jaxkit))(PRED, MAT)
    assert str(got.value) == str(want.value)


def test_linalg_values_match_jax_bitwise():
    """matrix_power multiplies in JAX's order and slogdet follows JAX's LU algorithm: the same
    bits (one eager call each)."""
    for f in (lambda N: N.linalg.matrix_power(SPD, 3), lambda N: N.linalg.slogdet(SPD),
              lambda N: N.linalg.matrix_power(SPD, 0)):
        for w, g in zip(jax.tree.leaves(f(jnp)), jaxkit.tree.leaves(f(knp))):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_split_sizes_errors_match_jax():
    """A decreasing or out-of-range index gives lax.split's error, as JAX's (NumPy would
    count from the end or give an empty piece)."""
    for idx in ([-2], [3, 1], [1, 10]):
        with pytest.raises(ValueError) as want:
            jnp.split(jnp.arange(5), idx)
        with pytest.raises(ValueError) as got:
            knp.split(knp.arange(5), idx)
        assert str(got.value) == str(want.value)
    with pytest.raises(TypeError, match="take requires ndarray or scalar arguments"):
        knp.take(np.ones(3), [0, 1])


def test_values_match_jax():
    """The new jitted bodies compute what JAX's do, eagerly (test_numpy_shape's and
    test_numpy_indexing's tables check the other cases' values)."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for f in (lambda N: N.roll(x, N.asarray(4), axis=1),
              lambda N: N.take(x, np.array([5, 7]), mode="wrap"),
              lambda N: N.tile(x, (2, 1, 2)), lambda N: N.split(x, [1, 2], axis=1)):
        want = f(jnp)
        got = f(knp)
        for w, g in zip(jax.tree.leaves(want), jaxkit.tree.leaves(got)):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


# jnp functions whose parameters still differ from JAX 0.10.2's, and why. Everything else that
# both libraries have must take the same parameters, named and kinded alike.
SIGNATURE_EXCEPTIONS = {
    # JAX's own signature is an opaque ``(*args, **kwargs)`` wrapper: nothing to compare.
    "fromiter": "JAX's is (*args, **kwargs)",
    "set_printoptions": "JAX's is (*args, **kwargs)",
}


def _params(fun) -> list[tuple[str, str]] | None:
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return None
    return [(p.name, p.kind.name) for p in sig.parameters.values()]


def test_signatures_match_jax():
    """A signature sweep: every public jax.numpy callable jaxkit has takes JAX's parameters."""
    differ = []
    for name in sorted(n for n in dir(jnp) if not n.startswith("_")):
        want_fun, got_fun = getattr(jnp, name), getattr(knp, name, None)
        if got_fun is None or not callable(want_fun) or isinstance(want_fun, type):
            continue
        want = _params(want_fun)
        if want is not None and _params(got_fun) != want:
            differ.append(name)
    assert sorted(set(differ) - set(SIGNATURE_EXCEPTIONS)) == []
    # An exception that no longer differs is removed from the list.
    assert sorted(set(SIGNATURE_EXCEPTIONS) - set(differ)) == []


def test_kron_refuses_booleans_as_jax():
    """JAX's kron multiplies with lax.mul, which takes no booleans."""
    a = np.ones((2, 2), bool)
    with pytest.raises(TypeError) as want:
        jnp.kron(a, a)
    with pytest.raises(TypeError) as got:
        knp.kron(a, a)
    assert str(got.value) == str(want.value)
