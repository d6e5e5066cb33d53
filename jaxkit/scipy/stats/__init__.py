"""``jaxkit.scipy.stats``: probability distributions (one module per distribution, each with
the functions JAX 0.10.2 gives it), ``gaussian_kde``, and ``mode``, ``rankdata``, ``sem``."""
# ruff: noqa: F401
from jaxkit.scipy.stats import (
                                bernoulli,
                                beta,
                                betabinom,
                                binom,
                                cauchy,
                                chi2,
                                dirichlet,
                                expon,
                                gamma,
                                gennorm,
                                geom,
                                gumbel_l,
                                gumbel_r,
                                laplace,
                                logistic,
                                multinomial,
                                multivariate_normal,
                                nbinom,
                                norm,
                                pareto,
                                poisson,
                                t,
                                truncnorm,
                                uniform,
                                vonmises,
                                wrapcauchy,
)
from jaxkit.scipy.stats._core import mode, rankdata, sem
from jaxkit.scipy.stats.kde import gaussian_kde
