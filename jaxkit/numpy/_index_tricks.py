"""Index helpers: ``mgrid``/``ogrid``, ``r_``/``c_``, ``s_``/``index_exp``, ``ix_``,
``tril_indices``/``triu_indices`` (and ``_from``), ``diag_indices`` (and ``_from``),
``mask_indices``, ``fill_diagonal``, ``choose``."""
from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.runtime.array import Array
from jaxkit.numpy._creation import (arange, array, asarray, indices, linspace, meshgrid, ones,
                                    tril, triu)
from jaxkit.numpy._elementwise import clip
from jaxkit.numpy._promotion import (
    broadcast_arrays,
    check_arraylike,
    ensure_arraylike,
    promote_dtypes,
)
from jaxkit.numpy._put_place import _tile_to_size
from jaxkit.numpy._shape import concatenate, expand_dims, stack, transpose
from jaxkit.numpy._sorting import nonzero
from jaxkit.typing import ArrayLike


def _grid_1d(s: slice, op_name: str) -> Array:
    start = core.concrete_or_error(s.start, f"slice start of jnp.{op_name}") or 0
    stop = core.concrete_or_error(s.stop, f"slice stop of jnp.{op_name}")
    step = core.concrete_or_error(s.step, f"slice step of jnp.{op_name}") or 1
    if np.iscomplex(step):
        return linspace(start, stop, int(abs(step)))
    return arange(start, stop, step)


class _Mgrid:
    """``jnp.mgrid[0:3, 0:4]``: a dense (stacked) coordinate grid."""

    def __getitem__(self, key: slice | tuple[slice, ...]) -> Array:
        if isinstance(key, slice):
            return _grid_1d(key, "mgrid")
        parts = promote_dtypes(*(_grid_1d(k, "mgrid") for k in key))
        grids = meshgrid(*parts, indexing="ij", sparse=False)
        return stack(grids, 0) if grids else arange(0)


class _Ogrid:
    """``jnp.ogrid[0:3, 0:4]``: an open (sparse) coordinate grid."""

    def __getitem__(self, key: slice | tuple[slice, ...]) -> Any:
        if isinstance(key, slice):
            return _grid_1d(key, "ogrid")
        parts = promote_dtypes(*(_grid_1d(k, "ogrid") for k in key))
        return meshgrid(*parts, indexing="ij", sparse=True)


class _AxisConcat:
    """``r_`` / ``c_``: concatenation by index syntax, with NumPy's string directives."""

    def __init__(self, axis: int, ndmin: int, trans1d: int, op_name: str):
        self.axis, self.ndmin, self.trans1d, self.op_name = axis, ndmin, trans1d, op_name

    def __getitem__(self, key: Any) -> Array:
        key_tup = key if isinstance(key, tuple) else (key,)
        params = [self.axis, self.ndmin, self.trans1d, -1]
        directive = key_tup[0]
        if isinstance(directive, str):
            key_tup = key_tup[1:]
            if directive == "r":
                params[-1] = 0
            elif directive == "c":
                params[-1] = 1
            else:
                vec: list[Any] = directive.split(",")
                k = len(vec)
                vec = vec + params[k:] if k < 4 else vec[:3] + [params[-1]]
                try:
                    params = [int(v) for v in vec]
                except ValueError as err:
                    raise ValueError(f"could not understand directive {directive!r}") from err
        axis, ndmin, trans1d, matrix = params
        output = []
        for item in key_tup:
            if isinstance(item, slice):
                newobj, item_ndim = _grid_1d(item, self.op_name), 0
            elif isinstance(item, str):
                raise ValueError("string directive must be placed at the beginning")  # noqa: TRY004
            else:
                newobj = array(item, copy=False)
                item_ndim = newobj.ndim
            newobj = array(newobj, copy=False, ndmin=ndmin)
            if trans1d != -1 and ndmin - item_ndim > 0:
                order = tuple(range(ndmin))
                shifts = ndmin - abs(ndmin + trans1d + 1) % ndmin
                newobj = transpose(newobj, order[shifts:] + order[:shifts])
            output.append(newobj)
        res = concatenate(tuple(output), axis=axis)
        if matrix != -1 and res.ndim == 1:
            res = expand_dims(res, matrix)
        return res

    def __len__(self) -> int:
        return 0


