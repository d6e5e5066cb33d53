"""Argument handling shared by every ``jaxkit.numpy`` function: checking array-likes, NumPy
dtype promotion (weak-type aware, through ``dtypes.lattice_result_type``, as JAX's jnp) and
NumPy broadcasting.

A jnp function promotes dtypes and broadcasts shapes here, then calls ``jaxkit.lax``. Python
scalars are kept as Python scalars for as long as possible: bound to a primitive they become
weakly typed literals, so ``x + 1`` under ``jit`` reads ``add a 1:i32[]`` as in JAX.
"""
from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit._config import config
from jaxkit.interpreters.state import is_ref_aval
from jaxkit.lax.convert import convert_element_type_always
from jaxkit.lax.standard import canonicalize_shape as lax_canonicalize_shape
from jaxkit.lax import sharding_rules as shr
from jaxkit.literals import TypedComplex, TypedFloat, TypedInt
from jaxkit.numpy._jitted import jitted
from jaxkit.runtime import context_mesh
from jaxkit.runtime.array import Array, device_put_value
from jaxkit.source_info import user_stacklevel
from jaxkit.typing import ArrayLike

# (with JAX's typed scalars: what a primitive hands back of a Python scalar it was given)
_python_scalar_types = (bool, int, float, complex, TypedInt, TypedFloat, TypedComplex)


def is_array(x: Any) -> bool:
    """A jaxkit array or a tracer (something lax returns)."""
    return isinstance(x, (Array, core.Tracer))


def _arraylike(x: Any) -> bool:
    if isinstance(x, core.Tracer) and is_ref_aval(x.aval):  # a traced Ref is not an array
        return False
    return (isinstance(x, (Array, core.Tracer, np.ndarray, np.generic))
            or type(x) in _python_scalar_types or hasattr(x, "__jax_array__")
            or is_extended_value(x))


def is_extended_value(x: Any) -> bool:
    """Whether ``x`` is a concrete array of an extended dtype (a key array), which the
    primitives take as they take arrays."""
    return dtypes.is_extended(getattr(x, "dtype", None)) and hasattr(x, "aval")


def check_arraylike(fun_name: str, *args: Any) -> None:
    """Raise JAX's TypeError if an argument is not an array or a scalar (e.g. a list)."""
    for pos, arg in enumerate(args):
        if not _arraylike(arg):
            raise TypeError(f"{fun_name} requires ndarray or scalar arguments, got "
                            f"{type(arg)} at position {pos}.")


def _unwrap(x: Any) -> Any:
    m = getattr(x, "__jax_array__", None)
    return m() if m is not None else x


def asarray(x: ArrayLike) -> Array:
    """An array-like as a jaxkit array or tracer (Python scalars stay weakly typed)."""
    if isinstance(x, (Array, core.Tracer)) or is_extended_value(x):
        return x
    x = _unwrap(x)
    if isinstance(x, (Array, core.Tracer)):
        return x
    if core.current_trace() is not core.eval_trace and np.ndim(x) == 0:
        # Staged, a host scalar is a literal of the program, as JAX's ``lax.asarray`` stages
        # it (a concrete array made here would be a constant input of the jaxpr instead).
        aval = core.get_aval(x)
        return convert_element_type_always(x, aval.dtype, aval.weak_type)
    return device_put_value(x)


def ensure_arraylike(fun_name: str, *args: Any) -> Any:
    """``check_arraylike`` then ``asarray`` of each argument (one value for one argument).
    Run eagerly under ``jax.set_mesh``, host data lands replicated over the mesh as JAX's
    does (``P()``, committed): what the function then computes is typed over the mesh."""
    check_arraylike(fun_name, *args)
    out = tuple(asarray(a) for a in args)
    if context_mesh.eager_meshes and core.current_trace() is core.eval_trace:
        out = tuple(context_mesh.lay_out(a, typed=False) for a in out)
    return out[0] if len(out) == 1 else out


def check_no_float0s(fun_name: str, *args: Any) -> None:
    for a in args:
        if dtypes.dtype(a) == dtypes.float0:
            raise TypeError(
                f"Called {fun_name} with a float0 array. float0s do not support any operations "
                "by design because they are not compatible with non-trivial vector spaces. No "
                "implicit dtype conversion is done. You can use np.zeros_like(arr, "
                "dtype=np.float) to cast a float0 array to a regular zeros array. \nIf you "
                "didn't expect to get a float0 you might have accidentally taken a gradient "
                "with respect to an integer argument.")


