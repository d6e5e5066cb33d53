"""``jaxkit.scipy.ndimage``: ``map_coordinates`` (nearest or linear interpolation of an array
at fractional coordinates, with SciPy's boundary modes)."""
from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from jaxkit import dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.transforms.jit import jit
from jaxkit.typing import Array, ArrayLike


def _mirror(index: Array, size: int) -> Array:
    s = size - 1  # half period of the triangle wave
    return jnp.abs((index + s) % (2 * s) - s)


def _reflect(index: Array, size: int) -> Array:
    return jnp.floor_divide(_mirror(2 * index + 1, 2 * size + 1) - 1, 2)


_INDEX_FIXERS: dict[str, Callable[[Array, int], Array]] = {
    "constant": lambda index, size: index,
    "nearest": lambda index, size: jnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _round(a: Array) -> Array:
    # lax.round rounds half away from zero, as SciPy does.
    return a if dtypes.issubdtype(a.dtype, np.integer) else lax.round(a)


def _nearest(coordinate: Array) -> list:
    return [(_round(coordinate).astype(np.int32), coordinate.dtype.type(1))]


def _linear(coordinate: Array) -> list:
    lower = jnp.floor(coordinate)
    upper_weight = coordinate - lower
    index = lower.astype(np.int32)
    return [(index, 1 - upper_weight), (index + 1, upper_weight)]


@partial(jit, static_argnums=(2, 3, 4))
def _map_coordinates(input, coordinates, order, mode, cval):
    data = jnp.asarray(input)
    coords = [jnp.asarray(c) for c in coordinates]
    cval = jnp.asarray(cval, data.dtype)
    if len(coordinates) != data.ndim:
        raise ValueError("coordinates must be a sequence of length input.ndim, but "
                         f"{len(coordinates)} != {data.ndim}")
    fixer = _INDEX_FIXERS.get(mode)
    if fixer is None:
        raise NotImplementedError(
            f"jax.scipy.ndimage.map_coordinates does not yet support mode {mode}. "
            f"Currently supported modes are {set(_INDEX_FIXERS)}.")
    if order == 0:
        nodes_of = _nearest
    elif order == 1:
        nodes_of = _linear
    else:
        raise NotImplementedError("jax.scipy.ndimage.map_coordinates currently requires "
                                  "order<=1")
    per_axis = []
    for coordinate, size in zip(coords, data.shape):
        per_axis.append([(fixer(index, size),
                          (0 <= index) & (index < size) if mode == "constant" else True,
                          weight) for index, weight in nodes_of(coordinate)])
    terms = []
    for corner in itertools.product(*per_axis):
        indices, valid, weights = zip(*corner)
        if all(v is True for v in valid):
            value = data[indices]
        else:
            value = jnp.where(functools.reduce(operator.and_, valid), data[indices], cval)
        terms.append(functools.reduce(operator.mul, weights) * value)
    result = sum(terms[1:], terms[0])
    if dtypes.issubdtype(data.dtype, np.integer):
        result = _round(result)
    return result.astype(data.dtype)


def map_coordinates(input: ArrayLike, coordinates: Sequence[ArrayLike], order: int,
                    mode: str = "constant", cval: ArrayLike = 0.0):
    """Values of ``input`` at ``coordinates`` (one array per axis) by interpolation of
    ``order`` 0 or 1; outside points per ``mode`` ('constant' (``cval``), 'nearest', 'wrap',
    'mirror', 'reflect')."""
    return _map_coordinates(input, coordinates, order, mode, cval)
