"""What Pallas knows about TPU chips (``pltpu.get_tpu_info``, ``ChipVersion``, ``TpuInfo``) and
the enums of TPU kernels' cores and side effects.

The chip table gives each chip's published figures per chip; ``TpuInfo`` reports them per
TensorCore (the chip's figure divided among its physical TensorCores), as JAX does. On a
machine without TPUs (jaxkit's CPU) ``get_tpu_info`` fails as JAX's does: the device kind is
not a TPU's.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numpy as np

from jaxkit import dtypes
from jaxkit.runtime import pjrt

__all__ = ["ChipVersion", "CoreType", "SideEffectType", "SparseCoreInfo", "TpuInfo",
           "get_tpu_info", "get_tpu_info_for_chip", "is_tpu_device"]


class CoreType(enum.Enum):
    """The kinds of TPU cores a kernel may run on."""

    TC = "tc"
    SC_SCALAR_SUBCORE = "sc_scalar_subcore"
    SC_VECTOR_SUBCORE = "sc_vector_subcore"

    def __repr__(self) -> str:
        return self.name


class SideEffectType(enum.Enum):
    """How a TPU kernel's side effects constrain XLA (``CompilerParams.has_side_effects``)."""

    PURE = "pure"
    DATAFLOW_SIDE_EFFECTING = "dataflow_side_effecting"
    SIDE_EFFECTING = "side_effecting"


