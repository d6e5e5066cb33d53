"""``jnp.linalg`` and ``jax.scipy.linalg`` stage the jaxprs JAX 0.10.2 stages, and give its
values: every case of ``bench/linalg_jaxpr_sweep.py`` (JAX's text is made by the oracle at
test time), and the general mechanisms those programs rest on (identity broadcasts forwarded
by staging but transposed as ``reduce_sum`` over no axes, ``custom_linear_solve``'s vecmat,
read-only ``while`` carries made consts, batched gathers' ``np.int64`` dimensions, patches
convolutions). Values and derivatives of the functions rewritten to stage as JAX are compared
with the oracle."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import jaxkit
from jaxkit import lax as klax

jax = pytest.importorskip("jax")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import linalg_jaxpr_sweep as sweep  # noqa: E402
from jnp_jaxpr_sweep import _normalise as _canonical  # noqa: E402

# JAX's polar runs QDWH (``lax.linalg.qdwh``: scans and a while loop of QR and Cholesky
# steps); jaxkit's is a Newton iteration with the same results: its program differs.
KNOWN_DIFFERENT = {"sp.polar"}


def _sweep_cases():
    names = []
    for prefix, (jax_ns, our_ns) in sweep.NAMESPACES.items():
        names += sorted(f"{prefix}.{n}" for n in dir(jax_ns) if not n.startswith("_")
                        and callable(getattr(jax_ns, n)) and not isinstance(getattr(jax_ns, n),
                                                                           type)
                        and callable(getattr(our_ns, n, None)))
    for qualname in names:
        jax_ns, our_ns = sweep.NAMESPACES[qualname.split(".", 1)[0]]
        for label, ops, call in sweep._cases(qualname, jax_ns):
            yield pytest.param(qualname, jax_ns, our_ns, ops, call,
                               id=f"{qualname}[{label}]" if label else qualname)


@pytest.mark.parametrize("qualname,jax_ns,our_ns,ops,call", list(_sweep_cases()))
def test_sweep_case_stages_as_jax(qualname, jax_ns, our_ns, ops, call):
    theirs = _canonical(sweep._text(jax, jax_ns, ops, call))
    ours = _canonical(sweep._text(jaxkit, our_ns, ops, call))
    if qualname in KNOWN_DIFFERENT:
        assert ours != theirs  # when this starts to pass, take it out of KNOWN_DIFFERENT
    else:
        assert ours == theirs


def _text(J, fun, *args):
    return str(J.make_jaxpr(fun)(*args))


A = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32)
V = np.array([1.0, 2.0, 3.0], np.float32)
X = np.arange(12.0, dtype=np.float32).reshape(3, 4)

# (name, make(library) -> function, operands): mechanisms, compared as printed jaxprs.
MECHANISMS = [
    # identity broadcast_in_dim: forwarded when staged, a reduce_sum over () when transposed
    ("identity_broadcast", lambda J: lambda x: J.lax.broadcast_in_dim(x, (3,), (0,)), (V,)),
    ("grad_through_broadcast", lambda J: J.grad(
        lambda x: (J.lax.broadcast_in_dim(x, (2, 3), (1,)) ** 2).sum()), (V,)),
    ("grad_unit_broadcast", lambda J: J.grad(
        lambda x: (J.lax.broadcast_in_dim(x, (4, 3), (0, 1)) ** 2).sum()), (V[None, :],)),
    ("custom_linear_solve_vecmat", lambda J: lambda a, b: J.lax.custom_linear_solve(
        lambda x: J.lax.broadcast_in_dim(a @ x, (3,), (0,)), b,
        lambda mv, x: x / 2.0, lambda vm, x: x / 3.0), (A, V)),
    # a while loop whose body returns a carry unchanged (and cond does not read it)
    ("while_read_only_carry", lambda J: lambda x, n: J.lax.while_loop(
        lambda c: c[0] < n, lambda c: (c[0] + 1, c[1], c[2] * c[1]), (0, x, x)), (V, 3)),
    ("fori_dynamic_bounds", lambda J: lambda x, n: J.lax.fori_loop(
        0, n, lambda i, c: c.at[i].set(c[i] * 2), x), (V, 2)),
    # gathers batched with a batched operand: dimensions from NumPy arithmetic
    ("vmap_gather_operand", lambda J: J.vmap(lambda x: x[np.array([2, 0])]), (X,)),
    ("vmap_gather_both", lambda J: J.vmap(lambda x, i: x[i]), (X, np.array([1, 2, 0]))),
    ("vmap_gather_indices", lambda J: J.vmap(lambda i: J.numpy.asarray(X)[i]),
     (np.array([1, 2, 0]),)),
    # scalar indices: weak ones normalised and cast as JAX's
    ("at_set_traced_scalars", lambda J: lambda u, i, j: u.at[i, j].set(1.0), (X, 1, 2)),
    ("dynamic_slice_row", lambda J: lambda u, i: u[i, 1:3], (X, 1)),
    ("dynamic_slice_column", lambda J: lambda u, i: u[:, i], (X, 1)),
    ("patches", lambda J: lambda x: J.lax.conv_general_dilated_patches(
        x, (2, 3), (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")),
     (np.ones((1, 4, 5, 2), np.float32),)),
    ("abs_jvp", lambda J: J.grad(lambda x: J.numpy.abs(x).sum()), (V,)),
    ("max_jvp", lambda J: J.grad(lambda x: x.max()), (X,)),
]


@pytest.mark.parametrize("name,make,ops", MECHANISMS, ids=[m[0] for m in MECHANISMS])
def test_mechanism_stages_as_jax(name, make, ops):
    assert _canonical(_text(jaxkit, make(jaxkit), *ops)) == _canonical(_text(jax, make(jax),
                                                                             *ops))


def test_while_read_only_carry_values():
    def f(J):
        return lambda x, n: J.lax.while_loop(lambda c: c[0] < n,
                                             lambda c: (c[0] + 1, c[1], c[2] * c[1]), (0, x, x))
    for ours, theirs in zip(f(jaxkit)(V, 3), f(jax)(V, 3)):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    # forward mode through the hoisted carry
    ours = jaxkit.jvp(lambda x: f(jaxkit)(x, 3)[2], (V,), (V,))
    theirs = jax.jvp(lambda x: f(jax)(x, 3)[2], (V,), (V,))
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-6)
    batched = jaxkit.vmap(lambda x: f(jaxkit)(x, 3)[2])(np.stack([V, 2 * V]))
    np.testing.assert_allclose(np.asarray(batched), np.stack([V ** 4, (2 * V) ** 4]), rtol=1e-6)


RS = np.random.RandomState(0)
M43 = RS.randn(4, 3).astype(np.float32)
M34 = RS.randn(3, 4).astype(np.float32)
SQ = RS.randn(4, 4).astype(np.float32)
D5, E4 = RS.randn(5).astype(np.float32), RS.randn(4).astype(np.float32)

# (name, make(library) -> function, operands, derivative checked): values against the oracle.
VALUES = [
    ("pinv", lambda J: J.numpy.linalg.pinv, (M43,), True),
    ("pinv_rtol", lambda J: lambda a: J.numpy.linalg.pinv(a, rtol=0.3), (M34,), True),
    ("pinv_hermitian", lambda J: lambda a: J.numpy.linalg.pinv(a + a.T, hermitian=True),
     (SQ,), True),
    ("lstsq", lambda J: lambda a, b: J.numpy.linalg.lstsq(a, b), (M43, M43[:, 0]), False),
    ("lstsq_rcond", lambda J: lambda a, b: J.numpy.linalg.lstsq(a, b, rcond=0.5),
     (M34, M34[:, :2]), False),
    ("cond", lambda J: J.numpy.linalg.cond, (SQ,), False),
    ("cond_fro", lambda J: lambda a: J.numpy.linalg.cond(a, "fro"), (SQ,), False),
    ("solve_pos", lambda J: lambda a, b: J.scipy.linalg.solve(a @ a.T + 4 * np.eye(4,
                                                                                 dtype=a.dtype),
                                                              b, assume_a="pos"),
     (SQ, SQ[:, :2]), True),
    ("solve_sym", lambda J: lambda a, b: J.scipy.linalg.solve(a, b, assume_a="sym"),
     (SQ, SQ[0]), True),
    ("expm", lambda J: J.scipy.linalg.expm, (SQ,), True),
    ("expm_frechet", lambda J: J.scipy.linalg.expm_frechet, (SQ * 0.5, SQ.T), False),
    ("sqrtm", lambda J: J.scipy.linalg.sqrtm, (SQ,), False),
    ("funm", lambda J: lambda a: J.scipy.linalg.funm(a, lambda x: x * x, disp=False), (SQ,),
     False),
    ("rsf2csf", lambda J: lambda a: J.scipy.linalg.rsf2csf(*J.scipy.linalg.schur(a)), (SQ,),
     False),
    ("solve_sylvester", lambda J: J.scipy.linalg.solve_sylvester, (SQ, SQ.T + 5 * np.eye(
        4, dtype=np.float32), SQ), False),
    ("solve_sylvester_eigen", lambda J: lambda a, b, c: J.scipy.linalg.solve_sylvester(
        a, b, c, method="eigen"), (SQ, SQ.T + 5 * np.eye(4, dtype=np.float32), SQ), False),
    ("eigh_tridiagonal", lambda J: J.scipy.linalg.eigh_tridiagonal, (D5, E4), False),
    ("eigh_tridiagonal_select", lambda J: lambda d, e: J.scipy.linalg.eigh_tridiagonal(
        d, e, eigvals_only=True, select="i", select_range=(1, 3)), (D5, E4), False),
    ("toeplitz", lambda J: J.scipy.linalg.toeplitz, (D5, E4), True),
    ("hankel", lambda J: J.scipy.linalg.hankel, (D5, E4), True),
    ("circulant", lambda J: J.scipy.linalg.circulant, (D5,), True),
    ("fiedler_companion", lambda J: J.scipy.linalg.fiedler_companion, (D5,), True),
    ("helmert", lambda J: lambda: J.scipy.linalg.helmert(5, full=True), (), False),
    ("qr_multiply", lambda J: lambda a, c: J.scipy.linalg.qr_multiply(a, c, mode="left"),
     (M43, M43[:3]), False),
    ("lu", lambda J: J.scipy.linalg.lu, (SQ,), False),
    ("schur", lambda J: J.scipy.linalg.schur, (SQ,), False),
]


@pytest.mark.parametrize("name,make,ops,deriv", VALUES, ids=[v[0] for v in VALUES])
def test_values_match_jax(name, make, ops, deriv):
    ours, theirs = make(jaxkit)(*ops), make(jax)(*ops)
    for o, t in zip(jax.tree_util.tree_leaves(theirs), jaxkit.tree_util.tree_leaves(ours)):
        assert np.asarray(o).dtype == np.asarray(t).dtype
        np.testing.assert_allclose(np.asarray(t), np.asarray(o), rtol=2e-5, atol=2e-5)
    if deriv:
        def loss(J):
            return lambda *a: sum(J.numpy.sum(J.numpy.real(x) ** 2)
                                  for x in J.tree_util.tree_leaves(make(J)(*a)))
        g_ours = jaxkit.grad(loss(jaxkit), argnums=tuple(range(len(ops))))(*ops)
        g_theirs = jax.grad(loss(jax), argnums=tuple(range(len(ops))))(*ops)
        for o, t in zip(g_ours, g_theirs):
            np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=2e-4, atol=2e-4)


def test_errors_as_jax():
    for args, kwargs in [((SQ, SQ[0]), {"assume_a": "x"})]:
        with pytest.raises(ValueError, match=r"Expected assume_a to be one of \['gen', 'sym'"):
            jaxkit.scipy.linalg.solve(*args, **kwargs)
    with pytest.raises(ValueError, match="only one of rtol and rcond"):
        jaxkit.numpy.linalg.pinv(SQ, rtol=0.1, rcond=0.1)
    with pytest.raises(ValueError, match="Input 'T' must be square."):
        jaxkit.scipy.linalg.rsf2csf(V, SQ)
    with pytest.raises(ValueError, match="Unrecognized method x"):
        jaxkit.scipy.linalg.solve_sylvester(SQ, SQ, SQ, method="x")
    assert klax is jaxkit.lax
