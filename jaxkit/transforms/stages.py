"""The stages of ``jit``: ``Traced`` -> ``Lowered`` -> ``Compiled``, each with measured times.

``jit(f).trace(*args)`` gives the jaxpr; ``.lower()`` the StableHLO module; ``.compile()`` the
XLA executable with its optimised HLO, cost and memory analyses. ``jit`` itself goes through
these objects when a call misses its cache: a ``Compiled`` is what its cache holds. Every stage
records how long it took, so tools (and the magics) can show where time went.
"""
from __future__ import annotations

import copy
import dataclasses
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any
from dataclasses import dataclass

from jaxkit import core, dtypes
from jaxkit import tree_util
from jaxkit.interpreters import dispatch, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.runtime import compile_config, pjrt
from jaxkit.runtime.array import Array, to_buffer, wrap_result
from jaxkit.runtime.sharding import (NamedSharding, PartitionSpec,
                                     current_abstract_mesh)
from jaxkit.transforms import spmd

# ``flatten(args, kwargs) -> (flat leaves, in_tree, avals)``: how the jitted function turns a
# call's arguments into the leaves a program takes (static arguments dropped, avals checked).
Flatten = Callable[[tuple, dict], tuple]


# How the stages show an output's type (``out_info``, ``jit(f).eval_shape``): ``(aval,
# keep_weak_type, sharding) -> struct``. ``jaxkit.api`` (a layer above) installs its
# ``ShapeDtypeStruct``,
# as JAX's stages show theirs; until then the abstract value itself.
out_struct: Callable[..., Any] = lambda aval, keep_weak_type, sharding=None: aval


@dataclass
class Timings:
    """Seconds spent in each stage (None when the stage did not run)."""

    trace: float | None = None
    lower: float | None = None
    compile: float | None = None

    def total(self) -> float:
        return sum(t for t in (self.trace, self.lower, self.compile) if t)


@dataclasses.dataclass(frozen=True, slots=True)
class ArgInfo:
    """What a stage knows of one argument: its abstract value and whether it is donated."""

    _aval: Any
    donated: bool

    @property
    def shape(self):
        if not hasattr(self._aval, "shape"):
            raise TypeError(f"No shape attribute with aval of type {type(self._aval)}")
        return self._aval.shape

    @property
    def dtype(self):
        if not hasattr(self._aval, "dtype"):
            raise TypeError(f"No dtype attribute with aval of type {type(self._aval)}")
        return self._aval.dtype


class _Stage:
    """What every stage tells of its arguments, as pytrees of ``(args, kwargs)``, unused
    arguments included (they are dropped from the program only)."""

    traced: Traced
    in_tree: Any  # the tree structure of the pair (positional arguments, keyword arguments)

    @property
    def in_avals(self):
        """The arguments' abstract values, as a pytree of ``(args, kwargs)``."""
        return tree_util.tree_unflatten(self.traced.in_tree, self.traced.jaxpr.in_avals)

    @property
    def args_info(self):
        """An ``ArgInfo`` (aval, donated) per argument, as a pytree of ``(args, kwargs)``."""
        return tree_util.tree_unflatten(self.traced.in_tree, [
            ArgInfo(a, d) for a, d in zip(self.traced.jaxpr.in_avals,
                                          self.traced.donated_invars)])

    @property
    def donate_argnums(self) -> tuple[int, ...]:
        """The flat indices of the donated argument leaves."""
        return tuple(i for i, d in enumerate(self.traced.donated_invars) if d)


