"""``jaxkit.scipy.stats.gaussian_kde``: Gaussian kernel density estimation (a pytree, so it
passes through ``jit`` and ``vmap``)."""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from jaxkit import dtypes, random
from jaxkit import numpy as jnp
from jaxkit.transforms.jit import jit
from jaxkit.transforms.vmap import vmap
from jaxkit.numpy._promotion import check_arraylike
from jaxkit.scipy._util import promote_dtypes_inexact
from jaxkit.scipy.special import logsumexp, ndtr
from jaxkit.tree_util import register_pytree_node_class


def _cho_solve(chol, b):
    # (L L^T)^{-1} b by two solves with the Cholesky factor.
    return jnp.linalg.solve(chol.T, jnp.linalg.solve(chol, b))


@register_pytree_node_class
class gaussian_kde:
    """A Gaussian KDE of ``dataset`` (shape ``(d, n)``), bandwidth by Scott's or Silverman's
    rule, a scalar, or a callable of the estimator; optional ``weights``."""
    __slots__ = ("neff", "dataset", "weights", "covariance", "inv_cov")

    def __init__(self, dataset, bw_method: Any = None, weights=None):
        check_arraylike("gaussian_kde", dataset)
        dataset = jnp.atleast_2d(dataset)
        if dtypes.issubdtype(dataset.dtype, np.complexfloating):
            raise NotImplementedError("gaussian_kde does not support complex data")
        if not dataset.size > 1:
            raise ValueError("`dataset` input should have multiple elements.")
        d, n = dataset.shape
        if weights is not None:
            check_arraylike("gaussian_kde", weights)
            dataset, weights = promote_dtypes_inexact(dataset, weights)
            weights = jnp.atleast_1d(weights)
            weights = weights / jnp.sum(weights)
            if weights.ndim != 1:
                raise ValueError("`weights` input should be one-dimensional.")
            if len(weights) != n:
                raise ValueError("`weights` input should be of length n")
        else:
            dataset, = promote_dtypes_inexact(dataset)
            weights = jnp.full(n, 1.0 / n, dtype=dataset.dtype)
        self._set("dataset", dataset)
        self._set("weights", weights)
        neff = self._set("neff", 1 / jnp.sum(weights ** 2))
        bw_method = "scott" if bw_method is None else bw_method
        if isinstance(bw_method, str) and bw_method == "scott":
            factor = jnp.power(neff, -1. / (d + 4))
        elif isinstance(bw_method, str) and bw_method == "silverman":
            factor = jnp.power(neff * (d + 2) / 4.0, -1. / (d + 4))
        elif jnp.isscalar(bw_method) and not isinstance(bw_method, str):
            factor = bw_method
        elif callable(bw_method):
            factor = bw_method(self)
        else:
            raise ValueError("`bw_method` should be 'scott', 'silverman', a scalar, or a "
                             "callable.")
        data_cov = jnp.atleast_2d(jnp.cov(dataset, rowvar=1, bias=False, aweights=weights))
        self._set("covariance", data_cov * factor ** 2)
        self._set("inv_cov", jnp.linalg.inv(data_cov) / factor ** 2)

    def _set(self, name, value):
        object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field '{name}'")

    def tree_flatten(self):
        return (self.neff, self.dataset, self.weights, self.covariance, self.inv_cov), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        kde = cls.__new__(cls)
        for name, value in zip(cls.__slots__, children):
            kde._set(name, value)
        return kde

    @property
    def d(self):
        return self.dataset.shape[0]

    @property
    def n(self):
        return self.dataset.shape[1]

    def evaluate(self, points):
        """The estimated density at ``points`` (shape ``(d, m)``)."""
        check_arraylike("evaluate", points)
        points = self._reshape_points(points)
        return _kernel_eval(False, self.dataset.T, self.weights[:, None], points.T,
                            self.inv_cov)[:, 0]

    def __call__(self, points):
        return self.evaluate(points)

    def pdf(self, x):
        """Same as ``evaluate``."""
        return self.evaluate(x)

    def logpdf(self, x):
        """Log of the estimated density (a log-sum-exp over the kernels)."""
        check_arraylike("logpdf", x)
        x = self._reshape_points(x)
        return _kernel_eval(True, self.dataset.T, self.weights[:, None], x.T,
                            self.inv_cov)[:, 0]

    def integrate_gaussian(self, mean, cov):
        """The integral of the estimate times a Gaussian of ``mean`` and ``cov``."""
        mean = jnp.atleast_1d(jnp.squeeze(mean))
        cov = jnp.atleast_2d(cov)
        if mean.shape != (self.d,):
            raise ValueError(f"mean does not have dimension {self.d}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"covariance does not have dimension {self.d}")
        chol = jnp.linalg.cholesky(self.covariance + cov)
        norm = 1.0 / (jnp.sqrt(2 * np.pi) ** self.d * jnp.prod(jnp.diag(chol)))
        return _kernel_convolve(chol, norm, self.dataset, self.weights, mean)

    @partial(jit, static_argnums=())
    def integrate_box_1d(self, low, high):
        """The mass of a 1-D estimate between ``low`` and ``high``."""
        if self.d != 1:
            raise ValueError("integrate_box_1d() only handles 1D pdfs")
        if np.ndim(low) != 0 or np.ndim(high) != 0:
            raise ValueError("the limits of integration in integrate_box_1d must be scalars")
        sigma = jnp.squeeze(jnp.sqrt(self.covariance))
        low = jnp.squeeze((low - self.dataset) / sigma)
        high = jnp.squeeze((high - self.dataset) / sigma)
        return jnp.sum(self.weights * (ndtr(high) - ndtr(low)))

    def integrate_kde(self, other):
        """The integral of the product of two estimates."""
        if other.d != self.d:
            raise ValueError("KDEs are not the same dimensionality")
        chol = jnp.linalg.cholesky(self.covariance + other.covariance)
        norm = 1.0 / (jnp.sqrt(2 * np.pi) ** self.d * jnp.prod(jnp.diag(chol)))
        small, large = (self, other) if self.n < other.n else (other, self)
        result = vmap(partial(_kernel_convolve, chol, norm, large.dataset, large.weights),
                      in_axes=1)(small.dataset)
        return jnp.sum(result * small.weights)

    @partial(jit, static_argnames=("shape",))
    def resample(self, key, shape=()):
        """Draw ``shape`` samples (result shape ``(d, *shape)``)."""
        ind_key, eps_key = random.split(key)
        ind = random.choice(ind_key, self.n, shape=shape, p=self.weights)
        eps = random.multivariate_normal(eps_key, jnp.zeros(self.d, self.covariance.dtype),
                                         self.covariance, shape=shape,
                                         dtype=self.dataset.dtype).T
        return self.dataset[:, ind] + eps

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        raise NotImplementedError("only 1D box integrations are supported; use "
                                  "`integrate_box_1d`")

    def set_bandwidth(self, bw_method=None):
        raise NotImplementedError("dynamically changing the bandwidth method is not supported")

    def _reshape_points(self, points):
        if dtypes.issubdtype(jnp.asarray(points).dtype, np.complexfloating):
            raise NotImplementedError("gaussian_kde does not support complex coordinates")
        points = jnp.atleast_2d(points)
        d, m = points.shape
        if d != self.d:
            if d == 1 and m == self.d:
                return jnp.reshape(points, (self.d, 1))
            raise ValueError(f"points have dimension {d}, dataset has dimension {self.d}")
        return points


def _kernel_convolve(chol, norm, target, weights, mean):
    diff = target - mean[:, None]
    arg = 0.5 * jnp.sum(diff * _cho_solve(chol, diff), axis=0)
    return norm * jnp.sum(jnp.exp(-arg) * weights)


@partial(jit, static_argnums=0)
def _kernel_eval(in_log, points, values, xi, precision):
    points, values, xi, precision = promote_dtypes_inexact(points, values, xi, precision)
    d = points.shape[1]
    if xi.shape[1] != d:
        raise ValueError("points and xi must have same trailing dim")
    if precision.shape != (d, d):
        raise ValueError("precision matrix must match data dims")
    whitening = jnp.linalg.cholesky(precision)
    points, xi = jnp.dot(points, whitening), jnp.dot(xi, whitening)
    log_norm = jnp.sum(jnp.log(jnp.diag(whitening))) - 0.5 * d * jnp.log(2 * np.pi)

    def kernel(x_test, x_train, y_train):
        arg = log_norm - 0.5 * jnp.sum(jnp.square(x_train - x_test))
        return jnp.log(y_train) + arg if in_log else y_train * jnp.exp(arg)

    reduce = logsumexp if in_log else jnp.sum
    return vmap(lambda x: reduce(vmap(kernel, in_axes=(None, 0, 0))(x, points, values),
                                 axis=0))(xi)
