"""``jit`` over a mesh: programs that XLA's SPMD partitioner splits over many devices.

A jitted call is partitioned when ``jit`` was given ``in_shardings``/``out_shardings`` or an
argument is an array laid out by a ``NamedSharding``. jaxkit then only *annotates*: the
module declares the mesh and each parameter's layout in Shardy attributes (results too, when
``out_shardings`` fixes them; ``with_sharding_constraint`` pins values inside), and XLA
partitions it, propagating layouts and inserting the collectives. The layouts XLA chose for
the outputs are read back from the executable and become the results' ``NamedSharding``s.

Arguments that carry no layout (NumPy values, single-device arrays) are replicated over the
mesh; a ``ShardedArray`` already in the layout its parameter wants is passed as it is, any
other is laid out again through the host.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import avals as avals_mod
from jaxkit import core, dtypes
from jaxkit import tree_util
from jaxkit.core import ClosedJaxpr, ShapedArray
from jaxkit.interpreters import dispatch, mlir
from jaxkit.lax.sharding import (concrete_mesh_for, declare_sdy_mesh, reshard_p,
                                 sdy_mesh_symbol, sharding_constraint_p)
from jaxkit.runtime import context_mesh, multi_device
from jaxkit.runtime.array import Array
from jaxkit.runtime.sharded_array import ShardedArray
from jaxkit.runtime.sharding import (UNSPECIFIED, AbstractMesh, AxisType, GSPMDSharding, Mesh,
                                     NamedSharding, PartitionSpec, compile_partitioned,
                                     current_mesh, named_from_hlo, lift_inlined_meshes,
                                     output_hlo_shardings, parameter_hlo_shardings,
                                     physical_sharding, put_global, shardings_equivalent)

__all__ = ["ShardingPlan", "PartitionedProgram", "first_mesh", "is_laid_out", "input_shardings",
           "output_shardings"]


def is_laid_out(x: Any) -> bool:
    """Whether ``x`` is an array laid out over a mesh (its calls are partitioned)."""
    x = data_of(x)
    return type(x) is ShardedArray and type(x._sharding) is NamedSharding


def data_of(x: Any) -> Any:
    """The array holding ``x``: a concrete key array's data, laid out as the keys are."""
    dtype = getattr(x, "dtype", None)
    if dtypes.is_extended(dtype) and not isinstance(x, core.Tracer):
        return dtype.to_physical(x)
    return x


def _is_sharding_leaf(x: Any) -> bool:
    return x is None or isinstance(x, NamedSharding)


def resolve_specs(given: Any, what: str) -> Any:
    """jit's ``in_shardings``/``out_shardings`` with every ``PartitionSpec`` laid over the mesh
    in context, as JAX resolves them when the function is called (JAX's RuntimeError when
    there is none)."""
    is_leaf = lambda s: _is_sharding_leaf(s) or isinstance(s, PartitionSpec)  # noqa: E731
    leaves, treedef = tree_util.tree_flatten(given, is_leaf=is_leaf)
    if not any(isinstance(s, PartitionSpec) for s in leaves):
        return given
    mesh = current_mesh()
    if mesh is None or not mesh.axis_names:
        raise RuntimeError(
            f"jit requires a non-empty mesh in context if you are passing `PartitionSpec`s to "
            f"{what}. You can define a context mesh via `jax.set_mesh(mesh)`. Alternatively, "
            f"provide `Sharding`s to {what} and then the mesh context manager is not required.")
    return tree_util.tree_unflatten(treedef, [
        NamedSharding(mesh, s) if isinstance(s, PartitionSpec) else s for s in leaves])


def _check_sharding(s: Any, what: str) -> None:
    if not _is_sharding_leaf(s):
        raise TypeError(f"jit's {what} must be NamedShardings (or None for 'unspecified'), "
                        f"got {s!r}")


