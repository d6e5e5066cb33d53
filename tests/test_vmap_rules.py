"""Every batching rule against a Python loop (``vmapcheck``), over several ``in_axes``.

* Elementwise primitives (and any primitive a public lax function binds on its array
  arguments alone, keeping their shape) are found automatically by tracing every function
  of ``jaxkit.lax``; each runs with batched and unbatched operands at several axes, and n-ary
  ones also with a per-example rank-0 operand beside arrays.
* The other primitives have one row each (a call of the lax function and an example maker).
* ``jaxkit.numpy`` functions have rows too, when the module provides them.
* Coverage: every primitive with a batching rule must be exercised by some row (found by
  tracing the rows) or be named, with the test that does, in ``EXERCISED_ELSEWHERE``; every
  primitive without one must be in ``NO_RULE`` with a reason (both tables are in
  ``_vmap_rule_tables.py``).
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from collections.abc import Callable

import numpy as np
import pytest
from _vmap_rule_tables import EXERCISED_ELSEWHERE, NO_RULE
from vmapcheck import check_vmap, check_vmap_examples, stack_examples

import jaxkit
from jaxkit import core, lax
from jaxkit.experimental.xla_metadata import set_xla_metadata
from jaxkit.transforms.vmap import vmap
from jaxkit.interpreters import batching, mlir

# --------------------------------------------------------------------------------------------
# Finding primitives
# --------------------------------------------------------------------------------------------


def all_primitives() -> dict[str, core.Primitive]:
    """Every primitive of jaxkit: module attributes and the keys of the rule tables."""
    found: set[core.Primitive] = set()
    for info in pkgutil.walk_packages(jaxkit.__path__, "jaxkit."):
        if ".magics" in info.name:
            continue
        try:
            mod = importlib.import_module(info.name)
        except ImportError:
            continue
        found.update(v for v in vars(mod).values() if isinstance(v, core.Primitive))
    # Rule tables may also hold primitives that tests define on the fly; every real primitive
    # has a lowering, so take table keys only from the lowering table.
    found.update(mlir.lowering_rules)
    return {p.name: p for p in found}


def has_batching_rule(p: core.Primitive) -> bool:
    return p in batching.batch_rules


def primitives_in(closed) -> set[str]:
    names = set()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            names.add(eqn.primitive.name)
            for sub in core.subjaxprs(eqn.params):
                walk(sub)

    walk(closed.jaxpr)
    return names


# --------------------------------------------------------------------------------------------
# Elementwise primitives, probed automatically
# --------------------------------------------------------------------------------------------

_PROBE_DTYPES = (np.float32, np.int32, np.bool_, np.complex64, np.uint32)
_SHAPE = (2, 3)


def _probe(fn: Callable):
    """``(arity, dtype, primitive name)`` when ``fn``, called on that many arrays of shape
    (2, 3) and that dtype and nothing else, binds exactly one primitive on all of them and
    returns one array of shape (2, 3); else None."""
    for arity in (1, 2, 3):
        for dt in _PROBE_DTYPES:
            try:
                closed = jaxkit.make_jaxpr(fn)(*[np.zeros(_SHAPE, dt)] * arity)
            except (TypeError, ValueError, KeyError, NotImplementedError, NameError):
                continue
            eqns = closed.eqns
            if (len(eqns) == 1 and list(eqns[0].invars) == list(closed.jaxpr.invars)
                    and [a.shape for a in closed.out_avals] == [_SHAPE]):
                return arity, np.dtype(dt), eqns[0].primitive.name
            return None
    return None


def _accepts_rank0_first(fn: Callable, arity: int, dtype) -> bool:
    try:
        jaxkit.make_jaxpr(fn)(np.zeros((), dtype), *[np.zeros(_SHAPE, dtype)] * (arity - 1))
    except (TypeError, ValueError):
        return False
    return True


def single_primitive_cases() -> list[tuple[str, Callable, int, np.dtype]]:
    """One ``(primitive name, lax function, arity, dtype)`` per primitive that a public lax
    function binds on its array arguments alone, shape-preserving (every elementwise
    primitive, and a few more): these need no hand-written row."""
    found = {}
    for fname in sorted(lax.__all__):
        fn = getattr(lax, fname, None)
        if not inspect.isfunction(fn):
            continue
        sig = _probe(fn)
        if sig is not None:
            found.setdefault(sig[2], (sig[2], fn, sig[0], sig[1]))
    return [found[k] for k in sorted(found)]


def _values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in "iu":
        return rng.integers(1, 5, size=shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.uniform(0.5, 1.5, size=shape) + 1j * rng.uniform(-1, 1, size=shape)
                ).astype(dtype)
    # Positive and away from 1, inside the domain of log, sqrt, acosh (shifted), ...
    return rng.uniform(0.3, 0.9, size=shape).astype(dtype)


_ELEMENTWISE = single_primitive_cases()


def _elementwise_axes(arity: int) -> list:
    # All batched at 0; all at the last axis; mixed axes; each operand unbatched in turn.
    variants = [0, -1, tuple(i % 3 for i in range(arity))]
    for i in range(arity if arity > 1 else 0):
        variants.append(tuple(None if j == i else (j + 1) % 3 for j in range(arity)))
    return variants


@pytest.mark.parametrize("case", _ELEMENTWISE, ids=[c[0] for c in _ELEMENTWISE])
def test_elementwise(case):
    _, fn, arity, dtype = case

    def make(rng):
        return tuple(_values(rng, _SHAPE, dtype) for _ in range(arity))

    check_vmap_examples(fn, make, _elementwise_axes(arity))


_NARY = [c for c in _ELEMENTWISE if c[2] > 1 and _accepts_rank0_first(c[1], c[2], c[3])]


@pytest.mark.parametrize("case", _NARY, ids=[c[0] for c in _NARY])
def test_elementwise_rank0_operand(case):
    # One operand is a scalar per example (rank 0 beside arrays, the lax convention).
    _, fn, arity, dtype = case

    def make(rng):
        return (_values(rng, (), dtype),) + tuple(_values(rng, _SHAPE, dtype)
                                                  for _ in range(arity - 1))

    check_vmap_examples(fn, make, [0, (0,) + (1,) * (arity - 1), (None,) + (-1,) * (arity - 1),
                                   (0,) + (None,) * (arity - 1)])


# --------------------------------------------------------------------------------------------
# Rows: one call of a lax function per primitive (or feature of a rule)
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Row:
    name: str
    fn: Callable
    make: Callable  # make(rng) -> tuple of per-example arguments
    in_axes: list = dataclasses.field(default_factory=lambda: [0, -1])
    out_axes: object = 0

    def __str__(self):
        return self.name


def f32(*shape):
    return lambda rng: rng.normal(size=shape).astype(np.float32)


def i32(lo, hi, *shape):
    return lambda rng: rng.integers(lo, hi, size=shape).astype(np.int32)


def args(*makers):
    return lambda rng: tuple(m(rng) for m in makers)


def _both(n):
    """in_axes variants for ``n`` arguments: all at 0, all last, each unbatched in turn."""
    out = [0, -1]
    for i in range(n if n > 1 else 0):
        out.append(tuple(None if j == i else (-1 if j % 2 else 0) for j in range(n)))
    return out


G_DN = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                  start_index_map=(0,))
S_DN = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                   scatter_dims_to_operand_dims=(0,))


def _ad_api():
    return importlib.import_module("jaxkit.api")


def _checkpoint():
    return importlib.import_module("jaxkit.transforms.checkpoint")


def _custom_jvp_fn():
    """``x * sin(y)`` with a hand-written JVP (the derivative is the true one)."""
    cd = importlib.import_module("jaxkit.transforms.custom_derivatives")

    @cd.custom_jvp
    def f(x, y):
        return lax.mul(x, lax.sin(y))

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        return f(x, y), lax.add(lax.mul(tx, lax.sin(y)), lax.mul(lax.mul(x, lax.cos(y)), ty))

    return f


def _custom_vjp_fn():
    """``x * sin(y)`` with a hand-written VJP."""
    cd = importlib.import_module("jaxkit.transforms.custom_vjp")

    @cd.custom_vjp
    def f(x, y):
        return lax.mul(x, lax.sin(y))

    def fwd(x, y):
        return f(x, y), (x, y)

    def bwd(res, g):
        x, y = res
        return lax.mul(g, lax.sin(y)), lax.mul(g, lax.mul(x, lax.cos(y)))

    f.defvjp(fwd, bwd)
    return f


def _lax(name):
    """A lax function by name, or None when it does not exist (yet)."""
    return getattr(lax, name, None)


ROWS = [
    # structural
    Row("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (4, 2, 3), (1, 2)),
        args(f32(2, 3)), [0, 1, -1]),
    Row("broadcast_in_dim_unit", lambda x: lax.broadcast_in_dim(x, (2, 3), (0, 1)),
        args(f32(2, 1))),
    Row("broadcast", lambda x: lax.broadcast(x, (4,)), args(f32(2, 3))),
    Row("expand_dims", lambda x: lax.expand_dims(x, (1,)), args(f32(2, 3)), [0, 1, -1]),
    Row("reshape", lambda x: lax.reshape(x, (3, 2)), args(f32(2, 3)), [0, 1, -1]),
    Row("reshape_dimensions", lambda x: lax.reshape(x, (6,), (1, 0)), args(f32(2, 3))),
    Row("collapse", lambda x: lax.collapse(x, 0, 2), args(f32(2, 3, 4)), [0, 2, -1]),
    Row("squeeze", lambda x: lax.squeeze(x, (1,)), args(f32(2, 1, 3)), [0, 1, 2, -1]),
    Row("transpose", lambda x: lax.transpose(x, (2, 0, 1)), args(f32(2, 3, 4)), [0, 1, 2, -1]),
    Row("rev", lambda x: lax.rev(x, (1,)), args(f32(2, 3)), [0, 1, -1]),
    Row("iota", lambda x: lax.add(x, lax.convert_element_type(lax.iota(np.int32, 3),
                                                              np.float32)), args(f32(3))),
    Row("broadcasted_iota", lambda x: lax.mul(x, lax.convert_element_type(
        lax.broadcasted_iota(np.int32, (2, 3), 1), np.float32)), args(f32(2, 3))),
    Row("concatenate", lambda x, y: lax.concatenate([x, y, x], 1),
        args(f32(2, 3), f32(2, 1)), _both(2) + [(1, 0)]),
    Row("split", lambda x: tuple(lax.split(x, (1, 2), axis=1)), args(f32(2, 3)), [0, 1, -1]),
    Row("convert_element_type", lambda x: lax.convert_element_type(x, np.int32),
        args(f32(2, 3))),
    Row("stack", lambda x, y: lax.stack([x, y, x], 1), args(f32(2, 3), f32(2, 3)),
        _both(2) + [(1, 0)]),
    Row("unstack", lambda x: lax.unstack(x, 1), args(f32(2, 3, 4)), [0, 1, 2, -1]),
    Row("tile", lambda x: lax.tile(x, (2, 1, 3)), args(f32(2, 3, 1)), [0, 1, -1]),
    Row("mulhi", lambda x, y: lax.mulhi(x, y), args(i32(-2**31, 2**31 - 1, 4),
                                                    i32(-2**31, 2**31 - 1, 4)), _both(2)),
    Row("optimization_barrier", lambda x, y: lax.optimization_barrier((x, lax.mul(x, y))),
        args(f32(2, 3), f32(2, 3)), _both(2)),
    Row("dce_sink", lambda x: (lax.dce_sink(lax.sin(x)), lax.cos(x))[1], args(f32(2, 3))),
    Row("stage", lambda x: lax.add(x, lax.stage_p.bind(x)), args(f32(2, 3))),
    Row("device_put", lambda x: lax.device_put_p.bind(
        x, devices=(None,), srcs=(None,), copy_semantics=(lax.ArrayCopySemantics.REUSE_INPUT,)
    )[0], args(f32(2, 3)), [0, 1]),
    *[Row(name, lambda x, y, name=name: getattr(lax, f"{name}_p").bind(x, y),
          args(f32(4), f32(4)), _both(2)) for name in ("eq_to", "le_to", "lt_to")],
    # reductions
    Row("reduce_sum", lambda x: lax.reduce_sum(x, (0, 2)), args(f32(2, 3, 4)), [0, 1, 2, -1]),
    Row("reduce_max", lambda x: lax.reduce_max(x, (1,)), args(f32(2, 3)), [0, 1, -1]),
    Row("reduce_window_sum", lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 2),
                                                         ((1, 0), (0, 1)), (2, 1)),
        args(f32(3, 4)), [0, 1, -1]),
    Row("reduce_window_max", lambda x: lax.reduce_window(x, -np.inf, lax.max, (2, 2), (1, 1),
                                                         "SAME"), args(f32(3, 4)), [0, 2]),
    Row("reduce_window_min", lambda x: lax.reduce_window(x, np.inf, lax.min, (3,), (2,),
                                                         "VALID"), args(f32(5)), [0, -1]),
    Row("reduce_window_general", lambda x, y: lax.reduce_window(
        (x, y), (0.0, 1.0), lambda a, b: (lax.add(a[0], b[0]), lax.mul(a[1], b[1])), (2,),
        (1,), "VALID"), args(f32(4), f32(4)), [0, (0, None), (None, 0)]),
    Row("select_and_scatter_add", lambda s, x: lax.select_and_scatter_add_p.bind(
        s, x, select_prim=lax.ge_p, window_dimensions=(2, 2), window_strides=(1, 2),
        padding=((1, 0), (0, 1))), args(f32(3, 2), f32(3, 4)), _both(2)),
    Row("select_and_gather_add", lambda t, x: lax.select_and_gather_add_p.bind(
        t, x, select_prim=lax.le_p, window_dimensions=(2, 2), window_strides=(1, 1),
        padding=((0, 1), (1, 0)), base_dilation=(1, 2), window_dilation=(2, 1)),
        args(f32(3, 4), f32(3, 4)), _both(2)),
    Row("reduce_min", lambda x: lax.reduce_min(x, (0,)), args(f32(2, 3)), [0, 1, -1]),
    Row("reduce_prod", lambda x: lax.reduce_prod(x, (0, 1)), args(f32(2, 3)), [0, 1, -1]),
    Row("reduce_and", lambda x: lax.reduce_and(lax.gt(x, 0.0), (1,)), args(f32(2, 3))),
    Row("reduce_or", lambda x: lax.reduce_or(lax.gt(x, 0.0), (0,)), args(f32(2, 3))),
    Row("reduce_xor", lambda x: lax.reduce_xor(x, (1,)), args(i32(0, 8, 2, 3))),
    Row("argmax", lambda x: lax.argmax(x, 1, np.int32), args(f32(2, 3)), [0, 1, -1]),
    Row("argmin", lambda x: lax.argmin(x, 0, np.int32), args(f32(2, 3)), [0, 1, -1]),
    Row("reduce_variadic", lambda x, y: lax.reduce(
        (x, y), (np.float32(0), np.float32(-np.inf)),
        lambda a, b: (lax.add(a[0], b[0]), lax.max(a[1], b[1])), (1,)),
        args(f32(2, 3), f32(2, 3)), _both(2)),
    # slicing
    Row("slice", lambda x: lax.slice(x, (0, 1), (2, 3)), args(f32(2, 3)), [0, 1, -1]),
    Row("slice_strided", lambda x: lax.slice(x, (0, 0), (4, 3), (2, 2)), args(f32(4, 3))),
    Row("pad", lambda x, v: lax.pad(x, v, ((1, 0, 0), (0, 1, 1))),
        args(f32(2, 3), f32()), _both(2)),
    Row("pad_negative", lambda x, v: lax.pad(x, v, ((-1, 1, 0), (0, 0, 0))),
        args(f32(2, 3), f32())),
    Row("dynamic_slice", lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 2)),
        args(f32(3, 4), i32(0, 3, ), i32(-1, 4)), _both(3) + [(1, 0, None)]),
    Row("dynamic_update_slice", lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 1)),
        args(f32(3, 4), f32(2, 2), i32(0, 3)), _both(3) + [(1, None, None)]),
    Row("dynamic_index_in_dim", lambda x, i: lax.dynamic_index_in_dim(x, i, 1, False),
        args(f32(3, 4), i32(0, 4)), _both(2)),
    # indexing
    Row("gather", lambda x, idx: lax.gather(x, idx, G_DN, (1, 3)),
        args(f32(4, 3), i32(0, 4, 2, 1)), _both(2) + [(1, 1)]),
    Row("gather_clip", lambda x, idx: lax.gather(x, idx, G_DN, (1, 3), mode="clip"),
        args(f32(4, 3), i32(-2, 6, 2, 1)), _both(2)),
    Row("gather_fill", lambda x, idx: lax.gather(x, idx, G_DN, (1, 3), mode="fill"),
        args(f32(4, 3), i32(-2, 6, 2, 1)), _both(2)),
    Row("scatter", lambda x, idx, u: lax.scatter(x, idx, u, S_DN, unique_indices=True),
        args(f32(4, 3), lambda rng: rng.permutation(4)[:2, None].astype(np.int32),
             f32(2, 3)), _both(3)),
    Row("scatter-add", lambda x, idx, u: lax.scatter_add(x, idx, u, S_DN),
        args(f32(4, 3), i32(0, 4, 2, 1), f32(2, 3)), _both(3) + [(1, None, -1)]),
    Row("scatter-sub", lambda x, idx, u: lax.scatter_sub(x, idx, u, S_DN),
        args(f32(4, 3), i32(0, 4, 2, 1), f32(2, 3)), _both(3)),
    Row("scatter-mul", lambda x, idx, u: lax.scatter_mul(x, idx, u, S_DN),
        args(f32(4, 3), i32(0, 4, 2, 1), f32(2, 3)), _both(3)),
    Row("scatter-min", lambda x, idx, u: lax.scatter_min(x, idx, u, S_DN),
        args(f32(4, 3), i32(0, 4, 2, 1), f32(2, 3)), _both(3)),
    Row("scatter-max", lambda x, idx, u: lax.scatter_max(x, idx, u, S_DN, mode="drop"),
        args(f32(4, 3), i32(-1, 5, 2, 1), f32(2, 3)), _both(3)),
    Row("scatter_apply", lambda x, idx: lax.scatter_apply(x, idx, lax.exp, S_DN,
                                                           update_shape=(3, 3), mode="clip"),
        args(f32(4, 3), i32(-1, 5, 3, 1)), _both(2)),
    # elementwise primitives with params
    Row("integer_pow", lambda x: lax.integer_pow(x, 3), args(f32(2, 3))),
    Row("round", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)
        if hasattr(lax, "RoundingMethod") else lax.round(x), args(f32(2, 3))),
    Row("clamp", lambda lo, x, hi: lax.clamp(lo, x, hi),
        args(f32(), f32(2, 3), lambda rng: np.float32(rng.uniform(1, 2))), _both(3)),
    Row("clamp_arrays", lambda lo, x, hi: lax.clamp(lo, x, hi),
        args(f32(2, 3), f32(2, 3), f32(2, 3)), _both(3)),
    Row("select_n", lambda p, x, y: lax.select_n(p, x, y),
        args(lambda rng: rng.integers(0, 2, (2, 3)).astype(bool), f32(2, 3), f32(2, 3)),
        _both(3)),
    Row("select_n_scalar_pred", lambda p, x, y: lax.select_n(p, x, y),
        args(lambda rng: np.bool_(rng.integers(0, 2)), f32(2, 3), f32(2, 3)), _both(3)),
    Row("reduce_precision", lambda x: lax.reduce_precision(x, 5, 10), args(f32(2, 3))),
    Row("bitcast_convert_type", lambda x: lax.bitcast_convert_type(x, np.int32),
        args(f32(2, 3))),
    # dot_general
    Row("dot_general_matmul", lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ()))),
        args(f32(2, 3), f32(3, 4)), _both(2) + [(1, 1)]),
    Row("dot_general_batch", lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))),
        args(f32(2, 2, 3), f32(2, 3, 4)), _both(2) + [(2, 3)]),
    Row("dot_general_vector", lambda a, b: lax.dot_general(a, b, (((0,), (0,)), ((), ()))),
        args(f32(3), f32(3)), _both(2)),
    Row("dot_general_outer", lambda a, b: lax.dot_general(a, b, (((), ()), ((), ()))),
        args(f32(2), f32(3)), _both(2)),
    Row("dot_general_int_preferred", lambda a, b: lax.dot_general(
        a, b, (((1,), (0,)), ((), ())), preferred_element_type=np.float32),
        args(i32(-3, 3, 2, 3), i32(-3, 3, 3, 2)), _both(2)),
    Row("scaled_dot", lambda a, b, s: lax.scaled_dot(
        a, b, lhs_scale=s, preferred_element_type=np.float32),
        args(f32(2, 4), f32(4, 3), f32(2, 2)), _both(3)),
    # sorting
    Row("sort", lambda x: _lax("sort")(x, dimension=0), args(f32(3, 2)), [0, 1, -1]),
    Row("sort_multi_operand", lambda k, v: tuple(_lax("sort")((k, v), dimension=1, num_keys=1)),
        args(f32(2, 3), f32(2, 3)), _both(2)),
    Row("top_k", lambda x: tuple(_lax("top_k")(x, 2)), args(f32(2, 4)), [0, 1, -1]),
    Row("approx_top_k", lambda x: tuple(_lax("approx_min_k")(x, 2, reduction_dimension=0)),
        args(f32(3, 4)), [0, 1, -1]),
    # linear algebra (LAPACK custom call)
    Row("eig", lambda x: tuple(lax.linalg.eig(x)), args(f32(3, 3)), [0, 1, -1]),
    Row("cholesky", lambda x: lax.linalg.cholesky(x @ x.T + 3 * jnp.eye(3)), args(f32(3, 3)),
        [0, 1, -1]),
    Row("triangular_solve", lambda a, b: lax.linalg.triangular_solve(
        a + 3 * jnp.eye(3), b, left_side=True, lower=True), args(f32(3, 3), f32(3, 2)),
        _both(2)),
    Row("lu", lambda x: tuple(lax.linalg.lu(x)), args(f32(4, 3)), [0, 1, -1]),
    Row("lu_pivots_to_permutation", lambda p: lax.linalg.lu_pivots_to_permutation(p, 4),
        args(i32(0, 4, 3)), [0, -1]),
    Row("qr", lambda x: tuple(lax.linalg.qr(x, full_matrices=False)), args(f32(4, 3)),
        [0, 1, -1]),
    Row("geqrf", lambda x: tuple(importlib.import_module("jaxkit.lax.linalg.qr").geqrf_p.bind(x)),
        args(f32(4, 3)), [0, 1, -1]),
    Row("geqp3", lambda x, p: tuple(importlib.import_module("jaxkit.lax.linalg.qr").geqp3_p.bind(
        x, p)), args(f32(4, 3), i32(0, 1, 3)), _both(2)),
    Row("householder_product", lambda a, t: lax.linalg.householder_product(a, t),
        args(f32(4, 3), f32(2)), _both(2)),
    Row("ormqr", lambda a, t, c: lax.linalg.ormqr(a, t, c), args(f32(3, 3), f32(3), f32(3, 2)),
        _both(3)),
    Row("eigh", lambda x: lax.linalg.eigh(x)[1], args(f32(3, 3)), [0, 1, -1]),
    Row("svd", lambda x: lax.linalg.svd(x, compute_uv=False), args(f32(4, 3)), [0, 1, -1]),
    Row("schur", lambda x: lax.linalg.schur(x, compute_schur_vectors=False)[0],
        args(f32(3, 3)), [0, -1]),
    Row("hessenberg", lambda x: tuple(lax.linalg.hessenberg(x)), args(f32(3, 3)), [0, -1]),
    Row("tridiagonal", lambda x: tuple(lax.linalg.tridiagonal(x)), args(f32(3, 3)), [0, -1]),
    Row("tridiagonal_solve", lambda dl, d, du, b: lax.linalg.tridiagonal_solve(dl, d + 4, du, b),
        args(f32(3), f32(3), f32(3), f32(3, 2)), _both(4)),
    Row("cholesky_update", lambda w: lax.linalg.cholesky_update(2 * jnp.eye(3), w),
        args(f32(3)), [0, -1]),
    Row("symmetric_product", lambda a, c: lax.linalg.symmetric_product(a, c),
        args(f32(3, 2), f32(3, 3)), _both(2)),
    # convolution
    Row("conv_general_dilated", lambda x, w: lax.conv_general_dilated(x, w, (1,), "VALID"),
        args(f32(1, 2, 5), f32(3, 2, 2)), _both(2) + [(3, 2)]),
    Row("conv_general_dilated_2d", lambda x, w: lax.conv_general_dilated(
        x, w, (1, 2), "SAME", rhs_dilation=(1, 1), dimension_numbers=("NHWC", "HWIO", "NHWC")),
        args(f32(2, 4, 5, 2), f32(3, 3, 2, 3)), _both(2)),
    Row("conv_feature_groups", lambda x, w: lax.conv_general_dilated(
        x, w, (1,), ((1, 1),), feature_group_count=2), args(f32(1, 4, 5), f32(4, 2, 3)),
        _both(2)),
    # transformations bound as primitives
    Row("stop_gradient", lambda x: lax.mul(_ad_api().stop_gradient(x), x), args(f32(2, 3))),
    Row("custom_jvp_call", lambda x, y: _custom_jvp_fn()(x, y), args(f32(2, 3), f32(2, 3)),
        _both(2)),
    Row("custom_vjp_call", lambda x, y: _custom_vjp_fn()(x, y), args(f32(2, 3), f32(2, 3)),
        _both(2)),
    Row("custom_vjp_under_grad", lambda x, y: _ad_api().grad(lambda a: lax.reduce_sum(
        _custom_vjp_fn()(a, y), (0, 1)))(x), args(f32(2, 3), f32(2, 3)), _both(2)),
    Row("custom_jvp_under_grad", lambda x, y: _ad_api().grad(lambda a: lax.reduce_sum(
        _custom_jvp_fn()(a, y), (0, 1)))(x), args(f32(2, 3), f32(2, 3)), _both(2)),
    Row("checkpoint", lambda x: _checkpoint().checkpoint(
        lambda a: lax.sin(_checkpoint().checkpoint_name(lax.mul(a, a), "sq")))(x),
        args(f32(2, 3))),
    Row("checkpoint_under_grad", lambda x: _ad_api().grad(lambda a: lax.reduce_sum(
        _checkpoint().checkpoint(lambda b: lax.sin(lax.sin(b)))(a), (0, 1)))(x),
        args(f32(2, 3))),
    # control flow (the predicate, index, carry and xs batched or not)
    Row("cond", lambda p, x, y: lax.cond(p, lambda a, b: lax.mul(a, b),
                                           lambda a, b: lax.sub(a, b), x, y),
        args(lambda rng: np.bool_(rng.integers(0, 2)), f32(2, 3), f32(2, 3)),
        _both(3) + [(None, 0, 0)]),
    Row("switch", lambda i, x: lax.switch(i, [lax.sin, lax.cos, lax.neg], x),
        args(i32(0, 3), f32(2, 3)), _both(2)),
    Row("while", lambda n, x: lax.while_loop(
        lambda c: lax.lt(c[0], n), lambda c: (lax.add(c[0], 1), lax.mul(c[1], 1.5)),
        (np.int32(0), x))[1], args(i32(0, 4), f32(2, 3)), _both(2)),
    Row("fori_loop", lambda x: lax.fori_loop(0, 3, lambda i, c: lax.add(c, lax.sin(c)), x),
        args(f32(2, 3))),
    Row("scan", lambda c, xs: lax.scan(lambda c, x: (lax.add(c, x), lax.mul(c, x)), c, xs),
        args(f32(3), f32(4, 3)), _both(2) + [(0, 2)]),
    Row("scan_reverse_consts", lambda w, xs: lax.scan(
        lambda c, x: (lax.add(lax.mul(c, w), x), c), np.zeros(3, np.float32), xs,
        reverse=True), args(f32(3), f32(4, 3)), _both(2)),
    # fft: the transformed axes are the trailing ones, so the batch axis must move in front
    Row("fft_rfft", lambda x: lax.fft(x, "RFFT", (4,)), args(f32(3, 4)), [0, 1, -1]),
    Row("fft_fft2", lambda x: lax.fft(lax.convert_element_type(x, np.complex64), "FFT", (3, 4)),
        args(f32(3, 4)), [0, 1, -1]),
    # jit
    Row("jit", lambda x, y: jaxkit.jit(lambda a, b: lax.mul(lax.sin(a), b))(x, y),
        args(f32(2, 3), f32(2, 3)), _both(2)),
    # an identity carrying XLA frontend attributes
    Row("xla_metadata_value", lambda x: set_xla_metadata(lax.sin(x), k="v"), args(f32(2, 3)),
        [0, 1, -1]),
]


def _trace_row(row: Row):
    """The jaxpr of one example of ``row``, or the exception tracing it raised."""
    try:
        return jaxkit.make_jaxpr(row.fn)(*row.make(np.random.default_rng(0)))
    except Exception as e:  # noqa: BLE001  (reported by the tests that use it)
        return e


def _row_available(row: Row) -> bool:
    """False when the row's function does not exist (yet): the coverage tests report it."""
    traced = _trace_row(row)
    return not (isinstance(traced, AttributeError) or (
        isinstance(traced, TypeError) and "'NoneType' object is not callable" in str(traced)))