class Traced(_Stage):
    """A function traced at particular argument types: its jaxpr (closed-over constants as
    constvars) and output structure. ``keep_unused=False`` (jit's default) drops the
    arguments the program does not read from the lowered program (and the equations whose
    results it does not need); calls still take them all."""

    # The device a one-device program compiles for by default: where the traced call's
    # committed arguments are (set by ``jit(f).trace``; None: the current default device),
    # and whether they were (the compiled program's results then are too).
    device = None
    committed = False
    arg_shardings = None  # (when committed: each argument leaf's if committed, else None)
    compiler_options: tuple = ()  # jit(compiler_options=)'s, as (name, value) pairs
    # Where jit keeps the lowerings of this trace: ``(cache, key)``, ``cache`` having a dict
    # ``lowered`` and ``compiled(table, key, value)`` that bounds it (None: lowered afresh).
    # As JAX's lowering and compilation caches: ``f.lower(x)`` twice, or a call after
    # ``f.lower(x).compile()``, lowers and compiles once.
    lowerings = None
    # Why this trace cannot be lowered (a ShapeDtypeStruct argument asking for a layout:
    # its trace, eval_shape's, is fine), or None.
    unlowerable: str | None = None

    def __init__(self, name: str, closed_jaxpr: core.ClosedJaxpr, in_tree, out_tree,
                 donated_invars: Sequence[bool], flatten: Flatten, timings: Timings,
                 sharding_plan: spmd.ShardingPlan | None = None, keep_unused: bool = False):
        self.traced = self
        self.keep_unused = keep_unused
        self.fun_name = name
        self.sharding_plan = sharding_plan  # set: the program is partitioned over a mesh
        self.jaxpr = closed_jaxpr
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.donated_invars = tuple(donated_invars)
        self.flatten = flatten
        self.timings = timings
        self.context_mesh = current_abstract_mesh()  # (what out_info's layouts are over)

    @property
    def out_info(self):
        """The outputs' shapes and dtypes (weak types kept) and shardings, as the output
        pytree: those ``out_shardings`` gives, else the types' (over an abstract mesh, as
        JAX's trace gives them)."""
        plan, avals = self.sharding_plan, self.jaxpr.out_avals
        if plan is None:
            return tree_util.tree_unflatten(self.out_tree, [
                out_struct(a, True, _typed_sharding(a, self.context_mesh)) for a in avals])
        return tree_util.tree_unflatten(self.out_tree, [
            out_struct(a, True, g if g is not None else _abstract(t))
            for a, g, t in zip(avals, plan.given_out_shardings, plan.out_shardings)])

    @property
    def out_avals(self):
        return tree_util.tree_unflatten(self.out_tree, self.jaxpr.out_avals)

    def result_names(self) -> list[str]:
        """JAX's names of the flat outputs: ``result`` and the path in the output pytree."""
        leaves = [None] * self.out_tree.num_leaves
        try:
            paths = tree_util.tree_flatten_with_path(
                tree_util.tree_unflatten(self.out_tree, leaves), is_leaf=lambda x: x is None)[0]
        except Exception:  # noqa: BLE001  (a user's pytree class need not rebuild from None
            # placeholders, e.g. BCOO reads its indices' ndim: its results go unlabelled, as
            # the labels are only annotations of the lowered text)
            return []
        return ["result" + tree_util.keystr(path) for path, _ in paths]

    def lower(self, *, lowering_platforms: tuple[str, ...] | None = None,
              _private_parameters: Any = None) -> Lowered:
        """The program as a StableHLO module, for the platform the call runs on, or with
        ``lowering_platforms=(platform,)`` by another platform's lowering rules (e.g.
        ``("cuda",)`` on a CPU machine, to read what a GPU would be given)."""
        if self.unlowerable is not None:
            raise NotImplementedError(self.unlowerable)
        if _private_parameters is not None:  # JAX's internal hook: nothing here reads it
            raise NotImplementedError("Traced.lower(_private_parameters=...) is JAX-internal "
                                      "and not implemented in jaxkit; leave it None")
        key = None
        if self.lowerings is not None:
            cache, base = self.lowerings
            key = (base, self.device, self.committed,
                   None if lowering_platforms is None else tuple(lowering_platforms))
            hit = cache.lowered.get(key)
            if hit is not None and hit.traced.jaxpr is self.jaxpr:  # (the same trace)
                cache.looked_up("lowered", key)
                again = Lowered(self, hit.module, hit.timings, hit.program, hit.compilations)
                again.platforms = hit.platforms
                return again
        start = time.perf_counter()
        program = _Program.of(self)
        platform = mlir.lowering_platform(self.device)
        platforms = ()
        if lowering_platforms is not None:
            platforms = tuple(p.lower() for p in lowering_platforms)
            if program.sharding_plan is not None and platforms != (platform,):
                raise NotImplementedError(
                    f"lower(lowering_platforms={tuple(lowering_platforms)}): jaxkit lowers a "
                    "program partitioned over several devices for the platform it runs on "
                    f"only ({platform!r})")
            platform = platforms[0]
        if program.sharding_plan is not None:
            module = spmd.lower(self.fun_name, program.jaxpr, program.donated_invars,
                                program.sharding_plan, self.result_names())
        else:
            # for the device the arguments are committed to (a CPU array on a GPU machine
            # takes the CPU's rules), else the default device's
            arg_shardings = self.arg_shardings
            if arg_shardings is not None and program.kept is not None:
                arg_shardings = [arg_shardings[i] for i in program.kept]
            module = dispatch.lower_closed(self.fun_name, program.jaxpr, program.donated_invars,
                                           self.result_names(), platform=platform,
                                           arg_shardings=arg_shardings, platforms=platforms)
            module = result_layouts(program.jaxpr, module)
        seconds = time.perf_counter() - start
        dispatch.log_compile_step("Finished jaxpr to MLIR module conversion jit(%s) in %.9f sec",
                                  self.fun_name, seconds)
        lowered = Lowered(self, module, Timings(self.timings.trace, seconds), program)
        lowered.platforms = platforms or (platform,)
        if key is not None:
            cache.compiled("lowered", key, lowered)
        return lowered


