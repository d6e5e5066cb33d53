"""A user-defined extended dtype (JAX's ``_rules`` protocol), built as Flax builds its fp8 meta
dtype, for jaxkit and for the JAX oracle: shared by test_ecosystem_fixes_edtypes.py and the
numerical-gradient table."""
import dataclasses
import functools

import numpy as np

import jaxkit
from jaxkit._src_compat import core as compat_core
from jaxkit._src_compat import dtypes as compat_dtypes


@functools.cache
def max_dtype(m):
    """A float32 whose cotangents are summed by ``max`` (as Flax's ``fp32_max_grad``), built
    from library ``m``'s private extended-dtype classes, as Flax builds it."""
    if m is jaxkit:
        core, dtypes = compat_core, compat_dtypes
    else:
        from jax._src import core, dtypes  # noqa: PLC0415  (the oracle, only when asked)
    lax = m.lax

    class Rules:
        @staticmethod
        def physical_element_aval(dt):
            return core.ShapedArray((), dt.float_dtype)

        @staticmethod
        def convert_from(dt, other):
            return dt.float_dtype == other

        @staticmethod
        def convert_to(other, dt):
            return dt.float_dtype == other

        @staticmethod
        def add(dt, x, y):
            f = functools.partial(lax.convert_element_type, new_dtype=dt.float_dtype)
            return lax.convert_element_type(lax.max(f(x), f(y)), dt)

        @staticmethod
        def zero(dt):
            return lax.convert_element_type(np.array(-np.inf, dt.float_dtype), dt)

        @staticmethod
        def tangent_dtype(dt):
            return dt

        @staticmethod
        def full(shape, fill_value, dt):
            fill = lax.convert_element_type(fill_value, dt.float_dtype)
            return lax.convert_element_type(lax.full(shape, fill, dt.float_dtype), dt)

    class max_meta(dtypes.extended):  # noqa: N801
        pass

    @dataclasses.dataclass(frozen=True)
    class MaxF32(dtypes.ExtendedDType):
        float_dtype: np.dtype
        _rules: type = Rules
        type: type = max_meta

        def __repr__(self) -> str:
            return "max32"
        name = property(__repr__)

    return MaxF32(np.dtype(np.float32))
