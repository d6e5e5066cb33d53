"""``jax.experimental.shard_map``: the older home of ``shard_map``, deprecated (as in JAX
0.10.2, reading ``shard_map`` here warns). Its ``check_rep`` is ``jax.shard_map``'s
``check_vma``; it is manual over all the mesh's axes."""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from jaxkit.transforms import shard_map as _shard_map_mod

__all__ = ["shard_map"]  # noqa: F822  (served by __getattr__, which warns)

_MESSAGE = "jax.experimental.shard_map is deprecated in v0.8.0. Used jax.shard_map instead."


def _legacy_shard_map(f: Callable, mesh: Any, in_specs: Any, out_specs: Any,
                      check_rep: bool = True) -> Callable:
    """Please use ``jax.shard_map``: ``check_rep`` is its ``check_vma``."""
    return _shard_map_mod.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                    check_vma=check_rep)


def __getattr__(name: str) -> Any:
    if name == "shard_map":
        warnings.warn(_MESSAGE, DeprecationWarning, stacklevel=2)
        return _legacy_shard_map
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
