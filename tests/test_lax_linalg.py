"""jaxkit.lax.linalg against the JAX oracle, NumPy and SciPy: one record per operation, generic
checks over all records and the four LAPACK dtypes.

jaxkit and JAX call the same LAPACK kernels, so results (signs and phases of eigenvectors
included) agree to float tolerance. Against NumPy/SciPy a record compares quantities that do
not depend on those conventions (reconstructions, eigenvalues, singular values). Gradients are
checked numerically in float64 and complex128 on a phase-invariant function of the outputs
(``gfn``). Under ``vmap`` a batch of matrices must be one equation of the primitive.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import numpy as np
import pytest
import scipy.linalg as sla
from gradcheck import check_grads
from platform_checks import align_vectors, canonical_phases, cpu_only_on_the_cpu
from vmapcheck import check_vmap

import jaxkit
from jaxkit import lax as klax

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
_TOL = {np.float32: 2e-4, np.float64: 1e-10, np.complex64: 2e-4, np.complex128: 1e-10}


pytestmark = pytest.mark.usefixtures("x64_module")


def _rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _H(x):
    return np.conj(np.swapaxes(x, -1, -2))


def general(shape):
    return lambda rng, dt: [_rand(rng, shape, dt)]


def hpd(n):
    """Hermitian positive definite."""
    def make(rng, dt):
        a = _rand(rng, (n, n), dt)
        return [(a @ _H(a) + n * np.eye(n)).astype(dt)]
    return make


def lower_tri(n, k):
    def make(rng, dt):
        a = np.tril(_rand(rng, (n, n), dt)) + 3 * np.eye(n)
        return [a.astype(dt), _rand(rng, (n, k), dt)]
    return make


def tridiag_system(m, k):
    def make(rng, dt):
        dl, d, du = (_rand(rng, (m,), dt) for _ in range(3))
        d = (d + 4).astype(dt)
        dl[0] = 0
        du[-1] = 0
        return [dl, d, du, _rand(rng, (m, k), dt)]
    return make


def _dense_tridiag(dl, d, du):
    return np.diag(d) + np.diag(dl[1:], -1) + np.diag(du[:-1], 1)


def _abs(m, x):
    return m.abs(x) if hasattr(m, "abs") else np.abs(x)


@dataclasses.dataclass
class Op:
    name: str
    prim: str
    fn: Callable  # fn(L, *args) with L a lax.linalg module: the outputs compared with JAX
    make: Callable  # make(rng, dtype) -> list of NumPy arguments
    ref: Callable | None = None  # ref(*args) -> (got_fn(outputs), expected) with NumPy/SciPy
    gfn: Callable | None = None  # gfn(L, jnp, *args): phase-invariant function to differentiate
    dtypes: tuple = tuple(DTYPES)
    jax: bool = True  # whether the oracle supports the call
    # (output whose columns are vectors, output whose rows are) unique up to unit factors
    vectors: tuple | None = None

    def __str__(self):
        return self.name


def _triu(x):
    """The upper triangle of a jaxkit or JAX array (the module of the op under test)."""
    return x.at[np.tril_indices(x.shape[-1], -1)].set(0)


def _recon_lu(args, outs):
    (a,) = args
    lu, _, perm = (np.asarray(o) for o in outs)
    m, n = a.shape
    k = min(m, n)
    lo = np.tril(lu[:, :k], -1) + np.eye(m, k)
    return lo @ np.triu(lu[:k, :]), a[perm]


OPS = [
    Op("cholesky", "cholesky", lambda L, x: L.cholesky(x), hpd(5),
       ref=lambda x: (lambda outs: np.asarray(outs), np.linalg.cholesky(x)),
       gfn=lambda L, m, x: L.cholesky(x)),
    Op("triangular_solve_left_lower", "triangular_solve",
       lambda L, a, b: L.triangular_solve(a, b, left_side=True, lower=True), lower_tri(4, 3),
       ref=lambda a, b: (lambda o: np.asarray(o), np.linalg.solve(a, b)),
       gfn=lambda L, m, a, b: L.triangular_solve(a, b, left_side=True, lower=True)),
    Op("triangular_solve_right_conjT", "triangular_solve",
       lambda L, a, b: L.triangular_solve(a, b.T, left_side=False, lower=True,
                                          transpose_a=True, conjugate_a=True),
       lower_tri(4, 3),
       ref=lambda a, b: (lambda o: np.asarray(o), b.T @ np.linalg.inv(_H(a))),
       gfn=lambda L, m, a, b: L.triangular_solve(a, b.T, left_side=False, lower=True,
                                                 transpose_a=True, conjugate_a=True)),
    Op("triangular_solve_unit_T", "triangular_solve",
       lambda L, a, b: L.triangular_solve(a, b, left_side=True, lower=True, transpose_a=True,
                                          unit_diagonal=True), lower_tri(4, 2),
       ref=lambda a, b: (lambda o: np.asarray(o),
                         np.linalg.solve((np.tril(a, -1) + np.eye(4)).T, b)),
       gfn=lambda L, m, a, b: L.triangular_solve(a, b, left_side=True, lower=True,
                                                 transpose_a=True, unit_diagonal=True)),
    Op("lu_square", "lu", lambda L, x: L.lu(x), general((4, 4)),
       ref=lambda x: (lambda outs: _recon_lu((x,), outs)[0], _recon_lu_ref(x)),
       gfn=lambda L, m, x: L.lu(x)[0]),
    Op("lu_tall", "lu", lambda L, x: L.lu(x), general((5, 3)),
       ref=lambda x: (lambda outs: _recon_lu((x,), outs)[0], _recon_lu_ref(x)),
       gfn=lambda L, m, x: L.lu(x)[0]),
    Op("lu_wide", "lu", lambda L, x: L.lu(x), general((3, 5)),
       ref=lambda x: (lambda outs: _recon_lu((x,), outs)[0], _recon_lu_ref(x)),
       gfn=lambda L, m, x: L.lu(x)[0]),
    Op("qr_reduced", "qr", lambda L, x: L.qr(x, full_matrices=False), general((5, 3)),
       ref=lambda x: (lambda o: np.abs(np.asarray(o[1])), np.abs(np.linalg.qr(x, "r"))),
       gfn=lambda L, m, x: L.qr(x, full_matrices=False)),
    Op("qr_full", "qr", lambda L, x: L.qr(x), general((5, 3)),
       ref=lambda x: (lambda o: np.asarray(o[0]) @ np.asarray(o[1]), x)),
    Op("qr_square", "qr", lambda L, x: L.qr(x), general((4, 4)),
       ref=lambda x: (lambda o: np.asarray(o[0]) @ np.asarray(o[1]), x),
       gfn=lambda L, m, x: L.qr(x)),
    Op("qr_wide", "qr", lambda L, x: L.qr(x), general((3, 5)),
       ref=lambda x: (lambda o: np.asarray(o[0]) @ np.asarray(o[1]), x)),
    Op("qr_pivoting", "qr", lambda L, x: L.qr(x, pivoting=True, full_matrices=False),
       general((5, 4)),
       ref=lambda x: (lambda o: np.asarray(o[0]) @ np.asarray(o[1]),
                      x[:, sla.qr(x, pivoting=True, mode="economic")[2]])),
    Op("householder_product", "householder_product",
       lambda L, a, t: L.householder_product(a, t),
       lambda rng, dt: _geqrf_args(rng, dt, (5, 3)),
       ref=lambda a, t: (lambda o: np.asarray(o), sla.qr(_unraw(a, t), mode="economic")[0])),
    Op("ormqr", "ormqr", lambda L, a, t, c: L.ormqr(a, t, c, left=True, transpose=True),
       lambda rng, dt: [*_geqrf_args(rng, dt, (4, 4)), _rand(rng, (4, 2), dt)],
       ref=lambda a, t, c: (lambda o: np.asarray(o), _H(sla.qr(_unraw(a, t))[0]) @ c)),
    Op("eigh", "eigh", lambda L, x: L.eigh(x), hpd(5), vectors=(0, None),
       ref=lambda x: (lambda o: np.asarray(o[1]), np.linalg.eigvalsh(x)),
       gfn=lambda L, m, x: (lambda v, w: (w, _abs(m, v)))(*L.eigh(x))),
    Op("eigh_upper", "eigh", lambda L, x: L.eigh(x, lower=False, symmetrize_input=False),
       hpd(4), vectors=(0, None), ref=lambda x: (lambda o: np.asarray(o[1]), np.linalg.eigvalsh(x, "U"))),
    # JAX has no subset_by_index on the CPU ("not supported"): compared with NumPy only.
    Op("eigh_subset", "eigh", lambda L, x: L.eigh(x, subset_by_index=(1, 3)), hpd(5),
       vectors=(0, None),
       ref=lambda x: (lambda o: np.asarray(o[1]), np.linalg.eigvalsh(x)[1:3]), jax=False),
    Op("svd_thin", "svd", lambda L, x: L.svd(x, full_matrices=False), general((5, 3)),
       vectors=(0, 2),
       ref=lambda x: (lambda o: (np.asarray(o[0]) * np.asarray(o[1])) @ np.asarray(o[2]), x),
       gfn=lambda L, m, x: (lambda u, s, vh: (s, (u * s[None, :].astype(u.dtype)) @ vh))(
           *L.svd(x, full_matrices=False))),
    Op("svd_wide", "svd", lambda L, x: L.svd(x, full_matrices=False), general((3, 5)),
       vectors=(0, 2),
       ref=lambda x: (lambda o: (np.asarray(o[0]) * np.asarray(o[1])) @ np.asarray(o[2]), x),
       gfn=lambda L, m, x: (lambda u, s, vh: (s, (u * s[None, :].astype(u.dtype)) @ vh))(
           *L.svd(x, full_matrices=False))),
    Op("svd_full", "svd", lambda L, x: L.svd(x), general((5, 3)), vectors=(0, 2),
       ref=lambda x: (lambda o: np.asarray(o[1]), np.linalg.svd(x, compute_uv=False))),
    Op("svd_values", "svd", lambda L, x: L.svd(x, compute_uv=False), general((4, 6)),
       ref=lambda x: (lambda o: np.asarray(o), np.linalg.svd(x, compute_uv=False)),
       gfn=lambda L, m, x: L.svd(x, compute_uv=False)),
    Op("svd_qr_algorithm", "svd",
       lambda L, x: L.svd(x, full_matrices=False, algorithm=L.SvdAlgorithm.QR),
       general((4, 3)), vectors=(0, 2),
       ref=lambda x: (lambda o: np.asarray(o[1]), np.linalg.svd(x, compute_uv=False))),
    Op("schur", "schur", lambda L, x: L.schur(x), general((4, 4)),
       ref=lambda x: (lambda o: np.asarray(o[1]) @ np.asarray(o[0]) @ _H(np.asarray(o[1])), x)),
    Op("schur_no_vectors", "schur", lambda L, x: L.schur(x, compute_schur_vectors=False),
       general((4, 4)),
       ref=lambda x: (lambda o: np.sort_complex(_schur_eigs(np.asarray(o[0]))),
                      np.sort_complex(np.linalg.eigvals(x)))),
    Op("hessenberg", "hessenberg", lambda L, x: L.hessenberg(x), general((5, 5)),
       ref=lambda x: (lambda o: np.triu(np.asarray(o[0]), -1), sla.hessenberg(x))),
    Op("tridiagonal", "tridiagonal", lambda L, x: L.tridiagonal(x), hpd(5),
       ref=lambda x: (lambda o: np.linalg.eigvalsh(_dense_tridiag(
           np.r_[0, np.asarray(o[2])], np.asarray(o[1]), np.r_[np.asarray(o[2]), 0])),
                      np.linalg.eigvalsh(x))),
    Op("tridiagonal_solve", "tridiagonal_solve",
       lambda L, dl, d, du, b: L.tridiagonal_solve(dl, d, du, b), tridiag_system(5, 2),
       ref=lambda dl, d, du, b: (lambda o: np.asarray(o),
                                 np.linalg.solve(_dense_tridiag(dl, d, du), b)),
       gfn=lambda L, m, dl, d, du, b: L.tridiagonal_solve(dl, d, du, b)),
    Op("tridiagonal_solve_perturbed", "tridiagonal_solve",
       lambda L, dl, d, du, b: L.tridiagonal_solve(dl, d, du, b, perturb_singular=True),
       tridiag_system(5, 2),
       ref=lambda dl, d, du, b: (lambda o: np.asarray(o),
                                 np.linalg.solve(_dense_tridiag(dl, d, du), b))),
    Op("eig", "eig", lambda L, x: L.eig(x, compute_left_eigenvectors=False,
                                        compute_right_eigenvectors=False), general((4, 4)),
       ref=lambda x: (lambda o: np.sort_complex(np.asarray(o[0])),
                      np.sort_complex(np.linalg.eigvals(x)))),
    # R is its upper triangle: cuSOLVER's kernel (JAX's GPU rule) leaves the strictly lower
    # one as it was, the CPU's rotation scales it
    Op("cholesky_update", "cholesky_update",
       lambda L, r, w: _triu(L.cholesky_update(r, w)),
       lambda rng, dt: (lambda a, w: [np.linalg.cholesky(a).T.copy(), w])(
           hpd(4)(rng, dt)[0], _rand(rng, (4,), dt)),
       ref=lambda r, w: (lambda o: np.asarray(o), np.linalg.cholesky(r.T @ r +
                                                                     np.outer(w, w)).T),
       gfn=lambda L, m, r, w: m.triu(L.cholesky_update(m.triu(r), w)),
       dtypes=(np.float32, np.float64)),
    # only the lower triangle is defined on every platform (JAX's contract; cuBLAS's syrk
    # leaves the upper one as c had it): the whole matrix through symmetrize_output
    Op("symmetric_product", "symmetric_product",
       lambda L, a, c: L.symmetric_product(a, c, alpha=2.0, beta=0.5, symmetrize_output=True),
       lambda rng, dt: [_rand(rng, (3, 4), dt), hpd(3)(rng, dt)[0]],
       ref=lambda a, c: (lambda o: np.asarray(o), 2 * a @ a.T + 0.5 * c),
       gfn=lambda L, m, a, c: L.symmetric_product(a, c, alpha=2.0, beta=0.5,
                                                   symmetrize_output=True),
       dtypes=(np.float32, np.float64)),
]


def _recon_lu_ref(x):
    _, lo, u = sla.lu(x)  # x = P L U, so L U is x with its rows permuted
    return lo @ u


def _schur_eigs(t):
    """Eigenvalues of a real quasi-triangular (or complex triangular) Schur form."""
    return np.linalg.eigvals(t)


def _geqrf_args(rng, dt, shape):
    (h, tau), _ = sla.qr(_rand(rng, shape, dt), mode="raw")
    return [np.ascontiguousarray(h).astype(dt), tau.astype(dt)]


def _unraw(a, t):
    """A matrix whose QR has the reflectors ``a``/``t`` (rebuilt through LAPACK's orgqr)."""
    m, n = a.shape
    q = sla.lapack.get_lapack_funcs("orgqr" if np.isrealobj(a) else "ungqr", (a,))(
        np.asfortranarray(a.copy()), t)[0]
    return q @ np.triu(a[:n])


def _args(op: Op, dtype, seed=0):
    return op.make(np.random.default_rng(seed), dtype)


CASES = [(op, dt) for op in OPS for dt in DTYPES if dt in op.dtypes]
IDS = [f"{op.name}-{np.dtype(dt).name}" for op, dt in CASES]


# schur and hessenberg have no GPU rule in JAX either: on a GPU machine their tests run with
# the CPU as default device
_cpu_only = cpu_only_on_the_cpu(lambda p: p["op"].prim if isinstance(p.get("op"), Op) else None)


def _leaves(x):
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(x)]


