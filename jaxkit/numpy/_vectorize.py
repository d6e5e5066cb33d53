"""``jnp.vectorize`` (NumPy's generalized-ufunc signatures) and ``jnp.apply_along_axis``,
both as nested ``vmap``s. ``_vmap_api`` depends only on the core and the batching
interpreter, so using it here keeps the imports one-way."""
from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np

from jaxkit.transforms.vmap import vmap
from jaxkit.numpy._creation import asarray
from jaxkit.numpy._promotion import (broadcast_shapes, canonicalize_axis, check_arraylike,
                                     ensure_arraylike)
from jaxkit.numpy._shape import expand_dims, squeeze
from jaxkit.runtime.array import Array
from jaxkit.typing import ArrayLike

_DIMENSION_NAME = r"\w+"
_CORE_DIMENSION_LIST = f"(?:{_DIMENSION_NAME}(?:,{_DIMENSION_NAME})*)?"
_ARGUMENT = rf"\({_CORE_DIMENSION_LIST}\)"
_ARGUMENT_LIST = f"{_ARGUMENT}(?:,{_ARGUMENT})*"
_SIGNATURE = f"^{_ARGUMENT_LIST}->{_ARGUMENT_LIST}$"

CoreDims = tuple[str, ...]


def _parse_gufunc_signature(signature: str) -> tuple[list[CoreDims], list[CoreDims]]:
    if not re.match(_SIGNATURE, signature):
        raise ValueError(f"not a valid gufunc signature: {signature}")
    args, retvals = ([tuple(re.findall(_DIMENSION_NAME, arg))
                      for arg in re.findall(_ARGUMENT, arg_list)]
                     for arg_list in signature.split("->"))
    return args, retvals


def _update_dim_sizes(dim_sizes: dict[str, int], shape: tuple[int, ...], core_dims: CoreDims,
                      error_context: str, *, is_input: bool) -> None:
    n = len(core_dims)
    if is_input and len(shape) < n:
        raise ValueError(f"input with shape {shape!r} does not have enough dimensions for all "
                         f"core dimensions {core_dims!r} {error_context}")
    if not is_input and len(shape) != n:
        raise ValueError(f"output shape {shape!r} does not match core dimensions "
                         f"{core_dims!r} {error_context}")
    core_shape = shape[-n:] if core_dims else ()
    for dim, size in zip(core_dims, core_shape):
        if dim not in dim_sizes:
            dim_sizes[dim] = size
        elif size != dim_sizes[dim]:
            raise ValueError(f"inconsistent size for core dimension {dim!r}: {size!r} vs "
                             f"{dim_sizes[dim]!r} {error_context}")


def _check_output_dims(func: Callable, dim_sizes: dict[str, int],
                       expected: list[CoreDims], error_context: str) -> Callable:
    def wrapped(*args):
        out = func(*args)
        shapes = [np.shape(o) for o in (out if isinstance(out, tuple) else [out])]
        if len(expected) > 1 and not isinstance(out, tuple):
            raise TypeError(f"output must be a tuple when multiple outputs are expected, got: "
                            f"{out!r}\n{error_context}")
        if len(shapes) != len(expected):
            raise TypeError(f"wrong number of output arguments: expected {len(expected)!r}, "
                            f"got {len(shapes)!r} {error_context}")
        sizes = dict(dim_sizes)
        for shape, core_dims in zip(shapes, expected):
            _update_dim_sizes(sizes, shape, core_dims, error_context, is_input=False)
        return out
    return wrapped


def _apply_excluded(func: Callable, excluded: Collection[int | str], args: Sequence[Any],
                    kwargs: dict[str, Any]) -> tuple[Callable, list, dict]:
    if not excluded:
        return func, list(args), kwargs
    dynamic_args = [a for i, a in enumerate(args) if i not in excluded]
    dynamic_kwargs = {k: v for k, v in kwargs.items() if k not in excluded}
    static_args = [(i, args[i]) for i in sorted(e for e in excluded if isinstance(e, int))
                   if i < len(args)]
    static_kwargs = {k: v for k, v in kwargs.items() if k in excluded}

    def new_func(*a, **kw):
        a = list(a)
        for i, arg in static_args:
            a.insert(i, arg)
        return func(*a, **kw, **static_kwargs)

    return new_func, dynamic_args, dynamic_kwargs


