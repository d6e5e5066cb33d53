"""LU factorization with partial pivoting, pivots to permutations, and tridiagonal solves.

``lu`` lowers to LAPACK ``?getrf`` and ``tridiagonal_solve`` to ``?gtsv`` (jaxlib's typed-FFI
CPU kernels, as in JAX); ``lu_pivots_to_permutation`` is a loop of swaps written in jaxkit
operations, as JAX writes it for the CPU. For NVIDIA GPUs, as JAX: cuSOLVER's ``getrf``,
jaxlib's CUDA kernel ``cu_lu_pivots_to_permutation``, and cuSPARSE's ``gtsv2`` (jaxlib's
``cu_tridiagonal_solve_perturbed`` with ``perturb_singular``; systems of one or two equations,
which ``gtsv2`` rejects, are eliminated in jaxkit operations).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from jaxkit import core
from jaxkit import lax as _lax
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.lax.standard import standard_multi_result_primitive, standard_primitive
from jaxkit.lax.linalg._lapack import (
    check_dtype,
    check_matrix,
    eye,
    ffi_call,
    info_ok,
    lapack_call,
    matmul,
    nan_unless_ok,
    on_cuda,
    tril,
    triu,
)
from jaxkit.lax.linalg.cholesky import triangular_solve
from jaxkit.typing import Array, ArrayLike
from jaxkit.interpreters.mlir import hlo
from jaxkit.interpreters.mlir_platforms import reads_platform

__all__ = ["lu", "lu_p", "lu_pivots_to_permutation", "lu_pivots_to_permutation_p",
           "tridiagonal_solve", "tridiagonal_solve_p"]


# ---- lu_pivots_to_permutation --------------------------------------------------------------
def lu_pivots_to_permutation(pivots: ArrayLike, permutation_size: int) -> Array:
    """The permutation ``[..., permutation_size]`` made by applying LAPACK-style row swaps
    ``pivots`` ``[..., k]`` (row ``i`` swapped with row ``pivots[i]``, in order) to
    ``arange(permutation_size)``."""
    return lu_pivots_to_permutation_p.bind(pivots, permutation_size=int(permutation_size))


def _lu_pivots_to_permutation_shape(pivots, *, permutation_size):
    if pivots.ndim < 1 or pivots.dtype != np.dtype(np.int32):
        raise TypeError("lu_pivots_to_permutation requires int32 pivots of rank >= 1, got "
                        f"{pivots.dtype.name}{list(pivots.shape)}.")
    if permutation_size < pivots.shape[-1]:
        raise ValueError(f"Output permutation size {permutation_size} has to exceed the "
                         f"trailing dimension of the pivots. Got pivots shape {pivots.shape}.")
    return pivots.shape[:-1] + (permutation_size,)


def _permutation_from_pivots(pivots, *, permutation_size):
    # LAPACK's pivots are a sequence of row swaps: swap i and pivots[i] for i = 0..k-1, applied
    # to the identity permutation. Each step reads and writes two entries per matrix: a dynamic
    # slice at column i and a gather/scatter at the pivot's column, batched over the leading
    # axes by the gather's batching dimensions (O(1) work per step and matrix, as LAPACK's own
    # laswp; a masked select over the whole row made n = 64 solves 30% slower than JAX's).
    batch, k = pivots.shape[:-1], pivots.shape[-1]
    nb = len(batch)
    shape = batch + (permutation_size,)
    wide = tuple(range(nb))
    at_pivot_gather = _lax.GatherDimensionNumbers(
        offset_dims=(), collapsed_slice_dims=(nb,), start_index_map=(nb,),
        operand_batching_dims=wide, start_indices_batching_dims=wide)
    at_pivot_scatter = _lax.ScatterDimensionNumbers(
        update_window_dims=(), inserted_window_dims=(nb,), scatter_dims_to_operand_dims=(nb,),
        operand_batching_dims=wide, scatter_indices_batching_dims=wide)
    zero = np.int32(0)

    def column(vec, i):  # vec[..., i:i+1]
        return _lax.dynamic_slice(vec, (zero,) * nb + (i,), batch + (1,))

    def body(i, perm):
        i = _lax.convert_element_type(i, np.int32)  # the loop index is int64 under x64
        j = column(pivots, i)  # batch + (1,): the index vector of the gather/scatter
        p_i = column(perm, i)
        p_j = _lax.gather(perm, j, at_pivot_gather, (1,) * (nb + 1),
                          mode=_lax.GatherScatterMode.PROMISE_IN_BOUNDS)
        perm = _lax.scatter(perm, j, _lax.reshape(p_i, batch), at_pivot_scatter,
                            mode=_lax.GatherScatterMode.PROMISE_IN_BOUNDS)
        return _lax.dynamic_update_slice(perm, _lax.reshape(p_j, batch + (1,)),
                                         (zero,) * nb + (i,))

    cols = _lax.broadcasted_iota(np.int32, shape, nb)
    return _lax.fori_loop(0, k, body, cols) if k else cols


lu_pivots_to_permutation_p = standard_primitive(
    _lu_pivots_to_permutation_shape, lambda p, **_: np.dtype(np.int32),
    "lu_pivots_to_permutation")
ad.defjvp_zero(lu_pivots_to_permutation_p)
batching.defleading(lu_pivots_to_permutation_p)
mlir.register_lowering(lu_pivots_to_permutation_p, mlir.lower_fun(_permutation_from_pivots))
mlir.register_lowering(
    lu_pivots_to_permutation_p,
    lambda ctx, pivots, *, permutation_size: ffi_call(  # jaxlib's CUDA kernel, as JAX
        "cu_lu_pivots_to_permutation", [pivots], list(ctx.avals_in), list(ctx.avals_out),
        ctx.avals_in[0].ndim - 1),
    platform="cuda")


# ---- lu ------------------------------------------------------------------------------------
def lu(x: ArrayLike) -> tuple[Array, Array, Array]:
    """LU decomposition with partial pivoting of matrices ``[..., m, n]``: ``(lu, pivots,
    permutation)`` with ``L`` (unit lower, below the diagonal of ``lu``) and ``U`` (upper)
    such that ``x[..., permutation, :] == L @ U``; ``pivots`` are LAPACK's row swaps (from 0).
    NaN for matrices LAPACK rejects."""
    lu_, pivots, permutation = lu_p.bind(x)
    return lu_, pivots, permutation


def _lu_abstract_eval(x):
    check_matrix("lu", x)
    check_dtype("lu", x)
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    return [core.ShapedArray(x.shape, x.dtype), core.ShapedArray(batch + (min(m, n),), np.int32),
            core.ShapedArray(batch + (m,), np.int32)]


def _lu_jvp(primals, tangents):
    # With P A = L U: L^{-1} P dA U^{-1} = L^{-1} dL + dU U^{-1}, whose strictly lower part is
    # L^{-1} dL and upper part dU U^{-1} (rectangular matrices padded with identity blocks).
    (a,), (a_dot,) = primals, tangents
    lu_, pivots, perm = lu_p.bind(a)
    int_zeros = [ad.Zero(core.get_aval(p).to_tangent_aval()) for p in (pivots, perm)]
    if type(a_dot) is ad.Zero:
        return [lu_, pivots, perm], [ad.Zero(core.get_aval(lu_).to_tangent_aval()), *int_zeros]
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k = min(m, n)
    nb = len(batch)
    x = _rows(a_dot, perm)
    zero = _lax.full((), 0, a.dtype)
    l_part = _lax.slice(lu_, (0,) * a.ndim, batch + (m, k))
    l_ = _lax.pad(tril(l_part, -1), zero, [(0, 0, 0)] * nb + [(0, 0, 0), (0, m - k, 0)])
    l_ = _lax.add(l_, eye(batch + (m, m), a.dtype))
    u_part = triu(_lax.slice(lu_, (0,) * a.ndim, batch + (k, n)))
    u_ = _lax.pad(u_part, zero, [(0, 0, 0)] * nb + [(0, n - k, 0), (0, 0, 0)])
    rows = _lax.broadcasted_iota(np.int32, batch + (n, n), nb)
    u_eye = _lax.select(_lax.ge(rows, np.int32(k)), eye(batch + (n, n), a.dtype),
                        _lax.full(batch + (n, n), 0, a.dtype))
    u_ = _lax.add(u_, u_eye)
    la = triangular_solve(l_, x, left_side=True, transpose_a=False, lower=True,
                          unit_diagonal=True)
    lau = triangular_solve(u_, la, left_side=False, transpose_a=False, lower=False)
    l_dot = matmul(l_, tril(lau, -1))
    u_dot = matmul(triu(lau), u_)
    return [lu_, pivots, perm], [_lax.add(l_dot, u_dot), *int_zeros]


def _rows(x, perm):
    """``x[..., perm, :]`` as a one-hot product (batch dims of ``perm`` match ``x``'s)."""
    m = x.shape[-2]
    cols = _lax.broadcasted_iota(np.int32, perm.shape + (m,), perm.ndim)
    p = _lax.broadcast_in_dim(perm, perm.shape + (m,), tuple(range(perm.ndim)))
    onehot = _lax.convert_element_type(_lax.eq(p, cols), x.dtype)
    return matmul(onehot, x)


@reads_platform
def _lu_lowering(ctx, x):
    (aval,) = ctx.avals_in
    lu_aval, piv_aval, perm_aval = ctx.avals_out
    batch, nbatch = aval.shape[:-2], aval.ndim - 2
    info_aval = core.ShapedArray(batch, np.int32)
    # cuSOLVER's getrf on an NVIDIA GPU, LAPACK's elsewhere: the same operands and results
    call = (partial(ffi_call, "cusolver_getrf_ffi") if on_cuda(ctx) else
            partial(lapack_call, "getrf_ffi", aval.dtype))
    lu_, piv, info = call([x], [aval], [lu_aval, piv_aval, info_aval], nbatch, {},
                          aliases={0: 0})
    one = hlo.BroadcastInDimOp(mlir.aval_to_ir_type(piv_aval), mlir.ir_constant(np.int32(1)),
                               mlir.i64_attr(())).result
    piv = hlo.SubtractOp(piv, one).result  # pivots count from 1 in both kernels
    # getrf's info > 0 marks an exactly singular U, which is still a valid factorization.
    lu_ = nan_unless_ok(info_ok(info, batch, "GE"), lu_, lu_aval, nbatch)
    # Through the primitive, whose own rule for the platform applies (a CUDA kernel on GPUs).
    perm_ctx = ctx.replace(avals_in=[piv_aval], avals_out=[perm_aval])
    perm = mlir.lower_fun(lambda p: lu_pivots_to_permutation(p, aval.shape[-2]))(perm_ctx, piv)
    return [lu_, piv, perm]


lu_p = standard_multi_result_primitive(_lu_abstract_eval, "lu")
ad.defjvp_rule(lu_p, _lu_jvp)
batching.defleading(lu_p)
mlir.register_lowering(lu_p, _lu_lowering)


# ---- tridiagonal_solve ---------------------------------------------------------------------
def tridiagonal_solve(dl: ArrayLike, d: ArrayLike, du: ArrayLike, b: ArrayLike, *,
                      perturb_singular: bool = False) -> Array:
    """Solves tridiagonal systems ``A x = b`` with ``A``'s sub-, main and super-diagonals
    ``dl``, ``d``, ``du`` (each ``[..., m]``; ``dl[..., 0]`` and ``du[..., -1]`` are unused)
    and right-hand sides ``b`` ``[..., m, n]`` (LAPACK ``gtsv``: Gaussian elimination with
    partial pivoting). NaN for singular systems, unless ``perturb_singular`` replaces zero
    pivots by tiny ones."""
    return tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=bool(perturb_singular))


