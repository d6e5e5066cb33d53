"""The caches of ``jit`` (``jit.py``): per function and set of jit options, the compiled
entries, the traces kept for calls under transformations and the fast path's plans, keyed, as
JAX's, on the values of the options in JAX's trace context. A global update of one of those
options sets the tables aside under the old values and brings back those of the new ones; a
thread's configuration block has tables of its own (``JitFunction._fun_cache``).

The compiled entries of all functions together are bounded, as JAX's jit caches are: past
``JAXKIT_JIT_CACHE_SIZE`` (default 4096) the least recently compiled or used goes. Each
executable XLA's CPU client loads maps memory of its own (code and data sections): a process
that kept every program it ever compiled would run into the kernel's limit on memory maps
(``vm.max_map_count``, 65530 by default), and LLVM then crashes the process."""
from __future__ import annotations

import collections
import os
import threading
import weakref

from jaxkit._config import config, global_trace_context, trace_context_options
from jaxkit.transforms.cache_miss import CallSignature
from jaxkit.transforms.jit_dispatch import CallPlan
from jaxkit.transforms.stages import Compiled, Lowered


class _FunCache:
    """The compiled entries (one ``Compiled`` per call signature), the traces kept for calls
    under transformations, and the fast-path plans of one function under one set of jit
    options (shared by every ``jit(f, ...)`` of the same ``f`` and options)."""

    __slots__ = ("entries", "traces", "fast", "partitioned", "lowered", "by_config",
                 "__weakref__")

    def __init__(self):
        self.entries: dict[CallSignature, Compiled] = {}
        self.traces: dict[CallSignature, tuple] = {}
        self.fast: dict[tuple, CallPlan] = {}
        # (signature, input layouts) -> Compiled, for calls partitioned over a mesh
        self.partitioned: dict[tuple, Compiled] = {}
        # (trace's key, device, committed, platforms) -> Lowered: see ``Traced.lowerings``
        self.lowered: dict[tuple, Lowered] = {}
        # global trace context -> the five tables above, kept while another one is in force
        self.by_config: dict[tuple, tuple[dict, ...]] = {}

    # (by_config's tuples: this order)
    TABLES = ("entries", "traces", "fast", "partitioned", "lowered")

    def _tables(self) -> tuple[dict, ...]:
        return tuple(getattr(self, name) for name in self.TABLES)

    def clear(self) -> None:
        for table in self._tables():
            table.clear()
        self.by_config.clear()

    def compiled(self, table: str, key, compiled: Compiled | Lowered) -> None:
        """Keep ``compiled`` in the table named ``table`` (``entries`` or ``partitioned``; a
        ``Lowered`` in ``lowered``) under ``key``, counted against the bound on all
        functions' entries (lowerings against a bound of their own)."""
        getattr(self, table)[key] = compiled
        _note_use(self, table, key)

    def looked_up(self, table: str, key) -> None:
        """An entry was found by the slow path: it is the most recently used."""
        with _lru_lock:
            lru = _lrus[table == "lowered"]
            slot = lru.get((id(self), table, key))
            if slot is not None:
                slot[1] = True
                lru.move_to_end((id(self), table, key))

    def _evict(self, table: str, key) -> None:
        """Drop the entry under ``key`` from ``table`` (wherever a configuration keeps it),
        and the fast-path plans, which may run a compiled one (they are made again on the
        next call)."""
        index, fast = self.TABLES.index(table), self.TABLES.index("fast")
        getattr(self, table).pop(key, None)
        if table != "lowered":
            self.fast.clear()
        for saved in self.by_config.values():
            saved[index].pop(key, None)
            if table != "lowered":
                saved[fast].clear()

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


# (id of a _FunCache, table, key) -> [weak reference to that _FunCache, used since it last
# came to the front], least recent first. An entry of a cache that died stays until it
# reaches the front (evicting it does nothing). Two of them, of the same capacity: compiled
# entries, and lowerings (``_lrus[True]``: they hold modules, not executables, whose memory
# maps the bound is for).
_lrus: tuple[collections.OrderedDict[tuple, list], ...] = (collections.OrderedDict(),
                                                          collections.OrderedDict())
_lru_lock = threading.RLock()  # (threads compile and look up at once)
capacity = int(os.environ.get("JAXKIT_JIT_CACHE_SIZE", "4096"))


def _note_use(cache: _FunCache, table: str, key) -> None:
    lowering = table == "lowered"
    with _lru_lock:
        lru = _lrus[lowering]
        lru_key = (id(cache), table, key)
        lru[lru_key] = [weakref.ref(cache), False]
        lru.move_to_end(lru_key)
        while len(lru) > max(capacity, 1):
            # A clock: an entry used since it last came to the front goes to the back.
            # The fast path records no use (it must stay a few dict lookups): a function with
            # fast-path plans counts as used, and loses them, so that its next call takes the
            # slow path, which marks its entry used and makes the plan again.
            lru_key, slot = lru.popitem(last=False)
            owner = slot[0]()
            if owner is None:
                continue
            if slot[1] or (owner.fast and not lowering):
                slot[1] = False
                if not lowering:
                    owner.fast.clear()
                lru[lru_key] = slot
                continue
            owner._evict(lru_key[1], lru_key[2])


def clear_all() -> None:
    """Empty every function's caches (``jax.clear_caches``, a user configuration change)."""
    with _lru_lock:
        for cache in list(_all_fun_caches):
            cache.clear()
        for lru in _lrus:
            lru.clear()


def live_entries() -> int:
    """How many compiled entries all jit caches hold (stashed configurations included)."""
    total = 0
    for cache in list(_all_fun_caches):
        if isinstance(cache, _FunCache):
            total += len(cache.entries) + len(cache.partitioned)
            kept = [_FunCache.TABLES.index(t) for t in ("entries", "partitioned")]
            total += sum(len(t[i]) for t in cache.by_config.values() for i in kept)
    return total


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
