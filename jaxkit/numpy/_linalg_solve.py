"""``jaxkit.numpy.linalg``'s solves, inverses and determinants, on the LU factorization
(``lax.linalg.lu``, LAPACK getrf) with JAX's derivative rules: ``solve``, ``inv``, ``det``,
``slogdet``, ``tensorinv``, ``tensorsolve``."""
from __future__ import annotations

import operator
from functools import partial

import numpy as np

from jaxkit import dtypes, lax
from jaxkit.runtime.array import Array
from jaxkit.transforms.custom_derivatives import custom_jvp
from jaxkit.lax import linalg as lax_linalg
from jaxkit.lax.linalg.qr import geqrf
from jaxkit.numpy._jitted import jitted
from jaxkit.numpy._linalg_base import SlogdetResult, _eye_like, _square
from jaxkit.numpy._contractions import diagonal as _diagonal
from jaxkit.numpy._contractions import matmul as _matmul
from jaxkit.numpy._contractions import trace as _trace
from jaxkit.numpy._promotion import (
    broadcast_shapes,
    broadcast_to_shape,
    ensure_arraylike,
    promote_dtypes_inexact,
)
from jaxkit.numpy._shape import expand_dims, moveaxis, reshape
from jaxkit.numpy._take import take_along_axis
from jaxkit.numpy._ufuncs import abs as _abs
from jaxkit.numpy._ufuncs import (
    divide,
    isnan,
    log,
    multiply,
    real,
    where3,
)
from jaxkit.numpy._ufuncs import sign as _sign
from jaxkit.typing import ArrayLike



def _lu_solve(lu: Array, perm: Array, b: Array) -> Array:
    """``x`` with ``A x = b`` given ``A[perm] = L U`` (``b`` ``[..., n, k]``, same batch)."""
    idx = broadcast_to_shape(lax.expand_dims(perm, (perm.ndim,)), b.shape)
    x = take_along_axis(b, idx, axis=-2)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    return lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)


def _solve_with_lu(a: Array, b: Array) -> Array:
    """``a^{-1} b``, linear in ``b`` (usable in a JVP rule's tangent computation)."""
    lu, _, perm = lax_linalg.lu(lax.stop_gradient(a))
    return _lu_solve(lu, perm, b)


@custom_jvp
def _solve(a: Array, b: Array) -> Array:
    return _solve_with_lu(a, b)


@_solve.defjvp
def _solve_jvp(primals: tuple, tangents: tuple) -> tuple[Array, Array]:
    # d(A^{-1} b) = A^{-1} (db - dA x), reusing the factorization.
    (a, b), (da, db) = primals, tangents
    lu, _, perm = lax_linalg.lu(lax.stop_gradient(a))
    x = _lu_solve(lu, perm, b)
    rhs = lax.sub(db, _matmul(da, x, precision=lax.Precision.HIGHEST))
    return x, _lu_solve(lu, perm, rhs)


@jitted(inline=False)
def solve(a: ArrayLike, b: ArrayLike) -> Array:
    """``jnp.linalg.solve``: ``x`` with ``a @ x == b``; ``b`` is a vector only if 1-D."""
    a, b = ensure_arraylike("jnp.linalg.solve", a, b)
    a, b = promote_dtypes_inexact(a, b)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"a must be a (batched) square matrix, got shape {a.shape}")
    if b.ndim == 1:
        if b.shape[0] != a.shape[-1]:
            raise ValueError(f"solve: b.shape={b.shape} does not match a.shape={a.shape}")
        bm = broadcast_to_shape(lax.reshape(b, (b.shape[0], 1)), a.shape[:-2] + (b.shape[0], 1))
        return lax.squeeze(_solve(a, bm), (a.ndim - 1,))
    if b.shape[-2] != a.shape[-1]:
        raise ValueError(f"solve: b.shape={b.shape} does not match a.shape={a.shape}")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return _solve(broadcast_to_shape(a, batch + a.shape[-2:]),
                  broadcast_to_shape(b, batch + b.shape[-2:]))


@jitted(inline=False)
def inv(a: ArrayLike) -> Array:
    """``jnp.linalg.inv``: the matrix inverse (LU with partial pivoting)."""
    a = _square("inv", a)
    return _solve(a, _eye_like(a, a.shape[-1]))


def _trace_last2(x: Array) -> Array:
    return _trace(x, axis1=-2, axis2=-1)


