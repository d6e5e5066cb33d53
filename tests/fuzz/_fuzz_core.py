"""The differential fuzzer's machinery: op records, argument generation, comparison with JAX.

A record (``Op``) names a function by its path under a namespace (``"jnp.sin"``,
``"lax.cumsum"``, ``"special.erf"``) or gives a ``call(ns, *arrays, **params)`` over one; the
same record runs against jaxkit's namespace and JAX's (the test-only oracle). ``run_case``
draws one case for a record (dtypes, shapes, values, parameters: valid and invalid ones) and
checks it eagerly, under ``jit``, under ``vmap`` over a new leading axis and, for real floating
inputs and outputs, under ``grad`` of the sum. It returns the mismatches as text; the CI tests
assert there are none beyond the allowlist (``_fuzz_allow.py``) and ``bench/fuzz_long.py``
counts them.

What "the same" means:
- a value: the same pytree of leaves, each with the same dtype and shape, NaN in the same
  places, infinities in the same places with the same sign, finite numbers within a per-dtype
  tolerance (exact for bool and integers);
- an error: both raise, and jaxkit's exception is an instance of the builtin class JAX's derives
  from (``TypeError``, ``ValueError``, ``IndexError``, ...), and where JAX's own class is not a
  builtin (``ConcretizationTypeError``, ``XlaRuntimeError``...) a class of that name is in
  jaxkit's MRO. jaxkit may raise a more specific subclass (a clearer error) and still match:
  an ``except`` clause written for JAX catches it.
"""
from __future__ import annotations

import dataclasses
import traceback
import warnings
from types import SimpleNamespace
from typing import Any, Callable

import jax
import jax.numpy as jax_jnp
import jax.scipy.special as jax_special
import ml_dtypes
import numpy as np
from hypothesis import strategies as st

import jaxkit
import jaxkit.numpy as jk_jnp
import jaxkit.scipy.special as jk_special

# The two namespaces a record is called on: the same attribute paths in each.
JK = SimpleNamespace(name="jaxkit", jnp=jk_jnp, lax=jaxkit.lax, random=jaxkit.random,
                     special=jk_special, jit=jaxkit.jit, vmap=jaxkit.vmap, grad=jaxkit.grad,
                     leaves=jaxkit.tree_util.tree_leaves)
JX = SimpleNamespace(name="jax", jnp=jax_jnp, lax=jax.lax, random=jax.random,
                     special=jax_special, jit=jax.jit, vmap=jax.vmap, grad=jax.grad,
                     leaves=jax.tree_util.tree_leaves)

BF16 = np.dtype(ml_dtypes.bfloat16)
BOOL = (np.dtype(np.bool_),)
SINT = tuple(map(np.dtype, (np.int8, np.int16, np.int32)))
UINT = tuple(map(np.dtype, (np.uint8, np.uint32)))
INT = SINT + UINT
FLOAT = (np.dtype(np.float16), BF16, np.dtype(np.float32))
COMPLEX = (np.dtype(np.complex64),)
INEXACT = FLOAT + COMPLEX
NUMBER = INT + INEXACT
ALL = BOOL + NUMBER
# Inputs that x32 mode narrows (with a warning in both): checked as inputs, never as results.
WIDE = tuple(map(np.dtype, (np.int64, np.float64)))

# Relative tolerance per result dtype, for values and for gradients (low-precision gradients
# round at every step of the chain rule, so they get more room).
RTOL = {np.dtype(np.float16): 4e-3, BF16: 3e-2, np.dtype(np.float32): 2e-5,
        np.dtype(np.float64): 1e-12, np.dtype(np.complex64): 2e-5,
        np.dtype(np.complex128): 1e-12}
GRAD_RTOL = {np.dtype(np.float16): 3e-2, BF16: 1e-1, np.dtype(np.float32): 2e-4}


@dataclasses.dataclass(frozen=True)
class Op:
    """One fuzzed function. ``params(draw, shapes)`` draws keyword parameters for the drawn
    argument shapes; ``args(draw, rng, dtypes)`` replaces the generic argument maker (square
    matrices for linalg, keys for random). ``dtypes`` lists the dtypes arguments are drawn
    from; a case sometimes draws one outside them (an invalid or unusual input)."""
    name: str
    area: str
    nargs: int = 1
    dtypes: tuple = ALL
    rank: tuple[int, int] = (0, 3)
    params: Callable | None = None
    call: Callable | None = None
    args: Callable | None = None
    broadcast: bool = True      # several arguments: mutually broadcastable shapes (mostly)
    same_dtype: bool = False    # several arguments share one dtype (mostly)
    grad: bool = True
    vmap: bool = True
    tol: float = 1.0            # multiplies the per-dtype tolerance
    grad_tol: float = 1.0

    def fn(self, ns, *arrays, **params):
        if self.call is not None:
            return self.call(ns, *arrays, **params)
        target = ns
        for part in self.name.split("."):
            target = getattr(target, part)
        return target(*arrays, **params)


# ---- argument generation -------------------------------------------------------------------
_FLOAT_SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-30,
                   65504.0, 3.0e38]


