"""jaxkit.scipy.linalg's factorizations and solvers: against SciPy (values, in SciPy's
conventions) and JAX, for real and complex dtypes, under jit and vmap, with gradients."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl

import jaxkit
import jaxkit.scipy.linalg as jsl
from gradcheck import check_grads
from platform_checks import align_vectors, cpu_for, cpu_only_on_the_cpu

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


# kind -> (output whose columns are vectors, output whose rows are)
_VECTORS = {"eigh": (1, None), "svd": (0, 2)}


# schur, hessenberg (and the functions through them) have no GPU rule in JAX either: on a GPU
# machine their tests run with the CPU as default device
_cpu_only = cpu_only_on_the_cpu(lambda p: p.get("name"))


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
        # the same LAPACK drivers as JAX's, so the same phases and signs (on the CPU; on a
        # GPU they are matched up to unit factors per vector)
        if kind in _VECTORS:
            ours = align_vectors(_leaves(ours), _leaves(theirs), *_VECTORS[kind])
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
    # cho_factor reads one triangle (no symmetrizing, as JAX's): a Hermitian tangent
    check_grads(lambda a, b: jsl.cho_solve(jsl.cho_factor((a + a.T) / 2, lower=True), b),
                (a, b), order=1, modes=("fwd", "rev"))
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
    # As JAX's: lax.linalg.cholesky's shape check, jnp.vectorize's core-dimension check and
    # lax.linalg.lu_solve's trans check.
    with pytest.raises(ValueError, match=r"cholesky must have shape \[\.\.\., n, n\]"):
        jsl.cho_factor(np.ones((2, 3)))
    with pytest.raises(ValueError, match="inconsistent size for core dimension 'n': 4 vs 3"):
        jsl.lu_solve(jsl.lu_factor(np.eye(3)), np.ones(4))
    with pytest.raises(ValueError, match="'trans' value must be 0, 1, or 2, got 5"):
        jsl.lu_solve(jsl.lu_factor(np.eye(3)), np.ones(3), trans=5)
    with pytest.raises(ValueError, match="trans must be"):
        jsl.solve_triangular(np.eye(2), np.ones(2), trans="X")
    with pytest.raises(ValueError, match="Unsupported QR decomposition mode"):
        jsl.qr(np.eye(2), mode="raw")
    with pytest.raises(NotImplementedError, match="b=None"):
        jsl.eigh(np.eye(2), np.eye(2))


def test_batched_vector_right_hand_sides_as_jax():
    # A batch of matrices with a batch of vectors: JAX still solves it (with its deprecation
    # FutureWarning); jaxkit's shape check used to refuse it.
    rng = np.random.default_rng(3)
    a = np.stack([_hpd(rng, 3, np.float32) for _ in range(2)])
    b = rng.normal(size=(2, 3)).astype(np.float32)
    calls = {"cho_solve": lambda m: m.cho_solve(m.cho_factor(a), b),
             "lu_solve": lambda m: m.lu_solve(m.lu_factor(a), b),
             "solve_triangular": lambda m: m.solve_triangular(np.tril(a), b, lower=True)}
    for name, call in calls.items():
        with pytest.warns(FutureWarning, match=f"{name}: batched 1D solves") as ours:
            got = call(jsl)
        with pytest.warns(FutureWarning) as theirs:
            want = call(jax_sl)
        assert str(ours[0].message) == str(theirs[0].message)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


# ---- functions of matrices and the rest of scipy.linalg's solvers --------------------------
def _quasi_schur(rng, dtype):
    """A real Schur form (T, Z) with 2x2 blocks, from SciPy (rsf2csf's input)."""
    return tuple(x.astype(dtype) for x in sl.schur(rng.normal(size=(5, 5))))


def _poly(x):  # funm's scalar function: plain arithmetic, so every library can call it
    return x * x - 2 * x + 1


# (name, make(rng, dtype) -> args, kwargs, dtypes SciPy accepts (None: all), compare by)
MATFUN_RECORDS = [
    # eigenvalues off the negative real axis, where the principal root is unique (a real
    # matrix's negative eigenvalue has two conjugate roots, and the libraries pick either)
    ("sqrtm", lambda r, d: ((_mat(r, (4, 4), d) + 4 * np.eye(4)).astype(d),), {}, None,
     "values"),
    ("sqrtm", lambda r, d: (_hpd(r, 3, d),), {}, None, "values"),
    ("funm", lambda r, d: (_mat(r, (4, 4), d), _poly), {}, None, "values"),
    ("funm", lambda r, d: (_mat(r, (3, 3), d), _poly), {"disp": False}, None, "values"),
    ("rsf2csf", _quasi_schur, {}, (np.float32, np.float64), "values"),
    ("solve_sylvester", lambda r, d: (_mat(r, (4, 4), d), _mat(r, (3, 3), d),
                                      _mat(r, (4, 3), d)), {}, None, "sylvester"),
    ("solve_sylvester", lambda r, d: (_mat(r, (3, 3), d), _mat(r, (2, 2), d),
                                      _mat(r, (3, 2), d)), {"method": "eigen"}, None,
     "sylvester"),
    ("qr_multiply", lambda r, d: (_mat(r, (5, 3), d), _mat(r, (2, 5), d)), {}, None, "values"),
    ("qr_multiply", lambda r, d: (_mat(r, (5, 3), d), _mat(r, (3, 2), d)), {"mode": "left"},
     None, "values"),
    ("qr_multiply", lambda r, d: (_mat(r, (3, 5), d), _mat(r, (3,), d)),
     {"mode": "left", "conjugate": True}, None, "values"),
    ("qr_multiply", lambda r, d: (_mat(r, (4, 4), d), _mat(r, (4,), d)),
     {"pivoting": True, "conjugate": True}, None, "values"),
    ("eigh_tridiagonal", lambda r, d: (_mat(r, (6,), d).real.astype(d),
                                       _mat(r, (5,), d).real.astype(d)),
     {"eigvals_only": True}, (np.float32, np.float64), "values"),
    ("eigh_tridiagonal", lambda r, d: (_mat(r, (6,), d), _mat(r, (5,), d)),
     {"eigvals_only": True, "select": "i", "select_range": (1, 3)},
     (np.float32, np.float64), "values"),
    ("eigh_tridiagonal", lambda r, d: (_mat(r, (5,), d), _mat(r, (4,), d)), {}, None,
     "eigh_tridiagonal"),
]
MATFUN_IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'default'}"
              for n, _, kw, _, _ in MATFUN_RECORDS]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,make,kw,scipy_dtypes,kind", MATFUN_RECORDS, ids=MATFUN_IDS)