def _slogdet_lu(a: Array) -> tuple[Array, Array]:
    lu, pivots, _ = lax_linalg.lu(a)
    diag = _diagonal(lu, axis1=-2, axis2=-1)
    last = diag.ndim - 1
    absd = lax.abs(diag)
    is_zero = lax.reduce_or(lax.eq(absd, lax.full_like(absd, 0)), (last,))
    swaps = lax.ne(pivots, lax.broadcasted_iota(np.int32, pivots.shape, pivots.ndim - 1))
    parity = lax.reduce_sum(lax.convert_element_type(swaps, np.int32), (last,))
    if dtypes.issubdtype(a.dtype, np.complexfloating):
        safe = lax.select(lax.eq(absd, lax.full_like(absd, 0)), lax.full_like(absd, 1), absd)
        sign = lax.reduce_prod(lax.div(diag, lax.convert_element_type(safe, a.dtype)), (last,))
    else:
        sign = lax.reduce_prod(lax.sign(diag), (last,))
    odd = lax.eq(lax.rem(parity, lax.full_like(parity, 2)), lax.full_like(parity, 1))
    sign = lax.select(odd, lax.neg(sign), sign)
    logabs = lax.reduce_sum(log(absd), (last,))
    return (lax.select(is_zero, lax.full_like(sign, 0), sign),
            lax.select(is_zero, lax.full_like(logabs, -np.inf), logabs))


@custom_jvp
def _slogdet(a: Array) -> tuple[Array, Array]:
    return _slogdet_lu(a)


@_slogdet.defjvp
def _slogdet_jvp(primals: tuple, tangents: tuple) -> tuple[tuple, tuple]:
    (a,), (g,) = primals, tangents
    sign, logabs = _slogdet(a)
    dlog = _trace_last2(_solve_with_lu(a, g))
    if dtypes.issubdtype(a.dtype, np.complexfloating):
        dsign = multiply(lax.sub(dlog, lax.convert_element_type(real(dlog), a.dtype)), sign)
        dlog = real(dlog)
    else:
        dsign = lax.full_like(sign, 0)
    return (sign, logabs), (dsign, dlog)


def _slogdet_small(a: Array) -> tuple[Array, Array]:
    """Sign and log|det| of a 1x1 or 2x2 matrix in closed form, as JAX computes them: no
    LAPACK kernel, so half-precision dtypes work too."""
    det_a = a[..., 0, 0] if a.shape[-1] == 1 else _det_2x2(a)
    return _sign(det_a), real(log(_abs(det_a)))


def _slogdet_small_jvp(primals: tuple, tangents: tuple) -> tuple[tuple, tuple]:
    # d log det(A) = tr(A^{-1} dA), with the 1x1 and 2x2 inverses written out.
    (a,), (g,) = primals, tangents
    sign_a, logabs = _slogdet_small_cj(a)
    if a.shape[-1] == 1:
        dlog = divide(g[..., 0, 0], a[..., 0, 0])
    else:
        dlog = divide(g[..., 0, 0] * a[..., 1, 1] - g[..., 0, 1] * a[..., 1, 0]
                      - g[..., 1, 0] * a[..., 0, 1] + g[..., 1, 1] * a[..., 0, 0], _det_2x2(a))
    return (sign_a, logabs), _slogdet_tangents(a, sign_a, dlog)


_slogdet_small_cj = custom_jvp(_slogdet_small)
_slogdet_small_cj.defjvp(_slogdet_small_jvp)


def _slogdet_qr(a: Array) -> tuple[Array, Array]:
    """Sign and log|det| from ``geqrf``: det(R) times -1 for each Householder reflection
    actually made (a nonzero tau), as JAX's ``method='qr'``."""
    if dtypes.issubdtype(a.dtype, np.complexfloating):
        raise NotImplementedError("slogdet method='qr' not implemented for complex inputs")
    n = a.shape[-1]
    r, taus = geqrf(a)
    diag = _diagonal(r, axis1=-2, axis2=-1)
    last = diag.ndim - 1
    logabs = lax.reduce_sum(log(_abs(diag)), (last,))
    flips = lax.ne(taus[..., :max(n - 1, 0)], lax.full_like(taus[..., :max(n - 1, 0)], 0))
    odd = lax.eq(lax.rem(lax.reduce_sum(lax.convert_element_type(flips, np.int32), (last,)),
                         np.int32(2)), np.int32(1))
    sign_r = lax.reduce_prod(_sign(diag), (last,))
    return lax.select(odd, lax.neg(sign_r), sign_r), logabs


