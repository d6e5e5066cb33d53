"""The transformations and utilities users call on pytrees of arrays: the top of the stack.

Differentiation: ``jvp``, ``linearize``, ``vjp``, ``grad``, ``value_and_grad``, ``jacfwd``,
``jacrev`` (``jacobian``), ``hessian`` and ``stop_gradient``, with JAX's signatures and errors.
Arguments and results are pytrees (``jaxkit.tree_util``); the work is done on flat lists by
``jaxkit.interpreters.ad`` (``jvp_flat``, ``linearize_flat`` and the ``Linearized`` map it
returns). Integer and boolean inputs get ``float0`` tangents and cotangents, as in JAX.

Also ``make_jaxpr`` and ``eval_shape``; device placement and synchronisation are re-exported
from ``jaxkit.api_devices``. ``jit``, ``vmap`` and the other transformations that the libraries
below this layer need live in ``jaxkit.transforms``.
"""
from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit import numpy as jnp
from jaxkit._traceback_filter import api_boundary
from jaxkit._util import fun_name
from jaxkit import tree_util
from jaxkit.api_devices import (  # re-exported, as jax.device_put & co.
    block_until_ready, default_backend, device_count, device_get, device_put, devices,
    local_device_count, local_devices, process_count, process_index)
from jaxkit.api_namespaces import VJPFunction
from jaxkit.interpreters import ad, hijax
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.ad import stop_gradient
from jaxkit.lax import parallel_vma
from jaxkit.lax.convert import convert_element_type_recorded
from jaxkit.lax.sharding import reshard_p
from jaxkit.literals import canonicalize_value
from jaxkit.runtime.sharding import (AxisType, NamedSharding, PartitionSpec,
                                     current_abstract_mesh)
from jaxkit.shape_dtype_struct import ShapeDtypeStruct  # noqa: F401  (jax.ShapeDtypeStruct)
from jaxkit.sharding import reshard
from jaxkit.transforms.jit import JitFunction, jit_object
from jaxkit.transforms.vmap import vmap

__all__ = ["ShapeDtypeStruct", "block_until_ready", "default_backend", "device_count",
           "device_get", "device_put", "devices", "eval_shape", "grad", "hessian", "jacfwd",
           "jacobian", "jacrev", "jvp", "linearize", "local_device_count", "local_devices",
           "make_jaxpr", "process_count", "process_index", "stop_gradient", "value_and_grad",
           "vjp"]


# --------------------------------------------------------------------------------------------
# Argument handling
# --------------------------------------------------------------------------------------------


def _check_callable(fun) -> None:
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")


def _ensure_index(argnums) -> int | tuple[int, ...]:
    """``argnums`` as an int or a tuple of ints (JAX accepts any sequence)."""
    try:
        return operator.index(argnums)
    except TypeError:
        pass
    try:
        return tuple(operator.index(i) for i in argnums)
    except TypeError:
        raise TypeError(f"argnums must be an int or a sequence of ints, got {argnums!r}") \
            from None


def _argnums_partial(fun: Callable, argnums, args: tuple, kwargs: dict
                     ) -> tuple[Callable, tuple]:
    """``fun`` as a function of the arguments selected by ``argnums`` only (the others and
    ``kwargs`` are fixed), and those arguments."""
    nums = (argnums,) if isinstance(argnums, int) else argnums
    if not nums:
        raise ValueError("argnums must not be empty: there is nothing to differentiate")
    canon = []
    for i in nums:
        j = i + len(args) if i < 0 else i
        if not 0 <= j < len(args):
            needed = (max(nums) + 1) if i >= 0 else -i
            raise TypeError(f"differentiating with respect to argnums={argnums} requires at "
                            f"least {needed} positional arguments to be passed by the caller, "
                            f"but got only {len(args)} positional arguments.")
        canon.append(j)
    if len(set(canon)) != len(canon):
        raise ValueError(f"argnums must not contain repeated positions, got {argnums}")

    def f_partial(*dyn_args):
        full = list(args)
        for j, a in zip(canon, dyn_args):
            full[j] = a
        return fun(*full, **kwargs)

    functools.update_wrapper(f_partial, fun, updated=())
    return f_partial, tuple(args[j] for j in canon)


