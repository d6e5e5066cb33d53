"""Shape manipulation: ``reshape``, ``ravel``, ``transpose`` & co., ``squeeze``/``expand_dims``,
``atleast_*d``, joining (``concatenate``, ``stack`` ...), splitting, ``tile``, ``repeat``,
``flip``/``roll``/``rot90``, ``append``/``delete``/``insert``, ``resize``.

Everything is static-shape: sizes, axes and counts must be concrete Python values (as in JAX);
only ``repeat`` with ``total_repeat_length`` and ``roll`` accept traced amounts.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.lax.sharding_axes import auto_axes_out
from jaxkit.lax.sharding_rules import resolve_out_sharding
from jaxkit.runtime.array import Array
from jaxkit.runtime.sharding import (AxisType, NamedSharding, PartitionSpec,
                                     current_abstract_mesh)
from jaxkit.transforms.vmap import vmap
from jaxkit.numpy._creation import asarray, full, zeros_like
from jaxkit.numpy._index_update import scatter_update
from jaxkit.numpy._indexing import getitem
from jaxkit.numpy._jitted import jitted
from jaxkit.numpy._promotion import (
    broadcast_shapes,
    broadcast_to_shape,
    canonicalize_axis,
    canonicalize_shape,
    check_arraylike,
    ensure_arraylike,
    promote_dtypes,
)
from jaxkit.numpy._reductions import _ensure_optional_axes
from jaxkit.numpy._take import take
from jaxkit.numpy._ufuncs import remainder
from jaxkit.typing import ArrayLike, DTypeLike


def _index_tuple(x: Any) -> tuple[int, ...]:
    try:
        return (operator.index(x),)
    except TypeError:
        return tuple(operator.index(i) for i in x)


# --------------------------------------------------------------------------------------------
# reshape, ravel, transpose
# --------------------------------------------------------------------------------------------

def _compute_newshape(shape: tuple[int, ...], size: int, newshape: Any) -> tuple[int, ...]:
    if isinstance(newshape, core.Tracer):
        # JAX's class: a traced size is a bad shape entry (TypeError), not a concretization.
        canonicalize_shape(list(newshape) if np.ndim(newshape) else [newshape])
    newshape = canonicalize_shape(newshape) if not isinstance(newshape, (Array, core.Tracer)) \
        else \
        tuple(operator.index(d) for d in np.asarray(core.concrete_or_error(
            newshape, "The new shape of jnp.reshape")).reshape(-1))
    neg = [i for i, d in enumerate(newshape) if d == -1]
    if len(neg) > 1:
        raise TypeError("can only specify one unknown axis size with a `-1` value, got "
                        f"{newshape}")  # (JAX's class and words)
    if any(d < -1 for d in newshape):
        raise ValueError(f"cannot reshape array of shape {shape} (size {size}) into shape "
                         f"{newshape}: negative dimensions are not allowed")
    if neg:
        known = math.prod(d for d in newshape if d != -1)
        if known == 0 or size % known:
            raise TypeError(f"cannot reshape array of shape {shape} (size {size}) into shape "
                            f"{newshape} because the product of specified axis sizes ({known}) "
                            f"does not evenly divide {size}")
        newshape = tuple(size // known if d == -1 else d for d in newshape)
    if math.prod(newshape) != size:
        raise TypeError(f"cannot reshape array of shape {shape} (size {size}) into shape "
                        f"{newshape} (size {math.prod(newshape)})")
    return newshape


def reshape(a: ArrayLike, shape: Any, order: str = "C", *, copy: bool | None = None,
            out_sharding: Any = None) -> Array:
    """``jnp.reshape``: ``a`` with a new shape (one entry may be -1); ``order='C'`` or
    ``'F'``; ``out_sharding`` (over Explicit mesh axes) types the result's layout. (JAX
    0.10.2 has removed the deprecated ``newshape`` keyword.)"""
    check_arraylike("reshape", a)
    if out_sharding is None and isinstance(a, (np.ndarray, np.generic)):
        # As JAX's, which hands a value to its own reshape method: a NumPy input gives
        # NumPy's result (a float64 ndarray stays one) and NumPy's errors.
        return a.reshape(shape, order=order)
    return _reshape(a, shape, order, copy=copy, out_sharding=out_sharding)


@jitted(static_argnames=("shape", "order", "copy"), converts_first=True,
        jax_jits=False, name="reshape")
def _reshape(a: ArrayLike, shape: Any, order: str = "C", *, copy: bool | None = None,
             out_sharding: Any = None) -> Array:
    a = asarray(a)
    new = _compute_newshape(a.shape, a.size, shape)
    if order == "C":
        return lax.reshape(a, new, out_sharding=out_sharding)
    if order == "F":
        dims = tuple(range(a.ndim - 1, -1, -1))
        # The reshape is of the transposed result: its layout is the asked one reversed.
        s = resolve_out_sharding("jnp.reshape", out_sharding)
        s = None if s is None else s.update(spec=PartitionSpec(*s.spec.partitions[::-1]))
        return lax.transpose(lax.reshape(a, new[::-1], dims, out_sharding=s),
                             tuple(range(len(new) - 1, -1, -1)))
    if order == "A":
        raise NotImplementedError("np.reshape order=A is not implemented.")
    raise ValueError(f"Unexpected value for 'order' argument: {order}.")


@jitted(static_argnames=("order", "out_sharding"), stages_only=True)
def ravel(a: ArrayLike, order: str = "C", *, out_sharding: Any = None) -> Array:
    """``jnp.ravel``: ``a`` as a 1-D array (laid out as ``out_sharding`` over Explicit mesh
    axes)."""
    # Resolved against the mesh in context before the jitted body (its cache key), as dot's.
    return _ravel(a, order, out_sharding=resolve_out_sharding("ravel", out_sharding))


@jitted(static_argnames=("order", "out_sharding"), name="ravel")
def _ravel(a: ArrayLike, order: str = "C", *, out_sharding: Any = None) -> Array:
    a = ensure_arraylike("ravel", a)
    if order == "K":
        raise NotImplementedError("Ravel not implemented for order='K'.")
    return reshape(a, (a.size,), order, out_sharding=out_sharding)


@jitted(static_argnames=("axes",), converts_first=True,
        jax_jits=False)
def transpose(a: ArrayLike, axes: Sequence[int] | None = None) -> Array:
    """``jnp.transpose``: permute the axes (reverse them by default)."""
    a = ensure_arraylike("transpose", a)
    if axes is None:
        axes = tuple(range(a.ndim - 1, -1, -1))
    axes = tuple(canonicalize_axis(i, a.ndim) for i in _index_tuple(axes))
    if sorted(axes) != list(range(a.ndim)):
        # TypeError, as JAX (lax.transpose's check; NumPy says ValueError).
        raise TypeError(f"transpose permutation isn't a permutation of operand dimensions, "
                        f"got permutation {axes} for operand shape {a.shape}.")
    return lax.transpose(a, axes)


def permute_dims(a: ArrayLike, /, axes: tuple[int, ...]) -> Array:
    """``jnp.permute_dims`` (the array API's ``transpose``): ``axes`` is required and is
    lax.transpose's permutation, as JAX's (no default, no negative axes)."""
    return lax.transpose(ensure_arraylike("permute_dims", a), axes)


@jitted(converts_first=True)
def matrix_transpose(x: ArrayLike, /) -> Array:
    """``jnp.matrix_transpose``: swap the last two axes."""
    x = ensure_arraylike("matrix_transpose", x)
    if x.ndim < 2:
        raise ValueError(f"x must be at least two-dimensional for matrix_transpose; got "
                         f"ndim={x.ndim}")
    return lax.transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


@jitted(static_argnames=("axis1", "axis2"))
def swapaxes(a: ArrayLike, axis1: int, axis2: int) -> Array:
    """``jnp.swapaxes``: exchange two axes."""
    a = ensure_arraylike("swapaxes", a)
    perm = list(range(a.ndim))
    i, j = (canonicalize_axis(axis1, a.ndim, IndexError),
            canonicalize_axis(axis2, a.ndim, IndexError))
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(a, perm)


@jitted(static_argnames=("source", "destination"), converts_first=True)
def moveaxis(a: ArrayLike, source: int | Sequence[int], destination: int | Sequence[int]
             ) -> Array:
    """``jnp.moveaxis``: move axes to new positions, keeping the order of the others."""
    a = ensure_arraylike("moveaxis", a)
    source = tuple(canonicalize_axis(i, a.ndim) for i in _index_tuple(source))
    destination = tuple(canonicalize_axis(i, a.ndim) for i in _index_tuple(destination))
    if len(source) != len(destination):
        raise ValueError(f"Inconsistent number of elements: {len(source)} vs "
                         f"{len(destination)}")
    perm = [i for i in range(a.ndim) if i not in source]
    for dest, src in sorted(zip(destination, source)):
        perm.insert(dest, src)
    return lax.transpose(a, perm)


@jitted(static_argnames=("axis", "start"), inline=False)
def rollaxis(a: ArrayLike, axis: int, start: int = 0) -> Array:
    """``jnp.rollaxis``: move ``axis`` to before position ``start``."""
    a = ensure_arraylike("rollaxis", a)
    start = operator.index(start)
    a_ndim = a.ndim
    axis = canonicalize_axis(axis, a_ndim)
    if not -a_ndim <= start <= a_ndim:
        raise ValueError(f"start={start} must satisfy {-a_ndim}<=start<={a_ndim}")
    if start < 0:
        start += a_ndim
    if start > axis:
        start -= 1
    return moveaxis(a, axis, start)


@jitted(static_argnames=("axis",), converts_first=True)
def squeeze(a: ArrayLike, axis: int | Sequence[int] | None = None) -> Array:
    """``jnp.squeeze``: remove axes of size 1 (all of them by default)."""
    a = ensure_arraylike("squeeze", a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(a.shape) if d == 1)
    else:
        axes = tuple(canonicalize_axis(i, a.ndim) for i in _index_tuple(axis))
    return lax.squeeze(a, axes)


@jitted(static_argnames=("axis",), converts_first=True)
def expand_dims(a: ArrayLike, axis: int | Sequence[int]) -> Array:
    """``jnp.expand_dims``: insert axes of size 1 at ``axis`` (positions in the result)."""
    a = ensure_arraylike("expand_dims", a)
    return lax.expand_dims(a, _index_tuple(axis))


def _atleast(n: int, name: str, arys: tuple) -> Any:
    check_arraylike(name, *arys)
    out = []
    for x in arys:
        arr = asarray(x)
        if n == 3 and arr.ndim < 3:
            dims = {0: (0, 1, 2), 1: (0, 2), 2: (2,)}[arr.ndim]
            arr = lax.expand_dims(arr, dims)
        elif arr.ndim < n:
            arr = lax.expand_dims(arr, tuple(range(n - arr.ndim)))
        out.append(arr)
    return out[0] if len(out) == 1 else out


@jitted(inline=False)
def atleast_1d(*arys: ArrayLike) -> Any:
    """``jnp.atleast_1d``: scalars become shape (1,)."""
    return _atleast(1, "atleast_1d", arys)


@jitted(inline=False)
def atleast_2d(*arys: ArrayLike) -> Any:
    """``jnp.atleast_2d``: leading axes of size 1 up to two dimensions."""
    return _atleast(2, "atleast_2d", arys)


@jitted(inline=False)
def atleast_3d(*arys: ArrayLike) -> Any:
    """``jnp.atleast_3d``: (N,) becomes (1, N, 1), (M, N) becomes (M, N, 1)."""
    return _atleast(3, "atleast_3d", arys)


# --------------------------------------------------------------------------------------------
# Joining and splitting
# --------------------------------------------------------------------------------------------

def _rows(arrays: Any) -> list:
    """A sequence of array-likes, or the rows of an array."""
    if isinstance(arrays, (np.ndarray, Array, core.Tracer)):
        arr = asarray(arrays)
        if arr.ndim == 0:
            raise ValueError("Need at least one array to concatenate.")
        return [getitem(arr, i) for i in range(arr.shape[0])]
    return list(arrays)


def _is_array(x: Any) -> bool:
    return isinstance(x, (np.ndarray, Array, core.Tracer))


def _concatenate_array(arr: Any, axis: int | None, dtype: DTypeLike | None = None) -> Array:
    # An array's rows joined by one reshape (moving axis 0 next to ``axis``), as JAX's.
    arr = asarray(arr, dtype=dtype)
    if arr.ndim == 0 or arr.shape[0] == 0:
        raise ValueError("Need at least one array to concatenate.")
    if axis is None:
        return lax.reshape(arr, (arr.size,))
    if arr.ndim == 1:
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    axis = canonicalize_axis(axis, arr.ndim - 1)
    shape = arr.shape[1:axis + 1] + (arr.shape[0] * arr.shape[axis + 1],) + arr.shape[axis + 2:]
    return lax.reshape(arr, shape, [*range(1, axis + 1), 0, *range(axis + 1, arr.ndim)])


def concatenate(arrays: Any, axis: int | None = 0, dtype: DTypeLike | None = None) -> Array:
    """``jnp.concatenate``: join arrays along an existing axis (flattened if ``axis=None``)."""
    if _is_array(arrays):
        return _concatenate_array(arrays, axis, dtype=dtype)
    arrays = _rows(arrays)
    check_arraylike("concatenate", *arrays)
    if not arrays:
        raise ValueError("Need at least one array to concatenate.")
    if axis is None:
        return concatenate([ravel(a) for a in arrays], axis=0, dtype=dtype)
    if np.ndim(arrays[0]) == 0:
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    axis = canonicalize_axis(axis, np.ndim(arrays[0]))
    if dtype is None:
        arrays = promote_dtypes(*arrays)
    else:
        arrays = [asarray(a, dtype=dtype) for a in arrays]
    arrays = [asarray(a) for a in arrays]
    if len(arrays) == 1:
        return arrays[0]
    return lax.concatenate(arrays, axis)


def concat(arrays: Sequence[ArrayLike], /, *, axis: int | None = 0) -> Array:
    """``jnp.concat`` (array API): ``concatenate``."""
    check_arraylike("concat", *arrays)
    return concatenate(arrays, axis=axis)


def stack(arrays: Any, axis: int = 0, out: None = None, dtype: DTypeLike | None = None
          ) -> Array:
    """``jnp.stack``: join arrays along a new axis."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.stack is not supported.")
    if isinstance(arrays, (np.ndarray, Array, core.Tracer)):
        return _stack_rows(asarray(arrays, dtype=dtype), axis)
    arrays = list(arrays)
    if not len(arrays):
        raise ValueError("Need at least one array to stack.")
    check_arraylike("stack", *arrays)
    shapes = {np.shape(a) for a in arrays}
    if len(shapes) != 1:
        raise ValueError("All input arrays must have the same shape. Got "
                         f"{', '.join(str(np.shape(a)) for a in arrays)}.")
    axis = canonicalize_axis(axis, np.ndim(arrays[0]) + 1)
    if dtype is not None:
        arrays = [asarray(a, dtype=dtype) for a in arrays]
    else:
        arrays = promote_dtypes(*arrays)
    return lax.stack(arrays, axis)  # one ``stack`` equation, as JAX builds it


