"""Approximate top-k: ``approx_max_k``, ``approx_min_k`` and their primitive
``approx_top_k_p``, as in ``jax.lax``.

The approximation (arXiv:2206.14286) is a TPU algorithm; elsewhere JAX lowers to XLA's
fallback, which is exact: sort the operand alongside an iota of positions with a comparator
that looks only at the values (``>`` for max-k, ``<`` for min-k, IEEE comparisons, not a
stable sort), then keep the first entries. This module emits that same HLO, so XLA treats it
the same way (it turns a max-k into its TopK kernel, which breaks ties by position and ranks
NaN highest), and results match JAX's bit for bit, NaN placement included.

With ``aggregate_to_topk=False`` the result keeps more than ``k`` entries along the reduction
dimension: as many as XLA's ``ApproxTopKReductionOutputSize`` would leave on a TPU, computed
here by ``approx_top_k_output_size``.
"""
from __future__ import annotations

import math

import numpy as np

from jaxkit import core, dtypes
from jaxkit.interpreters import ad, batching, dispatch, mlir
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax.gather_scatter import GatherDimensionNumbers, gather
from jaxkit.lax.structural import reshape
from jaxkit.runtime.pjrt import JaxRuntimeError
from jaxkit.typing import Array, ArrayLike

# The window sizes of the TPU algorithm: rank-1 operands are reduced in chunks of 1024, higher
# ranks along the 128 lanes of a vector register.
_CHUNK_TILING = 1024
_LANE_TILING = 128


def _log2_floor(n: int) -> int:
    return n.bit_length() - 1 if n > 0 else 0


def _log2_ceil(n: int) -> int:
    return (n - 1).bit_length() if n > 0 else 0


