"""``jaxkit.scipy.optimize.minimize`` and its ``OptimizeResults``."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from jaxkit import numpy as jnp
from jaxkit.scipy.optimize._lbfgs import _minimize_lbfgs
from jaxkit.scipy.optimize.bfgs import minimize_bfgs
from jaxkit.typing import Array


class OptimizeResults(NamedTuple):
    """The outcome of ``minimize``: the solution ``x``, ``success`` and ``status``, the
    objective ``fun`` and gradient ``jac`` there, the inverse-Hessian estimate ``hess_inv``
    (None for L-BFGS), and the counts of evaluations (``nfev``, ``njev``) and steps (``nit``)."""
    x: Array
    success: bool | Array
    status: int | Array
    fun: Array
    jac: Array
    hess_inv: Array | None
    nfev: int | Array
    njev: int | Array
    nit: int | Array


def minimize(fun: Callable, x0: Array, args: tuple = (), *, method: str,
             tol: float | None = None, options: Mapping[str, Any] | None = None
             ) -> OptimizeResults:
    """Minimize ``fun(x, *args)`` over 1-D ``x`` from ``x0`` with ``method`` 'BFGS' (or the
    experimental 'l-bfgs-experimental-do-not-rely-on-this'); ``options`` go to the method
    (``maxiter``, ``norm``, ``gtol``, ...). ``tol`` is accepted and ignored, as in JAX."""
    options = {} if options is None else options
    if not isinstance(args, tuple):
        raise TypeError("args argument to jax.scipy.optimize.minimize must be a tuple, got "
                        f"{args}")

    def objective(x):
        return fun(x, *args)

    if method.lower() == "bfgs":
        r = minimize_bfgs(objective, x0, **options)
        return OptimizeResults(x=r.x_k, success=r.converged & jnp.logical_not(r.failed),
                               status=r.status, fun=r.f_k, jac=r.g_k, hess_inv=r.H_k,
                               nfev=r.nfev, njev=r.ngev, nit=r.k)
    if method.lower() == "l-bfgs-experimental-do-not-rely-on-this":
        r = _minimize_lbfgs(objective, x0, **options)
        return OptimizeResults(x=r.x_k, success=r.converged & jnp.logical_not(r.failed),
                               status=r.status, fun=r.f_k, jac=r.g_k, hess_inv=None,
                               nfev=r.nfev, njev=r.ngev, nit=r.k)
    raise ValueError(f"Method {method} not recognized")
