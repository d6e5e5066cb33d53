"""jaxkit.scipy.linalg's factorizations and solvers: against SciPy (values, in SciPy's
conventions) and JAX, for real and complex dtypes, under jit and vmap, with gradients."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl

import jaxkit
import jaxkit.scipy.linalg as jsl
from gradcheck import check_grads

jax = pytest.importorskip("jax")
import jax.scipy.linalg as jax_sl  # noqa: E402

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.float32: 2e-4, np.complex64: 2e-4, np.float64: 1e-10, np.complex128: 1e-10}


def _mat(rng, shape, dtype):
    a = rng.normal(size=shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.normal(size=shape)
    return a.astype(dtype)


def _hpd(rng, n, dtype):
    a = _mat(rng, (n, n), dtype)
    return (a @ a.conj().T + n * np.eye(n)).astype(dtype)


def _tri(rng, n, dtype, lower):
    a = _mat(rng, (n, n), dtype) + 3 * np.eye(n)
    return (np.tril(a) if lower else np.triu(a)).astype(dtype)


# (name, make(rng, dtype) -> args, kwargs, how to compare: "values" or a reconstruction check)
RECORDS = [
    ("cho_factor", lambda r, d: (_hpd(r, 4, d),), {"lower": True}, "cho"),
    ("cho_factor", lambda r, d: (_hpd(r, 4, d),), {"lower": False}, "cho"),
    ("cho_solve", lambda r, d: (( np.linalg.cholesky(_hpd(r, 4, d)), True), _mat(r, (4, 2), d)),
     {}, "values"),
    ("lu", lambda r, d: (_mat(r, (4, 4), d),), {}, "values"),
    ("lu", lambda r, d: (_mat(r, (5, 3), d),), {}, "values"),
    ("lu", lambda r, d: (_mat(r, (3, 5), d),), {"permute_l": True}, "values"),
    ("lu_factor", lambda r, d: (_mat(r, (4, 4), d),), {}, "values"),
    ("solve_triangular", lambda r, d: (_tri(r, 4, d, True), _mat(r, (4, 2), d)),
     {"lower": True}, "values"),
    ("solve_triangular", lambda r, d: (_tri(r, 4, d, False), _mat(r, (4,), d)),
     {"trans": "T"}, "values"),
    ("solve_triangular", lambda r, d: (_tri(r, 4, d, False), _mat(r, (4, 3), d)),
     {"trans": 2, "unit_diagonal": True}, "values"),
    ("qr", lambda r, d: (_mat(r, (5, 3), d),), {}, "qr"),
    ("qr", lambda r, d: (_mat(r, (5, 3), d),), {"mode": "economic"}, "qr"),
    ("svd", lambda r, d: (_mat(r, (4, 3), d),), {"compute_uv": False}, "values"),
    ("svd", lambda r, d: (_mat(r, (4, 3), d),), {"full_matrices": False}, "svd"),
    ("eigh", lambda r, d: (_hpd(r, 4, d),), {"eigvals_only": True}, "values"),
    ("eigh", lambda r, d: (_hpd(r, 4, d),), {}, "eigh"),
    ("schur", lambda r, d: (_mat(r, (4, 4), d),), {}, "schur"),
    ("hessenberg", lambda r, d: (_mat(r, (5, 5), d),), {"calc_q": True}, "hessenberg"),
    ("polar", lambda r, d: (_mat(r, (4, 3), d),), {}, "polar"),
    ("polar", lambda r, d: (_mat(r, (3, 3), d),), {"method": "svd", "side": "left"}, "polar"),
]
IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'default'}"
       for n, _, kw, _ in RECORDS]


def _leaves(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _close(got, want, dtype, label):
    for g, w in zip(_leaves(got), _leaves(want)):
        if isinstance(w, (bool, np.bool_)):
            assert g == w, label
            continue
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=TOL[dtype],
                                   atol=TOL[dtype], err_msg=label)


def _check_structure(kind, a, out, kw, dtype):
    """Factorizations unique only up to phases: check what defines them."""
    a = np.asarray(a)
    tol = TOL[dtype] * 10
    H = lambda m: np.conj(np.swapaxes(m, -1, -2))  # noqa: E731
    if kind == "cho":  # SciPy leaves the other triangle as it found it; compare the factor
        c, lower = out
        want, _ = sl.cho_factor(a, **kw)
        mask = np.tril if lower else np.triu
        np.testing.assert_allclose(np.asarray(c), mask(want), atol=tol)
    elif kind == "qr":
        q, r = map(np.asarray, out)
        np.testing.assert_allclose(q @ r, a, atol=tol)
        np.testing.assert_allclose(H(q) @ q, np.eye(q.shape[-1]), atol=tol)
        assert np.allclose(np.tril(r, -1), 0, atol=tol)
        assert q.shape == (sl.qr(a, **kw)[0]).shape
    elif kind == "svd":
        u, s, vh = map(np.asarray, out)
        np.testing.assert_allclose((u * s) @ vh, a, atol=tol)
        np.testing.assert_allclose(s, sl.svd(a, compute_uv=False), atol=tol)
    elif kind == "eigh":
        w, v = map(np.asarray, out)
        np.testing.assert_allclose(a @ v, v * w, atol=tol * 10)
        np.testing.assert_allclose(w, sl.eigh(a, eigvals_only=True), atol=tol * 10)
    elif kind == "schur":
        t, z = map(np.asarray, out)
        np.testing.assert_allclose(z @ t @ H(z), a, atol=tol * 10)
        np.testing.assert_allclose(H(z) @ z, np.eye(a.shape[0]), atol=tol)
        assert np.allclose(np.tril(t, -2), 0, atol=tol)
    elif kind == "hessenberg":
        h, q = map(np.asarray, out)
        np.testing.assert_allclose(q @ h @ H(q), a, atol=tol * 10)
        assert np.allclose(np.tril(h, -2), 0, atol=tol)
    elif kind == "polar":
        u, p = map(np.asarray, out)
        left = kw.get("side") == "left"
        np.testing.assert_allclose(p @ u if left else u @ p, a, atol=tol * 10)
        np.testing.assert_allclose(p, H(p), atol=tol)
        assert np.linalg.eigvalsh(p).min() > -tol * 10
    else:
        raise ValueError(kind)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,make,kw,kind", RECORDS, ids=IDS)
def test_vs_scipy_and_jax(name, make, kw, kind, dtype, x64):
    args = make(np.random.default_rng(0), dtype)
    ours = getattr(jsl, name)(*args, **kw)
    theirs = getattr(jax_sl, name)(*args, **kw)
    for g, w in zip(_leaves(ours), _leaves(theirs)):
        if not isinstance(w, bool):
            assert np.asarray(g).dtype == np.asarray(w).dtype, name
    if kind == "values":
        _close(ours, getattr(sl, name)(*args, **kw), dtype, f"{name} vs scipy")
        _close(ours, theirs, dtype, f"{name} vs jax")
    else:
        _check_structure(kind, args[0], ours, kw, dtype)
        # the same LAPACK drivers as JAX's, so the same phases and signs
        _close(ours, theirs, dtype, f"{name} vs jax")


@pytest.mark.parametrize("name,make,kw,kind", RECORDS, ids=IDS)
def test_jit_and_vmap(name, make, kw, kind):
    rng = np.random.default_rng(1)
    fn = getattr(jsl, name)
    examples = [make(rng, np.float32) for _ in range(3)]
    if name == "cho_solve":  # the (c, lower) pair: lower stays static
        call = lambda c, b: fn((c, True), b, **kw)  # noqa: E731
        examples = [(c, b) for (c, _), b in examples]
    else:
        call = lambda *a: fn(*a, **kw)  # noqa: E731
    for ex in examples:
        eager = call(*ex)
        jitted = jaxkit.jit(call)(*ex)
        for e, j in zip(_leaves(eager), _leaves(jitted)):
            if not isinstance(e, bool):
                np.testing.assert_allclose(np.asarray(j), np.asarray(e), rtol=1e-4, atol=1e-5)
    if kind != "values":
        return  # phase conventions may differ between a batched and a single LAPACK call
    stacked = [np.stack(xs) for xs in zip(*examples)]
    batched = jaxkit.vmap(call)(*stacked)
    for i, ex in enumerate(examples):
        for b, e in zip(_leaves(batched), _leaves(call(*ex))):
            if not isinstance(e, bool):
                np.testing.assert_allclose(np.asarray(b)[i], np.asarray(e), rtol=1e-4,
                                           atol=1e-5)


def test_gradients(x64):
    rng = np.random.default_rng(2)
    a, b = _hpd(rng, 3, np.float64), rng.normal(size=(3, 2))
    check_grads(lambda a, b: jsl.cho_solve(jsl.cho_factor(a, lower=True), b), (a, b),
                order=1, modes=("fwd", "rev"))
    m = rng.normal(size=(3, 3)) + 3 * np.eye(3)
    check_grads(lambda m, b: jsl.lu_solve(jsl.lu_factor(m), b), (m, b), order=1,
                modes=("fwd", "rev"))
    check_grads(lambda t, b: jsl.solve_triangular(t, b, lower=True), (np.tril(m), b),
                order=1, modes=("fwd", "rev"))
    check_grads(lambda m: jsl.lu(m)[2], (m,), order=1, modes=("fwd", "rev"))
    check_grads(lambda m: jsl.svd(m, compute_uv=False), (m,), order=1, modes=("fwd", "rev"))
    # eigh reads one triangle; its derivative (as JAX's) assumes a Hermitian tangent
    check_grads(lambda a: jsl.eigh((a + a.T) / 2, eigvals_only=True), (a,), order=1,
                modes=("fwd", "rev"))


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match="square matrix"):
        jsl.cho_factor(np.ones((2, 3)))
    with pytest.raises(ValueError, match="does not match"):
        jsl.lu_solve(jsl.lu_factor(np.eye(3)), np.ones(4))
    with pytest.raises(ValueError, match="trans must be"):
        jsl.solve_triangular(np.eye(2), np.ones(2), trans="X")
    with pytest.raises(ValueError, match="Unsupported QR decomposition mode"):
        jsl.qr(np.eye(2), mode="raw")
    with pytest.raises(NotImplementedError, match="b=None"):
        jsl.eigh(np.eye(2), np.eye(2))
