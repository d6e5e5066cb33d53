"""jit's fast path: call plans and the dispatcher, the function ``jit`` returns.

A call outside any transformation whose traced arguments are leaves (``Array``s, NumPy values,
Python scalars) passed positionally is answered here: a key made of their avals and the static
values, one lookup in the function's plans, and the ``CallPlan`` found runs the compiled
program; no pytree work. Every other call, and a miss, goes to ``JitFunction._call``
(``jit.py``), which compiles and adds plans. With several devices a plan also stands for one
placement (``runtime.array.placement``), checked in a few identity tests per call.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from jaxkit import core, dtypes, tree_util
from jaxkit._config import config, local_blocks
from jaxkit._traceback_filter import boundary_codes, filter_at_boundary
from jaxkit.core import ShapedArray
from jaxkit.interpreters.ad import JVPTrace, JVPTracer
from jaxkit.interpreters.batching import BatchTrace, BatchTracer
from jaxkit.runtime import context_mesh, pjrt
from jaxkit.runtime.array import Array, DeviceMismatch, device_put_value, placement, to_buffer
from jaxkit.runtime.pjrt import JaxRuntimeError
from jaxkit.source_info import api_boundary
from jaxkit.transforms.stages import Compiled
from jaxkit.literals import TypedNdArray

current_trace = core.current_trace
eval_trace = core.eval_trace


class CallPlan:
    """How calls of one fast-path pattern run a compiled entry.

    The pattern (the fast-path key) fixes which argument positions are traced and which of
    them are device ``Array``s (they pass their buffer) or NumPy values and Python scalars (put
    on the device at their aval). ``run(args)`` runs such a call. A ``direct`` plan (one or two
    ``Array``s, all traced, no constants; keywords, if any, are static: a plan is made only for
    calls whose keywords are all static) is the commonest call, e.g. ``jnp.dot(a, b,
    precision=None)``; the dispatcher runs it inline through ``execute`` and ``handlers`` and
    makes the outputs with ``build`` (or, when ``single``, wraps the one result itself),
    saving function calls.

    A plan runs on the device of sharding ``where``, its results committed there if
    ``committed``. Once placement is spread (``pjrt.Placement``) the dispatcher runs a plan
    only for a call placed as the plan is (``placed_here``): its ``Array`` arguments
    (positions ``arrays``) all on ``where``, committed as the plan, and, for an uncommitted
    plan, ``where`` the unchanged default placement; then the scalars and NumPy values are put
    there. ``checkable`` is False when another kind of leaf (a key array, placed by its data)
    takes part: such calls are placed by ``runtime.array.placement``."""

    __slots__ = ("arrays", "build", "checkable", "committed", "direct", "execute", "handlers",
                 "run", "single", "where")

    def __init__(self, compiled: Compiled, args: tuple, avals: Sequence[ShapedArray],
                 positions: Sequence[int], kwargs: dict, where=None, committed: bool = False):
        device = None if where is None else where._device
        program = compiled.program if device is None else compiled.program_on(device)
        if compiled.kept is not None:  # the arguments the program does not read stay out
            positions = [positions[i] for i in compiled.kept]
            avals = [avals[i] for i in compiled.kept]
        executable = program.executable
        self.where = pjrt.sharding_of(executable.device) if where is None else where
        self.committed = committed
        self.execute = execute = executable.xla_executable.execute_sharded
        self.handlers = handlers = (executable.committed_handlers if committed
                                    else executable.handlers)
        consts, outputs = program.const_bufs, compiled.outputs
        self.build = outputs
        # Which arguments the placement check reads: the Arrays the program reads (an
        # unused one does not take part in placement, as in JAX).
        self.arrays = [i for i in positions if type(args[i]) is Array]
        self.checkable = not any(dtypes.is_extended(a.dtype) for a in avals)
        plan = [(i, None if type(args[i]) is Array else a) for i, a in zip(positions, avals)]
        self.direct = (not consts and len(plan) == len(args) and 1 <= len(args) <= 2
                       and all(a is None for _, a in plan))
        self.single = self.direct and compiled.single_leaf and len(handlers) == 1
        if device is not None:
            placed = list(zip(positions, avals))

            def run(args):
                bufs = []
                for i, a in placed:  # arrays already there pass their buffer
                    x = args[i]
                    bufs.append(x._buf if type(x) is Array and x._buf._sharding is where
                                else to_buffer(x, a, device))
                return outputs(execute(consts + bufs if consts else bufs)
                               .consume_with_handlers(handlers))
        elif self.direct or (not consts and len(plan) == len(args)
                             and all(a is None for _, a in plan)):
            def run(args):
                return outputs(execute([x._buf for x in args]).consume_with_handlers(handlers))
        else:
            def run(args):
                bufs = [args[i]._buf if a is None else to_buffer(args[i], a) for i, a in plan]
                return outputs(execute(consts + bufs if consts else bufs)
                               .consume_with_handlers(handlers))
        self.run = run

    def placed_here(self, args) -> bool:
        """Whether a call (of this plan's pattern) is placed as this plan: see the class."""
        if not self.checkable or pjrt.placement.mesh_devices:
            return False  # (under jax.set_mesh calls are placed, or refused, by the slow path)
        where, committed = self.where, False
        for i in self.arrays:
            buf = args[i]._buf
            if buf._sharding is not where:
                return False
            committed = committed or buf._committed
        return committed is self.committed and (committed or where is pjrt.placement.default)

# type -> aval function, for the leaves the fast path accepts (Array, NumPy, Python scalars).
leaf_avals = core.pytype_aval_mappings


def _leaf_key(x) -> tuple:
    """Fast-path key of a NumPy value or Python scalar: its type and aval (an ``Array``'s key
    is its bare aval, so that an all-``Array`` call needs no per-argument type check)."""
    return type(x), leaf_avals[type(x)](x)


def fast_key(static_argnums: frozenset, args: tuple, kwargs: dict) -> tuple:
    """The fast-path key: per argument, the value of a static one or the key of a traced leaf;
    then the (static) keywords. Raises ``KeyError`` for an argument that is not a leaf and
    ``TypeError`` for an unhashable one: such calls take the general path."""
    key = tuple([x if i in static_argnums else x.aval if type(x) is Array else _leaf_key(x)
                 for i, x in enumerate(args)])
    return (key, *kwargs.items()) if kwargs else key


def dispatcher(fun: Callable, fast: dict[tuple, CallPlan], static_argnums: frozenset,
                inline: bool, slow: Callable, fixed_device=None,
                rename_mismatch: Callable | None = None,
                in_context: Callable | None = None, inline_as_program: bool = True) -> Callable:
    """The function ``jit`` returns; ``slow(args, kwargs)`` is ``JitFunction._call``.

    Outside any transformation a call whose traced arguments are positional leaves takes the
    fast path: its key (``fast_key``), one lookup in ``fast``, its plan. Calls of one or two
    positional arguments without static positions build their key in place (as ``fast_key``
    does, keywords included) and run direct plans inline: this is the cached-call path whose
    every bytecode shows in the benchmark, and the path of eager jnp functions called with
    static keywords (``jnp.dot(a, b, precision=None)``, ``x.mean(axis=0)``).

    Once placement is spread, the plan under a key is the call site's latest placement: a
    call placed as it is (``CallPlan.placed_here``, unrolled for direct plans: a few identity
    checks, so that several devices cost what one does) runs it; any other call is placed
    by ``runtime.array.placement`` and finds its plan under the key extended with that
    placement (``spread_call``), which becomes the call site's.

    ``fast`` holds the plans of the global configuration. A call from a thread inside a
    block of its own option values (``config.trace_context``) goes to ``in_context(args,
    kwargs)``: the dispatcher of that configuration's plans.

    An inline body traced in place under a JVP or batch trace gives its results as JAX's jit
    gives them there (``jit_results``), unless ``inline_as_program`` is False: a function
    JAX does not jit at all, which jaxkit jits for its eager calls only."""
    unrolled = not static_argnums
    spread = pjrt.placement
    eager_meshes = context_mesh.eager_meshes
    fixed = None if fixed_device is None else (pjrt.sharding_of(fixed_device), True)

    def spread_call(args, kwargs):
        try:
            if unrolled:  # fast_key without static positions
                key = tuple([x.aval if type(x) is Array else _leaf_key(x) for x in args])
                if kwargs:
                    key = (key, *kwargs.items())
            else:
                key = fast_key(static_argnums, args, kwargs)
            plan = fast[(key, *(placement(args, "") if fixed is None else fixed))]
        except (KeyError, TypeError, ValueError, OverflowError):
            plan = None  # a miss, devices that the slow path names (or an unused argument's)
        if plan is None or (eager_meshes and not plan.committed):
            return slow(args, kwargs)  # (under jax.set_mesh the slow path lays results out)
        if fixed is None:
            fast[key] = plan
        return plan.run(args)

    def dispatch(*args, **kwargs):
        # The executables below run the arguments' buffers as they are; a deleted or donated
        # one fails in jaxlib, and only then are the arguments examined (a try costs nothing).
        try:
            if current_trace() is not eval_trace:
                if not inline:
                    return slow(args, kwargs)
                try:
                    out = fun(*args, **kwargs)
                except DeviceMismatch as e:  # as if the body ran as one program: see _call
                    raise rename_mismatch(e, args, kwargs) from None
                return jit_results(out) if inline_as_program and \
                    type(current_trace()) in _program_traces else out
            if local_blocks.open and in_context is not None and config.trace_context:
                return in_context(args, kwargs)
            n = len(args)
            if n == 1 and unrolled:
                x, = args
                # A miss leaves the except block before calling `slow`, so that errors raised
                # while tracing or compiling do not come chained to this KeyError.
                try:
                    key = (x.aval if type(x) is Array else _leaf_key(x),)
                    plan = fast[(key, *kwargs.items()) if kwargs else key]
                except (KeyError, TypeError, OverflowError):  # new, or not a leaf (or one
                    # out of its type's range: the slow path says so)
                    plan = None
                if plan is None:
                    return spread_call(args, kwargs) if spread.spread else slow(args, kwargs)
                if plan.direct:
                    bx = x._buf
                    if spread.spread and (bx._sharding is not plan.where or bx._committed
                                          is not plan.committed or plan.where is not
                                          spread.default and not plan.committed
                                          or spread.mesh_devices):
                        return spread_call(args, kwargs)
                    out = plan.execute([bx]).consume_with_handlers(plan.handlers)
                    return Array(out[0]) if plan.single else plan.build(out)
            elif n == 2 and unrolled:
                x, y = args
                try:
                    key = (x.aval if type(x) is Array else _leaf_key(x),
                           y.aval if type(y) is Array else _leaf_key(y))
                    plan = fast[(key, *kwargs.items()) if kwargs else key]
                except (KeyError, TypeError, OverflowError):
                    plan = None
                if plan is None:
                    return spread_call(args, kwargs) if spread.spread else slow(args, kwargs)
                if plan.direct:
                    bx, by = x._buf, y._buf
                    if spread.spread:
                        where = plan.where
                        if bx._sharding is not where or by._sharding is not where or (
                                bx._committed or by._committed) is not plan.committed or (
                                where is not spread.default and not plan.committed) or \
                                spread.mesh_devices:
                            return spread_call(args, kwargs)
                    out = plan.execute([bx, by]).consume_with_handlers(plan.handlers)
                    return Array(out[0]) if plan.single else plan.build(out)
            else:
                try:
                    plan = fast[fast_key(static_argnums, args, kwargs)]
                except (KeyError, TypeError, OverflowError):
                    plan = None
                if plan is None:
                    return spread_call(args, kwargs) if spread.spread else slow(args, kwargs)
            if spread.spread and not plan.placed_here(args):
                return spread_call(args, kwargs)
            return plan.run(args)
        except Exception as e:
            # An API boundary, as JAX's jitted functions: the outermost one drops jaxkit's
            # frames from the traceback (jax_traceback_filtering); only raising calls pay.
            try:
                if isinstance(e, JaxRuntimeError):
                    pjrt.raise_if_deleted([a._buf for a in (*args, *kwargs.values())
                                           if type(a) is Array])
            except Exception as deleted:
                filter_at_boundary(deleted)
                raise
            filter_at_boundary(e)
            raise

    # An entry point: marked as JAX marks its own (chex's ``is_traceable`` recognises a jitted
    # function by ``api_boundary`` among its globals, which are this module's)
    boundary_codes.add(dispatch.__code__)  # (one code object, shared by every dispatcher)
    return api_boundary(dispatch)


_host_types = (bool, int, float, complex, np.ndarray, np.generic)
# The transformations under which JAX's jit still runs its (transformed) body as a program
# when nothing outer stages it: its results there are Arrays, never the host values that an
# inline body traced in place can pass through.
_program_traces = (JVPTrace, BatchTrace)
_program_tracers = (JVPTracer, BatchTracer)


def _on_device(x):
    """A host value (Python scalar, NumPy value; not a ``float0`` one) as an ``Array``; a JVP
    tracer with its primal and tangent so (the jit's JVP runs at every JVP level it is
    under, as in JAX), a batch tracer with its batch so (``vmap(jnp.squeeze)`` of a NumPy
    int64 vector is an int32 Array, as JAX's); anything else as it is."""
    if isinstance(x, BatchTracer):
        val = _on_device(x.val)
        return x if val is x.val else type(x)(x._trace, val, x.batch_dim)
    if isinstance(x, JVPTracer):
        primal, tangent = _on_device(x.primal), _on_device(x.tangent)
        if primal is x.primal and tangent is x.tangent:
            return x
        return type(x)(x._trace, primal, tangent)
    if isinstance(x, _host_types) and not isinstance(x, TypedNdArray):
        return device_put_value(x)
    return x


def jit_results(outs):
    """The results of an inline jit (a jnp function) traced in place under a JVP or batch
    trace, as JAX's jit gives them there: its JVP or batched body runs as a program, so
    primals, tangents and batches that are still host values (the tangent ``3.0`` passed
    through ``x + 1.0``, the argument that ``jnp.asarray(x)`` returns) come out as Arrays,
    weak types kept."""
    leaves, tree = tree_util.tree_flatten(outs)
    converted = [_on_device(x) if isinstance(x, _program_tracers) else x for x in leaves]
    if all(a is b for a, b in zip(converted, leaves)):
        return outs
    return tree_util.tree_unflatten(tree, converted)
