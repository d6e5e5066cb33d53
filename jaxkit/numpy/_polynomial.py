"""Polynomials (coefficients highest power first, as NumPy's ``poly1d`` functions):
``polyval``, ``polyadd``, ``polysub``, ``polymul``, ``polydiv``, ``polyder``, ``polyint``,
``polyfit``, ``poly``; and 1-D ``convolve``/``correlate`` (one ``lax.conv_general_dilated``)."""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.numpy._jitted import jitted
from jaxkit.runtime.array import Array
from jaxkit.numpy import linalg
from jaxkit.numpy._creation import arange, array, full, ones, zeros
from jaxkit.numpy._contractions import diag
from jaxkit.numpy._index_update import scatter_update
from jaxkit.numpy._indexing import getitem
from jaxkit.numpy._elementwise import _const
from jaxkit.numpy._promotion import (
    ensure_arraylike,
    promote_dtypes,
    promote_dtypes_inexact,
)
from jaxkit.numpy._reductions import all as all_
from jaxkit.numpy._reductions import argmin, prod
from jaxkit.numpy._reductions import sum as sum_
from jaxkit.numpy._shape import atleast_1d, concatenate, flip, roll, trim_zeros
from jaxkit.numpy._ufuncs import power
from jaxkit.numpy._ufuncs import (
    conj,
    maximum,
    multiply,
    negative,
    sqrt,
    subtract,
    true_divide,
    where3,
)
from jaxkit.typing import ArrayLike