# ``(jaxpr, module) -> module`` with the memory layouts of results that a layout constraint
# produces (``jax.experimental.layout`` registers it; it lives in a layer above this one).
result_layouts: Callable[[core.ClosedJaxpr, Any], Any] = lambda jaxpr, module: module


@dataclass(frozen=True)
class _Program:
    """What is lowered of a ``Traced``: its jaxpr without the unused arguments (unless
    ``keep_unused``), with their donations and layouts dropped alike, and ``kept``, the
    indices of the argument leaves the program takes (None: all of them)."""

    jaxpr: core.ClosedJaxpr
    donated_invars: tuple[bool, ...]
    sharding_plan: spmd.ShardingPlan | None
    kept: tuple[int, ...] | None

    @staticmethod
    def of(traced: Traced) -> _Program:
        closed = traced.jaxpr
        whole = _Program(closed, traced.donated_invars, traced.sharding_plan, None)
        if traced.keep_unused:
            return whole
        # As JAX: dead equations go too, and the closed-over constants nothing reads.
        jaxpr, used = pe.dce_jaxpr(closed.jaxpr, prune_invars=True)
        live_consts = set(jaxpr.constvars)
        consts = [c for v, c in zip(closed.jaxpr.constvars, closed.consts) if v in live_consts]
        kept = tuple(i for i, u in enumerate(used) if u)
        debug = jaxpr.debug_info
        names = getattr(debug, "arg_names", None)
        if names is not None and len(names) == len(used):
            debug = dataclasses.replace(debug, arg_names=tuple(names[i] for i in kept))
        jaxpr = core.Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, jaxpr.eqns,
                           debug_info=debug)
        if len(kept) == len(used):
            return _Program(core.ClosedJaxpr(jaxpr, consts), whole.donated_invars,
                            whole.sharding_plan, None)
        plan = traced.sharding_plan
        if plan is not None:  # the mesh stays the one the full argument list named
            plan = copy.copy(plan)
            plan.in_shardings = tuple(plan.in_shardings[i] for i in kept)
        return _Program(core.ClosedJaxpr(jaxpr, consts),
                        tuple(traced.donated_invars[i] for i in kept), plan, kept)


def _check_dialect(dialect: str | None) -> str:
    if dialect is None:
        return "stablehlo"
    if dialect not in ("stablehlo", "hlo"):
        raise ValueError(f"unknown dialect: {dialect}")
    return dialect


