"""``jax.api_util``: helpers for writing transformations on ``linear_util`` wrapped functions
(``argnums_partial``, ``flatten_fun``), for reading their arguments (``flatten_axes``,
``donation_vector``, ``rebase_donate_argnums``, ``debug_info``) and small utilities
(``safe_map``, ``shaped_abstractify``)."""
from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from jaxkit import core
from jaxkit import tree_util
from jaxkit.extend import linear_util as lu
from jaxkit.interpreters.partial_eval import DebugInfo
from jaxkit.interpreters.partial_eval import debug_info as _debug_info
from jaxkit.interpreters.state import AbstractRef

__all__ = ["argnums_partial", "debug_info", "donation_vector", "flatten_axes", "flatten_fun",
           "flatten_fun_nokwargs", "rebase_donate_argnums", "safe_map", "shaped_abstractify"]


def safe_map(f: Callable, *args) -> list:
    """``list(map(f, *args))``, but all of ``args`` must have the same length."""
    args = [list(a) for a in args]
    n = len(args[0])
    for i, a in enumerate(args[1:], 2):
        if len(a) != n:
            raise ValueError(f"safe_map() argument {i} is "
                             f"{'shorter' if len(a) < n else 'longer'} than argument 1")
    return list(map(f, *args))


def shaped_abstractify(x) -> Any:
    """The abstract value (``ShapedArray``, or ``AbstractRef`` for a ref) of ``x``; an
    abstract value is returned as it is."""
    if isinstance(x, AbstractRef):
        return x
    return core.shaped_abstractify(x)


def _arg_names(fun: Callable, args: Sequence, kwargs: dict, static_argnums: Sequence[int],
               static_argnames: Sequence[str]) -> tuple[str, ...]:
    """One name per leaf of the non-static arguments: the parameter name and key path."""
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError):
        bound = None
    names = []
    statics = {i % max(len(args), 1) for i in static_argnums}
    for i, a in enumerate(args):
        if i in statics:
            continue
        label = f"args[{i}]"
        if bound is not None:
            label = next((k for k, v in bound.arguments.items() if v is a), label)
        for path, _ in tree_util.tree_flatten_with_path(a)[0]:
            names.append(label + tree_util.keystr(path))
    for k, v in kwargs.items():
        if k in static_argnames:
            continue
        for path, _ in tree_util.tree_flatten_with_path(v)[0]:
            names.append(k + tree_util.keystr(path))
    return tuple(names)


def debug_info(traced_for: str, fun: Callable, args: Sequence, kwargs: dict, *,
               static_argnums: Sequence[int] = (), static_argnames: Sequence[str] = (),
               **_: Any) -> DebugInfo:
    """What tracing ``fun`` on ``args``/``kwargs`` reports in errors: what traced it, the
    function's name and place, and the names of its (non-static) argument leaves."""
    return _debug_info(traced_for, fun,
                       _arg_names(fun, args, kwargs, static_argnums, static_argnames))


def _flatten_nokwargs(f, in_tree, *flat_args):
    out = f(*tree_util.tree_unflatten(in_tree, flat_args))
    return tree_util.tree_flatten(out)


def flatten_fun_nokwargs(fun: lu.WrappedFun, in_tree) -> tuple[lu.WrappedFun, Callable]:
    """``fun`` taking and returning flat lists of leaves; the thunk gives the output tree."""
    return lu.transformation_with_aux2(_flatten_nokwargs, fun, in_tree)


def _flatten(f, in_tree, *flat_args):
    args, kwargs = tree_util.tree_unflatten(in_tree, flat_args)
    return tree_util.tree_flatten(f(*args, **kwargs))


def flatten_fun(fun: lu.WrappedFun, in_tree) -> tuple[lu.WrappedFun, Callable]:
    """As ``flatten_fun_nokwargs``, for ``in_tree`` the tree of ``(args, kwargs)``."""
    return lu.transformation_with_aux2(_flatten, fun, in_tree)


class _Fixed:
    """A static argument held by ``argnums_partial``, compared by type and value (as JAX's
    cache keys compare them: ``1`` and ``1.0`` differ)."""

    __slots__ = ("val", "hashable")

    def __init__(self, val, hashable: bool):
        self.val = val
        self.hashable = hashable

    def __hash__(self):
        return hash((type(self.val), self.val)) if self.hashable else id(self)

    def __eq__(self, other):
        if not self.hashable:
            return self is other
        return type(other) is _Fixed and type(other.val) is type(self.val) and bool(
            other.val == self.val)