def check_for_prng_keys(fun_name: str, *args: Any) -> None:
    """Key arrays mixed with another dtype are refused here, naming every operand's dtype (as
    JAX's jnp does); operands all of one key dtype go on to the primitive, whose type rule
    accepts them (``==``) or names the dtype it refuses (``+``)."""
    if not any(dtypes.is_extended(getattr(a, "dtype", None)) for a in args):
        return
    arg_dtypes = [dtypes.dtype(a) for a in args]
    if len(set(arg_dtypes)) > 1:
        raise TypeError(f"{fun_name} does not accept dtypes {', '.join(map(str, arg_dtypes))}.")


# --------------------------------------------------------------------------------------------
# dtype conversion and promotion
# --------------------------------------------------------------------------------------------

def _weak_scalar_type(dtype: np.dtype) -> type | None:
    """The Python type whose weak literal has ``dtype`` (int -> int32 without x64), if any."""
    for t in (int, float, complex):
        if dtypes.python_scalar_dtype(t) == dtype:
            return t
    return None


def convert(x: Any, dtype: Any, weak_type: bool = False) -> Any:
    """``x`` as ``dtype`` (canonicalised; an array or tracer of ``dtype`` itself is returned
    as it is), weakly typed if ``weak_type``.

    Scalars are converted on the host so that they stay literals: a weak result becomes the
    Python scalar of the matching kind, a strong one a NumPy scalar (which wraps around on
    integer overflow, as JAX does for ``int8_array + 300``).
    """
    if dtypes.is_extended(dtype) or is_extended_value(x):
        if getattr(x, "dtype", None) == dtype:  # keys are converted only to their own dtype
            return x
        raise ValueError(f"Cannot convert_element_type from {dtypes.dtype(x)} to {dtype}")
    t = type(x)
    if t is Array or isinstance(x, core.Tracer):
        aval = x.aval
        if aval.weak_type == weak_type and (aval.dtype == dtype or
                                            aval.dtype == dtypes.canonicalize_dtype(dtype)):
            # The common case, without a trip through lax. Compared before canonicalizing
            # too, as JAX: a float64 array made under x64 stays float64 asked for float64.
            return x
    dtype = dtypes.canonicalize_dtype(dtype)
    if t in _python_scalar_types or (isinstance(x, np.generic) and not weak_type):
        if weak_type:
            py = _weak_scalar_type(dtype)
            if py is not None:
                if py is not complex and isinstance(x, complex):
                    x = x.real
                return py(x)
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                if t is int and dtypes.issubdtype(dtype, np.integer):
                    return _wrap_int(x, dtype)
                return np.asarray(x).astype(dtype)[()]
    if isinstance(x, np.ndarray) and not weak_type:
        if x.dtype == dtype:
            return x
        with np.errstate(over="ignore", invalid="ignore"):
            return x.astype(dtype)
    return lax.convert_element_type(x, dtype, weak_type=weak_type)


def _wrap_int(x: int, dtype: np.dtype) -> np.generic:
    """A Python int as a (wrapped-around) NumPy integer scalar of ``dtype``."""
    info = dtypes.iinfo(dtype)
    span = int(info.max) - int(info.min) + 1
    return np.asarray((x - int(info.min)) % span + int(info.min)).astype(dtype)[()]


def _result(*args: Any) -> tuple[np.dtype, bool]:
    return dtypes.lattice_result_type(*args)


def promote_dtypes(*args: Any) -> list:
    """Convert the arguments to their common (weak-type aware) dtype."""
    if len(args) < 2:
        return [a if is_array(a) or type(a) in _python_scalar_types else asarray(a)
                for a in args]
    ext = {getattr(a, "dtype", None) for a in args}
    if len(ext) == 1 and dtypes.is_extended(next(iter(ext))):
        return list(args)  # values of one extended dtype (keys) have nothing to promote
    dt, weak = _result(*args)
    return [convert(a, dt, weak) for a in args]


def promote_dtypes_inexact(*args: Any) -> list:
    """Promote to the common dtype, then to an inexact one (int32 -> float32, as JAX)."""
    dt, weak = _result(*args)
    dt = dtypes.to_inexact_dtype(dt)  # (convert canonicalizes what it changes)
    return [convert(a, dt, weak) for a in args]


def promote_dtypes_numeric(*args: Any) -> list:
    """Promote to the common dtype, then bool to int32."""
    dt, weak = _result(*args)
    dt = dtypes.to_numeric_dtype(dt)
    return [convert(a, dt, weak) for a in args]


def promote_dtypes_complex(*args: Any) -> list:
    """Promote to the common dtype, then to a complex one."""
    dt, weak = _result(*args)
    dt = dtypes.to_complex_dtype(dt)
    return [convert(a, dt, weak) for a in args]


# --------------------------------------------------------------------------------------------
# Broadcasting
# --------------------------------------------------------------------------------------------

