"""The smaller ``jaxkit.scipy`` modules against SciPy and JAX: ``integrate``, ``optimize``,
``interpolate``, ``ndimage``, ``cluster``, ``sparse.linalg`` and the available part of
``linalg`` (values, jit, vmap and gradients)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.cluster.vq as svq
import scipy.integrate as sint
import scipy.interpolate as sinterp
import scipy.linalg as sla
import scipy.ndimage as sndi
import scipy.optimize as sopt
from gradcheck import check_grads

import jaxkit
import jaxkit.numpy as jnp
from jaxkit.scipy import cluster, integrate, interpolate, linalg, ndimage, optimize
from jaxkit.scipy.sparse import linalg as sparse_linalg

jax = pytest.importorskip("jax")
import jax.scipy.cluster.vq  # noqa: E402, F811
import jax.scipy.integrate  # noqa: E402
import jax.scipy.interpolate  # noqa: E402
import jax.scipy.linalg  # noqa: E402
import jax.scipy.ndimage  # noqa: E402
import jax.scipy.optimize  # noqa: E402
import jax.scipy.sparse.linalg  # noqa: E402

RNG = np.random.default_rng(0)



def close(a, b, rtol=1e-6, atol=0.0):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


# ---- integrate -------------------------------------------------------------------------------
def test_trapezoid(x64):
    y, x = RNG.normal(size=(3, 7)), np.sort(RNG.normal(size=7))
    close(integrate.trapezoid(y, x), sint.trapezoid(y, x), 1e-12)
    close(integrate.trapezoid(y, dx=0.5, axis=0), sint.trapezoid(y, dx=0.5, axis=0), 1e-12)
    check_grads(lambda y, x: integrate.trapezoid(y, x), (y, x), order=2)
    close(jaxkit.vmap(integrate.trapezoid)(y), sint.trapezoid(y, axis=-1), 1e-12)


# ---- optimize --------------------------------------------------------------------------------
def _rosen(x, np_):
    return np_.sum(100. * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


@pytest.mark.parametrize("method", ["BFGS", "l-bfgs-experimental-do-not-rely-on-this"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_minimize_matches_jax(method, dtype, x64):
    x0 = np.array([-1.2, 1., 0.5, 2.], dtype)
    ours = optimize.minimize(lambda x: _rosen(x, jnp), x0, method=method)
    theirs = jax.scipy.optimize.minimize(lambda x: _rosen(x, jax.numpy), x0, method=method)
    assert type(ours).__name__ == "OptimizeResults"
    for field in ("x", "fun", "jac", "status", "nfev", "njev", "nit", "success"):
        close(getattr(ours, field), getattr(theirs, field), 1e-5 if dtype == np.float32
              else 1e-8, 1e-12)
    if dtype == np.float64 and method == "BFGS":
        ref = sopt.minimize(lambda x: _rosen(x, np), x0, method="BFGS")
        close(ours.x, ref.x, 1e-4)
        assert bool(ours.success)


def test_minimize_args_jit_and_errors():
    def quad(x, a):
        return jnp.sum((x - a) ** 2)

    a = np.array([1., -2., 3.], np.float32)
    res = jaxkit.jit(lambda a: optimize.minimize(quad, jnp.zeros(3), (a,), method="BFGS").x)(a)
    close(res, a, 1e-5)
    with pytest.raises(TypeError, match="must be a tuple"):
        optimize.minimize(quad, np.zeros(3), a, method="BFGS")
    with pytest.raises(ValueError, match="not recognized"):
        optimize.minimize(quad, np.zeros(3), (a,), method="Nelder-Mead")


# ---- interpolate -----------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["linear", "nearest"])
def test_regular_grid_interpolator(method, x64):
    grid = (np.linspace(0, 1, 5), np.array([0., 0.5, 2., 3.]))
    values = RNG.normal(size=(5, 4))
    pts = np.stack([RNG.uniform(-0.1, 1.1, 9), RNG.uniform(-0.2, 3.2, 9)], -1)
    ours = interpolate.RegularGridInterpolator(grid, values, method=method)
    ref = sinterp.RegularGridInterpolator(grid, values, method=method, bounds_error=False)
    close(ours(pts), ref(pts), 1e-12)
    theirs = jax.scipy.interpolate.RegularGridInterpolator(grid, values, method=method)
    close(ours(pts), theirs(pts), 1e-12)
    close(jaxkit.jit(lambda f, p: f(p))(ours, pts), ref(pts), 1e-12)  # a pytree
    if method == "linear":
        inside = pts.clip([0.05, 0.1], [0.95, 2.9])
        check_grads(lambda v, p: interpolate.RegularGridInterpolator(grid, v)(p),
                    (values, inside), order=1)
    with pytest.raises(NotImplementedError, match="bounds_error"):
        interpolate.RegularGridInterpolator(grid, values, bounds_error=True)


# ---- ndimage ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["constant", "nearest", "wrap", "mirror", "reflect"])
@pytest.mark.parametrize("order", [0, 1])
def test_map_coordinates(mode, order, x64):
    img = RNG.normal(size=(6, 5))
    coords = [RNG.uniform(-2, 7, 11), RNG.uniform(-2, 6, 11)]
    got = ndimage.map_coordinates(img, coords, order, mode=mode, cval=0.5)
    want = sndi.map_coordinates(img, np.stack(coords), order=order, mode=mode, cval=0.5)
    theirs = jax.scipy.ndimage.map_coordinates(img, coords, order, mode=mode, cval=0.5)
    close(got, theirs, 1e-12)
    if mode in ("nearest", "mirror", "reflect"):
        # SciPy's 'constant' and 'wrap' treat the last cell differently; JAX's are matched above
        close(got, want, 1e-12)
    got_int = ndimage.map_coordinates(np.arange(30).reshape(6, 5), coords, order, mode=mode)
    assert got_int.dtype == np.int64 or got_int.dtype == np.int32
    if order == 1:
        check_grads(lambda im: ndimage.map_coordinates(im, coords, 1, mode=mode), (img,),
                    order=1)


# ---- cluster ---------------------------------------------------------------------------------
def test_vq(x64):
    obs, book = RNG.normal(size=(8, 3)), RNG.normal(size=(4, 3))
    code, dist = cluster.vq.vq(obs, book)
    want_code, want_dist = svq.vq(obs, book)
    np.testing.assert_array_equal(code, want_code)
    close(dist, want_dist, 1e-12)
    code1, _ = cluster.vq.vq(obs[:, 0], book[:, 0])
    np.testing.assert_array_equal(code1, svq.vq(obs[:, :1], book[:, :1])[0])
    with pytest.raises(ValueError, match="same rank"):
        cluster.vq.vq(obs, book[0])


# ---- sparse.linalg ---------------------------------------------------------------------------
A = RNG.normal(size=(6, 6))
SPD = A @ A.T + 6 * np.eye(6)
GEN = A + 5 * np.eye(6)
B = RNG.normal(size=6)


@pytest.mark.parametrize("solver,matrix,kw", [
    ("cg", SPD, {}), ("bicgstab", GEN, {}), ("gmres", GEN, {"solve_method": "batched"}),
    ("gmres", GEN, {"solve_method": "incremental"})])
def test_krylov_solvers(solver, matrix, kw, x64):
    ours = getattr(sparse_linalg, solver)
    theirs = getattr(jax.scipy.sparse.linalg, solver)
    x, info = ours(matrix, B, tol=1e-10, **kw)
    close(x, np.linalg.solve(matrix, B), 1e-8)
    close(x, theirs(matrix, B, tol=1e-10, **kw)[0], 1e-9)
    # a function operator, a pytree right-hand side, and jit
    tree_x, _ = ours(lambda t: {"a": matrix @ t["a"]}, {"a": B}, tol=1e-10, **kw)
    close(tree_x["a"], x, 1e-9)
    close(jaxkit.jit(lambda m, b: ours(m, b, tol=1e-10, **kw)[0])(matrix, B), x, 1e-9)
    # implicit reverse-mode derivatives, in the operator's arrays and in b
    grads = jaxkit.grad(lambda m, b: ours(lambda v: m @ v, b, tol=1e-12, **kw)[0].sum(),
                        argnums=(0, 1))(matrix, B)
    want = jax.grad(lambda m, b: jax.numpy.linalg.solve(m, b).sum(), argnums=(0, 1))(matrix, B)
    close(grads[0], want[0], 1e-7, 1e-9)
    close(grads[1], want[1], 1e-7, 1e-9)


def test_krylov_errors():
    with pytest.raises(ValueError, match="square matrix"):
        sparse_linalg.cg(np.ones((2, 3)), np.ones(2))
    with pytest.raises(ValueError, match="matching shapes"):
        sparse_linalg.cg(np.eye(2), np.ones(2), x0=np.ones(3))
    with pytest.raises(ValueError, match="solve_method"):
        sparse_linalg.gmres(np.eye(2), np.ones(2), solve_method="qr")


# ---- linalg ------------------------------------------------------------------------------------
@pytest.mark.parametrize("scale", [0.01, 0.5, 3., 40.])
def test_expm(scale, x64):
    a = RNG.normal(size=(4, 4)) * scale
    close(linalg.expm(a), sla.expm(a), 1e-9)
    close(linalg.expm(a), jax.scipy.linalg.expm(a), 1e-12)
    a32 = a.astype(np.float32)
    # float32 with 2**k squarings amplifies rounding differences of the Pade solve
    ref32 = np.asarray(jax.scipy.linalg.expm(a32))
    close(linalg.expm(a32), ref32, 1e-5 if scale < 5 else 1e-3, 1e-6 * np.abs(ref32).max())
    e = RNG.normal(size=(4, 4))
    got_val, got_der = linalg.expm_frechet(a, e)
    want_val, want_der = sla.expm_frechet(a, e)
    close(got_val, want_val, 1e-9)
    close(got_der, want_der, 1e-8)
    if scale < 5:
        check_grads(linalg.expm, (a,), order=1, modes=("fwd", "rev"))
    batch = np.stack([a, -a])
    close(linalg.expm(batch), np.stack([sla.expm(a), sla.expm(-a)]), 1e-9)


SPECIAL_MATRICES = [
    ("toeplitz", (np.array([1., 2., 3.]), np.array([1., 5., 6., 7.]))),
    ("toeplitz", (np.array([1., 2. + 1j, 3.]),)),
    ("hankel", (np.array([1., 2., 3.]), np.array([3., 5., 6.]))),
    ("circulant", (np.array([1., 2., 3.]),)),
    ("companion", (np.array([1., 2., 3.]),)),
    ("fiedler", (np.array([1., 4., 2.]),)),
    ("fiedler_companion", (np.array([1., 2., 3., 4., 5.]),)),
    ("leslie", (np.array([0.1, 2., 1.]), np.array([0.2, 0.8]))),
    ("block_diag", (np.ones((2, 2)), np.array([[3.]]), np.array([1., 2.]))),
    ("hilbert", (4,)), ("invhilbert", (4,)), ("pascal", (4,)), ("invpascal", (4,)),
    ("helmert", (4, True)), ("hadamard", (4,)), ("dft", (4,)),
    ("convolution_matrix", (np.array([1., 2., 3.]), 4, "same")),
]


@pytest.mark.parametrize("name,args", SPECIAL_MATRICES, ids=[n for n, _ in SPECIAL_MATRICES])
def test_special_matrices(name, args, x64):
    got = getattr(linalg, name)(*args)
    # JAX builds Pascal matrices from float32 log-gamma, good to ~1e-6
    close(got, getattr(sla, name)(*args), 1e-5 if "pascal" in name else 1e-9, 1e-12)
    theirs = getattr(jax.scipy.linalg, name)(*args)
    close(got, theirs, 1e-12)
    assert got.dtype == theirs.dtype


def test_cholesky_det_inv_solve(x64):
    close(linalg.cholesky(SPD), sla.cholesky(SPD), 1e-10)
    close(linalg.cholesky(SPD, lower=True), sla.cholesky(SPD, lower=True), 1e-10)
    close(linalg.det(GEN), sla.det(GEN), 1e-10)
    close(linalg.inv(GEN), sla.inv(GEN), 1e-10)
    for assume_a in ("gen", "sym", "pos"):
        close(linalg.solve(SPD, B, assume_a=assume_a), sla.solve(SPD, B, assume_a=assume_a),
              1e-10)
    upper_only = np.triu(SPD)
    close(linalg.solve(upper_only, B, assume_a="pos"), sla.solve(SPD, B), 1e-10)
    with pytest.raises(ValueError, match="assume_a"):
        linalg.solve(SPD, B, assume_a="banded")
