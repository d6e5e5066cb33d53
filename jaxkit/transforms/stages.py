"""The stages of ``jit``: ``Traced`` -> ``Lowered`` -> ``Compiled``, each with measured times.

``jit(f).trace(*args)`` gives the jaxpr; ``.lower()`` the StableHLO module; ``.compile()`` the
XLA executable with its optimised HLO, cost and memory analyses. Every stage records how long it
took, so tools (and the magics) can show where time went.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jaxkit import core, tree_util
from jaxkit.runtime import pjrt
from jaxkit.interpreters import mlir


@dataclass
class Timings:
    """Seconds spent in each stage (None when the stage did not run)."""

    trace: float | None = None
    lower: float | None = None
    compile: float | None = None

    def total(self) -> float:
        return sum(t for t in (self.trace, self.lower, self.compile) if t)


class Traced:
    """A function traced at particular argument types: its jaxpr and output structure."""

    def __init__(self, name: str, closed_jaxpr: core.ClosedJaxpr, in_tree, out_tree,
                 donated_invars: Sequence[bool], lower_fn: Callable[[Traced], Lowered],
                 timings: Timings):
        self.fun_name = name
        self.jaxpr = closed_jaxpr
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.donated_invars = tuple(donated_invars)
        self._lower_fn = lower_fn
        self.timings = timings

    @property
    def out_info(self):
        return tree_util.tree_unflatten(self.out_tree, self.jaxpr.out_avals)

    def lower(self) -> Lowered:
        return self._lower_fn(self)


@dataclass
class Lowered:
    """A StableHLO module ready to compile."""

    fun_name: str
    module: Any  # jaxlib.mlir ir.Module
    traced: Traced
    timings: Timings
    _compile_fn: Callable[[Lowered], Compiled] = field(repr=False, default=None)

    def as_text(self, dialect: str = "stablehlo") -> str:
        if dialect not in ("stablehlo", "hlo"):
            raise ValueError(f"unknown dialect {dialect!r}; use 'stablehlo'")
        return mlir.module_to_string(self.module)

    def compiler_ir(self, dialect: str = "stablehlo"):
        return self.module

    def compile(self) -> Compiled:
        return self._compile_fn(self)

    @property
    def in_avals(self):
        return self.traced.jaxpr.in_avals

    @property
    def out_info(self):
        return self.traced.out_info


class Compiled:
    """An executable for fixed argument types. Calling it runs the program."""

    def __init__(self, fun_name: str, executable: pjrt.Executable, lowered: Lowered,
                 call: Callable, timings: Timings):
        self.fun_name = fun_name
        self.executable = executable
        self.lowered = lowered
        self._call = call
        self.timings = timings

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def as_text(self) -> str:
        """The optimised HLO that XLA compiled."""
        return self.executable.as_text()

    def cost_analysis(self) -> dict[str, float]:
        """XLA's estimate: flops, transcendentals, bytes accessed, ..."""
        return self.executable.cost_analysis()

    def memory_analysis(self):
        """XLA's buffer sizes: arguments, outputs, temporaries, generated code."""
        return self.executable.memory_analysis()

    @property
    def in_avals(self):
        return self.lowered.in_avals

    @property
    def out_info(self):
        return self.lowered.out_info

