"""The array operations the interpreters need from lax, registered with them: zeros of an
aval (``ad``'s symbolic zeros made concrete), moving or inserting a batch axis (``batching``)
and a tracer's rows (``core``'s iteration, ``a, b = tracer``). They live in ``lax`` because
they bind its primitives; the interpreters and ``core`` sit below ``lax`` and receive them
here."""
from __future__ import annotations

import numpy as np

from jaxkit import core, dtypes
from jaxkit.interpreters import ad, batching
from jaxkit.lax.slicing import index_in_dim
from jaxkit.lax.structural import broadcast_in_dim, convert_element_type, transpose


def _zeros_like_aval(aval: core.ShapedArray):
    if dtypes.is_extended(aval.dtype):  # the zero the dtype's rule gives, broadcast
        return broadcast_in_dim(aval.dtype.zero(), aval.shape, ())
    # A weakly typed aval gets weak zeros (the gradient with respect to a Python scalar is
    # weak, as in JAX).
    zero = np.zeros((), aval.dtype)[()]
    if core.current_trace() is core.eval_trace:
        zero = convert_element_type(zero, aval.dtype, aval.weak_type)
    elif aval.weak_type:
        if dtypes.dtype(zero.item(), canonicalize=True) == aval.dtype:
            # Folds to a weak literal: a tracer (user rules given instantiated zeros read
            # ``.shape`` or assign into them, as Flax's nnx.custom_vjp bwd does), printed as
            # a literal in jaxprs.
            zero = convert_element_type(0, aval.dtype, True)
        else:
            zero = convert_element_type(zero, aval.dtype, True)
    return zero if aval.shape == () else broadcast_in_dim(zero, aval.shape, ())


def _moveaxis(x, src: int, dst: int):
    perm = [i for i in range(np.ndim(x)) if i != src]
    perm.insert(dst, src)
    return transpose(x, perm)


def _broadcast_new_axis(x, size: int, axis: int):
    aval = core.get_aval(x)
    shape = list(aval.shape)
    shape.insert(axis, size)
    # np.int64 dimensions, as JAX's (they print as ``np.int64(1)`` in its jaxprs).
    dims = tuple(np.delete(np.arange(len(shape)), axis))
    return broadcast_in_dim(x, shape, dims)


def _iter_rows(tracer):
    # As JAX's: ``index_in_dim`` (a slice with unit strides and a squeeze) per row.
    return (index_in_dim(tracer, i, keepdims=False) for i in range(tracer.shape[0]))


ad.register_zeros_like_aval(_zeros_like_aval)
core.Tracer._iter_rows = staticmethod(_iter_rows)
batching.register_axis_ops(moveaxis=_moveaxis, broadcast=_broadcast_new_axis,
                           broadcast_in_dim=broadcast_in_dim)
