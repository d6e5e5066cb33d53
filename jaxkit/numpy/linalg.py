"""``jaxkit.numpy.linalg``: JAX's ``jax.numpy.linalg``.

Norms, products and the functions derived from them are ordinary jnp code. Decompositions
(det, solve, inv, cholesky, qr, eigh, svd and what is built on them: pinv, lstsq,
matrix_rank, cond, ...) use the lax-level algorithms of ``_linalg_algorithms`` until jaxkit.lax
has linear-algebra primitives. ``eigh`` and ``svd`` support real matrices only. ``eig`` /
``eigvals`` (general eigenproblems) use the LAPACK-backed ``lax.linalg.eig`` primitive (CPU).
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.runtime.array import Array
from jaxkit.transforms.custom_derivatives import custom_jvp
from jaxkit.lax import linalg as lax_linalg
from jaxkit.numpy import _linalg_algorithms as alg
from jaxkit.numpy._contractions import cross as _cross
from jaxkit.numpy._contractions import diagonal as _diagonal
from jaxkit.numpy._contractions import matmul as _matmul
from jaxkit.numpy._contractions import outer as _outer
from jaxkit.numpy._contractions import tensordot as _tensordot
from jaxkit.numpy._contractions import trace as _trace
from jaxkit.numpy._contractions import vecdot as _vecdot
from jaxkit.numpy._promotion import (
    broadcast_shapes,
    broadcast_to_shape,
    canonicalize_axis,
    convert,
    ensure_arraylike,
    promote_dtypes_inexact,
)
from jaxkit.numpy._reductions import amax, amin
from jaxkit.numpy._reductions import sum as _sum
from jaxkit.numpy._shape import expand_dims, moveaxis, reshape
from jaxkit.numpy._shape import matrix_transpose as _matrix_transpose
from jaxkit.numpy._ufuncs import abs as _abs
from jaxkit.numpy._ufuncs import (
    conj,
    divide,
    greater_equal,
    isnan,
    log,
    multiply,
    power,
    real,
    sqrt,
    subtract,
    where3,
)
from jaxkit.typing import ArrayLike

__all__ = ["cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh",
           "inv", "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank",
           "matrix_transpose", "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve",
           "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot",
           "vector_norm"]


class EigResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class EighResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class QRResult(NamedTuple):
    Q: Array
    R: Array


class SlogdetResult(NamedTuple):
    sign: Array
    logabsdet: Array


class SVDResult(NamedTuple):
    U: Array
    S: Array
    Vh: Array


def _square(name: str, a: ArrayLike) -> Array:
    a = ensure_arraylike(name, a)
    a, = promote_dtypes_inexact(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"Argument to {name}() must have shape [..., n, n], got {a.shape}.")
    return a


def _H(x: Array) -> Array:
    return conj(_matrix_transpose(x))


def _eye_like(a: Array, n: int) -> Array:
    eye = lax.convert_element_type(lax.eq(lax.broadcasted_iota(np.int32, (n, n), 0),
                                          lax.broadcasted_iota(np.int32, (n, n), 1)), a.dtype)
    return broadcast_to_shape(eye, a.shape[:-2] + (n, n))


def _real_only(name: str, a: Array) -> None:
    if dtypes.issubdtype(a.dtype, np.complexfloating):
        raise NotImplementedError(f"jnp.linalg.{name} of complex matrices is not supported by "
                                  "jaxkit yet (it needs a lax linear-algebra primitive).")


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
        return _eye_like(arr, arr.shape[-1]) if arr.dtype != np.bool_ else \
            lax.convert_element_type(_eye_like(lax.convert_element_type(arr, np.int32),
                                               arr.shape[-1]), np.bool_)
    if n < 0:
        arr = inv(arr)
        n = -n
    if n == 1:
        return arr
    result = None
    z = arr
    while n > 0:
        if n % 2:
            result = z if result is None else _matmul(result, z)
        n //= 2
        if n:
            z = _matmul(z, z)
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
              preferred_element_type: Any = None) -> Array:
    """``jnp.linalg.tensordot``: ``jnp.tensordot``."""
    return _tensordot(x1, x2, axes, precision=precision,
                      preferred_element_type=preferred_element_type)


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
# Determinants, solves, inverses
# --------------------------------------------------------------------------------------------

def _diag_of(u: Array) -> Array:
    n = u.shape[-1]
    mask = broadcast_to_shape(lax.eq(lax.broadcasted_iota(np.int32, (n, n), 0),
                                     lax.broadcasted_iota(np.int32, (n, n), 1)), u.shape)
    return lax.reduce_sum(lax.select(mask, u, lax.full_like(u, 0)), (u.ndim - 1,))


@custom_jvp
def _det(a: Array) -> Array:
    u, parity = alg.lu_eliminate(a)
    d = lax.reduce_prod(_diag_of(u), (u.ndim - 2,))
    return lax.select(parity, lax.neg(d), d)


@_det.defjvp
def _det_jvp(primals: tuple, tangents: tuple) -> tuple[Array, Array]:
    (a,), (g,) = primals, tangents
    y = _det(a)
    return y, multiply(y, _trace_last2(solve(a, g)))


def _trace_last2(x: Array) -> Array:
    return _trace(x, axis1=-2, axis2=-1)


def det(a: ArrayLike) -> Array:
    """``jnp.linalg.det``: the determinant (LU with partial pivoting)."""
    return _det(_square("det", a))


@custom_jvp
def _slogdet(a: Array) -> tuple[Array, Array]:
    u, parity = alg.lu_eliminate(a)
    diag = _diag_of(u)
    absd = lax.abs(diag)
    last = diag.ndim - 1
    logabs = lax.reduce_sum(log(absd), (last,))
    is_zero = lax.reduce_or(lax.eq(absd, np.asarray(0, absd.dtype)[()]), (last,))
    if dtypes.issubdtype(a.dtype, np.complexfloating):
        safe = lax.select(lax.eq(absd, np.asarray(0, absd.dtype)[()]), lax.full_like(absd, 1),
                          absd)
        sign = lax.reduce_prod(lax.div(diag, lax.convert_element_type(safe, a.dtype)), (last,))
    else:
        sign = lax.reduce_prod(lax.sign(diag), (last,))
    sign = lax.select(parity, lax.neg(sign), sign)
    sign = lax.select(is_zero, lax.full_like(sign, 0), sign)
    logabs = lax.select(is_zero, lax.full_like(logabs, -np.inf), logabs)
    return sign, logabs


@_slogdet.defjvp
def _slogdet_jvp(primals: tuple, tangents: tuple) -> tuple[tuple, tuple]:
    (a,), (g,) = primals, tangents
    sign, logabs = _slogdet(a)
    dlog = _trace_last2(solve(a, g))
    if dtypes.issubdtype(a.dtype, np.complexfloating):
        dsign = multiply(lax.sub(dlog, lax.convert_element_type(real(dlog), a.dtype)), sign)
        dlog = real(dlog)
    else:
        dsign = lax.full_like(sign, 0)
    return (sign, logabs), (dsign, dlog)


def slogdet(a: ArrayLike, *, method: str | None = None) -> SlogdetResult:
    """``jnp.linalg.slogdet``: sign and log of the absolute value of the determinant."""
    a = _square("slogdet", a)
    if method not in (None, "lu"):
        raise ValueError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' "
                         "(`None`).")
    return SlogdetResult(*_slogdet(a))


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
        return lax.squeeze(alg.gauss_jordan_solve(a, bm), (a.ndim - 1,))
    if b.shape[-2] != a.shape[-1]:
        raise ValueError(f"solve: b.shape={b.shape} does not match a.shape={a.shape}")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = broadcast_to_shape(a, batch + a.shape[-2:])
    b = broadcast_to_shape(b, batch + b.shape[-2:])
    return alg.gauss_jordan_solve(a, b)


def inv(a: ArrayLike) -> Array:
    """``jnp.linalg.inv``: the matrix inverse (Gauss-Jordan with partial pivoting)."""
    a = _square("inv", a)
    return alg.gauss_jordan_solve(a, _eye_like(a, a.shape[-1]))


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


# --------------------------------------------------------------------------------------------
# Decompositions
# --------------------------------------------------------------------------------------------

def cholesky(a: ArrayLike, *, upper: bool = False, symmetrize_input: bool = True) -> Array:
    """``jnp.linalg.cholesky``: the lower (or ``upper``) Cholesky factor; NaNs if ``a`` is
    not positive definite."""
    a = _square("cholesky", a)
    if symmetrize_input:
        a = divide(lax.add(a, _H(a)), 2)
    L = _cholesky(a)
    return _H(L) if upper else L


@custom_jvp
def _cholesky(a: Array) -> Array:
    return alg.cholesky(a)


@_cholesky.defjvp
def _cholesky_jvp(primals: tuple, tangents: tuple) -> tuple[Array, Array]:
    # Forward-mode rule of https://arxiv.org/pdf/1602.07527.pdf, as JAX.
    (a,), (sigma_dot,) = primals, tangents
    L = _cholesky(a)
    tmp = _H(solve(L, _H(sigma_dot)))          # sigma_dot @ L^{-H}
    y = solve(L, tmp)                          # L^{-1} sigma_dot L^{-H}
    n = a.shape[-1]
    rows = lax.broadcasted_iota(np.int32, (n, n), 0)
    cols = lax.broadcasted_iota(np.int32, (n, n), 1)
    half = where3(lax.eq(rows, cols), 0.5, where3(lax.gt(rows, cols), 1.0, 0.0))
    phi = multiply(y, convert(half, y.dtype))  # lower triangle, diagonal halved
    return L, _matmul(L, phi, precision=lax.Precision.HIGHEST)


def qr(a: ArrayLike, mode: str = "reduced") -> Any:
    """``jnp.linalg.qr``: ``Q`` with orthonormal columns and upper-triangular ``R``
    (``mode`` 'reduced', 'complete' or 'r')."""
    a = ensure_arraylike("jnp.linalg.qr", a)
    a, = promote_dtypes_inexact(a)
    if a.ndim < 2:
        raise ValueError("Argument to jnp.linalg.qr must have ndims >= 2")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    q, r = _qr(a, mode != "complete")
    if mode == "r":
        return r
    return QRResult(q, r)


@partial(custom_jvp, nondiff_argnums=(1,))
def _qr(a: Array, reduced: bool) -> tuple[Array, Array]:
    m, n = a.shape[-2:]
    q, r = alg.householder_qr(a)
    if reduced and m > n:
        q = lax.slice_in_dim(q, 0, n, axis=q.ndim - 1)
        r = lax.slice_in_dim(r, 0, n, axis=r.ndim - 2)
    return q, r


@_qr.defjvp
def _qr_jvp(reduced: bool, primals: tuple, tangents: tuple) -> tuple[tuple, tuple]:
    # See j-towns.github.io/papers/qr-derivative.pdf (JAX's rule).
    (x,), (dx,) = primals, tangents
    m, n = x.shape[-2:]
    if m < n or (not reduced and m != n):
        raise NotImplementedError("Unimplemented case of QR decomposition derivative")
    q, r = _qr(x, reduced)
    dx_rinv = _H(solve(_H(r), _H(dx)))        # dx @ r^{-1}
    qt_dx_rinv = _matmul(_H(q), dx_rinv, precision=lax.Precision.HIGHEST)
    rows = lax.broadcasted_iota(np.int32, (n, n), 0)
    cols = lax.broadcasted_iota(np.int32, (n, n), 1)
    lower = where3(broadcast_to_shape(lax.gt(rows, cols), qt_dx_rinv.shape), qt_dx_rinv, 0)
    do = lax.sub(lower, _H(lower))
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        eye = broadcast_to_shape(lax.eq(rows, cols), qt_dx_rinv.shape)
        im = lax.sub(qt_dx_rinv, lax.convert_element_type(real(qt_dx_rinv), x.dtype))
        do = lax.add(do, where3(eye, im, 0))
    dq = lax.add(_matmul(q, lax.sub(do, qt_dx_rinv), precision=lax.Precision.HIGHEST), dx_rinv)
    dr = _matmul(lax.sub(qt_dx_rinv, do), r, precision=lax.Precision.HIGHEST)
    return (q, r), (dq, dr)


def eigh(a: ArrayLike, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """``jnp.linalg.eigh``: eigenvalues (ascending) and eigenvectors of a real symmetric
    matrix (cyclic Jacobi)."""
    a = _square("eigh", a)
    _real_only("eigh", a)
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {UPLO}")
    if symmetrize_input:
        a = divide(lax.add(a, _H(a)), 2)
    else:
        n = a.shape[-1]
        lower = lax.ge(lax.broadcasted_iota(np.int32, (n, n), 0),
                       lax.broadcasted_iota(np.int32, (n, n), 1))
        if UPLO == "U":
            lower = lax.bitwise_not(lax.gt(lax.broadcasted_iota(np.int32, (n, n), 0),
                                           lax.broadcasted_iota(np.int32, (n, n), 1)))
        tri = where3(broadcast_to_shape(lower, a.shape), a, 0)
        diag = where3(broadcast_to_shape(lax.eq(lax.broadcasted_iota(np.int32, (n, n), 0),
                                                lax.broadcasted_iota(np.int32, (n, n), 1)),
                                         a.shape), a, 0)
        a = lax.sub(lax.add(tri, _H(tri)), diag)
    w, v = _eigh(a)
    return EighResult(w, v)


@custom_jvp
def _eigh(a: Array) -> tuple[Array, Array]:
    return alg.jacobi_eigh(a)


@_eigh.defjvp
def _eigh_jvp(primals: tuple, tangents: tuple) -> tuple[tuple, tuple]:
    (a,), (a_dot,) = primals, tangents
    w, v = _eigh(a)
    n = a.shape[-1]
    eye = _eye_like(a, n)
    # F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it (JAX's rule, NaN-free).
    diffs = subtract(lax.expand_dims(w, (w.ndim - 1,)), lax.expand_dims(w, (w.ndim,)))
    f = lax.sub(lax.integer_pow(lax.add(eye, convert(diffs, eye.dtype)), -1), eye)
    hp = lax.Precision.HIGHEST
    vdag_adot_v = _matmul(_matmul(_H(v), a_dot, precision=hp), v, precision=hp)
    dv = _matmul(v, lax.mul(f, vdag_adot_v), precision=hp)
    dw = real(_diagonal(vdag_adot_v, axis1=-2, axis2=-1))
    return (w, v), (dw, dv)


def eigvalsh(a: ArrayLike, UPLO: str | None = "L", *, symmetrize_input: bool = True) -> Array:
    """``jnp.linalg.eigvalsh``: the eigenvalues (ascending) of a real symmetric matrix."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True,
        hermitian: bool = False, subset_by_index: tuple[int, int] | None = None) -> Any:
    """``jnp.linalg.svd``: ``a = U @ diag(S) @ Vh`` of a real matrix (one-sided Jacobi);
    singular values in descending order."""
    a = ensure_arraylike("jnp.linalg.svd", a)
    a, = promote_dtypes_inexact(a)
    if a.ndim < 2:
        raise ValueError("Argument to jnp.linalg.svd must have ndims >= 2")
    _real_only("svd", a)
    if subset_by_index is not None:
        raise NotImplementedError("svd(subset_by_index=...) is not supported by jaxkit.")
    if not compute_uv:
        return _svdvals(a)
    if full_matrices and a.shape[-2] != a.shape[-1]:
        return SVDResult(*_svd_full(a))
    return SVDResult(*_svd_thin(a))


