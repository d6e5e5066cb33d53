"""The runtime: jaxlib's PjRt clients, devices, device buffers, compilation and execution.

With ``interpreters/mlir.py`` this is the only code that imports jaxlib, and nothing imports the
``jax`` package. The recipes follow ``shared/JAXLIB.md``: results are wrapped by
``array_result_handler``s built once per executable (never ``disassemble_*``, which makes jaxlib
attempt a failing ``import jax`` per array), host data is copied on ``put`` unless the library
owns it, and 64-bit data is canonicalised here because jaxlib would narrow it silently.
"""
from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import re
import sys
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # silence PjRt start-up info lines

from jaxkit.runtime import allocator  # noqa: E402

allocator.configure()  # before jaxlib starts threads: see allocator.py

import numpy as np  # noqa: E402
from jaxlib import _jax  # noqa: E402
from jaxlib import xla_client as xc  # noqa: E402

from jaxkit import core, dtypes, errors  # noqa: E402
from jaxkit._config import config, thread_blocks  # noqa: E402
from jaxkit.runtime import compile_cache, compile_config  # noqa: E402
from jaxkit.literals import TypedNdArray  # noqa: E402

ArrayImpl = _jax.ArrayImpl
JaxRuntimeError = _jax.JaxRuntimeError
# jax.errors.JaxRuntimeError is jaxlib's class; jaxkit.errors sits below the runtime layer (it
# may not import jaxlib), so the runtime, which loads jaxlib, hands it the class.
errors.JaxRuntimeError = JaxRuntimeError
ArrayCopySemantics = _jax.ArrayCopySemantics
Device = _jax.Device
jaxlib_version = _jax.__version__ if hasattr(_jax, "__version__") else "0.10.2"


def _collect_jaxlib_garbage(phase: str, info: dict) -> None:
    """Free the Python objects jaxlib released on threads that did not hold the GIL.

    jaxlib cannot drop a Python reference without the GIL, so it queues those objects (one per
    ``execute_sharded`` call, ~70 bytes: the leak of issue 21) until ``collect_garbage()``
    runs. JAX calls it from a ``gc`` callback; so do we, at the end of each collection."""
    if phase == "stop":
        _jax.collect_garbage()


gc.callbacks.append(_collect_jaxlib_garbage)


class _NoJaxFinder:
    """Makes jaxlib's internal ``import jax._src.sharding_impls`` attempts fail at once.

    jaxlib tries that import on a few slow paths (multi-device shards, bfloat16 fetches); when
    jax is not installed each failed attempt scans ``sys.path`` (~50 us). Installed only when
    jax is absent, so a user's later ``import jax`` is unaffected."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "jax" or name.startswith("jax."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


if importlib.util.find_spec("jax") is None:
    sys.meta_path.insert(0, _NoJaxFinder)


class Sharding(_jax.SingleDeviceSharding):
    """Single-device sharding with the two members jaxlib's C++ code expects.

    jax monkey-patches ``memory_kind`` and ``_to_xla_hlo_sharding`` onto the C++ class; we
    subclass instead. One instance per device is reused everywhere (compared by identity)."""

    _replicated = xc.HloSharding.replicate()

    def __init__(self, device, *, memory_kind: str | None = None):
        check_memory_kind((device,), memory_kind)
        super().__init__(device, memory_kind=memory_kind)
        self._hash = hash((device, self._memory_kind))  # shardings key caches: hash once

    # jaxlib's C++ class fills in the device's default memory kind ("device") for None.
    memory_kind = property(lambda self: self._memory_kind)

    def with_memory_kind(self, kind: str) -> Sharding:
        return memory_sharding(self._device, kind)

    def _to_xla_hlo_sharding(self, ndim):
        return Sharding._replicated

    # jaxlib's class compares by identity; JAX's compares the device and the memory kind.
    def __eq__(self, other):
        if self is other:
            return True
        return isinstance(other, Sharding) and self._device == other._device and \
            self._memory_kind == other._memory_kind

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind={self.memory_kind})"

    device_set = property(lambda self: {self._device})
    addressable_devices = device_set
    num_devices = 1
    is_fully_replicated = True
    is_fully_addressable = True

    def shard_shape(self, global_shape):
        return tuple(global_shape)

    # The base ``jax.sharding.Sharding`` methods (Orbax's checkpointing reads the indices map
    # of every array it saves): the one device holds the whole array.
    has_addressable_devices = True

    def devices_indices_map(self, global_shape) -> dict:
        """The device's slices of an array of ``global_shape``: all of it."""
        return {self._device: (slice(None),) * len(global_shape)}

    addressable_devices_indices_map = devices_indices_map
    _device_assignment = _addressable_device_assignment = property(lambda self: (self._device,))

    def check_compatible_aval(self, aval_shape) -> None:
        """Any shape fits on one device (JAX checks a rank only for partitioned shardings)."""


