"""``pl.lower_as_mlir`` (a function's StableHLO text, through ``jax.export``, for TPU by
default as in JAX) and ``pl.pallas_export_experimental`` (the switch JAX's exporter reads to
allow dynamic shapes in kernels; jaxkit's kernels have static shapes, so it only records
it)."""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from jaxkit import export
from jaxkit.transforms.jit import jit

__all__ = ["dynamic_shapes_export_enabled", "lower_as_mlir", "pallas_export_experimental"]


class _Env(threading.local):
    dynamic_shapes = False


_env = _Env()


@contextlib.contextmanager
def pallas_export_experimental(dynamic_shapes: bool) -> Iterator[None]:
    """Within: kernels are exported allowing dynamic shapes (``dynamic_shapes``)."""
    old, _env.dynamic_shapes = _env.dynamic_shapes, dynamic_shapes
    try:
        yield
    finally:
        _env.dynamic_shapes = old


def dynamic_shapes_export_enabled() -> bool:
    return _env.dynamic_shapes


def lower_as_mlir(f: Callable, *args: Any, dynamic_shapes: bool = False, device: Any = None,
                  static_argnames: Sequence[str] = (), platforms: Sequence[str] | None = None,
                  **kwargs: Any) -> Any:
    """``f``'s StableHLO module, exported for ``platforms`` (default ``["tpu"]``); unlike
    ``jax.export``, the artifact has no stability guarantees."""
    with pallas_export_experimental(dynamic_shapes):
        fj = jit(f, device=device, static_argnames=static_argnames)
        exported = export.export(fj, platforms=["tpu"] if platforms is None else platforms)(
            *args, **kwargs)
        return exported.mlir_module()
