"""Structural primitives: broadcasting, reshaping, transposition, squeezing, reversal, iota,
concatenation and splitting, dtype conversion, and ``reduce_sum``.

These carry no arithmetic, so this module sits directly above the interpreters and below the
elementwise primitives (which use ``broadcast_in_dim`` and ``reduce_sum`` in their rules). Most
are linear: each block writes its transpose rule and gets its JVP from ``ad.deflinear2``.
Slicing and padding live in ``slicing.py``, the other reductions in ``reductions.py``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import avals as avals_mod
from jaxkit import core, dtypes
from jaxkit._config import config
from jaxkit.interpreters import dispatch
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.mlir import hlo
from jaxkit.lax import sharding_rules as shr
from jaxkit.lax.convert import (  # noqa: F401  (re-exported: lax and its users import them here)
    convert_element_type,
    convert_element_type_p,
    convert_formed,
    from_edtype_p,
    host_constant,
    to_edtype_p,
)
from jaxkit.lax.sharding_eager import lay_out_eager_results, like_concrete, like_type_sharding
from jaxkit.lax.standard import (
    _all_weak,
    _num,
    _first_weak,
    as_tuple_of_indices,
    as_tuple_of_ints,
    canonicalize_axis,
    canonicalize_shape,
    check_dtype,
    standard_primitive,
)
from jaxkit.runtime.array import Array as ConcreteArray
from jaxkit.typing import Array, ArrayLike, DTypeLike


def _is_array(x) -> bool:
    return isinstance(x, (core.Tracer, Array))


# ---- broadcast_in_dim -----------------------------------------------------------------------
def broadcast_in_dim(operand: ArrayLike, shape: Sequence[int],
                     broadcast_dimensions: Sequence[int], *, out_sharding=None) -> Array:
    """Broadcast ``operand`` to ``shape``; operand axis i becomes result axis
    ``broadcast_dimensions[i]``. ``out_sharding`` (over Explicit mesh axes) types the
    result's layout. Lowers to ``stablehlo.broadcast_in_dim``."""
    shape = as_tuple_of_ints(shape, "broadcast_in_dim shape")
    dims = as_tuple_of_indices(broadcast_dimensions, "broadcast_dimensions")
    sharding = shr.resolve_out_sharding("broadcast_in_dim", out_sharding)
    # A copy is skipped for a concrete array (and, as JAX, for a scalar); a traced identity
    # broadcast binds: staging forwards it (``pe.forwarding_rules``), but a linear function
    # traced for transposition keeps it, so its transpose sums over no axes as JAX's does.
    if sharding is None and (
            dims == tuple(range(len(shape))) and operand.shape == shape
            if isinstance(operand, ConcreteArray)
            else not dims and not shape and isinstance(operand, core.Tracer)):
        return operand
    return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims,
                                   sharding=sharding)


def _check_nonnegative(fun_name: str, arg_name: str, shape: Sequence[int]) -> None:
    """JAX's words for a negative dimension, naming the primitive and argument (before a
    type with that shape is made, which would say it in general terms)."""
    if any(d < 0 for d in shape):
        raise TypeError(f"{fun_name} {arg_name} must have every element be nonnegative, got "
                        f"{tuple(shape)}.")


def _broadcast_in_dim_shape_rule(operand, *, shape, broadcast_dimensions, sharding=None):
    _check_nonnegative("broadcast_in_dim", "shape", shape)
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


def _broadcast_in_dim_transpose(ct, operand, *, shape, broadcast_dimensions, sharding=None):
    # JAX's rule: sum over every result axis that no non-unit operand axis maps to (an empty
    # sum too), then put the operand's unit axes back.
    in_shape = operand.aval.shape
    unit_dims = [i for i, d in enumerate(in_shape) if d == 1]
    kept = [d for i, d in enumerate(broadcast_dimensions) if i not in unit_dims]
    summed = tuple(d for d in range(len(shape)) if d not in kept)
    return [expand_dims(_reduce_sum(ct, summed), unit_dims)]