Sharding.__name__ = Sharding.__qualname__ = "SingleDeviceSharding"
Sharding.__module__ = "jax.sharding"


def check_memory_kind(devices: Sequence, kind: str | None) -> None:
    """JAX's error for a memory kind that the devices cannot address (None: the default)."""
    if kind is None:
        return
    for device in devices:
        kinds = [m.kind for m in device.addressable_memories()]
        if kind not in kinds:
            raise ValueError(
                f"Could not find memory addressable by device {device.device_kind}. Device "
                f"{device.device_kind} can address the following memory kinds: "
                f"{', '.join(kinds)}. Got memory kind: {kind}")


_memory_shardings: dict[tuple, Sharding] = {}


def memory_sharding(device, kind: str | None) -> Sharding:
    """The one single-device sharding of ``device`` in its memory space ``kind`` (None or
    its default memory: the device's own sharding)."""
    if kind is None or kind == device.default_memory().kind:
        return sharding_of(device)
    s = _memory_shardings.get((device, kind))
    if s is None:
        s = _memory_shardings[(device, kind)] = Sharding(device, memory_kind=kind)
    return s


_COPY = _jax.HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL
_ALIAS = _jax.HostBufferSemantics.ZERO_COPY


class Backend:
    """One PjRt client with its devices and their shardings."""

    def __init__(self, client):
        self.client = client
        self.platform = client.platform
        self.devices = list(client.devices())
        self.local_devices = list(client.local_devices())
        self.shardings = {d: Sharding(d) for d in self.local_devices}
        self.device_lists = {d: _jax.DeviceList((d,)) for d in self.local_devices}
        # How a NumPy array is read when copied in. On the CPU the copy is made during the
        # call (a device buffer there would otherwise alias memory the user may mutate). An
        # accelerator's buffer cannot alias host memory: "zero copy" (JAX's default) lets
        # the runtime read the array in place, keeping it alive until its transfer is done.
        # Measured on an H100 for 256 MiB: 39 GB/s this way (JAX 42), 10-12 GB/s with a copy
        # made during the call or kept until the transfer completes.
        self.host_copy = _COPY if self.platform == "cpu" else _ALIAS
        if _backends or len(self.devices) > 1:  # a second device exists: see `Placement`
            placement.spread = True

    def __repr__(self):
        return f"Backend({self.platform}, {len(self.devices)} devices)"


_backends: dict[str, Backend] = {}
_lock = threading.Lock()


class Placement:
    """Whether placement must be decided per computation, and the default placement.

    ``spread`` stays False while the process has one device and no committed array: every
    computation then runs on that device, and the dispatch paths skip deciding it (one check
    of this flag). It turns True for good once a second device exists (a backend with several
    devices, or a second backend), an array is committed to a device, or a default device is
    set; from then on every eager op and jit call decides its device from its arguments
    (``runtime.array.placement``) and keys its programs on it.

    ``default`` is the sharding of the default backend's first device while nothing
    overrides it (no ``default_device`` block open in any thread, ``jax_default_device``
    unset, no mesh set with ``jax.set_mesh``: ``mesh_devices``), else None. The cached dispatch
    paths compare a call's uncommitted arguments' sharding with it (one ``is``) instead of
    asking ``current_default_sharding()``; while it is None they take the general path,
    which asks."""

    __slots__ = ("spread", "default", "blocks", "mesh_devices")

    def __init__(self):
        self.spread = False
        self.default = None
        # default_device and use_abstract_mesh blocks open, over all threads
        self.blocks = 0
        # The devices of the mesh set with jax.set_mesh (``runtime.context_mesh``), else ()
        self.mesh_devices: tuple = ()


