"""``jax.experimental.sparse.linalg``: ``lobpcg_standard`` (top-k eigenpairs, in ``_lobpcg``)
and ``spsolve``, a direct solve of a CSR system. As in JAX
on CPU, the solve itself is SciPy's ``scipy.sparse.linalg.spsolve`` run as a host callback;
JVP (both operands) and transpose (right-hand side) rules make it differentiable, and under
vmap the systems are solved one after another (JAX has no batching rule for it)."""
from __future__ import annotations

import numpy as np

from jaxkit import core, lax
from jaxkit import numpy as jnp
from jaxkit.api import ShapeDtypeStruct
from jaxkit.experimental.sparse._lobpcg import lobpcg_standard
from jaxkit.experimental.sparse.coo import COOInfo
from jaxkit.experimental.sparse.csr import csr_matvec_p
from jaxkit.interpreters import ad, batching, dispatch, mlir
from jaxkit.transforms.callback import pure_callback

__all__ = ["lobpcg_standard", "spsolve", "spsolve_p"]


def _scipy_spsolve(data, indices, indptr, b):
    import scipy.sparse  # SciPy runs on the host only, when the callback fires
    import scipy.sparse.linalg
    n = np.asarray(b).size
    A = scipy.sparse.csr_matrix((np.asarray(data), np.asarray(indices), np.asarray(indptr)),
                                shape=(n, n))
    return np.asarray(scipy.sparse.linalg.spsolve(A, np.asarray(b))).astype(np.asarray(b).dtype)


def _spsolve_impl(data, indices, indptr, b, *, tol, reorder):
    return pure_callback(_scipy_spsolve, ShapeDtypeStruct(b.shape, b.dtype), data, indices,
                         indptr, b)


def _spsolve_abstract_eval(data, indices, indptr, b, *, tol, reorder):
    if data.dtype != b.dtype:
        raise ValueError(f"data types do not match: data={data.dtype} b={b.dtype}")
    if not (data.ndim == indices.ndim == indptr.ndim == b.ndim == 1):
        raise ValueError("spsolve expects 1-D data, indices, indptr and b; got "
                         f"{data.str_short()}, {indices.str_short()}, {indptr.str_short()}, "
                         f"{b.str_short()}")
    if indptr.shape[0] != b.shape[0] + 1:
        raise ValueError(f"spsolve: indptr of size {indptr.shape[0]} does not fit a square "
                         f"matrix of size {b.shape[0]}")
    return b


def _csr_transpose(data, indices, indptr):
    """Transpose of a square CSR matrix, as CSR buffers."""
    m = indptr.shape[0] - 1
    row = jnp.cumsum(jnp.zeros_like(indices).at[indptr].add(1, mode="drop")) - 1
    row_t, indices_t, data_t = lax.sort((indices, row, data), num_keys=2)
    counts = jnp.zeros(m, indptr.dtype).at[row_t].add(1, mode="drop")
    indptr_t = jnp.concatenate([jnp.zeros(1, indptr.dtype), jnp.cumsum(counts).astype(
        indptr.dtype)])
    return data_t, indices_t.astype(indices.dtype), indptr_t


def _jvp_data(data_dot, data, indices, indptr, b, **kw):
    # d(M^-1 b) = -M^-1 dM M^-1 b
    p = spsolve_p.bind(data, indices, indptr, b, **kw)
    q = csr_matvec_p.bind(data_dot, indices, indptr, p,
                          spinfo=COOInfo((indptr.shape[0] - 1, b.shape[0])), transpose=False)
    return -spsolve_p.bind(data, indices, indptr, q, **kw)


def _jvp_b(b_dot, data, indices, indptr, b, **kw):
    return spsolve_p.bind(data, indices, indptr, b_dot, **kw)


def _spsolve_transpose(ct, data, indices, indptr, b, **kw):
    if not ad.is_undefined_primal(b) or any(ad.is_undefined_primal(x)
                                            for x in (data, indices, indptr)):
        raise NotImplementedError("spsolve transpose with respect to data")
    if type(ct) is ad.Zero:
        return [None, None, None, ad.Zero(b.aval)]
    data_t, indices_t, indptr_t = _csr_transpose(data, indices, indptr)
    return [None, None, None, spsolve_p.bind(data_t, indices_t, indptr_t, ct, **kw)]


spsolve_p = core.Primitive("spsolve")
spsolve_p.def_impl(lambda *a, **p: dispatch.apply_primitive(spsolve_p, *a, **p))
spsolve_p.def_abstract_eval(_spsolve_abstract_eval)
ad.defjvp(spsolve_p, _jvp_data, None, None, _jvp_b)
ad.deftranspose(spsolve_p, _spsolve_transpose)
mlir.register_lowering(spsolve_p, mlir.lower_fun(_spsolve_impl))


def _spsolve_batch(axis_data, args, dims, **kw):
    # The host solver takes one system at a time: solve the batch in a loop (lax.map).
    size = batching.batch_size(args, dims)
    args = [batching.bdim_at_front(x, d, size) for x, d in zip(args, dims)]
    return lax.map(lambda xs: spsolve_p.bind(*xs, **kw), tuple(args)), 0


batching.defrule(spsolve_p, _spsolve_batch)


def spsolve(data, indices, indptr, b, tol: float = 1e-6, reorder: int = 1):
    """Solve ``A x = b`` for the square CSR matrix ``A = (data, indices, indptr)``.

    ``tol`` and ``reorder`` belong to the cuSOLVER path of JAX and are accepted for
    compatibility; the CPU solve (SciPy's ``spsolve``) does not use them, as in JAX."""
    return spsolve_p.bind(jnp.asarray(data), jnp.asarray(indices), jnp.asarray(indptr),
                          jnp.asarray(b), tol=tol, reorder=reorder)
