"""Several processes, one program: jaxlib's distributed runtime and gloo collectives on CPU.

``initialize(coordinator_address, num_processes, process_id)`` starts the coordination service
in process 0, connects every process to it, and replaces jaxkit's CPU backend with one whose
devices are those of *all* processes (``jaxkit.devices()``) while each process owns its own
(``jaxkit.local_devices()``); collectives between processes travel over gloo TCP. A ``pmap``
then spans every device: each process passes its local slice of the mapped axis and gets its
local slice of the results, and ``psum`` & co. reduce over all processes. A ``Mesh`` over
``jaxkit.devices()`` is a global mesh: arrays laid out on it (``make_array_from_*``,
``experimental.multihost_utils``) hold only this process's shards, and ``jit`` over it runs
one SPMD program in every process.

Failure modes are bounded: a process that cannot reach every peer within
``initialization_timeout`` seconds raises ``TimeoutError`` naming the coordinator and the
processes it waited for; a peer that dies later is detected by the coordination service within
``heartbeat_timeout_seconds``, which logs the failed task and ends the surviving processes
(jaxlib cannot report it to Python), so nothing hangs.
"""
from __future__ import annotations

import atexit
import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jaxkit.runtime import gpu, multi_device, pjrt

__all__ = ["initialize", "is_initialized", "process_count", "process_index", "shutdown"]

logger = logging.getLogger(__name__)


@dataclass
class _State:
    coordinator_address: str
    process_id: int
    num_processes: int
    service: Any
    client: Any
    preemption_sync_manager: Any = None
    local_device_ids: list[int] | None = None


_state: _State | None = None
_lock = threading.Lock()


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def _split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"coordinator_address must be 'host:port', got {address!r}")
    return host.strip("[]"), int(port)


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _local_device_ids(ids: int | Sequence[int] | None) -> list[int] | None:
    """``local_device_ids`` as a list (an int is one id; None reads ``JAX_LOCAL_DEVICE_IDS``,
    a comma-separated list, as JAX does)."""
    if ids is None:
        env = _env("JAXKIT_LOCAL_DEVICE_IDS", "JAX_LOCAL_DEVICE_IDS")
        if not env:
            return None
        try:
            return [int(i) for i in env.split(",")]
        except ValueError:
            raise ValueError(f"JAX_LOCAL_DEVICE_IDS must be comma-separated device ids, got "
                             f"{env!r}") from None
    if isinstance(ids, int):
        ids = [ids]
    try:
        ids = list(ids)
    except TypeError:
        raise TypeError(f"local_device_ids must be an int or a sequence of ints, got "
                        f"{ids!r}") from None
    if not all(isinstance(i, int) and i >= 0 for i in ids):
        raise ValueError(f"local_device_ids must be non-negative device ids, got {ids!r}")
    return ids


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None,
               local_device_ids: int | Sequence[int] | None = None, *,
               initialization_timeout: int = 300, heartbeat_timeout_seconds: int = 100,
               shutdown_timeout_seconds: int = 300, coordinator_bind_address: str | None = None,
               gloo_hostname: str | None = None) -> None:
    """Join a group of ``num_processes`` processes coordinated by process 0 at
    ``coordinator_address`` ("host:port"); this process is ``process_id``.

    Must run before jaxkit creates its CPU backend (the first computation or
    ``jaxkit.devices()``). Missing arguments are read from ``JAXKIT_COORDINATOR_ADDRESS``,
    ``JAXKIT_NUM_PROCESSES`` and ``JAXKIT_PROCESS_ID`` (or the ``JAX_*`` names). Each process
    gets ``JAXKIT_NUM_CPU_DEVICES`` CPU devices (default 1). Raises ``TimeoutError`` when not
    every process connects within ``initialization_timeout`` seconds.

    ``local_device_ids`` (an id, a list of ids, or ``JAX_LOCAL_DEVICE_IDS``) restricts, as in
    JAX, the *GPUs* a process sees; JAX's CPU client ignores it, and so does jaxkit's. jaxkit's
    GPU client takes no visible-devices option yet, so with the CUDA plugin installed it is
    refused rather than ignored."""
    global _state
    local_device_ids = _local_device_ids(local_device_ids)
    if local_device_ids and gpu.find_cuda_plugin() is not None:
        raise NotImplementedError(
            "jaxkit.distributed.initialize(local_device_ids=...) with the CUDA plugin: jaxkit's "
            "GPU client cannot be restricted to some GPUs yet; set CUDA_VISIBLE_DEVICES for "
            "each process instead")
    address = coordinator_address or _env("JAXKIT_COORDINATOR_ADDRESS", "JAX_COORDINATOR_ADDRESS")
    n = num_processes if num_processes is not None else _env("JAXKIT_NUM_PROCESSES",
                                                             "JAX_NUM_PROCESSES")
    pid = process_id if process_id is not None else _env("JAXKIT_PROCESS_ID", "JAX_PROCESS_ID")
    if address is None or n is None or pid is None:
        raise ValueError("jaxkit.distributed.initialize needs coordinator_address, "
                         "num_processes and process_id (as arguments or through the "
                         "JAXKIT_COORDINATOR_ADDRESS, JAXKIT_NUM_PROCESSES and "
                         "JAXKIT_PROCESS_ID environment variables)")
    n, pid = int(n), int(pid)
    if n < 1 or not 0 <= pid < n:
        raise ValueError(f"process_id must be in [0, num_processes), got process_id={pid} for "
                         f"num_processes={n}")
    host, port = _split_address(address)
    timeout = max(1, int(initialization_timeout))
    with _lock:
        if _state is not None:
            raise RuntimeError("jaxkit.distributed.initialize should only be called once.")
        if "cpu" in pjrt._backends:
            raise RuntimeError("jaxkit.distributed.initialize must be called before jaxkit "
                               "creates its CPU backend, i.e. before the first computation or "
                               "call to jaxkit.devices(). Call it first thing in the program.")
        service = None
        if pid == 0:
            bind = coordinator_bind_address or address
            try:
                service = multi_device.start_distributed_service(
                    bind, n, heartbeat_timeout=int(heartbeat_timeout_seconds),
                    shutdown_timeout=int(shutdown_timeout_seconds), register_timeout=timeout)
            except RuntimeError as e:
                raise RuntimeError(f"jaxkit.distributed.initialize: process 0 could not start "
                                   f"the coordination service on {bind}: {e}") from None
        start = time.monotonic()
        try:
            client = multi_device.connect_distributed_client(
                address, pid, init_timeout=timeout,
                heartbeat_timeout=int(heartbeat_timeout_seconds),
                shutdown_timeout=int(shutdown_timeout_seconds))
        except RuntimeError as e:  # jaxlib's XlaRuntimeError is one
            if service is not None:
                service.shutdown()
            raise _connect_error(address, host, port, pid, n, timeout,
                                 time.monotonic() - start, e) from None
        try:
            pjrt_client = multi_device.make_distributed_cpu_client(
                client, pid, n, pjrt._num_cpu_devices(),
                gloo_hostname or ("127.0.0.1" if host in ("127.0.0.1", "localhost") else None))
            with pjrt._lock:
                pjrt._backends["cpu"] = pjrt.Backend(pjrt_client)
        except Exception:
            client.shutdown()
            if service is not None:
                service.shutdown()
            raise
        _state = _State(address, pid, n, service, client,
                        multi_device.start_preemption_sync_manager(client), local_device_ids)
        if local_device_ids:
            logger.info("jaxkit distributed initialized with visible devices: %s (only GPUs "
                        "are restricted; the CPU devices are all visible)",
                        ",".join(map(str, local_device_ids)))
    atexit.register(shutdown)


