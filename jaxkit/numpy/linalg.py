"""``jaxkit.numpy.linalg``: JAX's ``jax.numpy.linalg``.

Norms and products are ordinary jnp code. Decompositions are the ``jaxkit.lax.linalg``
primitives (LAPACK kernels: ``lu`` for det/slogdet/solve/inv, ``cholesky``, ``qr``, ``eigh``,
``svd`` and, built on them, pinv, lstsq, matrix_rank, cond, norm 'nuc'/2), for real and complex
matrices, with JAX's derivative rules. As in JAX, the functions are jitted (``@jitted``), so an
eager call is one cached dispatch.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from jaxkit import dtypes, lax
from jaxkit._config import State
from jaxkit.runtime.array import Array
from jaxkit.transforms.jit import jit
from jaxkit.transforms.custom_derivatives import custom_jvp
from jaxkit.lax import linalg as lax_linalg
from jaxkit.lax.linalg.qr import geqrf
from jaxkit.numpy._creation import array, asarray, eye
from jaxkit.numpy._jitted import jitted
from jaxkit.numpy._contractions import cross as _cross
from jaxkit.numpy._contractions import diagonal as _diagonal
from jaxkit.numpy._contractions import matmul as _matmul
from jaxkit.numpy._contractions import outer as _outer
from jaxkit.numpy._contractions import tensordot as _tensordot
from jaxkit.numpy._contractions import trace as _trace
from jaxkit.numpy._contractions import vecdot as _vecdot
from jaxkit.numpy._promotion import (
    broadcast_to,
    broadcast_to_shape,
    canonicalize_axis,
    ensure_arraylike,
    promote_dtypes_inexact,
)
from jaxkit.numpy._reductions import amax, amin
from jaxkit.numpy._reductions import sum as _sum
from jaxkit.numpy._shape import expand_dims, flip, moveaxis
from jaxkit.numpy._sorting import argsort, sort, where
from jaxkit.numpy._take import take_along_axis
from jaxkit.numpy._shape import matrix_transpose as _matrix_transpose
from jaxkit.numpy._ufuncs import abs as _abs
from jaxkit.numpy._ufuncs import (
    conj,
    divide,
    isnan,
    multiply,
    power,
    real,
    sqrt,
)
from jaxkit.typing import ArrayLike

from jaxkit.numpy._linalg_base import (
    EighResult,
    EigResult,
    QRResult,
    SVDResult,
    _H,
    _square,
)
from jaxkit.numpy._linalg_solve import (
    det,
    inv,
    slogdet,
    solve,
    tensorinv,
    tensorsolve,
)

__all__ = ["cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh",
           "inv", "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank",
           "matrix_transpose", "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve",
           "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot",
           "vector_norm"]


# --------------------------------------------------------------------------------------------
# Norms
# --------------------------------------------------------------------------------------------

def vector_norm(x: ArrayLike, /, *, axis: int | tuple[int, ...] | None = None,
                keepdims: bool = False, ord: float | str | None = 2) -> Array:
    """``jnp.linalg.vector_norm``: the ``ord``-norm over ``axis`` (all axes by default)."""
    x = ensure_arraylike("jnp.linalg.vector_norm", x)
    if ord is None or ord == 2:
        return sqrt(_sum(real(multiply(x, conj(x))), axis=axis, keepdims=keepdims))
    if ord == np.inf:
        return amax(_abs(x), axis=axis, keepdims=keepdims, initial=0)
    if ord == -np.inf:
        return amin(_abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return _sum(lax.ne(x, np.asarray(0, x.dtype)[()]),
                    dtype=dtypes.finfo(x.dtype).dtype, axis=axis, keepdims=keepdims)
    if ord == 1:
        return _sum(_abs(x), axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        msg = f"Invalid order '{ord}' for vector norm."
        if ord == "inf":
            msg += "Use 'jax.numpy.inf' instead."
        if ord == "-inf":
            msg += "Use '-jax.numpy.inf' instead."
        raise ValueError(msg)  # noqa: TRY004  (JAX raises ValueError)
    abs_x = _abs(x)
    p = np.asarray(ord, abs_x.dtype)[()]
    return power(_sum(power(abs_x, p), axis=axis, keepdims=keepdims),
                 np.asarray(1.0 / float(ord), abs_x.dtype)[()])


@jitted(static_argnames=("ord", "axis", "keepdims"), inline=False)
def norm(x: ArrayLike, ord: float | str | None = None,
         axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Array:
    """``jnp.linalg.norm``: vector norms over one axis, matrix norms over two ('fro', 'nuc',
    1, -1, 2, -2, inf, -inf)."""
    x = ensure_arraylike("jnp.linalg.norm", x)
    x, = promote_dtypes_inexact(x)
    ndim = x.ndim
    if axis is None:
        if ord is None:
            return sqrt(_sum(real(multiply(x, conj(x))), keepdims=keepdims))
        axes = tuple(range(ndim))
    elif isinstance(axis, tuple):
        axes = tuple(canonicalize_axis(a, ndim) for a in axis)
    else:
        axes = (canonicalize_axis(axis, ndim),)
    if len(axes) == 1:
        return vector_norm(x, ord=2 if ord is None else ord, axis=axes, keepdims=keepdims)
    if len(axes) != 2:
        raise ValueError(f"Improper number of axes for norm: axis={axis}. Pass one axis to "
                         "compute a vector-norm, or two axes to compute a matrix-norm.")
    row, col = axes
    if ord is None or ord in ("f", "fro"):
        return sqrt(_sum(real(multiply(x, conj(x))), axis=axes, keepdims=keepdims))
    if ord in (1, -1):
        if not keepdims and col > row:
            col -= 1
        red = amax if ord == 1 else amin
        kw = {"initial": 0} if ord == 1 else {}
        return red(_sum(_abs(x), axis=row, keepdims=keepdims), axis=col, keepdims=keepdims, **kw)
    if ord in (np.inf, -np.inf):
        if not keepdims and row > col:
            row -= 1
        red = amax if ord == np.inf else amin
        kw = {"initial": 0} if ord == np.inf else {}
        return red(_sum(_abs(x), axis=col, keepdims=keepdims), axis=row, keepdims=keepdims, **kw)
    if ord in ("nuc", 2, -2):
        s = svdvals(moveaxis(x, axes, (-2, -1)))
        if ord == 2:
            y = amax(s, axis=-1, initial=0)
        elif ord == -2:
            y = amin(s, axis=-1)
        else:
            y = _sum(s, axis=-1)
        return expand_dims(y, axes) if keepdims else y
    raise ValueError(f"Invalid order '{ord}' for matrix norm.")


def matrix_norm(x: ArrayLike, /, *, keepdims: bool = False, ord: str | int = "fro") -> Array:
    """``jnp.linalg.matrix_norm``: ``norm`` over the last two axes."""
    x = ensure_arraylike("jnp.linalg.matrix_norm", x)
    return norm(x, ord=ord, keepdims=keepdims, axis=(-2, -1))


# --------------------------------------------------------------------------------------------
# Products
# --------------------------------------------------------------------------------------------

@jitted(static_argnames=("n",), inline=False)
def matrix_power(a: ArrayLike, n: int) -> Array:
    """``jnp.linalg.matrix_power``: ``a`` to the integer power ``n`` (repeated squaring;
    negative powers invert)."""
    arr = ensure_arraylike("jnp.linalg.matrix_power", a)
    if arr.ndim < 2 or arr.shape[-1] != arr.shape[-2]:
        raise TypeError(f"{arr.ndim}-dimensional array given. Array must be at least "
                        "two-dimensional and square." if arr.ndim < 2 else
                        "Last 2 dimensions of the array must be square")
    try:
        n = operator.index(n)
    except TypeError as err:
        raise TypeError(f"exponent must be an integer, got {n}") from err
    if n == 0:
        return broadcast_to(eye(arr.shape[-2], dtype=arr.dtype), arr.shape)
    if n < 0:
        arr = inv(arr)
        n = abs(n)
    # Small powers written out, then binary powering: JAX's order of products (so float
    # results agree to the bit, and jaxprs print the same).
    if n == 1:
        return arr
    if n == 2:
        return _matmul(arr, arr)
    if n == 3:
        return _matmul(_matmul(arr, arr), arr)
    z = result = None
    while n > 0:
        z = arr if z is None else _matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else _matmul(result, z)
    return result


def multi_dot(arrays: Sequence[ArrayLike], *, precision: Any = None) -> Array:
    """``jnp.linalg.multi_dot``: the chained matrix product (first may be 1-D, last too)."""
    arrs = [ensure_arraylike("multi_dot", a) for a in arrays]
    if len(arrs) < 2:
        raise ValueError(f"multi_dot requires at least two arrays; got len(arrays)={len(arrs)}")
    if not (arrs[0].ndim in (1, 2) and arrs[-1].ndim in (1, 2) and
            all(a.ndim == 2 for a in arrs[1:-1])):
        raise ValueError("multi_dot: input arrays must all be two-dimensional, except for the "
                         f"first and last array which may be 1 or 2 dimensional. Got array "
                         f"shapes {[a.shape for a in arrs]}")
    out = arrs[0]
    for a in arrs[1:]:
        out = _matmul(out, a, precision=precision)
    return out


def matrix_transpose(x: ArrayLike, /) -> Array:
    """``jnp.linalg.matrix_transpose``: swap the last two axes."""
    return _matrix_transpose(x)


def outer(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.linalg.outer``: the outer product of two vectors."""
    x1, x2 = ensure_arraylike("jnp.linalg.outer", x1, x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are "
                         f"x1.ndim={x1.ndim} and x2.ndim={x2.ndim}")
    return _outer(x1, x2)