mgrid = _Mgrid()
ogrid = _Ogrid()
r_ = _AxisConcat(0, 1, -1, "r_")
c_ = _AxisConcat(-1, 2, 0, "c_")
s_ = np.s_
index_exp = np.index_exp


def ix_(*args: ArrayLike) -> tuple[Array, ...]:
    """``jnp.ix_``: open-mesh index arrays from 1-D sequences."""
    check_arraylike("ix", *args)
    n = len(args)
    out = []
    for i, a in enumerate(args):
        a = asarray(a)
        if a.ndim != 1:
            raise ValueError(f"Arguments to jax.numpy.ix_ must be 1-dimensional, got shape "
                             f"{a.shape}")
        if a.dtype == np.bool_:
            raise NotImplementedError("Boolean arguments to jax.numpy.ix_ are not implemented")
        shape = [1] * n
        shape[i] = a.shape[0]
        if a.size == 0:
            out.append(lax.full(tuple(shape), 0, dtypes.default_int_dtype()))
        else:
            out.append(lax.broadcast_in_dim(a, tuple(shape), (i,)))
    return tuple(out)


def _triu_size(n: int, m: int, k: int) -> int:
    """The number of entries of an ``n x m`` matrix on or above its ``k``-th diagonal."""
    if k < 0:
        return n * m - _triu_size(m, n, 1 - k)
    if k >= m:
        return 0
    mk = min(n, m - k)
    return mk * (mk + 1) // 2 + mk * (m - k - mk)


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Array, Array]:
    """``jnp.tril_indices``: row and column indices of the lower triangle (a static count, so
    it works under ``jit``, as JAX's)."""
    n = operator.index(core.concrete_or_error(n, "n argument of jnp.triu_indices"))
    k = operator.index(core.concrete_or_error(k, "k argument of jnp.triu_indices"))
    m = n if m is None else operator.index(core.concrete_or_error(
        m, "m argument of jnp.triu_indices"))
    i, j = nonzero(tril(ones((n, m)), k=k), size=_triu_size(m, n, -k))
    return i, j


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Array, Array]:
    """``jnp.triu_indices``: row and column indices of the upper triangle."""
    n = operator.index(core.concrete_or_error(n, "n argument of jnp.triu_indices"))
    k = operator.index(core.concrete_or_error(k, "k argument of jnp.triu_indices"))
    m = n if m is None else operator.index(core.concrete_or_error(
        m, "m argument of jnp.triu_indices"))
    i, j = nonzero(triu(ones((n, m)), k=k), size=_triu_size(n, m, k))
    return i, j


def _shape_of(name: str, arr: Any) -> tuple[int, ...]:
    if hasattr(arr, "shape"):
        return arr.shape
    return ensure_arraylike(name, arr).shape


def tril_indices_from(arr: ArrayLike, k: int = 0) -> tuple[Array, Array]:
    """``jnp.tril_indices_from``: ``tril_indices`` for the shape of a 2-D array."""
    shape = _shape_of("tril_indices_from", arr)
    if len(shape) != 2:
        raise ValueError("Only 2-D inputs are accepted")
    return tril_indices(shape[0], k=k, m=shape[1])


def triu_indices_from(arr: ArrayLike, k: int = 0) -> tuple[Array, Array]:
    """``jnp.triu_indices_from``: ``triu_indices`` for the shape of a 2-D array."""
    shape = _shape_of("triu_indices_from", arr)
    if len(shape) != 2:
        raise ValueError("Only 2-D inputs are accepted")
    return triu_indices(shape[0], k=k, m=shape[1])


