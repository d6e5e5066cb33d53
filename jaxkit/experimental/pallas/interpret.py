"""Interpret mode: a ``pallas_call`` run as ordinary XLA code (how Pallas runs on a CPU).

The kernel's jaxpr works on refs to blocks. Interpreting it takes two passes over it, made
once per kernel and cached:

1. *grid resolution*: ``program_id`` equations become inputs of the jaxpr (the loop's grid
   indices); control flow inside the kernel that uses them is rebuilt through ``lax``'s own
   ``while_loop``/``scan``/``switch`` so the indices are closed over like any other value;
2. *state discharge* (``interpreters.state``): refs become the values they hold, and the
   jaxpr returns each block's final value.

Then a ``fori_loop`` runs over the grid in row-major order, carrying every operand: each step
evaluates the index maps, cuts each operand's block with ``dynamic_slice``, runs the
discharged kernel, and writes the blocks back with ``dynamic_update_slice``. Operands are
padded to whole blocks first and outputs start *uninitialized* (NaN for floats, the least
integer for ints; under JAX's TPU interpreter, ``pltpu.InterpretParams``, what its
``uninitialized_memory`` says), as JAX's interpreters do, so reading what was never written
shows.
"""
from __future__ import annotations

import contextlib
import contextvars
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.experimental.pallas.core import Blocked, Element, GridMapping, Squeezed
from jaxkit.experimental.pallas.interpret_rewrite import for_tpu_interpreter
from jaxkit.experimental.pallas.primitives import program_id_p
from jaxkit.experimental.pallas.uniformity import check_remote_ops_uniform
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters import state
from jaxkit.lax.cond import cond_p
from jaxkit.lax.loops import scan_p, while_p
from jaxkit.lax.parallel import axis_index_p

__all__ = ["interpret_pallas_call", "uninitialized_value"]


# The ``interpret`` argument of the pallas_call being traced or interpreted: buffers that
# the kernel allocates (``pl.run_scoped``, ``emit_pipeline``'s windows) are made while it is
# traced, and start as that call's interpreter says.
_interpret_in_effect: contextvars.ContextVar = contextvars.ContextVar("pallas_interpret",
                                                                       default=True)


@contextlib.contextmanager
def interpreting(interpret: Any):
    """Within: buffers start as ``interpret`` (``True`` or ``pltpu.InterpretParams``) says."""
    token = _interpret_in_effect.set(interpret)
    try:
        yield
    finally:
        _interpret_in_effect.reset(token)


def uninitialized_value(shape: tuple[int, ...], dtype: Any, interpret: Any = None) -> Any:
    """What an unwritten element holds in interpret mode (``interpret``: the pallas_call's
    argument, default: that of the call being traced). JAX's generic interpreter: NaN, the
    least integer, False. Its TPU interpreter (``pltpu.InterpretParams``), by
    ``uninitialized_memory``: ``"nan"``: NaN, the greatest integer, True; ``"zero"``: 0."""
    dtype = np.dtype(dtype)
    interpret = _interpret_in_effect.get() if interpret is None else interpret
    how = getattr(interpret, "uninitialized_memory", None)
    if how == "zero":
        return lax.full(shape, 0, dtype)
    if how not in (None, "nan"):
        raise ValueError(f"pltpu.InterpretParams(uninitialized_memory={how!r}): the choices "
                         "are 'nan' and 'zero'.")
    if dtypes.issubdtype(dtype, np.inexact):
        return lax.full(shape, np.nan, dtype)
    if dtypes.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return lax.full(shape, info.min if how is None else info.max, dtype)
    if dtype == np.dtype(bool):
        return lax.full(shape, how is not None, dtype)
    raise NotImplementedError(f"interpret mode for pallas_call outputs of dtype {dtype} is "
                              "not implemented")


# --------------------------------------------------------------------------------------------
# Pass 1: program_id -> inputs
# --------------------------------------------------------------------------------------------

_uses_grid_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _uses_grid(jaxpr: core.Jaxpr) -> bool:
    found = _uses_grid_cache.get(jaxpr)
    if found is None:
        found = any(e.primitive in (program_id_p, axis_index_p) or any(
            _uses_grid(s) for s in core.subjaxprs(e.params)) for e in jaxpr.eqns)
        _uses_grid_cache[jaxpr] = found
    return found


def _eval_closed(closed: core.ClosedJaxpr, args: Sequence, pids: Sequence) -> list:
    return eval_with_grid(closed.jaxpr, closed.consts, args, pids)


