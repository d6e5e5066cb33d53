"""``dot_general``: XLA's general contraction (matrix products, batched products, inner and
outer products), with ``dot`` and ``batch_matmul`` conveniences, as in ``jax.lax``.

``dimension_numbers = ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``; the result
holds the batch axes, then the free axes of ``lhs``, then those of ``rhs``. The primitive is
bilinear: its JVP is the product rule and each operand's transpose is another ``dot_general``
(JAX's ``_dot_general_transpose_lhs/rhs``). Under ``vmap`` a batch axis on both operands becomes
one more batch dimension number, a batch axis on one operand a free axis.
"""
from __future__ import annotations

import enum

import numpy as np

from jaxkit import core, dtypes
from jaxkit._config import config
from jaxkit._util import ranges_like, remaining
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax import sharding_rules as shr
from jaxkit.lax.sharding_eager import lay_out_eager_results
from jaxkit.lax.dot_algorithms import DotAlgorithm, DotAlgorithmPreset, compute_types
from jaxkit.runtime.sharding import (AxisType, NamedSharding, PartitionSpec,
                                     current_abstract_mesh)
from jaxkit.lax.standard import _all_weak, as_tuple_of_ints, standard_primitive
from jaxkit.lax.structural import convert_element_type, transpose
from jaxkit.typing import Array, ArrayLike, DTypeLike


