"""``jax.experimental.sparse.ad``: differentiation with respect to the stored data of sparse
arguments. A sparse argument is replaced by its data buffer (indices fixed), differentiated
with the dense transformation, and the gradient comes back as a sparse array of the same
indices."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from jaxkit import api
from jaxkit.experimental.sparse._base import JAXSparse
from jaxkit._util import safe_zip, split_list, wraps
from jaxkit.source_info import api_boundary
from jaxkit.tree_util import tree_flatten, tree_unflatten

__all__ = ["flatten_fun_for_sparse_ad", "grad", "is_sparse", "jacfwd", "jacobian", "jacrev",
           "value_and_grad",
           "api_boundary", "safe_zip", "split_list", "wraps"]  # re-exported, as in JAX


def is_sparse(x) -> bool:
    """Whether ``x`` is a sparse array (of any format)."""
    return isinstance(x, JAXSparse)


def flatten_fun_for_sparse_ad(fun: Callable, argnums: int | Sequence[int], args: tuple):
    """``(fun_flat, argnums_flat, args_flat, postprocess_gradients)``: ``fun`` taking flat
    buffers where each sparse argument is replaced by its data (indices held fixed), the flat
    positions to differentiate, the flat arguments, and a function turning the flat gradients
    back into gradients shaped like the ``argnums`` arguments (sparse ones sparse)."""
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    nums = tuple(a % len(args) for a in nums)
    leaves, tree = tree_flatten(args, is_leaf=lambda x: isinstance(x, JAXSparse))
    # Position of each argument's leaves in the flat list.
    counts = [len(tree_flatten(a, is_leaf=lambda x: isinstance(x, JAXSparse))[0]) for a in args]
    starts = [sum(counts[:i]) for i in range(len(args))]
    flat_argnums = [j for i in nums for j in range(starts[i], starts[i] + counts[i])]
    flat = [x.data if isinstance(x, JAXSparse) else x for x in leaves]

    def fun_flat(*xs, **kwargs):
        rebuilt = [type(orig).tree_unflatten(orig.tree_flatten()[1],
                                             (x, *orig.tree_flatten()[0][1:]))
                   if isinstance(orig, JAXSparse) else x for x, orig in zip(xs, leaves)]
        return fun(*tree_unflatten(tree, rebuilt), **kwargs)

    def post(grads):
        grads = grads if isinstance(grads, tuple) else (grads,)
        out = []
        for j, g in zip(flat_argnums, grads):
            orig = leaves[j]
            out.append(type(orig).tree_unflatten(orig.tree_flatten()[1],
                                                 (g, *orig.tree_flatten()[0][1:]))
                       if isinstance(orig, JAXSparse) else g)
        per_arg, k = [], 0
        for i in nums:
            sub_leaves, sub_tree = tree_flatten(args[i], is_leaf=lambda x: isinstance(
                x, JAXSparse))
            per_arg.append(tree_unflatten(sub_tree, out[k:k + len(sub_leaves)]))
            k += len(sub_leaves)
        return per_arg[0] if single else tuple(per_arg)

    return fun_flat, tuple(flat_argnums), flat, post


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   **kwargs) -> Callable:
    """``jax.value_and_grad`` where sparse arguments get sparse gradients (same indices)."""

    def value_and_grad_fun(*args, **kw):
        f, nums, flat, post = flatten_fun_for_sparse_ad(fun, argnums, args)
        val, g = api.value_and_grad(f, nums, has_aux=has_aux, **kwargs)(*flat, **kw)
        return val, post(g)

    return value_and_grad_fun


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         **kwargs) -> Callable:
    """``jax.grad`` where sparse arguments get sparse gradients (same indices)."""

    def grad_fun(*args, **kw):
        f, nums, flat, post = flatten_fun_for_sparse_ad(fun, argnums, args)
        out = api.grad(f, nums, has_aux=has_aux, **kwargs)(*flat, **kw)
        if has_aux:
            return post(out[0]), out[1]
        return post(out)

    return grad_fun


def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           **kwargs) -> Callable:
    """``jax.jacfwd`` with respect to the stored data of sparse arguments."""

    def jacfwd_fun(*args, **kw):
        f, nums, flat, post = flatten_fun_for_sparse_ad(fun, argnums, args)
        out = api.jacfwd(f, nums, has_aux=has_aux, **kwargs)(*flat, **kw)
        return (post(out[0]), out[1]) if has_aux else post(out)

    return jacfwd_fun


def jacrev(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           **kwargs) -> Callable:
    """``jax.jacrev`` with respect to the stored data of sparse arguments."""

    def jacrev_fun(*args, **kw):
        f, nums, flat, post = flatten_fun_for_sparse_ad(fun, argnums, args)
        out = api.jacrev(f, nums, has_aux=has_aux, **kwargs)(*flat, **kw)
        return (post(out[0]), out[1]) if has_aux else post(out)

    return jacrev_fun


jacobian = jacrev  # as in JAX: the reverse-mode Jacobian