def _while_rule(vals, pids, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cc, bc = vals[:cond_nconsts], vals[cond_nconsts:cond_nconsts + body_nconsts]
    init = list(vals[cond_nconsts + body_nconsts:])
    return lax.while_loop(lambda c: _eval_closed(cond_jaxpr, [*cc, *c], pids)[0],
                          lambda c: _eval_closed(body_jaxpr, [*bc, *c], pids), init)


def _scan_rule(vals, pids, *, jaxpr, length, reverse, num_consts, num_carry, unroll, **_):
    consts = vals[:num_consts]
    init = list(vals[num_consts:num_consts + num_carry])
    xs = list(vals[num_consts + num_carry:])

    def step(carry, x):
        outs = _eval_closed(jaxpr, [*consts, *carry, *x], pids)
        return outs[:num_carry], outs[num_carry:]

    carry, ys = lax.scan(step, init, xs, length=length, reverse=reverse, unroll=unroll)
    return [*carry, *ys]


def _cond_rule(vals, pids, *, branches, **_):
    index, *ops = vals
    fns = [lambda *o, br=br: _eval_closed(br, o, pids) for br in branches]
    return lax.switch(index, fns, *ops)


_grid_rules = {while_p: _while_rule, scan_p: _scan_rule, cond_p: _cond_rule}


def _inline_rule(eqn: core.JaxprEqn, vals, pids) -> list:
    # A call-like equation (jit, custom_jvp_call, ...) whose body uses program_id: run its
    # body in place (interpret mode needs no derivative or call boundary).
    bodies = [v for v in eqn.params.values() if isinstance(v, core.ClosedJaxpr)]
    if len(bodies) != 1 or len(bodies[0].jaxpr.invars) != len(vals):
        raise NotImplementedError(f"interpret-mode rule for '{eqn.primitive.name}' using "
                                  "pl.program_id inside is not implemented; call "
                                  "pl.program_id outside it and pass the value in")
    return _eval_closed(bodies[0], vals, pids)


class GridIndices(list):
    """The grid indices of a kernel instance, and the names of the grid's axes: a kernel run
    by ``pl.core_map`` reads its core's index with ``lax.axis_index(name)``."""

    names: tuple = ()


def eval_with_grid(jaxpr: core.Jaxpr, consts: Sequence, args: Sequence,
                   pids: Sequence) -> list:
    """Evaluate a kernel jaxpr under the current trace, with ``program_id(k)`` (and
    ``axis_index`` of the ``k``-th named grid axis) read from ``pids[k]``."""
    env: dict = {}
    names = getattr(pids, "names", ())

    def read(a):
        return a.val if type(a) is core.Literal else env[a]

    for v, x in zip(jaxpr.constvars + jaxpr.invars, [*consts, *args]):
        env[v] = x
    for eqn in jaxpr.eqns:
        vals = [read(a) for a in eqn.invars]
        if eqn.primitive is program_id_p:
            outs = [pids[eqn.params["axis"]]]
        elif eqn.primitive is axis_index_p and eqn.params["axis_name"] in names:
            outs = [pids[names.index(eqn.params["axis_name"])]]
        elif any(_uses_grid(s) for s in core.subjaxprs(eqn.params)):
            rule = _grid_rules.get(eqn.primitive)
            outs = (rule(vals, pids, **eqn.params) if rule is not None
                    else _inline_rule(eqn, vals, pids))
        else:
            outs = eqn.primitive.bind(*vals, **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
        for v, x in zip(eqn.outvars, outs):
            env[v] = x
    return [read(v) for v in jaxpr.outvars]


_kernel_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def discharged_kernel(jaxpr: core.Jaxpr, n_pids: int,
                      names: tuple = ()) -> tuple[core.Jaxpr, list, list]:
    """The kernel as a pure jaxpr: (captured values,) grid indices and block values in, final
    block values out. Returns it, its constvars' values and the captured values. ``names``:
    the grid axes' names (None for an unnamed axis)."""
    per = _kernel_cache.setdefault(jaxpr, {})
    found = per.get((n_pids, names))
    if found is None:
        i32 = core.ShapedArray((), np.dtype(np.int32))
        avals = [i32] * n_pids + [v.aval for v in jaxpr.invars]

        def resolved(*args):
            pids = GridIndices(args[:n_pids])
            pids.names = names
            return eval_with_grid(jaxpr, [], args[n_pids:], pids)

        with_pids, consts = pe.trace_to_jaxpr(resolved, avals)
        pure, pure_consts = state.discharge_jaxpr(pe.convert_constvars_jaxpr(with_pids))
        found = per[(n_pids, names)] = (pure, pure_consts, consts)
    return found


# --------------------------------------------------------------------------------------------
# Pass 2: the loop over the grid
# --------------------------------------------------------------------------------------------


def _padded_shape(shape: tuple, block_shape: tuple) -> tuple:
    return tuple(d if isinstance(b, Element) else -(-d // (1 if isinstance(b, Squeezed)
                                                            else b.block_size))
                 * (1 if isinstance(b, Squeezed) else b.block_size)
                 for d, b in zip(shape, block_shape))


def _pad(x, block_shape, interpret):
    target = _padded_shape(x.shape, block_shape)
    if target == x.shape:
        return x
    fill = uninitialized_value((), x.dtype, interpret)
    return lax.pad(x, fill, [(0, t - d, 0) for d, t in zip(x.shape, target)])


def _unravel(i, grid: tuple[int, ...]) -> list:
    idx, stride = [], 1
    for g in reversed(grid):
        idx.append(lax.rem(lax.div(i, np.int32(stride)), np.int32(g)))
        stride *= g
    return idx[::-1]


def _block_starts(bm, grid_idx, index_vals) -> list:
    # index maps may read the scalar-prefetch refs: evaluate their discharged form
    pure = state.discharge_closed(bm.index_map)
    outs = core.eval_jaxpr(pure.jaxpr, pure.consts, *grid_idx, *index_vals)
    outs = outs[:len(bm.block_shape)]
    starts = []
    for b, d in zip(outs, bm.block_shape):
        b = lax.convert_element_type(b, np.int32)
        starts.append(b * np.int32(d.block_size) if isinstance(d, Blocked) else b)
    return starts


def _is_semaphore(aval) -> bool:
    # semaphores (pltpu.SemaphoreType.*) count from 0
    return getattr(aval.memory_space, "name", None) == "SEMAPHORE"


def interpret_pallas_call(*args, jaxpr: core.Jaxpr, grid_mapping: GridMapping,
                          out_avals: tuple, input_output_aliases: tuple, interpret: Any = True,
                          **_) -> list:
    """What a ``pallas_call`` computes, written in jaxkit operations (traceable)."""
    gm = grid_mapping
    if not isinstance(interpret, bool):  # JAX's TPU interpreter (pltpu.InterpretParams)
        jaxpr = for_tpu_interpreter(jaxpr)
    for bm in gm.block_mappings:
        for d in bm.block_shape:
            if isinstance(d, Element) and d.padding != (0, 0):
                raise NotImplementedError("interpret-mode rule for 'pallas_call' with "
                                          "pl.Element padding is not implemented")
    check_remote_ops_uniform(jaxpr, tuple(gm.grid_names or ()))
    kernel, kernel_consts, captured = discharged_kernel(jaxpr, len(gm.grid) - gm.vmapped_dims,
                                                        tuple(gm.grid_names or ()))
    n_idx = len(gm.index_avals)
    all_args = args  # input_output_aliases count the scalar-prefetch operands too
    index_vals, args = args[:n_idx], args[n_idx:]
    aliased = {o: i for i, o in input_output_aliases}
    outs0 = [all_args[aliased[k]] if k in aliased else
             uninitialized_value(a.shape, a.dtype, interpret) for k, a in enumerate(out_avals)]
    operands = [jnp.asarray(x) for x in args] + outs0
    shapes = [x.shape for x in operands]
    padded = [_pad(x, bm.block_shape, interpret)
              for x, bm in zip(operands, gm.block_mappings)]
    n_io = len(padded)
    # scratch buffers live across the whole grid, unblocked
    scratch = [lax.full(a.shape, 0, a.dtype) if _is_semaphore(a) else
               uninitialized_value(a.shape, a.dtype, interpret) for a in gm.scratch_avals]

    def step(i, carry):
        idx = _unravel(i, gm.grid)
        starts = [_block_starts(bm, idx, index_vals) for bm in gm.block_mappings]
        blocks = [lax.dynamic_slice(x, st, bm.full_block_shape).reshape(bm.kernel_shape)
                  for x, st, bm in zip(carry, starts, gm.block_mappings)]
        finals = core.eval_jaxpr(kernel, kernel_consts, *captured, *idx[gm.vmapped_dims:],
                                 *index_vals, *blocks, *carry[n_io:])[n_idx:]
        return [*(lax.dynamic_update_slice(x, f.reshape(bm.full_block_shape), st)
                  for x, f, st, bm in zip(carry, finals, starts, gm.block_mappings)),
                *finals[n_io:]]

    final = lax.fori_loop(np.int32(0), np.int32(gm.num_programs), step, padded + scratch)
    n_in = gm.num_inputs
    return [x if x.shape == s else lax.slice(x, (0,) * len(s), s)
            for x, s in zip(final[n_in:n_io], shapes[n_in:])]
