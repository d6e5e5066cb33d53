"""Jaxprs print as JAX 0.10.2 prints them: the same text for the same program, one record per
construct whose printing has rules of its own (nested ``jit`` bodies named like their
equation, ``cond``/``scan`` bodies continuing the names, ``custom_jvp``/``custom_vjp`` calls
with the name first)."""
from __future__ import annotations

import numpy as np
import pytest

import jaxkit
import jaxkit.scipy.special  # noqa: F401

jax = pytest.importorskip("jax")
pytest.importorskip("jax.scipy.special")

X = np.linspace(-2.0, 2.0, 8, dtype=np.float32)


def _custom_vjp(J):
    @J.custom_vjp
    def f(x):
        return x * 2

    f.defvjp(lambda x: (f(x), None), lambda r, g: (g * 2,))
    return f


def _custom_jvp(J):
    @J.custom_jvp
    def g(x, y):
        return x * y

    g.defjvp(lambda p, t: (g(*p), t[0] * p[1] + t[1] * p[0]))
    return lambda x: g(x, x)


# (name, make(J) -> function of X), J being jax or jaxkit
RECORDS = [
    ("jit_swapped_operands", lambda J: lambda x: J.jit(lambda a, b: (b, a * 2))(x + 1, x)),
    ("jit_nested", lambda J: lambda x: J.jit(lambda a: J.jit(lambda b: b * a)(a + 1))(x)),
    ("jit_in_jit_twice", lambda J: lambda x: J.jit(lambda a: a * 2)(J.jit(lambda b: b + 1)(x))),
    ("cond", lambda J: lambda x: J.lax.cond(x[0] > 0, lambda a, b: a * b, lambda a, b: a + b,
                                            x + 1, x)),
    ("scan", lambda J: lambda x: J.lax.scan(lambda c, a: (c + a, c * a), x[0], x)),
    ("custom_vjp", lambda J: _custom_vjp(J)),
    ("custom_jvp", lambda J: _custom_jvp(J)),
    ("relu", lambda J: J.nn.relu),
    ("selu_outer", lambda J: lambda x: J.jit(lambda y: y * 3)(x) + 1),
]


@pytest.mark.parametrize("make", [r[1] for r in RECORDS], ids=[r[0] for r in RECORDS])
def test_jaxpr_text_matches_jax(make):
    assert str(jaxkit.make_jaxpr(make(jaxkit))(X)) == str(jax.make_jaxpr(make(jax))(X))


M = np.arange(12, dtype=np.float32).reshape(3, 4) / 7


def _fori_weak_bound(J):
    # jaxpr.md cell 6: a Python-int lower bound with a traced upper bound (a while loop
    # whose counter goes in weak and comes out strong: no conversion in the body).
    def f(arg, n):
        ones = J.numpy.ones(arg.shape)
        return J.lax.fori_loop(0, n, lambda i, c: c + ones * 3. + arg, arg + ones)
    return f


def _scan_weak_carry(J):
    # jaxpr.md cell 7: a weak (Python float) carry updated by strong values of its dtype.
    def f(arr, extra):
        ones = J.numpy.ones(arr.shape)

        def body(carry, aelems):
            ae1, ae2 = aelems
            return carry + ae1 * ae2 + extra, carry
        return J.lax.scan(body, 0., (arr, ones))
    return f


def _while_dtype_change(J):
    # A weak int carry updated by float values: converted (to a literal) and retraced.
    return lambda x: J.lax.scan(lambda c, _: (c + x, None), 0, length=3)[0]


