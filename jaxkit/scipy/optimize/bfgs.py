"""BFGS (Nocedal & Wright, Algorithm 6.1) as ``jax.scipy.optimize`` runs it: the inverse
Hessian approximation is updated after each strong-Wolfe line search, all inside one
``while`` loop."""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.api import value_and_grad
from jaxkit.scipy.optimize.line_search import line_search
from jaxkit.typing import Array

_dot = partial(jnp.dot, precision=lax.Precision.HIGHEST)
_einsum = partial(jnp.einsum, precision=lax.Precision.HIGHEST)


class _BFGSResults(NamedTuple):
    converged: Array
    failed: Array
    k: Array
    nfev: Array
    ngev: Array
    nhev: Array
    x_k: Array
    f_k: Array
    g_k: Array
    H_k: Array
    old_old_fval: Array
    status: Array
    line_search_status: Array


def minimize_bfgs(fun, x0: Array, maxiter: int | None = None, norm=np.inf, gtol: float = 1e-5,
                  line_search_maxiter: int = 10) -> _BFGSResults:
    """Minimize ``fun`` from ``x0`` (1-D) until ``norm(grad) < gtol`` or ``maxiter`` steps
    (default ``200 * size``). Status: 0 converged, 1 out of iterations, 2 + the line search's
    status when it failed."""
    if maxiter is None:
        maxiter = np.size(x0) * 200
    d = x0.shape[0]
    f_0, g_0 = value_and_grad(fun)(x0)
    state = _BFGSResults(
        converged=jnp.linalg.norm(g_0, ord=norm) < gtol, failed=False, k=0, nfev=1, ngev=1,
        nhev=0, x_k=x0, f_k=f_0, g_k=g_0, H_k=jnp.eye(d, dtype=x0.dtype),
        old_old_fval=f_0 + jnp.linalg.norm(g_0) / 2, status=0, line_search_status=0)

    def cond(s):
        return ~s.converged & ~s.failed & (s.k < maxiter)

    def body(s):
        p_k = -_dot(s.H_k, s.g_k)
        ls = line_search(fun, s.x_k, p_k, old_fval=s.f_k, old_old_fval=s.old_old_fval,
                         gfk=s.g_k, maxiter=line_search_maxiter)
        s = s._replace(nfev=s.nfev + ls.nfev, ngev=s.ngev + ls.ngev, failed=ls.failed,
                       line_search_status=ls.status)
        s_k = ls.a_k * p_k
        y_k = ls.g_k - s.g_k
        rho_k = jnp.reciprocal(_dot(y_k, s_k))
        w = jnp.eye(d, dtype=rho_k.dtype) - rho_k * (s_k[:, None] * y_k[None, :])
        h_next = _einsum("ij,jk,lk", w, s.H_k, w) + rho_k * s_k[:, None] * s_k[None, :]
        h_next = jnp.where(jnp.isfinite(rho_k), h_next, s.H_k)
        return s._replace(converged=jnp.linalg.norm(ls.g_k, ord=norm) < gtol, k=s.k + 1,
                          x_k=s.x_k + s_k, f_k=ls.f_k, g_k=ls.g_k, H_k=h_next,
                          old_old_fval=s.f_k)

    state = lax.while_loop(cond, body, state)
    status = jnp.where(state.converged, 0, jnp.where(
        state.k == maxiter, 1, jnp.where(state.failed, 2 + state.line_search_status, -1)))
    return state._replace(status=status)
