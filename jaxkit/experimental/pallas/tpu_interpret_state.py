"""The switches of TPU interpret mode: ``pltpu.force_tpu_interpret_mode`` (a context) and
``pltpu.set_tpu_interpret_mode`` (global) make every ``pallas_call`` traced under them run in
interpret mode with the given ``InterpretParams``, as JAX's configuration option does;
``pallas_call`` reads ``interpret_override()`` when it is called."""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from typing import Any

__all__ = ["InterpretParams", "force_tpu_interpret_mode", "interpret_override",
           "reset_tpu_interpret_mode_state", "set_tpu_interpret_mode"]

@dataclasses.dataclass(frozen=True, kw_only=True)
class InterpretParams:
    """Options of JAX's TPU interpreter (its fields, in its order). jaxkit runs such a kernel
    with its own interpreter (lockstep devices, see ``semaphores.py``). It follows
    ``uninitialized_memory`` (what fresh buffers hold, ``interpret.uninitialized_value``);
    it has no races to detect, no DMA scheduling to choose and no logging, so the other
    options are kept, not used."""

    detect_races: bool = False
    out_of_bounds_reads: str = "raise"
    skip_floating_point_ops: bool = False
    uninitialized_memory: str = "nan"
    num_cores_or_threads: int = 1
    vector_clock_size: int | None = None
    logging_mode: Any = None
    dma_execution_mode: str = "on_wait"
    random_seed: int | None = None
    grid_point_recorder: Any = None
    allow_hbm_allocation_in_run_scoped: bool = False
    buffer_bounds: str = "logical"


_UNSET = object()
_local: contextvars.ContextVar = contextvars.ContextVar("tpu_interpret_mode", default=_UNSET)
_global: list = [None]


def interpret_override() -> Any:
    """The ``InterpretParams`` every ``pallas_call`` runs with now, or None."""
    value = _local.get()
    return _global[0] if value is _UNSET else value


def set_tpu_interpret_mode(params: InterpretParams | None = InterpretParams()) -> None:
    """From now on (outside ``force_tpu_interpret_mode``), run every ``pallas_call`` in
    interpret mode with ``params`` (None: as each call says)."""
    _global[0] = params


@contextlib.contextmanager
def force_tpu_interpret_mode(params: InterpretParams | None = InterpretParams()
                             ) -> Iterator[None]:
    """Within: every ``pallas_call`` traced runs in interpret mode with ``params``."""
    token = _local.set(params)
    try:
        yield
    finally:
        _local.reset(token)


def reset_tpu_interpret_mode_state() -> None:
    """Reset the state the TPU interpreter keeps between kernels. JAX's keeps simulated
    memories and race-detection state there; jaxkit's keeps none (a kernel's buffers and
    semaphores live in its own program), so there is nothing to reset."""
