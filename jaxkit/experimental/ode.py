"""``jax.experimental.ode.odeint``: adaptive Dormand-Prince 5(4) integration of
``dy/dt = func(y, t, *args)`` for pytrees ``y``, with gradients by the adjoint method.

The forward pass is one ``lax.scan`` over the output times, each step a ``lax.while_loop``
taking adaptive steps until it passes the output time; the value there is read from the
quartic that interpolates the last step (Shampine's dense output). Reverse mode does not
differentiate through these loops: a ``custom_vjp`` integrates the adjoint system backwards
between consecutive output times (Pontryagin; Chen et al. 2018), so memory does not grow with
the number of steps.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from functools import partial

import numpy as np

from jaxkit import core, lax
from jaxkit import tree_util
from jaxkit import numpy as jnp
from jaxkit.api import vjp
from jaxkit.transforms.custom_derivatives import closure_convert
from jaxkit.transforms.custom_vjp import custom_vjp

__all__ = ["odeint"]

# ---- the Dormand-Prince 5(4) tableau and its dense output ------------------------------------
_NODES = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_STAGES = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
)
_FIFTH = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_FOURTH = (5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40)
_ERROR = tuple(a - b for a, b in zip(_FIFTH, _FOURTH))
# the stage weights of y at the step's midpoint (Shampine's 4th-order dense output)
_MIDPOINT = (6025192743 / 30085553152 / 2, 0.0, 51252292925 / 65400821598 / 2,
             -2691868925 / 45128329728 / 2, 187940372067 / 1594534317056 / 2,
             -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2)


# ---- pytree arithmetic ------------------------------------------------------------------------
def _combine(base, dt, weights, stages):
    """``base + dt * sum(w_i k_i)`` over pytrees (zero weights skipped)."""
    def leaf(b, *ks):
        total = sum(w * k for w, k in zip(weights, ks) if w != 0)
        return b + (dt * total).astype(b.dtype)
    return tree_util.tree_map(leaf, base, *stages)


def _rms(tree) -> jnp.ndarray:
    """The root mean square over every entry of every leaf."""
    leaves = tree_util.tree_leaves(tree)
    total = sum(jnp.sum(jnp.real(x * jnp.conj(x))) for x in leaves)
    return jnp.sqrt(total / sum(np.size(x) for x in leaves))


# ---- one step, its error, the step size -----------------------------------------------------
def _dopri_step(fun, y, f, t, dt):
    """One Dormand-Prince step: the 5th-order value, its derivative there, the embedded error
    estimate and the seven stage derivatives."""
    stages = [f]
    for node, weights in zip(_NODES[1:], _STAGES[1:]):
        stages.append(fun(_combine(y, dt, weights, stages), t + node * dt))
    next_y = _combine(y, dt, _FIFTH, stages)  # equals the last stage's argument (FSAL)
    error = _combine(tree_util.tree_map(jnp.zeros_like, y), dt, _ERROR, stages)
    return next_y, stages[-1], error, stages


def _error_ratio(error, rtol, atol, y, next_y):
    tol = tree_util.tree_map(lambda a, b: atol + rtol * jnp.maximum(jnp.abs(a), jnp.abs(b)),
                             y, next_y)
    return _rms(tree_util.tree_map(lambda e, s: e / s, error, tol))


def _next_step(dt, ratio, safety=0.9, grow=10.0, shrink=0.2, order=5.0):
    """The step size after a step of size ``dt`` with error ratio ``ratio`` (1 = at tol)."""
    floor = jnp.where(ratio < 1, 1.0, shrink)
    factor = jnp.minimum(grow, jnp.maximum(safety * ratio ** (-1.0 / order), floor))
    return jnp.where(ratio == 0, dt * grow, dt * factor)


def _first_step(fun, t0, y0, f0, rtol, atol, order=4):
    """Hairer, Norsett and Wanner's starting step: from the sizes of y0, f(y0) and an
    estimate of the second derivative."""
    scale = tree_util.tree_map(lambda y: atol + jnp.abs(y) * rtol, y0)
    d0 = _rms(tree_util.tree_map(operator.truediv, y0, scale))
    d1 = _rms(tree_util.tree_map(operator.truediv, f0, scale))
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = fun(_combine(y0, h0, (1.0,), [f0]), t0 + h0)
    d2 = _rms(tree_util.tree_map(lambda a, b, s: (a - b) / s, f1, f0, scale)) / h0
    h1 = jnp.where((d1 <= 1e-15) & (d2 <= 1e-15), jnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / jnp.maximum(d1, d2)) ** (1.0 / (order + 1.0)))
    return jnp.minimum(100 * h0, h1)


def _quartic(y0, y1, stages, dt):
    """Coefficients (highest power first) of the quartic in s = (t - t0) / dt through y0 and
    y1, with the step's end slopes and its midpoint value."""
    mid = _combine(y0, dt, _MIDPOINT, stages)
    dy0, dy1 = stages[0], stages[-1]

    def leaf(a0, a1, am, d0, d1):
        d0, d1 = dt * d0, dt * d1
        return jnp.stack([-2 * d0 + 2 * d1 - 8 * a0 - 8 * a1 + 16 * am,
                          5 * d0 - 3 * d1 + 18 * a0 + 14 * a1 - 32 * am,
                          -4 * d0 + d1 - 11 * a0 - 5 * a1 + 16 * am,
                          d0, a0]).astype(a0.dtype)
    return tree_util.tree_map(leaf, y0, y1, mid, dy0, dy1)


def _evaluate(coefficients, s):
    def leaf(c):
        out = c[0]
        for row in c[1:]:
            out = out * s + row
        return out
    return tree_util.tree_map(leaf, coefficients)


