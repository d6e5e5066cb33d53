"""Argument handling shared by ``jaxkit.scipy``: jnp's promotion, with every operand made an
array (jnp keeps Python scalars as they are; the scipy functions read ``.dtype``)."""
from __future__ import annotations

from jaxkit import core
from jaxkit.numpy import _promotion
from jaxkit.numpy._promotion import asarray
from jaxkit.typing import Array, ArrayLike


def promote_args_inexact(fun_name: str, *args: ArrayLike) -> list[Array]:
    """Check, promote to a common inexact dtype and broadcast, as arrays."""
    return [asarray(a) for a in _promotion.promote_args_inexact(fun_name, *args)]


def promote_args_complex(fun_name: str, *args: ArrayLike) -> list[Array]:
    """Check, promote to a common complex dtype and broadcast, as arrays."""
    return [asarray(a) for a in _promotion.promote_args_complex(fun_name, *args)]


def promote_dtypes_inexact(*args: ArrayLike) -> list[Array]:
    """Promote to a common inexact dtype, as arrays (no broadcasting)."""
    return [asarray(a) for a in _promotion.promote_dtypes_inexact(*args)]


def concrete(force, value, context: str):
    """``force(value)`` for a concrete value; a clear ``ConcretizationTypeError`` for a
    tracer (as JAX's ``core.concrete_or_error(force, value, context)``)."""
    return force(core.concrete_or_error(value, context))
