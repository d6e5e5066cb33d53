"""``jax.experimental.sparse.api``: format-generic constructors (``empty``, ``eye``) and
``todense`` with its primitive ``todense_p``, which takes any sparse format's buffers (or a dense
array) and so lets a transformation see "make this dense" as one step, with JVP, transpose and
batching rules."""
from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from jaxkit import core
from jaxkit import numpy as jnp
from jaxkit.experimental.sparse._base import JAXSparse
from jaxkit.experimental.sparse._bcoo_core import bcoo_extract_p, define_sparse_primitive
from jaxkit.experimental.sparse.bcoo import BCOO
from jaxkit.experimental.sparse.bcsr import BCSR, bcsr_extract
from jaxkit.experimental.sparse.coo import COO
from jaxkit.experimental.sparse.csr import CSC, CSR, _csr_to_coo
from jaxkit.interpreters import ad, batching
from jaxkit.transforms.vmap import vmap
from jaxkit.tree_util import tree_flatten, tree_unflatten
from jaxkit.typing import Array

__all__ = ["Array", "BCSR", "empty", "eye", "todense", "todense_p"]

_EYE_FORMATS = {"bcoo": BCOO, "coo": COO, "csr": CSR, "csc": CSC}
_EMPTY_FORMATS = {"bcsr": BCSR, **_EYE_FORMATS}


def empty(shape: Sequence[int], dtype=None, index_dtype="int32", sparse_format: str = "bcoo",
          **kwds) -> JAXSparse:
    """An all-zero sparse array of ``shape`` (``nse=0`` unless given)."""
    if sparse_format not in _EMPTY_FORMATS:
        raise ValueError(f"sparse_format={sparse_format!r} not recognized; must be one of "
                         f"{list(_EMPTY_FORMATS)}")
    return _EMPTY_FORMATS[sparse_format]._empty(tuple(shape), dtype=dtype,
                                                index_dtype=index_dtype, **kwds)


def eye(N: int, M: int | None = None, k: int = 0, dtype=None, index_dtype="int32",
        sparse_format: str = "bcoo", **kwds) -> JAXSparse:
    """A sparse identity-like matrix: ones on the ``k``-th diagonal."""
    if sparse_format not in _EYE_FORMATS:  # KeyError, as JAX's lookup raises
        raise KeyError(f"sparse_format={sparse_format!r} not recognized; must be one of "
                       f"{list(_EYE_FORMATS)}")
    return _EYE_FORMATS[sparse_format]._eye(N, N if M is None else M, k, dtype=dtype,
                                            index_dtype=index_dtype, **kwds)


# ---- todense_p -----------------------------------------------------------------------------

def todense(arr) -> Array:
    """The dense array of a sparse array of any format (a dense array passes through)."""
    bufs, tree = tree_flatten(arr)
    return todense_p.bind(*bufs, tree=tree)


def _todense_impl(*bufs, tree):
    arr = tree_unflatten(tree, bufs)
    return arr.todense() if isinstance(arr, JAXSparse) else jnp.asarray(arr)


def _todense_abstract_eval(*bufs, tree):
    arr = tree_unflatten(tree, bufs)
    if isinstance(arr, core.ShapedArray):
        return arr
    return core.ShapedArray(tuple(arr.shape), arr.dtype,
                            weak_type=getattr(arr.data, "weak_type", False))


def _todense_jvp(primals, tangents, *, tree):
    if any(type(t) is not ad.Zero for t in tangents[1:]):
        raise ValueError("todense: the index buffers of a sparse array have no tangents")
    out = todense_p.bind(*primals, tree=tree)
    if type(tangents[0]) is ad.Zero:
        return out, ad.Zero(core.get_aval(out).to_tangent_aval())
    return out, todense_p.bind(tangents[0], *primals[1:], tree=tree)


def _todense_transpose(ct, *bufs, tree):
    if not ad.is_undefined_primal(bufs[0]) or any(ad.is_undefined_primal(b) for b in bufs[1:]):
        raise ValueError("todense is linear only in the stored data of a sparse array")
    obj = tree_unflatten(tree, [object()] * len(bufs))
    if not isinstance(obj, JAXSparse):
        return [ct]
    if type(ct) is ad.Zero:
        return [ad.Zero(bufs[0].aval), *[None] * (len(bufs) - 1)]
    if isinstance(obj, BCOO):
        data = bcoo_extract_p.bind(bufs[1], ct, assume_unique=True)
    elif isinstance(obj, BCSR):
        data = bcsr_extract(bufs[1], bufs[2], ct)
    elif isinstance(obj, COO):
        data = ct[bufs[1], bufs[2]]
    elif isinstance(obj, CSR):  # CSC too: its buffers are those of its CSR transpose
        row, col = _csr_to_coo(bufs[1], bufs[2])
        data = (ct.T if isinstance(obj, CSC) else ct)[row, col]
    else:
        raise NotImplementedError(f"transpose rule for 'todense' of {type(obj).__name__}")
    return [data, *[None] * (len(bufs) - 1)]


def _todense_batch(axis_data, args, dims, *, tree):
    in_axes = tuple(None if d is batching.not_mapped else d for d in dims)
    return vmap(partial(_todense_impl, tree=tree), in_axes=in_axes)(*args), 0


todense_p = define_sparse_primitive("todense", _todense_impl, _todense_abstract_eval)
ad.defjvp_rule(todense_p, _todense_jvp)
ad.deftranspose(todense_p, _todense_transpose)
ad.linear_primitives.add(todense_p)
batching.defrule(todense_p, _todense_batch)
