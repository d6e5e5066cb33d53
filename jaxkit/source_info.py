"""Where in the user's code an equation came from.

Tracing records, with every equation, the innermost frame of the Python stack that is not in
jaxkit itself (nor in a path registered with ``register_exclusion``, as libraries built on
jaxkit do): file, line and function. The lowering turns it into an MLIR location, so XLA's
compiled HLO carries ``metadata={op_name=... source_file=... source_line=...}``, which
profilers and ``%%jit -a`` read.

Finding the frame is a walk up ``sys._getframe()`` comparing file names with a tuple of
prefixes (no ``inspect``, no traceback objects): about a microsecond per equation.

Interpreters that re-emit the equations of a jaxpr (``eval_jaxpr``, transposition, lowering)
run each equation under ``user_context(eqn.source_info)``, so that equations derived from it
(its batched form, its transpose, the jaxpr a lowering rule traces) keep the user's line
instead of pointing at the line that called the transformation.
"""
from __future__ import annotations

import contextvars
import os
import sys
from typing import Any, NamedTuple

__all__ = ["EqnContext", "Metadata", "NameStack", "Scope", "SourceInfo", "Transform",
           "api_boundary", "compute_type_of", "current", "current_name_stack",
           "excluded_paths", "metadata_of", "name_stack_context", "register_exclusion",
           "trace_names", "user_context"]


class Scope(NamedTuple):
    """A named scope: ``jax.named_scope(name)``."""

    name: str

    def wrap(self, stack: list[str]) -> None:
        stack.append(self.name)


class Transform(NamedTuple):
    """A transformation around the scopes inside it: printed ``name(inner)``."""

    name: str

    def wrap(self, stack: list[str]) -> None:
        if stack:
            stack[-1] = f"{self.name}({stack[-1]})"
        else:
            stack.append(f"{self.name}()")


class Metadata(NamedTuple):
    """XLA frontend attributes for the ops of the equations inside: ``set_xla_metadata``'s
    context form. Carried with the scopes so that it follows equations through tracing and
    nested jaxprs as names do, and printed as nothing."""

    items: tuple[tuple[str, Any], ...]
    compute_type: str | None = None  # ``compute_on``'s: its items are XLA's words for it

    def wrap(self, stack: list[str]) -> None:
        pass


def metadata_of(names: NameStack) -> dict[str, Any]:
    """The frontend attributes that the ``Metadata`` entries of ``names`` set, inner ones
    overriding outer ones and a ``None`` value removing a key."""
    out: dict[str, Any] = {}
    for elem in names.stack:
        if type(elem) is Metadata:
            out.update(elem.items)
    return {k: v for k, v in out.items() if v is not None}


# Set once ``compute_on`` is used: until then no trace looks for a compute type.
compute_types_used = False


def compute_type_of(names: NameStack) -> Metadata | None:
    """The innermost ``compute_on`` entry of ``names`` (None outside any)."""
    for elem in reversed(names.stack):
        if type(elem) is Metadata and elem.compute_type is not None:
            return elem
    return None


def trace_names() -> NameStack:
    """The name stack a new trace starts with: empty (a jaxpr's names are relative to the
    equation holding it) but for the ``compute_on`` type in force, which holds for the
    equations of the traces it encloses too, as in JAX."""
    entry = compute_type_of(_name_stack.get()) if compute_types_used else None
    return _EMPTY if entry is None else NameStack((entry,))


class EqnContext(NamedTuple):
    """What an equation was traced under (JAX's ``eqn.ctx``): the ``compute_on`` compute
    type and the ``set_xla_metadata`` attributes (None outside either)."""

    compute_type: str | None
    xla_metadata: dict[str, Any] | None

    @staticmethod
    def of(names: NameStack) -> EqnContext:
        entry = compute_type_of(names)
        user = tuple(e for e in names.stack if getattr(e, "compute_type", None) is None)
        return EqnContext(None if entry is None else entry.compute_type,
                          metadata_of(NameStack(user)) or None)


class NameStack(NamedTuple):
    """Scopes and transformations, outermost first; printed as ``a/jvp(b)/c``. A tuple
    subclass so that building one per equation costs no Python-level ``__init__``."""

    stack: tuple[Scope | Transform | Metadata, ...] = ()

    def extend(self, name: str) -> NameStack:
        return NameStack((*self.stack, Scope(name)))

    def transform(self, transform_name: str) -> NameStack:
        return NameStack((*self.stack, Transform(transform_name)))

    def with_metadata(self, items: tuple[tuple[str, Any], ...]) -> NameStack:
        return NameStack((*self.stack, Metadata(items)))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return NameStack(self.stack[idx])
        return self.stack[idx]

    def __len__(self) -> int:
        return len(self.stack)

    def __bool__(self) -> bool:
        return bool(self.stack)

    def __add__(self, other: NameStack) -> NameStack:
        return NameStack(self.stack + other.stack)

    def __radd__(self, other: NameStack) -> NameStack:
        return NameStack(other.stack + self.stack)

    def __str__(self) -> str:
        # Walk innermost first: a transformation wraps the scope just inside it.
        scopes: list[str] = []
        for elem in self.stack[::-1]:
            elem.wrap(scopes)
        return "/".join(reversed(scopes))

    def __repr__(self) -> str:
        return f"NameStack(stack={self.stack!r})"


_EMPTY = NameStack()
_name_stack: contextvars.ContextVar[NameStack] = contextvars.ContextVar(
    "jaxkit_name_stack", default=_EMPTY)


def current_name_stack() -> NameStack:
    """The name stack of the code running now."""
    return _name_stack.get()


