"""``jaxkit.ad_checkpoint``: ``print_saved_residuals`` against the JAX oracle's printout, one
record per function, and the policy answers ``Recompute``/``Saveable``/``Offloadable``."""
from __future__ import annotations

import types

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit import ad_checkpoint as kad

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax import ad_checkpoint as jad  # noqa: E402

KIT = types.SimpleNamespace(jax=jaxkit, jnp=kjnp, ad=kad)
JAX = types.SimpleNamespace(jax=jax, jnp=jjnp, ad=jad)


def _mixed(m):
    def f(x, y):
        a = m.jnp.sin(x) * y
        b = m.ad.checkpoint_name(m.jnp.cos(a), "bee")
        return m.jnp.sum(b * x) + m.jax.jit(m.jnp.tanh)(y).sum()
    return f


def _names_policy(m):
    policy = m.jax.checkpoint_policies.save_only_these_names("bee")
    return m.jax.checkpoint(_mixed(m), policy=policy)


def _enum_policy(m):
    def policy(prim, *_, **__):
        return m.ad.Saveable if prim.name == "sin" else m.ad.Recompute
    return m.jax.checkpoint(lambda x: m.jnp.sin(m.jnp.sin(x)) * x, policy=policy)


def _layers(m, policy):
    # gradient-checkpointing.md: named layer outputs, saved by name.
    def predict(params, x):
        *ws, w_last = params
        for i, w in enumerate(ws):
            x = m.ad.checkpoint_name(m.jnp.sin(m.jnp.dot(w, x)), name=f"layer{i}_output")
        return m.jnp.dot(w_last, x)

    def loss(params, x, y):
        return ((predict(params, x) - y) ** 2).sum()
    return m.jax.checkpoint(loss, policy=policy(m.jax.checkpoint_policies))


V = np.linspace(0.1, 0.9, 3).astype(np.float32)
P3 = [np.full((3, 3), 0.5, np.float32)] * 3

# (name, make_f(m) -> f, args)
RECORDS = [
    ("mixed", _mixed, (V, V + 1)),
    ("checkpoint", lambda m: m.jax.checkpoint(_mixed(m)), (V, V + 1)),
    ("save_only_these_names", _names_policy, (V, V + 1)),
    ("saveable_recompute", _enum_policy, (np.float32(1.0),)),
    ("constant", lambda m: lambda x: m.jnp.sin(x * np.arange(3, dtype=np.float32)), (V,)),
    ("pytree_argument", lambda m: lambda d, s: m.jnp.sin(d["w"]) * s, ({"w": V}, V)),
    ("integer_input", lambda m: lambda x: x * x, (3,)),
    ("save_any_names_but_these",
     lambda m: _layers(m, lambda p: p.save_any_names_but_these("layer1_output")), (P3, V, V)),
    ("save_only_these_names_layers",
     lambda m: _layers(m, lambda p: p.save_only_these_names("layer1_output")), (P3, V, V)),
]


def _printed(capsys, make_f, m, args):
    m.ad.print_saved_residuals(make_f(m), *args)
    return capsys.readouterr().out


@pytest.mark.parametrize("name,make_f,args", RECORDS, ids=[r[0] for r in RECORDS])
def test_print_saved_residuals_matches_jax(capsys, name, make_f, args):
    got = _printed(capsys, make_f, KIT, args)
    want = _printed(capsys, make_f, JAX, args)
    # Compared as printed: file, line, column and qualified function name of each equation.
    assert got == want


def test_policy_answers_save_as_booleans_do():
    x = np.float32(0.7)
    f = lambda x: kjnp.sin(kjnp.sin(x)) * x  # noqa: E731
    answers = {"enum": lambda p, *_, **__: kad.Saveable if p.name == "sin" else kad.Recompute,
               "bool": lambda p, *_, **__: p.name == "sin"}
    printed = {}
    for key, policy in answers.items():
        g = jaxkit.checkpoint(f, policy=policy)
        np.testing.assert_allclose(jaxkit.grad(g)(x), jax.grad(
            lambda x: jjnp.sin(jjnp.sin(x)) * x)(x), rtol=1e-6)
        printed[key] = kad._saved_residuals(g, x)
    assert [(str(a), s) for a, s in printed["enum"]] == [(str(a), s) for a, s in printed["bool"]]
    assert len(printed["enum"]) == 3  # the argument and both sines


@pytest.mark.parametrize("answer", [3, "yes", kad.Offloadable], ids=["int", "str", "class"])
def test_bad_policy_answer_is_a_type_error_as_in_jax(answer):
    f = jaxkit.checkpoint(kjnp.sin, policy=lambda *_, **__: answer)
    with pytest.raises(TypeError, match="Value returned by a remat policy should be a bool"):
        jaxkit.grad(f)(1.0)
    jax_answer = jad.Offloadable if answer is kad.Offloadable else answer
    g = jax.checkpoint(jjnp.sin, policy=lambda *_, **__: jax_answer)
    with pytest.raises(TypeError, match="Value returned by a remat policy should be a bool"):
        jax.grad(g)(1.0)


def test_offloadable_is_a_value_and_offloading_gives_jax_gradient():
    o = kad.Offloadable("device", "pinned_host")
    assert repr(o) == repr(jad.Offloadable("device", "pinned_host"))
    assert o == kad.Offloadable(src="device", dst="pinned_host")
    f = jaxkit.checkpoint(kjnp.sin, policy=lambda *_, **__: o)
    g = jax.checkpoint(jjnp.sin, policy=lambda *_, **__: jad.Offloadable("device", "pinned_host"))
    assert float(jaxkit.grad(f)(1.0)) == float(jax.grad(g)(1.0))


@pytest.mark.parametrize("name", ["checkpoint", "remat"])
def test_removed_aliases_say_where_to_look_as_jax(name):
    with pytest.raises(AttributeError) as got:
        getattr(kad, name)
    with pytest.raises(AttributeError) as want:
        getattr(jad, name)
    assert str(got.value) == str(want.value)


def test_public_names_match_jax():
    assert sorted(kad.__all__) == sorted(n for n in dir(jad) if not n.startswith("_"))
