"""Array creation: ``array``/``asarray``, ``zeros``/``ones``/``full``/``empty`` and their
``*_like`` forms, ``arange``, ``linspace``/``logspace``/``geomspace``, ``eye``, ``identity``,
``tri``, ``meshgrid``, ``indices``, ``fromfunction``, ``copy``.

Host data (NumPy arrays, nested lists of numbers) goes to the device in one transfer; nested
lists holding jaxkit arrays or tracers are stacked with ``lax.concatenate``. Only an input that
is itself weakly typed gives a weakly typed array (``asarray(1.0)``), never a list.
"""
from __future__ import annotations

import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.lax import elementwise_bits
from jaxkit.lax.convert import convert_element_type_always
from jaxkit.lax.sharding import reshard_leaves
from jaxkit.lax.sharding_eager import like_concrete
from jaxkit.lax.sharding_rules import resolve_out_sharding
from jaxkit.runtime import context_mesh
from jaxkit.runtime.array import Array, device_put_value
from jaxkit.transforms.vmap import vmap
from jaxkit.numpy._jitted import jitted
from jaxkit.numpy._promotion import asarray as _asarray
from jaxkit.numpy._promotion import (
    broadcast_shapes,
    broadcast_to_shape,
    canonicalize_axis,
    canonicalize_shape,
    convert,
    ensure_arraylike,
    is_extended_value,
    promote_dtypes,
)
from jaxkit.numpy._ufuncs import log10, power
from jaxkit.numpy._ufuncs import sign as _sign
from jaxkit.typing import ArrayLike, DTypeLike


def _user_dtype(dtype: DTypeLike | None, fun_name: str | None = None) -> np.dtype | None:
    """A dtype argument, checked and canonicalised (``None`` stays ``None``); a truncated
    64-bit dtype warns naming ``fun_name``, as JAX does."""
    return None if dtype is None else dtypes.check_and_canonicalize_user_dtype(dtype, fun_name)


def _flatten_nested(obj: Any, leaves: list) -> None:
    if isinstance(obj, (list, tuple)):
        for o in obj:
            _flatten_nested(o, leaves)
    else:
        leaves.append(obj)


def _is_jax_array(x: Any) -> bool:
    """An array, a tracer or a key array: data already in jaxkit's hands."""
    return isinstance(x, (Array, core.Tracer)) or is_extended_value(x)


def array(object: Any, dtype: DTypeLike | None = None, *args: Any, copy: bool = True,
          order: str | None = "K", ndmin: int = 0, device: Any = None,
          out_sharding: Any = None) -> Array:
    """``jnp.array``: an array from an array, a scalar or nested lists/tuples of them.
    ``copy``, ``order`` and ``ndmin`` given positionally still work, with JAX 0.10.2's
    DeprecationWarning. ``out_sharding`` (over Explicit mesh axes) types the result's layout
    (the final conversion's, as JAX's); ``device`` places a concrete result."""
    sharding = _out_sharding(device, out_sharding, "jnp.array")
    out = _array(object, dtype, *args, copy=copy, order=order, ndmin=ndmin, sharding=sharding)
    if device is not None and not isinstance(out, core.Tracer):
        out = _on_device(out, device)
    elif type(core.current_trace()) is not core.EvalTrace and not isinstance(out, core.Tracer):
        out = _on_current_trace(object, out)
    return out


def _on_current_trace(object: Any, out: Array) -> Any:
    """``out`` as JAX's ``jnp.array`` gives it under a transformation: JAX ends with a
    conversion bound on the current trace, so under ``jit``/``make_jaxpr`` the result is a
    tracer standing for the constant (a literal for a scalar, a constant input otherwise),
    and under ``vmap``/``jvp`` of eager code or ``ensure_compile_time_eval`` a concrete
    array. Eager calls never get here (their trace is the ``EvalTrace``)."""
    # A weak Python scalar goes in as it is, so its literal prints as the user wrote it; other
    # scalar host data as the host value JAX converts it to (a literal of the program, where
    # a concrete scalar array the function closes over is a constant input).
    if type(object) in (int, float, complex) and out.weak_type:
        src = object
    elif not out.shape and not _is_jax_array(object):
        src = np.asarray(out)
    else:
        src = out
    return convert_element_type_always(src, out.dtype, out.weak_type)


