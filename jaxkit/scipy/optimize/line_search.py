"""The strong-Wolfe line search of Nocedal & Wright (Algorithms 3.5 and 3.6), as
``jax.scipy.optimize`` runs it inside BFGS: a bracketing phase that doubles the step, then a
zoom phase interpolating (cubic, else quadratic, else bisection) inside the bracket. Both
phases are ``while`` loops over NamedTuple states, so the whole search traces once."""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

from jaxkit import dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.api import value_and_grad
from jaxkit.scipy._util import promote_dtypes_inexact
from jaxkit.typing import Array

_dot = partial(jnp.dot, precision=lax.Precision.HIGHEST)


def _cubic_minimizer(a, fa, fpa, b, fb, c, fc):
    """The minimizer of the cubic through (a, fa) with slope fpa, (b, fb) and (c, fc)."""
    dtype = dtypes.result_type(a, fa, fpa, b, fb, c, fc)
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    d1 = jnp.array([[dc ** 2, -db ** 2], [-dc ** 3, db ** 3]], dtype=dtype)
    d2 = jnp.array([fb - fa - fpa * db, fc - fa - fpa * dc], dtype=dtype)
    A, B = _dot(d1, d2) / denom
    return a + (-B + jnp.sqrt(B * B - 3. * A * fpa)) / (3. * A)


def _quadratic_minimizer(a, fa, fpa, b, fb):
    """The minimizer of the parabola through (a, fa) with slope fpa and (b, fb)."""
    db = b - a
    B = (fb - fa - fpa * db) / (db ** 2)
    return a - fpa / (2. * B)


def _where_update(pred, state: NamedTuple, **new) -> NamedTuple:
    return state._replace(**{k: jnp.where(pred, v, getattr(state, k)) for k, v in new.items()})


class _ZoomState(NamedTuple):
    done: Array
    failed: Array
    j: Array
    a_lo: Array
    phi_lo: Array
    dphi_lo: Array
    a_hi: Array
    phi_hi: Array
    dphi_hi: Array
    a_rec: Array
    phi_rec: Array
    a_star: Array
    phi_star: Array
    dphi_star: Array
    g_star: Array
    nfev: Array
    ngev: Array


