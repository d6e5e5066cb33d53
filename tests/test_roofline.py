"""``jaxkit.experimental.roofline`` against JAX's: one record per function (a builder taking
the library namespace, and argument shapes); each is counted by both, forward and, where
the record says so, backward (``vjp=True``), and every field of the ``RooflineResult``
and the output shapes must agree. Then collectives under ``shard_map`` over abstract
meshes, ``roofline_and_grad``, the result arithmetic and the rule registry."""
from __future__ import annotations

import dataclasses
import logging
import re
import types

import numpy as np
import pytest

import jaxkit
import jaxkit.lax as klax
import jaxkit.numpy as kjnp
from jaxkit import core as kcore
from jaxkit.experimental import roofline as kroof
from jaxkit.interpreters import mlir as kmlir
from jaxkit.sharding import AbstractMesh as KAbstractMesh
from jaxkit.sharding import PartitionSpec as KP

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax.experimental import roofline as jroof  # noqa: E402
from jax.sharding import AbstractMesh as JAbstractMesh  # noqa: E402
from jax.sharding import PartitionSpec as JP  # noqa: E402

KIT = types.SimpleNamespace(jax=jaxkit, jnp=kjnp, lax=klax, roofline=kroof,
                            AbstractMesh=KAbstractMesh, P=KP)
JAX = types.SimpleNamespace(jax=jax, jnp=jjnp, lax=jax.lax, roofline=jroof,
                            AbstractMesh=JAbstractMesh, P=JP)
FIELDS = [f.name for f in dataclasses.fields(jroof.RooflineResult)]


def _fields(result) -> dict:
    return {f: getattr(result, f) for f in FIELDS}


def _equations(printed: str) -> list[tuple[str, str]]:
    """(last result type, primitive) of each equation of a printed jaxpr."""
    return re.findall(r"(\w+\[[\d,]*\]) = ([\w-]+)", printed)


def _shapes(m, tree):
    return m.jax.tree_util.tree_map(lambda s: (tuple(s.shape), np.dtype(s.dtype)), tree)


def _specs(m, shapes):
    return [m.jax.ShapeDtypeStruct(s, d) for s, d in shapes]


F32, BF16, I32 = np.float32, jjnp.bfloat16, np.int32


def _custom_jvp_sin(m):
    @m.jax.custom_jvp
    def f(x):
        return m.jnp.sin(x) * 2.0
    f.defjvp(lambda p, t: (f(p[0]), t[0] * m.jnp.cos(p[0]) * 2.0))
    return f


def _dnums(m):
    return m.lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                         scatter_dims_to_operand_dims=(0,))


def _bcast_ops(m, x, y):
    return (x - y) * (x / y) + m.jnp.maximum(x, y)


def _conv(strides, padding, lhs_dil=(1, 1), rhs_dil=(1, 1), groups=1):
    def build(m):
        return lambda x, w: m.lax.conv_general_dilated(
            x, w, strides, padding, lhs_dilation=lhs_dil, rhs_dilation=rhs_dil,
            feature_group_count=groups)
    return build