def _on_device(x: Array, device: Any) -> Array:
    """``x`` placed as a ``device=`` argument asks: a device, or a sharding."""
    devices = getattr(device, "device_set", None)
    if devices is None:
        return device_put_value(x, device)
    if len(devices) == 1:
        return device_put_value(x, next(iter(devices)))
    return reshard_leaves(x, device)


def _array(object: Any, dtype: DTypeLike | None, *args: Any, copy: bool, order: str | None,
           ndmin: int, sharding: Any) -> Array:
    if args:
        if len(args) > 3:
            raise TypeError(f"array() takes at most 5 positional arguments but "
                            f"{len(args) + 2} were given")
        for i, name in enumerate(["copy", "order", "ndmin"]):
            if i < len(args) and [copy, order, ndmin][i] != [True, "K", 0][i]:
                raise TypeError(f"array() got multiple values for argument '{name}'")
        copy, order, ndmin = (list(args) + [copy, order, ndmin][len(args):])[:3]
        warnings.warn("Passing the copy, order, and ndmin arguments to jnp.array positionally "
                      "is deprecated. Use keyword arguments instead.", DeprecationWarning,
                      stacklevel=3)
    if order is not None and order not in ("K", "A", "C"):
        raise NotImplementedError("Only implemented for order='K', 'A' or 'C'")
    ndmin = operator.index(ndmin)
    dtype = _user_dtype(dtype, "array")
    weak = dtype is None and dtypes.is_weakly_typed(object)
    m = getattr(object, "__jax_array__", None)
    if m is not None:
        object = m()
    leaves: list = []
    _flatten_nested(object, leaves)
    if any(leaf is None for leaf in leaves):
        raise ValueError("None is not a valid value for jnp.array")
    leaves = [leaf.__jax_array__() if hasattr(leaf, "__jax_array__") else leaf
              for leaf in leaves]
    for leaf in leaves:
        if isinstance(leaf, (str, bytes)):
            raise TypeError(f"Value {leaf!r} with dtype {np.asarray(leaf).dtype} is not a "
                            "valid JAX array type. Only arrays of numeric types are supported "
                            "by JAX.")
    if dtype is None:
        if leaves and len(kinds := {getattr(x, "dtype", None) for x in leaves}) == 1 \
                and dtypes.is_extended(next(iter(kinds))):
            dtype = next(iter(kinds))  # key arrays: nothing to promote
        elif leaves:
            # As JAX's: weak widths kept, and not canonicalized: a float64 array made under
            # x64 stays float64 without (``convert`` canonicalizes only what it changes).
            dtype, _ = dtypes.lattice_result_type(*leaves)
        else:
            dtype = dtypes.default_float_dtype()
    if _is_jax_array(object) and copy:
        # As JAX's: a copy (a new buffer: optax donates a param and its copy), then the
        # conversion, both equations under a trace.
        out = convert(elementwise_bits.copy(object), dtype, weak)
    elif _is_jax_array(object):
        out = convert(object, dtype, weak)
    elif isinstance(object, (list, tuple)) and any(map(_is_jax_array, leaves)):
        parts = [lax.expand_dims(array(elt, dtype=dtype, copy=False), (0,)) for elt in object]
        out = lax.concatenate(parts, 0)
    else:
        if isinstance(object, (bool, int, float, complex)) and weak:
            out = device_put_value(object, weak_type=True, dtype=None)
            out = context_mesh.lay_out(convert(out, dtype, True), typed=False)
        else:
            try:
                host = np.asarray(object, dtype=dtype)
            except TypeError as e:
                raise TypeError(f"Unexpected input type for array: {type(object)}") from e
            # A ValueError (a ragged nested list) propagates with NumPy's message, as in JAX.
            # Under jax.set_mesh host data lands replicated over its devices (JAX's P()).
            out = context_mesh.lay_out(device_put_value(host, weak_type=weak), typed=False)
    if sharding is not None:
        out = lax.convert_element_type(out, dtype, weak, sharding=sharding)
    if ndmin > np.ndim(out):
        out = lax.expand_dims(out, tuple(range(ndmin - np.ndim(out))))
    return out