def _stack_rows(arr: Array, axis: int) -> Array:
    """The rows of ``arr`` stacked along ``axis``: a new axis after it, merged with the rows'
    axis by one reshape (JAX's fast path for an array argument)."""
    if arr.ndim == 0 or arr.shape[0] == 0:
        raise ValueError("Need at least one array to concatenate.")
    axis = canonicalize_axis(axis, arr.ndim)
    arr = expand_dims(arr, axis + 1)
    shape = arr.shape[1:axis + 1] + (arr.shape[0] * arr.shape[axis + 1],) + arr.shape[axis + 2:]
    return lax.reshape(arr, shape, (*range(1, axis + 1), 0, *range(axis + 1, arr.ndim)))


@jitted(static_argnames=("axis",))
def unstack(x: ArrayLike, /, *, axis: int = 0) -> tuple[Array, ...]:
    """``jnp.unstack``: the slices of ``x`` along ``axis``."""
    x = ensure_arraylike("unstack", x)
    if x.ndim == 0:
        raise ValueError("Unstack requires arrays with rank > 0, however a scalar array was "
                         "passed.")
    return lax.unstack(x, axis=axis)


def vstack(tup: Any, dtype: DTypeLike | None = None) -> Array:
    """``jnp.vstack``: concatenate along axis 0 after ``atleast_2d``."""
    if _is_array(tup):
        # An array's rows, as JAX's: atleast_2d mapped over them, then one reshape.
        return concatenate(vmap(atleast_2d)(tup), axis=0, dtype=dtype)
    check_arraylike("vstack", *tup)
    return concatenate([atleast_2d(m) for m in tup], axis=0, dtype=dtype)


