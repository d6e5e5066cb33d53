"""``jit`` of a call with high-level arguments (``jax.experimental.hijax`` types: Flax NNX's
``HijaxVariable``, ...): the arguments are lowered to their array leaves, and a jitted function
of those leaves (one per jitted function, the lowering's description static) raises them back
into high-level values, calls the function, and returns, besides its results, the final leaves
of the mutable values, which are written back into the caller's values.

A separate jitted function rather than a branch of ``JitFunction._call`` keeps the cached fast
path of array calls untouched: these calls never take it, and each lowers its arguments anew
(a mutable value's QDD is read at every call and is part of the cache key).

``jit(f).trace``/``.lower`` of such a call (``trace_with_hi_args``) show what JAX shows: a
jaxpr with the high-level values staged (``hijax_staging``), lowered to a program of their
array leaves whose leading results are the mutable values' final leaves.
"""
from __future__ import annotations

import time
import weakref
from typing import Any

from jaxkit import core, tree_util
from jaxkit.interpreters import hijax, hijax_staging
from jaxkit.interpreters import partial_eval as pe
from jaxkit.transforms import stages
from jaxkit.transforms.jit_primitive import jit_p, jit_params
from jaxkit.transforms.stages import ArgInfo, Compiled, Lowered, Timings, Traced

__all__ = ["call_with_hi_args", "trace_with_hi_args"]

_lowered_funs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def call_with_hi_args(jit_fun: Any, statics: tuple, flat: list, in_tree: Any) -> Any:
    """Call ``jit_fun`` (a ``JitFunction``) on flat arguments ``flat`` (structure
    ``in_tree``, static arguments ``statics``), some of them high-level values."""
    if tree_util.tree_leaves((jit_fun._in_shardings, jit_fun._out_shardings)):
        raise NotImplementedError(
            f"jit of {jit_fun._name} with in_shardings/out_shardings and high-level arguments "
            "is not supported: the shardings describe the high-level values, whose array "
            "leaves are what the program takes. Lay the arrays out before the call instead.")
    if any(isinstance(x, hijax_staging.HiJaxprTracer) for x in flat):
        return _stage_with_hi_args(jit_fun, statics, flat, in_tree)
    spec, lo_flat, his = hijax.lower_args(flat)
    inner = _lowered_funs.get(jit_fun)
    if inner is None:
        inner = _lowered_funs[jit_fun] = _lowered_jit(jit_fun)
    out, final = inner(((spec, in_tree, statics), *lo_flat), {})
    hijax.write_back(spec, his, final)
    return out


def _stage_with_hi_args(jit_fun: Any, statics: tuple, flat: list, in_tree: Any) -> Any:
    """Inside ``make_jaxpr``/``jit(...).trace`` of high-level arguments, a jit call taking
    such staged values: as JAX, a ``jit`` equation whose body takes them as values of their
    types (``hijax_staging.stage_call``)."""
    dyn_args, dyn_kwargs = tree_util.tree_unflatten(in_tree, flat)
    out_flat, out_trees = _flat_body(jit_fun, statics, in_tree)
    debug = pe.debug_info("jit", jit_fun._fun, jit_fun._arg_names(dyn_args, dyn_kwargs))
    outs = hijax_staging.stage_call(
        jit_p, out_flat, flat, debug,
        lambda closed: jit_params(closed, jit_fun._name, keep_unused=jit_fun._keep_unused,
                                  inline=jit_fun._inline))
    return tree_util.tree_unflatten(out_trees[0], outs)


def _flat_body(jit_fun: Any, statics: tuple, in_tree: Any) -> tuple[Any, list]:
    """``jit_fun``'s function of flat arguments giving flat results, and the list its output
    structure is appended to."""
    out_trees: list = []

    def flat_fun(*flat_args):
        a, kw = tree_util.tree_unflatten(in_tree, flat_args)
        args, kwargs = jit_fun._merge_statics(statics, a, kw)
        out_flat, out_tree = tree_util.tree_flatten(jit_fun._fun(*args, **kwargs))
        out_trees.append(out_tree)
        return out_flat

    return flat_fun, out_trees


def _jit_lowering(operands: list, *, jaxpr: core.ClosedJaxpr, **params: Any) -> list:
    """A staged jit equation of high-level operands, as its jaxpr is lowered: a jit equation
    of their array leaves, its leading results the mutable ones' final leaves (as JAX lowers
    it), written back into them."""
    lo, specs, finals = hijax_staging.lower_jaxpr(jaxpr, operands, None)
    lo_operands = hijax_staging.lower_operands(specs, operands)
    outs = jit_p.bind(*lo_operands, **jit_params(
        lo, params["name"], keep_unused=params["keep_unused"], inline=params["inline"]))
    n_state = sum(size for _, _, size in finals)
    hijax_staging.write_finals(specs, finals, operands, outs[:n_state])
    return outs[n_state:]


hijax_staging.lower_rules[jit_p] = _jit_lowering


def _lowered_jit(jit_fun: Any) -> Any:
    """The jitted function of lowered arguments for ``jit_fun``, with its options. It holds
    ``jit_fun`` weakly: the cache entry it is the value of must not keep its key alive."""
    ref = weakref.ref(jit_fun)

    def lowered(key, *lo_flat):
        spec, in_tree, statics = key
        jit_fun = ref()
        flat, his = hijax.raise_args(spec, list(lo_flat))
        dyn_args, dyn_kwargs = tree_util.tree_unflatten(in_tree, flat)
        args, kwargs = jit_fun._merge_statics(statics, dyn_args, dyn_kwargs)
        out = jit_fun._fun(*args, **kwargs)
        return out, hijax.final_state(spec, his)

    lowered.__name__ = lowered.__qualname__ = jit_fun._name
    return type(jit_fun)(lowered, static_argnums=(0,), inline=jit_fun._inline,
                         keep_unused=jit_fun._keep_unused, device=jit_fun._device)._call


