"""lax.ragged_dot / ragged_dot_general, lax.scaled_dot and the dot precision types (DotAlgorithm,
DotAlgorithmPreset, AccuracyMode, Tolerance): values and errors against the JAX oracle and
NumPy, jit against eager, gradients against finite differences, vmap against a Python loop."""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest
from gradcheck import check_grads

import jaxkit
import jaxkit.numpy as jnp
from jaxkit import lax

jax = pytest.importorskip("jax")
jl = jax.lax

F32, F16, BF16, I32 = np.float32, np.float16, ml_dtypes.bfloat16, np.int32


def _outcome(fn: Callable):
    """The result of ``fn()`` as a NumPy array, or the exception it raised."""
    try:
        return np.asarray(fn())
    except Exception as e:  # noqa: BLE001  (the class is what is compared)
        return e


def _assert_same(ours, theirs, *, exact: bool = False, tol: float = 1e-5) -> None:
    if isinstance(theirs, Exception):
        assert isinstance(ours, Exception), f"JAX raised {theirs!r}, jaxkit returned {ours}"
        assert type(ours) is type(theirs), f"{ours!r} vs JAX's {theirs!r}"
        return
    assert not isinstance(ours, Exception), f"jaxkit raised {ours!r}, JAX did not"
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    a, b = ours.astype(np.float64), theirs.astype(np.float64)
    if exact:
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# --------------------------------------------------------------------------------------------
# Precision types
# --------------------------------------------------------------------------------------------
PRESETS = [p.name for p in jl.DotAlgorithmPreset]


def test_presets_are_jax_members_in_order():
    assert [p.name for p in lax.DotAlgorithmPreset] == PRESETS
    assert [p.value for p in lax.DotAlgorithmPreset] == [p.value for p in jl.DotAlgorithmPreset]


@pytest.mark.parametrize("name", PRESETS)
def test_preset_printing_and_types_match_jax(name):
    ours, theirs = lax.DotAlgorithmPreset[name], jl.DotAlgorithmPreset[name]
    assert repr(ours) == repr(theirs) and str(ours) == str(theirs)

    def dtypes_of(types):
        return None if types is None else [np.dtype(t) for t in types]

    assert dtypes_of(ours.supported_lhs_types) == dtypes_of(theirs.supported_lhs_types)
    assert dtypes_of(ours.supported_rhs_types) == dtypes_of(theirs.supported_rhs_types)
    acc = ours.accumulation_type, theirs.accumulation_type
    assert (acc[0] is None) == (acc[1] is None)
    assert acc[0] is None or np.dtype(acc[0]) == np.dtype(acc[1])
    for lhs, rhs in [(F32, F32), (F16, F16), (BF16, BF16), (F16, F32)]:
        assert dtypes_of(ours.supported_output_types(lhs, rhs)) == \
            dtypes_of(theirs.supported_output_types(lhs, rhs))


def test_dot_algorithm_fields_defaults_and_repr_match_jax():
    assert lax.DotAlgorithm._fields == jl.DotAlgorithm._fields
    assert lax.DotAlgorithm._field_defaults == jl.DotAlgorithm._field_defaults
    args = (F16, F16, F32)
    assert repr(lax.DotAlgorithm(*args)) == repr(jl.DotAlgorithm(*args))
    kw = dict(lhs_precision_type=BF16, rhs_precision_type=BF16, accumulation_type=F32,
              num_primitive_operations=3)
    assert repr(lax.DotAlgorithm(**kw)) == repr(jl.DotAlgorithm(**kw))


def test_accuracy_mode_matches_jax():
    assert [(m.name, m.value) for m in lax.AccuracyMode] == \
        [(m.name, m.value) for m in jl.AccuracyMode]
    for m in lax.AccuracyMode:
        theirs = jl.AccuracyMode[m.name]
        assert repr(m).replace("jaxkit", "") == repr(theirs) and str(m) == str(theirs)