class Lowered(_Stage):
    """A StableHLO module ready to compile."""

    platforms: tuple = ()  # the platforms it was lowered for (several: ``mlir_platforms``)

    def __init__(self, traced: Traced, module, timings: Timings, program: _Program,
                 compilations: weakref.WeakValueDictionary | None = None):
        self.traced = traced
        self.in_tree = traced.in_tree
        self.fun_name = traced.fun_name
        self.module = module  # a jaxlib.mlir ir.Module
        self.timings = timings
        self.program = program
        # (compiler options, device assignment) -> the Compiled made of this module, shared
        # by the Lowered objects of one cached lowering, while something else keeps it (jit's
        # bounded cache of entries, or the user).
        self.compilations = (weakref.WeakValueDictionary() if compilations is None
                             else compilations)

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str:
        """The program as StableHLO text, or as XLA HLO text with ``dialect="hlo"``."""
        dialect = _check_dialect(dialect)
        if dialect == "hlo":
            return mlir.module_to_hlo_text(self.module, debug_info)
        return mlir.module_to_string(self.module, enable_debug_info=debug_info)

    def compiler_ir(self, dialect: str | None = None):
        """The MLIR module, or XLA's ``XlaComputation`` with ``dialect="hlo"``."""
        if _check_dialect(dialect) == "hlo":
            return mlir.module_to_xla_computation(self.module)
        return self.module

    def cost_analysis(self) -> dict[str, float] | None:
        """XLA's cost estimate of the program before optimization (``flops``,
        ``transcendentals``, ``bytes accessed``, ...), as JAX; None where the backend has
        none (a PjRt plugin: use ``compile().cost_analysis()``)."""
        hlo_module = mlir.module_to_xla_computation(self.module).as_hlo_module()
        try:
            return pjrt.hlo_cost_analysis(hlo_module, self.traced.device)
        except NotImplementedError:
            return None

    def compile(self, compiler_options: dict[str, Any] | None = None, *,
                device_assignment: tuple | None = None) -> Compiled:
        """Compile for the devices the lowering was made for; a one-device program for
        ``device_assignment=(device,)`` (default: the current default device).
        ``compiler_options`` (XLA option name -> value) add to, or override, those of
        ``jit(compiler_options=)``."""
        options = {**dict(self.traced.compiler_options), **(compiler_options or {})}
        key = (tuple(sorted(options.items())), device_assignment)
        try:
            compiled = self.compilations.get(key)
        except TypeError:  # an unhashable option value: compiled afresh
            key = compiled = None
        if compiled is None:
            with compile_config.compiler_options(options):
                compiled = self._compile(device_assignment)
            if key is not None:
                self.compilations[key] = compiled
        return compiled

    def _compile(self, device_assignment: tuple | None) -> Compiled:
        if len(self.platforms) > 1:
            raise ValueError(
                f"A lowering for several platforms {self.platforms} takes the platform's index "
                "as a parameter and cannot be compiled as it is: lower for one platform, or "
                "export it (jax.export.export(f, platforms=...)) and call the Exported, which "
                "passes the index.")
        device = self.traced.device
        if device_assignment is not None:
            if len(device_assignment) != 1 or self.program.sharding_plan is not None:
                raise NotImplementedError(
                    "Lowered.compile(device_assignment=...): jaxkit takes one device for a "
                    "one-device program; leave it None for a partitioned one")
            device = device_assignment[0]
        lowered = self.program
        if lowered.sharding_plan is not None:
            start = time.perf_counter()
            program = spmd.PartitionedProgram(self.module, lowered.jaxpr, lowered.sharding_plan)
            compile_time = time.perf_counter() - start
            dispatch.log_compile_step("Finished XLA compilation of jit(%s) in %.9f sec",
                                      self.fun_name, compile_time)
            return Compiled(self, program,
                            Timings(self.timings.trace, self.timings.lower, compile_time))
        program, _, compile_time = dispatch.compile_closed(
            self.fun_name, lowered.jaxpr, lowered.donated_invars, self.module, device)
        return Compiled(self, program,
                        Timings(self.timings.trace, self.timings.lower, compile_time))

    @property
    def out_tree(self):
        """The tree structure of the outputs."""
        return self.traced.out_tree

    @property
    def out_info(self):
        """The outputs' shapes and dtypes, as the output pytree (a program's results have no
        weak types)."""
        avals = self.traced.jaxpr.out_avals
        return tree_util.tree_unflatten(self.traced.out_tree, [
            out_struct(a, False, s)
            for a, s in zip(avals, _out_shardings(self.traced.sharding_plan, avals))])


