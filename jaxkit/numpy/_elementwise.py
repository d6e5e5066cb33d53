"""Elementwise functions that are not NumPy ufuncs: ``clip``, ``round``/``around``,
``trunc``, ``fmax``/``fmin``, ``nan_to_num``, ``isclose``/``allclose``, ``array_equal``,
``angle``, ``select``/``piecewise``, ``gcd``/``lcm``, ``astype`` and the ``is*obj``
predicates."""
from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.runtime.array import Array
from jaxkit.source_info import user_stacklevel
from jaxkit.numpy._creation import array, asarray, zeros_like
from jaxkit.numpy._jitted import jitted
from jaxkit.numpy._promotion import (
    broadcast_all,
    broadcast_arrays,
    check_arraylike,
    check_for_prng_keys,
    convert,
    ensure_arraylike,
    promote_args,
    promote_args_inexact,
    promote_dtypes,
)
from jaxkit.numpy._reductions import all as _all
from jaxkit.numpy._reductions import any as _any
from jaxkit.numpy._reductions import argmax, cumsum
from jaxkit.numpy._shape import concatenate, stack
from jaxkit.numpy._vectorize import vectorize
from jaxkit.numpy._ufuncs import (
    absolute,
    ceil,
    degrees,
    floor,
    floor_divide,
    greater,
    imag,
    isfinite,
    isnan,
    isneginf,
    isposinf,
    less,
    logical_and,
    logical_or,
    maximum,
    minimum,
    multiply,
    real,
    where3,
)
from jaxkit.typing import ArrayLike, DTypeLike


def _const(x: Any, v: Any) -> np.generic:
    dt = dtypes.dtype(x)
    return np.asarray(v).astype(dt)[()]


def iscomplexobj(x: Any) -> bool:
    """``jnp.iscomplexobj``: whether ``x`` has a complex dtype."""
    if isinstance(x, (complex, np.complexfloating)):
        return True
    if x is None or isinstance(x, (bool, int, float, str, np.generic)):
        return False
    try:
        typ = x.dtype
    except AttributeError:
        typ = asarray(x).dtype
    return dtypes.issubdtype(typ, np.complexfloating)


def isrealobj(x: Any) -> bool:
    """``jnp.isrealobj``: not ``iscomplexobj``."""
    return not iscomplexobj(x)


@jitted(inline=False)
def iscomplex(x: ArrayLike) -> Array:
    """``jnp.iscomplex``: elementwise, whether the imaginary part is nonzero."""
    i = imag(x)
    return lax.ne(i, _const(i, 0))


@jitted(inline=False)
def isreal(x: ArrayLike) -> Array:
    """``jnp.isreal``: elementwise, whether the imaginary part is zero."""
    i = imag(x)
    return lax.eq(i, _const(i, 0))


def isscalar(element: Any) -> bool:
    """``jnp.isscalar``: Python/NumPy scalars and zero-dimensional arrays."""
    if np.isscalar(element):
        return True
    if isinstance(element, (np.ndarray, Array, core.Tracer)):
        return element.ndim == 0
    if getattr(element, "__jax_array__", None) is not None:
        return asarray(element).ndim == 0
    return False


def astype(x: ArrayLike, dtype: DTypeLike | None, /, *, copy: bool = False,
           device: Any = None) -> Array:
    """``jnp.astype``: ``x`` converted to ``dtype`` (never weakly typed). As JAX, casting
    complex values to a real or integer type warns (on every call: the body is jitted)."""
    if dtype is not None and _is_complex(x) and not dtypes.is_extended(dtype) and \
            dtypes.isdtype(dtype, ("integral", "real floating")):
        warnings.warn("Casting from complex to real dtypes will soon raise a ValueError. "
                      "Please first use jnp.real or jnp.imag to take the real/imaginary "
                      "component of your input.", DeprecationWarning,
                      stacklevel=user_stacklevel())
    return _astype(x, dtype, copy=copy, device=device)


def _is_complex(x) -> bool:
    try:
        return dtypes.issubdtype(dtypes.dtype(x), np.complexfloating)
    except (TypeError, ValueError):  # not an array: astype's own check says so
        return False


@jitted(static_argnames=("dtype", "copy", "device"), converts_first=True,
        jax_jits=False, name="astype")