def _tridiagonal_solve_shape(dl, d, du, b, *, perturb_singular):
    check_dtype("tridiagonal_solve", b)
    if b.ndim < 2 or any(v.shape != b.shape[:-1] for v in (dl, d, du)):
        raise ValueError("tridiagonal_solve requires dl, d and du of shape [..., m] and b of "
                         f"shape [..., m, n], got {dl.shape}, {d.shape}, {du.shape} and "
                         f"{b.shape}.")
    if any(v.dtype != b.dtype for v in (dl, d, du)):
        raise TypeError("tridiagonal_solve requires operands of one dtype, got "
                        f"{[v.dtype.name for v in (dl, d, du, b)]}.")
    return b.shape


def _tridiagonal_product(dl, d, du, x):
    """``A @ x`` for the tridiagonal ``A`` with diagonals ``dl``, ``d``, ``du``."""
    nb = x.ndim - 2
    m = x.shape[-2]
    bdims = tuple(range(nb + 1))

    def col(v):
        return _lax.broadcast_in_dim(v, x.shape, bdims)

    y = _lax.mul(col(d), x)
    zero = _lax.full((), 0, x.dtype)
    pad_rows = [(0, 0, 0)] * nb
    # (du * x shifted up) and (dl * x shifted down), padding the row that falls off.
    up = _lax.pad(_lax.slice_in_dim(x, 1, m, axis=nb), zero, pad_rows + [(0, 1, 0), (0, 0, 0)])
    down = _lax.pad(_lax.slice_in_dim(x, 0, m - 1, axis=nb), zero,
                    pad_rows + [(1, 0, 0), (0, 0, 0)])
    return _lax.add(y, _lax.add(_lax.mul(col(du), up), _lax.mul(col(dl), down)))