def _slogdet_tangents(a: Array, sign_a: Array, dlog: Array) -> tuple[Array, Array]:
    """The (sign, log|det|) tangents from d log det: the sign moves only for complex
    matrices (by the imaginary part); for real ones it is piecewise constant."""
    if dtypes.issubdtype(a.dtype, np.complexfloating):
        dsign = multiply(lax.sub(dlog, lax.convert_element_type(real(dlog), a.dtype)), sign_a)
        return dsign, real(dlog)
    return lax.full_like(sign_a, 0), dlog


def _slogdet_jvp(primals: tuple, tangents: tuple, *, method) -> tuple[tuple, tuple]:
    (a,), (g,) = primals, tangents
    sign_a, logabs = method(a)
    return (sign_a, logabs), _slogdet_tangents(a, sign_a, _trace_last2(_solve_with_lu(a, g)))


_slogdet = custom_jvp(_slogdet_lu)
_slogdet.defjvp(partial(_slogdet_jvp, method=_slogdet_lu))
_slogdet_by_qr = custom_jvp(_slogdet_qr)
_slogdet_by_qr.defjvp(partial(_slogdet_jvp, method=_slogdet_qr))


@jitted(static_argnames=("method",))
def slogdet(a: ArrayLike, *, method: str | None = None) -> SlogdetResult:
    """``jnp.linalg.slogdet``: sign and log of the absolute value of the determinant; LU
    (``method='lu'``, the default; 1x1 and 2x2 matrices in closed form, as JAX) or QR."""
    a = _square("slogdet", a)
    if method is None or method == "lu":
        small = a.shape[-1] in (1, 2)
        return SlogdetResult(*(_slogdet_small_cj(a) if small else _slogdet(a)))
    if method == "qr":
        return SlogdetResult(*_slogdet_by_qr(a))
    raise ValueError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' "
                     "(`None`), and 'qr'.")


def _det_2x2(a: Array) -> Array:
    return a[..., 0, 0] * a[..., 1, 1] - a[..., 0, 1] * a[..., 1, 0]


def _det_3x3(a: Array) -> Array:
    # The rule of Sarrus, terms in JAX's order (so float results agree to the bit): no
    # factorization, any dtype.
    def e(i, j):
        return a[..., i, j]
    return (e(0, 0) * e(1, 1) * e(2, 2) + e(0, 1) * e(1, 2) * e(2, 0)
            + e(0, 2) * e(1, 0) * e(2, 1) - e(0, 2) * e(1, 1) * e(2, 0)
            - e(0, 0) * e(1, 2) * e(2, 1) - e(0, 1) * e(1, 0) * e(2, 2))


@custom_jvp
def _det(a: Array) -> Array:
    sign_a, logabs = (_slogdet_small if a.shape[-1] == 1 else _slogdet_lu)(a)
    return multiply(sign_a, lax.convert_element_type(lax.exp(logabs), a.dtype))