@pytest.mark.parametrize("row", ROWS, ids=str)
def test_row(row):
    if not _row_available(row):
        pytest.skip(f"the lax function of row {row.name} does not exist")
    check_vmap_examples(row.fn, row.make, row.in_axes, out_axes=row.out_axes)


def test_rows_under_jit():
    # A few rows through jit(vmap(...)): the batched program is lowered and compiled whole.
    for row in [r for r in ROWS if r.name in ("gather", "scatter-add", "dynamic_slice", "pad",
                                              "concatenate", "reduce_variadic")]:
        rng = np.random.default_rng(1)
        examples = [row.make(rng) for _ in range(3)]
        for in_axes in row.in_axes[:2]:
            check_vmap(row.fn, stack_examples(examples, in_axes), in_axes, jit=True)


# --------------------------------------------------------------------------------------------
# Coverage (the justification tables NO_RULE and EXERCISED_ELSEWHERE are in
# _vmap_rule_tables.py)
# --------------------------------------------------------------------------------------------


def test_every_primitive_without_batching_rule_is_justified():
    missing = sorted(name for name, p in all_primitives().items()
                     if not has_batching_rule(p) and name not in NO_RULE)
    assert not missing, ("primitives without a batching rule (add one, or justify the "
                         f"exemption in NO_RULE): {missing}")