def mask_indices(n: int, mask_func: Callable, k: int = 0, *, size: int | None = None
                 ) -> tuple[Array, ...]:
    """``jnp.mask_indices``: the indices where ``mask_func(ones((n, n)), k)`` is nonzero."""
    i, j = nonzero(mask_func(ones((n, n)), k), size=size)
    return (i, j)


def diag_indices(n: int, ndim: int = 2) -> tuple[Array, ...]:
    """``jnp.diag_indices``: ``ndim`` copies of ``arange(n)``."""
    n = operator.index(core.concrete_or_error(n, "'n' argument of jnp.diag_indices()"))
    ndim = operator.index(core.concrete_or_error(ndim, "'ndim' argument of jnp.diag_indices()"))
    if n < 0:
        raise ValueError(f"n argument to diag_indices must be nonnegative, got {n}")
    if ndim < 0:
        raise ValueError(f"ndim argument to diag_indices must be nonnegative, got {ndim}")
    return (lax.iota(dtypes.default_int_dtype(), n),) * ndim


def diag_indices_from(arr: ArrayLike) -> tuple[Array, ...]:
    """``jnp.diag_indices_from``: ``diag_indices`` of a square array."""
    arr = ensure_arraylike("diag_indices_from", arr)
    if arr.ndim < 2:
        raise ValueError("input array must be at least 2-d")
    if len(set(arr.shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    return diag_indices(arr.shape[0], ndim=arr.ndim)


def fill_diagonal(a: ArrayLike, val: ArrayLike, wrap: bool = False, *,
                  inplace: bool = True) -> Array:
    """``jnp.fill_diagonal`` (``inplace=False`` required): ``a`` with ``val`` on the main
    diagonal (cycled)."""
    if inplace:
        raise NotImplementedError("JAX arrays are immutable, must use inplace=False")
    if wrap:
        raise NotImplementedError("wrap=True is not implemented, must use wrap=False")
    a, val = ensure_arraylike("fill_diagonal", a, val)
    if a.ndim < 2:
        raise ValueError("array must be at least 2-d")
    if a.ndim > 2 and not all(n == a.shape[0] for n in a.shape[1:]):
        raise ValueError("All dimensions of input must be of equal length")
    n = min(a.shape)
    idx = diag_indices(n, a.ndim)
    return a.at[idx].set(val if val.ndim == 0 else _tile_to_size(val.ravel(), n))


def choose(a: ArrayLike, choices: Sequence[ArrayLike], out: None = None,
           mode: str = "raise") -> Array:
    """``jnp.choose``: ``choices[a[i]][i]`` elementwise (``mode`` 'raise' needs a concrete
    ``a``; 'wrap' and 'clip' do not)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.choose is not supported.")
    a, *choices = (ensure_arraylike("choose", x) for x in (a, *choices))
    if not dtypes.issubdtype(a.dtype, np.integer):
        raise ValueError("`a` array must be integer typed")
    n = len(choices)
    if mode == "raise":
        arr = core.concrete_or_error(
            a, "The error occurred because jnp.choose was jit-compiled with mode='raise'. Use "
               "mode='wrap' or mode='clip' instead.")
        if np.any((np.asarray(arr) < 0) | (np.asarray(arr) >= n)):
            raise ValueError("invalid entry in choice array")
    elif mode == "wrap":
        arr = asarray(a) % n
    elif mode == "clip":
        arr = clip(a, 0, n - 1)
    else:
        raise ValueError(f"mode={mode!r} not understood. Must be 'raise', 'wrap', or 'clip'")
    # As JAX's: index the array of the (broadcast) choices by ``arr`` and a sparse grid.
    arr, *choices = broadcast_arrays(arr, *choices)
    return array(choices)[(arr,) + indices(arr.shape, sparse=True)]