def asarray(a: Any, dtype: DTypeLike | None = None, order: str | None = None, *,
            copy: bool | None = None, device: Any = None, out_sharding: Any = None) -> Array:
    """``jnp.asarray``: like ``array`` but returns a jaxkit array unchanged when it can."""
    if copy is False and isinstance(a, (list, tuple)):
        pass  # NumPy raises here; JAX accepts (it always copies host data)
    dtype = _user_dtype(dtype, "asarray")
    if device is None and out_sharding is None:
        if dtype is None and _is_jax_array(a):
            return a
        if dtype is not None and isinstance(a, (Array, core.Tracer)):
            dt = _user_dtype(dtype)
            if a.dtype == dt and not a.weak_type:
                return a
    return array(a, dtype=dtype, copy=bool(copy), order=order, device=device,
                 out_sharding=out_sharding)


def copy(a: ArrayLike, order: str | None = None) -> Array:
    """``jnp.copy``: a copy of ``a`` (arrays are immutable, so it may share storage)."""
    return array(a, copy=True, order=order)


# --------------------------------------------------------------------------------------------
# Filled arrays
# --------------------------------------------------------------------------------------------

def _check_forgot_shape_tuple(name: str, shape: Any, dtype: Any) -> None:
    if isinstance(dtype, int) and isinstance(shape, int):
        raise TypeError(f"Cannot interpret '{dtype}' as a data type.\n\nDid you accidentally "
                        f"write `jax.numpy.{name}({shape}, {dtype})` when you meant "
                        f"`jax.numpy.{name}(({shape}, {dtype}))`, with a tuple as the shape?")


def zeros(shape: Any, dtype: DTypeLike | None = None, *, device: Any = None,
          out_sharding: Any = None) -> Array:
    """``jnp.zeros``: zeros of ``shape`` (default dtype float32, float64 with x64)."""
    _check_forgot_shape_tuple("zeros", shape, dtype)
    shape = canonicalize_shape(shape)
    return lax.full(shape, 0, _user_dtype(dtype, "zeros") or dtypes.default_float_dtype(),
                    sharding=_out_sharding(device, out_sharding, "jnp.zeros"))


def ones(shape: Any, dtype: DTypeLike | None = None, *, device: Any = None,
         out_sharding: Any = None) -> Array:
    """``jnp.ones``: ones of ``shape``."""
    _check_forgot_shape_tuple("ones", shape, dtype)
    shape = canonicalize_shape(shape)
    return lax.full(shape, 1, _user_dtype(dtype, "ones") or dtypes.default_float_dtype(),
                    sharding=_out_sharding(device, out_sharding, "jnp.ones"))


def empty(shape: Any, dtype: DTypeLike | None = None, *, device: Any = None,
          out_sharding: Any = None) -> Array:
    """``jnp.empty``: as ``zeros`` (XLA has no uninitialised memory)."""
    _check_forgot_shape_tuple("empty", shape, dtype)
    return zeros(shape, _user_dtype(dtype, "empty"), device=device, out_sharding=out_sharding)


