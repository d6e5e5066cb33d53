"""Block specs through a fusion: ``pull_block_spec`` (from the outputs' block specs to the
inputs'), ``push_block_spec`` (from the inputs' to the outputs'), and the kernel function
that evaluates the fusion on one block; ``get_fusion_values`` splits a fusion into the
arrays it reads and a function of them.

Pulling walks the fusion's jaxpr backwards carrying a ``BlockIndexTransform`` per variable:
a block shape and a function from the outputs' block indices to this variable's block
indices (composed with the output specs' index maps at the end, giving ``BlockSpec``s).
The kernel function then evaluates the jaxpr on blocks with an *eval rule* per primitive
(broadcasts, iotas and reshapes build their block, not the whole array). A *usage* pass
first finds the scalars that feed broadcasts: they are *scalar prefetch* values (read in
the index maps and the kernel from scalar memory), not blocked operands. The rules live in
``block_spec_rules``, one table per kind, keyed by primitive.
"""
from __future__ import annotations

import contextlib
import dataclasses
import enum
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core, tree_util
from jaxkit.experimental.pallas import core as pallas_core
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters import state

__all__ = ["BlockIndexTransform", "KernelEvalContext", "PullRuleContext", "PushRuleContext",
           "Usage", "eval_rules", "get_fusion_values", "get_stateful_input_fusion_values",
           "get_stateful_output_fusion_values", "make_scalar_prefetch_handler",
           "no_block_index_transform", "pull_block_spec", "pull_block_spec_rules",
           "push_block_spec", "push_block_spec_rules", "usage_rules"]

pull_block_spec_rules: dict[core.Primitive, Callable] = {}
push_block_spec_rules: dict[core.Primitive, Callable] = {}
eval_rules: dict[core.Primitive, Callable] = {}
usage_rules: dict[core.Primitive, Callable] = {}


class Usage(enum.Enum):
    REGULAR = 0
    SCALAR_PREFETCH = 1


def _null_block_index_trafo(*block_indices):
    return None


@dataclasses.dataclass
class BlockIndexTransform:
    """A variable's block while pulling: its block shape, and its block indices as a
    function of the output block specs' block indices (one tuple, or None, per output)."""

    block_shape: Sequence[Any] | None
    block_index_transform: Callable[..., Any] = _null_block_index_trafo
    memory_space: Any | None = dataclasses.field(kw_only=True, default=None)
    pipeline_mode: pallas_core.Buffered | None = dataclasses.field(kw_only=True, default=None)

    def replace(self, **kwargs: Any) -> BlockIndexTransform:
        return dataclasses.replace(self, **kwargs)


class NoBlockIndexTransform:
    def __repr__(self) -> str:
        return "NoBlockIndexTransform"


no_block_index_transform = NoBlockIndexTransform()
_illegal = object()


def make_scalar_prefetch_handler(*args: Any) -> Callable:
    """A function picking, from a kernel's scalar-prefetch operands, the one at the index
    path ``args`` (``handler(*sp)`` is ``sp[args[0]][args[1]]...``)."""
    def scalar_prefetch_getter(*sp_inputs):
        result = sp_inputs
        for i in args:
            result = result[i]
        return result

    return scalar_prefetch_getter


def block_size(dim: Any) -> int | None:
    """The number of elements of a block dimension (None for a squeezed one)."""
    if isinstance(dim, (pallas_core.Element, pallas_core.BoundedSlice, pallas_core.Blocked)):
        return dim.block_size
    if dim is None or isinstance(dim, pallas_core.Squeezed):
        return None
    return dim


# --------------------------------------------------------------------------------------------
# Rule contexts
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class PullRuleContext:
    avals_in: tuple
    avals_out: tuple
    out_usages: tuple
    scalar_prefetch_handler: Any | None
    grid_len: int | None
    strict_mode: bool = True
    scalar_prefetch_fn: Any = dataclasses.field(default=None, init=False)