def cross(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1) -> Array:
    """``jnp.linalg.cross``: the cross product of 3-vectors."""
    x1, x2 = ensure_arraylike("jnp.linalg.cross", x1, x2)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"Both input arrays must be (arrays of) 3-dimensional vectors, but "
                         f"they have x1.shape[axis]={x1.shape[axis]} and "
                         f"x2.shape[axis]={x2.shape[axis]}")
    return _cross(x1, x2, axis=axis)


def matmul(x1: ArrayLike, x2: ArrayLike, /, *, precision: Any = None,
           preferred_element_type: Any = None) -> Array:
    """``jnp.linalg.matmul``: ``jnp.matmul``."""
    return _matmul(x1, x2, precision=precision, preferred_element_type=preferred_element_type)


def tensordot(x1: ArrayLike, x2: ArrayLike, /, *, axes: Any = 2, precision: Any = None,
              preferred_element_type: Any = None, out_sharding: Any = None) -> Array:
    """``jnp.linalg.tensordot``: ``jnp.tensordot``."""
    return _tensordot(x1, x2, axes, precision=precision,
                      preferred_element_type=preferred_element_type, out_sharding=out_sharding)


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1, precision: Any = None,
           preferred_element_type: Any = None) -> Array:
    """``jnp.linalg.vecdot``: ``jnp.vecdot``."""
    return _vecdot(x1, x2, axis=axis, precision=precision,
                   preferred_element_type=preferred_element_type)