def full(shape: Any, fill_value: ArrayLike, dtype: DTypeLike | None = None, *,
         device: Any = None, out_sharding: Any = None) -> Array:
    """``jnp.full``: ``fill_value`` (a scalar or broadcastable array) of ``shape``."""
    shape = canonicalize_shape(shape)
    dtype = _user_dtype(dtype, "full")
    sharding = _out_sharding(device, out_sharding, "full")
    if np.ndim(fill_value) == 0:
        return lax.full(shape, fill_value, dtype, sharding=sharding)
    fill = asarray(fill_value, dtype=dtype)
    return broadcast_to_shape(fill, shape, out_sharding=sharding)



def _out_sharding(device: Any, out_sharding: Any, name: str) -> Any:
    """The ``out_sharding`` of a creation function, over the mesh in context (JAX's error
    when ``device`` is given too)."""
    if device is not None and out_sharding is not None:
        raise ValueError(f"Only one of `device` or `out_sharding` can be set. Got {device=} "
                         f"and {out_sharding=}")
    return resolve_out_sharding(name, out_sharding)


def _like_shape(a: Any, shape: Any) -> tuple[int, ...]:
    return core.get_aval(a).shape if shape is None else canonicalize_shape(shape)


def _check_like(name: str, a: Any) -> None:
    if not (isinstance(a, (Array, core.Tracer, np.ndarray, np.generic, bool, int, float,
                           complex)) or hasattr(a, "dtype")):
        raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(a)} at "
                        "position 0.")


def zeros_like(a: ArrayLike, dtype: DTypeLike | None = None, shape: Any = None, *,
               device: Any = None, out_sharding: Any = None) -> Array:
    """``jnp.zeros_like``: zeros of the shape and dtype (and weak type) of ``a``."""
    return full_like(a, 0, _user_dtype(dtype, "zeros_like"), shape, device=device,
                     out_sharding=_out_sharding(device, out_sharding, "jnp.zeros_like"))


def ones_like(a: ArrayLike, dtype: DTypeLike | None = None, shape: Any = None, *,
              device: Any = None, out_sharding: Any = None) -> Array:
    """``jnp.ones_like``: ones of the shape and dtype (and weak type) of ``a``."""
    return full_like(a, 1, _user_dtype(dtype, "ones_like"), shape, device=device,
                     out_sharding=_out_sharding(device, out_sharding, "jnp.ones_like"))


def empty_like(prototype: ArrayLike, dtype: DTypeLike | None = None, shape: Any = None, *,
               device: Any = None) -> Array:
    """``jnp.empty_like``: as ``zeros_like``."""
    return full_like(prototype, 0, _user_dtype(dtype, "ones_like"), shape)  # JAX's name


def full_like(a: ArrayLike, fill_value: ArrayLike, dtype: DTypeLike | None = None,
              shape: Any = None, *, device: Any = None, out_sharding: Any = None) -> Array:
    """``jnp.full_like``: ``fill_value`` with the shape and dtype of ``a``."""
    _check_like("full_like", a)
    duck = None
    if hasattr(a, "shape") and hasattr(a, "dtype") and not isinstance(
            a, (Array, core.Tracer, np.ndarray, np.generic)):
        duck = a  # (a Flax hijax Variable, a ShapeDtypeStruct): its shape, dtype and layout
        a = core.ShapedArray(a.shape, dtypes.canonicalize_dtype(a.dtype),
                             getattr(a, "weak_type", False))
        a = lax.full(a.shape, 0, a.dtype)
    dtype = _user_dtype(dtype, "full_like")
    out_shape = _like_shape(a, shape)
    sharding = _out_sharding(device, out_sharding, "full_like")
    if np.ndim(fill_value) == 0:  # shape None: laid out as ``a`` over Explicit axes
        out = lax.full_like(a, fill_value, dtype, None if shape is None else out_shape,
                            sharding=sharding)
        if duck is None or isinstance(out, core.Tracer):
            return out
        # A concrete duck-typed array lays the result out as its own layout says, as JAX's.
        return like_concrete(out, duck, out_shape, dtype is None and a.weak_type, sharding)
    weak = dtype is None and dtypes.is_weakly_typed(a)
    dt = dtype or dtypes.dtype(a)
    return broadcast_to_shape(convert(_asarray(fill_value), dt, weak), out_shape,
                              out_sharding=sharding)