def hstack(tup: Any, dtype: DTypeLike | None = None) -> Array:
    """``jnp.hstack``: concatenate along axis 1 (axis 0 for 1-D inputs)."""
    if _is_array(tup):
        arrs = vmap(atleast_1d)(tup)
        return concatenate(arrs, axis=0 if arrs.ndim - 1 == 1 else 1, dtype=dtype)
    check_arraylike("hstack", *tup)
    arrs = [atleast_1d(m) for m in tup]
    return concatenate(arrs, axis=0 if arrs[0].ndim == 1 else 1, dtype=dtype)


def dstack(tup: Any, dtype: DTypeLike | None = None) -> Array:
    """``jnp.dstack``: concatenate along axis 2 after ``atleast_3d``."""
    if _is_array(tup):
        return concatenate(vmap(atleast_3d)(tup), axis=2, dtype=dtype)
    check_arraylike("dstack", *tup)
    return concatenate([atleast_3d(m) for m in tup], axis=2, dtype=dtype)


def column_stack(tup: Any) -> Array:
    """``jnp.column_stack``: 1-D arrays become columns of a 2-D array."""
    if _is_array(tup):
        arrs = vmap(lambda x: atleast_2d(x).T)(tup) if np.ndim(tup) < 3 else tup
        return concatenate(arrs, axis=1)
    check_arraylike("column_stack", *tup)
    arrs = [atleast_2d(a).T if a.ndim < 2 else a for a in map(asarray, tup)]
    return concatenate(arrs, axis=1)


