"""Python callbacks: ``jaxkit.debug.print``/``debug.callback`` and ``jaxkit.pure_callback``,
eagerly and under jit, vmap and grad, compared with JAX 0.10.2 where it is installed."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit import lax
from jaxkit.interpreters import partial_eval as pe


def lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def sds(shape, dtype=np.float32):
    return jaxkit.ShapeDtypeStruct(shape, dtype)


# ---- debug.print ----------------------------------------------------------------------------


def test_debug_print_eager(capsys):
    jaxkit.debug.print("x={x} y={}", jnp.arange(3.0) * 2, x=jnp.arange(3.0))
    jaxkit.debug.print("no placeholders")
    jaxkit.debug.print("{x:.3f}", x=jnp.float32(1.0))
    assert lines(capsys) == ["x=[0. 1. 2.] y=[0. 2. 4.]", "no placeholders", "1.000"]


def test_debug_print_under_jit_shows_runtime_values(capsys):
    @jaxkit.jit
    def f(x):
        jaxkit.debug.print("x={x} y={}", x * 2, x=x)
        return x + 1

    out = f(jnp.arange(3.0))
    assert lines(capsys) == ["x=[0. 1. 2.] y=[0. 2. 4.]"]
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0])
    f(jnp.arange(3.0) + 10)  # cached executable: the callback runs again with the new values
    assert lines(capsys) == ["x=[10. 11. 12.] y=[20. 22. 24.]"]


def test_debug_print_only_effect_is_kept_under_jit(capsys):
    # The print has no outputs and the function returns None: nothing may remove it.
    assert jaxkit.jit(lambda x: jaxkit.debug.print("only {}", x))(2.0) is None
    assert lines(capsys) == ["only 2.0"]


def test_debug_print_is_an_effectful_equation():
    jaxpr = jaxkit.make_jaxpr(lambda x: (jaxkit.debug.print("{}", x), x)[1])(1.0).jaxpr
    assert [e.primitive.name for e in jaxpr.eqns] == ["debug_print"]
    dced, _ = pe.dce_jaxpr(jaxpr, [False])
    assert [e.primitive.name for e in dced.eqns] == ["debug_print"]
    # ... also when it sits inside a jit whose outputs are unused
    inner = jaxkit.jit(lambda y: (jaxkit.debug.print("{}", y), y * 2)[1])
    jaxpr = jaxkit.make_jaxpr(lambda x: (inner(x), x)[1])(1.0).jaxpr
    dced, _ = pe.dce_jaxpr(jaxpr, [True])
    assert [e.primitive.name for e in dced.eqns] == ["jit"]


def test_debug_print_static_and_pytree_arguments(capsys):
    jaxkit.jit(lambda x: jaxkit.debug.print("{} {} {a}", "s", None, a=[1, x]))(jnp.ones(2))
    assert lines(capsys) == ["s None [Array(1, dtype=int32), Array([1., 1.], dtype=float32)]"]


def test_debug_print_format_errors_at_trace_time():
    with pytest.raises(KeyError, match="y"):
        jaxkit.jit(lambda x: jaxkit.debug.print("{y}", x=x))(1.0)
    with pytest.raises(ValueError, match="Unused positional arguments"):
        jaxkit.debug.print("no placeholders", 1)


def test_debug_print_two_call_form(capsys):
    jaxkit.debug.print(ordered=True)("v={}", jnp.float32(3.0))
    assert lines(capsys) == ["v=3.0"]


def test_debug_print_under_vmap_prints_each_example(capsys):
    jaxkit.vmap(lambda x: jaxkit.debug.print("v {}", x))(jnp.arange(3.0))
    assert lines(capsys) == ["v 0.0", "v 1.0", "v 2.0"]
    jaxkit.jit(jaxkit.vmap(lambda x, y: jaxkit.debug.print("{} {}", x, y),
                           in_axes=(0, None)))(jnp.arange(3.0), 7.0)
    # Independent callbacks in one program are not ordered (as in JAX without ordered=True).
    assert sorted(lines(capsys)) == ["0.0 7.0", "1.0 7.0", "2.0 7.0"]


def test_debug_print_jaxpr_reads_like_jax():
    text = str(jaxkit.make_jaxpr(lambda x: (jaxkit.debug.print("x = {}", x), x + 1)[1])(1.0))
    # no outputs: no "=" (as in JAX); JAX's parameters, the format string first (the whole
    # equation is compared with JAX's in test_callbacks_pmap.py)
    assert text.splitlines()[1:4] == ["    debug_print[", "      fmt=x = {}",
                                      "      has_placeholders=True"]
    assert text.splitlines()[10] == "    ] a"


def test_debug_callback_under_vmap_and_grad():
    seen = []

    def f(x):
        jaxkit.debug.callback(lambda v: seen.append(float(v)), x)
        return x * x

    jaxkit.vmap(f)(jnp.arange(3.0))
    assert seen == [0.0, 1.0, 2.0]
    seen.clear()
    assert float(jaxkit.grad(f)(3.0)) == 6.0 and seen == [3.0]  # the primal, once
    jaxpr = jaxkit.make_jaxpr(f)(1.0).jaxpr
    assert [e.primitive.name for e in jaxpr.eqns] == ["debug_callback", "mul"]


@pytest.mark.parametrize("jit_outer", [False, True])
@pytest.mark.parametrize("jit_inner", [False, True])
def test_debug_print_under_grad_prints_primals_once(capsys, jit_outer, jit_inner):
    def f(x):
        jaxkit.debug.print("x={}", x)
        return x * x

    f = jaxkit.jit(f) if jit_inner else f
    g = jaxkit.grad(f)
    g = jaxkit.jit(g) if jit_outer else g
    assert float(g(3.0)) == 6.0
    assert lines(capsys) == ["x=3.0"]


def test_debug_print_in_control_flow(capsys):
    def body(i, c):
        jaxkit.debug.print("i={i} c={c}", i=i, c=c)
        return c + 1.0

    assert float(jaxkit.jit(lambda x: lax.fori_loop(0, 3, body, x))(0.0)) == 3.0
    assert lines(capsys) == ["i=0 c=0.0", "i=1 c=1.0", "i=2 c=2.0"]
    lax.cond(True, lambda x: (jaxkit.debug.print("true {}", x), x)[1], lambda x: x, 1.0)
    assert lines(capsys) == ["true 1.0"]


def test_debug_callback_receives_arrays(capsys):
    seen = []
    jaxkit.jit(lambda x: jaxkit.debug.callback(lambda a, k: seen.append((a, k)), x, k="kw"))(
        jnp.arange(2.0))
    (a, k), = seen
    assert isinstance(a, jaxkit.Array) and k == "kw"
    np.testing.assert_array_equal(a, [0.0, 1.0])


def test_debug_print_matches_jax(capsys):
    jax = pytest.importorskip("jax")
    jjnp = pytest.importorskip("jax.numpy")

    def program(api, np_mod):
        def f(x, y):
            api.debug.print("x={x} y={y:.2f} both={}", x + 1, x=x, y=y)
            return x * y
        return f

    x = np.arange(4.0, dtype=np.float32).reshape(2, 2)
    jaxkit.jit(program(jaxkit, jnp))(x, 2.5)
    ours = lines(capsys)
    jax.jit(program(jax, jjnp))(x, 2.5)
    jax.effects_barrier()
    assert ours == lines(capsys)


# ---- pure_callback ----------------------------------------------------------------------------


def sin_cb(x):
    return jaxkit.pure_callback(np.sin, sds(jnp.shape(x), jnp.result_type(x)), x)


@pytest.mark.parametrize("wrap", [lambda f: f, jaxkit.jit], ids=["eager", "jit"])
def test_pure_callback_value(wrap):
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    np.testing.assert_allclose(wrap(sin_cb)(x), np.sin(x), rtol=1e-6)


def test_pure_callback_pytrees_and_kwargs():
    def cb(a, b, *, scale):
        return {"sum": np.asarray(a) + np.asarray(b[0]), "n": np.int32(scale)}

    f = jaxkit.jit(lambda x, y: jaxkit.pure_callback(
        cb, {"sum": sds((3,)), "n": sds((), np.int32)}, x, (y,), scale=3))
    out = f(jnp.ones(3), jnp.arange(3.0))
    np.testing.assert_array_equal(out["sum"], [1.0, 2.0, 3.0])
    assert int(out["n"]) == 3


def test_pure_callback_receives_arrays_and_may_use_jaxkit():
    def cb(a):
        assert isinstance(a, jaxkit.Array)
        return jnp.sin(a) * 2

    out = jaxkit.jit(lambda x: jaxkit.pure_callback(cb, sds((3,)), x))(jnp.ones(3))
    np.testing.assert_allclose(out, 2 * np.sin(np.ones(3)), rtol=1e-6)


def test_pure_callback_in_scan():
    f = lambda c, x: (c + jaxkit.pure_callback(np.cos, sds(()), x), None)  # noqa: E731
    total, _ = lax.scan(f, 0.0, jnp.arange(3.0))
    np.testing.assert_allclose(total, np.cos(np.arange(3.0)).sum(), rtol=1e-6)


@pytest.mark.parametrize("wrap", [lambda f: f, jaxkit.jit], ids=["eager", "jit"])
def test_pure_callback_wrong_result_shape(wrap):
    f = wrap(lambda x: jaxkit.pure_callback(np.sin, sds((2,)), x))
    with pytest.raises(RuntimeError, match=r"shape for return value #0: expected \(2,\)"):
        f(jnp.ones(3))


def test_pure_callback_exception_surfaces_under_jit():
    f = jaxkit.jit(lambda x: jaxkit.pure_callback(lambda a: 1 / 0, sds((3,)), x))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        f(jnp.ones(3))


def test_pure_callback_rejects_64_bit_results_without_x64():
    with pytest.raises(ValueError, match="64-bit"):
        jaxkit.pure_callback(np.sin, sds((), np.float64), 1.0)
    with pytest.raises(ValueError, match="vmap_method"):
        jaxkit.pure_callback(np.sin, sds(()), 1.0, vmap_method="bogus")


@pytest.mark.parametrize("wrap", [lambda f: f, jaxkit.jit], ids=["plain", "jit"])
def test_pure_callback_has_no_derivative(wrap):
    with pytest.raises(ValueError, match="Pure callbacks do not support JVP.*custom_jvp"):
        wrap(jaxkit.grad(sin_cb))(1.0)


def test_pure_callback_under_custom_jvp():
    @jaxkit.custom_jvp
    def s(x):
        return sin_cb(x)

    s.defjvp(lambda p, t: (s(p[0]), jnp.cos(p[0]) * t[0]))
    np.testing.assert_allclose(jaxkit.grad(s)(1.0), np.cos(1.0), rtol=1e-6)
    np.testing.assert_allclose(jaxkit.jit(jaxkit.grad(s))(1.0), np.cos(1.0), rtol=1e-6)


def test_pure_callback_vmap_without_method_raises():
    with pytest.raises(NotImplementedError, match="vmap_method=None"):
        jaxkit.vmap(sin_cb)(jnp.ones(3))


def _shape_logging_fun(calls, vmap_method):
    def cb(x, y):
        calls.append((np.shape(x), np.shape(y)))
        return np.asarray(x) + np.asarray(y)

    def fun(x, y):
        shape = np.broadcast_shapes(jnp.shape(x), jnp.shape(y))
        return jaxkit.pure_callback(cb, sds(shape, jnp.result_type(x, y)), x, y,
                                    vmap_method=vmap_method)
    return fun


@pytest.mark.parametrize("use_jit", [False, True])
@pytest.mark.parametrize("method,expected_calls", [
    ("sequential", [((), ())] * 4),
    ("sequential_unrolled", [((), ())] * 4),
    ("expand_dims", [((4,), (1,))]),
    ("broadcast_all", [((4,), (4,))]),
])
def test_pure_callback_vmap_methods(method, expected_calls, use_jit):
    # The docstring example of jax.pure_callback: x batched, y unbatched.
    calls = []
    f = jaxkit.vmap(_shape_logging_fun(calls, method), in_axes=(0, None))
    f = jaxkit.jit(f) if use_jit else f
    out = f(jnp.arange(4.0), 1.0)
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0, 4.0])
    assert calls == expected_calls


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_pure_callback_vmap_methods_match_jax(method):
    jax = pytest.importorskip("jax")
    jjnp = pytest.importorskip("jax.numpy")

    def run(api, np_mod):
        calls = []

        def cb(x, y):
            calls.append((np.shape(x), np.shape(y)))
            return np.asarray(x) * 2 + np.asarray(y)

        def fun(x, y):
            shape = np.broadcast_shapes(np_mod.shape(x), np_mod.shape(y))
            return api.pure_callback(cb, api.ShapeDtypeStruct(shape, np.float32), x, y,
                                     vmap_method=method)
        out = api.vmap(api.vmap(fun, in_axes=(0, None)), in_axes=(None, 0))(
            np.arange(3.0, dtype=np.float32), np.arange(2.0, dtype=np.float32))
        return np.asarray(out), calls

    ours, our_calls = run(jaxkit, jnp)
    theirs, their_calls = run(jax, jjnp)
    np.testing.assert_array_equal(ours, theirs)
    assert our_calls == their_calls


def test_callbacks_never_import_jax():
    code = textwrap.dedent("""
        import sys, numpy as np
        import jaxkit, jaxkit.numpy as jnp
        f = jaxkit.jit(lambda x: (jaxkit.debug.print("x={}", x), jaxkit.pure_callback(
            np.sin, jaxkit.ShapeDtypeStruct((2,), np.float32), x))[1])
        print(f(jnp.ones(2)))
        assert 'jax' not in sys.modules
        print('OK')
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["x=[1. 1.]", "[0.841471 0.841471]", "OK"]