def _close(got, want, dtype, scale=1.0):
    tol = _TOL[dtype] * scale
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        if np.issubdtype(w.dtype, np.inexact):
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol * (1 + np.abs(w).max()))
        else:
            np.testing.assert_array_equal(g, w)


JAX_CASES = [(op, dt) for op, dt in CASES if op.jax]


@pytest.mark.parametrize("op,dtype", JAX_CASES,
                         ids=[f"{op.name}-{np.dtype(dt).name}" for op, dt in JAX_CASES])
def test_matches_jax(op, dtype):
    args = _args(op, dtype)
    got = op.fn(klax.linalg, *args)
    want = op.fn(jax.lax.linalg, *args)
    assert [g.dtype for g in _leaves(got)] == [w.dtype for w in _leaves(want)]
    if op.vectors:
        got = align_vectors(_leaves(got), _leaves(want), *op.vectors)
    _close(got, want, dtype, scale=10)


REF_CASES = [(op, dt) for op, dt in CASES if op.ref is not None]


@pytest.mark.parametrize("op,dtype", REF_CASES,
                         ids=[f"{op.name}-{np.dtype(dt).name}" for op, dt in REF_CASES])
def test_matches_numpy_scipy(op, dtype):
    args = _args(op, dtype)
    view, want = op.ref(*args)
    got = view(op.fn(klax.linalg, *args))
    np.testing.assert_allclose(got, want, rtol=_TOL[dtype] * 50,
                               atol=_TOL[dtype] * 50 * (1 + np.abs(want).max()))