def _argnums_partial(f, dyn_argnums, fixed, *dyn_args, **kwargs):
    args: list = [None] * (len(fixed) + len(dyn_args))
    for i, a in zip(dyn_argnums, dyn_args):
        args[i] = a
    fixed_it = iter(fixed)
    args = [next(fixed_it).val if i not in dyn_argnums else a for i, a in enumerate(args)]
    return f(*args, **kwargs)


def argnums_partial(f: lu.WrappedFun, dyn_argnums: int | Sequence[int], args: Sequence,
                    require_static_args_hashable: bool = True
                    ) -> tuple[lu.WrappedFun, tuple]:
    """``f`` with the arguments not in ``dyn_argnums`` fixed to their values in ``args``;
    returns it and the dynamic arguments."""
    nums = (dyn_argnums,) if isinstance(dyn_argnums, int) else tuple(dyn_argnums)
    n = len(args)
    for i in nums:
        if not -n <= i < n:
            raise ValueError(f"argnums {i} is out of bounds for a function of {n} "
                             "positional arguments")
    nums = tuple(i % n for i in nums)
    fixed = []
    for i, a in enumerate(args):
        if i in nums:
            continue
        if require_static_args_hashable:
            try:
                hash(a)
            except TypeError:
                raise ValueError(
                    "Non-hashable static arguments are not supported, as this can lead to "
                    f"unexpected cache-misses. Static argument (index {i}) of type {type(a)} "
                    f"for function {getattr(f, '__name__', f)} is non-hashable.") from None
        fixed.append(_Fixed(a, require_static_args_hashable))
    return (lu.transformation2(_argnums_partial, f, nums, tuple(fixed)),
            tuple(args[i] for i in nums))


def donation_vector(donate_argnums, donate_argnames, in_tree, kws: bool = True
                    ) -> tuple[bool, ...]:
    """One bool per leaf of the arguments (``in_tree``: of ``(args, kwargs)`` when ``kws``):
    whether it belongs to a donated argument."""
    if kws:
        args_tree, kwargs_tree = tree_util.treedef_children(in_tree)
    else:
        args_tree, kwargs_tree = in_tree, None
    out: list[bool] = []
    for i, sub in enumerate(args_tree.children()):
        out.extend([i in donate_argnums] * sub.num_leaves)
    if kwargs_tree is not None:
        keys = kwargs_tree.node_data()[1]
        for key, sub in zip(keys, kwargs_tree.children()):
            out.extend([key in donate_argnames] * sub.num_leaves)
    return tuple(out)


def rebase_donate_argnums(donate_argnums, static_argnums) -> tuple[int, ...]:
    """The donated positions counted among the non-static arguments only."""
    static = sorted(set(static_argnums))
    donate = sorted(set(donate_argnums))
    clash = set(static) & set(donate)
    if clash:
        raise ValueError(f"`static_argnums` {static} and `donate_argnums` {donate} cannot "
                         "intersect.")
    return tuple(d - sum(s < d for s in static) for d in donate)


def flatten_axes(name: str, treedef, axis_tree, *, kws: bool = False,
                 tupled_args: bool = False) -> list:
    """The axis of each leaf of ``treedef``, given ``axis_tree`` (a tree prefix of it whose
    leaves are ints or None), as ``vmap`` reads ``in_axes``."""
    del kws, tupled_args  # only shape JAX's error hint
    dummy = tree_util.tree_unflatten(treedef, [0] * treedef.num_leaves)
    spec_leaves, spec_def = tree_util.tree_flatten(axis_tree, is_leaf=lambda x: x is None)
    try:
        subtrees = spec_def.flatten_up_to(dummy)
    except ValueError as e:
        raise ValueError(f"{name} specification must be a tree prefix of the corresponding "
                         f"value, got specification {axis_tree!r}: {e}") from None
    out: list = []
    for axis, sub in zip(spec_leaves, subtrees):
        out.extend([axis] * len(tree_util.tree_leaves(sub)))
    return out