def test_stages_and_effects_barrier(capsys):
    f = lambda x: (jaxkit.debug.print("s {}", x), x * 2)[1]  # noqa: E731
    lowered = jaxkit.jit(f).lower(jnp.ones(2))
    assert "xla_ffi_python_cpu_callback" in lowered.as_text()
    np.testing.assert_array_equal(lowered.compile()(jnp.ones(2)), [2.0, 2.0])
    jaxkit.effects_barrier()
    assert lines(capsys) == ["s [1. 1.]"]


@pytest.mark.parametrize("use_jit", [False, True], ids=["eager", "jit"])
def test_debug_log_logs_at_info_from_the_calling_line(caplog, capsys, use_jit):
    def f(x):
        jaxkit.debug.log("x = {x}", x=x * 2)
        return x

    line = f.__code__.co_firstlineno + 1
    with caplog.at_level("INFO", logger="jaxkit.debug"):
        (jaxkit.jit(f) if use_jit else f)(jnp.arange(3.0))
        jaxkit.effects_barrier()
    records = [r for r in caplog.records if r.name == "jaxkit.debug"]
    assert [(r.levelname, r.getMessage(), r.lineno) for r in records] == [
        ("INFO", "x = [0. 2. 4.]", line)]
    assert records[0].pathname == __file__
    assert capsys.readouterr().out == ""  # logged, not printed


