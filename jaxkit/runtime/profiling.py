"""jaxlib's profiler, as JAX's ``jax.profiler`` uses it: trace sessions written as
TensorBoard/XProf traces, trace annotations (TraceMe), the profiler server, and device heap
profiles (pprof)."""
from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from jaxlib import _profile_data, _profiler

from jaxkit.runtime import pjrt

__all__ = [
    "ProfileData", "ProfileEvent", "ProfileOptions", "ProfilePlane", "StepTraceAnnotation",
    "TraceAnnotation", "annotate_function", "device_memory_profile",
    "get_profiled_instructions_proto", "register_subprocess",
    "save_device_memory_profile", "start_server", "start_trace", "stop_server", "stop_trace",
    "trace",
]

ProfileOptions = _profiler.ProfileOptions
ProfileData = _profile_data.ProfileData
ProfileEvent = _profile_data.ProfileEvent
ProfilePlane = _profile_data.ProfilePlane
register_subprocess = _profiler.register_subprocess


def get_profiled_instructions_proto(tensorboard_dir: str) -> bytes:
    """The serialized ``ProfiledInstructionsProto`` (per-HLO-instruction costs, which XLA's
    latency-hiding scheduler reads) of the XPlane trace in ``tensorboard_dir``
    (``<log_dir>/plugins/profile/<run>/``). jaxlib fills it from GPU kernel timings only,
    so on CPU it is empty; a directory that does not exist raises ``JaxRuntimeError``."""
    return _profiler.get_profiled_instructions_proto(os.fspath(tensorboard_dir))


class _State:
    lock = threading.Lock()
    session: Any = None
    log_dir: str | None = None
    server: Any = None


def start_server(port: int, requires_backend: bool = True) -> Any:
    """Start the profiler server on ``port`` (for TensorBoard's on-demand capture), the
    backend first unless ``requires_backend`` is False (as JAX, so its devices are traced)."""
    if _State.server is not None:
        raise ValueError("Only one profiler server can be active at a time.")
    if requires_backend:
        pjrt.get_backend()
    _State.server = _profiler.start_server(port)
    return _State.server


def stop_server() -> None:
    if _State.server is None:
        raise ValueError("No active profiler server.")
    _State.server = None  # the server stops when its object is released


def start_trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False,
                create_perfetto_trace: bool = False,
                profiler_options: ProfileOptions | None = None) -> None:
    """Start collecting a trace, written under ``log_dir`` by ``stop_trace``."""
    if create_perfetto_link or create_perfetto_trace:
        raise NotImplementedError("jaxkit's profiler writes XProf traces only (no Perfetto "
                                  "link or trace)")
    with _State.lock:
        if _State.session is not None:
            raise RuntimeError("Profile has already been started. Only one profile may be "
                               "run at a time.")
        _State.session = (_profiler.ProfilerSession(profiler_options)
                          if profiler_options is not None else _profiler.ProfilerSession())
        _State.log_dir = str(log_dir)


def stop_trace() -> None:
    """Stop the trace started by ``start_trace`` and write it."""
    with _State.lock:
        if _State.session is None:
            raise RuntimeError("No profile started")
        session, log_dir = _State.session, _State.log_dir
        _State.session = _State.log_dir = None
        session.export(session.stop(), log_dir)


@contextlib.contextmanager
def trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False,
          create_perfetto_trace: bool = False,
          profiler_options: ProfileOptions | None = None) -> Iterator[None]:
    """Collect a trace of the block into ``log_dir``."""
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


class TraceAnnotation(_profiler.TraceMe):
    """A named span in the trace (a context manager): ``with TraceAnnotation("step"): ...``."""


class StepTraceAnnotation(TraceAnnotation):
    """A span marking one training step (``step_num``) for the trace viewer's step view."""

    def __init__(self, name: str, **kwargs: Any):
        super().__init__(name, _r=1, **kwargs)


def annotate_function(func: Callable, name: str | None = None, **kwargs: Any) -> Callable:
    """``func`` with each call recorded as a span named ``name`` (default: its name)."""
    name = name or getattr(func, "__qualname__", getattr(func, "__name__", "function"))

    @functools.wraps(func)
    def wrapper(*args, **kw):
        with TraceAnnotation(name, **kwargs):
            return func(*args, **kw)
    return wrapper


def device_memory_profile(backend: str | None = None) -> bytes:
    """The device memory (live buffers) as a pprof profile (serialized protobuf)."""
    return pjrt.get_backend(backend).client.heap_profile()


def save_device_memory_profile(filename: os.PathLike | str, backend: str | None = None) -> None:
    """Write ``device_memory_profile()`` to ``filename``."""
    with open(filename, "wb") as f:
        f.write(device_memory_profile(backend))
