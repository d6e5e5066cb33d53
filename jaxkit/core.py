"""The core of jaxkit: abstract values, primitives, traces and tracers, and the jaxpr IR.

Everything above this module (interpreters, lax, numpy, api) speaks in these terms:

* ``ShapedArray`` is the abstract value (shape, dtype, weak_type) of every array. The same object
  is handed to jaxlib as the result "aval" of a compiled program, so device arrays carry it.
* ``Primitive.bind`` sends an operation to the *current trace*. One trace is current at a time
  (held per thread); each trace knows its parent, unboxes only its own tracers and runs its rules
  with its parent made current ("stackless" tracing). ``EvalTrace`` at the bottom executes.
* ``Jaxpr`` is the typed, first-order IR that tracing produces (``jaxkit.jaxpr``, re-exported
  here); ``eval_jaxpr`` interprets it by binding each equation again, so it works under any
  transformation.
"""
from __future__ import annotations

import contextlib
import contextvars
import gc
import operator
import types
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from jaxkit._deprecations import deprecation_getattr, removed
from jaxkit._pretty import pp_literal  # noqa: F401  (core.pp_literal: magics' graphs use it)
from jaxkit import dtypes
from jaxkit import avals as avals_mod
from jaxkit.avals import (AbstractToken, AbstractValue, MemorySpace,  # noqa: F401
                          ShapedArray, ShardingTypeError, Token, abstract_token, max_dim,
                          mem_kind_to_space, mem_space_to_kind, min_dim, physical_aval,
                          typematch)
from jaxkit._config import config
from jaxkit.effects import Effect, Effects, JaxprInputEffect, no_effects  # noqa: F401
from jaxkit.jaxpr import (Atom, ClosedJaxpr, DropVar, Jaxpr, JaxprEqn,  # noqa: F401
                          JaxprTypeError, Literal, Namer, PpSettings, Var, defpp_params,
                          eval_jaxpr, jaxpr_as_fun, pp_display_only_names, pp_eqn,
                          pp_eqn_rules, pp_jaxpr, pp_naming_rules, pp_param_value,
                          pp_params_rules, pp_toplevel_jaxpr, subjaxprs)
from jaxkit.jaxpr import declared_effect_primitives, effect_rules
from jaxkit._tracer_errors import (ConcretizationTypeError, JaxkitTypeError,  # noqa: F401
                                   TracerArrayConversionError, TracerBoolConversionError,
                                   TracerIntegerConversionError, UnexpectedTracerError)

# --------------------------------------------------------------------------------------------
# Abstract values (the types live in jaxkit.avals; here, the abstract value of a value)
# --------------------------------------------------------------------------------------------

# Registry from Python type to a function giving the abstract value of a concrete value.
# Array registers itself here; tracers are handled by their class.
pytype_aval_mappings: dict[type, Callable[[Any], ShapedArray]] = {}

_scalar_avals: dict[tuple[type, bool], ShapedArray] = {}


def _python_scalar_aval(x) -> ShapedArray:
    key = (type(x), config.x64)
    aval = _scalar_avals.get(key)
    if aval is None:
        dt = dtypes.canonicalize_dtype(dtypes.python_scalar_dtype(type(x)))
        aval = _scalar_avals[key] = ShapedArray((), dt, weak_type=type(x) is not bool)
    return aval


def _python_int_aval(x) -> ShapedArray:
    """A Python int's type: the default int, weakly typed; JAX's error for one out of its
    range (NumPy's words would come later, converting it)."""
    aval = _python_scalar_aval(x)
    if not -(2 ** 63) <= x < 2 ** 63 if config.x64 else not -(2 ** 31) <= x < 2 ** 31:
        raise OverflowError(f"Python int {x} too large to convert to {aval.dtype.name}")
    return aval


def _numpy_aval(x) -> ShapedArray:
    return ShapedArray(x.shape, dtypes.canonicalize_dtype(x.dtype))


for _t in (float, complex, bool):
    pytype_aval_mappings[_t] = _python_scalar_aval
pytype_aval_mappings[int] = _python_int_aval
pytype_aval_mappings[np.ndarray] = _numpy_aval
pytype_aval_mappings[Token] = lambda _: abstract_token
for _t in set(np.sctypeDict.values()):
    pytype_aval_mappings[_t] = _numpy_aval