# (name, builder(m) -> f, argument (shape, dtype)s, also count the backward pass)
RECORDS = [
    ("unary_chain", lambda m: lambda x: m.jnp.tanh(m.jnp.exp(x) + m.jnp.log1p(x)),
     [((8, 16), F32)], True),
    ("unary_more", lambda m: lambda x: m.jnp.sqrt(m.jnp.abs(x)) * m.jnp.sign(x)
     + m.lax.rsqrt(x) + m.lax.integer_pow(x, 3) + m.jnp.floor(x) + m.lax.erf(x),
     [((4, 5), F32)], False),
    ("special", lambda m: lambda x: m.lax.lgamma(x) + m.lax.digamma(x) + m.lax.erf_inv(x)
     + m.lax.bessel_i0e(x), [((6,), F32)], False),
    ("binary_broadcast", lambda m: lambda x, y: _bcast_ops(m, x, m.lax.broadcast_in_dim(
        y, x.shape, (1,))), [((8, 16), F32), ((16,), F32)], True),
    ("compare_logic", lambda m: lambda x, y: ((x > y) & (x <= 2.0)) | (x == y),
     [((3, 7), F32), ((3, 7), F32)], False),
    ("int_ops", lambda m: lambda x, y: m.lax.rem(x, y) ^ (x & y) + m.jnp.minimum(x, y),
     [((10,), I32), ((10,), I32)], False),
    ("matmul", lambda m: lambda x, w: x @ w, [((8, 16), F32), ((16, 4), F32)], True),
    ("batched_dot", lambda m: lambda x, w: m.jnp.einsum("bij,bjk->bik", x, w),
     [((3, 4, 5), F32), ((3, 5, 6), F32)], True),
    ("mlp", lambda m: lambda x, w, b: m.jnp.tanh(
        x @ w + m.lax.broadcast_in_dim(b, (8, 4), (1,))).sum(),
     [((8, 16), F32), ((16, 4), F32), ((4,), F32)], True),
    ("mixed_dtypes", lambda m: lambda x, w: (x @ w).astype(m.jnp.bfloat16) * 2,
     [((4, 8), BF16), ((8, 2), BF16)], False),
    ("reduce_sum_axes", lambda m: lambda x: x.sum(axis=(0, 2)) + x.sum(),
     [((3, 4, 5), F32)], True),
    ("reduce_max_is_free", lambda m: lambda x: x.max(axis=1), [((4, 6), F32)], False),
    ("select", lambda m: lambda x: m.jnp.where(x > 0, x, 0.0), [((8, 16), F32)], False),
    ("cumsum", lambda m: lambda x: m.jnp.cumsum(x, axis=1), [((8, 16), F32)], False),
    ("cumulative", lambda m: lambda x: m.lax.cummax(x, axis=0) + m.lax.cumprod(x, axis=1)
     + m.lax.cumlogsumexp(x, axis=0) + m.lax.cummin(x, axis=1), [((5, 6), F32)], False),
    ("gather_clip", lambda m: lambda x: x[m.jnp.array([1, 2, 3])], [((8, 16), F32)], False),
    ("gather_fill", lambda m: lambda x, i: x.at[i].get(mode="fill", fill_value=0.0),
     [((8, 16), F32), ((5,), I32)], False),
    ("scatter_add", lambda m: lambda x, i, u: m.lax.scatter_add(x, i, u, _dnums(m)),
     [((8, 16), F32), ((2, 1), I32), ((2, 16), F32)], False),
    ("scatter_mul_max_min_sub", lambda m: lambda x, i, u: (
        m.lax.scatter_mul(x, i, u, _dnums(m)) + m.lax.scatter_max(x, i, u, _dnums(m))
        + m.lax.scatter_min(x, i, u, _dnums(m)) + m.lax.scatter_sub(x, i, u, _dnums(m))),
     [((8, 4), F32), ((3, 1), I32), ((3, 4), F32)], False),
    ("scatter_set", lambda m: lambda x, i, u: m.lax.scatter(x, i, u, _dnums(m)),
     [((8, 4), F32), ((2, 1), I32), ((2, 4), F32)], False),
    ("scatter_apply", lambda m: lambda x, i: m.lax.scatter_apply(
        x, i, lambda v: m.jnp.sin(v) * 2.0 + v, _dnums(m), update_shape=(2, 4)),
     [((8, 4), F32), ((2, 1), I32)], False),
    ("conv_same", _conv((1, 1), "SAME"), [((1, 2, 8, 8), F32), ((3, 2, 3, 3), F32)], True),
    ("conv_strided_valid", _conv((2, 2), "VALID"), [((2, 3, 9, 9), F32), ((4, 3, 3, 3), F32)],
     False),
    ("conv_dilated", _conv((1, 1), [(2, 1), (0, 3)], lhs_dil=(2, 1), rhs_dil=(1, 2)),
     [((1, 1, 5, 6), F32), ((2, 1, 2, 3), F32)], False),
    ("conv_grouped", _conv((1, 2), "SAME", groups=2), [((1, 4, 6, 6), F32), ((4, 2, 3, 3), F32)],
     False),
    ("nested_jit", lambda m: lambda x, w: m.jax.jit(lambda a: m.jnp.cos(a) @ w)(x) + 1.0,
     [((8, 16), F32), ((16, 4), F32)], True),
    ("scan_body_once", lambda m: lambda x: m.lax.scan(
        lambda c, v: (c + m.jnp.sin(v), c), x[0], x), [((8, 16), F32)], False),
    ("cond_is_free", lambda m: lambda x: m.lax.cond(x.sum() > 0, m.jnp.sin, m.jnp.cos, x),
     [((4,), F32)], False),
    ("while_is_free", lambda m: lambda x: m.lax.while_loop(lambda v: v.sum() < 10.0,
                                                           lambda v: v * 2.0, x),
     [((4,), F32)], False),
    ("custom_jvp", lambda m: lambda x: _custom_jvp_sin(m)(x) + x, [((6,), F32)], True),
    ("checkpoint", lambda m: lambda x: m.jax.checkpoint(lambda a: m.jnp.sin(a) * a)(x),
     [((6,), F32)], True),
    ("pure_callback", lambda m: lambda x: m.jax.pure_callback(
        np.sin, m.jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1, [((3, 3), F32)], False),
    ("unused_input", lambda m: lambda x, w: m.jnp.exp(x) * 2 + x,
     [((8, 16), F32), ((16, 4), F32)], False),
    ("reused_operand", lambda m: lambda x: x * x, [((5,), F32)], False),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r[0])
def test_forward_matches_jax(record, capsys):
    _, build, shapes, _ = record
    ours_shapes, ours = kroof.roofline(build(KIT), print_jaxpr=True)(*_specs(KIT, shapes))
    ours_jaxpr = capsys.readouterr().out
    theirs_shapes, theirs = jroof.roofline(build(JAX), print_jaxpr=True)(*_specs(JAX, shapes))
    # The records are programs both trace to the same equations (primitives and result
    # types; parameters may print differently), so the counts compare the rules.
    assert _equations(ours_jaxpr) == _equations(capsys.readouterr().out)
    assert _fields(ours) == _fields(theirs)
    assert _shapes(KIT, ours_shapes) == _shapes(JAX, theirs_shapes)


@pytest.mark.parametrize("record", [r for r in RECORDS if r[3]], ids=lambda r: r[0])
def test_backward_matches_jax(record):
    _, build, shapes, _ = record
    bf16 = [(s, BF16 if d != I32 else d) for s, d in shapes]  # JAX's VJP cotangents are bf16
    _, ours = kroof.roofline(build(KIT), vjp=True)(*_specs(KIT, bf16))
    _, theirs = jroof.roofline(build(JAX), vjp=True)(*_specs(JAX, bf16))
    assert _fields(ours) == _fields(theirs)


@pytest.mark.parametrize("pins", [(True, False), (False, True), (True, True)])
def test_pinned_operands_match_jax(pins):
    lhs, rhs = pins
    shapes = [((8, 16), F32), ((16, 4), F32)]
    _, ours = kroof.roofline(lambda x, w: x @ w, pin_lhs_in_vmem=lhs,
                             pin_rhs_in_vmem=rhs)(*_specs(KIT, shapes))
    _, theirs = jroof.roofline(lambda x, w: x @ w, pin_lhs_in_vmem=lhs,
                               pin_rhs_in_vmem=rhs)(*_specs(JAX, shapes))
    assert _fields(ours) == _fields(theirs)


def _collectives(m):
    def f(a):
        b = m.lax.psum(a, ("x", "y"))
        c = m.lax.all_gather(a, "x", tiled=True)
        d = m.lax.ppermute(a, "x", [(0, 1), (1, 2), (2, 3), (3, 0)])
        e = m.lax.pmax(a, "y")
        g = m.lax.psum_scatter(a, "x", tiled=True)
        h = m.lax.all_to_all(a, "x", 0, 0, tiled=True)
        return b.sum() + c.sum() + d.sum() + e.sum() + g.sum() + h.sum() + a
    return f


def _ppermute_2d(m):
    return lambda a: m.lax.ppermute(a, ("x", "y"), [(0, 7), (7, 2), (3, 3), (5, 0)]) + a


def _all_to_all_2d(m):
    return lambda a: m.lax.all_to_all(a, ("x", "y"), 0, 0, tiled=True) + m.lax.pmin(a, "x")


# (builder, mesh shape, array shape): rings of 4 along x for _collectives' ppermute.
COLLECTIVE_RECORDS = [
    (_collectives, (4, 2), (32, 8)), (_collectives, (4, 1), (16, 4)),
    (_collectives, (4, 3), (16, 12)), (_ppermute_2d, (4, 2), (8, 8)),
    (_all_to_all_2d, (4, 2), (64, 8)), (_all_to_all_2d, (3, 3), (81, 9)),
    (_all_to_all_2d, (2, 1), (8, 2)), (_all_to_all_2d, (1, 1), (4, 4)),
]


@pytest.mark.parametrize("record", COLLECTIVE_RECORDS,
                         ids=lambda r: f"{r[0].__name__}-{r[1]}")
def test_collectives_under_shard_map_match_jax(record):
    build, mesh_shape, shape = record
    results = []
    for m in (KIT, JAX):
        mesh = m.AbstractMesh(mesh_shape, ("x", "y"))
        x = m.jax.ShapeDtypeStruct(shape, np.float32)
        out, res = m.roofline.roofline(build(m), mesh, m.P("x", "y"), m.P("x", "y"))(x)
        results.append((_shapes(m, out), _fields(res)))
    assert results[0] == results[1]
    assert results[0][1]["ici_bytes"]


def test_roofline_and_grad_matches_jax():
    def build(m):
        return lambda a: m.lax.all_gather(m.jnp.sin(a), "x", tiled=True) @ a.T

    results = []
    for m in (KIT, JAX):
        mesh = m.AbstractMesh((2,), ("x",))
        x = m.jax.ShapeDtypeStruct((4, 8), np.float32)
        out, fwd, bwd = m.roofline.roofline_and_grad(build(m), mesh, m.P("x"), m.P(None, "x"))(x)
        results.append((_shapes(m, out), _fields(fwd), _fields(bwd)))
    assert results[0] == results[1]


def test_print_jaxpr(capsys):
    kroof.roofline(lambda x: x * 2.0, print_jaxpr=True)(
        jaxkit.ShapeDtypeStruct((3,), np.float32))
    ours = capsys.readouterr().out
    jroof.roofline(lambda x: x * 2.0, print_jaxpr=True)(jax.ShapeDtypeStruct((3,), np.float32))
    assert ours == capsys.readouterr().out


def test_result_arithmetic_and_repr_match_jax():
    kwargs = [dict(flops=3, unfused_flops=5, ici_bytes={"x": 2}, ici_latency={"x": 1},
                   hbm_bytes=7, peak_hbm_bytes=11, unfused_hbm_bytes=13),
              dict(flops=1, ici_bytes={"y": 4, "x": 1}, peak_hbm_bytes=20)]
    ours = [kroof.RooflineResult(**k) for k in kwargs]
    theirs = [jroof.RooflineResult(**k) for k in kwargs]
    assert _fields(ours[0] + ours[1]) == _fields(theirs[0] + theirs[1])
    assert _fields(ours[0] * 2.5) == _fields(theirs[0] * 2.5)
    assert _fields(3 * ours[1]) == _fields(3 * theirs[1])
    assert repr(ours[0]) == repr(theirs[0])
    assert _fields(kroof.RooflineResult.zeros()) == _fields(jroof.RooflineResult.zeros())
    with pytest.raises(dataclasses.FrozenInstanceError):
        ours[0].flops = 1


def test_roofline_shape():
    aval = kcore.ShapedArray((3, 4), np.dtype("float16"))
    s = kroof.RooflineShape.from_aval(aval)
    assert (s.size, s.bytes, s.shape) == (12, 24, (3, 4))
    assert kroof.RooflineShape.total_bytes([aval, aval]) == 48
    with pytest.raises(TypeError, match="Expected ShapedArray"):
        kroof.RooflineShape.from_aval((3, 4))


_user_p = kcore.Primitive("roofline_test_user_op")
_user_p.def_abstract_eval(lambda x: x)
kmlir.register_lowering(_user_p, lambda ctx, x: x)


def test_registered_rule_is_used_and_missing_rule_warns(caplog):
    x = jaxkit.ShapeDtypeStruct((4,), np.float32)
    with caplog.at_level(logging.WARNING):
        _, res = kroof.roofline(lambda a: _user_p.bind(a) + 1.0)(x)
    assert "No roofline rule for roofline_test_user_op" in caplog.text
    assert res.unfused_flops == 4  # the add only

    seen = []

    @kroof.register_roofline(_user_p)
    def rule(ctx, a, **params):
        seen.append((ctx.primitive, ctx.avals_in, a.shape, str(ctx.name_stack)))
        return kroof.RooflineResult(flops=100)

    try:
        _, res = kroof.roofline(lambda a: _user_p.bind(a) + 1.0)(x)
        assert (res.flops, res.unfused_flops) == (100, 4)
        assert seen == [(_user_p, [kcore.ShapedArray((4,), np.dtype("float32"))], (4,),
                         "roofline(test_registered_rule_is_used_and_missing_rule_warns."
                         "<locals>.<lambda>)")]
        kroof.register_standard_roofline(_user_p)
        _, res = kroof.roofline(lambda a: _user_p.bind(a) + 1.0)(x)
        assert res.flops == 0
    finally:
        kroof.roofline.__globals__["_rooflines"].pop(_user_p, None)


def test_collective_without_mesh_says_what_to_pass():
    mesh = KAbstractMesh((2,), ("x",))
    f = jaxkit.shard_map(lambda a: klax.psum(a, "x"), mesh=mesh, in_specs=KP("x"),
                         out_specs=KP())
    with pytest.raises(ValueError, match="mesh=, in_specs= and out_specs="):
        kroof.roofline(f)(jaxkit.ShapeDtypeStruct((4, 3), np.float32))
