"""Semaphores, scoped allocations and device ids of Pallas kernels, in interpret mode.

jaxkit interprets a kernel as one XLA program per device (``interpret.py``): every device of a
``shard_map`` runs its grid loop in lockstep, the operations of one kernel instance in program
order. In that model, as in JAX's ``interpret=True`` (its HLO interpreter), a semaphore is an
``int32`` ref (memory space ``SEMAPHORE``): ``semaphore_signal`` adds to it, ``semaphore_wait``
subtracts from it (it never blocks: whatever it waits for was done, in lockstep, by the time
the program reaches it) and ``semaphore_read`` reads it.

An operation on another device (``device_id=...``) is a collective over the mesh axes bound
around the kernel: each device gathers what every device sends (``all_gather``) and keeps what
was addressed to it (a signal adds to the receiver's own view of the semaphore; a copy writes
the window the sender names, see ``dma.py``). Every device must therefore execute it, as in
JAX's HLO interpreter: a remote signal or copy under a ``pl.when`` whose condition may differ
between devices is refused before the kernel runs (``uniformity.py``).
"""
from __future__ import annotations

import contextlib
import contextvars
import enum
import functools
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import numpy as np

from jaxkit import core, lax, tree_util
from jaxkit import numpy as jnp
from jaxkit.experimental.pallas.core import MemoryRef
from jaxkit.experimental.pallas.interpret import uninitialized_value
from jaxkit.interpreters.state import is_ref_aval
from jaxkit.lax import parallel
from jaxkit.ref import new_ref

__all__ = ["DeviceIdType", "barrier_semaphore", "core_axes", "device_target", "from_device",
           "get_global", "new_semaphore", "run_scoped", "semaphore", "semaphore_read",
           "semaphore_signal", "semaphore_wait", "senders", "with_scoped", "delay"]


class DeviceIdType(enum.Enum):
    """How a ``device_id`` names a device: by its coordinates in the mesh (``MESH``: a tuple
    with one index per mesh axis, or a dict ``{axis: index}`` keeping the other axes), or by
    its position among all the mesh's devices (``LOGICAL``)."""

    MESH = "mesh"
    LOGICAL = "logical"


class semaphore_dtype:  # noqa: N801  (JAX's names for the semaphore element types)
    """The element type of semaphores (interpret mode holds them as ``int32``)."""


class semaphore(semaphore_dtype):  # noqa: N801
    """A regular semaphore's element type."""


class barrier_semaphore(semaphore_dtype):  # noqa: N801
    """The barrier semaphore's element type (``pltpu.get_barrier_semaphore``)."""


_SEM = np.dtype(np.int32)  # the dtype of a semaphore's count in interpret mode


def new_semaphore(shape: tuple[int, ...] = (), memory_space: Any = None) -> Any:
    """A fresh array of semaphores (counts 0) in the kernel being traced."""
    return new_ref(lax.full(tuple(shape), 0, _SEM), memory_space=memory_space)


# --------------------------------------------------------------------------------------------
# Semaphore operations
# --------------------------------------------------------------------------------------------


def _check_sem(sem: Any, what: str) -> None:
    aval = core.get_aval(getattr(sem, "ref", sem))  # a view (sem.at[i]) checks its ref
    if not is_ref_aval(aval):
        raise ValueError(f"Cannot {what} on a non-semaphore Ref: {aval}")
    if tuple(sem.shape):
        raise ValueError(f"Cannot {what} on a non-()-shaped semaphore: {tuple(sem.shape)}")
    if np.dtype(aval.dtype) != _SEM:
        raise ValueError(f"Must {what} semaphores of the following types: {{semaphore, "
                         f"barrier_semaphore}} (pltpu.SemaphoreType.*). Got {aval.dtype}.")


def _int32(x: Any) -> Any:
    # as JAX: counts and device ids are converted to int32, whatever their type
    return jnp.asarray(x, dtype=_SEM)


