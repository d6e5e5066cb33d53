"""``jax.api_util`` (reached by Flax's ``nn.scan`` to flatten a wrapped body before partially
evaluating it): pytree flattening of ``linear_util`` wrapped functions, and debug info."""
from __future__ import annotations

from jaxkit.extend import linear_util as lu
from jaxkit.interpreters.partial_eval import debug_info as _debug_info
from jaxkit.tree_util import tree_flatten, tree_unflatten

__all__ = ["debug_info", "flatten_fun", "flatten_fun_nokwargs"]


def debug_info(traced_for: str, fun, args, kwargs, *, static_argnums=(), static_argnames=()):
    """What tracing ``fun`` reports in errors: what traced it, and the function's name."""
    return _debug_info(traced_for, fun, ())


def _flatten_nokwargs(f, in_tree, *flat_args):
    out = f(*tree_unflatten(in_tree, flat_args))
    flat, out_tree = tree_flatten(out)
    return flat, out_tree


def flatten_fun_nokwargs(fun: lu.WrappedFun, in_tree):
    """``fun`` taking and returning flat lists of leaves; the thunk gives the output tree."""
    return lu.transformation_with_aux2(_flatten_nokwargs, fun, in_tree)


def _flatten(f, in_tree, *flat_args):
    args, kwargs = tree_unflatten(in_tree, flat_args)
    flat, out_tree = tree_flatten(f(*args, **kwargs))
    return flat, out_tree


def flatten_fun(fun: lu.WrappedFun, in_tree):
    """As ``flatten_fun_nokwargs``, for ``in_tree`` the tree of ``(args, kwargs)``."""
    return lu.transformation_with_aux2(_flatten, fun, in_tree)
