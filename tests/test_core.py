"""Core: jaxpr IR and printing, eval and type checking, jit caching and stages, errors."""
import inspect
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit import core, lax
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.typecheck import check_jaxpr


def f32(*shape):
    return jaxkit.device_put(np.arange(np.prod(shape, dtype=int), dtype=np.float32).reshape(shape))


# ---- printing ---------------------------------------------------------------------------


def test_pp_single_equation_is_one_line():
    assert str(jaxkit.make_jaxpr(lax.exp)(f32(3))) == \
        "{ lambda ; a:f32[3]. let b:f32[3] = exp a in (b,) }"


def test_pp_multi_equation_with_literal():
    # As JAX 0.10.2: a jaxpr that fits in 80 columns is one line, equations joined by "; ".
    text = str(jaxkit.make_jaxpr(lambda x: lax.mul(lax.sin(x), 2.0))(f32(3)))
    assert text == "{ lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[3] = mul b 2.0:f32[] in (c,) }"
    text = str(jaxkit.make_jaxpr(lambda x: lax.mul(lax.sin(x), 2.0))(f32(300)))
    assert text == textwrap.dedent("""\
        { lambda ; a:f32[300]. let
            b:f32[300] = sin a
            c:f32[300] = mul b 2.0:f32[]
          in (c,) }""")


def test_pp_params_sorted_and_constvars():
    c = f32(2, 3)
    text = str(jaxkit.make_jaxpr(lambda x: lax.add(lax.transpose(x, (1, 0)), lax.transpose(c, (1, 0))))(f32(2, 3)))
    assert text.startswith("{ lambda a:f32[2,3]; b:f32[2,3]. let")
    assert "transpose[permutation=(1, 0)] b" in text


def test_pp_nested_jit():
    g = jaxkit.jit(lax.sin)
    text = str(jaxkit.make_jaxpr(lambda x: g(x))(f32(3)))
    assert "jit[" in text and "name=sin" in text
    assert "{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }" in text


def _same_text_as_jax(kit_fn, jax_fn, *args) -> str:
    """jaxkit's jaxpr text; where jax is installed, also checked to be jax's, line for line."""
    text = str(jaxkit.make_jaxpr(kit_fn)(*args))
    try:
        import jax
    except ImportError:
        return text
    want = str(jax.make_jaxpr(jax_fn)(*[np.asarray(a) for a in args]))
    assert text == want
    return text


def test_pp_unused_outputs_print_as_underscore_and_take_no_name():
    # (jax itself prints this split's sizes as np.int64(1): not compared)
    text = str(jaxkit.make_jaxpr(lambda x: jnp.split(x, 3)[0] * 2)(f32(3)))
    assert "b:f32[1] _:f32[1] _:f32[1] = split" in text and "c:f32[1] = mul b" in text


def test_pp_grad_jaxpr_matches_jax():
    def loss(np_):
        return lambda x: np_.sum(np_.sin(x) * 2 + x)

    text = _same_text_as_jax(jaxkit.grad(loss(jnp)),
                             lambda x: __import__("jax").grad(loss(__import__("jax").numpy))(x),
                             f32(3))
    # the primal sum is unused; broadcast_in_dim shows no shape (the binder has it)
    assert "_:f32[] = reduce_sum" in text and "= broadcast_in_dim 1.0:f32[]" in text


def test_pp_control_flow_bodies_continue_the_names():
    def body(lax_):
        return lambda x: lax_.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2),
                                         (0, x))
    text = _same_text_as_jax(body(lax), lambda x: body(__import__("jax").lax)(x), f32(3))
    assert "body_jaxpr={ lambda ; d:i32[] e:f32[3]. let" in text
    cond = str(jaxkit.make_jaxpr(lambda x: lax.cond(x.sum() > 0, lambda y: y, lambda y: y * 2,
                                                      x))(f32(3)))
    assert "{ lambda ; h:f32[3]. let  in (h,) }" in cond  # JAX's spacing for an empty body


def test_pp_jit_body_is_named_like_its_equation_and_hides_defaults():
    inner = jaxkit.jit(lambda y: y * 2)
    text = str(jaxkit.make_jaxpr(lambda x: inner(x) + 1)(f32(3)))
    assert text == textwrap.dedent("""\
        { lambda ; a:f32[3]. let
            b:f32[3] = jit[
              name=<lambda>
              jaxpr={ lambda ; a:f32[3]. let b:f32[3] = mul a 2.0:f32[] in (b,) }
            ] a
            c:f32[3] = add b 1.0:f32[]
          in (c,) }""")