def vectorize(pyfunc: Callable, *, excluded: Collection[int | str] = frozenset(),
              signature: str | None = None) -> Callable:
    """``jnp.vectorize``: ``pyfunc`` mapped over the leading (non-core) axes of its
    arguments with NumPy's broadcasting, by ``vmap``."""
    if any(not isinstance(e, (str, int)) for e in excluded):
        raise TypeError("jax.numpy.vectorize can only exclude integer or string arguments, "
                        f"but excluded={excluded!r}")
    if any(isinstance(e, int) and e < 0 for e in excluded):
        raise ValueError(f"excluded={excluded!r} contains negative numbers")

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        context = f"on vectorized function with excluded={excluded!r} and " \
                  f"signature={signature!r}"
        func, args, kwargs = _apply_excluded(pyfunc, excluded, args, kwargs)
        if signature is not None:
            in_core, out_core = _parse_gufunc_signature(signature)
        else:
            in_core, out_core = [()] * len(args), None
        none_args = {i for i, a in enumerate(args) if a is None}
        if none_args:
            if any(in_core[i] != () for i in none_args):
                raise ValueError(f"Cannot pass None at locations {none_args} with "
                                 f"signature={signature!r}")
            func, args, _ = _apply_excluded(func, none_args, args, {})
            in_core = [d for i, d in enumerate(in_core) if i not in none_args]
        args = [asarray(a) for a in args]
        if len(args) != len(in_core):
            raise TypeError(f"wrong number of positional arguments: expected {len(in_core)!r},"
                            f" got {len(args)!r} {context}")
        dim_sizes: dict[str, int] = {}
        shapes = []
        for arg, core in zip(args, in_core):
            _update_dim_sizes(dim_sizes, arg.shape, core, context, is_input=True)
            shapes.append(arg.shape[:arg.ndim - len(core)])
        bshape = broadcast_shapes(*shapes)
        checked = func if out_core is None else _check_output_dims(func, dim_sizes, out_core,
                                                                   context)
        squeezed, rev_shapes = [], []
        for arg, core in zip(args, in_core):
            noncore = arg.shape[:arg.ndim - len(core)]
            filled = (len(bshape) - len(noncore)) * (1,) + noncore
            rev_shapes.append(filled[::-1])
            squeezed.append(squeeze(arg, tuple(i for i, s in enumerate(noncore) if s == 1)))
        fn = checked
        dims_to_expand = []
        for negdim, sizes in enumerate(zip(*rev_shapes)):
            in_axes = tuple(None if s == 1 else 0 for s in sizes)
            if all(ax is None for ax in in_axes):
                dims_to_expand.append(len(bshape) - 1 - negdim)
            else:
                fn = vmap(fn, in_axes)
        result = fn(*squeezed)
        if not dims_to_expand:
            return result
        if isinstance(result, tuple):
            return tuple(expand_dims(r, dims_to_expand) for r in result)
        return expand_dims(result, dims_to_expand)

    return wrapped


def apply_along_axis(func1d: Callable, axis: int, arr: Any, *args: Any, **kwargs: Any) -> Any:
    """``jnp.apply_along_axis``: ``func1d`` applied to the 1-D slices along ``axis``."""
    check_arraylike("apply_along_axis", arr)
    ndim = np.ndim(arr)
    axis = canonicalize_axis(axis, ndim)

    def func(a):
        return func1d(a, *args, **kwargs)

    for i in range(1, ndim - axis):
        func = vmap(func, in_axes=i, out_axes=-1)
    for _ in range(axis):
        func = vmap(func, in_axes=0, out_axes=0)
    return func(arr)


def apply_over_axes(func: Callable, a: ArrayLike, axes: Sequence[int]) -> Array:
    """``jnp.apply_over_axes``: ``func(a, axis)`` repeatedly, keeping the dimensions."""
    arr = ensure_arraylike("apply_over_axes", a)
    for axis in axes:
        b = func(arr, axis)
        if b.ndim == arr.ndim:
            arr = b
        elif b.ndim == arr.ndim - 1:
            arr = expand_dims(b, axis)
        else:
            raise ValueError("function is not returning an array of the correct shape")
    return arr
