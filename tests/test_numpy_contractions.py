"""Products and contractions (dot, matmul, einsum, tensordot, ...) against the JAX oracle
and NumPy, eagerly and under jit."""
from __future__ import annotations

import numpy as np
import pytest
from _numpy_checks import W, check, rng_array

import jaxkit
import jaxkit.numpy as jnp

F32 = rng_array((3, 4), np.float32)
F3 = rng_array((2, 3, 4), np.float32, seed=1)
M43 = rng_array((4, 3), np.float32, seed=2)
V4 = rng_array((4,), np.float32, seed=3)
I32 = rng_array((3, 4), np.int32, seed=4)
I8 = rng_array((3, 4), np.int8, seed=5)
C64 = rng_array((3, 4), np.complex64, seed=6)
B4 = rng_array((2, 1, 3, 4), np.float32, seed=7)
B5 = rng_array((5, 4, 2), np.float32, seed=8)

PRODUCTS = [
    ("dot", (F32, V4), {}), ("dot", (F32, M43), {}), ("dot", (V4, V4), {}), ("dot", (F32, 2.0), {}),
    ("dot", (I32, V4), {}), ("dot", (F3, M43), {}), ("dot", (I8, I8.T.copy()), {}),
    ("dot", (F32, M43), {"preferred_element_type": np.float32}),
    ("matmul", (F3, M43), {}), ("matmul", (V4, M43), {}), ("matmul", (F32, V4), {}),
    ("matmul", (B4, B5), {}), ("matmul", (V4, V4), {}), ("matmul", (C64, C64.T.copy()), {}),
    ("dot", (W(2.0), W(3.0)), {}), ("dot", (W(2.0), V4), {}),
    ("vdot", (F32, F32), {}), ("vdot", (C64, C64), {}), ("inner", (F32, F32), {}),
    ("inner", (V4, 3.0), {}), ("outer", (V4, V4), {}), ("outer", (F32, V4), {}),
    ("tensordot", (F3, M43, 1), {}), ("tensordot", (F3, F32, ((1, 2), (0, 1))), {}),
    ("tensordot", (F3, F3, 3), {}), ("tensordot", (V4, V4, 0), {}),
    ("kron", (F32, M43), {}), ("kron", (V4, F32), {}),
    ("cross", (rng_array((5, 3), np.float32), rng_array((5, 3), np.float32, 9)), {}),
    ("cross", (rng_array((5, 2), np.float32), rng_array((5, 3), np.float32, 9)), {}),
    ("cross", (rng_array((3, 5), np.float32), rng_array((5, 3), np.float32, 9)),
     {"axisa": 0, "axisc": 0}),
    ("vecdot", (F32, F32), {}), ("vecdot", (C64, C64), {}), ("vecdot", (F32, F32), {"axis": 0}),
    ("matvec", (F32, V4), {}), ("vecmat", (V4[:3], F32), {}),
]

EINSUM = [
    ("ij,jk->ik", (F32, M43)), ("ij->ji", (F32,)), ("ii->i", (F32[:3, :3],)),
    ("ii", (F32[:3, :3],)), ("ij,ij->", (F32, F32)), ("bij,jk->bik", (F3, M43)),
    ("...j,j->...", (F3, V4)), ("i,j->ij", (V4, V4)),
    ("ijk,ikl->ijl", (F3, rng_array((2, 4, 5), np.float32))),
    ("ij,jk,kl->il", (F32, M43, rng_array((3, 2), np.float32))), ("ij", (F32,)), ("ji", (F32,)),
    ("ij,i", (F32, V4[:3])), ("i,i", (V4, V4)), ("ijk->", (F3,)), ("ijk->kj", (F3,)),
    ("bij,bjk->bik", (F3, rng_array((2, 4, 2), np.float32))), ("...ij->...ji", (F3,)),
    ("ij,kj->ik", (F32, F32)), ("iij->j", (rng_array((3, 3, 2), np.float32),)),
    ("ij,j->i", (I32, I32[0])), ("i,ij->j", (V4[:3], C64)),
]


@pytest.mark.parametrize("name,args,kw", PRODUCTS,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(PRODUCTS)])
def test_products(name, args, kw):
    check(name, *args, kw=kw, rtol=2e-5, atol=2e-5,
          jit=all(isinstance(a, np.ndarray) for a in args))


@pytest.mark.parametrize("subscripts,ops", EINSUM, ids=[e[0] for e in EINSUM])
def test_einsum(subscripts, ops):
    got = check("einsum", subscripts, *ops, rtol=2e-5, atol=2e-5)
    want = np.einsum(subscripts, *ops)
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-5)
    out = jaxkit.jit(lambda *a: jnp.einsum(subscripts, *a))(*ops)
    np.testing.assert_allclose(np.asarray(out), want, rtol=2e-5, atol=2e-5)


def test_einsum_is_dot_general():
    jaxpr = jaxkit.make_jaxpr(lambda a, b: jnp.einsum("ij,jk->ik", a, b))(F32, M43)
    assert "dot_general" in str(jaxpr)
    out = jnp.einsum("ij,jk->ik", F32, M43, optimize="greedy", precision="highest")
    np.testing.assert_allclose(np.asarray(out), F32 @ M43, rtol=2e-5)


def test_matmul_operator_and_numpy():
    np.testing.assert_allclose(np.asarray(jnp.asarray(F3) @ M43), F3 @ M43, rtol=2e-5)
    np.testing.assert_allclose(np.asarray(M43.T @ jnp.asarray(V4)), M43.T @ V4, rtol=2e-5)
    np.testing.assert_allclose(np.asarray(jnp.matmul(B4, B5)), np.matmul(B4, B5), rtol=2e-5)


def test_contraction_errors():
    with pytest.raises(TypeError, match="dot_general requires contracting dimensions to have "
                                        "the same shape"):
        jnp.ones(3) @ jnp.ones(4)
    with pytest.raises(ValueError, match="matmul input operand 0 must have ndim at least 1"):
        jnp.matmul(1.0, jnp.ones(3))
    with pytest.raises(ValueError, match="Incompatible shapes for matmul arguments"):
        jnp.matmul(jnp.ones((2, 3, 4)), jnp.ones((5, 4, 2)))
    with pytest.raises(TypeError, match="Number of tensordot axes"):
        jnp.tensordot(jnp.ones(3), jnp.ones(3), 2)
    with pytest.raises(ValueError, match="Dimension must be either 2 or 3 for cross product"):
        jnp.cross(jnp.ones(4), jnp.ones(4))


def test_einsum_interleaved_form_matches_numpy():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 5))
    got = jnp.einsum(x, [0, 1, 2], y, [2, 3], [1, 0, 3])
    np.testing.assert_allclose(np.asarray(got), np.einsum(x, [0, 1, 2], y, [2, 3], [1, 0, 3]),
                               rtol=1e-5, atol=1e-5)
    got = jnp.einsum(x, [Ellipsis, 2], y, [2, 3])
    np.testing.assert_allclose(np.asarray(got), np.einsum(x, [Ellipsis, 2], y, [2, 3]),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="sublist entries"):
        jnp.einsum(x, [0, 1, "a"])