@pytest.mark.parametrize("kwargs", [dict(atol=1e-3), dict(rtol=1e-2, ulps=2), dict(),
                                    dict(atol=-1.0), dict(ulps=-1), dict(rtol=0.0)])
def test_tolerance_matches_jax(kwargs):
    ours = _outcome(lambda: [vars(lax.Tolerance(**kwargs))])
    theirs = _outcome(lambda: [vars(jl.Tolerance(**kwargs))])
    if isinstance(theirs, Exception):
        assert type(ours) is type(theirs) and str(ours) == str(theirs)
    else:
        assert ours.tolist() == theirs.tolist()


ACCURACY_FNS = ["exp", "exp2", "expm1", "log", "log1p", "tanh", "logistic", "sin", "cos", "tan",
                "sqrt", "rsqrt", "cbrt"]


@pytest.mark.parametrize("name", ACCURACY_FNS)
def test_transcendental_accuracy_argument_matches_jax(name):
    x = np.linspace(0.1, 3.0, 7).astype(F32)
    for make in (lambda L: L.Tolerance(atol=1e-3), lambda L: L.Tolerance(rtol=1e-20, ulps=1),
                 lambda L: L.AccuracyMode.HIGHEST, lambda L: L.AccuracyMode.DEFAULT,
                 lambda L: 1e-3):
        ours = _outcome(lambda: jaxkit.jit(
            lambda x: getattr(lax, name)(x, accuracy=make(lax)))(x))
        theirs = _outcome(lambda: getattr(jl, name)(x, accuracy=make(jl)))
        _assert_same(ours, theirs, exact=True)
        if isinstance(theirs, Exception):
            assert str(ours) == str(theirs)


# --------------------------------------------------------------------------------------------
# Dot products with an algorithm
# --------------------------------------------------------------------------------------------
_RNG = np.random.default_rng(0)
_A, _B = _RNG.normal(size=(3, 5)), _RNG.normal(size=(5, 4))


