"""Dtype conversion: ``convert_element_type`` (with the ``sharding`` parameter that types a
laid-out result, as ``jnp.array(out_sharding=)`` asks) and ``to_edtype``/``from_edtype``, the
conversions to and from an extended dtype (keys, user-defined dtypes).

Split from ``structural.py``, whose primitives use it (``full`` converts its fill value).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jaxkit import core, dtypes, literals
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.mlir import hlo
from jaxkit.lax import sharding_rules as shr
from jaxkit.lax.sharding_eager import lay_out_eager_results
from jaxkit.lax.standard import standard_primitive
from jaxkit.typing import Array, ArrayLike, DTypeLike


# ---- convert_element_type ------------------------------------------------------------------
def convert_element_type(operand: ArrayLike, new_dtype: DTypeLike,
                         weak_type: bool = False, *, sharding: Any = None) -> Array:
    """Cast to ``new_dtype`` (canonicalised). Lowers to ``stablehlo.convert``. ``sharding``
    (a type-level ``NamedSharding``, what ``jnp.array(out_sharding=)`` asks for) types the
    result's layout too; it is a parameter only when given."""
    aval = core.get_aval(operand)
    if dtypes.is_extended(aval.dtype) or dtypes.is_extended(new_dtype):
        return _convert_extended(operand, aval, new_dtype)
    new_dtype = dtypes.check_and_canonicalize_user_dtype(new_dtype,
                                                         "convert_element_type")
    if aval.dtype == new_dtype and aval.weak_type == weak_type and \
            not isinstance(operand, (int, float, complex, np.generic)) and \
            (sharding is None or shr.type_sharding_of(sharding, aval.ndim) == aval._sharding):
        return operand  # as JAX forwards an equation whose type is its operand's
    return convert_element_type_p.bind(operand, new_dtype=new_dtype, weak_type=bool(weak_type),
                                       sharding=sharding)


def convert_formed(operand: Any, new_dtype: np.dtype, weak_type: bool = False) -> Any:
    """JAX's internal conversion (``lax._convert_element_type``), for dtypes that are no user
    request but a value's own: ``new_dtype`` is taken as it is, not canonicalized. JAX
    respects a 64-bit value once formed: a float64 made under x64 and used without stays
    float64 through what jnp does to it (``x.at[i].set(v)`` converts its result back to
    ``x``'s dtype), and an array or tracer of ``new_dtype`` is returned as it is."""
    if isinstance(operand, (Array, core.Tracer)):
        aval = operand.aval
        if aval.dtype == new_dtype and aval.weak_type == weak_type:
            return operand
        return convert_element_type_p.bind(operand, new_dtype=np.dtype(new_dtype),
                                           weak_type=bool(weak_type), sharding=None)
    if dtypes.canonicalize_dtype(new_dtype) == new_dtype:
        return convert_element_type(operand, new_dtype, weak_type)
    return host_constant(operand, new_dtype, weak_type)


def host_constant(value: Any, dtype: np.dtype, weak_type: bool = False) -> Any:
    """``value`` as a NumPy value of ``dtype`` (a scalar for a scalar); a ``TypedNdArray``
    where ``dtype`` is 64-bit without x64 (the dtype of a value formed under x64, which stays
    64-bit as JAX's: a plain NumPy value would be canonicalized to 32 bits)."""
    value = np.asarray(value).astype(dtype)
    if dtypes.canonicalize_dtype(dtype) == dtype:
        return value[()]
    return literals.TypedNdArray(value, core.ShapedArray(value.shape, value.dtype, weak_type))


def convert_element_type_always(operand: Any, new_dtype: Any, weak_type: bool) -> Any:
    """``convert_element_type`` bound even where it changes nothing, as JAX's ``jnp.array``
    ends: under ``jit``/``make_jaxpr`` the result of a constant is a tracer standing for it
    (folded below: a literal, or the constant itself), elsewhere the value as the current
    trace computes it."""
    return convert_element_type_p.bind(operand, new_dtype=np.dtype(new_dtype),
                                       weak_type=bool(weak_type))


def convert_element_type_recorded(operand: Any, new_dtype: Any, weak_type: bool) -> Any:
    """``convert_element_type`` recorded as an equation while staging even where it changes
    nothing (neither folded nor forwarded): JAX's jacobians convert their basis with a layout
    that is never the operand's, so its jaxprs show that equation."""
    trace = core.current_trace()
    params = dict(new_dtype=np.dtype(new_dtype), weak_type=bool(weak_type), sharding=None)
    if isinstance(trace, pe.DynamicJaxprTrace):
        return trace.record(convert_element_type_p, [operand], params)
    return convert_element_type_p.bind(operand, **params)


