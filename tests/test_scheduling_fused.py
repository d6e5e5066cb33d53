"""``jax.experimental.scheduling_groups`` (``xla_metadata_call``) and
``jax.experimental.fused`` (``fused_call``): jaxprs, values, grad, jvp, vmap, DCE and lowering,
against the JAX oracle. ``fused`` lowers only on CUDA GPUs in JAX, so on CPU both raise
``NotImplementedError`` when it runs; its jaxprs are compared without JAX's ``<any>`` memory
space annotation (jaxkit's avals have no memory space)."""
import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit.experimental import fused as kfused
from jaxkit.experimental import scheduling_groups as ksg
from jaxkit.interpreters import partial_eval as pe

pytest.importorskip("jax")
import jax  # noqa: E402
import jax.experimental.fused  # noqa: E402
import jax.experimental.scheduling_groups  # noqa: E402
import jax.numpy as ojnp  # noqa: E402

X = np.arange(3.0, dtype=np.float32)


def _grouped(sg, np_):
    @sg.scheduling_group(name="grp1")
    def f(x, y):
        return np_.sin(x) * y, x + 1
    return f


def _pair(m):
    if m is jaxkit:
        return jaxkit, jnp, _grouped(ksg, jnp)
    return jax, ojnp, _grouped(jax.experimental.scheduling_groups, ojnp)


CASES = {
    "jaxpr": lambda m, np_, f: m.make_jaxpr(f)(X, 2.0),
    "eager": lambda m, np_, f: f(X, 2.0),
    "jit": lambda m, np_, f: m.jit(f)(X, 2.0),
    "grad": lambda m, np_, f: m.grad(lambda x: f(x, 2.0)[0].sum())(X),
    "grad_jaxpr": lambda m, np_, f: m.make_jaxpr(m.grad(lambda x: f(x, 2.0)[0].sum()))(X),
    "vmap": lambda m, np_, f: m.vmap(f, in_axes=(0, None))(X, 2.0),
    "vmap_jaxpr": lambda m, np_, f: m.make_jaxpr(m.vmap(f))(np.ones((2, 3), np.float32),
                                                            np.ones(2, np.float32)),
    "jvp": lambda m, np_, f: m.jvp(lambda x: f(x, 2.0), (X,), (np.ones(3, np.float32),)),
    "one_output": lambda m, np_, f: m.jit(lambda x: f(x, 2.0)[1])(X),
    "kwargs": lambda m, np_, f: m.make_jaxpr(lambda x: f(x, y=3.0))(X),
    "vmap_grad": lambda m, np_, f: m.vmap(m.grad(lambda x: f(x, 2.0)[0].sum()))(
        np.ones((2, 3), np.float32)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_scheduling_group_matches_jax(case):
    ours, theirs = CASES[case](*_pair(jaxkit)), CASES[case](*_pair(jax))
    if case.endswith("jaxpr") or case == "kwargs":
        assert str(ours) == str(theirs)
    else:
        for a, b in zip(jaxkit.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs),
                        strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6)


def test_metadata_dce_prunes_body_and_operands():
    f = ksg.scheduling_group("g")(lambda x, y: (jnp.sin(x) * y, x + 1))
    closed = jaxkit.make_jaxpr(lambda x, y: f(x, y)[1])(X, 2.0)
    jaxpr, used = pe.dce_jaxpr(closed.jaxpr)
    eqn, = jaxpr.eqns
    assert len(eqn.outvars) == 1 and len(eqn.invars) == 1 and used == [True, False]
    assert [e.primitive.name for e in eqn.params["jaxpr"].jaxpr.eqns] == ["add"]
    np.testing.assert_array_equal(jaxkit.core.eval_jaxpr(jaxpr, closed.consts, X, 2.0)[0],
                                  X + 1)


def test_metadata_lowering_carries_frontend_attributes():
    f = ksg.xla_metadata_call(lambda x: x * 2, foo="bar")
    text = jaxkit.jit(f).lower(X).as_text()
    calls = [ln for ln in text.splitlines() if "call @xla_metadata_call" in ln]
    assert len(calls) == 1 and 'mhlo.frontend_attributes = {foo = "bar"}' in calls[0]
    assert str(jaxkit.make_jaxpr(f)(X)) == str(jax.make_jaxpr(
        jax.experimental.scheduling_groups.xla_metadata_call(lambda x: x * 2, foo="bar"))(X))


def test_metadata_non_string_attribute_is_not_implemented():
    f = ksg.xla_metadata_call(lambda x: x * 2, level=3)
    with pytest.raises(NotImplementedError, match="mlir attr handler"):
        jaxkit.jit(f).lower(X)


def _fused_fn(m, fused_mod, np_):
    return fused_mod.fused(out_spaces=(m.memory.Space.Device,))(lambda x, y: np_.sin(x) * y)


def _strip_any(s):
    return str(s).replace("<any>", "")


FUSED_CASES = {
    "jaxpr": lambda m, f: m.make_jaxpr(f)(X, 2.0),
    "vmap": lambda m, f: m.make_jaxpr(m.vmap(f))(np.ones((2, 3), np.float32),
                                                 np.ones(2, np.float32)),
    "jvp": lambda m, f: m.make_jaxpr(lambda x: m.jvp(lambda x: f(x, 2.0), (x,), (x,)))(X),
}


@pytest.mark.parametrize("case", sorted(FUSED_CASES))
def test_fused_jaxprs_match_jax(case):
    ours = FUSED_CASES[case](jaxkit, _fused_fn(jaxkit, kfused, jnp))
    theirs = FUSED_CASES[case](jax, _fused_fn(jax, jax.experimental.fused, ojnp))
    assert _strip_any(ours) == _strip_any(theirs)


@pytest.mark.parametrize("run", [lambda m, f: f(X, 2.0), lambda m, f: m.jit(f)(X, 2.0)])
def test_fused_running_on_cpu_is_not_implemented(run):
    with pytest.raises(NotImplementedError) as theirs:
        run(jax, _fused_fn(jax, jax.experimental.fused, ojnp))
    with pytest.raises(NotImplementedError) as ours:
        run(jaxkit, _fused_fn(jaxkit, kfused, jnp))
    assert str(ours.value).startswith(str(theirs.value).splitlines()[0])


def test_fused_out_spaces_follow_outputs_through_jvp():
    f = kfused.fused(out_spaces=(jaxkit.memory.Space.Host, jaxkit.memory.Space.Device))(
        lambda x: (x * 2, jnp.sin(x)))
    jaxpr = jaxkit.make_jaxpr(lambda x: jaxkit.jvp(f, (x,), (x,)))(X)
    assert jaxpr.eqns[0].params["out_spaces"] == (
        jaxkit.memory.Space.Host, jaxkit.memory.Space.Device,
        jaxkit.memory.Space.Host, jaxkit.memory.Space.Device)


def test_fused_rejects_non_space():
    with pytest.raises(TypeError, match="jax.memory.Space"):
        kfused.fused(out_spaces=("device",))
