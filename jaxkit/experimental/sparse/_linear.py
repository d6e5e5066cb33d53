"""Rules shared by the COO/CSR primitives, which are linear in their stored data (and, for
products, in the dense operand): the JVP binds the primitive on one tangent at a time, each
transpose is the linear transpose of the primitive's own jaxkit computation, and batching
vmaps that computation."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from jaxkit.api import ShapeDtypeStruct
from jaxkit.api_extra import linear_transpose
from jaxkit.core import Primitive
from jaxkit.interpreters import ad, batching
from jaxkit.transforms.vmap import vmap


def deflinear_in(prim: Primitive, impl: Callable, linear_argnums: Sequence[int]) -> None:
    """``prim`` is linear in each of ``linear_argnums`` separately (the others are indices)."""
    def tangent_rule(i):
        def rule(t, *args, **params):
            args = list(args)
            args[i] = t
            return prim.bind(*args, **params)
        return rule

    n = max(linear_argnums) + 1
    ad.defjvp(prim, *(tangent_rule(i) if i in linear_argnums else None
                      for i in range(max(n, 4))))

    def transpose(ct, *args, **params):
        out = [None] * len(args)
        undefined = [i for i, a in enumerate(args) if ad.is_undefined_primal(a)]
        if any(i not in linear_argnums for i in undefined):
            raise ValueError(f"Cannot transpose {prim} with respect to sparse indices")
        for i in undefined:
            if type(ct) is ad.Zero:
                out[i] = ad.Zero(args[i].aval)
                continue
            aval = args[i].aval

            def f(x, i=i):
                xs = list(args)
                xs[i] = x
                return impl(*xs, **params)

            (out[i],) = linear_transpose(f, ShapeDtypeStruct(aval.shape, aval.dtype))(ct)
        return out

    ad.deftranspose(prim, transpose)
    ad.linear_primitives.add(prim)


def defbatch_by_vmap(prim: Primitive, impl: Callable) -> None:
    """Batch ``prim`` by vmapping its own jaxkit computation (JAX gives the COO/CSR
    primitives no batching rule; the computation batches like any jaxkit code)."""

    def rule(axis_data, args, dims, **params):
        in_axes = tuple(None if d is batching.not_mapped else d for d in dims)
        out = vmap(lambda *xs: impl(*xs, **params), in_axes=in_axes)(*args)
        if prim.multiple_results:
            return list(out), [0] * len(out)
        return out, 0

    batching.defrule(prim, rule)