def test_pp_pytree_args_and_outputs():
    closed = jaxkit.make_jaxpr(lambda d: {"s": lax.sin(d["x"]), "t": (d["y"],)})(
        {"x": f32(2), "y": f32(3)})
    assert [a.shape for a in closed.in_avals] == [(2,), (3,)]
    assert [a.shape for a in closed.out_avals] == [(2,), (3,)]


def test_make_jaxpr_static_argnums():
    closed = jaxkit.make_jaxpr(lambda x, n: lax.mul(x, float(n)), static_argnums=1)(f32(3), 4)
    assert "4.0:f32[]" in str(closed)


# ---- eval and type checking -------------------------------------------------------------


def test_eval_jaxpr_roundtrip():
    closed = jaxkit.make_jaxpr(lambda x: lax.add(lax.exp(x), x))(f32(4))
    (out,) = core.eval_jaxpr(closed.jaxpr, closed.consts, f32(4))
    np.testing.assert_allclose(out, np.exp(np.arange(4.0)) + np.arange(4.0), rtol=1e-6)


def test_check_jaxpr_accepts_traced():
    closed = jaxkit.make_jaxpr(lambda x: lax.mul(lax.sin(x), x))(f32(2))
    check_jaxpr(closed.jaxpr)


def test_check_jaxpr_rejects_wrong_type():
    closed = jaxkit.make_jaxpr(lambda x: lax.sin(x))(f32(2))
    eqn = closed.jaxpr.eqns[0]
    bad_out = core.Var(core.ShapedArray((5,), np.float32))
    bad = core.Jaxpr([], closed.jaxpr.invars, [bad_out], [eqn.replace(outvars=[bad_out])])
    with pytest.raises(core.JaxprTypeError, match="declared f32\\[5\\]"):
        check_jaxpr(bad)


def test_check_jaxpr_rejects_unbound_var():
    closed = jaxkit.make_jaxpr(lambda x: lax.sin(x))(f32(2))
    stray = core.Var(core.ShapedArray((2,), np.float32))
    eqn = closed.jaxpr.eqns[0].replace(invars=[stray])
    bad = core.Jaxpr([], closed.jaxpr.invars, closed.jaxpr.outvars, [eqn])
    with pytest.raises(core.JaxprTypeError, match="used before it is bound"):
        check_jaxpr(bad)


# ---- jit ----------------------------------------------------------------------------------


def test_jit_matches_eager_and_caches():
    def f(x, y):
        return lax.add(lax.exp(x), lax.mul(y, 3.0))

    jf = jaxkit.jit(f)
    x, y = f32(5), f32(5)
    np.testing.assert_allclose(jf(x, y), f(x, y), rtol=1e-6)
    jf(x, y)
    assert jf._cache_size() == 1
    assert len(jf.cache_events) == 1
    jf(f32(6), f32(6))
    assert jf._cache_size() == 2
    assert "shape changed from (5,) to (6,)" in jf.cache_events[-1].reason


def test_jit_cache_miss_reasons():
    def f(x, n):
        return lax.mul(x, float(n))

    jf = jaxkit.jit(f, static_argnums=1)
    jf(f32(3), 2)
    jf(f32(3), 3)
    assert "static argument n: value changed from 2 to 3" in jf.cache_events[-1].reason
    jf(np.zeros(3, np.int32).astype(np.float32), 3)  # same types: hit
    assert len(jf.cache_events) == 2
    jf(1.0, 3)
    assert "weak_type changed" in jf.cache_events[-1].reason or \
        "shape changed" in jf.cache_events[-1].reason


def test_jit_cache_shared_across_wrappers_of_same_function():
    def g(x):
        return lax.sin(x)

    jaxkit.jit(g)(f32(3))
    again = jaxkit.jit(g)
    again(f32(3))
    assert again.cache_events == []  # compiled by the first wrapper already


def test_jit_explain_cache_misses_logs(caplog):
    def h(x):
        return lax.cos(x)

    jh = jaxkit.jit(h)
    with jaxkit.config.override(jax_explain_cache_misses=True):
        jh(f32(2))
        with caplog.at_level("WARNING", logger="jaxkit"):
            jh(f32(3))
    assert any("shape changed from (2,) to (3,)" in r.message for r in caplog.records)


def test_jit_static_argnames_and_kwargs():
    def f(x, *, power):
        out = x
        for _ in range(power - 1):
            out = lax.mul(out, x)
        return out

    jf = jaxkit.jit(f, static_argnames="power")
    np.testing.assert_allclose(jf(f32(3), power=3), np.arange(3.0) ** 3)


def test_jit_unhashable_static_arg():
    jf = jaxkit.jit(lambda x, s: x, static_argnums=1)
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        jf(f32(2), [1, 2])