def _broadcast_in_dim_batch(axis_data, args, dims, *, shape, broadcast_dimensions,
                            sharding=None):
    (x,), (d,) = args, dims
    x = batching.moveaxis(x, d, 0)
    new_shape = (x.shape[0],) + tuple(shape)
    # NumPy integers past the batch axis, as JAX's rule computes them (``np.add``).
    new_dims = (0,) + tuple(np.add(1, np.asarray(broadcast_dimensions, np.int64)))
    if sharding is not None:  # the batch dimension keeps its layout
        sharding = shr.NamedSharding(sharding.mesh, shr.PartitionSpec(
            axis_data.explicit_mesh_axis, *sharding.spec))
    return broadcast_in_dim(x, new_shape, new_dims, out_sharding=sharding), 0


broadcast_in_dim_p = standard_primitive(_broadcast_in_dim_shape_rule,
                                        lambda x, **_: x.dtype, "broadcast_in_dim",
                                        lambda x, **_: x.weak_type)
broadcast_in_dim_p.def_param_defaults(sharding=None)
ad.deflinear2(broadcast_in_dim_p, _broadcast_in_dim_transpose)
pe.forwarding_rules[broadcast_in_dim_p] = (
    lambda x, *, shape, broadcast_dimensions, sharding=None:
    0 if sharding is None and np.shape(x) == shape else None)
shr.defsharding(broadcast_in_dim_p, shr.broadcast_in_dim_rule)
shr.defur(broadcast_in_dim_p, shr.sharding_ur.keep_rule)
batching.defrule(broadcast_in_dim_p, _broadcast_in_dim_batch)
lay_out_eager_results(broadcast_in_dim_p)
mlir.register_lowering(broadcast_in_dim_p, lambda ctx, x, *, shape, broadcast_dimensions,
                       sharding=None: mlir.broadcast_in_dim(x, ctx.avals_out[0],
                                                            broadcast_dimensions))
# Printed as JAX prints it: the shape is the binder's type; empty dimensions are left out.
core.defpp_params(broadcast_in_dim_p, lambda params: (
    {"broadcast_dimensions": params["broadcast_dimensions"]}
    if params["broadcast_dimensions"] else {}))


def broadcast(operand: ArrayLike, sizes: Sequence[int], *, out_sharding=None) -> Array:
    """Add leading axes of ``sizes``: the result has shape ``(*sizes, *operand.shape)``,
    laid out as ``out_sharding`` says over Explicit mesh axes. Lowers to
    ``stablehlo.broadcast_in_dim``."""
    sizes = as_tuple_of_ints(sizes, "broadcast sizes")
    if not sizes and out_sharding is None and _is_array(operand):
        return operand
    ndim = np.ndim(operand)
    dims = tuple(range(len(sizes), len(sizes) + ndim))
    return broadcast_in_dim(operand, sizes + tuple(np.shape(operand)), dims,
                            out_sharding=out_sharding)


def expand_dims(array: ArrayLike, dimensions: Sequence[int]) -> Array:
    """Insert axes of size 1 at ``dimensions`` (positions in the result). Lowers to
    ``stablehlo.broadcast_in_dim``."""
    dimensions = as_tuple_of_ints(dimensions, "expand_dims dimensions")
    if len(set(dimensions)) != len(dimensions):
        raise ValueError(f"repeated axis in lax.expand_dims: {dimensions}")
    ndim_out = np.ndim(array) + len(dimensions)
    dims = [canonicalize_axis(i, ndim_out) for i in dimensions]
    if len(set(dims)) != len(dims):  # check again after canonicalizing
        raise ValueError(f"repeated axis in lax.expand_dims: {dims}")
    result_shape = list(np.shape(array))
    for i in sorted(dims):
        result_shape.insert(i, 1)
    kept = [i for i in range(ndim_out) if i not in dims]
    return broadcast_in_dim(array, result_shape, kept)


# ---- reshape -------------------------------------------------------------------------------
def reshape(operand: ArrayLike, new_sizes: Sequence[int],
            dimensions: Sequence[int] | None = None, *, out_sharding: Any = None) -> Array:
    """Reshape (row-major); with ``dimensions``, the operand is first transposed by that
    permutation; ``out_sharding`` (over Explicit mesh axes) types the result's layout. Lowers
    to ``stablehlo.reshape`` (after ``stablehlo.transpose``)."""
    new_sizes = canonicalize_shape(new_sizes)
    dims = None if dimensions is None else as_tuple_of_ints(dimensions, "reshape dimensions")
    same_order = dims is None or dims == tuple(range(len(dims)))
    sharding = shr.resolve_out_sharding("reshape", out_sharding)
    aval = core.get_aval(operand)
    # A scalar is reshaped even to (): JAX binds it, so jaxprs keep the equation.
    if same_order and aval.shape and aval.shape == new_sizes and _is_array(operand) and (
            sharding is None or getattr(aval, "_sharding", None) == sharding):
        return operand
    return reshape_p.bind(operand, new_sizes=new_sizes, dimensions=None if same_order else dims,
                          sharding=sharding)


