"""Products and contractions: ``dot``, ``vdot``, ``inner``, ``outer``, ``matmul``,
``tensordot``, ``einsum``, ``kron``, ``vecdot``/``matvec``/``vecmat``, ``cross``, and the
diagonal family (``diagonal``, ``diag``, ``diagflat``, ``trace``).

Every contraction is one ``lax.dot_general``; the result dtype is the promoted input dtype
(weak if both inputs are), passed as ``preferred_element_type`` as JAX does.
"""
from __future__ import annotations

import operator
import string
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.lax.convert import convert_formed
from jaxkit.lax.sharding import lay_out
from jaxkit.lax.sharding_axes import auto_axes_out
from jaxkit.lax.sharding_rules import resolve_out_sharding
from jaxkit.numpy._creation import _user_dtype, arange, array, eye, zeros, zeros_like
from jaxkit.numpy._indexing import getitem
from jaxkit.numpy._jitted import jitted
from jaxkit.numpy._promotion import (
    broadcast_to_shape,
    canonicalize_axis,
    check_arraylike,
    convert,
    ensure_arraylike,
    promote_dtypes,
)
from jaxkit.numpy._reductions import sum as _sum
from jaxkit.numpy._shape import moveaxis, ravel, reshape
from jaxkit.numpy._ufuncs import conjugate, multiply, where3
from jaxkit.numpy._vectorize import vectorize
from jaxkit.typing import Array, ArrayLike


def _result_dtype(preferred: Any, *args: Any, name: str) -> tuple[np.dtype, bool]:
    if preferred is None:
        return dtypes.result_type(*args, return_weak_type_flag=True)
    return dtypes.check_and_canonicalize_user_dtype(preferred, name), False


def _dot_general(a: Any, b: Any, dims: Any, precision: Any, out_dtype: np.dtype,
                 weak: bool, out_sharding: Any = None) -> Array:
    if dtypes.dtype(a) != dtypes.dtype(b):
        a, b = convert(a, out_dtype), convert(b, out_dtype)
    out = lax.dot_general(a, b, dims, precision=precision, preferred_element_type=out_dtype,
                          out_sharding=out_sharding)
    return convert_formed(out, out_dtype, weak_type=weak)


# out_sharding is resolved against the mesh in context before the jitted body is called, so
# that the body's cache key holds the layout itself (the same P under another mesh is another
# program).
@jitted(static_argnames=("precision", "preferred_element_type", "out_sharding"),
        stages_only=True)
def dot(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
        preferred_element_type: Any = None, out_sharding: Any = None) -> Array:
    """``jnp.dot``: the dot product (matrix product for 2-D inputs, the last axis of ``a``
    with the second-to-last of ``b`` in general; a product if either is a scalar).
    ``out_sharding`` (over Explicit mesh axes) chooses the result's layout."""
    return _dot(a, b, precision=precision, preferred_element_type=preferred_element_type,
                out_sharding=resolve_out_sharding("dot", out_sharding))


@jitted(static_argnames=("precision", "preferred_element_type", "out_sharding"), name="dot")
def _dot(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
         preferred_element_type: Any = None, out_sharding: Any = None) -> Array:
    a, b = ensure_arraylike("dot", a, b)
    dt, weak = _result_dtype(preferred_element_type, a, b, name="dot")
    if a.ndim == 0 or b.ndim == 0:
        contract = ((), ())
    elif b.ndim == 1:
        contract = ((a.ndim - 1,), (0,))
    else:
        contract = ((a.ndim - 1,), (b.ndim - 2,))
    return _dot_general(a, b, (contract, ((), ())), precision, dt, weak, out_sharding)


@jitted(static_argnames=("precision", "preferred_element_type", "out_sharding"),
        stages_only=True)
def matmul(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
           preferred_element_type: Any = None, out_sharding: Any = None) -> Array:
    """``jnp.matmul`` (``a @ b``): matrix product with broadcast batch dimensions; 1-D
    operands are vectors. ``out_sharding`` (over Explicit mesh axes) chooses the result's
    layout."""
    return _matmul(a, b, precision=precision, preferred_element_type=preferred_element_type,
                   out_sharding=resolve_out_sharding("matmul", out_sharding))


