"""``jax.extend.core.primitives``: jaxkit's primitives under the names JAX 0.10.2 lists.

Each name is the very object jaxkit's jaxprs hold (``eqn.primitive is primitives.sin_p``), so a
library can match equations, bind primitives and register rules for them. JAX primitives that
jaxkit does not have as primitives (it computes those operations another way, see
``MISSING``) are absent; asking for one raises an ``AttributeError`` that says why.
"""
from __future__ import annotations

from jaxkit.extend.core.calls import call_p, closed_call_p
from jaxkit.interpreters.ad import add_jaxvals_p, stop_gradient_p
from jaxkit.lax.approx_top_k import approx_top_k_p
from jaxkit.lax.clamp import clamp_p
from jaxkit.lax.cond import cond_p
from jaxkit.lax.convolution import conv_general_dilated_p
from jaxkit.lax.cumulative import cumlogsumexp_p, cummax_p, cummin_p, cumprod_p, cumsum_p
from jaxkit.lax.dot import dot_general_p
from jaxkit.lax.elementwise import (
    abs_p,
    add_p,
    ceil_p,
    complex_p,
    conj_p,
    div_p,
    eq_p,
    floor_p,
    ge_p,
    gt_p,
    imag_p,
    integer_pow_p,
    is_finite_p,
    le_p,
    lt_p,
    max_p,
    min_p,
    mul_p,
    ne_p,
    neg_p,
    real_p,
    rem_p,
    round_p,
    select_n_p,
    sign_p,
    square_p,
    sub_p,
)
from jaxkit.lax.elementwise_bits import and_p, not_p, or_p, xor_p
from jaxkit.lax.elementwise_bits import (
    bitcast_convert_type_p,
    clz_p,
    copy_p,
    nextafter_p,
    population_count_p,
    reduce_precision_p,
    shift_left_p,
    shift_right_arithmetic_p,
    shift_right_logical_p,
)
from jaxkit.lax.elementwise_math import (
    acos_p,
    acosh_p,
    asin_p,
    asinh_p,
    atan2_p,
    atan_p,
    atanh_p,
    cbrt_p,
    cos_p,
    cosh_p,
    exp2_p,
    exp_p,
    expm1_p,
    log1p_p,
    log_p,
    logistic_p,
    pow_p,
    rsqrt_p,
    sin_p,
    sinh_p,
    sqrt_p,
    tan_p,
    tanh_p,
)
from jaxkit.lax.elementwise_special import (
    bessel_i0e_p,
    bessel_i1e_p,
    digamma_p,
    erf_inv_p,
    erf_p,
    erfc_p,
    igamma_grad_a_p,
    igamma_p,
    igammac_p,
    lgamma_p,
    polygamma_p,
    zeta_p,
)
from jaxkit.lax.fft import fft_p
from jaxkit.lax.gather_scatter import (
    gather_p,
    scatter_add_p,
    scatter_max_p,
    scatter_min_p,
    scatter_mul_p,
    scatter_p,
)
from jaxkit.lax.linalg.cholesky import cholesky_p, triangular_solve_p
from jaxkit.lax.linalg.eig import eig_p
from jaxkit.lax.linalg.eigh import eigh_p, hessenberg_p, schur_p, tridiagonal_p
from jaxkit.lax.linalg.lu import lu_p, tridiagonal_solve_p
from jaxkit.lax.linalg.qr import householder_product_p, qr_p
from jaxkit.lax.linalg.svd import svd_p
from jaxkit.lax.linear_solve import linear_solve_p
from jaxkit.lax.loops import scan_p, while_p
from jaxkit.lax.parallel import (
    all_gather_p,
    all_to_all_p,
    axis_index_p,
    pmax_p,
    pmin_p,
    ppermute_p,
    psum_p,
)
from jaxkit.lax.parallel_extra import ragged_all_to_all_p
from jaxkit.lax.reductions import (
    argmax_p,
    argmin_p,
    reduce_and_p,
    reduce_max_p,
    reduce_min_p,
    reduce_or_p,
    reduce_p,
    reduce_prod_p,
    reduce_xor_p,
)
from jaxkit.lax.rng import rng_bit_generator_p, rng_uniform_p
from jaxkit.lax.sharding import sharding_constraint_p
from jaxkit.lax.slicing import dynamic_slice_p, dynamic_update_slice_p, pad_p, slice_p
from jaxkit.lax.sorting import sort_p, top_k_p
from jaxkit.lax.special import regularized_incomplete_beta_p
from jaxkit.lax.staging import after_all_p, create_token_p, device_put_p, eq_to_p, le_to_p, lt_to_p
from jaxkit.lax.structural import (
    broadcast_in_dim_p,
    concatenate_p,
    convert_element_type_p,
    iota_p,
    reduce_sum_p,
    reshape_p,
    rev_p,
    squeeze_p,
    transpose_p,
)
from jaxkit.lax.windowed_reductions import (
    reduce_window_max_p,
    reduce_window_min_p,
    reduce_window_p,
    reduce_window_sum_p,
    select_and_gather_add_p,
    select_and_scatter_add_p,
    select_and_scatter_p,
)
from jaxkit.lax.staging import empty2_p
from jaxkit.random.gamma import random_gamma_p
from jaxkit.random.key_prims import (random_bits_p, random_fold_in_p, random_seed_p,
                                     random_split_p)
