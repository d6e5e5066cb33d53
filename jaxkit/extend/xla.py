"""``jax.extend.xla``: custom XLA compiler passes that rewrite HLO modules.

A pass is a Python function given the serialized ``HloModuleProto`` of each module XLA compiles
and returning the rewritten proto (or None to leave it); jaxlib runs it at the chosen stage of
the compilation pipeline. The CPU client runs in this process and takes passes directly; a
plugin backend (GPU) already initialised takes them through the PjRt C API. Unlike JAX, a
plugin initialised after the call does not get them (jaxkit has no backend-initialisation
hook): initialise it first, e.g. with ``jax.devices("gpu")``.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Sequence

from jaxkit.extend import backend
from jaxkit.interpreters.mlir import jaxlib_module

__all__ = ["PipelineStage", "clear_hlo_module_transformation",
           "register_hlo_module_transformation"]

_xla = jaxlib_module("jaxlib._xla")


class PipelineStage(enum.Enum):
    """Where in XLA's pipeline a pass runs: before or after instruction scheduling."""

    PRE_SCHEDULER = 0
    POST_SCHEDULER = 1


def _platforms(platforms: Sequence[str] | str | None) -> list[str]:
    if platforms is None:  # every platform jaxkit knows: CPU and the registered plugins
        return list(dict.fromkeys(["cpu", *backend.backend_factory_names()]))
    if isinstance(platforms, str):
        return [platforms]
    return list(dict.fromkeys(platforms))


def _check_stage(stage) -> int:
    if not isinstance(stage, PipelineStage):
        raise TypeError(f"stage must be a PipelineStage enum, got {type(stage)}")
    return stage.value


def _plugin_clients(platforms: list[str]):
    """The initialised plugin clients among ``platforms`` (CPU is handled in process)."""
    return [b.client for name, b in backend.backends().items()
            if name != "cpu" and name in platforms]


def register_hlo_module_transformation(callback: Callable[[bytes], bytes | None], *,
                                       name: str,
                                       stage: PipelineStage = PipelineStage.PRE_SCHEDULER,
                                       platforms: Sequence[str] | str | None = None) -> None:
    """Run ``callback`` on every HLO module compiled for ``platforms`` (all by default) at
    ``stage``; passes registered at one stage run in registration order. ``callback`` takes
    the serialized ``HloModuleProto`` and returns a modified one, or None for no change."""
    stage_int = _check_stage(stage)
    wanted = _platforms(platforms)
    if "cpu" in wanted:
        _xla.register_xla_transform(name, stage_int, callback)
    for client in _plugin_clients(wanted):
        _xla.register_xla_transform_c_api(client, name, stage_int, callback)


def clear_hlo_module_transformation(name: str,
                                    stage: PipelineStage = PipelineStage.PRE_SCHEDULER,
                                    platforms: Sequence[str] | str | None = None) -> bool:
    """Remove the pass ``name`` at ``stage``; whether one was registered."""
    stage_int = _check_stage(stage)
    wanted = _platforms(platforms)
    cleared = False
    if "cpu" in wanted:
        cleared |= bool(_xla.clear_xla_transform(name, stage_int))
    for client in _plugin_clients(wanted):
        cleared |= bool(_xla.clear_xla_transform_c_api(client, name, stage_int))
    return cleared
