"""``sparsify``: run a function written for dense arrays on BCOO/BCSR inputs (the tracer-based
variant, ``use_tracer=True``, is ``SparseTrace``: the same rules applied primitive by primitive).

The function is traced to a jaxpr with each BCOO argument standing in as a dense array of its
shape; the jaxpr is then evaluated with a table of sparse rules: an equation whose inputs are
all dense binds its primitive as usual, one with a sparse input runs the primitive's sparse
rule (a missing rule raises NotImplementedError naming the primitive). The BCOO operators
(``@``, ``*``, ``+``, ``-``, ``sum`` ...) are installed here through ``sparsify``, as in JAX."""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from jaxkit import core, lax
from jaxkit import numpy as jnp
from jaxkit.experimental.sparse import _bcoo_ops as ops
from jaxkit.experimental.sparse._base import JAXSparse
from jaxkit._util import safe_map, safe_zip, split_list
from jaxkit.experimental.sparse._spvalues import (
    SparsifyEnv, SparsifyValue, arrays_to_spvalues, spvalues_to_arrays, spvalues_to_avals)
from jaxkit.experimental.sparse.bcoo import (
    BCOO, bcoo_broadcast_in_dim, bcoo_concatenate, bcoo_dot_general, bcoo_dynamic_slice,
    bcoo_multiply_dense, bcoo_multiply_sparse, bcoo_reduce_sum, bcoo_reshape, bcoo_rev,
    bcoo_slice, bcoo_squeeze, bcoo_sum_duplicates, bcoo_transpose)
from jaxkit.experimental.sparse.bcsr import (BCSR, bcsr_broadcast_in_dim, bcsr_concatenate,
                                             bcsr_dot_general)
from jaxkit.interpreters import partial_eval as pe
from jaxkit.transforms.jit import jit_p
from jaxkit.transforms.lift_jvp import lift_jvp
from jaxkit.tree_util import tree_flatten, tree_map, tree_unflatten

__all__ = ["SparseTrace", "SparseTracer", "SparsifyEnv", "SparsifyValue", "arrays_to_spvalues",
           "eval_sparse", "sparse_rules_bcoo", "sparse_rules_bcsr", "sparsify", "sparsify_fun",
           "sparsify_raw", "spvalues_to_arrays", "spvalues_to_avals",
           # re-exported, as JAX's module imports them
           "bcoo_multiply_dense", "lift_jvp", "safe_map", "safe_zip", "split_list", "tree_map"]

# primitive -> rule(*invals, **params); an inval is a sparse array or a dense array. BCSR
# operands use their own (smaller) table, as in JAX.
sparse_rules_bcoo: dict[core.Primitive, Callable] = {}
sparse_rules_bcsr: dict[core.Primitive, Callable] = {}


def _is_sparse(x) -> bool:
    return isinstance(x, JAXSparse)


def _with_data(mat, data):
    """The same sparse array (any format) with new stored data."""
    bufs, aux = mat.tree_flatten()
    return type(mat).tree_unflatten(aux, (data, *bufs[1:]))


def _unique(mat):
    """A nonlinear elementwise op needs each position stored once (nse is kept: static)."""
    if mat.unique_indices:
        return mat
    if isinstance(mat, BCSR):
        return BCSR.from_bcoo(bcoo_sum_duplicates(mat.to_bcoo(), nse=mat.nse))
    return bcoo_sum_duplicates(mat, nse=mat.nse)


def _linear_unop(prim):
    def rule(mat, **params):
        return _with_data(mat, prim.bind(mat.data, **params))
    return rule


def _zero_preserving_unop(prim):
    def rule(mat, **params):
        mat = _unique(mat)
        return _with_data(mat, prim.bind(mat.data, **params))
    return rule


for _p in (lax.neg_p, lax.real_p, lax.imag_p, lax.conj_p, lax.copy_p,
           lax.convert_element_type_p):
    sparse_rules_bcoo[_p] = sparse_rules_bcsr[_p] = _linear_unop(_p)