class Precision(enum.Enum):
    """Precision of matrix products on accelerators (no effect on CPU): ``DEFAULT``
    (aliases 'default', 'fastest', 'bfloat16'), ``HIGH`` ('high', 'bfloat16_3x',
    'tensorfloat32'), ``HIGHEST`` ('highest', 'float32')."""

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        return _precision_strings.get(value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __str__(self) -> str:
        return self.name


_precision_strings = {
    "highest": Precision.HIGHEST, "float32": Precision.HIGHEST, "high": Precision.HIGH,
    "bfloat16_3x": Precision.HIGH, "tensorfloat32": Precision.HIGH,
    "default": Precision.DEFAULT, "bfloat16": Precision.DEFAULT, "fastest": Precision.DEFAULT,
    None: Precision.DEFAULT,
}

PrecisionLike = None | str | Precision | tuple | DotAlgorithm | DotAlgorithmPreset
CanonicalPrecision = None | tuple[Precision, Precision] | DotAlgorithm | DotAlgorithmPreset


def canonicalize_precision(precision: PrecisionLike) -> CanonicalPrecision:
    """``None``, a pair of ``Precision`` values (one per operand), or a dot algorithm."""
    if precision is None:
        default = config.jax_default_matmul_precision
        if default is None:
            return None
        try:
            return canonicalize_precision(default)
        except ValueError:
            raise ValueError("jax_default_matmul_precision flag must be set to None, a value in "
                             f"{list(_precision_strings)}, or the name of a "
                             f"lax.DotAlgorithmPreset, but got {default}") from None
    if isinstance(precision, str):
        if precision in _precision_strings:
            return Precision(precision), Precision(precision)
        if precision in DotAlgorithmPreset.__members__:
            return DotAlgorithmPreset[precision]
    elif isinstance(precision, Precision):
        return precision, precision
    elif isinstance(precision, (DotAlgorithm, DotAlgorithmPreset)):
        return precision
    elif isinstance(precision, (list, tuple)) and len(precision) == 2:
        if all(isinstance(p, Precision) for p in precision):
            return tuple(precision)
        if all(isinstance(p, str) for p in precision):
            return (canonicalize_precision(precision[0])[0],
                    canonicalize_precision(precision[1])[0])
    raise ValueError("Precision argument must be one of:\n- None,\n"
                     f"- a string in {list(_precision_strings)},\n- a lax.Precision value,\n"
                     "- a tuple of two lax.Precision values or strings,\n"
                     "- a lax.DotAlgorithmPreset or the name of one of these presets, or\n"
                     f"- a lax.DotAlgorithm value;\nbut got {precision}.")


# ---- dot_general ---------------------------------------------------------------------------
def dot_general(lhs: ArrayLike, rhs: ArrayLike, dimension_numbers, precision: PrecisionLike = None,
                preferred_element_type: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """Contract ``lhs`` and ``rhs`` over the contracting dimensions, pairing the batch
    dimensions. Lowers to ``stablehlo.dot_general``. ``out_sharding`` is accepted as ``None``
    over Explicit mesh axes chooses the result's layout (its type's sharding)."""
    return dot(lhs, rhs, dimension_numbers=dimension_numbers, precision=precision,
               preferred_element_type=preferred_element_type, out_sharding=out_sharding)


def dot(lhs: ArrayLike, rhs: ArrayLike, *, dimension_numbers=None,
        precision: PrecisionLike = None, preferred_element_type: DTypeLike | None = None,
        out_sharding=None) -> Array:
    """General dot product. Without ``dimension_numbers``: the matrix-matrix, matrix-vector or
    vector-vector product of operands of rank 1 or 2. Lowers to ``stablehlo.dot_general``."""
    return _dot(lhs, rhs, dimension_numbers, precision, preferred_element_type,
                shr.resolve_out_sharding("dot_general", out_sharding))


def _dot(lhs: ArrayLike, rhs: ArrayLike, dimension_numbers, precision: PrecisionLike,
         preferred_element_type: DTypeLike | None, out_sharding=None) -> Array:
    lhs_shape, rhs_shape = np.shape(lhs), np.shape(rhs)
    if dimension_numbers is None:
        if 1 <= len(lhs_shape) <= 2 and 1 <= len(rhs_shape) <= 2 and \
                lhs_shape[-1] == rhs_shape[0]:
            dimension_numbers = (((len(lhs_shape) - 1,), (0,)), ((), ()))
        else:
            raise ValueError("jaxkit.lax.dot: dimension_numbers must be specified when not "
                             "performing simple un-batched matrix-matrix, matrix-vector, or "
                             f"vector-vector products; got lhs_shape={lhs_shape} "
                             f"rhs_shape={rhs_shape}")
    (lc, rc), (lb, rb) = dimension_numbers
    dnums = ((as_tuple_of_ints(lc, "lhs_contracting_dimensions"),
              as_tuple_of_ints(rc, "rhs_contracting_dimensions")),
             (as_tuple_of_ints(lb, "lhs_batch_dimensions"),
              as_tuple_of_ints(rb, "rhs_batch_dimensions")))
    pet = (None if preferred_element_type is None
           else dtypes.check_and_canonicalize_user_dtype(preferred_element_type, "dot"))
    if out_sharding is not None:  # one spec entry per result dimension
        rank = len(lhs_shape) + len(rhs_shape) - 2 * len(dnums[0][0]) - len(dnums[1][0])
        asked = out_sharding.spec
        spec = asked.partitions
        out_sharding = NamedSharding(out_sharding.mesh, PartitionSpec(
            *spec, *[None] * (rank - len(spec)), unreduced=asked.unreduced,
            reduced=asked.reduced))
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dnums,
                              precision=canonicalize_precision(precision),
                              preferred_element_type=pet, out_sharding=out_sharding)


def _dot_general_shape_rule(lhs, rhs, *, dimension_numbers, precision, preferred_element_type,
                            out_sharding=None):
    (lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch) = dimension_numbers
    if not all(0 <= d < lhs.ndim for d in lhs_contracting + lhs_batch):
        raise TypeError("dot_general requires lhs dimension numbers to be nonnegative and less "
                        f"than the number of axes of the lhs value, got lhs_batch of "
                        f"{lhs_batch} and lhs_contracting of {lhs_contracting} for lhs of "
                        f"rank {lhs.ndim}")
    if not all(0 <= d < rhs.ndim for d in rhs_contracting + rhs_batch):
        raise TypeError("dot_general requires rhs dimension numbers to be nonnegative and less "
                        f"than the number of axes of the rhs value, got rhs_batch of "
                        f"{rhs_batch} and rhs_contracting of {rhs_contracting} for rhs of "
                        f"rank {rhs.ndim}")
    if len(lhs_batch) != len(rhs_batch):
        raise TypeError("dot_general requires equal numbers of lhs_batch and rhs_batch "
                        f"dimensions, got lhs_batch {lhs_batch} and rhs_batch {rhs_batch}.")
    for side, dims, what in (("lhs", lhs_batch, "batch"), ("rhs", rhs_batch, "batch"),
                             ("lhs", lhs_contracting, "contracting"),
                             ("rhs", rhs_contracting, "contracting")):
        if len(set(dims)) != len(dims):
            raise TypeError(f"dot_general requires {side} {what} dimensions to be distinct, "
                            f"got {side}_{what} {dims}.")
    if set(lhs_contracting) & set(lhs_batch):
        raise TypeError("dot_general requires lhs batch dimensions to be disjoint from "
                        f"contracting dimensions, got lhs_batch {lhs_batch} and "
                        f"lhs_contracting {lhs_contracting}.")
    if set(rhs_contracting) & set(rhs_batch):
        raise TypeError("dot_general requires rhs batch dimensions to be disjoint from "
                        f"contracting dimensions, got rhs_batch {rhs_batch} and "
                        f"rhs_contracting {rhs_contracting}.")
    lhs_batch_shape = tuple(lhs.shape[i] for i in lhs_batch)
    rhs_batch_shape = tuple(rhs.shape[i] for i in rhs_batch)
    if lhs_batch_shape != rhs_batch_shape:
        raise TypeError("dot_general requires lhs batch dimensions and rhs batch dimensions to "
                        f"have the same shape, got {lhs_batch_shape} and {rhs_batch_shape}.")
    lhs_contracting_shape = tuple(lhs.shape[i] for i in lhs_contracting)
    rhs_contracting_shape = tuple(rhs.shape[i] for i in rhs_contracting)
    if lhs_contracting_shape != rhs_contracting_shape:
        raise TypeError("dot_general requires contracting dimensions to have the same shape, "
                        f"got {lhs_contracting_shape} and {rhs_contracting_shape}.")
    return _dot_general_shape_computation(lhs.shape, rhs.shape, dimension_numbers)


def _dot_general_shape_computation(lhs_shape, rhs_shape, dimension_numbers):
    (lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch) = dimension_numbers
    batch_shape = tuple(lhs_shape[i] for i in lhs_batch)
    lhs_free = tuple(d for i, d in enumerate(lhs_shape)
                     if i not in lhs_contracting and i not in lhs_batch)
    rhs_free = tuple(d for i, d in enumerate(rhs_shape)
                     if i not in rhs_contracting and i not in rhs_batch)
    return batch_shape + lhs_free + rhs_free


def _bit_width(dt) -> int:
    if dtypes.issubdtype(dt, np.inexact):
        return dtypes.finfo(dt).bits
    if dtypes.issubdtype(dt, np.integer):
        return dtypes.iinfo(dt).bits
    return 1


def _type_properties(dt):
    """XLA's HigherPrecisionType ordering (complex, exponent range, mantissa, width, sign)."""
    real = np.finfo(dt).dtype if dtypes.issubdtype(dt, np.complexfloating) else dt
    is_float = dtypes.issubdtype(real, np.floating)
    return (dtypes.issubdtype(dt, np.complexfloating),
            dtypes.finfo(real).maxexp if is_float else -1,
            dtypes.finfo(real).nmant if is_float else -1,
            _bit_width(real), not dtypes.issubdtype(real, np.unsignedinteger))


def _dot_general_dtype_rule(lhs, rhs, *, dimension_numbers, precision, preferred_element_type,
                            out_sharding=None):
    lhs_prop, rhs_prop = _type_properties(lhs.dtype), _type_properties(rhs.dtype)
    if lhs_prop > rhs_prop:
        result = lhs.dtype
    elif rhs_prop > lhs_prop:
        result = rhs.dtype
    else:
        if lhs.dtype != rhs.dtype:
            raise TypeError(f"lax.dot_general argument type error: {lhs.dtype}, {rhs.dtype}")
        result = lhs.dtype
    if preferred_element_type is None or result == preferred_element_type:
        return result
    # An algorithm fixes the accumulation type, so any result type is a conversion of it.
    has_algorithm = isinstance(precision, (DotAlgorithm, DotAlgorithmPreset))
    if not has_algorithm and not dtypes.issubdtype(result, np.floating) and \
            _bit_width(preferred_element_type) < _bit_width(result):
        raise TypeError("`preferred_element_type` must not be narrower than the original type, "
                        f"got preferred_element_type of {preferred_element_type} for result "
                        f"type of {result}.")
    return np.dtype(preferred_element_type)


def _dot_general_transpose_lhs(g, x, y, *, dimension_numbers, precision,
                               preferred_element_type, out_sharding=None, swap_ans=False):
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_aval = x.aval
    x_kept = remaining(range(x_aval.ndim), x_contract, x_batch)
    y_ndim = y.aval.ndim if ad.is_undefined_primal(y) else np.ndim(y)
    y_kept = remaining(range(y_ndim), y_contract, y_batch)
    if swap_ans:
        ans_batch, ans_y, _ = map(tuple, ranges_like(x_batch, y_kept, x_kept))
    else:
        ans_batch, _, ans_y = map(tuple, ranges_like(x_batch, x_kept, y_kept))
    dims = ((ans_y, tuple(y_kept)), (ans_batch, tuple(y_batch)))
    x_contract_sorted_by_y = [x_contract[i] for i in np.argsort(y_contract)]
    out_axes = np.argsort(list(x_batch) + x_kept + x_contract_sorted_by_y)
    # The cotangent is laid out as the primal (its split contracting dimensions would
    # otherwise leave the product's layout open).
    # An unsplit primal under a mesh in context (JAX types it replicated over that mesh)
    # asks for an unsplit cotangent too; with no mesh at all its layout stays open.
    context = current_abstract_mesh()
    mesh = (x_aval._sharding.mesh if x_aval._sharding is not None else
            context if AxisType.Explicit in context.axis_types else None)
    # The cotangent of a value reduced over mesh axes is unreduced over them (JAX's
    # ``to_ct_aval``): each device's partial product is a summand, and no all-reduce is made.
    x_spec = shr.parts(x_aval) if mesh is not None else None
    out = dot_general(g, y, dims, precision=precision,
                      preferred_element_type=preferred_element_type,
                      out_sharding=None if x_spec is None else NamedSharding(
                          mesh, PartitionSpec(*[
                              x_spec[i] for i in list(x_batch) + x_kept +
                              x_contract_sorted_by_y], unreduced=shr.sharding_ur.getr(x_aval))))
    x_bar = transpose(out, tuple(int(a) for a in out_axes))
    if core.get_aval(x_bar).dtype != x_aval.dtype:
        x_bar = convert_element_type(x_bar, x_aval.dtype, x_aval.weak_type)
    return x_bar


def _dot_general_transpose_rhs(g, x, y, *, dimension_numbers, precision,
                               preferred_element_type, out_sharding=None):
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    swapped = ((y_contract, x_contract), (y_batch, x_batch))
    return _dot_general_transpose_lhs(g, y, x, dimension_numbers=swapped, precision=precision,
                                      preferred_element_type=preferred_element_type,
                                      swap_ans=True)


def _bump(dims, b):
    return tuple(d + (d >= b) for d in dims)


def _dot_general_batch_dim_nums(ndims, batch_dims, dimension_numbers):
    """The dimension numbers of the batched product, and where its batch axis lands."""
    lhs_ndim, _ = ndims
    lbd, rbd = batch_dims
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    if lbd is not None and rbd is not None:
        # Both batched: one more batch dimension, put first.
        lhs_batch = (lbd,) + _bump(lhs_batch, lbd)
        rhs_batch = (rbd,) + _bump(rhs_batch, rbd)
        lhs_contract, rhs_contract = _bump(lhs_contract, lbd), _bump(rhs_contract, rbd)
        result_batch_dim = 0
    elif lbd is not None:
        # Only lhs batched: its batch axis is one more free axis of lhs.
        lhs_free = [d for d in range(lhs_ndim) if d not in lhs_batch and d not in lhs_contract]
        result_batch_dim = len(lhs_batch) + sum(1 for d in lhs_free if d < lbd)
        lhs_batch, lhs_contract = _bump(lhs_batch, lbd), _bump(lhs_contract, lbd)
    else:
        rhs_ndim = ndims[1]
        rhs_free = [d for d in range(rhs_ndim) if d not in rhs_batch and d not in rhs_contract]
        result_batch_dim = (lhs_ndim - len(lhs_contract) + sum(1 for d in rhs_free if d < rbd))
        rhs_batch, rhs_contract = _bump(rhs_batch, rbd), _bump(rhs_contract, rbd)
    return ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)), result_batch_dim