from jaxkit.ref import get_p, swap_p
from jaxkit.random.prng import threefry2x32_p
from jaxkit.transforms.checkpoint import checkpoint_p as remat_p
from jaxkit.transforms.checkpoint import name_p
from jaxkit.transforms.custom_derivatives import custom_jvp_call_p
from jaxkit.transforms.custom_vjp import custom_lin_p, custom_vjp_call_p
from jaxkit.transforms.jit import jit_p

# JAX primitives jaxkit has no primitive for, with the reason: each name is left undefined
# rather than bound to a stand-in that would never appear in a jaxkit jaxpr.
MISSING: dict[str, str] = {}


def __getattr__(name: str):
    if name in MISSING:
        raise AttributeError(f"jax.extend.core.primitives.{name} is not available in jaxkit: "
                             f"{MISSING[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["abs_p", "acos_p", "acosh_p", "add_jaxvals_p", "add_p", "after_all_p", "all_gather_p",
           "all_to_all_p", "and_p", "approx_top_k_p", "argmax_p", "argmin_p", "asin_p", "asinh_p",
           "atan2_p", "atan_p", "atanh_p", "axis_index_p", "bessel_i0e_p", "bessel_i1e_p",
           "bitcast_convert_type_p", "broadcast_in_dim_p", "call_p", "cbrt_p", "ceil_p",
           "cholesky_p", "clamp_p", "closed_call_p", "clz_p", "complex_p", "concatenate_p",
           "cond_p", "conj_p", "conv_general_dilated_p", "convert_element_type_p", "copy_p",
           "cos_p", "cosh_p", "create_token_p", "cumlogsumexp_p", "cummax_p", "cummin_p",
           "cumprod_p", "cumsum_p", "custom_jvp_call_p", "custom_lin_p", "custom_vjp_call_p",
           "device_put_p", "digamma_p", "div_p", "dot_general_p", "dynamic_slice_p",
           "dynamic_update_slice_p", "eig_p", "eigh_p", "empty2_p", "eq_p", "eq_to_p", "erf_inv_p",
           "erf_p", "erfc_p", "exp2_p", "exp_p", "expm1_p", "fft_p", "floor_p", "gather_p", "ge_p",
           "get_p", "gt_p", "hessenberg_p", "householder_product_p", "igamma_grad_a_p", "igamma_p",
           "igammac_p", "imag_p", "integer_pow_p", "iota_p", "is_finite_p", "jit_p", "le_p",
           "le_to_p", "lgamma_p", "linear_solve_p", "log1p_p", "log_p", "logistic_p", "lt_p",
           "lt_to_p", "lu_p", "max_p", "min_p", "mul_p", "name_p", "ne_p", "neg_p", "nextafter_p",
           "not_p", "or_p", "pad_p", "pmax_p", "pmin_p", "polygamma_p", "population_count_p",
           "pow_p", "ppermute_p", "psum_p", "qr_p", "ragged_all_to_all_p", "random_bits_p",
           "random_fold_in_p", "random_gamma_p", "random_seed_p", "random_split_p", "real_p",
           "reduce_and_p", "reduce_max_p", "reduce_min_p", "reduce_or_p", "reduce_p",
           "reduce_precision_p", "reduce_prod_p", "reduce_sum_p", "reduce_window_max_p",
           "reduce_window_min_p", "reduce_window_p", "reduce_window_sum_p", "reduce_xor_p",
           "regularized_incomplete_beta_p", "rem_p", "remat_p", "reshape_p", "rev_p",
           "rng_bit_generator_p", "rng_uniform_p", "round_p", "rsqrt_p", "scan_p", "scatter_add_p",
           "scatter_max_p", "scatter_min_p", "scatter_mul_p", "scatter_p", "schur_p",
           "select_and_gather_add_p", "select_and_scatter_add_p", "select_and_scatter_p",
           "select_n_p", "sharding_constraint_p", "shift_left_p", "shift_right_arithmetic_p",
           "shift_right_logical_p", "sign_p", "sin_p", "sinh_p", "slice_p", "sort_p", "sqrt_p",
           "square_p", "squeeze_p", "stop_gradient_p", "sub_p", "svd_p", "swap_p", "tan_p",
           "tanh_p", "threefry2x32_p", "top_k_p", "transpose_p", "triangular_solve_p",
           "tridiagonal_p", "tridiagonal_solve_p", "while_p", "xor_p", "zeta_p"]