@jitted(static_argnames=("precision", "preferred_element_type", "out_sharding"), name="matmul")
def _matmul(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
            preferred_element_type: Any = None, out_sharding: Any = None) -> Array:
    a, b = ensure_arraylike("matmul", a, b)
    for i, x in enumerate((a, b)):
        if x.ndim < 1:
            raise ValueError(f"matmul input operand {i} must have ndim at least 1, but it has "
                             f"ndim {x.ndim}")
    dt, weak = _result_dtype(preferred_element_type, a, b, name="matmul")
    a_is_mat, b_is_mat = a.ndim > 1, b.ndim > 1
    a_batch = a.shape[:-2] if a_is_mat else ()
    b_batch = b.shape[:-2] if b_is_mat else ()
    nb = max(len(a_batch), len(b_batch))
    a_batch = (None,) * (nb - len(a_batch)) + tuple(a_batch)
    b_batch = (None,) * (nb - len(b_batch)) + tuple(b_batch)
    a_squeeze, b_squeeze, a_bdims, b_bdims = [], [], [], []
    idx_batch, idx_a_other, idx_b_other = [], [], []
    for i, (ba, bb) in enumerate(zip(a_batch, b_batch)):
        if ba is None:
            idx_b_other.append(i)
        elif bb is None:
            idx_a_other.append(i)
        elif ba == 1:
            idx_b_other.append(i)
            a_squeeze.append(len(idx_batch) + len(idx_a_other) + len(a_squeeze))
        elif bb == 1:
            idx_a_other.append(i)
            b_squeeze.append(len(idx_batch) + len(idx_b_other) + len(b_squeeze))
        elif ba == bb:
            a_bdims.append(len(idx_batch) + len(idx_a_other))
            b_bdims.append(len(idx_batch) + len(idx_b_other))
            idx_batch.append(i)
        else:
            raise ValueError(f"Incompatible shapes for matmul arguments: {a.shape} and "
                             f"{b.shape}")
    if a_is_mat:
        idx_a_other.append(nb)
    if b_is_mat:
        idx_b_other.append(nb + a_is_mat)
    perm = np.argsort(np.concatenate([idx_batch, idx_a_other, idx_b_other]).astype(int))
    a = lax.squeeze(a, tuple(a_squeeze))
    b = lax.squeeze(b, tuple(b_squeeze))
    dims = (((a.ndim - 1,), (b.ndim - 1 - b_is_mat,)), (tuple(a_bdims), tuple(b_bdims)))
    out = _dot_general(a, b, dims, precision, dt, weak, out_sharding)
    return lax.transpose(out, tuple(int(p) for p in perm))


@jitted(static_argnames=("precision", "preferred_element_type"))
def vdot(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
         preferred_element_type: Any = None) -> Array:
    """``jnp.vdot``: the dot product of the flattened inputs, conjugating ``a``."""
    a, b = ensure_arraylike("vdot", a, b)
    if dtypes.issubdtype(a.dtype, np.complexfloating):
        a = lax.conj(a)
    return dot(ravel(a), ravel(b), precision=precision,
               preferred_element_type=preferred_element_type)


@jitted(static_argnames=("axis", "precision", "preferred_element_type"), converts_first=True)
def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1, precision: Any = None,
           preferred_element_type: Any = None) -> Array:
    """``jnp.vecdot``: the (conjugated) dot product along ``axis``, batched over the rest."""
    x1, x2 = ensure_arraylike("vecdot", x1, x2)
    if x1.shape[axis] != x2.shape[axis]:
        raise ValueError(f"axes must match; got shapes {x1.shape} and {x2.shape} with "
                         f"axis={axis}")
    x1 = moveaxis(x1, axis, -1)
    x2 = moveaxis(x2, axis, -1)
    # As JAX's: vdot vectorized over the other axes.
    return vectorize(partial(vdot, precision=precision,
                             preferred_element_type=preferred_element_type),
                     signature="(n),(n)->()")(x1, x2)


@jitted(inline=False)
def matvec(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.matvec``: batched matrix-vector product."""
    x1, x2 = ensure_arraylike("matvec", x1, x2)
    return vectorize(matmul, signature="(n,m),(m)->(n)")(x1, x2)


@jitted(inline=False)
def vecmat(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.vecmat``: batched (conjugated) vector-matrix product."""
    x1, x2 = ensure_arraylike("vecmat", x1, x2)
    return vectorize(matmul, signature="(n),(n,m)->(m)")(conjugate(x1), x2)


@jitted(static_argnames=("precision", "preferred_element_type"))
def inner(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
          preferred_element_type: Any = None) -> Array:
    """``jnp.inner``: contraction over the last axes of ``a`` and ``b``."""
    a, b = ensure_arraylike("inner", a, b)
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b)
    return tensordot(a, b, (-1, -1), precision=precision,
                     preferred_element_type=preferred_element_type)


