"""Top-level ``jax`` names that libraries test for or annotate with, which jaxkit's own
namespace does not define; the ``jax`` module of ``install_as_jax()`` falls back to them.

Flax NNX picks its mutable-reference type from ``jax.Ref``/``jax.new_ref``; jaxkit has no
mutable array references, so ``Ref`` has no instances and ``new_ref`` raises. ``typeof`` is the
abstract value of a value, as in JAX. jaxkit keeps no name stack for
profiler metadata, so ``named_scope``/``named_call`` only check their arguments. ``Device`` is
jaxlib's device class, which jaxkit's devices are."""
from __future__ import annotations

import contextlib

from jaxkit.core import get_aval
from jaxkit.runtime.pjrt import Device

__all__ = ["Device", "Ref", "named_call", "named_scope", "new_ref", "typeof"]


class Ref:
    """The type of JAX's mutable array references; jaxkit creates none."""


def new_ref(init_val, *args, **kwargs):
    raise NotImplementedError("jax.new_ref: jaxkit has no mutable array references")


def typeof(x):
    """The abstract value (shape, dtype, weak type) of ``x``."""
    return get_aval(x)


@contextlib.contextmanager
def named_scope(name: str):
    """Names the operations traced in the block, for profiles (no effect in jaxkit)."""
    if not isinstance(name, str):
        raise TypeError(f"named_scope name argument must be a string, got {name!r}")
    yield


def named_call(fun, *, name: str | None = None):
    """``fun`` under a named scope (no effect in jaxkit: returns ``fun``)."""
    return fun
