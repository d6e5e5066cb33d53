"""QR factorization and Householder reflectors.

``geqrf`` (``?geqrf``: R and the reflectors below it), ``geqp3`` (``?geqp3``: the same with
column pivoting), ``householder_product`` (``?orgqr``/``?ungqr``: Q from reflectors) and
``ormqr`` (``?ormqr``/``?unmqr``: Q applied to a matrix) lower to jaxlib's typed-FFI LAPACK
kernels; ``qr`` is written with them, as JAX lowers it on the CPU. For NVIDIA GPUs they call
cuSOLVER's ``geqrf``/``orgqr``/``ormqr`` and, for ``geqp3``, the CUDA plugin's hybrid kernel
(LAPACK or MAGMA on the host), as JAX does.
"""
from __future__ import annotations

import numpy as np

from jaxkit import core
from jaxkit import lax as _lax
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir_platforms import reads_platform
from jaxkit.lax.standard import standard_multi_result_primitive, standard_primitive
from jaxkit.lax.linalg._lapack import (
    H,
    bool_attr,
    check_dtype,
    check_matrix,
    eye,
    ffi_call,
    hybrid_target,
    is_complex,
    lapack_call,
    magma_attr,
    matmul,
    on_cuda,
    tril,
    triu,
)
from jaxkit.lax.linalg.cholesky import triangular_solve
from jaxkit.typing import Array, ArrayLike

__all__ = ["householder_product", "householder_product_p", "ormqr", "ormqr_p", "qr", "qr_p"]


# ---- geqrf / geqp3 (internal) --------------------------------------------------------------
def geqrf(a: ArrayLike) -> tuple[Array, Array]:
    """LAPACK ``geqrf`` on matrices ``[..., m, n]``: ``(r_and_reflectors, taus)``, R on and
    above the diagonal and the Householder reflectors below it (jnp.linalg.qr's 'raw')."""
    r, taus = geqrf_p.bind(a)
    return r, taus


def _geqrf_abstract_eval(a):
    check_matrix("geqrf", a)
    check_dtype("geqrf", a)
    return [a, core.ShapedArray(a.shape[:-2] + (min(a.shape[-2:]),), a.dtype)]


@reads_platform
def _geqrf_lowering(ctx, a):
    (aval,) = ctx.avals_in
    if on_cuda(ctx):
        return ffi_call("cusolver_geqrf_ffi", [a], [aval], list(ctx.avals_out), aval.ndim - 2,
                        {}, aliases={0: 0})
    return lapack_call("geqrf_ffi", aval.dtype, [a], [aval], list(ctx.avals_out),
                       aval.ndim - 2, {}, aliases={0: 0})


geqrf_p = standard_multi_result_primitive(_geqrf_abstract_eval, "geqrf")
batching.defleading(geqrf_p)
mlir.register_lowering(geqrf_p, _geqrf_lowering)


def _geqp3_abstract_eval(a, jpvt, **_):
    check_matrix("geqp3", a)
    check_dtype("geqp3", a)
    return [a, jpvt, core.ShapedArray(a.shape[:-2] + (min(a.shape[-2:]),), a.dtype)]


@reads_platform
def _geqp3_lowering(ctx, a, jpvt, *, use_magma=None):
    a_aval, jpvt_aval = ctx.avals_in
    if on_cuda(ctx):  # LAPACK (or MAGMA) on the host, between copies, as JAX does
        return ffi_call(hybrid_target("geqp3"), [a, jpvt], [a_aval, jpvt_aval],
                        list(ctx.avals_out), a_aval.ndim - 2, {"magma": magma_attr(use_magma)},
                        aliases={0: 0, 1: 1})
    return lapack_call("geqp3_ffi", a_aval.dtype, [a, jpvt], [a_aval, jpvt_aval],
                       list(ctx.avals_out), a_aval.ndim - 2, {}, aliases={0: 0, 1: 1})


geqp3_p = standard_multi_result_primitive(_geqp3_abstract_eval, "geqp3")
batching.defleading(geqp3_p)
mlir.register_lowering(geqp3_p, _geqp3_lowering)


# ---- householder_product -------------------------------------------------------------------
def householder_product(a: ArrayLike, taus: ArrayLike) -> Array:
    """The product of the Householder reflectors stored below the diagonal of ``a``
    ``[..., m, n]`` with scales ``taus`` ``[..., k]`` (LAPACK ``orgqr``/``ungqr``): the
    ``[..., m, n]`` matrix with orthonormal columns. Requires ``m >= n >= k``."""
    return householder_product_p.bind(a, taus)