def test_debug_effects_print_as_jax():
    jax = pytest.importorskip("jax")
    assert str(jaxkit.debug.DebugEffect()) == str(jax.debug.DebugEffect())
    assert str(jaxkit.debug.OrderedDebugEffect()) == str(jax.debug.OrderedDebugEffect())


def _breakpoint_session(J, use_jit):
    import io  # noqa: PLC0415  (only this test reads a scripted session)

    out = io.StringIO()
    commands = "p y\npp y * 2\np z + 1\nnope\nd\nl\nw\nu\nc\n"

    def f(x):
        y = J.numpy.sin(x)
        z = 3
        J.debug.breakpoint(num_frames=2, stdin=io.StringIO(commands), stdout=out)
        return y + z

    def caller(x):
        return f(x)

    (J.jit(caller) if use_jit else caller)(J.numpy.arange(3.0))
    J.effects_barrier()
    return out.getvalue()


@pytest.mark.parametrize("use_jit", [False, True], ids=["eager", "jit"])
def test_debug_breakpoint_session_reads_as_jax(use_jit):
    jax = pytest.importorskip("jax")
    got = _breakpoint_session(jaxkit, use_jit)
    assert got == _breakpoint_session(jax, use_jit)
    assert "Array([0.       , 1.6829419, 1.8185948], dtype=float32)" in got