@dataclasses.dataclass
class PushRuleContext:
    avals_in: tuple
    avals_out: tuple


@dataclasses.dataclass
class UsageRuleContext:
    avals_in: tuple
    avals_out: tuple


class _SpEnv(threading.local):
    def __init__(self):
        self.scalar_prefetch = None


_sp_env = _SpEnv()


@contextlib.contextmanager
def _sp_context(*scalar_prefetch):
    previous, _sp_env.scalar_prefetch = _sp_env.scalar_prefetch, scalar_prefetch
    try:
        yield
    finally:
        _sp_env.scalar_prefetch = previous


@dataclasses.dataclass(frozen=True)
class KernelEvalContext:
    """What an eval rule knows: the equation's types, block specs and usages, and the
    kernel's grid indices and scalar-prefetch operands."""

    scalar_prefetch: Any | None
    program_ids: tuple | None
    avals_in: tuple | None
    avals_out: tuple | None
    in_block_specs: tuple
    out_block_specs: tuple
    grid_len: int | None
    scalar_prefetch_handler: Any | None
    out_usages: tuple | None

    def get_program_ids(self):
        if self.program_ids is None:
            raise ValueError("Program ids not available.")
        return self.program_ids

    def _indices(self, specs):
        with _sp_context(*self.scalar_prefetch):
            return tuple(None if bs is pallas_core.no_block_spec else
                         bs.index_map(*self.program_ids) for bs in specs)

    def get_in_block_indices(self):
        return self._indices(self.in_block_specs)

    def get_out_block_indices(self):
        return self._indices(self.out_block_specs)


# --------------------------------------------------------------------------------------------
# Tracing and usages
# --------------------------------------------------------------------------------------------


def make_jaxpr(f: Callable, *args: Any, **kwargs: Any):
    """``f`` traced at its arguments' types: (jaxpr, constant values, in tree, out tree)."""
    flat, in_tree = tree_util.tree_flatten((args, kwargs))
    avals = [core.get_aval(x) for x in flat]
    jaxpr, consts, out_tree = pe.trace_tree_to_jaxpr(lambda a: f(*a[0], **a[1]), in_tree,
                                                     avals, pe.debug_info("make_jaxpr", f, ()))
    return jaxpr, consts, in_tree, out_tree


def compute_usage(jaxpr: core.Jaxpr, out_usages: Sequence[set]) -> Callable:
    """How each variable is used (a set of ``Usage``), walking back from ``out_usages``."""
    env: dict = {}

    def read(v):
        return env.get(v, {Usage.REGULAR})

    def write(v, usage):
        if type(v) is not core.Literal:
            env.setdefault(v, set()).update(usage)

    for v, u in zip(jaxpr.outvars, out_usages):
        write(v, u)
    for eqn in reversed(jaxpr.eqns):
        outs = [read(v) for v in eqn.outvars]
        rule = usage_rules.get(eqn.primitive)
        if rule is not None:
            ctx = UsageRuleContext(tuple(_aval(v) for v in eqn.invars),
                                   tuple(v.aval for v in eqn.outvars))
            ins = rule(ctx, outs if eqn.primitive.multiple_results else outs[0],
                       **eqn.params)
        else:
            ins = [set.union(*outs)] * len(eqn.invars)
        for v, u in zip(eqn.invars, ins):
            write(v, u)
    return read


def _aval(a: Any) -> Any:
    return a.aval


# --------------------------------------------------------------------------------------------
# Pulling block specs
# --------------------------------------------------------------------------------------------


def _get_block_size_for_eq(d: Any) -> Any:
    return d.block_size if isinstance(d, pallas_core.Blocked) else d


def _block_dim_equal(b1: Any, b2: Any) -> bool:
    if b1 is None or b2 is None:
        return b1 is b2
    plain = (int, np.integer, pallas_core.Blocked)
    if isinstance(b1, plain) and isinstance(b2, plain):
        return _get_block_size_for_eq(b1) == _get_block_size_for_eq(b2)
    return type(b1) is type(b2) and block_size(b1) == block_size(b2)