def semaphore_read(sem_or_view: Any) -> Any:
    """The current count of a semaphore (an ``int32`` scalar)."""
    _check_sem(sem_or_view, "read")
    return sem_or_view[...]


def semaphore_signal(sem_or_view: Any, inc: Any = 1, *, device_id: Any = None,
                     device_id_type: DeviceIdType = DeviceIdType.MESH,
                     core_index: Any = None) -> None:
    """Add ``inc`` to a semaphore: this device's, or with ``device_id`` that of the device it
    names (every device of the mesh must then signal, see the module docstring)."""
    _check_sem(sem_or_view, "signal")
    inc = _int32(inc)
    if core_index is not None:
        raise NotImplementedError("semaphore_signal with core_index is not implemented in "
                                  "jaxkit's interpret mode (one core per device)")
    if device_id is not None:
        names, target, me = device_target(device_id, device_id_type)
        targets, incs = _gather(names, target), _gather(names, inc)
        inc = jnp.sum(jnp.where(targets == me, incs, 0)).astype(_SEM)
    sem_or_view[...] = sem_or_view[...] + inc


def semaphore_wait(sem_or_view: Any, value: Any = 1, *, decrement: bool = True) -> None:
    """Wait until a semaphore reaches ``value``, then (with ``decrement``) subtract it. In
    lockstep interpretation what it waits for has happened: it only subtracts."""
    _check_sem(sem_or_view, "wait")
    value = _int32(value)
    if decrement:
        sem_or_view[...] = sem_or_view[...] - value


def delay(nanos: Any) -> None:
    """Sleep ``nanos`` nanoseconds on a TPU. Interpreted kernels run in lockstep, where a
    delay cannot change what they compute, so it does nothing here."""
    jnp.asarray(nanos)


# --------------------------------------------------------------------------------------------
# Device ids and delivery between devices
# --------------------------------------------------------------------------------------------


# The axes of the pl.core_map whose body is being traced: bound like mesh axes (so that
# lax.axis_index works), but run one core after another, not as devices.
_core_axes: contextvars.ContextVar[tuple] = contextvars.ContextVar("pallas_core_axes",
                                                                  default=())


@contextlib.contextmanager
def core_axes(axes: Sequence[tuple[Any, int]]) -> Iterator[None]:
    """Within: a per-core body over the core mesh axes ``(name, size)`` is traced."""
    token = _core_axes.set(_core_axes.get() + tuple(n for n, _ in axes))
    try:
        with parallel.extend_axis_env_nd(axes):
            yield
    finally:
        _core_axes.reset(token)


def _mesh_axes() -> list[tuple[Any, int]]:
    # The device mesh axes bound around the kernel (shard_map's manual axes, pmap's axis).
    cores = _core_axes.get()
    return [(n, s) for n, s in parallel._axis_env.frames if n not in cores]


def _linear(indices, sizes) -> Any:
    out = np.int32(0)
    for i, s in zip(indices, sizes):
        out = out * np.int32(s) + _int32(i)
    return out


def device_target(device_id: Any, device_id_type: DeviceIdType) -> tuple[tuple, Any, Any]:
    """``(mesh axis names, target device's position, this device's position)`` for a remote
    operation; positions are row-major over the named axes."""
    axes = _mesh_axes()
    names = tuple(n for n, _ in axes)
    sizes = [s for _, s in axes]
    mine = [parallel.axis_index(n) for n in names]
    me = _linear(mine, sizes)
    if isinstance(device_id, dict):
        if any(k in _core_axes.get() for k in device_id):
            raise NotImplementedError(
                "a remote copy or signal between the cores of a pl.core_map is not "
                "implemented in jaxkit's interpret mode (its cores run one after another); "
                "address other devices only")
        if device_id_type is not DeviceIdType.MESH:
            raise ValueError("`device_id_type` must be MESH if `device_id` is a dict, got: "
                             f"device_id_type = {device_id_type}.")
        unknown = [k for k in device_id if k not in names]
        if unknown:
            raise ValueError(f"device_id names axes {unknown} that are not mesh axes around "
                             f"the kernel (those are {list(names)}).")
        coords = [device_id.get(n, i) for n, i in zip(names, mine)]
        return names, _linear(coords, sizes), me
    if device_id_type is DeviceIdType.LOGICAL:
        if isinstance(device_id, (tuple, list)):
            raise ValueError("LOGICAL device_id_type does not support device_id as a tuple "
                             "or dict.")
        return names, _int32(device_id), me
    coords = tuple(device_id) if isinstance(device_id, (tuple, list)) else (device_id,)
    if len(coords) != len(names):
        raise ValueError(f"device_id ({len(coords)}) and mesh ({len(names)}) must have same "
                         "length.")
    return names, _linear(coords, sizes), me