def _dot_general_batch(axis_data, args, dims, *, dimension_numbers, precision,
                       preferred_element_type, out_sharding=None):
    lhs, rhs = args
    new_dnums, out_dim = _dot_general_batch_dim_nums((np.ndim(lhs), np.ndim(rhs)), dims,
                                                     dimension_numbers)
    if out_sharding is not None:  # the batch dimension is not split
        spec = list(out_sharding.spec)
        spec.insert(out_dim, None)
        out_sharding = NamedSharding(out_sharding.mesh, PartitionSpec(*spec))
    return dot_general(lhs, rhs, new_dnums, precision=precision,
                       preferred_element_type=preferred_element_type,
                       out_sharding=out_sharding), out_dim


def _precision_attr(precision) -> ir.ArrayAttr:
    pair = precision if isinstance(precision, tuple) else (Precision.DEFAULT, Precision.DEFAULT)
    return ir.ArrayAttr.get([hlo.PrecisionAttr.get(str(p)) for p in pair])


# XLA CPU ignores the algorithm attribute, so only the presets it computes faithfully (their
# types are the operands' or are emulated exactly) are accepted, as JAX accepts on CPU.
_CPU_ALGORITHMS = {
    DotAlgorithmPreset.DEFAULT: None,
    DotAlgorithmPreset.F16_F16_F16: DotAlgorithm(np.float16, np.float16, np.float16),
    DotAlgorithmPreset.F32_F32_F32: DotAlgorithm(np.float32, np.float32, np.float32),
    DotAlgorithmPreset.F64_F64_F64: DotAlgorithm(np.float64, np.float64, np.float64),
    DotAlgorithmPreset.BF16_BF16_F32: DotAlgorithm(dtypes.bfloat16, dtypes.bfloat16, np.float32),
    DotAlgorithmPreset.BF16_BF16_F32_X3: DotAlgorithm(dtypes.bfloat16, dtypes.bfloat16,
                                                      np.float32, num_primitive_operations=3),
    DotAlgorithmPreset.BF16_BF16_F32_X6: DotAlgorithm(dtypes.bfloat16, dtypes.bfloat16,
                                                      np.float32, num_primitive_operations=6),
}