def _block_shapes_equal(s1: Any, s2: Any) -> bool:
    if s1 is None or s2 is None:
        return s1 is s2
    return len(s1) == len(s2) and all(_block_dim_equal(a, b) for a, b in zip(s1, s2))


def _same_index_transform(f1: Callable, f2: Callable, idx_avals: tuple) -> bool:
    if f1 is f2:
        return True
    in_tree = tree_util.tree_structure(idx_avals)
    flat = tree_util.tree_leaves(idx_avals)

    def traced(f):
        jaxpr, consts, _ = pe.trace_tree_to_jaxpr(lambda a: f(*a), in_tree, flat)
        return str(jaxpr), [np.asarray(c).tobytes() for c in consts]

    return traced(f1) == traced(f2)


def _transforms_equal(t1: Any, t2: Any, idx_avals: tuple, strict_mode: bool) -> bool:
    if t1 is t2:
        return True
    if isinstance(t1, BlockIndexTransform) and isinstance(t2, BlockIndexTransform):
        if t1.block_shape is _illegal or t2.block_shape is _illegal:
            return False
        equal = _block_shapes_equal(t1.block_shape, t2.block_shape)
        if strict_mode and equal:
            equal = _same_index_transform(t1.block_index_transform,
                                          t2.block_index_transform, idx_avals)
        return equal
    return False


def _select_block_indices(i: int) -> Callable:
    return lambda *block_indices: block_indices[i]


def _init_block_transforms(specs: tuple) -> tuple:
    # Outputs whose specs have the same block shape and the same index map share their
    # transform, so the DAG check sees them as one.
    leaders: list[int] = []
    for i, bs in enumerate(specs):
        for j in leaders:
            other = specs[j]
            if bs is pallas_core.no_block_spec or other is pallas_core.no_block_spec:
                same = bs is other
            else:
                same = (_block_shapes_equal(bs.block_shape, other.block_shape)
                        and bs.index_map is other.index_map)
            if same:
                leaders.append(j)
                break
        else:
            leaders.append(i)
    return tuple(no_block_index_transform if bs is pallas_core.no_block_spec else
                 BlockIndexTransform(bs.block_shape, _select_block_indices(leaders[i]),
                                     pipeline_mode=bs.pipeline_mode)
                 for i, bs in enumerate(specs))


def _apply_block_transform(specs: tuple, t: Any) -> Any:
    if isinstance(t, NoBlockIndexTransform):
        return pallas_core.no_block_spec
    index_map = None
    if t.block_shape is not None:
        def index_map(*args):
            idx = tuple(None if bs is pallas_core.no_block_spec else bs.index_map(*args)
                        for bs in specs)
            return t.block_index_transform(*idx)
    return pallas_core.BlockSpec(t.block_shape, index_map, memory_space=t.memory_space,
                                 pipeline_mode=t.pipeline_mode)


def _scalar_prefetch_fn(jaxpr: core.Jaxpr, handler: Any, grid_len: Any) -> Callable:
    def fn():
        if grid_len is None:
            raise ValueError("Grid must be provided to pull_block_spec.")
        if handler is None:
            raise ValueError("The fusion reads scalars (scalar prefetch values): give "
                             "pull_block_spec a scalar_prefetch_handler that finds them "
                             "among the kernel's scalar-prefetch operands.")
        args = [a[0] for a in handler(*_sp_env.scalar_prefetch)]  # read from scalar memory
        return core.eval_jaxpr(jaxpr, [], *args)
    return fn


