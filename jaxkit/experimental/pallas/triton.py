"""``jax.experimental.pallas.triton``: the GPU (Triton) flavour of Pallas kernels' memory
operations, which interpret mode runs on any backend: masked ``load``/``store`` (positions
outside the ref read ``other`` and are not written, as Triton's masks allow), ``atomic_*``
read-modify-writes, and ``dot``. The Triton lowering itself (a GPU compiler) is not part of
jaxkit.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.experimental.pallas.core import CompilerParams as _CompilerParamsBase
from jaxkit.experimental.pallas.interpret import uninitialized_value
from jaxkit.experimental.pallas.primitives import dot
from jaxkit.experimental.pallas.triton_ops import debug_barrier, elementwise_inline_asm
from jaxkit._ref_views import RefView

__all__ = ["CompilerParams", "approx_tanh", "atomic_add", "atomic_and", "atomic_cas",
           "atomic_max", "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor",
           "debug_barrier", "dot", "elementwise_inline_asm",
           "load", "max_contiguous", "store"]


@dataclasses.dataclass(frozen=True)
class CompilerParams(_CompilerParamsBase):
    """Triton compiler parameters (interpret mode ignores them)."""

    BACKEND = "triton"
    num_warps: int | None = None
    num_stages: int | None = None


def _window(x) -> tuple[Any, tuple]:
    if isinstance(x, RefView):
        return x.ref, x.dims
    return x, tuple((0, n) for n in x.shape)


def _padded_window(ref, dims):
    # Pad the ref's value past its end by the window's size, so a window running off the end
    # reads padding instead of being moved back to fit (lax.dynamic_slice's clamping).
    full = ref[...]
    sizes = [d[1] if isinstance(d, tuple) else 1 for d in dims]
    starts = [lax.convert_element_type(d[0] if isinstance(d, tuple) else d, np.int32)
              for d in dims]
    padded = lax.pad(full, uninitialized_value((), full.dtype), [(0, s, 0) for s in sizes])
    return full, padded, starts, sizes


def _view_shape(dims) -> tuple[int, ...]:
    return tuple(d[1] for d in dims if isinstance(d, tuple))


def load(ref: Any, *, mask: Any = None, other: Any = None, cache_modifier: str | None = None,
         eviction_policy: str | None = None, volatile: bool = False) -> Any:
    """Read ``ref`` (or a view ``ref.at[...]``); where ``mask`` is False the result is
    ``other`` (positions past the ref's end included)."""
    base, dims = _window(ref)
    _, padded, starts, sizes = _padded_window(base, dims)
    out = lax.dynamic_slice(padded, starts, sizes).reshape(_view_shape(dims))
    if mask is not None and other is not None:
        out = jnp.where(mask, out, other)
    return out


def store(ref: Any, val: Any, *, mask: Any = None, eviction_policy: str | None = None) -> None:
    """Write ``val`` into ``ref`` (or a view), only where ``mask`` is True."""
    base, dims = _window(ref)
    full, padded, starts, sizes = _padded_window(base, dims)
    shape = _view_shape(dims)
    val = jnp.broadcast_to(jnp.asarray(val, full.dtype), shape)
    if mask is not None:
        old = lax.dynamic_slice(padded, starts, sizes).reshape(shape)
        val = jnp.where(mask, val, old)
    padded = lax.dynamic_update_slice(padded, val.reshape(sizes), starts)
    base[...] = lax.slice(padded, (0,) * full.ndim, full.shape)


def _atomic(name: str, combine):
    def op(x_ref_or_view: Any, idx: Any, val: Any, *, mask: Any = None) -> Any:
        view = x_ref_or_view.at[idx] if idx != () else x_ref_or_view
        if mask is not None:
            raise NotImplementedError(f"{name} with a mask is not implemented in interpret "
                                      "mode (as in JAX)")
        old = view[...]
        view[...] = combine(old, jnp.asarray(val, old.dtype))
        return old
    op.__name__ = name
    op.__doc__ = f"Atomically update ``x_ref_or_view[idx]`` ({name}); returns the old value."
    return op


atomic_add = _atomic("atomic_add", lambda a, b: a + b)
atomic_max = _atomic("atomic_max", jnp.maximum)
atomic_min = _atomic("atomic_min", jnp.minimum)
atomic_and = _atomic("atomic_and", lambda a, b: a & b)
atomic_or = _atomic("atomic_or", lambda a, b: a | b)
atomic_xor = _atomic("atomic_xor", lambda a, b: a ^ b)
atomic_xchg = _atomic("atomic_xchg", lambda a, b: b)


def atomic_cas(ref: Any, cmp: Any, val: Any) -> Any:
    """Atomically set ``ref`` to ``val`` where it equals ``cmp``; returns the old value."""
    old = ref[...]
    ref[...] = jnp.where(old == cmp, val, old)
    return old


def approx_tanh(x: Any) -> Any:
    """``tanh`` (Triton computes an approximation; interpret mode the exact value)."""
    return jnp.tanh(x)


def max_contiguous(x: Any, values: Any) -> Any:
    """A compiler hint; the value itself."""
    return x