for _p in (lax.sin_p, lax.sinh_p, lax.tan_p, lax.tanh_p, lax.asin_p, lax.asinh_p, lax.atan_p,
           lax.atanh_p, lax.abs_p, lax.sign_p, lax.sqrt_p, lax.cbrt_p, lax.expm1_p,
           lax.log1p_p, lax.floor_p, lax.ceil_p, lax.round_p, lax.erf_p):
    sparse_rules_bcoo[_p] = sparse_rules_bcsr[_p] = _zero_preserving_unop(_p)


def _integer_pow_rule(mat, *, y):
    if y <= 0:
        raise NotImplementedError(f"sparse rule for integer_pow with non-positive exponent {y} "
                                  "is not implemented because it would result in dense "
                                  "output. If this is your intent, use sparse.todense() to "
                                  "convert your arguments to a dense array.")
    mat = _unique(mat)
    return _with_data(mat, lax.integer_pow_p.bind(mat.data, y=y))


sparse_rules_bcoo[lax.integer_pow_p] = sparse_rules_bcsr[lax.integer_pow_p] = _integer_pow_rule


def _mul_rule(x, y, *, out_dtype=None):
    if out_dtype is not None:  # the operands in the result's dtype first, as JAX's rule does
        x, y = (v.astype(out_dtype) if _is_sparse(v) else jnp.asarray(v).astype(out_dtype)
                for v in (x, y))
    if _is_sparse(x) and _is_sparse(y):
        return bcoo_multiply_sparse(x, y)
    sp, dense = (x, y) if _is_sparse(x) else (y, x)
    data = ops.multiply_dense(sp.data, sp.indices, dense, sp._info)
    return _with_data(sp, data)


def _div_rule(x, y):
    if _is_sparse(x) and not _is_sparse(y) and np.ndim(y) == 0:
        return _with_data(x, lax.div(x.data, jnp.asarray(y, x.data.dtype)))
    raise NotImplementedError("sparse rule for div is only implemented for a sparse "
                              "numerator and a scalar denominator")


def _add_rule(x, y, *, negate=False):
    if not (_is_sparse(x) and _is_sparse(y)):
        raise NotImplementedError("Addition between sparse matrices and dense matrices is not "
                                  "implemented (it would give a dense result); use "
                                  "sparse.todense() on the sparse operand.")
    if x.shape != y.shape:
        raise NotImplementedError("Addition between sparse matrices of different shapes: "
                                  f"{x.shape} and {y.shape}")
    if negate:
        y = _with_data(y, lax.neg(y.data))
    if (x.n_batch, x.n_dense) != (y.n_batch, y.n_dense):
        raise NotImplementedError("Addition between sparse matrices with different batch/dense "
                                  f"layouts: n_batch={x.n_batch}/{y.n_batch}, "
                                  f"n_dense={x.n_dense}/{y.n_dense}")
    # Stored elements of both operands side by side; duplicates sum when read.
    data, indices, shape = _concat_nse(x, y)
    return BCOO((data, indices), shape=shape)


def _concat_nse(x: BCOO, y: BCOO):
    batch = tuple(x.shape[:x.n_batch])
    bx = lambda a: jnp.broadcast_to(a, batch + tuple(a.shape[x.n_batch:]))
    dtype = jnp.result_type(x.data.dtype, y.data.dtype)
    data = jnp.concatenate([bx(x.data).astype(dtype), bx(y.data).astype(dtype)], x.n_batch)
    indices = jnp.concatenate([bx(x.indices), bx(y.indices).astype(x.indices.dtype)],
                              x.n_batch)
    return data, indices, x.shape


sparse_rules_bcoo[lax.mul_p] = _mul_rule
sparse_rules_bcoo[lax.div_p] = _div_rule
sparse_rules_bcoo[lax.add_p] = _add_rule
sparse_rules_bcoo[lax.sub_p] = lambda x, y: _add_rule(x, y, negate=True)


def _dot_general_rule(lhs, rhs, *, dimension_numbers, precision=None,
                      preferred_element_type=None, **_):
    return bcoo_dot_general(lhs, rhs, dimension_numbers=dimension_numbers,
                            preferred_element_type=preferred_element_type)


def _bcsr_dot_general_rule(lhs, rhs, *, dimension_numbers, precision=None,
                           preferred_element_type=None, **_):
    return bcsr_dot_general(lhs, rhs, dimension_numbers=dimension_numbers,
                            preferred_element_type=preferred_element_type)


