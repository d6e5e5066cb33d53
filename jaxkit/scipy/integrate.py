"""``jaxkit.scipy.integrate``: ``trapezoid`` (the composite trapezoidal rule, jnp's)."""
from __future__ import annotations

from functools import partial

from jaxkit import numpy as jnp
from jaxkit.transforms.jit import jit
from jaxkit.typing import Array, ArrayLike


@partial(jit, static_argnames=("axis",))
def trapezoid(y: ArrayLike, x: ArrayLike | None = None, dx: ArrayLike = 1.0,
              axis: int = -1) -> Array:
    """Integrate ``y`` along ``axis`` by the trapezoidal rule (sample points ``x`` or spacing
    ``dx``)."""
    return jnp.trapezoid(y, x, dx, axis)