# ---- the integrator ---------------------------------------------------------------------------
def odeint(func: Callable, y0, t, *args, rtol: float = 1.4e-8, atol: float = 1.4e-8,
           mxstep: float = jnp.inf, hmax: float = jnp.inf):
    """Integrate ``dy/dt = func(y, t, *args)`` from ``y(t[0]) = y0``; returns ``y`` at each
    time of the increasing array ``t`` (leading axis), a pytree like ``y0``.

    ``rtol``/``atol`` bound the local error of each step; ``mxstep`` the number of steps
    between two output times and ``hmax`` the step size. ``args`` must be arrays (or pytrees
    of them); differentiable in ``y0``, ``t``, ``args`` and values ``func`` closes over."""
    for arg in tree_util.tree_leaves(args):
        if not isinstance(arg, core.Tracer) and not core.is_array_like(arg):
            raise TypeError(f"The contents of odeint *args must be arrays or scalars, but got "
                            f"{arg!r}. Pass a non-array parameter by closing over it (a "
                            f"lambda or functools.partial) instead.")
    y0 = tree_util.tree_map(_inexact, y0)
    t = jnp.asarray(t)
    if t.ndim != 1:
        raise ValueError(f"odeint expects t to be a 1-D array of times, got shape {t.shape}.")
    converted, consts = closure_convert(func, y0, t[0], *args)
    return _odeint(converted, rtol, atol, mxstep, hmax, y0, t, *args, *consts)


def _inexact(x):
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(float)


@partial(custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    return _integrate(func, rtol, atol, mxstep, hmax, y0, ts, *args)


def _integrate(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    fun = lambda y, t: func(y, t, *args)  # noqa: E731
    ts = ts.astype(jnp.result_type(ts.dtype, float))

    def to_time(carry, target):
        def keep_going(state):
            steps, _, _, t, dt, _, _ = state
            return (t < target) & (steps < mxstep) & (dt > 0)

        def step(state):
            steps, y, f, t, dt, last_t, coefficients = state
            next_y, next_f, error, stages = _dopri_step(fun, y, f, t, dt)
            ratio = _error_ratio(error, rtol, atol, y, next_y)
            new_dt = jnp.clip(_next_step(dt, ratio), 0, hmax)
            accepted = (steps + 1, next_y, next_f, t + dt, new_dt, t,
                        _quartic(y, next_y, stages, dt))
            rejected = (steps + 1, y, f, t, new_dt, last_t, coefficients)
            return tree_util.tree_map(partial(jnp.where, ratio <= 1), accepted, rejected)

        _, *carry = lax.while_loop(keep_going, step, (0, *carry))
        _, _, t, _, last_t, coefficients = carry
        return carry, _evaluate(coefficients, (target - last_t) / (t - last_t))

    f0 = fun(y0, ts[0])
    dt = jnp.clip(_first_step(fun, ts[0], y0, f0, rtol, atol), 0, hmax)
    flat = tree_util.tree_map(lambda y: jnp.stack([y] * 5), y0)  # a constant until a step
    init = [y0, f0, ts[0], dt, ts[0], flat]
    _, ys = lax.scan(to_time, init, ts[1:])
    return tree_util.tree_map(lambda first, rest: jnp.concatenate([first[None], rest]), y0, ys)


def _odeint_fwd(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    ys = _integrate(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _odeint_rev(func, rtol, atol, mxstep, hmax, residuals, g):
    """The adjoint method: between consecutive output times, integrate backwards in time
    (as forwards in -t) the state with its cotangent and the cotangents of t and args."""
    ys, ts, args = residuals
    ts = jnp.asarray(ts)  # indexed by the loop counter below
    at = lambda tree, i: tree_util.tree_map(operator.itemgetter(i), tree)  # noqa: E731

    def adjoint_dynamics(state, minus_t, *args):
        y, y_bar, *_ = state
        y_dot, pullback = vjp(func, y, -minus_t, *args)
        y_ct, t_ct, *args_ct = pullback(y_bar)  # the state's structure: args' as one tuple
        return tree_util.tree_map(operator.neg, y_dot), y_ct, t_ct, tuple(args_ct)

    def back_one_interval(carry, i):
        y_bar, t0_bar, args_bar = carry
        # moving output time i moves y(t_i) along f: its cotangent is <f, g_i>
        f_i = func(at(ys, i), ts[i], *args)
        t_bar = sum(jnp.sum(a * b) for a, b in zip(tree_util.tree_leaves(f_i),
                                                     tree_util.tree_leaves(at(g, i))))
        t0_bar = t0_bar - t_bar
        _, y_bar, t0_bar, args_bar = odeint(
            adjoint_dynamics, (at(ys, i), y_bar, t0_bar, args_bar),
            jnp.stack([-ts[i], -ts[i - 1]]), *args, rtol=rtol, atol=atol, mxstep=mxstep,
            hmax=hmax)
        y_bar, t0_bar, args_bar = at((y_bar, t0_bar, args_bar), 1)
        y_bar = tree_util.tree_map(operator.add, y_bar, at(g, i - 1))
        return (y_bar, t0_bar, args_bar), t_bar

    n = ts.shape[0]
    init = (at(g, n - 1), jnp.zeros((), ts.dtype), tree_util.tree_map(jnp.zeros_like, args))
    (y_bar, t0_bar, args_bar), reversed_ts_bar = lax.scan(back_one_interval, init,
                                                          jnp.arange(n - 1, 0, -1))
    ts_bar = jnp.concatenate([t0_bar[None].astype(ts.dtype),
                              reversed_ts_bar[::-1].astype(ts.dtype)])
    return (y_bar, ts_bar, *args_bar)


_odeint.defvjp(_odeint_fwd, _odeint_rev)