sparse_rules_bcoo[lax.transpose_p] = lambda x, *, permutation: bcoo_transpose(
    x, permutation=permutation)


def _reduce_sum_rule(x, *, axes, **_):
    mat = bcoo_reduce_sum(x, axes=axes)
    # A full reduction is a dense scalar, as JAX returns it.
    return mat.data.sum() if mat.shape == () else mat


sparse_rules_bcoo[lax.reduce_sum_p] = _reduce_sum_rule


def _concatenate_rule(concatenate: Callable):
    def rule(*operands, dimension):
        if not all(_is_sparse(o) for o in operands):
            raise NotImplementedError("sparse rule for concatenate of sparse and dense "
                                      "operands is not implemented; convert them with "
                                      "sparse.todense() or BCOO.fromdense().")
        return concatenate(operands, dimension=dimension)
    return rule


# The primitives whose sparse rule is the format's own function of the same name (JAX's
# tables of "standard" rules).
_BCOO_STANDARD_PRIMITIVES = {
    lax.broadcast_in_dim_p: lambda x, *, shape, broadcast_dimensions, **_:
        bcoo_broadcast_in_dim(x, shape=shape, broadcast_dimensions=broadcast_dimensions),
    lax.concatenate_p: _concatenate_rule(bcoo_concatenate),
    lax.dot_general_p: _dot_general_rule,
    lax.dynamic_slice_p: lambda x, *starts, slice_sizes, **_:
        bcoo_dynamic_slice(x, starts, slice_sizes),
    lax.reshape_p: lambda x, *, new_sizes, dimensions, **_:
        bcoo_reshape(x, new_sizes=new_sizes, dimensions=dimensions),
    lax.rev_p: lambda x, *, dimensions: bcoo_rev(x, dimensions),
    lax.slice_p: lambda x, *, start_indices, limit_indices, strides:
        bcoo_slice(x, start_indices=start_indices, limit_indices=limit_indices,
                   strides=strides),
    lax.squeeze_p: lambda x, *, dimensions: bcoo_squeeze(x, dimensions=dimensions),
}
for prim, bcoo_impl in _BCOO_STANDARD_PRIMITIVES.items():
    sparse_rules_bcoo[prim] = bcoo_impl

_BCSR_STANDARD_PRIMITIVES = {
    lax.dot_general_p: _bcsr_dot_general_rule,
    lax.broadcast_in_dim_p: lambda x, *, shape, broadcast_dimensions, **_:
        bcsr_broadcast_in_dim(x, shape=shape, broadcast_dimensions=broadcast_dimensions),
    lax.concatenate_p: _concatenate_rule(bcsr_concatenate),
}
for prim, bcsr_impl in _BCSR_STANDARD_PRIMITIVES.items():
    sparse_rules_bcsr[prim] = bcsr_impl


def _jit_rule(*args, jaxpr, **_):
    return _eval_sparse(jaxpr.jaxpr, jaxpr.consts, args)


sparse_rules_bcoo[jit_p] = _jit_rule


def _sparse_rule(prim: core.Primitive, invals) -> Callable:
    """The sparse rule of ``prim`` for these operands (BCSR operands use their own table)."""
    table = (sparse_rules_bcsr if any(isinstance(x, BCSR) for x in invals)
             else sparse_rules_bcoo)
    rule = table.get(prim)
    if rule is None:
        raise NotImplementedError(f"sparse rule for {prim} is not implemented.")
    return rule


def _eval_sparse(jaxpr: core.Jaxpr, consts, args) -> list:
    env: dict = {}

    def read(a):
        return a.val if type(a) is core.Literal else env[a]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = c
    for v, a in zip(jaxpr.invars, args):
        env[v] = a
    for eqn in jaxpr.eqns:
        invals = [read(a) for a in eqn.invars]
        if any(_is_sparse(x) for x in invals):
            outs = _sparse_rule(eqn.primitive, invals)(*invals, **eqn.params)
        else:
            outs = eqn.primitive.bind(*invals, **eqn.params)
        if eqn.primitive.multiple_results:
            outs = list(outs)
        else:
            outs = [outs]
        for v, x in zip(eqn.outvars, outs):
            if type(v) is core.Var:
                env[v] = x
    return [read(v) for v in jaxpr.outvars]