def approx_top_k_output_size(input_size: int, rank: int, k: int, recall_target: float,
                             aggregate_to_topk: bool = True,
                             input_size_override: int = -1) -> tuple[int, int]:
    """(size of the reduction dimension in the result, log2 of the TPU algorithm's reduction
    factor), as XLA computes them; -1 for the latter when the result is aggregated to k.

    The TPU algorithm splits the dimension into M windows and keeps the best of each; a
    top-k element is lost when another shares its window, so the expected recall is about
    ``exp((1 - k) / M)``: M = (1 - k) / log(recall_target), at least one tile and at most
    the logical input size. The reduction is the largest power of two that leaves M
    windows."""
    if aggregate_to_topk:
        return k, -1
    tiling = _CHUNK_TILING if rank == 1 else _LANE_TILING
    if input_size <= tiling:
        return input_size, 0
    if 0 <= input_size_override < input_size:
        raise JaxRuntimeError(f"INVALID_ARGUMENT: reduction_input_size_override: "
                              f"{input_size_override} should be greater equals to "
                              f"operands[reduction_dim]: {input_size}")
    logical_size = input_size_override if input_size_override >= 0 else input_size
    if k == 1:
        return tiling, _log2_ceil(-(-logical_size // tiling))
    recall = float(np.float32(recall_target))  # XLA holds the target as a float32
    if recall == 1.0:
        return input_size, 0
    if not 0.0 < recall <= 1.0:
        raise JaxRuntimeError("INVALID_ARGUMENT: recall_target should range in (0,1]")
    windows = min(max(int((1.0 - k) / math.log(recall)), tiling), logical_size)
    log2_reduction = _log2_floor(logical_size // windows)
    if log2_reduction == 0:
        return input_size, 0
    # A huge override must not reduce below one tile per row.
    log2_reduction = min(log2_reduction, _log2_ceil(input_size // tiling))
    tiles = -(-input_size // tiling)
    return -(-tiles // (1 << log2_reduction)) * tiling, log2_reduction


# ---- approx_top_k --------------------------------------------------------------------------
def approx_max_k(operand: ArrayLike, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> list[Array]:
    """The ``k`` largest values along ``reduction_dimension`` (decreasing) and their int32
    indices. Approximate on TPU only; exact here, as JAX is on CPU (ties go to the lower
    index; NaN ranks highest when ``k`` is below the size, else NaNs stay where an IEEE
    comparison sort leaves them). With ``aggregate_to_topk=False`` at least ``k`` sorted
    entries come back. Lowers to ``stablehlo.sort`` and ``stablehlo.slice``."""
    return _bind(operand, k, reduction_dimension, recall_target, True,
                 reduction_input_size_override, aggregate_to_topk)


def approx_min_k(operand: ArrayLike, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> list[Array]:
    """The ``k`` smallest values along ``reduction_dimension`` (increasing) and their int32
    indices; see ``approx_max_k``. Lowers to ``stablehlo.sort`` and ``stablehlo.slice``."""
    return _bind(operand, k, reduction_dimension, recall_target, False,
                 reduction_input_size_override, aggregate_to_topk)


def _bind(operand, k, reduction_dimension, recall_target, is_max_k,
          reduction_input_size_override, aggregate_to_topk) -> list[Array]:
    return list(approx_top_k_p.bind(
        operand, k=int(k), reduction_dimension=int(reduction_dimension),
        recall_target=float(recall_target), is_max_k=bool(is_max_k),
        reduction_input_size_override=int(reduction_input_size_override),
        aggregate_to_topk=bool(aggregate_to_topk)))  # a list, as JAX returns


def _check_dimension(ndim: int, reduction_dimension: int) -> int:
    # Python's indexing rule, as JAX applies it to the shape: -ndim <= d < ndim.
    if not -ndim <= reduction_dimension < ndim:
        raise IndexError(f"reduction_dimension={reduction_dimension} is out of range for an "
                         f"operand of rank {ndim}")
    return reduction_dimension % ndim


def _approx_top_k_abstract_eval(operand, *, k, reduction_dimension, recall_target, is_max_k,
                                reduction_input_size_override, aggregate_to_topk):
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    if operand.ndim == 0:
        raise TypeError(f"approx_top_k operand must have >= 1 dimension, got {operand.shape}")
    dim = _check_dimension(operand.ndim, reduction_dimension)
    shape = list(operand.shape)
    if shape[dim] < k:
        raise ValueError(f"k must be smaller than the size of reduction_dim {shape[dim]}, "
                         f"got {k}")
    if not dtypes.issubdtype(operand.dtype, np.floating):
        raise ValueError(f"operand must be a floating type, got {operand.dtype}")
    shape[dim] = approx_top_k_output_size(shape[dim], operand.ndim, k, recall_target,
                                          aggregate_to_topk, reduction_input_size_override)[0]
    return [operand.update(shape=tuple(shape)), core.ShapedArray(tuple(shape), np.int32)]


def _approx_top_k_jvp(primals, tangents, **params):
    (operand,), (tangent,) = primals, tangents
    values, indices = approx_top_k_p.bind(operand, **params)
    index_zero = ad.Zero(core.get_aval(indices).to_tangent_aval())
    if type(tangent) is ad.Zero:
        return [values, indices], [ad.Zero(core.get_aval(values).to_tangent_aval()), index_zero]
    # Each output's tangent is the input tangent at the position the output came from.
    shape = np.shape(indices)
    rank = len(shape)
    dim = params["reduction_dimension"] % rank
    others = tuple(i for i in range(rank) if i != dim)
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(dim,),
                                   start_index_map=(dim,), operand_batching_dims=others,
                                   start_indices_batching_dims=others)
    picked = gather(tangent, reshape(indices, shape + (1,)), dnums, (1,) * rank)
    return [values, indices], [picked, index_zero]


def _approx_top_k_batch(axis_data, args, dims, *, reduction_dimension, **params):
    (x,), (d,) = args, dims
    # The reduction dimension counts the operand's axes without the batch axis.
    unbatched = [i for i in range(np.ndim(x)) if i != d]
    dim = unbatched[_check_dimension(len(unbatched), reduction_dimension)]
    return approx_top_k_p.bind(x, reduction_dimension=dim, **params), [d, d]


def _approx_top_k_lowering(ctx, operand, *, k, reduction_dimension, recall_target, is_max_k,
                           reduction_input_size_override, aggregate_to_topk):
    aval_in = ctx.avals_in[0]
    dim = reduction_dimension % aval_in.ndim
    size = aval_in.shape[dim]
    # XLA's checks of the ApproxTopK call JAX emits, made here since no such call is emitted.
    if not 0.0 < float(np.float32(recall_target)) <= 1.0:
        raise JaxRuntimeError(f"INVALID_ARGUMENT: approx_top_k recall_target={recall_target} "
                              "is out of range: it must be in (0, 1]")
    if 0 <= reduction_input_size_override < size:
        raise JaxRuntimeError(
            "INVALID_ARGUMENT: approx_top_k reduction_input_size_override="
            f"{reduction_input_size_override} is out of range: it must be -1 or at least the "
            f"size of the reduction dimension ({size})")
    index_aval = core.ShapedArray(aval_in.shape, np.int32)
    iota = hlo.IotaOp(mlir.aval_to_ir_type(index_aval), dim).result
    op = hlo.SortOp([mlir.aval_to_ir_type(aval_in), mlir.aval_to_ir_type(index_aval)],
                    [operand, iota], dimension=dim, is_stable=ir.BoolAttr.get(False))
    scalar_types = [mlir.aval_to_ir_type(core.ShapedArray((), a.dtype))
                    for a in (aval_in, aval_in, index_aval, index_aval)]
    block = op.comparator.blocks.append(*scalar_types)
    with ir.InsertionPoint(block):
        x, y = block.arguments[0], block.arguments[1]
        # IEEE comparison (no total order), exactly the comparator XLA's fallback uses: it is
        # what XLA recognizes to run a max-k with its TopK kernel.
        direction = hlo.ComparisonDirectionAttr.get("GT" if is_max_k else "LT")
        hlo.ReturnOp([hlo.CompareOp(x, y, direction).result])
    out_size = ctx.avals_out[0].shape[dim]
    if out_size == size:
        return list(op.results)
    start = [0] * aval_in.ndim
    limit = list(aval_in.shape)
    limit[dim] = out_size
    return [hlo.SliceOp(r, mlir.i64_attr(start), mlir.i64_attr(limit),
                        mlir.i64_attr([1] * aval_in.ndim)).result for r in op.results]


approx_top_k_p = core.Primitive("approx_top_k")
approx_top_k_p.multiple_results = True
approx_top_k_p.def_impl(lambda x, **params: dispatch.apply_primitive(approx_top_k_p, x,
                                                                     **params))
approx_top_k_p.def_abstract_eval(_approx_top_k_abstract_eval)
ad.defjvp_rule(approx_top_k_p, _approx_top_k_jvp)
batching.defrule(approx_top_k_p, _approx_top_k_batch)
mlir.register_lowering(approx_top_k_p, _approx_top_k_lowering)

__all__ = ["approx_max_k", "approx_min_k", "approx_top_k_p"]
