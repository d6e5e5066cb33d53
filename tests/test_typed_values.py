"""Typed host values and weak-type widths, against JAX 0.10.2 (the test-only oracle).

JAX's primitives take their operands canonicalized: a Python scalar as a ``TypedInt``,
``TypedFloat`` or ``TypedComplex`` of its default dtype, a NumPy value as a ``TypedNdArray``
of its canonical dtype. What an eager primitive hands back unchanged (``stop_gradient``,
``checkpoint``, ``checkpoint_name``, ``linear_call``) and ``vjp``'s outputs that are its
inputs come back so, and print so. Such values work everywhere a scalar does, and keep their
dtype when x64 is switched; jnp's promotion keeps the width of weak inputs made before the
switch (JAX's ``lattice_result_type``), while ``jnp.result_type`` gives the defaults. A 64-bit
array made under x64 keeps its dtype without it wherever JAX's does (its dtype is no request to
truncate); JAX also warns of truncation in some jnp functions given one (``jnp.mean``,
``jnp.clip``), where it converts to a dtype of its own choosing: jaxkit does not.

Each record runs with ``jax`` bound to JAX and to jaxkit; what it prints must be the same."""

import pytest
from _snippets import printed

jax = pytest.importorskip("jax")

import jaxkit  # noqa: E402