def trace(x: ArrayLike, /, *, offset: int = 0, dtype: Any = None) -> Array:
    """``jnp.linalg.trace``: the trace of the last two axes."""
    x = ensure_arraylike("jnp.linalg.trace", x)
    return _trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def diagonal(x: ArrayLike, /, *, offset: int = 0) -> Array:
    """``jnp.linalg.diagonal``: the diagonal of the last two axes."""
    x = ensure_arraylike("jnp.linalg.diagonal", x)
    return _diagonal(x, offset=offset, axis1=-2, axis2=-1)


# --------------------------------------------------------------------------------------------
# Decompositions (lax.linalg primitives: LAPACK potrf, geqrf/orgqr, syevd, gesdd, geev)
# --------------------------------------------------------------------------------------------

@jitted(static_argnames=("upper", "symmetrize_input"), inline=False)
def cholesky(a: ArrayLike, *, upper: bool = False, symmetrize_input: bool = True) -> Array:
    """``jnp.linalg.cholesky``: the lower (or ``upper``) Cholesky factor; NaNs if ``a`` is
    not positive definite."""
    a = _square("cholesky", a)
    L = lax_linalg.cholesky(a, symmetrize_input=symmetrize_input)
    return _H(L) if upper else L


@jitted(static_argnames=("mode",), inline=False)
def qr(a: ArrayLike, mode: str = "reduced") -> Any:
    """``jnp.linalg.qr``: ``Q`` with orthonormal columns and upper-triangular ``R``
    (``mode`` 'reduced', 'complete', 'r', or 'raw': LAPACK's reflectors and scales)."""
    a = ensure_arraylike("jnp.linalg.qr", a)
    a, = promote_dtypes_inexact(a)
    if a.ndim < 2:
        raise ValueError("Argument to jnp.linalg.qr must have ndims >= 2")
    if mode == "raw":
        h, taus = geqrf(a)
        return QRResult(_matrix_transpose(h), taus)
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    q, r = lax_linalg.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


