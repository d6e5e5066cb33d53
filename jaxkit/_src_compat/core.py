"""``jax._src.core`` and the public ``jax.core`` (reached by Flax: ``ShapedArray``,
``AbstractValue``, ``Tracer``, ``find_top_trace``, ``get_opaque_trace_state``): jaxkit's core
with JAX's names for its classes."""
from jaxkit.core import *  # noqa: F401,F403
from jaxkit import core as _core
from jaxkit.core import (ClosedJaxpr, Jaxpr, Primitive, Trace, Tracer,  # noqa: F401
                         current_trace, eval_jaxpr, get_aval)
from jaxkit.extend.core import (Effect, find_top_trace, get_opaque_trace_state,  # noqa: F401
                                mapped_aval, unmapped_aval, valid_jaxtype)
from jaxkit.runtime.sharding import NamedSharding, empty_abstract_mesh, typed_sharding



class _AvalMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _core.ShapedArray)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, _core.ShapedArray)


class ShapedArray(metaclass=_AvalMeta):
    """JAX's constructor signature (``sharding``, ``vma``, ... keywords) for jaxkit's
    ``ShapedArray``; instances and ``isinstance`` are jaxkit's own. ``sharding`` is kept over
    the mesh's Explicit axes, as the types of laid-out arrays keep it."""

    def __new__(cls, shape, dtype, weak_type=False, *, sharding=None, **placement):
        # A type's own sharding (``aval.sharding``: on the empty abstract mesh) says "no
        # sharding", as does None.
        if sharding is None or (isinstance(sharding, NamedSharding)
                                and sharding.mesh == empty_abstract_mesh):
            return _core.ShapedArray(shape, dtype, weak_type)
        if not isinstance(sharding, NamedSharding):
            raise TypeError(f"ShapedArray(sharding=...) takes a NamedSharding, got {sharding!r}")
        ndim = len(shape)
        spec = (tuple(sharding.spec) + (None,) * ndim)[:ndim]
        return _core.ShapedArray(shape, dtype, weak_type, typed_sharding(sharding.mesh, spec))


AbstractValue = ShapedArray
UnshapedArray = ShapedArray


physical_aval = _core.physical_aval


def physical_element_aval(dtype):
    """The type one element of ``dtype`` is stored as (itself for a NumPy dtype)."""
    if not _core.dtypes.is_extended(dtype):
        return _core.ShapedArray((), dtype)
    return _core.ShapedArray(tuple(dtype.physical_shape), dtype.physical_dtype)


def lazy_init(x):
    return x


# High-level types (``jax.experimental.hijax`` reaches them through ``jax._src.core``).
from jaxkit.interpreters.hijax import (AvalMutableQDD, AvalQDD, QuasiDynamicData,  # noqa: E402,F401
                                       aval_method, aval_property, cur_qdd)