def _per_leaf(prefix: Any, full: Any, what: str) -> list:
    """One sharding (or None) per leaf of ``full``, from ``prefix`` (one sharding for all, or a
    pytree prefix of ``full``)."""
    n = len(tree_util.tree_leaves(full))
    if _is_sharding_leaf(prefix):
        return [prefix] * n
    leaves, prefix_def = tree_util.tree_flatten(prefix, is_leaf=_is_sharding_leaf)
    for s in leaves:
        _check_sharding(s, what)
    try:
        subtrees = prefix_def.flatten_up_to(full)
    except (ValueError, TypeError) as e:
        raise ValueError(f"jit's {what} must be a single sharding or a pytree prefix of the "
                         f"{'arguments' if what == 'in_shardings' else 'outputs'}: {e}") from None
    return [s for s, sub in zip(leaves, subtrees) for _ in tree_util.tree_leaves(sub)]


def _common_mesh(shardings: Sequence[NamedSharding | None],
                 mesh: Mesh | None = None) -> Mesh | None:
    meshes = [] if mesh is None else [mesh]
    for s in shardings:
        if s is not None and s.mesh not in meshes:
            meshes.append(s.mesh)
    if len(meshes) > 1:
        raise ValueError(f"jit got arrays laid out on different meshes ({meshes[0]} and "
                         f"{meshes[1]}); lay them out on one mesh (jaxkit.device_put(x, "
                         "NamedSharding(mesh, spec))) before the call.")
    return meshes[0] if meshes else None


def first_mesh(shardings: Any) -> Mesh | None:
    """The mesh of the first ``NamedSharding`` in a pytree of shardings (None if none): the
    mesh that arguments without a layout are replicated over when only ``out_shardings``
    names one."""
    leaves = tree_util.tree_leaves(resolve_specs(shardings, "out_shardings"),
                                   is_leaf=_is_sharding_leaf)
    return next((s.mesh for s in leaves if isinstance(s, NamedSharding)), None)


def check_annotation(sharding: NamedSharding, shape: Sequence[int], what: str,
                     path: Callable[[], str | None] = lambda: None) -> None:
    """Raise unless ``sharding`` can lay out a value of ``shape``: a rank too small is JAX's
    error naming the value (``what``: "pjit arguments", "pjit outputs", "device_put args";
    ``path()``: its key path, computed only for the error); an indivisible dimension is
    ``IndivisibleError``, unprefixed, as in JAX."""
    try:
        sharding.check_compatible_aval(shape)
    except ValueError as e:
        where = f" with pytree key path {p}" if (p := path()) else ""
        raise ValueError(f"One of {what}{where} is incompatible with its sharding annotation "
                         f"{sharding!r}: {e}") from None
    sharding.check_shape(shape)


def given_input_shardings(given: Any, dyn_args: tuple, n_flat: int) -> list:
    """The sharding jit's ``in_shardings`` asks for each of ``n_flat`` argument leaves (of
    the positional ``dyn_args``, then keyword arguments), or None."""
    given = resolve_specs(given, "in_shardings")
    wanted = _per_leaf(given, dyn_args, "in_shardings") if given is not None else \
        [None] * len(tree_util.tree_leaves(dyn_args))
    return wanted + [None] * (n_flat - len(wanted))  # keyword arguments: their own layout


def equation_shardings(in_given: Any, out_given: Any, dyn_args: tuple, flat: Sequence,
                       out_tree: Any, out_avals: Sequence[ShapedArray],
                       names: Callable[[], Sequence[str]]) -> tuple[list, list]:
    """A nested jit equation's ``in_shardings`` (per leaf of ``flat``) and ``out_shardings``
    from those given to ``jit``: ``UNSPECIFIED`` where none is; each checked against its
    value's shape."""
    in_s = given_input_shardings(in_given, dyn_args, len(flat))
    for i, (s, x) in enumerate(zip(in_s, flat)):
        if s is not None:
            check_annotation(s, core.get_aval(x).shape, "pjit arguments",
                             lambda i=i: (names()[i:i + 1] or [None])[0])
    out_s = output_shardings(out_given, out_tree, out_avals)
    return ([UNSPECIFIED if s is None else s for s in in_s],
            [UNSPECIFIED if s is None else s for s in out_s])