@jitted(static_argnames=("UPLO", "symmetrize_input"), inline=False)
def eigh(a: ArrayLike, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """``jnp.linalg.eigh``: eigenvalues (ascending) and eigenvectors of Hermitian matrices;
    without ``symmetrize_input`` only the ``UPLO`` triangle is read."""
    a = _square("eigh", a)
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {UPLO}")
    v, w = lax_linalg.eigh(a, lower=UPLO != "U", symmetrize_input=symmetrize_input)
    return EighResult(w, v)


@jitted(static_argnames=("UPLO", "symmetrize_input"), inline=False)
def eigvalsh(a: ArrayLike, UPLO: str | None = "L", *, symmetrize_input: bool = True) -> Array:
    """``jnp.linalg.eigvalsh``: the eigenvalues (ascending) of Hermitian matrices."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


@jitted(static_argnames=("full_matrices", "compute_uv", "hermitian", "subset_by_index"),
        inline=False)
def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True,
        hermitian: bool = False, subset_by_index: tuple[int, int] | None = None) -> Any:
    """``jnp.linalg.svd``: ``a = U @ diag(S) @ Vh``, singular values descending (LAPACK
    ``gesdd``; through ``eigh`` if ``hermitian``)."""
    a = ensure_arraylike("jnp.linalg.svd", a)
    a, = promote_dtypes_inexact(a)
    if a.ndim < 2:
        raise ValueError("Argument to jnp.linalg.svd must have ndims >= 2")
    if hermitian:
        v, w = lax_linalg.eigh(a, subset_by_index=subset_by_index)
        s = _abs(w)
        if not compute_uv:
            return flip(sort(s, axis=-1), axis=-1)
        order = argsort(lax.neg(s), axis=-1)
        s = take_along_axis(s, order, axis=-1)
        sign = take_along_axis(lax.sign(w), order, axis=-1)
        u = take_along_axis(v, broadcast_to_shape(lax.expand_dims(order, (order.ndim - 1,)),
                                                  v.shape), axis=-1)
        vh = _H(multiply(u, lax.convert_element_type(lax.expand_dims(sign, (sign.ndim - 1,)),
                                                     u.dtype)))
        return SVDResult(u, s, vh)
    if not compute_uv:
        return lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=False,
                              subset_by_index=subset_by_index)
    u, s, vh = lax_linalg.svd(a, full_matrices=full_matrices, subset_by_index=subset_by_index)
    return SVDResult(u, s, vh)


def svdvals(x: ArrayLike, /) -> Array:
    """``jnp.linalg.svdvals``: the singular values, descending."""
    return svd(x, compute_uv=False)


def pinv(a: ArrayLike, rtol: ArrayLike | None = None, hermitian: bool = False, *,
         rcond: ArrayLike | None = None) -> Array:
    """``jnp.linalg.pinv``: the Moore-Penrose pseudo-inverse (SVD, singular values up to
    ``rtol * largest`` dropped)."""
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pinv: only one of rtol and rcond may be specified.")
        rtol = rcond
    return _pinv(a, rtol, hermitian)


@partial(custom_jvp, nondiff_argnums=(1, 2))
@partial(jit, static_argnames=("hermitian",))
def _pinv(a: ArrayLike, rtol: ArrayLike | None = None, hermitian: bool = False) -> Array:
    a = ensure_arraylike("jnp.linalg.pinv", a)
    arr, = promote_dtypes_inexact(a)
    m, n = arr.shape[-2:]
    if m == 0 or n == 0:
        return lax.full(arr.shape[:-2] + (n, m), 0, arr.dtype)
    arr = conj(arr)
    if rtol is None:
        rtol = 10. * max(arr.shape[-2:]) * array(dtypes.finfo(arr.dtype).eps)
    rtol = asarray(rtol)
    u, s, vh = svd(arr, full_matrices=False, hermitian=hermitian)
    # Singular values up to ``rtol * largest`` count as zero (their inverse is 1 / inf).
    rtol = lax.expand_dims(rtol[..., np.newaxis], range(s.ndim - rtol.ndim - 1))
    cutoff = rtol * s[..., 0:1]
    s = where(s > cutoff, s, np.inf).astype(u.dtype)
    res = _matmul(vh.mT, divide(u.mT, s[..., np.newaxis]), precision=lax.Precision.HIGHEST)
    return lax.convert_element_type(res, arr.dtype)


_default_matmul_precision = State("jax_default_matmul_precision")


def _symmetrize(x: Array) -> Array:
    return (x + _H(x)) / 2


@_pinv.defjvp
def _pinv_jvp(rtol, hermitian: bool, primals: tuple, tangents: tuple) -> tuple[Array, Array]:
    # Golub & Pereyra (1973): the derivative of the pseudo-inverse at constant rank, with
    # JAX's association of the products (float32 matmuls, as JAX's rule asks).
    (a,), (a_dot,) = primals, tangents
    with _default_matmul_precision("float32"):
        p = pinv(a, rtol=rtol, hermitian=hermitian)
        if hermitian:  # svd(hermitian=True) symmetrizes its input; the JVP must match
            a, a_dot = _symmetrize(a), _symmetrize(a_dot)
        m, n = a.shape[-2:]
        if m >= n:
            s = (p @ _H(p)) @ _H(a_dot)
            t = (_H(a_dot) @ _H(p)) @ p
            p_dot = -(p @ a_dot) @ p + s - (s @ a) @ p + t - (p @ a) @ t
        else:
            s = p @ (_H(p) @ _H(a_dot))
            t = _H(a_dot) @ (_H(p) @ p)
            p_dot = -p @ (a_dot @ p) + s - s @ (a @ p) + t - p @ (a @ t)
    return p, p_dot


def _lstsq(a: ArrayLike, b: ArrayLike, rcond: Array | float | None, *,
           numpy_resid: bool = False) -> tuple[Array, Array, Array, Array]:
    a, b = promote_dtypes_inexact(a, b)
    if a.shape[0] != b.shape[0]:
        raise ValueError("Leading dimensions of input arrays must match")
    b_orig_ndim = b.ndim
    if b_orig_ndim == 1:
        b = b[:, None]
    if a.ndim != 2:
        raise TypeError(f"{a.ndim}-dimensional array given. Array must be two-dimensional")
    if b.ndim != 2:
        raise TypeError(f"{b.ndim}-dimensional array given. Array must be one or "
                        "two-dimensional")
    m, n = a.shape
    dtype = a.dtype
    if a.size == 0:
        s = lax.full((0,), 0, a.dtype)
        rank = array(0, dtype=int)
        x = lax.full((n, *b.shape[1:]), 0, a.dtype)
    else:
        if rcond is None:
            rcond = float(dtypes.finfo(dtype).eps) * max(n, m)
        else:
            rcond = where(rcond < 0, dtypes.finfo(dtype).eps, rcond)
        u, s, vt = svd(a, full_matrices=False)
        mask = (s > 0) & (s >= array(rcond, dtype=s.dtype) * s[0])
        rank = mask.sum()
        safe_s = where(mask, s, 1).astype(a.dtype)
        s_inv = where(mask, 1 / safe_s, 0)[:, np.newaxis]
        uTb = _matmul(u.conj().T, b, precision=lax.Precision.HIGHEST)
        x = _matmul(vt.conj().T, s_inv * uTb, precision=lax.Precision.HIGHEST)
    # NumPy returns no residuals for rank-deficient or wide systems; the jitted form always
    # returns them (its shapes cannot depend on the rank).
    if numpy_resid and (rank < n or m <= n):
        resid = asarray([])
    else:
        b_estimate = _matmul(a, x, precision=lax.Precision.HIGHEST)
        resid = norm(b - b_estimate, axis=0) ** 2
    if b_orig_ndim == 1:
        x = x.ravel()
    return x, resid, rank, s


_jit_lstsq = jit(partial(_lstsq, numpy_resid=False))


def lstsq(a: ArrayLike, b: ArrayLike, rcond: float | None = None, *,
          numpy_resid: bool = False) -> tuple[Array, Array, Array, Array]:
    """``jnp.linalg.lstsq``: least-squares solution, residuals, rank and singular values
    (``numpy_resid``: residuals as NumPy gives them, possibly empty; not under ``jit``)."""
    a, b = ensure_arraylike("jnp.linalg.lstsq", a, b)
    if numpy_resid:
        return _lstsq(a, b, rcond, numpy_resid=True)
    return _jit_lstsq(a, b, rcond)


@jitted(static_argnames=("hermitian",), inline=False)
def matrix_rank(M: ArrayLike, rtol: ArrayLike | None = None, *, hermitian: bool = False,
                tol: Any = None) -> Array:
    """``jnp.linalg.matrix_rank``: the number of singular values above the tolerance."""
    M = ensure_arraylike("jnp.linalg.matrix_rank", M)
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: only one of tol or rtol may be specified.")
        rtol = tol
    M, = promote_dtypes_inexact(M)
    if M.ndim < 2:
        return (M != 0).any().astype(np.int32)
    S = svd(M, full_matrices=False, compute_uv=False, hermitian=hermitian)
    # As JAX 0.10.2: the default threshold scales with the largest singular value; an rtol
    # given is compared with the singular values as it is.
    if rtol is None:
        rtol = S.max(-1) * np.max(M.shape[-2:]).astype(S.dtype) * dtypes.finfo(S.dtype).eps
    rtol = expand_dims(rtol, np.ndim(rtol))
    return _sum(S > rtol, axis=-1)


@jitted(static_argnames=("p",), inline=False)
def cond(x: ArrayLike, p: Any = None) -> Array:
    """``jnp.linalg.cond``: the condition number in the ``p``-norm (2-norm by default)."""
    arr = ensure_arraylike("cond", x)
    if arr.ndim < 2:
        raise ValueError(f"jnp.linalg.cond: input array must be at least 2D; got "
                         f"arr.shape={arr.shape}")
    if arr.shape[-1] == 0 or arr.shape[-2] == 0:
        raise ValueError(f"jnp.linalg.cond: input array must not be empty; got "
                         f"arr.shape={arr.shape}")
    if p is None or p == 2:
        s = svdvals(x)
        return s[..., 0] / s[..., -1]
    if p == -2:
        s = svdvals(x)
        r = s[..., -1] / s[..., 0]
    else:
        if arr.shape[-2] != arr.shape[-1]:
            raise ValueError(f"jnp.linalg.cond: for p={p}, array must be square; got "
                             f"arr.shape={arr.shape}")
        r = multiply(norm(x, ord=p, axis=(-2, -1)), norm(inv(x), ord=p, axis=(-2, -1)))
    # NaNs become infinities where the matrix itself has none (a singular matrix).
    return where(isnan(r) & ~isnan(x).any(axis=(-2, -1)), np.inf, r)


def eig(a: ArrayLike) -> EigResult:
    """``jnp.linalg.eig``: eigenvalues and right eigenvectors (columns, unit norm) of general
    square matrices, always complex; unordered. LAPACK ``geev`` through ``lax.linalg.eig``
    (CPU only)."""
    a = ensure_arraylike("jnp.linalg.eig", a)
    (a,) = promote_dtypes_inexact(a)
    w, v = lax_linalg.eig(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


@jitted(inline=False)
def eigvals(a: ArrayLike) -> Array:
    """``jnp.linalg.eigvals``: the (complex, unordered) eigenvalues of general square
    matrices. Differentiable (the eigenvalue derivative of ``lax.linalg.eig``)."""
    a = ensure_arraylike("jnp.linalg.eigvals", a)
    (a,) = promote_dtypes_inexact(a)
    return lax_linalg.eig(a, compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)[0]