def _svd_impl(a: Array, full_matrices: bool) -> tuple[Array, Array, Array]:
    wide = a.shape[-2] < a.shape[-1]
    work = alg._swap_last2(a) if wide else a
    u, s, v = alg.jacobi_svd(work)
    u = alg.complete_basis(u, s, full_matrices)
    if wide:
        u, v = v, u
    return u, s, alg._swap_last2(v)


@custom_jvp
def _svdvals(a: Array) -> Array:
    return _svd_impl(a, False)[1]


@_svdvals.defjvp
def _svdvals_jvp(primals: tuple, tangents: tuple) -> tuple[Array, Array]:
    (a,), (da,) = primals, tangents
    u, s, vh = _svd_thin(a)
    hp = lax.Precision.HIGHEST
    ds = real(_diagonal(_matmul(_matmul(_H(u), da, precision=hp), _H(vh), precision=hp),
                        axis1=-2, axis2=-1))
    return s, ds


@custom_jvp
def _svd_full(a: Array) -> tuple[Array, Array, Array]:
    return _svd_impl(a, True)


@_svd_full.defjvp
def _svd_full_jvp(primals: tuple, tangents: tuple) -> tuple:
    raise NotImplementedError("Singular value decomposition JVP not implemented for full "
                              "matrices")


