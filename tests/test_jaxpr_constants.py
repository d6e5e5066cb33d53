"""Constants in jaxprs as JAX 0.10.2 stages them (the test-only oracle prints the same text).

A concrete array the traced function closes over is a constant input of the jaxpr, a scalar
one too (``{ lambda a:f32[]; b:f32[3]. ...``), weakly typed ones converted where they meet a
strong type; host scalars made while tracing (``jnp.float32(2.5)``, a Python ``False`` handed
to a jnp function) are literals, and tracers: they do not concretize (``int(jnp.asarray(3))``
raises JAX's ConcretizationTypeError).
Jacobians build their basis as JAX's do (an ``eye`` split among the leaves, then converted)
and split their results with ``split`` equations."""

import pytest
from _snippets import printed

jax = pytest.importorskip("jax")

import jaxkit  # noqa: E402

RECORDS = {
    "closed-over scalar arrays are constant inputs": """
        b = jax.random.normal(jax.random.key(1), ())
        for v in [b, jnp.float32(2.5), jnp.array(3.5), jnp.ones(()), jnp.sum(jnp.ones(3)),
                  jnp.zeros((), jnp.int32), np.float32(1.5), np.array(1.5, np.float32)]:
            print(jax.make_jaxpr(lambda x: x * v)(1.))
            print(jax.make_jaxpr(jax.jit(lambda x: x * v))(1.))
        c, d, e = jnp.float32(2.5), jnp.array(3.5), jnp.ones(())
        print(jax.make_jaxpr(lambda x: x * c + d + e)(1.))
        print(jax.make_jaxpr(lambda w: jnp.tanh(w * b).sum())(jnp.ones(3)))
    """,
    "host scalars made while tracing are literals": """
        x = jnp.ones(2)
        for f in [lambda x: jnp.broadcast_arrays(False, x),
                  lambda x: jax.jit(lambda a, b: a + b)(1., x),
                  lambda x: jnp.where(x > 0, True, x),
                  lambda x: jnp.select([x > 0], [x], default=jnp.float32(3)),
                  lambda x: jnp.select([x > 0], [x], default=jnp.array(3.)),
                  lambda x: jnp.clip(x, jnp.float32(0), 1),
                  lambda x: x + jnp.asarray(np.float32(2)), lambda x: x * jnp.pi,
                  lambda x: x * jnp.zeros(()), lambda x: x * jnp.ones((), jnp.int32),
                  lambda x: x * jnp.arange(3)[1], lambda x: x * jnp.sum(jnp.ones(3)),
                  lambda x: x * jax.random.normal(jax.random.key(0), ()),
                  lambda x: jnp.broadcast_arrays(np.float64(2), x),
                  lambda x: jnp.broadcast_arrays(np.int64(2), x),
                  lambda x: jnp.broadcast_arrays(1j, x),
                  lambda x: jnp.where(x > 0, np.float64(1), x)]:
            print(jax.make_jaxpr(f)(x))
    """,
    "literals made while tracing do not concretize": """
        for f in [lambda x: int(jnp.asarray(3)) * x, lambda x: jnp.arange(jnp.asarray(3)) * x[0],
                  lambda x: x[:jnp.int32(2)], lambda x: jnp.zeros(jnp.int32(2)) + x[0],
                  lambda x: x * float(jnp.float32(2)),
                  lambda x: jnp.ones(2) * (1 if jnp.asarray(True) else 0)]:
            try:
                print(jax.make_jaxpr(f)(jnp.ones(3)))
            except Exception as e:
                print(type(e).__name__, str(e).splitlines()[0])
    """,
    "jacobians": """
        x = jnp.ones(2)
        print(jax.make_jaxpr(jax.jacrev(jnp.sin))(x))
        print(jax.make_jaxpr(jax.jacfwd(jnp.sin))(x))
        print(jax.make_jaxpr(jax.jacrev(lambda x: (x, x * 2)))(x))
        print(jax.make_jaxpr(jax.jacfwd(lambda p: p['a'] * p['b']))({'a': x, 'b': 2.}))
        print(jax.make_jaxpr(jax.jacrev(lambda a, b: a * b, argnums=(0, 1)))(x, 3.))
        print(jax.jacrev(lambda p: p['a'] * p['b'])({'a': x, 'b': 2.}))
        print(jax.jacfwd(jnp.sin)(jnp.ones((2, 2))))
    """,
}


@pytest.mark.parametrize("name", list(RECORDS))
def test_prints_as_jax(name):
    assert printed(RECORDS[name], jaxkit) == printed(RECORDS[name], jax)
