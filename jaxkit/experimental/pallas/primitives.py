"""The operations a Pallas kernel uses besides ref indexing: where the kernel instance is in
the grid (``program_id``, ``num_programs``), hints (``multiple_of``), printing, and the
helpers ``when``, ``loop``, ``cdiv``, ``dot``.

``program_id`` is a primitive that stays in the kernel's jaxpr (printed as JAX prints it);
interpret mode replaces it by the loop's grid index. ``num_programs`` of a static grid is
known while the kernel is traced, so it is a Python int there (as JAX folds it).
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from jaxkit import core, debug, dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.interpreters import ad, mlir

__all__ = ["align_to", "cdiv", "debug_print", "dot", "loop", "multiple_of", "next_power_of_2",
           "num_programs", "program_id", "reciprocal", "strides_from_shape", "when"]

# The grid of the kernel being traced (None outside pallas_call's tracing of a kernel).
_kernel_grid: contextvars.ContextVar[tuple | None] = contextvars.ContextVar(
    "pallas_kernel_grid", default=None)


@contextlib.contextmanager
def kernel_grid(grid: tuple[int, ...]) -> Iterator[None]:
    """Within: a kernel over ``grid`` is being traced (``num_programs`` reads it)."""
    token = _kernel_grid.set(tuple(grid))
    try:
        yield
    finally:
        _kernel_grid.reset(token)


# The grid of an inner pipeline (``pltpu.emit_pipeline``) whose body is being traced: pairs
# (index, size) per axis, which program_id/num_programs give inside it, as JAX's grid_env.
_pipeline_grid: contextvars.ContextVar[tuple | None] = contextvars.ContextVar(
    "pallas_pipeline_grid", default=None)


@contextlib.contextmanager
def pipeline_grid(axes: Sequence[tuple[Any, Any]]) -> Iterator[None]:
    """Within: ``program_id(k)``/``num_programs(k)`` are ``axes[k]`` (index, size)."""
    token = _pipeline_grid.set(tuple(axes))
    try:
        yield
    finally:
        _pipeline_grid.reset(token)


def _grid_axis_size(axis: int, what: str) -> int:
    grid = _kernel_grid.get()
    if grid is None:
        raise ValueError(f"pl.{what} can only be called inside a Pallas kernel (the kernel "
                         "function given to pl.pallas_call).")
    if not -len(grid) <= axis < len(grid):
        raise ValueError(f"pl.{what}({axis}): the kernel's grid {grid} has {len(grid)} "
                         f"axes; use an axis in range({len(grid)}).")
    return grid[axis]


def program_id(axis: int) -> Any:
    """The index of the current kernel instance along grid axis ``axis`` (an ``int32``)."""
    if (env := _pipeline_grid.get()) is not None:
        return env[axis][0]
    _grid_axis_size(axis, "program_id")
    return program_id_p.bind(axis=axis)


program_id_p = core.Primitive("program_id")
program_id_p.def_abstract_eval(lambda **_: core.ShapedArray((), np.dtype(np.int32)))


def num_programs(axis: int) -> int:
    """The size of the grid along ``axis`` (a Python int: jaxkit's grids are static)."""
    if (env := _pipeline_grid.get()) is not None:
        return env[axis][1]
    return _grid_axis_size(axis, "num_programs")


def multiple_of(x: Any, values: Sequence[int] | int) -> Any:
    """``x``, with the promise that it is a multiple of ``values`` (a compiler hint)."""
    values = (values,) if isinstance(values, int) else tuple(values)
    return multiple_of_p.bind(x, values=values)


multiple_of_p = core.Primitive("multiple_of")
multiple_of_p.def_abstract_eval(lambda aval, **_: aval)
multiple_of_p.def_impl(lambda x, **_: x)
ad.deflinear(multiple_of_p, lambda ct, x, **params: [ct])
mlir.register_lowering(multiple_of_p, lambda ctx, x, **_: [x])


def debug_print(fmt: str, *args: Any) -> None:
    """Print from inside a kernel (as ``jax.debug.print``; interpret mode prints once per
    kernel instance)."""
    debug.print(fmt, *args, skip_format_check=True)


def when(condition: Any, /) -> Callable[[Callable[[], None]], None]:
    """Decorator: call the function when ``condition`` holds (a ``lax.cond`` for an array
    condition, a plain ``if`` for a Python bool)."""
    def wrapped(f):
        if isinstance(condition, bool):
            if condition:
                f()
        else:
            lax.cond(condition, f, lambda: None)
    return wrapped


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def cdiv(a: Any, b: Any) -> Any:
    """Ceiling division, for ints and integer arrays."""
    if _is_int(a) and _is_int(b):
        return (a + b - 1) // b
    return lax.div(a + (b - 1), b)


def align_to(a: Any, alignment: Any) -> Any:
    """``a`` rounded up to a multiple of ``alignment``."""
    return cdiv(a, alignment) * alignment


def next_power_of_2(x: int) -> int:
    """The least power of two ``>= x``."""
    if x < 0:
        raise ValueError("`next_power_of_2` requires a non-negative integer.")
    return 1 if x == 0 else 2 ** (x - 1).bit_length()


def strides_from_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides, in elements, of an array of ``shape``."""
    size = int(np.prod(shape))
    strides = []
    for n in shape:
        size //= n
        strides.append(size)
    return tuple(strides)


def reciprocal(x: Any, *, approx: bool = False, full_range: bool = True) -> Any:
    """``1 / x`` (TPUs may approximate it with ``approx=True``; interpret mode is exact)."""
    return lax.div(lax.full_like(x, 1), x)


def loop(lower: Any, upper: Any, *, init_carry: Any = None, step: Any = 1,
         unroll: int | bool | None = None) -> Callable:
    """Decorator running ``body(i)`` (or ``carry = body(i, carry)``) for ``i`` from ``lower``
    to ``upper`` by ``step``, as a ``fori_loop``; returns the final carry."""
    if not all(not isinstance(v, core.Tracer) for v in (lower, upper, step)):
        idx_type = dtypes.result_type(lower, upper, step)
        lower, upper, step = (lax.convert_element_type(v, idx_type)
                              for v in (lower, upper, step))
        zero = jnp.array(0, dtype=idx_type)
    else:
        zero = 0

    def decorator(body):
        if init_carry is None:
            def body_fn(idx, _):
                body(lower + idx * step)
        else:
            def body_fn(idx, carry):
                return body(lower + idx * step, carry)
        return lax.fori_loop(zero, cdiv(upper - lower, step), body_fn, init_carry,
                             unroll=unroll)
    return decorator


def _small_to_promotable(dtype):
    if dtype == np.dtype(dtypes.int4):
        return np.dtype(np.int8)
    return dtype


def dot(a: Any, b: Any, trans_a: bool = False, trans_b: bool = False,
        allow_tf32: bool | None = None, precision: Any = None) -> Any:
    """Matrix product of 2-D ``a`` and ``b`` (either transposed first), accumulated in
    ``float32`` (``int32`` for integers, ``float64`` for doubles)."""
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError("`a` and `b` must be 2D arrays.")
    if allow_tf32 is not None:
        if precision is not None:
            raise ValueError("Only one of allow_tf32 and precision can be specified")
        precision = lax.Precision.HIGH if allow_tf32 else lax.Precision.HIGHEST
    dtype = dtypes.promote_types(_small_to_promotable(a.dtype), _small_to_promotable(b.dtype))
    if dtypes.issubdtype(dtype, np.integer):
        out_dtype = np.dtype(np.int32)
    elif dtype == np.dtype(np.float64):
        out_dtype = dtype
    else:
        out_dtype = np.dtype(np.float32)
    dims = (((0 if trans_a else 1,), (1 if trans_b else 0,)), ((), ()))
    return lax.dot_general(a, b, dims, precision=precision, preferred_element_type=out_dtype)