@custom_jvp
def _svd_thin(a: Array) -> tuple[Array, Array, Array]:
    return _svd_impl(a, False)


@_svd_thin.defjvp
def _svd_thin_jvp(primals: tuple, tangents: tuple) -> tuple[tuple, tuple]:
    # JAX's rule (thin SVD).
    (a,), (da,) = primals, tangents
    u, s, vt = _svd_thin(a)
    hp = lax.Precision.HIGHEST
    mm = lambda x, y: _matmul(x, y, precision=hp)
    ut, v = _H(u), _H(vt)
    s_dim = lax.expand_dims(s, (s.ndim - 1,))
    ds_full = mm(mm(ut, da), v)
    ds = real(_diagonal(ds_full, axis1=-2, axis2=-1))
    k = s.shape[-1]
    eye = lax.convert_element_type(lax.eq(lax.broadcasted_iota(np.int32, (k, k), 0),
                                          lax.broadcasted_iota(np.int32, (k, k), 1)), s.dtype)
    s_t = _matrix_transpose(s_dim)
    s_diffs = multiply(lax.add(broadcast_to_shape(s_dim, s_dim.shape[:-2] + (k, k)),
                               broadcast_to_shape(s_t, s_dim.shape[:-2] + (k, k))),
                       lax.sub(broadcast_to_shape(s_dim, s_dim.shape[:-2] + (k, k)),
                               broadcast_to_shape(s_t, s_dim.shape[:-2] + (k, k))))
    eye_b = broadcast_to_shape(eye, s_diffs.shape)
    f = lax.sub(divide(1, lax.add(s_diffs, eye_b)), eye_b)
    dss = multiply(convert(s_dim, a.dtype), ds_full)
    sds = multiply(convert(s_t, a.dtype), ds_full)
    s_zeros = convert(lax.eq(s, np.asarray(0, s.dtype)[()]), s.dtype)
    s_inv = lax.sub(divide(1, lax.add(s, s_zeros)), s_zeros)
    s_inv_mat = multiply(eye_b, lax.expand_dims(s_inv, (s_inv.ndim - 1,)))
    dudv_diag = multiply(multiply(0.5, lax.sub(ds_full, _H(ds_full))),
                         convert(s_inv_mat, a.dtype))
    fc = convert(f, a.dtype)
    du = mm(u, lax.add(multiply(fc, lax.add(dss, _H(dss))), dudv_diag))
    dv = mm(v, multiply(fc, lax.add(sds, _H(sds))))
    m, n = a.shape[-2:]
    if m > n:
        dav = mm(da, v)
        du = lax.add(du, divide(lax.sub(dav, mm(u, mm(ut, dav))), convert(s_dim, a.dtype)))
    if n > m:
        dahu = mm(_H(da), u)
        dv = lax.add(dv, divide(lax.sub(dahu, mm(v, mm(vt, dahu))), convert(s_dim, a.dtype)))
    return (u, s, vt), (du, ds, _H(dv))