@jitted(inline=False, pytree_args=True)
def block(arrays: Any) -> Array:
    """``jnp.block``: assemble an array from nested lists of blocks."""
    out, _ = _block(arrays)
    return out


def _block(xs: Any) -> tuple[Array, int]:
    if isinstance(xs, tuple):
        raise ValueError(f"jax.numpy.block does not allow tuples, got {xs}")  # noqa: TRY004
    if isinstance(xs, list):
        if len(xs) == 0:
            raise ValueError("jax.numpy.block does not allow empty list arguments")
        parts, depths = zip(*[_block(x) for x in xs])
        if any(d != depths[0] for d in depths[1:]):
            raise ValueError("Mismatched list depths in jax.numpy.block")
        rank = max(depths[0], max(np.ndim(x) for x in parts))
        parts = [lax.expand_dims(x, tuple(range(rank - x.ndim))) if x.ndim < rank else x
                 for x in parts]
        return concatenate(parts, axis=-depths[0]), depths[0] + 1
    return asarray(xs), 1


def _split(op: str, ary: ArrayLike, indices_or_sections: Any, axis: int = 0) -> list[Array]:
    ary = ensure_arraylike(op, ary)
    axis = canonicalize_axis(operator.index(core.concrete_or_error(
        axis, f"in jax.numpy.{op} argument `axis`")), ary.ndim, IndexError)
    size = ary.shape[axis]
    if isinstance(indices_or_sections, (tuple, list)) or (
            isinstance(indices_or_sections, (np.ndarray, Array)) and
            np.ndim(indices_or_sections) > 0):
        # As JAX's: the piece sizes are the differences of the indices, not clipped (a
        # negative or decreasing index is refused by lax.split, where NumPy would count it
        # from the end or give an empty piece).
        points = [operator.index(core.concrete_or_error(i, f"in jax.numpy.{op} argument 1"))
                  for i in indices_or_sections]
        sizes = list(np.diff(np.asarray([0, *points, size])))
        return list(lax.split(ary, sizes, axis=axis))
    num = int(core.concrete_or_error(indices_or_sections, f"in jax.numpy.{op} argument 1"))
    if num <= 0:
        raise ValueError("number sections must be larger than 0.")
    part, r = divmod(size, num)
    if r == 0:
        sizes = [part] * num
    elif op == "array_split":
        sizes = [part + 1] * r + [part] * (num - r)
    else:
        raise ValueError(f"array split does not result in an equal division: rest is {r}")
    # JAX 0.10.2 passes the sizes as NumPy integers, and its printed jaxprs show them so.
    return list(lax.split(ary, [np.int64(n) for n in sizes], axis=axis))


