"""Debugging aids: ``jax_debug_nans`` (eager and jit, naming the primitive that made the NaN)
and the ``UnexpectedTracerError`` raised when a leaked tracer is used."""
import re

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit import lax


@pytest.fixture
def debug_nans():
    with jaxkit.config.override(jax_debug_nans=True):
        yield


# ---- jax_debug_nans ---------------------------------------------------------------------------


def test_off_by_default_nans_flow_through():
    assert jaxkit.config.jax_debug_nans is False
    assert np.isnan(jaxkit.jit(lambda x: x / x)(jnp.zeros(2))).all()
    assert np.isnan(lax.div(jnp.zeros(2), jnp.zeros(2))).all()


@pytest.mark.usefixtures("debug_nans")
@pytest.mark.parametrize("fun,prim", [
    (lambda: lax.div(jnp.zeros(2), jnp.zeros(2)), "div"),
    (lambda: jnp.zeros(2) / jnp.zeros(2), "div"),
    (lambda: jnp.log(-1.0), "log"),
    (lambda: lax.sqrt(jnp.float32(-4.0)), "sqrt"),
])
def test_eager_names_primitive(fun, prim):
    with pytest.raises(FloatingPointError, match=rf"^invalid value \(nan\) encountered in {prim}"):
        fun()


DEOPTIMIZED = ("Invalid nan value encountered in the output of a jax.jit function. Calling "
               "the de-optimized version.\n")


@pytest.mark.usefixtures("debug_nans")
def test_jit_reruns_deoptimized_to_find_the_primitive(capsys):
    @jaxkit.jit
    def f(x):
        return jnp.sin(x) + x / x * 2

    # (the whole message: pytest's match would also see the notes, and JAX's traceback-
    # filtering note is there only outside an IPython shell, which an earlier test may start)
    with pytest.raises(FloatingPointError) as info:
        f(jnp.zeros(2))
    assert str(info.value) == "invalid value (nan) encountered in div"
    # As JAX: f's jit reports, then the division's (jnp functions are jits) when f re-runs.
    assert capsys.readouterr().out == DEOPTIMIZED * 2
    with pytest.raises(FloatingPointError, match="encountered in div"):
        f(jnp.zeros(2))  # the cached executable (and its fast path) is checked too


@pytest.mark.usefixtures("debug_nans")
def test_jit_finds_primitive_in_nested_jit():
    inner = jaxkit.jit(lambda y: lax.sqrt(y - 1.0))
    with pytest.raises(FloatingPointError, match="encountered in sqrt"):
        jaxkit.jit(lambda x: inner(x) * 2)(jnp.zeros(3))


@pytest.mark.usefixtures("debug_nans")
def test_jit_nan_from_input_blames_the_first_op_as_jax():
    x = jnp.array([np.nan, 1.0])  # (made eagerly, before the check is on)
    # (the whole message: pytest's match would also see the notes, and JAX's traceback-
    # filtering note is there only outside an IPython shell, which an earlier test may start)
    with pytest.raises(FloatingPointError) as info:
        jaxkit.jit(lambda x: x * 2)(x)
    assert str(info.value) == "invalid value (nan) encountered in mul"


@pytest.mark.usefixtures("debug_nans")
def test_jit_nan_no_op_made_says_so():
    nan = jaxkit.jit(lambda: jnp.float32(np.nan))  # a NaN literal: no operation makes it
    with pytest.raises(FloatingPointError, match="de-optimized function"):
        nan()


@pytest.mark.usefixtures("debug_nans")
def test_grad_nan_is_caught():
    with pytest.raises(FloatingPointError, match="encountered in"):
        jaxkit.grad(lambda x: jnp.sqrt(x))(-1.0)


@pytest.mark.usefixtures("debug_nans")
def test_no_false_positives():
    np.testing.assert_array_equal(jaxkit.jit(lambda x: x * 2)(jnp.ones(2)), [2.0, 2.0])
    np.testing.assert_array_equal(jaxkit.jit(lambda x: x // 1)(jnp.ones(2, int)), [1, 1])
    assert float(jaxkit.grad(lambda x: jnp.sin(x) * x)(1.0)) == pytest.approx(
        np.cos(1.0) + np.sin(1.0), rel=1e-6)
    assert np.isinf(jaxkit.jit(lambda x: 1.0 / x)(0.0))  # inf is not NaN (jax_debug_infs)


def test_flag_toggles_without_stale_fast_path():
    f = jaxkit.jit(lambda x: x / x)
    x = jnp.zeros(2)
    f(x)
    f(x)  # now on the fast path
    with jaxkit.config.override(jax_debug_nans=True):
        with pytest.raises(FloatingPointError):
            f(x)
    assert np.isnan(f(x)).all()


def test_message_matches_jax():
    jax = pytest.importorskip("jax")
    jjnp = pytest.importorskip("jax.numpy")
    with jaxkit.config.override(jax_debug_nans=True):
        with pytest.raises(FloatingPointError) as ours:
            jaxkit.jit(lambda x: jnp.sin(x) + x / x)(jnp.zeros(2))
    jax.config.update("jax_debug_nans", True)
    try:
        with pytest.raises(FloatingPointError) as theirs:
            jax.jit(lambda x: jjnp.sin(x) + x / x)(jjnp.zeros(2))
    finally:
        jax.config.update("jax_debug_nans", False)
    assert str(theirs.value) == "invalid value (nan) encountered in div"
    assert str(ours.value).splitlines()[0] == str(theirs.value)


# ---- leaked tracers -----------------------------------------------------------------------------


def _leak(lib, transform, arg):
    store = []

    def f(x):
        y = x * 2
        store.append(y)
        return x.sum() if transform == "grad" else x

    getattr(lib, transform)(f)(arg)
    return store[0]


USES = {
    "eager": lambda lib, t: lib.numpy.sin(t),                          # an eager op
    "closure": lambda lib, t: lib.jit(lambda y: y + t)(lib.numpy.ones(())),  # a later jit
    "float": lambda lib, t: float(t.sum()) if t.ndim else float(t),  # concretization
}


@pytest.mark.parametrize("transform,arg", [("jit", np.ones(3, np.float32)),
                                           ("vmap", np.ones(3, np.float32)),
                                           ("grad", 1.0)], ids=["jit", "vmap", "grad"])
@pytest.mark.parametrize("use", USES)
def test_leaked_tracer_error_as_in_jax(transform, arg, use):
    """Class and message as JAX's: what leaked, from which traced function (a jit's tracers
    know it) and how to catch it earlier. (JAX raises a ConcretizationTypeError, not this,
    when a leaked vmap or grad tracer is converted to a float.)"""
    import jax

    def outcome(lib):
        leaked = _leak(lib, transform, arg)
        try:
            USES[use](lib, leaked)
        except Exception as e:  # noqa: BLE001 - class and message compared
            return type(e).__name__, re.sub(r"object id \d+", "N", str(e))
        return None
    assert outcome(jaxkit) == outcome(jax)