placement = Placement()
_first_sharding: list = []  # the default backend's first device's sharding, once known
_blocks_lock = threading.Lock()
_UNSET = object()


def _refresh_default() -> None:
    placement.default = (_first_sharding[0] if _first_sharding and not placement.blocks and
                         not placement.mesh_devices and
                         config.read_global("jax_default_device") is None else None)


def refresh_default() -> None:
    """Recompute ``placement.default`` (after ``placement.mesh_devices`` changed)."""
    with _blocks_lock:
        _refresh_default()


@contextlib.contextmanager
def default_device_block(device) -> Iterator[None]:
    """Inside the block, computations without committed arguments run on ``device`` (a
    device, a platform name, or None: the default backend's first device), in this thread;
    ``config.jax_default_device`` reads it back there, as in JAX."""
    blocks = thread_blocks.values
    name = "jax_default_device"
    saved = blocks.get(name, _UNSET)
    if device is not None:
        placement.spread = True
    with _blocks_lock:
        placement.blocks += 1
        placement.default = None
    blocks[name] = device
    try:
        yield
    finally:
        if saved is _UNSET:
            del blocks[name]
        else:
            blocks[name] = saved
        with _blocks_lock:
            placement.blocks -= 1
            _refresh_default()


@contextlib.contextmanager
def placement_decided_per_call() -> Iterator[None]:
    """A block in which every computation decides its placement from its arguments, with no
    cached default (``use_abstract_mesh``: where only an abstract mesh is in context, one
    without a device from its arguments is refused, as JAX's)."""
    placement.spread = True
    with _blocks_lock:
        placement.blocks += 1
        placement.default = None
    try:
        yield
    finally:
        with _blocks_lock:
            placement.blocks -= 1
            _refresh_default()


def _spread_on_default_device(name: str, value) -> None:
    if name == "jax_platform_name":  # another default backend: its first device from now on
        placement.spread = True
        with _blocks_lock:
            _first_sharding.clear()
            _refresh_default()
    if name == "jax_default_device":
        if value is not None:
            placement.spread = True
        with _blocks_lock:
            _refresh_default()


config.on_change(_spread_on_default_device)


def _num_cpu_devices() -> int:
    """How many CPU devices the CPU backend gets: ``JAXKIT_NUM_CPU_DEVICES``, else JAX's
    ``JAX_NUM_CPU_DEVICES``, else XLA's ``--xla_force_host_platform_device_count`` in
    ``XLA_FLAGS`` (as JAX reads them when its backend starts), else 1; the
    ``jax_num_cpu_devices`` option, when set, before all of them."""
    if (config.jax_num_cpu_devices or 0) > 0:  # None, as JAX's type allows: unset
        return config.jax_num_cpu_devices
    for name in ("JAXKIT_NUM_CPU_DEVICES", "JAX_NUM_CPU_DEVICES"):
        if name in os.environ:
            value = os.environ[name]
            break
    else:
        found = re.findall(r"--xla_force_host_platform_device_count=(\S*)",
                           os.environ.get("XLA_FLAGS", ""))
        name, value = "--xla_force_host_platform_device_count", found[-1] if found else "1"
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if n < 1:
        raise ValueError(f"{name} must be a positive integer, got {n}")
    return n


def devices(backend: str | None = None) -> list:
    """All devices of a backend (default: CPU), like ``jax.devices()``."""
    return list(get_backend(backend).devices)


def local_devices(backend: str | None = None) -> list:
    return list(get_backend(backend).local_devices)


def default_device():
    """The default backend's first device (what runs when no default device is set)."""
    return get_backend().local_devices[0]


