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

    if m is not jaxkit:  # JAX makes eager results through this rule (jaxkit: from_physical)
        from jax._src import earray  # noqa: PLC0415
        from jax._src.interpreters import pxla  # noqa: PLC0415

        def result_handler(aval, out_sharding, committed):
            physical = pxla.global_result_handlers[core.ShapedArray](
                core.physical_aval(aval), out_sharding, committed)
            return lambda bufs: earray.EArray(aval, physical(bufs))
        Rules.global_sharded_result_handler = staticmethod(result_handler)

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