def _zoom(phi_and_grad, wolfe_one, wolfe_two, a_lo, phi_lo, dphi_lo, a_hi, phi_hi, dphi_hi,
          g_0, skip):
    """Algorithm 3.6: shrink [a_lo, a_hi] until a step satisfies the strong Wolfe conditions
    (does nothing where ``skip``)."""
    # Step sizes carry the dtype of the step found so far (a weak Python 0. or 1. would not
    # match the loop body's outputs).
    step = partial(jnp.asarray, dtype=jnp.result_type(a_lo, a_hi))
    state = _ZoomState(done=False, failed=False, j=0, a_lo=step(a_lo), phi_lo=phi_lo,
                       dphi_lo=dphi_lo, a_hi=step(a_hi), phi_hi=phi_hi, dphi_hi=dphi_hi,
                       a_rec=step((a_lo + a_hi) / 2.), phi_rec=(phi_lo + phi_hi) / 2.,
                       a_star=step(1.), phi_star=phi_lo, dphi_star=dphi_lo, g_star=g_0, nfev=0,
                       ngev=0)
    delta1, delta2 = 0.2, 0.1  # how far inside the bracket the cubic/quadratic step must be

    def body(s: _ZoomState) -> _ZoomState:
        width = s.a_hi - s.a_lo
        lo, hi = jnp.minimum(s.a_hi, s.a_lo), jnp.maximum(s.a_hi, s.a_lo)
        cubic_margin, quad_margin = delta1 * width, delta2 * width
        threshold = jnp.where(dtypes.finfo(width.dtype).bits < 64, 1e-5, 1e-10)
        s = s._replace(failed=s.failed | (width <= threshold))
        a_cubic = _cubic_minimizer(s.a_lo, s.phi_lo, s.dphi_lo, s.a_hi, s.phi_hi, s.a_rec,
                                   s.phi_rec)
        use_cubic = (s.j > 0) & (a_cubic > lo + cubic_margin) & (a_cubic < hi - cubic_margin)
        a_quad = _quadratic_minimizer(s.a_lo, s.phi_lo, s.dphi_lo, s.a_hi, s.phi_hi)
        use_quad = ~use_cubic & (a_quad > lo + quad_margin) & (a_quad < hi - quad_margin)
        use_bisection = ~use_cubic & ~use_quad
        a_j = jnp.where(use_cubic, a_cubic, s.a_rec)
        a_j = jnp.where(use_quad, a_quad, a_j)
        a_j = jnp.where(use_bisection, (s.a_lo + s.a_hi) / 2., a_j)
        phi_j, dphi_j, g_j = phi_and_grad(a_j)
        phi_j, dphi_j = phi_j.astype(s.phi_lo.dtype), dphi_j.astype(s.dphi_lo.dtype)
        g_j = g_j.astype(s.g_star.dtype)
        s = s._replace(nfev=s.nfev + 1, ngev=s.ngev + 1)
        hi_to_j = wolfe_one(a_j, phi_j) | (phi_j >= s.phi_lo)
        star_to_j = wolfe_two(dphi_j) & ~hi_to_j
        hi_to_lo = (dphi_j * (s.a_hi - s.a_lo) >= 0.) & ~hi_to_j & ~star_to_j
        lo_to_j = ~hi_to_j & ~star_to_j
        s = _where_update(hi_to_j, s, a_hi=a_j, phi_hi=phi_j, dphi_hi=dphi_j, a_rec=s.a_hi,
                          phi_rec=s.phi_hi)
        s = _where_update(star_to_j, s._replace(done=star_to_j | s.done), a_star=a_j,
                          phi_star=phi_j, dphi_star=dphi_j, g_star=g_j)
        s = _where_update(hi_to_lo, s, a_hi=s.a_lo, phi_hi=s.phi_lo, dphi_hi=s.dphi_lo,
                          a_rec=s.a_hi, phi_rec=s.phi_hi)
        s = _where_update(lo_to_j & ~hi_to_lo, s, a_rec=s.a_lo, phi_rec=s.phi_lo)
        s = _where_update(lo_to_j, s, a_lo=a_j, phi_lo=phi_j, dphi_lo=dphi_j)
        s = s._replace(j=s.j + 1)
        return s._replace(failed=s.failed | (s.j >= 30))

    return lax.while_loop(lambda s: ~s.done & ~skip & ~s.failed, body, state)


class _LineSearchState(NamedTuple):
    done: Array
    failed: Array
    i: Array
    a_i1: Array
    phi_i1: Array
    dphi_i1: Array
    nfev: Array
    ngev: Array
    a_star: Array
    phi_star: Array
    dphi_star: Array
    g_star: Array


class _LineSearchResults(NamedTuple):
    failed: Array
    nit: Array
    nfev: Array
    ngev: Array
    k: Array
    a_k: Array
    f_k: Array
    g_k: Array
    status: Array


