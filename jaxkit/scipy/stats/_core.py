"""``jaxkit.scipy.stats``' sample statistics: ``mode``, ``rankdata`` and ``sem``."""
from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import numpy as np

from jaxkit import dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.transforms.jit import jit
from jaxkit.transforms.vmap import vmap
from jaxkit.numpy._promotion import check_arraylike
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.typing import Array, ArrayLike


class ModeResult(NamedTuple):
    mode: Array
    count: Array


def _check_nan_policy(name: str, nan_policy: str) -> None:
    if nan_policy not in ["propagate", "omit", "raise"]:
        raise ValueError(f"Illegal nan_policy value {nan_policy!r}; expected one of "
                         "{'propagate', 'omit', 'raise'}")
    if nan_policy == "omit":
        raise NotImplementedError(f"Logic for `nan_policy` of {nan_policy} is not implemented")
    if nan_policy == "raise":
        raise NotImplementedError(
            f"In order to best JIT compile `{name}`, we cannot know whether `x` contains nans. "
            "Please check if nans exist in `x` outside of the `mode` function.")


@partial(jit, static_argnames=["axis", "nan_policy", "keepdims"])
def mode(a: ArrayLike, axis: int | None = 0, nan_policy: str = "propagate",
         keepdims: bool = False) -> ModeResult:
    """The most frequent value along ``axis`` (the smallest on ties) and its count."""
    check_arraylike("mode", a)
    x = jnp.atleast_1d(a)
    _check_nan_policy("mode", nan_policy)
    if axis is not None:
        if not -x.ndim <= axis < x.ndim:
            raise ValueError(f"axis {axis} is out of bounds for array of dimension {x.ndim}")
        axis = axis % x.ndim
    shape = x.shape
    if axis is None:
        out_shape = tuple(1 for _ in shape) if keepdims else ()
        axis, x = 0, x.ravel()
    else:
        out_shape = tuple(1 if i == axis else s for i, s in enumerate(shape)) if keepdims else \
            tuple(s for i, s in enumerate(shape) if i != axis)

    def one(column):
        if column.size == 0:
            nan = jnp.array(np.nan, dtype=dtypes.canonicalize_dtype(np.float64))
            return nan, jnp.array(0, dtype=nan.dtype)
        vals, counts = jnp.unique(column, return_counts=True, size=column.size)
        return vals[jnp.argmax(counts)], counts.max()

    x = jnp.moveaxis(x, axis, 0)
    x = x.reshape(x.shape[0], math.prod(x.shape[1:]))
    vals, counts = vmap(one, in_axes=1)(x)
    return ModeResult(vals.reshape(out_shape), counts.reshape(out_shape))


def _invert_permutation(i: Array) -> Array:
    return jnp.empty_like(i).at[i].set(jnp.arange(i.size, dtype=i.dtype))


@partial(jit, static_argnames=["method", "axis", "nan_policy"])
def rankdata(a: ArrayLike, method: str = "average", *, axis: int | None = None,
             nan_policy: str = "propagate") -> Array:
    """Ranks of the data (1-based), ties resolved by ``method`` ('average', 'min', 'max',
    'dense' or 'ordinal'); all NaN if the data hold a NaN."""
    check_arraylike("rankdata", a)
    _check_nan_policy("rankdata", nan_policy)
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ValueError(f"unknown method '{method}'")
    if axis is not None:
        return jnp.apply_along_axis(rankdata, axis, a, method)
    a = jnp.ravel(a)
    out_dtype = dtypes.canonicalize_dtype(np.float64)

    def ranks(a):
        arr, sorter = lax.sort_key_val(a, jnp.arange(a.size))
        inv = _invert_permutation(sorter)
        if method == "ordinal":
            return (inv + 1).astype(out_dtype)
        new_value = jnp.concatenate([jnp.array([True]), arr[1:] != arr[:-1]])
        dense = new_value.cumsum()[inv]
        if method == "dense":
            return dense.astype(out_dtype)
        count = jnp.nonzero(new_value, size=arr.size + 1,
                            fill_value=new_value.size)[0].astype(out_dtype)
        if method == "max":
            return count[dense]
        if method == "min":
            return count[dense - 1] + 1
        return .5 * (count[dense] + count[dense - 1] + 1)

    return lax.cond(jnp.any(jnp.isnan(a)), lambda a: jnp.full_like(a, jnp.nan, out_dtype),
                    ranks, a)


@partial(jit, static_argnames=["axis", "nan_policy", "keepdims"])
def sem(a: ArrayLike, axis: int | None = 0, ddof: int = 1, nan_policy: str = "propagate", *,
        keepdims: bool = False) -> Array:
    """The standard error of the mean along ``axis``."""
    b, = promote_args_inexact("sem", a)
    if nan_policy == "propagate":
        size = b.size if axis is None else b.shape[axis]
        return b.std(axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(size).astype(b.dtype)
    if nan_policy == "omit":
        count = (~jnp.isnan(b)).sum(axis, keepdims=keepdims)
        return jnp.nanstd(b, axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(count).astype(
            b.dtype)
    raise ValueError(f"{nan_policy} is not supported")