# --------------------------------------------------------------------------------------------
# Ranges
# --------------------------------------------------------------------------------------------

def arange(start: ArrayLike, stop: ArrayLike | None = None, step: ArrayLike | None = None,
           dtype: DTypeLike | None = None, *, device: Any = None,
           out_sharding: Any = None) -> Array:
    """``jnp.arange``: evenly spaced values in ``[start, stop)``; integer arguments give
    int32 (int64 with x64), float ones float32. ``out_sharding`` (over Explicit mesh axes)
    lays the result out (the iota is typed so, as JAX's)."""
    sharding = _out_sharding(device, out_sharding, "jnp.arange")
    dtype = _user_dtype(dtype, "arange")
    start_name = "stop" if stop is None and step is None else "start"
    for name, v in ((start_name, start), ("stop", stop), ("step", step)):
        if v is not None:
            core.concrete_or_error(v, f"It arose in the jnp.arange argument '{name}'")
            if np.ndim(v) != 0:
                raise ValueError(f"jax.numpy.arange: arguments must be scalars; got {name}={v}")
    if dtype is None:
        dtype = dtypes.canonicalize_dtype(dtypes.result_type(
            start, *(x for x in (stop, step) if x is not None)))
    if any(v is not None and np.iscomplexobj(v) for v in (start, stop, step)):
        raise ValueError("Passing complex start/stop/step to jnp.arange is no longer supported "
                         "starting in JAX v0.10.0.")
    # JAX's algorithm (its equations under a trace, its float32 rounding eagerly): an iota,
    # shifted by ``start`` and scaled by ``step`` in the result dtype (float32 for the
    # narrower floats).
    if stop is None:
        start, stop = 0, start
    if step is not None:
        work = (np.dtype("float32") if dtypes.issubdtype(dtype, np.floating)
                and dtypes.finfo(dtype).bits < 32 else dtype)
        size = max(0, int(np.ceil((stop - start) / step)))
        iota = lax.broadcasted_iota(work, (size,), 0, out_sharding=sharding)
        ramp = lax.mul(lax.convert_element_type(step, work), iota)
        return lax.convert_element_type(lax.add(lax.convert_element_type(start, work), ramp),
                                        dtype)
    if start == 0:
        return lax.broadcasted_iota(dtype, (max(0, int(np.ceil(stop))),), 0,
                                    out_sharding=sharding)
    iota = lax.broadcasted_iota(dtype, (max(0, int(np.ceil(stop - start))),), 0,
                                out_sharding=sharding)
    return lax.add(lax.convert_element_type(start, dtype), iota)


def linspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
             retstep: bool = False, dtype: DTypeLike | None = None, axis: int = 0, *,
             device: Any = None) -> Array | tuple[Array, Array]:
    """``jnp.linspace``: ``num`` evenly spaced values from ``start`` to ``stop`` (computed as
    ``start * (1 - t) + stop * t``, which hits both endpoints exactly, as JAX)."""
    num = operator.index(core.concrete_or_error(num, "'num' argument of jnp.linspace"))
    axis = operator.index(core.concrete_or_error(axis, "'axis' argument of jnp.linspace"))
    return _linspace(start, stop, num, endpoint, retstep, dtype, axis, device=device)


