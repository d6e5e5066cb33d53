"""The select-and-scatter primitives behind max/min pooling's derivatives:
``select_and_scatter_add_p``, ``select_and_gather_add_p`` and the general
``select_and_scatter_p``, bound with the same parameters in jaxkit and in the JAX oracle:
values (ties included, bit for bit), jit against eager, transposes against ``jax.vjp``, the
adjoint identity where JAX has no transpose (dilated windows), vmap against a Python loop,
float64 gradients against finite differences, jaxpr text, and error messages."""
import numpy as np
import pytest
from gradcheck import check_grads
from platform_checks import assert_equal_or_ulps
from vmapcheck import check_vmap

import jaxkit
from jaxkit import lax
from jaxkit.api import grad, jvp, vjp
from jaxkit.lax.windowed_reductions import _select_and_scatter, reduce_window_shape_tuple
from jaxkit.transforms.vmap import vmap

jax = pytest.importorskip("jax")
from jax._src.lax.windowed_reductions import _select_and_scatter as _jax_select_and_scatter  # noqa: E402,E501

_rng = np.random.RandomState(0)

# (name, operand shape, window_dimensions, window_strides, padding)
SCATTER_CASES = [
    ("1d_valid", (7,), (3,), (1,), ((0, 0),)),
    ("1d_strided_padded", (8,), (3,), (2,), ((1, 2),)),
    ("1d_stride_past_window", (9,), (2,), (3,), ((0, 1),)),
    ("2d_mixed", (5, 6), (2, 3), (1, 2), ((1, 0), (0, 1))),
    ("2d_wide_padding", (4, 5), (3, 3), (2, 2), ((2, 2), (1, 1))),
    ("2d_unit_window", (3, 4), (1, 1), (1, 1), ((0, 0), (0, 0))),
    ("3d", (2, 4, 5), (1, 2, 2), (1, 2, 1), ((0, 0), (0, 1), (1, 0))),
]
# (name, operand shape, window_dimensions, window_strides, padding, base_dilation,
#  window_dilation)
GATHER_CASES = [(*c, (1,) * len(c[1]), (1,) * len(c[1])) for c in SCATTER_CASES] + [
    ("2d_base_dilated", (4, 5), (2, 2), (1, 1), ((0, 1), (1, 0)), (2, 1), (1, 1)),
    ("2d_window_dilated", (5, 6), (2, 2), (2, 1), ((1, 1), (0, 0)), (1, 1), (2, 2)),
    ("1d_both_dilated", (6,), (3,), (2,), ((1, 1),), (2,), (2,)),
]
UNDILATED = [c for c in GATHER_CASES if all(d == 1 for d in c[5] + c[6])]
WINDOW_DILATED = [c for c in GATHER_CASES if any(d != 1 for d in c[6])]
SELECTS = ["ge", "le"]
# "ties": small integers, so most windows hold several maxima (the pick must agree);
# "spread": distinct values, with an infinity the padding must not beat.
DATA = ["ties", "spread"]


def _ids(cases):
    return [c[0] for c in cases]


def _operand(shape, data, dtype=np.float32):
    if data == "ties":
        return _rng.randint(-2, 2, size=shape).astype(dtype)
    x = _rng.randn(*shape).astype(dtype)
    x.flat[0] = -np.inf
    x.flat[-1] = np.inf
    return x


def _source(case, dtype=np.float32):
    _, shape, w, s, p = case[:5]
    return _rng.randn(*reduce_window_shape_tuple(shape, w, s, p)).astype(dtype)


def _scatter_params(case, select, lax_mod):
    _, _, w, s, p = case
    return dict(select_prim=getattr(lax_mod, f"{select}_p"), window_dimensions=w,
                window_strides=s, padding=p)


def _gather_params(case, select, lax_mod):
    _, _, w, s, p, b, wd = case
    return dict(select_prim=getattr(lax_mod, f"{select}_p"), window_dimensions=w,
                window_strides=s, padding=p, base_dilation=b, window_dilation=wd)


