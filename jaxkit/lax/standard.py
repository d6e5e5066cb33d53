"""Helpers for writing primitives: shape/dtype/weak-type rules and the standard constructors.

A primitive block in ``jaxkit.lax`` reads::

    def sin(x: ArrayLike) -> Array:
        \"\"\"Elementwise sine. Lowers to ``stablehlo.sine``.\"\"\"
        return sin_p.bind(x)

    sin_p = standard_unop("sin", _float | _complex)
    ad.defjvp(sin_p, lambda g, x: mul(g, cos(x)))
    batching.defvectorized(sin_p)
    mlir.register_lowering(sin_p, mlir.nary_lowering(hlo.SineOp))
"""
from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit.interpreters import dispatch
from jaxkit.lax import sharding_ur
from jaxkit.lax.sharding_rules import defsharding, keeps_operand_mesh, named_elementwise_rule
from jaxkit.core import ShapedArray

# Dtype categories accepted by primitives (checked with dtypes.issubdtype, which also knows
# bfloat16 and the float8 types are floating), each listed in the order JAX 0.10.2's error
# messages name them.
_bool = (np.bool_,)
_signedint = (np.signedinteger,)
_unsigned = (np.unsignedinteger,)
_int = (np.integer,)
_float = (np.floating,)
_complex = (np.complexfloating,)
_inexact = (np.floating, np.complexfloating)
_num = (np.integer, np.floating, np.complexfloating)
_any = (np.integer, np.bool_, np.floating, np.complexfloating)
_int_or_bool = (np.integer, np.bool_)
_ordered = (np.integer, np.floating, np.bool_)  # comparisons other than eq/ne


def _category_names(accepted: Sequence[type]) -> str:
    return ", ".join(t.__name__ for t in accepted)


def check_dtype(name: str, aval: ShapedArray, accepted: Sequence[type], argnum: int | None = None):
    if not any(dtypes.issubdtype(aval.dtype, t) for t in accepted):
        at = "" if argnum is None else f" at position {argnum}"
        raise TypeError(f"{name} does not accept dtype {aval.dtype.name}{at}. Accepted dtypes"
                        f"{at} are subtypes of {_category_names(accepted)}.")


def standard_primitive(shape_rule: Callable, dtype_rule: Callable, name: str,
                       weak_type_rule: Callable | None = None) -> core.Primitive:
    """A single-result primitive executed eagerly by compiling it alone (cached)."""
    prim = core.Primitive(name)
    prim.def_impl(partial(dispatch.apply_primitive, prim))
    weak_type_rule = weak_type_rule or _no_weak_type

    def abstract_eval(*avals, **params):
        return ShapedArray(shape_rule(*avals, **params), dtype_rule(*avals, **params),
                           weak_type_rule(*avals, **params))

    prim.def_abstract_eval(abstract_eval)
    return prim


def standard_multi_result_primitive(abstract_eval: Callable, name: str) -> core.Primitive:
    prim = core.Primitive(name)
    prim.multiple_results = True
    prim.def_impl(partial(dispatch.apply_primitive, prim))
    prim.def_abstract_eval(abstract_eval)
    return prim


def _no_weak_type(*avals, **params) -> bool:
    return False


def _all_weak(*avals, **params) -> bool:
    return all(a.weak_type for a in avals)


def _first_weak(*avals, **params) -> bool:
    return avals[0].weak_type


# --------------------------------------------------------------------------------------------
# Elementwise
# --------------------------------------------------------------------------------------------


def standard_unop(name: str, accepted: Sequence[type], result_dtype: Callable | None = None,
                  weak_type: bool = True) -> core.Primitive:
    """A unary elementwise primitive. ``result_dtype(dtype)`` maps the operand dtype (default:
    unchanged); the result is weak if the operand is, unless ``weak_type=False``."""

    def shape_rule(x, **params):
        return x.shape

    def dtype_rule(x, **params):
        check_dtype(name, x, accepted)
        return x.dtype if result_dtype is None else result_dtype(x.dtype)

    prim = standard_primitive(shape_rule, dtype_rule, name,
                              _first_weak if weak_type else _no_weak_type)
    defsharding(prim, keeps_operand_mesh(named_elementwise_rule(name)))
    sharding_ur.defur(prim, sharding_ur.unop_rule(name))
    return prim


