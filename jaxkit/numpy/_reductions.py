"""Reductions: ``sum``, ``prod``, ``max``/``min``, ``all``/``any``, ``mean``, ``var``/``std``,
``ptp``, ``average``, ``count_nonzero``, ``argmax``/``argmin``, the NaN-ignoring forms and the
cumulative ones (``cumsum``, ``cumprod``, ``nancumsum`` ...).

All take JAX's ``axis`` / ``keepdims`` / ``where`` / ``initial`` / ``dtype`` arguments (``out``
must be ``None``). Like JAX, ``sum`` and ``prod`` of small integers and booleans accumulate in
the default integer type, float16/bfloat16 sums are computed in float32, and results are never
weakly typed.
"""
from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.numpy._jitted import jitted
from jaxkit.numpy._promotion import (
    broadcast_to_shape,
    canonicalize_axis,
    convert,
    ensure_arraylike,
    promote_dtypes_inexact,
    promote_dtypes_numeric,
)
from jaxkit.numpy._ufuncs import where3
from jaxkit.typing import Array, ArrayLike, DTypeLike

Axis = int | Sequence[int] | None


def _upcast_f16(dtype: np.dtype) -> np.dtype:
    if np.dtype(dtype) in (np.dtype(np.float16), np.dtype(dtypes.bfloat16)):
        return np.dtype(np.float32)
    return np.dtype(dtype)


def _promote_integer_dtype(dtype: np.dtype) -> np.dtype:
    """Booleans and integers narrower than the default integer accumulate in it (as JAX)."""
    if dtype == np.bool_:
        return dtypes.default_int_dtype()
    if dtypes.issubdtype(dtype, np.unsignedinteger):
        default = dtypes.default_uint_dtype()
        if dtypes.iinfo(dtype).bits < dtypes.iinfo(default).bits:
            return default
    elif dtypes.issubdtype(dtype, np.integer):
        default = dtypes.default_int_dtype()
        if dtypes.iinfo(dtype).bits < dtypes.iinfo(default).bits:
            return default
    return dtype


def _user_dtype(dtype: DTypeLike | None, fun_name: str | None = None) -> np.dtype | None:
    return None if dtype is None else dtypes.check_and_canonicalize_user_dtype(dtype, fun_name)


def check_where(name: str, where: ArrayLike | None) -> Array | None:
    if where is None:
        return None
    where = ensure_arraylike(name, where)
    if where.dtype != np.bool_:
        raise ValueError(f"jnp.{name}: where must be None or a boolean array; got "
                         f"where.dtype={where.dtype!r}.")
    return where


def _ensure_optional_axes(axis: Any) -> Any:
    if axis is None:
        return None
    axis = core.concrete_or_error(axis, "The axis argument must be known statically.")
    try:
        return operator.index(axis)
    except TypeError:
        return tuple(operator.index(i) for i in axis)


def _reduction_dims(ndim: int, axis: Axis, error: type[Exception] = ValueError
                    ) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list, np.ndarray)) else (axis,)
    canon = tuple(canonicalize_axis(a, ndim, error) for a in axes)
    if len(canon) != len(set(canon)):
        raise ValueError(f"duplicate value in 'axis': {axis}")
    return canon


def _reduction_init_val(dtype: np.dtype, init_val: Any) -> np.generic:
    if dtype == np.bool_:
        return np.bool_(init_val > 0)
    if np.isinf(init_val) and dtypes.issubdtype(dtype, np.floating) and \
            not dtypes.supports_inf(dtype):
        info = dtypes.finfo(dtype)
        init_val = info.min if np.isneginf(init_val) else info.max
    if dtypes.issubdtype(dtype, np.integer) and np.isinf(init_val):
        info = dtypes.iinfo(dtype)
        return np.asarray(info.min if init_val < 0 else info.max, dtype)[()]
    return np.asarray(init_val).astype(dtype)[()]


_LAX_REDUCERS = {"add": "reduce_sum", "mul": "reduce_prod", "max": "reduce_max",
                 "min": "reduce_min", "and": "reduce_and", "or": "reduce_or",
                 "xor": "reduce_xor"}
_LAX_BINOPS = {"add": "add", "mul": "mul", "max": "max", "min": "min", "and": "bitwise_and",
               "or": "bitwise_or", "xor": "bitwise_xor"}