def _astype(x: ArrayLike, dtype: DTypeLike | None, /, *, copy: bool = False,
            device: Any = None) -> Array:
    x_arr = ensure_arraylike("astype", x)
    dt = dtypes.default_float_dtype() if dtype is None else dtype if \
        dtypes.is_extended(dtype) else dtypes.check_and_canonicalize_user_dtype(dtype, "astype")
    if dtypes.issubdtype(x_arr.dtype, np.complexfloating) and dt == np.bool_:
        x_arr = lax.ne(x_arr, _const(x_arr, 0))
    return lax.convert_element_type(x_arr, dt)


@jitted(inline=False)
def fmax(x1: ArrayLike, x2: ArrayLike) -> Array:
    """``jnp.fmax``: elementwise maximum, ignoring NaNs."""
    return where3(greater(x1, x2) | isnan(x2), x1, x2)


@jitted(inline=False)
def fmin(x1: ArrayLike, x2: ArrayLike) -> Array:
    """``jnp.fmin``: elementwise minimum, ignoring NaNs."""
    # As JAX's: the ufuncs broadcast their operands themselves.
    return where3(less(x1, x2) | isnan(x2), x1, x2)


@jitted(inline=False)
def trunc(x: ArrayLike) -> Array:
    """``jnp.trunc``: round towards zero."""
    x = ensure_arraylike("trunc", x)
    if dtypes.isdtype(x.dtype, ("integral", "bool")):
        return x
    return where3(lax.lt(x, _const(x, 0)), ceil(x), floor(x))


@jitted(static_argnames=("decimals", "out"), inline=False)
def round(a: ArrayLike, decimals: int = 0, out: None = None) -> Array:
    """``jnp.round``: round to ``decimals`` decimals, ties to even."""
    a = ensure_arraylike("round", a)
    decimals = operator.index(core.concrete_or_error(decimals,
                                                     "'decimals' argument of jnp.round"))
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.round is not supported.")
    dtype = a.dtype
    if dtypes.issubdtype(dtype, np.integer):
        if decimals < 0:
            raise NotImplementedError("integer np.round not implemented for decimals < 0")
        return a
    if dtype == np.bool_:
        # JAX rejects bools (NumPy's finfo error); say so plainly.
        raise ValueError("jnp.round needs a numeric array, got bool; convert it first, "
                         "e.g. x.astype(int).")

    def _round_float(x: Any) -> Array:
        if decimals == 0:
            return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)
        x = lax.convert_element_type(x, np.float32) if dtype == np.float16 else x
        factor = _const(x, 10 ** decimals)
        out = lax.div(lax.round(lax.mul(x, factor), lax.RoundingMethod.TO_NEAREST_EVEN), factor)
        return lax.convert_element_type(out, dtype) if dtype == np.float16 else out

    if decimals > np.log10(float(dtypes.finfo(dtype).max)):
        return a
    if dtypes.issubdtype(dtype, np.complexfloating):
        return lax.complex(_round_float(lax.real(a)), _round_float(lax.imag(a)))
    return _round_float(a)


@jitted(static_argnames=("decimals", "out"), inline=False)
def around(a: ArrayLike, decimals: int = 0, out: None = None) -> Array:
    """``jnp.around``: ``round`` (a plain jit calling it, as JAX's)."""
    return round(a, decimals, out)


@jitted(inline=False)
def clip(arr: ArrayLike | None = None, /, min: ArrayLike | None = None,
         max: ArrayLike | None = None) -> Array:
    """``jnp.clip``: ``arr`` limited to ``[min, max]`` (either may be None). JAX 0.10.2 has
    removed NumPy's older ``a``/``a_min``/``a_max`` keywords, so they are refused here too."""
    if arr is None:
        raise ValueError("No input was provided to the clip function.")
    check_arraylike("clip", arr)
    if any(iscomplexobj(t) for t in (arr, min, max)):
        raise ValueError("Clip received a complex value either through the input or the "
                         "min/max keywords. Complex values have no ordering and cannot be "
                         "clipped. Please convert to a real value or array by taking the real "
                         "or imaginary components via jax.numpy.real/imag respectively.")
    if min is not None:
        arr = maximum(min, arr)
    if max is not None:
        arr = minimum(max, arr)
    return asarray(arr)


