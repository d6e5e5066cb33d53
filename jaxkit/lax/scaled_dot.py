"""``scaled_dot``: ``(lhs * lhs_scale) @ (rhs * rhs_scale)``, as in ``jax.lax``, for block-scaled
(microscaling) formats, where one scale covers a block of consecutive entries along each
contracting dimension.

As in JAX, ``scaled_dot_p`` is a primitive without a derivative (JAX gives it none) whose
lowering is its reference computation, which XLA CPU runs as written: each scale is repeated
over its block, the operands and the scales are rounded to bfloat16 and multiplied, and the
products contracted by ``dot_general`` in ``preferred_element_type`` (bfloat16 by default).
JAX wraps that computation in a ``stablehlo.composite`` named ``xla.scaled_dot`` so that
accelerators may substitute a native kernel; jaxkit, which lowers for CPU only, emits the
computation directly.
"""
from __future__ import annotations

import numpy as np

from jaxkit import dtypes
from jaxkit.interpreters import batching, mlir
from jaxkit.lax.dot import dot_general
from jaxkit.lax.elementwise import mul
from jaxkit.lax.standard import as_tuple_of_ints, standard_primitive
from jaxkit.lax.structural import broadcast_in_dim, convert_element_type, full, reshape
from jaxkit.typing import Array, ArrayLike, DTypeLike


def scaled_dot(lhs: ArrayLike, rhs: ArrayLike, *, lhs_scale: ArrayLike | None = None,
               rhs_scale: ArrayLike | None = None, dimension_numbers=None,
               preferred_element_type: DTypeLike | None = None) -> Array:
    """``dot_general(lhs * lhs_scale, rhs * rhs_scale)`` computed in bfloat16, with the result
    in ``preferred_element_type`` (default bfloat16). A scale matches its operand except along
    the contracting dimensions, where each entry covers a block of at least two. Without
    ``dimension_numbers``: a matrix product over the last two axes, batched over the others.
    Lowers to ``stablehlo.dot_general`` of the scaled operands."""
    if dimension_numbers is None:
        n = np.ndim(lhs)
        if n < 2:
            raise TypeError("scaled_dot does not support 0-rank and 1-rank operands.")
        dimension_numbers = (((n - 1,), (n - 2,)), (tuple(range(n - 2)), tuple(range(n - 2))))
    (lc, rc), (lb, rb) = dimension_numbers
    dnums = ((as_tuple_of_ints(lc, "lhs_contracting_dimensions"),
              as_tuple_of_ints(rc, "rhs_contracting_dimensions")),
             (as_tuple_of_ints(lb, "lhs_batch_dimensions"),
              as_tuple_of_ints(rb, "rhs_batch_dimensions")))
    if lhs_scale is None:
        lhs_scale = _unit_scale(np.shape(lhs), dnums[0][0])
    if rhs_scale is None:
        rhs_scale = _unit_scale(np.shape(rhs), dnums[0][1])
    pet = dtypes.canonicalize_dtype(dtypes.bfloat16 if preferred_element_type is None
                                    else preferred_element_type)
    return scaled_dot_p.bind(lhs, rhs, lhs_scale, rhs_scale, dimension_numbers=dnums,
                             preferred_element_type=pet)


def _unit_scale(shape, contracting) -> Array:
    """Scale 1 for the whole of each contracting dimension (JAX's default scales)."""
    shape = tuple(1 if i in contracting else d for i, d in enumerate(shape))
    return convert_element_type(full(shape, 1, dtypes.bfloat16), dtypes.float8_e8m0fnu)


def _check_scale(side: str, operand, scale, contracting) -> None:
    for i, size in enumerate(operand.shape):
        if i not in contracting:
            if scale.shape[i] != size:
                raise TypeError(f"{side} dim {i} of size {size} does not match scale dim size "
                                f"{scale.shape[i]}.")
            continue
        if size % scale.shape[i]:
            raise TypeError(f"{side} contracting dim {i} of size {size} must be divisible by "
                            f"its scale's dim size {scale.shape[i]}.")
        if size // scale.shape[i] < 2:
            raise TypeError(f"The ratio of {side} contracting dim {i} to its scale's dim size "
                            f"({size // scale.shape[i]}) must be at least 2.")