for _t in dtypes.extra_scalar_types():
    pytype_aval_mappings[_t] = _numpy_aval


def get_aval(x) -> ShapedArray:
    """The abstract value of any array-like: tracer, Array, NumPy value or Python scalar."""
    if isinstance(x, Tracer):
        return x.aval
    handler = pytype_aval_mappings.get(type(x))
    if handler is not None:
        return handler(x)
    for t in type(x).__mro__[1:]:
        handler = pytype_aval_mappings.get(t)
        if handler is not None:
            return handler(x)
    if hasattr(x, "__jax_array__"):
        return get_aval(x.__jax_array__())
    if isinstance(x, str):  # JAX's words, for a string and for anything else
        raise TypeError(f"Argument '{x}' of type {type(x)} is not a valid JAX type")
    raise TypeError(f"Argument '{x}' of type '{type(x)}' is not a valid JAX type")


def shaped_abstractify(x) -> ShapedArray:
    """The type a traced argument of ``jit(f).trace``/``eval_shape``/``make_jaxpr`` stands
    for: an array-like's aval, an abstract value itself, or, as JAX's, any object with a
    ``shape`` and a ``dtype`` (Flax passes ShapedArrays, Optax objects of its own)."""
    if isinstance(x, ShapedArray):
        return x
    try:
        return get_aval(x)
    except TypeError:
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return ShapedArray(np.shape(x), dtypes.canonicalize_dtype(x.dtype),
                               weak_type=getattr(x, "weak_type", False))
        raise


def is_array_like(x) -> bool:
    try:
        get_aval(x)
    except TypeError:
        return False
    return True


# --------------------------------------------------------------------------------------------
# Primitives
# --------------------------------------------------------------------------------------------


class Primitive:
    """A named operation. Its rules live in per-kind tables owned by the interpreters.

    ``impl`` (eager evaluation) and ``abstract_eval`` (shape/dtype rule) are stored on the
    primitive because every trace needs them; arrays are positional, static parameters
    keyword-only and hashable.
    """

    multiple_results = False
    # JAX's flags on primitives (read by libraries; jaxkit's rules do not need them).
    call_primitive = False
    ref_primitive = False
    ref_allocating = False
    skip_canonicalization = False
    is_effectful = None
    # Parameters every equation of the primitive carries, filled in where a binder leaves
    # them out: JAX's full set (``sharding=None``, ``out_dtype=None``), so interpreters that
    # read ``eqn.params`` find JAX's keys. Set with ``def_param_defaults``.
    param_defaults: dict = {}

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return self.name

    def bind(self, *args, **params):
        if self.param_defaults:
            params = self._with_defaults(params)
        if avals_mod.vma_seen:  # operands varying over different manual axes are joined
            args = avals_mod.vma_join(self, args, params)
        return _current_trace.get().process_primitive(self, args, params)

    def def_param_defaults(self, **defaults) -> None:
        """Parameters the primitive's equations always have, with their defaults (appended
        after the given ones, in this order, as JAX's binders order them)."""
        self.param_defaults = defaults

    def _with_defaults(self, params: dict) -> dict:
        for k, v in self.param_defaults.items():
            if k not in params:  # (params is the binder's own dict: filled in place)
                params[k] = v
        return params

    def def_impl(self, impl: Callable) -> Callable:
        self.impl = impl
        return impl

    def def_abstract_eval(self, abstract_eval: Callable) -> Callable:
        prim = self

        def typed_abstract_eval(*avals, **params):
            out = abstract_eval(*avals, **params)
            # Shardings over Explicit mesh axes and varying manual axes: until such a type
            # exists no shape rule pays for their rules (lax.sharding_rules, parallel_vma).
            if avals_mod.explicit_shardings_seen:
                out = avals_mod.sharding_hook(prim, avals, params, out)
            if avals_mod.memory_spaces_seen:  # likewise once a value is in host memory
                out = avals_mod.memory_space_rule(prim, avals, params, out)
            return avals_mod.vma_hook(prim, avals, params, out) if avals_mod.vma_seen else out

        self.abstract_eval = typed_abstract_eval
        return abstract_eval

    def def_effectful_abstract_eval(self, effectful_abstract_eval: Callable) -> Callable:
        """``effectful_abstract_eval(*avals, **params) -> (out_avals, effects)``: the shape
        rule, and the effects an equation has (an effect on an input names it by position;
        the equation names the operand). Equations with effects are kept though their
        results are unused."""
        rule = effectful_abstract_eval
        self.def_abstract_eval(lambda *avals, **params: rule(*avals, **params)[0])

        def effects_of(eqn):
            _, effects = rule(*[v.aval for v in eqn.invars], **eqn.params)
            return {e.replace(eqn.invars[e.input]) if isinstance(e, JaxprInputEffect)
                    and type(e.input) is int else e for e in effects}

        effect_rules[self] = effects_of
        declared_effect_primitives.add(self)
        return rule

    def bind_with_trace(self, trace: Trace, args: Sequence, avals: Sequence, params: dict, /):
        """Bind under ``trace`` (JAX's signature: the operands' avals too)."""
        if self.param_defaults:  # (a copy: the caller's dict may be an equation's)
            params = self._with_defaults(dict(params))
        with set_current_trace(trace):
            return trace.process_primitive(self, args, params)

    def def_bind_with_trace(self, bind_with_trace: Callable) -> Callable:
        """Replace how the primitive binds: ``bind_with_trace(trace, args, avals, params)``
        with the current trace."""
        self.bind_with_trace = bind_with_trace
        self.bind = lambda *args, **params: bind_with_trace(  # type: ignore[method-assign]
            _current_trace.get(), args, [get_aval(a) for a in args], params)
        return bind_with_trace

    def get_bind_params(self, params: dict) -> dict:
        return params

    def to_lojax(self, *args, **params):
        raise NotImplementedError(f"Primitive '{self.name}' has is_high=True but no to_lojax "
                                  "lowering rule.")

    def impl(self, *args, **params):
        raise NotImplementedError(f"eager evaluation rule for '{self.name}' is not implemented")

    def abstract_eval(self, *avals, **params):
        raise NotImplementedError(f"abstract evaluation rule for '{self.name}' is not "
                                  "implemented")