def _tridiagonal_solve_jvp(primals, tangents, *, perturb_singular):
    dl, d, du, b = primals
    *diag_dots, b_dot = tangents
    ans = tridiagonal_solve_p.bind(*primals, perturb_singular=perturb_singular)
    if all(type(t) is ad.Zero for t in tangents):
        return ans, ad.Zero(core.get_aval(ans).to_tangent_aval())
    rhs = ad.instantiate_zeros(b_dot)
    if not all(type(t) is ad.Zero for t in diag_dots):
        rhs = _lax.sub(rhs, _tridiagonal_product(*map(ad.instantiate_zeros, diag_dots), ans))
    return ans, tridiagonal_solve_p.bind(dl, d, du, rhs, perturb_singular=perturb_singular)


def _tridiagonal_solve_transpose(ct, dl, d, du, b, *, perturb_singular):
    if any(ad.is_undefined_primal(v) for v in (dl, d, du)):
        raise NotImplementedError("transpose rule for 'tridiagonal_solve' with respect to its "
                                  "diagonals: it is linear only in 'b'.")
    if type(ct) is ad.Zero:
        return [None, None, None, ad.Zero(b.aval)]
    # A^T has sub-diagonal du shifted down one and super-diagonal dl shifted up one.
    nb, m = d.ndim - 1, d.shape[-1]
    zero = _lax.full((), 0, d.dtype)
    pad0 = [(0, 0, 0)] * nb
    dl_t = _lax.pad(_lax.slice_in_dim(du, 0, m - 1, axis=nb), zero, pad0 + [(1, 0, 0)])
    du_t = _lax.pad(_lax.slice_in_dim(dl, 1, m, axis=nb), zero, pad0 + [(0, 1, 0)])
    ct_b = tridiagonal_solve_p.bind(dl_t, d, du_t, ct, perturb_singular=perturb_singular)
    return [None, None, None, ct_b]


