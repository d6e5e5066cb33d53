"""``jax.experimental.sparse``: sparse arrays (BCOO) whose operations are JAX primitives with
JVP, transpose, batching and lowering rules, so ``jit``, ``grad`` and ``vmap`` go through them."""
from jaxkit.experimental.sparse import util  # noqa: F401
from jaxkit.experimental.sparse._base import JAXSparse
from jaxkit.experimental.sparse.bcoo import (
    BCOO, bcoo_broadcast_in_dim, bcoo_concatenate, bcoo_conv_general_dilated, bcoo_dot_general,
    bcoo_dot_general_p, bcoo_dot_general_sampled, bcoo_dot_general_sampled_p, bcoo_dynamic_slice,
    bcoo_eliminate_zeros, bcoo_extract, bcoo_extract_p, bcoo_fromdense, bcoo_gather,
    bcoo_fromdense_p, bcoo_multiply_dense, bcoo_multiply_sparse, bcoo_reduce_sum, bcoo_reshape,
    bcoo_rev, bcoo_slice, bcoo_sort_indices, bcoo_sort_indices_p, bcoo_spdot_general_p,
    bcoo_squeeze, bcoo_sum_duplicates, bcoo_sum_duplicates_p, bcoo_todense, bcoo_todense_p,
    bcoo_transpose, bcoo_transpose_p, bcoo_update_layout)
from jaxkit.experimental.sparse.util import (
    CuSparseEfficiencyWarning, SparseEfficiencyError, SparseEfficiencyWarning)
from jaxkit.experimental.sparse.transform import SparseTracer, sparsify
from jaxkit.experimental.sparse.ad import grad, jacfwd, jacobian, jacrev, value_and_grad
from jaxkit.experimental.sparse.api import empty, eye, todense, todense_p
from jaxkit.experimental.sparse.random import random_bcoo
from jaxkit.experimental.sparse.coo import (
    COO, coo_fromdense, coo_fromdense_p, coo_matmat, coo_matmat_p, coo_matvec, coo_matvec_p,
    coo_todense, coo_todense_p)
from jaxkit.experimental.sparse.csr import (
    CSC, CSR, csr_fromdense, csr_fromdense_p, csr_matmat, csr_matmat_p, csr_matvec,
    csr_matvec_p, csr_todense, csr_todense_p)
from jaxkit.experimental.sparse import bcoo, transform, api, ad, random, coo, csr  # noqa: F401
from jaxkit.experimental.sparse import linalg  # noqa: F401
from jaxkit.experimental.sparse.bcsr import (
    BCSR, bcsr_broadcast_in_dim, bcsr_concatenate, bcsr_dot_general, bcsr_dot_general_p,
    bcsr_eliminate_zeros, bcsr_extract, bcsr_extract_p, bcsr_fromdense, bcsr_fromdense_p,
    bcsr_sum_duplicates, bcsr_todense, bcsr_todense_p)
from jaxkit.experimental.sparse import bcsr  # noqa: F401

__all__ = ["BCOO", "BCSR", "COO", "CSC", "CSR", "CuSparseEfficiencyWarning", "JAXSparse",
           "SparseEfficiencyError", "SparseTracer", "SparseEfficiencyWarning", "ad", "api", "bcoo",
           "bcoo_broadcast_in_dim", "bcoo_concatenate", "bcoo_conv_general_dilated",
           "bcoo_dot_general", "bcoo_dot_general_p", "bcoo_dot_general_sampled",
           "bcoo_dot_general_sampled_p", "bcoo_dynamic_slice", "bcoo_eliminate_zeros",
           "bcoo_extract", "bcoo_extract_p", "bcoo_fromdense", "bcoo_fromdense_p", "bcoo_gather",
           "bcoo_multiply_dense", "bcoo_multiply_sparse", "bcoo_reduce_sum", "bcoo_reshape",
           "bcoo_rev", "bcoo_slice", "bcoo_sort_indices", "bcoo_sort_indices_p",
           "bcoo_spdot_general_p", "bcoo_squeeze", "bcoo_sum_duplicates", "bcoo_sum_duplicates_p",
           "bcoo_todense", "bcoo_todense_p", "bcoo_transpose", "bcoo_transpose_p",
           "bcoo_update_layout", "bcsr", "bcsr_broadcast_in_dim", "bcsr_concatenate",
           "bcsr_dot_general", "bcsr_dot_general_p", "bcsr_eliminate_zeros", "bcsr_extract",
           "bcsr_extract_p", "bcsr_fromdense", "bcsr_fromdense_p", "bcsr_sum_duplicates",
           "bcsr_todense", "bcsr_todense_p", "coo", "coo_fromdense", "coo_fromdense_p",
           "coo_matmat", "coo_matmat_p", "coo_matvec", "coo_matvec_p", "coo_todense",
           "coo_todense_p", "csr", "csr_fromdense", "csr_fromdense_p", "csr_matmat", "csr_matmat_p",
           "csr_matvec", "csr_matvec_p", "csr_todense", "csr_todense_p", "empty", "eye", "grad",
           "jacfwd", "jacobian", "jacrev", "linalg", "random", "random_bcoo", "sparsify", "todense",
           "todense_p", "transform", "util", "value_and_grad"]