# --------------------------------------------------------------------------------------------
# Traces and tracers
# --------------------------------------------------------------------------------------------


class Trace:
    """A transformation in progress. Subclasses implement ``process_primitive``.

    A trace receives values that are either its own tracers or anything else (concrete arrays,
    tracers of enclosing traces); the latter are constants to it. It runs rules with its parent
    made current so that those constants are handled further out.
    """

    __slots__ = ("parent", "_invalid", "__weakref__")

    def __init__(self, parent: Trace | None = None):
        self.parent = parent if parent is not None else _current_trace.get()
        self._invalid = False

    def process_primitive(self, primitive: Primitive, args: Sequence, params: dict):
        raise NotImplementedError

    def invalidate(self):
        self._invalid = True

    def __repr__(self):
        return f"{type(self).__name__}"


class EvalTrace(Trace):
    """The bottom trace: primitives run eagerly on concrete values."""

    def __init__(self):
        self.parent = None
        self._invalid = False

    def process_primitive(self, primitive, args, params):
        return primitive.impl(*args, **params)


eval_trace = EvalTrace()
# The current trace, per thread and per asyncio task. A context variable rather than a
# threading.local: reading it is the first thing every eager primitive and every jit call
# does, and ContextVar.get costs about half as much.
_current_trace: contextvars.ContextVar[Trace] = contextvars.ContextVar(
    "jaxkit_current_trace", default=eval_trace)
current_trace: Callable[[], Trace] = _current_trace.get


@contextlib.contextmanager
def set_current_trace(trace: Trace) -> Iterator[Trace]:
    """Make ``trace`` current for the duration of the block."""
    token = _current_trace.set(trace)
    try:
        yield trace
    finally:
        _current_trace.reset(token)


@contextlib.contextmanager
def eval_context() -> Iterator[None]:
    """Evaluate eagerly inside the block (JAX's ``jax.core.eval_context``)."""
    with set_current_trace(eval_trace):
        yield