def split(ary: ArrayLike, indices_or_sections: Any, axis: int = 0) -> list[Array]:
    """``jnp.split``: equal parts, or pieces between the given indices."""
    return _split("split", ary, indices_or_sections, axis)


def array_split(ary: ArrayLike, indices_or_sections: Any, axis: int = 0) -> list[Array]:
    """``jnp.array_split``: like ``split`` but allows unequal parts."""
    return _split("array_split", ary, indices_or_sections, axis)


def vsplit(ary: ArrayLike, indices_or_sections: Any) -> list[Array]:
    """``jnp.vsplit``: split along axis 0."""
    return _split("vsplit", ary, indices_or_sections, 0)


def hsplit(ary: ArrayLike, indices_or_sections: Any) -> list[Array]:
    """``jnp.hsplit``: split along axis 1 (axis 0 for 1-D arrays)."""
    a = ensure_arraylike("hsplit", ary)
    return _split("hsplit", a, indices_or_sections, 0 if a.ndim == 1 else 1)


def dsplit(ary: ArrayLike, indices_or_sections: Any) -> list[Array]:
    """``jnp.dsplit``: split along axis 2."""
    return _split("dsplit", ary, indices_or_sections, 2)


# --------------------------------------------------------------------------------------------
# Repetition
# --------------------------------------------------------------------------------------------