def _typed_sharding(aval, context_mesh) -> Any:
    """The sharding an output's type names over Explicit mesh axes; as JAX's, every
    dimension replicated over a context mesh whose axes are all Explicit; else None."""
    sharding = getattr(aval, "_sharding", None)
    if sharding is not None and not sharding.mesh.empty:
        return sharding
    if context_mesh.empty or not context_mesh.are_all_axes_explicit:
        return None
    return NamedSharding(context_mesh, PartitionSpec(*[None] * len(aval.shape)))


def _abstract(sharding: Any) -> Any:
    """A layout its type fixes, over the abstract mesh (as a trace, before devices, says)."""
    return None if sharding is None else type(sharding)(sharding.mesh.abstract_mesh,
                                                        sharding.spec)


def _out_shardings(plan: spmd.ShardingPlan | None, avals) -> Sequence:
    """The outputs' shardings that ``out_shardings`` or their types fix (None: XLA's)."""
    return plan.out_shardings if plan is not None else [None] * len(avals)


def _output_builder(out_tree, has_tokens: bool = False) -> Callable[[list], Any]:
    """The function that makes a program's result buffers into the outputs as the function
    returns them. A single array, or a tuple or namedtuple of arrays (``eigh``, ``qr``,
    ``(loss, grads)`` of leaves) is built directly: the cached-call path pays for every step
    of a general ``tree_unflatten``. Token results come back as ``Token``s."""
    if has_tokens:
        return lambda bufs: tree_util.tree_unflatten(out_tree, list(map(wrap_result, bufs)))
    if tree_util.treedef_is_leaf(out_tree) and out_tree.num_leaves == 1:
        return lambda bufs: Array(bufs[0])
    children = tree_util.treedef_children(out_tree)
    if children and all(tree_util.treedef_is_leaf(c) and c.num_leaves == 1 for c in children):
        node = tree_util.tree_unflatten(out_tree, range(len(children)))
        if type(node) is tuple:
            return lambda bufs: tuple(map(Array, bufs))
        if isinstance(node, tuple) and hasattr(type(node), "_fields"):  # a namedtuple
            # called with the fields (its _make calls len(), which a subclass may redefine),
            # unless a custom registration flattens the fields in another order
            make = type(node)
            if tuple.__eq__(make(*range(len(children))), node):
                return lambda bufs: make(*map(Array, bufs))
    return lambda bufs: tree_util.tree_unflatten(out_tree, list(map(Array, bufs)))


