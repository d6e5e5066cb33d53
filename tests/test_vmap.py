"""vmap: API semantics (in_axes/out_axes prefixes, kwargs, nesting, jit), errors (compared
with JAX's where the oracle is installed), the batching helpers, batch_jaxpr, axis names, and
the tutorial seeds. The per-primitive table lives in ``test_vmap_rules.py``."""
import importlib
import re
import textwrap

import numpy as np
import pytest
from vmapcheck import check_vmap, check_vmap_examples, loop_reference

import jaxkit
from jaxkit import core, lax
from jaxkit.transforms.vmap import vmap
from jaxkit.interpreters import batching, dispatch


@pytest.fixture(autouse=True)
def _restore_rule_tables():
    """Tests below register rules for throwaway primitives; keep them out of the tables that
    coverage tests read."""
    saved = dict(batching.batch_rules), set(batching.named_axis_rules)
    yield
    batching.batch_rules.clear()
    batching.batch_rules.update(saved[0])
    batching.named_axis_rules.clear()
    batching.named_axis_rules.update(saved[1])


def f32(*shape, start=0.0):
    return np.arange(start, start + np.prod(shape, dtype=int), dtype=np.float32).reshape(shape)


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


# ---- in_axes ---------------------------------------------------------------------------


def test_default_axis_zero():
    check_vmap(lax.sin, (rnd(4, 3),))


@pytest.mark.parametrize("in_axes", [1, -1, (1,), [-1]])
def test_in_axes_int_negative_tuple_list(in_axes):
    check_vmap(lax.sin, (rnd(3, 4),), in_axes)


def test_in_axes_none_for_one_argument():
    check_vmap(lax.add, (rnd(4, 3), rnd(3, seed=1)), (0, None))
    check_vmap(lax.add, (rnd(3, seed=1), rnd(3, 4)), (None, 1))


def test_in_axes_mixed_positions():
    check_vmap(lax.mul, (rnd(2, 4, 3), rnd(4, 2, 3, seed=1)), (1, 0))


def test_in_axes_nested_prefix_of_pytree_argument():
    def f(params, x):
        return lax.add(lax.mul(params["w"], x), params["b"])

    params = {"w": rnd(5, 3), "b": rnd(3, seed=1)}
    check_vmap(f, (params, rnd(3, seed=2)), ({"w": 0, "b": None}, None))
    check_vmap(f, (params | {"b": rnd(3, 5)}, rnd(5, 3)), ({"w": 0, "b": 1}, 0))


def test_in_axes_tuple_inside_tuple_argument():
    def f(pair, y):
        a, b = pair
        return lax.sub(lax.mul(a, b), y)

    check_vmap(f, ((rnd(4, 2), rnd(2, 4)), rnd(2)), ((0, 1), None))


def test_kwargs_are_mapped_along_axis_zero():
    f = vmap(lambda x, y: lax.add(x, y), in_axes=(1,))
    out = f(rnd(3, 4), y=rnd(4, 3, seed=1))
    np.testing.assert_allclose(out, rnd(3, 4).T + rnd(4, 3, seed=1), rtol=1e-6)
    check_vmap(lambda x, y: lax.mul(x, y), (rnd(4, 3),), kwargs={"y": rnd(4, 3, seed=1)})


def test_unmapped_arguments_pass_through_untouched():
    # Non-array values with in_axes None reach the function as they are (like JAX).
    out = vmap(lambda x, s: lax.mul(x, 2.0) if s == "double" else x, (0, None))(f32(3), "double")
    np.testing.assert_array_equal(out, 2 * f32(3))


def test_axis_size_with_no_mapped_argument_broadcasts():
    out = vmap(lambda x: lax.add(x, 1.0), in_axes=None, axis_size=3)(f32(2))
    np.testing.assert_array_equal(out, np.broadcast_to(f32(2) + 1, (3, 2)))
    out = vmap(lambda: 1.0, axis_size=4)()
    np.testing.assert_array_equal(out, np.ones(4, np.float32))


# ---- out_axes ---------------------------------------------------------------------------


@pytest.mark.parametrize("out_axes", [0, 1, -1, 2, -3])
def test_out_axes_positions(out_axes):
    check_vmap(lambda x: lax.mul(x, x), (rnd(3, 4, 5),), 1, out_axes)