def current_default_sharding() -> Sharding:
    """The sharding of ``current_default_device()`` (one object per device: placement keys
    its caches on these, which hash faster than devices)."""
    dev = config.jax_default_device  # this thread's default_device block's, else the option's
    if dev is None:
        if not _first_sharding:
            backend = get_backend()
            with _blocks_lock:
                _first_sharding.append(backend.shardings[backend.local_devices[0]])
                _refresh_default()
        return _first_sharding[0]
    if isinstance(dev, str):
        backend = get_backend(dev)
        return backend.shardings[backend.local_devices[0]]
    return sharding_of(dev)


def current_default_device():
    """Where computations without committed arguments run: the device (or a platform's first
    device) of the innermost ``default_device`` block of this thread, else the
    ``jax_default_device`` option, else ``default_device()``."""
    return current_default_sharding()._device


def sharding_of(device) -> Sharding:
    """The one ``Sharding`` object of ``device``."""
    return backend_of(device).shardings[device]


def backend_of(device) -> Backend:
    for backend in _backends.values():
        if device in backend.shardings:
            return backend
    raise ValueError(f"{device!r} is not a device of any jaxkit backend")


def hlo_cost_analysis(hlo_module, device=None) -> dict[str, float]:
    """XLA's cost estimate (flops, transcendentals, bytes accessed, ...) of an HLO module
    before optimization, by the client of ``device`` (default: the default device's), as
    JAX's ``Lowered.cost_analysis``. A client behind the PjRt C API (a plugin: CUDA, TPU) has
    no such analysis; that raises NotImplementedError, as in JAX."""
    backend = backend_of(default_device() if device is None else device)
    if "PJRT C API" in backend.client.platform_version:
        raise NotImplementedError(
            f"Lowered.cost_analysis not implemented on platform '{backend.platform}'. Use "
            "compile().cost_analysis() for post-compilation cost estimates.")
    return _jax.hlo_module_cost_analysis(backend.client, hlo_module)


# --------------------------------------------------------------------------------------------
# Host <-> device
# --------------------------------------------------------------------------------------------



def put(x: np.ndarray, aval, device=None, may_alias: bool = False,
        committed: bool = False, memory_kind: str | None = None) -> ArrayImpl:
    """Copy a NumPy array (already of ``aval.dtype``) to a device buffer carrying ``aval``, on
    ``device`` (default: ``current_default_device()``); ``committed`` marks the array as
    placed there by the user (computations on it then run there).

    ``may_alias=True`` lets the CPU client alias the NumPy memory; only for arrays that the
    library created and nobody else can mutate. ``memory_kind`` names the device's memory
    space to put it in (None: its default one)."""
    if device is None:
        dev = current_default_device() if placement.spread else default_device()
    else:
        dev = device
    if committed:
        placement.spread = True
    try:
        backend = backend_of(dev) if placement.spread else get_backend()
        sharding = backend.shardings[dev]
    except KeyError:
        raise ValueError(f"{dev!r} is not a device of the {backend.platform} backend") from None
    if memory_kind is not None:
        sharding = memory_sharding(dev, memory_kind)
    space = core.mem_kind_to_space(memory_kind)
    if aval.dtype == dtypes.float0:  # no data: a program takes it as bool zeros (i1), as JAX
        x, aval = np.zeros(x.shape, np.bool_), aval.update(dtype=np.dtype(np.bool_),
                                                           weak_type=False)
    if getattr(aval, "memory_space", space) is not space:
        # the array's type says where it lives (``f32<host>[...]``), as JAX's
        aval = aval.update(memory_space=space)
    # Data already of its type's dtype is put as it is: a 64-bit type while x64 is off (a
    # value typed under x64, ``TypedFloat(1.5, dtype=float64)``, as JAX keeps it) would else
    # be narrowed to a buffer its type does not describe, which the programs then refuse.
    keep = config.x64 or getattr(x, "dtype", None) == aval.dtype
    return _jax.batched_device_put(aval, sharding, [x], [dev], committed, False,
                                   _ALIAS if may_alias else backend.host_copy,
                                   enable_x64=keep)


def fetch(buf: ArrayImpl) -> np.ndarray:
    """Device buffer -> read-only NumPy array (zero-copy view on CPU for standard dtypes)."""
    try:
        return np.asarray(memoryview(buf))
    except BufferError:  # bfloat16, float8, int4 have no buffer-protocol format
        return buf._single_device_array_to_np_array_did_copy()[0]


