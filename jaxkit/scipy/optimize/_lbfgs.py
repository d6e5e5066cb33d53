"""Limited-memory BFGS (Nocedal & Wright, Algorithm 7.4 with the two-loop recursion), JAX's
experimental ``'l-bfgs-experimental-do-not-rely-on-this'`` method: the last ``maxcor`` step and
gradient-change pairs stand in for the inverse Hessian."""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np

from jaxkit import dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.api import value_and_grad
from jaxkit.scipy.optimize.line_search import line_search
from jaxkit.typing import Array

_dot = partial(jnp.dot, precision=lax.Precision.HIGHEST)


class LBFGSResults(NamedTuple):
    converged: Array
    failed: Array
    k: Array
    nfev: Array
    ngev: Array
    x_k: Array
    f_k: Array
    g_k: Array
    s_history: Array
    y_history: Array
    rho_history: Array
    gamma: Array
    status: Array
    ls_status: Array


def _minimize_lbfgs(fun, x0: Array, maxiter: float | None = None, norm=np.inf,
                    maxcor: int = 10, ftol: float = 2.220446049250313e-09, gtol: float = 1e-05,
                    maxfun: float | None = None, maxgrad: float | None = None,
                    maxls: int = 20) -> LBFGSResults:
    """Minimize ``fun`` from ``x0``. Status: 0 converged, 1 maxiter, 2 maxfun, 3 maxgrad,
    4 the decrease fell below ``ftol``, 5 the line search failed."""
    d = len(x0)
    dtype = dtypes.dtype(x0)
    if maxiter is None and maxfun is None and maxgrad is None:
        maxiter = d * 200
    maxiter = np.inf if maxiter is None else maxiter
    maxfun = np.inf if maxfun is None else maxfun
    maxgrad = np.inf if maxgrad is None else maxgrad
    f_0, g_0 = value_and_grad(fun)(x0)
    state = LBFGSResults(
        converged=jnp.array(False), failed=jnp.array(False), k=0, nfev=1, ngev=1, x_k=x0,
        f_k=f_0, g_k=g_0, s_history=jnp.zeros((maxcor, d), dtype=dtype),
        y_history=jnp.zeros((maxcor, d), dtype=dtype),
        rho_history=jnp.zeros((maxcor,), dtype=dtype), gamma=jnp.ones((), dtype), status=0,
        ls_status=0)

    def body(s: LBFGSResults) -> LBFGSResults:
        p_k = _two_loop_recursion(s)
        ls = line_search(f=fun, xk=s.x_k, pk=p_k, old_fval=s.f_k, gfk=s.g_k, maxiter=maxls)
        s_k = jnp.asarray(ls.a_k).astype(p_k.dtype) * p_k
        y_k = ls.g_k - s.g_k
        rho_inv = jnp.real(_dot(y_k, s_k))
        rho_k = jnp.reciprocal(rho_inv).astype(y_k.dtype)
        gamma = rho_inv / jnp.real(_dot(jnp.conj(y_k), y_k))
        status = jnp.array(0)
        status = jnp.where(s.f_k - ls.f_k < ftol, 4, status)
        status = jnp.where(s.ngev >= maxgrad, 3, status)
        status = jnp.where(s.nfev >= maxfun, 2, status)
        status = jnp.where(s.k >= maxiter, 1, status)
        status = jnp.where(ls.failed, 5, status)
        converged = jnp.linalg.norm(ls.g_k, ord=norm) < gtol
        return s._replace(
            converged=converged, failed=(status > 0) & ~converged, k=s.k + 1,
            nfev=s.nfev + ls.nfev, ngev=s.ngev + ls.ngev,
            x_k=(s.x_k + s_k).astype(s.x_k.dtype), f_k=ls.f_k.astype(s.f_k.dtype),
            g_k=ls.g_k.astype(s.g_k.dtype), s_history=_push(s.s_history, s_k),
            y_history=_push(s.y_history, y_k), rho_history=_push(s.rho_history, rho_k),
            gamma=gamma.astype(s.g_k.dtype), status=jnp.where(converged, 0, status),
            ls_status=ls.status)

    return lax.while_loop(lambda s: ~s.converged & ~s.failed, body, state)


def _two_loop_recursion(s: LBFGSResults) -> Array:
    """The search direction ``-H g`` from the stored pairs (newest last)."""
    dtype = s.rho_history.dtype
    size = len(s.rho_history)
    used = jnp.where(s.k < size, s.k, size)

    def backward(j, carry):
        i = size - 1 - j
        q, alphas = carry
        a_i = s.rho_history[i] * _dot(jnp.conj(s.s_history[i]), q).real.astype(dtype)
        return q - a_i * jnp.conj(s.y_history[i]), alphas.at[i].set(a_i)

    q, alphas = lax.fori_loop(0, used, backward, (-jnp.conj(s.g_k),
                                                  jnp.zeros_like(s.rho_history)))
    q = s.gamma * q

    def forward(j, q):
        i = size - used + j
        b_i = s.rho_history[i] * _dot(s.y_history[i], q).real.astype(dtype)
        return q + (alphas[i] - b_i) * s.s_history[i]

    return lax.fori_loop(0, used, forward, q)


def _push(history, new):
    return jnp.roll(history, -1, axis=0).at[-1].set(new)
