"""``jaxkit.scipy.stats``: one record per distribution function (arguments over the support
and beyond it, tails included), run through the generic checks of ``_scipy_checks``, then the
multivariate distributions, ``gaussian_kde``, ``mode``, ``rankdata`` and ``sem``."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as sst
from _scipy_checks import (KINDS32, KINDS64, Fn, modules, params, resolve,
                           run_generic)
from gradcheck import check_grads

import jaxkit
import jaxkit.scipy.stats as st

jax = pytest.importorskip("jax")
ours_mod, jax_mod, scipy_mod = modules("stats")


X = np.array([-40., -3., -0.5, 0., 0.7, 2., 9., 60.])
XG = np.array([-1.3, 0.4, 2.2])            # where derivatives are checked (smooth points)
Q = np.array([1e-10, 0.01, 0.2, 0.5, 0.8, 0.99, 1 - 1e-7])
POS = np.array([0., 1e-3, 0.2, 1., 2.5, 7., 30., -1.])
POSG = np.array([0.3, 1.2, 4.])
UNIT = np.array([-0.1, 0., 1e-4, 0.2, 0.5, 0.9, 1., 1.1])
K = np.array([-1., 0., 1., 2., 3., 5., 10., 12.])  # integers: SciPy gives 0 between them
LOC_SCALE = (np.float64(0.3), np.float64(1.7))
# JAX 0.10.2 cannot differentiate these in scale: its rule multiplies a float0 tangent
GUMBEL_NO_JAX_GRAD = "JAX's derivative in scale raises TypeError (multiply with a float0 array)"


def c(*vals):
    return lambda: tuple(np.asarray(v, float) for v in vals)


def loc_scale(name, fns, x=X, xg=XG, args=(), ls=LOC_SCALE, **kw):
    """Records for ``name.fn`` with (x, *args, loc, scale); derivatives in x, loc and scale."""
    n = 1 + len(args)
    return [Fn(f"{name}.{fn}", c(x, *args, *ls), grad_args=(0, n, n + 1),
               grad_points=c(xg, *args, *ls), **kw) for fn in fns]


def quantiles(name, fns, args=(), q32=None, **kw):
    """Records for quantile functions at ``Q`` (``q32`` in float32, if given)."""
    n = 1 + len(args)
    if q32 is not None:
        kw["args32"] = c(q32, *args, *LOC_SCALE)
    return [Fn(f"{name}.{fn}", c(Q, *args, *LOC_SCALE), grad_args=(0, n, n + 1),
               grad_points=c(np.array([0.1, 0.5, 0.7]), *args, *LOC_SCALE), **kw)
            for fn in fns]


RECORDS = [
    *loc_scale("norm", ["pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"], rtol=1e-9),
    # isf(q) = ppf(1 - q) and tan-based Cauchy quantiles lose digits in the far tail, as in JAX
    *quantiles("norm", ["ppf", "isf"], rtol=1e-8),
    *loc_scale("cauchy", ["pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"], rtol=1e-9),
    # float32 cannot resolve 1 - 1e-7 from 1 well enough for tan's pole: q32 stops at 1 - 1e-4
    *quantiles("cauchy", ["ppf", "isf"], rtol=1e-6, atol=1e-6,
               q32=np.array([1e-4, 0.01, 0.2, 0.5, 0.8, 0.99, 1 - 1e-4])),
    *loc_scale("logistic", ["pdf", "logpdf", "cdf", "sf"], rtol=1e-9),
    *quantiles("logistic", ["ppf", "isf"], rtol=1e-9),
    *loc_scale("laplace", ["pdf", "logpdf", "cdf"], rtol=1e-12),
    *loc_scale("gumbel_l", ["pdf", "logpdf"], rtol=1e-9, no_jax_grad=GUMBEL_NO_JAX_GRAD,
               x=np.array([-30., -3., -0.5, 0., 0.7, 2., 4.])),
    *loc_scale("gumbel_l", ["cdf", "logcdf", "sf", "logsf"], rtol=1e-9,
               x=np.array([-30., -3., -0.5, 0., 0.7, 2., 4.])),
    *quantiles("gumbel_l", ["ppf"], rtol=1e-9, no_jax_grad=GUMBEL_NO_JAX_GRAD),
    *loc_scale("gumbel_r", ["pdf", "logpdf"], rtol=1e-8, no_jax_grad=GUMBEL_NO_JAX_GRAD,
               x=np.array([-4., -0.5, 0., 0.7, 2., 9., 30.])),
    *loc_scale("gumbel_r", ["cdf", "logcdf", "sf", "logsf"], rtol=1e-8,
               x=np.array([-4., -0.5, 0., 0.7, 2., 9., 30.])),
    *quantiles("gumbel_r", ["ppf"], rtol=1e-9, no_jax_grad=GUMBEL_NO_JAX_GRAD),
    *loc_scale("expon", ["pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"], x=POS + 0.3,
               xg=POSG + 0.5, rtol=1e-9),
    *quantiles("expon", ["ppf"], rtol=1e-9),
    *loc_scale("uniform", ["pdf", "logpdf", "cdf"], x=UNIT * 2, xg=np.array([0.6, 1.1]),
               rtol=1e-12),
    *quantiles("uniform", ["ppf"], rtol=1e-12),
    *loc_scale("t", ["pdf", "logpdf"], args=(np.array(3.5),), rtol=1e-9),
    *loc_scale("chi2", ["pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"], x=POS + 0.3,
               xg=POSG + 0.5, args=(np.array(4.5),), rtol=1e-7),
    *loc_scale("gamma", ["pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"], x=POS + 0.3,
               xg=POSG + 0.5, args=(np.array(2.5),), rtol=1e-7),
    # loc and scale exact in binary, so the support's ends (x = loc, loc + scale) are sample
    # points in float32 too, not a rounding error away from them
    *loc_scale("beta", ["pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"], x=UNIT * 2. + 0.25,
               xg=np.array([0.6, 1.1, 1.5]), args=(np.array(2.5), np.array(1.5)),
               ls=(np.float64(0.25), np.float64(2.)), rtol=1e-7),
    *loc_scale("pareto", ["pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"], x=POS * 3 + 1.,
               xg=POSG + 2.5, args=(np.array(2.5),), rtol=1e-9),
    *quantiles("pareto", ["ppf"], args=(np.array(2.5),), rtol=1e-9),
    Fn("gennorm.pdf", c(X / 10, 1.5), grad_args=(0, 1), grad_points=c(XG, 1.5), rtol=1e-9),
    Fn("gennorm.logpdf", c(X / 10, 1.5), grad_args=(0, 1), grad_points=c(XG, 1.5), rtol=1e-9),
    Fn("gennorm.cdf", c(X / 10, 1.5), grad_args=(0,), grad_points=c(XG, 1.5), rtol=1e-9),
    Fn("vonmises.pdf", c(X / 20, 2.5), grad_args=(0, 1), grad_points=c(XG, 2.5), rtol=1e-9),
    Fn("vonmises.logpdf", c(X / 20, 2.5), grad_args=(0, 1), grad_points=c(XG, 2.5),
       rtol=1e-9),
    Fn("wrapcauchy.pdf", c(np.array([-1., 0., 0.5, 3., 6.2, 7.]), 0.4), grad_args=(0, 1),
       grad_points=c(POSG, 0.4), rtol=1e-9),
    Fn("wrapcauchy.logpdf", c(np.array([-1., 0., 0.5, 3., 6.2, 7.]), 0.4), grad_args=(0, 1),
       grad_points=c(POSG, 0.4), rtol=1e-9),
    Fn("truncnorm.pdf", c(X / 5, -1., 2.5, *LOC_SCALE), grad_args=(0, 3, 4),
       grad_points=c(XG / 2, -1., 2.5, *LOC_SCALE), rtol=1e-9),
    *[Fn(f"truncnorm.{fn}", c(np.array([-3., -1., 0., 0.5, 1.5, 4., 20.]), -0.5, 3.,
                              *LOC_SCALE), grad_args=(0,),
         grad_points=c(np.array([0.1, 0.9, 2.]), -0.5, 3., *LOC_SCALE), rtol=1e-8)
      for fn in ["logpdf", "cdf", "logcdf", "sf", "logsf"]],
    # discrete distributions: derivatives in the parameters only
    Fn("poisson.pmf", c(K, 3.5), grad_args=(1,), rtol=1e-9),
    Fn("poisson.logpmf", c(K, 3.5), grad_args=(1,), rtol=1e-9),
    Fn("poisson.cdf", c(K, 3.5), grad_args=(), rtol=1e-9),
    Fn("bernoulli.pmf", c(np.clip(K, -1, 2), 0.3), grad_args=(1,), rtol=1e-12),
    Fn("bernoulli.logpmf", c(np.clip(K, -1, 2), 0.3), grad_args=(1,), rtol=1e-12),
    Fn("bernoulli.cdf", c(np.clip(K, -1, 2), 0.3), grad_args=(), rtol=1e-12),
    Fn("bernoulli.ppf", c(Q, 0.3), grad_args=(), rtol=1e-12),
    Fn("binom.pmf", c(K, 10., 0.3), grad_args=(2,), rtol=1e-9),
    Fn("binom.logpmf", c(K, 10., 0.3), grad_args=(2,), rtol=1e-9),
    Fn("nbinom.pmf", c(K, 4., 0.3), grad_args=(1, 2), rtol=1e-9),
    Fn("nbinom.logpmf", c(K, 4., 0.3), grad_args=(1, 2), rtol=1e-9),
    Fn("geom.pmf", c(K, 0.3), grad_args=(1,), rtol=1e-12),
    Fn("geom.logpmf", c(K, 0.3), grad_args=(1,), rtol=1e-12),
    Fn("betabinom.pmf", c(K, 10., 2.5, 1.5), grad_args=(2, 3), rtol=1e-6),
    Fn("betabinom.logpmf", c(K, 10., 2.5, 1.5), grad_args=(2, 3), rtol=1e-6),
]


def _funs(rec):
    return resolve(ours_mod, rec.name), resolve(jax_mod, rec.name), resolve(scipy_mod,
                                                                             rec.name)


@pytest.mark.parametrize("rec,kind", params(RECORDS, KINDS64))
def test_generic_float64(rec, kind, x64):
    run_generic(kind, rec, *_funs(rec), check_grads)


@pytest.mark.parametrize("rec,kind", params(RECORDS, KINDS32))
def test_generic_float32(rec, kind):
    run_generic(kind, rec, *_funs(rec), check_grads)


def test_every_public_name_present():
    import types
    missing = []
    for name in dir(jax_mod):
        if name.startswith("_"):
            continue
        if not hasattr(ours_mod, name):
            missing.append(name)
        elif isinstance(getattr(jax_mod, name), types.ModuleType):
            sub = getattr(ours_mod, name)
            missing += [f"{name}.{n}" for n in dir(getattr(jax_mod, name))
                        if not n.startswith("_") and not hasattr(sub, n)]
    assert not missing, missing


# ---- multivariate ------------------------------------------------------------------------------
def test_multivariate_normal(x64):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 3))
    cov = a @ a.T + np.eye(3)
    mean = rng.normal(size=3)
    x = rng.normal(size=(4, 3))
    np.testing.assert_allclose(st.multivariate_normal.logpdf(x, mean, cov),
                               sst.multivariate_normal.logpdf(x, mean, cov), rtol=1e-10)
    np.testing.assert_allclose(st.multivariate_normal.pdf(x, mean, cov),
                               jax.scipy.stats.multivariate_normal.pdf(x, mean, cov),
                               rtol=1e-10)
    np.testing.assert_allclose(st.multivariate_normal.logpdf(x, mean, 2.0),
                               sst.multivariate_normal.logpdf(x, mean, 2.0 * np.eye(3)),
                               rtol=1e-10)
    check_grads(lambda x, m, c: st.multivariate_normal.logpdf(x, m, c @ c.T + np.eye(3)),
                (x, mean, a), order=1, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="incompatible shapes"):
        st.multivariate_normal.logpdf(x, mean, np.eye(2))


def test_dirichlet_and_multinomial(x64):
    alpha = np.array([1.5, 2., 3.])
    x = np.array([[0.2, 0.3], [0.5, 0.1], [0.3, 0.6]])
    np.testing.assert_allclose(st.dirichlet.logpdf(x, alpha), sst.dirichlet.logpdf(x, alpha),
                               rtol=1e-10)
    np.testing.assert_allclose(st.dirichlet.pdf(x[:2], alpha), sst.dirichlet.pdf(x, alpha),
                               rtol=1e-10)
    with pytest.raises(ValueError, match="one-dimensional"):
        st.dirichlet.logpdf(x, alpha[None])
    counts, p = np.array([2, 3, 5]), np.array([0.2, 0.3, 0.5])
    np.testing.assert_allclose(st.multinomial.logpmf(counts, 10, p),
                               sst.multinomial.logpmf(counts, 10, p), rtol=1e-10)
    assert st.multinomial.pmf(counts, 9, p) == 0
    with pytest.raises(ValueError, match="integer type"):
        st.multinomial.logpmf(counts.astype(float), 10, p)


def test_poisson_entropy(x64):
    mu = np.array([0., 0.5, 5., 50., 500.])
    np.testing.assert_allclose(st.poisson.entropy(mu),
                               jax.scipy.stats.poisson.entropy(mu), rtol=1e-12)
    np.testing.assert_allclose(st.poisson.entropy(mu), sst.poisson.entropy(mu), rtol=1e-6)


def test_gaussian_kde(x64):
    rng = np.random.default_rng(1)
    data = rng.normal(size=(2, 40))
    pts = rng.normal(size=(2, 5))
    ours, ref = st.gaussian_kde(data), sst.gaussian_kde(data)
    theirs = jax.scipy.stats.gaussian_kde(data)
    np.testing.assert_allclose(ours(pts), ref(pts), rtol=1e-10)
    np.testing.assert_allclose(ours.logpdf(pts), ref.logpdf(pts), rtol=1e-10)
    np.testing.assert_allclose(ours.integrate_gaussian(np.zeros(2), np.eye(2)),
                               ref.integrate_gaussian(np.zeros(2), np.eye(2)), rtol=1e-10)
    np.testing.assert_allclose(ours.integrate_kde(st.gaussian_kde(pts)),
                               ref.integrate_kde(sst.gaussian_kde(pts)), rtol=1e-10)
    one_d = st.gaussian_kde(data[0], bw_method="silverman", weights=np.arange(1., 41.))
    ref1 = sst.gaussian_kde(data[0], bw_method="silverman", weights=np.arange(1., 41.))
    np.testing.assert_allclose(one_d.integrate_box_1d(-0.5, 1.0),
                               ref1.integrate_box_1d(-0.5, 1.0), rtol=1e-10)
    key = jaxkit.random.key(0)
    np.testing.assert_allclose(ours.resample(key, (3,)),
                               theirs.resample(jax.random.key(0), (3,)), rtol=1e-10)
    # a pytree: it goes through jit
    np.testing.assert_allclose(jaxkit.jit(lambda k, p: k(p))(ours, pts), ref(pts), rtol=1e-10)


def test_mode_rankdata_sem():
    x = np.array([[3, 1, 2, 1], [2, 2, 5, 5], [0, 7, 7, 1]], np.float32)
    for axis in (0, 1, None):
        got, want = st.mode(x, axis=axis), sst.mode(x, axis=axis)
        np.testing.assert_array_equal(got.mode, want.mode)
        np.testing.assert_array_equal(got.count, want.count)
    assert st.mode(x, axis=1, keepdims=True).mode.shape == (3, 1)
    v = np.array([3., 1., 4., 1., 5., 9., 2., 6., 5.])
    for method in ("average", "min", "max", "dense", "ordinal"):
        np.testing.assert_array_equal(st.rankdata(v, method), sst.rankdata(v, method))
    np.testing.assert_array_equal(st.rankdata(x, axis=1), sst.rankdata(x, axis=1))
    assert np.isnan(st.rankdata(np.array([1., np.nan]))).all()
    np.testing.assert_allclose(st.sem(x, axis=1), sst.sem(x, axis=1), rtol=1e-6)
    np.testing.assert_allclose(st.sem(x, axis=None), sst.sem(x, axis=None), rtol=1e-6)
    with pytest.raises(ValueError, match="Illegal nan_policy"):
        st.mode(x, nan_policy="bad")
