"""JAX's libraries on jaxkit: the ``install_as_jax`` hook, ``jax.extend``, ``checkify``, and
Optax's optimiser tests and a Flax training run (those two only where optax/flax are installed).

Anything that installs the hook runs in a subprocess: this test process imports the real JAX as
its oracle, and the two are never mixed in one process.
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit.experimental import checkify
from jaxkit.extend import core as jex_core
from jaxkit.extend import linear_util as lu

HERE = Path(__file__).parent
HAVE_JAX = importlib.util.find_spec("jax") is not None
HAVE_FLAX = all(importlib.util.find_spec(m) for m in ("flax", "optax"))


def run_py(code: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, JAX_PLATFORMS="cpu"))


# --------------------------------------------------------------------------------------------
# The import hook
# --------------------------------------------------------------------------------------------

HOOK_CHECKS = """
import sys, jaxkit
jaxkit.install_as_jax()
import jax, jax.numpy as jnp, jax.extend.core, jax.experimental.checkify as ck
from jax import lax, random
from jax.interpreters import partial_eval as pe
from jax._src import traceback_util
assert jnp is jaxkit.numpy and lax is jaxkit.lax and random is jaxkit.random
assert jax.extend.core is jaxkit.extend.core
assert jax.__version__ == "0.10.2" and jax.__version_info__ == (0, 10, 2)
assert jax.jit is jaxkit.jit and jax.grad is jaxkit.grad
assert jax.version.__version__ == "0.10.2"
assert "jaxlib" not in [m.split(".")[0] for m in sys.modules if m == "jax" or m.startswith("jax.")]
assert float(jax.jit(lambda x: jnp.sin(x) * 2)(0.5)) == float(2 * jnp.sin(0.5))
import jax.export
assert jax.export is jaxkit.export
try:  # a module jaxkit does not have (jax2tf needs TensorFlow) names itself
    import jax.experimental.jax2tf
except ModuleNotFoundError as e:
    assert "jaxkit has no 'jaxkit.experimental.jax2tf'" in str(e), e
else:
    raise AssertionError("jax.experimental.jax2tf resolved to something")
