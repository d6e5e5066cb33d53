"""Differences, integration and interpolation along an axis: ``diff``, ``ediff1d``,
``gradient``, ``trapezoid``, ``interp``, ``unwrap``."""
from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.numpy._jitted import jitted
from jaxkit.runtime.array import Array
from jaxkit.numpy._creation import asarray
from jaxkit.numpy._elementwise import clip
from jaxkit.numpy._promotion import (
    broadcast_to_shape,
    canonicalize_axis,
    ensure_arraylike,
    promote_dtypes,
    promote_dtypes_inexact,
)
from jaxkit.numpy._reductions import cumsum
from jaxkit.numpy._shape import concatenate, moveaxis, ravel
from jaxkit.numpy._sorting import searchsorted
from jaxkit.numpy._ufuncs import (
    absolute,
    remainder,
    where3,
)
from jaxkit.typing import ArrayLike


@jitted(static_argnames=("n", "axis"), inline=False)
def diff(a: ArrayLike, n: int = 1, axis: int = -1, prepend: ArrayLike | None = None,
         append: ArrayLike | None = None) -> Array:
    """``jnp.diff``: the ``n``-th discrete difference along ``axis``."""
    arr = ensure_arraylike("diff", a)
    n = operator.index(core.concrete_or_error(n, "'n' argument of jnp.diff"))
    axis = operator.index(core.concrete_or_error(axis, "'axis' argument of jnp.diff"))
    if n == 0:
        return arr
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n}")
    if arr.ndim == 0:
        raise ValueError(f"diff requires input that is at least one dimensional; got {a}")
    axis = canonicalize_axis(axis, arr.ndim)
    def edge(extra: ArrayLike) -> Array:
        extra = ensure_arraylike("diff", extra)
        if not extra.ndim:
            shape = list(arr.shape)
            shape[axis] = 1
            extra = broadcast_to_shape(extra, tuple(shape))
        return extra

    combined = ([edge(prepend)] if prepend is not None else []) + [arr] + \
        ([edge(append)] if append is not None else [])
    if len(combined) > 1:
        arr = concatenate(combined, axis)
    # Basic indexing (slices with no strides in the jaxpr), as JAX's.
    hi = tuple(slice(1, None) if i == axis else slice(None) for i in range(arr.ndim))
    lo = tuple(slice(None, -1) if i == axis else slice(None) for i in range(arr.ndim))
    op = operator.ne if arr.dtype == np.bool_ else operator.sub
    for _ in range(n):
        arr = op(arr[hi], arr[lo])
    return arr


@jitted(inline=False)
def ediff1d(ary: ArrayLike, to_end: ArrayLike | None = None,
            to_begin: ArrayLike | None = None) -> Array:
    """``jnp.ediff1d``: differences of consecutive elements of the flattened array."""
    arr = ravel(ensure_arraylike("ediff1d", ary))
    n = arr.shape[0]
    result = lax.sub(lax.slice(arr, (1,), (max(n, 1),)), lax.slice(arr, (0,), (max(n - 1, 0),)))
    if to_begin is not None:
        to_begin = ensure_arraylike("ediff1d", to_begin)
        result = concatenate((ravel(lax.convert_element_type(to_begin, arr.dtype)), result))
    if to_end is not None:
        to_end = ensure_arraylike("ediff1d", to_end)
        result = concatenate((result, ravel(lax.convert_element_type(to_end, arr.dtype))))
    return result


@jitted(static_argnames=("axis",), inline=False)
def trapezoid(y: ArrayLike, x: ArrayLike | None = None, dx: ArrayLike = 1.0,
              axis: int = -1) -> Array:
    """``jnp.trapezoid``: integral of ``y`` by the trapezoidal rule."""
    if x is None:
        y = ensure_arraylike("trapezoid", y)
        y_arr, = promote_dtypes_inexact(y)
        dx_arr = asarray(dx)
        if dx_arr.ndim > 0:
            dx_arr = lax.expand_dims(dx_arr, tuple(range(y_arr.ndim - dx_arr.ndim)))
            dx_arr = moveaxis(dx_arr, axis, -1)
    else:
        y, x = ensure_arraylike("trapezoid", y, x)
        y_arr, x_arr = promote_dtypes_inexact(y, x)
        dx_arr = diff(x_arr) if x_arr.ndim == 1 else moveaxis(diff(x_arr, axis=axis), axis, -1)
    y_arr = moveaxis(y_arr, axis, -1)
    # JAX's fast path when dx is constant along the axis: the sum less half the end points.
    if dx_arr.ndim == 0 or dx_arr.shape[-1] == 1:
        dx_reduced = dx_arr if dx_arr.ndim == 0 else dx_arr[..., 0]
        return dx_reduced * (y_arr.sum(-1) - 0.5 * (y_arr[..., 0] + y_arr[..., -1]))
    return 0.5 * (dx_arr * (y_arr[..., 1:] + y_arr[..., :-1])).sum(-1)


