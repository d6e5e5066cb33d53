"""Structural primitives: broadcasting, reshaping, transposition, dtype conversion, iota,
concatenation, padding, reversal, selection.

These carry no arithmetic; most are linear, so each block writes its transpose rule and gets
its JVP from ``ad.deflinear2``.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from jaxlib.mlir.dialects import stablehlo as hlo

from jaxkit import core, dtypes
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.lax._helpers import _any, as_tuple_of_ints, check_dtype, standard_primitive
from jaxkit.typing import Array, ArrayLike, DTypeLike


# ---- broadcast_in_dim -----------------------------------------------------------------------
def broadcast_in_dim(operand: ArrayLike, shape: Sequence[int],
                     broadcast_dimensions: Sequence[int]) -> Array:
    """Broadcast ``operand`` to ``shape``; operand axis i becomes result axis
    ``broadcast_dimensions[i]``. Lowers to ``stablehlo.broadcast_in_dim``."""
    shape = as_tuple_of_ints(shape, "broadcast_in_dim shape")
    dims = as_tuple_of_ints(broadcast_dimensions, "broadcast_dimensions")
    if (dims == tuple(range(len(shape))) and isinstance(operand, (core.Tracer, Array))
            and operand.shape == shape):
        return operand
    return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims)


def _broadcast_in_dim_shape_rule(operand, *, shape, broadcast_dimensions):
    if operand.ndim != len(broadcast_dimensions):
        raise TypeError(f"broadcast_in_dim broadcast_dimensions must have length equal to the "
                        f"operand rank; got broadcast_dimensions {broadcast_dimensions} for "
                        f"operand of shape {operand.shape}.")
    if any(not 0 <= d < len(shape) for d in broadcast_dimensions) or \
            list(broadcast_dimensions) != sorted(set(broadcast_dimensions)):
        raise TypeError(f"broadcast_in_dim broadcast_dimensions must be strictly increasing and "
                        f"in range for the result rank {len(shape)}; got {broadcast_dimensions}.")
    for i, d in enumerate(broadcast_dimensions):
        if operand.shape[i] not in (1, shape[d]):
            raise TypeError(f"broadcast_in_dim operand dimension sizes must either be 1, or be "
                            f"equal to their corresponding dimensions in the target broadcast "
                            f"shape; got operand of shape {operand.shape}, target broadcast "
                            f"shape {shape}, broadcast_dimensions {broadcast_dimensions}.")
    return shape


def _broadcast_in_dim_transpose(ct, operand, *, shape, broadcast_dimensions):
    in_shape = operand.aval.shape
    unit_dims = tuple(d for i, d in enumerate(broadcast_dimensions) if in_shape[i] == 1
                      and shape[d] != 1)
    summed = tuple(sorted(set(range(len(shape))) - set(broadcast_dimensions)) + unit_dims)
    from_sum = _reduce_sum(ct, tuple(sorted(summed))) if summed else ct
    return [reshape(from_sum, in_shape)]


def _broadcast_in_dim_batch(args, dims, *, shape, broadcast_dimensions):
    (x,), (d,) = args, dims
    x = batching.moveaxis(x, d, 0)
    new_shape = (x.shape[0],) + tuple(shape)
    new_dims = (0,) + tuple(b + 1 for b in broadcast_dimensions)
    return broadcast_in_dim(x, new_shape, new_dims), 0


broadcast_in_dim_p = standard_primitive(_broadcast_in_dim_shape_rule,
                                        lambda x, **_: x.dtype, "broadcast_in_dim",
                                        lambda x, **_: x.weak_type)
ad.deflinear2(broadcast_in_dim_p, _broadcast_in_dim_transpose)
batching.primitive_batchers[broadcast_in_dim_p] = _broadcast_in_dim_batch
mlir.register_lowering(broadcast_in_dim_p, lambda ctx, x, *, shape, broadcast_dimensions:
                       mlir.broadcast_in_dim(x, ctx.avals_out[0], broadcast_dimensions))


# ---- reshape -------------------------------------------------------------------------------
def reshape(operand: ArrayLike, new_sizes: Sequence[int]) -> Array:
    """Reshape (row-major). Lowers to ``stablehlo.reshape``."""
    new_sizes = as_tuple_of_ints(new_sizes, "reshape new_sizes")
    if core.get_aval(operand).shape == new_sizes:
        return operand
    return reshape_p.bind(operand, new_sizes=new_sizes)


def _reshape_shape_rule(operand, *, new_sizes):
    if any(d < 0 for d in new_sizes):
        raise TypeError(f"reshape new_sizes must be nonnegative, got {new_sizes}")
    if int(np.prod(new_sizes)) != operand.size:
        raise TypeError(f"reshape total size must be unchanged, got new_sizes {new_sizes} for "
                        f"shape {operand.shape}.")
    return new_sizes


def _reshape_batch(args, dims, *, new_sizes):
    (x,), (d,) = args, dims
    x = batching.moveaxis(x, d, 0)
    return reshape(x, (x.shape[0],) + new_sizes), 0


reshape_p = standard_primitive(_reshape_shape_rule, lambda x, **_: x.dtype, "reshape",
                               lambda x, **_: x.weak_type)
ad.deflinear2(reshape_p, lambda ct, x, *, new_sizes: [reshape(ct, x.aval.shape)])
batching.primitive_batchers[reshape_p] = _reshape_batch
mlir.register_lowering(reshape_p, lambda ctx, x, **_: hlo.ReshapeOp(
    mlir.aval_to_ir_type(ctx.avals_out[0]), x).result)


# ---- transpose -----------------------------------------------------------------------------
def transpose(operand: ArrayLike, permutation: Sequence[int]) -> Array:
    """Permute the axes. Lowers to ``stablehlo.transpose``."""
    permutation = as_tuple_of_ints(permutation, "transpose permutation")
    if permutation == tuple(range(len(permutation))) and isinstance(operand, (core.Tracer, Array)):
        return operand
    return transpose_p.bind(operand, permutation=permutation)


def _transpose_shape_rule(operand, *, permutation):
    if sorted(permutation) != list(range(operand.ndim)):
        raise TypeError(f"transpose permutation isn't a permutation of operand dimensions, got "
                        f"permutation {permutation} for operand shape {operand.shape}.")
    return tuple(operand.shape[p] for p in permutation)


def _transpose_batch(args, dims, *, permutation):
    (x,), (d,) = args, dims
    perm = (d,) + tuple(p if p < d else p + 1 for p in permutation)
    return transpose(x, perm), 0


transpose_p = standard_primitive(_transpose_shape_rule, lambda x, **_: x.dtype, "transpose",
                                 lambda x, **_: x.weak_type)
ad.deflinear2(transpose_p, lambda ct, x, *, permutation:
              [transpose(ct, tuple(np.argsort(permutation)))])
batching.primitive_batchers[transpose_p] = _transpose_batch
mlir.register_lowering(transpose_p, lambda ctx, x, *, permutation: hlo.TransposeOp(
    x, mlir.i64_attr(permutation)).result)


# ---- convert_element_type ------------------------------------------------------------------
def convert_element_type(operand: ArrayLike, new_dtype: DTypeLike,
                         weak_type: bool = False) -> Array:
    """Cast to ``new_dtype`` (canonicalised). Lowers to ``stablehlo.convert``."""
    new_dtype = dtypes.canonicalize_dtype(new_dtype)
    aval = core.get_aval(operand)
    if aval.dtype == new_dtype and aval.weak_type == weak_type and \
            not isinstance(operand, (int, float, complex, np.generic)):
        return operand
    return convert_element_type_p.bind(operand, new_dtype=new_dtype, weak_type=bool(weak_type))


def _convert_element_type_jvp(primals, tangents, *, new_dtype, weak_type):
    (x,), (t,) = primals, tangents
    out = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)
    out_aval = core.get_aval(out).to_tangent_aval()
    if type(t) is ad.Zero or out_aval.dtype == dtypes.float0 or \
            core.get_aval(t).dtype == dtypes.float0:
        return out, ad.Zero(out_aval)
    return out, convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type)


def _convert_element_type_transpose(ct, operand, *, new_dtype, weak_type):
    old = operand.aval
    if type(ct) is ad.Zero or old.to_tangent_aval().dtype == dtypes.float0:
        return [ad.Zero(old.to_tangent_aval())]
    return [convert_element_type_p.bind(ct, new_dtype=old.dtype, weak_type=old.weak_type)]


def _convert_element_type_lowering(ctx, x, *, new_dtype, weak_type):
    aval_in, aval_out = ctx.avals_in[0], ctx.avals_out[0]
    if dtypes.issubdtype(aval_in.dtype, np.complexfloating) and \
            not dtypes.issubdtype(new_dtype, np.complexfloating):
        x = hlo.RealOp(x).result  # complex -> real drops the imaginary part, as NumPy
        aval_in = aval_in.update(dtype=np.finfo(aval_in.dtype).dtype)
    if new_dtype == np.bool_ and aval_in.dtype != np.bool_:
        zero = mlir.full_like_aval(0, aval_in)
        return mlir.compare_lowering("NE")(ctx.replace(avals_in=[aval_in, aval_in]), x, zero)
    return mlir.convert(x, aval_out)


convert_element_type_p = standard_primitive(
    lambda x, **_: x.shape, lambda x, *, new_dtype, weak_type: np.dtype(new_dtype),
    "convert_element_type", lambda x, *, new_dtype, weak_type: weak_type)
ad.primitive_jvps[convert_element_type_p] = _convert_element_type_jvp
ad.primitive_transposes[convert_element_type_p] = _convert_element_type_transpose
batching.defvectorized(convert_element_type_p)
mlir.register_lowering(convert_element_type_p, _convert_element_type_lowering)


# ---- reduce_sum (the rest of the reductions live in reductions.py) -------------------------
def _reduce_sum(operand: ArrayLike, axes: Sequence[int]) -> Array:
    return reduce_sum_p.bind(operand, axes=tuple(axes))


def _reduce_shape_rule(operand, *, axes):
    if any(not 0 <= a < operand.ndim for a in axes) or len(set(axes)) != len(axes):
        raise ValueError(f"reduction axes {axes} are invalid for an array of shape "
                         f"{operand.shape}")
    return tuple(d for i, d in enumerate(operand.shape) if i not in axes)


def _reduce_sum_transpose(ct, operand, *, axes):
    shape = operand.aval.shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    return [broadcast_in_dim(ct, shape, kept)]


def _reduce_sum_batch(args, dims, *, axes):
    (x,), (d,) = args, dims
    new_axes = tuple(a + (a >= d) for a in axes)
    out_d = d - sum(1 for a in new_axes if a < d)
    return _reduce_sum(x, new_axes), out_d


def _reduce_lowering(op, init_value):
    def rule(ctx, x, *, axes):
        aval_in, aval_out = ctx.avals_in[0], ctx.avals_out[0]
        scalar = core.ShapedArray((), aval_in.dtype)
        init = mlir.ir_constant(np.asarray(init_value(aval_in.dtype), aval_in.dtype))
        red = hlo.ReduceOp([mlir.aval_to_ir_type(aval_out)], [x], [init], mlir.i64_attr(axes))
        block = red.regions[0].blocks.append(mlir.aval_to_ir_type(scalar),
                                             mlir.aval_to_ir_type(scalar))
        with mlir.ir.InsertionPoint(block):
            hlo.ReturnOp([op(*block.arguments).result])
        return red.result
    return rule


def _sum_dtype_rule(x, *, axes):
    check_dtype("reduce_sum", x, _any[1:])
    return x.dtype


reduce_sum_p = standard_primitive(_reduce_shape_rule, _sum_dtype_rule, "reduce_sum",
                                  lambda x, **_: x.weak_type)
ad.deflinear2(reduce_sum_p, _reduce_sum_transpose)
batching.primitive_batchers[reduce_sum_p] = _reduce_sum_batch
mlir.register_lowering(reduce_sum_p, _reduce_lowering(hlo.AddOp, lambda dt: 0))


# ---- registrations used by the interpreters ------------------------------------------------
def full(shape: Sequence[int], fill_value, dtype: DTypeLike | None = None) -> Array:
    """An array of ``shape`` filled with ``fill_value`` (broadcast of a scalar constant)."""
    weak = dtype is None and dtypes.is_weakly_typed(fill_value)
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else
                                      dtypes.dtype(fill_value))
    scalar = convert_element_type(fill_value, dtype, weak)
    return broadcast_in_dim(scalar, tuple(shape), ())


def _zeros_like_aval(aval: core.ShapedArray):
    return broadcast_in_dim(np.zeros((), aval.dtype), aval.shape, ())


def _moveaxis(x, src: int, dst: int):
    perm = [i for i in range(np.ndim(x)) if i != src]
    perm.insert(dst, src)
    return transpose(x, perm)


def _broadcast_new_axis(x, size: int, axis: int):
    aval = core.get_aval(x)
    shape = list(aval.shape)
    shape.insert(axis, size)
    dims = [i for i in range(len(shape)) if i != axis]
    return broadcast_in_dim(x, shape, dims)


ad.register_zeros_like_aval(_zeros_like_aval)
batching.register_axis_ops(moveaxis=_moveaxis, broadcast=_broadcast_new_axis,
                           broadcast_in_dim=broadcast_in_dim)