def values(rng: np.random.Generator, shape, dtype, special=0.15) -> np.ndarray:
    """Random values of ``dtype``: mostly ordinary numbers, with a share of the edge values
    (signed zeros, infinities, NaN, extremes of the type) at random places."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        low = 0 if dtype.kind == "u" else -10
        out = np.asarray(rng.integers(low, 11, shape), dtype)
        edges = np.array([info.min, info.max, 0, 1], dtype)
    elif dtype.kind == "c":
        # Set the parts apart: ``re + 1j * im`` would turn an infinite ``im`` into NaN + inf j.
        out = np.empty(shape, dtype)
        out.real = values(rng, shape, np.float32, special)
        out.imag = values(rng, shape, np.float32, special)
        return out
    else:
        scale = rng.choice([0.5, 3.0, 50.0])
        out = np.asarray(rng.standard_normal(shape) * scale, dtype)
        with np.errstate(over="ignore"):
            edges = np.array(_FLOAT_SPECIALS, np.float64).astype(dtype)
    mask = rng.random(shape) < special
    if mask.any():
        out[mask] = rng.choice(edges, size=int(mask.sum()))
    return out


@st.composite
def shape_st(draw, rank: tuple[int, int], max_dim=4):
    """A shape of rank in ``rank``; dimensions of size 0 come up now and then."""
    r = draw(st.integers(*rank))
    return tuple(draw(st.sampled_from([0] + [1, 2, 3, max_dim] * 3)) for _ in range(r))


@st.composite
def shapes_st(draw, n: int, rank: tuple[int, int], broadcast: bool):
    """``n`` argument shapes: mostly mutually broadcastable, sometimes not (invalid input)."""
    base = draw(shape_st(rank))
    if n == 1:
        return [base]
    if not broadcast or draw(st.integers(0, 9)) == 0:
        if draw(st.booleans()):
            return [base] * n
        return [draw(shape_st(rank)) for _ in range(n)]
    shapes = []
    for _ in range(n):
        # Drop leading axes and set some axes to 1: a shape that broadcasts against ``base``.
        keep = draw(st.integers(0, len(base)))
        tail = base[len(base) - keep:]
        shapes.append(tuple(1 if d and draw(st.integers(0, 3)) == 0 else d for d in tail))
    return shapes


@st.composite
def case_st(draw, op: Op):
    """One case for ``op``: ``(arrays, params, seed)``."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if op.args is not None:
        arrays = op.args(draw, rng)
    else:
        shapes = draw(shapes_st(op.nargs, op.rank, op.broadcast))
        odd = draw(st.integers(0, 7)) == 0
        pick = st.sampled_from(ALL + WIDE) if odd else st.sampled_from(op.dtypes)
        if op.same_dtype and not odd:
            dts = [draw(pick)] * op.nargs
        else:
            dts = [draw(pick) for _ in range(op.nargs)]
        arrays = [values(rng, s, d) for s, d in zip(shapes, dts)]
    params = op.params(draw, [np.shape(a) for a in arrays]) if op.params else {}
    return arrays, params, seed


# ---- running and comparing -----------------------------------------------------------------
class Raised:
    """What a call raised, kept for comparison."""

    def __init__(self, exc: BaseException):
        self.exc = exc

    def __repr__(self):
        return f"{type(self.exc).__name__}: {str(self.exc).splitlines()[0][:160] if str(self.exc) else ''}"


def run(ns, thunk) -> Any:
    """``thunk()`` as a list of NumPy leaves, or the ``Raised`` exception. Results are pulled to
    the host inside, so errors at execution time are caught here too. ``KeyboardInterrupt`` and
    ``SystemExit`` pass through."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = thunk()
            return [np.asarray(leaf) for leaf in ns.leaves(out)]
    except Exception as e:  # noqa: BLE001 (every exception class is compared with JAX's)
        return Raised(e)


def _builtin_base(cls: type) -> type:
    return next(c for c in cls.__mro__ if c.__module__ == "builtins")


def same_error(ours: BaseException, theirs: BaseException) -> bool:
    """See the module docstring: jaxkit's class is JAX's builtin base or below it, and carries
    the name of JAX's own class where JAX raises one of its own."""
    if not isinstance(ours, _builtin_base(type(theirs))):
        return False
    if type(theirs).__module__ == "builtins":
        return True
    return type(theirs).__name__ in {c.__name__ for c in type(ours).__mro__}