def trace_with_hi_args(jit_fun: Any, statics: tuple, flat: list, in_tree: Any,
                       dyn_args: tuple, dyn_kwargs: dict) -> Traced:
    """``jit_fun.trace`` (a ``JitFunction``'s) at flat arguments ``flat``, some of them
    high-level values: they are staged, as JAX's jaxpr shows them (the values are not
    touched)."""
    flat_fun, out_trees = _flat_body(jit_fun, statics, in_tree)
    debug = pe.debug_info("jit", jit_fun._fun, jit_fun._arg_names(dyn_args, dyn_kwargs))
    start = time.perf_counter()
    jaxpr, consts = hijax_staging.trace_to_jaxpr(flat_fun, flat, debug)
    return HiTraced(jit_fun._name, core.ClosedJaxpr(jaxpr, consts), in_tree, out_trees[0],
                    jit_fun._donated(dyn_args, dyn_kwargs), jit_fun._flatten,
                    Timings(trace=time.perf_counter() - start), None, jit_fun._keep_unused,
                    flat=flat, debug=debug)


class HiTraced(Traced):
    """A ``Traced`` whose jaxpr takes high-level values; it lowers (``lower``) to the program
    of their array leaves."""

    def __init__(self, *args, flat: list, debug: Any):
        super().__init__(*args)
        self._flat, self._debug = flat, debug

    def lower(self) -> Lowered:
        lo, specs, finals = hijax_staging.lower_jaxpr(self.jaxpr, self._flat, self._debug)
        n_in, n_state = len(lo.in_avals), sum(size for _, _, size in finals)
        out_tree = tree_util.treedef_tuple([tree_util.tree_structure([0] * n_state),
                                            self.out_tree])
        traced = _LoTraced(self.fun_name, lo, tree_util.tree_structure(((0,) * n_in, {})),
                           out_tree, (False,) * n_in, self.flatten, self.timings, None,
                           self.keep_unused)
        traced.hi = (self.in_tree, self.out_tree, specs, finals)
        low = Traced.lower(traced)
        return _HiLowered(low.traced, low.module, low.timings, low.program)


class _LoTraced(Traced):
    """The program a ``HiTraced`` lowers to: its results are the mutable values' final leaves
    (which JAX leaves unnamed) and the function's results; ``hi``: the call's input and
    output structures, each flat argument's lowering and each mutable one's final type."""

    hi: tuple

    def result_names(self) -> list[str]:
        in_tree, out_tree, _, finals = self.hi
        names = Traced.result_names(self)
        n_state = sum(size for _, _, size in finals)
        return [""] * n_state + ["result" + n[len("result[1]"):] for n in names[n_state:]]

    def _per_argument(self, what: list) -> Any:
        # As JAX's: each argument shows the list of what its leaves are.
        in_tree, _, specs, _ = self.hi
        it, groups = iter(what), []
        for spec in specs:
            groups.append([next(it) for _ in range(1 if spec is None else spec[2])])
        return tree_util.tree_unflatten(in_tree, groups)

    @property
    def in_avals(self):
        return self._per_argument(self.jaxpr.in_avals)

    @property
    def args_info(self):
        return self._per_argument([ArgInfo(a, d) for a, d in zip(self.jaxpr.in_avals,
                                                                 self.donated_invars)])


class _HiLowered(Lowered):
    """The lowered program of a call with high-level arguments; compiled, it takes them."""

    in_avals = property(lambda self: self.traced.in_avals)
    args_info = property(lambda self: self.traced.args_info)

    @property
    def out_info(self):
        """The function's results (JAX 0.10.2 fails here, pairing the program's results,
        the final leaves among them, with the function's output structure)."""
        _, out_tree, _, finals = self.traced.hi
        n_state = sum(size for _, _, size in finals)
        return tree_util.tree_unflatten(out_tree, [
            stages.out_struct(a, False) for a in self.traced.jaxpr.out_avals[n_state:]])

    def compile(self, *args, **kwargs) -> Compiled:
        c = super().compile(*args, **kwargs)
        return _HiCompiled(self, c.program, c.timings)


class _HiCompiled(Compiled):
    """An executable called with the high-level values it was compiled for: it runs on their
    leaves and writes the mutable ones' final leaves back, as a jitted call does."""

    in_avals = property(lambda self: self.traced.in_avals)
    args_info = property(lambda self: self.traced.args_info)

    def __call__(self, *args, **kwargs):
        traced = self.traced
        in_tree, out_tree, specs, finals = traced.hi
        flat, tree, _ = traced.flatten(args, kwargs)
        lo_flat, muts = [], []
        for x, spec in zip(flat, specs):
            if spec is None:
                lo_flat.append(x)
                continue
            aval, qdd, _ = spec
            if not (hijax.is_hi(x) and hijax.hitypes[type(x)](x) == aval and
                    (not aval.has_qdd or hijax.cur_qdd(x) == qdd)):
                tree = None  # not what it was compiled for
                break
            lo_flat.extend(aval.read_loval(qdd, x) if aval.has_qdd else aval.lower_val(x))
            if aval.has_qdd:
                muts.append(x)
        if tree != in_tree:
            raise TypeError(
                f"Compiled function {self.fun_name} was called with arguments other than the "
                "types (and high-level values' states) it was compiled for. Call jit(f) "
                "instead to compile for new types.")
        state, out = self.run_flat(lo_flat, traced.jaxpr.in_avals)
        it = iter(state)
        for x, (aval, qdd, size) in zip(muts, finals):
            aval.update_from_loval(qdd, x, *[next(it) for _ in range(size)])
        return out
