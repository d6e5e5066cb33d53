"""``fusible``: mark a kernel-launching function as the point a ``fuse``d function fuses its
surrounding computation into.

``fusible(f)`` calls ``f(*input_fusions, output_fusions)``: each input is handed to ``f`` as a
``Fusion`` that computes it (``x_fn()``), the outputs as a ``Fusion`` (or ``None``) ``f``
applies to its results. Called on its own (or outside ``fuse``) the input fusions just return
the arguments and the output fusions are ``None``; the call is recorded as the primitive
``fusible_p`` carrying the traced jaxpr and ``f`` itself, which ``fuse`` finds and re-calls with
the real fusions.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxkit import core, tree_util
from jaxkit.experimental.pallas.fuser.fusion import Fusion
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe

__all__ = ["fusible", "fusible_p"]


def _trivial_fusion(x: Any) -> Fusion:
    return Fusion(func=lambda: x, in_type=((), {}), out_type=core.get_aval(x))


def fusible(f: Callable | None = None, *, output_fusion_prefix: Any = True) -> Any:
    """Decorator: ``f(*input_fusions, output_fusions)`` becomes a fusible kernel.
    ``output_fusion_prefix`` is a pytree prefix of ``f``'s outputs grouping them: one output
    fusion per leaf."""
    def decorator(f):
        def wrapper(*args):
            def with_trivial_fusions(*a):
                in_fusions = tree_util.tree_map(_trivial_fusion, a)
                prefix = tree_util.tree_structure(output_fusion_prefix)
                out_fusions = tree_util.tree_unflatten(prefix, [None] * prefix.num_leaves)
                return f(*in_fusions, out_fusions)

            flat_args, in_tree = tree_util.tree_flatten(args)
            avals = [core.get_aval(x) for x in flat_args]
            jaxpr, consts, out_tree = pe.trace_tree_to_jaxpr(
                lambda a: with_trivial_fusions(*a), in_tree, avals,
                pe.debug_info("fusible", f, ()))
            # the jaxpr's captured values are passed as leading operands (``num_consts``)
            out = fusible_p.bind(*consts, *flat_args, jaxpr=jaxpr, num_consts=len(consts),
                                 in_tree=in_tree, out_tree=out_tree, func=f,
                                 output_fusion_prefix=output_fusion_prefix)
            return tree_util.tree_unflatten(out_tree, out)

        return wrapper

    return decorator if f is None else decorator(f)


fusible_p = core.Primitive("fusible")
fusible_p.multiple_results = True


def _fusible_impl(*args, jaxpr, num_consts, **_):
    return core.eval_jaxpr(jaxpr, args[:num_consts], *args[num_consts:])


fusible_p.def_impl(_fusible_impl)
fusible_p.def_abstract_eval(lambda *avals, jaxpr, **_: [v.aval for v in jaxpr.outvars])
mlir.register_lowering(fusible_p, mlir.lower_fun(_fusible_impl, multiple_results=True))


def _fusible_batch(axis_data, args, dims, **params):
    # As JAX: only a batch of one (a kernel runs unbatched; fuse it outside vmap).
    if axis_data.size != 1:
        raise NotImplementedError("fusible does not support non-trivial batching")
    args = [x if d is batching.not_mapped else x[(slice(None),) * d + (0,)]
            for x, d in zip(args, dims)]
    outs = fusible_p.bind(*args, **params)
    return [o[None] for o in outs], [0] * len(outs)


batching.defrule(fusible_p, _fusible_batch)


def no_differentiation_rule(name: str):
    """A JVP rule that refuses with JAX's error: JAX differentiates neither a ``fusible``
    nor a ``custom_fusion`` (fuse first, then differentiate the kernel's own code)."""
    def rule(primals, tangents, **params):
        raise NotImplementedError(f"Differentiation rule for '{name}' not implemented")
    return rule


ad.defjvp_rule(fusible_p, no_differentiation_rule("fusible"))


class FunctionParam:
    """A function parameter as JAX prints it: ``<function name at 0x...>``, the address
    masked."""

    def __init__(self, f):
        self.text = f"<function {getattr(f, '__qualname__', f)} at 0xXXXXXXXXXXXX>"

    def __str__(self) -> str:
        return self.text


def pp_function_params(*names: str):
    """A ``defpp_params`` rule: every parameter, sorted, with the functions ``names``
    printed as JAX prints them."""
    def rule(params):
        return dict(sorted({k: FunctionParam(v) if k in names and v is not None else v
                            for k, v in params.items()}.items()))
    return rule


core.defpp_params(fusible_p, pp_function_params("func"))