def _cofactor_solve(a: Array, b: Array) -> tuple[Array, Array]:
    """``(det(a), det(a) a^{-1} b)``, the second finite even for singular ``a`` (of rank
    n - 1): the LU solve with the last pivot's division folded into the determinant, so
    ``d det(a) = trace(adj(a) da)`` holds at singular matrices too (JAX's method). Linear in
    ``b``."""
    n = a.shape[-1]
    if n == 0:
        return lax.full(a.shape[:-2], 1, a.dtype), b
    lu, pivots, perm = lax_linalg.lu(lax.stop_gradient(a))
    diag = _diagonal(lu, axis1=-2, axis2=-1)
    swaps = lax.ne(pivots, lax.broadcasted_iota(np.int32, pivots.shape, pivots.ndim - 1))
    parity = lax.reduce_sum(lax.convert_element_type(swaps, np.int32), (pivots.ndim - 1,))
    odd = lax.eq(lax.rem(parity, lax.full_like(parity, 2)), lax.full_like(parity, 1))
    sign = lax.select(odd, lax.full(odd.shape, -1, a.dtype), lax.full(odd.shape, 1, a.dtype))
    partial_det = multiply(lax.cumprod(diag, axis=diag.ndim - 1), expand_dims(sign, -1))
    det_a = partial_det[..., -1]
    if n == 1:  # the adjugate of a 1x1 matrix is [1]: det(a) a^{-1} b is b itself
        return det_a, b
    # U's last pivot becomes 1 / (product of the others): u_nn^{-1} det = that
    last = lax.eq(lax.broadcasted_iota(np.int32, (n, n), 0) + lax.broadcasted_iota(
        np.int32, (n, n), 1), np.int32(2 * n - 2))
    inv_pd = divide(1, partial_det[..., -2])
    lu = where3(broadcast_to_shape(last, lu.shape), expand_dims(inv_pd, (-1, -2)), lu)
    # matrices of rank < n - 1 have a zero adjugate: zero their result
    probe = lax_linalg.triangular_solve(lu, lax.full(a.shape[:-2] + (1, n), 1, a.dtype),
                                        left_side=False, lower=False)
    bad = lax.reduce_or(lax.bitwise_or(isnan(probe), lax.bitwise_not(lax.is_finite(
        lax.abs(probe)))), (probe.ndim - 2, probe.ndim - 1))
    bad = broadcast_to_shape(expand_dims(bad, (-1, -2)), b.shape)
    x = where3(bad, lax.full_like(b, 0), b)
    idx = broadcast_to_shape(lax.expand_dims(perm, (perm.ndim,)), x.shape)
    x = take_along_axis(x, idx, axis=-2)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    scale = lax.concatenate([broadcast_to_shape(expand_dims(det_a, (-1, -2)),
                                                a.shape[:-2] + (n - 1, 1)),
                             lax.full(a.shape[:-2] + (1, 1), 1, a.dtype)], a.ndim - 2)
    x = multiply(x, scale)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)
    return det_a, where3(bad, lax.full_like(x, 0), x)


@_det.defjvp
def _det_jvp(primals: tuple, tangents: tuple) -> tuple[Array, Array]:
    (a,), (g,) = primals, tangents
    y, z = _cofactor_solve(a, g)
    return y, _trace_last2(z)


@jitted(inline=False)
def det(a: ArrayLike) -> Array:
    """``jnp.linalg.det``: the determinant; 2x2 and 3x3 in closed form (differentiated as
    written), larger ones by LU with partial pivoting and the cofactor JVP, as JAX."""
    a = _square("det", a)
    n = a.shape[-1]
    return _det_2x2(a) if n == 2 else _det_3x3(a) if n == 3 else _det(a)


def tensorinv(a: ArrayLike, ind: int = 2) -> Array:
    """``jnp.linalg.tensorinv``: the inverse with respect to ``tensordot(., ., ind)``."""
    arr = ensure_arraylike("tensorinv", a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"ind must be a positive integer; got ind={ind}")
    contracting, batch = arr.shape[:ind], arr.shape[ind:]
    flat = int(np.prod(contracting))
    if flat != int(np.prod(batch)):
        raise ValueError(f"tensorinv: product of first {ind} dimensions must equal product of "
                         f"remaining dimensions. got a.shape={arr.shape}, ind={ind}.")
    return reshape(inv(reshape(arr, (flat, -1))), batch + contracting)


def tensorsolve(a: ArrayLike, b: ArrayLike, axes: tuple[int, ...] | None = None) -> Array:
    """``jnp.linalg.tensorsolve``: ``x`` with ``tensordot(a, x, x.ndim) == b``."""
    a_arr, b_arr = ensure_arraylike("tensorsolve", a, b)
    if axes is not None:
        a_arr = moveaxis(a_arr, axes, len(axes) * (a_arr.ndim - 1,))
    out_shape = a_arr.shape[b_arr.ndim:]
    if a_arr.shape[:b_arr.ndim] != b_arr.shape:
        raise ValueError("b.shape must match the leading dimensions of a.shape; got "
                         f"a.shape={a_arr.shape}, b.shape={b_arr.shape}")
    flat = int(np.prod(out_shape))
    if a_arr.size != flat ** 2:
        raise ValueError(f"tensorsolve: product of trailing dimensions of a must equal the "
                         f"product of the leading dimensions; got a.shape={a_arr.shape}")
    return reshape(solve(reshape(a_arr, (flat, flat)), reshape(b_arr, (flat,))), out_shape)