def pull_block_transforms(jaxpr: core.Jaxpr, out_transforms: tuple, *, read_usage: Callable,
                          scalar_prefetch_handler: Any = None, grid_len: Any = None,
                          strict_mode: bool = True) -> tuple[tuple, dict, dict]:
    """Walk ``jaxpr`` backwards from its outputs' transforms: the invars' transforms, every
    variable's, and the scalar-prefetch functions of the equations that read scalars."""
    env: dict = {v: t for v, t in zip(jaxpr.outvars, out_transforms)
                 if type(v) is not core.Literal}
    sp_fns: dict = {}
    idx_avals = tuple(None if isinstance(t, NoBlockIndexTransform) else
                      (core.ShapedArray((), np.dtype(np.int32)),) * len(t.block_shape)
                      for t in out_transforms)

    def read(a):
        return no_block_index_transform if type(a) is core.Literal else \
            env.get(a, no_block_index_transform)

    for i in reversed(range(len(jaxpr.eqns))):
        eqn = jaxpr.eqns[i]
        outs = tuple(read(v) for v in eqn.outvars)
        if all(t is no_block_index_transform for t in outs):
            continue
        rule = pull_block_spec_rules.get(eqn.primitive)
        if rule is None:
            raise NotImplementedError(f"pull_block_spec rule for '{eqn.primitive}' is not "
                                      "implemented")
        ctx = PullRuleContext(tuple(_aval(v) for v in eqn.invars),
                              tuple(v.aval for v in eqn.outvars),
                              tuple(read_usage(v) for v in jaxpr.outvars),
                              scalar_prefetch_handler, grid_len, strict_mode)
        ins = rule(ctx, outs if eqn.primitive.multiple_results else outs[0], **eqn.params)
        sp = [type(v) is not core.Literal and Usage.SCALAR_PREFETCH in read_usage(v)
              for v in eqn.invars]
        if any(sp):
            # the scalars' values, literals included, computed from the captured values
            needed = [v for v, s in zip(eqn.invars, sp) if s or type(v) is core.Literal]
            sub, _ = pe.dce_jaxpr(core.Jaxpr([], jaxpr.constvars, needed, jaxpr.eqns[:i]))
            ctx.scalar_prefetch_fn = sp_fns[i] = _scalar_prefetch_fn(
                sub, scalar_prefetch_handler, grid_len)
        for v, t in zip(eqn.invars, ins):
            if type(v) is core.Literal:
                continue
            if v in env and not _transforms_equal(env[v], t, idx_avals, strict_mode):
                t = BlockIndexTransform(_illegal, _illegal)
            env[v] = t

    def invar_transform(v):
        if read_usage(v) == {Usage.SCALAR_PREFETCH}:
            return None
        t = env.get(v, no_block_index_transform)
        if t is not no_block_index_transform and t.block_shape is _illegal:
            raise ValueError(f"Fusion contains a DAG, cannot uniquely pull block specs:\n"
                             f"{jaxpr}")
        return t

    return tuple(invar_transform(v) for v in jaxpr.invars), env, sp_fns


def _wrap_scalar_prefetch(bs: Any, num_grid_args: int | None) -> Any:
    # The in specs' index maps take the grid indices then the scalar-prefetch operands.
    if bs is None or bs is pallas_core.no_block_spec or bs.index_map is None:
        return bs
    inner = bs.index_map

    def index_map(*args):
        n = len(args) if num_grid_args is None else num_grid_args
        with _sp_context(*args[n:]):
            return inner(*args[:n])

    return dataclasses.replace(bs, index_map=index_map)


def _unwrap_scalar_prefetch(bs: Any) -> Any:
    # The out specs' index maps take the scalar-prefetch operands after the grid indices.
    if bs is pallas_core.no_block_spec or bs.index_map is None:
        return bs
    inner = bs.index_map

    def index_map(*args):
        return inner(*args, *(_sp_env.scalar_prefetch or ()))

    return dataclasses.replace(bs, index_map=index_map)


def _is_spec_leaf(x: Any) -> bool:
    return x is None or isinstance(x, (pallas_core.BlockSpec, pallas_core._NoBlockSpec))