def tile(A: ArrayLike, reps: int | Sequence[int]) -> Array:
    """``jnp.tile``: ``A`` repeated ``reps`` times along each axis."""
    A = ensure_arraylike("tile", A)
    reps_t = _index_tuple(reps)
    reps_t = (1,) * (A.ndim - len(reps_t)) + reps_t
    if any(r < 0 for r in reps_t):
        # A Python error where JAX's lowering fails (MLIRError: invalid tensor dimension
        # size), in the TypeError class of the other negative sizes.
        raise TypeError(f"jnp.tile reps must be nonnegative, got reps={reps_t}. Use 0 for "
                        "an empty result.")
    if len(reps_t) > A.ndim:
        A = lax.expand_dims(A, tuple(range(len(reps_t) - A.ndim)))
    return lax.tile(A, reps_t)


def repeat(a: ArrayLike, repeats: ArrayLike, axis: int | None = None, *,
           total_repeat_length: int | None = None, out_sharding: Any = None) -> Array:
    """``jnp.repeat``: each element repeated ``repeats`` times along ``axis``. Traced
    ``repeats`` need a static ``total_repeat_length``. Over a mesh with Explicit axes the body
    runs under ``auto_axes``, laid out as ``out_sharding`` (default: as ``a``, whose repeated
    axis must then be unsplit), as JAX's."""
    check_arraylike("repeat", a)
    a = asarray(a)
    if axis is None:
        a = ravel(a)
        axis = 0
    sharding = resolve_out_sharding("repeat", out_sharding)
    context = current_abstract_mesh()
    if sharding is None and AxisType.Explicit in context.axis_types:
        typed = core.get_aval(a)._sharding
        if typed is None:
            sharding = NamedSharding(context, PartitionSpec())
        elif typed.spec.partitions[axis] is not None:
            raise ValueError("Please pass sharding to `jnp.repeat` via `out_sharding` "
                             "parameter.")
        else:
            sharding = typed
    if sharding is None:
        return _repeat(a, repeats, axis, total_repeat_length)
    if total_repeat_length is None:
        return auto_axes_out(lambda x: _repeat(x, repeats, axis, None), sharding)(a)
    return auto_axes_out(lambda r, x: _repeat(x, r, axis, total_repeat_length),
                         sharding)(repeats, a)