class name_stack_context:
    """``with name_stack_context(stack):`` the block runs with ``stack`` as its name stack.
    A class, not a generator: tracing enters one per jaxpr it starts."""

    __slots__ = ("stack", "_token")

    def __init__(self, stack: NameStack):
        self.stack = stack
        self._token = None

    def __enter__(self) -> NameStack:
        self._token = _name_stack.set(self.stack)
        return self.stack

    def __exit__(self, *exc) -> bool:
        _name_stack.reset(self._token)
        return False


class SourceInfo(NamedTuple):
    """A user frame: ``file``, ``line`` (1-based) and ``function`` (qualified) name, the
    equation's ``name_stack`` (printed apart: ``str()`` is the location), and the 0-based
    ``column`` where the expression running there starts (-1 when unknown)."""

    file: str
    line: int
    function: str
    name_stack: NameStack = _EMPTY
    column: int = -1

    def __str__(self):
        # As JAX summarizes a frame: ``file:line:column (function)``.
        col = f":{self.column}" if self.column >= 0 else ""
        return f"{self.file}:{self.line}{col} ({self.function})"

    def replace(self, **kw) -> SourceInfo:
        return self._replace(**kw)


# jaxkit's own package directory (with the separator, so that ``jaxkit_extras/`` is not in it).
excluded_paths: list[str] = [os.path.dirname(os.path.abspath(__file__)) + os.sep]
_excluded: tuple[str, ...] = tuple(excluded_paths)


def register_exclusion(path: str) -> None:
    """Skip frames whose file name starts with ``path`` when locating user code (a library
    built on jaxkit registers its own directory)."""
    global _excluded
    if path not in excluded_paths:
        excluded_paths.append(path)
        _excluded = tuple(excluded_paths)


_override: contextvars.ContextVar[SourceInfo | None] = contextvars.ContextVar(
    "jaxkit_source_info", default=None)


def current(depth: int = 1, name_prefix: int = 0) -> SourceInfo | None:
    """The source location to record now: the one set by ``user_context`` if any, else the
    innermost frame outside the excluded paths (None when every frame is excluded and no
    scope is open), with the current name stack less its first ``name_prefix`` entries (a
    trace records names relative to the stack it started under).

    The walk starts ``depth`` frames up (1: the caller). A jaxkit caller that knows its own
    callers are jaxkit's passes more: each frame looked at costs Python a frame object, the
    main cost of the walk."""
    names = _name_stack.get()
    if name_prefix:
        names = _make(NameStack, (names.stack[name_prefix:],))
    info = _override.get()
    if info is not None:
        return _make(SourceInfo, (info.file, info.line, info.function, names, info.column))
    excluded = _excluded
    frame = sys._getframe(depth)
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.startswith(excluded):
            return _make(SourceInfo, (code.co_filename, frame.f_lineno, code.co_qualname,
                                      names, _column(code, frame.f_lasti)))
        frame = frame.f_back
    if names.stack:
        return _make(SourceInfo, ("", 0, "", names, -1))
    return None


def user_stacklevel(depth: int = 1) -> int:
    """The ``stacklevel`` for ``warnings.warn`` called ``depth`` frames below the caller that
    names the innermost frame outside the excluded paths: the user's line however deep in
    jaxkit the warning starts."""
    frame, level = sys._getframe(depth + 1), depth + 1
    while frame is not None and frame.f_code.co_filename.startswith(_excluded):
        frame, level = frame.f_back, level + 1
    return level


_columns: dict = {}


def _column(code, lasti: int) -> int:
    """The start column of the instruction at ``lasti`` (the call being made), cached per
    instruction: finding it walks the code's position table."""
    key = (code, lasti)
    col = _columns.get(key)
    if col is None:
        col = -1
        if lasti >= 0:
            for i, pos in enumerate(code.co_positions()):
                if i == lasti // 2:
                    col = -1 if pos[2] is None else pos[2]
                    break
        if len(_columns) > 100_000:  # bounded: code objects of dead functions stay otherwise
            _columns.clear()
        _columns[key] = col
    return col


_make = tuple.__new__  # SourceInfo(...) without NamedTuple's Python-level __new__


class user_context:
    """``with user_context(info):`` equations recorded inside get the location of ``info``
    (when it is not None) instead of the frame that records them, and the current name stack
    extended by ``info.name_stack``. A class, not a generator, because it wraps every
    equation an interpreter re-emits."""

    __slots__ = ("info", "_token", "_names_token")

    def __init__(self, info: SourceInfo | None):
        self.info = info
        self._token = None
        self._names_token = None

    def __enter__(self):
        info = self.info
        if info is not None:
            if info.file:  # a location-less info only carries names
                self._token = _override.set(info)
            if info.name_stack.stack:
                self._names_token = _name_stack.set(_make(
                    NameStack, (_name_stack.get().stack + info.name_stack.stack,)))
        return info

    def __exit__(self, *exc):
        if self._names_token is not None:
            _name_stack.reset(self._names_token)
            self._names_token = None
        if self._token is not None:
            _override.reset(self._token)
            self._token = None
        return False


def api_boundary(fun=None, **_):
    """Marks a library entry point (``jax._src.traceback_util.api_boundary``); the function is
    returned as it is. Modules that define user-facing wrappers use it, which is how libraries
    such as chex (``is_traceable``) recognise a transformed function: by ``api_boundary`` among
    the wrapper's globals. The filtering of tracebacks is ``jaxkit._traceback_filter``'s (a
    jitted function's dispatcher filters in its own ``except`` clause)."""
    if fun is None:
        return lambda f: f
    return fun
