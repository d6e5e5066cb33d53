"""Eager results of the primitives whose parameter types their result's layout.

``iota``, ``broadcast_in_dim`` and ``reshape`` (``sharding``) and ``dot_general``
(``out_sharding``) take the layout an ``out_sharding=`` argument asks for as a parameter
(over Explicit mesh axes the result's type says it). Under ``jit`` the partitioner lays the
result out as its type says; run eagerly, the one-primitive program runs on one device, so
the result is then laid out as asked, as JAX's eager results are (``x.sharding.spec``
spelled for the result's rank: ``P('x', None)``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import core
from jaxkit.lax.sharding import reshard_leaves
from jaxkit.runtime.sharding import NamedSharding, PartitionSpec

__all__ = ["lay_out_eager_results"]


def _for_rank(s: NamedSharding, ndim: int) -> NamedSharding:
    parts = tuple(s.spec.partitions)
    if len(parts) >= ndim:
        return s
    return s.update(spec=PartitionSpec(*parts, *[None] * (ndim - len(parts))))


def lay_out_eager_results(prim: core.Primitive) -> None:
    """Make ``prim``'s eager impl lay its result out as its ``sharding`` (or
    ``out_sharding``) parameter says, when given."""
    impl: Callable[..., Any] = prim.impl

    def laid_out(*args, **params):
        out = impl(*args, **params)
        sharding = params.get("sharding", params.get("out_sharding"))
        if sharding is None or sharding.spec.unreduced or sharding.spec.reduced:
            return out  # partial sums: only a partitioned program decides who holds which
        return reshard_leaves(out, _for_rank(sharding, np.ndim(out)))

    prim.def_impl(laid_out)
