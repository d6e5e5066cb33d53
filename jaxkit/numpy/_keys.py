"""``jnp`` functions on typed PRNG key arrays (``jax.random.key``), as JAX 0.10.2 allows them:
the shape and structure functions (``stack``, ``concatenate``, ``reshape``, ``where``,
``broadcast_to``, ``take``, ...) give key arrays, the comparisons compare whole keys, and
anything else (arithmetic, reductions) is refused with a TypeError naming the key dtype.

Key arrays (concrete ``PRNGKeyArray``s and tracers of dtype ``key<fry>``) are recognised by
their extended dtype; ``jaxkit.random`` registers how to get their ``uint32`` data (of shape
``S + (2,)`` for keys of shape ``S``) and wrap it back (``register_key_functions``). A
structural function applied to keys is that same function mapped with ``vmap`` over the
trailing key-word axis of the data: the function sees each word as an array of the keys' own
shape, so its axis and shape arguments mean what they mean for the keys, and its
outputs get the word axis back. One mechanism covers every structural function, with no
per-function axis arithmetic.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from jaxkit import dtypes, tree_util
from jaxkit.numpy._promotion import asarray
from jaxkit.numpy._reductions import all as _all
from jaxkit.numpy._reductions import any as _any
from jaxkit.numpy._shape import stack as _stack
from jaxkit.numpy._ufuncs import equal as _equal
from jaxkit.numpy._ufuncs import not_equal as _not_equal
from jaxkit.transforms.vmap import vmap

__all__ = ["KEY_STRUCTURAL", "install", "register_key_functions"]

# The key data of a key array, and a key array over data (set by jaxkit.random).
_key_functions: dict[str, Callable[[Any], Any]] = {}


def register_key_functions(*, data: Callable[[Any], Any], wrap: Callable[[Any], Any]) -> None:
    """Let ``jnp`` functions take key arrays (values of an extended dtype): ``data(x)`` is the
    ``uint32[..., 2]`` data of one (``random_unwrap``), ``wrap(d)`` key arrays over such data
    (``random_wrap``). Keys live above ``jnp``, so ``jaxkit.random`` registers these."""
    _key_functions.update(data=data, wrap=wrap)


def _is_key(x: Any) -> bool:
    return dtypes.is_extended(getattr(x, "dtype", None))


def _data(x: Any) -> Any:
    return _key_functions["data"](x)


def _wrap_like(key: Any, d: Any) -> Any:
    return _key_functions["wrap"](d)


def _dtype_name(x: Any) -> str:
    return str(x.dtype) if hasattr(x, "dtype") else str(asarray(x).dtype)


# Which arguments of a structural function are its array operands: "seq" (argument 0 is a
# sequence of arrays), "all" (every positional argument), or a tuple of positions. The other
# arguments (axes, shapes, indices, a where condition) are passed through unmapped.
KEY_STRUCTURAL: dict[str, Any] = {
    **dict.fromkeys(("stack", "concatenate", "vstack", "hstack", "dstack", "column_stack"),
                    "seq"),
    **dict.fromkeys(("atleast_1d", "atleast_2d", "atleast_3d"), "all"),
    **dict.fromkeys(("reshape", "ravel", "broadcast_to", "expand_dims", "squeeze", "transpose",
                     "swapaxes", "moveaxis", "flip", "fliplr", "flipud", "rot90", "tile",
                     "repeat", "roll", "split", "array_split", "copy", "take", "zeros_like",
                     "ones_like", "full_like", "empty_like", "asarray", "array"), (0,)),
    "where": (1, 2),
}


def _operands(spec: Any, args: tuple) -> list:
    if spec == "seq":
        return list(args[0]) if args and isinstance(args[0], (list, tuple)) else []
    if spec == "all":
        return list(args)
    return [args[i] for i in spec if i < len(args)]


def _on_keys(fn: Callable, spec: Any, args: tuple, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)`` with key operands: mapped over the key words of their data."""
    operands = _operands(spec, args)
    if not all(map(_is_key, operands)):
        key = next(filter(_is_key, operands))
        raise ValueError(f"dtype={key.dtype} is not a valid dtype for JAX type promotion.")
    like = operands[0]

    def on_words(*words):
        if spec == "seq":
            new_args = (type(args[0])(words), *args[1:])
        elif spec == "all":
            new_args = words
        else:
            new_args = list(args)
            for i, w in zip([i for i in spec if i < len(args)], words):
                new_args[i] = w
        return fn(*new_args, **kwargs)

    out = vmap(on_words, in_axes=-1, out_axes=-1)(*map(_data, operands))
    return tree_util.tree_map(lambda d: _wrap_like(like, d), out)