def input_shardings(given: Any, dyn_args: tuple, dyn_kwargs: dict, flat: Sequence,
                    avals: Sequence[ShapedArray], mesh: Mesh | None = None,
                    names: Callable[[], Sequence[str]] = tuple
                    ) -> tuple[NamedSharding | None, ...] | None:
    """The layout of every argument leaf: jit's ``in_shardings`` (for positional arguments),
    else the argument's own (all of them on one mesh, which is ``mesh`` when given), else
    None: unspecified, as JAX leaves an argument not laid out (host data, an array on the
    default device), XLA's to choose (over a mesh with Explicit axes its type says it is
    replicated: so it is). None when nothing names a mesh (``in_shardings`` a pytree of
    None, which is "unspecified", as Flax's ``nnx.jit`` passes): the call is not
    partitioned."""
    wanted = given_input_shardings(given, dyn_args, len(flat))
    chosen = []
    for w, x, a in zip(wanted, flat, avals):
        own = None
        if is_laid_out(x):  # (keys: their layout, spelled for their rank, not their data's)
            own = x._sharding if type(x) is ShardedArray else x.sharding
        if w is not None and own is not None and w != own:
            raise ValueError(
                "Sharding passed to jit does not match the sharding on the respective arg. "
                f"Got jit sharding: {w},\narg sharding: {own} for arg type: "
                f"{a.str_short(short_dtypes=False)}")
        if (w is not None and isinstance(x, (np.ndarray, np.generic))
                and not w.is_fully_replicated
                and multi_device.backend_process_count(w.mesh._flat) > 1):
            # Each process would contribute its own host value as the global array.
            raise ValueError(
                "Passing non-trivial shardings for numpy inputs is not allowed. To fix this "
                "error, either specify a replicated sharding explicitly or use "
                "`jax.make_array_from_process_local_data(...)` to convert your host local "
                "numpy inputs to a jax.Array which you can pass to jit. If the numpy input is "
                "the same on each process, then you can use `jax.make_array_from_callback(...) "
                f"to create a `jax.Array` which you can pass to jit. Got arg type: "
                f"{a.dtype.name}[{','.join(map(str, a.shape))}]")
        chosen.append(w if w is not None else own)
    mesh = _common_mesh(chosen, mesh)
    if mesh is None:
        return None
    unspecified = None if all(t == AxisType.Auto for t in mesh.axis_types) else \
        NamedSharding(mesh, PartitionSpec())
    out = []
    for i, (s, a) in enumerate(zip(chosen, avals)):
        s = s if s is not None else unspecified
        if s is not None:
            check_annotation(s, a.shape, "pjit arguments",
                             lambda i=i: (names()[i:i + 1] or [None])[0])
        out.append(s)
    return tuple(out)


class ShardingPlan:
    """The layouts of one partitioned program: the inputs' (None: XLA chooses one) and the
    outputs' that ``out_shardings`` fixes or, given ``out_avals``, their types' explicit
    shardings fix (None: XLA propagates one)."""

    __slots__ = ("given_out_shardings", "in_shardings", "mesh", "out_shardings")

    def __init__(self, in_shardings: Sequence[NamedSharding],
                 out_shardings: Sequence[NamedSharding | None],
                 out_avals: Sequence[ShapedArray] | None = None, mesh: Mesh | None = None,
                 typed_out: Sequence[bool] | None = None):
        self.in_shardings = tuple(in_shardings)
        self.given_out_shardings = tuple(out_shardings)  # (``out_shardings``' own)
        # ``mesh``: that of the program's constraints, which a program with no argument and
        # no out_shardings (``jit(lambda: reshard(...))()``) has only
        self.mesh = _common_mesh(list(self.in_shardings) + list(out_shardings), mesh)
        if out_avals is not None and self.mesh is not None:
            # ``typed_out``: whether each output's type carries the mesh in JAX (one computed
            # from host data alone does not: XLA's layout then names it, P() if replicated)
            typed_out = typed_out or [True] * len(out_avals)
            out_shardings = [s if s is not None or not t else _from_type(self.mesh, a)
                             for s, a, t in zip(out_shardings, out_avals, typed_out)]
        self.out_shardings = tuple(out_shardings)