def test_exemptions_are_still_needed():
    prims = all_primitives()
    stale = sorted(n for n in NO_RULE if n in prims and has_batching_rule(prims[n]))
    assert not stale, f"these primitives now have batching rules; drop them from NO_RULE: {stale}"


def test_every_batching_rule_is_exercised():
    exercised = set()
    exercised.update(c[0] for c in _ELEMENTWISE)
    for row in ROWS + NUMPY_ROWS:
        traced = _trace_row(row)
        if not isinstance(traced, Exception):
            exercised |= primitives_in(traced)
    with_rule = {name for name, p in all_primitives().items() if has_batching_rule(p)}
    unexercised = sorted(with_rule - exercised - set(EXERCISED_ELSEWHERE)
                         - set(EXERCISED_IN_THIS_FILE))
    assert not unexercised, f"batching rules no row of this file exercises: {unexercised}"


def test_rows_name_existing_functions():
    missing = [row.name for row in ROWS if not _row_available(row)]
    assert not missing, f"rows whose lax function does not exist: {missing}"


# --------------------------------------------------------------------------------------------
# jaxkit.numpy functions
# --------------------------------------------------------------------------------------------

try:
    import jaxkit.numpy as jnp
except ImportError:  # pragma: no cover (the numpy layer is always present in the package)
    jnp = None