def _reshape_shape_rule(operand, *, new_sizes, dimensions, sharding=None):
    if not all(d >= 0 for d in new_sizes):
        raise TypeError(f"reshape new_sizes must all be positive, got {new_sizes}.")
    if math.prod(new_sizes) != operand.size:
        raise TypeError(f"reshape total size must be unchanged, got new_sizes {new_sizes} for "
                        f"shape {operand.shape}.")
    if dimensions is not None and sorted(dimensions) != list(range(operand.ndim)):
        raise TypeError(f"reshape dimensions must be a permutation of operand dimensions, got "
                        f"dimensions {dimensions} for shape {operand.shape}.")
    return new_sizes


def _reshape_transpose(ct, operand, *, new_sizes, dimensions, sharding=None):
    back = operand.aval._sharding  # the cotangent goes back to the operand's layout
    if dimensions is None:
        return [reshape(ct, operand.aval.shape, out_sharding=back)]
    permuted = tuple(operand.aval.shape[d] for d in dimensions)
    if back is not None:
        back = shr.NamedSharding(back.mesh, shr.PartitionSpec(
            *(back.spec.partitions[d] for d in dimensions)))
    return [transpose(reshape(ct, permuted, out_sharding=back), tuple(np.argsort(dimensions)))]


def _reshape_batch(axis_data, args, dims, *, new_sizes, dimensions, sharding=None):
    (x,), (d,) = args, dims
    x = batching.moveaxis(x, d, 0)
    if dimensions is not None:
        dimensions = (0,) + tuple(i + 1 for i in dimensions)
    if sharding is not None:  # the batch dimension keeps its layout
        sharding = shr.NamedSharding(sharding.mesh, shr.PartitionSpec(
            axis_data.explicit_mesh_axis, *sharding.spec))
    return reshape(x, (x.shape[0],) + new_sizes, dimensions, out_sharding=sharding), 0


def _reshape_lowering(ctx, x, *, new_sizes, dimensions, sharding=None):
    if dimensions is not None:
        x = hlo.TransposeOp(x, mlir.i64_attr(dimensions)).result
    return hlo.ReshapeOp(mlir.aval_to_ir_type(ctx.avals_out[0]), x).result


reshape_p = standard_primitive(_reshape_shape_rule, lambda x, **_: x.dtype, "reshape",
                               _first_weak)
reshape_p.def_param_defaults(sharding=None)
ad.deflinear2(reshape_p, _reshape_transpose)
shr.defsharding(reshape_p, shr.reshape_rule)
shr.defur(reshape_p, shr.sharding_ur.keep_rule)
batching.defrule(reshape_p, _reshape_batch)
lay_out_eager_results(reshape_p)
mlir.register_lowering(reshape_p, _reshape_lowering)


def collapse(operand: ArrayLike, start_dimension: int, stop_dimension: int | None = None
             ) -> Array:
    """Merge axes ``[start_dimension, stop_dimension)`` into one (row-major)."""
    shape = np.shape(operand)
    lo, hi, _ = slice(start_dimension, stop_dimension).indices(len(shape))
    if hi < lo:
        raise ValueError(f"Invalid dimension range passed to collapse: {shape}"
                         f"[{start_dimension}:{stop_dimension}]")
    size = math.prod(shape[lo:hi])
    return reshape(operand, shape[:lo] + (size,) + shape[hi:])


# ---- squeeze -------------------------------------------------------------------------------
def squeeze(array: ArrayLike, dimensions: Sequence[int]) -> Array:
    """Remove axes of size 1. Lowers to ``stablehlo.reshape``."""
    ndim = np.ndim(array)
    dimensions = tuple(sorted(canonicalize_axis(i, ndim) for i in
                              as_tuple_of_ints(dimensions, "squeeze dimensions")))
    if not dimensions and _is_array(array):
        return array
    return squeeze_p.bind(array, dimensions=dimensions)