class ChipVersion(enum.Enum):
    """A TPU chip generation."""

    TPU_V2 = "v2"
    TPU_V3 = "v3"
    TPU_V4I = "v4i"
    TPU_V4 = "v4"
    TPU_V5E = "v5e"
    TPU_V5P = "v5p"
    TPU_V6E = "v6e"
    TPU_7 = "7"
    TPU_7X = "7x"
    TPU_8I = "8i"

    def __str__(self) -> str:
        return self.value

    @property
    def num_physical_tensor_cores_per_chip(self) -> int:
        return 1 if self.is_lite else 2

    @property
    def supports_megacore(self) -> bool:
        return self in (ChipVersion.TPU_V4, ChipVersion.TPU_V5P)

    @property
    def is_lite(self) -> bool:
        return self in (ChipVersion.TPU_V4I, ChipVersion.TPU_V5E, ChipVersion.TPU_V6E)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SparseCoreInfo:
    """A chip's SparseCores."""

    num_cores: int
    num_subcores: int
    num_lanes: int
    vmem_capacity_bytes: int
    dma_granule_size_bytes: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class TpuInfo:
    """A TPU's figures, per TensorCore (multiply by ``num_cores`` for the chip's)."""

    chip_version: Any
    generation: int
    num_cores: int
    num_lanes: int
    num_sublanes: int
    mxu_column_size: int
    num_mxus: int
    num_accumulators: int
    vmem_capacity_bytes: int
    cmem_capacity_bytes: int
    smem_capacity_bytes: int
    hbm_capacity_bytes: int
    mem_bw_bytes_per_second: int
    bf16_ops_per_second: int
    int8_ops_per_second: int
    fp8_ops_per_second: int
    int4_ops_per_second: int
    sparse_core: SparseCoreInfo | None = None

    @property
    def is_lite(self) -> bool:
        return self.chip_version.is_lite

    @property
    def is_split_chip(self) -> bool:
        """A chip of several TensorCores used as one device per core."""
        return self.num_cores == 1 and self.chip_version.num_physical_tensor_cores_per_chip > 1

    @property
    def is_megacore(self) -> bool:
        """Several TensorCores combined into one device."""
        return self.num_cores > 1

    def is_matmul_supported(self, lhs_dtype: Any, rhs_dtype: Any) -> bool:
        """Whether the MXU multiplies these operand dtypes without converting them."""
        lhs, rhs = np.dtype(lhs_dtype), np.dtype(rhs_dtype)
        f32, bf16 = np.dtype(np.float32), np.dtype(dtypes.bfloat16)
        f8_old = {np.dtype(dtypes.float8_e5m2), np.dtype(dtypes.float8_e4m3b11fnuz)}
        f8_new = {np.dtype(dtypes.float8_e5m2), np.dtype(dtypes.float8_e4m3fn)}
        ints8 = {np.dtype(np.int8), np.dtype(np.uint8)}
        ints4 = {np.dtype(dtypes.int4), np.dtype(dtypes.uint4)}
        g = self.generation
        if g in (2, 3):
            return lhs == rhs == f32
        if g == 4:
            return lhs in (f32, bf16) and rhs in (f32, bf16, np.dtype(np.int8))
        if g in (5, 6):
            floats = {f32, bf16} | f8_old
            return any(lhs in s and rhs in s for s in (floats, ints8, ints4))
        if g in (7, 8):
            return (lhs in (f32, bf16) and rhs in (f32, bf16)) or (
                lhs in {f32, bf16} | f8_new and rhs in f8_new)
        return False

    def get_sublane_tiling(self, dtype: Any) -> int:
        """The second-minor tiling XLA uses for ``dtype`` by default (a heuristic)."""
        bits = np.dtype(dtype).itemsize * 8 if np.dtype(dtype) not in (
            np.dtype(dtypes.int4), np.dtype(dtypes.uint4)) else 4
        if self.generation < 7:
            return self.num_sublanes if bits in (16, 32) else self.num_sublanes * (32 // bits)
        if self.generation == 7:
            return self.num_sublanes * (32 // bits)
        raise NotImplementedError("TPU generation is not supported")


_MiB, _KiB = 1024 * 1024, 1024

# Per chip: generation, MXU column size, MXUs per core, accumulators, VMEM and SMEM per core,
# then the chip's CMEM, HBM, bandwidth and bf16/int8/fp8/int4 ops per second (0: none), and
# its SparseCores (cores, subcores, lanes, VMEM per subcore, DMA granule) if any.
_CHIPS: dict[ChipVersion, tuple] = {
    ChipVersion.TPU_V2: (2, 128, 1, 0, 16 * _MiB, 16 * _KiB,
                         0, 16_000_000_000, 7.16e11, 4.6e13, 0, 0, 0, None),
    ChipVersion.TPU_V3: (3, 128, 2, 0, 16 * _MiB, 16 * _KiB,
                         0, 34_400_000_000, 8.25e11, 1.40e14, 0, 0, 0, None),
    ChipVersion.TPU_V4I: (4, 128, 4, 0, 16 * _MiB, _MiB,
                          134_000_000, 8_590_000_000, 6.14e11, 1.37e14, 0, 0, 0, None),
    ChipVersion.TPU_V4: (4, 128, 4, 0, 16 * _MiB, _MiB,
                         134_000_000, 34_400_000_000, 1.23e12, 2.75e14, 0, 0, 0, None),
    ChipVersion.TPU_V5E: (5, 128, 4, 0, 128 * _MiB, _MiB,
                          0, 17_200_000_000, 8.20e11, 1.97e14, 3.94e14, 0, 7.88e14, None),
    ChipVersion.TPU_V5P: (5, 128, 4, 0, 64 * _MiB, _MiB,
                          0, 103_000_000_000, 2.46e12, 4.59e14, 9.18e14, 0, 1.84e15,
                          (4, 16, 8, 512 * _KiB, 32)),
    ChipVersion.TPU_V6E: (6, 256, 2, 0, 128 * _MiB, _MiB,
                          0, 34_400_000_000, 1.64e12, 9.20e14, 1.84e15, 9.20e14, 3.68e15,
                          (2, 16, 8, 256 * _KiB, 32)),
    ChipVersion.TPU_7: (7, 256, 2, 128, 64 * _MiB, _MiB,
                        0, 206_000_000_000, 7.40e12, 2.31e15, 0, 4.60e15, 0,
                        (2, 16, 16, 512 * _KiB, 32)),
    ChipVersion.TPU_8I: (8, 256, 2, 256, 192 * _MiB, _MiB,
                         0, 309_000_000_000, 8.60e12, 1.101e15, 0, 8.808e15, 0,
                         (1, 4, 16, 512 * _KiB, 64)),
}
_CHIPS[ChipVersion.TPU_7X] = _CHIPS[ChipVersion.TPU_7]


def _tpu_info(chip: ChipVersion, num_cores: int) -> TpuInfo:
    (gen, mxu_col, mxus, accs, vmem, smem, cmem, hbm, bw, bf16, int8, fp8, int4,
     sc) = _CHIPS[chip]
    per_core = chip.num_physical_tensor_cores_per_chip

    def share(total):  # the chip's figure per physical TensorCore
        return int(total // per_core)

    return TpuInfo(
        chip_version=chip, generation=gen, num_cores=num_cores, num_lanes=128,
        num_sublanes=8, mxu_column_size=mxu_col, num_mxus=mxus, num_accumulators=accs,
        vmem_capacity_bytes=vmem, cmem_capacity_bytes=share(cmem), smem_capacity_bytes=smem,
        hbm_capacity_bytes=share(hbm), mem_bw_bytes_per_second=share(bw),
        bf16_ops_per_second=share(bf16), int8_ops_per_second=share(int8),
        fp8_ops_per_second=share(fp8), int4_ops_per_second=share(int4),
        sparse_core=None if sc is None else SparseCoreInfo(
            num_cores=sc[0], num_subcores=sc[1], num_lanes=sc[2], vmem_capacity_bytes=sc[3],
            dma_granule_size_bytes=sc[4]))


_DEVICE_KINDS = {
    "TPU v2": ChipVersion.TPU_V2, "TPU v3": ChipVersion.TPU_V3, "TPU v4": ChipVersion.TPU_V4,
    "TPU v4 lite": ChipVersion.TPU_V4I, "TPU v5e": ChipVersion.TPU_V5E,
    "TPU v5 lite": ChipVersion.TPU_V5E, "TPU v5": ChipVersion.TPU_V5P,
    "TPU v5p": ChipVersion.TPU_V5P, "TPU v6e": ChipVersion.TPU_V6E,
    "TPU v6 lite": ChipVersion.TPU_V6E, "TPU7": ChipVersion.TPU_7, "TPU7x": ChipVersion.TPU_7X,
    "TPU8i": ChipVersion.TPU_8I,
}


def _device_kind() -> str:
    return pjrt.default_device().device_kind


def is_tpu_device() -> bool:
    """Whether the default device is a TPU."""
    return _device_kind() in _DEVICE_KINDS


def get_tpu_info() -> TpuInfo:
    """The default device's TPU figures (a ``ValueError`` when it is not a TPU)."""
    kind = _device_kind()
    chip = _DEVICE_KINDS.get(kind)
    if chip is None:
        raise ValueError(f"Unsupported TPU device kind: {kind}")
    return _tpu_info(chip, getattr(pjrt.default_device(), "num_cores", 1))


def get_tpu_info_for_chip(chip_version: ChipVersion,
                          num_tensor_cores_per_logical_device: int) -> TpuInfo:
    """The figures of ``chip_version`` used with that many TensorCores per device (1, or 2
    for a megacore chip in megacore mode)."""
    if ((chip_version.is_lite or not chip_version.supports_megacore)
            and num_tensor_cores_per_logical_device != 1):
        raise ValueError("Lite chips and dual-core chips that do not support Megacore must "
                         "have num_tensor_cores_per_logical_device=1, but got "
                         f"{num_tensor_cores_per_logical_device}.")
    return _tpu_info(chip_version, num_tensor_cores_per_logical_device)