def _from_type(mesh: Mesh, aval: ShapedArray) -> NamedSharding | None:
    """The layout on ``mesh`` that ``aval``'s explicit sharding names (None if none): an
    output typed ``f32[8@x,4]`` is laid out so, whatever XLA would propagate."""
    typed = getattr(aval, "_sharding", None)
    if typed is None and all(t == AxisType.Explicit for t in mesh.axis_types):
        # Over an all-Explicit mesh a value's type says where it is: one typed with no axis is
        # replicated, P(None, ...) (JAX's spelling), not left for XLA to propagate. (A type
        # does not record Auto axes: over a mixed mesh XLA still chooses those.)
        return NamedSharding(mesh, PartitionSpec(*(None,) * len(aval.shape)))
    if typed is None or typed.mesh.size != mesh.size:
        return None
    # A type over another mesh of as many devices (``use_abstract_mesh``): that mesh over
    # the program's devices, as JAX makes it concrete.
    return NamedSharding(concrete_mesh_for(typed.mesh, mesh), typed.spec)


def output_shardings(given: Any, out_tree, out_avals: Sequence[ShapedArray]) -> list:
    """One sharding (or None) per output from jit's ``out_shardings``."""
    if given is None:
        return [None] * len(out_avals)
    full = tree_util.tree_unflatten(out_tree, [0] * len(out_avals))
    shardings = _per_leaf(resolve_specs(given, "out_shardings"), full, "out_shardings")
    for (path, _), s, a in zip(tree_util.tree_flatten_with_path(full)[0], shardings, out_avals):
        if s is not None:
            check_annotation(s, a.shape, "pjit outputs",
                             lambda path=path: "result" + tree_util.keystr(path))
    return shardings


def constraint_mesh(closed: ClosedJaxpr) -> Mesh | None:
    """The mesh of the first ``with_sharding_constraint`` or ``shard_map`` in the program (a
    program that has one is partitioned over its mesh), or None. Remembered per jaxpr."""
    try:
        mesh = _constraint_meshes[closed]
    except KeyError:
        mesh = _constraint_meshes[closed] = _find_constraint_mesh(closed.jaxpr)
    context = current_mesh()
    if mesh is not None and context is not None and mesh is not context and \
            mesh.axis_names == context.axis_names and \
            np.array_equal(mesh.device_ids, context.device_ids):
        # the mesh in context under other axis types (an ``auto_axes`` body's constraint
        # sees it Auto): the program's results are named over the context's, as in JAX
        return context
    return mesh


_constraint_meshes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _find_constraint_mesh(jaxpr: core.Jaxpr) -> Mesh | None:
    """The mesh of the first sharding constraint, of the first equation with a ``mesh``
    parameter (``shard_map``), or of the first sharding a nested ``jit`` asks for."""
    for eqn in jaxpr.eqns:
        if (eqn.primitive is sharding_constraint_p or eqn.primitive is reshard_p) and \
                isinstance(eqn.params["sharding"].mesh, Mesh):  # (grad's seed: abstract)
            return eqn.params["sharding"].mesh
        if isinstance(eqn.params.get("mesh"), Mesh):
            return eqn.params["mesh"]
        for s in (*eqn.params.get("in_shardings", ()), *eqn.params.get("out_shardings", ())):
            if isinstance(s, NamedSharding) and isinstance(s.mesh, Mesh):  # a nested jit's
                return s.mesh
        typed = _typed_result_mesh(eqn.params)
        if typed is not None:
            return typed
        for sub in core.subjaxprs(eqn.params):
            mesh = _find_constraint_mesh(sub)
            if mesh is not None:
                return mesh
    return None


