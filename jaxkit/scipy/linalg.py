"""``jaxkit.scipy.linalg``: the part of ``jax.scipy.linalg`` that needs no new LAPACK-backed
primitive: the matrix exponential (Pade approximation with scaling and squaring) and its
Frechet derivative, special matrices (``block_diag``, ``toeplitz``, ``hankel``, ``circulant``,
``companion``, ``hilbert``, ``pascal``, ``dft``, ...), and ``cholesky``/``det``/``inv``/``solve``
on top of ``jnp.linalg``.

The factorizations on LAPACK (``lu``, ``qr``, ``svd``, ``eigh``, ``schur``, ``hessenberg``,
``polar``) and the solvers built on them (``cho_solve``, ``lu_solve``, ``solve_triangular``)
live in ``_linalg_factor.py`` and are re-exported here.
"""
from __future__ import annotations

import math
import operator
from functools import partial

import numpy as np

from jaxkit import dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.api import jvp
from jaxkit.transforms.jit import jit
from jaxkit.numpy._promotion import check_arraylike, promote_dtypes
# re-exported: the LAPACK-based half of this module
from jaxkit.scipy._linalg_factor import cho_factor, cho_solve, cholesky, eigh  # noqa: F401
from jaxkit.scipy._linalg_factor import hessenberg  # noqa: F401
from jaxkit.scipy._linalg_factor import lu, lu_factor, lu_solve, polar, qr  # noqa: F401
from jaxkit.scipy._linalg_factor import schur, solve_triangular, svd  # noqa: F401
from jaxkit.scipy._linalg_factor import qr_multiply  # noqa: F401
from jaxkit.scipy._linalg_tridiagonal import eigh_tridiagonal  # noqa: F401
from jaxkit.scipy._linalg_factor import det, inv, solve  # noqa: F401
from jaxkit.scipy._linalg_matfun import funm, rsf2csf, solve_sylvester, sqrtm  # noqa: F401
from jaxkit.scipy._util import promote_args_inexact, promote_dtypes_inexact
from jaxkit.scipy.special import comb
from jaxkit.typing import Array, ArrayLike


# ---- the matrix exponential ------------------------------------------------------------------
def _dot(a, b):
    return jnp.dot(a, b, precision=lax.Precision.HIGHEST)


# Pade approximants (Higham 2005) of degree 3..13: ``(U, V)`` with
# ``exp(A) ~ (V - U)^{-1} (V + U)``, U and V the odd and even parts of the numerator, whose
# coefficients b_0..b_m are listed; the sums are staged in JAX's order.
def _pade3(A):
    b = (120., 60., 12., 1.)
    ident = jnp.eye(*A.shape, dtype=A.dtype)
    A2 = _dot(A, A)
    return _dot(A, b[3] * A2 + b[1] * ident), b[2] * A2 + b[0] * ident


def _pade5(A):
    b = (30240., 15120., 3360., 420., 30., 1.)
    ident = jnp.eye(*A.shape, dtype=A.dtype)
    A2 = _dot(A, A)
    A4 = _dot(A2, A2)
    U = _dot(A, b[5] * A4 + b[3] * A2 + b[1] * ident)
    return U, b[4] * A4 + b[2] * A2 + b[0] * ident


def _pade7(A):
    b = (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.)
    ident = jnp.eye(*A.shape, dtype=A.dtype)
    A2 = _dot(A, A)
    A4 = _dot(A2, A2)
    A6 = _dot(A4, A2)
    U = _dot(A, b[7] * A6 + b[5] * A4 + b[3] * A2 + b[1] * ident)
    return U, b[6] * A6 + b[4] * A4 + b[2] * A2 + b[0] * ident


def _pade9(A):
    b = (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880.,
         3960., 90., 1.)
    ident = jnp.eye(*A.shape, dtype=A.dtype)
    A2 = _dot(A, A)
    A4 = _dot(A2, A2)
    A6 = _dot(A4, A2)
    A8 = _dot(A6, A2)
    U = _dot(A, b[9] * A8 + b[7] * A6 + b[5] * A4 + b[3] * A2 + b[1] * ident)
    return U, b[8] * A8 + b[6] * A6 + b[4] * A4 + b[2] * A2 + b[0] * ident