def svdvals(x: ArrayLike, /) -> Array:
    """``jnp.linalg.svdvals``: the singular values, descending."""
    return svd(x, compute_uv=False)


def pinv(a: ArrayLike, rtol: ArrayLike | None = None, hermitian: bool = False, *,
         rcond: ArrayLike | None = None) -> Array:
    """``jnp.linalg.pinv``: the Moore-Penrose pseudo-inverse (SVD, small singular values
    below ``rtol * largest`` dropped)."""
    arr = ensure_arraylike("jnp.linalg.pinv", a)
    arr, = promote_dtypes_inexact(arr)
    if rcond is not None:
        rtol = rcond
    m, n = arr.shape[-2:]
    if m == 0 or n == 0:
        return lax.full(arr.shape[:-2] + (n, m), 0, arr.dtype)
    arr = conj(arr)
    if rtol is None:
        rtol = 10.0 * max(m, n) * float(dtypes.finfo(arr.dtype).eps)
    u, s, vh = svd(arr, full_matrices=False, hermitian=hermitian)
    rtol_arr = convert(ensure_arraylike("pinv", rtol), s.dtype)
    cutoff = multiply(expand_dims(rtol_arr, -1) if np.ndim(rtol_arr) else rtol_arr,
                      lax.slice_in_dim(s, 0, 1, axis=s.ndim - 1))
    s = where3(lax.gt(s, broadcast_to_shape(cutoff, s.shape)), s, np.inf)
    res = _matmul(_matrix_transpose(vh), divide(_matrix_transpose(u), expand_dims(s, -1)),
                  precision=lax.Precision.HIGHEST)
    return convert(res, arr.dtype)


