"""``JAXSparse``: the base class of the sparse array formats (shape, size, printing,
the methods a format may leave unimplemented)."""
from __future__ import annotations

import math
from collections.abc import Sequence

from jaxkit import core


class JAXSparse:
    """Base class of the sparse formats: a pytree of buffers with a static shape."""

    data: object
    shape: tuple[int, ...]
    __hash__ = None  # mutable-looking container of arrays, as in JAX

    def __init__(self, args: tuple, *, shape: Sequence[int]):
        self.shape = tuple(int(s) for s in shape)

    @property
    def dtype(self):
        raise NotImplementedError(f"{type(self).__name__}.dtype")

    @property
    def nse(self) -> int:
        raise NotImplementedError(f"{type(self).__name__}.nse")

    def __len__(self):
        return self.shape[0]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def _repr_extra(self) -> str:
        return ""

    def __repr__(self):
        name = type(self).__name__
        try:
            body = f"{name}({self.dtype}{list(self.shape)}, nse={self.nse}{self._repr_extra()})"
        except Exception:  # a malformed array still prints, as in JAX
            body = f"{name}(<invalid>)"
        if isinstance(self.data, core.Tracer):
            body = f"{type(self.data).__name__}[{body}]"
        return body

    @property
    def T(self):
        return self.transpose()

    def block_until_ready(self):
        for buf in self.tree_flatten()[0]:
            buf.block_until_ready()
        return self

    def transpose(self, axes=None):
        raise NotImplementedError(f"{type(self)}.transpose")

    def todense(self):
        raise NotImplementedError(f"{type(self)}.todense")

    def tree_flatten(self):
        raise NotImplementedError(f"{type(self)}.tree_flatten")


class BatchedSparse(JAXSparse):
    """A format with leading batch dimensions shared by all its buffers (BCOO, BCSR), which
    ``vmap`` can map over: it maps the buffers along the same axis, and ``tree_unflatten``
    drops (or adds back) the leading dimension of the shape to follow them."""

    n_batch: int

    def _vmap_leaf_axes(self, axis: int, what: str) -> list[int]:
        """The axis of each buffer when vmap maps this array along ``axis`` (``what``: "vmap
        in_axes" or "vmap out_axes"); raises where the buffers would be mapped along the
        wrong axis. Out of vmap, an array gains a new leading batch dimension."""
        name = type(self).__name__
        leaves = self.tree_flatten()[0]
        if "out" in what:
            if axis != 0:
                raise NotImplementedError(f"{what}={axis} for a {name} result: jaxkit stacks "
                                          "sparse results along a new leading batch "
                                          "dimension only (out_axes=0).")
            return [0] * len(leaves)
        if not 0 <= axis < self.n_batch:
            raise ValueError(f"Cannot map in_axis={axis} for {name} array with n_batch="
                             f"{self.n_batch}. in_axes for batched {name} operations must "
                             "correspond to a batch dimension.")
        if axis != 0:
            raise NotImplementedError(f"{what}={axis} for a {name} array: jaxkit maps sparse "
                                      "arrays along their leading batch dimension only; "
                                      "transpose that dimension first.")
        sizes = {leaf.shape[0] for leaf in leaves}
        if len(sizes) != 1:
            raise NotImplementedError(f"vmap of a {name} array whose buffers broadcast along "
                                      f"the batch dimension (sizes {sorted(sizes)}): give "
                                      "every buffer the full batch size first.")
        return [0] * len(leaves)


def _unimplemented(name):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self)}.{name}")
    method.__name__ = name
    return method


# Operators a format may not support: each raises NotImplementedError naming it (JAX's text).
for _name in ("sum", "__neg__", "__pos__", "__matmul__", "__rmatmul__", "__mul__", "__rmul__",
              "__add__", "__radd__", "__sub__", "__rsub__", "__getitem__"):
    setattr(JAXSparse, _name, _unimplemented(_name))