@contextlib.contextmanager
def new_trace(trace: Trace) -> Iterator[Trace]:
    """Make a new trace current; afterwards it is invalid, so leaked tracers are detected."""
    with set_current_trace(trace):
        try:
            yield trace
        finally:
            trace.invalidate()


def check_no_leaks(trace_ref: weakref.ref) -> None:
    """With ``jax_check_tracer_leaks`` on (``jax.checking_leaks()``), raise if tracers of an
    ended trace are still reachable: a function saved an intermediate value somewhere that
    outlives its transformation. Callers drop their own references to the trace and its
    tracers first and pass a weak reference."""
    if not config.jax_check_tracer_leaks:
        return
    trace = trace_ref()
    if trace is None:
        return
    gc.collect()  # tracers alive only through reference cycles are unreachable, not leaked
    leaked = [r for r in gc.get_referrers(trace) if isinstance(r, Tracer)]
    if leaked:
        msgs = []
        for t in leaked:
            msgs.append(f"{t!r} of type {t.aval.str_short()}, created {_tracer_origin(t)} and "
                        f"kept after that transformation ended.{_why_alive(t, leaked)}")
        raise Exception(f"Leaked trace {trace!r}. Leaked tracer(s):\n\n" + "\n\n".join(msgs)
                        + "\n")


def _why_alive(x: Any, ignore: list) -> str:
    """What holds ``x`` (its direct referrers), to find where it leaked."""
    lines = []
    for r in gc.get_referrers(x):
        if r is not ignore and not isinstance(r, types.FrameType):
            lines.append(f"\n<{type(x).__name__} {id(x)}> is referred to by "
                         f"<{type(r).__name__} {id(r)}>")
    return "".join(lines)


def trace_is_live(trace: Trace) -> bool:
    t = _current_trace.get()
    while t is not None:
        if t is trace:
            return True
        t = t.parent
    return False


def check_tracer_live(tracer: Tracer) -> None:
    """Raise ``UnexpectedTracerError`` for a tracer whose trace has ended or is not in scope."""
    if tracer._trace._invalid or not trace_is_live(tracer._trace):
        raise UnexpectedTracerError(leaked_tracer_message(tracer))


# Trace class name -> the transformations it stands for (core cannot import the interpreters).
_TRACE_TRANSFORMATIONS = {
    "DynamicJaxprTrace": "jit (or make_jaxpr, eval_shape, a lax control-flow body, ...)",
    "JVPTrace": "forward-mode differentiation (jvp, grad, jacfwd, ...)",
    "JaxprTrace": "linearization (grad, vjp, linearize, ...)",
    "BatchTrace": "vmap",
}


def _tracer_origin(tracer: Tracer) -> str:
    """"while tracing the function f defined at ... for jit" (or "by vmap", ...)."""
    trace = tracer._trace
    kind = _TRACE_TRANSFORMATIONS.get(type(trace).__name__, type(trace).__name__)
    debug = getattr(trace, "debug", None)
    if debug is not None and hasattr(debug, "func_name"):
        where = f" defined at {debug.func_src_info}" if debug.func_src_info else ""
        return f"while tracing the function {debug.func_name}{where} for {debug.traced_for}"
    if isinstance(debug, str) and debug:
        return f"by {kind} of the function {debug}"
    return f"by {kind}"


def leaked_tracer_message(tracer: Tracer) -> str:
    """JAX's words for a tracer used after (or outside) its transformation: what leaked,
    from which traced function (a jit's tracers know it), and how to catch it earlier."""
    msg = ("Encountered an unexpected tracer. A function transformed by JAX had a side effect, "
           "allowing for a reference to an intermediate value with type "
           f"{tracer.aval.str_short(short_dtypes=False)} wrapped in a {type(tracer).__name__} "
           "to escape the scope of the transformation.\nJAX transformations require that "
           "functions explicitly return their outputs, and disallow saving intermediate "
           "values to global state.")
    debug = getattr(tracer._trace, "debug", None)
    if getattr(debug, "func_name", None) is not None:
        src = f"{debug.func_name} at {debug.func_src_info}" if debug.func_src_info else \
            debug.func_name
        divider = "\n" + "-" * 30 + "\n"
        creation_line = getattr(tracer._trace, "creation_line", None)
        line = creation_line(tracer) if creation_line else ""  # ("" for an argument, as JAX)
        msg += (f"\nThe function being traced when the value leaked was {src} traced for "
                f"{debug.traced_for}.{divider}The leaked intermediate value was created on "
                f"line {line}. {divider}When the value was created, the final 5 stack frames "
                f"(most recent last) excluding JAX-internal frames were:{divider}{line}"
                f"{divider}")
    return msg + ("\nTo catch the leak earlier, try setting the environment variable "
                  "JAX_CHECK_TRACER_LEAKS or using the `jax.checking_leaks` context manager.")