def eval_sparse(jaxpr: core.Jaxpr, consts: Sequence, spvalues: Sequence[SparsifyValue],
                spenv: SparsifyEnv) -> list[SparsifyValue]:
    """Evaluate ``jaxpr`` on values of ``spenv`` (sparse where the inputs are), applying the
    sparse rules; the outputs are added to ``spenv`` and returned as its values."""
    outs = _eval_sparse(jaxpr, consts, list(spvalues_to_arrays(spenv, list(spvalues))))
    return arrays_to_spvalues(spenv, outs)


def sparsify_raw(f: Callable) -> Callable:
    """``f`` on ``SparsifyValue``s: ``wrapped(spenv, *spvalues, **params)`` traces ``f`` with
    each value standing in as a dense array of its shape, evaluates the jaxpr sparsely and
    returns ``(out_spvalues_flat, out_tree)``."""
    def wrapped(spenv: SparsifyEnv, *spvalues: SparsifyValue, **params):
        flat, in_tree = tree_flatten(spvalues, is_leaf=lambda x: isinstance(x, SparsifyValue))
        avals = spvalues_to_avals(spenv, flat)
        out_tree = []

        def flat_fun(*xs):
            out = f(*tree_unflatten(in_tree, list(xs)), **params)
            leaves, tree = tree_flatten(out)
            out_tree.append(tree)
            return [jnp.asarray(x) for x in leaves]

        jaxpr, consts = pe.trace_to_jaxpr(flat_fun, avals)
        result = eval_sparse(jaxpr, consts, flat, spenv)
        if len(result) != len(jaxpr.outvars):
            raise RuntimeError("Internal: eval_sparse returned a wrong number of outputs")
        return result, out_tree[0]
    return wrapped


def sparsify_fun(wrapped_fun, args: list) -> list:
    """Apply a flat function (a callable or a ``linear_util.WrappedFun``) to a flat list of
    sparse and dense arrays with the sparse rules; a flat list of outputs."""
    fun = getattr(wrapped_fun, "call_wrapped", wrapped_fun)
    spenv = SparsifyEnv()
    spvalues = arrays_to_spvalues(spenv, list(args))
    out, _ = sparsify_raw(lambda *xs: list(fun(*xs)))(spenv, *spvalues)
    return list(spvalues_to_arrays(spenv, out))


class SparseTracer(core.Tracer):
    """A value of a ``SparseTrace``: a dense stand-in (its aval) for a value of the trace's
    ``SparsifyEnv``, sparse or dense."""

    __slots__ = ("_spvalue",)

    def __init__(self, trace: SparseTrace, *, spvalue: SparsifyValue):
        self._trace = trace
        self._spvalue = spvalue

    @property
    def spenv(self) -> SparsifyEnv:
        return self._trace.spenv

    @property
    def aval(self) -> core.ShapedArray:
        return spvalues_to_avals(self.spenv, [self._spvalue])[0]

    def full_lower(self):
        return self


class SparseTrace(core.Trace):
    """``sparsify(use_tracer=True)``: each primitive applied to this trace's tracers runs its
    sparse rule when an operand is sparse (binds as usual otherwise), under the parent trace,
    so jit, grad and vmap around or inside compose with it."""

    __slots__ = ("spenv",)

    def __init__(self, spenv: SparsifyEnv):
        super().__init__()
        self.spenv = spenv

    def to_sparse_tracer(self, val) -> SparseTracer:
        """``val`` as this trace's tracer (anything not already one is a dense constant)."""
        if isinstance(val, SparseTracer) and val._trace is self:
            return val
        if isinstance(val, core.Tracer) and val._trace._invalid:
            core.check_tracer_live(val)
        with core.set_current_trace(self.parent):
            (spvalue,) = arrays_to_spvalues(self.spenv, [val])
        return SparseTracer(self, spvalue=spvalue)

    def process_primitive(self, primitive, args, params):
        spvalues = [self.to_sparse_tracer(x)._spvalue for x in args]
        invals = spvalues_to_arrays(self.spenv, spvalues)
        with core.set_current_trace(self.parent):
            if any(v.is_sparse() for v in spvalues):
                outs = _sparse_rule(primitive, invals)(*invals, **params)
            else:
                outs = primitive.bind(*invals, **params)
            outs = list(outs) if primitive.multiple_results else [outs]
            out_spvalues = arrays_to_spvalues(self.spenv, outs)
        tracers = [SparseTracer(self, spvalue=v) for v in out_spvalues]
        return tracers if primitive.multiple_results else tracers[0]