def _gather(names: tuple, x: Any) -> Any:
    # what every device of the mesh holds, stacked in row-major device order
    x = jnp.asarray(x)
    if not names:
        return x[None]
    return lax.all_gather(x, names)


def senders(names: tuple, target: Any, me: Any) -> tuple[Any, Any]:
    """When each device addresses the device ``target``: the position of the first device
    addressing ``me`` (0 if none) and how many do."""
    hits = _gather(names, target) == me
    return jnp.argmax(hits), jnp.sum(hits.astype(_SEM))


def from_device(names: tuple, index: Any, x: Any) -> Any:
    """The value ``x`` has on the device at position ``index`` of the mesh."""
    return _gather(names, x)[index]


# --------------------------------------------------------------------------------------------
# Scoped and global allocations
# --------------------------------------------------------------------------------------------


def _allocate(t: Any) -> Any:
    ref_type = getattr(t, "memory_ref", None)
    if ref_type is not None:  # pltpu.SemaphoreType.DMA etc. (one semaphore)
        t = ref_type()
    if not isinstance(t, MemoryRef):
        raise TypeError(f"pl.run_scoped: cannot allocate {t!r}; give buffer types such as "
                        "pltpu.VMEM(shape, dtype) or pltpu.SemaphoreType.DMA((n,)).")
    shape, dtype = tuple(t.shape), np.dtype(t.dtype)
    if getattr(t.memory_space, "name", None) == "SEMAPHORE":
        return new_semaphore(shape, t.memory_space)
    return new_ref(uninitialized_value(shape, dtype), memory_space=t.memory_space)


def run_scoped(f: Callable[..., Any], *types: Any,
               collective_axes: Hashable | tuple[Hashable, ...] = (), **kw_types: Any) -> Any:
    """Call ``f`` with buffers allocated for it (one per type in ``types``/``kw_types``,
    e.g. ``pltpu.VMEM((8, 128), jnp.float32)``, ``pltpu.SemaphoreType.DMA``) that live only
    during the call; returns what ``f`` returns. Buffers start uninitialized (NaN for floats),
    semaphores at 0."""
    if collective_axes not in ((), None):
        raise NotImplementedError("run_scoped discharge does not support collective_axes "
                                  "yet.")
    leaf = lambda x: isinstance(x, MemoryRef) or hasattr(x, "memory_ref")  # noqa: E731
    refs, kw_refs = tree_util.tree_map(_allocate, (types, kw_types), is_leaf=leaf)
    return f(*refs, **kw_refs)


def with_scoped(*types: Any, collective_axes: Hashable | tuple[Hashable, ...] = (),
                **kw_types: Any) -> Callable:
    """Decorator: the function runs under ``run_scoped`` with these allocations, passed
    after the arguments it is called with."""
    def decorator(f):
        def inner(*args):
            return run_scoped(functools.partial(f, *args), *types,
                              collective_axes=collective_axes, **kw_types)
        return inner
    return decorator


def get_global(what: Any) -> Any:
    """A buffer persisting across kernel invocations (Mosaic only): JAX's interpreter has no
    discharge for it, neither has jaxkit's."""
    raise NotImplementedError("get_global discharge is not supported in interpret mode.")