def line_search(f, xk, pk, old_fval=None, old_old_fval=None, gfk=None, c1=1e-4, c2=0.9,
                maxiter=20) -> _LineSearchResults:
    """Algorithm 3.5: a step along ``pk`` from ``xk`` satisfying the strong Wolfe conditions
    (sufficient decrease ``c1``, curvature ``c2``)."""
    xk, pk = promote_dtypes_inexact(xk, pk)

    def phi_and_grad(t):
        t = jnp.array(t, dtype=pk.dtype)
        phi, g = value_and_grad(f)(xk + t * pk)
        return phi, jnp.real(_dot(g, pk)), g

    if old_fval is None or gfk is None:
        phi_0, dphi_0, gfk = phi_and_grad(0)
    else:
        phi_0, dphi_0 = old_fval, jnp.real(_dot(gfk, pk))
    if old_old_fval is not None:
        candidate = 1.01 * 2 * (phi_0 - old_old_fval) / dphi_0
        start = jnp.where(candidate > 1, 1.0, candidate)
    else:
        start = 1

    def wolfe_one(a_i, phi_i):
        return phi_i > phi_0 + c1 * a_i * dphi_0

    def wolfe_two(dphi_i):
        return jnp.abs(dphi_i) <= -c2 * dphi_0

    counted = 1 if (old_fval is None or gfk is None) else 0
    step_dtype = jnp.result_type(start, dphi_0)
    state = _LineSearchState(done=jnp.array(False), failed=jnp.array(False), i=1,
                             a_i1=jnp.zeros((), step_dtype),
                             phi_i1=phi_0, dphi_i1=dphi_0, nfev=counted, ngev=counted,
                             a_star=jnp.zeros((), step_dtype), phi_star=phi_0,
                             dphi_star=dphi_0, g_star=gfk)
    star_keys = ("a_star", "phi_star", "dphi_star", "g_star")

    def body(s: _LineSearchState) -> _LineSearchState:
        a_i = jnp.where(s.i == 1, start, s.a_i1 * 2.)
        phi_i, dphi_i, g_i = phi_and_grad(a_i)
        s = s._replace(nfev=s.nfev + 1, ngev=s.ngev + 1)
        to_zoom1 = wolfe_one(a_i, phi_i) | ((phi_i >= s.phi_i1) & (s.i > 1))
        to_i = wolfe_two(dphi_i) & ~to_zoom1
        to_zoom2 = (dphi_i >= 0.) & ~to_zoom1 & ~to_i
        zoom1 = _zoom(phi_and_grad, wolfe_one, wolfe_two, s.a_i1, s.phi_i1, s.dphi_i1, a_i,
                      phi_i, dphi_i, gfk, ~to_zoom1)
        s = s._replace(nfev=s.nfev + zoom1.nfev, ngev=s.ngev + zoom1.ngev)
        zoom2 = _zoom(phi_and_grad, wolfe_one, wolfe_two, a_i, phi_i, dphi_i, s.a_i1,
                      s.phi_i1, s.dphi_i1, gfk, ~to_zoom2)
        s = s._replace(nfev=s.nfev + zoom2.nfev, ngev=s.ngev + zoom2.ngev)
        s = _where_update(to_zoom1, s._replace(done=to_zoom1 | s.done,
                                               failed=(to_zoom1 & zoom1.failed) | s.failed),
                          **{k: getattr(zoom1, k) for k in star_keys})
        s = _where_update(to_i, s._replace(done=to_i | s.done), a_star=a_i, phi_star=phi_i,
                          dphi_star=dphi_i, g_star=g_i)
        s = _where_update(to_zoom2, s._replace(done=to_zoom2 | s.done,
                                               failed=(to_zoom2 & zoom2.failed) | s.failed),
                          **{k: getattr(zoom2, k) for k in star_keys})
        return s._replace(i=s.i + 1, a_i1=a_i, phi_i1=phi_i, dphi_i1=dphi_i)

    state = lax.while_loop(lambda s: ~s.done & (s.i <= maxiter) & ~s.failed, body, state)
    status = jnp.where(state.failed, jnp.array(1),
                       jnp.where(state.i > maxiter, jnp.array(3), jnp.array(0)))
    alpha = jnp.asarray(state.a_star)
    # In single precision a vanishing step would stall BFGS: keep at least 1e-8.
    alpha = jnp.where((dtypes.finfo(alpha.dtype).bits != 64) & (jnp.abs(alpha) < 1e-8),
                      jnp.sign(alpha) * 1e-8, alpha)
    return _LineSearchResults(failed=state.failed | ~state.done, nit=state.i - 1,
                              nfev=state.nfev, ngev=state.ngev, k=state.i, a_k=alpha,
                              f_k=state.phi_star, g_k=state.g_star, status=status)