print("ok")
"""


def test_install_as_jax_resolves_every_jax_module_to_jaxkit():
    out = run_py(HOOK_CHECKS)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.skipif(not HAVE_JAX, reason="needs the real jax to import first")
def test_install_after_real_jax_is_refused():
    out = run_py("import jax, jaxkit\njaxkit.install_as_jax()")
    assert out.returncode != 0
    assert "the real jax package is already imported" in out.stderr
    assert "never mixed" in out.stderr


def test_python_m_jaxkit_run(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import sys, jax, jax.numpy as jnp\n"
                      "print(jax.numpy.__name__, int(jnp.sum(jnp.arange(4))), sys.argv[1:])\n")
    out = subprocess.run([sys.executable, "-m", "jaxkit", "run", str(script), "a", "b"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "jaxkit.numpy 6 ['a', 'b']"


# --------------------------------------------------------------------------------------------
# jax.extend
# --------------------------------------------------------------------------------------------


def test_extend_core_jaxpr_as_fun_evaluates_a_traced_program():
    f = lambda x, y: jnp.sin(x) * y + 1.0
    closed = jaxkit.make_jaxpr(f)(0.3, 2.0)
    assert isinstance(closed, jex_core.ClosedJaxpr)
    assert all(isinstance(v, jex_core.Var) for v in closed.jaxpr.invars)
    (out,) = jex_core.jaxpr_as_fun(closed)(0.3, 2.0)
    np.testing.assert_allclose(out, f(0.3, 2.0), rtol=1e-6)
    assert isinstance(jex_core.get_opaque_trace_state(), jex_core.OpaqueTraceState)
    assert jex_core.get_opaque_trace_state() == jex_core.get_opaque_trace_state()


def test_extend_core_trace_state_differs_inside_jit():
    outer = jex_core.get_opaque_trace_state()
    seen = []
    jaxkit.jit(lambda x: seen.append(jex_core.get_opaque_trace_state()) or x)(1.0)
    assert seen[0] != outer


def test_linear_util_transformation_with_aux():
    def gen(f, scale, *args):
        out = f(*args)
        return out * scale, ("aux", out)
    wrapped, aux = lu.transformation_with_aux2(gen, lu.wrap_init(lambda x: x + 1), 3)
    assert wrapped.call_wrapped(2) == 9
    assert aux() == ("aux", 3)


# --------------------------------------------------------------------------------------------
# checkify, against JAX's messages
# --------------------------------------------------------------------------------------------


def _user_fn(ck, np_):
    def f(x, i):
        ck.check(x > 0, "x must be positive, got {}", x)
        y = np_.log(x)
        return np_.arange(4.0)[i] + y + 1 // (i - 2)
    return f


CHECKIFY_CASES = [  # (errors name, args)
    ("user_checks", (1.0, 1)), ("user_checks", (-1.0, 1)), ("all_checks", (-1.0, 1)),
    ("all_checks", (1.0, 7)), ("all_checks", (1.0, 2)), ("index_checks", (1.0, 7)),
    ("div_checks", (1.0, 2)), ("float_checks", (1.0, 1)),
]


@pytest.mark.parametrize("errors,args", CHECKIFY_CASES)
@pytest.mark.parametrize("jitted", [False, True])
def test_checkify_messages_match_jax(errors, args, jitted):
    jax = pytest.importorskip("jax")
    from jax.experimental import checkify as jax_ck
    ours = checkify.checkify(_user_fn(checkify, jnp), errors=getattr(checkify, errors))
    theirs = jax_ck.checkify(_user_fn(jax_ck, jax.numpy), errors=getattr(jax_ck, errors))
    if jitted:
        ours, theirs = jaxkit.jit(ours), jax.jit(theirs)
    err, out = ours(*map(jnp.asarray, args))
    jerr, jout = theirs(*map(jax.numpy.asarray, args))
    assert err.get() == jerr.get()
    np.testing.assert_allclose(np.asarray(out), np.asarray(jout))


def test_check_format_arguments_must_be_arrays():
    with pytest.raises(TypeError, match="need to be PyTrees of arrays, but got 1.0"):
        checkify.checkify(lambda x: checkify.check(x > 0, "{}", 1.0))(1.0)


def test_checkify_nan_and_throw():
    err, _ = checkify.checkify(lambda x: jnp.sin(x) * jnp.inf * 0,
                               errors=checkify.nan_checks)(1.0)
    assert err.get() == "nan generated by primitive: mul."
    with pytest.raises(checkify.JaxRuntimeError, match="nan generated by primitive: mul"):
        err.throw()
    err, _ = checkify.checkify(lambda x: jnp.sin(x), errors=checkify.nan_checks)(1.0)
    assert err.get() is None
    err.throw()


def test_check_outside_checkify():
    with pytest.raises(checkify.JaxRuntimeError, match=r"eager fail 3 \(`check` failed\)"):
        checkify.check(jnp.array(False), "eager fail {x}", x=jnp.array(3))
    with pytest.raises(ValueError, match="not functionalized"):
        jaxkit.jit(lambda x: checkify.check(x > 0, "no"))(1.0)


def test_checkify_under_vmap_names_the_mapped_index():
    f = checkify.checkify(_user_fn(checkify, jnp))
    err, _ = jaxkit.vmap(f)(jnp.array([1.0, -2.0]), jnp.array([1, 1]))
    assert err.get() == "at mapped index 1: x must be positive, got -2.0 (`check` failed)"


def test_check_error_inside_checkify():
    inner = checkify.checkify(lambda x: checkify.check(x > 0, "inner {}", x) or x)

    def outer(x):
        err, y = inner(x)
        checkify.check_error(err)
        return y
    err, _ = checkify.checkify(outer)(-1.0)
    assert err.get() == "inner -1.0 (`check` failed)"


# --------------------------------------------------------------------------------------------
# The libraries themselves
# --------------------------------------------------------------------------------------------


@pytest.mark.skipif(not (HAVE_FLAX and HAVE_JAX), reason="needs flax, optax and jax")
def test_flax_linen_trains_the_same_on_jaxkit_as_on_jax():
    runs = {}
    for backend in ("jax", "jaxkit"):
        out = subprocess.run([sys.executable, str(HERE / "ecosystem" / "flax_smoke.py"),
                              backend, "linen"], capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stderr[-3000:]
        runs[backend] = json.loads(out.stdout.strip().splitlines()[-1])["linen"]
    np.testing.assert_allclose(runs["jaxkit"]["losses"], runs["jax"]["losses"], rtol=2e-3,
                               atol=1e-4)
    assert runs["jaxkit"]["accuracy"] == runs["jax"]["accuracy"]


# Optax's per-optimiser dtype products (the state's shape and dtype over six parameter dtypes,
# dtype preservation, gradient accumulation and inject_hyperparams wrapping: 375 of alias_test's
# 623 tests, about half its time) repeat each optimiser once per dtype; CI keeps every other test
# in the file (each optimiser's convergence on both problems, the comparisons with plain
# implementations and SciPy, L-BFGS). ``bench/ecosystem_tests.py --suites optax`` runs the whole
# file, and the suites of optax, chex and Flax, against JAX and jaxkit side by side.
OPTAX_CI_DESELECT = ("state_shape_dtype_shard_stability", "preserve_dtype",
                     "gradient_accumulation", "wrapped_in_inject_hyperparams")


@pytest.mark.skipif(not HAVE_FLAX, reason="needs optax")
def test_optax_optimiser_tests_pass_on_jaxkit():
    import optax
    alias_test = Path(optax.__file__).parent / "_src" / "alias_test.py"
    deselect = " and ".join(f"not {name}" for name in OPTAX_CI_DESELECT)
    out = subprocess.run([sys.executable, "-m", "jaxkit", "run", "-m", "pytest", "-q",
                          "-p", "no:cacheprovider", "-k", deselect, str(alias_test)],
                         capture_output=True, text=True, timeout=1800, cwd=alias_test.parent)
    assert out.returncode == 0, out.stdout[-5000:]  # 1: a test failed; 5: none collected