def broadcast_elementwise_shapes(name: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The result shape of an elementwise primitive: rank-0 shapes are ignored; the others
    must have one rank, and along each dimension be equal or 1."""
    full = [tuple(s) for s in shapes if s]
    if not full:
        return ()
    if len({len(s) for s in full}) != 1:
        ranks = ", ".join(map(str, sorted({len(s) for s in full})))
        raise TypeError(f"{name}: arrays must have the same number of dimensions, got "
                        f"{{{ranks}}}")
    out = []
    for dims in zip(*full):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            raise TypeError(f"{name} got incompatible shapes for broadcasting: "
                            f"{', '.join(map(str, full))}.")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def standard_naryop(name: str, accepted: Sequence[Sequence[type]],
                    result_dtype: Callable | None = None, weak_type: bool = True,
                    same_dtypes: bool = True, allow_extended: bool = False) -> core.Primitive:
    """An n-ary elementwise primitive: operands of equal dtypes, one per entry of
    ``accepted`` (or, with ``allow_extended``, of one extended dtype: ``eq``/``ne`` compare
    keys). Shapes broadcast as in JAX's lax: rank-0 operands against anything
    (``mul a 2.0:f32[]``), and operands of equal rank along their size-1 dimensions
    (``add f32[4,1] f32[1,3]`` is ``f32[4,3]``); ranks never grow. The result is weak only if
    every operand is."""

    def shape_rule(*avals, **params):
        return broadcast_elementwise_shapes(name, *(a.shape for a in avals))

    def dtype_rule(*avals, **params):
        if len(avals) != len(accepted):
            raise TypeError(f"{name} takes {len(accepted)} operands, got {len(avals)}")
        for i, (a, acc) in enumerate(zip(avals, accepted)):
            if not (allow_extended and dtypes.is_extended(a.dtype)):
                check_dtype(name, a, acc, i)
        out_dtype = params.get("out_dtype")
        if out_dtype is not None:  # mul's: the operands are converted to it
            return dtypes.check_and_canonicalize_user_dtype(out_dtype, name)
        if same_dtypes and any(a.dtype != avals[0].dtype for a in avals[1:]):
            raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                            f"{', '.join(a.dtype.name for a in avals)}. (Tip: jaxkit.numpy "
                            "functions promote dtypes; lax functions do not.)")
        return avals[0].dtype if result_dtype is None else result_dtype(
            *[a.dtype for a in avals])

    prim = standard_primitive(shape_rule, dtype_rule, name,
                              _all_weak if weak_type else _no_weak_type)
    defsharding(prim, named_elementwise_rule(name))
    sharding_ur.defur(prim, sharding_ur.nary_rule(name))
    return prim


def canonicalize_axis(axis: int, ndim: int, name: str = "axis") -> int:
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise ValueError(f"{name} {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim if ndim else 0


def canonicalize_shape(shape: Any, context: str = "") -> tuple[int, ...]:
    """A user's shape (an int, or a sequence of concrete integers) as a tuple of ints, as JAX's
    ``core.canonicalize_shape``; anything else (a float, a traced value) raises its TypeError."""
    if isinstance(shape, int):
        shape = (shape,)
    try:
        return tuple(operator.index(d) for d in shape)
    except TypeError:
        pass
    msg = f"Shapes must be 1D sequences of concrete values of integer type, got {shape}."
    if context:
        msg += f" {context}."
    tracers = [d for d in shape if isinstance(d, core.Tracer)]
    if tracers:
        msg += ("\nIf using `jit`, try using `static_argnums` or applying `jit` to smaller "
                "subfunctions.")
        msg += tracers[0]._origin_msg()
    raise TypeError(msg)


def as_tuple_of_ints(xs, what: str) -> tuple[int, ...]:
    try:
        # operator.index: a float (2.5, or 2.0) is refused, as JAX refuses it
        return tuple(operator.index(core.concrete_or_error(x, what)) for x in xs)
    except TypeError as e:
        if isinstance(e, core.ConcretizationTypeError):
            raise
        raise TypeError(f"{what} must be a sequence of integers, got {xs!r}") from None


def as_tuple_of_indices(xs, what: str) -> tuple[int, ...]:
    """``as_tuple_of_ints`` that keeps NumPy integers as they are: the parameters JAX passes
    through with ``tuple(...)`` (reduction axes, ``broadcast_dimensions``, slice bounds, ``rev``
    dimensions) print as ``np.int64(1)`` in its jaxprs when given NumPy integers."""
    ints = as_tuple_of_ints(xs, what)
    return tuple(x if isinstance(x, np.integer) else i for x, i in zip(xs, ints))
