"""``jnp.ufunc`` objects and ``jnp.frompyfunc``, as in JAX 0.10.2.

The binary ufuncs of ``jax.numpy`` (``add``, ``multiply``, ``maximum``, ``logical_and``, the
bitwise ops, ...) and ``negative`` are ``jnp.ufunc`` instances: callables with ``nin``,
``nout``, ``nargs`` and ``identity`` attributes and the ``reduce``, ``accumulate``,
``reduceat``, ``outer`` and ``at`` methods. Where a dedicated jnp function exists (``sum``
for ``add.reduce``, ``cumsum`` for ``add.accumulate``, ``x.at[i].add`` for ``add.at``, ...)
the method is that function; otherwise it is JAX's generic fallback, a ``fori_loop`` or
``scan`` over the reduced axis calling the ufunc itself.

Calling ``jnp.add(x, y)`` must stay as fast as calling the plain function. ``ufunc``
therefore subclasses ``functools.partial``: its call is the C-level ``partial`` call of the
wrapped function (no Python frame in between), while the class adds the attributes and
methods.
"""
from __future__ import annotations

import functools
import inspect
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.transforms.jit import jit
from jaxkit.numpy import _reductions, _ufuncs
from jaxkit.numpy._creation import asarray
from jaxkit.numpy._indexing import getitem
from jaxkit.numpy._promotion import broadcast_to, canonicalize_axis, check_arraylike
from jaxkit.numpy._take import take
from jaxkit.numpy._vectorize import vectorize
from jaxkit.typing import Array, ArrayLike, DTypeLike

__all__ = ["frompyfunc", "ufunc"]

_AT_INPLACE_WARNING = """\
Because JAX arrays are immutable, jnp.ufunc.at() cannot operate inplace like
np.ufunc.at(). Instead, you can pass inplace=False and capture the result; e.g.
>>> arr = jnp.add.at(arr, ind, val, inplace=False)
"""


