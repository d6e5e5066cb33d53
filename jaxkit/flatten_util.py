"""``jax.flatten_util.ravel_pytree``: a pytree of arrays as one flat vector, and back."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import dtypes, lax, tree_util
from jaxkit import numpy as jnp

__all__ = ["ravel_pytree"]


def ravel_pytree(pytree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``(flat, unravel)``: the leaves raveled and concatenated into one 1-D array (of their
    promoted dtype), and the function rebuilding the pytree (each leaf cast back to its own
    dtype) from such a vector."""
    leaves, treedef = tree_util.tree_flatten(pytree)
    arrays = [jnp.asarray(x) for x in leaves]
    shapes = [a.shape for a in arrays]
    sizes = [int(np.prod(s)) for s in shapes]
    leaf_dtypes = [a.dtype for a in arrays]
    to_dtype = dtypes.result_type(*leaf_dtypes) if leaf_dtypes else np.dtype(np.float32)
    if arrays:
        flat = jnp.concatenate([lax.convert_element_type(jnp.ravel(a), to_dtype)
                                for a in arrays])
    else:
        flat = jnp.zeros((0,), to_dtype)
    offsets = np.cumsum([0] + sizes)

    def unravel(vec):
        vec = jnp.asarray(vec)
        if vec.shape != (int(offsets[-1]),):
            raise ValueError("The unravel function expected an array of shape "
                             f"{(int(offsets[-1]),)}, got shape {vec.shape}.")
        if vec.dtype != to_dtype:
            raise TypeError("The unravel function expected an array of dtype "
                            f"{to_dtype}, got dtype {vec.dtype}.")
        parts = [lax.convert_element_type(jnp.reshape(vec[offsets[i]:offsets[i + 1]],
                                                      shapes[i]), leaf_dtypes[i])
                 for i in range(len(shapes))]
        return tree_util.tree_unflatten(treedef, parts)

    return flat, unravel
