"""``pallas_call``: run a kernel written on refs over a grid of blocks, and its primitive
``pallas_call_p`` with all its rules.

``pallas_call(kernel, out_shape, grid=..., in_specs=..., out_specs=...)(*args)`` traces the
kernel once to a jaxpr over refs to blocks (inputs, then outputs) and each block spec's index
map to a jaxpr of the grid indices. The primitive carries them (printed with JAX's parameter
names); its rules:

- lowering: interpret mode (``interpret=True``) lowers to the grid loop of ``interpret``;
  without it, on the CPU, JAX's ``ValueError`` (only the TPU/GPU compilers run kernels);
- JVP: the kernel's JVP, with tangent refs using the blocks of their primals;
- vmap: a new leading grid axis over the batch (the kernel itself is unchanged, its
  ``program_id`` axes count from after the vmapped ones);
- no transpose: reverse mode fails as JAX's does.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np

from jaxkit import core, tree_util
from jaxkit.experimental.pallas.core import (BlockMapping, BlockSpec, Blocked, Element,
                                             GridMapping, GridSpec, MemoryRef, MemorySpace,
                                             Squeezed,
                                             _NoBlockSpec, no_block_spec)
from jaxkit.experimental.pallas import tpu_interpret_state
from jaxkit.experimental.pallas.interpret import interpret_pallas_call, interpreting
from jaxkit.experimental.pallas.primitives import kernel_grid, program_id_p
from jaxkit.interpreters import ad, batching, dispatch, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters import state
from jaxkit.interpreters.state import AbstractRef

__all__ = ["pallas_call", "pallas_call_p"]

_I32 = core.ShapedArray((), np.dtype(np.int32))


def _is_spec_leaf(x: Any) -> bool:
    return x is None or isinstance(x, (BlockSpec, _NoBlockSpec))


def _src(fun: Callable) -> str:
    info = pe.debug_info("pallas_call", fun, ())
    where = f" at {info.func_src_info}" if info.func_src_info else ""
    return f"{info.func_name}{where}"


def _block_dims(spec_shape, aval, origin: str) -> tuple:
    dims = []
    for d in spec_shape:
        if d is None or isinstance(d, Squeezed):
            dims.append(Squeezed())
        elif isinstance(d, (Blocked, Element)):
            dims.append(d)
        elif isinstance(d, (int, np.integer)):
            dims.append(Blocked(int(d)))
        else:
            raise NotImplementedError(f"pallas_call block dimension {d!r} for {origin} is not "
                                      "implemented in jaxkit (use ints, None, pl.Blocked, "
                                      "pl.Element or pl.Squeezed)")
    if len(dims) != aval.ndim:
        raise ValueError(f"Block shape for {origin} (= {tuple(dims)}) must have the same "
                         f"number of dimensions as the array shape {aval.shape}.")
    return tuple(dims)


def _index_map_jaxpr(index_map: Callable | None, n_grid: int, block_shape: tuple,
                     origin: str, index_avals: tuple = ()) -> core.ClosedJaxpr:
    if index_map is None:
        def index_map(*_):
            return (0,) * len(block_shape)

    def flat(*idx):
        out = index_map(*idx)
        out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(out) != len(block_shape):
            raise ValueError(f"Index map function {_src(index_map)} for {origin} must return "
                             f"{len(block_shape)} values to match block_shape="
                             f"{block_shape}. Currently returning {len(out)} values.")
        return [_as_i32(o) for o in out]

    jaxpr, consts = pe.trace_to_jaxpr(flat, [_I32] * n_grid + list(index_avals))
    if consts:
        raise ValueError(f"Index map function {_src(index_map)} for {origin} must not capture "
                         "constants; compute its results from the grid indices.")
    return core.ClosedJaxpr(jaxpr, [])


def _as_i32(x):
    aval = core.get_aval(x)
    if aval.shape or not np.issubdtype(aval.dtype, np.integer):
        raise ValueError(f"Index map functions must return integer scalars, got {aval}.")
    return x if isinstance(x, core.Tracer) else np.int32(x)


def _block_mapping(spec, aval, n_grid: int, origin: str, index_avals: tuple) -> BlockMapping:
    if spec is None or isinstance(spec, _NoBlockSpec):
        spec = BlockSpec()
    space = spec.memory_space
    shape = spec.block_shape
    if shape is None:
        shape = aval.shape
    dims = _block_dims(shape, aval, origin)
    index_map = _index_map_jaxpr(spec.index_map, n_grid, dims, origin, index_avals)
    return BlockMapping(dims, index_map, aval, space)


def _kernel_ref_aval(bm: BlockMapping) -> AbstractRef:
    space = MemorySpace.DEFAULT if bm.memory_space is None else bm.memory_space
    inner = core.ShapedArray(bm.kernel_shape, bm.array_aval.dtype)
    return AbstractRef(inner, space)


def _scratch_aval(s) -> AbstractRef:
    if hasattr(s, "memory_ref"):  # a kind of buffer with a default type (SemaphoreType.DMA)
        s = s.memory_ref()
    if not isinstance(s, MemoryRef):
        raise NotImplementedError(f"pallas_call scratch shape {s!r} is not implemented in "
                                  "jaxkit (give buffers as pltpu.VMEM(shape, dtype) or "
                                  "pl.MemorySpace...(shape, dtype))")
    aval = s.inner_aval
    return AbstractRef(core.ShapedArray(aval.shape, np.dtype(aval.dtype)),
                       MemorySpace.DEFAULT if s.memory_space is None else s.memory_space)


def _flat_specs(specs, n: int, what: str) -> list:
    if specs is no_block_spec:
        return [no_block_spec] * n
    if isinstance(specs, BlockSpec):
        specs = (specs,)
    flat = tree_util.tree_flatten(specs, is_leaf=_is_spec_leaf)[0]
    if len(flat) != n:
        other = "inputs" if what == "in_specs" else "out_shape"
        raise ValueError(f"Pytree for `{what}` and {other} do not match: {len(flat)} block "
                         f"specs for {n} arrays. Give one BlockSpec per array.")
    return flat


def pallas_call(kernel: Callable[..., None], out_shape: Any, *,
                grid_spec: GridSpec | None = None, grid: Any = (),
                in_specs: Any = no_block_spec, out_specs: Any = no_block_spec,
                scratch_shapes: Any = (), input_output_aliases: Mapping[int, int] = {},
                debug: bool = False, interpret: Any = False, name: str | None = None,
                compiler_params: Any = None, cost_estimate: Any = None,
                metadata: dict[str, str] | None = None) -> Callable[..., Any]:
    """A function running ``kernel`` over a grid: ``kernel(*input_refs, *output_refs)`` sees
    the blocks the block specs select for each grid index and writes its outputs' blocks.
    ``interpret=True`` runs it as ordinary XLA code (the way to run Pallas on a CPU)."""
    # as JAX: TPU interpret mode forced where the call is made applies to it
    interpret = tpu_interpret_state.interpret_override() or interpret
    if grid_spec is None:
        grid_spec = GridSpec(grid, in_specs, out_specs, scratch_shapes)
    elif grid != () or in_specs is not no_block_spec or out_specs is not no_block_spec:
        raise ValueError("If `grid_spec` is specified, then `grid`, `in_specs` and "
                         "`out_specs` must not be.")
    out_flat, out_tree = tree_util.tree_flatten(out_shape)
    out_avals = tuple(core.ShapedArray(tuple(o.shape), np.dtype(o.dtype)) for o in out_flat)

    def wrapped(*args):
        n_idx = getattr(grid_spec, "num_scalar_prefetch", 0)
        idx_flat, idx_tree = tree_util.tree_flatten(args[:n_idx])
        flat_args, in_tree = tree_util.tree_flatten(args[n_idx:])
        space = getattr(grid_spec, "index_memory_space", MemorySpace.INDEX)
        index_avals = tuple(AbstractRef(core.get_aval(x).strip_weak_type(), space)
                            for x in idx_flat)
        in_avals = [core.get_aval(x).strip_weak_type() for x in flat_args]
        n_grid = len(grid_spec.grid)
        in_bms = [_block_mapping(s, a, n_grid, f"args[{i}]", index_avals)
                  for i, (s, a) in enumerate(zip(
                      _flat_specs(grid_spec.in_specs, len(in_avals), "in_specs"), in_avals))]
        out_bms = [_block_mapping(s, a, n_grid, f"outputs[{i}]", index_avals)
                   for i, (s, a) in enumerate(zip(
                       _flat_specs(grid_spec.out_specs, len(out_avals), "out_specs"),
                       out_avals))]
        scratch = tree_util.tree_leaves(grid_spec.scratch_shapes, is_leaf=lambda x: isinstance(
            x, MemoryRef) or hasattr(x, "memory_ref"))
        gm = GridMapping(grid_spec.grid, tuple(in_bms + out_bms), len(in_bms),
                         grid_names=grid_spec.grid_names,
                         scratch_avals=tuple(_scratch_aval(s) for s in scratch),
                         index_avals=index_avals)
        with interpreting(interpret):  # (the buffers the kernel allocates start as it says)
            jaxpr = _trace_kernel(kernel, gm, idx_tree, in_tree, out_tree)
        aliases = tuple(sorted(dict(input_output_aliases).items()))
        operand_avals = [a.inner_aval for a in index_avals] + in_avals
        for i, o in aliases:
            if operand_avals[i] != out_avals[o]:
                raise ValueError(f"input_output_aliases: input {i} of type "
                                 f"{operand_avals[i]} cannot alias output {o} of type "
                                 f"{out_avals[o]}.")
        outs = pallas_call_p.bind(
            *idx_flat, *flat_args, jaxpr=jaxpr, grid_mapping=gm, out_avals=out_avals,
            input_output_aliases=aliases, debug=debug, interpret=interpret, name=name,
            compiler_params=compiler_params, cost_estimate=cost_estimate, mesh=None,
            metadata=metadata)
        return tree_util.tree_unflatten(out_tree, outs)

    return wrapped


def _trace_kernel(kernel: Callable, gm: GridMapping, idx_tree, in_tree,
                  out_tree) -> core.Jaxpr:
    avals = [*gm.index_avals, *(_kernel_ref_aval(bm) for bm in gm.block_mappings),
             *gm.scratch_avals]
    n_idx = len(gm.index_avals)
    n_in, n_io = n_idx + gm.num_inputs, n_idx + len(gm.block_mappings)
    returned = []

    def flat(*refs):
        idx = tree_util.tree_unflatten(idx_tree, refs[:n_idx])
        ins = tree_util.tree_unflatten(in_tree, refs[n_idx:n_in])
        outs = tree_util.tree_unflatten(out_tree, refs[n_in:n_io])
        outs = outs if isinstance(outs, tuple) else (outs,)
        returned.append(kernel(*idx, *ins, *outs, *refs[n_io:]))
        return []

    with kernel_grid(gm.grid):
        jaxpr, consts = pe.trace_to_jaxpr(flat, avals,
                                          pe.debug_info("pallas_call", kernel, ()))
    if consts:
        shown = ", ".join(core.get_aval(c).str_short() for c in consts)
        raise ValueError(f"The kernel function in the pallas_call {_src(kernel)} captures "
                         f"constants [{shown}]. You should pass them as inputs.")
    if returned[0] is not None:
        raise ValueError(f"The kernel function in the pallas_call {_src(kernel)} should "
                         f"return None. It returns a PyTree: "
                         f"{tree_util.tree_structure(returned[0])}")
    return jaxpr


# --------------------------------------------------------------------------------------------
# The primitive
# --------------------------------------------------------------------------------------------

pallas_call_p = core.Primitive("pallas_call")
pallas_call_p.multiple_results = True
pallas_call_p.def_abstract_eval(lambda *avals, out_avals, **_: list(out_avals))
pallas_call_p.def_impl(partial(dispatch.apply_primitive, pallas_call_p))
state.self_contained_ref_primitives.add(pallas_call_p)  # the kernel's refs stay inside


def _pallas_call_lowering(ctx, *args, interpret, **params):
    if params["jaxpr"].constvars:
        raise ValueError("Cannot lower a pallas_call with constants.")
    if not interpret:
        raise ValueError("Only interpret mode is supported on CPU backend.")
    return mlir.lower_fun(interpret_pallas_call, multiple_results=True)(
        ctx, *args, interpret=interpret, **params)


mlir.register_lowering(pallas_call_p, _pallas_call_lowering)


def _pallas_call_jvp(primals, tangents, *, jaxpr, grid_mapping, out_avals,
                     input_output_aliases, **params):
    if input_output_aliases:
        raise NotImplementedError("JVP with aliasing not supported.")
    gm = grid_mapping
    if gm.scratch_avals or gm.index_avals:
        raise NotImplementedError("JVP rule for 'pallas_call' with scratch_shapes or scalar "
                                  "prefetch is not implemented")
    n_in, n_out = gm.num_inputs, len(out_avals)
    nz = [not ad.is_zero(t) for t in tangents]
    k = sum(nz)
    ref_avals = [v.aval for v in jaxpr.invars]
    in_refs, out_refs = ref_avals[:n_in], ref_avals[n_in:]
    avals = [*in_refs, *(a for a, z in zip(in_refs, nz) if z), *out_refs, *out_refs]

    def jvp_kernel(*refs):
        ins, t_ins = refs[:n_in], iter(refs[n_in:n_in + k])
        outs, t_outs = refs[n_in + k:n_in + k + n_out], refs[n_in + k + n_out:]
        t_in = [next(t_ins) if z else ad.Zero(a.to_tangent_aval())
                for a, z in zip(in_refs, nz)]
        ad.jvp_flat(lambda *r: core.eval_jaxpr(jaxpr, [], *r), [*ins, *outs],
                    [*t_in, *t_outs], transform_stack=False)
        return []

    with kernel_grid(gm.grid[gm.vmapped_dims:]):
        new_jaxpr, consts = pe.trace_to_jaxpr(jvp_kernel, avals, jaxpr.debug_info)
    assert not consts, consts
    in_bms, out_bms = gm.in_mappings, gm.out_mappings
    new_gm = GridMapping(gm.grid, (*in_bms, *(b for b, z in zip(in_bms, nz) if z), *out_bms,
                                   *out_bms), n_in + k, gm.vmapped_dims, gm.grid_names)
    outs = pallas_call_p.bind(*primals, *(t for t, z in zip(tangents, nz) if z),
                              jaxpr=new_jaxpr, grid_mapping=new_gm,
                              out_avals=(*out_avals, *out_avals), input_output_aliases=(),
                              **params)
    return outs[:n_out], outs[n_out:]


ad.defjvp_rule(pallas_call_p, _pallas_call_jvp)
ad.defjvp_zero(program_id_p)


def _prepend_batch_index(index_map: core.ClosedJaxpr, batched: bool) -> core.ClosedJaxpr:
    def f(b, *idx):
        out = core.eval_jaxpr(index_map.jaxpr, index_map.consts, *idx)
        return [b, *out] if batched else out

    jaxpr, consts = pe.trace_to_jaxpr(f, [_I32, *index_map.in_avals])
    return core.ClosedJaxpr(jaxpr, consts)


def _batch_mapping(bm: BlockMapping, batched: bool, size: int) -> BlockMapping:
    if not batched:
        return BlockMapping(bm.block_shape, _prepend_batch_index(bm.index_map, False),
                            bm.array_aval, bm.memory_space)
    return BlockMapping((Squeezed(), *bm.block_shape),
                        _prepend_batch_index(bm.index_map, True),
                        bm.array_aval.insert_dim(0, size), bm.memory_space)


def _pallas_call_batch(axis_data, vals, dims, *, grid_mapping, out_avals,
                       input_output_aliases, **params):
    gm, size = grid_mapping, axis_data.size
    n_idx = len(gm.index_avals)
    if any(d is not batching.not_mapped for d in dims[:n_idx]):
        raise NotImplementedError("batching rule for 'pallas_call' with batched scalar-prefetch "
                                  "operands is not implemented")
    idx_vals, vals, dims = vals[:n_idx], vals[n_idx:], dims[n_idx:]
    aliased_ins = {i - n_idx for i, _ in input_output_aliases}
    vals = [batching.bdim_at_front(x, d, size)
            if d is not batching.not_mapped or i in aliased_ins else x
            for i, (x, d) in enumerate(zip(vals, dims))]
    batched = [d is not batching.not_mapped or i in aliased_ins for i, d in enumerate(dims)]
    bms = ([_batch_mapping(bm, b, size) for bm, b in zip(gm.in_mappings, batched)]
           + [_batch_mapping(bm, True, size) for bm in gm.out_mappings])
    new_gm = GridMapping((size, *gm.grid), tuple(bms), gm.num_inputs, gm.vmapped_dims + 1,
                         gm.grid_names, gm.scratch_avals, gm.index_avals)
    outs = pallas_call_p.bind(*idx_vals, *vals, grid_mapping=new_gm,
                              out_avals=tuple(a.insert_dim(0, size) for a in out_avals),
                              input_output_aliases=input_output_aliases, **params)
    return outs, [0] * len(outs)


batching.defrule(pallas_call_p, _pallas_call_batch)