def pull_block_spec(f: Callable, out_block_specs: Any, *, scalar_prefetch_handler: Any = None,
                    grid_len: int | None = None, strict_mode: bool = True) -> Callable:
    """``pull_block_spec(f, out_specs)(*args)`` gives ``(kernel_fn, arg_specs, kwarg_specs)``:
    the block specs of ``f``'s arguments that make its outputs' blocks ``out_specs``, and
    ``kernel_fn(program_ids, scalar_prefetch, *arg_blocks)`` computing the output blocks."""
    def wrapped(*args, **kwargs):
        jaxpr, consts, in_tree, out_tree = make_jaxpr(f, *args, **kwargs)
        jaxpr, _ = pe.dce_jaxpr(jaxpr)
        read_usage = compute_usage(jaxpr, [{Usage.REGULAR}] * len(jaxpr.outvars))
        specs = tree_util.tree_map(_unwrap_scalar_prefetch, out_block_specs,
                                   is_leaf=_is_spec_leaf)
        flat_specs = tuple(tree_util.tree_leaves(specs, is_leaf=_is_spec_leaf))
        out_transforms = _init_block_transforms(flat_specs)
        in_ts, env, sp_fns = pull_block_transforms(
            jaxpr, out_transforms, read_usage=read_usage,
            scalar_prefetch_handler=scalar_prefetch_handler, grid_len=grid_len,
            strict_mode=strict_mode)
        spec_env = {v: _apply_block_transform(flat_specs, t) for v, t in env.items()
                    if t is not None}
        in_specs = tuple(None if t is None else _apply_block_transform(flat_specs, t)
                         for t in in_ts)
        kernel_fn = make_kernel_function(jaxpr, consts, in_tree, out_tree, read_usage, in_specs,
                                         spec_env, sp_fns, scalar_prefetch_handler, grid_len)
        in_specs = [_wrap_scalar_prefetch(bs, grid_len) for bs in in_specs]
        arg_specs, kwarg_specs = tree_util.tree_unflatten(in_tree, in_specs)
        return kernel_fn, arg_specs, kwarg_specs

    return wrapped


_NO_AVAL = object()


def make_kernel_function(jaxpr: core.Jaxpr, consts: Sequence, in_tree: Any, out_tree: Any,
                         read_usage: Callable, in_specs: tuple, spec_env: dict, sp_fns: dict,
                         scalar_prefetch_handler: Any, grid_len: Any) -> Callable:
    """The function evaluating ``jaxpr`` on blocks: ``kernel_fn(program_ids, scalar_prefetch,
    *args, **kwargs)``, the arguments being the blocks the in specs select."""
    usages = [read_usage(v) for v in jaxpr.invars]

    def block_aval(bs, aval):
        if state.is_ref_aval(aval):
            return aval
        if bs is None or bs is pallas_core.no_block_spec:
            return _NO_AVAL  # a leaf: the kernel still takes (and ignores) an argument
        if bs.block_shape is None:
            return aval
        return aval.update(shape=tuple(s for s in map(block_size, bs.block_shape)
                                       if s is not None))

    kernel_in_type = tree_util.tree_unflatten(
        in_tree, [block_aval(bs, v.aval) for bs, v in zip(in_specs, jaxpr.invars)])
    kernel_in_tree = tree_util.tree_structure(kernel_in_type)

    def spec_of(a):
        return pallas_core.no_block_spec if type(a) is core.Literal else \
            spec_env.get(a, pallas_core.no_block_spec)

    def kernel_fn(program_ids, scalar_prefetch, *args, **kwargs):
        flat, tree = tree_util.tree_flatten((args, kwargs))
        if tree != kernel_in_tree:
            raise ValueError(f"Expected {kernel_in_type} PyTree, got {tree}")
        env: dict = dict(zip(jaxpr.constvars, consts))
        for v, x, u in zip(jaxpr.invars, flat, usages):
            if Usage.REGULAR in u:
                env[v] = x

        def read(a):
            return a.val if type(a) is core.Literal else env.get(a)

        for i, eqn in enumerate(jaxpr.eqns):
            if not any(Usage.REGULAR in read_usage(v) for v in eqn.outvars):
                continue
            rule = eval_rules.get(eqn.primitive)
            if rule is None:
                raise NotImplementedError(f"fusion eval rule for '{eqn.primitive}' is not "
                                          "implemented")
            vals = [read(a) for a in eqn.invars]
            sp_fn = sp_fns.get(i)
            if sp_fn is not None:
                with _sp_context(*scalar_prefetch):
                    sp_vals = iter(sp_fn())
                for k, a in enumerate(eqn.invars):
                    if type(a) is core.Literal:
                        next(sp_vals)
                    elif Usage.SCALAR_PREFETCH in read_usage(a):
                        vals[k] = next(sp_vals)
            ctx = KernelEvalContext(
                scalar_prefetch, tuple(program_ids), tuple(_aval(a) for a in eqn.invars),
                tuple(v.aval for v in eqn.outvars), tuple(map(spec_of, eqn.invars)),
                tuple(map(spec_of, eqn.outvars)), grid_len, scalar_prefetch_handler,
                tuple(read_usage(v) for v in eqn.outvars))
            outs = rule(ctx, *vals, **eqn.params)
            env.update(zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]))
        return tree_util.tree_unflatten(out_tree, [read(v) for v in jaxpr.outvars])

    return kernel_fn


