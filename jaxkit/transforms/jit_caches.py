"""The caches of ``jit`` (``jit.py``): per function and set of jit options, the compiled
entries, the traces kept for calls under transformations and the fast path's plans, keyed, as
JAX's, on the values of the options in JAX's trace context. A global update of one of those
options sets the tables aside under the old values and brings back those of the new ones; a
thread's configuration block has tables of its own (``JitFunction._fun_cache``)."""
from __future__ import annotations

import weakref

from jaxkit._config import config, global_trace_context, trace_context_options
from jaxkit.transforms.cache_miss import CallSignature
from jaxkit.transforms.jit_dispatch import CallPlan
from jaxkit.transforms.stages import Compiled


class _FunCache:
    """The compiled entries (one ``Compiled`` per call signature), the traces kept for calls
    under transformations, and the fast-path plans of one function under one set of jit
    options (shared by every ``jit(f, ...)`` of the same ``f`` and options)."""

    __slots__ = ("entries", "traces", "fast", "partitioned", "by_config", "__weakref__")

    def __init__(self):
        self.entries: dict[CallSignature, Compiled] = {}
        self.traces: dict[CallSignature, tuple] = {}
        self.fast: dict[tuple, CallPlan] = {}
        # (signature, input layouts) -> Compiled, for calls partitioned over a mesh
        self.partitioned: dict[tuple, Compiled] = {}
        # global trace context -> the four tables above, kept while another one is in force
        self.by_config: dict[tuple, tuple[dict, ...]] = {}

    def _tables(self) -> tuple[dict, ...]:
        return self.entries, self.traces, self.fast, self.partitioned

    def clear(self) -> None:
        for table in self._tables():
            table.clear()
        self.by_config.clear()

    def switch_config(self, old: tuple, new: tuple, source: dict | None = None) -> None:
        """The global configuration went from ``old`` to ``new``: keep what was cached under
        ``old`` and bring back what ``new`` had (or what ``source``, another cache's
        ``by_config``, has for it), as JAX's caches keyed on the configuration (setting an
        option back traces nothing again). The tables stay the same objects: the dispatcher
        holds ``fast``."""
        tables = self._tables()
        if any(tables):
            self.by_config[old] = tuple(dict(t) for t in tables)
        saved = self.by_config.pop(new, None) if source is None else source.get(new)
        for i, table in enumerate(tables):
            table.clear()
            if saved is not None:
                table.update(saved[i])


# fun -> {options: _FunCache}; weak so that functions can be collected.
_fun_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_all_fun_caches: weakref.WeakSet = weakref.WeakSet()


_global_context = [global_trace_context()]  # the one the caches' tables hold


def _clear_on_config_change(name, value):
    # JAX keys its jit caches on the values of the options of its trace context (x64, the
    # default matmul precision, rank and dtype promotion, ...): a new global value of one
    # traces again, and going back to an earlier one finds its traces. The fast path also
    # skips the disable_jit, debug_nans and no_execution checks of the slow path, which adds
    # no plan while they are on.
    if name not in trace_context_options:
        return
    old, new = _global_context[0], global_trace_context()
    _global_context[0] = new
    for cache in list(_all_fun_caches):
        if isinstance(cache, _FunCache):
            cache.switch_config(old, new)
        else:  # a registered backend cache: it may hold what the old values made
            cache.clear()


config.on_change(_clear_on_config_change)