class Tracer:
    """A value being traced by a ``Trace``. Behaves like an array of shape ``aval.shape``.

    Operator overloading and array methods come from ``jaxkit.numpy``, the rows of ``a, b =
    tracer`` (``_iter_rows``: ``index_in_dim``, as JAX's) from ``jaxkit.lax``; core is below."""

    __slots__ = ("_trace", "__weakref__")
    __array_priority__ = 1000
    _iter_rows = staticmethod(lambda t: (t[i] for i in range(t.shape[0])))

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")  # JAX's words
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")  # JAX's words
        return Tracer._iter_rows(self)

    def __repr__(self):
        return f"Traced<{self.aval.str_short()}>with<{type(self._trace).__name__}>"

    # Static facts of the type, available while tracing (as JAX's tracers have them).
    nbytes = property(lambda self: self.aval.size * self.aval.dtype.itemsize)
    itemsize = property(lambda self: self.aval.dtype.itemsize)

    # A tracer has no concrete value; each conversion raises JAX's error, in JAX's words,
    # with where the value came from (the trace says: ``origin_message``; a jit's trace that
    # has ended says instead that the value leaked, as JAX's does).
    def _error_repr(self) -> str:
        return f"traced array with shape {self.aval.str_short(short_dtypes=False)}"

    def _origin_msg(self) -> str:
        """Where the value comes from (which arguments of which traced function, or the line
        that made it), as JAX's tracers say it; "" when the trace cannot tell."""
        origin = getattr(self._trace, "origin_message", None)
        return origin(self) if origin is not None else ""

    def __bool__(self):
        raise TracerBoolConversionError(
            f"Attempted boolean conversion of {self._error_repr()}.{self._origin_msg()}")

    def __index__(self):
        if self.shape or not np.issubdtype(self.dtype, np.integer):  # JAX's words
            raise TypeError("Only integer scalar arrays can be converted to a scalar index.")
        raise TracerIntegerConversionError(
            f"The __index__() method was called on {self._error_repr()}{self._origin_msg()}")

    def __int__(self):
        raise concretization_error(self, _conversion_context("int"))

    def __float__(self):
        raise concretization_error(self, _conversion_context("float"))

    def __complex__(self):
        raise concretization_error(self, _conversion_context("complex"))

    def __array__(self, dtype=None, copy=None):
        # An operation handed a tracer of an ended trace (or one out of scope) converts it as
        # a host value: that value leaked, which JAX reports when its operation binds it.
        if self._trace._invalid or not trace_is_live(self._trace):
            raise UnexpectedTracerError(leaked_tracer_message(self))
        raise TracerArrayConversionError(
            "The numpy.ndarray conversion method __array__() was called on "
            f"{self._error_repr()}{self._origin_msg()}")

    def item(self):
        raise concretization_error(self, "This occurred in the item() method of jax.Array")

    def tolist(self):
        raise concretization_error(
            self, f"The tolist() method was called on {self._error_repr()}."
            f"{self._origin_msg()}")

    def __setitem__(self, idx, value):
        raise TypeError(IMMUTABLE_MESSAGE)

    def __hash__(self):
        raise TypeError(f"unhashable type: {type(self).__name__!r}")  # Python's words, as JAX


def _conversion_context(fname: str) -> str:
    return (f"The problem arose with the `{fname}` function. If trying to convert the data "
            f"type of a value, try using `x.astype({fname})` or `jnp.array(x, {fname})` "
            "instead.")


