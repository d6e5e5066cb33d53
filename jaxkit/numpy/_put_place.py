"""``jnp.put`` and ``jnp.place``: values scattered into a copy of an array at flat indices or
where a mask is true, the values cycled to the number of places (NumPy's rule). JAX arrays are
immutable, so both need ``inplace=False`` and return the updated copy.

Their bodies follow JAX 0.10.2's (the same equations when traced): ``place`` finds the
places with a sized ``where``, ``put`` unravels its flat indices, and both scatter once.
"""
from __future__ import annotations

import numpy as np

from jaxkit.numpy._elementwise import clip
from jaxkit.numpy._promotion import ensure_arraylike
from jaxkit.numpy._shape import ravel, tile
from jaxkit.numpy._sorting import where
from jaxkit.numpy._take import unravel_index
from jaxkit.typing import Array, ArrayLike


def _tile_to_size(arr: Array, size: int) -> Array:
    """The 1-D ``arr`` repeated, then cut, to ``size`` elements."""
    if arr.size < size:
        arr = tile(arr, int(np.ceil(size / arr.size)))
    return arr[:size] if arr.size > size else arr


def place(arr: ArrayLike, mask: ArrayLike, vals: ArrayLike, *, inplace: bool = True) -> Array:
    """``jnp.place`` (``inplace=False`` required): ``vals`` (cycled) put where ``mask``."""
    data, mask_arr, vals_arr = ensure_arraylike("place", arr, mask, vals)
    vals_arr = vals_arr.ravel()
    if inplace:
        raise ValueError("jax.numpy.place cannot modify arrays in-place, because JAX arrays "
                         "are immutable. Pass inplace=False to instead return an updated "
                         "array.")
    if data.size != mask_arr.size:
        raise ValueError("place: arr and mask must be the same size")
    if not vals_arr.size:
        raise ValueError("Cannot place values from an empty array")
    if not data.size:
        return data
    # The true positions first, then out-of-bounds fillers that the scatter drops.
    indices = where(mask_arr.ravel(), size=mask_arr.size, fill_value=mask_arr.size)[0]
    vals_arr = _tile_to_size(vals_arr, len(indices))
    return data.ravel().at[indices].set(vals_arr, mode="drop").reshape(data.shape)


def put(a: ArrayLike, ind: ArrayLike, v: ArrayLike, mode: str | None = None, *,
        inplace: bool = True) -> Array:
    """``jnp.put`` (``inplace=False`` required): ``v`` (cycled) put at the flat indices
    ``ind``; out-of-bounds indices are dropped, or clipped/wrapped with ``mode``."""
    if inplace:
        raise ValueError("jax.numpy.put cannot modify arrays in-place, because JAX arrays are "
                         "immutable. Pass inplace=False to instead return an updated array.")
    arr, ind_arr, _ = ensure_arraylike("put", a, ind, v)
    ind_arr = ind_arr.ravel()
    v_arr = ravel(v)
    if not arr.size or not ind_arr.size or not v_arr.size:
        return arr
    v_arr = _tile_to_size(v_arr, len(ind_arr))
    if mode is None:
        scatter_mode = "drop"
    elif mode == "clip":
        ind_arr = clip(ind_arr, 0, arr.size - 1)
        scatter_mode = "promise_in_bounds"
    elif mode == "wrap":
        ind_arr = ind_arr % arr.size
        scatter_mode = "promise_in_bounds"
    elif mode == "raise":
        raise NotImplementedError("The 'raise' mode to jnp.put is not supported.")
    else:
        raise ValueError(f"mode should be one of 'wrap' or 'clip'; got {mode=}")
    return arr.at[unravel_index(ind_arr, arr.shape)].set(v_arr, mode=scatter_mode)