def _householder_product_shape(a, taus):
    check_matrix("householder_product", a)
    check_dtype("householder_product", a)
    m, n = a.shape[-2:]
    if taus.ndim != a.ndim - 1 or taus.shape[:-1] != a.shape[:-2] or not m >= n >= \
            taus.shape[-1] or taus.dtype != a.dtype:
        raise ValueError("householder_product requires a of shape [..., m, n] with m >= n and "
                         "taus of the same dtype and shape [..., k] with k <= n, got "
                         f"{a.dtype.name}{list(a.shape)} and {taus.dtype.name}"
                         f"{list(taus.shape)}.")
    return a.shape


@reads_platform
def _householder_product_lowering(ctx, a, taus):
    a_aval, taus_aval = ctx.avals_in
    if on_cuda(ctx):
        return ffi_call("cusolver_orgqr_ffi", [a, taus], [a_aval, taus_aval], [a_aval],
                        a_aval.ndim - 2, {}, aliases={0: 0})[0]
    return lapack_call("orgqr_ffi" if not is_complex(a_aval.dtype) else "ungqr_ffi",
                       a_aval.dtype, [a, taus], [a_aval, taus_aval], [a_aval],
                       a_aval.ndim - 2, {}, aliases={0: 0})[0]


householder_product_p = standard_primitive(_householder_product_shape,
                                           lambda a, t: a.dtype, "householder_product")
batching.defleading(householder_product_p)
mlir.register_lowering(householder_product_p, _householder_product_lowering)


# ---- ormqr ---------------------------------------------------------------------------------
def ormqr(a: ArrayLike, taus: ArrayLike, c: ArrayLike, *, left: bool = True,
          transpose: bool = False) -> Array:
    """``Q @ c`` (``left``) or ``c @ Q``, with ``Q`` (conjugate-)transposed if ``transpose``,
    for the ``Q`` whose Householder reflectors ``a``/``taus`` ``geqrf`` returned, without
    forming ``Q`` (LAPACK ``ormqr``/``unmqr``)."""
    return ormqr_p.bind(a, taus, c, left=bool(left), transpose=bool(transpose))


def _ormqr_shape(a, taus, c, *, left, transpose):
    check_matrix("ormqr", a)
    check_dtype("ormqr", a)
    if c.ndim != a.ndim or c.shape[:-2] != a.shape[:-2] or taus.shape[:-1] != a.shape[:-2] \
            or len({a.dtype, taus.dtype, c.dtype}) != 1:
        raise ValueError("ormqr requires a [..., m, k], taus [..., k] and c [..., m, n] (or "
                         "[..., n, m] with left=False) of one dtype, got "
                         f"{a.shape}, {taus.shape} and {c.shape}.")
    side = c.shape[-2] if left else c.shape[-1]
    if a.shape[-2] != side:
        raise ValueError(f"ormqr: a has {a.shape[-2]} rows but c's multiplied dimension has "
                         f"{side}.")
    return c.shape


@reads_platform
def _ormqr_lowering(ctx, a, taus, c, *, left, transpose):
    a_aval, taus_aval, c_aval = ctx.avals_in
    attrs = {"left": bool_attr(left), "transpose": bool_attr(transpose)}
    if on_cuda(ctx):  # cuSOLVER's ormqr (unmqr for complex matrices: one kernel for both)
        return ffi_call("cusolver_ormqr_ffi", [a, taus, c], [a_aval, taus_aval, c_aval],
                        [c_aval], a_aval.ndim - 2, attrs, aliases={0: 2})[0]
    return lapack_call("ormqr_ffi" if not is_complex(a_aval.dtype) else "unmqr_ffi",
                       a_aval.dtype, [a, taus, c], [a_aval, taus_aval, c_aval], [c_aval],
                       a_aval.ndim - 2, attrs, aliases={0: 2})[0]


ormqr_p = standard_primitive(_ormqr_shape, lambda a, t, c, **_: c.dtype, "ormqr")
batching.defleading(ormqr_p)
mlir.register_lowering(ormqr_p, _ormqr_lowering)