def _squeeze_shape_rule(operand, *, dimensions):
    shape = operand.shape
    if len(set(dimensions)) != len(dimensions):
        raise ValueError(f"dimensions are not unique: {dimensions}")
    if not all(0 <= d < len(shape) for d in dimensions):
        raise ValueError(f"dimensions outside range [0, ndim): {dimensions}")
    if any(shape[d] != 1 for d in dimensions):
        raise ValueError("cannot select an axis to squeeze out which has size not equal to "
                         f"one, got shape={shape} and dimensions={dimensions}")
    return tuple(s for i, s in enumerate(shape) if i not in dimensions)


def _squeeze_batch(axis_data, args, dims, *, dimensions):
    (x,), (d,) = args, dims
    x = batching.moveaxis(x, d, 0)
    return squeeze(x, tuple(i + 1 for i in dimensions)), 0


squeeze_p = standard_primitive(_squeeze_shape_rule, lambda x, **_: x.dtype, "squeeze",
                               _first_weak)
ad.deflinear2(squeeze_p, lambda ct, x, *, dimensions: [expand_dims(ct, dimensions)])
batching.defrule(squeeze_p, _squeeze_batch)
shr.defsharding(squeeze_p, shr.squeeze_rule)
shr.defur(squeeze_p, shr.sharding_ur.keep_rule)
mlir.register_lowering(squeeze_p, lambda ctx, x, **_: hlo.ReshapeOp(
    mlir.aval_to_ir_type(ctx.avals_out[0]), x).result)


# ---- transpose -----------------------------------------------------------------------------
def transpose(operand: ArrayLike, permutation: Sequence[int]) -> Array:
    """Permute the axes. Lowers to ``stablehlo.transpose``."""
    permutation = as_tuple_of_ints(permutation, "transpose permutation")
    if permutation == tuple(range(len(permutation))) and _is_array(operand) and \
            operand.ndim == len(permutation):
        return operand
    return transpose_p.bind(operand, permutation=permutation)


def _transpose_shape_rule(operand, *, permutation):
    if sorted(permutation) != list(range(operand.ndim)):
        raise TypeError(f"transpose permutation isn't a permutation of operand dimensions, got "
                        f"permutation {permutation} for operand shape {operand.shape}.")
    return tuple(operand.shape[p] for p in permutation)


def _transpose_batch(axis_data, args, dims, *, permutation):
    (x,), (d,) = args, dims
    perm = (d,) + tuple(p if p < d else p + 1 for p in permutation)
    return transpose(x, perm), 0


transpose_p = standard_primitive(_transpose_shape_rule, lambda x, **_: x.dtype, "transpose",
                                 lambda x, **_: x.weak_type)
ad.deflinear2(transpose_p, lambda ct, x, *, permutation:
              [transpose(ct, tuple(np.argsort(permutation)))])
shr.defsharding(transpose_p, shr.transpose_rule)
shr.defur(transpose_p, shr.sharding_ur.keep_rule)
batching.defrule(transpose_p, _transpose_batch)
mlir.register_lowering(transpose_p, lambda ctx, x, *, permutation: hlo.TransposeOp(
    x, mlir.i64_attr(permutation)).result)


# ---- rev -----------------------------------------------------------------------------------
def rev(operand: ArrayLike, dimensions: Sequence[int]) -> Array:
    """Reverse the order of elements along ``dimensions``. Lowers to ``stablehlo.reverse``."""
    return rev_p.bind(operand, dimensions=as_tuple_of_indices(dimensions, "rev dimensions"))


def _rev_shape_rule(operand, *, dimensions):
    if len(set(dimensions)) != len(dimensions):
        raise TypeError(f"rev dimensions must be unique, got {dimensions}.")
    if dimensions and not (max(dimensions) < operand.ndim and min(dimensions) >= 0):
        raise TypeError(f"rev dimensions must all be less than operand ndim, got dimensions "
                        f"{dimensions} for operand ndim {operand.ndim}.")
    return operand.shape


def _rev_batch(axis_data, args, dims, *, dimensions):
    (x,), (d,) = args, dims
    return rev(x, tuple(i + 1 if i >= d else i for i in dimensions)), d