def _check_leaf(x):
    if isinstance(x, core.Tracer):
        return x
    try:
        core.get_aval(x)
    except TypeError:
        raise TypeError(f"Argument '{x}' of type {type(x)} is not a valid JAX type.") from None
    return x


def _split_aux(out):
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError("expected function with aux output to return a two-element tuple, but "
                        f"got type {type(out)} with value {out!r}")
    return out[0], out[1]


def _flat_fun(fun: Callable, in_tree, has_aux: bool, out_tree_cell: list) -> Callable:
    """``fun`` on flat arguments, returning flat outputs (and the aux pytree with has_aux);
    the output structure is recorded in ``out_tree_cell``."""
    def flat(*xs):
        out = fun(*tree_util.tree_unflatten(in_tree, xs))
        aux = None
        if has_aux:
            out, aux = _split_aux(out)
        pairs, out_tree = tree_util.tree_flatten_with_path(out)
        for _, leaf in pairs:
            if not (isinstance(leaf, core.Tracer) or core.is_array_like(leaf)):
                core.get_aval(leaf)  # (raises JAX's error for what is no array)
        out_tree_cell.append(out_tree)
        leaves = [leaf for _, leaf in pairs]
        return (leaves, aux) if has_aux else leaves

    return flat


def _typecompat(a: core.ShapedArray, b: core.ShapedArray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype


# --------------------------------------------------------------------------------------------
# jvp and linearize
# --------------------------------------------------------------------------------------------


@api_boundary
def jvp(fun: Callable, primals, tangents, has_aux: bool = False) -> tuple[Any, ...]:
    """Forward-mode Jacobian-vector product: ``(fun(*primals), J @ tangents)``.

    ``primals`` and ``tangents`` are tuples (or lists) of arguments with the same structure,
    shapes and dtypes (``float0`` tangents for integer or boolean primals). With ``has_aux``
    the result is ``(primals_out, tangents_out, aux)``."""
    _check_callable(fun)
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("primal and tangent arguments to jax.jvp must be tuples or lists; "
                        f"found {type(primals).__name__} and {type(tangents).__name__}.")
    return _jvp(fun, tuple(primals), tuple(tangents), has_aux)


def _jvp(fun: Callable, primals: tuple, tangents: tuple, has_aux: bool):
    flat_p, tree_p = tree_util.tree_flatten(primals)
    flat_t, tree_t = tree_util.tree_flatten(tangents)
    if tree_p != tree_t:
        raise TypeError("primal and tangent arguments to jax.jvp must have the same tree "
                        f"structure; primals have tree structure {tree_p} whereas tangents "
                        f"have tree structure {tree_t}.")
    for p, t in zip(flat_p, flat_t):
        pa = core.get_aval(_check_leaf(p))
        ta = core.get_aval(_check_leaf(t))
        expected = dtypes.tangent_dtype(pa.dtype)
        if ta.dtype != expected:
            raise TypeError("primal and tangent arguments to jax.jvp do not match; dtypes "
                            "must be equal, or in case of int/bool primal dtype the tangent "
                            f"dtype must be float0.Got primal dtype {pa.dtype} and so "
                            f"expected tangent dtype {expected}, but got tangent dtype "
                            f"{ta.dtype} instead.")
        if pa.shape != ta.shape:
            raise ValueError("jvp called with different primal and tangent shapes;Got primal "
                             f"shape {pa.shape} and tangent shape as {ta.shape}")
    cell: list = []
    flat_fun = _flat_fun(fun, tree_p, has_aux, cell)
    tangents_in = [ad.Zero(core.get_aval(t)) if ad.is_zero(t) else t for t in flat_t]
    p_out, t_out, aux = ad.jvp_flat(flat_fun, flat_p, tangents_in, has_aux=has_aux)
    t_out = [ad.instantiate_zeros(t) for t in t_out]
    out_tree = cell[0]
    result = (tree_util.tree_unflatten(out_tree, p_out), tree_util.tree_unflatten(out_tree, t_out))
    return (*result, aux) if has_aux else result


@api_boundary
def linearize(fun: Callable, *primals, has_aux: bool = False):
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` evaluates the JVP at ``primals``
    without re-linearizing (the tangent computation was staged into a linear jaxpr). With
    ``has_aux`` the result is ``(primals_out, f_jvp, aux)``."""
    _check_callable(fun)
    flat, in_tree = tree_util.tree_flatten(primals)
    for x in flat:
        _check_leaf(x)
    cell: list = []
    out, lin, aux = ad.linearize_flat(_flat_fun(fun, in_tree, has_aux, cell), flat,
                                      has_aux=has_aux)
    spec = _LinearSpec(fun, lin, in_tree, cell[0], flat, out)
    # A pytree whose leaves are the residuals (as JAX's): it can be passed to a jitted function.
    f_jvp = tree_util.Partial(functools.partial(_linearized_jvp, spec), list(lin.consts))
    result = (tree_util.tree_unflatten(spec.out_tree, out), f_jvp)
    return (*result, aux) if has_aux else result


class _LinearSpec:
    """The static part of a linearized function or a vjp pullback (compared by identity, so
    the function can be a ``tree_util.Partial`` whose leaves are the residuals): the linear
    program, the primals' and outputs' structures and types, the function's name."""

    __slots__ = ("fun_name", "in_avals", "in_tree", "lin", "out_avals", "out_tree")

    def __init__(self, fun: Callable, lin: ad.Linearized, in_tree, out_tree, primals: Sequence,
                 outs: Sequence):
        self.lin = lin
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.in_avals = [core.get_aval(x) for x in primals]
        self.out_avals = [core.get_aval(o) for o in outs]
        self.fun_name = getattr(fun, "__name__", type(fun).__name__)


def _linearized_jvp(spec: _LinearSpec, residuals, *tangents):
    flat_t, tree_t = tree_util.tree_flatten(tangents)
    if tree_t != spec.in_tree:
        raise TypeError(f"linearized function called with tangents of structure {tree_t}, "
                        f"expected {spec.in_tree} (the structure of the primals).")
    for pa, t in zip(spec.in_avals, flat_t):
        ta, expected = core.get_aval(t), pa.to_tangent_aval()
        if not _typecompat(ta, expected):
            raise ValueError("linearized function called on tangent values inconsistent "
                             "with the original primal values:\nGot tangent aval "
                             f"{ta.str_short(short_dtypes=False)} for primal aval "
                             f"{pa.str_short(short_dtypes=False)} but expected "
                             f"{expected.str_short(short_dtypes=False)}.")
    outs = spec.lin.jvp([ad.Zero(core.get_aval(t)) if ad.is_zero(t) else t for t in flat_t],
                        residuals)
    return tree_util.tree_unflatten(spec.out_tree, outs)


# --------------------------------------------------------------------------------------------
# vjp
# --------------------------------------------------------------------------------------------

_VJP_TOO_MANY_ARGS = """
The function returned by `jax.vjp` applied to {} was called with {} arguments,
but functions returned by `jax.vjp` must be called with a single argument
corresponding to the single value returned by the function being differentiated
(even if that returned value is a tuple or other container).

For example, if we have:

  def f(x):
    return (x, x)
  _, f_vjp = jax.vjp(f, 1.0)

the function `f` returns a single tuple as output, and so we call `f_vjp` with a
single tuple as its argument:

  x_bar, = f_vjp((2.0, 2.0))

If we instead call `f_vjp(2.0, 2.0)`, with the values 'splatted out' as
arguments rather than in a tuple, this error can arise.
"""


def _vjp_pullback(spec: _LinearSpec, residuals, *args):
    if len(args) != 1:
        raise TypeError(_VJP_TOO_MANY_ARGS.format(spec.fun_name, len(args)))
    cts, ct_tree = tree_util.tree_flatten(args[0])
    if ct_tree != spec.out_tree:
        raise ValueError(
            "unexpected tree structure of the cotangent argument to the vjp function of "
            f"{spec.fun_name}: it must match the structure of the function's output "
            f"{spec.out_tree}, but got {ct_tree}.")
    checked = []
    for i, (ct, aval) in enumerate(zip(cts, spec.out_avals)):
        expected = aval.to_tangent_aval()
        ct_aval = core.get_aval(_check_leaf(ct))
        if expected.dtype == dtypes.float0:
            if ct_aval.shape != aval.shape:
                raise ValueError(_ct_type_error(ct_aval, expected, aval))
            checked.append(ad.Zero(expected))
            continue
        if not _typecompat(ct_aval, expected):
            raise ValueError(_ct_type_error(ct_aval, expected, aval))
        checked.append(ct)
    cts_in = spec.lin.vjp(checked, residuals)
    cts_in = [ad.instantiate_zeros(c) if type(c) is ad.Zero else c for c in cts_in]
    return tree_util.tree_unflatten(spec.in_tree, cts_in)


def _ct_type_error(got, expected, aval) -> str:
    return ("unexpected JAX type (e.g. shape/dtype) for argument to VJP function: got "
            f"{got.str_short(short_dtypes=False)}, but expected "
            f"{expected.str_short(short_dtypes=False)} because the corresponding output of the "
            f"differentiated function had JAX type {aval.str_short(short_dtypes=False)}")


@api_boundary
def vjp(fun: Callable, *primals, has_aux: bool = False, reduce_axes: Sequence = ()):
    """``(fun(*primals), vjp_fun)`` where ``vjp_fun(ct)`` is the vector-Jacobian product,
    a tuple with one cotangent per primal. With ``has_aux``: ``(out, vjp_fun, aux)``."""
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to vjp is deprecated")
    _check_callable(fun)
    flat, in_tree = tree_util.tree_flatten(primals)
    for x in flat:
        _check_leaf(x)
    # As JAX's: the primals as a primitive takes them (NumPy float64 as float32, a Python
    # float typed), so an output that is an input comes back so (``TypedFloat(1.0, ...)``).
    flat = [canonicalize_value(x) for x in flat]
    cell: list = []
    out, lin, aux = ad.linearize_flat(_flat_fun(fun, in_tree, has_aux, cell), flat,
                                      has_aux=has_aux)
    out_tree = cell[0]
    spec = _LinearSpec(fun, lin, in_tree, out_tree, flat, out)
    vjp_fun = VJPFunction(functools.partial(_vjp_pullback, spec), list(lin.consts))
    result = (tree_util.tree_unflatten(out_tree, out), vjp_fun)
    return (*result, aux) if has_aux else result


# --------------------------------------------------------------------------------------------
# grad and value_and_grad
# --------------------------------------------------------------------------------------------


def _check_input_dtype_revderiv(name: str, holomorphic: bool, allow_int: bool, x) -> None:
    if hijax.is_hi(x):  # NotImplementedError, as JAX's JVP rules of Flax's variables raise
        raise NotImplementedError(
            f"{name} with respect to a {type(x).__name__} (a high-level value) is not "
            "supported: differentiate with respect to its arrays instead (for Flax, "
            "nnx.with_vars(params, hijax=False)), or pass it as a non-differentiated argument.")
    aval = core.get_aval(_check_leaf(x))
    if holomorphic and not dtypes.issubdtype(aval.dtype, np.complexfloating):
        raise TypeError(f"{name} with holomorphic=True requires inputs with complex dtype, "
                        f"but got {aval.dtype.name}.")
    if (dtypes.is_extended(aval.dtype) or dtypes.issubdtype(aval.dtype, np.integer)
            or dtypes.issubdtype(aval.dtype, np.bool_)):  # keys: float0 cotangents, as ints
        if not allow_int:
            raise TypeError(f"{name} requires real- or complex-valued inputs (input dtype "
                            f"that is a sub-dtype of np.inexact), but got {aval.dtype.name}. "
                            "If you want to use Boolean- or integer-valued inputs, use vjp "
                            "or set allow_int to True.")
    elif not dtypes.issubdtype(aval.dtype, np.inexact):
        raise TypeError(f"{name} requires numerical-valued inputs (input dtype that is a "
                        f"sub-dtype of np.bool_ or np.number), but got {aval.dtype.name}.")


def _check_output_dtype_revderiv(name: str, holomorphic: bool, x) -> None:
    aval = core.get_aval(x)
    if holomorphic:
        if not dtypes.issubdtype(aval.dtype, np.complexfloating):
            raise TypeError(f"{name} with holomorphic=True requires outputs with complex "
                            f"dtype, but got {aval.dtype.name}.")
    elif dtypes.issubdtype(aval.dtype, np.complexfloating):
        raise TypeError(f"{name} requires real-valued outputs (output dtype that is a "
                        f"sub-dtype of np.floating), but got {aval.dtype.name}. For "
                        "holomorphic differentiation, pass holomorphic=True. For "
                        "differentiation of non-holomorphic functions involving complex "
                        "outputs, use jax.vjp directly.")
    elif not dtypes.issubdtype(aval.dtype, np.floating):
        raise TypeError(f"{name} requires real-valued outputs (output dtype that is a "
                        f"sub-dtype of np.floating), but got {aval.dtype.name}. For "
                        "differentiation of functions with integer outputs, use jax.vjp "
                        "directly.")


def _check_scalar(x) -> None:
    msg = "Gradient only defined for scalar-output functions. Output {}.".format
    try:
        aval = core.get_aval(x)
    except TypeError:
        raise TypeError(msg(f"was {x}")) from None
    if aval.shape != ():
        raise TypeError(msg(f"had shape: {aval.shape}"))


def _seed_mesh(args: Any) -> Any:
    """The mesh JAX lays grad's seed out over, when it has Explicit axes: the one in context,
    else that of the (first) argument typed over one, since the output's type is over the
    mesh of the values it was computed from."""
    mesh = current_abstract_mesh()
    if AxisType.Explicit in mesh.axis_types:
        return PartitionSpec()
    for leaf in tree_util.tree_leaves(args):
        typed = getattr(core.get_aval(leaf), "_sharding", None)
        if typed is not None and AxisType.Explicit in typed.mesh.axis_types:
            return NamedSharding(typed.mesh, PartitionSpec())
    return None


def _one_like(aval: core.ShapedArray, args: Any = ()):
    """The output cotangent of grad: a scalar one of the output's type. A weakly typed output
    gets a Python scalar (weak too, so the gradient of a function of Python scalars is weak,
    as in JAX); otherwise a NumPy scalar. Both print as literals in jaxprs (1.0:f32[])."""
    if aval.weak_type:
        if core.current_trace() is core.eval_trace:
            # A concrete array, so the gradient of the identity is an array too (as in JAX).
            return lax.convert_element_type(1, aval.dtype, True)
        one = 1.0 if dtypes.issubdtype(aval.dtype, np.floating) else 1.0 + 0.0j
    else:
        one = np.ones((), aval.dtype)[()]
        if core.current_trace() is core.eval_trace:
            # An array, as JAX's seed (a user's transpose rule is given an Array)
            return lax.convert_element_type(one, aval.dtype)
    if core.current_trace() is not core.eval_trace:
        # JAX's seed is laid out (replicated) over the output's Explicit mesh: its jaxpr
        # shows it.
        seed_sharding = _seed_mesh(args)
        if isinstance(seed_sharding, NamedSharding):
            # over an argument's abstract mesh (no concrete mesh in context): the layout is
            # the equation's parameter, and the program's mesh makes it concrete
            return reshard_p.bind(one, sharding=seed_sharding)
        if seed_sharding is not None:
            return reshard(one, seed_sharding)
        if aval.mur != (frozenset(), frozenset()):
            # JAX's check of its seed (varying as the output, never reduced or unreduced)
            # against the output's cotangent type, whose unreduced and reduced axes swap.
            raise ValueError(
                "unexpected JAX type (e.g. shape/dtype) for argument to VJP function: got "
                f"{aval.update(mur=((), ()))}, but expected "
                f"{aval.update(mur=aval.mur[::-1])} because the corresponding output of the "
                f"differentiated function had JAX type {aval}")
        if aval.vma:  # in a typed shard_map body: varying as the output, as JAX's seed
            return parallel_vma.pvary(one, tuple(aval.vma))
        trace = core.current_trace()
        if type(trace) is pe.DynamicJaxprTrace:
            # Under jit the seed is a traced value, as JAX's (a user's transpose rule is given
            # a tracer, not 1.0), still a literal in the jaxpr.
            return trace.new_literal(one, core.get_aval(one))
    return one


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False, allow_int: bool = False,
                   reduce_axes: Sequence = ()) -> Callable:
    """A function returning ``(fun(*args), gradient)`` (``((value, aux), gradient)`` with
    ``has_aux``). The gradient has the structure of the argument ``argnums`` (a tuple of
    them if ``argnums`` is a sequence)."""
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to grad is deprecated")
    _check_callable(fun)
    argnums = _ensure_index(argnums)

    @api_boundary
    @functools.wraps(fun)
    def value_and_grad_f(*args, **kwargs):
        f_partial, dyn_args = _argnums_partial(fun, argnums, args, kwargs)
        for leaf in tree_util.tree_leaves(dyn_args):
            _check_input_dtype_revderiv("grad", holomorphic, allow_int, leaf)
        ans, vjp_fun, *aux = vjp(f_partial, *dyn_args, has_aux=has_aux)
        _check_scalar(ans)
        _check_output_dtype_revderiv("grad", holomorphic, ans)
        g = vjp_fun(_one_like(core.get_aval(ans), dyn_args))
        g = g[0] if isinstance(argnums, int) else g
        return ((ans, aux[0]) if has_aux else ans), g

    return value_and_grad_f


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False, allow_int: bool = False,
         reduce_axes: Sequence = ()) -> Callable:
    """The gradient of a scalar-valued ``fun`` with respect to the argument(s) ``argnums``
    (reverse mode). With ``has_aux`` the function returns ``(gradient, aux)``."""
    value_and_grad_f = value_and_grad(fun, argnums, has_aux=has_aux, holomorphic=holomorphic,
                                      allow_int=allow_int, reduce_axes=reduce_axes)

    @api_boundary
    @functools.wraps(fun)
    def grad_f(*args, **kwargs):
        _, g = value_and_grad_f(*args, **kwargs)
        return g

    @api_boundary
    @functools.wraps(fun)
    def grad_f_aux(*args, **kwargs):
        (_, aux), g = value_and_grad_f(*args, **kwargs)
        return g, aux

    return grad_f_aux if has_aux else grad_f


# --------------------------------------------------------------------------------------------
# Jacobians
# --------------------------------------------------------------------------------------------


def _map_basis(fn: Callable, basis, out_axes) -> Any:
    """Apply ``fn`` to each basis vector (the leading axis of every leaf of ``basis``) at
    once, stacking results along ``out_axes`` (None: the result does not vary)."""
    return vmap(fn, in_axes=0, out_axes=out_axes)(basis)


def _std_basis(pytree):
    """The standard basis of the space of ``pytree``: for each leaf, an array of shape
    ``(n, *leaf.shape)`` where ``n`` is the total number of elements. Made as JAX's: an
    ``eye`` split among the leaves (under a trace these are equations, as JAX's jaxprs show)
    and converted to each leaf's type, weak type included (JAX's tangents of a Python scalar
    are weak), with a conversion JAX never forwards."""
    leaves = tree_util.tree_leaves(pytree)
    n = sum(core.get_aval(x).size for x in leaves)
    dtype = dtypes.result_type(*leaves) if leaves else np.float32
    return _unravel_into_pytree(pytree, 1, None, jnp.eye(n, dtype=dtype), forwarded=False)


def _unravel_into_pytree(pytree, axis: int, example, arr, forwarded: bool = True):
    """Split ``arr`` along ``axis`` into one piece per leaf of ``pytree`` (JAX's ``split``
    equation), each reshaped to ``arr.shape`` with ``axis`` replaced by the leaf's shape and
    cast to the type of ``example`` (or of the leaf when ``example`` is None): a conversion
    to the piece's own type is ``forwarded`` (no equation), as JAX's is for a jacobian."""
    leaves, treedef = tree_util.tree_flatten(pytree)
    shape = core.get_aval(arr).shape
    axis = axis % len(shape)
    sizes = [core.get_aval(leaf).size for leaf in leaves]
    pieces = jnp.split(arr, np.cumsum(sizes[:-1]), axis)
    parts = []
    for leaf, piece in zip(leaves, pieces):
        laval = core.get_aval(leaf)
        piece = jnp.reshape(piece, shape[:axis] + laval.shape + shape[axis + 1:])
        ex = core.get_aval(leaf if example is None else example)
        if dtypes.issubdtype(core.get_aval(piece).dtype, np.complexfloating) and \
                not dtypes.issubdtype(ex.dtype, np.complexfloating):
            piece = lax.real(piece)
        parts.append(lax.convert_element_type(piece, ex.dtype, ex.weak_type) if forwarded
                     else convert_element_type_recorded(piece, ex.dtype, ex.weak_type))
    return tree_util.tree_unflatten(treedef, parts)


def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """The Jacobian of ``fun`` computed column by column with forward mode (a ``jvp`` per
    input basis vector, vectorized). Each leaf has shape ``out.shape + in.shape``."""
    _check_callable(fun)
    argnums = _ensure_index(argnums)

    @api_boundary
    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        f_partial, dyn_args = _argnums_partial(fun, argnums, args, kwargs)
        # A tree_map, as JAX's: rebuilding the argument's nodes from the checks' results is
        # observable (a node whose constructor refuses ``None`` raises its own error).
        tree_util.tree_map(functools.partial(_check_input_dtype_jacfwd, holomorphic), dyn_args)

        def pushfwd(basis):
            return _jvp(f_partial, dyn_args, basis, has_aux)

        out_axes = (None, -1, None) if has_aux else (None, -1)
        y, jac, *aux = _map_basis(pushfwd, _std_basis(dyn_args), out_axes)
        if holomorphic:
            for leaf in tree_util.tree_leaves(y):
                if not dtypes.issubdtype(core.get_aval(leaf).dtype, np.complexfloating):
                    raise TypeError("jacfwd with holomorphic=True requires outputs with "
                                    f"complex dtype, but got {core.get_aval(leaf).dtype.name}.")
        example_args = dyn_args[0] if isinstance(argnums, int) else dyn_args
        jac_tree = tree_util.tree_map(
            lambda y_leaf, arr: _unravel_into_pytree(example_args, -1, y_leaf, arr), y, jac)
        return (jac_tree, aux[0]) if has_aux else jac_tree

    return jacfun


def _check_input_dtype_jacfwd(holomorphic: bool, x) -> None:
    aval = core.get_aval(_check_leaf(x))
    if holomorphic:
        if not dtypes.issubdtype(aval.dtype, np.complexfloating):
            raise TypeError("jacfwd with holomorphic=True requires inputs with complex "
                            f"dtype, but got {aval.dtype.name}.")
    elif not dtypes.issubdtype(aval.dtype, np.floating):
        raise TypeError("jacfwd requires real-valued inputs (input dtype that is a sub-dtype "
                        f"of np.floating), but got {aval.dtype.name}. For holomorphic "
                        "differentiation, pass holomorphic=True. For differentiation of "
                        "non-holomorphic functions involving complex inputs or integer "
                        "inputs, use jax.jvp directly.")


def jacrev(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """The Jacobian of ``fun`` computed row by row with reverse mode (a ``vjp`` per output
    basis vector, vectorized). Each leaf has shape ``out.shape + in.shape``."""
    _check_callable(fun)
    argnums = _ensure_index(argnums)

    @api_boundary
    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        f_partial, dyn_args = _argnums_partial(fun, argnums, args, kwargs)
        # tree_maps, as JAX's (see jacfwd).
        tree_util.tree_map(functools.partial(_check_input_dtype_revderiv, "jacrev", holomorphic,
                                             allow_int), dyn_args)
        y, pullback, *aux = vjp(f_partial, *dyn_args, has_aux=has_aux)
        tree_util.tree_map(functools.partial(_check_output_dtype_revderiv, "jacrev",
                                             holomorphic), y)
        jac = _map_basis(pullback, _std_basis(y), 0)
        jac = jac[0] if isinstance(argnums, int) else jac
        example_args = dyn_args[0] if isinstance(argnums, int) else dyn_args
        jac_tree = tree_util.tree_map(
            lambda x_leaf, arr: _unravel_into_pytree(y, 0, x_leaf, arr), example_args, jac)
        jac_tree = tree_util.tree_transpose(tree_util.tree_structure(example_args),
                                            tree_util.tree_structure(y), jac_tree)
        return (jac_tree, aux[0]) if has_aux else jac_tree

    return jacfun


def jacobian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
             holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """``jacrev`` under its own name (JAX's ``jax.jacobian`` is a function of its own)."""
    return jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic, allow_int=allow_int)


def hessian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable:
    """The Hessian of ``fun``: ``jacfwd(jacrev(fun))`` (forward over reverse)."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic),
                  argnums, has_aux=has_aux, holomorphic=holomorphic)


# --------------------------------------------------------------------------------------------
# Tracing, shapes and devices
# --------------------------------------------------------------------------------------------


def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = (),
               axis_env: Sequence[tuple[Any, int]] | None = None,
               return_shape: bool = False) -> Callable[..., core.ClosedJaxpr]:
    """``make_jaxpr(f)(*args)`` is the jaxpr of ``f`` traced at the types of ``args``.
    ``axis_env`` binds axis names to sizes, ``[(name, size), ...]``, for the collectives
    ``f`` calls (``lax.psum(x, 'i')``), as if under a ``pmap`` over them.

    As JAX's, it is ``jit(f, static_argnums=...).trace(*args)``: the trace is the one a
    ``jit(f)`` call at those types keeps, so ``f`` runs once for both."""

    @api_boundary
    def make(*args, **kwargs):
        jitted = JitFunction(fun, static_argnums=static_argnums)
        with lax.parallel.extend_axis_env_nd(axis_env or ()):
            traced = jitted.trace(*args, **kwargs)
        return (traced.jaxpr, traced.out_info) if return_shape else traced.jaxpr

    if not callable(fun):  # (what JAX's make_jaxpr, wrapping fun in a partial, raises)
        raise TypeError("the first argument must be callable")
    functools.update_wrapper(make, fun, updated=())
    # (as JAX's: a function without a name, a partial's or else '<unnamed function>')
    make.__name__ = (f"make_jaxpr({fun.__name__})" if hasattr(fun, "__name__")
                     else fun_name(fun))
    make.__qualname__ = (f"make_jaxpr({fun.__qualname__})" if hasattr(fun, "__qualname__")
                         else make.__name__)
    return make


@api_boundary
def eval_shape(fun: Callable, *args, **kwargs):
    """The output shapes and dtypes of ``fun(*args)``, without computing anything: as JAX's,
    ``jit(fun).trace(*args).out_info`` (the trace a ``jit(fun)`` call at those types keeps;
    a jitted ``fun``'s own options apply)."""
    jitted = jit_object(fun) or JitFunction(fun)
    return jitted.trace(*args, **kwargs).out_info