@jitted(static_argnames=("num", "endpoint", "retstep", "dtype", "axis", "device"), inline=False)
def _linspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
              retstep: bool = False, dtype: DTypeLike | None = None, axis: int = 0, *,
              device: Any = None) -> Array | tuple[Array, Array]:
    # A plain jit with traced ``start``/``stop``, as JAX's (differentiable in both); the
    # values are ``start * (1 - t) + stop * t``, which hits both endpoints exactly.
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    start, stop = ensure_arraylike("linspace", start, stop)
    dtype = _user_dtype(dtype, "linspace")
    if dtype is None:
        dtype = dtypes.canonicalize_dtype(dtypes.to_inexact_dtype(
            dtypes.result_type(start, stop)))
    cdt = dtypes.canonicalize_dtype(dtypes.to_inexact_dtype(dtype))
    start = start.astype(cdt)
    stop = stop.astype(cdt)
    bounds = list(broadcast_shapes(start.shape, stop.shape))
    b_start = broadcast_to_shape(start, tuple(bounds))
    b_stop = broadcast_to_shape(stop, tuple(bounds))
    axis = len(bounds) + axis + 1 if axis < 0 else axis
    bounds.insert(axis, 1)
    div = (num - 1) if endpoint else num
    if num > 1:
        delta = lax.convert_element_type(stop - start, cdt) / asarray(div, dtype=cdt)
        iota_shape = [1] * len(bounds)
        iota_shape[axis] = div
        real_dt = dtypes.finfo(cdt).dtype
        step = lax.iota(real_dt, div).reshape(iota_shape) / asarray(div, dtype=real_dt)
        step = step.astype(cdt)
        out = (b_start.reshape(bounds) * (1 - step) + b_stop.reshape(bounds) * step)
        if endpoint:
            out = lax.concatenate([out, lax.expand_dims(b_stop, (axis,))],
                                  canonicalize_axis(axis, out.ndim))
    elif num == 1:
        delta = asarray(np.nan if endpoint else stop - start, dtype=cdt)
        out = b_start.reshape(bounds)
    else:
        empty_shape = list(broadcast_shapes(start.shape, stop.shape))
        empty_shape.insert(axis, 0)
        delta = full((), np.nan, cdt)
        out = zeros(empty_shape, dtype)
    if dtypes.issubdtype(dtype, np.integer) and not dtypes.issubdtype(out.dtype, np.integer):
        out = lax.floor(out)
    result = convert(out, dtype)
    return (result, delta) if retstep else result


def logspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
             base: ArrayLike = 10.0, dtype: DTypeLike | None = None, axis: int = 0) -> Array:
    """``jnp.logspace``: ``base ** linspace(start, stop, num)``."""
    num = operator.index(core.concrete_or_error(num, "'num' argument of jnp.logspace"))
    axis = operator.index(core.concrete_or_error(axis, "'axis' argument of jnp.logspace"))
    return _logspace(start, stop, num, endpoint, base, dtype, axis)


@jitted(static_argnames=("num", "endpoint", "dtype", "axis"), inline=False)
def _logspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
              base: ArrayLike = 10.0, dtype: DTypeLike | None = None, axis: int = 0) -> Array:
    # A plain jit differentiable in start and stop, as JAX's.
    dtype = _user_dtype(dtype, "logspace")
    if dtype is None:
        dtype = dtypes.canonicalize_dtype(dtypes.to_inexact_dtype(
            dtypes.result_type(start, stop)))
    cdt = dtypes.canonicalize_dtype(dtypes.to_inexact_dtype(dtype))
    start, stop = ensure_arraylike("logspace", start, stop)
    start = start.astype(cdt)
    stop = stop.astype(cdt)
    lin = linspace(start, stop, num, endpoint=endpoint, retstep=False, dtype=None, axis=axis)
    return lax.convert_element_type(power(base, lin), dtype)


def geomspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
              dtype: DTypeLike | None = None, axis: int = 0) -> Array:
    """``jnp.geomspace``: values spaced evenly on a log scale from ``start`` to ``stop``."""
    num = operator.index(core.concrete_or_error(num, "'num' argument of jnp.geomspace"))
    axis = operator.index(core.concrete_or_error(axis, "'axis' argument of jnp.geomspace"))
    return _geomspace(start, stop, num, endpoint, dtype, axis)