rev_p = standard_primitive(_rev_shape_rule, lambda x, **_: x.dtype, "rev", _first_weak)
ad.deflinear2(rev_p, lambda ct, x, *, dimensions: [rev(ct, dimensions)])
batching.defrule(rev_p, _rev_batch)
shr.defsharding(rev_p, shr.unary_rule)
mlir.register_lowering(rev_p, lambda ctx, x, *, dimensions: hlo.ReverseOp(
    x, mlir.i64_attr(dimensions)).result)


# ---- iota ----------------------------------------------------------------------------------
def iota(dtype: DTypeLike, size: int) -> Array:
    """``[0, 1, ..., size - 1]`` of ``dtype``. Lowers to ``stablehlo.iota``."""
    return broadcasted_iota(dtype, (size,), 0)


def broadcasted_iota(dtype: DTypeLike, shape: Sequence[int], dimension: int, *,
                     out_sharding: Any = None) -> Array:
    """An array of ``shape`` whose value is the index along ``dimension``, laid out as
    ``out_sharding`` says over Explicit mesh axes. Lowers to ``stablehlo.iota``."""
    dtype = dtypes.check_and_canonicalize_user_dtype(dtype, "broadcasted_iota")
    shape = canonicalize_shape(shape)
    dimension = int(core.concrete_or_error(dimension, "dimension argument of "
                                                      "lax.broadcasted_iota"))
    sharding = shr.resolve_out_sharding("broadcasted_iota", out_sharding)
    return iota_p.bind(dtype=dtype, shape=shape, dimension=dimension, sharding=sharding)


def _iota_abstract_eval(*, dtype, shape, dimension, sharding=None):
    if not dtypes.issubdtype(dtype, np.integer) and not dtypes.issubdtype(dtype, np.inexact):
        raise TypeError(f"iota does not accept dtype {np.dtype(dtype).name}. Accepted dtypes "
                        "are subtypes of integer, floating, complexfloating.")
    _check_nonnegative("iota", "shape", shape)
    if not 0 <= dimension < len(shape):
        raise ValueError(f"iota dimension must be between 0 and len(shape), got "
                         f"dimension={dimension} for shape {shape}")
    return core.ShapedArray(shape, dtype)


iota_p = core.Primitive("iota")
iota_p.def_param_defaults(sharding=None)
iota_p.def_impl(lambda **params: dispatch.apply_primitive(iota_p, **params))
iota_p.def_abstract_eval(_iota_abstract_eval)
ad.defjvp_zero(iota_p)
shr.defsharding(iota_p, lambda *, sharding=None, **_: sharding)
lay_out_eager_results(iota_p)
mlir.register_lowering(iota_p, lambda ctx, *, dtype, shape, dimension, sharding=None: hlo.IotaOp(
    mlir.aval_to_ir_type(ctx.avals_out[0]), dimension).result)


# ---- concatenate / split -------------------------------------------------------------------
def concatenate(operands: Sequence[ArrayLike], dimension: int) -> Array:
    """Join arrays along ``dimension``. Lowers to ``stablehlo.concatenate``."""
    if len(operands) == 0:
        raise ValueError("concatenate requires a non-empty sequences of arrays")
    if len(operands) == 1 and _is_array(operands[0]):
        return operands[0]
    return concatenate_p.bind(*operands, dimension=int(dimension))


def _concatenate_shape_rule(*operands, dimension):
    if len({o.ndim for o in operands}) != 1:
        raise TypeError("Cannot concatenate arrays with different numbers of dimensions: got "
                        f"{', '.join(str(o.shape) for o in operands)}.")
    if not 0 <= dimension < operands[0].ndim:
        raise TypeError(f"concatenate dimension out of bounds: dimension {dimension} for "
                        f"shapes {', '.join(str(o.shape) for o in operands)}.")
    rest = [o.shape[:dimension] + o.shape[dimension + 1:] for o in operands]
    if any(r != rest[0] for r in rest[1:]):
        raise TypeError("Cannot concatenate arrays with shapes that differ in dimensions other "
                        f"than the one being concatenated: concatenating along dimension "
                        f"{dimension} for shapes {', '.join(str(o.shape) for o in operands)}.")
    shape = operands[0].shape
    return shape[:dimension] + (sum(o.shape[dimension] for o in operands),) + \
        shape[dimension + 1:]


