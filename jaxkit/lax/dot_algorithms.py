"""The precision types of ``jax.lax`` beyond ``Precision``: dot algorithms (``DotAlgorithm``,
``DotAlgorithmPreset``), accepted by ``precision=`` of every dot product, and the accuracy
requests of transcendental functions (``AccuracyMode``, ``Tolerance``).

A dot algorithm names the types the operands are rounded to before multiplying and the type the
products are accumulated in. The presets also say which operand and output types they take as
they are (the others are converted), which is what ``compute_types`` works out for the lowering.
"""
from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

from jaxkit import dtypes
from jaxkit.typing import DTypeLike


class DotAlgorithm(NamedTuple):
    """A dot product algorithm: ``lhs_precision_type`` and ``rhs_precision_type`` (the types the
    operands are rounded to), ``accumulation_type``, the number of components each operand is
    split into and of primitive products (for algorithms emulating a wider type), and whether
    some steps may accumulate imprecisely. Lowered to the ``algorithm`` attribute of
    ``stablehlo.dot_general``; which algorithms a platform runs is up to the platform."""

    lhs_precision_type: DTypeLike
    rhs_precision_type: DTypeLike
    accumulation_type: DTypeLike
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False


class DotAlgorithmPreset(enum.Enum):
    """Named dot algorithms, ``LHS_RHS_ACCUMULATION`` (``_X<n>``: emulated with ``n``
    products; ``_FAST_ACCUM``: imprecise accumulation allowed; ``ANY_F8``: any float8 type;
    ``DEFAULT``: chosen by the compiler from the operand and result types). Pass a member, or
    its name as a string, as ``precision=``."""

    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __str__(self) -> str:
        return self.name

    @property
    def supported_lhs_types(self) -> tuple[DTypeLike, ...] | None:
        """Operand types used as they are (``None``: any); others become the first one."""
        if self is DotAlgorithmPreset.DEFAULT or self.name.startswith("ANY_F8"):
            return None
        if self.name.startswith("F16_"):
            return (np.float16,)
        if self in (DotAlgorithmPreset.BF16_BF16_BF16, DotAlgorithmPreset.BF16_BF16_F32):
            # float32 storage is rounded by the algorithm itself, so it is taken as it is.
            return (dtypes.bfloat16, np.float32)
        if self is DotAlgorithmPreset.F64_F64_F64:
            return (np.float64,)
        return (np.float32,)  # the emulating bfloat16 and tf32 algorithms, and F32_F32_F32

    @property
    def supported_rhs_types(self) -> tuple[DTypeLike, ...] | None:
        return self.supported_lhs_types

    @property
    def accumulation_type(self) -> DTypeLike | None:
        if self in (DotAlgorithmPreset.DEFAULT, DotAlgorithmPreset.ANY_F8_ANY_F8_ANY,
                    DotAlgorithmPreset.ANY_F8_ANY_F8_ANY_FAST_ACCUM):
            return None
        return {DotAlgorithmPreset.F16_F16_F16: np.float16,
                DotAlgorithmPreset.BF16_BF16_BF16: dtypes.bfloat16,
                DotAlgorithmPreset.F64_F64_F64: np.float64}.get(self, np.float32)

    def supported_output_types(self, lhs_dtype: DTypeLike, rhs_dtype: DTypeLike
                               ) -> tuple[DTypeLike, ...] | None:
        """Result types produced directly (``None``: any); others are converted from the
        first one."""
        if self in (DotAlgorithmPreset.ANY_F8_ANY_F8_F32,
                    DotAlgorithmPreset.ANY_F8_ANY_F8_F32_FAST_ACCUM):
            return (np.float32, np.float16, dtypes.bfloat16, dtypes.float8_e4m3fn,
                    dtypes.float8_e5m2, dtypes.float8_e5m2fnuz, dtypes.float8_e4m3fnuz,
                    dtypes.float8_e4m3b11fnuz)
        # A 16-bit result is produced directly only from 16-bit operands of that type.
        narrow = {DotAlgorithmPreset.F16_F16_F32: np.dtype(np.float16),
                  DotAlgorithmPreset.BF16_BF16_F32: np.dtype(dtypes.bfloat16)}.get(self)
        if narrow is not None:
            both = dtypes.promote_types(lhs_dtype, rhs_dtype)
            return (np.float32, narrow) if both == narrow else (np.float32,)
        acc = self.accumulation_type
        return None if acc is None else (acc,)


def compute_types(algorithm: DotAlgorithm | DotAlgorithmPreset, lhs_dtype: np.dtype,
                  rhs_dtype: np.dtype, out_dtype: np.dtype) -> tuple[np.dtype, np.dtype, np.dtype]:
    """The operand types a dot product with ``algorithm`` multiplies in, and the type it
    accumulates in (converted to ``out_dtype`` afterwards when they differ)."""
    if isinstance(algorithm, DotAlgorithm):
        return (np.dtype(algorithm.lhs_precision_type), np.dtype(algorithm.rhs_precision_type),
                np.dtype(algorithm.accumulation_type))

    def pick(dtype, supported):
        if supported is None or np.dtype(dtype) in [np.dtype(t) for t in supported]:
            return np.dtype(dtype)
        return np.dtype(supported[0])

    lhs = pick(lhs_dtype, algorithm.supported_lhs_types)
    rhs = pick(rhs_dtype, algorithm.supported_rhs_types)
    return lhs, rhs, pick(out_dtype, algorithm.supported_output_types(lhs, rhs))


class AccuracyMode(enum.Enum):
    """Accuracy a transcendental function's implementation is chosen for."""

    HIGHEST = 1
    DEFAULT = 2


class Tolerance:
    """Tolerances a transcendental function's result must meet: at most two of ``atol``,
    ``rtol`` and ``ulps`` (absolute, relative, units in the last place)."""

    def __init__(self, atol: float = 0.0, rtol: float = 0.0, ulps: int = 0):
        if atol < 0.0 or rtol < 0.0 or ulps < 0:
            raise ValueError("Tolerances must be non-negative.")
        if atol == 0.0 and rtol == 0.0 and ulps == 0:
            raise ValueError("At least one of atol, rtol, or ulps must be set.")
        self.atol = atol
        self.rtol = rtol
        self.ulps = ulps


__all__ = ["AccuracyMode", "DotAlgorithm", "DotAlgorithmPreset", "Tolerance"]