@jitted(static_argnames=("num", "endpoint", "dtype", "axis"), inline=False)
def _geomspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
               dtype: DTypeLike | None = None, axis: int = 0) -> Array:
    # A plain jit differentiable in start and stop, as JAX's: logspace of the logs of the
    # magnitudes, with the sign of ``start``.
    dtype = _user_dtype(dtype, "geomspace")
    if dtype is None:
        dtype = dtypes.canonicalize_dtype(dtypes.to_inexact_dtype(
            dtypes.result_type(start, stop)))
    cdt = dtypes.canonicalize_dtype(dtypes.to_inexact_dtype(dtype))
    start, stop = ensure_arraylike("geomspace", start, stop)
    start = start.astype(cdt)
    stop = stop.astype(cdt)
    sign = _sign(start)
    res = sign * logspace(log10(start / sign), log10(stop / sign), num, endpoint=endpoint,
                          base=10.0, dtype=cdt, axis=0)
    axis = canonicalize_axis(axis, res.ndim)
    if axis != 0:
        res = lax.transpose(res, (*range(1, axis + 1), 0, *range(axis + 1, res.ndim)))
    return lax.convert_element_type(res, dtype)


# --------------------------------------------------------------------------------------------
# Matrices and grids
# --------------------------------------------------------------------------------------------

def eye(N: int, M: int | None = None, k: int = 0, dtype: DTypeLike | None = None, *,
        device: Any = None) -> Array:
    """``jnp.eye``: ones on the ``k``-th diagonal of an ``N x M`` matrix."""
    N = operator.index(core.concrete_or_error(N, "'N' argument of jnp.eye"))
    given_m = M
    M = N if M is None else operator.index(core.concrete_or_error(M, "'M' argument of jnp.eye"))
    if N < 0 or M < 0:  # (naming M as given, None included, as JAX)
        raise ValueError(f"negative dimensions are not allowed, got {N} and {given_m}")
    dtype = _user_dtype(dtype, "eye") or dtypes.default_float_dtype()
    if isinstance(k, (int, np.integer)):
        info = np.iinfo(np.int32)
        dt = dtypes.default_int_dtype()
        offset = np.asarray(min(max(int(k), info.min), info.max), dt)[()]
    else:
        # A traced offset, as JAX's (``jnp.trace`` passes its dynamic ``offset``).
        offset = _asarray(k)
        if offset.shape != () or not dtypes.issubdtype(offset.dtype, np.integer):
            raise ValueError(f"k must be a scalar integer; got {k}")
        dt = offset.dtype
    rows = lax.broadcasted_iota(dt, (N, M), 0)
    cols = lax.broadcasted_iota(dt, (N, M), 1)
    return convert(lax.eq(lax.add(*promote_dtypes(rows, offset)), cols), dtype)


def identity(n: int, dtype: DTypeLike | None = None) -> Array:
    """``jnp.identity``: the ``n x n`` identity matrix."""
    return eye(n, dtype=_user_dtype(dtype, "identity"))


def _tri_mask(N: int, M: int, k: int) -> Array:
    # JAX's order of equations: the row iota and its offset, then the column iota.
    rows = lax.add(lax.broadcasted_iota(np.int32, (N, M), 0), np.int32(k))
    return lax.ge(rows, lax.broadcasted_iota(np.int32, (N, M), 1))


def tri(N: int, M: int | None = None, k: int = 0, dtype: DTypeLike | None = None) -> Array:
    """``jnp.tri``: ones at and below the ``k``-th diagonal."""
    N = operator.index(core.concrete_or_error(N, "'N' argument of jnp.tri"))
    M = N if M is None else operator.index(M)
    k = operator.index(core.concrete_or_error(k, "'k' argument of jnp.tri"))
    dtype = _user_dtype(dtype, "tri") or np.dtype(np.float32)  # float32 even under x64, as JAX
    return convert(_tri_mask(N, M, k), dtype)