def _pade13(A):
    b = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
         129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
         40840800., 960960., 16380., 182., 1.)
    ident = jnp.eye(*A.shape, dtype=A.dtype)
    A2 = _dot(A, A)
    A4 = _dot(A2, A2)
    A6 = _dot(A4, A2)
    U = _dot(A, _dot(A6, b[13] * A6 + b[11] * A4 + b[9] * A2) + b[7] * A6 + b[5] * A4
             + b[3] * A2 + b[1] * ident)
    V = (_dot(A6, b[12] * A6 + b[10] * A4 + b[8] * A2) + b[6] * A6 + b[4] * A4 + b[2] * A2
         + b[0] * ident)
    return U, V


@jit
def _calc_P_Q(A):
    """The Pade numerator P and denominator Q of the scaled ``A``, and the number of
    squarings that undo the scaling."""
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError("expected A to be a square matrix")
    A_L1 = jnp.linalg.norm(A, 1)
    if A.dtype in (np.float64, np.complex128):
        max_norm, bounds = 5.371920351148152, (1.495585217958292e-002, 2.539398330063230e-001,
                                                9.504178996162932e-001, 2.097847961257068e+000)
        pades = [_pade3, _pade5, _pade7, _pade9, _pade13]
    elif A.dtype in (np.float32, np.complex64):
        max_norm, bounds = 3.925724783138660, (4.258730016922831e-001, 1.880152677804762e+000)
        pades = [_pade3, _pade5, _pade7]
    else:
        raise TypeError(f"A.dtype={A.dtype} is not supported.")
    n_squarings = jnp.maximum(0, jnp.floor(jnp.log2(A_L1 / max_norm)))
    A = A / 2 ** n_squarings.astype(A.dtype)
    idx = jnp.digitize(A_L1, jnp.array(bounds, dtype=A_L1.dtype))
    U, V = lax.switch(idx, pades, A)
    return U + V, -U + V, n_squarings


@partial(jit, static_argnums=2)
def _squaring(R, n_squarings, max_squarings: int):
    # Undo the scaling: square ``n_squarings`` times (a fixed-length scan of conds).
    def step(c, i):
        return lax.cond(i < n_squarings, lambda x: _dot(x, x), lambda x: x, c), None
    return lax.scan(step, R, jnp.arange(max_squarings, dtype=n_squarings.dtype))[0]


@partial(jit, static_argnames=("upper_triangular", "max_squarings"))
def expm(A: ArrayLike, *, upper_triangular: bool = False, max_squarings: int = 16) -> Array:
    """The matrix exponential (batched over leading axes); NaN when more than
    ``max_squarings`` squarings would be needed."""
    A, = promote_dtypes_inexact(A)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"Expected A to be a (batched) square matrix, got {A.shape=}.")
    if A.ndim > 2:
        return jnp.vectorize(partial(expm, upper_triangular=upper_triangular,
                                     max_squarings=max_squarings),
                             signature="(n,n)->(n,n)")(A)
    P, Q, n_squarings = _calc_P_Q(jnp.asarray(A))

    def compute(args):
        _, P, Q = args
        R = solve_triangular(Q, P) if upper_triangular else jnp.linalg.solve(Q, P)
        return _squaring(R, n_squarings, max_squarings)

    return lax.cond(n_squarings > max_squarings, lambda args: jnp.full_like(args[0], np.nan),
                    compute, (A, P, Q))


@partial(jit, static_argnames=("method", "compute_expm"))
def expm_frechet(A: ArrayLike, E: ArrayLike, *, method: str | None = None,
                 compute_expm: bool = True) -> Array | tuple[Array, Array]:
    """The Frechet derivative of ``expm`` at ``A`` in the direction ``E`` (with ``expm(A)``
    first unless ``compute_expm=False``): the JVP of ``expm``."""
    del method
    A, E = jnp.asarray(A), jnp.asarray(E)
    if A.ndim < 2 or A.shape[-2] != A.shape[1]:
        raise ValueError(f"expected A to be a (batched) square matrix, got A.shape={A.shape}")
    if E.ndim < 2 or E.shape[-2] != E.shape[-1]:
        raise ValueError(f"expected E to be a (batched) square matrix, got E.shape={E.shape}")
    if A.shape != E.shape:
        raise ValueError("expected A and E to be the same shape, got "
                         f"A.shape={A.shape} E.shape={E.shape}")
    value, derivative = jvp(partial(expm, upper_triangular=False, max_squarings=16), (A,), (E,))
    return (value, derivative) if compute_expm else derivative