def test_jit_decorator_forms():
    from functools import partial

    @jaxkit.jit
    def a(x):
        return lax.neg(x)

    @partial(jaxkit.jit, static_argnums=(1,))
    def b(x, k):
        return lax.mul(x, float(k))

    np.testing.assert_allclose(a(f32(2)), [0.0, -1.0])
    np.testing.assert_allclose(b(f32(2), 5), [0.0, 5.0])


def test_jit_keeps_the_signature_even_unwrapped():
    # As JAX's PjitFunction: libraries bind arguments with inspect.signature(f,
    # follow_wrapped=False) (chex's fake_pmap turns keyword arguments into positional ones).
    def f(x, y=2, *, z):
        return x
    assert str(inspect.signature(jaxkit.jit(f), follow_wrapped=False)) == "(x, y=2, *, z)"
    assert jaxkit.jit(print).__name__ == "print"  # no signature to copy: still wrapped


def test_jit_pytree_in_and_out():
    @jaxkit.jit
    def f(params, x):
        return {"y": lax.add(lax.mul(params["w"], x), params["b"]), "x": x}

    out = f({"w": f32(3), "b": f32(3)}, f32(3))
    np.testing.assert_allclose(out["y"], np.arange(3.0) ** 2 + np.arange(3.0))
    assert set(out) == {"x", "y"}


def test_jit_closure_over_array_constant():
    c = f32(3)

    @jaxkit.jit
    def f(x):
        return lax.add(x, c)

    np.testing.assert_allclose(f(f32(3)), 2 * np.arange(3.0))


def test_jit_python_scalars_and_numpy_inputs():
    jf = jaxkit.jit(lambda x, y: lax.mul(x, y))
    np.testing.assert_allclose(jf(np.arange(3, dtype=np.float32), 2.0), [0.0, 2.0, 4.0])


def test_jit_bad_output_type():
    with pytest.raises(TypeError, match="returned a value of type <class 'str'>"):
        jaxkit.jit(lambda x: "nope")(f32(1))


def test_jit_donation_deletes_input():
    jf = jaxkit.jit(lambda x: lax.add(x, 1.0), donate_argnums=0)
    x = jaxkit.device_put(np.ones(16, np.float32))
    y = jf(x)
    np.testing.assert_allclose(y, 2.0)
    assert x.is_deleted()
    with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=float32\[16\]"):
        np.asarray(x)


def test_jit_disable_jit():
    calls = []

    def f(x):
        calls.append(type(x))
        return lax.sin(x)

    with jaxkit.config.override(jax_disable_jit=True):
        jaxkit.jit(f)(f32(2))
    assert calls == [jaxkit.runtime.array.Array]


# ---- stages -------------------------------------------------------------------------------


def test_stages_lower_compile():
    jf = jaxkit.jit(lambda x: lax.mul(lax.exp(x), 2.0))
    traced = jf.trace(f32(4))
    assert "exp" in str(traced.jaxpr)
    lowered = jf.lower(f32(4))
    text = lowered.as_text()
    assert "stablehlo.exponential" in text and "func.func public @main" in text
    compiled = lowered.compile()
    assert "exponential" in compiled.as_text()
    cost = compiled.cost_analysis()
    assert cost["transcendentals"] == 4.0
    mem = compiled.memory_analysis()
    assert mem.argument_size_in_bytes == 16
    assert compiled.timings.trace > 0 and compiled.timings.lower > 0 and \
        compiled.timings.compile > 0
    np.testing.assert_allclose(compiled(f32(4)), 2 * np.exp(np.arange(4.0)), rtol=1e-6)
    with pytest.raises(TypeError, match="compiled for"):
        compiled(f32(5))


# ---- errors -------------------------------------------------------------------------------


def test_concretization_error_names_function_and_argument():
    def branchy(x, y):
        if lax.gt(x, y):
            return x
        return y

    with pytest.raises(jaxkit.TracerBoolConversionError) as info:
        jaxkit.jit(branchy)(f32(1), f32(1))
    msg = str(info.value)
    assert "function branchy at" in msg and "the values of the arguments x and y" in msg
    assert msg.endswith("errors.html#jax.errors.TracerBoolConversionError")  # the fixes


def test_concretization_error_dependency_only_on_y():
    def f(x, y):
        return x if int(y) else x

    with pytest.raises(jaxkit.ConcretizationTypeError, match="argument y"):
        jaxkit.jit(f)(f32(1), f32(1))


def test_leaked_tracer_is_detected():
    leaked = []

    @jaxkit.jit
    def f(x):
        leaked.append(x)
        return x

    f(f32(2))
    with pytest.raises(jaxkit.UnexpectedTracerError, match="A function transformed by JAX "
                                                           "had a side effect"):
        jaxkit.jit(lambda y: lax.add(y, leaked[0]))(f32(2))