def _connect_error(address: str, host: str, port: int, pid: int, n: int, timeout: int,
                   waited: float, error: Exception) -> Exception:
    others = [i for i in range(n) if i != pid]
    if pid != 0 and not _reachable(host, port):
        what = (f"the coordinator (process 0) at {address} is not reachable: it did not start, "
                "or the address is wrong")
    elif pid == 0:
        what = (f"the coordinator at {address} waited for processes {others}, but not all of "
                "them called jaxkit.distributed.initialize with this address")
    else:
        what = (f"the coordinator at {address} is up, but not all of processes {others} "
                "connected to it")
    detail = str(error)
    detail = "" if detail in ("", "std::bad_cast") else f" (jaxlib: {detail})"
    return TimeoutError(f"jaxkit.distributed.initialize (process {pid} of {n}) timed out after "
                        f"{waited:.0f} s (initialization_timeout={timeout}): {what}.{detail}")


def shutdown() -> None:
    """Leave the process group (waits for the other processes to leave too) and drop the
    distributed CPU backend; a later computation uses a fresh single-process one."""
    global _state
    with _lock:
        state, _state = _state, None
        if state is None:
            return
        with pjrt._lock:
            pjrt._backends.pop("cpu", None)
        errors = []
        if state.preemption_sync_manager is not None:
            # Before the client: the manager talks to the coordination service through it.
            state.preemption_sync_manager.shutdown()
        try:
            state.client.shutdown()
        except RuntimeError as e:
            errors.append(e)
        if state.service is not None:
            state.service.shutdown()
    if errors:
        raise RuntimeError(f"jaxkit.distributed.shutdown (process {state.process_id} of "
                           f"{state.num_processes}, coordinator {state.coordinator_address}): "
                           f"not every process shut down cleanly: {errors[0]}")


def is_initialized() -> bool:
    """Whether ``initialize`` has run (and ``shutdown`` has not)."""
    return _state is not None


def process_index() -> int:
    """This process's index among all processes (0 without ``initialize``)."""
    return _state.process_id if _state is not None else 0


def process_count() -> int:
    """The number of processes (1 without ``initialize``)."""
    return _state.num_processes if _state is not None else 1


def preemption_sync_manager() -> Any:
    """jaxlib's preemption sync manager of this process group (None without
    ``initialize``); ``multihost_utils.reached_preemption_sync_point`` asks it."""
    return _state.preemption_sync_manager if _state is not None else None


def live_processes(process_ids: list[int]) -> dict[int, int]:
    """Of ``process_ids``, those the coordination service sees alive, each with its
    incarnation id (a barrier among the live ones). Needs ``initialize``."""
    if _state is None:
        raise RuntimeError("Distributed JAX not initialized.")
    return dict(_state.client.get_live_nodes(list(process_ids)))