def _masked_tri(name: str, m: ArrayLike, k: int, lower: bool) -> Array:
    m = ensure_arraylike(name, m)
    if m.ndim < 2:
        raise ValueError(f"Argument to jax.numpy.{name} must be at least 2D")
    N, M = m.shape[-2:]
    # Both keep the elements where the (k-1)-th lower triangle says so, as JAX selects.
    mask = broadcast_to_shape(_tri_mask(N, M, k if lower else k - 1), m.shape)
    zeros = lax.full_like(m, 0)
    return lax.select(mask, m, zeros) if lower else lax.select(mask, zeros, m)


# JAX 0.10.2 wraps both in a plain ``jit`` (a nested ``jit[name=tril]`` equation when traced).
@jitted(static_argnames=("k",), inline=False)
def tril(m: ArrayLike, k: int = 0) -> Array:
    """``jnp.tril``: ``m`` with the elements above the ``k``-th diagonal zeroed."""
    return _masked_tri("tril", m, k, True)


@jitted(static_argnames=("k",), inline=False)
def triu(m: ArrayLike, k: int = 0) -> Array:
    """``jnp.triu``: ``m`` with the elements below the ``k``-th diagonal zeroed."""
    return _masked_tri("triu", m, k, False)


def meshgrid(*xi: ArrayLike, copy: bool = True, sparse: bool = False,
             indexing: str = "xy") -> list[Array]:
    """``jnp.meshgrid``: coordinate arrays from 1-D coordinate vectors."""
    args = [ensure_arraylike("meshgrid", x) for x in xi]
    if not copy:
        raise ValueError("jax.numpy.meshgrid only supports copy=True")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Valid values for indexing are 'xy' and 'ij', got {indexing}")
    if any(a.ndim != 1 for a in args):
        raise ValueError(f"Arguments to jax.numpy.meshgrid must be 1D, got shapes "
                         f"{[a.shape for a in args]}")
    # As JAX's: with "xy" indexing the first two inputs trade places, each input is broadcast
    # along its own axis, and the first two outputs trade back.
    if indexing == "xy" and len(args) >= 2:
        args[0], args[1] = args[1], args[0]
    shape = [1 if sparse else a.shape[0] for a in args]
    out = [lax.broadcast_in_dim(a, tuple(shape[:i] + [a.shape[0]] + shape[i + 1:]) if sparse
                                else tuple(shape), (i,)) for i, a in enumerate(args)]
    if indexing == "xy" and len(args) >= 2:
        out[0], out[1] = out[1], out[0]
    return out


def indices(dimensions: Sequence[int], dtype: DTypeLike | None = None,
            sparse: bool = False) -> Array | tuple[Array, ...]:
    """``jnp.indices``: arrays of the index along each axis of a grid of ``dimensions``."""
    dimensions = canonicalize_shape(dimensions)
    dtype = _user_dtype(dtype, "indices") or dtypes.default_int_dtype()
    n = len(dimensions)
    out = []
    s = tuple(dimensions)
    for i, d in enumerate(dimensions):
        # As JAX's: each iota broadcast along its own axis (a size-1 elsewhere when sparse).
        if sparse:
            s = (1,) * i + (d,) + (1,) * (n - i - 1)
        out.append(lax.broadcast_in_dim(lax.iota(dtype, d), s, (i,)))
    if sparse:
        return tuple(out)
    if not out:
        return zeros((0,), dtype)
    return lax.stack(out, 0)


def fromfunction(function: Callable, shape: Sequence[int], *, dtype: DTypeLike = float,
                 **kwargs: Any) -> Any:
    """``jnp.fromfunction``: ``function`` applied to the index grids of ``shape``."""
    shape = canonicalize_shape(shape)
    # As JAX's: ``function`` vmapped once per axis over 1-D aranges (it sees scalars), not
    # called on index grids.
    for i in range(len(shape)):
        in_axes = [0 if i == j else None for j in range(len(shape))]
        function = vmap(function, in_axes=tuple(in_axes[::-1]))
    return function(*(arange(s, dtype=dtype) for s in shape), **kwargs)
