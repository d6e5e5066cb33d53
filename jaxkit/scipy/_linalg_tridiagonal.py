"""``jax.scipy.linalg.eigh_tridiagonal``: eigenvalues of a symmetric (Hermitian) tridiagonal
matrix by bisection on Sturm sequence counts, all of them at once, and eigenvectors by inverse
iteration (tridiagonal solves from random starting vectors, clusters of close eigenvalues
re-orthogonalised by QR), staged as JAX 0.10.2 stages them, so that programs and results are
JAX's.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from jaxkit import dtypes, lax
from jaxkit import numpy as jnp
from jaxkit import random
from jaxkit.lax import linalg as lax_linalg
from jaxkit.transforms.jit import jit
from jaxkit.typing import Array, ArrayLike

_STURM_BLOCK = 16  # Sturm recurrence steps per while-loop iteration (unrolled)


def _sturm(alpha, beta_sq, pivmin, alpha0_perturbation, x):
    """How many eigenvalues are below each ``x``: the negative terms of the Sturm sequence
    ``q_0 = alpha_0 - x``, ``q_i = alpha_i - beta_sq_{i-1} / q_{i-1} - x``, with pivots kept at
    least ``pivmin`` away from zero."""
    n = alpha.shape[0]
    zeros = jnp.zeros(x.shape, dtype=np.int32)
    ones = jnp.ones(x.shape, dtype=np.int32)

    def step(i, q, count):
        q = alpha[i] - beta_sq[i - 1] / q - x
        count = jnp.where(q <= pivmin, count + 1, count)
        return jnp.where(q <= pivmin, jnp.minimum(q, -pivmin), q), count

    # The first term needs care when x is alpha_0 itself.
    q = alpha[0] - x
    count = jnp.where(q < 0, ones, zeros)
    q = jnp.where(alpha[0] == x, alpha0_perturbation, q)

    def steps(unrolled):
        def run(args):
            start, q, count = args
            for j in range(unrolled):
                q, count = step(start + j, q, count)
            return start + unrolled, q, count
        return run

    # (n - 1) % block steps first, then whole blocks of steps in a while loop.
    i, q, count = steps((n - 1) % _STURM_BLOCK)((1, q, count))
    _, _, count = lax.while_loop(lambda iqc: jnp.less(iqc[0], n), steps(_STURM_BLOCK),
                                 (i, q, count))
    return count


def _compute_eigenvectors(alpha, beta, eigvals, key):
    n, k = alpha.shape[0], eigvals.shape[0]
    dl = jnp.pad(jnp.conj(beta), (1, 0))
    du = jnp.pad(beta, (0, 1))
    # Runs of eigenvalues closer than gaptol (they are sorted) have eigenvectors that are not
    # unique: each run ("cluster") is orthogonalised after every step.
    gap = eigvals[1:] - eigvals[:-1]
    eps = np.finfo(eigvals.dtype).eps
    t_norm = jnp.maximum(jnp.abs(eigvals[0]), jnp.abs(eigvals[-1]))
    gaptol = jnp.sqrt(eps) * t_norm
    close = gap < gaptol
    left_close = jnp.pad(close, (1, 0), constant_values=False)
    right_close = jnp.pad(close, (0, 1), constant_values=False)
    cluster_start = jnp.logical_and(jnp.logical_not(left_close), right_close)
    cluster_end = jnp.logical_and(left_close, jnp.logical_not(right_close))
    max_clusters = k // 2 + 1
    starts = jnp.nonzero(cluster_start, size=max_clusters)[0]
    ends = jnp.nonzero(cluster_end, size=max_clusters)[0] + 1
    num_clusters = jnp.sum(cluster_start)
    arange_k = jnp.arange(k)
    solve_dtype = np.result_type(alpha.dtype, beta.dtype)
    base_dtype = np.finfo(solve_dtype).dtype
    v = random.normal(key, (k, n), dtype=base_dtype).astype(solve_dtype)
    v = v / jnp.linalg.norm(v, axis=-1, keepdims=True).astype(solve_dtype)

    def orthogonalize_cluster(i, ev):
        # The cluster's rows, moved to the top of a k-row block, made orthonormal by QR.
        start, end = starts[i], ends[i]
        ev_padded = jnp.pad(ev, ((0, k), (0, 0)))
        v_block = lax.dynamic_slice(ev_padded, (start, 0), (k, n))
        mask = (arange_k < end - start).astype(ev.dtype)
        Q, _ = jnp.linalg.qr((v_block * mask[:, None]).T)
        update = lax.dynamic_update_slice(jnp.zeros((2 * k, n), dtype=ev.dtype),
                                          Q.T * mask[:, None], (start, 0))[:k, :]
        in_cluster = (arange_k >= start) & (arange_k < end)
        return jnp.where(in_cluster[:, None], update, ev)

    # The k shifted systems (T - eigval_i I) x_i = v_i, solved together.
    alpha_shifted = alpha[None, :] - eigvals[:, None]
    dl_batched = jnp.broadcast_to(dl[None, :], (k, n))
    du_batched = jnp.broadcast_to(du[None, :], (k, n))

    def inverse_iteration_step(state):
        i, v, nrm_v, _ = state
        v_new = lax_linalg.tridiagonal_solve(
            dl_batched.astype(solve_dtype), alpha_shifted.astype(solve_dtype),
            du_batched.astype(solve_dtype), v[:, :, None].astype(solve_dtype),
            perturb_singular=True)
        v_new = jnp.squeeze(v_new, axis=-1)
        nrm_v_new = jnp.linalg.norm(v_new, axis=-1, keepdims=True)
        v_new = v_new / nrm_v_new.astype(v_new.dtype)
        nrm_v_new = jnp.squeeze(nrm_v_new, axis=-1)
        v_new = lax.fori_loop(0, num_clusters, orthogonalize_cluster, v_new)
        return i + 1, v_new, nrm_v_new, nrm_v

    def continue_iteration(state):
        # LAPACK xSTEIN's rule: at most 5 steps, while some norm still grows by 10%.
        i, _, nrm_v, nrm_v_old = state
        return jnp.logical_and(i < 5, jnp.any(nrm_v >= (1 + 0.1) * nrm_v_old))

    _, v_final, _, _ = lax.while_loop(
        continue_iteration, inverse_iteration_step,
        (0, v, jnp.ones(k, dtype=eigvals.dtype), jnp.zeros(k, dtype=eigvals.dtype)))
    return v_final


@partial(jit, static_argnames=("eigvals_only", "select", "select_range"))
def eigh_tridiagonal(d: ArrayLike, e: ArrayLike, *, eigvals_only: bool = False,
                     select: str = "a", select_range: tuple[float, float] | None = None,
                     tol: float | None = None, key: Array | None = None):
    """Eigenvalues (ascending), and eigenvectors (columns) unless ``eigvals_only``, of the
    symmetric (Hermitian) tridiagonal matrix with diagonal ``d`` and off-diagonal ``e``.
    ``select='i'`` keeps those of indices ``select_range[0] .. select_range[1]``; ``tol`` is
    the bisection's absolute tolerance (at least eps * |T|); ``key`` seeds the inverse
    iteration's starting vectors (``random.key(42)`` by default)."""
    if not eigvals_only and key is None:
        key = random.key(42)
    alpha, beta = jnp.asarray(d), jnp.asarray(e)
    supported = (np.float32, np.float64, np.complex64, np.complex128)
    if alpha.dtype != beta.dtype:
        raise TypeError("diagonal and off-diagonal values must have same dtype, got "
                        f"{alpha.dtype} and {beta.dtype}")
    if alpha.dtype not in supported or beta.dtype not in supported:
        raise TypeError("Only float32 and float64 inputs are supported as inputs to "
                        f"jax.scipy.linalg.eigh_tridiagonal, got {alpha.dtype} and "
                        f"{beta.dtype}")
    if alpha.ndim != 1 or beta.shape != (max(alpha.shape[0] - 1, 0),):
        raise ValueError(f"eigh_tridiagonal expects d of shape (n,) and e of shape (n - 1,), "
                         f"got {alpha.shape} and {beta.shape}.")
    n = alpha.shape[0]
    if n <= 1:
        if eigvals_only:
            return jnp.real(alpha)
        return jnp.real(alpha), jnp.eye(n, dtype=alpha.dtype)
    if dtypes.issubdtype(alpha.dtype, np.complexfloating):
        alpha = jnp.real(alpha)
        beta_sq = jnp.real(beta * jnp.conj(beta))
        beta_abs = jnp.sqrt(beta_sq)
    else:
        beta_abs = jnp.abs(beta)
        beta_sq = jnp.square(beta)
    # Gershgorin bounds on the eigenvalues, and a bound on |T|.
    off_diag_abs_row_sum = jnp.concatenate(
        [beta_abs[:1], beta_abs[:-1] + beta_abs[1:], beta_abs[-1:]], axis=0)
    lambda_est_max = jnp.amax(alpha + off_diag_abs_row_sum)
    lambda_est_min = jnp.amin(alpha - off_diag_abs_row_sum)
    t_norm = jnp.maximum(jnp.abs(lambda_est_min), jnp.abs(lambda_est_max))
    # The smallest pivot allowed in the Sturm sequence (no overflow).
    finfo = np.finfo(alpha.dtype)
    one = np.ones([], dtype=alpha.dtype)
    safemin = np.maximum(one / finfo.max, (one + finfo.eps) * finfo.tiny)
    pivmin = safemin * jnp.maximum(1, jnp.amax(beta_sq))
    alpha0_perturbation = jnp.square(finfo.eps * beta_abs[0])
    abs_tol = finfo.eps * t_norm
    if tol is not None:
        abs_tol = jnp.maximum(tol, abs_tol)
    max_it = finfo.nmant + 1  # one bisection step per bit of the mantissa, and one more
    if select == "a":
        target_counts = jnp.arange(n, dtype=np.int32)
    elif select == "i":
        if select_range is None:
            raise ValueError("for select='i', select_range must be specified.")
        if select_range[0] > select_range[1]:
            raise ValueError("Got empty index range in select_range.")
        target_counts = jnp.arange(select_range[0], select_range[1] + 1, dtype=np.int32)
    elif select == "v":
        raise NotImplementedError("eigh_tridiagonal(..., select='v') is not implemented")
    else:
        raise ValueError("'select must have a value in {'a', 'i', 'v'}.")
    # All bisections at once, from the Gershgorin interval widened a little.
    fudge = 2.1
    norm_slack = jnp.array(n, alpha.dtype) * fudge * finfo.eps * t_norm
    lower = lambda_est_min - norm_slack - 2 * fudge * pivmin
    upper = lambda_est_max + norm_slack + fudge * pivmin
    target_shape = np.shape(target_counts)
    lower = jnp.broadcast_to(lower, shape=target_shape)
    upper = jnp.broadcast_to(upper, shape=target_shape)
    mid = 0.5 * (upper + lower)
    pivmin = jnp.broadcast_to(pivmin, target_shape)
    alpha0_perturbation = jnp.broadcast_to(alpha0_perturbation, target_shape)

    def cond(args):
        i, lower, _, upper = args
        return jnp.logical_and(jnp.less(i, max_it), jnp.less(abs_tol, jnp.amax(upper - lower)))

    def body(args):
        i, lower, mid, upper = args
        counts = _sturm(alpha, beta_sq, pivmin, alpha0_perturbation, mid)
        lower = jnp.where(counts <= target_counts, mid, lower)
        upper = jnp.where(counts > target_counts, mid, upper)
        mid = 0.5 * (lower + upper)
        return i + 1, lower, mid, upper

    _, _, mid, _ = lax.while_loop(cond, body, (0, lower, mid, upper))
    if eigvals_only:
        return mid
    return mid, _compute_eigenvectors(alpha, beta, mid, key).T