def _try_broadcast_shapes(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...] | None:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape NumPy broadcasting gives to arrays of ``shapes``."""
    norm = [tuple(int(d) for d in (s if isinstance(s, (tuple, list)) else (s,)))
            for s in shapes]
    if not norm:
        return ()
    out = _try_broadcast_shapes(norm)
    if out is None:
        raise ValueError(f"Incompatible shapes for broadcasting: shapes={norm}")
    return out


def _shape_of(x: Any) -> tuple[int, ...]:
    return core.get_aval(x).shape


def broadcast_to_shape(x: Any, shape: tuple[int, ...], out_sharding: Any = None) -> Any:
    """``x`` broadcast to ``shape`` (which NumPy broadcasting allows); rank-0 Python scalars
    are broadcast too. ``out_sharding``: the result's layout over Explicit mesh axes."""
    x_shape = _shape_of(x)
    if x_shape == shape:
        return x if not isinstance(x, np.ndarray) else asarray(x)
    lead = len(shape) - len(x_shape)
    if lead < 0 or any(d != 1 and d != shape[lead + i] for i, d in enumerate(x_shape)):
        raise ValueError(f"Incompatible shapes for broadcasting: {x_shape} and requested shape "
                         f"{shape}")
    # One broadcast_in_dim, as JAX's lax.broadcast_to: it grows size-1 axes itself.
    return lax.broadcast_in_dim(x, shape, tuple(range(lead, len(shape))),
                                out_sharding=out_sharding)


def broadcast_to(array: ArrayLike, shape: Any, *, out_sharding: Any = None) -> Array:
    """``jnp.broadcast_to``: ``array`` broadcast to ``shape`` (no copy semantics), laid out
    as ``out_sharding`` over Explicit mesh axes."""
    array = ensure_arraylike("broadcast_to", array)
    shape = canonicalize_shape(shape)
    aval = core.get_aval(array)
    x_shape = aval.shape
    lead = len(shape) - len(x_shape)
    if lead < 0 or any(d != 1 and d != shape[lead + i] for i, d in enumerate(x_shape)):
        req = aval.update(shape=shape)
        raise ValueError(f"Incompatible types for broadcasting: input type="
                         f"{_type_str(aval)} and requested type={_type_str(req)}")
    sharding = shr.resolve_out_sharding("jnp.broadcast_to", out_sharding)
    if sharding is not None:
        # The operand's split dimensions keep their mesh axes (JAX's error otherwise).
        want = tuple(sharding.spec.partitions) + (None,) * (len(shape) - len(sharding.spec))
        if any(p is not None and p != q for p, q in zip(shr.parts(aval), want[lead:])):
            raise ValueError(f"Incompatible types for broadcasting: input type={aval} and "
                             f"requested type={_typed_str(aval.dtype, shape, want)}")
    if x_shape == shape and sharding is not None and sharding != aval._sharding:
        # Only the layout changes: still one broadcast_in_dim, as JAX's lax.broadcast_to.
        return lax.broadcast_in_dim(array, shape, tuple(range(len(shape))),
                                    out_sharding=sharding)
    return broadcast_to_shape(array, shape, out_sharding=sharding)


def _typed_str(dtype: np.dtype, shape: tuple, parts: tuple) -> str:
    dims = [str(d) if p is None else f"{d}@{p}" if isinstance(p, str) else
            f"{d}@({','.join(p)})" for d, p in zip(shape, parts)]
    return f"{np.dtype(dtype).name}[{','.join(dims)}]"


def _type_str(aval: core.ShapedArray) -> str:
    return f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]"


def broadcast_arrays(*args: ArrayLike) -> list[Array]:
    """``jnp.broadcast_arrays``: the arguments broadcast to their common shape (a list)."""
    check_arraylike("broadcast_arrays", *args)
    return _broadcast_arrays(*args)


@jitted
def _broadcast_arrays(*args: ArrayLike) -> list[Array]:
    # Jitted as JAX's body is: eagerly one program, and under vmap or jvp Arrays come out
    # even where nothing is broadcast (arguments of the common shape pass through).
    args = [asarray(a) for a in args]
    shape = broadcast_shapes(*(a.shape for a in args))
    return [broadcast_to_shape(a, shape) for a in args]


def promote_shapes(fun_name: str, *args: Any) -> list:
    """Make the operands of an elementwise lax call shape-compatible, as JAX's
    ``promote_shapes``: operands of equal rank (or rank 0 beside one other rank) go to lax as
    they are, which broadcasts size-1 axes itself; otherwise the lower ranks get leading
    size-1 axes (rank promotion), and lax broadcasts the rest."""
    if len(args) < 2:
        return list(args)
    shapes = [_shape_of(a) for a in args]
    if len({len(s) for s in shapes}) == 1 or len({len(s) for s in shapes if s}) < 2:
        return list(args)
    if config.jax_numpy_rank_promotion != "allow":  # checked first, as JAX does
        _rank_promotion_warning_or_error(fun_name, shapes)
    if _try_broadcast_shapes(shapes) is None:
        raise _incompatible(shapes)
    rank = max(len(s) for s in shapes)
    return [broadcast_to_rank(a, rank) for a in args]