# JAX's words (the page lists the .at[] methods: set, add, multiply, min, max, ...)
IMMUTABLE_MESSAGE = ("JAX arrays are immutable and do not support in-place item assignment. "
                     "Instead of x[idx] = y, use x = x.at[idx].set(y) or another .at[] method: "
                     "https://docs.jax.dev/en/latest/_autosummary/jax.numpy.ndarray.at.html")


def concretization_error(tracer: Tracer, context: str = "") -> ConcretizationTypeError:
    """JAX's ConcretizationTypeError for ``tracer``: what was needed (``context``, which
    a caller may end with the tracer's own origin), then where the value came from."""
    return ConcretizationTypeError(
        "Abstract tracer value encountered where concrete value is expected: "
        f"{tracer._error_repr()}\n{context}{tracer._origin_msg()}\n")


def concrete_or_error(value, context: str = ""):
    """Return a concrete (NumPy or Python) value, or raise a ConcretizationTypeError."""
    if isinstance(value, Tracer):
        raise concretization_error(value, context)
    return value


def _is_constant_dim(d) -> bool:
    """Whether a dimension is a known integer (jaxkit's shapes always are, but for the
    symbolic dimensions of ``jax.export``)."""
    try:
        operator.index(d)
    except TypeError:
        return False
    return True


def _is_constant_shape(shape) -> bool:
    return all(_is_constant_dim(d) for d in shape)


_is_constant_dim.__name__, _is_constant_shape.__name__ = "is_constant_dim", "is_constant_shape"

# What JAX 0.10.2's ``jax.core`` still answers for the names it moved (to ``jax.extend.core``,
# served from there with its warning) or dropped. The names this module defines for jaxkit's
# own use are found before these (they work, without a warning).
_MOVED = ("CallPrimitive", "DebugInfo", "check_jaxpr", "find_top_trace", "gensym",
          "get_opaque_trace_state", "jaxprs_in_params", "new_jaxpr_eqn",
          "primal_dtype_to_tangent_dtype", "valid_jaxtype")
_MOVED_QUIETLY = ("nonempty_axis_env_DO_NOT_USE", "unsafe_am_i_under_a_jit_DO_NOT_USE",
                  "unsafe_am_i_under_a_vmap_DO_NOT_USE", "unsafe_get_axis_names_DO_NOT_USE")
_UNSERVED = ("JaxprPpContext", "JaxprPpSettings", "OutputType", "aval_mapping_handlers", "call",
             "concretization_function_error", "custom_typechecks", "is_concrete",
             "literalable_types", "no_axis_name", "trace_ctx")
_REMOVED_MOVED = ("mapped_aval", "unmapped_aval", "take_current_trace", "TraceTag", "call_impl")
_deprecations = {
    **{name: (f"jax.core.{name} is deprecated. Use jax.extend.core.{name}.",
              f"jaxkit.extend.core:{name}") for name in _MOVED},
    **{name: (f"jax.core.{name} is deprecated.", f"jaxkit.extend.core:{name}")
       for name in _MOVED_QUIETLY},
    "InconclusiveDimensionOperation": (
        "jax.core.InconclusiveDimensionOperation is deprecated. Use "
        "jax.errors.InconclusiveDimensionOperation.",
        "jaxkit.extend.core:InconclusiveDimensionOperation"),
    "is_constant_dim": ("jax.core.is_constant_dim is deprecated.", _is_constant_dim),
    "is_constant_shape": ("jax.core.is_constant_shape is deprecated.", _is_constant_shape),
    **{name: removed(f"jax.core.{name} is deprecated. jaxkit does not provide it (an internal "
                     f"of JAX's tracing machinery).") for name in _UNSERVED},
    **{name: removed(f"jax.core.{name} was deprecated in JAX v0.8.2 and removed in JAX "
                     f"v0.10.0. Use jax.extend.core.{name}.") for name in _REMOVED_MOVED},
    "traverse_jaxpr_params": removed("jax.core.traverse_jaxpr_params was deprecated in JAX "
                                     "v0.8.2 and removed in JAX v0.10.0."),
}
__getattr__ = deprecation_getattr(__name__, _deprecations)
