"""``jax.experimental.compute_on``: run part of a computation on another compute unit of the
device (its host, a TPU SparseCore, a GPU stream) through XLA's compute-type annotations.

Two forms, as in JAX:

- ``with compute_on("device_host"):`` tags every equation traced inside with the compute type.
  The tag rides on the equations' name stack (a ``source_info.Metadata`` entry carrying the
  frontend attributes, as ``set_xla_metadata``'s context form does), so it follows equations
  into nested jaxprs and through transformations, prints as nothing (JAX keeps it in
  ``eqn.ctx``, which its printer does not show either), keys jit's cache, and is lowered as
  ``mhlo.frontend_attributes = {_xla_compute_type = "host"}`` on the ops making each result
  and on the broadcasts its rule makes, as JAX does (XLA's host offloader moves those ops to
  the host; on CPU it is the same processor). ``eqn.ctx.compute_type`` reads it back.
- ``compute_on2(f, compute_type=..., out_memory_spaces=...)`` makes ``f`` one
  ``compute_on[jaxpr=...]`` equation (the ``_jaxpr_call`` rules transform it), traced with the
  compute type, whose results live in ``out_memory_spaces``; it lowers to a ``func.call``
  carrying the attributes, each result placed in its memory space.
"""
from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from jaxkit._tree_prefix import prefix_mismatch_error
from jaxkit import core, source_info, tree_util
from jaxkit.avals import MemorySpace, mem_space_to_kind
from jaxkit.experimental._jaxpr_call import call_body, make_jaxpr_call
from jaxkit.experimental.xla_metadata import metadata_scope
from jaxkit.interpreters import dispatch, mlir
from jaxkit.interpreters import partial_eval as pe

__all__ = ["compute_on", "compute_on2", "compute_on_p", "extend_compute_type"]

ir = mlir.ir

# XLA's name for each compute type JAX accepts (``gpu_stream:N`` is a stream annotation).
_XLA_COMPUTE_TYPES = {"device_host": "host", "device": "dense",
                      "tpu_sparsecore": "sparseoffload"}


def _check_valid(compute_type: Any) -> None:
    if not isinstance(compute_type, str):
        raise TypeError("`compute_on`'s compute_type argument must be a string.")
    if compute_type not in _XLA_COMPUTE_TYPES and not compute_type.startswith("gpu_stream:"):
        raise ValueError(
            f"Invalid compute type {compute_type}. Current supported values are "
            "`device_host`, `device`, `tpu_sparsecore`, and `gpu_stream:#`.")


def _attributes(compute_type: str) -> dict[str, str]:
    """The frontend attributes that tell XLA where the ops of ``compute_type`` run."""
    if compute_type.startswith("gpu_stream:"):
        return {"_xla_stream_annotation": compute_type.split(":", 1)[1], "inlineable": "false"}
    return {"_xla_compute_type": _XLA_COMPUTE_TYPES[compute_type]}


@contextlib.contextmanager
def extend_compute_type(compute_type: str | None) -> Iterator[str | None]:
    """Equations traced inside carry ``compute_type`` (nothing changes for None). The inner
    of two nested contexts wins, as in JAX."""
    if compute_type is None:
        yield None
        return
    source_info.compute_types_used = True
    entry = source_info.Metadata(tuple(_attributes(compute_type).items()), compute_type)
    names = source_info.NameStack((*source_info.current_name_stack().stack, entry))
    with metadata_scope(names):
        yield compute_type


@contextlib.contextmanager
def compute_on(compute_type: str) -> Iterator[None]:
    """``with compute_on(t):`` the operations inside run on compute type ``t``:
    ``"device_host"``, ``"device"``, ``"tpu_sparsecore"`` or ``"gpu_stream:N"``."""
    _check_valid(compute_type)
    with extend_compute_type(compute_type):
        yield


def compute_on2(f: Callable | None = None, *, compute_type: str,
                out_memory_spaces: Any, compiler_options: dict | None = None) -> Callable:
    """``f`` (or, without ``f``, a decorator) run as one call on ``compute_type``, its results
    in ``out_memory_spaces`` (a ``jax.memory.Space`` or a tree prefix of the results of
    them); ``compiler_options`` go to XLA as the call's ``backend_config`` (JSON)."""
    kwargs = dict(compute_type=compute_type, out_memory_spaces=out_memory_spaces,
                  compiler_options=compiler_options)
    if f is None:
        return lambda g: _compute_on2(g, **kwargs)
    return _compute_on2(f, **kwargs)