def _sparsify_with_tracer(f: Callable) -> Callable:
    @functools.wraps(f)
    def wrapped(*args):
        spenv = SparsifyEnv()
        args_flat, in_tree = tree_flatten(args, is_leaf=lambda x: isinstance(x, (BCOO, BCSR)))
        in_spvalues = arrays_to_spvalues(spenv, args_flat)
        with core.new_trace(SparseTrace(spenv)) as trace:
            tracers = [SparseTracer(trace, spvalue=v) for v in in_spvalues]
            out_flat, out_tree = tree_flatten(f(*tree_unflatten(in_tree, tracers)))
            out_spvalues = [trace.to_sparse_tracer(x)._spvalue for x in out_flat]
        return tree_unflatten(out_tree, spvalues_to_arrays(spenv, out_spvalues))
    return wrapped


def sparsify(f: Callable, use_tracer: bool = False) -> Callable:
    """Let ``f`` (written for dense arrays) take and return BCOO/BCSR arrays: by tracing it to a
    jaxpr and evaluating that with the sparse rules (default), or with ``use_tracer=True`` by
    running it on ``SparseTracer``s that apply the same rules as it goes."""
    if use_tracer:
        return _sparsify_with_tracer(f)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        spenv = SparsifyEnv()
        spvalues = arrays_to_spvalues(spenv, args)
        out, out_tree = sparsify_raw(f)(spenv, *spvalues, **kwargs)
        return tree_unflatten(out_tree, spvalues_to_arrays(spenv, out))

    return wrapped


def _reshape(self, *args, **kwargs):
    # The new shape is static: closed over, never traced.
    return sparsify(lambda x: x.reshape(*args, **kwargs))(self)


def _astype(self, *args, **kwargs):
    return sparsify(lambda x: x.astype(*args, **kwargs))(self)


def _sum(self, *args, **kwargs):
    return sparsify(lambda x: x.sum(*args, **kwargs))(self)


def _swap_args(f: Callable) -> Callable:
    return lambda a, b: f(b, a)


def _pow(x, y):
    # The exponent is static: closed over, never traced.
    return sparsify(lambda x: jnp.power(x, y))(x)


def _getitem(x, idx):
    # Static indexing lowers to slice/squeeze/rev, each with a sparse rule; the index is
    # closed over (static), never traced.
    return sparsify(lambda x: x[idx])(x)


def _iter(x):
    return iter(x[i] for i in range(x.shape[0]))


_bcoo_methods = {
    "astype": _astype, "reshape": _reshape, "sum": _sum,
    "__abs__": sparsify(jnp.abs), "__neg__": sparsify(jnp.negative),
    "__pos__": sparsify(jnp.positive),
    "__matmul__": sparsify(jnp.matmul), "__rmatmul__": sparsify(_swap_args(jnp.matmul)),
    "__mul__": sparsify(jnp.multiply), "__rmul__": sparsify(_swap_args(jnp.multiply)),
    "__truediv__": sparsify(jnp.divide), "__rtruediv__": sparsify(_swap_args(jnp.divide)),
    "__add__": sparsify(jnp.add), "__radd__": sparsify(_swap_args(jnp.add)),
    "__sub__": sparsify(jnp.subtract), "__rsub__": sparsify(_swap_args(jnp.subtract)),
    "__pow__": _pow, "__getitem__": _getitem, "__iter__": _iter,
}
for method, impl in _bcoo_methods.items():
    setattr(BCOO, method, impl)

_bcsr_methods = {
    "__matmul__": sparsify(jnp.matmul), "__rmatmul__": sparsify(_swap_args(jnp.matmul)),
}
for method, impl in _bcsr_methods.items():
    setattr(BCSR, method, impl)