def _typed_result_mesh(params: dict) -> Mesh | None:
    """The mesh in context when an equation's result is typed by an ``out_sharding=``
    argument (``iota``/``broadcast_in_dim``/``reshape``'s ``sharding``, ``dot_general``'s
    ``out_sharding``), so that a program making laid-out values from nothing is partitioned
    and its results laid out as their types say."""
    for name in ("sharding", "out_sharding"):
        s = params.get(name)
        if isinstance(s, NamedSharding) and isinstance(s.mesh, AbstractMesh):
            mesh = current_mesh()
            return None if mesh is None else concrete_mesh_for(s.mesh, mesh)
    return None


def _rank(aval: ShapedArray) -> int:
    """The rank a value crosses a program's boundary with: a key's data has its trailing
    physical axes too, and the layouts leave them whole."""
    return len(core.physical_aval(aval).shape)


def lower(name: str, closed: ClosedJaxpr, donated_invars: Sequence[bool],
          plan: ShardingPlan, result_names: Sequence[str] = ()):
    """The Shardy-annotated module of a partitioned program (closed-over constants inline)."""
    jaxpr = closed.jaxpr
    dispatch.log_compiling(name, closed.in_avals, plan.in_shardings)
    own = plan.mesh.shape_tuple
    # Results typed over another mesh of the same devices name a Shardy mesh of their own.
    others = {s.mesh.shape_tuple for s in plan.out_shardings
              if s is not None and s.mesh.shape_tuple != own}
    # As JAX's: memory kinds are written only when some value is not in device memory.
    # A result placed by no out_sharding lives where its type says.
    named = [s for s in plan.in_shardings + plan.out_shardings if s is not None]
    arg_kinds, result_kinds, propagated = (), None, ()
    if any(s.memory_kind not in (None, "device") for s in named) or \
            avals_mod.uses_memory_spaces(jaxpr):
        arg_kinds = ["device" if s is None else s.memory_kind for s in plan.in_shardings]
        result_kinds = [None if s is None else s.memory_kind for s in plan.out_shardings]
        propagated = avals_mod.memory_kinds_of(closed.out_avals)
    module = mlir.lower_jaxpr(
        name, jaxpr, donated_invars=donated_invars, consts=closed.consts,
        mesh=own, device_assignment=plan.mesh._flat,
        arg_shardings=[_arg_attr(s, v.aval) for s, v in zip(plan.in_shardings, jaxpr.invars)],
        result_shardings=[None if s is None else s.sdy_attr(
            _rank(v.aval), "mesh" if s.mesh.shape_tuple == own else
            sdy_mesh_symbol(s.mesh.shape_tuple))
            for s, v in zip(plan.out_shardings, jaxpr.outvars)],
        arg_memory_kinds=arg_kinds, result_memory_kinds=result_kinds,
        type_kinds=propagated, result_names=result_names,
        sharded_avals=([_shard_aval(s, v.aval) for s, v in zip(plan.in_shardings, jaxpr.invars)],
                       [_shard_aval(s, v.aval) for s, v in zip(plan.out_shardings,
                                                               jaxpr.outvars)]))
    for shape in others:
        declare_sdy_mesh(module, shape)
    if any(s is None and not v.aval.shape for s, v in zip(plan.in_shardings, jaxpr.invars)):
        declare_sdy_mesh(module, ())
    lift_inlined_meshes(module)
    return module


def _shard_aval(sharding: NamedSharding | None, aval: ShapedArray) -> ShapedArray:
    """One partition's part of a value laid out as ``sharding`` (the whole value when its
    layout is XLA's to choose), as JAX matches donated arguments with results."""
    if sharding is None or dtypes.is_extended(aval.dtype) or not hasattr(aval, "shape"):
        return aval
    return aval.update(shape=sharding.shard_shape(aval.shape))


def _arg_attr(sharding: NamedSharding | None, aval: ShapedArray) -> str | None:
    """A parameter's Shardy layout: its sharding's; none for one unspecified (XLA chooses),
    unless it is a scalar (or a key): replicated on the empty mesh, as JAX lowers it."""
    if sharding is not None:
        return sharding.sdy_attr(_rank(aval))
    if aval.shape:
        return None
    return "#sdy.sharding<@empty_mesh, [" + ", ".join(["{}"] * _rank(aval)) + "]>"