# --------------------------------------------------------------------------------------------
# Pushing block specs
# --------------------------------------------------------------------------------------------


def push_block_spec(f: Callable, *in_spec_args: Any, **in_spec_kwargs: Any) -> Callable:
    """``push_block_spec(f, *in_specs)(*args)``: the block specs of ``f``'s outputs when its
    arguments are blocked by ``in_specs`` (``pl.no_block_spec`` for unblocked ones)."""
    def wrapper(*args, **kwargs):
        flat_specs, spec_tree = tree_util.tree_flatten((in_spec_args, in_spec_kwargs),
                                                       is_leaf=_is_spec_leaf)
        jaxpr, _, in_tree, out_tree = make_jaxpr(f, *args, **kwargs)
        if in_tree != spec_tree:
            raise ValueError(f"Expected {in_tree} PyTree, got {spec_tree}")
        return tree_util.tree_unflatten(out_tree, push_block_specs(jaxpr, *flat_specs))

    return wrapper


def push_block_specs(jaxpr: core.Jaxpr, *specs: Any) -> tuple:
    """The outputs' block specs of ``jaxpr`` from its invars' ``specs``."""
    if len(specs) != len(jaxpr.invars):
        raise ValueError(f"Expected {len(jaxpr.invars)} block specs, got {len(specs)}")
    no = pallas_core.no_block_spec
    env: dict = dict(zip(jaxpr.invars, specs))
    env.update((v, no) for v in jaxpr.constvars)

    def read(a):
        return no if type(a) is core.Literal else env[a]

    for eqn in jaxpr.eqns:
        ins = tuple(read(a) for a in eqn.invars)
        if all(bs is no for bs in ins):
            env.update((v, no) for v in eqn.outvars)
            continue
        rule = push_block_spec_rules.get(eqn.primitive)
        if rule is None:
            raise NotImplementedError(f"push_block_spec rule for '{eqn.primitive}' is not "
                                      "implemented")
        ctx = PushRuleContext(tuple(_aval(a) for a in eqn.invars),
                              tuple(v.aval for v in eqn.outvars))
        outs = rule(ctx, *ins, **eqn.params)
        env.update(zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]))
    outs = [read(v) for v in jaxpr.outvars]
    valid = next(bs for bs in specs if bs is not no)
    return tuple(valid if bs is no else bs for bs in outs)


# --------------------------------------------------------------------------------------------
# Fusion values
# --------------------------------------------------------------------------------------------


