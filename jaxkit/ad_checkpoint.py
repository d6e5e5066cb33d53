"""``jax.ad_checkpoint``: naming values for rematerialization policies (``checkpoint_name``),
the policies and the answers a policy may give (``Recompute``, ``Saveable``, ``Offloadable``),
and ``print_saved_residuals``, which lists what reverse-mode differentiation of a function keeps
from its forward pass. ``checkpoint`` itself is ``jaxkit.checkpoint``: as in JAX 0.10, this
module's old aliases ``checkpoint`` and ``remat`` are gone and say where to look instead."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from jaxkit import api
from jaxkit._deprecations import deprecation_getattr, removed
from jaxkit import tree_util
from jaxkit.core import Jaxpr, Literal, ShapedArray
from jaxkit.interpreters import partial_eval as pe
from jaxkit.lax import reduce_precision_p
from jaxkit.transforms.checkpoint import (Offloadable, Recompute, Saveable, checkpoint_name,
                                          checkpoint_policies, name_p)
from jaxkit.transforms.jit import jit_p

__all__ = ["Offloadable", "Recompute", "Saveable", "checkpoint_name", "checkpoint_policies",
           "print_saved_residuals"]

_deprecations = {name: removed(f"jax.ad_checkpoint.{name} was deprecated in JAX v0.8.2 and "
                               f"removed in JAX v0.10.0; use jax.{name} instead.")
                 for name in ("checkpoint", "remat")}
__getattr__ = deprecation_getattr(__name__, _deprecations)


def print_saved_residuals(f: Callable, *args, **kwargs) -> None:
    """Print, one per line, each residual that ``vjp(f, *args, **kwargs)`` saves for the
    backward pass: its type and where it comes from (an argument, a constant, or the
    primitive, named value or jitted function that computes it, with the user's line)."""
    for aval, src in _saved_residuals(f, *args, **kwargs):
        print(f"{aval.str_short()} {src}")


def _saved_residuals(f: Callable, *args, **kwargs) -> list[tuple[ShapedArray, str]]:
    """``(aval, description)`` of each residual of ``vjp(f, *args, **kwargs)``: the jaxpr
    of the vjp is traced, and the outputs that make up the backward function (its leaves)
    are traced back to their producers."""
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))

    def flat_f(*flat):
        a, kw = tree_util.tree_unflatten(in_tree, flat)
        return f(*a, **kw)

    closed, (_, vjp_shape) = api.make_jaxpr(lambda *xs: api.vjp(flat_f, *xs),
                                            return_shape=True)(*leaves)
    num_res = tree_util.tree_structure(vjp_shape).num_leaves
    jaxpr = closed.jaxpr
    res = jaxpr.outvars[len(jaxpr.outvars) - num_res:]
    # As JAX names arguments in its messages: the parameter, then the path into its pytree.
    return _describe(jaxpr, res, pe.flat_arg_names(f, args, kwargs))


def _describe(jaxpr: Jaxpr, res: Sequence, arg_names: Sequence[str]
              ) -> list[tuple[ShapedArray, str]]:
    # A residual that went through reduce_precision is reported as the value it rounds.
    through = {e.outvars[0]: e.invars[0] for e in jaxpr.eqns
               if e.primitive is reduce_precision_p}
    literals = [x for x in res if isinstance(x, Literal)]
    variables = {through.get(x, x) for x in res if not isinstance(x, Literal)}
    found: list[tuple[ShapedArray, str]] = [(x.aval, "from a literal") for x in literals]
    found += [(v.aval, "from a constant") for v in jaxpr.constvars if v in variables]
    for i, v in enumerate(jaxpr.invars):
        if v in variables:
            name = arg_names[i] if i < len(arg_names) else ""
            src = (f"from the argument {name}" if name else
                   f"from the argument at flattened index {i}")
            found.append((v.aval, src))
    for eqn in jaxpr.eqns:
        where = "" if eqn.source_info is None else str(eqn.source_info)
        for v in eqn.outvars:
            if v not in variables:
                continue
            if eqn.primitive is name_p:
                found.append((v.aval, f"named '{eqn.params['name']}' from {where}"))
            elif eqn.primitive is jit_p:
                found.append((v.aval, f"output of jitted function '{eqn.params['name']}' "
                                      f"from {where}"))
            else:
                found.append((v.aval, f"output of {eqn.primitive.name} from {where}"))
    return found