class ufunc(functools.partial):
    """Universal function (JAX's ``jax.numpy.ufunc``): applies ``func`` elementwise to
    broadcast arrays, with NumPy's ufunc methods.

    ``call`` (optional) is the fast implementation of the call itself; without it the call is
    ``jnp.vectorize(func)`` under ``jit``. ``reduce``, ``accumulate``, ``at`` and ``reduceat``
    optionally give dedicated implementations of those methods."""

    def __new__(cls, func: Callable[..., Any], /, nin: int, nout: int, *,
                name: str | None = None, nargs: int | None = None, identity: Any = None,
                call: Callable[..., Any] | None = None, **methods: Any) -> ufunc:
        return super().__new__(cls, call if call is not None else _vectorized_call(func))

    def __init__(self, func: Callable[..., Any], /, nin: int, nout: int, *,
                 name: str | None = None, nargs: int | None = None, identity: Any = None,
                 call: Callable[..., Any] | None = None,
                 reduce: Callable[..., Any] | None = None,
                 accumulate: Callable[..., Any] | None = None,
                 at: Callable[..., Any] | None = None,
                 reduceat: Callable[..., Any] | None = None) -> None:
        self.__doc__ = func.__doc__
        self.__name__ = name or func.__name__
        # Read-only through properties: a ufunc may be a static jit argument, so it must not
        # change after it has been hashed.
        self._ufunc_props = {
            "func": func, "nin": operator.index(nin), "nout": operator.index(nout),
            "nargs": operator.index(nargs or nin), "identity": identity, "reduce": reduce,
            "accumulate": accumulate, "at": at, "reduceat": reduceat}

    def __call__(self, *args: Any, out: None = None, where: None = None) -> Any:
        # JAX's ufunc call takes NumPy's ``out``/``where`` keywords only to refuse them.
        if out is not None:
            raise NotImplementedError(f"out argument of {self}")
        if where is not None:
            raise NotImplementedError(f"where argument of {self}")
        return super().__call__(*args)

    # inspect reads a partial's signature from its function; a ufunc's is its ``__call__``'s,
    # as JAX's.
    __signature__ = inspect.signature(__call__).replace(parameters=list(
        inspect.signature(__call__).parameters.values())[1:])

    _func = property(lambda self: self._ufunc_props["func"])
    nin = property(lambda self: self._ufunc_props["nin"])
    nout = property(lambda self: self._ufunc_props["nout"])
    nargs = property(lambda self: self._ufunc_props["nargs"])
    identity = property(lambda self: self._ufunc_props["identity"])

    def _key(self) -> tuple:
        return (self._func, self.__name__, self.identity, self.nin, self.nout, self.nargs)

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ufunc) and self._key() == other._key()

    def __repr__(self) -> str:
        return f"<jnp.ufunc '{self.__name__}'>"

    def __reduce__(self) -> Any:  # partial's own would rebuild without nin/nout
        props = dict(self._ufunc_props)
        func, nin, nout = props.pop("func"), props.pop("nin"), props.pop("nout")
        return (_rebuild_ufunc, (func, nin, nout, self.__name__, self.func, props))

    def _require_binary(self, method: str) -> None:
        if self.nin != 2:
            raise ValueError(f"{method} only supported for binary ufuncs")
        if self.nout != 1:
            raise ValueError(f"{method} only supported for functions returning a single value")

    def reduce(self, a: ArrayLike, axis: int | tuple[int, ...] | None = 0,
               dtype: DTypeLike | None = None, out: None = None, keepdims: bool = False,
               initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
        """Reduce ``a`` along ``axis`` with this binary ufunc (``numpy.ufunc.reduce``)."""
        check_arraylike(f"{self.__name__}.reduce", a)
        self._require_binary("reduce")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduce()")
        if initial is not None:
            check_arraylike(f"{self.__name__}.reduce", initial)
        if where is not None:
            check_arraylike(f"{self.__name__}.reduce", where)
            if self.identity is None and initial is None:
                raise ValueError(f"reduction operation {self.__name__!r} does not have an "
                                 "identity, so to use a where mask one has to specify "
                                 "'initial'.")
            if asarray(where).dtype != np.bool_:
                raise ValueError("where argument must have dtype=bool; got "
                                 f"dtype={asarray(where).dtype}")
        if isinstance(axis, list):
            axis = tuple(axis)
        reduce = self._ufunc_props["reduce"]
        if reduce is not None:
            return reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial,
                          where=where)
        return _reduce_via_loop(self, a, axis, dtype, keepdims, initial, where)

    def accumulate(self, a: ArrayLike, axis: int = 0, dtype: DTypeLike | None = None,
                   out: None = None) -> Array:
        """Running reduction of ``a`` along ``axis`` (``numpy.ufunc.accumulate``)."""
        self._require_binary("accumulate")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.accumulate()")
        accumulate = self._ufunc_props["accumulate"]
        if accumulate is not None:
            return accumulate(a, axis=axis, dtype=dtype)
        check_arraylike(f"{self.__name__}.accumulate", a)
        if axis is None or isinstance(axis, tuple):
            raise ValueError("accumulate does not allow multiple axes")
        return _accumulate_via_scan(self, a, axis, dtype)

    def at(self, a: ArrayLike, indices: Any, b: ArrayLike | None = None, /, *,
           inplace: bool = True) -> Array:
        """``a`` with this ufunc applied at ``indices`` (with ``b``, for a binary ufunc);
        ``inplace=False`` is required, as JAX arrays are immutable (``numpy.ufunc.at``)."""
        if inplace:
            raise NotImplementedError(_AT_INPLACE_WARNING)
        args = () if b is None else (b,)
        at = self._ufunc_props["at"]
        if at is not None:
            return at(a, indices, *args)
        check_arraylike(f"{self.__name__}.at", a, *args)
        return _at_via_scan(self, a, indices, *args)

    def reduceat(self, a: ArrayLike, indices: Any, axis: int = 0,
                 dtype: DTypeLike | None = None, out: None = None) -> Array:
        """Reductions of ``a`` over the segments ``indices[i]:indices[i+1]`` along ``axis``
        (``numpy.ufunc.reduceat``)."""
        self._require_binary("reduceat")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduceat()")
        reduceat = self._ufunc_props["reduceat"]
        if reduceat is not None:
            return reduceat(a, indices, axis=axis, dtype=dtype)
        check_arraylike(f"{self.__name__}.reduceat", a, indices)
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError("reduceat requires a single integer axis.")
        return _reduceat_via_loop(self, a, indices, axis, dtype)

    def outer(self, A: ArrayLike, B: ArrayLike, /) -> Array:
        """This ufunc applied to all pairs of elements of ``A`` and ``B``; the result has shape
        ``(*A.shape, *B.shape)`` (``numpy.ufunc.outer``)."""
        self._require_binary("outer")
        check_arraylike(f"{self.__name__}.outer", A, B)
        A, B = asarray(A), asarray(B)
        # A ufunc is elementwise, so broadcasting A against B gives the outer product.
        return self(lax.reshape(A, A.shape + (1,) * B.ndim), B)