def _jnp(name):
    return getattr(jnp, name, None) if jnp is not None else None


NUMPY_ROWS = [
    Row("jnp.dot_mv", lambda m, v: _jnp("dot")(m, v), args(f32(3, 4), f32(4)), _both(2)),
    Row("jnp.dot_vv", lambda a, b: _jnp("dot")(a, b), args(f32(4), f32(4)), _both(2)),
    Row("jnp.matmul", lambda a, b: _jnp("matmul")(a, b), args(f32(2, 3), f32(3, 4)), _both(2)),
    Row("jnp.einsum", lambda a, b: _jnp("einsum")("ij,jk->ik", a, b),
        args(f32(2, 3), f32(3, 4)), _both(2)),
    Row("jnp.sum", lambda x: _jnp("sum")(x, axis=1), args(f32(2, 3)), [0, 1, -1]),
    Row("jnp.mean", lambda x: _jnp("mean")(x), args(f32(2, 3))),
    Row("jnp.max", lambda x: _jnp("max")(x, axis=0), args(f32(2, 3))),
    Row("jnp.argmax", lambda x: _jnp("argmax")(x, axis=-1), args(f32(2, 3))),
    Row("jnp.cumsum", lambda x: _jnp("cumsum")(x, axis=1), args(f32(2, 3)), [0, 1, -1]),
    Row("jnp.sort", lambda x: _jnp("sort")(x, axis=0), args(f32(3, 2)), [0, 1, -1]),
    Row("jnp.where", lambda c, x, y: _jnp("where")(c, x, y),
        args(lambda rng: rng.integers(0, 2, (2, 3)).astype(bool), f32(2, 3), f32(3)),
        _both(3)),
    Row("jnp.stack", lambda x, y: _jnp("stack")([x, y], axis=1), args(f32(2, 3), f32(2, 3)),
        _both(2)),
    Row("jnp.concatenate", lambda x, y: _jnp("concatenate")([x, y]),
        args(f32(2, 3), f32(1, 3)), _both(2)),
    Row("jnp.reshape", lambda x: _jnp("reshape")(x, (-1,)), args(f32(2, 3))),
    Row("jnp.transpose", lambda x: _jnp("transpose")(x), args(f32(2, 3)), [0, 1, -1]),
    Row("jnp.take", lambda x, i: _jnp("take")(x, i, axis=0), args(f32(4, 3), i32(0, 4, 2)),
        _both(2)),
    Row("jnp.getitem_int", lambda x, i: _jnp("asarray")(x)[i], args(f32(4, 3), i32(0, 4)),
        _both(2)),
    Row("jnp.getitem_slice", lambda x: x[1:, ::2], args(f32(4, 3)), [0, 1, -1]),
    Row("jnp.getitem_array", lambda x, i: _jnp("asarray")(x)[i, 1],
        args(f32(4, 3), i32(0, 4, 2)), _both(2)),
    Row("jnp.at_set", lambda x, i, v: _jnp("asarray")(x).at[i].set(v),
        args(f32(4, 3), i32(0, 4), f32(3)), _both(3)),
    Row("jnp.at_add", lambda x, i, v: _jnp("asarray")(x).at[i, 0].add(v),
        args(f32(4, 3), i32(0, 4, 2), f32(2)), _both(3)),
    Row("jnp.broadcast_add", lambda x, y: x + y, args(f32(2, 3), f32(3)), _both(2)),
    Row("jnp.outer", lambda x, y: _jnp("outer")(x, y), args(f32(2), f32(3)), _both(2)),
    Row("jnp.exp_log", lambda x: _jnp("log")(_jnp("exp")(x) + 1.0), args(f32(2, 3))),
    Row("jnp.linalg_norm", lambda x: importlib.import_module("jaxkit.numpy.linalg").norm(x),
        args(f32(2, 3))),
    Row("jnp.clip", lambda x: _jnp("clip")(x, -0.5, 0.5), args(f32(2, 3))),
    Row("jnp.pad", lambda x: _jnp("pad")(x, ((1, 0), (0, 2))), args(f32(2, 3)), [0, 1, -1]),
    Row("jnp.roll", lambda x: _jnp("roll")(x, 1, axis=1), args(f32(2, 3)), [0, 1, -1]),
    Row("jnp.flip", lambda x: _jnp("flip")(x, axis=0), args(f32(2, 3))),
    Row("jnp.tile", lambda x: _jnp("tile")(x, (2, 1)), args(f32(2, 3))),
    Row("jnp.arange_add", lambda x: x + _jnp("arange")(3.0), args(f32(2, 3))),
    Row("jnp.zeros_like", lambda x: _jnp("zeros_like")(x) + x, args(f32(2, 3))),
    Row("jnp.astype", lambda x: x.astype(np.int32), args(f32(2, 3))),
    Row("jnp.var", lambda x: _jnp("var")(x, axis=1), args(f32(2, 3))),
    Row("jnp.prod", lambda x: _jnp("prod")(x, axis=0), args(f32(2, 3))),
    Row("jnp.any", lambda x: _jnp("any")(x > 0, axis=0), args(f32(2, 3))),
    Row("jnp.maximum", lambda x, y: _jnp("maximum")(x, y), args(f32(2, 3), f32()), _both(2)),
    Row("jnp.matmul_batched", lambda a, b: a @ b, args(f32(2, 2, 3), f32(3, 4)), _both(2)),
]