def _scatter_add(lax_mod, case, select):
    return lambda src, x: lax_mod.select_and_scatter_add_p.bind(
        src, x, **_scatter_params(case, select, lax_mod))


def _gather_add(lax_mod, case, select):
    return lambda t, x: lax_mod.select_and_gather_add_p.bind(
        t, x, **_gather_params(case, select, lax_mod))


def _identical(ours, theirs):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (
        (ours.shape, ours.dtype), (theirs.shape, theirs.dtype))
    assert_equal_or_ulps(ours, theirs)  # a GPU may sum overlapping windows in another order


# --------------------------------------------------------------------------------------------
# values against the oracle, and jit against eager
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize("select", SELECTS)
@pytest.mark.parametrize("case", SCATTER_CASES, ids=_ids(SCATTER_CASES))
def test_select_and_scatter_add_matches_jax(case, select, data):
    x, src = _operand(case[1], data), _source(case)
    ours = _scatter_add(lax, case, select)(src, x)
    _identical(ours, _scatter_add(jax.lax, case, select)(src, x))
    _identical(jaxkit.jit(_scatter_add(lax, case, select))(src, x), ours)


@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize("select", SELECTS)
@pytest.mark.parametrize("case", GATHER_CASES, ids=_ids(GATHER_CASES))
def test_select_and_gather_add_matches_jax(case, select, data):
    x = _operand(case[1], data)
    t = _rng.randn(*case[1]).astype(np.float32)
    ours = _gather_add(lax, case, select)(t, x)
    _identical(ours, _gather_add(jax.lax, case, select)(t, x))
    _identical(jaxkit.jit(_gather_add(lax, case, select))(t, x), ours)


def test_select_and_scatter_add_of_bools_ors_the_source():
    case = SCATTER_CASES[3]
    x = _operand(case[1], "ties")
    src = _source(case) > 0
    _identical(_scatter_add(lax, case, "ge")(src, x > 0), _scatter_add(jax.lax, case, "ge")(
        src, x > 0))


# (name, select, scatter, init value): computations by their lax names, so that each
# library traces its own
GENERAL = [
    ("ge_add_0", "ge", "add", 0.0),
    ("gt_add_0", "gt", "add", 0.0),
    ("le_mul_1", "le", "mul", 1.0),
    ("ge_max_-5", "ge", "max", -5.0),
]


def _general(fn, lax_mod, case, general):
    """``fn`` (either library's private _select_and_scatter) with ``general``'s computations
    over ``case``'s windows and padding."""
    _, _, w, s, p = case
    _, select, scatter, init = general
    return lambda x, src: fn(x, getattr(lax_mod, select), w, s, p, src, np.float32(init),
                             getattr(lax_mod, scatter))


def _unpadded(case):
    return (*case[:4], ((0, 0),) * len(case[1]))


@pytest.mark.parametrize("general", GENERAL, ids=[g[0] for g in GENERAL])
@pytest.mark.parametrize("case", SCATTER_CASES, ids=_ids(SCATTER_CASES))
def test_select_and_scatter_matches_jax(case, general):
    x, src = _operand(case[1], "ties"), _source(case)
    ours = _general(_select_and_scatter, lax, case, general)(x, src)
    _identical(ours, _general(_jax_select_and_scatter, jax.lax, case, general)(x, src))
    _identical(jaxkit.jit(_general(_select_and_scatter, lax, case, general))(x, src), ours)


def test_select_and_scatter_never_selects_padding():
    """stablehlo.select_and_scatter's own padding is never selected, even over -3."""
    x = np.array([-3.0, -1.0, -2.0], np.float32)
    case = ("", (3,), (2,), (1,), ((1, 1),))
    out = _general(_select_and_scatter, lax, case, GENERAL[0])(x, np.ones(4, np.float32))
    np.testing.assert_array_equal(np.asarray(out), [1.0, 2.0, 1.0])