def _concatenate_dtype_rule(*operands, dimension):
    if any(o.dtype != operands[0].dtype for o in operands[1:]):
        raise TypeError("lax.concatenate requires arguments to have the same dtypes, got "
                        f"{', '.join(o.dtype.name for o in operands)}.")
    return operands[0].dtype


def _concatenate_transpose(ct, *operands, dimension):
    shapes = [o.aval.shape if ad.is_undefined_primal(o) else np.shape(o) for o in operands]
    pieces = split(ct, tuple(s[dimension] for s in shapes), dimension)
    return [p if ad.is_undefined_primal(o) else None for p, o in zip(pieces, operands)]


def _concatenate_batch(axis_data, args, dims, *, dimension):
    size = batching.batch_size(args, dims)
    return concatenate([batching.bdim_at_front(x, d, size) for x, d in zip(args, dims)],
                       dimension + 1), 0


concatenate_p = standard_primitive(_concatenate_shape_rule, _concatenate_dtype_rule,
                                   "concatenate", _all_weak)
ad.deflinear2(concatenate_p, _concatenate_transpose)
batching.defrule(concatenate_p, _concatenate_batch)
shr.defsharding(concatenate_p, shr.concatenate_rule)
shr.defur(concatenate_p, shr.sharding_ur.same_sets_rule)
mlir.register_lowering(concatenate_p, lambda ctx, *xs, dimension: hlo.ConcatenateOp(
    list(xs), dimension).result)


def split(operand: ArrayLike, sizes: Sequence[int], axis: int = 0) -> list[Array]:
    """Split ``operand`` along ``axis`` into pieces of ``sizes``. Lowers to
    ``stablehlo.slice`` per piece."""
    axis = canonicalize_axis(axis, np.ndim(operand))
    checked = as_tuple_of_ints(sizes, "split sizes")
    # NumPy integers stay as given: JAX binds ``tuple(sizes)``, so ``jnp.split``'s np.int64
    # sizes print as ``np.int64(1)`` in its jaxprs (and compare and hash as the ints).
    sizes = tuple(s if isinstance(s, np.integer) else c for s, c in zip(sizes, checked))
    return split_p.bind(operand, sizes=sizes, axis=axis)


def _split_abstract_eval(operand, *, sizes, axis):
    if any(s < 0 for s in sizes):
        raise ValueError(f"Sizes passed to split must be nonnegative, got {list(sizes)}")
    if operand.shape[axis] != sum(sizes):
        raise ValueError(f"Sum of sizes {sum(sizes)} must be equal to dimension {axis} of the "
                         f"operand shape {list(operand.shape)}")
    shape = operand.shape
    return [operand.update(shape=shape[:axis] + (s,) + shape[axis + 1:]) for s in sizes]


def _split_transpose(cts, operand, *, sizes, axis):
    if all(type(ct) is ad.Zero for ct in cts):
        return [ad.Zero(operand.aval)]
    return [concatenate([ad.instantiate_zeros(ct) for ct in cts], axis)]


def _split_batch(axis_data, args, dims, *, sizes, axis):
    (x,), (d,) = args, dims
    return split(x, sizes, axis + 1 if axis >= d else axis), [d] * len(sizes)


def _split_lowering(ctx, x, *, sizes, axis):
    start = [0] * len(ctx.avals_in[0].shape)
    outs = []
    for aval in ctx.avals_out:
        limit = list(aval.shape)
        limit[axis] = start[axis] + aval.shape[axis]
        outs.append(hlo.SliceOp(x, mlir.i64_attr(start), mlir.i64_attr(limit),
                                mlir.i64_attr([1] * len(start))).result)
        start[axis] = limit[axis]
    return outs


split_p = core.Primitive("split")
split_p.multiple_results = True
split_p.def_impl(lambda x, **params: dispatch.apply_primitive(split_p, x, **params))
split_p.def_abstract_eval(_split_abstract_eval)
ad.deflinear2(split_p, _split_transpose)
batching.defrule(split_p, _split_batch)
mlir.register_lowering(split_p, _split_lowering)
shr.defsharding(split_p, shr.split_rule)
shr.defur(split_p, shr.sharding_ur.keep_each_rule(lambda x, *, sizes, axis: len(sizes)))


