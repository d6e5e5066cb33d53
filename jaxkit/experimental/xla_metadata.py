"""``jax.experimental.xla_metadata``: attach XLA frontend attributes to ops.

Two forms, as in JAX:

- ``set_xla_metadata(x, **kv)`` binds ``xla_metadata_value`` (an identity primitive) on each
  leaf of ``x``; its lowering adds ``kv`` to the ``mhlo.frontend_attributes`` of the op that
  produced the leaf.
- ``with set_xla_metadata(**kv):`` (or ``@set_xla_metadata(**kv)``) tags every op lowered
  from the equations traced inside. The attributes ride on the equations' name stack (a
  ``source_info.Metadata`` entry, printed as nothing), so they follow equations into nested
  jaxprs; the lowering adds them to the ops that make each equation's results.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from functools import partial
from typing import Any

from jaxkit import core, source_info, tree_util
from jaxkit._config import config
from jaxkit.interpreters import ad, batching, dispatch, mlir

__all__ = ["set_xla_metadata", "xla_metadata_value_p"]


@contextlib.contextmanager
def metadata_scope(names: source_info.NameStack) -> Iterator[None]:
    """The block runs under ``names``, a name stack with ``compute_on`` / ``set_xla_metadata``
    entries, which also key jit's caches there (as in JAX, whose trace context holds them):
    a function jitted outside the block is traced and lowered again inside it."""
    entries = tuple(e for e in names.stack if type(e) is source_info.Metadata)
    try:
        hash(entries)
    except TypeError:  # an unhashable attribute value: keyed by its text
        entries = (repr(entries),)
    with config.trace_metadata_block(entries), source_info.name_stack_context(names):
        yield


class _Wrapped:
    """A function decorated with the context form: calls (and calls of its callable
    attributes, such as a jitted function's ``lower``) run inside the context."""

    def __init__(self, f, ctx: XlaMetadataContextManager):
        self._f = f
        self._ctx = ctx
        functools.update_wrapper(self, f)

    def __call__(self, *args, **kwargs):
        with self._ctx:
            return self._f(*args, **kwargs)

    def __getattr__(self, name: str):
        attr = getattr(self._f, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        def run_inside(*args, **kwargs):
            with self._ctx:
                return attr(*args, **kwargs)
        return run_inside


class XlaMetadataContextManager:
    """``with set_xla_metadata(**kv):``: the equations traced inside carry ``kv``."""

    __slots__ = ("updates", "_scope")

    def __init__(self, updates: dict[str, Any]):
        self.updates = updates
        self._scope = None

    def __enter__(self) -> None:
        if not self.updates:
            return
        names = source_info.current_name_stack().with_metadata(tuple(self.updates.items()))
        self._scope = metadata_scope(names)
        self._scope.__enter__()

    def __exit__(self, *exc) -> None:
        if self._scope is not None:
            scope, self._scope = self._scope, None
            scope.__exit__(*exc)

    def __call__(self, f):
        return _Wrapped(f, self)


def set_xla_metadata(x: Any = None, **kwargs: Any) -> Any:
    """With ``x``: ``x`` unchanged, its leaves tagged with the frontend attributes
    ``kwargs``. Without: a context manager (and decorator) tagging every op inside."""
    if x is None:
        return XlaMetadataContextManager(kwargs)
    kvs = tuple(sorted(kwargs.items()))
    return tree_util.tree_map(lambda v: xla_metadata_value_p.bind(v, xla_metadata_kvs=kvs), x)


xla_metadata_value_p = core.Primitive("xla_metadata_value")


xla_metadata_value_p.def_impl(partial(dispatch.apply_primitive, xla_metadata_value_p))
xla_metadata_value_p.def_abstract_eval(lambda aval, *, xla_metadata_kvs: aval)
batching.defvectorized(xla_metadata_value_p)
# As in JAX the cotangent passes through untagged: gradient ops carry no metadata.
ad.deflinear2(xla_metadata_value_p, lambda ct, _, **params: [ct])


def _lowering(ctx: mlir.LoweringRuleContext, x, *, xla_metadata_kvs):
    mlir.set_frontend_attributes(x, dict(xla_metadata_kvs))
    return x


mlir.register_lowering(xla_metadata_value_p, _lowering)
