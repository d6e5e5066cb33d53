"""``jaxkit.nn``: activation functions and friends, with JAX's formulas and derivatives.

Each function is JAX 0.10.2's formula in ``jaxkit.numpy``/``jaxkit.lax``, jitted like JAX's
(so eager calls compile once and jaxprs show ``jit`` equations). ``relu``, ``relu6`` and
``log1mexp`` carry JAX's custom JVPs (``relu``'s derivative at 0 is 0). ``softmax`` follows
JAX's default (``jax_softmax_custom_jvp=False``): the maximum is subtracted under
``stop_gradient``, so its derivative is the ordinary one of ``exp(x - c) / sum``.
``initializers`` holds the weight initialisers.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from jaxkit import dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.transforms.custom_derivatives import custom_jvp
from jaxkit.transforms.jit import jit
from jaxkit.nn import initializers
from jaxkit.numpy import tanh
from jaxkit.typing import Array, ArrayLike, DTypeLike

Axis = int | Sequence[int] | None


def _inexact(name: str, x: ArrayLike) -> Array:
    """``x`` as an array promoted to an inexact dtype (JAX's ``promote_args_inexact``)."""
    x = jnp.asarray(x)
    if not dtypes.issubdtype(x.dtype, np.inexact):
        x = x.astype(dtypes.to_inexact_dtype(x.dtype))
    return x


# --------------------------------------------------------------------------------------------
# Elementwise activations
# --------------------------------------------------------------------------------------------


@jit
def identity(x: ArrayLike) -> Array:
    """The identity: ``x`` unchanged."""
    return jnp.asarray(x)


@custom_jvp
@jit
def relu(x: ArrayLike) -> Array:
    """``max(x, 0)``, with derivative 0 at 0."""
    return jnp.maximum(x, 0)


relu.defjvps(lambda g, ans, x: lax.select(x > 0, g, lax.full_like(g, 0)))


@custom_jvp
@jit
def relu6(x: ArrayLike) -> Array:
    """``min(max(x, 0), 6)``, with derivative 0 at 0 and 6."""
    return jnp.minimum(jnp.maximum(x, 0), 6.)


relu6.defjvps(lambda g, ans, x: lax.select((x > 0) & (x < 6), g, lax.full_like(g, 0)))


@jit
def squareplus(x: ArrayLike, b: ArrayLike = 4) -> Array:
    """``(x + sqrt(x**2 + b)) / 2``."""
    x, b = jnp.asarray(x), jnp.asarray(b)
    return (x + jnp.sqrt(jnp.square(x) + b)) / 2


@jit
def softplus(x: ArrayLike) -> Array:
    """``log(1 + exp(x))``, computed as ``logaddexp(x, 0)``."""
    return jnp.logaddexp(x, 0)


@jit
def sparse_plus(x: ArrayLike) -> Array:
    """0 below -1, ``(x + 1)**2 / 4`` on (-1, 1), ``x`` above 1."""
    x = jnp.asarray(x)
    return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


@jit
def soft_sign(x: ArrayLike) -> Array:
    """``x / (|x| + 1)``."""
    x = jnp.asarray(x)
    return x / (jnp.abs(x) + 1)


@partial(jit, inline=True)
def sigmoid(x: ArrayLike) -> Array:
    """``1 / (1 + exp(-x))`` (``lax.logistic``)."""
    return lax.logistic(x)


@jit
def sparse_sigmoid(x: ArrayLike) -> Array:
    """``clip((x + 1) / 2, 0, 1)``."""
    return 0.5 * jnp.clip(x + 1.0, 0.0, 2.0)


@jit
def silu(x: ArrayLike) -> Array:
    """``x * sigmoid(x)`` (also named ``swish``)."""
    x = jnp.asarray(x)
    return x * sigmoid(x)


swish = silu


@jit
def mish(x: ArrayLike) -> Array:
    """``x * tanh(softplus(x))``."""
    x = jnp.asarray(x)
    return x * jnp.tanh(softplus(x))


@jit
def log_sigmoid(x: ArrayLike) -> Array:
    """``log(sigmoid(x)) = -softplus(-x)``."""
    x = jnp.asarray(x)
    return -softplus(-x)


@jit
def elu(x: ArrayLike, alpha: ArrayLike = 1.0) -> Array:
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``."""
    x = jnp.asarray(x)
    return jnp.where(x > 0, x, alpha * jnp.expm1(jnp.where(x > 0, 0.0, x)))


@jit
def leaky_relu(x: ArrayLike, negative_slope: ArrayLike = 0.01) -> Array:
    """``x`` for ``x >= 0``, else ``negative_slope * x``."""
    x = jnp.asarray(x)
    return jnp.where(x >= 0, x, negative_slope * x)


@jit
def hard_tanh(x: ArrayLike) -> Array:
    """``x`` clipped to [-1, 1]."""
    x = jnp.asarray(x)
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


@jit
def celu(x: ArrayLike, alpha: ArrayLike = 1.0) -> Array:
    """``max(x, 0) + alpha * expm1(min(x, 0) / alpha)``."""
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


@jit
def selu(x: ArrayLike) -> Array:
    """``scale * elu(x, alpha)`` with the self-normalising constants."""
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    return scale * elu(x, alpha)


def gelu(x: ArrayLike, approximate: bool = True) -> Array:
    """Gaussian error linear unit: the tanh approximation, or ``x/2 * erfc(-x/sqrt(2))``."""
    x = _inexact("gelu", x)
    if approximate:
        sqrt_2_over_pi = np.sqrt(2 / np.pi).astype(x.dtype)
        cdf = 0.5 * (1.0 + jnp.tanh(sqrt_2_over_pi * (x + 0.044715 * (x ** 3))))
        return x * cdf
    sqrt_half = np.sqrt(0.5).astype(x.dtype)
    return jnp.array(0.5 * x * lax.erfc(-x * sqrt_half), dtype=x.dtype)


@partial(jit, static_argnames=("axis",))
def glu(x: ArrayLike, axis: int = -1) -> Array:
    """Gated linear unit: split ``x`` in two halves along ``axis``; ``a * sigmoid(b)``."""
    x = jnp.asarray(x)
    size = x.shape[axis]
    if size % 2:
        raise ValueError(f"glu: axis size must be divisible by 2, got {size}")
    x1, x2 = jnp.split(x, 2, axis)
    return x1 * sigmoid(x2)


@jit
def hard_sigmoid(x: ArrayLike) -> Array:
    """``relu6(x + 3) / 6``."""
    return relu6(x + 3.) / 6.


@jit
def hard_silu(x: ArrayLike) -> Array:
    """``x * hard_sigmoid(x)`` (also named ``hard_swish``)."""
    x = jnp.asarray(x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


@custom_jvp
@jit
def log1mexp(x: ArrayLike) -> Array:
    """``log(1 - exp(-x))``, stable on both sides of ``log 2``."""
    x = jnp.asarray(x)
    c = jnp.log(2.0)
    return jnp.where(x < c, jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


log1mexp.defjvps(lambda g, ans, x: g / jnp.expm1(x))


# --------------------------------------------------------------------------------------------
# Reductions and normalisations
# --------------------------------------------------------------------------------------------


def _reduction_dims(ndim: int, axis: Axis) -> tuple[int, ...]:
    """The reduced axes, nonnegative and sorted."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return tuple(sorted(_canonical_axis(a, ndim) for a in axes))


def _canonical_axis(axis, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % max(ndim, 1)


def logsumexp(a: ArrayLike, axis: Axis = None, b: ArrayLike | None = None,
              keepdims: bool = False, return_sign: bool = False,
              where: ArrayLike | None = None) -> Array | tuple[Array, Array]:
    """``log(sum(b * exp(a)))`` computed stably (the maximum is factored out)."""
    if where is not None:
        a = jnp.where(where, a, 0)
    if b is not None:
        a_arr, b_arr = jnp.asarray(a), jnp.asarray(b)
        dt = dtypes.to_inexact_dtype(dtypes.result_type(a_arr, b_arr))
        a_arr, b_arr = a_arr.astype(dt), b_arr.astype(dt)
        a_arr = jnp.where(b_arr != 0, a_arr, -np.inf)
    else:
        a_arr = _inexact("logsumexp", a)
        b_arr = a_arr
    dims = _reduction_dims(a_arr.ndim, axis)
    amax = jnp.max(a_arr.real, axis=dims, keepdims=keepdims, where=where, initial=-np.inf)
    amax = lax.stop_gradient(lax.select(jnp.isfinite(amax), amax, lax.full_like(amax, 0)))
    amax_with_dims = amax if keepdims else lax.expand_dims(amax, dims)
    # (jnp broadcasts the kept unit axes; JAX's lax does too, ours takes equal shapes)
    exp_a = jnp.exp(a_arr - amax_with_dims.astype(a_arr.dtype))
    if b is not None:
        exp_a = exp_a * b_arr
    sumexp = exp_a.sum(axis=dims, keepdims=keepdims, where=where)
    sign = lax.sign(sumexp)
    if return_sign or not dtypes.issubdtype(a_arr.dtype, np.complexfloating):
        sumexp = abs(sumexp)
    out = lax.add(lax.log(sumexp), amax.astype(sumexp.dtype))
    if return_sign:
        return out, sign
    if b is not None and not dtypes.issubdtype(out.dtype, np.complexfloating):
        out = jnp.where(sign < 0, jnp.array(np.nan, dtype=out.dtype), out)
    return out


@partial(jit, static_argnames=("axis", "keepdims"))
def logmeanexp(x: ArrayLike, axis: Axis = None, where: ArrayLike | None = None,
               keepdims: bool = False) -> Array:
    """``logsumexp(x) - log(n)``, ``n`` the number of (unmasked) elements reduced."""
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    ones = jnp.ones_like(x, dtype=lse.dtype)
    count = jnp.sum(ones, axis=axis, where=where, keepdims=keepdims)
    return lse - jnp.log(count)


@partial(jit, static_argnames=("axis",))
def log_softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Array:
    """``x - logsumexp(x, axis)``; masked-out elements (``where``) give ``-inf``."""
    x = jnp.asarray(x)
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    shifted = x_safe - lax.stop_gradient(x_max)
    shifted_logsumexp = jnp.log(jnp.sum(jnp.exp(shifted), axis, where=where, keepdims=True))
    result = shifted - shifted_logsumexp
    if where is not None:
        return jnp.where(where, result, -np.inf)
    return result


def softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Array:
    """``exp(x) / sum(exp(x), axis)``; masked-out elements (``where``) give 0."""
    return _softmax(x, axis, where)


# Not a ``jit``: JAX 0.10.2's ``softmax`` (with ``jax_softmax_custom_jvp`` off, its default)
# traces in place, so jaxprs show its equations directly.
def _softmax(x, axis, where, initial=-np.inf):
    x_max = jnp.max(x, axis, where=where, initial=initial, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, initial)
    unnormalized = jnp.exp(x_safe - lax.stop_gradient(x_max))
    result = unnormalized / jnp.sum(unnormalized, axis, where=where, keepdims=True)
    if where is not None:
        result = jnp.where(where, result, 0)
    return result


@partial(jit, static_argnames=("axis", "algorithm"))
def standardize(x: ArrayLike, axis: Axis = -1, mean: ArrayLike | None = None,
                variance: ArrayLike | None = None, epsilon: ArrayLike = 1e-5,
                where: ArrayLike | None = None, *, algorithm: str = "fast") -> Array:
    """``(x - mean) / sqrt(variance + epsilon)`` with the statistics over ``axis``."""
    x = jnp.asarray(x)
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(jnp.subtract(x, mean)), axis, keepdims=True,
                                where=where)
        elif algorithm == "fast":
            variance = jnp.mean(jnp.square(x), axis, keepdims=True,
                                where=where) - jnp.square(mean)
            variance = jnp.clip(variance, 0)
        else:
            raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    return jnp.subtract(x, mean) * lax.rsqrt(variance + epsilon)


@partial(jit, static_argnames=("num_classes", "dtype", "axis"))
def _one_hot(x, num_classes: int, *, dtype, axis: int) -> Array:
    output_pos_axis = _canonical_axis(axis, x.ndim + 1)
    lhs = lax.expand_dims(x, (axis,))
    rhs_shape = [1] * x.ndim
    rhs_shape.insert(output_pos_axis, num_classes)
    rhs = lax.broadcasted_iota(x.dtype, rhs_shape, output_pos_axis)
    return (lhs == rhs).astype(dtype)


def one_hot(x: Any, num_classes: int, *, dtype: DTypeLike | None = None,
            axis: int = -1) -> Array:
    """One-hot encoding of integer indices along a new ``axis`` (out-of-range indices give
    all zeros)."""
    try:
        num_classes = operator.index(num_classes)
    except TypeError:
        raise TypeError("The error arose in jax.nn.one_hot argument `num_classes`: a concrete "
                        f"integer is required, got {num_classes!r}.") from None
    x_arr = jnp.asarray(x)
    dtype = dtypes.default_float_dtype() if dtype is None else \
        dtypes.check_and_canonicalize_user_dtype(dtype, "astype")  # JAX's name (it casts)
    return _one_hot(x_arr, num_classes, dtype=dtype, axis=axis)


__all__ = [
    "celu", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh",
    "identity", "initializers", "leaky_relu", "log1mexp", "log_sigmoid", "log_softmax",
    "logmeanexp", "logsumexp", "mish", "one_hot", "relu", "relu6", "selu", "sigmoid", "silu",
    "soft_sign", "softmax", "softplus", "sparse_plus", "sparse_sigmoid", "squareplus",
    "standardize", "swish", "tanh",
]


from jaxkit.nn.attention import dot_product_attention  # noqa: E402  (uses softmax above)

from jaxkit.nn.scaled import (  # noqa: E402
    get_scaled_dot_general_config,
    scaled_dot_general,
    scaled_matmul,
)

__all__ += ["dot_product_attention", "get_scaled_dot_general_config", "scaled_dot_general",
            "scaled_matmul"]