# ---- reduce_sum (the rest of the reductions live in reductions.py) -------------------------
def _reduce_sum(operand: ArrayLike, axes: Sequence[int]) -> Array:
    return reduce_sum_p.bind(operand, axes=tuple(axes))


def reduce_sum(operand: ArrayLike, axes: Sequence[int], *, out_sharding: Any = None) -> Array:
    """Sum over ``axes`` (nonnegative, as all lax reductions), laid out as ``out_sharding``
    says over Explicit mesh axes (which may leave it unreduced over the mesh axes of the
    summed dimensions: ``P(unreduced={'x'})``). Lowers to ``stablehlo.reduce`` with an add
    body."""
    axes = as_tuple_of_indices(axes, "reduce_sum axes")
    asked = shr.resolve_out_sharding("reduce_sum", out_sharding)
    if asked is None:
        return _reduce_sum(operand, axes)
    return reduce_sum_p.bind(operand, axes=axes, out_sharding=asked)


def _reduce_shape_rule(operand, *, axes, **params):
    if len(axes) != len(set(axes)):
        raise ValueError(f"duplicate value in 'axes' of reduction: {axes}")
    if not all(0 <= a < operand.ndim for a in axes):
        shape = ",".join(map(str, operand.shape))
        raise ValueError(f"reduction axes {axes} contains out-of-bounds indices for "
                         f"{operand.dtype.name}[{shape}].")
    return tuple(d for i, d in enumerate(operand.shape) if i not in axes)


def _reduce_sum_transpose(ct, operand, *, axes, out_sharding=None):
    shape = operand.aval.shape
    # NumPy integers, as JAX's transpose computes them (``np.delete``): printed jaxprs show
    # ``broadcast_dimensions=(np.int64(1),)`` as JAX's do.
    kept = tuple(np.delete(np.arange(len(shape)), axes))
    # The cotangent is laid out as the operand (its summed dimensions may be split).
    return [broadcast_in_dim(ct, shape, kept, out_sharding=operand.aval._sharding)]


def _reduce_batch_rule(prim):
    """Batching of a single-operand reduction over ``axes``: shift the axes past the batch
    axis."""

    def rule(axis_data, args, dims, *, axes, **params):
        (x,), (d,) = args, dims
        # NumPy integers, as JAX's batcher computes them (``np.where``): jaxprs of vmapped
        # reductions print ``axes=(np.int64(1),)`` as JAX's do.
        axes = np.asarray(axes, np.int64)
        new_axes = tuple(np.where(np.less(axes, d), axes, np.add(axes, 1)))
        out_d = d - sum(1 for a in new_axes if a < d)
        return prim.bind(x, axes=new_axes, **params), out_d

    return rule


def reduce_lowering(op, init_value):
    """Lowering of a single-operand reduction: ``stablehlo.reduce`` whose body applies the
    binary StableHLO ``op``, starting from ``init_value(dtype)``."""

    def rule(ctx, x, *, axes, out_sharding=None):
        aval_in, aval_out = ctx.avals_in[0], ctx.avals_out[0]
        scalar = mlir.aval_to_ir_type(core.ShapedArray((), aval_in.dtype))
        init = mlir.ir_constant(np.asarray(init_value(aval_in.dtype), aval_in.dtype))
        red = hlo.ReduceOp([mlir.aval_to_ir_type(aval_out)], [x], [init], mlir.i64_attr(axes))
        block = red.regions[0].blocks.append(scalar, scalar)
        with mlir.ir.InsertionPoint(block):
            hlo.ReturnOp([op(*block.arguments).result])
        return red.result
    return rule


def _sum_dtype_rule(x, *, axes, out_sharding=None):
    check_dtype("reduce_sum", x, _num)
    if (not config.jax_allow_f16_reductions and x.dtype in (np.float16, dtypes.bfloat16)
            and any(x.shape[d] != 1 for d in axes)):
        raise ValueError(f"reduce_sum on operand {x.str_short()} is not allowed when "
                         "jax_allow_f16_reductions=False.")
    return x.dtype


reduce_sum_p = standard_primitive(_reduce_shape_rule, _sum_dtype_rule, "reduce_sum",
                                  lambda x, **_: x.weak_type)