def interp(x: ArrayLike, xp: ArrayLike, fp: ArrayLike, left: ArrayLike | str | None = None,
           right: ArrayLike | str | None = None, period: ArrayLike | None = None) -> Array:
    """``jnp.interp``: piecewise-linear interpolation of ``(xp, fp)`` at ``x``; ``left`` or
    ``right`` may be ``'extrapolate'``, ``period`` makes ``xp`` periodic."""
    # As JAX: a jit of ``_interp`` whose static arguments are those left as None or strings.
    static = tuple(name for name, value in (("left", left), ("right", right))
                   if value is None or isinstance(value, str))
    static += ("period",) if period is None else ()
    return _interp_jit(static)(x, xp, fp, left, right, period)


@functools.cache
def _interp_jit(static_argnames: tuple[str, ...]):
    return jitted(_interp, static_argnames=static_argnames, inline=False)


def _interp(x: ArrayLike, xp: ArrayLike, fp: ArrayLike, left: ArrayLike | str | None,
            right: ArrayLike | str | None, period: ArrayLike | None) -> Array:
    x, xp, fp = ensure_arraylike("interp", x, xp, fp)
    if np.shape(xp) != np.shape(fp) or np.ndim(xp) != 1:
        raise ValueError("xp and fp must be one-dimensional arrays of equal size")
    x_arr, xp_arr = promote_dtypes_inexact(x, xp)
    fp_arr, = promote_dtypes_inexact(fp)
    for name, value in (("left", left), ("right", right)):
        if isinstance(value, str) and value != "extrapolate":
            raise ValueError(f"the only valid string value of `{name}` is 'extrapolate', but "
                             f"got: {value!r}")
    if dtypes.issubdtype(x_arr.dtype, np.complexfloating):
        raise ValueError("jnp.interp: complex x values not supported.")
    if period is not None:
        if np.ndim(period) != 0:
            raise ValueError(f"period must be a scalar; got {period}")
        period = absolute(period)
        x_arr = x_arr % period
        xp_arr = xp_arr % period
        xp_arr, fp_arr = lax.sort_key_val(xp_arr, fp_arr)
        xp_arr = concatenate([xp_arr[-1:] - period, xp_arr, xp_arr[:1] + period])
        fp_arr = concatenate([fp_arr[-1:], fp_arr, fp_arr[:1]])
    i = clip(searchsorted(xp_arr, x_arr, side="right"), 1, len(xp_arr) - 1)
    df = fp_arr[i] - fp_arr[i - 1]
    dx = xp_arr[i] - xp_arr[i - 1]
    delta = x_arr - xp_arr[i - 1]
    # Where two points (nearly) coincide, the left value, without a NaN gradient.
    epsilon = np.spacing(np.finfo(xp_arr.dtype).eps)
    dx0 = lax.abs(dx) <= epsilon
    f = where3(dx0, fp_arr[i - 1], fp_arr[i - 1] + (delta / where3(dx0, 1, dx)) * df)
    if not isinstance(left, str):
        left_arr = fp_arr[0] if left is None else left  # made before the test, as JAX's
        if period is None:
            f = where3(x_arr < xp_arr[0], left_arr, f)
    if not isinstance(right, str):
        right_arr = fp_arr[-1] if right is None else right
        if period is None:
            f = where3(x_arr > xp_arr[-1], right_arr, f)
    return f


