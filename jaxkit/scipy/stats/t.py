"""``jaxkit.scipy.stats.t``: Student's t distribution (df, loc, scale)."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.typing import Array, ArrayLike


def logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the t density."""
    x, df, loc, scale = promote_args_inexact("t.logpdf", x, df, loc, scale)
    z = (x - loc) / scale
    half_df = df / 2
    half_df_plus = half_df + np.array(0.5, x.dtype)
    log_norm = ((lax.lgamma(half_df) + lax.log(scale * scale * np.array(np.pi, x.dtype) * df)
                 / 2) - lax.lgamma(half_df_plus))
    return -(log_norm + half_df_plus * lax.log1p(z * z / df))


def pdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The t density."""
    return lax.exp(logpdf(x, df, loc, scale))