def _algorithm_attr(algorithm: DotAlgorithm):
    return hlo.DotAlgorithm.get(
        mlir.dtype_to_ir_type(np.dtype(algorithm.lhs_precision_type)),
        mlir.dtype_to_ir_type(np.dtype(algorithm.rhs_precision_type)),
        mlir.dtype_to_ir_type(np.dtype(algorithm.accumulation_type)),
        algorithm.lhs_component_count, algorithm.rhs_component_count,
        algorithm.num_primitive_operations, algorithm.allow_imprecise_accumulation)


def _dot_operands_and_algorithm(ctx, lhs, rhs, precision):
    """The operands converted to the types the product is computed in, the type of the
    accumulator, and the ``algorithm`` keyword of ``stablehlo.dot_general`` (if any)."""
    lhs_aval, rhs_aval = ctx.avals_in[:2]
    aval_out = ctx.avals_out[0]
    if not isinstance(precision, (DotAlgorithm, DotAlgorithmPreset)):
        if lhs_aval.dtype != rhs_aval.dtype:
            # XLA accepts mixed operand types in principle; the CPU backend does not compile
            # them, so convert both to the result type (as JAX does).
            lhs = mlir.convert(lhs, lhs_aval.update(dtype=aval_out.dtype))
            rhs = mlir.convert(rhs, rhs_aval.update(dtype=aval_out.dtype))
        return lhs, rhs, aval_out.dtype, {}
    if precision not in _CPU_ALGORITHMS:
        raise ValueError(f"The precision '{precision}' is not supported by dot_general on CPU")
    # An explicit algorithm always computes in its own types: convert the operands to them.
    lhs_dtype, rhs_dtype, acc_dtype = compute_types(precision, lhs_aval.dtype, rhs_aval.dtype,
                                                    aval_out.dtype)
    if lhs_dtype != lhs_aval.dtype:
        lhs = mlir.convert(lhs, lhs_aval.update(dtype=lhs_dtype))
    if rhs_dtype != rhs_aval.dtype:
        rhs = mlir.convert(rhs, rhs_aval.update(dtype=rhs_dtype))
    algorithm = _CPU_ALGORITHMS[precision]
    return lhs, rhs, acc_dtype, ({} if algorithm is None
                                 else {"algorithm": _algorithm_attr(algorithm)})


