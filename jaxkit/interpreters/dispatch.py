"""Running jaxprs: compiled programs, the one program cache, and eager execution.

A ``Program`` is a closed jaxpr compiled by XLA: its executable and the buffers of the
constants it takes first. ``lower_closed``/``compile_closed`` build one (small closed-over
constants are baked into the module, large ones become leading parameters).

``programs`` is the one cache of compiled programs that are not specialisations of a jitted
function: eager primitives (a primitive applied to concrete values is a one-equation jaxpr,
compiled once per primitive, input avals and parameters) and the eager impl of the ``jit``
primitive (a jaxpr that contains a jit equation, run by ``eval_jaxpr``). It is bounded
(least recently used entries go first). ``jit`` keeps its own per-function cache of entries
keyed on call signatures, built from the same ``compile_closed``.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence

from jaxkit import avals as avals_mod
from jaxkit import core, dtypes
from jaxkit._config import config, local_blocks
from jaxkit.core import ClosedJaxpr, Jaxpr, JaxprEqn, ShapedArray, Var
from jaxkit.interpreters import debug_nans, mlir
from jaxkit.runtime import context_mesh, pjrt
from jaxkit.runtime.array import Array, placement, to_buffer, wrap_result
from jaxkit.runtime.sharded_array import ShardedArray
from jaxkit.runtime.sharding import UNSPECIFIED

# --------------------------------------------------------------------------------------------
# Compile logging
# --------------------------------------------------------------------------------------------

# Each trace, lowering and compilation is logged, at WARNING under ``jax_log_compiles`` and
# DEBUG otherwise, with JAX's messages on JAX's logger names: code written for JAX watches
# the "jax" logger (optax's tests count "Finished ... compilation" records to catch
# recompiles; users raise its level), and under ``import jaxkit as jax`` it should see ours.
_logger = logging.getLogger("jax._src.dispatch")
_compiling_logger = logging.getLogger("jax._src.interpreters.pxla")


def _log_level(logger: logging.Logger) -> int | None:
    """The level a compile step is logged at, or None when the logger would drop it."""
    level = logging.WARNING if config.jax_log_compiles else logging.DEBUG
    return level if logger.isEnabledFor(level) else None


def log_compile_step(message: str, *args) -> None:
    if (level := _log_level(_logger)) is not None:
        _logger.log(level, message, *args)


def log_compiling(name: str, in_avals, in_shardings: Sequence | None = None) -> None:
    """JAX's record of a program being lowered: its arguments' types and shardings (None, or
    an argument's None: ``UnspecifiedValue``, the layout left to the compiler)."""
    if (level := _log_level(_compiling_logger)) is None:
        return
    if in_shardings is None:
        in_shardings = [None] * len(in_avals)
    mapping = tuple(UNSPECIFIED if s is None else s for s in in_shardings)
    _compiling_logger.log(level, "Compiling jit(%s) with global shapes and types %s. "
                          "Argument mapping: %s.", name, tuple(in_avals), mapping)


def _log_compile(name: str, lowering_s: float | None, compile_s: float) -> None:
    if lowering_s is not None:
        log_compile_step("Finished jaxpr to MLIR module conversion jit(%s) in %.9f sec", name,
                         lowering_s)
    log_compile_step("Finished XLA compilation of jit(%s) in %.9f sec", name, compile_s)


# --------------------------------------------------------------------------------------------
# Compiled programs
# --------------------------------------------------------------------------------------------


class Program:
    """A compiled closed jaxpr: the executable and the constant buffers it takes first."""

    __slots__ = ("const_bufs", "executable")

    def __init__(self, executable: pjrt.Executable, const_bufs: list):
        self.executable = executable
        self.const_bufs = const_bufs

    def run(self, bufs: Sequence, committed: bool = False) -> list:
        """Run on argument buffers (on the program's device); ``committed`` commits the
        results to it."""
        return self.executable(self.const_bufs + list(bufs) if self.const_bufs else bufs,
                               committed)


# Closed-over constants up to this many elements are baked into the program, as JAX bakes
# them all: XLA can then fold work on them (a transposed weight matrix is stored transposed).
# Larger ones are passed as leading parameters, which keeps modules small and compiles fast.
_INLINE_CONST_MAX_SIZE = 1 << 16


def _const_is_param(c) -> bool:
    return core.get_aval(c).size > _INLINE_CONST_MAX_SIZE


def lower_closed(name: str, closed: ClosedJaxpr, donated_invars: Sequence[bool],
                 result_names: Sequence[str] = (), platform: str | None = None,
                 arg_shardings: Sequence | None = None, platforms: Sequence[str] = ()):
    """The StableHLO module of ``closed``: small closed-over constants inlined, large ones as
    leading parameters (``Program.const_bufs``, in the same order); ``result_names`` label
    its results (``mlir.lower_jaxpr``); ``arg_shardings`` (committed arguments' shardings,
    None for the others) are logged."""
    log_compiling(name, closed.in_avals, arg_shardings)
    jaxpr = closed.jaxpr
    as_param = [_const_is_param(c) for c in closed.consts]
    param_vars = [v for v, p in zip(jaxpr.constvars, as_param) if p]
    lowered = core.Jaxpr([v for v, p in zip(jaxpr.constvars, as_param) if not p],
                         param_vars + list(jaxpr.invars), jaxpr.outvars, jaxpr.eqns,
                         debug_info=jaxpr.debug_info)
    donated = [False] * len(param_vars) + list(donated_invars)
    arg_kinds, result_kinds, propagated = (), None, ()
    if avals_mod.uses_memory_spaces(jaxpr):
        # As JAX's: a program moving values between memory spaces declares where each
        # result lives (as its type says) and each argument outside device memory.
        kinds = avals_mod.memory_kinds_of([v.aval for v in lowered.invars])
        if any(k != "device" for k in kinds):
            arg_kinds = kinds
        result_kinds = [None] * len(jaxpr.outvars)
        propagated = avals_mod.memory_kinds_of(closed.out_avals)
    return mlir.lower_jaxpr(name, lowered, donated_invars=donated,
                            consts=[c for c, p in zip(closed.consts, as_param) if not p],
                            result_names=result_names, platform=platform, platforms=platforms,
                            arg_memory_kinds=arg_kinds, result_memory_kinds=result_kinds,
                            type_kinds=propagated)


def compile_closed(name: str, closed: ClosedJaxpr, donated_invars: Sequence[bool],
                   module=None, device=None) -> tuple[Program, float, float]:
    """Lower (unless ``module`` is given) and compile ``closed`` for ``device`` (default: the
    current default device); returns the program and the seconds spent lowering and
    compiling."""
    start = time.perf_counter()
    lowered_here = module is None
    if lowered_here:
        module = lower_closed(name, closed, donated_invars,
                              platform=mlir.lowering_platform(device))
    lowered_at = time.perf_counter()
    exe = pjrt.compile_module(module, closed.out_avals, device)
    compiled_at = time.perf_counter()
    _log_compile(name, lowered_at - start if lowered_here else None, compiled_at - lowered_at)
    const_bufs = [to_buffer(c, core.get_aval(c), exe.device) for c in closed.consts
                  if _const_is_param(c)]
    return Program(exe, const_bufs), lowered_at - start, compiled_at - lowered_at


# --------------------------------------------------------------------------------------------
# The program cache
# --------------------------------------------------------------------------------------------


class ProgramCache:
    """Compiled programs by key, least recently used first out beyond ``capacity``.

    A program is inserted only once it is compiled, so an interrupted compile leaves nothing
    behind; two threads missing the same key at once may both compile, and the first stays."""

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self._programs: collections.OrderedDict[Hashable, Program] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.compiles = 0
        self.compile_seconds = 0.0

    def get(self, key: Hashable, build: Callable[..., Program], *build_args) -> Program:
        """The program for ``key``, built by ``build(*build_args)`` on a miss. An unhashable
        key (parameters holding arrays) builds a program that is not kept."""
        programs = self._programs
        try:
            program = programs.get(key)
        except TypeError:
            return build(*build_args)
        if program is not None:
            programs.move_to_end(key)  # a hit makes the entry the most recent
            return program
        # Built outside any `except` block: an error in the user's program must not come
        # chained to an internal KeyError.
        start = time.perf_counter()
        program = build(*build_args)
        with self._lock:
            self.compiles += 1
            self.compile_seconds += time.perf_counter() - start
            program = programs.setdefault(key, program)
            if len(programs) > self.capacity:
                programs.popitem(last=False)
        return program

    def clear(self) -> None:
        with self._lock:
            self._programs.clear()

    def __len__(self) -> int:
        return len(self._programs)


programs = ProgramCache()


def _clear_on_config_change(name, value):
    if name in ("jax_enable_x64", "jax_allow_f16_reductions"):  # shape rules read them
        programs.clear()


config.on_change(_clear_on_config_change)


# --------------------------------------------------------------------------------------------
# Eager execution
# --------------------------------------------------------------------------------------------


_placement = pjrt.placement
_Sharding = pjrt.Sharding
_eager_meshes = context_mesh.eager_meshes


# Set by ``transforms.jit``: runs a primitive with an operand laid out over several devices
# as a partitioned program (interpreters sit below the transformations).
sharded_apply: Callable | None = None


def _not_a_value(prim: core.Primitive, args) -> TypeError:
    """JAX's error for an operand that is no array: its type and position."""
    for i, x in enumerate(args):
        try:
            core.get_aval(x)
        except TypeError:
            return TypeError(f"Error interpreting argument to {prim.name} as a JAX value. The "
                             f"problematic value is of type {type(x)} and was passed to "
                             f"{prim.name} at position {i}.\n")
    return TypeError("internal: no operand failed to convert")


def apply_primitive(prim: core.Primitive, *args, **params):
    """Run ``prim`` on concrete arguments (the impl rule of most primitives): a one-equation
    jaxpr, compiled once per (primitive, input avals, params, device) and cached in
    ``programs``. While placement is not spread (``pjrt.Placement``) the device is the only
    one and stays out of the key."""
    try:
        avals = tuple([x.aval if type(x) is Array else core.get_aval(x) for x in args])
    except TypeError:
        raise _not_a_value(prim, args) from None
    if _placement.spread:
        where = _placed_together(args)
        together = where is not None
        if not together and any(map(_spread_over_devices, args)) and \
                sharded_apply is not None and not config.jax_disable_jit:
            out = sharded_apply(prim, args, params)
            if out is not NotImplemented:
                return out
        where, committed = where if together else placement(args, prim.name, inner=True)
        # The program first: its abstract evaluation raises the primitive's own errors
        # (an unreduced operand's rule) before any argument is moved.
        key = (prim, avals, tuple(params.items()), where)
        if local_blocks.open:  # the shape rules read options (x64) set for this thread
            key = (key, config.trace_context)
        program = programs.get(key,
                               _compile_primitive, prim, avals, params, where._device)
        if together:
            bufs = [x._buf for x in args]
        else:  # placed by the general rule: moved there
            bufs = [x._buf if type(x) is Array and x._buf._sharding is where
                    else to_buffer(x, a, where._device) for x, a in zip(args, avals)]
        outs = program.executable(bufs, committed)
        if not committed and _eager_meshes:  # under jax.set_mesh: over its devices
            return _on_context_mesh(prim, params, outs)
    else:
        key = (prim, avals, tuple(params.items()))
        if local_blocks.open:
            key = (key, config.trace_context)
        program = programs.get(key, _compile_primitive, prim, avals, params)
        bufs = [x._buf if type(x) is Array else to_buffer(x, a) for x, a in zip(args, avals)]
        outs = program.executable(bufs)
    if config.jax_debug_nans:
        debug_nans.check_primitive(prim, _checked(outs))
    if prim.multiple_results:
        return [wrap_result(b) for b in outs]
    return wrap_result(outs[0])


def _checked(outs: list) -> list:
    """The results debug_nans looks at: those that are device buffers."""
    return [Array(b) for b in outs if type(b) is pjrt.ArrayImpl]


def _on_context_mesh(prim: core.Primitive, params: dict, outs: list):
    if config.jax_debug_nans:
        debug_nans.check_primitive(prim, _checked(outs))
    laid_out = context_mesh.lay_out_results([wrap_result(b) for b in outs],
                                            context_mesh.typed_results(prim, params, len(outs)))
    return laid_out if prim.multiple_results else laid_out[0]


def _spread_over_devices(x) -> bool:
    """Whether ``x`` is an array laid out over several devices, or keys over such data."""
    if type(x) is ShardedArray:
        return True
    dtype = getattr(x, "dtype", None)
    return isinstance(dtype, dtypes.ExtendedDType) and \
        type(dtype.to_physical(x)) is ShardedArray


def _placed_together(args) -> tuple | None:
    """``(sharding, committed)`` for the commonest eager calls, one or two ``Array``s on one
    device, committed there or uncommitted on the unchanged default one (``Placement``); None
    for any other call. A few identity checks, so that several devices cost what one does."""
    n = len(args)
    if n == 1:
        x = args[0]
        if type(x) is not Array:
            return None
        buf = x._buf
        where, committed = buf._sharding, buf._committed
    elif n == 2:
        x, y = args
        if type(x) is not Array or type(y) is not Array:
            return None
        buf, other = x._buf, y._buf
        where = buf._sharding
        if other._sharding is not where:
            return None
        committed = buf._committed or other._committed
    else:
        return None
    if committed:  # (under jax.set_mesh the general path refuses it, as JAX)
        return (where, True) if type(where) is _Sharding and not _placement.mesh_devices \
            else None
    return (where, False) if where is _placement.default else None


def primitive_jaxpr(prim: core.Primitive, avals: Sequence[ShapedArray], params: dict) -> Jaxpr:
    """A jaxpr with a single equation applying ``prim``."""
    invars = [Var(a) for a in avals]
    out = prim.abstract_eval(*avals, **params)
    out_avals = list(out) if prim.multiple_results else [out]
    outvars = [Var(a) for a in out_avals]
    return Jaxpr([], invars, outvars, [JaxprEqn(invars, outvars, prim, dict(params))])


def _compile_primitive(prim, avals, params, device=None) -> Program:
    start = time.perf_counter()
    jaxpr = primitive_jaxpr(prim, avals, params)
    # (logged as JAX logs its eager operations, each a jitted call of the primitive)
    log_compile_step("Finished tracing %s for jit in %.9f sec", prim.name,
                     time.perf_counter() - start)
    log_compiling(prim.name, avals)
    start = time.perf_counter()
    module = mlir.lower_jaxpr(prim.name, jaxpr, platform=mlir.lowering_platform(device))
    lowered_at = time.perf_counter()
    program = Program(pjrt.compile_module(module, jaxpr.out_avals, device), [])
    _log_compile(prim.name, lowered_at - start, time.perf_counter() - lowered_at)
    return program


def _compile_closed_program(name: str, closed: ClosedJaxpr, donated_invars,
                            device=None) -> Program:
    return compile_closed(name, closed, donated_invars, device=device)[0]


def run_closed(name: str, closed: ClosedJaxpr, donated_invars: Sequence[bool], args) -> list:
    """Run ``closed`` on concrete ``args`` (the eager impl of primitives carrying a jaxpr),
    compiling it once per jaxpr object (and device, once placement is spread)."""
    if _placement.spread:
        where, committed = placement(args, name, inner=True)
        device = where._device
        program = programs.get((closed, where), _compile_closed_program, name, closed,
                               donated_invars, device)
    else:
        device, committed = None, False
        program = programs.get(closed, _compile_closed_program, name, closed, donated_invars)
    bufs = [to_buffer(x, a, device) for x, a in zip(args, closed.in_avals)]
    outs = [wrap_result(b) for b in program.run(bufs, committed)]
    if _eager_meshes and not committed:  # under jax.set_mesh: over its devices
        return context_mesh.lay_out_results(outs, context_mesh.typed_outputs(closed))
    return outs
