"""A ``jit`` inside a ``jit`` lowers as JAX 0.10.2 lowers it: a private ``func.func`` per inner
program, emitted once and called with ``func.call`` (names made unique: ``@f``, ``@f_0``),
with ``jax.result_info`` only on the public ``main``; ``inline=True`` stays inlined. Each record
is a program built alike from ``jax`` and from ``jaxkit``; their ``.lower(...).as_text()`` must
be the same text. Compiling such a program gives what the inlined program gives."""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jax_jnp  # noqa: E402

import jaxkit  # noqa: E402
import jaxkit.numpy as jk_jnp  # noqa: E402

_C = np.array([1., 2., 3.], np.float32)


def _programs(jx, jnp):
    """name -> (function to jit, arguments), built from the library ``jx``."""
    @jx.jit
    def inner(x):
        return jnp.sin(x) * x

    @partial(jx.jit, static_argnums=1)
    def scale(x, n):
        return x * n

    @partial(jx.jit, inline=True)
    def inlined(x):
        return jnp.cos(x)

    @jx.jit
    def tup(x):
        return x, (x * 2, x + 1)

    @jx.jit
    def two(x, y):
        return x + y, x * y

    @jx.jit
    def lvl2(x):
        return inner(x) + inner(x * 2)

    @jx.jit
    def closes(x):
        return x * _C

    @jx.jit
    def main(x):
        return x + 1

    x = np.arange(3, dtype=np.float32)
    m = np.ones((2, 3), np.float32)
    return {
        "plain": (lambda x: inner(x) + 1, (x,)),
        "called_twice": (lambda x: inner(x) + inner(x + 1), (x,)),
        "static_args": (lambda x: scale(x, 2) + scale(x, 3) + scale(x, 2), (x,)),
        "inline_true": (lambda x: inlined(x) * 2, (x,)),
        "tuple_outputs_pruned": (lambda x: tup(x)[1][0] + tup(x)[0], (x,)),
        "inputs_pruned": (lambda x: two(x, 2.0)[0] + two(x, x)[1], (x,)),
        "nested_twice": (lambda x: lvl2(x) + inner(x), (x,)),
        "jit_of_jit": (jx.jit(inner), (x,)),
        "lambda_name": (lambda x: jx.jit(lambda y: y * 3)(x), (x,)),
        "name_main": (lambda x: main(x), (x,)),
        "closed_over_constant": (lambda x: closes(x) + 1, (x,)),
        "closed_over_tracer": (lambda x: jx.jit(lambda y: y * x)(x), (x,)),
        "under_vmap": (jx.vmap(lambda x: inner(x) + 1), (m,)),
        "under_grad": (jx.grad(lambda x: inner(x).sum()), (x,)),
        "under_cond": (lambda x: jx.lax.cond(x[0] > 0, inner, lambda y: y, x), (x,)),
        "jnp_dot": (lambda a, b: jnp.dot(a, b) + 1, (m, m.T)),
        # lax functions JAX wraps in jit (lax.nested_jit), and the bodies JAX lowers out of
        # line: scan's ``@closed_call`` with its index functions, the rolled
        # ``@threefry2x32`` (one per operand shapes, renamed with the module-wide counter).
        "lax_fft": (lambda x: jx.lax.fft(x, "fft", (3,)), (x,)),
        "lax_dynamic_index": (lambda m, i: jx.lax.dynamic_index_in_dim(m, i, 1, False),
                              (m, np.int32(1))),
        "scan": (lambda x: jx.lax.scan(lambda c, a: (c + a, c * a), 1.0, x), (x,)),
        "scan_unroll_reverse": (lambda x: jx.lax.scan(lambda c, a: (c + a, c * a), 1.0, x,
                                                      unroll=2, reverse=True), (x,)),
        "random_split_normal": (_split_normal(jx), (jx.random.PRNGKey(0),)),
    }


def _split_normal(jx):
    def f(key):
        a, b = jx.random.split(key)
        return jx.random.normal(a, (3,)), jx.random.uniform(b, (3,))
    return f


_OURS, _THEIRS = _programs(jaxkit, jk_jnp), _programs(jax, jax_jnp)


@pytest.fixture(scope="module")
def lowered_texts():
    """Both libraries' texts, lowered once for the module."""
    return {name: (jaxkit.jit(f).lower(*args).as_text(),
                   jax.jit(_THEIRS[name][0]).lower(*args).as_text())
            for name, (f, args) in _OURS.items()}


def test_nested_jit_lowers_as_jax(lowered_texts):
    differ = [name for name, (ours, theirs) in lowered_texts.items() if ours != theirs]
    assert differ == [], "\n\n".join(
        f"{n}:\n{lowered_texts[n][0]}\n-- JAX:\n{lowered_texts[n][1]}" for n in differ)
    # The records do exercise the mechanism: calls, reuse and renaming.
    assert "call @inner(" in lowered_texts["called_twice"][0]
    assert lowered_texts["called_twice"][0].count("func.func private @inner(") == 1
    assert "func.func private @scale_0(" in lowered_texts["static_args"][0]
    assert "call" not in lowered_texts["inline_true"][0]
    assert "func.call @closed_call(" in lowered_texts["scan"][0]
    assert "func.func private @threefry2x32_0(" in lowered_texts["random_split_normal"][0]


def test_nested_jit_compiles_and_costs_as_jax():
    f, args = _OURS["called_twice"]
    compiled = jaxkit.jit(f).lower(*args).compile()
    ref = jax.jit(_THEIRS["called_twice"][0]).lower(*args).compile()
    np.testing.assert_allclose(np.asarray(compiled(*args)), np.asarray(ref(*args)), rtol=1e-6)
    ours, theirs = compiled.cost_analysis(), ref.cost_analysis()
    assert {k: ours[k] for k in ("flops", "bytes accessed")} == \
        {k: theirs[k] for k in ("flops", "bytes accessed")}


def test_nested_jit_values_match_inlined_program():
    # The same programs run through the call (jit) and with nothing compiled (disable_jit).
    for name in ("static_args", "inputs_pruned", "under_grad", "closed_over_tracer"):
        f, args = _OURS[name]
        got = jaxkit.jit(f)(*args)
        with jaxkit.disable_jit():
            want = f(*args)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, err_msg=name)
