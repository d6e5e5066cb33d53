"""``jax.interpreters.xla``: eager application of a primitive, the XLA client type, and the
per-type conversion of argument values (``canonicalize_dtype_handlers``)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit.interpreters.dispatch import apply_primitive
from jaxkit.runtime.array import canonicalize_value_handlers
from jaxkit.runtime.pjrt import Backend

__all__ = ["Backend", "apply_primitive", "canonicalize_dtype_handlers"]


def _canonicalize_numpy(x: Any) -> np.ndarray:
    """``x`` as a NumPy array of the dtype jaxkit gives it (64-bit types narrowed unless
    ``jax_enable_x64``)."""
    x = np.asarray(x)
    return np.asarray(x, dtypes.canonicalize_dtype(core.get_aval(x).dtype))


class _CanonicalizeDtypeHandlers:
    """JAX's compatibility view of its value-conversion table: assigning registers a
    handler (the table the runtime consults when it turns an argument of that type into
    data); reading gives, for any type, the conversion of NumPy values."""

    def __setitem__(self, type_: type, handler: Callable[[Any], Any] | None) -> None:
        canonicalize_value_handlers[type_] = handler if handler is not None else (lambda x: x)

    def __getitem__(self, type_: type) -> Callable[[Any], Any]:
        return _canonicalize_numpy


canonicalize_dtype_handlers = _CanonicalizeDtypeHandlers()