def _close(a: np.ndarray, b: np.ndarray, rtol: float) -> str | None:
    """Compare two real float arrays of one shape: NaN and signed-infinity places, then the
    finite numbers to ``rtol`` (relative, with the same absolute floor near zero)."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return f"NaN places differ: jaxkit {np.argwhere(np.isnan(a)).tolist()[:5]} " \
               f"jax {np.argwhere(np.isnan(b)).tolist()[:5]}"
    inf_a, inf_b = np.where(np.isinf(a), np.sign(a), 0), np.where(np.isinf(b), np.sign(b), 0)
    if not np.array_equal(inf_a, inf_b):
        return "infinities differ"
    fin = np.isfinite(a) & np.isfinite(b)
    if not np.allclose(a[fin], b[fin], rtol=rtol, atol=rtol):
        err = np.abs(a[fin] - b[fin])
        i = int(np.argmax(err - rtol * np.abs(b[fin])))
        return f"values differ: jaxkit {a[fin][i]!r} vs jax {b[fin][i]!r} (max err {err.max():.3g})"
    return None


def compare_leaves(ours: list, theirs: list, rtols: dict, scale: float) -> str | None:
    """None when the two lists of leaves agree (see the module docstring), else what differs."""
    if len(ours) != len(theirs):
        return f"{len(ours)} results vs jax's {len(theirs)}"
    for i, (a, b) in enumerate(zip(ours, theirs)):
        where = f"result {i}: " if len(ours) > 1 else ""
        if a.dtype != b.dtype:
            return f"{where}dtype {a.dtype} vs jax {b.dtype}"
        if a.shape != b.shape:
            return f"{where}shape {a.shape} vs jax {b.shape}"
        if a.dtype.kind in "biu":  # (bfloat16's kind is "V": it is compared as a float)
            if not np.array_equal(a, b):
                return f"{where}values differ: {a.ravel()[:6]} vs jax {b.ravel()[:6]}"
            continue
        rtol = rtols.get(a.dtype, 1e-5) * scale
        parts = [(a.real, b.real), (a.imag, b.imag)] if a.dtype.kind == "c" else [(a, b)]
        for x, y in parts:
            msg = _close(np.asarray(x), np.asarray(y), rtol)
            if msg:
                return where + msg
    return None


def compare(ours, theirs, rtols=RTOL, scale=1.0) -> str | None:
    """Compare two ``run`` outcomes."""
    if isinstance(ours, Raised) and isinstance(theirs, Raised):
        if same_error(ours.exc, theirs.exc):
            return None
        return f"error class: jaxkit {ours!r} / jax {theirs!r}"
    if isinstance(ours, Raised):
        return f"jaxkit raised {ours!r}; jax returned a value"
    if isinstance(theirs, Raised):
        return f"jax raised {theirs!r}; jaxkit returned a value"
    return compare_leaves(ours, theirs, rtols, scale)


def _describe(arrays, params) -> str:
    return ", ".join(f"{a.dtype}{list(np.shape(a))}" for a in arrays) + (
        f"; {params}" if params else "")


def _is_real_float(leaves) -> bool:
    return all(leaf.dtype.kind == "f" for leaf in leaves) and bool(leaves)


def _sum_all(ns, out):
    return sum(ns.jnp.sum(leaf) for leaf in ns.leaves(out))


def check_case(op: Op, arrays, params, rng: np.random.Generator, modes=("eager", "jit", "vmap",
               "grad"), stats: dict | None = None) -> list[str]:
    """Run one case of ``op`` in every mode against JAX; the list of mismatches as text."""
    failures = []
    desc = f"{op.name}({_describe(arrays, params)})"

    def note(mode, msg, ours=None):
        if msg:
            tb = ""
            if isinstance(ours, Raised):
                tb = "\n" + "".join(traceback.format_exception(ours.exc)[-3:])
            failures.append(f"[{mode}] {desc}: {msg}{tb}")
        if stats is not None:
            stats[mode] = stats.get(mode, 0) + 1

    def both(mode, make, rtols=RTOL, scale=op.tol):
        ours = run(JK, lambda: make(JK))
        theirs = run(JX, lambda: make(JX))
        note(mode, compare(ours, theirs, rtols, scale), ours)
        return ours, theirs

    ours, theirs = both("eager", lambda ns: op.fn(ns, *arrays, **params))
    if isinstance(theirs, Raised) and isinstance(ours, Raised):
        return failures  # an invalid input: the transformations would raise the same again
    if "jit" in modes:
        both("jit", lambda ns: ns.jit(lambda *a: op.fn(ns, *a, **params))(*arrays))
    if "vmap" in modes and op.vmap and arrays:
        size = int(rng.choice([1, 2, 3]))
        in_axes = [int(rng.integers(0, 2)) == 0 or i == 0 for i in range(len(arrays))]
        # Fresh batch members for generic arguments; records with their own argument maker
        # (well-conditioned matrices, keys, gcd's small integers) repeat theirs, since fresh
        # values would leave the domain the maker keeps to.
        def member(a):
            return values(rng, a.shape, a.dtype) if op.args is None else a

        batched = [np.stack([a] + [member(a) for _ in range(size - 1)]) if b else a
                   for a, b in zip(arrays, in_axes)]
        axes = tuple(0 if b else None for b in in_axes)
        both("vmap", lambda ns: ns.vmap(lambda *a: op.fn(ns, *a, **params), axes)(*batched))
    if ("grad" in modes and op.grad and not isinstance(theirs, Raised)
            and _is_real_float(theirs)):
        argnums = tuple(i for i, a in enumerate(arrays) if a.dtype in FLOAT)
        if argnums:
            both("grad", lambda ns: ns.grad(lambda *a: _sum_all(ns, op.fn(ns, *a, **params)),
                                            argnums)(*arrays), GRAD_RTOL, op.grad_tol)
    return failures
