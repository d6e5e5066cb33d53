"""Derivatives of every differentiable lax primitive against finite differences (forward and
reverse mode, to second order, through ``gradcheck.check_grads``), and the coverage of the AD
rule tables.

``ROWS`` is the table: one row per call, each naming the primitives it exercises. Two
coverage tests keep it honest: every primitive reachable in ``jaxkit.lax`` must have a JVP rule
(and a transpose rule if it is linear) unless it is in ``EXEMPT`` with a reason, and every
primitive with a nonzero derivative must be exercised by some row.
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from _max_dtype import max_dtype
from gradcheck import check_grads, check_jvp

import jaxkit
from jaxkit.sharding import AxisType, NamedSharding, PartitionSpec
import jaxkit.numpy as jnp
from jaxkit import core, dtypes, lax
from jaxkit.api import grad, jvp
from jaxkit.transforms.vmap import vmap
from jaxkit.interpreters import ad
from jaxkit.lax import parallel as lax_parallel
from jaxkit.runtime import multi_device

F32, C64 = np.float32, np.complex64
_rng = np.random.RandomState(0)


def _u(lo, hi, shape=(3,), dtype=F32):
    return np.asarray(_rng.uniform(lo, hi, size=shape)).astype(dtype)


X = _u(-0.9, 0.9)             # general, in (-1, 1)
P = _u(0.5, 2.0)              # positive
P2 = _u(0.5, 2.0)
# A one-device mesh whose axis is Explicit (types carry layouts over it), and the same axis
# Auto, for the layout primitives' rows.
_EXPLICIT1 = jaxkit.make_mesh((1,), ("x",), (AxisType.Explicit,), devices=jaxkit.devices()[:1])
_MANUAL2 = jaxkit.make_mesh((2,), ("i",), axis_types=(AxisType.Auto,),
                            devices=multi_device.add_cpu_backend("spmd8", 8).devices[:2])
P_X = PartitionSpec("x")
G = _u(1.2, 3.0)              # > 1
M = _u(-1.0, 1.0, (2, 3))
M2 = _u(-1.0, 1.0, (3, 2))
Z = (_u(-1, 1) + 1j * _u(-1, 1)).astype(C64)
# ragged_all_to_all tables for an axis of size 2 (JAX's docstring example), one per index
_RAGGED_TABLES = tuple(np.array(t, np.int32) for t in (
    [[0, 1], [0, 1]], [[1, 2], [1, 1]], [[0, 0], [1, 2]], [[1, 1], [2, 1]]))
DISTINCT = np.array([0.3, -1.1, 0.8, 2.0], F32)  # no ties for max/min/sort
IDX = np.array([[2], [0]], np.int32)
# Pooling inputs from a generator of their own, so the other rows keep their values.
_pool_rng = np.random.RandomState(7)
POOL = _pool_rng.permutation(12).astype(F32).reshape(3, 4)  # distinct: no ties in a window
POOL_SRC = _pool_rng.uniform(-1, 1, (3, 2)).astype(F32)
M34 = _pool_rng.uniform(-1, 1, (3, 4)).astype(F32)


@dataclasses.dataclass
class Row:
    name: str
    fn: Callable
    args: tuple
    order: int = 2
    modes: Sequence[str] = ("fwd", "rev")
    tol: float | None = None
    eps: float | None = None

    def __str__(self):
        return self.name


def unary(name: str, arg=X, **kw) -> Row:
    return Row(name, lambda x: getattr(lax, name)(x), (arg,), **kw)


def binary(name: str, a=X, b=P, **kw) -> Row:
    return Row(name, lambda x, y: getattr(lax, name)(x, y), (a, b), **kw)


_MM = (((1,), (0,)), ((), ()))
_GDN = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                  start_index_map=(0,))
_SDN = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                   scatter_dims_to_operand_dims=(0,))
OP43 = _u(-1, 1, (4, 3))
SPD3 = (lambda b: (b @ b.T + 3 * np.eye(3)).astype(F32))(_u(-1, 1, (3, 3)))
TRI3 = (np.tril(_u(-1, 1, (3, 3))) + 3 * np.eye(3)).astype(F32)
WELL3 = (_u(-1, 1, (3, 3)) + 3 * np.eye(3)).astype(F32)
UPD = _u(-1, 1, (2, 3))

ROWS = [
    # arithmetic
    binary("add"), binary("sub"), binary("mul"), binary("div", X, P),
    binary("max", DISTINCT, DISTINCT[::-1].copy()), binary("min", DISTINCT,
                                                            DISTINCT[::-1].copy()),
    binary("rem", _u(2.1, 2.9), _u(0.6, 0.9)),
    binary("atan2", X, P), binary("pow", P, X),
    Row("neg", lax.neg, (X,)),
    Row("integer_pow", lambda x: lax.integer_pow(x, 3), (X,)),
    Row("integer_pow_neg", lambda x: lax.integer_pow(x, -2), (P,)),
    unary("square"), unary("reciprocal", P), unary("abs", DISTINCT),
    unary("sign", DISTINCT), unary("floor", _u(0.2, 0.8)), unary("ceil", _u(0.2, 0.8)),
    unary("round", _u(0.1, 0.4)),
    Row("clamp", lambda x: lax.clamp(F32(-0.5), x, F32(0.5)),
        (np.array([-0.9, 0.1, 0.3, 0.8], F32),)),
    Row("select_n", lambda a, b: lax.select_n(np.array([True, False, True]),
                                                             a, b), (X, P)),
    Row("copy", lax.copy, (X,)),
    # a layout constraint is the identity on values (a one-device mesh keeps it cheap here;
    # its axis Auto, since with_sharding_constraint refuses Explicit ones, as JAX does)
    Row("sharding_constraint", lambda x: lax.with_sharding_constraint(
        x * x, NamedSharding(jaxkit.make_mesh((1,), ("x",), (AxisType.Auto,),
                                              devices=jaxkit.devices()[:1]),
                             PartitionSpec("x"))), (X,)),
    # reshard (types a layout over an Explicit axis; auto_axes reshards into the same axis
    # made Auto and back): identities on values
    Row("reshard", lambda x: jaxkit.sharding.reshard(x * x, NamedSharding(_EXPLICIT1, P_X)),
        (X,)),
    Row("auto_axes", lambda x: jaxkit.sharding.auto_axes(
        lambda u: u * u, out_sharding=NamedSharding(_EXPLICIT1, P_X))(
        jaxkit.sharding.reshard(x, NamedSharding(_EXPLICIT1, P_X))), (X,)),
    # transcendental
    unary("exp"), unary("exp2"), unary("log", P), unary("expm1"), unary("log1p", P),
    unary("tanh"), unary("logistic"), unary("sin"), unary("cos"), unary("tan"),
    unary("asin"), unary("acos"), unary("atan"), unary("sinh"), unary("cosh"),
    unary("asinh"), unary("acosh", G), unary("atanh"), unary("sqrt", P), unary("rsqrt", P),
    unary("cbrt", P),
    # special functions
    unary("erf"), unary("erfc"), unary("erf_inv", _u(-0.7, 0.7)), unary("lgamma", P),
    unary("digamma", P, tol=1e-2), unary("bessel_i0e"), unary("bessel_i1e"),
    Row("igamma", lambda a, x: lax.igamma(a, x), (P, P2), order=1, tol=2e-2),
    Row("igammac", lambda a, x: lax.igammac(a, x), (P, P2), order=1, tol=2e-2),
    Row("igamma_x", lambda x: lax.igamma(P, x), (P2,)),
    Row("regularized_incomplete_beta", lambda x: lax.betainc(P, P2, x), (_u(0.1, 0.9),),
        tol=2e-2),
    Row("polygamma", lambda x: lax.polygamma(np.full(3, 1.0, F32), x),
        (P + 0.5,), order=1, tol=1e-2),
    # forward mode only: it runs a while loop, and JAX cannot reverse-differentiate it either
    Row("random_gamma_grad", lambda x: lax.random_gamma_grad(P + 1, x), (P2,), order=1, tol=2e-2,
        modes=("fwd",)),
    # complex
    Row("real", lax.real, (Z,)), Row("imag", lax.imag, (Z,)),
    Row("conj", lax.conj, (Z,)),
    Row("complex", lax.complex, (X, P)),
    Row("complex_mul", lambda z: lax.mul(z, z), (Z,)),
    # structural
    Row("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (2, 3), (1,)), (X,)),
    Row("reshape", lambda m: lax.reshape(m, (3, 2)), (M,)),
    Row("reshape_dims", lambda m: lax.reshape(m, (6,), (1, 0)), (M,)),
    Row("transpose", lambda m: lax.transpose(m, (1, 0)), (M,)),
    Row("squeeze", lambda m: lax.squeeze(m, (0,)), (_u(-1, 1, (1, 3)),)),
    Row("rev", lambda m: lax.rev(m, (1,)), (M,)),
    Row("concatenate", lambda a, b: lax.concatenate([a, b], 0), (X, P)),
    Row("split", lambda x: lax.split(x, (1, 2)), (X,)),
    Row("stack", lambda a, b: lax.stack([a, b, a], 1), (X, P)),
    Row("unstack", lambda m: lax.unstack(m, 1), (M,)),
    Row("tile", lambda m: lax.tile(m, (2, 3)), (M,)),
    Row("optimization_barrier", lambda a, b: lax.optimization_barrier((a, lax.mul(a, b))), (X, P)),
    Row("composite", lambda a, b: lax.composite(lambda x, y: lax.mul(x, lax.sin(y)),
                                                 name="test.op")(a, b), (X, P)),
    Row("stage", lambda x: lax.mul(x, lax.stage_p.bind(x)), (X,)),
    Row("device_put", lambda x: lax.device_put_p.bind(
        x, devices=(None,), srcs=(None,), copy_semantics=(lax.ArrayCopySemantics.REUSE_INPUT,)
    )[0], (X,)),
    Row("convert_element_type", lambda x: lax.convert_element_type(lax.convert_element_type(x, np.float16), F32),
        (X,), tol=3e-2, eps=1e-2),
    Row("reduce_precision", lambda x: lax.reduce_precision(x, 8, 23), (X,)),
    # to_edtype/from_edtype: through a user-defined extended dtype and back (linear: order 1;
    # under jit: jaxkit has no eager arrays of such dtypes, JAX's EArray)
    Row("to_edtype", jaxkit.jit(lambda x: lax.convert_element_type(
        lax.convert_element_type(x, max_dtype(jaxkit)), F32)), (X,), order=1),
    # slicing and indexing
    Row("slice", lambda m: lax.slice(m, (0, 1), (2, 3), (1, 2)), (M,)),
    Row("pad", lambda x, v: lax.pad(x, v, [(1, 2, 1)]), (X, F32(0.5))),
    Row("pad_negative", lambda x: lax.pad(x, F32(0), [(-1, 1, 0)]), (X,)),
    Row("dynamic_slice", lambda m: lax.dynamic_slice(m, (np.int32(1), np.int32(0)), (1, 2)), (M,)),
    Row("dynamic_update_slice", lambda m, u: lax.dynamic_update_slice(m, u, (np.int32(0), np.int32(1))),
        (M, _u(-1, 1, (1, 2)))),
    Row("gather", lambda o: lax.gather(o, IDX, _GDN, (1, 3)), (OP43,)),
    Row("scatter_add", lambda o, u: lax.scatter_add(o, IDX, u, _SDN),
        (OP43, UPD)),
    Row("scatter_sub", lambda o, u: lax.scatter_sub(o, IDX, u, _SDN),
        (OP43, UPD)),
    Row("scatter_mul", lambda o, u: lax.scatter_mul(o, IDX, u, _SDN, unique_indices=True),
        (OP43, UPD)),
    Row("scatter", lambda o, u: lax.scatter(o, IDX, u, _SDN, unique_indices=True),
        (OP43, UPD)),
    Row("scatter_max", lambda o, u: lax.scatter_max(o, IDX, u, _SDN),
        (OP43, UPD)),
    Row("scatter_min", lambda o, u: lax.scatter_min(o, IDX, u, _SDN),
        (OP43, UPD)),
    # reductions and scans
    Row("reduce_sum", lambda m: lax.reduce_sum(m, (1,)), (M,)),
    Row("reduce_max", lambda x: lax.reduce_max(x, (0,)), (DISTINCT,)),
    Row("reduce_min", lambda x: lax.reduce_min(x, (0,)), (DISTINCT,)),
    Row("reduce_prod", lambda m: lax.reduce_prod(m, (0,)), (M,)),
    Row("reduce", lambda m: lax.reduce(m, F32(0), lax.add, (0,)), (M,)),
    Row("cumsum", lambda m: lax.cumsum(m, 1, reverse=True), (M,)),
    Row("cumprod", lambda m: lax.cumprod(m, 1), (M,)),
    Row("cummax", lambda x: lax.cummax(x, 0), (DISTINCT,)),
    Row("cummin", lambda x: lax.cummin(x, 0), (DISTINCT,)),
    Row("cumlogsumexp", lambda x: lax.cumlogsumexp(x, 0), (X,)),
    Row("reduce_window_sum", lambda m: lax.reduce_window(m, F32(0), lax.add, (2, 2), (1, 1),
                                                         ((1, 0), (0, 1)), (1, 2)), (M,)),
    Row("reduce_window_max", lambda x: lax.reduce_window(x, -np.inf, lax.max, (2,), (1,),
                                                         "SAME"), (DISTINCT,)),
    Row("reduce_window_min", lambda x: lax.reduce_window(x, np.inf, lax.min, (3,), (2,),
                                                         ((1, 1),), None, (1,)), (DISTINCT,)),
    Row("reduce_window_max-dilated", lambda m: lax.reduce_window(
        m, -np.inf, lax.max, (2, 2), (1, 1), "SAME", (1, 2), (2, 1)), (POOL,)),
    # max/min pooling's derivatives: linear in their first argument, the operand fixed
    Row("select_and_scatter_add", lambda s: lax.select_and_scatter_add_p.bind(
        s, POOL, select_prim=lax.ge_p, window_dimensions=(2, 2), window_strides=(1, 2),
        padding=((1, 0), (0, 1))), (POOL_SRC,)),
    Row("select_and_gather_add", lambda t: lax.select_and_gather_add_p.bind(
        t, POOL, select_prim=lax.le_p, window_dimensions=(2, 2), window_strides=(1, 1),
        padding=((0, 1), (1, 0)), base_dilation=(1, 2), window_dilation=(2, 1)), (M34,)),
    Row("sort", lambda x: lax.sort(x), (DISTINCT,)),
    Row("sort_key_val", lambda k, v: lax.sort_key_val(k, v), (DISTINCT, _u(-1, 1, (4,)))),
    Row("top_k", lambda x: lax.top_k(x, 2)[0], (DISTINCT,)),
    Row("approx_top_k", lambda x: lax.approx_max_k(x, 2)[0], (DISTINCT,)),
    # linear algebra
    Row("dot_general", lambda a, b: lax.dot_general(a, b, _MM), (M, M2)),
    Row("dot_general_batch", lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))),
        (_u(-1, 1, (2, 2, 3)), _u(-1, 1, (2, 3, 2)))),
    # eigenvalue derivatives only (first order: the rule itself needs eigenvectors); the sum
    # of cubes of the eigenvalues (trace(A^3)) does not depend on their order
    Row("eig", lambda m: lax.reduce_sum(lax.real(lax.integer_pow(lax.linalg.eig(
        m, compute_left_eigenvectors=False, compute_right_eigenvectors=False)[0], 3)), (0,)),
        (_u(-1.0, 1.0, (3, 3)),), order=1),
    # LAPACK decompositions (float32, so first order with float32 finite differences); the
    # factors compared are those that do not depend on sign/phase conventions.
    Row("cholesky", lambda a: lax.linalg.cholesky(a), (SPD3,), order=1),
    Row("triangular_solve", lambda a, b: lax.linalg.triangular_solve(
        a, b, left_side=True, lower=True), (TRI3, M2), order=2),
    Row("lu", lambda a: lax.linalg.lu(a)[0], (WELL3,), order=1),
    Row("qr", lambda a: lax.linalg.qr(a, full_matrices=False), (OP43,), order=1),
    Row("eigh", lambda a: (lambda v, w: (w, lax.mul(v, v)))(*lax.linalg.eigh(a)), (SPD3,),
        order=1),
    Row("svd", lambda a: (lambda u, s, vh: (s, lax.mul(u, u), lax.mul(vh, vh)))(
        *lax.linalg.svd(a, full_matrices=False)), (OP43,), order=1),
    Row("tridiagonal_solve", lambda dl, d, du, b: lax.linalg.tridiagonal_solve(dl, d, du, b),
        (_u(-1, 1, (3,)), _u(3, 4, (3,)), _u(-1, 1, (3,)), M2), order=1),
    # the defined parts: R's upper triangle (a GPU leaves the lower one as it was), and the
    # symmetric product's lower triangle mirrored (cuBLAS's syrk writes only that one)
    Row("cholesky_update", lambda r, w: jnp.triu(lax.linalg.cholesky_update(r, w)),
        (np.triu(SPD3).astype(F32), X), order=1),
    Row("symmetric_product", lambda a, c: lax.linalg.symmetric_product(
        a, c, alpha=2.0, beta=0.5, symmetrize_output=True),
        (M2, SPD3[:3, :3].copy()), order=1),
    Row("conv_general_dilated", lambda lhs, rhs: lax.conv_general_dilated(lhs, rhs, (1,), [(1, 0)]),
        (_u(-1, 1, (1, 2, 5)), _u(-1, 1, (3, 2, 2)))),
    # inside a shard_map that checks varying manual axes: the replicated ``w`` times the split
    # ``x`` inserts a pvary (transposed to a psum), and psum there is psum_invariant
    Row("psum_invariant", lambda x, w: jaxkit.shard_map(
        lambda a, b: lax_parallel.psum(a * b, "i"), mesh=_MANUAL2, in_specs=(PartitionSpec("i"),
                                                                            PartitionSpec()),
        out_specs=PartitionSpec())(x, w), (_u(-1, 1, (4,)), _u(-1, 1, (2,)))),
    # unreduced/reduced manual axes: the casts and the collectives of an unreduced value
    # transpose to their duals (unreduced_psum to preduced, the reduce-scatter to the
    # reduced all-gather)
    Row("unreduced_psum", lambda x: jaxkit.shard_map(
        lambda a: lax_parallel.psum(lax.pcast(jnp.sin(a), "i", to="unreduced"), "i"),
        mesh=_MANUAL2, in_specs=PartitionSpec("i"), out_specs=PartitionSpec())(x),
        (_u(-1, 1, (4,)),), order=1),
    Row("unreduced_reduce_scatter", lambda x: jaxkit.shard_map(
        lambda a: lax_parallel.psum_scatter(lax.pcast(a * a, "i", to="unreduced"), "i",
                                            tiled=True),
        mesh=_MANUAL2, in_specs=PartitionSpec("i"), out_specs=PartitionSpec("i"))(x),
        (_u(-1, 1, (4,)),), order=1),
    Row("all_gather_reduced", lambda x, w: jaxkit.shard_map(
        lambda a, b: lax.pcast(lax.all_gather(a, "i", tiled=True, to="reduced"), "i",
                               to="varying") * lax.pcast(lax.pcast(b, "i", to="reduced"), "i",
                                                         to="varying"),
        mesh=_MANUAL2, in_specs=(PartitionSpec("i"), PartitionSpec()),
        out_specs=PartitionSpec("i"))(x, w), (_u(-1, 1, (2,)), _u(-1, 1, (2,))), order=1),
    # varying -> invariant all-gather: transposes to the slice at the device's index
    Row("all_gather_invariant", lambda x, w: jaxkit.shard_map(
        lambda a, b: jnp.sin(lax.all_gather(a, "i", tiled=True, to="invarying")) * b,
        mesh=_MANUAL2, in_specs=(PartitionSpec("i"), PartitionSpec()),
        out_specs=PartitionSpec())(x, w), (_u(-1, 1, (4,)), _u(-1, 1, (4,))), order=1),
    # collectives, through vmap with a named axis
    Row("psum", lambda x: vmap(lambda y: lax_parallel.psum(y, "i"), axis_name="i")(x), (M,)),
    Row("all_gather", lambda x: vmap(lambda y: lax_parallel.all_gather(y, "i"), axis_name="i")(x), (M,)),
    Row("ppermute", lambda x: vmap(lambda y: lax_parallel.ppermute(y, "i", [(0, 1), (1, 0)]), axis_name="i")(x),
        (M,)),
    Row("reduce_scatter", lambda x: vmap(lambda y: lax_parallel.psum_scatter(y, "i", tiled=True), axis_name="i")(x),
        (_u(-1, 1, (2, 4)),)),
    Row("all_to_all", lambda x: vmap(lambda y: lax_parallel.all_to_all(y, "i", 0, 0, tiled=True), axis_name="i")(x),
        (_u(-1, 1, (2, 4)),)),
    Row("pbroadcast", lambda x: vmap(lambda y: lax.pbroadcast(y, "i", 1), axis_name="i")(x), (M,)),
    # vmap(grad) puts the JVP trace inside the vmap: pbroadcast's own transpose runs
    Row("pbroadcast_transpose", lambda x: vmap(grad(lambda y: lax.reduce_sum(lax.mul(
        lax.pbroadcast(y, "i", 1), y), (0,))), axis_name="i")(x), (M,)),
    Row("ragged_all_to_all", lambda a, b: vmap(lambda u, v, *t: lax.ragged_all_to_all(
        u, v, *t, axis_name="i"), axis_name="i")(a, b, *_RAGGED_TABLES),
        (_u(-1, 1, (2, 3, 2)), _u(-1, 1, (2, 4, 2)))),
    Row("ragged_all_to_all_transpose", lambda a, b: vmap(grad(lambda u, v, *t: lax.reduce_sum(
        lax.square(lax.ragged_all_to_all(u, v, *t, axis_name="i")), (0, 1)), argnums=(0, 1)),
        axis_name="i")(a, b, *_RAGGED_TABLES), (_u(-1, 1, (2, 3, 2)), _u(-1, 1, (2, 4, 2)))),
    # compositions: chains of rules, and jit inside
    Row("composition", lambda x, y: lax.reduce_sum(lax.mul(lax.sin(x), lax.exp(lax.mul(x, y))), (0,)), (X, P)),
    Row("jit_inside", jaxkit.jit(lambda x, y: lax.mul(lax.sin(x), y)), (X, P)),
    # control flow (the primitives carrying jaxprs)
    Row("cond", lambda x: lax.cond(jnp.sum(x) > 0, lambda y: jnp.sin(y) * y,
                                   lambda y: jnp.cos(y), x), (X,)),
    Row("cond_false", lambda x: lax.cond(jnp.sum(x) < 0, lambda y: jnp.sin(y) * y,
                                         lambda y: jnp.cos(y) * x, x), (X,)),
    Row("switch", lambda x, y: lax.switch(1, [lambda a, b: a * b, lambda a, b: a + b * b,
                                              lambda a, b: a - b], x, y), (X, P)),
    Row("scan", lambda x, c: lax.scan(lambda carry, xi: (jnp.sin(carry) * xi + xi,
                                                          carry * xi), c, x)[0], (X, P)),
    Row("scan_ys_reverse", lambda x: lax.scan(lambda carry, xi: (carry + xi, jnp.tanh(
        carry * xi)), jnp.float32(0.3), x, reverse=True)[1], (X,)),
    Row("fori_loop", lambda x: lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) * x, x), (X,)),
    # The four FFT kinds (R -> R through real/imag parts; RFFT/IRFFT transpose with their
    # conjugate-pair weighting).
    Row("fft", lambda x: lax.real(lax.fft(lax.complex(x, 0.5 * x), "FFT", (4,))),
        (_u(-1, 1, (2, 4)),)),
    Row("fft-ifft", lambda x: lax.imag(lax.fft(lax.complex(0.5 * x, x), "IFFT", (4,))),
        (_u(-1, 1, (2, 4)),)),
    Row("fft-rfft", lambda x: lax.imag(lax.fft(x, "RFFT", (6,))), (_u(-1, 1, (2, 6)),)),
    Row("fft-irfft", lambda x: lax.fft(lax.complex(x, 0.5 * x), "IRFFT", (6,)),
        (_u(-1, 1, (2, 4)),)),
    # implicitly differentiated solves (the solver itself is never differentiated)
    Row("custom_linear_solve", lambda m, b: lax.custom_linear_solve(
        lambda x: jnp.dot(m, x), b, lambda mv, y: jnp.linalg.solve(m, y),
        lambda vm, y: jnp.linalg.solve(m.T, y)), (WELL3, X)),
    Row("custom_root", lambda p: lax.custom_root(
        lambda x: x * x - p, jnp.ones(3, F32),
        lambda f, x0: lax.fori_loop(0, 20, lambda i, x: x - f(x) / (2 * x), x0),
        lambda g, y: y / g(jnp.ones(3, F32))), (P,)),
    Row("while", lambda x: lax.while_loop(lambda c: c[0] < 3,
                                          lambda c: (c[0] + 1, jnp.sin(c[1]) * x),
                                          (0, x))[1], (X,), modes=("fwd",)),
]


@pytest.mark.parametrize("row", ROWS, ids=str)
def test_numerical_gradients(row: Row):
    check_grads(row.fn, row.args, row.order, modes=row.modes, atol=row.tol, rtol=row.tol,
                eps=row.eps)


def test_zero_derivative_primitives_give_zero_tangents():
    x = DISTINCT
    for fn in (lambda x: lax.gt(x, F32(0)), lambda x: lax.argmax(x, 0, np.int32),
               lambda x: lax.convert_element_type(x, np.int32), lax.is_finite):
        _, t = jvp(fn, (x,), (np.ones_like(x),))
        assert t.dtype == dtypes.float0
    for fn in (lax.floor, lax.sign, lax.round):
        g = grad(lambda x, fn=fn: lax.reduce_sum(fn(x), (0,)))(x)
        assert np.all(np.asarray(g) == 0)


def test_gradcheck_handles_pytrees_integers_and_none():
    def f(d, scale):
        n = lax.convert_element_type(d["n"], F32)
        return {"y": lax.mul(lax.mul(d["x"], n), scale), "none": None, "n": d["n"]}

    check_grads(f, ({"x": X, "n": np.int32(2)}, 1.5), order=2)


def test_gradcheck_detects_wrong_rules():
    """The harness itself: a wrong JVP, and a right JVP with a wrong transpose, must fail."""
    bad = core.Primitive("bad_double")
    bad.def_impl(lambda x: lax.mul(x, F32(2)))
    bad.def_abstract_eval(lambda x: x)
    ad.defjvp(bad, lambda t, x: lax.mul(t, F32(3)))  # should be 2
    with pytest.raises(AssertionError, match="JVP: tangent output"):
        check_jvp(bad.bind, (X,))
    with pytest.raises(AssertionError, match="VJP"):
        check_grads(bad.bind, (X,), 1, modes=("rev",))

    lin = core.Primitive("bad_linear")
    lin.def_impl(lambda x: lax.mul(x, F32(2)))
    lin.def_abstract_eval(lambda x: x)
    ad.deflinear2(lin, lambda ct, x: [lax.mul(ct, F32(5))])  # transpose should scale by 2
    check_grads(lin.bind, (X,), 1, modes=("fwd",))
    with pytest.raises(AssertionError, match="VJP: <t, vjp\\(ct\\)>"):
        check_grads(lin.bind, (X,), 1, modes=("rev",))


# --------------------------------------------------------------------------------------------
# Coverage of the rule tables
# --------------------------------------------------------------------------------------------

# Primitives that need no JVP rule, and why.
EXEMPT = {
    # As in JAX, these have no derivative at all (not even a zero one).
    "nextafter": "JAX defines no derivative (a step function of its inputs)",
    "igamma_grad_a": "JAX defines no derivative (it is itself a derivative of igamma)",
    "zeta": "JAX defines no derivative",
    "pmax": "JAX defines no derivative for pmax",
    "pmin": "JAX defines no derivative for pmin",
    "schur": "JAX defines no derivative for lax.linalg.schur",
    "hessenberg": "JAX defines no derivative for lax.linalg.hessenberg",
    "tridiagonal": "JAX defines no derivative for lax.linalg.tridiagonal",
    "householder_product": "JAX defines no derivative (differentiate lax.linalg.qr)",
    "ormqr": "JAX defines no derivative (differentiate lax.linalg.qr)",
    "rng_uniform": "JAX defines no derivative (XLA's stateful generator)",
    "scaled_dot": "JAX defines no derivative for lax.scaled_dot",
    "psend": "JAX defines no derivative for psend (it returns an ordering token)",
    "precv": "JAX defines no derivative for precv",
    "reduce_window": "a general computation has no derivative (sum/max/min have their own "
                     "primitives, which do)",
    "select_and_scatter": "JAX defines no derivative for the general form (its add form, "
                          "select_and_scatter_add, has one)",
    "eval_jaxpr": "bound only while lowering scan bodies (func.call @closed_call), after "
                  "every transformation ran; the scan primitive has the JVP rule",
}
# Primitives with a zero derivative everywhere (defjvp_zero) need no numerical row.
_LINEAR_NAMES = {  # linear in some argument: need a transpose rule (besides ad.linear_primitives)
    "add", "sub", "neg", "mul", "dot_general", "conv_general_dilated", "reduce_sum", "cumsum",
    "broadcast_in_dim", "reshape", "transpose", "squeeze", "rev", "concatenate", "split",
    "slice", "pad", "dynamic_slice", "dynamic_update_slice", "gather", "scatter-add",
    "scatter-sub", "select_n", "convert_element_type", "real", "imag", "complex", "conj",
    "copy", "reduce_precision", "psum", "all_gather", "ppermute", "reduce_scatter",
    "all_to_all", "div", "select_and_scatter_add", "select_and_gather_add",
    "pbroadcast", "ragged_all_to_all",
}


def _lax_primitives() -> dict[str, core.Primitive]:
    prims = {}
    for m in pkgutil.iter_modules(lax.__path__):
        mod = importlib.import_module(f"jaxkit.lax.{m.name}")
        for v in vars(mod).values():
            if isinstance(v, core.Primitive):
                prims[v.name] = v
    return prims


def test_every_lax_primitive_has_a_jvp_rule_or_a_justified_exemption():
    missing = sorted(n for n, p in _lax_primitives().items()
                     if p not in ad.jvp_rules and n not in EXEMPT)
    assert not missing, f"primitives without a JVP rule (add one or exempt it): {missing}"
    stale = sorted(n for n in EXEMPT if n in _lax_primitives()
                   and _lax_primitives()[n] in ad.jvp_rules)
    assert not stale, f"exempt primitives that now have a JVP rule: {stale}"


def test_every_linear_lax_primitive_has_a_transpose_rule():
    prims = _lax_primitives()
    linear = {n for n, p in prims.items() if p in ad.linear_primitives} | (
        _LINEAR_NAMES & set(prims))
    missing = sorted(n for n in linear if prims[n] not in ad.transpose_rules)
    assert not missing, f"linear primitives without a transpose rule: {missing}"


def _is_zero_jvp(p: core.Primitive) -> bool:
    rule = ad.jvp_rules.get(p)
    return getattr(rule, "__qualname__", "").startswith("defjvp_zero")


def _primitive_names(jaxpr: core.Jaxpr) -> set[str]:
    names = set()
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        for sub in core.subjaxprs(eqn.params):
            names |= _primitive_names(sub)
    return names


def test_every_differentiable_primitive_is_in_the_table():
    covered = {row.name for row in ROWS}  # unary/binary rows are named by their primitive
    for row in ROWS:
        try:
            jaxpr = jaxkit.make_jaxpr(row.fn)(*row.args).jaxpr
        except Exception:  # noqa: BLE001, S112  (that row's own test reports the failure)
            continue
        covered |= _primitive_names(jaxpr)
    prims = _lax_primitives()
    missing = sorted(n for n, p in prims.items()
                     if p in ad.jvp_rules and not _is_zero_jvp(p) and n not in covered
                     and n not in _ZERO_DERIVATIVE)
    assert not missing, f"differentiable primitives with no numerical gradient row: {missing}"


# Primitives whose derivative is zero (or which return integers): checked by
# test_zero_derivative_primitives_give_zero_tangents rather than by finite differences.
_ZERO_DERIVATIVE = {"eq", "ne", "lt", "le", "gt", "ge", "argmax", "argmin", "is_finite",
                    "sign", "floor", "ceil", "round", "bitcast_convert_type",
                    "stop_gradient", "eq_to", "le_to", "lt_to", "mulhi", "dce_sink",
                    "rng_bit_generator", "empty"}