def test_shape_mismatch_names_both_shapes():
    with pytest.raises(TypeError, match=r"\(3,\), \(4,\)"):
        lax.add(f32(3), f32(4))


def test_lax_dtype_mismatch():
    with pytest.raises(TypeError, match="same dtypes"):
        lax.add(f32(3), jaxkit.device_put(np.ones(3, np.int32)))


# ---- Array ----------------------------------------------------------------------------------


def test_array_repr_and_conversions():
    x = jaxkit.device_put(np.array([1.0, 2.0], np.float32))
    assert repr(x) == "Array([1., 2.], dtype=float32)"
    assert x.shape == (2,) and x.dtype == np.float32 and x.ndim == 2 - 1 and x.size == 2
    s = lax.sin(jaxkit.device_put(np.float32(0.5)))
    assert float(s) == pytest.approx(np.sin(0.5), rel=1e-6)
    assert x.tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match=r"x = x.at\[idx\].set\(y\)"):
        x[0] = 3.0


def test_array_weak_type_repr():
    w = lax.mul(jaxkit.device_put(2.0), 3.0)
    assert w.weak_type
    assert repr(w) == "Array(6., dtype=float32, weak_type=True)"


def test_block_until_ready_pytree():
    tree = {"a": f32(3), "b": [f32(2)]}
    assert jaxkit.block_until_ready(tree) is tree
    assert f32(2).block_until_ready().is_ready()


def test_devices():
    devs = jaxkit.devices()
    assert devs and devs[0].platform == jaxkit.default_backend()
    x = jaxkit.device_put(np.ones(2, np.float32), devs[0])
    assert x.device == devs[0]


def test_x64_canonicalisation():
    x = jaxkit.device_put(np.arange(3, dtype=np.float64))
    assert x.dtype == np.float32
    with jaxkit.config.override(jax_enable_x64=True):
        y = jaxkit.device_put(np.arange(3, dtype=np.float64))
        assert y.dtype == np.float64
        assert lax.sin(y).dtype == np.float64


JAX_BOUND_SUBMODULES = (
    "api_util", "core", "custom_batching", "custom_derivatives", "debug", "distributed",
    "dlpack", "dtypes", "errors", "experimental", "export", "ffi", "image", "interpreters", "lax",
    "monitoring", "nn", "numpy", "ops", "profiler", "random", "ref", "scipy", "sharding",
    "stages", "tree", "tree_util", "typing")


def test_import_never_imports_jax():
    code = textwrap.dedent("""
        import sys, numpy as np
        import jaxkit, jaxkit.numpy
        from jaxkit import lax
        x = jaxkit.device_put(np.arange(4, dtype=np.float32))
        y = jaxkit.jit(lambda a: lax.mul(lax.sin(a), 2.0))(x)
        z = lax.exp(x)
        print(y, repr(z), np.asarray(z), float(z[0]) if hasattr(z, '__getitem__') else 0)
        assert 'jax' not in sys.modules, sorted(m for m in sys.modules if m.startswith('jax.'))
        # the submodules a bare `import jax` binds in JAX 0.10.2 (`vars(jax)`; less _src, lib
        # and version): user code reaches them as attributes, `jax.scipy.special.erf(x)`
        missing = [name for name in JAX_BOUND_SUBMODULES if not hasattr(jaxkit, name)]
        assert not missing, missing
        print('OK')
    """).replace("JAX_BOUND_SUBMODULES", repr(JAX_BOUND_SUBMODULES))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "OK" in out.stdout


def test_trace_to_jaxpr_literals_and_consts():
    c = np.ones(3, np.float32)
    jaxpr, consts = pe.trace_to_jaxpr(lambda x: [lax.add(lax.mul(x, 2.0), c)],
                                      [core.ShapedArray((3,), np.float32)])
    assert len(consts) == 1 and consts[0] is c
    assert any(type(a) is core.Literal for e in jaxpr.eqns for a in e.invars)


def test_rank0_numpy_constants_are_inlined_as_literals():
    # Rules write their constants as rank-0 NumPy arrays (tanh's JVP has ``1 - ans``): like
    # JAX, those print inline and are not carried as constant inputs of the program.
    one = np.array(1.0, np.float32)
    jaxpr, consts = pe.trace_to_jaxpr(lambda x: [lax.sub(one, x)],
                                      [core.ShapedArray((3,), np.float32)])
    assert consts == [] and not jaxpr.constvars
    closed = jaxkit.make_jaxpr(jaxkit.grad(lambda x: jnp.sum(jnp.tanh(x))))(jnp.ones(3))
    assert not closed.jaxpr.constvars
    assert "sub 1.0:f32[] b" in str(closed)