def test_out_axes_pytree_prefix_and_none():
    def f(x, y):
        return {"s": lax.add(x, y), "y2": lax.mul(y, 2.0)}, y

    check_vmap(f, (rnd(3, 2), rnd(2, seed=1)), (0, None), ({"s": 1, "y2": None}, None))
    out = vmap(f, (0, None), ({"s": 1, "y2": 0}, 0))(rnd(3, 2), rnd(2, seed=1))
    assert out[0]["y2"].shape == (3, 2) and out[1].shape == (3, 2)


def test_unbatched_outputs_are_broadcast():
    out = vmap(lambda x, y: (lax.add(x, y), lax.mul(y, 2.0)), in_axes=(0, None))(
        np.arange(2.0, dtype=np.float32), 4.0)
    np.testing.assert_array_equal(out[0], [4.0, 5.0])
    np.testing.assert_array_equal(out[1], [8.0, 8.0])


def test_python_scalar_output_is_broadcast():
    out = vmap(lambda x: 2)(f32(3, 2))
    np.testing.assert_array_equal(out, [2, 2, 2])
    assert out.dtype == np.int32


def test_out_axes_none_for_unbatched_output():
    x, w = rnd(4, 3), rnd(3, seed=1)
    ys, w2 = vmap(lambda x, w: (lax.mul(x, w), lax.neg(w)), (0, None), (0, None))(x, w)
    np.testing.assert_allclose(ys, x * w, rtol=1e-6)
    np.testing.assert_array_equal(w2, -w)


def test_pytree_outputs_with_none_leaf():
    out = vmap(lambda x: {"a": x, "none": None, "t": (lax.sin(x),)})(rnd(3, 2))
    assert out["none"] is None and out["t"][0].shape == (3, 2)


# ---- nesting and composition with jit -------------------------------------------------


def test_nested_vmap_three_levels():
    def f(x, y):
        return lax.mul(lax.sin(x), y)

    g = vmap(vmap(vmap(f, (0, None)), (None, 0)), (1, 1), 2)
    x, y = rnd(4, 2, 3), rnd(5, 2, seed=1)
    expect = np.empty((5, 4, 2, 3), np.float32)
    for i in range(4):
        for j in range(5):
            for k in range(2):
                expect[j, i, k] = np.sin(x[i, k]) * y[j, k]
    np.testing.assert_allclose(g(x, y), expect, rtol=1e-6)
    np.testing.assert_allclose(jaxkit.jit(g)(x, y), expect, rtol=1e-6)


def test_nested_vmap_with_loop_reference():
    inner = vmap(lambda a, b: lax.reduce_sum(lax.mul(a, b), (0,)), (0, None))
    check_vmap(inner, (rnd(3, 4, 5), rnd(5, seed=1)), (0, None))
    check_vmap(inner, (rnd(4, 5), rnd(2, 5, seed=1)), (None, 0))


def test_vmap_of_jit_and_jit_of_vmap():
    f = jaxkit.jit(lambda x, y: lax.add(lax.mul(x, 3.0), y))
    check_vmap(f, (rnd(4, 3), rnd(3, 4, seed=1)), (0, 1), jit=True)
    check_vmap(f, (rnd(4, 3), rnd(3, seed=1)), (0, None), -1, jit=True)


def test_nested_vmap_of_jit():
    f = jaxkit.jit(lambda x, y: lax.mul(lax.sin(x), y))
    g = vmap(vmap(f, (0, None)), (None, 1))
    x, y = rnd(4, 3), rnd(3, 5, seed=1)
    expect = np.sin(x)[None, :, :] * y.T[:, None, :]
    np.testing.assert_allclose(g(x, y), expect, rtol=1e-6)
    np.testing.assert_allclose(jaxkit.jit(g)(x, y), expect, rtol=1e-6)


def test_jit_of_unbatched_values_is_not_rebatched():
    w = rnd(3)
    g = jaxkit.jit(lambda v: lax.sin(v))
    closed = jaxkit.make_jaxpr(vmap(lambda x: lax.add(x, g(w))))(rnd(4, 3))
    (jit_eqn,) = [e for e in closed.eqns if e.primitive.name == "jit"]
    assert [a.shape for a in jit_eqn.params["jaxpr"].in_avals] == [(3,)]