# --------------------------------------------------------------------------------------------
# jaxprs: as JAX prints them
# --------------------------------------------------------------------------------------------


def _max_pool_sum(lax_mod):
    return lambda x: lax_mod.reduce_window(x, -np.inf, lax_mod.max, (2, 2), (1, 2),
                                           "SAME").sum()


def test_max_pool_gradient_jaxpr_is_jaxs():
    x = _operand((4, 5), "spread")
    ours = jaxkit.make_jaxpr(grad(_max_pool_sum(lax)))(x)
    theirs = jax.make_jaxpr(jax.grad(_max_pool_sum(jax.lax)))(x)
    assert str(ours) == str(theirs)
    assert "select_and_scatter_add[" in str(ours)


def test_min_pool_jvp_jaxpr_is_jaxs():
    def pool(lax_mod):
        return lambda x: lax_mod.reduce_window(x, np.inf, lax_mod.min, (3,), (2,),
                                               ((1, 0),), (2,), (2,))
    x = _operand((6,), "spread")
    ours = jaxkit.make_jaxpr(lambda x, t: jvp(pool(lax), (x,), (t,)))(x, x)
    theirs = jax.make_jaxpr(lambda x, t: jax.jvp(pool(jax.lax), (x,), (t,)))(x, x)
    assert str(ours) == str(theirs)
    assert "select_and_gather_add[" in str(ours)


def test_select_and_scatter_jaxpr_is_jaxs():
    case = _unpadded(SCATTER_CASES[3])
    x, src = _operand(case[1], "ties"), _source(case)
    ours = jaxkit.make_jaxpr(_general(_select_and_scatter, lax, case, GENERAL[0]))(x, src)
    theirs = jax.make_jaxpr(_general(_jax_select_and_scatter, jax.lax, case, GENERAL[0]))(x,
                                                                                         src)
    assert str(ours) == str(theirs)


# --------------------------------------------------------------------------------------------
# transposes
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("select", SELECTS)
@pytest.mark.parametrize("case", SCATTER_CASES, ids=_ids(SCATTER_CASES))
def test_select_and_scatter_add_transpose_matches_jax(case, select):
    x, src = _operand(case[1], "ties"), _source(case)
    ct = _rng.randn(*case[1]).astype(np.float32)
    (ours,) = vjp(lambda s: _scatter_add(lax, case, select)(s, x), src)[1](ct)
    (theirs,) = jax.vjp(lambda s: _scatter_add(jax.lax, case, select)(s, x), src)[1](ct)
    _identical(ours, theirs)


@pytest.mark.parametrize("select", SELECTS)
@pytest.mark.parametrize("case", [c for c in GATHER_CASES if c not in WINDOW_DILATED],
                         ids=_ids([c for c in GATHER_CASES if c not in WINDOW_DILATED]))
def test_select_and_gather_add_transpose_matches_jax(case, select):
    x = _operand(case[1], "ties")
    t = _rng.randn(*case[1]).astype(np.float32)
    ct = _rng.randn(*reduce_window_shape_tuple(case[1], *case[2:])).astype(np.float32)
    (ours,) = vjp(lambda t: _gather_add(lax, case, select)(t, x), t)[1](ct)
    (theirs,) = jax.vjp(lambda t: _gather_add(jax.lax, case, select)(t, x), t)[1](ct)
    _identical(ours, theirs)


@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize("select", SELECTS)
@pytest.mark.parametrize("case", WINDOW_DILATED, ids=_ids(WINDOW_DILATED))
def test_window_dilated_transpose_is_the_adjoint(case, select, data, x64):
    """JAX has no VJP for dilated windows; ours must be the exact adjoint of the forward
    (which matches JAX), ties included: <ct, f(t)> == <f^T(ct), t>."""
    x = _operand(case[1], data, np.float64)
    t = _rng.randn(*case[1])
    f = _gather_add(lax, case, select)
    ct = _rng.randn(*reduce_window_shape_tuple(case[1], *case[2:]))
    (back,) = vjp(lambda t: f(t, x), t)[1](ct)
    np.testing.assert_allclose(np.vdot(ct, np.asarray(f(t, x))),
                               np.vdot(np.asarray(back), t), rtol=1e-12)
    # each cotangent lands on one position: the selected one, whose tangent f gathered
    picked = np.asarray(vjp(lambda t: f(t, x), t)[1](np.ones_like(ct))[0])
    assert picked.sum() == np.prod(ct.shape) - _all_padding_windows(case)
    assert set(np.unique(picked)) <= set(range(int(picked.max()) + 1))