def lstsq(a: ArrayLike, b: ArrayLike, rcond: float | None = None, *,
          numpy_resid: bool = False) -> tuple[Array, Array, Array, Array]:
    """``jnp.linalg.lstsq``: least-squares solution, residuals, rank and singular values."""
    a, b = ensure_arraylike("jnp.linalg.lstsq", a, b)
    a, b = promote_dtypes_inexact(a, b)
    if a.shape[0] != b.shape[0]:
        raise ValueError("Leading dimensions of input arrays must match")
    b_ndim = b.ndim
    if b_ndim == 1:
        b = lax.reshape(b, (b.shape[0], 1))
    if a.ndim != 2:
        raise TypeError(f"{a.ndim}-dimensional array given. Array must be two-dimensional")
    if b.ndim != 2:
        raise TypeError(f"{b.ndim}-dimensional array given. Array must be one or "
                        "two-dimensional")
    m, n = a.shape
    dt = a.dtype
    eps = float(dtypes.finfo(dt).eps)
    rcond = eps * max(n, m) if rcond is None else (eps if rcond < 0 else rcond)
    u, s, vt = svd(a, full_matrices=False)
    mask = greater_equal(s, multiply(np.asarray(rcond, s.dtype)[()], lax.slice(s, (0,), (1,))))
    rank = _sum(mask, dtype=dtypes.default_int_dtype())
    safe_s = where3(mask, s, 1)
    s_inv = lax.expand_dims(where3(mask, divide(1, safe_s), 0), (1,))
    uTb = _matmul(_H(u), b, precision=lax.Precision.HIGHEST)
    x = _matmul(_H(vt), multiply(convert(s_inv, dt), uTb), precision=lax.Precision.HIGHEST)
    resid_val = lax.sub(b, _matmul(a, x, precision=lax.Precision.HIGHEST))
    resid = power(norm(resid_val, axis=0), 2)
    if numpy_resid:
        r = int(core.concrete_or_error(rank, "numpy_resid=True needs a concrete rank"))
        if r < n or m <= n:
            resid = lax.full((0,), 0, s.dtype)
    if b_ndim == 1:
        x = lax.reshape(x, (x.size,))
    return x, resid, rank, s