# ---- special matrices ------------------------------------------------------------------------
@jit
def block_diag(*arrs: ArrayLike) -> Array:
    """The block-diagonal matrix of the (at most 2-D) arguments."""
    if len(arrs) == 0:
        arrs = (jnp.zeros((1, 0)),)
    arrs = tuple(jnp.asarray(a) for a in promote_dtypes(*arrs))
    bad = [i for i, a in enumerate(arrs) if np.ndim(a) > 2]
    if bad:
        raise ValueError("Arguments to jax.scipy.linalg.block_diag must have at most 2 "
                         f"dimensions, got {arrs[bad[0]]} at argument {bad[0]}.")
    arrs = [jnp.atleast_2d(a) for a in arrs]
    total = sum(a.shape[1] for a in arrs)
    rows, col = [], 0
    for a in arrs:
        rows.append(lax.pad(a, np.array(0, a.dtype), ((0, 0, 0),
                                                      (col, total - a.shape[1] - col, 0))))
        col += a.shape[1]
    return jnp.concatenate(rows, axis=0)


def _diagonal_constant(values, nrows):
    """``out[i, j] = values[i + j]``: the ``nrows``-long windows of ``values``, one per row
    (a patches convolution, as JAX builds Toeplitz and Hankel matrices)."""
    return lax.conv_general_dilated_patches(
        values.reshape((1, values.shape[0], 1)), (nrows,), (1,), "VALID",
        dimension_numbers=("NTC", "IOT", "NTC"), precision=lax.Precision.HIGHEST)[0]


def toeplitz(c: ArrayLike, r: ArrayLike | None = None) -> Array:
    """The Toeplitz matrix with first column ``c`` and first row ``r`` (``conj(c)`` by
    default); batched over leading axes."""
    if r is None:
        check_arraylike("toeplitz", c)
        r = jnp.conjugate(jnp.asarray(c))
    else:
        check_arraylike("toeplitz", c, r)
    return _toeplitz(jnp.atleast_1d(jnp.asarray(c)), jnp.atleast_1d(jnp.asarray(r)))


@partial(jnp.vectorize, signature="(m),(n)->(m,n)")
def _toeplitz(c, r):
    (m,), (n,) = c.shape, r.shape
    if m == 0 or n == 0:
        return jnp.empty((m, n), dtype=jnp.promote_types(c.dtype, r.dtype))
    return jnp.flip(_diagonal_constant(jnp.concatenate((c[::-1], r[1:])), n), axis=0)


def hankel(c: ArrayLike, r: ArrayLike | None = None) -> Array:
    """The Hankel matrix with first column ``c`` and last row ``r`` (zeros by default)."""
    if r is None:
        check_arraylike("hankel", c)
        c = jnp.asarray(c)
        r = jnp.zeros_like(c)
    else:
        check_arraylike("hankel", c, r)
        c, r = jnp.asarray(c), jnp.asarray(r)
    if c.ndim == 0:
        raise ValueError("hankel: c must be at least 1-dimensional, got a scalar.")
    if r.ndim == 0:
        raise ValueError("hankel: r must be at least 1-dimensional, got a scalar.")
    if c.ndim < r.ndim:
        c = lax.expand_dims(c, range(r.ndim - c.ndim))
    elif r.ndim < c.ndim:
        r = lax.expand_dims(r, range(c.ndim - r.ndim))
    return _hankel(c, r)


@partial(jnp.vectorize, signature="(m),(n)->(m,n)")
def _hankel(c, r):
    (m,), (n,) = c.shape, r.shape
    if m == 0 or n == 0:
        return jnp.empty((m, n), dtype=jnp.result_type(c, r))
    return _diagonal_constant(jnp.concatenate((c, r[1:])), n)


def circulant(c: ArrayLike) -> Array:
    """The circulant matrix with first column ``c``."""
    check_arraylike("circulant", c)
    return _circulant(jnp.atleast_1d(jnp.asarray(c)))


@partial(jnp.vectorize, signature="(n)->(n,n)")
def _circulant(c):
    n, = c.shape
    return c[(jnp.arange(n)[:, None] - jnp.arange(n)[None, :]) % n]


def leslie(f: ArrayLike, s: ArrayLike) -> Array:
    """The Leslie matrix of fecundities ``f`` and survival rates ``s``."""
    check_arraylike("leslie", f, s)
    f, s = jnp.atleast_1d(f), jnp.atleast_1d(s)
    if f.shape[-1] < 2:
        raise ValueError("The length of f along the last axis must be at least 2; got shape "
                         f"{f.shape}.")
    if s.shape[-1] != f.shape[-1] - 1:
        raise ValueError("Incorrect lengths for f and s. The length of s along the last axis "
                         "must be one less than the length of f; got f shape "
                         f"{f.shape} and s shape {s.shape}.")
    return _leslie(f, s)