def device_of(buf: ArrayImpl):
    return buf._sharding._device


def copy_to_device(buf: ArrayImpl, aval, device, committed: bool = True,
                   memory_kind: str | None = None) -> ArrayImpl:
    """``buf`` on ``device``, in its memory space ``memory_kind`` (None: the default one);
    itself if it is there already, when its committedness fits."""
    held = buf._sharding.memory_kind or "device"
    if device_of(buf) == device and (buf._committed or not committed) and \
            held == (memory_kind or "device"):
        return buf
    return put(np.array(fetch(buf)), aval, device, may_alias=True, committed=committed,
               memory_kind=memory_kind)


# --------------------------------------------------------------------------------------------
# Compile and execute
# --------------------------------------------------------------------------------------------


def _token_result(bufs: list) -> core.Token:
    """A token result of a program (its ``bool[0]`` buffer) as a ``Token``."""
    return core.Token(bufs[0])


def _extended_result(aval, sharding, committed: bool):
    """The handler of an extended-dtype result (a key array): its physical buffer, made into
    a value by the dtype (``ExtendedDType.from_physical``)."""
    physical = _jax.array_result_handler(core.physical_aval(aval), sharding, committed,
                                         _skip_checks=True)
    return lambda bufs: aval.dtype.from_physical(physical(bufs))


def _float0_result(aval):
    """The handler of a ``float0`` result: the host zeros JAX gives (``TypedNdArray``); the
    device's bool buffer holds nothing to read."""
    return lambda bufs: TypedNdArray(np.zeros(aval.shape, dtypes.float0), aval)


class Executable:
    """A compiled program plus the result handlers that wrap its outputs as device arrays."""

    __slots__ = ("xla_executable", "out_avals", "handlers", "committed_handlers", "device",
                 "_execute", "cache_source")

    def __init__(self, xla_executable, out_avals: Sequence, device):
        self.xla_executable = xla_executable
        self.out_avals = list(out_avals)
        self.device = device
        sharding = backend_of(device).shardings[device]
        # A result typed in host memory is made there (its sharding names that memory).
        host = memory_sharding(device, "pinned_host") if any(
            getattr(a, "memory_space", None) is core.MemorySpace.Host
            for a in self.out_avals) else None
        # Results are committed to the device when an argument was (see `Placement`): one
        # set of handlers for each case.
        self.handlers, self.committed_handlers = [
            [_token_result if type(a) is core.AbstractToken else
             _extended_result(a, sharding, committed) if dtypes.is_extended(a.dtype) else
             _float0_result(a) if a.dtype == dtypes.float0 else
             _jax.array_result_handler(
                 a, host if a.memory_space is core.MemorySpace.Host else sharding, committed,
                 _skip_checks=True)
             for a in self.out_avals] for committed in (False, True)]
        self._execute = xla_executable.execute_sharded
        # Where the executable came from: compile_cache.COMPILED ("compiled"), MEMORY
        # ("memory": the same program compiled earlier in this process) or PERSISTENT
        # ("persistent": loaded from the on-disk compilation cache).
        self.cache_source = compile_cache.COMPILED

    def __call__(self, bufs: Sequence[ArrayImpl], committed: bool = False) -> list[ArrayImpl]:
        if config.jax_no_execution:
            raise_no_execution(self.xla_executable)
        try:
            return self._execute(bufs).consume_with_handlers(
                self.committed_handlers if committed else self.handlers)
        except JaxRuntimeError:
            raise_if_deleted(bufs)
            raise

    def as_text(self) -> str:
        return self.xla_executable.hlo_modules()[0].to_string()

    def cost_analysis(self) -> dict[str, float]:
        return dict(self.xla_executable.cost_analysis())

    def memory_analysis(self):
        return self.xla_executable.get_compiled_memory_stats()


def raise_no_execution(xla_executable) -> None:
    """JAX's error for running a program while ``jax.no_execution`` is set, naming the
    program as JAX does (module ``jit_f`` -> ``jit(f)``)."""
    name = xla_executable.hlo_modules()[0].name
    if name.startswith("jit_"):
        name = f"jit({name[4:]})"
    raise RuntimeError(f"JAX tried to execute function {name}, but the no_execution config "
                       "option is set")