def _reduction(a: ArrayLike, name: str, op: str, init_val: Any, *, has_identity: bool = True,
               preproc: Callable | None = None, bool_op: str | None = None,
               upcast_f16_for_computation: bool = False, axis: Axis = None,
               dtype: DTypeLike | None = None, out: None = None, keepdims: bool = False,
               initial: ArrayLike | None = None, where_: ArrayLike | None = None,
               promote_integers: bool = False) -> Array:
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.{name} is not supported.")
    a = ensure_arraylike(name, a)
    where_ = check_where(name, where_)
    axis = _ensure_optional_axes(axis)
    if initial is None and not has_identity and where_ is not None:
        raise ValueError(f"reduction operation {name} does not have an identity, so to use a "
                         "where mask one has to specify 'initial'")
    a = preproc(a) if preproc else a
    dims = _reduction_dims(a.ndim, axis)
    if initial is None and not has_identity and not builtins.all(a.shape[d] >= 1 for d in dims):
        raise ValueError(f"zero-size array to reduction operation {name} which has no "
                             "identity")
    if dtype is None:
        result_dtype = a.dtype
        if promote_integers:
            result_dtype = _promote_integer_dtype(result_dtype)
    else:
        result_dtype = _user_dtype(dtype, name)
    computation_dtype = result_dtype
    if upcast_f16_for_computation and dtypes.issubdtype(result_dtype, np.inexact):
        computation_dtype = _upcast_f16(result_dtype)
    a = lax.convert_element_type(a, computation_dtype)
    if computation_dtype == np.bool_:
        op = bool_op or op
    init = _reduction_init_val(computation_dtype, init_val)
    if where_ is not None:
        a = where3(where_, a, init)
    # Reduced even over no axes: JAX stages the ``reduce_*[axes=()]`` equation too.
    result = getattr(lax, _LAX_REDUCERS[op])(a, dims)
    if initial is not None:
        initial_arr = convert(initial, computation_dtype)
        if np.shape(initial_arr) != ():
            raise ValueError(f"initial value must be a scalar. Got array of shape "
                             f"{np.shape(initial_arr)}")
        result = getattr(lax, _LAX_BINOPS[op])(initial_arr, result)
    if keepdims:
        result = lax.expand_dims(result, dims)
    # JAX casts to the dtype as the user gave it, so a 64-bit name or type (not an np.dtype,
    # which is falsy) warns a second time, naming convert_element_type.
    return lax.convert_element_type(result, dtype or result_dtype)


def _cast_to_bool(x: Array) -> Array:
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        x = lax.real(x)
    return lax.convert_element_type(x, np.bool_)


def _cast_to_numeric(x: Array) -> Array:
    return promote_dtypes_numeric(x)[0]


@jitted(static_argnames=("axis", "dtype", "out", "keepdims", "promote_integers"))
def sum(a: ArrayLike, axis: Axis = None, dtype: DTypeLike | None = None,
        out: None = None, keepdims: bool = False, initial: ArrayLike | None = None,
        where: ArrayLike | None = None, promote_integers: bool = True) -> Array:
    """``jnp.sum``: the sum over ``axis`` (all axes by default)."""
    return _reduction(a, "sum", "add", 0, preproc=_cast_to_numeric, bool_op="or",
                      upcast_f16_for_computation=dtype is None, axis=axis, dtype=dtype,
                      out=out, keepdims=keepdims, initial=initial, where_=where,
                      promote_integers=promote_integers)


@jitted(static_argnames=("axis", "dtype", "out", "keepdims", "promote_integers"))
def prod(a: ArrayLike, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None,
         keepdims: bool = False, initial: ArrayLike | None = None,
         where: ArrayLike | None = None, promote_integers: bool = True) -> Array:
    """``jnp.prod``: the product over ``axis``."""
    return _reduction(a, "prod", "mul", 1, preproc=_cast_to_numeric, bool_op="and",
                      upcast_f16_for_computation=dtype is None, axis=axis, dtype=dtype,
                      out=out, keepdims=keepdims, initial=initial, where_=where,
                      promote_integers=promote_integers)