def _numpy_row_available(row: Row) -> bool:
    return _row_available(row)


@pytest.mark.parametrize("row", NUMPY_ROWS, ids=str)
def test_numpy_row(row):
    if not _numpy_row_available(row):
        pytest.skip(f"jaxkit.numpy does not provide what row {row.name} needs yet")
    check_vmap_examples(row.fn, row.make, row.in_axes, out_axes=row.out_axes)


def test_numpy_rows_available():
    missing = [row.name for row in NUMPY_ROWS if not _numpy_row_available(row)]
    assert not missing, f"jaxkit.numpy functions missing for rows: {missing}"


# --------------------------------------------------------------------------------------------
# Collectives over a vmapped axis name, against the JAX oracle (a Python loop cannot compute
# them: each example needs the whole batch)
# --------------------------------------------------------------------------------------------

COLLECTIVES = [
    ("psum", lambda L, x: L.psum(x, "i")),
    ("pmean", lambda L, x: L.pmean(x, "i")),
    ("pmax", lambda L, x: L.pmax(x, "i")),
    ("pmin", lambda L, x: L.pmin(x, "i")),
    ("all_gather", lambda L, x: L.all_gather(x, "i")),
    ("all_gather_tiled_axis1", lambda L, x: L.all_gather(x, "i", axis=1, tiled=True)),
    ("psum_scatter", lambda L, x: L.psum_scatter(x, "i", scatter_dimension=1, tiled=True)),
    ("ppermute", lambda L, x: L.ppermute(x, "i", [(0, 1), (1, 2), (2, 0)])),
    ("all_to_all", lambda L, x: L.all_to_all(x, "i", 1, 0)),
    ("pbroadcast", lambda L, x: L.pbroadcast(x, "i", 1)),
    ("axis_index", lambda L, x: L.mul(x, L.convert_element_type(L.axis_index("i"),
                                                                np.float32))),
]
COLLECTIVE_PRIMS = {"psum", "pmax", "pmin", "all_gather", "reduce_scatter", "ppermute",
                    "all_to_all", "axis_index", "pbroadcast"}