def get_fusion_values(fusion: Callable, *args: Any, **kwargs: Any) -> tuple:
    """Split ``fusion`` into ``(fn, values, scalar_prefetch_values)``: the arrays it reads
    (blocked operands, then the scalars only broadcasts use) and ``fn(values, *args)``."""
    return _get_fusion_values(fusion, args, kwargs)


def get_stateful_input_fusion_values(fusion: Callable, *args: Any, **kwargs: Any) -> tuple:
    """As ``get_fusion_values``, for a fusion that reads ``Ref``s: they are read as values."""
    return _get_fusion_values(fusion, args, kwargs, discharge_refs=True)


def get_stateful_output_fusion_values(fusion: Callable, *args: Any, **kwargs: Any) -> tuple:
    """As ``get_stateful_input_fusion_values``, for a fusion writing ``Ref``s: ``fn`` also
    returns the refs' new values, and a fourth result maps those outputs to the values."""
    return _get_fusion_values(fusion, args, kwargs, discharge_refs=True,
                              allow_additional_outputs=True)


def _discharge(jaxpr: core.Jaxpr, values: list, keep_writes: bool):
    # Refs among the captured values become values; with ``keep_writes`` the jaxpr also
    # returns the final value of each ref it writes.
    is_ref = [state.is_ref_aval(v.aval) for v in jaxpr.constvars]
    if not any(is_ref):
        return jaxpr, values, {}
    n_out = len(jaxpr.outvars)
    pure, pure_consts = state.discharge_jaxpr(pe.convert_constvars_jaxpr(jaxpr))
    assert not pure_consts
    ref_outs = pure.outvars[n_out:]
    ref_idx = [i for i, r in enumerate(is_ref) if r]
    written = [i for i, o in zip(ref_idx, ref_outs)
               if o is not pure.invars[i]] if keep_writes else []
    outvars = pure.outvars[:n_out] + [o for i, o in zip(ref_idx, ref_outs) if i in written]
    n_c = len(jaxpr.constvars)
    new = core.Jaxpr(pure.invars[:n_c], pure.invars[n_c:], outvars, pure.eqns)
    new, _ = pe.dce_jaxpr(new)
    # the values stay the refs themselves (a kernel reads them), as in JAX
    return new, values, {n_out + k: i for k, i in enumerate(written)}


def _get_fusion_values(fusion, args, kwargs, discharge_refs: bool = False,
                       allow_additional_outputs: bool = False):
    jaxpr, values, _, out_tree = make_jaxpr(fusion, *args, **kwargs)
    if any(isinstance(v, state.Ref) for v in values) and not discharge_refs:
        raise ValueError("Ref values are only supported in get_fusion_values when "
                         "discharge_refs is True.")
    aliases: dict = {}
    if discharge_refs:
        jaxpr, values, aliases = _discharge(jaxpr, list(values), allow_additional_outputs)
    read_usage = compute_usage(jaxpr, [{Usage.REGULAR}] * len(jaxpr.outvars))
    is_sp = [Usage.SCALAR_PREFETCH in read_usage(v) for v in jaxpr.constvars]
    regular = tuple(v for v, s in zip(values, is_sp) if not s)
    sp_values = tuple(v for v, s in zip(values, is_sp) if s)
    n_out = out_tree.num_leaves

    def new_kernel_fn(values, *args, **kwargs):
        it, sp_it = iter(values), iter(sp_values)
        merged = [next(sp_it) if s else next(it) for s in is_sp]
        out = core.eval_jaxpr(jaxpr, merged, *tree_util.tree_leaves((args, kwargs)))
        if discharge_refs and len(out) > n_out:
            result = tree_util.tree_unflatten(out_tree, out[:n_out])
            return (result, tuple(out[n_out:])) if allow_additional_outputs else result
        return tree_util.tree_unflatten(out_tree, out)

    if discharge_refs and allow_additional_outputs:
        return new_kernel_fn, regular, sp_values, aliases
    return new_kernel_fn, regular, sp_values