def _repeat(a: Array, repeats: ArrayLike, axis: int,
            total_repeat_length: int | None) -> Array:
    axis = canonicalize_axis(operator.index(axis), a.ndim) if a.ndim else 0
    if total_repeat_length is None:
        repeats = np.asarray(core.concrete_or_error(
            repeats, "When jit-compiling jnp.repeat, the total number of repeats must be "
            "static. To fix this, either specify a static value for `repeats`, or pass a "
            "static value to `total_repeat_length`."))
        if repeats.ndim == 0 and a.ndim != 0:
            r = int(repeats)
            aux = list(a.shape)
            aux.insert(axis + 1, r)
            out = lax.broadcast_in_dim(a, tuple(aux),
                                       tuple(i for i in range(len(aux)) if i != axis + 1))
            result_shape = list(a.shape)
            result_shape[axis] *= r
            return lax.reshape(out, tuple(result_shape))
        repeats = np.ravel(repeats)
        if a.ndim == 0:
            if repeats.shape != (1,):
                raise ValueError("`repeat` with a scalar parameter `a` is only implemented for "
                                 "scalar values of the parameter `repeats`.")
            return full((int(repeats[0]),), a)
        repeats = np.broadcast_to(repeats, (a.shape[axis],))
        idx = np.repeat(np.arange(a.shape[axis], dtype=np.int32), repeats)
        return take(a, asarray(idx), axis=axis, mode="clip")
    total = operator.index(total_repeat_length)
    repeats = ravel(ensure_arraylike("repeat", repeats))
    if a.ndim == 0:
        if repeats.shape != (1,):
            raise ValueError("`repeat` with a scalar parameter `a` is only implemented for "
                             "scalar values of the parameter `repeats`.")
        return full((total,), a)
    if total == 0:
        shape = list(a.shape)
        shape[axis] = 0
        return zeros_like(a, shape=tuple(shape))
    if a.shape[axis] == 0:
        return a
    repeats = broadcast_to_shape(repeats, (a.shape[axis],))
    # Exclusive cumulative sum of the repeats: where each block starts in the output.
    exclusive = lax.concatenate([lax.full((1,), 0, repeats.dtype),
                                 lax.slice(repeats, (0,), (a.shape[axis] - 1,))], 0)
    starts = lax.cumsum(exclusive, axis=0)
    marks = scatter_update(lax.full((total,), 0, np.int32), starts, np.int32(1),
                           lax.scatter_add, False, False, "drop")
    gather_idx = lax.sub(lax.cumsum(marks, axis=0), np.int32(1))
    return take(a, gather_idx, axis=axis, mode="clip")


# --------------------------------------------------------------------------------------------
# Flips and rolls
# --------------------------------------------------------------------------------------------

def flip(m: ArrayLike, axis: int | Sequence[int] | None = None) -> Array:
    """``jnp.flip``: reverse the order of elements along ``axis`` (all axes by default)."""
    return _flip(ensure_arraylike("flip", m), _ensure_optional_axes(axis))


# The flips share one plain jit, as JAX's: traced, they stage ``jit[name=_flip]``.
@jitted(static_argnames=("axis",), inline=False)
def _flip(m: Array, axis: int | tuple[int, ...] | None = None) -> Array:
    if axis is None:
        return lax.rev(m, tuple(range(m.ndim)))
    return lax.rev(m, tuple(canonicalize_axis(a, m.ndim) for a in _index_tuple(axis)))


def fliplr(m: ArrayLike) -> Array:
    """``jnp.fliplr``: reverse axis 1."""
    return _flip(ensure_arraylike("fliplr", m), 1)


def flipud(m: ArrayLike) -> Array:
    """``jnp.flipud``: reverse axis 0."""
    return _flip(ensure_arraylike("flipud", m), 0)


@jitted(static_argnames=("k", "axes"), inline=False)
def rot90(m: ArrayLike, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Array:
    """``jnp.rot90``: rotate by 90 degrees ``k`` times in the plane of ``axes``."""
    m = ensure_arraylike("rot90", m)
    if m.ndim < 2:
        raise ValueError("rot90 requires its first argument to have ndim at least two, but got "
                         f"first argument of shape {m.shape}, which has ndim {m.ndim}")
    ax1, ax2 = (canonicalize_axis(a, m.ndim) for a in axes)
    if ax1 == ax2:
        raise ValueError("Axes must be different")
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, ax1), ax2)
    perm = list(range(m.ndim))
    perm[ax1], perm[ax2] = perm[ax2], perm[ax1]
    if k == 1:
        return lax.transpose(flip(m, ax2), perm)
    return flip(lax.transpose(m, perm), ax2)


def roll(a: ArrayLike, shift: ArrayLike | Sequence[int], axis: int | Sequence[int] | None = None
         ) -> Array:
    """``jnp.roll``: shift elements cyclically along ``axis`` (of the flattened array by
    default); ``shift`` may be traced."""
    arr = ensure_arraylike("roll", a)
    if axis is None:
        return reshape(roll(ravel(arr), shift, 0), arr.shape)
    axes = tuple(canonicalize_axis(ax, arr.ndim) for ax in _index_tuple(axis))
    if isinstance(shift, core.Tracer):
        return _roll_dynamic(arr, asarray(shift), axes)
    shifts = np.asarray(core.concrete_or_error(shift, "shift argument of jnp.roll"))
    if not dtypes.issubdtype(shifts.dtype, np.integer) or shifts.ndim > 1:
        return _roll_dynamic(arr, asarray(shifts), axes)
    return _roll_static(arr, tuple(int(i) for i in shifts.ravel()) if shifts.ndim else
                        int(shifts), axes)