RECORDS = {
    "vjp outputs that are inputs": """
        for primals in [(1.0,), (1,), (1j,), (True,), ([1.0, 2],), (np.ones(2),), (np.float64(3),),
                        (np.int64(4),), (jnp.ones(2),)]:
            print(repr(jax.vjp(lambda x: x, *primals)[0]))
        print(repr(jax.vjp(lambda x: (x * 2, x), 1.0)[0]))
        print(repr(jax.vjp(lambda x: x, 1.0)[1](2.0)))
    """,
    "vjp of a NumPy float64 array is float32": """
        y, f_vjp = jax.vjp(lambda x: x, np.ones(3))
        print(y.dtype, jax.typeof(y))
    """,
    "grad and value_and_grad aux": """
        print(repr(jax.grad(lambda x: (x, x), has_aux=True)(1.0)))
        print(repr(jax.value_and_grad(lambda x: (x * 1, x), has_aux=True)(1.0)))
        print(repr(jax.jacrev(lambda x: (x, x), has_aux=True)(1.0)))
    """,
    "gradient of a tuple": """
        try:
            jax.grad(lambda x: (x, x))(1.0)
        except TypeError as e:
            print(e)
    """,
    "primitives handing back their operand": """
        from jax.ad_checkpoint import checkpoint_name
        for v in [1.0, 3, 2j, True, np.ones(2), np.float64(2), np.int64(3)]:
            print(repr(lax.stop_gradient(v)))
            print(repr(jax.checkpoint(lambda x: x)(v)))
        print(repr(jax.checkpoint(lambda x, y: (x, y * 2))(1.0, 2)))
        print(repr(checkpoint_name(1.0, 'a')))
        print(repr(jax.custom_derivatives.linear_call(lambda _, x: x, lambda _, t: 7., (), 1.)))
    """,
    "custom derivatives and identities that stay plain": """
        print(repr(jax.jvp(lambda x: x, (1.0,), (2.0,))))
        print(repr(jax.linearize(lambda x: x, 1.0)[0]))
        f = jax.custom_jvp(lambda x: x)
        f.defjvp(lambda p, t: (p[0], t[0]))
        print(repr(f(1.0)), repr(jax.jvp(f, (1.0,), (2.0,))))
        g = jax.custom_jvp(lambda x, y: (x, y)); g.defjvp(lambda p, t: (p, t))
        print(repr(g(1.0, np.ones(2))), repr(jax.jvp(g, (1.0, 2.0), (1.0, 1.0))))
        h = jax.custom_vjp(lambda x: x); h.defvjp(lambda x: (x, None), lambda r, c: (c,))
        print(repr(h(1.0)), repr(jax.jit(h)(1.0)), repr(jax.vjp(h, 1.0)[0]))
        k = jax.custom_jvp(lambda x, n: (x * n, n), nondiff_argnums=(1,))
        k.defjvp(lambda n, p, t: (k(p[0], n), (t[0] * n, n)))
        print(repr(k(2.0, 3)))
        print(repr(lax.while_loop(lambda c: False, lambda c: c, 1.0)))
        print(repr(lax.optimization_barrier(1.0)))
    """,
    "typed scalars as operands": """
        tf, ti, tc = lax.stop_gradient(1.5), lax.stop_gradient(2), lax.stop_gradient(1j)
        tn = lax.stop_gradient(np.ones(2))
        print(tf, ti, tc, f"{tf:.2f}", float(tf), int(ti), tf + 1, type(tf + 1).__name__)
        print(repr(jnp.asarray(tf)), repr(tf + jnp.ones(2)), repr(jnp.sin(tf)))
        print(repr(jax.jit(lambda a, b, c, d: (a, b, c, d))(tf, ti, tc, tn)))
        print(repr(jax.vmap(lambda x, y: x * y, (0, None))(jnp.ones(2), tf)))
        print(jax.make_jaxpr(lambda x: x + tf)(ti))
        print(repr(jnp.arange(ti)), repr(jnp.where(True, tf, ti)), jax.tree.leaves([tf, ti]))
        print(jax.typeof(tf), jax.typeof(ti), jax.typeof(tc), jax.typeof(tn))
        print(repr(jax.grad(lambda x: x * 2)(tf)), repr(jax.device_put(tf)), hash(tf) == hash(1.5))
    """,
    "typed scalars keep their dtype across x64": """
        tf, ti = lax.stop_gradient(1.5), lax.stop_gradient(2)
        with jax.enable_x64(True):
            print(repr(jnp.asarray(tf)), repr(jnp.asarray(ti)), repr(jnp.asarray(1.5)))
            print(jax.typeof(tf), repr(jax.jit(lambda x: x)(tf)), repr(tf * jnp.float64(2)))
            t64 = lax.stop_gradient(1.5)
        print(repr(t64), repr(jax.device_put(t64)), repr(t64 * jnp.ones(2)))
    """,
    "weak widths kept across x64": """
        a, i = jnp.asarray(1.5), jnp.asarray(2)
        with jax.enable_x64(True):
            print(jnp.result_type(a), jnp.result_type(a, a), jnp.result_type(i))
            print(repr(jnp.asarray(a)), repr(jnp.array([a, a])), repr(jnp.sin(a)))
            print(repr(a + 1.0), repr(a + a), repr(i + i), repr(i * 2), repr(jnp.stack([a, a])))
            print(repr(jnp.concatenate([a[None], jnp.ones(1)])), repr(jnp.maximum(a, i)))
    """,
    # JAX respects a 64-bit value once formed: its dtype is no request to truncate.
    "64-bit arrays made under x64 used without": """
        import warnings
        warnings.simplefilter("ignore")  # (JAX warns where jaxkit does not: see above)
        with jax.enable_x64(True):
            y, k = jnp.ones(3, jnp.float64), jnp.arange(3, dtype=jnp.int64)
        print(repr(y), repr(k), repr(y + 1), repr(k + 1), repr(y * jnp.ones(3)))
        print(repr(jnp.sin(y)), repr(jnp.array(y)), repr(jnp.asarray(y)), repr(jnp.stack([y])))
        print(repr(jnp.zeros_like(y)), repr(jnp.ones_like(k)), repr(jnp.full_like(y, 2)))
        print(repr(lax.full_like(y, 1)), repr(jnp.zeros_like(y, shape=(2,))))
        print(repr(lax.full(2, y[0])), repr(jnp.full(2, y[0])), repr(y[1]), repr(y @ y))
        print(repr(jnp.einsum("i,i->", y, y)), repr(y.at[0].set(2)), repr(y.at[0].add(2.)))
        print(repr(jax.grad(lambda a: (a ** 2).sum())(y)), repr(jax.jit(lambda a: a * 2)(y)))
        print(jax.make_jaxpr(jax.grad(lambda a: (a ** 2).sum()))(y))
        print(jax.make_jaxpr(jnp.zeros_like)(y))
        print(jax.make_jaxpr(jnp.sin)(y))
    """,
}


@pytest.mark.parametrize("name", list(RECORDS))
def test_prints_as_jax(name):
    assert printed(RECORDS[name], jaxkit) == printed(RECORDS[name], jax)
