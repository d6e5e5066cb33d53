"""The multi-device runtime: global arrays split over devices, replicated executables.

``pmap`` runs one program on ``n`` devices as ``n`` *replicas* (``CompileOptions.num_replicas``
with an explicit device assignment; collectives name replica groups). Each argument is one
*global* jaxlib ``ArrayImpl`` holding one shard per device, built in a single
``batched_device_put`` call; results come back the same way through one
``array_result_handler`` per output. The per-device program keeps the mapped axis with size 1
(``f32[1,3]`` for a global ``f32[4,3]`` split on axis 0), so every buffer has exactly the shard
shape its sharding declares and outputs feed the next call without any copy.

Recipes and hazards from ``shared/JAXLIB.md`` (sections 1 and 6):

* ``._arrays`` of a multi-device array makes jaxlib import ``jax._src.sharding_impls`` once per
  shard: a failed import (~20 us) when jax is absent, and a *real* import of all of jax when it
  is installed but not imported. ``addressable_shards`` answers that import from small stand-in
  modules that exist only for the duration of the call (and never when jax is imported).
* Un-awaited collective executions deadlock the CPU client when more are queued than it has
  threads for rendezvous. At most one execution of a program with collectives is in flight:
  a new one first waits for the previous one's results. Programs without collectives (most
  eager ops under ``set_mesh``: elementwise work on each device's piece) rendezvous nowhere
  and are dispatched asynchronously, as JAX's.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import types
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc

from jaxkit.runtime import compile_cache, pjrt
from jaxkit._config import config

ArrayImpl = _jax.ArrayImpl
_COPY = _jax.HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL


# --------------------------------------------------------------------------------------------
# Shardings
# --------------------------------------------------------------------------------------------


class AxisSharding(_jax.GSPMDSharding):
    """A global array split along one axis over a list of devices (or replicated on them).

    Subclasses jaxlib's C++ ``GSPMDSharding`` with the two members jax normally adds;
    ``axis`` is the split axis (``None``: every device holds the whole array)."""

    memory_kind = None

    def _to_xla_hlo_sharding(self, ndim):
        return self._hlo_sharding

    @property
    def devices(self) -> tuple:
        return tuple(self._devices)

    @property
    def device_set(self) -> set:
        return set(self._devices)

    @property
    def is_fully_replicated(self) -> bool:
        return self.axis is None

    def shard_shape(self, global_shape: Sequence[int]) -> tuple[int, ...]:
        shape = list(global_shape)
        if self.axis is not None:
            shape[self.axis] //= len(self._devices)
        return tuple(shape)

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        """For every device, the slices of the global array it holds."""
        out = {}
        size = None if self.axis is None else global_shape[self.axis] // len(self._devices)
        for i, device in enumerate(self._devices):
            index = [slice(None)] * len(global_shape)
            if size is not None:
                index[self.axis] = slice(i * size, (i + 1) * size)
            out[device] = tuple(index)
        return out

    def __repr__(self):
        where = "replicated" if self.axis is None else f"split on axis {self.axis}"
        return f"AxisSharding({where} over {len(self._devices)} devices)"


_shardings: dict[tuple, AxisSharding] = {}
_device_lists: dict[tuple, Any] = {}
DeviceList = _jax.DeviceList  # jaxlib's type of the lists below (named by JAX's modules)


def device_list(devices: Sequence) -> Any:
    """One ``DeviceList`` per device tuple (jaxlib compares them by identity in places)."""
    key = tuple(devices)
    dl = _device_lists.get(key)
    if dl is None:
        dl = _device_lists[key] = _jax.DeviceList(key)
    return dl


def axis_sharding(devices: Sequence, ndim: int, axis: int | None) -> AxisSharding:
    """The sharding of a rank-``ndim`` global array split on ``axis`` over ``devices``;
    cached, so the same arguments give the same object."""
    key = (tuple(devices), ndim, axis)
    shd = _shardings.get(key)
    if shd is None:
        if axis is None:
            hlo = xc.HloSharding.replicate()
        else:
            dims = [1] * ndim
            dims[axis] = len(devices)
            hlo = xc.HloSharding.iota_tile(dims)
        shd = AxisSharding(device_list(devices), hlo)
        shd.axis = axis
        _shardings[key] = shd
    return shd


def addressable_devices(devices: Sequence) -> list:
    """The devices of ``devices`` that this process owns, in order."""
    pid = _process_index(devices)
    return [d for d in devices if d.process_index == pid]


def _process_index(devices: Sequence) -> int:
    return backend_of_devices(devices).client.process_index()


def backend_process_count(devices: Sequence) -> int:
    """How many processes own devices of the backend of ``devices`` (1 unless
    ``jaxkit.distributed.initialize`` made a multi-process backend)."""
    return len({d.process_index for d in backend_of_devices(devices).devices})


def backend_of_devices(devices: Sequence) -> pjrt.Backend:
    """The backend whose client owns ``devices`` (all of them global device objects)."""
    first = devices[0]
    for backend in list(pjrt._backends.values()):
        if first in backend.devices:
            return backend
    raise ValueError(f"{first!r} is not a device of any jaxkit backend")


def add_cpu_backend(name: str, num_devices: int) -> pjrt.Backend:
    """An extra CPU backend called ``name`` with ``num_devices`` devices, created once (the
    default CPU backend's device count is fixed when it is first used). ``pmap(f,
    backend=name)`` and ``jaxkit.devices(name)`` then use it."""
    with pjrt._lock:
        backend = pjrt._backends.get(name)
        if backend is None:
            backend = pjrt._backends[name] = pjrt.Backend(
                xc.make_cpu_client(num_devices=num_devices))
    if len(backend.devices) != num_devices:
        raise ValueError(f"backend {name!r} already exists with {len(backend.devices)} devices")
    return backend


# --------------------------------------------------------------------------------------------
# Host -> devices
# --------------------------------------------------------------------------------------------


def put_pieces(pieces: Sequence[np.ndarray], aval, sharding: AxisSharding,
               devices: Sequence) -> ArrayImpl:
    """One global array (``aval`` is its global type) from one host piece per device of
    ``devices`` (the addressable devices of ``sharding``, in its order). Pieces are copied."""
    return _jax.batched_device_put(aval, sharding, list(pieces), list(devices), True, False,
                                   _COPY, enable_x64=config.x64)


def split_host(value: np.ndarray, axis: int | None, positions: Sequence[int],
               n: int) -> list[np.ndarray]:
    """The pieces of ``value`` for the devices at ``positions`` of an ``n``-way split along
    ``axis`` (views, no copies); with ``axis=None`` every device gets the whole value."""
    if axis is None:
        return [value] * len(positions)
    size = value.shape[axis] // n
    lead = (slice(None),) * axis
    return [value[lead + (slice(p * size, (p + 1) * size),)] for p in positions]


# --------------------------------------------------------------------------------------------
# Devices -> host: the shards of a global array
# --------------------------------------------------------------------------------------------

_stub_lock = threading.Lock()


def _make_stub_modules() -> dict[str, types.ModuleType]:
    """Stand-ins for the three modules jaxlib imports to label a shard with a sharding."""
    jax_mod = types.ModuleType("jax")
    src = types.ModuleType("jax._src")
    impls = types.ModuleType("jax._src.sharding_impls")

    def make_single_device_sharding(device, memory_kind=None):
        return pjrt.memory_sharding(device, memory_kind)

    impls.make_single_device_sharding = make_single_device_sharding
    jax_mod._src = src
    src.sharding_impls = impls
    return {"jax": jax_mod, "jax._src": src, "jax._src.sharding_impls": impls}


_stubs = _make_stub_modules()


@contextlib.contextmanager
def jax_free_imports() -> Iterator[None]:
    """Within the block, jaxlib's imports of ``jax._src.sharding_impls`` are answered by the
    stand-in modules (unless jax itself is imported, which then answers them)."""
    if "jax" in sys.modules:
        yield
        return
    with _stub_lock:
        sys.modules.update(_stubs)
        try:
            yield
        finally:
            for name in _stubs:
                sys.modules.pop(name, None)


def addressable_shards(buf: ArrayImpl) -> list[ArrayImpl]:
    """The per-device arrays of a global array (this process's devices, in sharding order).

    Their ``aval`` is unset (jaxlib builds it with jax); callers know the shard type. A
    global array over one device (a program partitioned over a 1-device mesh) is its own
    only shard for jaxlib, still labelled with the global sharding: it is relabelled as a
    one-device array, as every other shard is."""
    with jax_free_imports():
        arrays = buf._arrays
    if len(arrays) == 1 and not hasattr(arrays[0]._sharding, "_device"):
        held = buf._sharding
        device = held._devices[0]
        return [ArrayImpl(buf.aval, pjrt.memory_sharding(device, held.memory_kind), arrays,
                          True, True)]
    return arrays


def fetch_shards(buf: ArrayImpl) -> list[np.ndarray]:
    """Host copies (read-only views on CPU) of the addressable shards of a global array.
    Shards without a buffer-protocol view (bfloat16, GPU memory) are copied by jaxlib, whose
    import of jax the stand-ins answer too."""
    with jax_free_imports():
        return [pjrt.fetch(s) for s in buf._arrays]


def wrap_shard(shard: ArrayImpl, aval) -> ArrayImpl:
    """A single-device array over the buffer of ``shard`` that carries ``aval``."""
    held = shard._sharding
    return ArrayImpl(aval, pjrt.memory_sharding(held._device, held._memory_kind), [shard], True,
                     True)


# --------------------------------------------------------------------------------------------
# Compile and execute over replicas
# --------------------------------------------------------------------------------------------

_in_flight: list = []  # the results of the last replicated execution (at most one in flight)
_in_flight_lock = threading.Lock()


# Op names of the collectives in a compiled module's HLO text (async pairs as ``-start``).
_COLLECTIVES = ("all-reduce", "all-gather", "all-to-all", "collective-permute",
                "reduce-scatter", "collective-broadcast")


def _has_collectives(xla_executable) -> bool:
    """Whether the compiled program exchanges data between devices (it then rendezvouses)."""
    try:
        text = "".join(m.to_string() for m in xla_executable.hlo_modules())
    except _jax.JaxRuntimeError:  # (no HLO to read: assume the worst)
        return True
    return any(f" {op}(" in text or f" {op}-start(" in text for op in _COLLECTIVES)


def _wait_previous() -> None:
    """Block on the previous replicated execution (the CPU client deadlocks in collective
    rendezvous when too many are queued, see the module docstring)."""
    prev = _in_flight[:]
    if prev:
        alive = [b for b in prev if not b.is_deleted()]
        if alive:
            _jax.batched_block_until_ready(alive)
        _in_flight.clear()


class ReplicatedExecutable:
    """A program compiled for ``len(devices)`` replicas; called with global arrays."""

    __slots__ = (
        "_execute",
        "cache_source",
        "collective",
        "devices",
        "handlers",
        "out_avals",
        "out_shardings",
        "xla_executable",
    )

    def __init__(self, xla_executable, devices: Sequence, out_avals: Sequence,
                 out_shardings: Sequence[AxisSharding]):
        self.xla_executable = xla_executable
        self.devices = tuple(devices)
        self.out_avals = list(out_avals)
        self.out_shardings = list(out_shardings)
        self.handlers = [_jax.array_result_handler(a, s, True, _skip_checks=True)
                         for a, s in zip(self.out_avals, self.out_shardings)]
        self._execute = xla_executable.execute_sharded
        self.collective = _has_collectives(xla_executable)

    def __call__(self, bufs: Sequence[ArrayImpl]) -> list[ArrayImpl]:
        if config.jax_no_execution:
            pjrt.raise_no_execution(self.xla_executable)
        with _in_flight_lock:
            if self.collective:
                _wait_previous()
            try:
                if not self.handlers:  # no result to wait on later: wait for the token now
                    results = self._execute(bufs, with_tokens=True)
                    results.consume_token().block_until_ready()
                    return []
                outs = self._execute(bufs).consume_with_handlers(self.handlers)
            except _jax.JaxRuntimeError:
                pjrt.raise_if_deleted(bufs)
                raise
            if self.collective:
                _in_flight.append(outs[0])
        return outs

    def as_text(self) -> str:
        return self.xla_executable.hlo_modules()[0].to_string()

    def cost_analysis(self) -> dict[str, float]:
        return dict(self.xla_executable.cost_analysis())

    def memory_analysis(self):
        return self.xla_executable.get_compiled_memory_stats()


def compile_replicated(module: Any, devices: Sequence, out_avals: Sequence,
                       out_shardings: Sequence[AxisSharding]) -> ReplicatedExecutable:
    """Compile a StableHLO module as ``len(devices)`` replicas, replica ``i`` on
    ``devices[i]``. ``out_avals``/``out_shardings`` describe the global outputs."""
    backend = backend_of_devices(devices)
    opts = _jax.CompileOptions()
    opts.num_replicas = len(devices)
    opts.num_partitions = 1
    opts.device_assignment = _jax.DeviceAssignment.create(
        np.array([[d.id] for d in devices], dtype=np.int32))
    exe, source = pjrt.compile_with_host_callbacks(backend.client, module, device_list(devices),
                                                   opts) or compile_cache.compile_and_load(
        backend.client, module, device_list(devices), devices, opts)
    replicated = ReplicatedExecutable(exe, devices, out_avals, out_shardings)
    replicated.cache_source = source
    return replicated


def block_until_ready(bufs: Sequence[ArrayImpl]) -> None:
    if bufs:
        _jax.batched_block_until_ready(list(bufs))


# --------------------------------------------------------------------------------------------
# Several processes: jaxlib's distributed runtime (coordination service) and gloo collectives
# --------------------------------------------------------------------------------------------


def _ignore_client_error(*args) -> None:
    """Installed as the client's error callback so that a failed ``connect`` raises in Python
    instead of aborting the process (jaxlib's default). jaxlib cannot pass the status to
    Python, so a later failure (a peer stops sending heartbeats) still ends the process, after
    the coordination service has logged which task failed."""


def start_distributed_service(bind_address: str, num_processes: int, *,
                              heartbeat_timeout: int, shutdown_timeout: int,
                              register_timeout: int) -> Any:
    """The coordination service (run by process 0)."""
    return _jax.get_distributed_runtime_service(
        bind_address, num_processes, heartbeat_timeout=heartbeat_timeout,
        cluster_register_timeout=register_timeout, shutdown_timeout=shutdown_timeout)


def connect_distributed_client(address: str, process_id: int, *, init_timeout: int,
                               heartbeat_timeout: int, shutdown_timeout: int) -> Any:
    """A client of the coordination service at ``address``, connected (blocks until every
    process has connected, or raises after ``init_timeout`` seconds)."""
    client = _jax.get_distributed_runtime_client(
        address, process_id, init_timeout=init_timeout, heartbeat_timeout=heartbeat_timeout,
        shutdown_timeout=shutdown_timeout, missed_heartbeat_callback=_ignore_client_error)
    client.connect()
    return client


def start_preemption_sync_manager(client: Any) -> Any:
    """jaxlib's preemption sync manager on ``client``: it learns of a preemption notice
    (SIGTERM) in any process and agrees on the step at which every process checkpoints."""
    manager = _jax.create_preemption_sync_manager()
    manager.initialize(client)
    return manager


def make_distributed_cpu_client(client: Any, process_id: int, num_processes: int,
                                num_devices: int, hostname: str | None) -> Any:
    """A CPU PjRt client whose devices are those of every process, with gloo TCP collectives
    between the processes."""
    collectives = _jax.make_gloo_tcp_collectives(client, hostname=hostname)
    return xc.make_cpu_client(distributed_client=client, node_id=process_id,
                              num_nodes=num_processes, collectives=collectives,
                              num_devices=num_devices)


# --------------------------------------------------------------------------------------------
# PJRT plugins (GPU)
# --------------------------------------------------------------------------------------------


def load_pjrt_plugin(name: str, library_path: str) -> Any:
    """Load (once) and initialise the PJRT plugin library; returns its C API handle (None if
    it was loaded before)."""
    c_api = None
    if not xc.pjrt_plugin_loaded(name):
        c_api = xc.load_pjrt_plugin_dynamically(name, library_path)
    if not xc.pjrt_plugin_initialized(name):
        xc.initialize_pjrt_plugin(name)
    return c_api


def make_plugin_client(name: str) -> Any:
    """A client of a loaded plugin, with the GPU options jax uses (they honour
    ``XLA_PYTHON_CLIENT_PREALLOCATE``, ``XLA_PYTHON_CLIENT_MEM_FRACTION``, ...)."""
    return xc.make_c_api_client(name, xc.generate_pjrt_gpu_plugin_options())


def register_plugin_custom_calls(platform: str, extension: Any, c_api: Any) -> None:
    """Register a plugin extension's custom calls and FFI handlers (as jax's CUDA plugin
    package does)."""
    xc.register_custom_call_handler(
        platform, lambda *args, **kw: extension.register_custom_call_target(c_api, *args, **kw))
    if hasattr(extension, "register_custom_type"):
        xc.register_custom_type_handler(
            platform, lambda *args, **kw: extension.register_custom_type(c_api, *args, **kw))
        for name, value in extension.ffi_types().items():
            xc.register_custom_type(name, value, platform=platform)
    for name, value in extension.ffi_handlers().items():
        xc.register_custom_call_target(name, value, platform=platform, api_version=1)
