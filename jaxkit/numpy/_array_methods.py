"""Operators and NumPy-style methods of jaxkit arrays and tracers.

``install()`` sets the same functions on ``jaxkit.Array`` and ``core.Tracer`` (one table, one
mechanism), so that ``x + 1``, ``x.sum()``, ``x[1:]`` and ``x.at[i].set(v)`` behave alike
eagerly and under every transformation. Binary operators return ``NotImplemented`` for
operands they do not know (so that other types can take over) and refuse lists and tuples,
as JAX does.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.runtime.array import Array
from jaxkit.numpy import (
    _array_api,
    _creation,
    _index_tricks,
    _index_update,
    _indexing,
    _contractions,
    _elementwise,
    _reductions,
    _shape,
    _sorting,
    _take,
    _ufuncs,
)
from jaxkit.numpy._promotion import is_extended_value

_accepted_binop_types = (int, float, complex, np.generic, np.ndarray, Array, core.Tracer)
_rejected_binop_types = (list, tuple, set, dict)


def _defer_to_unrecognized_arg(opchar: str, binary_op: Callable, swap: bool = False
                               ) -> Callable:
    # The jnp functions behind the operators are jitted (``_jitted``): outside any
    # transformation ``x + y`` takes jit's cached fast path; under one it is traced inline.
    def deferring_binary_op(self, other):
        if not isinstance(other, _accepted_binop_types) and not is_extended_value(other):
            if hasattr(other, "__jax_array__"):
                other = other.__jax_array__()
            if not isinstance(other, _accepted_binop_types):
                if isinstance(other, _rejected_binop_types):
                    args = (other, self) if swap else (self, other)
                    raise TypeError(f"unsupported operand type(s) for {opchar}: "
                                    f"{type(args[0]).__name__!r} and "
                                    f"{type(args[1]).__name__!r}")
                return NotImplemented
        return binary_op(other, self) if swap else binary_op(self, other)

    return deferring_binary_op


def _rpow(x: Any, y: Any) -> Any:
    return _ufuncs.power(x, y)


def _divmod(x: Any, y: Any) -> Any:
    return _ufuncs.divmod(x, y)


_binary_ops: dict[str, tuple[str, Callable]] = {
    "add": ("+", _ufuncs.add), "sub": ("-", _ufuncs.subtract),
    "mul": ("*", _ufuncs.multiply), "truediv": ("/", _ufuncs.true_divide),
    "floordiv": ("//", _ufuncs.floor_divide), "mod": ("%", _ufuncs.remainder),
    "divmod": ("divmod()", _divmod), "matmul": ("@", _contractions.matmul),
    "and": ("&", _ufuncs.bitwise_and), "or": ("|", _ufuncs.bitwise_or),
    "xor": ("^", _ufuncs.bitwise_xor), "lshift": ("<<", _ufuncs.left_shift),
    "rshift": (">>", _ufuncs.right_shift),
}
_comparisons: dict[str, tuple[str, Callable]] = {
    "eq": ("==", _ufuncs.equal), "ne": ("!=", _ufuncs.not_equal),
    "lt": ("<", _ufuncs.less), "le": ("<=", _ufuncs.less_equal),
    "gt": (">", _ufuncs.greater), "ge": (">=", _ufuncs.greater_equal),
}


# ---- methods ---------------------------------------------------------------------------------
def _reshape(self, *args: Any, order: str = "C", shape: Any = None, copy: Any = None,
             out_sharding: Any = None) -> Any:
    """``a.reshape(2, 3)`` or ``a.reshape((2, 3))``."""
    if shape is None:
        shape = args[0] if len(args) == 1 else args
    return _shape.reshape(self, shape, order=order, out_sharding=out_sharding)


def _transpose(self, *args: Any) -> Any:
    """``a.transpose()``, ``a.transpose(1, 0)`` or ``a.transpose((1, 0))``."""
    if not args or args == (None,):
        axes = None
    elif len(args) == 1 and isinstance(args[0], (tuple, list)):
        axes = args[0]
    else:
        axes = args
    return _shape.transpose(self, axes)


def _astype(self, dtype: Any, copy: bool = False, device: Any = None) -> Any:
    return _elementwise.astype(self, dtype, copy=copy, device=device)


def _view(self, dtype: Any = None, type: Any = None) -> Any:
    """``a.view(dtype)``: reinterpret the bits (a bitcast; the last axis is rescaled)."""
    if type is not None:
        raise NotImplementedError("`type` argument of array.view() is not supported.")
    if dtype is None:
        return self
    dt_in = self.dtype
    dt_out = dtypes.check_and_canonicalize_user_dtype(dtype, "view")
    if dt_in == dt_out:
        return self
    arr = self
    if dt_in == np.bool_:
        arr = lax.convert_element_type(arr, np.uint8)
        dt_in = np.dtype(np.uint8)
    target = np.dtype(np.uint8) if dt_out == np.bool_ else dt_out
    if arr.ndim == 0 and dt_in.itemsize != target.itemsize:
        raise ValueError("view() of a 0-d array changes the element size")
    if dt_in.itemsize == target.itemsize:
        out = lax.bitcast_convert_type(arr, target)
    elif dt_in.itemsize > target.itemsize:
        out = lax.bitcast_convert_type(arr, target)
        out = lax.reshape(out, (*arr.shape[:-1], arr.shape[-1] * out.shape[-1]))
    else:
        ratio = target.itemsize // dt_in.itemsize
        if arr.shape[-1] % ratio:
            raise ValueError("When changing to a larger dtype, its size must be a divisor of "
                             "the total size in bytes of the last axis of the array.")
        arr = lax.reshape(arr, (*arr.shape[:-1], arr.shape[-1] // ratio, ratio))
        out = lax.bitcast_convert_type(arr, target)
    if dt_out == np.bool_:
        out = lax.convert_element_type(out, np.bool_)
    return out


def _flatten(self, order: str = "C", *, out_sharding: Any = None) -> Any:
    return _shape.ravel(self, order, out_sharding=out_sharding)


def _squeeze(self, axis: Any = None) -> Any:
    return _shape.squeeze(self, axis)


def _swapaxes(self, axis1: int, axis2: int) -> Any:
    return _shape.swapaxes(self, axis1, axis2)


def _conj(self) -> Any:
    return _ufuncs.conjugate(self)


def _copy(self) -> Any:
    return _creation.copy(self)


def _getitem(self, idx: Any) -> Any:
    return _indexing.getitem(self, idx)


def _at(self) -> _index_update._IndexUpdateHelper:
    return _index_update._IndexUpdateHelper(self)


def _transpose_property(self) -> Any:
    return _shape.transpose(self)


def _matrix_transpose_property(self) -> Any:
    return _shape.matrix_transpose(self)


def _real_property(self) -> Any:
    return _ufuncs.real(self)


def _imag_property(self) -> Any:
    return _ufuncs.imag(self)


def _nonzero(self, *, size: int | None = None, fill_value: Any = None) -> Any:
    return _sorting.nonzero(self, size=size, fill_value=fill_value)


def _round(self, decimals: int = 0, out: None = None) -> Any:
    return _elementwise.round(self, decimals, out)


def _clip(self, min: Any = None, max: Any = None) -> Any:
    return _elementwise.clip(self, min=min, max=max)  # keywords, as JAX (jit orders them)


def _dot(self, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    return _contractions.dot(self, b, precision=precision,
                             preferred_element_type=preferred_element_type)


def _len_hint(self) -> int:
    return self.shape[0] if self.shape else 0


def _round_dunder(self, ndigits: int | None = None) -> Any:
    # As JAX: an array of any shape (traced too), integer like builtin round(7.5) when
    # ``ndigits`` is None, rather than a Python int that only a 0-d array could give.
    if ndigits is None:
        return _elementwise.round(self, 0).astype(int)
    return _elementwise.round(self, ndigits)


def _byteswap(self, inplace: bool = False) -> Any:
    """The bytes of each element reversed (as ``np.ndarray.byteswap``)."""
    if inplace:
        raise ValueError("Inplace byteswapping not supported.")
    if self.dtype.itemsize == 1:
        return self
    as_bytes = lax.bitcast_convert_type(self, np.uint8)
    return lax.bitcast_convert_type(lax.rev(as_bytes, (as_bytes.ndim - 1,)), self.dtype)


def _flat(self) -> Any:
    raise NotImplementedError("JAX Arrays do not implement the arr.flat property: consider "
                              "arr.flatten() instead.")


_methods: dict[str, Callable] = {
    "byteswap": _byteswap,
    "choose": lambda self, choices, out=None, mode="raise": _index_tricks.choose(
        self, choices, out=out, mode=mode),
    "all": _reductions.all, "any": _reductions.any, "argmax": _reductions.argmax,
    "argmin": _reductions.argmin, "argpartition": _sorting.argpartition,
    "argsort": _sorting.argsort, "astype": _astype, "clip": _clip,
    "compress": lambda self, condition, axis=None, **kw: _sorting.compress(
        condition, self, axis, **kw),
    "conj": _conj, "conjugate": _conj, "copy": _copy, "cumprod": _reductions.cumprod,
    "cumsum": _reductions.cumsum, "diagonal": _contractions.diagonal, "dot": _dot,
    "flatten": _flatten, "max": _reductions.max, "mean": _reductions.mean,
    "min": _reductions.min, "nonzero": _nonzero, "prod": _reductions.prod,
    "ptp": _reductions.ptp, "ravel": _shape.ravel, "repeat": _shape.repeat,
    "reshape": _reshape, "round": _round, "searchsorted": _sorting.searchsorted,
    "sort": _sorting.sort, "squeeze": _squeeze, "std": _reductions.std, "sum": _reductions.sum,
    "swapaxes": _swapaxes, "take": _take.take, "trace": _contractions.trace,
    "transpose": _transpose, "var": _reductions.var, "view": _view,
    "__getitem__": _getitem, "__round__": _round_dunder, "__length_hint__": _len_hint,
    "__contains__": _array_api.contains, "__array_namespace__": _array_api.array_namespace,
    "__array_module__": _array_api.array_module,
}
_properties: dict[str, Callable] = {
    "T": _transpose_property, "mT": _matrix_transpose_property, "real": _real_property,
    "imag": _imag_property, "at": _at, "flat": _flat,
}


_ITER_CHUNK = 100


def _array_iter(self: Array) -> Any:
    """``iter(array)``: the rows, sliced out by one jitted ``unstack`` per chunk of 100 rows
    (as JAX does) rather than one indexing operation per row."""
    if not self.shape:
        raise TypeError("iteration over a 0-d array")
    n = self.shape[0]
    if n <= _ITER_CHUNK:
        return iter(_shape.unstack(self))
    return (row for start in range(0, n, _ITER_CHUNK)
            for row in _shape.unstack(lax.dynamic_slice_in_dim(
                self, start, min(_ITER_CHUNK, n - start))))


def _unary(fn: Callable) -> Callable:
    def op(self):
        return fn(self)
    return op


def install_operators(cls: type) -> None:
    """Set the Python operators on ``cls``: the jnp functions, whose type rules accept or
    refuse the operands (a key array class gets these alone, as in JAX: ``==`` compares
    keys, ``+`` raises JAX's TypeError)."""
    for name, (opchar, fn) in _binary_ops.items():
        setattr(cls, f"__{name}__", _defer_to_unrecognized_arg(opchar, fn))
        setattr(cls, f"__r{name}__", _defer_to_unrecognized_arg(opchar, fn, swap=True))
    cls.__pow__ = lambda self, other, mod=None: _pow_deferred(self, other, mod)
    cls.__rpow__ = _defer_to_unrecognized_arg("**", _rpow, swap=True)
    for name, (opchar, fn) in _comparisons.items():
        setattr(cls, f"__{name}__", _defer_to_unrecognized_arg(opchar, fn))
    cls.__neg__ = _unary(_ufuncs.negative)
    cls.__pos__ = _unary(_ufuncs.positive)
    cls.__abs__ = _unary(_ufuncs.absolute)
    cls.__invert__ = _unary(_ufuncs.invert)


def install(classes: tuple[type, ...] = (Array, core.Tracer)) -> None:
    """Set the operators, methods and properties on ``classes``."""
    for cls in classes:
        install_operators(cls)
        for name, fn in _methods.items():
            setattr(cls, name, fn)
        for name, fn in _properties.items():
            setattr(cls, name, property(fn))
    if Array in classes:
        Array.__iter__ = _array_iter  # (tracers: core.Tracer.__iter__, lax's index_in_dim)


def _pow_deferred(self: Any, other: Any, mod: Any = None) -> Any:
    if mod is not None:
        raise NotImplementedError("The 'mod' argument of pow() is not supported.")
    return _defer_to_unrecognized_arg("**", _ufuncs.power)(self, other)
