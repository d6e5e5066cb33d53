"""What ``shard_map`` checks of its specs and of its body's result types (``check_vma``).

An output's type must not vary over a mesh axis its spec leaves out (JAX's replication error).
Unreduced and reduced axes in specs (``P('x', unreduced={'y'})``) need a mesh whose axes are
all Explicit and a shard_map manual over all of them; an input's spec must carry the sets its
type carries, and an output's type the sets its spec asks for, after the casts JAX inserts at
the end of the body: an output varying over an axis its spec names as unreduced is cast to
unreduced there (``vary_unreduced_cast``), and one the spec splits over axes it does not vary
over is ``pvary``-ed (which refuses an unreduced or reduced value).
"""
from __future__ import annotations

from typing import Any

from jaxkit import core, tree_util
from jaxkit.core import ShapedArray
from jaxkit.lax import parallel_ur, parallel_vma
from jaxkit.runtime.sharding import AxisType, Mesh, PartitionSpec, typed_sharding

__all__ = ["check_out_ur", "check_replication", "check_specs_manual", "check_specs_match_types",
           "check_unreduced_specs", "implicit_casts", "spec_axes"]


def _is_spec(s: Any) -> bool:
    return isinstance(s, PartitionSpec) or s is None


def check_specs_manual(specs: Any, manual: frozenset, what: str) -> None:
    """JAX's error for a spec naming a mesh axis the shard_map is not manual over."""
    is_spec = lambda s: isinstance(s, PartitionSpec) or s is None  # noqa: E731
    msgs = []
    for path, spec in tree_util.tree_flatten_with_path(specs, is_leaf=is_spec)[0]:
        for axes in (PartitionSpec() if spec is None else spec)._normalized(0):
            msgs += [f"  {what}{tree_util.keystr(path)} refers to {a!r}" for a in axes
                     if a not in manual]
    if msgs:
        raise ValueError(f"shard_map {what} argument must refer to an axis marked as manual "
                         f"({manual}), but:\n\n" + "\n\n".join(msgs) + "\n\n"
                         f"Check the {what} values passed to shard_map.")


def check_specs_match_types(mesh: Mesh, manual: tuple, specs: tuple, avals: list,
                            nested: bool) -> None:
    """Over a mesh whose axes are all Explicit and all made manual (by a shard_map not
    ``nested`` in another), the arguments' types already say their layout: ``in_specs`` must
    agree (JAX's ValueError and words)."""
    if nested or set(manual) != set(mesh.axis_names) or any(
            t is not AxisType.Explicit for t in mesh.axis_types):
        return
    for spec, aval in zip(specs, avals):
        ndim = len(aval.shape)
        parts = [None if p is PartitionSpec.UNCONSTRAINED else p for p in spec.partitions]
        parts += [None] * (ndim - len(parts))
        want = typed_sharding(mesh, parts, spec.unreduced, spec.reduced)
        want_spec = want.spec if want is not None else PartitionSpec(*[None] * ndim)
        have = aval.sharding.spec
        if (want_spec.partitions, want_spec.unreduced, want_spec.reduced) != (
                tuple(have.partitions), have.unreduced, have.reduced):
            raise ValueError(
                f"in_specs passed to shard_map: {want_spec} does not match the specs of the "
                f"input: {have} for arg: {aval}. `in_specs` is an optional argument so you can "
                "omit specifying it and shard_map will infer the in_specs from the arguments. "
                "If you want to reshard your inputs, you can use `jax.reshard` on the "
                "arguments and then pass those args to shard_map.")


def check_unreduced_specs(what: str, mesh: Mesh, manual: tuple, specs: Any) -> None:
    """JAX's errors for unreduced/reduced sets in ``in_specs``/``out_specs`` (``what``) of a
    shard_map not manual over all of the mesh's axes, or over axes that are not Explicit."""
    prefix = "in" if what == "in_specs" else "out"
    full_manual = set(manual) == set(mesh.axis_names)
    kinds = dict(zip(mesh.axis_names, mesh.axis_types))
    for s in tree_util.tree_leaves(specs, is_leaf=_is_spec):
        if not isinstance(s, PartitionSpec) or not (s.unreduced or s.reduced):
            continue
        if not full_manual:
            raise NotImplementedError(
                f"unreduced/reduced can only be passed to {prefix}_specs when shard_map is in "
                f"full manual mode. Got mesh axis names {tuple(mesh.axis_names)}, manual_axes: "
                f"{frozenset(manual)}, specs: {s}. Please file a bug at "
                "https://github.com/jax-ml/jax/issues.")
        for name, axes in (("unreduced", s.unreduced), ("reduced", s.reduced)):
            if not all(kinds.get(a) is AxisType.Explicit for a in axes):
                raise ValueError(
                    f"{name} in {prefix}_specs {s} can only be used when the mesh passed to "
                    "shard_map contains axis names all of type `Explicit`. Got mesh "
                    f"{getattr(mesh, 'shown', mesh)}")  # a context mesh shows its abstract one


def check_in_ur(spec: PartitionSpec, aval: ShapedArray) -> None:
    """An argument's spec names the unreduced/reduced axes its type carries (JAX's error)."""
    s = getattr(aval, "_sharding", None)
    have = (s.spec.unreduced, s.spec.reduced) if s is not None else (frozenset(),) * 2
    for name, want, got in (("unreduced", spec.unreduced, have[0]),
                            ("reduced", spec.reduced, have[1])):
        if want != got:
            raise ValueError(f"in_specs containing {name} {spec} passed to shard_map should be "
                             f"equal to the {name} present on the in_aval {aval.str_short()}")


