"""``jaxkit.scipy.cluster.vq``: assign observations to their nearest code-book entry."""
from __future__ import annotations

import operator

from jaxkit import numpy as jnp
from jaxkit.transforms.vmap import vmap
from jaxkit.numpy._promotion import check_arraylike
from jaxkit.scipy._util import promote_dtypes_inexact
from jaxkit.typing import Array, ArrayLike


def vq(obs: ArrayLike, code_book: ArrayLike, check_finite: bool = True) -> tuple[Array, Array]:
    """For each row of ``obs``, the index of the closest row of ``code_book`` (Euclidean) and
    the distance to it. ``check_finite`` is accepted for SciPy compatibility and ignored."""
    del check_finite
    check_arraylike("scipy.cluster.vq.vq", obs, code_book)
    obs, book = promote_dtypes_inexact(obs, code_book)
    if obs.ndim != book.ndim:
        raise ValueError("Observation and code_book should have the same rank")
    if obs.ndim == 1:
        obs, book = obs[..., None], book[..., None]
    if obs.ndim != 2:
        raise ValueError("ndim different than 1 or 2 are not supported")
    dist = vmap(lambda ob: jnp.linalg.norm(ob[None] - book, axis=-1))(obs)
    code = jnp.argmin(dist, axis=-1)
    return code, vmap(operator.getitem)(dist, code)