def _open(plan: ShardingPlan, jaxpr: core.Jaxpr) -> list[bool]:
    """Which parameters' layouts XLA chooses (those with no Shardy layout)."""
    return [s is None and bool(v.aval.shape) for s, v in zip(plan.in_shardings, jaxpr.invars)]


class PartitionedProgram:
    """A partitioned executable with its arguments' and results' layouts."""

    def __init__(self, module: Any, closed: ClosedJaxpr, plan: ShardingPlan):
        mesh = plan.mesh
        devices = mesh._flat
        exe, source = compile_partitioned(module, devices, _open(plan, closed.jaxpr))
        self.plan = plan
        self.in_avals = closed.in_avals
        self.out_avals = closed.out_avals
        # The arguments' layouts: those asked for, and those XLA chose for the others.
        chosen = parameter_hlo_shardings(exe, len(self.in_avals)) \
            if any(s is None for s in plan.in_shardings) else ()
        self.in_shardings = [s if s is not None else _named(mesh, chosen[i], aval, "argument", i)
                             for i, (s, aval) in enumerate(zip(plan.in_shardings,
                                                               self.in_avals))]
        first = next(((len(v.aval.shape), s) for s, v in zip(plan.in_shardings,
                                                              closed.jaxpr.invars)
                      if s is not None), None)
        # ... and as JAX reports them (``Compiled.input_shardings``): XLA's choices as XLA
        # states them, or, when some argument's layout was given, as NamedShardings
        self.reported_in_shardings = [
            s if s is not None else
            GSPMDSharding.on(devices, chosen[i], self.in_shardings[i]) if first is None else
            _recovered(first, chosen[i], _rank(a)) or self.in_shardings[i]
            for i, (s, a) in enumerate(zip(plan.in_shardings, self.in_avals))]
        # The executable makes keys' data; ``run_flat`` wraps it as keys.
        physical_out = [core.physical_aval(a) for a in self.out_avals]
        self.out_shardings = []
        # The outputs' layouts: those the plan fixes, as given; for the others XLA chose,
        # the first given argument's sharding (``_recovered``), else the simplest spec.
        out_hlos = output_hlo_shardings(exe, len(self.out_avals))
        for i, (hlo, aval) in enumerate(zip(out_hlos, self.out_avals)):
            # (keys: a layout given for them lays their data out with the word axis whole;
            # one XLA chose is their data's)
            named = physical_sharding(plan.out_shardings[i], aval) or \
                _recovered(first, hlo, _rank(aval)) or _named(mesh, hlo, aval, "output", i)
            if plan.out_shardings[i] is None and \
                    getattr(aval, "memory_space", None) is not None:
                named = named.with_memory_kind(core.mem_space_to_kind(aval.memory_space))
            self.out_shardings.append(named)
        self.executable = multi_device.ReplicatedExecutable(
            exe, devices, physical_out,
            [s.runtime_sharding(len(a.shape)) for s, a in zip(self.out_shardings,
                                                               physical_out)])
        self.executable.cache_source = source

    def run_flat(self, flat: Sequence, avals: Sequence[ShapedArray]) -> list[ShardedArray]:
        bufs = [_place(x, a, s) for x, a, s in zip(flat, self.in_avals, self.in_shardings)]
        outs = self.executable(bufs)
        return [_result(b, a, s) for b, a, s in zip(outs, self.out_avals, self.out_shardings)]


def _recovered(first: tuple[int, NamedSharding] | None, hlo: Any, ndim: int
               ) -> NamedSharding | None:
    """JAX's rule for a layout XLA chose: the first given argument's sharding (``first``: its
    rank and it), kept as written (P('x', None) stays so), when XLA chose that very layout
    at that rank; None otherwise."""
    if first is not None and first[0] == ndim and first[1]._to_xla_hlo_sharding(ndim) == hlo:
        return first[1]
    return None