@jitted(static_argnames=("mode", "op", "precision", "preferred_element_type"), inline=False)
def _conv(x: Array, y: Array, mode: str, op: str, precision: Any,
          preferred_element_type: Any = None) -> Array:
    # A plain jit, as JAX's: one 1-D conv_general_dilated of the longer operand by the
    # (flipped, for a convolution) shorter one.
    if np.ndim(x) != 1 or np.ndim(y) != 1:
        raise ValueError(f"{op}() only support 1-dimensional inputs.")
    if preferred_element_type is None:
        x, y = promote_dtypes_inexact(x, y)
    else:
        x, y = promote_dtypes(x, y)
    if x.shape[0] == 0 or y.shape[0] == 0:
        raise ValueError(f"{op}: inputs cannot be empty, got shapes {x.shape} and {y.shape}.")
    out_order = slice(None)
    if op == "correlate":
        y = conj(y)
        if x.shape[0] < y.shape[0]:
            x, y = y, x
            out_order = slice(None, None, -1)  # the correlation of the swapped pair, reversed
    else:
        if x.shape[0] < y.shape[0]:
            x, y = y, x
        y = flip(y)
    n = y.shape[0]
    if mode == "valid":
        padding = [(0, 0)]
    elif mode == "same":
        padding = [(n // 2, n - n // 2 - 1)]
    elif mode == "full":
        padding = [(n - 1, n - 1)]
    else:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")
    out = lax.conv_general_dilated(x[None, None, :], y[None, None, :], (1,), padding,
                                   precision=precision,
                                   preferred_element_type=preferred_element_type)
    return out[0, 0, out_order]


@jitted(static_argnames=("mode", "precision", "preferred_element_type"), inline=False)
def convolve(a: ArrayLike, v: ArrayLike, mode: str = "full", *, precision: Any = None,
             preferred_element_type: Any = None) -> Array:
    """``jnp.convolve``: discrete linear convolution of two 1-D arrays."""
    a, v = ensure_arraylike("convolve", a, v)
    return _conv(a, v, mode=mode, op="convolve", precision=precision,
                 preferred_element_type=preferred_element_type)


@jitted(static_argnames=("mode", "precision", "preferred_element_type"), inline=False)
def correlate(a: ArrayLike, v: ArrayLike, mode: str = "valid", *, precision: Any = None,
              preferred_element_type: Any = None) -> Array:
    """``jnp.correlate``: cross-correlation of two 1-D arrays."""
    a, v = ensure_arraylike("correlate", a, v)
    return _conv(a, v, mode=mode, op="correlate", precision=precision,
                 preferred_element_type=preferred_element_type)


@jitted(static_argnames=("unroll",), inline=False)
def polyval(p: ArrayLike, x: ArrayLike, *, unroll: int = 16) -> Array:
    """``jnp.polyval``: the polynomial ``p`` at ``x`` (Horner's scheme)."""
    p, x = ensure_arraylike("polyval", p, x)
    p, x = promote_dtypes(p, x)
    shape = lax.broadcast_shapes(p.shape[1:], x.shape)
    y = lax.full_like(x, 0, shape=shape, dtype=x.dtype)
    # Horner's scheme as one scan over the coefficients (JAX's: one loop body, unrolled
    # ``unroll`` times when compiled).
    y, _ = lax.scan(lambda y, c: (y * x + c, None), y, p, unroll=unroll)
    return y


@jitted(inline=False)
def polyadd(a1: ArrayLike, a2: ArrayLike) -> Array:
    """``jnp.polyadd``: the sum of two polynomials."""
    a1, a2 = ensure_arraylike("polyadd", a1, a2)
    a1, a2 = promote_dtypes(a1, a2)
    if a2.shape[0] <= a1.shape[0]:
        return scatter_update(a1, slice(-a2.shape[0], None), a2, lax.scatter_add, True, True)
    return scatter_update(a2, slice(-a1.shape[0], None), a1, lax.scatter_add, True, True)


@jitted(inline=False)
def polysub(a1: ArrayLike, a2: ArrayLike) -> Array:
    """``jnp.polysub``: the difference of two polynomials."""
    a1, a2 = ensure_arraylike("polysub", a1, a2)
    a1, a2 = promote_dtypes(a1, a2)
    return polyadd(a1, negative(a2))


def polymul(a1: ArrayLike, a2: ArrayLike, *, trim_leading_zeros: bool = False) -> Array:
    """``jnp.polymul``: the product of two polynomials."""
    a1, a2 = ensure_arraylike("polymul", a1, a2)
    a1, a2 = promote_dtypes_inexact(a1, a2)
    if trim_leading_zeros and (a1.shape[0] > 1 or a2.shape[0] > 1):
        a1, a2 = trim_zeros(a1, trim="f"), trim_zeros(a2, trim="f")
    if a1.shape[0] == 0:
        a1 = zeros(1, dtype=a2.dtype)
    if a2.shape[0] == 0:
        a2 = zeros(1, dtype=a1.dtype)
    return convolve(a1, a2, mode="full")


def polydiv(u: ArrayLike, v: ArrayLike, *, trim_leading_zeros: bool = False
            ) -> tuple[Array, Array]:
    """``jnp.polydiv``: quotient and remainder of polynomial division."""
    u, v = ensure_arraylike("polydiv", u, v)
    u, v = promote_dtypes_inexact(u, v)
    m, n = u.shape[0] - 1, v.shape[0] - 1
    scale = true_divide(1.0, getitem(v, 0))
    q = zeros(max(m - n + 1, 1), dtype=u.dtype)
    for k in range(m - n + 1):
        d = multiply(scale, getitem(u, k))
        q = scatter_update(q, k, d, lax.scatter, True, True)
        u = scatter_update(u, slice(k, k + n + 1), multiply(negative(d), v), lax.scatter_add,
                           True, True)
    if trim_leading_zeros:
        raise NotImplementedError("polydiv(trim_leading_zeros=True) needs concrete values; "
                                  "trim the result with jnp.trim_zeros instead.")
    return q, u


@jitted(static_argnames=("m",), inline=False)
def polyder(p: ArrayLike, m: int = 1) -> Array:
    """``jnp.polyder``: the ``m``-th derivative of a polynomial."""
    p = ensure_arraylike("polyder", p)
    m = operator.index(core.concrete_or_error(m, "'m' argument of jnp.polyder"))
    p, = promote_dtypes_inexact(p)
    if m < 0:
        raise ValueError("Order of derivative must be positive")
    if m == 0:
        return p
    # JAX's: the falling factorials (k)(k-1)...(k-m+1) for k = n-1 ... m, as a product over
    # a grid (traced, so its equations are JAX's); ``p`` is sliced along its first axis.
    coeff = (arange(m, len(p), dtype=p.dtype)[np.newaxis]
             - arange(m, dtype=p.dtype)[:, np.newaxis]).prod(0)
    return p[:-m] * coeff[::-1]


@jitted(static_argnames=("m",), inline=False)
def polyint(p: ArrayLike, m: int = 1, k: ArrayLike | None = None) -> Array:
    """``jnp.polyint``: the ``m``-th antiderivative, with integration constants ``k``."""
    m = operator.index(core.concrete_or_error(m, "'m' argument of jnp.polyint"))
    k = 0 if k is None else k
    p, k = ensure_arraylike("polyint", p, k)
    p, k = promote_dtypes_inexact(p, k)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    k = atleast_1d(k)
    if k.shape[0] == 1:
        k = full((m,), getitem(k, 0))
    if k.shape != (m,):
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or m.")
    if m == 0:
        return p
    grid = subtract(lax.expand_dims(arange(p.shape[0] + m, dtype=p.dtype), (0,)),
                    lax.expand_dims(arange(m, dtype=p.dtype), (1,)))
    coeff = lax.rev(prod(maximum(1, grid), axis=0), (0,))
    return true_divide(concatenate((p, k)), coeff)


@jitted(static_argnames=("deg", "rcond", "full", "cov"), inline=False)
def polyfit(x: ArrayLike, y: ArrayLike, deg: int, rcond: float | None = None,
            full: bool = False, w: ArrayLike | None = None, cov: bool = False) -> Any:
    """``jnp.polyfit``: least-squares polynomial coefficients (highest power first)."""
    x, y = ensure_arraylike("polyfit", x, y)
    deg = operator.index(core.concrete_or_error(deg, "deg must be int"))
    order = deg + 1
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if x.ndim != 1:
        raise TypeError("expected 1D vector for x")
    if x.size == 0:
        raise TypeError("expected non-empty vector for x")
    if y.ndim < 1 or y.ndim > 2:
        raise TypeError("expected 1D or 2D array for y")
    if x.shape[0] != y.shape[0]:
        raise TypeError("expected x and y to have same length")
    x, = promote_dtypes_inexact(x)
    if rcond is None:
        rcond = x.shape[0] * float(np.finfo(np.dtype(x.dtype)).eps)
    rcond = float(core.concrete_or_error(rcond, "rcond must be float"))
    lhs = vander(x, order)
    rhs = y
    if w is not None:
        w, = promote_dtypes_inexact(ensure_arraylike("polyfit", w))
        if w.ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if w.shape[0] != y.shape[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = multiply(lhs, lax.expand_dims(w, (1,)))
        rhs = multiply(rhs, lax.expand_dims(w, (1,)) if rhs.ndim == 2 else w)
    scale = sqrt(sum_(multiply(lhs, lhs), axis=0))
    lhs = true_divide(lhs, lax.expand_dims(scale, (0,)))
    c, resids, rank, s = linalg.lstsq(lhs, rhs, rcond)
    c = lax.transpose(true_divide(lax.transpose(c, tuple(range(c.ndim))[::-1]), scale),
                      tuple(range(c.ndim))[::-1])
    if full:
        return c, resids, rank, s, np.asarray(rcond, np.float32)
    if cov:
        raise NotImplementedError("polyfit(cov=True) is not supported by jaxkit.")
    return c


@jitted(inline=False)
def poly(seq_of_zeros: ArrayLike) -> Array:
    """``jnp.poly``: the coefficients of the polynomial with the given roots (1-D input)."""
    seq = ensure_arraylike("poly", seq_of_zeros)
    seq, = promote_dtypes_inexact(seq)
    seq = atleast_1d(seq)
    if seq.ndim == 2 and seq.shape[0] == seq.shape[1] and seq.shape[0] != 0:
        seq = linalg.eigvals(seq)  # the characteristic polynomial
    if seq.ndim != 1:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    dt = seq.dtype
    if seq.shape[0] == 0:
        return ones((), dtype=dt)
    a = ones((1,), dtype=dt)
    for k in range(seq.shape[0]):
        a = convolve(a, array([1, -seq[k]], dtype=dt), mode="full")
    return a


@jitted(inline=False)
def _roots_no_zeros(p: Array) -> Array:
    """The eigenvalues of the companion matrix of ``p`` (whose leading coefficient is
    nonzero): a plain jit, as JAX's."""
    if p.size < 2:
        return array([], dtype=dtypes.to_complex_dtype(p.dtype))
    a = diag(ones((p.size - 2,), p.dtype), -1)
    a = a.at[0, :].set(-p[1:] / p[0])
    return linalg.eigvals(a)


@jitted(inline=False)
def _roots_with_zeros(p: Array, num_leading_zeros: Array) -> Array:
    # A plain jit, as JAX's. All zeros would make the companion matrix singular: ones instead.
    p = where3(len(p) == num_leading_zeros, 1.0, p)
    # The leading zeros rolled to the end give zero roots: sort them last, then make NaN as
    # many roots as there were leading zeros.
    roots = _roots_no_zeros(roll(p, -num_leading_zeros))
    roots = lax.sort_key_val(roots == 0, roots)[1]
    return where3(arange(roots.size) < roots.size - num_leading_zeros, roots,
                  complex(np.nan, np.nan))


def roots(p: ArrayLike, *, strip_zeros: bool = True) -> Array:
    """``jnp.roots``: the (complex) roots of the polynomial with coefficients ``p`` (highest
    degree first), as the eigenvalues of its companion matrix. With ``strip_zeros=False``
    (needed under ``jit``), leading zeros give NaN roots instead of being removed."""
    p = ensure_arraylike("roots", p)
    (p,) = promote_dtypes_inexact(p)
    p = atleast_1d(p)
    if p.ndim != 1:
        raise ValueError("Input must be a rank-1 array.")
    if p.size < 2:
        return array([], dtype=dtypes.to_complex_dtype(p.dtype))
    num_leading_zeros = where3(all_(p == 0), len(p), argmin(p == 0))
    if strip_zeros:
        num_leading_zeros = int(core.concrete_or_error(
            num_leading_zeros, "The error occurred in the jnp.roots() function. To use this "
            "within a JIT-compiled context, pass strip_zeros=False, but be aware that leading "
            "zeros will result in some returned roots being set to NaN."))
        return _roots_no_zeros(p[num_leading_zeros:])
    return _roots_with_zeros(p, num_leading_zeros)


@jitted(static_argnames=("N", "increasing"), inline=False)
def vander(x: ArrayLike, N: int | None = None, increasing: bool = False) -> Array:
    """``jnp.vander``: the Vandermonde matrix of the 1-D ``x``."""
    x = ensure_arraylike("vander", x)
    if x.ndim != 1:
        raise ValueError("x must be a one-dimensional array")
    N = x.shape[0] if N is None else operator.index(core.concrete_or_error(
        N, "'N' argument of jnp.vander()"))
    if N < 0:
        raise ValueError("N must be nonnegative")
    iota = lax.iota(x.dtype, N)
    if not increasing:
        iota = lax.sub(_const(iota, N - 1), iota)
    return power(lax.expand_dims(x, (1,)), lax.expand_dims(iota, (0,)))