@jitted(inline=False)
def nan_to_num(x: ArrayLike, copy: bool = True, nan: ArrayLike = 0.0,
               posinf: ArrayLike | None = None, neginf: ArrayLike | None = None) -> Array:
    """``jnp.nan_to_num``: NaN and infinities replaced by finite numbers."""
    x = ensure_arraylike("nan_to_num", x)
    dtype = x.dtype
    if not dtypes.issubdtype(dtype, np.inexact):
        return x
    if dtypes.issubdtype(dtype, np.complexfloating):
        return lax.complex(nan_to_num(lax.real(x), nan=nan, posinf=posinf, neginf=neginf),
                           nan_to_num(lax.imag(x), nan=nan, posinf=posinf, neginf=neginf))
    info = dtypes.finfo(dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = where3(isnan(x), asarray(nan, dtype=dtype), x)
    out = where3(isposinf(out), asarray(posinf, dtype=dtype), out)
    return where3(isneginf(out), asarray(neginf, dtype=dtype), out)


@jitted(static_argnames=("equal_nan",), inline=False)
def isclose(a: ArrayLike, b: ArrayLike, rtol: ArrayLike = 1e-05, atol: ArrayLike = 1e-08,
            equal_nan: bool = False) -> Array:
    """``jnp.isclose``: ``|a - b| <= atol + rtol * |b|`` elementwise (infinities must be
    equal)."""
    a, b = promote_args("isclose", a, b)
    if dtypes.is_extended(dtypes.dtype(a)):  # keys are close when they are equal
        return lax.eq(a, b)
    a, b = promote_args_inexact("isclose", a, b)
    dtype = dtypes.dtype(a)
    if dtypes.issubdtype(dtype, np.complexfloating):
        dtype = np.array(0, dtype).real.dtype
    rtol = convert(rtol, dtype)
    atol = convert(atol, dtype)
    both_nan = logical_and(isnan(a), isnan(b))
    check_fin = isfinite(b)
    a_, b_ = broadcast_all("isclose", a, b)
    in_range = lax.le(lax.abs(lax.sub(a_, b_)), lax.add(atol, lax.mul(rtol, lax.abs(b_))))
    out = logical_or(lax.eq(a_, b_), logical_and(check_fin, in_range))
    return logical_or(out, both_nan) if equal_nan else out


@jitted(static_argnames=("equal_nan",), inline=False)
def allclose(a: ArrayLike, b: ArrayLike, rtol: ArrayLike = 1e-05, atol: ArrayLike = 1e-08,
             equal_nan: bool = False) -> Array:
    """``jnp.allclose``: ``all(isclose(a, b))``."""
    check_arraylike("allclose", a, b)
    return _all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1: ArrayLike, a2: ArrayLike, equal_nan: bool = False) -> Array:
    """``jnp.array_equal``: same shape and elements."""
    try:
        a1, a2 = asarray(a1), asarray(a2)
    except Exception:  # noqa: BLE001  (NumPy returns False for non-arrays as well)
        return asarray(False)
    if a1.shape != a2.shape:
        return asarray(False)
    check_for_prng_keys("equal", a1, a2)  # JAX compares with ==, which names both dtypes
    a1p, a2p = promote_dtypes(a1, a2)
    eq = lax.eq(a1p, a2p)
    if equal_nan:
        eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
    return _all(eq)


def array_equiv(a1: ArrayLike, a2: ArrayLike) -> Array:
    """``jnp.array_equiv``: equal after broadcasting."""
    a1, a2 = asarray(a1), asarray(a2)
    try:
        a1, a2 = broadcast_arrays(a1, a2)
    except ValueError:
        return asarray(False)
    a1, a2 = promote_dtypes(a1, a2)
    return _all(lax.eq(a1, a2))


@jitted(static_argnames=("deg",), inline=False)
def angle(z: ArrayLike, deg: bool = False) -> Array:
    """``jnp.angle``: the argument of complex ``z`` (radians, or degrees if ``deg``)."""
    z = ensure_arraylike("angle", z)
    re, im = real(z), imag(z)
    dtype = re.dtype
    if not dtypes.issubdtype(dtype, np.inexact) or (
            dtypes.issubdtype(z.dtype, np.floating) and z.ndim == 0):
        dtype = dtypes.default_float_dtype()
        re = lax.convert_element_type(re, dtype)
        im = lax.convert_element_type(im, dtype)
    result = lax.atan2(im, re)
    return degrees(result) if deg else result