@pytest.mark.parametrize("dtype", [F32, F16, BF16, I32], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", PRESETS)
def test_dot_with_preset_matches_jax(name, dtype):
    a, b = (_A * 3).astype(dtype), (_B * 3).astype(dtype)
    ours = _outcome(lambda: lax.dot(a, b, precision=lax.DotAlgorithmPreset[name]))
    theirs = _outcome(lambda: jl.dot(a, b, precision=jl.DotAlgorithmPreset[name]))
    _assert_same(ours, theirs, tol=1e-2)
    # By name, and under jit, the same.
    _assert_same(_outcome(lambda: jaxkit.jit(lambda a, b: lax.dot(a, b, precision=name))(a, b)),
                 theirs, tol=1e-2)


@pytest.mark.parametrize("name", PRESETS)
def test_lowering_has_jax_dot_algorithm_attribute(name):
    a, b = _A.astype(F32), _B.astype(F32)

    def text(jit, lax_mod):
        try:
            return jit(lambda a, b: lax_mod.dot(a, b, precision=name)).lower(a, b).as_text()
        except ValueError as e:
            return type(e)

    ours, theirs = text(jaxkit.jit, lax), text(jax.jit, jl)
    if isinstance(theirs, type):
        assert ours is theirs
        return
    ops = r"(stablehlo\.(?:convert|dot_general)[^\n]*)"
    assert [re.sub(r"%\w+", "%", op) for op in re.findall(ops, ours)] == \
        [re.sub(r"%\w+", "%", op) for op in re.findall(ops, theirs)]


PRECISION_CASES = [
    ("algorithm", lambda L: L.DotAlgorithm(F32, F32, F32), None),
    ("preset_pair", lambda L: (L.DotAlgorithmPreset.F32_F32_F32,) * 2, None),
    ("unknown_name", lambda L: "F32_F32", None),
    ("preset_bf16_out", lambda L: L.DotAlgorithmPreset.BF16_BF16_F32, BF16),
    ("preset_f32_out", lambda L: L.DotAlgorithmPreset.F16_F16_F16, F32),
    ("legacy_string_pair", lambda L: ("highest", "default"), None),
]


@pytest.mark.parametrize("make,pet", [c[1:] for c in PRECISION_CASES],
                         ids=[c[0] for c in PRECISION_CASES])
def test_precision_argument_matches_jax(make, pet):
    a, b = _A.astype(F32), _B.astype(F32)
    ours = _outcome(lambda: lax.dot(a, b, precision=make(lax), preferred_element_type=pet))
    theirs = _outcome(lambda: jl.dot(a, b, precision=make(jl), preferred_element_type=pet))
    _assert_same(ours, theirs, tol=1e-2)


def test_algorithm_allows_narrower_integer_result_as_jax():
    a, b = (_A * 3).astype(I32), (_B * 3).astype(I32)
    for pet in (np.int8, np.int16):
        for prec in ("F32_F32_F32", None):
            _assert_same(_outcome(lambda: lax.dot(a, b, precision=prec,
                                                  preferred_element_type=pet)),
                         _outcome(lambda: jl.dot(a, b, precision=prec,
                                                 preferred_element_type=pet)))


@pytest.mark.parametrize("name", ["F16_F16_F16", "BF16_BF16_F32", "TF32_TF32_F32"])
@pytest.mark.parametrize("fn", ["dot", "matmul", "einsum"])
def test_jnp_products_pass_presets_through(fn, name):
    a, b = _A.astype(F32), _B.astype(F32)

    def call(np_mod, lax_mod):
        preset = lax_mod.DotAlgorithmPreset[name]
        if fn == "einsum":
            return np_mod.einsum("ij,jk->ik", a, b, precision=preset)
        return getattr(np_mod, fn)(a, b, precision=preset)

    _assert_same(_outcome(lambda: call(jnp, lax)), _outcome(lambda: call(jax.numpy, jl)))


def test_default_matmul_precision_accepts_preset_names():
    a, b = _A.astype(F32), _B.astype(F32)
    with jaxkit.default_matmul_precision("F16_F16_F16"):
        ours = np.asarray(jnp.dot(a, b))
    with jax.default_matmul_precision("F16_F16_F16"):
        theirs = np.asarray(jax.numpy.dot(a, b))
    _assert_same(ours, theirs, exact=True)
    assert not np.array_equal(ours, np.asarray(jnp.dot(a, b)))  # f16 rounding took effect


@pytest.mark.parametrize("name", ["F64_F64_F64", "DEFAULT"])
def test_dot_with_preset_gradients(x64, name):
    # The presets that keep float64 (the others round it, which finite differences can't see
    # through); the transposes carry the preset, as JAX's do.
    a, b = _A, _B
    f = lambda a, b: lax.dot(a, b, precision=name)  # noqa: E731
    check_grads(f, (a, b), order=2)
    ours = jaxkit.grad(lambda a: f(a, b).sum())(a)
    theirs = jax.grad(lambda a: jl.dot(a, b, precision=name).sum())(a)
    _assert_same(np.asarray(ours), np.asarray(theirs), tol=1e-6)


# --------------------------------------------------------------------------------------------
# ragged_dot / ragged_dot_general
# --------------------------------------------------------------------------------------------
def _dn(mod, dot, ragged, group):
    return mod.RaggedDotDimensionNumbers(dot_dimension_numbers=dot, lhs_ragged_dimensions=ragged,
                                         rhs_group_dimensions=group)


def _ref_ragged_dot(lhs, rhs, gs):
    """NumPy: each row of ``lhs`` times the ``rhs`` of its group; rows past the groups zero."""
    out = np.zeros((lhs.shape[0], rhs.shape[2]), np.result_type(lhs, rhs))
    ends = np.cumsum(gs)
    for i, (start, end) in enumerate(zip(ends - gs, ends)):
        out[start:end] = lhs[start:end] @ rhs[i]
    return out


def _ref_ragged_contracting(lhs, rhs, gs):
    """NumPy: ``lhs[m, k] @ rhs[k, n]`` with ``k`` cut into groups, one product per group."""
    ends = np.cumsum(gs)
    return np.stack([lhs[:, s:e] @ rhs[s:e] for s, e in zip(ends - gs, ends)])


@dataclasses.dataclass
class RaggedCase:
    name: str
    lhs: tuple
    rhs: tuple
    group_sizes: list
    dot: tuple | None = None  # None: lax.ragged_dot
    ragged: tuple = ()
    group: tuple = ()
    np_ref: Callable | None = None
    in_axes: tuple = ((0, 0, None), (1, None, None), (None, 2, None), (0, 0, 0))

    def fn(self, mod):
        if self.dot is None:
            return mod.ragged_dot
        dnums = _dn(mod, self.dot, self.ragged, self.group)
        return lambda lhs, rhs, gs: mod.ragged_dot_general(lhs, rhs, gs, dnums)

    def args(self, dtype=F32, seed=0):
        rng = np.random.default_rng(seed)
        return (rng.normal(size=self.lhs).astype(dtype), rng.normal(size=self.rhs).astype(dtype),
                np.asarray(self.group_sizes, I32))


RAGGED = [
    RaggedCase("basic", (6, 4), (3, 4, 5), [2, 1, 3], np_ref=_ref_ragged_dot),
    RaggedCase("basic_short_groups", (7, 3), (3, 3, 2), [2, 0, 3], np_ref=_ref_ragged_dot),
    RaggedCase("basic_overflowing_groups", (5, 3), (2, 3, 2), [4, 4], np_ref=_ref_ragged_dot),
    RaggedCase("basic_all_in_one", (4, 3), (3, 3, 2), [0, 4, 0], np_ref=_ref_ragged_dot),
    RaggedCase("noncontracting_batched", (2, 5, 4), (3, 2, 4, 6), [[1, 2, 2], [0, 3, 1]],
               (([2], [2]), ([0], [1])), (1,), (0,)),
    RaggedCase("noncontracting_batched_1d_sizes", (2, 5, 4), (3, 2, 4, 6), [1, 3, 1],
               (([2], [2]), ([0], [1])), (1,), (0,)),
    RaggedCase("noncontracting_group_last", (4, 5, 3), (2, 3, 3), [[1, 2, 2], [3, 0, 2],
                                                                     [0, 0, 5], [2, 2, 1]],
               (([2], [1]), ([], [])), (1,), (2,)),
    RaggedCase("contracting", (3, 6), (6, 2), [2, 1, 3], (([1], [0]), ([], [])), (1,), (),
               np_ref=_ref_ragged_contracting),
    RaggedCase("contracting_short_groups", (3, 7), (7, 2), [2, 0, 3], (([1], [0]), ([], [])),
               (1,), (), np_ref=_ref_ragged_contracting),
    RaggedCase("contracting_batched", (4, 2, 5), (2, 5, 3), [[1, 2, 2], [3, 0, 1]],
               (([2], [1]), ([1], [0])), (2,), ()),
    RaggedCase("contracting_second_of_two", (3, 2, 4), (2, 4, 5), [[1, 3], [2, 2]],
               (([1, 2], [0, 1]), ([], [])), (2,), ()),
    RaggedCase("batch", (4, 2, 5), (2, 5, 3), [1, 1], (([2], [1]), ([1], [0])), (1,), (),
               in_axes=((0, 0, None), (None, 2, None))),
]


def _ragged_params(keep=lambda c: True):
    return [pytest.param(c, id=c.name) for c in RAGGED if keep(c)]


@pytest.mark.parametrize("case", _ragged_params())
@pytest.mark.parametrize("dtype", [F32, BF16, np.int8], ids=lambda d: np.dtype(d).name)
def test_ragged_vs_jax(case, dtype):
    args = case.args(dtype)
    theirs = _outcome(lambda: case.fn(jl)(*args))
    assert not isinstance(theirs, Exception), theirs  # every case is a valid product
    _assert_same(_outcome(lambda: case.fn(lax)(*args)), theirs,
                 tol=2e-2 if dtype == BF16 else 1e-5)


@pytest.mark.parametrize("case", _ragged_params(lambda c: c.np_ref))
def test_ragged_vs_numpy(case):
    args = case.args(np.float32)
    np.testing.assert_allclose(np.asarray(case.fn(lax)(*args)), case.np_ref(*args),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", _ragged_params())
def test_ragged_jit_matches_eager(case):
    args = case.args()
    np.testing.assert_allclose(np.asarray(jaxkit.jit(case.fn(lax))(*args)),
                               np.asarray(case.fn(lax)(*args)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", _ragged_params())
def test_ragged_gradients(x64, case):
    lhs, rhs, gs = case.args(np.float64)
    check_grads(lambda lhs, rhs: case.fn(lax)(lhs, rhs, gs), (lhs, rhs), order=2)


@pytest.mark.parametrize("case", _ragged_params(lambda c: c.name in ("basic", "basic_short_groups")))
def test_ragged_reverse_mode_matches_jax(case):
    lhs, rhs, gs = case.args()

    def grads(api, mod):
        return api.grad(lambda lhs, rhs: case.fn(mod)(lhs, rhs, gs).sum(), (0, 1))(lhs, rhs)

    for ours, theirs in zip(grads(jaxkit, lax), grads(jax, jl)):
        _assert_same(np.asarray(ours), np.asarray(theirs))


@pytest.mark.parametrize("case", _ragged_params())
def test_ragged_vmap_matches_loop(case):
    lhs, rhs, gs = case.args()
    for in_axes in case.in_axes:
        size = 3
        batched = [np.stack([x] * size, axis=ax) if ax is not None else x
                   for x, ax in zip((lhs, rhs, gs), in_axes)]
        batched = [x + np.arange(size).reshape([-1 if d == ax else 1 for d in range(x.ndim)])
                   .astype(x.dtype) % 2 if ax is not None and x.dtype != I32 else x
                   for x, ax in zip(batched, in_axes)]
        out = jaxkit.vmap(case.fn(lax), in_axes=in_axes)(*batched)
        loop = [np.asarray(case.fn(lax)(*[np.take(x, i, axis=ax) if ax is not None else x
                                          for x, ax in zip(batched, in_axes)]))
                for i in range(size)]
        np.testing.assert_allclose(np.asarray(out), np.stack(loop), rtol=1e-5, atol=1e-5,
                                   err_msg=f"in_axes={in_axes}")


def test_ragged_dot_precision_and_preferred_type_match_jax():
    lhs, rhs, gs = RAGGED[0].args(F16)
    for kw in (dict(preferred_element_type=F32), dict(precision="F16_F16_F16"),
               dict(precision=lax.Precision.HIGHEST), dict(precision="TF32_TF32_F32")):
        kw_jax = {k: (jl.Precision.HIGHEST if v is lax.Precision.HIGHEST else v)
                  for k, v in kw.items()}
        _assert_same(_outcome(lambda: lax.ragged_dot(lhs, rhs, gs, **kw)),
                     _outcome(lambda: jl.ragged_dot(lhs, rhs, gs, **kw_jax)), tol=1e-3)


def test_ragged_dimension_numbers_normalize_and_print_as_jax():
    args = ((([1], [0]), ([], [])), [1], [])
    ours, theirs = lax.RaggedDotDimensionNumbers(*args), jl.RaggedDotDimensionNumbers(*args)
    assert repr(ours) == repr(theirs)
    assert ours == lax.RaggedDotDimensionNumbers(((((1,), (0,)), ((), ()))), (1,), ())
    assert hash(ours) == hash(lax.RaggedDotDimensionNumbers(*args))


_X, _W, _GS = RAGGED[0].args()
RAGGED_ERRORS = [
    ("float_group_sizes", lambda L: L.ragged_dot(_X, _W, _GS.astype(F32))),
    ("scalar_group_sizes", lambda L: L.ragged_dot(_X, _W, np.int32(3))),
    ("wrong_group_count", lambda L: L.ragged_dot(_X, _W[:2], _GS)),
    ("group_sizes_shape", lambda L: L.ragged_dot(_X, _W, _GS[None])),
    ("lhs_rank", lambda L: L.ragged_dot(_X[0], _W, _GS)),
    ("contracting_mismatch", lambda L: L.ragged_dot(_X, _W[:, :3], _GS)),
    ("mixed_dtypes", lambda L: L.ragged_dot(_X, _W.astype(np.int32), _GS)),
    ("offset_array", lambda L: L.ragged_dot(_X, _W, _GS, group_offset=np.array([1], I32))),
    ("offset_static", lambda L: L.ragged_dot(_X, _W, _GS, group_offset=(1,))),
    ("no_group_dim", lambda L: L.ragged_dot_general(
        _X, _W, _GS, _dn(L, (([1], [1]), ([], [])), [0], []))),
    ("two_ragged_dims", lambda L: L.ragged_dot_general(
        _X, _W, _GS, _dn(L, (([1], [1]), ([], [])), [0, 1], [0]))),
    ("ragged_dim_out_of_range", lambda L: L.ragged_dot_general(
        _X, _W, _GS, _dn(L, (([1], [1]), ([], [])), [2], [0]))),
    ("group_dim_contracting", lambda L: L.ragged_dot_general(
        _X, _W, _GS, _dn(L, (([1], [1]), ([], [])), [0], [1]))),
    ("group_dim_in_contracting_mode", lambda L: L.ragged_dot_general(
        _X.T, _X, _GS, _dn(L, (([1], [0]), ([], [])), [1], [0]))),
]


@pytest.mark.parametrize("call", [c[1] for c in RAGGED_ERRORS], ids=[c[0] for c in RAGGED_ERRORS])
def test_ragged_errors_match_jax(call):
    ours, theirs = _outcome(lambda: call(lax)), _outcome(lambda: call(jl))
    _assert_same(ours, theirs)
    # jaxkit words its own messages only where JAX's come from its primitive machinery
    # (hashability of parameters); the ragged checks' messages are JAX's.
    if "hashable" not in str(theirs):
        assert str(ours) == str(theirs)


# --------------------------------------------------------------------------------------------
# scaled_dot
# --------------------------------------------------------------------------------------------
_E8M0, _E4M3 = ml_dtypes.float8_e8m0fnu, ml_dtypes.float8_e4m3fn


def _scaled_args(dtype, scale_dtype=None, batch=()):
    rng = np.random.default_rng(1)
    lhs = rng.normal(size=batch + (4, 16)).astype(dtype)
    rhs = rng.normal(size=batch + (16, 3)).astype(dtype)
    if scale_dtype is None:
        return lhs, rhs, None, None
    ls = (2.0 ** rng.integers(-2, 3, size=batch + (4, 2))).astype(scale_dtype)
    rs = (2.0 ** rng.integers(-2, 3, size=batch + (4, 3))).astype(scale_dtype)
    return lhs, rhs, ls, rs


SCALED = [
    (np.dtype(d).name + ("" if s is None else "_scaled_" + np.dtype(s).name), d, s, pet, batch)
    for d, s, pet, batch in [
        (F32, None, None, ()), (BF16, None, None, ()), (_E4M3, None, None, ()),
        (ml_dtypes.float8_e5m2, None, F32, ()), (F16, None, F32, ()), (np.int8, None, None, ()),
        (_E4M3, _E8M0, F32, ()), (_E4M3, F32, BF16, ()), (F32, BF16, F32, (2,)),
    ]
]


@pytest.mark.parametrize("dtype,scale_dtype,pet,batch", [c[1:] for c in SCALED],
                         ids=[c[0] for c in SCALED])
def test_scaled_dot_vs_jax_and_jit(dtype, scale_dtype, pet, batch):
    lhs, rhs, ls, rs = _scaled_args(dtype, scale_dtype, batch)

    def call(mod):
        return lambda *a: mod.scaled_dot(a[0], a[1], lhs_scale=ls, rhs_scale=rs,
                                         preferred_element_type=pet)

    theirs = _outcome(lambda: call(jl)(lhs, rhs))
    _assert_same(_outcome(lambda: call(lax)(lhs, rhs)), theirs, exact=True)
    _assert_same(_outcome(lambda: jaxkit.jit(call(lax))(lhs, rhs)), theirs, exact=True)


def test_scaled_dot_matches_numpy_reference():
    lhs, rhs, ls, rs = _scaled_args(_E4M3, _E8M0)
    out = lax.scaled_dot(lhs, rhs, lhs_scale=ls, rhs_scale=rs, preferred_element_type=F32)
    # Entries of an e4m3 operand times powers of two are exact in bfloat16, so the products
    # are exact and only the float32 summation order can differ.
    ref = (lhs.astype(F32) * np.repeat(ls.astype(F32), 8, axis=1)) @ \
        (rhs.astype(F32) * np.repeat(rs.astype(F32), 4, axis=0))
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-6, atol=1e-6)


def test_scaled_dot_jaxpr_matches_jax():
    lhs, rhs, _, _ = _scaled_args(F32)
    ours = str(jaxkit.make_jaxpr(lambda a, b: lax.scaled_dot(a, b))(lhs, rhs))
    theirs = str(jax.make_jaxpr(lambda a, b: jl.scaled_dot(a, b))(lhs, rhs))
    assert ours == theirs


def test_scaled_dot_vmap_matches_loop():
    lhs, rhs, ls, rs = _scaled_args(F32, F32, (3,))
    f = lambda a, b, s, t: lax.scaled_dot(a, b, lhs_scale=s, rhs_scale=t,  # noqa: E731
                                          preferred_element_type=F32)
    for in_axes in [(0, 0, 0, 0), (0, None, 0, None), (None, 0, None, 0)]:
        picked = [x if ax is not None else x[0] for x, ax in zip((lhs, rhs, ls, rs), in_axes)]
        out = jaxkit.vmap(f, in_axes=in_axes)(*picked)
        loop = [f(*[x[i] if ax is not None else x for x, ax in zip(picked, in_axes)])
                for i in range(3)]
        np.testing.assert_array_equal(np.asarray(out), np.stack([np.asarray(v) for v in loop]))


def test_scaled_dot_is_not_differentiable_as_in_jax():
    lhs, rhs, _, _ = _scaled_args(F32)
    for api, mod in ((jaxkit, lax), (jax, jl)):
        with pytest.raises(NotImplementedError):
            api.grad(lambda a: mod.scaled_dot(a, rhs, preferred_element_type=F32).sum())(lhs)


_L, _R, _LS, _ = _scaled_args(F32, F32)
SCALED_ERRORS = [
    ("rank_1", lambda L: L.scaled_dot(_L[0], _R[:, 0])),
    ("contracting_mismatch", lambda L: L.scaled_dot(_L, _R[:8])),
    ("scale_free_dim", lambda L: L.scaled_dot(_L, _R, lhs_scale=_LS[:3])),
    ("scale_block_of_one", lambda L: L.scaled_dot(_L, _R, lhs_scale=np.ones((4, 16), F32))),
    ("scale_not_dividing", lambda L: L.scaled_dot(_L, _R, lhs_scale=np.ones((4, 3), F32))),
    ("scale_rank", lambda L: L.scaled_dot(_L, _R, lhs_scale=np.ones((4,), F32))),
    ("contraction_of_one", lambda L: L.scaled_dot(_L[:, :1], _R[:1])),
    ("batch_count", lambda L: L.scaled_dot(_L, _R, dimension_numbers=(((1,), (0,)), ((0,), ())))),
]


@pytest.mark.parametrize("call", [c[1] for c in SCALED_ERRORS], ids=[c[0] for c in SCALED_ERRORS])
def test_scaled_dot_errors_match_jax(call):
    ours, theirs = _outcome(lambda: call(lax)), _outcome(lambda: call(jl))
    _assert_same(ours, theirs)
    assert str(ours) == str(theirs)