def matrix_rank(M: ArrayLike, rtol: ArrayLike | None = None, *, tol: Any = None) -> Array:
    """``jnp.linalg.matrix_rank``: the number of singular values above the tolerance."""
    arr = ensure_arraylike("jnp.linalg.matrix_rank", M)
    arr, = promote_dtypes_inexact(arr)
    if tol is not None:
        rtol = tol
    if arr.ndim < 2:
        return _sum(lax.ne(arr, np.asarray(0, arr.dtype)[()])) if arr.ndim else \
            convert(lax.ne(arr, np.asarray(0, arr.dtype)[()]), dtypes.default_int_dtype())
    s = svdvals(arr)
    if rtol is None:
        rtol_v = lax.mul(amax(s, axis=-1),
                         np.asarray(max(arr.shape[-2:]) * float(dtypes.finfo(s.dtype).eps),
                                    s.dtype)[()])
    else:
        rtol_v = multiply(amax(s, axis=-1), rtol)
    return _sum(lax.gt(s, broadcast_to_shape(expand_dims(rtol_v, -1), s.shape)), axis=-1,
                dtype=dtypes.default_int_dtype())


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
        s = svdvals(arr)
        return divide(lax.index_in_dim(s, 0, axis=s.ndim - 1, keepdims=False),
                      lax.index_in_dim(s, s.shape[-1] - 1, axis=s.ndim - 1, keepdims=False))
    if p == -2:
        s = svdvals(arr)
        return divide(lax.index_in_dim(s, s.shape[-1] - 1, axis=s.ndim - 1, keepdims=False),
                      lax.index_in_dim(s, 0, axis=s.ndim - 1, keepdims=False))
    if arr.shape[-2] != arr.shape[-1]:
        raise ValueError(f"jnp.linalg.cond: for p={p}, array must be square; got "
                         f"arr.shape={arr.shape}")
    r = multiply(norm(arr, ord=p, axis=(-2, -1)), norm(inv(arr), ord=p, axis=(-2, -1)))
    return where3(isnan(r), np.inf, r)


def eig(a: ArrayLike) -> EigResult:
    """``jnp.linalg.eig``: eigenvalues and right eigenvectors (columns, unit norm) of general
    square matrices, always complex; unordered. LAPACK ``geev`` through ``lax.linalg.eig``
    (CPU only)."""
    a = ensure_arraylike("jnp.linalg.eig", a)
    (a,) = promote_dtypes_inexact(a)
    w, v = lax_linalg.eig(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a: ArrayLike) -> Array:
    """``jnp.linalg.eigvals``: the (complex, unordered) eigenvalues of general square
    matrices. Differentiable (the eigenvalue derivative of ``lax.linalg.eig``)."""
    a = ensure_arraylike("jnp.linalg.eigvals", a)
    (a,) = promote_dtypes_inexact(a)
    return lax_linalg.eig(a, compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)[0]
