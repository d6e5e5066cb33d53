"""What a compiled jit entry is specialised on (``CallSignature``) and, when a call misses the
cache, why: ``explain_miss`` names what differs from the closest earlier signature (shape,
dtype, weak type, static value, tree structure). ``JitFunction`` keeps one ``CacheEvent`` per
miss, logs it behind ``jax_explain_cache_misses``, and the magics display it."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jaxkit.core import ShapedArray
from jaxkit.transforms.stages import Timings


@dataclass(frozen=True)
class CallSignature:
    """What a compiled entry is specialised on."""

    in_tree: Any
    avals: tuple[ShapedArray, ...]
    statics: tuple
    arg_names: tuple[str, ...] = field(compare=False, hash=False, default=())
    static_names: dict = field(compare=False, hash=False, default_factory=dict)


@dataclass
class CacheEvent:
    """One call that missed the cache: why, what tracing and compiling cost, and where XLA's
    executable came from: ``"compiled"`` (XLA ran), ``"memory"`` (this process had compiled
    the same module) or ``"persistent"`` (loaded from the on-disk compilation cache)."""

    fun_name: str
    reason: str
    differences: list[str]
    timings: Timings
    signature: CallSignature = field(repr=False, default=None)
    executable_source: str = "compiled"


def explain_miss(sig: CallSignature, previous: Sequence[CallSignature]) -> tuple[str, list[str]]:
    """Why ``sig`` is not in the cache, relative to the closest earlier signature."""
    if not previous:
        return "first call: nothing was compiled for this function yet", []
    best_diffs = None
    for old in previous:
        diffs = _differences(old, sig)
        if best_diffs is None or len(diffs) < len(best_diffs):
            best_diffs = diffs
    reason = "; ".join(best_diffs) if best_diffs else "a new combination of arguments"
    return reason, best_diffs


def _differences(old: CallSignature, new: CallSignature) -> list[str]:
    diffs = []
    if old.in_tree != new.in_tree:
        diffs.append(f"the pytree structure of the arguments changed: {old.in_tree} -> "
                     f"{new.in_tree}")
    else:
        names = new.arg_names or tuple(f"argument {i}" for i in range(len(new.avals)))
        for name, a, b in zip(names, old.avals, new.avals):
            if a.shape != b.shape:
                diffs.append(f"{name}: shape changed from {a.shape} to {b.shape}")
            if a.dtype != b.dtype:
                diffs.append(f"{name}: dtype changed from {a.dtype.name} to {b.dtype.name}")
            if a.weak_type != b.weak_type:
                diffs.append(f"{name}: weak_type changed from {a.weak_type} to {b.weak_type} "
                             "(a Python scalar versus an array)")
    for (key, a), (_, b) in zip(old.statics, new.statics):
        if a != b:
            name = new.static_names.get(key, key)
            diffs.append(f"static argument {name}: value changed from {a!r} to {b!r}")
    if len(old.statics) != len(new.statics):
        diffs.append("a different set of static arguments was passed")
    return diffs
