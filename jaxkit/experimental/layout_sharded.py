"""Arrays over several devices whose shards lie in memory in another order than row-major.

``device_put(x, Format(Layout((1, 0)), NamedSharding(mesh, spec)))`` gives, as in JAX, an
array whose every shard is a buffer laid out as asked: its ``format`` and the ``format`` of
its ``addressable_shards``' data report that layout. Each shard is laid out on its own device
by ``layout_arrays``' one-device identity program (a shard is a one-device array), as JAX
lays out each shard's buffer through PjRt.

jaxkit compiles its partitioned programs for row-major parameters, so such an array is a
plain ``ShardedArray`` over the row-major global buffer (what computations read and what its
value is fetched from, so every path that takes a ``ShardedArray`` takes it unchanged) whose
``_laid`` slot holds the order and the laid-out shards that ``format`` and
``addressable_shards`` describe. A computation's result is row-major, as JAX's result of a
program compiled with the default layouts.
"""
from __future__ import annotations


from jaxkit.experimental import layout_arrays
from jaxkit.runtime import layouts
from jaxkit.runtime.sharded_array import ShardedArray

__all__ = ["buffer_layout", "relayout_sharded"]

MajorToMinor = tuple[int, ...]


def _row_major(x: ShardedArray) -> ShardedArray:
    """``x`` without laid-out shards (``x`` itself when it has none)."""
    if x._laid is None:
        return x
    return ShardedArray(x._buf, x.aval, x._sharding)


def relayout_sharded(x: ShardedArray, major_to_minor: MajorToMinor) -> ShardedArray:
    """``x`` with every shard's buffer laid out ``major_to_minor``: ``x`` itself when it
    already is, else an array over the same row-major global buffer whose shards are laid
    out so (committed, as every array over several devices)."""
    order = tuple(major_to_minor)
    if (x._laid[0] if x._laid is not None else tuple(range(x.ndim))) == order:
        return x
    if order == tuple(range(x.ndim)):
        return _row_major(x)
    if not x.is_fully_addressable:
        raise NotImplementedError(
            f"a layout other than row-major for an array over devices of several processes "
            f"(sharding {x.sharding}): jaxkit lays out the shards of this process only; "
            f"keep the row-major layout.")
    out = ShardedArray(x._buf, x.aval, x._sharding)
    out._laid = (order, [layout_arrays.relayout(shard.data, order, commit=True)
                         for shard in _row_major(x).addressable_shards])
    return out


def buffer_layout(x: ShardedArray) -> layouts.LayoutTuple | None:
    """The layout PjRt reports for the shards ``x.format`` describes."""
    if x._laid is not None:
        return layout_arrays.buffer_layout(x._laid[1][0])
    return layouts.buffer_layout(x._buf)
