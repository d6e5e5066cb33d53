"""``jnp.pad`` with NumPy's modes: constant, edge, wrap, reflect, symmetric, linear_ramp,
maximum, minimum, mean, median, empty, and a callable.

Constant padding is one ``lax.pad``; the other modes build the borders from slices of the
array and concatenate them, one axis at a time (so corners see the already padded axes, as
in NumPy).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.runtime.array import Array
from jaxkit.numpy._creation import asarray, empty_like, linspace
from jaxkit.numpy._elementwise import round as _round
from jaxkit.numpy._jitted import jitted
from jaxkit.numpy._promotion import broadcast_to_shape, convert, ensure_arraylike
from jaxkit.numpy._quantiles import median
from jaxkit.numpy._reductions import max as _max
from jaxkit.numpy._reductions import mean as _mean
from jaxkit.numpy._reductions import min as _min
from jaxkit.numpy._shape import flip, repeat
from jaxkit.numpy._ufuncs import multiply, subtract
from jaxkit.typing import ArrayLike


def _broadcast_to_pairs(nvals: Any, nd: int, name: str) -> tuple[tuple[Any, Any], ...]:
    try:
        vals = np.asarray(core.concrete_or_error(
            nvals if not isinstance(nvals, (list, tuple)) else np.asarray(nvals),
            f"{name} argument of jnp.pad"))
    except ValueError as e:
        if "inhomogeneous" in str(e):
            raise TypeError(f"`{name}` entries must be the same shape: {nvals}") from e
        raise
    if vals.shape == (nd, 2):
        return tuple((v[0], v[1]) for v in vals)
    if vals.shape == (1, 2):
        return tuple((vals[0, 0], vals[0, 1]) for _ in range(nd))
    if vals.shape == (2,):
        return tuple((vals[0], vals[1]) for _ in range(nd))
    if vals.shape == (1,):
        return tuple((vals[0], vals[0]) for _ in range(nd))
    if vals.shape == ():
        v = vals.flat[0]
        return tuple((v, v) for _ in range(nd))
    raise ValueError(f"jnp.pad: {name} with nd={nd} has unsupported shape {vals.shape}. Valid "
                     f"shapes are ({nd}, 2), (1, 2), (2,), (1,), or ().")


def _check_no_padding(axis_padding: tuple[int, int], mode: str) -> None:
    if axis_padding[0] > 0 or axis_padding[1] > 0:
        raise ValueError(f"Cannot apply '{mode}' padding to empty axis")


def _slice(a: Array, start: int | None, stop: int | None, axis: int) -> Array:
    return lax.slice_in_dim(a, start, stop, axis=axis)


def _pad_constant(array: Array, pad_width: Any, constant_values: Any) -> Array:
    nd = array.ndim
    constant_values = convert(asarray(constant_values), array.dtype, array.weak_type)
    if np.ndim(constant_values) == 0:
        return lax.pad(array, constant_values, [(lo, hi, 0) for lo, hi in pad_width])
    if np.ndim(constant_values) == 1:
        if constant_values.shape[-1] == 1:
            return lax.pad(array, lax.reshape(constant_values, ()),
                           [(lo, hi, 0) for lo, hi in pad_width])
        if constant_values.shape[-1] != 2:
            raise ValueError(f"jnp.pad: constant_values has unsupported shape "
                             f"{constant_values.shape}. If the shape is 1D or 2D, the last "
                             "dimension must be of size 1 or 2.")
    constant_values = broadcast_to_shape(constant_values, (nd, 2))
    for i in range(nd):
        for side in (0, 1):
            if pad_width[i][side] == 0:
                continue
            widths = [(0, 0, 0)] * nd
            widths[i] = (pad_width[i][0], 0, 0) if side == 0 else (0, pad_width[i][1], 0)
            value = lax.reshape(lax.slice(constant_values, (i, side), (i + 1, side + 1)), ())
            array = lax.pad(array, value, widths)
    return array


def _pad_wrap(array: Array, pad_width: Any) -> Array:
    for i in range(array.ndim):
        size = array.shape[i]
        if size == 0:
            _check_no_padding(pad_width[i], "wrap")
            continue
        left_rep, left_rem = divmod(pad_width[i][0], size)
        right_rep, right_rem = divmod(pad_width[i][1], size)
        parts = []
        if left_rem > 0:
            parts.append(_slice(array, size - left_rem, size, i))
        parts += (left_rep + right_rep + 1) * [array]
        if right_rem > 0:
            parts.append(_slice(array, 0, right_rem, i))
        array = lax.concatenate(parts, i) if len(parts) > 1 else parts[0]
    return array


def _reflect_side(array: Array, i: int, axis_size: int, padding: int, before: bool,
                  mode: str, reflect_type: str) -> Array:
    """Pad one side of axis ``i`` by mirroring, in chunks of at most the axis size."""
    n = array.shape[i]
    edge = _slice(array, 0, 1, i) if before else _slice(array, n - 1, n, i)
    offset = 1 if (mode == "reflect" and axis_size > 1) else 0
    while padding > 0:
        curr = min(padding, axis_size - offset)
        padding -= curr
        n = array.shape[i]
        if before:
            x = _slice(array, offset, offset + curr, i)
        else:
            stop = n if (mode == "symmetric" or axis_size == 1) else n - 1
            x = _slice(array, n - (curr + offset), stop, i)
        x = flip(x, i)
        if reflect_type == "odd":
            x = subtract(multiply(2, edge), x)
            if axis_size > 1:
                m = x.shape[i]
                edge = _slice(x, 0, 1, i) if before else _slice(x, m - 1, m, i)
        array = lax.concatenate([x, array] if before else [array, x], i)
    return array


def _pad_symmetric_or_reflect(array: Array, pad_width: Any, mode: str,
                              reflect_type: str) -> Array:
    for i in range(array.ndim):
        axis_size = array.shape[i]
        if axis_size == 0:
            _check_no_padding(pad_width[i], mode)
            continue
        if pad_width[i][0] == 0 and pad_width[i][1] == 0:
            continue
        array = _reflect_side(array, i, axis_size, pad_width[i][0], True, mode, reflect_type)
        array = _reflect_side(array, i, axis_size, pad_width[i][1], False, mode, reflect_type)
    return array


def _pad_edge(array: Array, pad_width: Any) -> Array:
    for i in range(array.ndim):
        n = array.shape[i]
        if n == 0:
            _check_no_padding(pad_width[i], "edge")
            continue
        before = repeat(_slice(array, 0, 1, i), pad_width[i][0], axis=i)
        after = repeat(_slice(array, n - 1, n, i), pad_width[i][1], axis=i)
        array = lax.concatenate([before, array, after], i)
    return array


def _pad_empty(array: Array, pad_width: Any) -> Array:
    # As JAX's: zero blocks (jnp.empty is jnp.zeros) concatenated on each side of each axis.
    for i in range(array.ndim):
        before = empty_like(array, shape=array.shape[:i] + (pad_width[i][0],)
                            + array.shape[i + 1:])
        after = empty_like(array, shape=array.shape[:i] + (pad_width[i][1],)
                           + array.shape[i + 1:])
        array = lax.concatenate([before, array, after], i)
    return array


def _pad_linear_ramp(array: Array, pad_width: Any, end_values: Any) -> Array:
    for axis in range(array.ndim):
        n = array.shape[axis]
        edge_before = _slice(array, 0, 1, axis)
        edge_after = _slice(array, n - 1, n, axis)
        ramp_before = linspace(end_values[axis][0], lax.squeeze(edge_before, (axis,)),
                               num=int(pad_width[axis][0]), endpoint=False, dtype=array.dtype,
                               axis=axis)
        ramp_after = linspace(end_values[axis][1], lax.squeeze(edge_after, (axis,)),
                              num=int(pad_width[axis][1]), endpoint=False, dtype=array.dtype,
                              axis=axis)
        ramp_before = convert(ramp_before, array.dtype, array.weak_type)
        ramp_after = flip(convert(ramp_after, array.dtype, array.weak_type), axis)
        array = lax.concatenate([ramp_before, array, ramp_after], axis)
    return array


def _pad_stats(array: Array, pad_width: Any, stat_length: Any, stat_func: Callable) -> Array:
    for i in range(array.ndim):
        if stat_length is None:
            stat_before = stat_after = stat_func(array, axis=i, keepdims=True)
        else:
            n = array.shape[i]
            lb, la = stat_length[i]
            if lb == 0 or la == 0:
                raise ValueError("stat_length of 0 yields no value for padding")
            lb, la = min(int(lb), n), min(int(la), n)
            stat_before = stat_func(_slice(array, 0, lb, i), axis=i, keepdims=True)
            stat_after = stat_func(_slice(array, n - la, n, i), axis=i, keepdims=True)
        if dtypes.issubdtype(array.dtype, np.integer):
            stat_before, stat_after = _round(stat_before), _round(stat_after)
        stat_before = convert(stat_before, array.dtype, array.weak_type)
        stat_after = convert(stat_after, array.dtype, array.weak_type)
        before = repeat(stat_before, pad_width[i][0], axis=i)
        after = repeat(stat_after, pad_width[i][1], axis=i)
        array = lax.concatenate([before, array, after], i)
    return array


@jitted(static_argnums=(1, 2, 4, 5, 6), inline=False)
def _pad(array: ArrayLike, pad_width: Any, mode: str, constant_values: ArrayLike,
         stat_length: Any, end_values: Any, reflect_type: str) -> Array:
    # A plain jit of its own, as JAX's: ``constant_values`` is its one traced argument besides
    # the array (passed, unused, in every mode), the rest are static.
    array = asarray(array)
    nd = array.ndim
    if nd == 0:
        return array
    pad_width = _broadcast_to_pairs(pad_width, nd, "pad_width")
    if any(p < 0 for pair in pad_width for p in pair):
        raise ValueError("index can't contain negative values")
    if mode == "constant":
        return _pad_constant(array, pad_width, asarray(constant_values))
    if mode == "wrap":
        return _pad_wrap(array, pad_width)
    if mode in ("symmetric", "reflect"):
        return _pad_symmetric_or_reflect(array, pad_width, mode, reflect_type)
    if mode == "edge":
        return _pad_edge(array, pad_width)
    if mode == "linear_ramp":
        end_values = _broadcast_to_pairs(end_values, nd, "end_values")
        return _pad_linear_ramp(array, pad_width, end_values)
    if mode == "empty":
        return _pad_empty(array, pad_width)
    if stat_length is not None:
        stat_length = _broadcast_to_pairs(stat_length, nd, "stat_length")
    funcs = {"maximum": _max, "minimum": _min, "mean": _mean, "median": median}
    return _pad_stats(array, pad_width, stat_length, funcs[mode])


def pad(array: ArrayLike, pad_width: Any, mode: str | Callable = "constant",
        **kwargs: Any) -> Array:
    """``jnp.pad``: ``array`` padded by ``pad_width`` (per-axis ``(before, after)`` pairs)
    with NumPy's ``mode``."""
    array = ensure_arraylike("pad", array)
    pad_width = _broadcast_to_pairs(pad_width, array.ndim, "pad_width")
    if pad_width and not all(isinstance(p, (int, np.integer)) for pair in pad_width
                             for p in pair):
        raise TypeError("`pad_width` must be of integral type.")
    if callable(mode):
        raise NotImplementedError("jnp.pad with a callable mode is not supported by jaxkit.")
    allowed = {"empty": [], "edge": [], "wrap": [], "constant": ["constant_values"],
               "linear_ramp": ["end_values"], "maximum": ["stat_length"],
               "mean": ["stat_length"], "median": ["stat_length"],
               "minimum": ["stat_length"], "reflect": ["reflect_type"],
               "symmetric": ["reflect_type"]}
    if mode not in allowed:
        raise NotImplementedError(f"Unimplemented padding mode '{mode}' for np.pad.")
    unsupported = set(kwargs) - set(allowed[mode])
    if unsupported:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {unsupported}")
    return _pad(array, pad_width, mode, kwargs.get("constant_values", 0),
                kwargs.get("stat_length"), kwargs.get("end_values", 0),
                kwargs.get("reflect_type", "even"))