def test_matfun_vs_scipy_and_jax(name, make, kw, scipy_dtypes, kind, dtype, x64):
    rng = np.random.default_rng(3)
    args = make(rng, dtype)
    ours = getattr(jsl, name)(*args, **kw)
    theirs = getattr(jax_sl, name)(*args, **kw)
    for g, w in zip(_leaves(ours), _leaves(theirs)):
        assert np.asarray(g).dtype == np.asarray(w).dtype, name
        assert np.shape(g) == np.shape(w), name
    tol = TOL[dtype] * 50  # Schur-based recurrences lose a few digits on random matrices
    if kind == "eigh_tridiagonal":  # eigenvectors up to sign: check what defines them
        (w, v), (d, e) = ours, args
        full = np.diag(np.real(d)) + np.diag(e, 1) + np.diag(np.conj(e), -1)  # JAX's convention
        np.testing.assert_allclose(full @ np.asarray(v), np.asarray(v) * np.asarray(w),
                                   atol=tol)
        np.testing.assert_allclose(np.asarray(w), np.asarray(theirs[0]), atol=tol)
        return
    if kind == "sylvester":  # A X + X B = C, against JAX and SciPy
        a, b, c = (np.asarray(x, np.complex128) for x in args)
        x = np.asarray(ours)
        np.testing.assert_allclose(a @ x + x @ b, c, atol=tol * 10)
    if scipy_dtypes is None or dtype in scipy_dtypes:
        # SciPy has one Sylvester solver (Bartels-Stewart): no method argument
        want = getattr(sl, name)(*args, **{k: v for k, v in kw.items() if k != "method"})
        if name == "funm" and not kw.get("disp", True):
            want = want[0]  # SciPy's error estimate is its own
            np.testing.assert_allclose(np.asarray(ours[0]), want, atol=tol, rtol=tol)
        else:
            _close_tol(ours, want, tol, f"{name} vs scipy")
    _close_tol(ours, theirs, tol, f"{name} vs jax")


def _close_tol(got, want, tol, label):
    for g, w in zip(_leaves(got), _leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol,
                                   err_msg=label)


@pytest.mark.parametrize("name,make,kw,scipy_dtypes,kind", MATFUN_RECORDS, ids=MATFUN_IDS)
def test_matfun_jit_and_vmap(name, make, kw, scipy_dtypes, kind):
    rng = np.random.default_rng(4)
    fn = getattr(jsl, name)
    examples = [make(rng, np.float32) for _ in range(3)]
    if name == "funm":  # the scalar function is static
        examples = [ex[:1] for ex in examples]
        call = lambda a: fn(a, _poly, **kw)  # noqa: E731
    else:
        call = lambda *a: fn(*a, **kw)  # noqa: E731
    for ex in examples:
        for e, j in zip(_leaves(call(*ex)), _leaves(jaxkit.jit(call)(*ex))):
            np.testing.assert_allclose(np.asarray(j), np.asarray(e), rtol=1e-4, atol=1e-4)
    if kind == "eigh_tridiagonal":
        return  # eigenvector signs may differ between a batched and a single LAPACK call
    stacked = [np.stack(xs) for xs in zip(*examples)]
    batched = jaxkit.vmap(call)(*stacked)
    for i, ex in enumerate(examples):
        for b, e in zip(_leaves(batched), _leaves(call(*ex))):
            np.testing.assert_allclose(np.asarray(b)[i], np.asarray(e), rtol=1e-4, atol=1e-4)


