"""Type aliases for annotations: ``Array`` and ``ArrayLike``."""
from __future__ import annotations

from typing import Union

import numpy as np

from jaxkit.runtime.array import PublicArray as Array
from jaxkit.core import Tracer

ArrayLike = Union[Array, Tracer, np.ndarray, np.generic, bool, int, float, complex]
DTypeLike = Union[str, type, np.dtype]
Shape = tuple[int, ...]

__all__ = ["Array", "ArrayLike", "DTypeLike", "Shape"]