# (name, make(J) -> function, arguments): jnp/nn functions whose bodies JAX prints in its own
# order and primitives (nested ``jit`` equations where JAX's are plain jits), broadcasting
# through lax's implicit size-1 broadcasting, and loops with weakly typed carries.
RECORDS_ARGS = [
    ("sub_size1_axis", lambda J: lambda a: a - a[:, :1], (M,)),
    ("sub_rank_promotion", lambda J: lambda a: a - a[0], (M,)),
    ("broadcast_to", lambda J: lambda a: J.numpy.broadcast_to(a[:, :1], (2, 3, 4)), (M,)),
    ("where_broadcast", lambda J: lambda a: J.numpy.where(a > 0, a, a[:, :1]), (M,)),
    ("var", lambda J: lambda a: J.numpy.var(a), (M,)),
    ("var_axis_ddof", lambda J: lambda a: J.numpy.var(a, axis=1, ddof=1), (M,)),
    ("var_keepdims", lambda J: lambda a: J.numpy.var(a, axis=0, keepdims=True), (M,)),
    ("std", lambda J: lambda a: J.numpy.std(a), (M,)),
    ("std_axis", lambda J: lambda a: J.numpy.std(a, axis=0), (M,)),
    ("tril", lambda J: J.numpy.tril, (M,)),
    ("tril_k", lambda J: lambda a: J.numpy.tril(a, k=-1), (M,)),
    ("triu", lambda J: J.numpy.triu, (M,)),
    ("triu_batched", lambda J: lambda a: J.numpy.triu(a.reshape(3, 2, 2), 1), (M,)),
    ("tri", lambda J: lambda a: J.numpy.tri(3, 4, -1), (M,)),
    ("eye_bool", lambda J: lambda a: J.numpy.eye(3, k=1, dtype=bool), (M,)),
    ("diagonal", lambda J: J.numpy.diagonal, (M,)),
    ("diagonal_offset", lambda J: lambda a: J.numpy.diagonal(a, offset=1), (M,)),
    ("diag_of_matrix", lambda J: J.numpy.diag, (M,)),
    ("diag_of_vector", lambda J: lambda a: J.numpy.diag(a[0], 1), (M,)),
    ("diag_of_vector_below", lambda J: lambda a: J.numpy.diag(a[0], -2), (M,)),
    ("softmax", lambda J: J.nn.softmax, (M,)),
    ("softmax_axis0", lambda J: lambda a: J.nn.softmax(a, axis=0), (M,)),
    ("log_softmax", lambda J: J.nn.log_softmax, (M,)),
    ("logsumexp", lambda J: J.scipy.special.logsumexp, (M,)),
    ("logsumexp_axis", lambda J: lambda a: J.scipy.special.logsumexp(a, axis=1), (M,)),
    ("nn_logsumexp", lambda J: J.nn.logsumexp, (M,)),
    ("fori_loop_weak_lower", _fori_weak_bound, (np.ones(16), 5)),
    ("scan_weak_carry", _scan_weak_carry, (np.ones(16), 5.)),
    ("scan_carry_dtype_change", _while_dtype_change, (np.float32(1),)),
    # lax functions JAX wraps in jit (a weak index converted inside), their transposes
    # (``_rfft_transpose``), and NumPy-integer parameters from JAX's batching/transpose rules.
    ("lax_fft", lambda J: lambda a: J.lax.fft(a, "fft", (4,)), (M,)),
    ("lax_fft_grad_rfft", lambda J: J.grad(lambda a: J.lax.fft(a, "rfft", (4,)).real.sum()),
     (M,)),
    ("lax_fft_grad_irfft", lambda J: J.grad(
        lambda a: J.lax.fft(a, "irfft", (4,)).sum()), (M[:, :3] * (1 + 1j),)),
    ("dynamic_index_weak", lambda J: lambda a, i: J.lax.dynamic_index_in_dim(a, i, 1, False),
     (M, 1)),
    ("dynamic_update_index", lambda J: lambda a, i: J.lax.dynamic_update_index_in_dim(
        a, a[:, :1], i, 1), (M, np.int32(2))),
    ("vmap_sum_numpy_axes", lambda J: J.vmap(J.numpy.sum, in_axes=1), (M,)),
    ("grad_partial_sum", lambda J: J.grad(lambda a: (a.sum(0) ** 2).sum()), (M,)),
    ("numpy_int_params", lambda J: lambda a: J.lax.rev(J.lax.reduce_sum(
        a, (np.int64(1),)), (np.int64(0),)), (M,)),
]


@pytest.mark.parametrize("make,args", [r[1:] for r in RECORDS_ARGS],
                         ids=[r[0] for r in RECORDS_ARGS])
def test_jaxpr_text_matches_jax_with_args(make, args):
    assert str(jaxkit.make_jaxpr(make(jaxkit))(*args)) == str(jax.make_jaxpr(make(jax))(*args))