def _rebuild_ufunc(func: Callable, nin: int, nout: int, name: str, call: Callable,
                   props: dict) -> ufunc:
    return ufunc(func, nin, nout, name=name, call=call, **props)


def _vectorized_call(func: Callable[..., Any]) -> Callable[..., Any]:
    """The call of a ufunc built from a scalar function: ``vectorize(func)`` under ``jit``."""
    vectorized = jit(vectorize(func))

    def call(*args: ArrayLike, out: None = None, where: None = None) -> Any:
        name = getattr(func, "__name__", "ufunc")
        check_arraylike(name, *args)
        if out is not None:
            raise NotImplementedError(f"out argument of <jnp.ufunc '{name}'>")
        if where is not None:
            raise NotImplementedError(f"where argument of <jnp.ufunc '{name}'>")
        return vectorized(*args)
    return call


def _result_dtype(uf: ufunc, *args: Array) -> np.dtype:
    """The dtype of ``uf`` applied to scalars of the dtypes of ``args`` (under ``jit`` this
    is traced and dropped again as dead code)."""
    ones = [lax.full((), 1, x.dtype) for x in args]
    return core.get_aval(uf._func(*ones)).dtype


def _moveaxis_to_front(x: Array, axis: int) -> Array:
    if axis == 0:
        return x
    perm = (axis,) + tuple(i for i in range(x.ndim) if i != axis)
    return lax.transpose(x, perm)


def _moveaxis_from_front(x: Array, axis: int) -> Array:
    if axis == 0:
        return x
    perm = tuple(range(1, axis + 1)) + (0,) + tuple(range(axis + 1, x.ndim))
    return lax.transpose(x, perm)


@functools.partial(jit, static_argnums=(0, 2, 3, 4))
def _reduce_via_loop(uf: ufunc, arr: Array, axis: Any, dtype: Any, keepdims: bool,
                     initial: Any, where: Any) -> Array:
    arr = asarray(arr)
    if initial is None:
        initial = uf.identity
    dtype = _result_dtype(uf, arr, arr) if dtype is None else \
        dtypes.check_and_canonicalize_user_dtype(dtype, f"jnp.{uf.__name__}.reduce")
    if where is not None:
        where = broadcast_to(where, arr.shape)
    if isinstance(axis, tuple):
        raise NotImplementedError("tuple of axes")
    if axis is None:
        final_shape = (1,) * arr.ndim if keepdims else ()
        arr = lax.reshape(arr, (arr.size,))
        if where is not None:
            where = lax.reshape(where, (where.size,))
        axis = 0
    else:
        axis = canonicalize_axis(axis, arr.ndim)
        final_shape = arr.shape[:axis] + ((1,) if keepdims else ()) + arr.shape[axis + 1:]
    arr = _moveaxis_to_front(arr, axis)
    if where is not None:
        where = _moveaxis_to_front(where, axis)
    if arr.shape[0] == 0:
        if initial is None:
            raise ValueError(f"zero-size array to reduction operation {uf.__name__} which "
                             "has no identity")
        return lax.full(final_shape, initial, dtype)

    def body(i, val):
        new = uf(val, lax.convert_element_type(getitem(arr, i), dtype))
        return new if where is None else _ufuncs.where3(getitem(where, i), new, val)

    if initial is None:
        start, init = 1, getitem(arr, 0)
    else:
        start, init = 0, initial
    init = broadcast_to(lax.convert_element_type(asarray(init), dtype), arr.shape[1:])
    result = lax.fori_loop(start, arr.shape[0], body, init)
    return lax.reshape(result, final_shape) if keepdims else result


