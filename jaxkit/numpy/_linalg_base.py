"""Pieces shared by ``jaxkit.numpy.linalg``'s modules: the result types JAX returns
(``EighResult``, ``SlogdetResult``, ...) and the argument checks and small matrix helpers."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxkit import lax
from jaxkit.runtime.array import Array
from jaxkit.numpy._promotion import (
    broadcast_to_shape,
    ensure_arraylike,
    promote_dtypes_inexact,
)
from jaxkit.numpy._shape import matrix_transpose as _matrix_transpose
from jaxkit.numpy._ufuncs import (
    conj,
)
from jaxkit.typing import ArrayLike


class EigResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class EighResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class QRResult(NamedTuple):
    Q: Array
    R: Array


class SlogdetResult(NamedTuple):
    sign: Array
    logabsdet: Array


class SVDResult(NamedTuple):
    U: Array
    S: Array
    Vh: Array


def _square(name: str, a: ArrayLike) -> Array:
    a = ensure_arraylike(name, a)
    a, = promote_dtypes_inexact(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"Argument to {name}() must have shape [..., n, n], got {a.shape}.")
    return a


def _H(x: Array) -> Array:
    return conj(_matrix_transpose(x))


def _eye_like(a: Array, n: int) -> Array:
    eye = lax.convert_element_type(lax.eq(lax.broadcasted_iota(np.int32, (n, n), 0),
                                          lax.broadcasted_iota(np.int32, (n, n), 1)), a.dtype)
    return broadcast_to_shape(eye, a.shape[:-2] + (n, n))