def _parallel():
    return importlib.import_module("jaxkit.lax.parallel")


@pytest.mark.parametrize("case", COLLECTIVES, ids=[c[0] for c in COLLECTIVES])
@pytest.mark.parametrize("in_axes", [0, 1])
def test_collective_over_vmapped_axis(case, in_axes):
    jax = pytest.importorskip("jax")
    _, fn = case
    x = np.random.default_rng(0).normal(size=(3, 3, 3)).astype(np.float32)
    kit_lax = _parallel()
    kit_lax_all = type("L", (), {**{k: getattr(lax, k) for k in lax.__all__},
                                 **{k: getattr(kit_lax, k) for k in kit_lax.__all__}})
    with batching.checking_rules():
        got = vmap(lambda v: fn(kit_lax_all, v), in_axes, axis_name="i")(x)
    want = jax.vmap(lambda v: fn(jax.lax, v), in_axes, axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)


def test_collective_nested_axis_names():
    jax = pytest.importorskip("jax")
    P = _parallel()
    x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)

    def f(psum, v):
        return psum(v, "i"), psum(v, ("i", "j")), psum(v, "j")

    got = vmap(vmap(lambda v: f(P.psum, v), axis_name="j"), axis_name="i")(x)
    want = jax.vmap(jax.vmap(lambda v: f(jax.lax.psum, v), axis_name="j"), axis_name="i")(x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5)