@jitted(static_argnames=("axis", "out", "keepdims"))
def max(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False,
        initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """``jnp.max``: the maximum over ``axis`` (NaN propagates)."""
    return _reduction(a, "max", "max", -np.inf, has_identity=False, axis=axis, out=out,
                      keepdims=keepdims, initial=initial, where_=where)


@jitted(static_argnames=("axis", "out", "keepdims"))
def min(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False,
        initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """``jnp.min``: the minimum over ``axis`` (NaN propagates)."""
    return _reduction(a, "min", "min", np.inf, has_identity=False, axis=axis, out=out,
                      keepdims=keepdims, initial=initial, where_=where)


amax, amin = max, min


@jitted(static_argnames=("axis", "out", "keepdims"))
def all(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False, *,
        where: ArrayLike | None = None) -> Array:
    """``jnp.all``: whether every element (over ``axis``) is true."""
    return _reduction(a, "all", "and", True, preproc=_cast_to_bool, axis=axis, out=out,
                      keepdims=keepdims, where_=where)


@jitted(static_argnames=("axis", "out", "keepdims"))
def any(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False, *,
        where: ArrayLike | None = None) -> Array:
    """``jnp.any``: whether some element (over ``axis``) is true."""
    return _reduction(a, "any", "or", False, preproc=_cast_to_bool, axis=axis, out=out,
                      keepdims=keepdims, where_=where)


def _axis_size(shape: tuple[int, ...], axis: Axis) -> int:
    # JAX indexes the shape here, so an axis out of range is an IndexError (mean, var, std).
    return math.prod(shape[d] for d in _reduction_dims(len(shape), axis, IndexError))


def _count(a: Array, axis: Axis, keepdims: bool, where: Array | None, dtype: np.dtype) -> Any:
    if where is None:
        return np.asarray(_axis_size(a.shape, axis), dtype)[()]
    return sum(broadcast_to_shape(where, a.shape), axis, dtype=dtype, keepdims=keepdims)


@jitted(static_argnames=("axis", "dtype", "out", "keepdims"), converts_first=True)
def mean(a: ArrayLike, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None,
         keepdims: bool = False, *, where: ArrayLike | None = None) -> Array:
    """``jnp.mean``: the arithmetic mean over ``axis`` (integers give float32)."""
    a = ensure_arraylike("mean", a)
    where = check_where("mean", where)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.mean is not supported.")
    axis = _ensure_optional_axes(axis)
    if dtype is None:
        result_dtype = dtypes.canonicalize_dtype(dtypes.to_inexact_dtype(a.dtype))
        computation_dtype = _upcast_f16(result_dtype)
    else:
        result_dtype = computation_dtype = _user_dtype(dtype, "mean")
    normalizer = _count(a, axis, keepdims, where, computation_dtype)
    total = sum(a, axis, dtype=computation_dtype, keepdims=keepdims, where=where)
    return lax.convert_element_type(lax.div(total, normalizer), result_dtype)


def average(a: ArrayLike, axis: Axis = None, weights: ArrayLike | None = None,
            returned: bool = False, keepdims: bool = False) -> Array | tuple[Array, Array]:
    """``jnp.average``: the (weighted) average over ``axis``."""
    axis = _ensure_optional_axes(axis)
    if weights is None:
        a = ensure_arraylike("average", a)
        a, = promote_dtypes_inexact(a)
        _reduction_dims(a.ndim, axis)  # JAX checks the axes first: a ValueError, not mean's
        avg = mean(a, axis=axis, keepdims=keepdims)
        weights_sum = lax.full((), _axis_size(a.shape, axis), dtype=avg.dtype)
    else:
        a, weights = ensure_arraylike("average", a, weights)
        a, weights = promote_dtypes_inexact(a, weights)
        if a.shape != weights.shape:
            if axis is None:
                raise ValueError("Axis must be specified when shapes of a and weights differ.")
            axes = _reduction_dims(a.ndim, axis)
            if weights.shape != tuple(a.shape[ax] for ax in axes):
                raise ValueError("Shape of weights must be consistent with shape of a along "
                                 "specified axis.")
            # As JAX's: size 1 along the other axes (the ufuncs broadcast it).
            new_shape = tuple(d if i in axes else 1 for i, d in enumerate(a.shape))
            weights = lax.reshape(weights, new_shape,
                                  tuple(int(i) for i in np.argsort(axes)))
        weights_sum = sum(weights, axis=axis, keepdims=keepdims)
        avg = sum(a * weights, axis=axis, keepdims=keepdims) / weights_sum
    if returned:
        if avg.shape != weights_sum.shape:
            weights_sum = broadcast_to_shape(weights_sum, avg.shape)
        return avg, weights_sum
    return avg


def _var_promote_types(a_dtype: np.dtype, dtype: np.dtype | None
                       ) -> tuple[np.dtype, np.dtype]:
    if dtype is not None:
        if not dtypes.issubdtype(dtype, np.complexfloating) and \
                dtypes.issubdtype(a_dtype, np.complexfloating):
            raise ValueError("jax.numpy.var does not yet support real dtype parameters when "
                             "computing the variance of an array of complex values.")
        computation_dtype = dtype
    elif not dtypes.issubdtype(a_dtype, np.inexact):
        dtype = computation_dtype = dtypes.canonicalize_dtype(dtypes.to_inexact_dtype(a_dtype))
    else:
        dtype = np.array(0, a_dtype).real.dtype
        computation_dtype = a_dtype
    return _upcast_f16(computation_dtype), np.dtype(dtype)


def _correction(ddof: int, correction: float | None) -> float:
    """The degrees-of-freedom correction of ``var``/``std``: ``correction``, or ``ddof`` when
    it is None (both given is an error)."""
    if correction is None:
        return ddof
    if not isinstance(ddof, int) or ddof != 0:
        raise ValueError("ddof and correction can't be provided simultaneously.")
    return correction


def var(a: ArrayLike, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None,
        ddof: int = 0, keepdims: bool = False, *, where: ArrayLike | None = None,
        mean: ArrayLike | None = None, correction: float | None = None) -> Array:
    """``jnp.var``: the variance over ``axis`` with ``ddof`` (or ``correction``)."""
    correction = _correction(ddof, correction)
    a = ensure_arraylike("var", a)
    return _var(a, axis=_ensure_optional_axes(axis), dtype=dtype, out=out,
                correction=correction, keepdims=keepdims, where=where, a_mean=mean)


# As in JAX, the work is a nested ``jit`` (``_var``) whose ``correction`` is a traced operand,
# so printed jaxprs show the same ``jit[name=_var]`` equation and body.
@jitted(static_argnames=("axis", "dtype", "keepdims"), inline=False)
def _var(a: Array, *, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None,
         correction: float = 0, keepdims: bool = False, where: ArrayLike | None = None,
         a_mean: ArrayLike | None = None) -> Array:
    where = check_where("var", where)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.var is not supported.")
    computation_dtype, dtype = _var_promote_types(a.dtype, _user_dtype(dtype, "var"))
    a = lax.convert_element_type(a, computation_dtype)
    if a_mean is None:
        a_mean = _mean_fn(a, axis, dtype=computation_dtype, keepdims=True, where=where)
    else:
        a_mean = convert(ensure_arraylike("var", a_mean), computation_dtype)
    centered = lax.sub(a, a_mean)  # lax broadcasts the size-1 axes of the kept-dims mean
    if dtypes.issubdtype(computation_dtype, np.complexfloating):
        centered = lax.real(lax.mul(centered, lax.conj(centered)))
        computation_dtype = centered.dtype
    else:
        centered = lax.square(centered)
    normalizer = _count(a, axis, keepdims, where, computation_dtype)
    normalizer = lax.sub(normalizer, lax.convert_element_type(correction, computation_dtype))
    result = sum(centered, axis, dtype=computation_dtype, keepdims=keepdims, where=where)
    result = lax.convert_element_type(lax.div(result, normalizer), dtype)
    return where3(lax.gt(normalizer, _zero(normalizer)), result, np.nan)


_mean_fn = mean


def _zero(x: Any) -> np.generic:
    return np.asarray(0, dtypes.dtype(x)).astype(dtypes.dtype(x))[()]


def std(a: ArrayLike, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None,
        ddof: int = 0, keepdims: bool = False, *, where: ArrayLike | None = None,
        mean: ArrayLike | None = None, correction: float | None = None) -> Array:
    """``jnp.std``: the standard deviation over ``axis``."""
    correction = _correction(ddof, correction)
    a = ensure_arraylike("std", a)
    return _std(a, axis=_ensure_optional_axes(axis), dtype=dtype, out=out,
                correction=correction, keepdims=keepdims, where=where, mean=mean)


@jitted(static_argnames=("axis", "dtype", "keepdims"), inline=False)
def _std(a: Array, *, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None,
         correction: float = 0, keepdims: bool = False, where: ArrayLike | None = None,
         mean: ArrayLike | None = None) -> Array:
    where = check_where("std", where)
    if dtype is not None and not dtypes.issubdtype(_user_dtype(dtype, "std"), np.inexact):
        raise ValueError(f"dtype argument to jnp.std must be inexact; got {dtype}")
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.std is not supported.")
    return lax.sqrt(var(a, axis=axis, dtype=dtype, correction=correction, keepdims=keepdims,
                        where=where, mean=mean))


def ptp(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False) -> Array:
    """``jnp.ptp``: ``max - min`` over ``axis``."""
    a = ensure_arraylike("ptp", a)
    return _ptp(a, _ensure_optional_axes(axis), out, keepdims)


@jitted(static_argnames=("axis", "out", "keepdims"), inline=False)
def _ptp(a: Array, axis: Axis = None, out: None = None, keepdims: bool = False) -> Array:
    # ptp's body, a plain jit of its own as JAX's.
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.ptp is not supported.")
    return lax.sub(max(a, axis=axis, keepdims=keepdims), min(a, axis=axis, keepdims=keepdims))


@jitted(static_argnames=("axis", "keepdims"), inline=False)
def count_nonzero(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """``jnp.count_nonzero``: the number of nonzero elements over ``axis``."""
    a = ensure_arraylike("count_nonzero", a)
    return sum(lax.ne(a, _zero(a)), axis=axis, dtype=dtypes.default_int_dtype(),
               keepdims=keepdims)


# --------------------------------------------------------------------------------------------
# argmax / argmin
# --------------------------------------------------------------------------------------------

def _arg_reduction(name: str, lax_fn: str, a: ArrayLike, axis: int | None,
                   keepdims: bool | None) -> Array:
    arr = ensure_arraylike(name, a)
    if axis is None:
        dims = tuple(range(arr.ndim))
        arr = lax.reshape(arr, (arr.size,))
        axis = 0
    else:
        axis = canonicalize_axis(operator.index(axis), arr.ndim, IndexError)
        dims = (axis,)
    if arr.shape[axis] == 0:
        raise ValueError(f"attempt to get {name} of an empty sequence")
    result = getattr(lax, lax_fn)(arr, axis, dtypes.default_int_dtype())
    return lax.expand_dims(result, dims) if keepdims else result


@jitted(static_argnames=("axis", "out", "keepdims"), converts_first=True)
def argmax(a: ArrayLike, axis: int | None = None, out: None = None,
           keepdims: bool | None = None) -> Array:
    """``jnp.argmax``: the index of the (first) maximum along ``axis``."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.argmax is not supported.")
    return _arg_reduction("argmax", "argmax", a, axis, keepdims)


@jitted(static_argnames=("axis", "out", "keepdims"), converts_first=True)
def argmin(a: ArrayLike, axis: int | None = None, out: None = None,
           keepdims: bool | None = None) -> Array:
    """``jnp.argmin``: the index of the (first) minimum along ``axis``."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.argmin is not supported.")
    return _arg_reduction("argmin", "argmin", a, axis, keepdims)


def _nan_arg(name: str, fn: Callable, fill: float, a: Array, axis: int | None,
             keepdims: bool) -> Array:
    # JAX's body: NaNs replaced by -inf (inf for argmin), -1 where a slice is all NaN; the
    # fills stay Python scalars, so _where converts them as in JAX.
    if not dtypes.issubdtype(a.dtype, np.inexact):
        return fn(a, axis=axis, keepdims=keepdims)
    nan_mask = lax.ne(a, a)
    a = where3(nan_mask, fill, a)
    res = fn(a, axis=axis, keepdims=keepdims)
    return where3(all(nan_mask, axis=axis, keepdims=keepdims), -1, res)


@jitted(static_argnames=("axis", "keepdims"), inline=False)
def _nanargmax(a: Array, axis: int | None = None, keepdims: bool = False) -> Array:
    return _nan_arg("nanargmax", argmax, -np.inf, a, axis, keepdims)


@jitted(static_argnames=("axis", "keepdims"), inline=False)
def _nanargmin(a: Array, axis: int | None = None, keepdims: bool = False) -> Array:
    return _nan_arg("nanargmin", argmin, np.inf, a, axis, keepdims)


def nanargmax(a: ArrayLike, axis: int | None = None, out: None = None,
              keepdims: bool | None = None) -> Array:
    """``jnp.nanargmax``: ``argmax`` ignoring NaNs (-1 where all are NaN)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.nanargmax is not supported.")
    a = ensure_arraylike("nanargmax", a)
    return _nanargmax(a, None if axis is None else operator.index(axis),
                      keepdims=bool(keepdims))


def nanargmin(a: ArrayLike, axis: int | None = None, out: None = None,
              keepdims: bool | None = None) -> Array:
    """``jnp.nanargmin``: ``argmin`` ignoring NaNs (-1 where all are NaN)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.nanargmin is not supported.")
    a = ensure_arraylike("nanargmin", a)
    return _nanargmin(a, None if axis is None else operator.index(axis),
                      keepdims=bool(keepdims))


# --------------------------------------------------------------------------------------------
# NaN-ignoring reductions
# --------------------------------------------------------------------------------------------

def _nan_reduction(a: ArrayLike, name: str, reduction: Callable, init_val: Any,
                   nan_if_all_nan: bool, axis: Axis = None, keepdims: bool = False,
                   where: ArrayLike | None = None, **kwargs: Any) -> Array:
    a = ensure_arraylike(name, a)
    where = check_where(name, where)
    if not dtypes.issubdtype(a.dtype, np.inexact):
        return reduction(a, axis=axis, keepdims=keepdims, where=where, **kwargs)
    clean = where3(lax.ne(a, a), _reduction_init_val(a.dtype, init_val), a)
    out = reduction(clean, axis=axis, keepdims=keepdims, where=where, **kwargs)
    if nan_if_all_nan:
        return where3(all(lax.ne(a, a), axis=axis, keepdims=keepdims),
                      np.asarray(np.nan, a.dtype)[()], out)
    return out


@jitted(static_argnames=("axis", "keepdims"), inline=False)
def nanmin(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False,
           initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """``jnp.nanmin``: ``min`` ignoring NaNs."""
    return _nan_reduction(a, "nanmin", min, np.inf, initial is None, axis=axis, out=out,
                          keepdims=keepdims, initial=initial, where=where)


@jitted(static_argnames=("axis", "keepdims"), inline=False)
def nanmax(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False,
           initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """``jnp.nanmax``: ``max`` ignoring NaNs."""
    return _nan_reduction(a, "nanmax", max, -np.inf, initial is None, axis=axis, out=out,
                          keepdims=keepdims, initial=initial, where=where)


@jitted(static_argnames=("axis", "dtype", "keepdims"), inline=False)
def nansum(a: ArrayLike, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None,
           keepdims: bool = False, initial: ArrayLike | None = None,
           where: ArrayLike | None = None) -> Array:
    """``jnp.nansum``: ``sum`` treating NaNs as zero."""
    return _nan_reduction(a, "nansum", sum, 0, False, axis=axis,
                          dtype=_user_dtype(dtype, "nanprod"), out=out,  # JAX's name
                          keepdims=keepdims, initial=initial, where=where)


@jitted(static_argnames=("axis", "dtype", "keepdims"), inline=False)
def nanprod(a: ArrayLike, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None,
            keepdims: bool = False, initial: ArrayLike | None = None,
            where: ArrayLike | None = None) -> Array:
    """``jnp.nanprod``: ``prod`` treating NaNs as one."""
    return _nan_reduction(a, "nanprod", prod, 1, False, axis=axis,
                          dtype=_user_dtype(dtype, "nanprod"), out=out,
                          keepdims=keepdims, initial=initial, where=where)


@jitted(static_argnames=("axis", "dtype", "keepdims"), inline=False)
def nanmean(a: ArrayLike, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None,
            keepdims: bool = False, where: ArrayLike | None = None) -> Array:
    """``jnp.nanmean``: ``mean`` over the non-NaN elements."""
    a = ensure_arraylike("nanmean", a)
    where = check_where("nanmean", where)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.nanmean is not supported.")
    if a.dtype == np.bool_ or dtypes.issubdtype(a.dtype, np.integer):
        return mean(a, axis, dtype, out, keepdims, where=where)
    dtype = _user_dtype(dtype, "mean") or dtypes.canonicalize_dtype(
        dtypes.to_inexact_dtype(a.dtype))
    not_nan = lax.bitwise_not(lax.ne(a, a))
    normalizer = sum(not_nan, axis=axis, dtype=dtype, keepdims=keepdims, where=where)
    return lax.div(nansum(a, axis, dtype=dtype, keepdims=keepdims, where=where), normalizer)


@jitted(static_argnames=("axis", "dtype", "keepdims"), inline=False)
def nanvar(a: ArrayLike, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None,
           ddof: int = 0, keepdims: bool = False, where: ArrayLike | None = None,
           mean: ArrayLike | None = None) -> Array:
    """``jnp.nanvar``: ``var`` over the non-NaN elements."""
    a = ensure_arraylike("nanvar", a)
    where = check_where("nanvar", where)
    dtype = _user_dtype(dtype, "nanvar")
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.nanvar is not supported.")
    computation_dtype, dtype = _var_promote_types(a.dtype, dtype)
    a = a.astype(computation_dtype)
    if mean is None:
        a_mean = nanmean(a, axis, dtype=computation_dtype, keepdims=True, where=where)
    else:
        a_mean = ensure_arraylike("nanvar", mean).astype(computation_dtype)
    # Zero at the NaNs after subtracting (the double-where trick: no NaN gradients).
    centered = where3(lax.ne(a, a), 0, lax.sub(a, a_mean))
    if dtypes.issubdtype(centered.dtype, np.complexfloating):
        centered = lax.real(lax.mul(centered, lax.conj(centered)))
    else:
        centered = lax.square(centered)
    normalizer = sum(lax.bitwise_not(lax.ne(a, a)), axis=axis, keepdims=keepdims, where=where)
    normalizer = normalizer - ddof
    normalizer_mask = lax.le(normalizer, _zero(normalizer))
    result = sum(centered, axis, keepdims=keepdims, where=where)
    result = where3(normalizer_mask, np.nan, result)
    divisor = where3(normalizer_mask, 1, normalizer)
    result = lax.div(result, lax.convert_element_type(divisor, result.dtype))
    return lax.convert_element_type(result, dtype)


@jitted(static_argnames=("axis", "dtype", "keepdims"), inline=False)
def nanstd(a: ArrayLike, axis: Axis = None, dtype: DTypeLike | None = None, out: None = None,
           ddof: int = 0, keepdims: bool = False, where: ArrayLike | None = None,
           mean: ArrayLike | None = None) -> Array:
    """``jnp.nanstd``: ``std`` over the non-NaN elements."""
    a = ensure_arraylike("nanstd", a)
    where = check_where("nanstd", where)
    dtype = _user_dtype(dtype, "nanstd")
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.nanstd is not supported.")
    return lax.sqrt(nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims,
                           where=where, mean=mean))


# --------------------------------------------------------------------------------------------
# Cumulative reductions
# --------------------------------------------------------------------------------------------

def _cumulative_reduction(name: str, lax_fn: str, a: ArrayLike, axis: int | None,
                          dtype: DTypeLike | None, out: None = None, fill_nan: bool = False,
                          fill_value: Any = 0, promote_integers: bool = False) -> Array:
    a = ensure_arraylike(name, a)
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.{name} is not supported")
    # A Python scalar (weakly typed) counts as 1-D, as in JAX; an explicit axis of a 0-d array
    # is out of bounds.
    if axis is None or (a.ndim == 0 and dtypes.is_weakly_typed(a)):
        a = lax.reshape(a, (a.size,))
    if axis is None:
        axis = 0
    axis = canonicalize_axis(axis, a.ndim)
    if fill_nan and dtypes.issubdtype(a.dtype, np.inexact):
        a = where3(lax.ne(a, a), np.asarray(fill_value, a.dtype)[()], a)
    dtype = _user_dtype(dtype, name)
    if dtype is None:
        result_type = _promote_integer_dtype(a.dtype) if promote_integers or \
            a.dtype == np.bool_ else a.dtype
        computation_type = result_type
    elif dtype == np.bool_:
        result_type = dtype
        if a.dtype != result_type:
            a = lax.ne(a, _zero(a))
        computation_type = _promote_integer_dtype(result_type)
    else:
        result_type = computation_type = dtype
    a = lax.convert_element_type(a, computation_type)
    result = getattr(lax, lax_fn)(a, axis=axis)
    return lax.convert_element_type(result, result_type)


@jitted(static_argnames=("axis", "dtype", "out"), inline=False)
def cumsum(a: ArrayLike, axis: int | None = None, dtype: DTypeLike | None = None,
           out: None = None) -> Array:
    """``jnp.cumsum``: the running sum along ``axis`` (of the flattened array by default)."""
    return _cumulative_reduction("cumsum", "cumsum", a, axis, dtype, out)


@jitted(static_argnames=("axis", "dtype", "out"), inline=False)
def cumprod(a: ArrayLike, axis: int | None = None, dtype: DTypeLike | None = None,
            out: None = None) -> Array:
    """``jnp.cumprod``: the running product along ``axis``."""
    return _cumulative_reduction("cumprod", "cumprod", a, axis, dtype, out)


cumproduct = cumprod


@jitted(static_argnames=("axis", "dtype"), inline=False)
def nancumsum(a: ArrayLike, axis: int | None = None, dtype: DTypeLike | None = None,
              out: None = None) -> Array:
    """``jnp.nancumsum``: ``cumsum`` treating NaNs as zero."""
    return _cumulative_reduction("nancumsum", "cumsum", a, axis, dtype, out, fill_nan=True,
                                 fill_value=0)


@jitted(static_argnames=("axis", "dtype"), inline=False)
def nancumprod(a: ArrayLike, axis: int | None = None, dtype: DTypeLike | None = None,
               out: None = None) -> Array:
    """``jnp.nancumprod``: ``cumprod`` treating NaNs as one."""
    return _cumulative_reduction("nancumprod", "cumprod", a, axis, dtype, out, fill_nan=True,
                                 fill_value=1)


def _cumulative_api(name: str, lax_fn: str, x: ArrayLike, axis: int | None,
                    dtype: DTypeLike | None, include_initial: bool, initial: int,
                    promote: bool) -> Array:
    x = ensure_arraylike(name, x)
    if x.ndim == 0:
        raise ValueError("The input must be non-scalar to take a cumulative "
                         f"{'sum' if initial == 0 else 'product'}, however a scalar value or "
                         "scalar array was given.")
    if axis is None:
        axis = 0
        if x.ndim > 1:
            raise ValueError(f"The input array has rank {x.ndim}, however axis was not set to "
                             "an explicit value. The axis argument is only optional for "
                             "one-dimensional arrays.")
    axis = canonicalize_axis(axis, x.ndim)
    dtype = _user_dtype(dtype)  # JAX names no function here
    if lax_fn == "cumsum":
        out = _cumsum_with_promotion(x, axis=axis, dtype=dtype)
    else:
        out = _cumulative_reduction(name, lax_fn, x, axis, dtype, promote_integers=promote)
    if include_initial:
        shape = list(x.shape)
        shape[axis] = 1
        out = lax.concatenate([lax.full(shape, initial, dtype=out.dtype), out], axis)
    return out


@jitted(static_argnames=("axis", "dtype"), inline=False)
def _cumsum_with_promotion(a: ArrayLike, axis: int | None = None,
                           dtype: DTypeLike | None = None) -> Array:
    # cumulative_sum's body: a plain jit of its own in JAX (integers widen to the default
    # integer type).
    return _cumulative_reduction("_cumsum_with_promotion", "cumsum", a, axis, dtype,
                                 promote_integers=True)


def cumulative_sum(x: ArrayLike, /, *, axis: int | None = None, dtype: DTypeLike | None = None,
                   include_initial: bool = False) -> Array:
    """``jnp.cumulative_sum`` (array API): ``cumsum`` with ``include_initial``."""
    return _cumulative_api("cumulative_sum", "cumsum", x, axis, dtype, include_initial, 0, True)


def cumulative_prod(x: ArrayLike, /, *, axis: int | None = None,
                    dtype: DTypeLike | None = None, include_initial: bool = False) -> Array:
    """``jnp.cumulative_prod`` (array API): ``cumprod`` with ``include_initial``."""
    return _cumulative_api("cumulative_prod", "cumprod", x, axis, dtype, include_initial, 1,
                           False)