reduce_sum_p.def_param_defaults(out_sharding=None)
ad.deflinear2(reduce_sum_p, _reduce_sum_transpose)
shr.defsharding(reduce_sum_p, shr.reduce_sum_rule)
shr.defur(reduce_sum_p, shr.sharding_ur.reduce_sum_rule)
batching.defrule(reduce_sum_p, _reduce_batch_rule(reduce_sum_p))
mlir.register_lowering(reduce_sum_p, reduce_lowering(hlo.AddOp, lambda dt: 0))


# ---- full and friends ----------------------------------------------------------------------
def full(shape: Sequence[int], fill_value: ArrayLike, dtype: DTypeLike | None = None, *,
         sharding: Any = None) -> Array:
    """An array of ``shape`` filled with ``fill_value`` (a broadcast scalar), laid out as
    ``sharding`` says over Explicit mesh axes."""
    shape = canonicalize_shape(shape)
    if np.shape(fill_value):
        raise TypeError(f"full must be called with scalar fill_value, got fill_value.shape "
                        f"{np.shape(fill_value)}.")
    fill_dtype = getattr(fill_value, "dtype", None)
    if dtypes.is_extended(dtype) or dtypes.is_extended(fill_dtype):  # keys: the dtype's rule
        return (dtype if dtype is not None else fill_dtype).full(shape, fill_value)
    weak = dtype is None and dtypes.is_weakly_typed(fill_value)
    # (A formed 64-bit value keeps its dtype without x64, a NumPy one is canonicalized.)
    dtype = dtypes.dtype(fill_value, canonicalize=True) if dtype is None else \
        dtypes.check_and_canonicalize_user_dtype(dtype, "full")
    if not weak and not _is_array(fill_value):
        # A constant: convert it now (a NumPy scalar is staged as a literal, as in JAX).
        scalar = host_constant(fill_value, dtype)
        if not shape and core.current_trace() is not core.eval_trace:
            # JAX folds the conversion of a constant and broadcasts to rank 0 with no
            # equation: staged, a rank-0 ``full`` is a literal (convert_element_type's fold).
            return convert_element_type_p.bind(scalar, new_dtype=dtype, weak_type=False)
    else:
        scalar = convert_formed(fill_value, dtype, weak)
    return broadcast_in_dim(scalar, shape, (), out_sharding=sharding)


def full_like(x: ArrayLike, fill_value: ArrayLike, dtype: DTypeLike | None = None,
              shape: Sequence[int] | None = None, sharding: Any = None) -> Array:
    """``full`` with the shape and dtype (and weak type) of ``x`` unless given, laid out as
    ``sharding`` (over Explicit mesh axes) when given."""
    fill_shape = np.shape(x) if shape is None else shape
    weak = dtype is None and dtypes.is_weakly_typed(x)
    user_dtype = dtype is not None
    # x's own dtype is canonicalised silently (a float64 NumPy x is no user request), as JAX's
    dtype = dtypes.dtype(x, canonicalize=True) if dtype is None else \
        dtypes.check_and_canonicalize_user_dtype(dtype, "dtype")  # JAX's name
    sharding = like_type_sharding(x, shape, shr.resolve_out_sharding("full_like", sharding))
    if weak:
        scalar = convert_formed(fill_value, dtype, True)
        if not tuple(fill_shape) and sharding is None:
            out = scalar  # a weak literal while staging (as JAX): rank 0 needs nothing more
        else:
            out = broadcast_in_dim(scalar, tuple(fill_shape), (), out_sharding=sharding)
    elif user_dtype or dtypes.is_extended(dtype):  # (keys: their dtype's own ``full``)
        out = full(fill_shape, fill_value, dtype, sharding=sharding)
    else:  # x's dtype, kept as JAX's where x is 64-bit made under x64 (no user request)
        fill = convert_formed(fill_value, dtype) if _is_array(fill_value) else \
            host_constant(fill_value, dtype)
        out = full(fill_shape, fill, sharding=sharding)
    if avals_mod.vma_seen:  # in a shard_map body it varies over the manual axes x does
        out = avals_mod.vma_join(None, (out, x), {})[0]
    return like_concrete(out, x, fill_shape, weak, sharding)


def zeros_like_array(x: ArrayLike) -> Array:
    """Zeros of the shape and dtype of ``x``."""
    return full_like(x, 0)
