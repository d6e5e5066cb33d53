"""``jaxkit.lax.linalg``: JAX's ``jax.lax.linalg``, linear-algebra primitives on LAPACK.

Each family lives in its own module: ``cholesky`` (``cholesky``, ``triangular_solve``,
``cholesky_update``, ``symmetric_product``), ``lu`` (``lu``, ``lu_pivots_to_permutation``,
``tridiagonal_solve``), ``qr`` (``qr``, ``householder_product``, ``ormqr``), ``eigh``
(``eigh``, ``tridiagonal``, ``hessenberg``, ``schur``), ``svd`` (``svd``, ``qdwh``) and
``eig``. ``_lapack`` holds the LAPACK custom call they share.
"""
# ruff: noqa: F401
from jaxkit.lax.linalg.cholesky import (
    cholesky,
    cholesky_p,
    cholesky_update,
    cholesky_update_p,
    symmetric_product,
    symmetric_product_p,
    triangular_solve,
    triangular_solve_p,
)
from jaxkit.lax.linalg.eig import EigImplementation, eig, eig_p
from jaxkit.lax.linalg.eigh import (
    EighImplementation,
    eigh,
    eigh_p,
    hessenberg,
    hessenberg_p,
    schur,
    schur_p,
    tridiagonal,
    tridiagonal_p,
)
from jaxkit.lax.linalg.lu import (
    lu,
    lu_p,
    lu_pivots_to_permutation,
    lu_pivots_to_permutation_p,
    tridiagonal_solve,
    tridiagonal_solve_p,
)
from jaxkit.lax.linalg.qr import (
    householder_product,
    householder_product_p,
    ormqr,
    ormqr_p,
    qr,
    qr_p,
)
from jaxkit.lax.linalg.svd import SvdAlgorithm, qdwh, svd, svd_p

__all__ = ["EigImplementation", "EighImplementation", "SvdAlgorithm", "cholesky", "cholesky_p",
           "cholesky_update", "cholesky_update_p", "eig", "eig_p", "eigh", "eigh_p",
           "hessenberg", "hessenberg_p", "householder_product", "householder_product_p", "lu",
           "lu_p", "lu_pivots_to_permutation", "lu_pivots_to_permutation_p", "ormqr", "ormqr_p",
           "qdwh", "qr", "qr_p", "schur", "schur_p", "svd", "svd_p", "symmetric_product",
           "symmetric_product_p", "triangular_solve", "triangular_solve_p", "tridiagonal",
           "tridiagonal_p", "tridiagonal_solve", "tridiagonal_solve_p"]