@jitted(static_argnames=("out",))
def outer(a: ArrayLike, b: ArrayLike, out: None = None) -> Array:
    """``jnp.outer``: ``ravel(a)[:, None] * ravel(b)[None, :]``."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.outer is not supported.")
    a, b = ensure_arraylike("outer", a, b)
    return multiply(lax.expand_dims(ravel(a), (1,)), lax.expand_dims(ravel(b), (0,)))


@jitted(static_argnames=("axes", "precision", "preferred_element_type", "out_sharding"),
        stages_only=True)
def tensordot(a: ArrayLike, b: ArrayLike, axes: int | Sequence[Any] = 2, *,
              precision: Any = None, preferred_element_type: Any = None,
              out_sharding: Any = None) -> Array:
    """``jnp.tensordot``: contract the last ``axes`` axes of ``a`` with the first of ``b``, or
    the given pairs of axes. ``out_sharding`` (over Explicit mesh axes) chooses the result's
    layout."""
    return _tensordot(a, b, axes, precision=precision,
                      preferred_element_type=preferred_element_type,
                      out_sharding=resolve_out_sharding("tensordot", out_sharding))


@jitted(static_argnames=("axes", "precision", "preferred_element_type", "out_sharding"),
        name="tensordot")
def _tensordot(a: ArrayLike, b: ArrayLike, axes: int | Sequence[Any] = 2, *,
               precision: Any = None, preferred_element_type: Any = None,
               out_sharding: Any = None) -> Array:
    a, b = ensure_arraylike("tensordot", a, b)
    dt, weak = _result_dtype(preferred_element_type, a, b, name="tensordot")
    if type(axes) is int:
        if axes > min(a.ndim, b.ndim):
            raise TypeError(f"Number of tensordot axes (axes {axes}) exceeds input ranks "
                            f"({a.shape} and {b.shape})")
        contract = tuple(range(a.ndim - axes, a.ndim)), tuple(range(axes))
    elif isinstance(axes, (tuple, list)) and len(axes) == 2:
        ax1, ax2 = axes
        if type(ax1) is int and type(ax2) is int:
            contract = (canonicalize_axis(ax1, a.ndim),), (canonicalize_axis(ax2, b.ndim),)
        elif isinstance(ax1, (tuple, list)) and isinstance(ax2, (tuple, list)):
            if len(ax1) != len(ax2):
                raise TypeError(f"tensordot requires axes lists to have equal length, got "
                                f"{ax1} and {ax2}.")
            contract = (tuple(canonicalize_axis(i, a.ndim) for i in ax1),
                        tuple(canonicalize_axis(i, b.ndim) for i in ax2))
        else:
            raise TypeError(f"tensordot requires both axes lists to be either ints, tuples or "
                            f"lists, got {ax1} and {ax2}")
    else:
        raise TypeError("tensordot axes argument must be an int, a pair of ints, or a pair of "
                        "lists/tuples of ints.")
    return _dot_general(a, b, (contract, ((), ())), precision, dt, weak, out_sharding)


@jitted(inline=False)  # a plain jit, as JAX's: traced, it stages ``jit[name=kron]``
def kron(a: ArrayLike, b: ArrayLike) -> Array:
    """``jnp.kron``: the Kronecker product."""
    check_arraylike("kron", a, b)
    a, b = promote_dtypes(a, b)
    a, b = ensure_arraylike("kron", a, b)
    if a.ndim < b.ndim:
        a = lax.expand_dims(a, tuple(range(b.ndim - a.ndim)))
    elif b.ndim < a.ndim:
        b = lax.expand_dims(b, tuple(range(a.ndim - b.ndim)))
    a_r = lax.expand_dims(a, tuple(range(1, 2 * a.ndim, 2)))
    b_r = lax.expand_dims(b, tuple(range(0, 2 * b.ndim, 2)))
    out_shape = tuple(int(x) * int(y) for x, y in zip(a.shape, b.shape))
    # lax.mul, as JAX's: booleans are refused (TypeError), not multiplied as logical and.
    return reshape(lax.mul(a_r, b_r), out_shape)


@jitted(static_argnames=("axisa", "axisb", "axisc", "axis"), inline=False)
def cross(a: ArrayLike, b: ArrayLike, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: int | None = None) -> Array:
    """``jnp.cross``: the cross product of 2- or 3-vectors."""
    check_arraylike("cross", a, b)
    if axis is not None:
        axisa = axisb = axisc = axis
    a = moveaxis(a, axisa, -1)
    b = moveaxis(b, axisb, -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError("Dimension must be either 2 or 3 for cross product")
    # JAX's order of equations: the components of a, then of b; the result an array of the
    # three differences (one expand_dims each, then a concatenate).
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    a0 = a[..., 0]
    a1 = a[..., 1]
    a2 = a[..., 2] if a.shape[-1] == 3 else zeros_like(a0)
    b0 = b[..., 0]
    b1 = b[..., 1]
    b2 = b[..., 2] if b.shape[-1] == 3 else zeros_like(b0)
    c = array([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0])
    return moveaxis(c, 0, axisc)


# --------------------------------------------------------------------------------------------
# Diagonals
# --------------------------------------------------------------------------------------------

# A plain ``jit`` in JAX 0.10.2: traced, a nested ``jit[name=diagonal]`` equation.
@jitted(static_argnames=("offset", "axis1", "axis2"), inline=False)
def diagonal(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
    """``jnp.diagonal``: the ``offset`` diagonal of the ``(axis1, axis2)`` planes, as the last
    axis."""
    a = ensure_arraylike("diagonal", a)
    if a.ndim < 2:
        raise ValueError("diagonal requires an array of at least two dimensions.")
    offset = operator.index(core.concrete_or_error(offset, "'offset' argument of jnp.diagonal"))
    if a.ndim == 2 and a.shape[0] == a.shape[1] and offset == 0 and a.dtype != np.bool_:
        # As JAX: a platform_dependent whose Mosaic (Pallas TPU) branch sums ``eye * a``.
        eye_a = eye(a.shape[0], dtype=a.dtype)

        def mosaic_diag(a):
            return lax.reduce(lax.mul(eye_a, a), np.array(0, a.dtype), lax.add, (0,))
        return lax.platform_dependent(a, default=partial(_default_diagonal, offset=offset,
                                                         axis1=axis1, axis2=axis2),
                                      mosaic=mosaic_diag)
    return _default_diagonal(a, offset, axis1, axis2)


def _default_diagonal(a: Array, offset: int, axis1: int, axis2: int) -> Array:
    a = moveaxis(a, (axis1, axis2), (-2, -1))
    n, m = a.shape[-2:]
    size = max(0, min(n + min(offset, 0), m - max(offset, 0)))
    # Traced index vectors (iota equations), as JAX's ``arange`` under its jit gives.
    i = lax.iota(np.int32, size)
    j = lax.add(np.int32(abs(offset)), lax.iota(np.int32, size)) if offset else lax.iota(
        np.int32, size)
    rows, cols = (i, j) if offset >= 0 else (j, i)
    return getitem(a, (Ellipsis, rows, cols))


def diag(v: ArrayLike, k: int = 0) -> Array:
    """``jnp.diag``: the ``k``-th diagonal of a 2-D array, or a 2-D array with ``v`` on it."""
    v = ensure_arraylike("diag", v)
    return _diag(v, operator.index(core.concrete_or_error(k, "'k' argument of jnp.diag")))


# JAX's ``_diag`` is a plain ``jit`` (a nested ``jit[name=_diag]`` equation when traced).
@jitted(static_argnames=("k",), inline=False)
def _diag(v: Array, k: int) -> Array:
    if v.ndim == 1:
        n = v.shape[0] + abs(k)
        zero = lax.full_like(v, 0, shape=())
        v = lax.pad(v, zero, ((max(0, -k), max(0, k), 0),))
        return where3(eye(n, k=k, dtype=bool), getitem(v, (slice(None), None)), zero)
    if v.ndim == 2:
        return diagonal(v, offset=k)
    raise ValueError("diag input must be 1d or 2d")


def diagflat(v: ArrayLike, k: int = 0) -> Array:
    """``jnp.diagflat``: a 2-D array with the flattened ``v`` on the ``k``-th diagonal."""
    check_arraylike("diagflat", v)
    # As JAX's: one scatter into the flattened square result.
    v_ravel = ravel(v)
    v_length = len(v_ravel)
    adj_length = v_length + abs(k)
    res = zeros(adj_length * adj_length, dtype=v_ravel.dtype)
    i = arange(0, adj_length - abs(k))
    fi = i + k + i * adj_length if k >= 0 else i + (i - k) * adj_length
    res = res.at[fi].set(v_ravel)
    return res.reshape(adj_length, adj_length)


@jitted(static_argnames=("axis1", "axis2", "dtype", "out"), inline=False)
def trace(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
          out: None = None) -> Array:
    """``jnp.trace``: the sum of the ``offset`` diagonal (``offset`` may be traced)."""
    a = ensure_arraylike("trace", a)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.trace is not supported.")
    if canonicalize_axis(axis1, a.ndim) == canonicalize_axis(axis2, a.ndim):
        raise ValueError(f"axis1 and axis2 can not be same. axis1={axis1} and axis2={axis2}")
    a_shape = a.shape
    a = moveaxis(a, (axis1, axis2), (-2, -1))
    # JAX's algorithm: mask everything off the diagonal, then sum the last two axes.
    a = where3(eye(a_shape[axis1], a_shape[axis2], k=offset, dtype=bool), a, zeros_like(a))
    return _sum(a, axis=(-2, -1), dtype=_user_dtype(dtype, "trace"))


# --------------------------------------------------------------------------------------------
# einsum
# --------------------------------------------------------------------------------------------

def _parse_subscripts(subscripts: str, ndims: list[int]) -> tuple[list[str], str]:
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        lhs, out = subscripts.split("->")
        explicit = True
    else:
        lhs, out, explicit = subscripts, "", False
    inputs = lhs.split(",")
    if len(inputs) != len(ndims):
        raise ValueError(f"einsum: {len(inputs)} operand subscripts for {len(ndims)} operands")
    used = {c for c in subscripts if c.isalpha()}
    free = [c for c in string.ascii_letters if c not in used]
    ell_ndim = max([n - (len(s) - 3) for s, n in zip(inputs, ndims) if "..." in s], default=0)
    ell = "".join(free[:ell_ndim])
    terms = []
    for s, n in zip(inputs, ndims):
        if "..." in s:
            k = n - (len(s) - 3)
            s = s.replace("...", ell[ell_ndim - k:] if k else "")
        if len(s) != n:
            raise ValueError(f"einsum: subscripts {s!r} do not match an operand of rank {n}")
        terms.append(s)
    if explicit:
        out = out.replace("...", ell)
        for c in out:
            if not any(c in t for t in terms):
                raise ValueError(f"Output character '{c}' did not appear in the input")
    else:
        counts = Counter("".join(terms))
        out = ell + "".join(sorted(c for c in counts if counts[c] == 1 and c not in ell))
    return terms, out


def _einsum_repeats(x: Array, term: str, keep: set) -> tuple[Array, str]:
    """An operand's repeated labels (``ii->i``, ``ii->``), as JAX's einsum handles them: first
    its labels found nowhere else are summed; then, per repeated label, everything off the
    diagonal of its axes is zeroed (a Kronecker-delta mask) and those axes are summed, all of
    them, or all but the last when the label is still needed (``keep``)."""
    counts = Counter(term)
    if all(n == 1 for n in counts.values()):
        return x, term
    uniques = tuple(i for i, c in enumerate(term) if counts[c] == 1 and c not in keep)
    if uniques:
        x = lax.reduce_sum(x, uniques)
        term = "".join(c for i, c in enumerate(term) if i not in uniques)
    for label, count in counts.items():
        if count == 1:
            continue
        axes = tuple(i for i, c in enumerate(term) if c == label)
        base = tuple(x.shape[i] for i in axes)
        iotas = [lax.broadcasted_iota(np.uint32, base, i) for i in range(len(base))]
        eyes = [lax.eq(i1, i2) for i1, i2 in zip(iotas[:-1], iotas[1:])]
        delta = eyes[0]
        for e in eyes[1:]:
            delta = lax.bitwise_and(delta, e)
        delta = lax.broadcast_in_dim(delta, x.shape, axes)
        x = lax.select(delta, x, lax.full_like(x, 0))
        if label in keep:
            x = lax.reduce_sum(x, axes[:-1])
            term = term.replace(label, "", count - 1)
        else:
            x = lax.reduce_sum(x, axes)
            term = term.replace(label, "")
    return x, term


def einsum(subscripts, /, *operands: ArrayLike, out: None = None, optimize: Any = "auto",
           precision: Any = None, preferred_element_type: Any = None,
           _dot_general: Callable[..., Array] = lax.dot_general,
           out_sharding: Any = None) -> Array:
    """``jnp.einsum``: Einstein summation, as a chain of ``lax.dot_general`` contractions
    (``optimize`` is accepted; operands are contracted left to right). Also takes NumPy's
    interleaved form ``einsum(x, [0, 1], y, [1, 2], [0, 2])``. ``out_sharding`` (over Explicit
    mesh axes) lays the result out; None (Flax nnx passes it) lays nothing out.
    ``_dot_general`` (JAX's private hook, which Flax's fp8 einsum uses) replaces
    ``lax.dot_general`` for the contractions: called as ``(lhs, rhs, dimension_numbers,
    precision, preferred_element_type=...)``."""
    if not isinstance(subscripts, str):
        subscripts, operands = _interleaved_subscripts((subscripts, *operands))
    if len(operands) == 1:  # (ensure_arraylike gives a value, not a tuple, for one)
        operands = (ensure_arraylike("einsum", *operands),)
    else:
        operands = ensure_arraylike("einsum", *operands)  # JAX converts them first
    sharding = resolve_out_sharding("einsum", out_sharding)
    if sharding is not None and len(operands) == 2:
        # One contraction, as JAX's: its dot_general is typed with the layout asked for.
        return _einsum(subscripts, *operands, out=out, optimize=optimize, precision=precision,
                       preferred_element_type=preferred_element_type,
                       _dot_general=_dot_general, out_sharding=sharding)
    if sharding is not None and len(operands) > 2:
        # Several contractions run under auto_axes, the result laid out as asked (JAX's).
        return auto_axes_out(lambda *ops: _einsum(
            subscripts, *ops, out=out, optimize=optimize, precision=precision,
            preferred_element_type=preferred_element_type, _dot_general=_dot_general),
            sharding)(*ensure_arraylike("einsum", *operands))
    return lay_out(_einsum(subscripts, *operands, out=out, optimize=optimize,
                           precision=precision, preferred_element_type=preferred_element_type,
                           _dot_general=_dot_general),
                   "einsum", out_sharding)


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _interleaved_subscripts(args: tuple) -> tuple[str, tuple]:
    """``(op, sublist, op, sublist, ..., [output sublist])`` as a subscripts string and the
    operands (sublist entries are integers below 52, or ``...``)."""
    def term(sublist) -> str:
        out = []
        for label in sublist:
            if label is Ellipsis:
                out.append("...")
            elif isinstance(label, (int, np.integer)) and 0 <= label < len(_LETTERS):
                out.append(_LETTERS[label])
            else:
                raise ValueError(f"einsum sublist entries must be integers in [0, 52) or "
                                 f"Ellipsis, got {label!r}")
        return "".join(out)

    pairs, rest = args[:len(args) // 2 * 2], args[len(args) // 2 * 2:]
    operands = tuple(pairs[0::2])
    subscripts = ",".join(term(sub) for sub in pairs[1::2])
    if rest:
        subscripts += "->" + term(rest[0])
    return subscripts, operands


@jitted(static_argnames=("subscripts", "out", "optimize", "precision", "preferred_element_type",
                         "_dot_general", "out_sharding"))
def _einsum(subscripts: str, /, *operands: ArrayLike, out: None = None, optimize: Any = "auto",
            precision: Any = None, preferred_element_type: Any = None,
            _dot_general: Callable[..., Array] = lax.dot_general,
            out_sharding: Any = None) -> Array:
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.einsum is not supported.")
    ops = list(ensure_arraylike("einsum", *operands)) if len(operands) > 1 else \
        [ensure_arraylike("einsum", *operands)]
    dt, weak = _result_dtype(preferred_element_type, *ops, name="einsum")
    ops = [convert(o, dt) for o in ops]
    terms, out_term = _parse_subscripts(subscripts, [o.ndim for o in ops])
    sizes: dict[str, int] = {}
    for i, (t, o) in enumerate(zip(terms, ops)):
        for c, d in zip(t, o.shape):
            if sizes.get(c, 1) != d and d != 1 and sizes.get(c, 1) != 1:
                # opt_einsum's words, as JAX's (the size seen first, then this one)
                raise ValueError(f"Size of label '{c}' for operand {i} ({sizes[c]}) does not "
                                 f"match previous terms ({d}).")
            sizes[c] = d if sizes.get(c, 1) == 1 else sizes[c]
    # Per operand: diagonals, broadcast size-1 labels, sum labels seen nowhere else.
    pending = []
    for n, (t, o) in enumerate(zip(terms, ops)):
        others = set(out_term).union(*(terms[m] for m in range(len(terms)) if m != n))
        o, t = _einsum_repeats(o, t, others)
        target = tuple(sizes[c] for c in t)
        if o.shape != target:
            o = broadcast_to_shape(o, target)
        drop = tuple(i for i, c in enumerate(t) if c not in others)
        if drop:
            o = lax.reduce_sum(o, drop)
            t = "".join(c for i, c in enumerate(t) if i not in drop)
        pending.append((o, t))
    x, xt = pending[0]
    for k in range(1, len(pending)):
        y, yt = pending[k]
        later = set(out_term).union(*(t for _, t in pending[k + 1:]))
        if k == len(pending) - 1 and _swapped_is_output(xt, yt, later, out_term):
            # As JAX's: the other operand order when it gives the output with no transpose.
            x, xt, y, yt = y, yt, x, xt
        shared = [c for c in xt if c in yt]
        batch = [c for c in shared if c in later]
        contract = [c for c in shared if c not in later]
        dims = ((tuple(xt.index(c) for c in contract), tuple(yt.index(c) for c in contract)),
                (tuple(xt.index(c) for c in batch), tuple(yt.index(c) for c in batch)))
        new_xt = "".join(batch) + "".join(c for c in xt if c not in shared) + \
            "".join(c for c in yt if c not in shared)
        typed = {} if out_sharding is None else {
            "out_sharding": _einsum_dot_sharding(out_sharding, out_term, new_xt)}
        x = _dot_general(x, y, dims, precision, preferred_element_type=dt, **typed)
        xt = new_xt
        # Labels now in x alone and not needed later are summed right away.
        drop = tuple(i for i, c in enumerate(xt) if c not in later)
        if drop:
            x = lax.reduce_sum(x, drop)
            xt = "".join(c for i, c in enumerate(xt) if i not in drop)
    drop = tuple(i for i, c in enumerate(xt) if c not in out_term)
    if drop:
        x = lax.reduce_sum(x, drop)
        xt = "".join(c for i, c in enumerate(xt) if i not in drop)
    perm = tuple(xt.index(c) for c in out_term)
    x = lax.transpose(x, perm)
    return convert_formed(x, dt, weak_type=weak)


def _contracted_term(xt: str, yt: str, later: set) -> str:
    """The labels of ``dot_general(x, y)``: batch, then ``x``'s free, then ``y``'s free."""
    shared = [c for c in xt if c in yt]
    return ("".join(c for c in shared if c in later) +
            "".join(c for c in xt if c not in shared) + "".join(c for c in yt if c not in shared))


def _swapped_is_output(xt: str, yt: str, later: set, out_term: str) -> bool:
    return (_contracted_term(xt, yt, later) != out_term
            and _contracted_term(yt, xt, later) == out_term)


def _einsum_dot_sharding(s: Any, out_term: str, dot_term: str) -> Any:
    """The layout of the contraction whose result (labels ``dot_term``) is transposed into
    the output (labels ``out_term``) laid out as ``s``: each label keeps its mesh axes."""
    if dot_term == out_term:
        return s
    parts = tuple(s.spec.partitions) + (None,) * (len(out_term) - len(s.spec.partitions))
    by_label = dict(zip(out_term, parts))
    return s.update(spec=type(s.spec)(*(by_label.get(c) for c in dot_term)))


def einsum_path(subscripts: str, /, *operands: ArrayLike, optimize: Any = "auto"
                ) -> tuple[list, str]:
    """``jnp.einsum_path``: the (left-to-right) contraction order ``einsum`` uses."""
    n = len(operands)
    path = [(0, 1)] * max(n - 1, 0) if n > 1 else [(0,)]
    return ["einsum_path", *path], f"  Contraction order: left to right ({subscripts})"