def _scaled_dot_shape_rule(lhs, rhs, lhs_scale, rhs_scale, *, dimension_numbers,
                           preferred_element_type):
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    ranks = (lhs.ndim, rhs.ndim, lhs_scale.ndim, rhs_scale.ndim)
    if len(set(ranks)) != 1:
        raise TypeError(f"All input tensors must have the same rank. Got lhs rank: {ranks[0]} "
                        f"rhs rank: {ranks[1]} lhs_scale rank: {ranks[2]} rhs_scale rank: "
                        f"{ranks[3]}.")
    if len(lhs_batch) != len(rhs_batch):
        raise TypeError("LHS and RHS must have the same number of batch dimensions, got "
                        f"{len(lhs_batch)} and {len(rhs_batch)}.")
    if len(lhs_contract) != len(rhs_contract):
        raise TypeError("LHS and RHS must have the same number of contracting dimensions, got "
                        f"{len(lhs_contract)} and {len(rhs_contract)}.")
    for i, j in zip(lhs_batch, rhs_batch):
        if len({lhs.shape[i], rhs.shape[j], lhs_scale.shape[i], rhs_scale.shape[j]}) != 1:
            raise TypeError("All input tensors must have the same batch dimension size for "
                            f"batch dims ({i}, {j}).")
    for i, j in zip(lhs_contract, rhs_contract):
        if lhs.shape[i] != rhs.shape[j]:
            raise TypeError(f"LHS contracting dim {i} of size {lhs.shape[i]} does not match "
                            f"RHS contracting dim {j} of size {rhs.shape[j]}.")
    _check_scale("LHS", lhs, lhs_scale, lhs_contract)
    _check_scale("RHS", rhs, rhs_scale, rhs_contract)
    lhs_free = [d for i, d in enumerate(lhs.shape) if i not in lhs_contract + lhs_batch]
    rhs_free = [d for i, d in enumerate(rhs.shape) if i not in rhs_contract + rhs_batch]
    return tuple(lhs.shape[i] for i in lhs_batch) + tuple(lhs_free) + tuple(rhs_free)


def _scaled_dot_dtype_rule(lhs, rhs, lhs_scale, rhs_scale, *, dimension_numbers,
                           preferred_element_type):
    return preferred_element_type


def _repeat_over_blocks(scale: Array, operand_shape, contracting) -> Array:
    """``scale`` with each entry repeated over its block along the contracting dimensions."""
    for i in contracting:
        shape = np.shape(scale)
        block = operand_shape[i] // shape[i]
        if block == 1:
            continue
        spread = shape[:i + 1] + (block,) + shape[i + 1:]
        kept = tuple(d for d in range(len(spread)) if d != i + 1)
        scale = reshape(broadcast_in_dim(scale, spread, kept),
                        shape[:i] + (shape[i] * block,) + shape[i + 1:])
    return scale


def _scaled_dot_reference(lhs, rhs, lhs_scale, rhs_scale, *, dimension_numbers,
                          preferred_element_type):
    (lhs_contract, rhs_contract), _ = dimension_numbers

    def scaled(x, scale, contracting):
        scale = _repeat_over_blocks(scale, np.shape(x), contracting)
        return mul(convert_element_type(x, dtypes.bfloat16),
                   convert_element_type(scale, dtypes.bfloat16))

    return dot_general(scaled(lhs, lhs_scale, lhs_contract),
                       scaled(rhs, rhs_scale, rhs_contract), dimension_numbers,
                       preferred_element_type=preferred_element_type)


def _scaled_dot_batch(axis_data, args, dims, *, dimension_numbers, preferred_element_type):
    # Every operand gets the mapped axis first; it becomes one more (leading) batch dimension.
    size = batching.batch_size(args, dims)
    args = [batching.bdim_at_front(x, d, size) for x, d in zip(args, dims)]
    shift = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
    (lc, rc), (lb, rb) = dimension_numbers
    dnums = ((shift(lc), shift(rc)), ((0,) + shift(lb), (0,) + shift(rb)))
    return scaled_dot_p.bind(*args, dimension_numbers=dnums,
                             preferred_element_type=preferred_element_type), 0


scaled_dot_p = standard_primitive(_scaled_dot_shape_rule, _scaled_dot_dtype_rule, "scaled_dot")
batching.defrule(scaled_dot_p, _scaled_dot_batch)
mlir.register_lowering(scaled_dot_p, mlir.lower_fun(_scaled_dot_reference))


__all__ = ["scaled_dot", "scaled_dot_p"]