def _rank_promotion_warning_or_error(fun_name: str, shapes: list) -> None:
    """jax_numpy_rank_promotion='warn' or 'raise': JAX's warning or ValueError for operands of
    different nonzero ranks."""
    shown = " ".join(str(tuple(s)) for s in shapes)
    if config.jax_numpy_rank_promotion == "warn":
        warnings.warn(f"Following NumPy automatic rank promotion for {fun_name} on shapes "
                      f"{shown}. Set the jax_numpy_rank_promotion config option to 'allow' to "
                      "disable this warning; for more information, see "
                      "https://docs.jax.dev/en/latest/rank_promotion_warning.html.",
                      stacklevel=user_stacklevel())
    elif config.jax_numpy_rank_promotion == "raise":
        raise ValueError(f"Operands could not be broadcast together for {fun_name} on shapes "
                         f"{shown} and with the config option jax_numpy_rank_promotion="
                         "'raise'. For more information, see "
                         "https://docs.jax.dev/en/latest/rank_promotion_warning.html.")


def broadcast_to_rank(x: Any, rank: int) -> Any:
    """``x`` with leading size-1 axes up to ``rank`` (JAX's ``lax.broadcast_to_rank``)."""
    shape = _shape_of(x)
    if len(shape) == rank:
        return x
    return broadcast_to_shape(x, (1,) * (rank - len(shape)) + shape)


def _incompatible(shapes: list) -> ValueError:
    # jnp's message and class when the ranks differ (JAX's lax.broadcast_shapes).
    return ValueError(f"Incompatible shapes for broadcasting: shapes={list(map(tuple, shapes))}")


def broadcast_all(fun_name: str, *args: Any) -> list:
    """Broadcast every operand (rank 0 included) to the common shape (for ``select_n``)."""
    shapes = [_shape_of(a) for a in args]
    out_shape = _try_broadcast_shapes(shapes)
    if out_shape is None:
        raise _incompatible(shapes)
    # Over Explicit mesh axes the broadcast operands take the common layout, as in JAX.
    sharding = shr.broadcast_shardings(out_shape, *(core.get_aval(a) for a in args))
    return [broadcast_to_shape(a, out_shape, sharding) for a in args]


def _prepare(fun_name: str, args: tuple) -> tuple:
    check_arraylike(fun_name, *args)
    args = tuple(_unwrap(a) for a in args)
    check_no_float0s(fun_name, *args)
    check_for_prng_keys(fun_name, *args)
    return args


def promote_args(fun_name: str, *args: ArrayLike) -> list:
    """Check, promote dtypes and broadcast the operands of an elementwise function."""
    return promote_shapes(fun_name, *promote_dtypes(*_prepare(fun_name, args)))


def promote_args_inexact(fun_name: str, *args: ArrayLike) -> list:
    return promote_shapes(fun_name, *promote_dtypes_inexact(*_prepare(fun_name, args)))


def promote_args_numeric(fun_name: str, *args: ArrayLike) -> list:
    return promote_shapes(fun_name, *promote_dtypes_numeric(*_prepare(fun_name, args)))


# --------------------------------------------------------------------------------------------
# Shapes and axes
# --------------------------------------------------------------------------------------------

def canonicalize_shape(shape: Any, context: str = "") -> tuple[int, ...]:
    """A shape argument (an int or a sequence of ints, concrete) as a tuple of ints (a rank-0
    array counts as an int); JAX's TypeError otherwise (``lax.canonicalize_shape``)."""
    if isinstance(shape, (Array, core.Tracer, np.ndarray)):
        is_scalar = np.ndim(shape) == 0
    else:
        is_scalar = not isinstance(shape, (tuple, list))
    return lax_canonicalize_shape((shape,) if is_scalar else tuple(shape), context)


def canonicalize_axis(axis: Any, ndim: int, error: type[Exception] = ValueError) -> int:
    """A (possibly negative) axis in ``[0, ndim)``; JAX's error otherwise.

    JAX raises a ValueError for an axis out of range, except in the functions that index the
    shape with it first (``mean``, ``var``, ``argmax``, ``swapaxes``, ``split``, ...), where
    the error is an IndexError: those pass ``error=IndexError``. The message is the same."""
    axis = core.concrete_or_error(axis, "The axis argument must be known statically.")
    try:
        axis = operator_index(axis)
    except TypeError:
        raise TypeError(f"'{type(axis).__name__}' object cannot be interpreted as an integer"
                        ) from None
    if not -ndim <= axis < ndim:
        raise error(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim if ndim else axis


def operator_index(x: Any) -> int:
    return operator.index(x)