def _dot_general_lowering(ctx, lhs, rhs, *, dimension_numbers, precision,
                          preferred_element_type, out_sharding=None):
    aval_out = ctx.avals_out[0]
    lhs, rhs, acc_dtype, algorithm = _dot_operands_and_algorithm(ctx, lhs, rhs, precision)
    (lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch) = dimension_numbers
    dnums = hlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=list(lhs_batch), rhs_batching_dimensions=list(rhs_batch),
        lhs_contracting_dimensions=list(lhs_contracting),
        rhs_contracting_dimensions=list(rhs_contracting))
    acc_aval = aval_out.update(dtype=acc_dtype)
    out = hlo.DotGeneralOp(mlir.aval_to_ir_type(acc_aval), lhs, rhs, dnums,
                           precision_config=_precision_attr(precision), **algorithm).result
    return out if acc_dtype == aval_out.dtype else mlir.convert(out, aval_out)


dot_general_p = standard_primitive(_dot_general_shape_rule, _dot_general_dtype_rule,
                                   "dot_general", _all_weak)
dot_general_p.def_param_defaults(out_sharding=None)
ad.defbilinear(dot_general_p, _dot_general_transpose_lhs, _dot_general_transpose_rhs)
batching.defrule(dot_general_p, _dot_general_batch)
lay_out_eager_results(dot_general_p)
shr.defsharding(dot_general_p, shr.dot_general_rule)
shr.defur(dot_general_p, shr.sharding_ur.dot_general_rule)
mlir.register_lowering(dot_general_p, _dot_general_lowering)


def batch_matmul(lhs: ArrayLike, rhs: ArrayLike, precision: PrecisionLike = None) -> Array:
    """Matrix products over the last two axes, batched over the leading ones (equal in both).
    Lowers to ``stablehlo.dot_general``."""
    lhs_shape, rhs_shape = np.shape(lhs), np.shape(rhs)
    if min(len(lhs_shape), len(rhs_shape)) < 2:
        raise ValueError(f"Arguments to batch_matmul must be at least 2D, got {len(lhs_shape)}, "
                         f"{len(rhs_shape)}")
    if len(lhs_shape) != len(rhs_shape):
        raise ValueError(f"Arguments to batch_matmul must have same ndim, got "
                         f"{len(lhs_shape)}, {len(rhs_shape)}")
    batch = tuple(range(len(lhs_shape) - 2))
    return dot_general(lhs, rhs, (((len(lhs_shape) - 1,), (len(rhs_shape) - 2,)),
                                  (batch, batch)), precision=precision)


__all__ = ["Precision", "batch_matmul", "dot", "dot_general", "dot_general_p"]