@jitted(static_argnames=("axis",), inline=False)
def unwrap(p: ArrayLike, discont: ArrayLike | None = None, axis: int = -1,
           period: ArrayLike = 2 * np.pi) -> Array:
    """``jnp.unwrap``: remove jumps larger than ``discont`` by adding multiples of
    ``period``."""
    p = ensure_arraylike("unwrap", p)
    p, promoted = promote_dtypes(p, period)
    # An array of the promoted type, as JAX's promotion returns (a Python period becomes a
    # weak literal of its own value), so that the arithmetic on it is staged as JAX's.
    period = promoted if isinstance(promoted, (Array, core.Tracer)) else \
        lax.convert_element_type(period, p.dtype, dtypes.is_weakly_typed(p))
    if dtypes.issubdtype(p.dtype, np.complexfloating):
        raise ValueError("jnp.unwrap does not support complex inputs.")
    if p.shape[axis] == 0:
        return p
    if discont is None:
        discont = period / 2
    interval = period // 2 if dtypes.issubdtype(p.dtype, np.integer) else period / 2
    dd = diff(p, axis=axis)
    ddmod = remainder(dd + interval, period) - interval
    # A jump of exactly half a period keeps its sign.
    ddmod = where3((ddmod == -interval) & (dd > 0), interval, ddmod)
    ph_correct = where3(absolute(dd) < discont, 0, ddmod - dd)
    return concatenate((lax.slice_in_dim(p, 0, 1, axis=axis),
                        lax.slice_in_dim(p, 1, None, axis=axis) + cumsum(ph_correct, axis=axis)),
                       axis=axis)


@jitted(static_argnames=("axis", "edge_order"), inline=False)
def gradient(f: ArrayLike, *varargs: ArrayLike, axis: int | Sequence[int] | None = None,
             edge_order: int | None = None) -> Any:
    """``jnp.gradient``: second-order central differences inside, first-order at the edges."""
    if edge_order is not None:
        raise NotImplementedError("The 'edge_order' argument to jnp.gradient is not supported.")
    a, *spacing = promote_dtypes_inexact(*ensure_arraylike("gradient", f, *varargs)) \
        if varargs else promote_dtypes_inexact(ensure_arraylike("gradient", f))

    def along(a: Array, h: Any, axis: int) -> Array:
        def sliced(start: int | None, stop: int | None) -> Array:
            return lax.slice_in_dim(a, start, stop, axis=axis)

        upper_edge = sliced(1, 2) - sliced(0, 1)
        lower_edge = sliced(-1, None) - sliced(-2, -1)
        if np.ndim(h) == 0:
            inner = (sliced(2, None) - sliced(None, -2)) * 0.5 / h
            lower_edge /= h
            upper_edge /= h
        elif np.ndim(h) == 1:
            if len(h) != a.shape[axis]:
                raise ValueError("Spacing arrays must have the same length as the dimension "
                                 "along which the gradient is calculated.")
            h_shape = [1] * a.ndim
            h_shape[axis] = len(h)
            h = h.reshape(h_shape)

            def sliced_x(start: int | None, stop: int | None) -> Array:
                return lax.slice_in_dim(h, start, stop, axis=axis)

            # Second-order differences for uneven spacing (NumPy's formula).
            upper_edge /= sliced_x(1, 2) - sliced_x(0, 1)
            lower_edge /= sliced_x(-1, None) - sliced_x(-2, -1)
            dx1 = sliced_x(1, -1) - sliced_x(0, -2)
            dx2 = sliced_x(2, None) - sliced_x(1, -1)
            ca = -(dx2) / (dx1 * (dx1 + dx2))
            cb = (dx2 - dx1) / (dx1 * dx2)
            cc = dx1 / (dx2 * (dx1 + dx2))
            inner = ca * sliced(0, -2) + cb * sliced(1, -1) + cc * sliced(2, None)
        else:
            raise ValueError("Spacing arrays must be 1D arrays or scalars.")
        return concatenate((upper_edge, inner, lower_edge), axis=axis)

    if axis is None:
        axes = tuple(range(a.ndim))
    else:
        axes = tuple(canonicalize_axis(ax, a.ndim)
                     for ax in ((axis,) if isinstance(axis, int) else axis))
    if not axes:
        return []
    if min(a.shape[ax] for ax in axes) < 2:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least "
                         "2 elements are required.")
    if len(spacing) == 0:
        dx: list = [1.0] * len(axes)
    elif len(spacing) == 1:
        dx = list(spacing) * len(axes)
    elif len(spacing) == len(axes):
        dx = list(spacing)
    else:
        raise TypeError(f"Invalid number of spacing arguments {len(spacing)} for axis={axis}")
    grads = [along(a, h, ax) for ax, h in zip(axes, dx)]
    return grads[0] if len(axes) == 1 else grads
