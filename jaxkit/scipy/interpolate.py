"""``jaxkit.scipy.interpolate``: ``RegularGridInterpolator`` (linear or nearest interpolation on
a rectilinear grid; a pytree, so it can be passed through ``jit``)."""
from __future__ import annotations

from itertools import product

import numpy as np

from jaxkit import dtypes
from jaxkit import numpy as jnp
from jaxkit.numpy._promotion import check_arraylike
from jaxkit.scipy._util import promote_dtypes_inexact
from jaxkit.tree_util import register_pytree_node


def _points_array(points, ndim=None):
    """Sample points as one array of shape ``(..., ndim)`` (from a tuple of coordinate arrays
    or an array)."""
    if isinstance(points, tuple) and len(points) == 1:
        points = points[0]
    if isinstance(points, tuple):
        parts = jnp.broadcast_arrays(*points)
        out = jnp.empty(parts[0].shape + (len(points),), dtype=float)
        for j, part in enumerate(parts):
            out = out.at[..., j].set(part)
        return out
    check_arraylike("_ndim_coords_from_arrays", points)
    points = jnp.asarray(points)
    if points.ndim == 1:
        points = points.reshape(-1, 1) if ndim is None else points.reshape(-1, ndim)
    return points


class RegularGridInterpolator:
    """Interpolate ``values`` given on the grid ``points`` (one increasing 1-D array per axis)
    at arbitrary points; points outside the grid get ``fill_value`` (extrapolation if None)."""

    def __init__(self, points, values, method="linear", bounds_error=False,
                 fill_value=np.nan):
        if method not in ("linear", "nearest"):
            raise ValueError(f"method {method!r} is not defined")
        self.method = method
        self.bounds_error = bounds_error
        if self.bounds_error:
            raise NotImplementedError("`bounds_error` takes no effect under JIT")
        check_arraylike("RegularGridInterpolator", values)
        if len(points) > values.ndim:
            raise ValueError(f"there are {len(points)} point arrays, but values has "
                             f"{values.ndim} dimensions")
        values, = promote_dtypes_inexact(values)
        if fill_value is not None:
            check_arraylike("RegularGridInterpolator", fill_value)
            fill_value = jnp.asarray(fill_value)
            if not dtypes.can_cast(fill_value.dtype, values.dtype, casting="same_kind"):
                raise ValueError("fill_value must be either 'None' or of a type compatible "
                                 "with values")
        self.fill_value = fill_value
        check_arraylike("RegularGridInterpolator", *points)
        self.grid = tuple(jnp.asarray(p) for p in points)
        self.values = values

    def __call__(self, xi, method=None):
        method = self.method if method is None else method
        if method not in ("linear", "nearest"):
            raise ValueError(f"method {method!r} is not defined")
        ndim = len(self.grid)
        xi = _points_array(xi, ndim=ndim)
        if xi.shape[-1] != ndim:
            raise ValueError(f"the requested sample points xi have dimension {xi.shape[1]}, "
                             f"but this RegularGridInterpolator has dimension {ndim}")
        shape = xi.shape
        xi = xi.reshape(-1, shape[-1])
        indices, distances, outside = self._find_indices(xi.T)
        if method == "linear":
            result = self._linear(indices, distances)
        else:
            result = self._nearest(indices, distances)
        if self.fill_value is not None:
            result = jnp.where(outside.reshape(result.shape[:1] + (1,) * (result.ndim - 1)),
                               self.fill_value, result)
        return result.reshape(shape[:-1] + self.values.shape[ndim:])

    def _linear(self, indices, distances):
        trailing = (slice(None),) + (None,) * (self.values.ndim - len(indices))
        out = jnp.asarray(0.)
        for corner in product(*[[i, i + 1] for i in indices]):
            weight = jnp.asarray(1.)
            for ci, i, y in zip(corner, indices, distances):
                weight = weight * jnp.where(ci == i, 1 - y, y)
            out = out + self.values[corner] * weight[trailing]
        return out

    def _nearest(self, indices, distances):
        return self.values[tuple(jnp.where(y <= .5, i, i + 1)
                                 for i, y in zip(indices, distances))]

    def _find_indices(self, xi):
        indices, distances = [], []
        outside = jnp.zeros((xi.shape[1],), dtype=bool)
        for x, g in zip(xi, self.grid):
            i = jnp.clip(jnp.searchsorted(g, x) - 1, 0, g.size - 2)
            indices.append(i)
            distances.append((x - g[i]) / (g[i + 1] - g[i]))
            outside = outside | (x < g[0]) | (x > g[-1])
        return indices, distances, outside


register_pytree_node(
    RegularGridInterpolator,
    lambda obj: ((obj.grid, obj.values, obj.fill_value), (obj.method, obj.bounds_error)),
    lambda aux, children: RegularGridInterpolator(*children[:2], *aux, *children[2:]))