def deleted_message(aval) -> str:
    """JAX's message for a deleted array, and what to do about it."""
    dims = ",".join(map(str, aval.shape))
    return (f"Array has been deleted with shape={aval.dtype.name}[{dims}]. It was donated to a "
            "function (donate_argnums) or deleted with .delete(); use that call's result "
            "instead.")


def raise_if_deleted(bufs: Sequence) -> None:
    """After a failed execute: if an argument was deleted or donated, say so as JAX does
    (instead of jaxlib's "Invalid buffer passed to Execute()" or a shard-count mismatch).
    Checked after the failure, so calls that succeed pay nothing for it."""
    for buf in bufs:
        if isinstance(buf, ArrayImpl) and buf.is_deleted():
            raise RuntimeError(deleted_message(buf.aval)) from None


def compile_module(module_bytes_or_text: Any, out_avals: Sequence, device=None) -> Executable:
    """Compile a StableHLO module (text, bytecode or ``ir.Module``) for one device."""
    if device is None:
        dev = current_default_device() if placement.spread else default_device()
    else:
        dev = device
    backend = backend_of(dev) if placement.spread else get_backend()
    options = _jax.CompileOptions()
    if placement.spread:  # XLA assigns a one-replica program to device 0 unless told
        options.device_assignment = _jax.DeviceAssignment.create(
            np.array([[dev.id]], dtype=np.int32))
    compiled = compile_with_host_callbacks(backend.client, module_bytes_or_text,
                                           backend.device_lists[dev], options)
    if compiled is not None:
        exe, source = compiled
    else:
        exe, source = compile_cache.compile_and_load(
            backend.client, module_bytes_or_text, backend.device_lists[dev], (dev,), options)
    executable = Executable(exe, out_avals, dev)
    executable.cache_source = source
    return executable


# ---- Python host callbacks (pure_callback, debug.print) ---------------------------------------
# A lowered module that calls back into Python holds ``custom_call @xla_ffi_python_cpu_callback``
# ops whose ``mhlo.backend_config = {index = i}`` selects the i-th callable handed to
# ``compile_and_load(..., host_callbacks=[...])`` (jaxlib's typed-FFI Python callback; no jax
# needed). The lowering records the callables per module here; compiling picks them up.
module_host_callbacks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compile_with_host_callbacks(client, module: Any, device_list, options) -> tuple | None:
    """``(executable, COMPILED)`` for a lowered module that calls back into Python (one, several
    replicas or partitions: each device calls the same callables), or None for any other
    module. Such a module is never cached (the callables are this process's), so the
    config's options are applied here, as ``compile_cache.compile_and_load`` does."""
    callbacks = module_host_callbacks.get(module) if not isinstance(module, (str, bytes)) \
        else None
    if not callbacks:
        return None
    compile_config.apply_config_to_compile_options(options)
    compile_config.dump_module(module)
    exe = client.compile_and_load(module, device_list, options, host_callbacks=list(callbacks))
    return _CallbackExecutable(exe, callbacks), compile_cache.COMPILED


class _CallbackExecutable:
    """A loaded executable with Python host callbacks: each run waits for the program's side
    effects (prints, callbacks) to finish before returning, so that their output has appeared
    and their errors are raised at the call, and keeps the callables alive."""

    __slots__ = ("_exe", "host_callbacks")

    def __init__(self, exe, host_callbacks: list):
        self._exe = exe
        self.host_callbacks = host_callbacks

    def execute_sharded(self, bufs, with_tokens: bool = False):
        results = self._exe.execute_sharded(bufs, with_tokens=True)
        if not with_tokens:  # (a caller asking for the token waits on it itself)
            results.consume_token().block_until_ready()
        return results

    def __getattr__(self, name):
        return getattr(self._exe, name)


def block_until_ready_buffers(bufs: Sequence[ArrayImpl]) -> None:
    if bufs:
        _jax.batched_block_until_ready(list(bufs))


