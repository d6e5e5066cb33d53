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


def _unimplemented(name):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self)}.{name}")
    method.__name__ = name
    return method


# Operators a format may not support: each raises NotImplementedError naming it (JAX's text).
for _name in ("sum", "__neg__", "__pos__", "__matmul__", "__rmatmul__", "__mul__", "__rmul__",
              "__add__", "__radd__", "__sub__", "__rsub__", "__getitem__"):
    setattr(JAXSparse, _name, _unimplemented(_name))
