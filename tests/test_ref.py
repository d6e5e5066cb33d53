"""``jax.ref`` (mutable array references) against the JAX oracle: one record per program, each
run eagerly, under ``jit``, ``grad`` and ``vmap`` where JAX supports it, with the refs' final
values, the results and the printed jaxprs compared; JAX's errors where it refuses."""
from __future__ import annotations

import numpy as np
import pytest

import jaxkit

jax = pytest.importorskip("jax")


def _inc_closed(J, jnp):
    x_ref = J.new_ref(jnp.zeros(3))

    def f():
        x_ref[1] += 1.0

    return x_ref, f, ()


def _sin_inplace(J, jnp):
    x_ref = J.new_ref(jnp.arange(3.0))

    def f(r):
        r[...] = jnp.sin(r[...])

    return x_ref, f, (x_ref,)


def _indexing(J, jnp):
    x_ref = J.new_ref(jnp.arange(12.0).reshape(3, 4))

    def f():
        row = x_ref[0]
        x_ref[1] = row
        x_ref[2, 3] = x_ref[1, 2]
        x_ref[0, :3] = x_ref[:, 1]
        vals = x_ref[jnp.array([0, 0, 1]), jnp.array([1, 2, 3])]
        x_ref[jnp.array([1, 2, 1]), jnp.array([0, 0, 1])] = vals
        x_ref[1:3, ::2] = jnp.ones((2, 2))
        return x_ref[-1]

    return x_ref, f, ()


def _ref_api(J, jnp):
    x_ref = J.new_ref(jnp.arange(4.0))

    def f(r, v):
        old = J.ref.swap(r, 2, v)
        J.ref.addupdate(r, (), jnp.ones(4))
        J.ref.set(r, slice(0, 2), jnp.zeros(2))
        return old, J.ref.get(r, ())

    return x_ref, f, (x_ref, jnp.float32(7.0))


def _int_ref_scan(J, jnp):
    r = J.new_ref(0)

    def f(xs):
        def body(c, x):
            r[...] += x
            return c, x * 2

        return J.lax.scan(body, None, xs)[1]

    return r, f, (jnp.arange(10),)


def _while_closed(J, jnp):
    r = J.new_ref(0)

    def f():
        def body(i):
            r[...] += i
            return i + 1
        return J.lax.while_loop(lambda i: i < 5, body, 0)

    return r, f, ()


def _cond_closed(J, jnp):
    s = J.new_ref(jnp.zeros(2))

    def f(p, x):
        def t(x):
            s[0] = x
            return x * 2

        def e(x):
            s[1] = x
            return x * 3
        return J.lax.cond(p, t, e, x), J.lax.cond(jnp.logical_not(p), t, e, x + 1)

    return s, f, (True, 1.0)


# (name, make(J, jnp) -> (ref, function, args))
RECORDS = [("inc_closed", _inc_closed), ("sin_inplace", _sin_inplace),
           ("indexing", _indexing), ("ref_api", _ref_api), ("int_ref_scan", _int_ref_scan),
           ("while_closed", _while_closed), ("cond_closed", _cond_closed)]


def _run(make, lib, use_jit: bool, calls: int = 2):
    J, jnp = lib
    ref, f, args = make(J, jnp)
    fn = J.jit(f) if use_jit else f
    outs = [fn(*args) for _ in range(calls)]
    return repr(ref), [jaxkit.tree_util.tree_map(np.asarray, o) for o in outs]


LIBS = {"jax": (jax, jax.numpy), "jaxkit": (jaxkit, jaxkit.numpy)}