def test_collective_inside_jit_inside_vmap():
    jax = pytest.importorskip("jax")
    P = _parallel()
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    got = vmap(jaxkit.jit(lambda v: lax.sub(v, P.pmean(v, "i"))), axis_name="i")(x)
    want = jax.vmap(jax.jit(lambda v: v - jax.lax.pmean(v, "i")), axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)


def test_collective_on_unbatched_value():
    # psum over the vmapped axis of a value that does not depend on it: times the axis size.
    P = _parallel()
    w = np.arange(3, dtype=np.float32)
    out = vmap(lambda x: lax.add(x, P.psum(w, "i")), axis_name="i")(np.zeros((4, 3), np.float32))
    np.testing.assert_allclose(out, np.broadcast_to(4 * w, (4, 3)))


# --------------------------------------------------------------------------------------------
# Random numbers and pmap (their primitives' rules, through the public functions)
# --------------------------------------------------------------------------------------------


def _random():
    return importlib.import_module("jaxkit.random")


# random_wrap/random_unwrap: the raw keys below are wrapped on entry and unwrapped on return;
# random_seed: test_random_seed_over_batched_seeds.
RANDOM_PRIMS = {"threefry2x32", "random_gamma", "random_bits", "random_split",
                "random_fold_in", "random_wrap", "random_unwrap", "random_seed"}