@functools.partial(jit, static_argnums=(0, 2, 3))
def _accumulate_via_scan(uf: ufunc, arr: Array, axis: int, dtype: Any) -> Array:
    arr = asarray(arr)
    dtype = _result_dtype(uf, arr, arr) if dtype is None else np.dtype(dtype)
    axis = canonicalize_axis(axis, arr.ndim)
    if arr.size == 0:
        return lax.full(arr.shape, 0, dtype)
    arr = lax.convert_element_type(_moveaxis_to_front(arr, axis), dtype)

    def step(carry, x):
        y = uf(carry, x)
        return y, y

    first = getitem(arr, 0)
    _, rest = lax.scan(step, first, getitem(arr, slice(1, None)))
    result = lax.concatenate([lax.expand_dims(first, (0,)), rest], 0)
    return _moveaxis_from_front(result, axis)


@functools.partial(jit, static_argnums=0)
def _at_via_scan(uf: ufunc, a: Array, indices: Any, *args: Array) -> Array:
    dtype = _result_dtype(uf, asarray(a), *(asarray(x) for x in args))
    a = lax.convert_element_type(asarray(a), dtype)
    args = tuple(lax.convert_element_type(asarray(x), dtype) for x in args)
    if not isinstance(indices, tuple):
        indices = (indices,)
    if not indices:
        return a
    shapes = [np.shape(i) for i in indices if not isinstance(i, slice)]
    shape = shapes and np.broadcast_shapes(*shapes)
    if not shape:
        return a.at[indices].set(uf(a.at[indices].get(), *args))
    n = math.prod(shape)
    if args:
        (arg,) = args
        tail = arg.shape[len(shape):]
        args = (lax.reshape(broadcast_to(arg, shape + tail), (n,) + tail),)
    indices = [i if isinstance(i, slice) else lax.reshape(broadcast_to(i, shape), (n,))
               for i in indices]

    def step(carry, _):
        k, a = carry
        idx = tuple(i if isinstance(i, slice) else getitem(i, k) for i in indices)
        a = a.at[idx].set(uf(a.at[idx].get(), *(getitem(x, k) for x in args)))
        return (k + 1, a), None

    (_, a), _ = lax.scan(step, (0, a), None, length=n)
    return a


@functools.partial(jit, static_argnums=(0, 3, 4))
def _reduceat_via_loop(uf: ufunc, a: Array, indices: Any, axis: int, dtype: Any) -> Array:
    a, indices = asarray(a), asarray(indices)
    if a.ndim == 0:
        raise ValueError(f"reduceat: a must have 1 or more dimension, got a.shape={a.shape}")
    if indices.ndim != 1:
        raise ValueError(f"reduceat: indices must be one-dimensional, got "
                         f"indices.shape={indices.shape}")
    dtype = a.dtype if dtype is None else np.dtype(dtype)
    axis = canonicalize_axis(axis, a.ndim)
    out = take(a, indices, axis=axis)
    others = tuple(d for d in range(out.ndim) if d != axis)
    bounds = lax.concatenate([indices, lax.full((1,), a.shape[axis], indices.dtype)], 0)
    bounds = lax.expand_dims(bounds, others)
    starts = lax.slice_in_dim(bounds, 0, bounds.shape[axis] - 1, axis=axis)
    ends = lax.slice_in_dim(bounds, 1, bounds.shape[axis], axis=axis)

    def body(i, out):
        inside = _ufuncs.logical_and(_ufuncs.greater(i, starts), _ufuncs.less(i, ends))
        return _ufuncs.where3(inside, uf(out, take(a, lax.expand_dims(i, (0,)), axis=axis)),
                              out)

    return lax.convert_element_type(lax.fori_loop(0, a.shape[axis], body, out), dtype)


def frompyfunc(func: Callable[..., Any], /, nin: int, nout: int, *,
               identity: Any = None) -> ufunc:
    """A ``jnp.ufunc`` from a JAX-traceable scalar function of ``nin`` arguments returning
    ``nout`` values (``jnp.frompyfunc``)."""
    return ufunc(func, nin, nout, identity=identity)