def _named(mesh: Mesh, hlo: Any, aval: ShapedArray, what: str, i: int) -> NamedSharding:
    """The ``NamedSharding`` on ``mesh`` of the layout XLA chose for argument or output ``i``
    (a key's names its own axes only: its data's trailing ones are whole)."""
    named = named_from_hlo(mesh, hlo, _rank(aval))
    if named is None:
        raise NotImplementedError(
            f"XLA laid {what} {i} ({aval.str_short()}) out as {hlo}, which no PartitionSpec "
            f"on {mesh} describes; pass {'in' if what == 'argument' else 'out'}_shardings to "
            "jit to choose its layout.")
    if len(named.spec) > len(aval.shape):
        named = NamedSharding(mesh, PartitionSpec(*named.spec[:len(aval.shape)]))
    return named


def _result(buf: Any, aval: ShapedArray, sharding: NamedSharding) -> Any:
    """A result of a partitioned program: an array, or keys over their sharded data."""
    if dtypes.is_extended(aval.dtype):
        return aval.dtype.from_physical(ShardedArray(buf, core.physical_aval(aval), sharding))
    return ShardedArray(buf, aval, sharding)


def _place(x: Any, aval: ShapedArray, sharding: NamedSharding):
    """The global device array of one argument, in ``sharding``'s layout."""
    if dtypes.is_extended(aval.dtype):  # keys: their data, in the same layout
        x, aval = aval.dtype.to_physical(x), core.physical_aval(aval)
    runtime = sharding.runtime_sharding(len(aval.shape))
    # (its buffers as they are when laid out the same way, by another sharding object: a
    # pmap result's is its program's own)
    if type(x) is ShardedArray and x.dtype == aval.dtype and (
            x._buf._sharding is runtime or
            shardings_equivalent(runtime, x._buf._sharding, len(aval.shape))):
        x._check_alive()
        return x._buf
    host = x._value if isinstance(x, Array) else x
    if isinstance(host, core.Tracer):
        raise TypeError("a partitioned program got a tracer as an argument")
    return put_global(np.asarray(host, dtype=aval.dtype), aval, sharding)


# ---- the jit primitive's evaluation, when its program is partitioned ----

_programs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def needs_partitioning(closed: ClosedJaxpr, args: Sequence, shardings: Sequence = ()) -> bool:
    """Whether evaluating the jit equation ``closed`` on ``args`` runs partitioned (its
    arguments, its constraints or the ``shardings`` it asks for name a mesh)."""
    return any(is_laid_out(a) for a in args) or constraint_mesh(closed) is not None or \
        any(isinstance(s, NamedSharding) for s in shardings)


def run_closed(name: str, closed: ClosedJaxpr, donated_invars: Sequence[bool],
               args: Sequence, in_shardings: Sequence = (), out_shardings: Sequence = ()
               ) -> list:
    """Evaluate a jit equation partitioned over the mesh of its arguments, its constraints or
    the shardings it asks for (``in_shardings``/``out_shardings``, per argument and result;
    anything but a ``NamedSharding`` is the program's choice). Compiled once per jaxpr and
    layouts."""
    named = lambda ss, n: tuple(s if isinstance(s, NamedSharding) else None  # noqa: E731
                                for s in ss) or (None,) * n
    given_in = named(in_shardings, len(args))
    given_out = named(out_shardings, len(closed.out_avals))
    avals = closed.in_avals
    mesh = constraint_mesh(closed)
    layouts = input_shardings(given_in if any(given_in) else None, tuple(args), {}, args,
                              avals, mesh or _common_mesh(given_out))
    per_jaxpr = _programs.setdefault(closed, {})
    typed_in = tuple(map(is_laid_out, args))
    key = (layouts, typed_in, given_out)
    program = per_jaxpr.get(key)
    if program is None:
        plan = ShardingPlan(layouts, given_out, closed.out_avals, mesh,
                            context_mesh.typed_outputs(closed, typed_in))
        program = per_jaxpr[key] = PartitionedProgram(
            lower(name, closed, donated_invars, plan), closed, plan)
    return program.run_flat(args, avals)
