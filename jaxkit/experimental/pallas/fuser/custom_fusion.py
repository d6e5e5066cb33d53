"""``custom_fusion``: a function with its own block-spec rules, for what the generic rules
cannot carry through (``def_pull_block_spec``, ``def_push_block_spec``, ``def_eval_rule``;
``def_pallas_impl`` gives the code a TPU kernel would run instead). Outside a kernel it is
just the function (``custom_fusion_p`` evaluates its jaxpr)."""
from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any

from jaxkit import core, tree_util
from jaxkit.experimental.pallas.fuser import block_spec as bsl
from jaxkit.experimental.pallas.fuser.fusible import no_differentiation_rule, pp_function_params
from jaxkit.interpreters import ad, mlir
from jaxkit.interpreters import partial_eval as pe

__all__ = ["CustomEvalContext", "custom_fusion", "custom_fusion_p"]


@dataclasses.dataclass(frozen=True)
class CustomEvalContext:
    """What a custom eval rule sees: its outputs' block specs and block indices."""

    out_block_specs: tuple
    out_block_indices: tuple


def _trace(fun: Callable, in_tree: Any, avals: list, what: str):
    jaxpr, consts, out_tree = pe.trace_tree_to_jaxpr(lambda a: fun(*a), in_tree, avals,
                                                     pe.debug_info(what, fun, ()))
    return jaxpr, consts, out_tree


class custom_fusion:
    """Decorator: ``fun`` with custom block-spec rules (both ``def_eval_rule`` and
    ``def_pull_block_spec`` are required before calling it)."""

    eval_rule: Callable | None = None
    pull_block_spec_rule: Callable | None = None
    push_block_spec_rule: Callable | None = None
    pallas_impl: Callable | None = None

    def __init__(self, fun: Callable[..., Any]):
        functools.update_wrapper(self, fun)
        self.fun = fun

    def def_pallas_impl(self, pallas_impl: Callable) -> Callable:
        self.pallas_impl = pallas_impl
        return pallas_impl

    def def_pull_block_spec(self, rule: Callable) -> Callable:
        self.pull_block_spec_rule = rule
        return rule

    def def_push_block_spec(self, rule: Callable) -> Callable:
        self.push_block_spec_rule = rule
        return rule

    def def_eval_rule(self, rule: Callable) -> Callable:
        self.eval_rule = rule
        return rule

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self.fun, "__name__", "fun")
        if self.eval_rule is None or self.pull_block_spec_rule is None:
            raise ValueError(f"custom_fusion function {name} needs an eval rule and a pull "
                             "block spec rule: define them with def_eval_rule and "
                             "def_pull_block_spec before calling it.")
        try:
            bound = inspect.signature(self.fun).bind(*args, **kwargs)
            bound.apply_defaults()
            args = bound.args
            if bound.kwargs:
                raise TypeError(f"keyword-only arguments {tuple(bound.kwargs)}")
        except (TypeError, ValueError) as e:
            raise TypeError("The input arguments to the custom_fusion-decorated function "
                            f"{name} could not be resolved to positional-only arguments. "
                            f"Binding failed with the error:\n{e}") from e
        flat, in_tree = tree_util.tree_flatten(args)
        avals = [core.get_aval(x) for x in flat]
        jaxpr, consts, out_tree = _trace(self.fun, in_tree, avals, "custom_fusion fun")
        pallas_jaxpr, pallas_consts = None, []
        if self.pallas_impl is not None:
            pallas_jaxpr, pallas_consts, _ = _trace(self.pallas_impl, in_tree, avals,
                                                    "custom_fusion pallas_impl")
        out = custom_fusion_p.bind(
            *consts, *pallas_consts, *flat, jaxpr=jaxpr, num_consts=len(consts),
            eval_rule=self.eval_rule, pull_block_spec_rule=self.pull_block_spec_rule,
            push_block_spec_rule=self.push_block_spec_rule, pallas_jaxpr=pallas_jaxpr,
            pallas_num_consts=len(pallas_consts), in_tree=in_tree, out_tree=out_tree,
            kernel_out_tree=out_tree)
        return tree_util.tree_unflatten(out_tree, out)


custom_fusion_p = core.Primitive("custom_fusion")
custom_fusion_p.multiple_results = True


def _custom_fusion_impl(*args, jaxpr, num_consts, pallas_num_consts, **_):
    consts, rest = args[:num_consts], args[num_consts + pallas_num_consts:]
    return core.eval_jaxpr(jaxpr, consts, *rest)


custom_fusion_p.def_impl(_custom_fusion_impl)
custom_fusion_p.def_abstract_eval(lambda *avals, jaxpr, **_: [v.aval for v in jaxpr.outvars])
mlir.register_lowering(custom_fusion_p, mlir.lower_fun(_custom_fusion_impl,
                                                       multiple_results=True))
ad.defjvp_rule(custom_fusion_p, no_differentiation_rule("custom_fusion"))
core.defpp_params(custom_fusion_p, pp_function_params("eval_rule", "pull_block_spec_rule",
                                                      "push_block_spec_rule"))


def _eval_rule(ctx, *args, eval_rule, num_consts, pallas_num_consts, **_):
    return eval_rule(CustomEvalContext(ctx.out_block_specs, ctx.get_out_block_indices()),
                     *args[num_consts + pallas_num_consts:])


def _pull_rule(ctx, out_transforms, *, pull_block_spec_rule, num_consts,
               pallas_num_consts, **_):
    ins = list(pull_block_spec_rule(out_transforms))
    return [bsl.no_block_index_transform] * (num_consts + pallas_num_consts) + ins


def _push_rule(ctx, *specs, push_block_spec_rule, num_consts, pallas_num_consts, **_):
    if push_block_spec_rule is None:
        raise ValueError("This custom_fusion has no push block spec rule: define one with "
                         "def_push_block_spec to use it in an output fusion.")
    return push_block_spec_rule(specs[num_consts + pallas_num_consts:])


def _usage_rule(ctx, used, *, jaxpr, num_consts, pallas_num_consts, **_):
    read = bsl.compute_usage(jaxpr, used)
    return ([{bsl.Usage.REGULAR}] * (num_consts + pallas_num_consts)
            + [read(v) for v in jaxpr.invars])


bsl.eval_rules[custom_fusion_p] = _eval_rule
bsl.pull_block_spec_rules[custom_fusion_p] = _pull_rule
bsl.push_block_spec_rules[custom_fusion_p] = _push_rule
bsl.usage_rules[custom_fusion_p] = _usage_rule