@pytest.mark.parametrize("name,fn", [
    ("normal", lambda R, k: R.normal(k, (3,))),
    ("uniform", lambda R, k: R.uniform(k, (2, 2))),
    ("split", lambda R, k: R.split(k)),
    ("randint", lambda R, k: R.randint(k, (4,), 0, 10)),
    ("gamma", lambda R, k: R.gamma(k, 2.0, (3,))),
    ("fold_in", lambda R, k: R.fold_in(k, 3)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_random_over_batched_keys(name, fn):
    R = _random()
    keys = R.split(R.PRNGKey(0), 3)
    check_vmap(lambda k: fn(R, k), (keys,), rtol=1e-5, atol=1e-5)
    jax = pytest.importorskip("jax")
    want = jax.vmap(lambda k: fn(jax.random, k))(jax.random.split(jax.random.PRNGKey(0), 3))
    np.testing.assert_allclose(np.asarray(vmap(lambda k: fn(R, k))(keys)), np.asarray(want),
                               rtol=1e-5, atol=1e-5)


def test_random_seed_over_batched_seeds():
    R = _random()
    seeds = np.array([0, 1, 7], np.int32)
    check_vmap(lambda s: R.key_data(R.key(s)), (seeds,))
    jax = pytest.importorskip("jax")
    np.testing.assert_array_equal(np.asarray(vmap(R.PRNGKey)(seeds)),
                                  np.asarray(jax.vmap(jax.random.PRNGKey)(seeds)))


def test_random_batched_gamma_shape_parameter():
    R = _random()
    key = R.PRNGKey(1)
    check_vmap(lambda a: R.gamma(key, a, (2,)), (np.array([0.5, 1.0, 3.0], np.float32),),
               rtol=1e-5, atol=1e-5)


def test_vmap_of_pmap():
    pmap = importlib.import_module("jaxkit.transforms.pmap").pmap
    n = jaxkit.device_count()
    x = np.random.default_rng(0).normal(size=(3, n, 4)).astype(np.float32)
    check_vmap(pmap(lambda v: lax.mul(lax.sin(v), 2.0)), (x,))
    check_vmap(pmap(lambda v: lax.mul(v, 2.0)), (np.moveaxis(x, 0, 2),), 2, 1)


# Primitives whose batching rule the tests above exercise without a row (for the coverage test).
EXERCISED_IN_THIS_FILE = {
    **{p: "test_collective_over_vmapped_axis" for p in COLLECTIVE_PRIMS},
    **{p: "test_random_over_batched_keys" for p in RANDOM_PRIMS},
    "xla_pmap": "test_vmap_of_pmap",
}