@pytest.mark.parametrize("use_jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name,make", RECORDS, ids=[r[0] for r in RECORDS])
def test_ref_values_match_jax(name, make, use_jit):
    want_repr, want = _run(make, LIBS["jax"], use_jit)
    got_repr, got = _run(make, LIBS["jaxkit"], use_jit)
    assert got_repr == want_repr
    for g, w in zip(jaxkit.tree_util.tree_leaves(got), jaxkit.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def _pure_internal(J, jnp):
    def f(x):
        r = J.new_ref(x)
        r[...] = jnp.sin(r[...]) * r[...]
        r[...] += x
        return J.freeze(r)
    return f


def _pure_written_later(J, jnp):
    def f(x):
        r = J.new_ref(jnp.zeros(3))
        r[1] = jnp.sin(x)
        r[...] = r[...] * x
        return r[...].sum()
    return f


def _plumbing_stop_gradient(J, jnp):
    def f(x):
        plumb = J.new_ref(0.0)
        y = x * x
        plumb[...] += J.lax.stop_gradient(y)
        return y + plumb[...]
    return f


def _pure_while(J, jnp):
    def f(x):
        q = J.new_ref(x)

        def body(i):
            q[...] = q[...] * x
            return i + 1
        J.lax.while_loop(lambda i: i < 3, body, 0)
        return q[...]
    return f


GRAD_RECORDS = [("internal", _pure_internal), ("written_later", _pure_written_later),
                ("plumbing", _plumbing_stop_gradient)]
VALUE_RECORDS = GRAD_RECORDS + [("while", _pure_while)]


@pytest.mark.parametrize("wrap", ["plain", "jit"])
@pytest.mark.parametrize("name,make", VALUE_RECORDS, ids=[r[0] for r in VALUE_RECORDS])
def test_pure_functions_using_refs_match_jax(name, make, wrap):
    def value_of(J, jnp):
        f = make(J, jnp)
        return (J.jit(f) if wrap == "jit" else f)(1.3)

    np.testing.assert_allclose(value_of(jaxkit, jaxkit.numpy), value_of(jax, jax.numpy),
                               rtol=1e-6)


@pytest.mark.parametrize("wrap", ["plain", "jit"])
@pytest.mark.parametrize("name,make", GRAD_RECORDS, ids=[r[0] for r in GRAD_RECORDS])
def test_grad_of_pure_functions_using_refs(name, make, wrap):
    def grad_of(J, jnp):
        f = make(J, jnp)
        return J.grad(J.jit(f) if wrap == "jit" else f)(1.3)

    np.testing.assert_allclose(grad_of(jaxkit, jaxkit.numpy), grad_of(jax, jax.numpy),
                               rtol=1e-6)


def test_grad_refuses_differentiated_writes_into_plumbing_refs():
    ref = jaxkit.new_ref(0.0)

    def err6(x, r):
        r[...] += x + x
        return x

    with pytest.raises(Exception, match="non-differentiated array reference of type "
                                        r"Ref\{float32\[\]\}"):
        jaxkit.grad(err6)(1.0, ref)


def test_vmap_over_ref_arguments_matches_jax():
    def run(J, jnp):
        def dist(x, y, out_ref):
            out_ref[...] = jnp.sum((x - y) ** 2)

        vecs = jnp.arange(12.0).reshape(3, 4)
        out = J.new_ref(jnp.zeros((3, 3)))
        J.vmap(J.vmap(dist, (0, None, 0)), (None, 0, 0))(vecs, vecs, out)
        return repr(out)

    assert run(jaxkit, jaxkit.numpy) == run(jax, jax.numpy)


def test_vmap_of_pure_function_with_internal_ref_matches_jax():
    def run(J, jnp):
        def f(x):
            r = J.new_ref(x)
            r[...] = r[...] * 2
            return r[...]
        return np.asarray(J.vmap(f)(jnp.arange(3.0))), str(J.make_jaxpr(J.vmap(f))(
            jnp.arange(3.0)))

    (got, got_pp), (want, want_pp) = run(jaxkit, jaxkit.numpy), run(jax, jax.numpy)
    np.testing.assert_array_equal(got, want)
    assert got_pp == want_pp


def _errors(J, jnp):
    x_ref = J.new_ref(0.0)
    msgs = []

    def err1(r):
        r[...] = 5.0
        return r

    def err2(a, b):
        pass

    def err3(y_ref):
        y_ref[...] = x_ref[...]

    def err5(x):
        x_ref[...] = x

    for call in [lambda: J.jit(err1)(x_ref), lambda: J.jit(err2)(x_ref, x_ref),
                 lambda: J.jit(err3)(x_ref), lambda: J.vmap(err5)(jnp.arange(3.0))]:
        with pytest.raises(Exception) as info:
            call()
        msgs.append((type(info.value).__name__, str(info.value).split(" at ")[0]))
    return msgs


def test_errors_match_jax():
    assert _errors(jaxkit, jaxkit.numpy) == _errors(jax, jax.numpy)


def test_math_on_a_ref_is_a_type_error():
    with pytest.raises(TypeError, match="sin requires ndarray or scalar arguments"):
        jaxkit.numpy.sin(jaxkit.new_ref(1.0))


def _pp_closed(J, jnp):
    x_ref = J.new_ref(jnp.zeros(3))

    def f(x):
        x_ref[1] += x
        x_ref[...] = x_ref[...] * 2
        return x_ref[0]
    return f, (1.0,)


def _pp_new_freeze(J, jnp):
    def g(x):
        r = J.new_ref(x)
        r[...] = jnp.sin(r[...])
        return J.freeze(r)
    return g, (1.0,)


def _pp_indexers(J, jnp):
    x_ref = J.new_ref(jnp.arange(12.0).reshape(3, 4))

    def f(i, a):
        x_ref[0, :3] = x_ref[:, 1]
        w = x_ref[i]
        u = x_ref[jnp.array([0, 0, 1]), jnp.array([1, 2, 3])]
        x_ref[1:3, ::2] = jnp.zeros((2, 2))
        x_ref[a] = jnp.ones((2, 4))
        return w, u, x_ref[2]
    return f, (1, np.array([0, 2], np.int32))


def _pp_ref_arg(J, jnp):
    def h(r, x):
        r[...] += x
    return h, (J.new_ref(jnp.zeros(3)), jnp.ones(3))


def _pp_jit_closed(J, jnp):
    f, args = _pp_closed(J, jnp)
    return J.jit(f), args


def _pp_jit_ref_arg(J, jnp):
    h, args = _pp_ref_arg(J, jnp)
    return J.jit(lambda r, x: (h(r, x), jnp.sin(x))[1]), args


def _pp_jit_internal(J, jnp):
    def h(x):
        r = J.new_ref(x)
        r[...] = r[...] + 1
        r.addupdate(x)
        r[0] = 2.0
        return J.freeze(r)
    return J.jit(h), (jnp.ones(3),)


PP_RECORDS = [("closed", _pp_closed), ("new_freeze", _pp_new_freeze),
              ("indexers", _pp_indexers), ("ref_arg", _pp_ref_arg),
              ("jit_closed", _pp_jit_closed), ("jit_ref_arg", _pp_jit_ref_arg),
              ("jit_internal", _pp_jit_internal)]


@pytest.mark.parametrize("name,make", PP_RECORDS, ids=[r[0] for r in PP_RECORDS])
def test_jaxpr_printing_matches_jax(name, make):
    def text(J, jnp):
        f, args = make(J, jnp)
        return str(J.make_jaxpr(f)(*args))

    assert text(jaxkit, jaxkit.numpy) == text(jax, jax.numpy)


def test_ref_types_and_names():
    r = jaxkit.new_ref(jaxkit.numpy.zeros((2, 3), "int32"))
    assert isinstance(r, jaxkit.Ref) and isinstance(r.aval, jaxkit.ref.AbstractRef)
    assert (r.shape, r.dtype, r.ndim, len(r)) == ((2, 3), np.dtype("int32"), 2, 2)
    assert str(r.aval) == str(jax.new_ref(jax.numpy.zeros((2, 3), "int32")).aval)
    assert sorted(jaxkit.ref.__all__) == sorted(jax.ref.__all__)
    e = jaxkit.empty_ref(jaxkit.ShapeDtypeStruct((2,), np.float32))
    assert e.shape == (2,) and e.dtype == np.float32
    with pytest.raises(ValueError, match="Invalid shape for `swap`"):
        r[0] = jaxkit.numpy.ones(2, "int32")


def test_unsafe_buffer_pointer_is_the_current_buffer_address():
    r = jaxkit.new_ref(jaxkit.numpy.arange(3.0))
    assert r.unsafe_buffer_pointer() == r._buf._buf.unsafe_buffer_pointer() != 0