def test_vmap_of_jit_compiles_batched_program_once(monkeypatch):
    compiled = []
    real = dispatch.compile_closed

    def counting(name, closed, *args, **kwargs):
        compiled.append(name)
        return real(name, closed, *args, **kwargs)

    monkeypatch.setattr(dispatch, "compile_closed", counting)
    f = jaxkit.jit(lambda x: lax.mul(lax.sin(x), 2.0))
    vf = vmap(f)
    for seed in range(4):
        vf(rnd(4, 3, seed=seed))
    assert len(compiled) == 1


def test_jit_equation_is_batched_with_its_jaxpr():
    f = jaxkit.jit(lambda x: lax.mul(x, 2.0))
    text = str(jaxkit.make_jaxpr(vmap(f, 1, 1))(f32(2, 3)))
    assert text == textwrap.dedent("""\
        { lambda ; a:f32[2,3]. let
            b:f32[2,3] = jit[
              name=<lambda>
              jaxpr={ lambda ; a:f32[2,3]. let b:f32[2,3] = mul a 2.0:f32[] in (b,) }
            ] a
          in (b,) }""")


def test_vmapped_jaxpr_moves_nothing_for_aligned_axes():
    text = str(jaxkit.make_jaxpr(vmap(lambda x, y: lax.add(lax.sin(x), y), 1, 1))(
        f32(2, 3), f32(2, 3)))
    assert "transpose" not in text and "broadcast_in_dim" not in text


def test_unbatched_computation_is_not_batched():
    w = rnd(3)
    text = str(jaxkit.make_jaxpr(vmap(lambda x: lax.add(x, lax.sin(w))))(rnd(4, 3)))
    assert "f32[3] = sin" in text and "f32[4,3] = sin" not in text


def test_vmap_inside_jit_inside_vmap():
    def inner(x):
        return vmap(lambda r: lax.reduce_sum(lax.mul(r, r), (0,)))(x)

    check_vmap(jaxkit.jit(inner), (rnd(2, 3, 4),), 0, jit=True)


# ---- errors (the JAX wording; compared with the oracle where installed) ----------------