@partial(jnp.vectorize, signature="(n),(m)->(n,n)")
def _leslie(f, s):
    f, s = promote_dtypes(f, s)
    return jnp.diag(s, k=-1).at[0].set(f)


def companion(a: ArrayLike) -> Array:
    """The companion matrix of the polynomial with coefficients ``a`` (highest first)."""
    a, = promote_args_inexact("companion", a)
    a = jnp.atleast_1d(a)
    if a.shape[-1] < 2:
        raise ValueError("The length of `a` along the last axis must be at least 2; got "
                         f"shape {a.shape}.")
    return _companion(a)


@partial(jnp.vectorize, signature="(n)->(m,m)")
def _companion(a):
    first_row = -a[1:] / a[0]
    m = a.shape[0] - 1
    return jnp.eye(m, m, k=-1, dtype=first_row.dtype).at[0].set(first_row)


def fiedler(a: ArrayLike) -> Array:
    """The symmetric Fiedler matrix ``|a_i - a_j|``."""
    check_arraylike("fiedler", a)
    a = jnp.atleast_1d(a)
    return jnp.abs(a[..., None] - a[..., None, :])


def fiedler_companion(a: ArrayLike) -> Array:
    """The Fiedler companion matrix (pentadiagonal) of the polynomial ``a``."""
    a, = promote_args_inexact("fiedler_companion", a)
    a = jnp.atleast_1d(a)
    if a.shape[-1] == 0:
        raise ValueError("fiedler_companion requires the last axis of 'a' to have nonzero "
                         f"length, but got an array of shape {a.shape}.")
    return _fiedler_companion(a)


@partial(jnp.vectorize, signature="(n)->(m,m)")
def _fiedler_companion(a):
    n = a.shape[0] - 1
    if n == 0:
        return jnp.empty_like(a, shape=(0, 0))
    a = a / a[0]
    if n == 1:
        return -a[1:].reshape(1, 1)
    i, j = jnp.arange(n)[:, None], jnp.arange(n)[None, :]
    # Lookups clipped into range (the masks pick the valid cells), made in JAX's order.
    super_val, sub_val = -a[jnp.minimum(i + 2, n)], -a[jnp.minimum(i + 1, n)]
    even, odd = i % 2 == 0, i % 2 == 1
    one, zero = jnp.array(1, dtype=a.dtype), jnp.array(0, dtype=a.dtype)
    conditions = [(i == 0) & (j == 0), (i == 1) & (j == 0), (j == i + 1) & even,
                  (j == i + 2) & even, (j == i - 1) & even & (i >= 2),
                  (j == i - 2) & odd & (i >= 3)]
    choices = [-a[1], one, super_val, one, sub_val, one]
    return jnp.select(conditions, choices, default=zero)


@partial(jit, static_argnames=("n", "mode"))
def convolution_matrix(a: ArrayLike, n: int, mode: str = "full") -> Array:
    """The matrix of convolution with ``a`` applied to length-``n`` inputs ('full', 'valid'
    or 'same' output)."""
    n = operator.index(n)
    if n <= 0:
        raise ValueError(f"n must be a positive integer; got {n}.")
    check_arraylike("convolution_matrix", a)
    a = jnp.asarray(a)
    if a.ndim == 0:
        raise ValueError("convolution_matrix: a must be at least 1-dimensional, got a scalar.")
    m = a.shape[-1]
    if m < 1:
        raise ValueError(f"len(a) must be at least 1; got shape {a.shape}.")
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"mode must be one of 'full', 'valid', 'same'; got {mode!r}.")
    pad = [(0, 0)] * (a.ndim - 1) + [(0, n - 1)]
    az, raz = jnp.pad(a, pad), jnp.pad(jnp.flip(a, axis=-1), pad)
    length = m + n - 1
    if mode == "same":
        trim = min(n, m) - 1
        begin, end = trim // 2, trim - trim // 2
    elif mode == "valid":
        begin = end = min(n, m) - 1
    else:
        begin = end = 0
    col0 = lax.slice_in_dim(az, begin, length - end, axis=-1)
    row0 = lax.slice_in_dim(raz, length - n - begin, length - begin, axis=-1)
    return toeplitz(col0, row0)


@partial(jit, static_argnames=("n",))
def hilbert(n: int) -> Array:
    """The Hilbert matrix ``1 / (i + j + 1)``."""
    a = lax.broadcasted_iota(dtypes.canonicalize_dtype(np.float64), (n, 1), 0)
    return 1 / (a + a.T + 1)