def _thomas(dl, d, du, b):
    """Gaussian elimination of tridiagonal systems without pivoting (the Thomas algorithm),
    unrolled over the ``m`` equations: what JAX computes on the GPU for the systems of one or
    two equations that cuSPARSE's ``gtsv2`` rejects."""
    nb, m = d.ndim - 1, d.shape[-1]
    if m == 0:
        return b

    def row(v, i):  # v[..., i] (diagonals) or v[..., i, :] (right-hand sides)
        return _lax.squeeze(_lax.slice_in_dim(v, i, i + 1, axis=nb), (nb,))

    def col(v):  # a diagonal's entries as a column of b's shape
        return _lax.broadcast_in_dim(v, v.shape + (b.shape[-1],), tuple(range(nb)))

    cp, dp = [_lax.div(row(du, 0), row(d, 0))], [_lax.div(row(b, 0), col(row(d, 0)))]
    for i in range(1, m):
        denom = _lax.sub(row(d, i), _lax.mul(row(dl, i), cp[-1]))
        cp.append(_lax.div(row(du, i), denom))
        dp.append(_lax.div(_lax.sub(row(b, i), _lax.mul(col(row(dl, i)), dp[-1])), col(denom)))
    x = [dp[-1]]
    for i in range(m - 2, -1, -1):
        x.insert(0, _lax.sub(dp[i], _lax.mul(col(cp[i]), x[0])))
    return _lax.concatenate([_lax.expand_dims(r, (nb,)) for r in x], nb)


@reads_platform
def _tridiagonal_solve_lowering(ctx, dl, d, du, b, *, perturb_singular):
    avals = list(ctx.avals_in)
    b_aval = avals[3]
    batch, nbatch = b_aval.shape[:-2], b_aval.ndim - 2
    if on_cuda(ctx):
        if perturb_singular:
            return ffi_call("cu_tridiagonal_solve_perturbed", [dl, d, du, b], avals, [b_aval],
                            nbatch, {})[0]
        if b_aval.shape[-2] <= 2:  # gtsv2 needs m >= 3
            return mlir.lower_fun(_thomas)(ctx, dl, d, du, b)
        return ffi_call("cusparse_gtsv2_ffi", [dl, d, du, b], avals, [b_aval], nbatch, {},
                        aliases={0: 3})[0]
    if perturb_singular:
        # jaxlib's dtype-generic kernel (as JAX lowers it): zero pivots are perturbed
        # instead of making the solve fail.
        return lapack_call("gtsv_ffi", b_aval.dtype, [dl, d, du, b], avals, [b_aval], nbatch,
                           {}, target="tridiagonal_solve_perturbed_ffi")[0]
    results = lapack_call("gtsv_ffi", b_aval.dtype, [dl, d, du, b], avals,
                          [*avals, core.ShapedArray(batch, np.int32)], nbatch, {},
                          aliases={0: 0, 1: 1, 2: 2, 3: 3})
    return nan_unless_ok(info_ok(results[4], batch), results[3], b_aval, nbatch)


tridiagonal_solve_p = standard_primitive(_tridiagonal_solve_shape,
                                         lambda dl, d, du, b, **_: b.dtype, "tridiagonal_solve")
ad.defjvp_rule(tridiagonal_solve_p, _tridiagonal_solve_jvp)
ad.deftranspose(tridiagonal_solve_p, _tridiagonal_solve_transpose)
batching.defleading(tridiagonal_solve_p)
mlir.register_lowering(tridiagonal_solve_p, _tridiagonal_solve_lowering)