# ---- the ufuncs of jax.numpy ---------------------------------------------------------------
def _scatter_at(method: str) -> Callable[[ArrayLike, Any, ArrayLike], Array]:
    """``ufunc.at`` through ``a.at[indices].<method>(b)``; booleans go through int32 (where
    add is logical or and multiply logical and), as in JAX."""
    def at(a: ArrayLike, indices: Any, b: ArrayLike) -> Array:
        a = asarray(a)
        if a.dtype == np.bool_:
            a = lax.convert_element_type(a, np.int32)
            b = lax.convert_element_type(lax.convert_element_type(asarray(b), np.bool_),
                                         np.int32)
            return lax.convert_element_type(getattr(a.at[indices], method)(b), np.bool_)
        return getattr(a.at[indices], method)(b)
    return at


_add_at = _scatter_at("add")
_multiply_at = _scatter_at("multiply")


def _subtract_at(a: ArrayLike, indices: Any, b: ArrayLike) -> Array:
    return asarray(a).at[indices].subtract(b)


def _require_integer(arr: Array) -> Array:
    if arr.dtype != np.bool_ and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"integer argument required; got dtype={arr.dtype}")
    return arr


def _reducer(name: str, op: str, init: Any, **options: Any) -> Callable[..., Array]:
    """A ``ufunc.reduce`` implementation on jnp's reduction helper (as JAX's
    ``_reduce_max``, ``_reduce_bitwise_and``, ``_reduce_logical_or``, ...)."""

    def reduce(a: ArrayLike, axis: Any = None, dtype: DTypeLike | None = None,
               out: None = None, keepdims: bool = False, initial: ArrayLike | None = None,
               where: ArrayLike | None = None) -> Array:
        init_val = init
        if op in ("and", "or", "xor") and init is None:  # bitwise: -1 or 0 of the dtype
            dt = np.dtype(dtype) if dtype is not None else asarray(a).dtype
            init_val = np.array(-1 if op == "and" else 0).astype(dt)
        return _reductions._reduction(a, name, op, init_val, axis=axis, dtype=dtype, out=out,
                                      keepdims=keepdims, initial=initial, where_=where,
                                      **options)
    return reduce


def _binary(func: Callable[..., Any], identity: Any, **methods: Any) -> ufunc:
    return ufunc(func, 2, 1, name=func.__name__, call=func, identity=identity, **methods)


add = _binary(_ufuncs.add, 0, reduce=_reductions.sum, accumulate=_reductions.cumsum,
              at=_add_at)
multiply = _binary(_ufuncs.multiply, 1, reduce=_reductions.prod,
                   accumulate=_reductions.cumprod, at=_multiply_at)
subtract = _binary(_ufuncs.subtract, None, at=_subtract_at)
maximum = _binary(_ufuncs.maximum, None,
                  reduce=_reducer("max", "max", -np.inf, has_identity=False))
minimum = _binary(_ufuncs.minimum, None,
                  reduce=_reducer("min", "min", np.inf, has_identity=False))
bitwise_and = _binary(_ufuncs.bitwise_and, -1, reduce=_reducer(
    "reduce_bitwise_and", "and", None, preproc=_require_integer))
bitwise_or = _binary(_ufuncs.bitwise_or, 0, reduce=_reducer(
    "reduce_bitwise_or", "or", None, preproc=_require_integer))
bitwise_xor = _binary(_ufuncs.bitwise_xor, 0, reduce=_reducer(
    "reduce_bitwise_xor", "xor", None, preproc=_require_integer))
logical_and = _binary(_ufuncs.logical_and, True, reduce=_reducer(
    "reduce_logical_and", "and", True, preproc=_reductions._cast_to_bool))
logical_or = _binary(_ufuncs.logical_or, False, reduce=_reducer(
    "reduce_logical_or", "or", False, preproc=_reductions._cast_to_bool))
logical_xor = _binary(_ufuncs.logical_xor, False, reduce=_reducer(
    "reduce_logical_xor", "xor", False, preproc=_reductions._cast_to_bool))
logaddexp = _binary(_ufuncs.logaddexp, -np.inf)
logaddexp2 = _binary(_ufuncs.logaddexp2, -np.inf)
negative = ufunc(_ufuncs.negative, 1, 1, name="negative", call=_ufuncs.negative)

__all__ += ["add", "bitwise_and", "bitwise_or", "bitwise_xor", "logaddexp", "logaddexp2",
            "logical_and", "logical_or", "logical_xor", "maximum", "minimum", "multiply",
            "negative", "subtract"]
