"""One rule builder for the 2-D unbatched formats (COO, CSR): each format names how its index
buffers map to (row, column) pairs and how ``fromdense`` packs them; the builder defines the
format's ``todense``, ``fromdense``, ``matvec`` and ``matmat`` primitives with their abstract
evaluation, JVP, transpose and batching rules. Everything else is shared, so COO and CSR differ
only in their index encoding."""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from jaxkit import core
from jaxkit import numpy as jnp
from jaxkit.experimental.sparse._bcoo_core import define_sparse_primitive
from jaxkit.experimental.sparse._linear import defbatch_by_vmap, deflinear_in
from jaxkit.interpreters import ad

__all__ = ["FormatPrimitives", "define_format_primitives", "nonzero_entries"]


class FormatPrimitives(NamedTuple):
    """The four primitives of one 2-D sparse format."""

    todense_p: core.Primitive
    fromdense_p: core.Primitive
    matvec_p: core.Primitive
    matmat_p: core.Primitive


def nonzero_entries(mat, nse: int):
    """The first ``nse`` nonzeros of a 2-D ``mat`` in row-major order: ``(data, row, col,
    real)``, where ``real`` marks stored elements (padding holds a zero at (0, 0))."""
    row, col = jnp.nonzero(mat, size=nse)
    real = jnp.arange(nse) < (mat != 0).sum()
    data = jnp.where(real, mat[row, col], jnp.zeros((), mat.dtype))
    return data, row, col, real


def define_format_primitives(
        fmt: str, *, to_coo: Callable, pack: Callable, index_avals: Callable,
        check_indices: Callable) -> FormatPrimitives:
    """The primitives ``<fmt>_todense``, ``<fmt>_fromdense``, ``<fmt>_matvec`` and
    ``<fmt>_matmat`` of a format whose stored elements are ``(data, *index_bufs)``.

    ``to_coo(*index_bufs) -> (row, col)`` recovers coordinates; ``pack(row, col, real,
    n_rows, index_dtype) -> index_bufs`` encodes the ``fromdense`` result; ``index_avals(
    shape, nse, index_dtype)`` gives the avals of the index buffers; ``check_indices(
    *index_avals)`` raises TypeError for malformed index buffers."""

    def todense_impl(data, *index_bufs, spinfo):
        row, col = to_coo(*index_bufs)
        return jnp.zeros(spinfo.shape, data.dtype).at[row, col].add(data)

    def todense_abstract_eval(data, *index_bufs, spinfo):
        check_indices(*index_bufs)
        return core.ShapedArray(tuple(spinfo.shape), data.dtype)

    todense_p = define_sparse_primitive(f"{fmt}_todense", todense_impl, todense_abstract_eval)
    deflinear_in(todense_p, todense_impl, (0,))
    defbatch_by_vmap(todense_p, todense_impl)

    def fromdense_impl(mat, *, nse, index_dtype):
        data, row, col, real = nonzero_entries(mat, nse)
        return (data, *pack(row.astype(index_dtype), col.astype(index_dtype), real,
                            mat.shape[0], index_dtype))

    def fromdense_abstract_eval(mat, *, nse, index_dtype):
        if mat.ndim != 2:
            raise ValueError(f"{fmt}_fromdense expects a 2-D matrix, got {mat.str_short()}")
        return [core.ShapedArray((nse,), mat.dtype), *index_avals(mat.shape, nse, index_dtype)]

    def fromdense_jvp(primals, tangents, *, nse, index_dtype):
        (mat,), (mat_dot,) = primals, tangents
        data, *index_bufs = fromdense_p.bind(mat, nse=nse, index_dtype=index_dtype)
        if type(mat_dot) is ad.Zero:
            data_dot = ad.Zero(core.get_aval(data).to_tangent_aval())
        else:
            row, col = to_coo(*index_bufs)
            data_dot = mat_dot.at[row, col].get(mode="fill", fill_value=0)
        zeros = [ad.Zero(core.get_aval(b).to_tangent_aval()) for b in index_bufs]
        return [data, *index_bufs], [data_dot, *zeros]

    fromdense_p = define_sparse_primitive(f"{fmt}_fromdense", fromdense_impl,
                                          fromdense_abstract_eval, multiple_results=True)
    ad.defjvp_rule(fromdense_p, fromdense_jvp)
    defbatch_by_vmap(fromdense_p, fromdense_impl)

    def product_impl(data, *args, spinfo, transpose):
        *index_bufs, rhs = args
        row, col = to_coo(*index_bufs)
        if transpose:
            row, col = col, row
        n_out = spinfo.shape[1] if transpose else spinfo.shape[0]
        prod = (data if rhs.ndim == 1 else data[:, None]) * rhs[col]
        return jnp.zeros((n_out, *rhs.shape[1:]), prod.dtype).at[row].add(prod)

    def product_abstract_eval(name, ndim):
        def rule(data, *args, spinfo, transpose):
            *index_bufs, rhs = args
            check_indices(*index_bufs)
            if rhs.ndim != ndim:
                raise ValueError(f"{fmt}_{name} expects a {ndim}-D dense operand, got "
                                 f"{rhs.str_short()}")
            n_in, n_out = spinfo.shape if transpose else spinfo.shape[::-1]
            if rhs.shape[0] != n_in:
                raise ValueError(f"dimension mismatch: matrix {tuple(spinfo.shape)} "
                                 f"(transpose={transpose}) with operand {rhs.str_short()}")
            if data.dtype != rhs.dtype:
                raise TypeError(f"data types do not match: {data.dtype} and {rhs.dtype}")
            return core.ShapedArray((n_out, *rhs.shape[1:]), data.dtype)
        return rule

    products = []
    for name, ndim in (("matvec", 1), ("matmat", 2)):
        prim = define_sparse_primitive(f"{fmt}_{name}", product_impl,
                                       product_abstract_eval(name, ndim))
        deflinear_in(prim, product_impl, (0, 3))
        defbatch_by_vmap(prim, product_impl)
        products.append(prim)
    return FormatPrimitives(todense_p, fromdense_p, *products)
