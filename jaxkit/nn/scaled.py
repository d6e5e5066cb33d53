"""Block-scaled matrix products: ``scaled_matmul``, ``scaled_dot_general`` and
``get_scaled_dot_general_config`` (JAX's microscaling ``mxfp8``/``nvfp4`` formats).

In JAX these lower only to cuDNN's block-scaled matmul custom call (NVIDIA Blackwell GPUs);
on CPU JAX itself raises ``NotImplementedError`` ("MLIR translation rule for primitive
'scaled_matmul' not found for platform cpu"). jaxkit has no cuDNN lowering, so the products
check their arguments as JAX does and then raise ``NotImplementedError`` saying so. The
configuration helper and ``scaled_dot_general`` without configs (plain ``lax.dot_general``)
work everywhere.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Literal

import numpy as np

from jaxkit import dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.typing import Array, ArrayLike, DTypeLike

__all__ = ["BlockScaleConfig", "get_scaled_dot_general_config", "scaled_dot_general",
           "scaled_matmul"]

_NO_CUDNN = ("{what} lowers only to cuDNN's block-scaled matmul custom call (NVIDIA Blackwell "
             "GPUs), which jaxkit does not implement; JAX raises NotImplementedError on CPU as "
             "well. For the reference result, dequantize and multiply: "
             "jnp.einsum('BMK,BNK->BMN', a * jnp.repeat(a_scales, K // K_a, -1), "
             "b * jnp.repeat(b_scales, K // K_b, -1)).")


@dataclasses.dataclass(slots=True)
class BlockScaleConfig:
    """How one operand of ``scaled_dot_general`` is quantized: ``block_size`` elements share
    one scale of ``scale_type``; data is stored as ``data_type``."""

    mode: str
    block_size: int
    data_type: DTypeLike
    scale_type: DTypeLike
    global_scale: Array | None
    infer_only: bool


def scaled_matmul(lhs: Array, rhs: Array, lhs_scales: Array, rhs_scales: Array,
                  preferred_element_type: DTypeLike = np.float32) -> Array:
    """Block-scaled ``(B, M, K) x (B, N, K) -> (B, M, N)`` product; the scales have shapes
    ``(B, M, K_a)`` and ``(B, N, K_b)`` with block sizes ``K // K_a`` and ``K // K_b``.
    Checks the shapes as JAX does, then raises ``NotImplementedError`` (cuDNN-only)."""
    a, b, a_scales, b_scales = lhs, rhs, lhs_scales, rhs_scales
    if not all(np.ndim(x) == 3 for x in (a, b, a_scales, b_scales)):
        raise ValueError("scaled_matmul requires all inputs to be 3-dimensional arrays")
    B_a, M_a, K_a = np.shape(a)
    B_b, N_b, K_b = np.shape(b)
    if K_a != K_b or B_a != B_b:
        raise ValueError("scaled_matmul requires inputs a and b to have matching batch (B) "
                         f"and contract (K) dimensions, but got shapes {np.shape(a)} and "
                         f"{np.shape(b)}")
    B_as, M_as, K_as = np.shape(a_scales)
    B_bs, N_bs, K_bs = np.shape(b_scales)
    if K_as != K_bs or B_as != B_bs:
        raise ValueError("scaled_matmul requires scales to have matching batch (B) and "
                         f"contract (K) dimensions, but got shapes {np.shape(a_scales)} and "
                         f"{np.shape(b_scales)}")
    if M_as != M_a or N_bs != N_b:
        raise ValueError("scaled_matmul requires scales to match non-contract dimensions of "
                         f"inputs, but got shapes a: {np.shape(a)}, b: {np.shape(b)}, "
                         f"a_scales: {np.shape(a_scales)}, b_scales: {np.shape(b_scales)}")
    dtypes.canonicalize_dtype(np.dtype(preferred_element_type))
    raise NotImplementedError(_NO_CUDNN.format(what="jax.nn.scaled_matmul"))


def get_scaled_dot_general_config(mode: Literal["nvfp4", "mxfp8"],
                                  global_scale: Array | None = None) -> BlockScaleConfig:
    """The quantization config of ``mode`` for ``scaled_dot_general``: ``mxfp8`` (blocks of
    32, float8_e4m3fn data, float8_e8m0fnu scales) or ``nvfp4`` (blocks of 16, float4_e2m1fn
    data, float8_e4m3fn scales, a global scale defaulting to ``ones((1,))``)."""
    if mode == "nvfp4":
        one = jnp.ones((1,), dtype=np.float32)
        return BlockScaleConfig(mode="nvfp4", block_size=16, data_type=dtypes.float4_e2m1fn,
                                scale_type=dtypes.float8_e4m3fn,
                                global_scale=one if global_scale is None else global_scale,
                                infer_only=False)
    if mode == "mxfp8":
        return BlockScaleConfig(mode="mxfp8", block_size=32, data_type=dtypes.float8_e4m3fn,
                                scale_type=dtypes.float8_e8m0fnu, global_scale=None,
                                infer_only=False)
    raise ValueError(f"Unsupported mode: {mode}")


def scaled_dot_general(lhs: ArrayLike, rhs: ArrayLike, dimension_numbers: Any,
                       preferred_element_type: DTypeLike = np.float32,
                       configs: list[BlockScaleConfig] | None = None,
                       implementation: Literal["cudnn"] | None = None) -> Array:
    """``lax.dot_general`` with block-scaled quantization of both operands per ``configs``
    (from ``get_scaled_dot_general_config``). Without configs it is ``lax.dot_general``;
    with them it raises ``NotImplementedError`` (the quantized product is cuDNN-only)."""
    if implementation is not None:
        warnings.warn("Backend selector, now ignored. The system chooses the backend "
                      "automatically.", DeprecationWarning, stacklevel=2)
    if configs is None:
        return lax.dot_general(lhs, rhs, dimension_numbers,
                               preferred_element_type=preferred_element_type)
    raise NotImplementedError(_NO_CUDNN.format(what="jax.nn.scaled_dot_general with configs"))