@partial(jit, static_argnames=("n",))
def invhilbert(n: int) -> Array:
    """The inverse of the Hilbert matrix (closed form in binomial coefficients)."""
    a = jnp.arange(n, dtype=dtypes.canonicalize_dtype(np.float64))
    i, j = a[:, None], a[None, :]
    s = i + j
    return ((-1.0) ** s * (s + 1.0) * comb(n + i, n - j - 1) * comb(n + j, n - i - 1)
            * comb(s, i) ** 2)


@jit
def _binom(n, k):
    # The three lgammas first, then the subtractions: JAX's equation order.
    a = lax.lgamma(n + 1.0)
    b = lax.lgamma(n - k + 1.0)
    c = lax.lgamma(k + 1.0)
    return lax.exp(a - b - c)


def _check_kind(kind):
    kind = "symmetric" if kind is None else kind
    valid = ["symmetric", "lower", "upper"]
    if kind not in valid:
        raise ValueError(f"Expected kind to be one of: {valid}; got {kind}")
    return kind


@partial(jit, static_argnames=("n", "kind"))
def pascal(n: int, kind: str | None = None) -> Array:
    """The Pascal matrix (symmetric, lower or upper)."""
    kind = _check_kind(kind)
    a = jnp.arange(n, dtype=np.float32)
    lower = _binom(a[:, None], a[None, :])
    return lower if kind == "lower" else lower.T if kind == "upper" else jnp.dot(lower, lower.T)


@partial(jit, static_argnames=("n", "kind"))
def invpascal(n: int, kind: str | None = None) -> Array:
    """The inverse of the Pascal matrix."""
    kind = _check_kind(kind)
    a = jnp.arange(n, dtype=dtypes.canonicalize_dtype(np.float64))
    i, j = a[:, None], a[None, :]
    lower = ((-1.0) ** (i - j)) * _binom(i, j)
    return lower if kind == "lower" else lower.T if kind == "upper" else jnp.dot(lower.T, lower)


@partial(jit, static_argnames=("n", "full"))
def helmert(n: int, full: bool = False) -> Array:
    """The Helmert matrix (the ``n - 1`` contrast rows, plus the mean row if ``full``)."""
    if n < 1:
        raise ValueError(f"n must be a positive integer; got {n}.")
    i, j = jnp.arange(n - 1)[:, None], jnp.arange(n)[None, :]
    k = i + 1
    k_f = k.astype(dtypes.canonicalize_dtype(np.float64))
    denom = jnp.sqrt(k_f * (k_f + 1))
    h = jnp.where(j <= i, 1.0 / denom, jnp.where(j == k, -k_f / denom, jnp.zeros_like(denom)))
    if full:
        h = jnp.concatenate([jnp.full((1, n), 1.0 / jnp.sqrt(n), dtype=h.dtype), h], axis=0)
    return h


@partial(jit, static_argnames=("n", "dtype"))
def hadamard(n: int, dtype=int) -> Array:
    """The Sylvester-construction Hadamard matrix of order ``n`` (a power of 2)."""
    if n < 1 or not math.log2(n).is_integer():
        raise ValueError(f"n must be a positive power of 2; got {n}.")
    h = jnp.ones((1, 1), dtype=dtype)
    for _ in range(int(math.log2(n))):
        h = jnp.block([[h, h], [h, -h]])
    return h


@partial(jit, static_argnames=("n", "scale", "dtype"))
def dft(n: int, scale: str | None = None, *, dtype=None) -> Array:
    """The discrete Fourier transform matrix (scaled by ``1/sqrt(n)`` or ``1/n`` if asked)."""
    if scale is not None and scale not in ("sqrtn", "n"):
        raise ValueError(f"scale must be None, 'sqrtn', or 'n'; got {scale!r}.")
    if dtype is None:
        dtype = dtypes.canonicalize_dtype(np.complex128)
    else:
        dtype = dtypes.check_and_canonicalize_user_dtype(dtype, "dft")
        if not dtypes.issubdtype(dtype, np.complexfloating):
            raise ValueError(f"dtype must be a complex floating-point type; got {dtype}.")
    a = jnp.arange(n, dtype=dtype)
    omegas = jnp.exp(-2j * np.pi * a[:, None] * a[None, :] / n)
    if scale == "sqrtn":
        return omegas / jnp.sqrt(n)
    if scale == "n":
        return omegas / n
    return omegas
