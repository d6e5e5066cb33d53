"""jaxlib's transfer server: arrays moved between processes over the network (JAX's
``jax.experimental.transfer``, for cross-slice DCN transfers; it runs on CPU too).

A server offers arrays under a request id (``await_pull``); a peer connected to its address
pulls them by id, giving the shapes, dtypes and shardings it expects. jaxlib's C++ objects
do the work; this module hands them jaxlib's buffers and gives back jaxkit arrays.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jaxlib import _jax

from jaxkit import tree_util
from jaxkit.runtime import pjrt
from jaxkit.runtime.array import Array, wrap_buffers

__all__ = ["TransferConnection", "TransferServer", "make_error_array", "start_transfer_server"]


class _Spec:
    """What jaxlib's pull reads of each expected array: shape, dtype and sharding."""

    __slots__ = ("shape", "dtype", "sharding")

    def __init__(self, shape, dtype, sharding):
        self.shape, self.dtype, self.sharding = tuple(shape), dtype, sharding


def _sharding_of(x: Any):
    sharding = getattr(x, "sharding", None)
    if sharding is None:  # jaxkit's ShapeDtypeStruct has none: the default device
        device = pjrt.default_device()
        return pjrt.backend_of(device).shardings[device]
    if not isinstance(sharding, _jax.SingleDeviceSharding):
        raise NotImplementedError(
            f"transfer of arrays with sharding {sharding}: jaxkit passes single-device "
            "shardings to jaxlib's transfer server; pull each shard with its own device")
    return sharding


class TransferConnection:
    """A connection to one peer's transfer server."""

    def __init__(self, conn: Any):
        self._conn = conn

    def pull_flat(self, uuid: int, xs_flat: Sequence[Any], timeout: Any = None) -> list[Array]:
        """The arrays the peer offered under ``uuid``, shaped like ``xs_flat`` (objects with
        ``shape`` and ``dtype``, and optionally a single-device ``sharding``)."""
        specs = [_Spec(x.shape, x.dtype, _sharding_of(x)) for x in xs_flat]
        backend = next(iter(specs[0].sharding.device_set)).client
        if timeout is None:
            bufs = self._conn._pull_flat(uuid, backend, specs)
        else:
            bufs = self._conn._pull_flat(uuid, backend, specs, timeout=timeout)
        return wrap_buffers(bufs)

    def pull(self, uuid: int, xs: Any, timeout: Any = None) -> Any:
        """The pytree of arrays the peer offered under ``uuid``; ``xs`` is a pytree of
        ``ShapeDtypeStruct``s (or arrays) saying what to expect; ``timeout`` an absolute
        ``datetime.datetime``."""
        flat, tree = tree_util.tree_flatten(xs)
        if not flat:
            return xs
        return tree_util.tree_unflatten(tree, self.pull_flat(uuid, flat, timeout))


class TransferServer:
    """A transfer server of this process: offers arrays to peers and connects to theirs."""

    def __init__(self, server: Any):
        self._server = server

    def address(self) -> str:
        """The address peers connect to."""
        return self._server.address()

    def connect(self, address: str) -> TransferConnection:
        """A connection to the server at ``address``."""
        return TransferConnection(self._server.connect(address))

    def await_pull_flat(self, uuid: int, arrays: Sequence[Array], timeout: Any = None) -> None:
        """Offer ``arrays`` (jaxkit arrays) to be pulled once under ``uuid``."""
        bufs = [a._buf for a in arrays]
        if timeout is None:
            self._server._await_pull_flat(uuid, bufs)
        else:
            self._server._await_pull_flat(uuid, bufs, timeout=timeout)

    def await_pull(self, uuid: int, arrays: Any, timeout: Any = None) -> None:
        """Offer the pytree ``arrays`` to be pulled (once) by a peer under ``uuid``."""
        self.await_pull_flat(uuid, tree_util.tree_leaves(arrays), timeout)


def start_transfer_server(client: Any = None, address: str = "[::]:0",
                          transport_addresses: Sequence[str] = (),
                          max_num_parallel_copies: int = 8, transfer_size: int = 256 << 20,
                          supports_pinned_allocator: bool = False,
                          use_raw_buffers: bool = False) -> TransferServer:
    """Start a transfer server on ``client`` (a device's ``.client``; the default device's
    when None) listening at ``address``."""
    if client is None:
        client = pjrt.default_device().client
    return TransferServer(_jax.start_transfer_server(
        client, address, list(transport_addresses), max_num_parallel_copies, transfer_size,
        supports_pinned_allocator, use_raw_buffers))


def make_error_array(aval: Any, message: str) -> Array:
    """An array that holds an error instead of data: using it raises ``message``."""
    if not hasattr(_jax, "_make_error_array"):
        raise NotImplementedError("make_error_array: this jaxlib has no _make_error_array")
    sharding = _sharding_of(aval)
    backend = next(iter(sharding.device_set)).client
    return Array(_jax._make_error_array(backend, _Spec(aval.shape, aval.dtype, sharding),
                                        str(message)))