# ---- qr ------------------------------------------------------------------------------------
def qr(x: ArrayLike, *, pivoting: bool = False, full_matrices: bool = True,
       use_magma: bool | None = None):
    """QR decomposition of matrices ``[..., m, n]``: ``(q, r)`` with ``q`` ``[..., m, m]``
    and ``r`` ``[..., m, n]`` if ``full_matrices``, else ``[..., m, k]`` and ``[..., k, n]``
    (``k = min(m, n)``); with ``pivoting``, also the column permutation ``p`` such that
    ``x[..., p] == q @ r``."""
    return tuple(qr_p.bind(x, pivoting=bool(pivoting), full_matrices=bool(full_matrices),
                           use_magma=use_magma))


def _qr_abstract_eval(x, *, pivoting, full_matrices, use_magma):
    check_matrix("qr", x)
    check_dtype("qr", x)
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    k = m if full_matrices else min(m, n)
    outs = [core.ShapedArray(batch + (m, k), x.dtype), core.ShapedArray(batch + (k, n),
                                                                         x.dtype)]
    if pivoting:
        outs.append(core.ShapedArray(batch + (n,), np.int32))
    return outs


def _qr_impl(x, *, pivoting, full_matrices, use_magma):
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    nb = len(batch)
    if pivoting:
        r, jpvt, taus = geqp3_p.bind(x, _lax.full(batch + (n,), 0, np.int32),
                                     use_magma=use_magma)
        jpvt = _lax.sub(jpvt, _lax.full_like(jpvt, 1))
    else:
        r, taus = geqrf_p.bind(x)
    if m < n:
        q = householder_product(_lax.slice(r, (0,) * x.ndim, batch + (m, m)), taus)
    elif full_matrices:
        zero = _lax.full((), 0, x.dtype)
        q = householder_product(_lax.pad(r, zero, [(0, 0, 0)] * nb + [(0, 0, 0),
                                                                       (0, m - n, 0)]), taus)
    else:
        q = householder_product(r, taus)
    if m > n and not full_matrices:
        r = _lax.slice(r, (0,) * x.ndim, batch + (n, n))
    r = triu(r)
    return [q, r, jpvt] if pivoting else [q, r]


def _qr_jvp(primals, tangents, *, pivoting, full_matrices, use_magma):
    # dR R^{-1} is upper triangular and Q^H dQ skew-Hermitian: split Q^H dA R^{-1} between
    # them (Walter & Lehmann 2018; Seeger et al. 2017).
    (x,), (dx,) = primals, tangents
    outs = qr_p.bind(x, pivoting=pivoting, full_matrices=full_matrices, use_magma=use_magma)
    q, r = outs[:2]
    zeros = [ad.Zero(core.get_aval(o).to_tangent_aval()) for o in outs]
    if type(dx) is ad.Zero:
        return outs, zeros
    m, n = x.shape[-2:]
    if m < n or (full_matrices and m != n):
        raise NotImplementedError("Unimplemented case of QR decomposition derivative: "
                                  f"shape {x.shape} with full_matrices={full_matrices}.")
    if pivoting:
        perm = outs[2]
        nb = perm.ndim - 1
        idx = _lax.broadcast_in_dim(perm, dx.shape[:-2] + (1, n), tuple(range(nb)) + (nb + 1,))
        cols = _lax.broadcasted_iota(np.int32, dx.shape[:-2] + (n, n), nb)
        onehot = _lax.convert_element_type(_lax.eq(cols, idx), dx.dtype)  # [i, j]: i == p[j]
        dx = matmul(dx, onehot)
    dx_rinv = triangular_solve(r, dx)  # dx @ inv(r)
    qt_dx_rinv = matmul(H(q), dx_rinv)
    lower = tril(qt_dx_rinv, -1)
    do = _lax.sub(lower, H(lower))
    if is_complex(x.dtype):
        # The skew-Hermitian part also has an imaginary diagonal.
        imag_diag = _lax.sub(qt_dx_rinv, _lax.convert_element_type(_lax.real(qt_dx_rinv),
                                                                    x.dtype))
        do = _lax.add(do, _lax.mul(eye(do.shape, x.dtype), imag_diag))
    dq = _lax.add(matmul(q, _lax.sub(do, qt_dx_rinv)), dx_rinv)
    dr = matmul(_lax.sub(qt_dx_rinv, do), r)
    return outs, [dq, dr, *zeros[2:]]


qr_p = standard_multi_result_primitive(_qr_abstract_eval, "qr")
ad.defjvp_rule(qr_p, _qr_jvp)
batching.defleading(qr_p)
mlir.register_lowering(qr_p, mlir.lower_fun(_qr_impl, multiple_results=True))