def _convert_element_type_fold(operand, *, new_dtype, weak_type, sharding=None):
    if sharding is not None:
        return None  # a laid-out constant is an equation, as in JAX
    # A Python int made a weakly typed int, float or complex (a float a weak float, a complex
    # a weak complex) while staging (``full_like(x, 0)`` of a weak ``x``, ``full(s, 1.5)``):
    # JAX folds it to a literal, a Python scalar as weak as the result, and no equation.
    kinds = {int: (int, float, complex), float: (float, complex), complex: (complex,)}
    if weak_type and type(operand) in kinds:
        for kind in kinds[type(operand)]:
            if new_dtype == dtypes.canonicalize_dtype(dtypes.dtype(kind(0))):
                return kind(operand), core.ShapedArray((), new_dtype, weak_type=True)
    # A strongly typed conversion of a rank-0 host constant (``jnp.zeros((), uint32)``) is a
    # literal too. The caller gets a tracer standing for it, as in JAX, not a NumPy scalar:
    # Flax's nnx.Rngs keeps its counter as such a value and assigns into it under jit.
    if not weak_type and isinstance(operand, (int, float, complex, np.generic, np.ndarray)) \
            and not np.shape(operand) and not dtypes.issubdtype(new_dtype, dtypes.extended) \
            and (dtypes.issubdtype(new_dtype, np.complexfloating) or
                 not np.iscomplexobj(operand)):
        return np.asarray(operand).astype(new_dtype)[()], core.ShapedArray((), new_dtype)
    # A conversion of a concrete array to its own type (``jnp.array(np_array)`` under jit) is
    # forwarded: the constant itself, as JAX forwards such an equation.
    if isinstance(operand, (np.ndarray, Array)) and sharding is None:
        aval = core.get_aval(operand)
        if aval.dtype == new_dtype and aval.weak_type == weak_type:
            return operand, aval
    return None


def _convert_element_type_jvp(primals, tangents, *, new_dtype, weak_type, **sharding):
    (x,), (t,) = primals, tangents
    out = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type, **sharding)
    out_aval = core.get_aval(out).to_tangent_aval()
    if type(t) is ad.Zero or out_aval.dtype == dtypes.float0 or \
            core.get_aval(t).dtype == dtypes.float0:
        return out, ad.Zero(out_aval)
    return out, convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type,
                                            **sharding)


def _convert_element_type_transpose(ct, operand, *, new_dtype, weak_type, sharding=None):
    old = operand.aval
    if type(ct) is ad.Zero or old.to_tangent_aval().dtype == dtypes.float0:
        return [ad.Zero(old.to_tangent_aval())]
    # Back to the operand's type, its layout included when the forward one changed it.
    back = {} if sharding is None else {"sharding": old._sharding}
    return [convert_element_type_p.bind(ct, new_dtype=old.dtype, weak_type=old.weak_type,
                                        **back)]


def _convert_element_type_batch(axis_data, args, dims, *, new_dtype, weak_type,
                                sharding=None):
    (x,), (d,) = args, dims
    if sharding is not None and d is not batching.not_mapped:  # the batch keeps its layout
        parts = list(sharding.spec) + [None] * (np.ndim(x) - 1 - len(sharding.spec))
        parts.insert(d, axis_data.explicit_mesh_axis)
        sharding = shr.NamedSharding(sharding.mesh, shr.PartitionSpec(*parts))
    return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type,
                                       sharding=sharding), d


def _convert_element_type_lowering(ctx, x, *, new_dtype, weak_type, sharding=None):
    aval_in, aval_out = ctx.avals_in[0], ctx.avals_out[0]
    if dtypes.issubdtype(aval_in.dtype, np.complexfloating) and \
            not dtypes.issubdtype(new_dtype, np.complexfloating):
        x = hlo.RealOp(x).result  # complex -> real drops the imaginary part, as NumPy
        aval_in = aval_in.update(dtype=np.finfo(aval_in.dtype).dtype)
    if new_dtype == np.bool_ and aval_in.dtype != np.bool_:
        zero = mlir.full_like_aval(0, aval_in)
        return mlir.compare_lowering("NE")(ctx.replace(avals_in=[aval_in, aval_in]), x, zero)
    return mlir.convert(x, aval_out)


convert_element_type_p = standard_primitive(
    lambda x, **_: x.shape, lambda x, *, new_dtype, **_: np.dtype(new_dtype),
    "convert_element_type", lambda x, *, weak_type, **_: weak_type)