# Both rolls are plain jits, as JAX's: traced, they stage ``jit[name=_roll_static]`` (or
# ``_roll_dynamic``) with the shifts and axes static or traced.
@jitted(static_argnums=(1, 2), inline=False)
def _roll_static(a: Array, shift: int | tuple[int, ...], axis: tuple[int, ...]) -> Array:
    for ax, s in zip(*np.broadcast_arrays(axis, shift)):
        n = a.shape[ax]
        if n == 0:
            continue
        i = (-int(s)) % n
        a = lax.concatenate([lax.slice_in_dim(a, i, n, axis=int(ax)),
                             lax.slice_in_dim(a, 0, i, axis=int(ax))], int(ax))
    return a


@jitted(static_argnums=(2,), inline=False)
def _roll_dynamic(a: Array, shift: Array, axis: tuple[int, ...]) -> Array:
    b_shape = broadcast_shapes(shift.shape, np.shape(axis))
    if len(b_shape) != 1:
        raise ValueError("'shift' and 'axis' arguments to roll must be scalars or 1D arrays")
    shifts = broadcast_to_shape(shift, b_shape)
    for k, ax in enumerate(np.broadcast_to(axis, b_shape)):
        n = a.shape[ax]
        # Each shift is taken as JAX's iteration over an array takes it: a slice, squeezed.
        x = lax.squeeze(lax.slice_in_dim(shifts, k, k + 1), (0,))
        x = remainder(lax.convert_element_type(x, np.int32),
                      lax.max(np.int32(n), np.int32(1)))
        doubled = lax.concatenate((a, a), int(ax))
        a = lax.dynamic_slice_in_dim(doubled, lax.sub(np.int32(n), x), n, axis=int(ax))
    return a


# --------------------------------------------------------------------------------------------
# append, delete, insert, resize, trim
# --------------------------------------------------------------------------------------------

@jitted(static_argnames=("axis",), inline=False)
def append(arr: ArrayLike, values: ArrayLike, axis: int | None = None) -> Array:
    """``jnp.append``: ``values`` appended to ``arr`` (both flattened if ``axis=None``)."""
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis=axis)


@jitted(static_argnames=("new_shape",), inline=False)
def resize(a: ArrayLike, new_shape: int | Sequence[int]) -> Array:
    """``jnp.resize``: ``a`` flattened, repeated cyclically and reshaped to ``new_shape``."""
    check_arraylike("resize", a)
    new_shape = _index_tuple(new_shape)
    if any(d < 0 for d in new_shape):
        raise ValueError("all elements of `new_shape` must be non-negative")
    arr = ravel(a)
    new_size = math.prod(new_shape)
    if arr.size == 0 or new_size == 0:
        return zeros_like(arr, shape=new_shape)
    arr = tile(arr, -(-new_size // arr.size))
    if arr.size > new_size:
        arr = lax.slice(arr, (0,), (new_size,))
    return lax.reshape(arr, new_shape)


def trim_zeros(filt: ArrayLike, trim: str = "fb",
               axis: int | Sequence[int] | None = None) -> Array:
    """``jnp.trim_zeros``: drop the leading ('f') and/or trailing ('b') slices of a concrete
    array that hold only zeros, along ``axis`` (all axes by default)."""
    filt = ensure_arraylike("trim_zeros", filt)
    core.concrete_or_error(filt, "Error arose in the `filt` argument of trim_zeros()")
    axes = range(filt.ndim) if axis is None else _index_tuple(axis)
    canonical = tuple(canonicalize_axis(ax, filt.ndim) for ax in axes)
    if len(set(canonical)) != len(canonical):
        raise ValueError(f"repeated axis: {canonical}")
    axis_set = set(canonical)
    front, back = "f" in trim.lower(), "b" in trim.lower()
    if not axis_set or not (front or back):
        return filt
    nonzero = np.asarray(filt) != 0

    def kept(ax: int) -> slice:
        if ax not in axis_set:
            return slice(None)
        mask = nonzero.any(axis=tuple(i for i in range(filt.ndim) if i != ax))
        if not mask.any():
            return slice(0, 0)
        return slice(int(mask.argmax()) if front else None,
                     filt.shape[ax] - int(mask[::-1].argmax()) if back else None)
    return getitem(filt, tuple(kept(ax) for ax in range(filt.ndim)))