def select(condlist: Sequence[ArrayLike], choicelist: Sequence[ArrayLike],
           default: ArrayLike = 0) -> Array:
    """``jnp.select``: the choice of the first true condition, else ``default``."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"condlist must have length equal to choicelist ({len(condlist)} vs "
                         f"{len(choicelist)})")
    if len(condlist) == 0:
        raise ValueError("condlist must be non-empty")
    check_arraylike("select", *condlist, *choicelist, default)
    condlist = [asarray(cond) for cond in condlist]
    choicelist = [asarray(choice) for choice in choicelist]
    # A Python scalar default stays a host scalar (a literal once promoted), as JAX's
    # asarray of one is while tracing.
    if not isinstance(default, (bool, int, float, complex)):
        default = asarray(default)
    # As JAX's: one select_n over [default, *choices] indexed by the first true condition
    # (argmax of [False, *conditions], which is 0 where none holds).
    choices = promote_dtypes(default, *choicelist)
    conditions = stack(broadcast_arrays(False, *condlist))
    idx = argmax(conditions.astype(bool), axis=0)
    return lax.select_n(*broadcast_arrays(idx, *choices))


def piecewise(x: ArrayLike, condlist: Any, funclist: Sequence[Any], *args: Any,
              **kw: Any) -> Array:
    """``jnp.piecewise``: ``funclist[i](x)`` where ``condlist[i]`` (last true wins); with one
    more function than conditions, the last is the default."""
    x_arr = ensure_arraylike("piecewise", x)
    nc, nf = len(condlist), len(funclist)
    if nf == nc + 1:
        funclist = funclist[-1:] + funclist[:-1]
    elif nf == nc:
        funclist = [0] + list(funclist)
    else:
        raise ValueError(f"with {nc} condition(s), either {nc} or {nc + 1} functions are "
                         f"expected; got {nf}")
    consts = {i: c for i, c in enumerate(funclist) if not callable(c)}
    funcs = {i: f for i, f in enumerate(funclist) if callable(f)}
    return _piecewise(x_arr, asarray(condlist, dtype=bool), consts,
                      frozenset(funcs.items()), *args, **kw)


@jitted(static_argnames=("funcs",), inline=False, pytree_args=True)
def _piecewise(x: Array, condlist: Array, consts: dict, funcs: frozenset, *args: Any,
               **kw: Any) -> Array:
    # A plain jit, as JAX's: per element, the index of the last true condition (0, the
    # default, if none), then one switch over the functions, vectorized over the elements.
    funcdict = dict(funcs)
    funclist = [consts.get(i, funcdict.get(i)) for i in range(len(condlist) + 1)]
    indices = argmax(cumsum(concatenate([zeros_like(condlist[:1]), condlist], 0), 0), 0)
    dtype = x.dtype

    def _call(f):
        return lambda x: f(x, *args, **kw).astype(dtype)

    def _const(v):
        return lambda x: array(v, dtype=dtype)

    funclist = [_call(f) if callable(f) else _const(f) for f in funclist]
    return vectorize(lax.switch, excluded=(1,))(indices, funclist, x)


@jitted(inline=False)
def gcd(x1: ArrayLike, x2: ArrayLike) -> Array:
    """``jnp.gcd``: greatest common divisor (Euclid's algorithm in a ``while_loop``)."""
    # Plain promotion, not the numeric one, which would turn bools into int32: bools are not
    # integers here (as in JAX and NumPy).
    x1, x2 = promote_dtypes(*ensure_arraylike("gcd", x1, x2))
    if not dtypes.issubdtype(dtypes.dtype(x1), np.integer):
        raise ValueError("Arguments to jax.numpy.gcd must be integers.")
    x1, x2 = broadcast_arrays(x1, x2)

    def cond(xs):
        return _any(xs[1] != 0)

    def body(xs):
        # JAX's loop body (an integer rem by 0 is defined in XLA; its lanes are discarded).
        a, b = xs
        a, b = (where3(b != 0, b, a), where3(b != 0, lax.rem(a, b), _const(b, 0)))
        return (where3(a < b, b, a), where3(a < b, a, b))

    out, _ = lax.while_loop(cond, body, (absolute(x1), absolute(x2)))
    return out


@jitted(inline=False)
def lcm(x1: ArrayLike, x2: ArrayLike) -> Array:
    """``jnp.lcm``: least common multiple."""
    x1, x2 = promote_dtypes(*ensure_arraylike("lcm", x1, x2))
    if not dtypes.issubdtype(dtypes.dtype(x1), np.integer):
        raise ValueError("Arguments to jax.numpy.lcm must be integers.")
    x1, x2 = absolute(x1), absolute(x2)
    d = gcd(x1, x2)
    return where3(d == 0, _const(d, 0), multiply(x1, floor_divide(x2, d)))