ERROR_CASES = [
    ("out_axes_none_batched", lambda v, L, x3, x4: v(lambda x: x, out_axes=None)(x3),
     ValueError, "at vmap out_axes, got axis spec None but output was batched on axis 0"),
    ("out_axes_none_named", lambda v, L, x3, x4: v(lambda x: x, out_axes=None,
                                                   axis_name="i")(x3),
     ValueError, "vmap has mapped output (axis_name=i) but out_axes is None"),
    ("out_axes_none_in_tuple", lambda v, L, x3, x4: v(lambda x: (x, L.mul(x, x)),
                                                      out_axes=(0, None))(x3),
     ValueError, "at vmap out_axes[1], got axis spec None but output was batched on axis 0"),
    ("inconsistent_sizes", lambda v, L, x3, x4: v(lambda x, y: x)(x3, x4), ValueError,
     ("vmap got inconsistent sizes for array axes to be mapped:\n"
     "  * one axis had size 3: axis 0 of argument x of type float32[3];\n"
     "  * one axis had size 4: axis 0 of argument y of type float32[4]")),
    ("inconsistent_sizes_pytree", lambda v, L, x3, x4: v(lambda x, y: x)(x3, {"a": x4}),
     ValueError, "  * one axis had size 4: axis 0 of argument y['a'] of type float32[4]"),
    ("inconsistent_sizes_most", lambda v, L, x3, x4: v(lambda x, y, z: x)(x3, x3, x4),
     ValueError, ("  * most axes (2 of them) had size 3, e.g. axis 0 of argument x of type "
     "float32[3];\n  * one axis had size 4: axis 0 of argument z of type float32[4]")),
    ("inconsistent_star_args", lambda v, L, x3, x4: v(lambda *a: a[0])(x3, x4), ValueError,
     "axis 0 of args[1] of type float32[4]"),
    ("axis_size_disagrees", lambda v, L, x3, x4: v(lambda x: x, axis_size=4)(x3), ValueError,
     ("  * the `axis_size` argument was 4;\n  * one axis had size 3: axis 0 of argument x of "
     "type float32[3]")),
    ("in_axes_length", lambda v, L, x3, x4: v(lambda x, y: x, in_axes=(0, 0, 0))(x3, x3),
     ValueError, "but got len(in_axes)=3, len(args)=2"),
    ("in_axes_kwargs_not_counted", lambda v, L, x3, x4: v(lambda x, y: x, (0, None))(x3, y=x3),
     ValueError, "but got len(in_axes)=2, len(args)=1"),
    ("in_axes_not_prefix", lambda v, L, x3, x4: v(lambda x, y: x, in_axes=(0, {"b": 0}))(
        x3, {"a": x3}), ValueError,
     "vmap in_axes specification must be a tree prefix of the corresponding value"),
    ("out_axes_not_prefix", lambda v, L, x3, x4: v(lambda x: (x, x), out_axes=(0, 0, 0))(x3),
     ValueError, "vmap out_axes specification must be a tree prefix of the corresponding value"),
    ("axis_out_of_range", lambda v, L, x3, x4: v(lambda x: x, in_axes=1)(x3), ValueError,
     ("vmap was requested to map its argument along axis 1, which implies that its rank "
     "should be at least 2, but is only 1 (its shape is (3,))")),
    ("negative_axis_out_of_range", lambda v, L, x3, x4: v(lambda x: x, in_axes=-2)(x3),
     ValueError, "along axis -2, which implies that its rank should be at least 2"),
    ("scalar_mapped", lambda v, L, x3, x4: v(lambda x: x)(1.0), ValueError,
     "rank should be at least 1, but is only 0 (its shape is ())"),
    ("no_mapped_input", lambda v, L, x3, x4: v(lambda x: x, in_axes=None)(x3), ValueError,
     "vmap must have at least one non-None value in in_axes or axis_size must be specified"),
    ("no_arguments", lambda v, L, x3, x4: v(lambda: 1.0)(), ValueError,
     ("vmap wrapped function must be passed at least one argument containing an array or "
     "axis_size must be specified, got empty *args=() and **kwargs={}")),
    ("in_axes_type", lambda v, L, x3, x4: v(lambda x: x, in_axes="a"), TypeError,
     ("vmap in_axes must be an int, None, or a tuple of entries corresponding to the "
     "positional arguments passed to the function, but got a.")),
    ("in_axes_leaf_type", lambda v, L, x3, x4: v(lambda x: x, in_axes=[0.5]), TypeError,
     ("vmap in_axes must be an int, None, or (nested) container with those types as leaves, "
     "but got (0.5,).")),
    ("out_axes_leaf_type", lambda v, L, x3, x4: v(lambda x: x, out_axes="a"), TypeError,
     ("vmap out_axes must be an int, None, or (nested) container with those types as "
     "leaves, but got a.")),
    ("output_not_array", lambda v, L, x3, x4: v(lambda x: "s")(x3), TypeError,
     "Output from batched function 's' with type <class 'str'> is not a valid JAX type"),
    ("argument_not_array", lambda v, L, x3, x4: v(lambda x: x)("s"), TypeError,
     "Argument 's' of type <class 'str'> is not a valid JAX type"),
    ("not_callable", lambda v, L, x3, x4: v(3), TypeError, "Expected a callable value, got 3"),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors(case):
    _, make, exc, text = case
    with pytest.raises(exc) as info:
        make(vmap, lax, np.ones(3, np.float32), np.ones(4, np.float32))
    assert text in str(info.value)


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_match_jax(case):
    jax = pytest.importorskip("jax")
    _, make, exc, text = case
    with pytest.raises(exc) as info:
        make(jax.vmap, jax.lax, np.ones(3, np.float32), np.ones(4, np.float32))
    # The message of our tree-prefix errors is shorter than JAX's diff; the rest are equal.
    assert text in str(info.value)


def test_out_axes_out_of_range():
    with pytest.raises(ValueError, match="axis 2 is out of bounds for array of dimension 1"):
        vmap(lambda x: x, out_axes=2)(np.ones(3, np.float32))


def test_in_axes_prefix_error_names_key_path():
    with pytest.raises(ValueError, match=re.escape("at key path\n    vmap in_axes[1]\n")):
        vmap(lambda x, y: x, in_axes=(0, {"b": 0}))(np.ones(3), {"a": np.ones(3)})


def test_control_flow_on_batched_value_explains():
    # JAX's words: the line that made the batched value (tests/test_tracer_errors.py has more)
    def f(x):
        if lax.reduce_sum(x, (0,)):
            return x
        return lax.neg(x)
    with pytest.raises(core.TracerBoolConversionError,
                       match=r"(?s)This BatchTracer with object id \d+ was created on line:"
                             r"\n  .*test_vmap.py:\d+:\d+ \(.*f\)"):
        vmap(f)(np.ones((2, 3), np.float32))


def test_missing_batching_rule_raises():
    p = core.Primitive("no_batch_rule_here")
    p.def_abstract_eval(lambda x: x)
    p.def_impl(lambda x: x)
    with pytest.raises(NotImplementedError, match="batching rule for 'no_batch_rule_here' is "
                                                  "not implemented"):
        vmap(p.bind)(np.ones((2, 3), np.float32))
    # Unbatched arguments never need the rule.
    out = vmap(lambda x, w: lax.add(x, p.bind(w)), (0, None))(np.ones((2, 3), np.float32),
                                                            np.ones(3, np.float32))
    assert out.shape == (2, 3)


def test_leaked_batch_tracer_is_detected():
    leaked = []

    def f(x):
        leaked.append(x)
        return x

    vmap(f)(np.ones((2, 3), np.float32))
    with pytest.raises(core.UnexpectedTracerError):
        vmap(lambda y: lax.add(y, leaked[0]))(np.ones((2, 3), np.float32))


# ---- axis names ---------------------------------------------------------------------------


def test_find_axis_walks_enclosing_vmaps():
    seen = {}

    def f(x):
        seen["i"] = batching.find_axis("i").axis_size
        seen["j"] = batching.find_axis("j").axis_size
        seen["names"] = batching.axis_names_in_scope()
        return x

    vmap(vmap(f, axis_name="j"), axis_name="i")(np.ones((2, 3), np.float32))
    assert seen == {"i": 2, "j": 3, "names": ["j", "i"]}


def test_find_axis_inside_jit_inside_vmap():
    seen = {}

    @jaxkit.jit
    def g(x):
        seen["i"] = batching.find_axis("i").axis_size
        return x

    vmap(g, axis_name="i")(np.ones((5, 3), np.float32))
    assert seen["i"] == 5


def test_find_axis_unbound_name():
    with pytest.raises(NameError, match="unbound axis name: k"):
        vmap(lambda x: batching.find_axis("k"), axis_name="i")(np.ones(2))


# ---- generic rule helpers -------------------------------------------------------------


def _prim(name, abstract_eval, impl, multiple_results=False):
    p = core.Primitive(name)
    p.multiple_results = multiple_results
    p.def_abstract_eval(abstract_eval)
    p.def_impl(impl)
    return p


def test_defreducer_renumbers_axes():
    def abstract(x, *, axes):
        return core.ShapedArray([d for i, d in enumerate(x.shape) if i not in axes], x.dtype)

    p = _prim("test_sum", abstract, lambda x, *, axes: lax.reduce_sum(x, axes))
    batching.defreducer(p)
    for in_axes in (0, 1, 2, -1):
        check_vmap(lambda x: p.bind(x, axes=(0, 2)), (rnd(3, 4, 5, 2),), in_axes)


def test_defaxes_renumbers_axis_params():
    def abstract(*xs, dimensions):
        return xs[0]

    p = _prim("test_rev", abstract, lambda x, *, dimensions: lax.rev(x, dimensions))
    batching.defaxes(p, "dimensions")
    for in_axes in (0, 1, -1):
        check_vmap(lambda x: p.bind(x, dimensions=(0,)), (rnd(3, 4, 2),), in_axes)


def test_defleading_moves_batch_axes_front():
    def abstract(x, y):
        return x

    seen = []

    def impl(x, y):
        seen.append((x.shape, y.shape))
        return lax.add(x, y)

    p = _prim("test_leading", abstract, impl)
    batching.defleading(p)
    check_vmap(lambda x, y: p.bind(x, y), (rnd(3, 2), rnd(3, seed=1)), (1, None))
    assert seen[-1] == ((2, 3), (2, 3))


def test_defbroadcasting_moves_batch_axes_as_jax():
    """Batch axes that disagree (or an unbatched array) move to the front, as JAX's
    broadcast_batcher moves them (where they go decides XLA's reduction layouts later, and so
    the last bits of sums); axes that agree stay where they are."""
    jax = pytest.importorskip("jax")
    texts = []
    for mod in (jaxkit, jax):
        for in_axes in ((1, None, 0), (1, 1, None)):
            texts.append(str(mod.make_jaxpr(mod.vmap(
                lambda x, w, s: mod.lax.mul(mod.lax.add(x, w), s), in_axes, 1))(
                f32(2, 3), f32(2, 3) if in_axes[1] == 1 else f32(2), f32(3) if in_axes[2] == 0
                else np.float32(2))))
    assert texts[:2] == texts[2:]
    assert "transpose" in texts[0] and "transpose" not in texts[1]


def test_defbroadcasting_scalar_operands():
    check_vmap(lambda x, s: lax.mul(x, s), (rnd(4, 3), rnd(4, seed=1)), (0, 0))
    check_vmap(lambda x, s: lax.mul(s, x), (rnd(3, 4), rnd(4, seed=1)), (1, 0))
    check_vmap(lambda x, s: lax.mul(x, s), (rnd(4, 3), np.float32(2.0)), (0, None))
    check_vmap(lambda s, t: lax.add(s, t), (rnd(4), rnd(4, seed=1)), (0, 0))


def test_checking_rules_catches_a_wrong_rule():
    p = _prim("test_wrong_rule", lambda x: x, lambda x: x)
    batching.defrule(p, lambda axis_data, args, dims: (lax.reduce_sum(args[0], (0,)), 0))
    with batching.checking_rules(), pytest.raises(AssertionError, match="test_wrong_rule"):
        vmap(p.bind)(np.ones((2, 3, 4), np.float32))


def test_matchaxis_and_helpers():
    x = rnd(2, 3)
    np.testing.assert_array_equal(batching.matchaxis(0, 1, x, 2), x.T)
    np.testing.assert_array_equal(batching.matchaxis(None, 0, rnd(3), 4),
                                  np.broadcast_to(rnd(3), (4, 3)))
    np.testing.assert_array_equal(batching.bdim_at_front(x, 1, 3), x.T)
    np.testing.assert_array_equal(batching.broadcast(rnd(3), 2, -1),
                                  np.broadcast_to(rnd(3)[:, None], (3, 2)))
    with pytest.raises(ValueError, match="cannot un-batch"):
        batching.matchaxis(0, None, x, 2)
    aval = core.ShapedArray((3, 4), np.float32)
    assert batching.mapped_aval(5, 1, aval).shape == (3, 5, 4)
    assert batching.unmapped_aval(1, batching.mapped_aval(5, 1, aval)) == aval


# ---- batch_jaxpr ------------------------------------------------------------------------


def _closed(f, *avals):
    return jaxkit.make_jaxpr(f)(*[np.zeros(a.shape, a.dtype) for a in avals])


def test_batch_jaxpr_bool_form():
    a3 = core.ShapedArray((3,), np.float32)
    closed = _closed(lambda x, w: (lax.mul(x, w), lax.sin(w)), a3, a3)
    batched, out_batched = batching.batch_jaxpr(closed, 4, [True, False], False)
    assert out_batched == [True, False]
    assert [a.shape for a in batched.in_avals] == [(4, 3), (3,)]
    assert [a.shape for a in batched.out_avals] == [(4, 3), (3,)]
    batched, out_batched = batching.batch_jaxpr(closed, 4, [True, False], True)
    assert out_batched == [True, True]
    assert [a.shape for a in batched.out_avals] == [(4, 3), (4, 3)]
    xs, w = rnd(4, 3), rnd(3, seed=1)
    y, s = core.jaxpr_as_fun(batched)(xs, w)
    np.testing.assert_allclose(y, xs * w, rtol=1e-6)
    np.testing.assert_allclose(s, np.broadcast_to(np.sin(w), (4, 3)), rtol=1e-6)


def test_batch_jaxpr_axes_form_and_cache():
    a23 = core.ShapedArray((2, 3), np.float32)
    closed = _closed(lambda x: lax.transpose(x, (1, 0)), a23)
    b1, dims1 = batching.batch_jaxpr_axes(closed, 5, [2])
    b2, dims2 = batching.batch_jaxpr_axes(closed, batching.AxisData(None, 5), [2])
    assert b1 is b2 and dims1 == dims2
    x = rnd(2, 3, 5)
    (out,) = core.jaxpr_as_fun(b1)(x)
    np.testing.assert_array_equal(np.moveaxis(np.asarray(out), dims1[0], 0),
                                  np.transpose(x, (2, 1, 0)))
    b3, dims3 = batching.batch_jaxpr_axes(closed, 5, [2], [1])
    assert dims3 == [1] and b3.out_avals[0].shape == (3, 5, 2)


def test_batch_subtrace_function():
    fun = batching.batch_subtrace(lambda x, y: [lax.mul(x, y), y], batching.AxisData(None, 3),
                                  [1, None])
    vals, dims = fun(rnd(2, 3), rnd(2, seed=1))
    # with an unbatched array operand the batch axis moves to the front, as in JAX
    assert dims == [0, None]
    np.testing.assert_allclose(vals[0], (rnd(2, 3) * rnd(2, seed=1)[:, None]).T, rtol=1e-6)
    np.testing.assert_array_equal(vals[1], rnd(2, seed=1))


# ---- the tutorial seeds ---------------------------------------------------------------


def _dot(a, b):
    """Matrix-vector / vector-vector products through jaxkit.numpy when it exists."""
    jnp = pytest.importorskip("jaxkit.numpy")
    return jnp.dot(a, b)


def test_seed_apply_matrix():
    mat = rnd(15, 10)
    batched_x = rnd(5, 10, seed=1)

    def apply_matrix(v):
        return _dot(mat, v)

    out = check_vmap(apply_matrix, (batched_x,), jit=True)
    np.testing.assert_allclose(out, batched_x @ mat.T, rtol=1e-5, atol=1e-5)
    check_vmap(lambda v: _dot(mat, v), (batched_x.T,), 1, 1)
    check_vmap(lambda v: _dot(mat, v), (batched_x.T,), 1, 0)
    check_vmap(lambda m, v: _dot(m, v), (mat, batched_x), (None, 0))


def test_seed_convolve():
    jnp = pytest.importorskip("jaxkit.numpy")

    def convolve(x, w):
        output = []
        for i in range(1, len(x) - 1):
            output.append(jnp.dot(x[i - 1:i + 2], w))
        return jnp.array(output)

    x = np.arange(5, dtype=np.float32)
    w = np.array([2.0, 3.0, 4.0], np.float32)
    xs, ws = np.stack([x, x + 1]), np.stack([w, w * 2])
    expect = np.stack([np.convolve(xi, wi[::-1], "valid") for xi, wi in zip(xs, ws)])
    np.testing.assert_allclose(vmap(convolve)(xs, ws), expect, rtol=1e-6)
    np.testing.assert_allclose(vmap(convolve, in_axes=1, out_axes=1)(xs.T, ws.T), expect.T,
                               rtol=1e-6)
    np.testing.assert_allclose(vmap(convolve, in_axes=[0, None])(xs, w),
                               np.stack([np.convolve(xi, w[::-1], "valid") for xi in xs]),
                               rtol=1e-6)
    check_vmap(convolve, (xs, ws), jit=True)


def test_seed_nested_matrix_products():
    mat = rnd(15, 10)
    batched_x = rnd(5, 10, seed=1)

    def vv(v1, v2):
        return _dot(v1, v2)

    mv = vmap(vv, (0, None), 0)  # ([b,a], [a]) -> [b]
    mm = vmap(mv, (None, 1), 1)  # ([b,a], [a,c]) -> [b,c]
    np.testing.assert_allclose(mv(mat, batched_x[0]), mat @ batched_x[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mm(mat, batched_x.T), mat @ batched_x.T, rtol=1e-5, atol=1e-5)
    mm0 = vmap(mv, (None, 1), 0)
    np.testing.assert_allclose(mm0(mat, batched_x.T), batched_x @ mat.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(vmap(mv, (None, 0), 0)(mat, batched_x), batched_x @ mat.T,
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(jaxkit.jit(mm)(mat, batched_x.T), mat @ batched_x.T, rtol=1e-5,
                               atol=1e-5)


# ---- the harness itself ---------------------------------------------------------------


def test_harness_detects_wrong_results():
    def cheat(f):
        def wrong(*args):
            return lax.mul(f(*args), 1.0001)
        return wrong

    with pytest.raises(AssertionError):
        np.testing.assert_allclose(
            np.asarray(vmap(cheat(lax.sin))(rnd(3, 2))),
            loop_reference(lax.sin, (rnd(3, 2),)), rtol=1e-6)


def test_harness_examples_and_axes():
    check_vmap_examples(lambda x, y: lax.add(x, y),
                        lambda rng: (rng.normal(size=(2, 3)).astype(np.float32),
                                     rng.normal(size=(2, 3)).astype(np.float32)),
                        [0, (1, None), (-1, 0), (None, 2)])


# ---- composition with differentiation -------------------------------------------------


def _ad():
    """The AD API (``jaxkit.api``: grad, jvp, vjp, ...)."""
    return importlib.import_module("jaxkit.api")


def _loss(w, x):
    return lax.reduce_sum(lax.mul(lax.sin(lax.mul(w, x)), x), (0,))


def test_vmap_of_grad_is_per_example_grad():
    ad = _ad()
    ws, xs = rnd(4, 3), rnd(4, 3, seed=1)
    check_vmap(ad.grad(_loss), (ws, xs), jit=True)
    check_vmap(ad.grad(_loss, argnums=1), (rnd(3), xs), (None, 0))
    out = vmap(ad.grad(_loss), (None, 0))(rnd(3), xs)
    np.testing.assert_allclose(out, xs * np.cos(rnd(3) * xs) * xs, rtol=1e-5)


def test_grad_of_vmapped_function():
    ad = _ad()
    w, xs = rnd(3), rnd(4, 3, seed=1)

    def total(w):
        return lax.reduce_sum(vmap(_loss, (None, 0))(w, xs), (0,))

    g = ad.grad(total)(w)
    per_example = sum(np.asarray(ad.grad(_loss)(w, x)) for x in xs)
    np.testing.assert_allclose(g, per_example, rtol=1e-5)
    np.testing.assert_allclose(jaxkit.jit(ad.grad(total))(w), per_example, rtol=1e-5)


def test_jvp_and_vjp_compose_with_vmap():
    ad = _ad()
    xs, ts = rnd(4, 3), rnd(4, 3, seed=1)

    def f(x):
        return lax.mul(lax.sin(x), x)

    # vmap of jvp
    primal, tangent = vmap(lambda x, t: ad.jvp(f, (x,), (t,)))(xs, ts)
    np.testing.assert_allclose(primal, np.sin(xs) * xs, rtol=1e-5)
    np.testing.assert_allclose(tangent, (np.cos(xs) * xs + np.sin(xs)) * ts, rtol=1e-5)
    # jvp of vmap
    primal, tangent = ad.jvp(vmap(f), (xs,), (ts,))
    np.testing.assert_allclose(tangent, (np.cos(xs) * xs + np.sin(xs)) * ts, rtol=1e-5)
    # vjp of vmap, and vmap of vjp
    _, pullback = ad.vjp(vmap(f, 1, 1), xs.T)
    (ct,) = pullback(ts.T)
    np.testing.assert_allclose(ct, ((np.cos(xs) * xs + np.sin(xs)) * ts).T, rtol=1e-5)
    cts = vmap(lambda x, t: ad.vjp(f, x)[1](t)[0])(xs, ts)
    np.testing.assert_allclose(cts, (np.cos(xs) * xs + np.sin(xs)) * ts, rtol=1e-5)


def test_vmap_of_grad_with_jit_inside():
    ad = _ad()
    f = jaxkit.jit(_loss)
    check_vmap(ad.grad(f), (rnd(4, 3), rnd(4, 3, seed=1)), (0, 0), jit=True)
    check_vmap(ad.grad(f), (rnd(3, 4), rnd(3, seed=1)), (1, None))