class Compiled(_Stage):
    """An executable for fixed argument types. Calling it runs the program; ``jit`` keeps one
    per call signature and runs it through ``run_flat`` (or a fast-path call plan).
    ``kept``: the indices of the argument leaves the program takes (None: all)."""

    def __init__(self, lowered: Lowered, program: dispatch.Program, timings: Timings):
        traced = self.traced = lowered.traced
        self.in_tree = traced.in_tree
        self.kept = lowered.program.kept
        self.fun_name = lowered.fun_name
        self.lowered = lowered
        self.program = program
        self.executable = program.executable
        self.timings = timings
        self.out_tree = traced.out_tree
        # Tokens, extended-dtype values (keys) and float0 values come back from their result
        # handlers as Token / key arrays / host arrays, not buffers: they take the general
        # wrap_result path.
        has_tokens = any(type(a) is core.AbstractToken or dtypes.is_extended(a.dtype)
                         or a.dtype == dtypes.float0 for a in traced.jaxpr.out_avals)
        self.single_leaf = (tree_util.treedef_is_leaf(traced.out_tree)
                            and traced.out_tree.num_leaves == 1 and not has_tokens)
        self.partitioned = traced.sharding_plan is not None
        self.outputs = _output_builder(traced.out_tree, has_tokens)
        # device -> the same module compiled for it (one-device programs run where their
        # committed arguments are: see ``runtime.array.placement``)
        self._programs = {} if self.partitioned else {program.executable.device: program}

    def program_on(self, device) -> dispatch.Program:
        """This one-device program compiled for ``device`` (compiled on first use)."""
        program = self._programs.get(device)
        if program is None:
            lowered = self.lowered.program
            program = dispatch.compile_closed(self.fun_name, lowered.jaxpr,
                                              lowered.donated_invars, self.lowered.module,
                                              device)[0]
            program = self._programs.setdefault(device, program)
        return program

    def run_flat(self, flat: Sequence, avals: Sequence[core.ShapedArray], device=None,
                 committed: bool = False):
        """Run on the flat argument leaves (``Array``s pass their buffer; NumPy values and
        Python scalars are put on the device at ``avals``); the unused ones are dropped.
        ``device`` (with ``committed``, whether the results are committed to it) is where a
        one-device program runs, once placement is spread (``runtime.array.placement``)."""
        kept = self.kept
        if kept is not None:
            flat, avals = [flat[i] for i in kept], [avals[i] for i in kept]
        if self.partitioned:
            outs = self.program.run_flat(flat, avals)
            return outs[0] if self.single_leaf else tree_util.tree_unflatten(self.out_tree, outs)
        if device is not None:
            bufs = [to_buffer(x, a, device) for x, a in zip(flat, avals)]
            return self.outputs(self.program_on(device).run(bufs, committed))
        bufs = [x._buf if type(x) is Array else to_buffer(x, a) for x, a in zip(flat, avals)]
        return self.outputs(self.program.run(bufs))

    def _check_arguments(self, in_tree, avals, expected_tree, expected) -> None:
        """JAX's TypeError for a call whose arguments are not those compiled for."""
        if in_tree != expected_tree or [a.strip_weak_type() for a in avals] != [
                a.strip_weak_type() for a in expected]:
            raise TypeError(
                f"Compiled function {self.fun_name} was called with arguments of types "
                f"{[a.str_short() for a in avals]} (structure {in_tree}), but it was "
                f"compiled for {[a.str_short() for a in expected]} (structure "
                f"{expected_tree}). Call jit(f) instead to compile for new types.")

    def __call__(self, *args, **kwargs):
        traced = self.lowered.traced
        flat, in_tree, avals = traced.flatten(args, kwargs)
        expected = traced.jaxpr.in_avals
        self._check_arguments(in_tree, avals, traced.in_tree, expected)
        if self.partitioned or not pjrt.placement.spread:
            return self.run_flat(flat, expected)
        # On the device it was compiled for: uncommitted arguments elsewhere move there.
        return self.run_flat(flat, expected, self.executable.device, self.traced.committed)

    @property
    def cache_source(self) -> str:
        """Where the executable came from: ``"compiled"`` (XLA compiled it now), ``"memory"``
        (the same module was compiled earlier in this process) or ``"persistent"`` (loaded
        from the on-disk compilation cache)."""
        return self.executable.cache_source

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
    def out_info(self):
        return self.lowered.out_info

    def runtime_executable(self):
        """jaxlib's loaded executable (for debugging: no stable API)."""
        return self.executable.xla_executable

    @property
    def input_shardings(self):
        """Where each argument is laid out, as a pytree of ``(args, kwargs)`` (unused
        arguments included)."""
        traced = self.traced
        n = traced.in_tree.num_leaves
        if self.partitioned:  # (the plan's layouts end with the arguments')
            layouts = list(traced.sharding_plan.in_shardings)  # (None: unused, unspecified)
            taken = self.program.reported_in_shardings
            for i, s in zip(range(len(layouts)) if self.kept is None else self.kept, taken):
                layouts[i] = s
            return tree_util.tree_unflatten(traced.in_tree, layouts[len(layouts) - n:])
        return tree_util.tree_unflatten(traced.in_tree, [self._one_device_sharding()] * n)

    @property
    def output_shardings(self):
        """Where each result is laid out, as the output pytree."""
        traced = self.traced
        if self.partitioned:
            return tree_util.tree_unflatten(traced.out_tree, list(self.program.out_shardings))
        n = traced.out_tree.num_leaves
        return tree_util.tree_unflatten(traced.out_tree, [self._one_device_sharding()] * n)

    def _one_device_sharding(self):
        return pjrt.sharding_of(self.executable.device)

    @staticmethod
    def call(compiled: Compiled, *args, **kwargs):
        """Run ``compiled`` on ``args`` (as calling it does)."""
        return compiled(*args, **kwargs)
