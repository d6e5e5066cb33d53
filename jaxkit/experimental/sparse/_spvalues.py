"""The buffer-table view of sparse values that ``sparsify``'s public machinery exposes (JAX's
``SparsifyEnv``/``SparsifyValue``): an environment holds a flat list of buffers and a
``SparsifyValue`` names a dense array (one buffer) or a BCOO/BCSR array (data, indices and, for
BCSR, indptr buffers) by position in it, with its shape and index flags."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from jaxkit import core
from jaxkit import numpy as jnp
from jaxkit.experimental.sparse.bcoo import BCOO
from jaxkit.experimental.sparse.bcsr import BCSR
from jaxkit.tree_util import tree_map

__all__ = ["SparsifyEnv", "SparsifyValue", "arrays_to_spvalues", "spvalues_to_arrays",
           "spvalues_to_avals"]


class SparsifyValue(NamedTuple):
    """A dense or sparse array as positions in a ``SparsifyEnv``'s buffers."""

    shape: tuple[int, ...]
    data_ref: int | None
    indices_ref: int | None = None
    indptr_ref: int | None = None
    indices_sorted: bool | None = False
    unique_indices: bool | None = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_sparse(self) -> bool:
        return self.indices_ref is not None

    def is_dense(self) -> bool:
        return self.indices_ref is None

    def is_bcoo(self) -> bool:
        return self.is_sparse() and self.indptr_ref is None

    def is_bcsr(self) -> bool:
        return self.is_sparse() and self.indptr_ref is not None


class SparsifyEnv:
    """A list of buffers (arrays or tracers) that ``SparsifyValue``s point into; values may
    share buffers (e.g. an elementwise result keeps its operand's indices)."""

    def __init__(self, bufs=()):
        self._buffers: list = list(bufs)

    def _push(self, arr) -> int:
        self._buffers.append(jnp.asarray(arr))
        return len(self._buffers) - 1

    def _get(self, ref: int | None, what: str, spvalue: SparsifyValue):
        if ref is None:
            raise RuntimeError(f"Internal: requested {what} from spvalue with {what}_ref=None "
                               f"({spvalue})")
        return self._buffers[ref]

    def data(self, spvalue: SparsifyValue):
        """The data buffer of ``spvalue`` (the array itself for a dense value)."""
        return self._get(spvalue.data_ref, "data", spvalue)

    def indices(self, spvalue: SparsifyValue):
        """The indices buffer of a sparse ``spvalue``."""
        return self._get(spvalue.indices_ref, "indices", spvalue)

    def indptr(self, spvalue: SparsifyValue):
        """The row-pointer buffer of a BCSR ``spvalue``."""
        return self._get(spvalue.indptr_ref, "indptr", spvalue)

    def dense(self, data) -> SparsifyValue:
        """Add a dense array; its value."""
        return SparsifyValue(tuple(np.shape(data)), self._push(data))

    def sparse(self, shape, data=None, indices=None, indptr=None, *, data_ref=None,
               indices_ref=None, indptr_ref=None, indices_sorted=False,
               unique_indices=False) -> SparsifyValue:
        """Add a sparse array from new buffers or from positions of buffers already here
        (each buffer given one way, not both)."""
        def ref(buf, existing, name, required):
            if buf is not None:
                if existing is not None:
                    raise ValueError(f"pass {name} or {name}_ref, not both")
                return self._push(buf)
            if existing is None:
                if required:
                    raise ValueError(f"a sparse value needs {name} or {name}_ref")
                return None
            if not 0 <= existing < len(self._buffers):
                raise ValueError(f"{name}_ref={existing} is not a buffer of this environment "
                                 f"({len(self._buffers)} buffers)")
            return existing

        data_ref = ref(data, data_ref, "data", True)
        indices_ref = ref(indices, indices_ref, "indices", True)
        indptr_ref = ref(indptr, indptr_ref, "indptr", False)
        return SparsifyValue(tuple(shape), data_ref, indices_ref, indptr_ref,
                             indices_sorted=indices_sorted, unique_indices=unique_indices)


def _is_sparse_obj(x) -> bool:
    return isinstance(x, (BCOO, BCSR))


def _is_spvalue(x) -> bool:
    return isinstance(x, SparsifyValue)


def arrays_to_spvalues(spenv: SparsifyEnv, args: Any) -> Any:
    """A pytree of (BCOO, BCSR or dense) arrays as the same pytree of values in ``spenv``."""
    def to_spvalue(arg):
        if isinstance(arg, BCSR):
            return spenv.sparse(arg.shape, arg.data, arg.indices, arg.indptr,
                                indices_sorted=arg.indices_sorted,
                                unique_indices=arg.unique_indices)
        if isinstance(arg, BCOO):
            return spenv.sparse(arg.shape, arg.data, arg.indices,
                                indices_sorted=arg.indices_sorted,
                                unique_indices=arg.unique_indices)
        return spenv.dense(arg)
    return tree_map(to_spvalue, args, is_leaf=_is_sparse_obj)


def spvalues_to_arrays(spenv: SparsifyEnv, spvalues: Any) -> Any:
    """The inverse of ``arrays_to_spvalues``."""
    def to_array(v: SparsifyValue):
        flags = dict(shape=v.shape, indices_sorted=bool(v.indices_sorted),
                     unique_indices=bool(v.unique_indices))
        if v.is_bcsr():
            return BCSR((spenv.data(v), spenv.indices(v), spenv.indptr(v)), **flags)
        if v.is_bcoo():
            return BCOO((spenv.data(v), spenv.indices(v)), **flags)
        return spenv.data(v)
    return tree_map(to_array, spvalues, is_leaf=_is_spvalue)


def spvalues_to_avals(spenv: SparsifyEnv, spvalues: Any) -> Any:
    """The abstract value (shape, dtype, weak type) of each value in a pytree."""
    def to_aval(v: SparsifyValue):
        aval = core.get_aval(spenv.data(v))
        return core.ShapedArray(tuple(v.shape), aval.dtype, weak_type=aval.weak_type)
    return tree_map(to_aval, spvalues, is_leaf=_is_spvalue)