@pytest.mark.parametrize("op,dtype", CASES, ids=IDS)
def test_jit_matches_eager(op, dtype):
    args = _args(op, dtype)
    eager = op.fn(klax.linalg, *args)
    jitted = jaxkit.jit(lambda *a: op.fn(klax.linalg, *a))(*args)
    _close(jitted, eager, dtype)


GRAD_CASES = [(op, dt) for op, dt in CASES if op.gfn is not None and
              dt in (np.float64, np.complex128)]


@pytest.mark.parametrize("op,dtype", GRAD_CASES,
                         ids=[f"{op.name}-{np.dtype(dt).name}" for op, dt in GRAD_CASES])
def test_numerical_gradients(op, dtype):
    args = _args(op, dtype)
    if op.name == "cholesky" or op.name == "eigh":
        # Hermitian input: perturb along Hermitian directions only.
        def f(x):
            return op.gfn(klax.linalg, jaxkit.numpy, (x + jaxkit.numpy.conj(x.T)) / 2)
    else:
        def f(*a):
            return op.gfn(klax.linalg, jaxkit.numpy, *a)
    check_grads(f, args, order=1, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("op,dtype", CASES, ids=IDS)
def test_vmap_is_one_batched_call(op, dtype):
    examples = [_args(op, dtype, seed) for seed in range(3)]
    stacked = [np.stack(xs) for xs in zip(*examples)]

    def f(*a):
        out = op.fn(klax.linalg, *a)
        return canonical_phases(out, *op.vectors) if op.vectors else out

    check_vmap(f, stacked, rtol=_TOL[dtype] * 10, atol=_TOL[dtype] * 10)
    jaxpr = jaxkit.make_jaxpr(jaxkit.vmap(f))(*stacked)
    names = [str(e.primitive) for e in jaxpr.jaxpr.eqns]
    assert names.count(op.prim) == 1, names


def test_public_names_match_jax():
    want = {n for n in dir(jax.lax.linalg) if not n.startswith("_")}
    have = {n for n in dir(klax.linalg) if not n.startswith("_")}
    assert want <= have, sorted(want - have)


def test_lu_pivots_to_permutation():
    piv = np.array([[2, 2, 3], [1, 1, 2]], np.int32)
    got = klax.linalg.lu_pivots_to_permutation(piv, 5)
    np.testing.assert_array_equal(got, jax.lax.linalg.lu_pivots_to_permutation(piv, 5))
    assert jaxkit.vmap(lambda p: klax.linalg.lu_pivots_to_permutation(p, 5))(piv).shape == (2, 5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_qdwh_polar(dtype):
    x = _rand(np.random.default_rng(0), (6, 4), dtype)
    u, h, iters, converged = klax.linalg.qdwh(x)
    tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
    assert bool(converged) and 0 < int(iters) <= 10
    np.testing.assert_allclose(np.asarray(u) @ np.asarray(h), x, atol=tol * 10)
    up, hp = sla.polar(x)
    np.testing.assert_allclose(np.asarray(u), up, atol=tol * 10)


def test_not_positive_definite_is_nan():
    out = np.asarray(klax.linalg.cholesky(-np.eye(3, dtype=np.float32)))
    assert np.isnan(out[np.tril_indices(3)]).all() and (np.triu(out, 1) == 0).all()  # as JAX


@pytest.mark.parametrize("call,err", [
    (lambda L: L.cholesky(np.ones((2, 3), np.float32)), ValueError),
    (lambda L: L.eigh(np.ones((3,), np.float32)), ValueError),
    (lambda L: L.lu(np.ones((3, 3), np.int32)), TypeError),
    (lambda L: L.triangular_solve(np.eye(3, dtype=np.float32), np.ones((2, 2), np.float32),
                                  left_side=True), TypeError),
    (lambda L: L.schur(np.eye(3, dtype=np.float32), sort_eig_vals=True), NotImplementedError),
], ids=["cholesky-shape", "eigh-rank", "lu-dtype", "trsm-shape", "schur-sort"])
def test_errors(call, err):
    with pytest.raises(err):
        call(klax.linalg)


def test_tridiagonal_solve_perturbs_singular_pivots_as_jax():
    dl = np.array([0.0, 1.0, 0.0], np.float32)  # [[1, 1, 0], [1, 1, 0], [0, 0, 1]]: singular
    d = np.array([1.0, 1.0, 1.0], np.float32)
    du = np.array([1.0, 0.0, 0.0], np.float32)
    b = np.ones((3, 1), np.float32)
    assert np.isnan(np.asarray(klax.linalg.tridiagonal_solve(dl, d, du, b))).all()
    assert np.isnan(np.asarray(jax.lax.linalg.tridiagonal_solve(dl, d, du, b))).all()
    got = klax.linalg.tridiagonal_solve(dl, d, du, b, perturb_singular=True)
    want = jax.lax.linalg.tridiagonal_solve(dl, d, du, b, perturb_singular=True)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    assert np.isfinite(np.asarray(got)).all()