def implicit_casts(out: Any, out_specs: Any) -> Any:
    """The body's results (a pytree) with JAX's casts to their specs: ``pvary`` over the axes
    the spec splits over that a result does not vary over, then ``vary_unreduced_cast`` over
    the spec's unreduced axes the result is not unreduced over. Results that carry no
    unreduced/reduced axes and whose spec asks for none are left as they are (jaxkit leaves
    a split of a replicated value implicit)."""
    leaves, tree = tree_util.tree_flatten(out)
    specs = per_leaf_specs(out_specs, out)
    cast = []
    for v, spec in zip(leaves, specs):
        aval = core.get_aval(v)
        if type(aval) is ShapedArray and (aval.mur[0] or aval.mur[1] or spec.unreduced):
            missing = tuple(a for a in spec_axes(spec) if a not in aval.vma)
            v = parallel_vma.pvary(v, missing)
            if rest := spec.unreduced - core.get_aval(v).mur[0]:
                v = parallel_ur.vary_unreduced_cast(v, tuple(rest))
        cast.append(v)
    return tree_util.tree_unflatten(tree, cast)


def per_leaf_specs(specs: Any, tree: Any) -> list:
    """``specs`` (a prefix of ``tree``) as one spec per leaf of ``tree``."""
    prefix, prefix_def = tree_util.tree_flatten(specs, _is_spec)
    subtrees = prefix_def.flatten_up_to(tree)
    return [PartitionSpec() if s is None else s for s, sub in zip(prefix, subtrees)
            for _ in tree_util.tree_leaves(sub)]


def check_out_ur(specs: tuple, avals: list) -> None:
    """Each output's type carries the unreduced/reduced axes its spec names (JAX's error)."""
    for spec, aval in zip(specs, avals):
        for name, want, got in (("unreduced", spec.unreduced, aval.mur[0]),
                                ("reduced", spec.reduced, aval.mur[1])):
            if want != got:
                raise ValueError(f"out_specs passed to shard_map should be equal to the {name} "
                                 f"present on the out_aval. Got out_specs={spec} and "
                                 f"out_aval={aval.str_short()}")


# ---- the outputs' types say which mesh axes each may vary over ----


def spec_axes(spec: PartitionSpec) -> frozenset:
    """The mesh axes ``spec`` splits a value over."""
    return frozenset(a for axes in spec._normalized(0) for a in axes)


def check_replication(f, mesh: Mesh, manual: tuple, out_avals, out_specs,
                      out_tree_value) -> None:
    """Raise JAX's error if an output's type varies over (or is unreduced or reduced over) a
    mesh axis its spec leaves out."""
    out_vmas = [a.vma | a.mur[0] | a.mur[1] for a in out_avals]
    is_spec = lambda s: isinstance(s, PartitionSpec) or s is None  # noqa: E731
    spec_paths = tree_util.tree_flatten_with_path(out_specs, is_leaf=is_spec)[0]
    index_tree = tree_util.tree_unflatten(tree_util.tree_structure(out_specs, is_spec),
                                          range(len(spec_paths)))
    per_leaf = tree_util.tree_leaves(tree_util.tree_broadcast(index_tree, out_tree_value))
    order = list(manual)
    # Called eagerly, JAX runs the body per device and checks each output in turn through a
    # one-output shard_map of its ``_rem_singleton`` helper: its error names that helper and
    # the first offending output alone, without its path.
    eager = core.current_trace() is core.eval_trace
    msgs = []
    for vma, i in zip(out_vmas, per_leaf):
        path, spec = spec_paths[i]
        path = () if eager else path
        spec = PartitionSpec() if spec is None else spec
        named = spec_axes(spec) | spec.unreduced | spec.reduced
        unmentioned = [a for a in order if a not in named]
        if not any(a in vma for a in unmentioned):
            continue
        where = f"* out_specs{tree_util.keystr(path)} is {spec} which implies that the " \
                "corresponding output value is"
        if len(unmentioned) > 1:
            need = ",".join(a for a in order if a in spec_axes(spec))
            diff = ",".join(a for a in unmentioned if a in vma)
            got = ",".join(a for a in order if a in vma)
            msgs.append(f"{where} only varying across mesh axes {{{need}}} and not "
                        f"{{{diff}}}, but it was inferred to be possibly varying over "
                        f"{{{got}}}")
        else:
            msgs.append(f"{where} replicated across mesh axis '{unmentioned[0]}', but could "
                        "not infer replication over any axes")
        if eager:
            break
    if not msgs:
        return
    if len(msgs) == 1:
        msgs = [msgs[0][2:]]
    name = "_rem_singleton" if eager else getattr(f, "__name__", str(f))
    raise ValueError(
        f"shard_map applied to the function '{name}' was given out_specs which require "
        "replication which can't be statically inferred given the mesh:\n\n"
        f"The mesh given has shape {tuple(mesh.shape.values())} with corresponding axis "
        f"names {tuple(mesh.axis_names)}.\n\n" + "\n\n".join(msgs) + "\n\n"
        "Check if these output values are meant to be replicated over those mesh axes. If "
        "not, consider revising the corresponding out_specs entries. If so, consider "
        "disabling the check by passing the check_vma=False argument to `jax.shard_map`.")