_LAPACK_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
                  np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}
_lapack_lock = threading.Lock()
_lapack_registered: list[bool] = []


def lapack_target(fn_base: str, dtype) -> str:
    """The name of jaxlib's CPU LAPACK custom-call target for ``fn_base`` (e.g. ``"geev_ffi"``)
    at ``dtype`` (``lapack_sgeev_ffi``, ...). On first use, registers jaxlib's LAPACK targets
    with XLA's CPU backend and loads LAPACK (jaxlib takes it from SciPy), as JAX does; done
    lazily so that programs without LAPACK calls never pay for it."""
    prefix = _LAPACK_PREFIX.get(np.dtype(dtype))
    if prefix is None:
        raise NotImplementedError(f"LAPACK {fn_base} does not support dtype {np.dtype(dtype)}; "
                                  "use float32, float64, complex64 or complex128.")
    with _lapack_lock:
        if not _lapack_registered:
            from jaxlib import lapack  # noqa: PLC0415  (lazy: loads SciPy's LAPACK)
            for name, capsule, api_version in lapack.registrations()["cpu"]:
                xc.register_custom_call_target(name, capsule, platform="cpu",
                                               api_version=api_version)
            lapack._lapack.initialize()
            _lapack_registered.append(True)
    return f"lapack_{prefix}{fn_base}"


# --------------------------------------------------------------------------------------------
# Backends: the embedded CPU client, plus plugins (the CUDA PJRT plugin, see gpu.py) that
# register a factory under their platform names.
# --------------------------------------------------------------------------------------------

_backend_factories: dict[str, tuple[str, Any, Any]] = {}  # alias -> (name, factory, is_default)
_default_backend_name: list[str] = []


def register_backend_factory(names: Sequence[str], factory, is_default) -> None:
    """Make ``get_backend(name)`` create a backend with ``factory()`` for each of ``names``
    (the first is the canonical one); ``is_default()`` says whether it should be the default."""
    for alias in names:
        _backend_factories[alias.lower()] = (names[0].lower(), factory, is_default)


def _check_num_cpu_devices_change(name: str, value) -> None:
    if name == "jax_num_cpu_devices" and "cpu" in _backends:
        raise RuntimeError(
            "jax_num_cpu_devices config should be updated before backends are initialized "
            "i.e. before any JAX operation is executed. You should initialize this config "
            "immediately after `import jax`.")


config.on_change(_check_num_cpu_devices_change)


def _make_cpu_backend() -> Backend:
    return Backend(xc.make_cpu_client(num_devices=_num_cpu_devices()))


def get_backend(platform: str | None = None) -> Backend:
    """The backend for ``platform`` ("cpu", or a registered plugin such as "gpu"), created on
    first use; the default backend when ``platform`` is None."""
    name = (platform or default_backend()).lower()
    backend = _backends.get(name)
    if backend is not None:
        return backend
    if name == "cpu":
        canonical, factory = "cpu", _make_cpu_backend
    elif name in _backend_factories:
        canonical, factory, _ = _backend_factories[name]
    else:
        known = sorted({"cpu", *_backend_factories})
        raise RuntimeError(f"Unknown backend {platform or name!r}. Available backends: {known}. "
                           "For NVIDIA GPUs install the CUDA plugin: pip install 'jaxkit[cuda13]' "
                           "(or 'jaxkit[cuda12]' for CUDA 12).")
    with _lock:
        backend = _backends.get(canonical)
        if backend is None:
            backend = _backends[canonical] = factory()
        _backends[name] = backend
    return backend


def default_backend() -> str:
    """"cpu", or a registered plugin platform that asks to be the default (decided once);
    the ``jax_platform_name`` option, when set, names it instead (as in JAX)."""
    forced = config.jax_platform_name
    if forced:
        forced = str(forced).lower()
        return _backend_factories[forced][0] if forced in _backend_factories else forced
    if not _default_backend_name:
        chosen = "cpu"
        for alias, (canonical, _, is_default) in list(_backend_factories.items()):
            if alias == canonical and is_default():
                chosen = canonical
                break
        _default_backend_name.append(chosen)
    return _default_backend_name[0]
