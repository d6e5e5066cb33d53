"""Devices and placement: ``devices``, ``local_devices``, ``device_count``, ``default_backend``,
the process index and count, ``device_put`` (onto a device, a sharding or a pytree of them),
``device_get`` and ``block_until_ready``, as JAX's. ``jaxkit.api`` re-exports them.
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import core, distributed, lax, tree_util
from jaxkit.api_namespaces import MemorySpace
from jaxkit.lax.sharding import constrain, resolve_sharding
from jaxkit.runtime import pjrt
from jaxkit.runtime.array import Array, device_put_value
from jaxkit.runtime.sharding import GSPMDSharding, NamedSharding, PartitionSpec
from jaxkit.runtime.sharded_array import ShardedArray
from jaxkit.transforms.jit import jit
from jaxkit.transforms.spmd import check_annotation

__all__ = ["block_until_ready", "default_backend", "device_count", "device_get", "device_put",
           "devices", "local_device_count", "local_devices", "process_count", "process_index"]

def devices(backend: str | None = None) -> list:
    """The devices of ``backend`` (default: the CPU), like ``jax.devices()``."""
    return pjrt.devices(backend)


def local_devices(process_index: int | None = None, backend: str | None = None,
                  host_id: int | None = None) -> list:
    """The devices of process ``process_index`` (default: this process) on ``backend``
    (``host_id`` is its old name)."""
    if host_id is not None:
        warnings.warn("The argument to jax.local_devices has been renamed from `host_id` to "
                      "`process_index`. This alias will eventually be removed; please update "
                      "your code.", stacklevel=2)
        process_index = host_id
    if process_index is None:
        return pjrt.local_devices(backend)
    if not 0 <= process_index < process_count(backend):
        raise ValueError(f"Unknown process_index {process_index}")
    return [d for d in pjrt.devices(backend) if d.process_index == process_index]


def device_count(backend: str | None = None) -> int:
    return len(pjrt.devices(backend))


def local_device_count(backend: str | None = None) -> int:
    return len(pjrt.local_devices(backend))


def default_backend() -> str:
    return pjrt.default_backend()


def process_index(backend: str | None = None) -> int:
    """This process's index among the processes of ``jaxkit.distributed.initialize``
    (``backend``: one of this process's, checked)."""
    pjrt.get_backend(backend)
    return distributed.process_index()


def process_count(backend: str | None = None) -> int:
    """The number of processes (1 unless ``jaxkit.distributed.initialize`` was called)."""
    pjrt.get_backend(backend)
    return distributed.process_count()


# The memory kind of a device that each memory space names (Any names none).
_SPACE_KINDS = {MemorySpace.Device: "device", MemorySpace.Host: "pinned_host"}

# Types that stand for a placement in device_put, with the function that puts one leaf so:
# layout.Format registers itself (it lives in a layer above this one).
device_put_forms: dict[type, Callable[[Any, Any], Any]] = {}


def _check_device_put_leaf(x) -> None:
    """JAX's errors for a leaf that is no array (a string; an object without a dtype)."""
    try:
        core.get_aval(x)
    except TypeError:
        if isinstance(x, str):
            raise TypeError(f"Argument '{x}' of type {type(x)} is not a valid JAX type"
                            ) from None
        raise TypeError(f"Cannot interpret value of type {type(x)} as an abstract array; it "
                        "does not have a dtype attribute") from None


def device_put(x: Any, device=None, *, src=None, donate: bool = False,
               may_alias: bool | None = None):
    """Place every array of the pytree ``x`` on ``device`` (default: the first device), or
    lay it out as a sharding says (one for all leaves, or a pytree prefix of ``x``).

    ``may_alias=False`` always copies; ``donate=True`` lets the input's buffer be reused.
    Inside a trace the placement is a ``device_put`` equation of the traced program."""
    if donate and may_alias:
        raise ValueError("may_alias and donate cannot both be True")
    if type(device) in device_put_forms:
        put = device_put_forms[type(device)]
        return tree_util.tree_map(lambda leaf: put(leaf, device), x)
    if isinstance(device, MemorySpace):
        return tree_util.tree_map(lambda leaf: _put_in_space(leaf, device), x)
    if isinstance(device, (NamedSharding, PartitionSpec)) or not (
            device is None or isinstance(device, (pjrt.Device, pjrt.Sharding))):
        return _device_put_sharded(x, device)
    copy = (lax.ArrayCopySemantics.DONATE_INPUT if donate else
            lax.ArrayCopySemantics.ALWAYS_COPY if may_alias is False else
            lax.ArrayCopySemantics.REUSE_INPUT)
    leaves, treedef = tree_util.tree_flatten(x)
    if any(isinstance(leaf, core.Tracer) for leaf in leaves):
        n = len(leaves)
        outs = lax.device_put_p.bind(*leaves, devices=(device,) * n, srcs=(src,) * n,
                                     copy_semantics=(copy,) * n)
        return tree_util.tree_unflatten(treedef, outs)
    kind = None
    if isinstance(device, pjrt.Sharding):
        device, kind = device._device, device.memory_kind
    outs = []
    for leaf in leaves:
        _check_device_put_leaf(leaf)
        moved = device_put_value(leaf, device, memory_kind=kind)
        if moved is leaf and copy != lax.ArrayCopySemantics.REUSE_INPUT:
            moved = lax.copy(leaf)  # a fresh buffer, as may_alias=False / donate promise
        outs.append(moved)
    return tree_util.tree_unflatten(treedef, outs)


def _device_put_sharded(x: Any, shardings: Any):
    is_leaf = lambda s: isinstance(s, (NamedSharding, PartitionSpec, pjrt.Sharding,  # noqa
                                       pjrt.Device, *device_put_forms)) or s is None
    if not is_leaf(shardings):
        try:
            shardings = tree_util.tree_broadcast(shardings, x, is_leaf)
        except (ValueError, TypeError):
            raise TypeError(f"device_put expects a device, a sharding or a pytree prefix of "
                            f"the value of them, got {shardings!r}") from None
        per_leaf = tree_util.tree_leaves(shardings, is_leaf=is_leaf)
    else:
        per_leaf = [shardings] * len(tree_util.tree_leaves(x))
    leaves, treedef = tree_util.tree_flatten(x)
    outs = []
    for leaf, s in zip(leaves, per_leaf):
        if isinstance(s, GSPMDSharding) and getattr(s, "named", None) is not None:
            s = s.named  # (an executable's report of a layout XLA chose)
        if type(s) in device_put_forms:  # a Format in a pytree of placements
            outs.append(device_put_forms[type(s)](leaf, s))
            continue
        _refuse_moving_unreduced(leaf, s)
        if isinstance(leaf, core.Tracer) and isinstance(s, NamedSharding) and \
                _moves_memory(leaf, s.memory_kind):
            outs.append(_staged_move(leaf, s))
            continue
        if isinstance(s, (NamedSharding, PartitionSpec)) and not isinstance(
                leaf, core.Tracer) and (s.spec if isinstance(s, NamedSharding) else s).unreduced:
            outs.append(_reshard(resolve_sharding(s, leaf, "device_put"))(leaf))  # XLA splits
        elif isinstance(s, NamedSharding) and isinstance(leaf, ShardedArray) and \
                not leaf.is_fully_addressable:
            # No process can read the whole value: XLA moves the pieces between devices.
            outs.append(_reshard(s)(leaf))
        elif isinstance(s, (NamedSharding, PartitionSpec)):
            if isinstance(s, NamedSharding):
                check_annotation(s, core.get_aval(leaf).shape, "device_put args")
            outs.append(constrain(leaf, s, api="device_put"))  # over any mesh axes, as JAX's
        elif isinstance(s, pjrt.Sharding):
            outs.append(device_put(leaf, s._device))
        elif s is None or isinstance(s, pjrt.Device):
            outs.append(device_put(leaf, s))
        else:
            raise TypeError(f"device_put expects a device or a sharding, got {s!r}")
    return tree_util.tree_unflatten(treedef, outs)


def _put_in_space(leaf: Any, space: MemorySpace) -> Any:
    """``leaf`` moved to the memory space ``space`` of the device(s) it is on (a host value:
    of the default device), laid out as it is."""
    if space not in _SPACE_KINDS:
        raise ValueError(f"device_put to {space!r} names no memory to move the value to; use "
                         "jax.memory.Space.Device or jax.memory.Space.Host")
    if isinstance(leaf, core.Tracer):  # typed in that space; placed by the program's results
        return lax.device_put_p.bind(leaf, devices=(space,), srcs=(None,),
                                     copy_semantics=(lax.ArrayCopySemantics.REUSE_INPUT,))[0]
    held = getattr(leaf, "sharding", None)
    if held is None:
        held = pjrt.current_default_sharding()
    if not hasattr(held, "with_memory_kind"):
        raise NotImplementedError(f"device_put to {space!r} of an array laid out as {held!r} "
                                  "is not implemented; device_put it to a NamedSharding with "
                                  "a memory_kind instead")
    return device_put(leaf, held.with_memory_kind(_SPACE_KINDS[space]))


def _moves_memory(leaf: Any, kind: str | None) -> bool:
    """Whether putting the traced ``leaf`` in memory kind ``kind`` moves it to another
    memory space (or names host memory): then the move is a ``device_put`` equation."""
    space = core.mem_kind_to_space(kind)
    return space is not core.MemorySpace.Device or \
        core.get_aval(leaf).memory_space is not space


def _staged_move(leaf: Any, s: NamedSharding) -> Any:
    """A ``device_put`` equation moving ``leaf`` to the memory of ``s``, as JAX stages it;
    over several devices the value is first laid out as ``s`` says (the move itself says
    only where it lives)."""
    if s.mesh.size > 1:
        leaf = constrain(leaf, s.with_memory_kind("device"))
        target: Any = core.mem_kind_to_space(s.memory_kind)
    else:
        target = s
    return lax.device_put_p.bind(leaf, devices=(target,), srcs=(None,),
                                 copy_semantics=(lax.ArrayCopySemantics.REUSE_INPUT,))[0]


def _refuse_moving_unreduced(leaf: Any, s: Any) -> None:
    """JAX's error for an array unreduced over mesh axes put anywhere but where it is: its
    devices hold summands, not slices, of the value (``reshard`` sums them)."""
    held = getattr(leaf, "sharding", None)
    if not (isinstance(leaf, ShardedArray) and isinstance(held, NamedSharding)
            and held.spec.unreduced):
        return
    target = (resolve_sharding(s, leaf, "device_put")
              if isinstance(s, (NamedSharding, PartitionSpec)) else s)
    if target != held:
        held.devices_indices_map(leaf.shape)  # raises JAX's NotImplementedError


@functools.lru_cache(maxsize=64)
def _reshard(sharding: NamedSharding) -> Callable:
    """A partitioned identity whose output is laid out as ``sharding`` (one per layout)."""
    return jit(lambda x: x, out_shardings=sharding)


def device_get(x: Any):
    """Fetch every array of the pytree ``x`` to NumPy (from any memory space)."""
    return tree_util.tree_map(lambda v: np.asarray(v) if isinstance(v, Array) else v, x)


def block_until_ready(x: Any):
    """Wait for every array in the pytree ``x``; return ``x``."""
    bufs = [leaf._buf for leaf in tree_util.tree_leaves(x) if isinstance(leaf, Array)]
    pjrt.block_until_ready_buffers(bufs)
    return x


def _to_device(self, device, *, stream=None):
    """A copy of the array on ``device`` (a ``Device`` or a ``Sharding``), committed there:
    the array API's ``to_device``; traced, a ``device_put`` equation."""
    if stream is not None:
        raise NotImplementedError("stream argument of array.to_device()")
    return device_put(self, device)


Array.to_device = core.Tracer.to_device = _to_device
