"""``jaxkit.numpy.linalg``'s solves, inverses and determinants, on the LU factorization
(``lax.linalg.lu``, LAPACK getrf) with JAX's derivative rules: ``solve``, ``inv``, ``det``,
``slogdet``, ``tensorinv``, ``tensorsolve``."""
from __future__ import annotations

import operator

import numpy as np

from jaxkit import dtypes, lax
from jaxkit.runtime.array import Array
from jaxkit.transforms.custom_derivatives import custom_jvp
from jaxkit.lax import linalg as lax_linalg
from jaxkit.lax.linalg.qr import geqrf
from jaxkit.numpy._jitted import jitted
from jaxkit.numpy._linalg_base import SlogdetResult, _square
from jaxkit.numpy._contractions import diagonal as _diagonal
from jaxkit.numpy._contractions import trace as _trace
from jaxkit.numpy._promotion import (
    broadcast_to_shape,
    ensure_arraylike,
    promote_dtypes_inexact,
)
from jaxkit.numpy import _linalg_lu_solve as _lu_solve_mod
from jaxkit.numpy._creation import arange, array, eye, zeros_like
from jaxkit.numpy._reductions import any as _any
from jaxkit.numpy._reductions import count_nonzero
from jaxkit.numpy._reductions import prod as _prod
from jaxkit.numpy._reductions import sum as _sum
from jaxkit.numpy._sorting import where
from jaxkit.numpy._shape import expand_dims, moveaxis, reshape
from jaxkit.numpy._vectorize import vectorize
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



@jitted(inline=False)
def solve(a: ArrayLike, b: ArrayLike) -> Array:
    """``jnp.linalg.solve``: ``x`` with ``a @ x == b``; ``b`` is a vector only if 1-D."""
    a, b = ensure_arraylike("jnp.linalg.solve", a, b)
    a, b = promote_dtypes_inexact(a, b)
    if a.ndim < 2:
        raise ValueError(f"left hand array must be at least two dimensional; got {a.shape=}")
    # Shapes that were once a batched 1-D solve are refused, as JAX (since 0.5.0) does.
    if (b.ndim > 1 and a.ndim == b.ndim + 1 and a.shape[-1] == b.shape[-1]
            and a.shape[-1] != b.shape[-2]):
        raise ValueError(
            f"Invalid shapes for solve: {a.shape}, {b.shape}. Prior to JAX v0.5.0, this would "
            "have been treated as a batched 1-dimensional solve. To recover this behavior, use "
            "solve(a, b[..., None]).squeeze(-1).")
    signature = "(m,m),(m)->(m)" if b.ndim == 1 else "(m,m),(m,n)->(m,n)"
    return vectorize(_lu_solve_mod.solve, signature=signature)(a, b)


@jitted(inline=False)
def inv(a: ArrayLike) -> Array:
    """``jnp.linalg.inv``: the matrix inverse (LU with partial pivoting)."""
    arr = ensure_arraylike("jnp.linalg.inv", a)
    if arr.ndim < 2 or arr.shape[-1] != arr.shape[-2]:
        raise ValueError(f"Argument to inv must have shape [..., n, n], got {arr.shape}.")
    return solve(arr, lax.broadcast(eye(arr.shape[-1], dtype=arr.dtype), arr.shape[:-2]))


def _trace_last2(x: Array) -> Array:
    return _trace(x, axis1=-2, axis2=-1)


def _slogdet_lu(a: Array) -> tuple[Array, Array]:
    """Sign and log|det| from the LU factorization, JAX's algorithm step for step: the sign
    of a real matrix is the parity of the row swaps and of the negative pivots."""
    dtype = a.dtype
    lu, pivot, _ = lax_linalg.lu(a)
    diag = _diagonal(lu, axis1=-2, axis2=-1)
    is_zero = _any(diag == array(0, dtype=dtype), axis=-1)
    iota = lax.expand_dims(arange(a.shape[-1], dtype=pivot.dtype), tuple(range(pivot.ndim - 1)))
    parity = count_nonzero(pivot != iota, axis=-1)
    if dtypes.issubdtype(dtype, np.complexfloating):
        sign = _prod(diag / _abs(diag).astype(diag.dtype), axis=-1)
    else:
        sign = array(1, dtype=dtype)
        parity = parity + count_nonzero(diag < 0, axis=-1)
    sign = where(is_zero, array(0, dtype=dtype), sign * array(-2 * (parity % 2) + 1, dtype=dtype))
    logdet = where(is_zero, array(-np.inf, dtype=dtype),
                   _sum(log(_abs(diag)).astype(dtype), axis=-1))
    return sign, real(logdet)


def _slogdet_jvp(primals: tuple, tangents: tuple) -> tuple[tuple, tuple]:
    # d log|det A| = tr(A^{-1} dA); the sign moves only for a complex matrix.
    (x,), (g,) = primals, tangents
    sign, ans = slogdet(x)
    ans_dot = _trace(solve(x, g), axis1=-1, axis2=-2)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        sign_dot = (ans_dot - real(ans_dot).astype(ans_dot.dtype)) * sign
        ans_dot = real(ans_dot)
    else:
        sign_dot = zeros_like(sign)
    return (sign, ans), (sign_dot, ans_dot)


_slogdet_lu = custom_jvp(_slogdet_lu)
_slogdet_lu.defjvp(_slogdet_jvp)


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


_slogdet_by_qr = custom_jvp(_slogdet_qr)
_slogdet_by_qr.defjvp(_slogdet_jvp)


@jitted(static_argnames=("method",), inline=False)
def slogdet(a: ArrayLike, *, method: str | None = None) -> SlogdetResult:
    """``jnp.linalg.slogdet``: sign and log of the absolute value of the determinant; LU
    (``method='lu'``, the default; 1x1 and 2x2 matrices in closed form, as JAX) or QR."""
    a = _square("slogdet", a)
    if method is None or method == "lu":
        small = a.shape[-1] in (1, 2)
        return SlogdetResult(*(_slogdet_small_cj(a) if small else _slogdet_lu(a)))
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


