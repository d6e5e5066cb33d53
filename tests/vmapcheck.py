"""A reusable check that ``vmap`` agrees with a Python loop over the batch, then a stack.

For engineers writing batching rules::

    from vmapcheck import check_vmap, check_vmap_examples

    check_vmap(f, (xs, w), in_axes=(0, None))          # batched arguments you built yourself
    check_vmap_examples(f, lambda rng: (rng.normal(size=3).astype(np.float32),),
                        in_axes_list=[0, -1, None])    # the harness builds batches of examples

The reference never goes through ``vmap``: each example is sliced out with NumPy, ``f`` runs
on it eagerly, and the per-example results are stacked with NumPy along ``out_axes``. The
batched run happens under ``batching.checking_rules()``, so a rule whose result has the wrong
per-example shape or dtype fails loudly with the primitive's name, even where the numbers
would happen to agree.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import jaxkit
from jaxkit import tree_util
from jaxkit.transforms.vmap import vmap
from jaxkit.interpreters import batching

__all__ = ["check_vmap", "check_vmap_examples", "loop_reference", "stack_examples"]


def _spec_leaves(spec, tree) -> list:
    """The axis of each leaf of ``tree`` given the prefix ``spec`` (ints/None, tuples, lists,
    dicts). Written independently of the implementation under test."""
    if spec is None or isinstance(spec, int):
        return [spec] * len(tree_util.tree_leaves(tree))
    if isinstance(spec, dict):
        assert isinstance(tree, dict) and sorted(spec) == sorted(tree), (spec, tree)
        return [a for k in sorted(spec) for a in _spec_leaves(spec[k], tree[k])]
    assert isinstance(spec, (tuple, list)) and len(spec) == len(tree), (spec, tree)
    return [a for s, t in zip(spec, tree) for a in _spec_leaves(s, t)]


def _args_spec(in_axes, args: tuple) -> list:
    return _spec_leaves(tuple(in_axes) if isinstance(in_axes, list) else in_axes, args)


def _batch_size(leaves, axes) -> int:
    sizes = {np.shape(x)[a] for x, a in zip(leaves, axes) if a is not None}
    assert len(sizes) == 1, f"inconsistent batch sizes {sizes}"
    return sizes.pop()


def loop_reference(f: Callable, args: tuple, in_axes: Any = 0, out_axes: Any = 0,
                   kwargs: dict | None = None):
    """``stack([f(*example_i) for i in range(batch)])`` with NumPy slicing and stacking."""
    kwargs = kwargs or {}
    leaves, tree = tree_util.tree_flatten(args)
    kw_leaves, kw_tree = tree_util.tree_flatten(kwargs)
    axes = _args_spec(in_axes, args)
    size = _batch_size(leaves + kw_leaves, axes + [0] * len(kw_leaves))
    outs = []
    for i in range(size):
        # Examples become jaxkit arrays, so that array methods inside ``f`` are jaxkit's.
        ex = [x if a is None else jaxkit.device_put(np.take(np.asarray(x), i, axis=a))
              for x, a in zip(leaves, axes)]
        kw = [jaxkit.device_put(np.take(np.asarray(x), i, axis=0)) for x in kw_leaves]
        out = f(*tree_util.tree_unflatten(tree, ex), **tree_util.tree_unflatten(kw_tree, kw))
        outs.append(out)
    out_leaves = [tree_util.tree_flatten(o)[0] for o in outs]
    out_tree = tree_util.tree_structure(outs[0])
    out_axes_leaves = _spec_leaves(out_axes, outs[0])
    stacked = []
    for j, a in enumerate(out_axes_leaves):
        column = [np.asarray(o[j]) for o in out_leaves]
        if a is None:
            for c in column[1:]:
                np.testing.assert_array_equal(c, column[0])
            stacked.append(column[0])
        else:
            stacked.append(np.stack(column, axis=a if a >= 0 else a + column[0].ndim + 1))
    return tree_util.tree_unflatten(out_tree, stacked)


def _default_tol(dtype) -> float:
    dtype = np.dtype(dtype)
    if dtype.kind in "biu":
        return 0.0
    if dtype.itemsize <= 2:
        return 1e-2
    if dtype in (np.float32, np.complex64):
        return 2e-5
    return 1e-12


def check_vmap(f: Callable, args: Sequence, in_axes: Any = 0, out_axes: Any = 0, *,
               kwargs: dict | None = None, axis_name: Any = None, rtol: float | None = None,
               atol: float | None = None, jit: bool = False) -> Any:
    """Assert ``vmap(f, in_axes, out_axes)(*args)`` equals the loop-and-stack reference
    (structure, shapes, dtypes and values); with ``jit=True`` also under ``jaxkit.jit``.
    Returns the vmapped result."""
    args = tuple(args)
    kwargs = kwargs or {}
    expected = loop_reference(f, args, in_axes, out_axes, kwargs)
    vf = vmap(f, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)
    with batching.checking_rules():
        got = vf(*args, **kwargs)
        runs = [("vmap", got)]
        if jit:
            runs.append(("jit(vmap)", jaxkit.jit(vf)(*args, **kwargs)))
    for label, res in runs:
        _assert_trees_close(label, res, expected, rtol, atol)
    return got


def _assert_trees_close(label: str, got, expected, rtol, atol) -> None:
    g_leaves, g_tree = tree_util.tree_flatten(got)
    e_leaves, e_tree = tree_util.tree_flatten(expected)
    assert g_tree == e_tree, f"{label}: output structure {g_tree} != reference {e_tree}"
    for k, (g, e) in enumerate(zip(g_leaves, e_leaves)):
        g_np, e_np = np.asarray(g), np.asarray(e)
        assert g_np.shape == e_np.shape, (f"{label}: output {k} has shape {g_np.shape}, the "
                                          f"loop gives {e_np.shape}")
        assert g_np.dtype == e_np.dtype, (f"{label}: output {k} has dtype {g_np.dtype}, the "
                                          f"loop gives {e_np.dtype}")
        tol = _default_tol(e_np.dtype)
        np.testing.assert_allclose(
            g_np, e_np, rtol=tol if rtol is None else rtol, atol=tol if atol is None else atol,
            err_msg=f"{label}: output {k} differs from the loop reference")


def stack_examples(examples: Sequence[tuple], in_axes: Any) -> tuple:
    """Batched arguments from per-example argument tuples: leaf ``j`` of argument ``i`` is
    stacked along its axis in ``in_axes`` (negative counts from the end of the result), or
    taken from the first example when its axis is None."""
    first = examples[0]
    leaves0, tree = tree_util.tree_flatten(tuple(first))
    axes = _args_spec(in_axes, tuple(first))
    columns = list(zip(*[tree_util.tree_flatten(tuple(e))[0] for e in examples]))
    out = []
    for col, a, x0 in zip(columns, axes, leaves0):
        if a is None:
            out.append(x0)
        else:
            nd = np.ndim(x0) + 1
            out.append(np.stack([np.asarray(c) for c in col], axis=a % nd))
    return tuple(tree_util.tree_unflatten(tree, out))


def check_vmap_examples(f: Callable, make_args: Callable[[np.random.Generator], tuple],
                        in_axes_list: Sequence[Any] = (0,), *, size: int = 3, seed: int = 0,
                        out_axes: Any = 0, **check_kwargs) -> None:
    """For each ``in_axes`` in ``in_axes_list``: draw ``size`` examples with
    ``make_args(rng)``, stack them along those axes and ``check_vmap``. An all-None
    ``in_axes`` is skipped (vmap needs a mapped argument)."""
    rng = np.random.default_rng(seed)
    examples = [tuple(make_args(rng)) for _ in range(size)]
    for in_axes in in_axes_list:
        axes = _args_spec(in_axes, examples[0])
        if all(a is None for a in axes):
            continue
        batched = stack_examples(examples, in_axes)
        check_vmap(f, batched, in_axes, out_axes, **check_kwargs)