def _all_padding_windows(case):
    """Windows that see only padding or dilation holes (their cotangent goes nowhere)."""
    _, shape, w, s, p, b, wd = case
    marks = np.ones(shape)
    counted = np.asarray(lax.reduce_window(marks, 0.0, lax.add, w, s, p, b, wd))
    return int((counted == 0).sum())


# --------------------------------------------------------------------------------------------
# vmap, and gradients in float64
# --------------------------------------------------------------------------------------------

IN_AXES = [0, -1, (None, 0), (0, None)]


@pytest.mark.parametrize("in_axes", IN_AXES, ids=str)
@pytest.mark.parametrize("case", SCATTER_CASES[1:4], ids=_ids(SCATTER_CASES[1:4]))
def test_select_and_scatter_add_vmap(case, in_axes):
    n = 3
    xs = np.stack([_operand(case[1], "ties") for _ in range(n)], -1 if in_axes == -1 else 0)
    srcs = np.stack([_source(case) for _ in range(n)], -1 if in_axes == -1 else 0)
    if in_axes == (None, 0):
        srcs = _source(case)
    if in_axes == (0, None):
        xs = _operand(case[1], "ties")
    check_vmap(_scatter_add(lax, case, "ge"), (srcs, xs), in_axes)


@pytest.mark.parametrize("in_axes", IN_AXES, ids=str)
@pytest.mark.parametrize("case", GATHER_CASES[-3:], ids=_ids(GATHER_CASES[-3:]))
def test_select_and_gather_add_vmap(case, in_axes):
    n = 3
    stack_at = -1 if in_axes == -1 else 0
    xs = np.stack([_operand(case[1], "ties") for _ in range(n)], stack_at)
    ts = np.stack([_rng.randn(*case[1]).astype(np.float32) for _ in range(n)], stack_at)
    if in_axes == (None, 0):
        ts = ts[0]
    if in_axes == (0, None):
        xs = xs[0]
    check_vmap(_gather_add(lax, case, "le"), (ts, xs), in_axes)


def test_select_and_scatter_has_no_batching_rule_or_derivative():
    case = _unpadded(SCATTER_CASES[1])
    x, src = _operand(case[1], "ties"), _source(case)
    general = _general(_select_and_scatter, lax, case, GENERAL[0])
    with pytest.raises(NotImplementedError, match="select_and_scatter"):
        vmap(general)(np.stack([x, x]), np.stack([src, src]))
    with pytest.raises(NotImplementedError, match="JVP rule for 'select_and_scatter'"):
        jvp(general, (x, src), (x, src))


@pytest.mark.parametrize("select", SELECTS)
@pytest.mark.parametrize("case", SCATTER_CASES[1:5], ids=_ids(SCATTER_CASES[1:5]))
def test_select_and_scatter_add_grads(case, select, x64):
    x = _rng.permutation(np.prod(case[1])).reshape(case[1]).astype(np.float64)
    check_grads(lambda s: _scatter_add(lax, case, select)(s, x), (_source(case, np.float64),),
                2)


@pytest.mark.parametrize("select", SELECTS)
@pytest.mark.parametrize("case", GATHER_CASES[3:], ids=_ids(GATHER_CASES[3:]))
def test_select_and_gather_add_grads(case, select, x64):
    x = _rng.permutation(np.prod(case[1])).reshape(case[1]).astype(np.float64)
    check_grads(lambda t: _gather_add(lax, case, select)(t, x), (_rng.randn(*case[1]),), 2)