convert_element_type_p.def_param_defaults(sharding=None)
ad.defjvp_rule(convert_element_type_p, _convert_element_type_jvp)
pe.const_fold_rules[convert_element_type_p] = _convert_element_type_fold
ad.deftranspose(convert_element_type_p, _convert_element_type_transpose)
batching.defrule(convert_element_type_p, _convert_element_type_batch)
shr.defsharding(convert_element_type_p, shr.keeps_operand_mesh(lambda x, *, sharding=None, **_: (
    shr.unary_rule(x) if sharding is None else sharding)))
lay_out_eager_results(convert_element_type_p)
# The layout is the binder's type, as JAX prints it.
core.defpp_params(convert_element_type_p, lambda params: {
    k: v for k, v in params.items() if k != "sharding"})
shr.defur(convert_element_type_p, shr.sharding_ur.keep_rule)
mlir.register_lowering(convert_element_type_p, _convert_element_type_lowering)


# ---- to_edtype / from_edtype: convert_element_type to and from an extended dtype ----------
# Keys convert only to their own dtype; a user-defined dtype (Flax's fp8 meta dtype) may allow
# its representation dtype, as its rules say. The value is the same tensor either way.
def _dtype_str(dtype) -> str:
    return str(dtype) if dtypes.is_extended(dtype) else dtypes.dtype(dtype).name


def _convert_extended(operand, aval, new_dtype):
    old = aval.dtype
    if old == new_dtype:
        return operand
    if dtypes.is_extended(old) and dtypes.is_extended(new_dtype):
        raise ValueError(f"cannot directly convert between extended dtypes: from {old} to "
                         f"{new_dtype}. Instead, convert to and from their representation "
                         f"dtypes, e.g.:\n{old} -> {old.physical_dtype.name} -> "
                         f"{new_dtype.physical_dtype.name} -> {new_dtype}")
    if dtypes.is_extended(new_dtype):
        return to_edtype_p.bind(operand, edtype=new_dtype)
    return from_edtype_p.bind(operand, dtype=dtypes.canonicalize_dtype(new_dtype))


def _check_edtype_conversion(allowed: bool, src, dst, edtype) -> None:
    if not allowed:
        raise ValueError(f"Cannot convert_element_type from {_dtype_str(src)} to "
                         f"{_dtype_str(dst)}")
    rep = edtype.physical_dtype
    if (src if dst is edtype else dst) != rep:
        raise ValueError(f"can only convert {'to' if dst is edtype else 'from'} extended "
                         f"dtype {edtype} {'from' if dst is edtype else 'to'} its "
                         f"representation dtype {rep.name}, not {_dtype_str(src)}.")


def _to_edtype_shape(x, *, edtype):
    _check_edtype_conversion(edtype.convert_to(x.dtype), x.dtype, edtype, edtype)
    n, rep = x.ndim - len(edtype.physical_shape), tuple(edtype.physical_shape)
    if n < 0 or x.shape[n:] != rep:
        raise ValueError(f"can only convert to extended dtype {edtype} from an array whose "
                         f"shape ends in its representation shape {rep}, got {x.shape}.")
    return x.shape[:n]


def _from_edtype_shape(x, *, dtype):
    _check_edtype_conversion(x.dtype.convert_from(dtype), x.dtype, dtype, x.dtype)
    return (*x.shape, *x.dtype.physical_shape)


def _edtype_jvp(prim):
    def jvp(primals, tangents, **params):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, **params)
        t_aval = core.get_aval(out).to_tangent_aval()
        if type(t) is ad.Zero or t_aval.dtype == dtypes.float0:
            return out, ad.Zero(t_aval)
        return out, convert_element_type(t, t_aval.dtype)
    return jvp


def _edtype_transpose(ct, operand, **params):
    old = operand.aval
    if type(ct) is ad.Zero:
        return [ad.Zero(old.to_tangent_aval())]
    return [convert_element_type(ct, old.dtype)]


to_edtype_p = standard_primitive(_to_edtype_shape, lambda x, *, edtype: edtype, "to_edtype")
from_edtype_p = standard_primitive(_from_edtype_shape, lambda x, *, dtype: dtype, "from_edtype")
for _p in (to_edtype_p, from_edtype_p):
    ad.defjvp_rule(_p, _edtype_jvp(_p))
    ad.deftranspose(_p, _edtype_transpose)
    batching.defvectorized(_p)
    shr.defsharding(_p, shr.unary_rule)
    shr.defur(_p, shr.sharding_ur.keep_rule)
    # The operand's tensor is the result's: an extended dtype's value is its representation.
    mlir.register_lowering(_p, lambda ctx, x, **_: x, physical=True)
