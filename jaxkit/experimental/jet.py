"""``jax.experimental.jet``: Taylor-mode automatic differentiation, and its per-primitive rules.

The trace, the ``jet`` entry point and the ``def*`` helpers are in ``_jet_trace``; this module
registers a rule for each primitive that JAX's jet covers (same names, same recurrences on
unscaled Taylor coefficients) and is the public face of both. Most rules propagate series
with the classic recurrences of Griewank & Walther, "Evaluating Derivatives", ch. 13: for
``v = f(u)`` with a known ``f'``, ``k v_k = sum_j j u_j c_{k-j}`` where ``c`` is the series
of ``f'(u)`` (``chain_from_derivative``).
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from jaxkit import core, lax
from jaxkit import numpy as jnp
from jaxkit.experimental._jet_trace import (
    JetTrace,
    JetTracer,
    ZeroSeries,
    ZeroTerm,
    chain_from_derivative,
    def_comp,
    def_deriv,
    deflinear,
    defzero,
    deriv_prop,
    fact,
    jet,
    jet2,
    jet_jaxpr,
    jet_rules,
    linear_prop,
    zero_prop,
    zero_series,
    zero_term,
)
from jaxkit.interpreters import ad
from jaxkit.transforms.custom_derivatives import custom_jvp_call_p
from jaxkit.transforms.custom_vjp import custom_vjp_call_p
from jaxkit.runtime.sharding import UNSPECIFIED
from jaxkit.transforms.jit import jit_p
# Names JAX's jet module imports and so exposes; kept for code that reaches them there.
from jaxkit._util import safe_zip, unzip2, weakref_lru_cache  # noqa: F401
from jaxkit.tree_util import (register_pytree_node, tree_flatten,  # noqa: F401
                              tree_structure, tree_unflatten, treedef_is_leaf)

__all__ = ["JetTrace", "JetTracer", "ZeroSeries", "ZeroTerm", "def_comp", "def_deriv",
           "deflinear", "defzero", "deriv_prop", "fact", "jet", "jet2", "jet_rules",
           "linear_prop", "zero_prop", "zero_series", "zero_term"]

# The public classes print (and pickle) as members of this module, where JAX has them.
for _cls in (JetTrace, JetTracer, ZeroSeries, ZeroTerm):
    _cls.__module__ = __name__
del _cls

# ---- outputs whose series is zero: comparisons, rounding, bit operations ----
for _p in (lax.le_p, lax.lt_p, lax.gt_p, lax.ge_p, lax.eq_p, lax.ne_p, lax.not_p, lax.and_p,
           lax.or_p, lax.xor_p, lax.floor_p, lax.ceil_p, lax.round_p, lax.sign_p,
           lax.stop_gradient_p, lax.is_finite_p, lax.shift_left_p, lax.shift_right_arithmetic_p,
           lax.shift_right_logical_p, lax.bitcast_convert_type_p):
    defzero(_p)

# ---- linear primitives: each coefficient goes through the primitive ----
for _p in (lax.neg_p, lax.real_p, lax.complex_p, lax.conj_p, lax.imag_p, lax.add_p,
           ad.add_jaxvals_p, lax.sub_p, lax.convert_element_type_p, lax.broadcast_in_dim_p,
           lax.concatenate_p, lax.split_p, lax.stack_p, lax.unstack_p, lax.pad_p, lax.reshape_p,
           lax.squeeze_p, lax.rev_p, lax.transpose_p, lax.slice_p, lax.reduce_sum_p,
           lax.reduce_window_sum_p, lax.fft_p, lax.copy_p, lax.device_put_p, lax.cumsum_p):
    deflinear(_p)
del _p


# ---- indexing: linear in the operand (and update), the indices are carried along ----
def _dynamic_slice_jet_rule(primals_in, series_in, **params):
    operand, *starts = primals_in
    primal_out = lax.dynamic_slice_p.bind(operand, *starts, **params)
    series_out = [lax.dynamic_slice_p.bind(t, *starts, **params) for t in series_in[0]]
    return primal_out, series_out


jet_rules[lax.dynamic_slice_p] = _dynamic_slice_jet_rule


def _dynamic_update_slice_jet_rule(primals_in, series_in, **params):
    operand, update, *starts = primals_in
    primal_out = lax.dynamic_update_slice_p.bind(operand, update, *starts, **params)
    series_out = [lax.dynamic_update_slice_p.bind(t, u, *starts, **params)
                  for t, u in zip(series_in[0], series_in[1])]
    return primal_out, series_out


jet_rules[lax.dynamic_update_slice_p] = _dynamic_update_slice_jet_rule


def _gather_jet_rule(primals_in, series_in, **params):
    operand, indices = primals_in
    primal_out = lax.gather_p.bind(operand, indices, **params)
    return primal_out, [lax.gather_p.bind(t, indices, **params) for t in series_in[0]]


jet_rules[lax.gather_p] = _gather_jet_rule


def _scatter_add_jet_rule(primals_in, series_in, **params):
    operand, indices, updates = primals_in
    primal_out = lax.scatter_add_p.bind(operand, indices, updates, **params)
    series_out = [lax.scatter_add_p.bind(t, indices, u, **params)
                  for t, u in zip(series_in[0], series_in[2])]
    return primal_out, series_out


jet_rules[lax.scatter_add_p] = _scatter_add_jet_rule


# ---- cumulative products/extrema: through the parallel prefix scan, which is differentiable
# to every order (the windowed reduction that may implement them is not) ----
def _cumulative_jet_rule(primals_in, series_in, *, axis: int, reverse: bool,
                         combine_fn: Callable):
    scan = partial(lax.associative_scan, combine_fn, axis=axis, reverse=reverse)
    return jet2(scan, primals_in, series_in)


jet_rules[lax.cumprod_p] = partial(_cumulative_jet_rule, combine_fn=lax.mul)
jet_rules[lax.cummax_p] = partial(_cumulative_jet_rule, combine_fn=lax.max)
jet_rules[lax.cummin_p] = partial(_cumulative_jet_rule, combine_fn=lax.min)


# ---- functions given by their derivative, or as compositions ----
def _erf_derivative(x):
    return lax.mul(lax.full_like(x, 2. / np.sqrt(np.pi)), lax.exp(lax.neg(lax.square(x))))


def_deriv(lax.erf_p, _erf_derivative)

def_comp(lax.expm1_p, lambda x: lax.exp(x) - 1)
def_comp(lax.log1p_p, lambda x: lax.log(1 + x))
def_comp(lax.sqrt_p, lambda x: x ** 0.5)
def_comp(lax.square_p, lambda x: x * x)
def_comp(lax.rsqrt_p, lambda x: x ** -0.5)
def_comp(lax.asinh_p, lambda x: lax.log(x + lax.sqrt(lax.square(x) + 1)))
def_comp(lax.acosh_p, lambda x: lax.log(x + lax.sqrt(lax.square(x) - 1)))
def_comp(lax.atanh_p, lambda x: 0.5 * lax.log(lax.div(1 + x, 1 - x)))
def_comp(lax.erfc_p, lambda x: 1 - lax.erf(x))
def_comp(lax.rem_p, lambda x, y: x - y * lax.floor(x / y))
def_comp(lax.clamp_p, lambda a, x, b: lax.min(lax.max(a, x), b))


def _erf_inv_jet_rule(primals_in, series_in):
    # v = erf_inv(u) has v' = c u' with c = sqrt(pi)/2 exp(v**2): c depends on v itself, so
    # the series of c (through the square and the exp) and of v are built together, one order
    # at a time.
    x, = primals_in
    u = [x, *series_in[0]]
    n = len(u)
    scale = np.sqrt(np.pi) / 2.
    v: list[Any] = [lax.erf_inv(x)] + [None] * (n - 1)
    sq: list[Any] = [lax.square(v[0])] + [None] * (n - 1)
    ex: list[Any] = [lax.exp(sq[0])] + [None] * (n - 1)
    c: list[Any] = [lax.mul(scale, ex[0])] + [None] * (n - 1)
    for k in range(1, n):
        v[k] = sum(j * c[k - j] * u[j] for j in range(1, k + 1)) / k
        if k == n - 1:
            break
        sq[k] = sum(v[k - j] * v[j] for j in range(k + 1))
        ex[k] = sum(j * ex[k - j] * sq[j] for j in range(1, k + 1)) / k
        c[k] = scale * ex[k]
    return v[0], v[1:]


jet_rules[lax.erf_inv_p] = _erf_inv_jet_rule


# ---- exponentials, logarithms, powers ----
def _exp_jet_rule(primals_in, series_in, **_):
    x, = primals_in
    return chain_from_exp(lax.exp(x), [x, *series_in[0]])


def chain_from_exp(primal_out, u):
    """Coefficients of ``v = exp(u)`` (``v' = v u'``) given ``v_0`` and those of ``u``."""
    v = [primal_out]
    for k in range(1, len(u)):
        v.append(sum(j * v[k - j] * u[j] for j in range(1, k + 1)) / k)
    return v[0], v[1:]


jet_rules[lax.exp_p] = _exp_jet_rule


def _pow_jet_rule(primals_in, series_in):
    # x ** y = exp(y log x): the series of y log x, then the exponential recurrence.
    x, y = primals_in
    z0, zs = jet2(lambda a, b: lax.mul(b, lax.log(a)), primals_in, series_in)
    return chain_from_exp(x ** y, [z0, *zs])


jet_rules[lax.pow_p] = _pow_jet_rule


def _pow_by_squaring(x, n: int):
    if n < 0:
        return _pow_by_squaring(1 / x, -n)
    if n == 0:
        return 1
    if n % 2 == 0:
        return _pow_by_squaring(x * x, n // 2)
    return x * _pow_by_squaring(x * x, (n - 1) // 2)


def _integer_pow_jet_rule(primals_in, series_in, *, y: int):
    if y == 0:
        return jet2(jnp.ones_like, primals_in, series_in)
    return jet2(lambda x: _pow_by_squaring(x, y), primals_in, series_in)


jet_rules[lax.integer_pow_p] = _integer_pow_jet_rule


def _log_jet_rule(primals_in, series_in, **_):
    x, = primals_in
    u = [x, *series_in[0]]
    v = [lax.log(x)]
    for k in range(1, len(u)):
        conv = sum(j * v[j] * u[k - j] for j in range(1, k))
        v.append((u[k] - conv / k) / u[0])
    return v[0], v[1:]


jet_rules[lax.log_p] = _log_jet_rule


# ---- sigmoids ----
def _logistic_jet_rule(primals_in, series_in, **_):
    # s' = e u' with e = s (1 - s), whose series follows from that of s.
    x, = primals_in
    u = [x, *series_in[0]]
    s = [lax.logistic(x)]
    e = [s[0] * (1 - s[0])]
    for k in range(1, len(u)):
        s.append(sum(j * e[k - j] * u[j] for j in range(1, k + 1)) / k)
        e.append((1 - s[0]) * s[k] - sum(s[j] * s[k - j] for j in range(1, k + 1)))
    return s[0], s[1:]


jet_rules[lax.logistic_p] = _logistic_jet_rule


def _tanh_jet_rule(primals_in, series_in, **_):
    # tanh(x) = 2 logistic(2x) - 1
    x, = primals_in
    s0, ss = _logistic_jet_rule((2 * x,), ([2 * t for t in series_in[0]],))
    return 2 * s0 - 1, [2 * t for t in ss]


jet_rules[lax.tanh_p] = _tanh_jet_rule


# ---- quotients and angles ----
def _div_jet_rule(primals_in, series_in):
    # u = v w, solved for v one order at a time.
    x, y = primals_in
    u = [x, *series_in[0]]
    w = [y, *series_in[1]]
    v: list[Any] = []
    for k in range(len(u)):
        conv = sum(v[j] * w[k - j] for j in range(k))
        v.append((u[k] - conv) / w[0])
    return v[0], v[1:]


jet_rules[lax.div_p] = _div_jet_rule


def _atan2_jet_rule(primals_in, series_in):
    # atan2(x, y) = atan(x / y) up to a constant: derivative 1 / (1 + (x/y)**2) times (x/y)'.
    x, y = primals_in
    primal_out = lax.atan2(x, y)
    q0, qs = jet2(lax.div, primals_in, series_in)
    one = lax.full_like(q0, 1)
    c0, cs = jet2(lambda q: lax.div(one, 1 + lax.square(q)), (q0,), (qs,))
    return chain_from_derivative(primal_out, [c0, *cs], [q0, *qs])


jet_rules[lax.atan2_p] = _atan2_jet_rule


def _sinusoidal_jet_rule(sign: int, fns: tuple, which: int, primals_in, series_in, **_):
    # s' = c u' and c' = sign s u': the two series are built together.
    x, = primals_in
    u = [x, *series_in[0]]
    s = [fns[0](x)]
    c = [fns[1](x)]
    for k in range(1, len(u)):
        s.append(sum(j * u[j] * c[k - j] for j in range(1, k + 1)) / k)
        c.append(sum(j * u[j] * s[k - j] for j in range(1, k + 1)) / k * sign)
    out = (s, c)[which]
    return out[0], out[1:]


jet_rules[lax.sin_p] = partial(_sinusoidal_jet_rule, -1, (lax.sin, lax.cos), 0)
jet_rules[lax.cos_p] = partial(_sinusoidal_jet_rule, -1, (lax.sin, lax.cos), 1)
jet_rules[lax.sinh_p] = partial(_sinusoidal_jet_rule, 1, (lax.sinh, lax.cosh), 0)
jet_rules[lax.cosh_p] = partial(_sinusoidal_jet_rule, 1, (lax.sinh, lax.cosh), 1)


# ---- products: the Cauchy product of the two series ----
def _bilinear_jet_rule(prim, primals_in, series_in, **params):
    u = [primals_in[0], *series_in[0]]
    w = [primals_in[1], *series_in[1]]
    v = [sum(prim.bind(u[j], w[k - j], **params) for j in range(k + 1)) for k in range(len(u))]
    return v[0], v[1:]


for _p in (lax.dot_general_p, lax.mul_p, lax.conv_general_dilated_p):
    jet_rules[_p] = partial(_bilinear_jet_rule, _p)
del _p


# ---- piecewise functions: the series of the branch taken (averaged on ties) ----
def _reduce_chooser_jet_rule(prim, primals_in, series_in, *, axes, **params):
    operand, = primals_in
    primal_out = prim.bind(operand, axes=axes, **params)
    shape = jnp.shape(operand)
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    series = series_in[0]
    # Where the operand attains the extremum; ties share the coefficients equally.
    hits = lax.convert_element_type(
        lax.eq(operand, lax.broadcast_in_dim(primal_out, shape, kept)), series[0].dtype)
    counts = lax.reduce_sum(hits, axes)
    return primal_out, [lax.div(lax.reduce_sum(lax.mul(t, hits), axes), counts) for t in series]


jet_rules[lax.reduce_max_p] = partial(_reduce_chooser_jet_rule, lax.reduce_max_p)
jet_rules[lax.reduce_min_p] = partial(_reduce_chooser_jet_rule, lax.reduce_min_p)


def _abs_jet_rule(primals_in, series_in, **params):
    x, = primals_in
    primal_out = lax.abs_p.bind(x, **params)
    signs = lax.select(lax.lt(x, lax.full_like(x, 0)), lax.full_like(x, -1), lax.full_like(x, 1))
    return primal_out, [signs * t for t in series_in[0]]


jet_rules[lax.abs_p] = _abs_jet_rule


def _select_n_jet_rule(primals_in, series_in, **_):
    which, *cases = primals_in
    primal_out = lax.select_n(which, *cases)
    return primal_out, [lax.select_n(which, *terms) for terms in zip(*series_in[1:])]


jet_rules[lax.select_n_p] = _select_n_jet_rule


def _extremum_jet_rule(pick: Callable, primals_in, series_in):
    # Broadcast first: a scalar bound against an array (jnp.clip, lax.clamp) is allowed.
    x, y = jnp.broadcast_arrays(*primals_in)
    first = pick(x, y)
    tie = x == y
    primal_out = lax.select(first, x, y)

    def term(tx, ty):
        tx, ty = jnp.broadcast_arrays(tx, ty)
        return lax.select(tie, (tx + ty) / 2, lax.select(first, tx, ty))

    return primal_out, [term(tx, ty) for tx, ty in zip(*series_in)]


jet_rules[lax.max_p] = partial(_extremum_jet_rule, lax.gt)
jet_rules[lax.min_p] = partial(_extremum_jet_rule, lax.lt)


# ---- primitives that carry jaxprs ----
# Per call primitive: (params, number of inputs of its jet) -> the params of the jet's call,
# for the params that describe each input (as JAX's jet keeps them).
call_param_updaters: dict[core.Primitive, Callable[[dict, int], dict]] = {}


def _jit_update_params(params: dict, num_inputs: int) -> dict:
    # the series coefficients: not donated, laid out as the program chooses
    more = num_inputs - len(params["donated_invars"])
    extra = {"donated_invars": False, "in_shardings": UNSPECIFIED, "in_layouts": None}
    return dict(params, **{k: (*params[k], *(v,) * more) for k, v in extra.items()
                           if k in params})


call_param_updaters[jit_p] = _jit_update_params


def _jit_jet_rule(primals_in, series_in, *, jaxpr, **params):
    # A jit of the jet of the body: inputs are the primals then each input's coefficients,
    # outputs the same (every output coefficient instantiated).
    order = len(series_in[0])
    args = [*primals_in, *(t for terms in series_in for t in terms)]
    jet_closed = jet_jaxpr(jaxpr, order, [core.get_aval(a) for a in args])
    params = call_param_updaters[jit_p](params, len(args))
    n = len(jaxpr.out_avals)
    more = len(jet_closed.out_avals) - n  # the output coefficients
    outs = jit_p.bind(*args, **dict(
        params, jaxpr=jet_closed, out_shardings=(*params["out_shardings"], *(UNSPECIFIED,) * more),
        out_layouts=(*params["out_layouts"], *(None,) * more)))
    return outs[:n], [outs[n + i * order:n + (i + 1) * order] for i in range(n)]


jet_rules[jit_p] = _jit_jet_rule


def _custom_call_jet_rule(primals_in, series_in, *, call_jaxpr, **_):
    # As JAX's jet: the custom differentiation rules are ignored and the function itself is
    # expanded (its body is differentiable by construction).
    return jet2(core.jaxpr_as_fun(call_jaxpr), primals_in, series_in)


jet_rules[custom_jvp_call_p] = _custom_call_jet_rule
jet_rules[custom_vjp_call_p] = _custom_call_jet_rule