# (name, computation, init, window_dimensions, window_strides, padding, base_dilation,
#  window_dilation): pooling whose derivatives go through these primitives
POOLS = [
    ("max_same", "max", (2, 2), (1, 2), "SAME", None, None),
    ("min_padded", "min", (3, 2), (2, 1), ((1, 1), (0, 1)), None, None),
    ("max_base_dilated", "max", (2, 3), (1, 1), "VALID", (2, 1), None),
    ("max_window_dilated", "max", (2, 2), (1, 1), "SAME", None, (2, 1)),
    ("min_both_dilated", "min", (2, 2), (2, 1), ((1, 0), (0, 1)), (1, 2), (1, 2)),
]


def _pool(lax_mod, pool):
    _, op, w, s, p, b, wd = pool
    init = -np.inf if op == "max" else np.inf
    return lambda x: lax_mod.reduce_window(x, init, getattr(lax_mod, op), w, s, p, b, wd)


@pytest.mark.parametrize("pool", POOLS, ids=[p[0] for p in POOLS])
def test_pooling_grads(pool, x64):
    x = _rng.permutation(20).reshape(4, 5).astype(np.float64)
    check_grads(_pool(lax, pool), (x,), 2)


@pytest.mark.parametrize("pool", [p for p in POOLS if p[6] is None],
                         ids=[p[0] for p in POOLS if p[6] is None])
def test_pooling_grads_with_ties_match_jax(pool):
    x = _operand((4, 5), "ties")
    ours = grad(lambda x: (_pool(lax, pool)(x) ** 2).sum())(x)
    theirs = jax.grad(lambda x: (_pool(jax.lax, pool)(x) ** 2).sum())(x)
    _identical(ours, theirs)


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------


def test_errors():
    x = np.zeros((4, 5), np.float32)
    good = dict(select_prim=lax.ge_p, window_dimensions=(2, 2), window_strides=(1, 1),
                padding=((0, 0), (0, 0)))
    src = np.zeros((3, 4), np.float32)
    with pytest.raises(TypeError, match="select_prim must be lax.ge_p .* got gt"):
        lax.select_and_scatter_add_p.bind(src, x, **{**good, "select_prim": lax.gt_p})
    with pytest.raises(TypeError, match=r"source must have the shape .* \(3, 4\).*got \(3, 3\)"):
        lax.select_and_scatter_add_p.bind(src[:, :3], x, **good)
    with pytest.raises(TypeError, match="same dtype, got int32 and float32"):
        lax.select_and_scatter_add_p.bind(src.astype(np.int32), x, **good)
    with pytest.raises(TypeError, match="window_strides must have one entry per operand"):
        lax.select_and_scatter_add_p.bind(src, x, **{**good, "window_strides": (1,)})
    with pytest.raises(TypeError, match="window_dimensions must be positive"):
        lax.select_and_scatter_add_p.bind(src, x, **{**good, "window_dimensions": (0, 2)})
    gather = dict(good, base_dilation=(1, 1), window_dilation=(1, 1))
    with pytest.raises(TypeError, match="tangents and operand must have the same shape"):
        lax.select_and_gather_add_p.bind(x[:3], x, **gather)
    with pytest.raises(TypeError, match="select_and_gather_add: window_dilation must be pos"):
        lax.select_and_gather_add_p.bind(x, x, **{**gather, "window_dilation": (1, -1)})
    with pytest.raises(TypeError, match="init_value must be a scalar of the operand's dtype"):
        _select_and_scatter(x, lambda a, b: a >= b, (2, 2), (1, 1), ((0, 0), (0, 0)), src,
                            np.zeros(2, np.float32), lambda a, b: a + b)
    with pytest.raises(TypeError, match="select computation must return one bool"):
        _select_and_scatter(x, lambda a, b: a + b, (2, 2), (1, 1), ((0, 0), (0, 0)), src,
                            np.float32(0), lambda a, b: a + b)