def _structural(fn: Callable, spec: Any) -> Callable:
    @functools.wraps(fn)
    def accepting_keys(*args, **kwargs):
        if args and fn.__name__ in ("asarray", "array"):
            if _is_key(args[0]):
                return args[0] if fn.__name__ == "asarray" else args[0].copy()
            if isinstance(args[0], (list, tuple)) and any(map(_is_key, args[0])):
                return _on_keys(_stack_of, "seq", args[:1], {})  # a list of keys stacks
        if args and (any(map(_is_key, _operands(spec, args)))):
            if fn.__name__ == "broadcast_to":
                _check_broadcast(args[0], *args[1:], **kwargs)
            return _on_keys(fn, spec, args, kwargs)
        return fn(*args, **kwargs)
    return accepting_keys


def _stack_of(arrays):
    return _stack(arrays)


def _check_broadcast(array: Any, shape: Any) -> None:
    """``broadcast_to``'s error names the key type, not the type of one key word."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    lead = len(shape) - array.ndim
    if lead < 0 or any(d != 1 and d != shape[lead + i] for i, d in enumerate(array.shape)):
        raise ValueError(f"Incompatible types for broadcasting: input type={array.dtype}"
                         f"[{','.join(map(str, array.shape))}] and requested type="
                         f"{array.dtype}[{','.join(map(str, shape))}]")


def _key_pair(name: str, a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are both keys; JAX's TypeError when only one is."""
    ka, kb = _is_key(a), _is_key(b)
    if ka != kb:
        raise TypeError(f"{name} does not accept dtypes {_dtype_name(a)}, {_dtype_name(b)}.")
    return ka


def _comparison(fn: Callable, name: str, word_op: Callable, combine: Callable) -> Callable:
    """Key comparisons compare whole keys: ``combine`` over the words of ``word_op``."""
    @functools.wraps(fn)
    def accepting_keys(a, b, *args, **kwargs):
        if (_is_key(a) or _is_key(b)) and _key_pair(name, a, b):
            return combine(word_op(_data(a), _data(b)), axis=-1)
        return fn(a, b, *args, **kwargs)
    return accepting_keys


def _array_equal(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def accepting_keys(a1, a2, *args, **kwargs):
        if (_is_key(a1) or _is_key(a2)) and _key_pair("equal", a1, a2):
            if a1.shape != a2.shape:
                return asarray(False)
            return _all(_equal(_data(a1), _data(a2)))
        return fn(a1, a2, *args, **kwargs)
    return accepting_keys


def _isfinite(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def accepting_keys(x, *args, **kwargs):
        if _is_key(x):  # keys are never infinite or NaN
            return _all(_equal(_data(x), _data(x)), axis=-1)
        return fn(x, *args, **kwargs)
    return accepting_keys


def _astype(fn: Callable) -> Callable:
    """A key array converts to its own key dtype only (Optax maps ``astype(where(...),
    x.dtype)`` over states that hold keys); any other dtype is JAX's ValueError."""
    @functools.wraps(fn)
    def accepting_keys(x, dtype, *args, **kwargs):
        if _is_key(x):
            if dtype == x.dtype:
                return x
            name = dtype.__name__ if isinstance(dtype, type) else str(dtype)
            raise ValueError(f"Cannot convert_element_type from {x.dtype} to {name}")
        return fn(x, dtype, *args, **kwargs)
    return accepting_keys


def _size(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def accepting_keys(a, axis=None):
        if _is_key(a):
            return a.size if axis is None else a.shape[axis]
        return fn(a, axis)
    return accepting_keys


def install(namespace: dict) -> None:
    """Make the ``jnp`` functions of ``namespace`` (the ``jaxkit.numpy`` module's) take keys."""
    for name, spec in KEY_STRUCTURAL.items():
        namespace[name] = _structural(namespace[name], spec)
    namespace["equal"] = _comparison(namespace["equal"], "equal", _equal, _all)
    namespace["not_equal"] = _comparison(namespace["not_equal"], "not_equal", _not_equal, _any)
    namespace["isclose"] = _comparison(namespace["isclose"], "equal", _equal, _all)
    namespace["allclose"] = _array_equal(namespace["allclose"])
    namespace["array_equal"] = _array_equal(namespace["array_equal"])
    namespace["isfinite"] = _isfinite(namespace["isfinite"])
    namespace["size"] = _size(namespace["size"])
    namespace["astype"] = _astype(namespace["astype"])