def test_matfun_identities(x64):
    with cpu_for("sqrtm"):  # sqrtm, funm, solve_sylvester go through schur
        rng = np.random.default_rng(5)
        a = _hpd(rng, 4, np.float64)
        root = np.asarray(jsl.sqrtm(a))
        np.testing.assert_allclose(root @ root, a, atol=1e-10)
        # funm of exp is expm; of the identity, the matrix itself
        m = rng.normal(size=(4, 4))
        np.testing.assert_allclose(np.asarray(jsl.funm(m, jaxkit.numpy.exp)), sl.expm(m),
                                   atol=1e-9)
        np.testing.assert_allclose(np.asarray(jsl.funm(m, lambda x: x)), m, atol=1e-12)
        # a singular sqrtm (zero eigenvalues): finite, as JAX gives
        assert np.isfinite(np.asarray(jsl.sqrtm(np.zeros((3, 3))))).all()
        # A and -A share eigenvalues: A X - X A = C has no unique solution, so NaN as in JAX
        assert np.isnan(np.asarray(jsl.solve_sylvester(m, -m, m))).all()
        # batch axes broadcast in rsf2csf and solve_sylvester
        t, z = sl.schur(m)
        ct, cz = jsl.rsf2csf(np.stack([t, t]), z)
        assert ct.shape == (2, 4, 4) and cz.shape == (2, 4, 4)
        x = jsl.solve_sylvester(np.stack([a, 2 * a]), a, m)
        np.testing.assert_allclose(np.asarray(x[1]), sl.solve_sylvester(2 * a, a, m), atol=1e-9)


def test_matfun_gradients(x64):
    rng = np.random.default_rng(6)
    d, e = rng.normal(size=5), rng.normal(size=4)
    # eigh_tridiagonal bisects in a while loop, as JAX's: forward mode differentiates the
    # starting interval (a shift of d shifts every eigenvalue), reverse mode is refused.
    shifted = jaxkit.jvp(lambda d: jsl.eigh_tridiagonal(d, e, eigvals_only=True), (d,),
                         (np.ones(5),))[1]
    np.testing.assert_allclose(np.asarray(shifted), np.ones(5))
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        jaxkit.grad(lambda d: jsl.eigh_tridiagonal(d, e, eigvals_only=True).sum())(d)
    # qr_multiply, as JAX's, is not differentiable: ormqr has no JVP rule, and says so
    with pytest.raises(NotImplementedError, match="ormqr"):
        jaxkit.grad(lambda c: jsl.qr_multiply(np.eye(3), c)[0].sum())(np.ones((2, 3)))


def test_matfun_bad_input_names_the_problem(x64):
    with pytest.raises(ValueError, match="square 2-D matrix"):
        jsl.sqrtm(np.ones((2, 3)))
    with pytest.raises(NotImplementedError, match="Blocked"):
        jsl.sqrtm(np.eye(2), blocksize=2)
    with pytest.raises(ValueError, match="expected square"):
        jsl.funm(np.ones(3), _poly)
    with pytest.raises(ValueError, match="Incompatible shapes for Sylvester"):
        jsl.solve_sylvester(np.eye(2), np.eye(3), np.ones((3, 2)))
    with pytest.raises(ValueError, match="Unrecognized method"):
        jsl.solve_sylvester(np.eye(2), np.eye(2), np.eye(2), method="bartels")
    with pytest.raises(ValueError, match="mode must be"):
        jsl.qr_multiply(np.eye(2), np.eye(2), mode="up")
    with pytest.raises(ValueError, match="not compatible for c @ Q"):
        jsl.qr_multiply(np.eye(3), np.ones((2, 2)))
    with pytest.raises(TypeError, match="same dtype"):
        jsl.eigh_tridiagonal(np.ones(3, np.float32), np.ones(2, np.float64))
    with pytest.raises(NotImplementedError, match="select='v'"):
        jsl.eigh_tridiagonal(np.ones(3), np.ones(2), select="v")
    with pytest.raises(ValueError, match="select_range must be specified"):
        jsl.eigh_tridiagonal(np.ones(3), np.ones(2), select="i")