def _compute_on2(f: Callable, *, compute_type: str, out_memory_spaces: Any,
                 compiler_options: dict | None) -> Callable:
    _check_valid(compute_type)
    options = None if compiler_options is None else json.dumps(compiler_options)

    def wrapped(*args):
        flat, in_tree = tree_util.tree_flatten((args, {}))
        avals = [core.get_aval(x) for x in flat]
        def body(ak):
            # Entered inside the trace, so that the body's equations (whose names are
            # recorded relative to the trace's start) carry the compute type themselves.
            with extend_compute_type(compute_type):
                return f(*ak[0])
        jaxpr, consts, out_tree = pe.trace_tree_to_jaxpr(body, in_tree, avals)
        spaces = _flat_spaces(out_memory_spaces, out_tree)
        if any(isinstance(c, core.Tracer) for c in consts):  # traced constants: operands
            flat = [*consts, *flat]
            jaxpr, consts = pe.convert_constvars_jaxpr(jaxpr), []
        outs = compute_on_p.bind(*flat, jaxpr=core.ClosedJaxpr(jaxpr, consts),
                                 compute_type=compute_type, out_memory_spaces=spaces,
                                 compiler_options_json=options)
        return tree_util.tree_unflatten(out_tree, outs)
    return wrapped


def _flat_spaces(spaces: Any, out_tree) -> tuple:
    """One memory space per result, from ``spaces`` (a tree prefix of the results)."""
    dummy = tree_util.tree_unflatten(out_tree, [0] * out_tree.num_leaves)
    try:
        flat = tree_util.broadcast_prefix(spaces, dummy, is_leaf=lambda s: s is None)
    except ValueError as e:
        error = prefix_mismatch_error("compute_on out_memory_spaces", spaces, out_tree,
                                      is_leaf=lambda s: s is None)
        raise error or ValueError("compute_on out_memory_spaces specification must be a "
                                  f"tree prefix of the corresponding value; {e}") from None
    for s in flat:
        if not isinstance(s, MemorySpace):
            # JAX fails an assertion here; the class stays, with a message that helps.
            raise AssertionError(
                f"compute_on2: out_memory_spaces must hold jax.memory.Space values (one per "
                f"result, or a tree prefix of the results), got {s!r}")
    return tuple(flat)


def _has_compute_on(jaxpr: core.Jaxpr) -> bool:
    return any(e.primitive is compute_on_p or any(_has_compute_on(j)
                                                  for j in core.subjaxprs(e.params))
               for e in jaxpr.eqns)


def _lowering(ctx: mlir.LoweringRuleContext, *args, jaxpr: core.ClosedJaxpr,
              compute_type: str, out_memory_spaces: tuple, compiler_options_json: str | None):
    if _has_compute_on(jaxpr.jaxpr):
        raise ValueError("Nesting `compute_on` with different compute types is not allowed.")
    call = call_body(ctx, "compute_on", jaxpr, args)
    attrs = _attributes(compute_type)
    if compiler_options_json is not None:
        attrs["backend_config"] = compiler_options_json
    elif compute_type == "device":  # keeps XLA from inlining the call away
        attrs["inlineable"] = "false"
    call.operation.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(
        {k: ir.StringAttr.get(v) for k, v in attrs.items()})
    return [mlir.place_in_memory(x, mem_space_to_kind(s))
            for x, s in zip(call.results, out_memory_spaces)]


def _out_params(params: dict, sources: Sequence[int | None]) -> dict:
    # A tangent or batched result lives where its primal does; residuals and cotangents of
    # the inputs on the device, as JAX places them.
    spaces = params["out_memory_spaces"]
    return dict(params, out_memory_spaces=tuple(MemorySpace.Device if i is None else spaces[i]
                                                for i in sources))


def _impl(*args, **params):
    # Compiled like any primitive, so that results land in their memory spaces.
    return dispatch.apply_primitive(compute_on_p, *args, **params)


def _abstract_eval(*avals, jaxpr: core.ClosedJaxpr, out_memory_spaces: tuple, **_):
    return [a.update(memory_space=s) for a, s in zip(jaxpr.out_avals, out_memory_spaces)]


compute_on_p = make_jaxpr_call("compute_on", _lowering, impl=_impl, out_params=_out_params)
compute_on_p.def_abstract_eval(_abstract_eval)
