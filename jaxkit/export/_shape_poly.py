"""Symbolic dimensions (``jax.export.symbolic_shape``): parsed, printed and combined as JAX does.

A dimension expression is a polynomial with integer coefficients over *factors*: variables
(``b``) and the operations ``mod``, ``floordiv``, ``max`` and ``min`` of expressions. Terms are
kept in JAX's syntactic order (larger terms first, the constant last), so expressions print
as JAX prints them (``2*a*b - a``, ``b + a``, ``a^2``).

jaxkit represents and prints symbolic shapes, but does not trace or export with them (its
tracer needs concrete shapes): ``export`` raises ``NotImplementedError`` for a symbolic
argument shape.
"""
from __future__ import annotations

import re
import traceback
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import dtypes
from jaxkit import tree_util
from jaxkit.api import ShapeDtypeStruct

_OPERATIONS = ("floordiv", "mod", "max", "min")


class InconclusiveDimensionOperation(Exception):
    """A comparison or operation on symbolic dimensions whose result depends on their values."""


class SymbolicScope:
    """The scope that symbolic dimensions belong to (JAX uses it to hold constraints; jaxkit
    records the constraints given, and where the scope was made)."""

    def __init__(self, constraints_str: Sequence[str] = ()):
        if isinstance(constraints_str, str):
            raise ValueError("The symbolic constraints should be a sequence of strings. "
                             f"Got {constraints_str!r}")
        self.constraints = tuple(constraints_str)
        frame = traceback.extract_stack(limit=2)[0]
        self._location = f"{frame.filename}:{frame.lineno}:{frame.colno} ({frame.name})"

    def __str__(self) -> str:
        return f"{id(self)} created at {self._location}"

    __repr__ = __str__


class _Factor:
    """A variable, or an operation applied to expressions."""

    __slots__ = ("var", "operation", "operands", "size")

    def __init__(self, var: str | None = None, operation: str | None = None,
                 operands: tuple = ()):
        self.var, self.operation, self.operands = var, operation, operands
        self.size = 1 if var is not None else 1 + sum(_size(o) for o in operands)

    def key(self) -> tuple:
        if self.var is not None:
            return (self.size, self.var)
        return (self.size, self.operation, tuple(_expr_key(o) for o in self.operands))

    def __eq__(self, other) -> bool:
        return isinstance(other, _Factor) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __str__(self) -> str:
        if self.var is not None:
            return self.var
        return f"{self.operation}({', '.join(map(str, self.operands))})"


def _size(d) -> int:
    return d.size if isinstance(d, _DimExpr) else 1


def _expr_key(d) -> tuple:
    # a constant is one term of the empty product (size 0)
    return d.key() if isinstance(d, _DimExpr) else (1, (((0, ()), int(d)),))


def _term_key(term: tuple) -> tuple:
    """A term is a tuple of (factor, exponent) sorted by factor; the empty term is 1."""
    return (sum(1 + e * f.size for f, e in term), tuple((f.key(), e) for f, e in term))


class _DimExpr:
    """A symbolic dimension: ``{term: coefficient}`` with terms in JAX's syntactic order."""

    __slots__ = ("terms", "scope", "size", "_key")

    def __init__(self, coeffs: dict, scope: SymbolicScope):
        items = [(t, c) for t, c in coeffs.items() if c != 0]
        items.sort(key=lambda tc: (_term_key(tc[0]), tc[1]), reverse=True)
        self.terms = tuple(items)
        self.scope = scope
        self.size = sum(1 + abs(c) * _term_key(t)[0] for t, c in self.terms)
        self._key = (self.size, tuple((_term_key(t), c) for t, c in self.terms))

    def key(self) -> tuple:
        return self._key

    @staticmethod
    def make(coeffs: dict, scope: SymbolicScope) -> _DimExpr | int:
        """The normal form: a plain int when no variable is left."""
        items = {t: c for t, c in coeffs.items() if c != 0}
        if not items or list(items) == [()]:
            return int(items.get((), 0))
        return _DimExpr(items, scope)

    def _coeffs(self) -> dict:
        return dict(self.terms)

    def _other(self, other) -> dict | None:
        if isinstance(other, _DimExpr):
            if other.scope is not self.scope:
                raise ValueError("Invalid mixing of symbolic scopes: the two expressions "
                                 f"{self} and {other} were made in different scopes; parse "
                                 "them with one symbolic_shape call or pass scope=.")
            return other._coeffs()
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool):
            return {(): int(other)}
        return None

    def __add__(self, other):
        o = self._other(other)
        if o is None:
            return NotImplemented
        out = self._coeffs()
        for t, c in o.items():
            out[t] = out.get(t, 0) + c
        return _DimExpr.make(out, self.scope)

    __radd__ = __add__

    def __neg__(self):
        return _DimExpr.make({t: -c for t, c in self.terms}, self.scope)

    def __sub__(self, other):
        o = self._other(other)
        if o is None:
            return NotImplemented
        return self + _DimExpr.make({t: -c for t, c in o.items()}, self.scope)

    def __rsub__(self, other):
        return (-self) + other

    def __mul__(self, other):
        o = self._other(other)
        if o is None:
            return NotImplemented
        out: dict = {}
        for t1, c1 in self.terms:
            for t2, c2 in o.items():
                t = _mul_terms(t1, t2)
                out[t] = out.get(t, 0) + c1 * c2
        return _DimExpr.make(out, self.scope)

    __rmul__ = __mul__

    def __eq__(self, other) -> bool:
        if isinstance(other, _DimExpr):
            return self.scope is other.scope and self._key == other._key
        if isinstance(other, (int, np.integer)):
            return False  # a non-constant expression differs from every constant syntactically
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._key)

    def __str__(self) -> str:
        parts = []
        for t, c in self.terms:
            sign = "+" if c > 0 else "-"
            if not t:
                parts.append(f"{sign} {abs(c)}")
            elif abs(c) == 1:
                parts.append(f"{sign} {_term_str(t)}")
            else:
                parts.append(f"{sign} {abs(c)}*{_term_str(t)}")
        text = " ".join(parts)
        return text[2:] if text.startswith("+ ") else text

    __repr__ = __str__

    def __int__(self):
        raise InconclusiveDimensionOperation(
            f"Symbolic dimension '{self}' used where a constant integer is needed.")

    def __index__(self):
        raise InconclusiveDimensionOperation(
            f"Symbolic dimension '{self}' used where a constant integer is needed.")


def _term_str(term: tuple) -> str:
    return "*".join(f"{f}^{e}" if e != 1 else str(f) for f, e in term)


def _mul_terms(t1: tuple, t2: tuple) -> tuple:
    exps: dict = {}
    by_key: dict = {}
    for f, e in t1 + t2:
        k = f.key()
        by_key[k] = f
        exps[k] = exps.get(k, 0) + e
    return tuple((by_key[k], exps[k]) for k in sorted(exps))


def _var(name: str, scope: SymbolicScope) -> _DimExpr:
    return _DimExpr({((_Factor(var=name), 1),): 1}, scope)


def _operation(name: str, operands: list, scope: SymbolicScope) -> _DimExpr | int:
    if all(isinstance(o, int) for o in operands):
        a, b = operands
        return {"floordiv": a // b, "mod": a % b, "max": max(a, b), "min": min(a, b)}[name]
    return _DimExpr({((_Factor(operation=name, operands=tuple(operands)), 1),): 1}, scope)


def is_symbolic_dim(p: Any) -> bool:
    """Whether ``p`` is a symbolic dimension (not a constant)."""
    return isinstance(p, _DimExpr)


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<NUMBER>\d+)|(?P<NAME>[a-zA-Z_][a-zA-Z0-9_]*)|(?P<OP>[-+*(),^]))")


class _Parser:
    def __init__(self, spec: str, like: Sequence | None, scope: SymbolicScope):
        self.spec, self.like, self.scope = spec, like, scope
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(spec):
            m = _TOKEN.match(spec, pos)
            if m is None or m.end() == pos:
                if spec[pos:].strip() == "":
                    break
                self.tokens.append(("OTHER", spec[pos:].strip(), pos))
                break
            kind = m.lastgroup or "OP"
            self.tokens.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.i = 0
        self.dim = 0

    def error(self, what: str):
        pos = self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.spec)
        return ValueError(f"syntax error in symbolic shape '{self.spec}' in dimension "
                          f"{self.dim}: {what}. Parsed '{self.spec[:pos]}', remaining "
                          f"'{self.spec[pos:]}'.")

    def _enclosed_in_parens(self) -> bool:
        """Whether the whole spec is ``( ... )`` (a tuple written with its parentheses)."""
        if not self.tokens or self.tokens[0][:2] != ("OP", "(") or self.tokens[-1][:2] != (
                "OP", ")"):
            return False
        depth = 0
        for n, (kind, value, _) in enumerate(self.tokens):
            if kind == "OP" and value == "(":
                depth += 1
            elif kind == "OP" and value == ")":
                depth -= 1
                if depth == 0:
                    return n == len(self.tokens) - 1
        return False

    def peek(self) -> tuple[str, str] | None:
        if self.i < len(self.tokens):
            return self.tokens[self.i][:2]
        return None

    def take(self, value: str) -> bool:
        tok = self.peek()
        if tok is not None and tok[0] == "OP" and tok[1] == value:
            self.i += 1
            return True
        return False

    def parse(self) -> tuple:
        if self._enclosed_in_parens():
            self.i += 1
            self.tokens.pop()
        dims: list = []
        while self.peek() is not None:
            tok = self.peek()
            if tok == ("NAME", "_"):
                if self.like is None or self.dim >= len(self.like):
                    raise self.error("cannot resolve placeholder '_' because we parsed "
                                     f"{self.dim} already and 'like' shape has only "
                                     f"{0 if self.like is None else len(self.like)} dimensions")
                self.i += 1
                dims.append(int(self.like[self.dim]))
            else:
                dims.append(self.expr())
            if self.peek() is not None and not self.take(","):
                raise self.error("expecting one of {COMMA} but found " + self.peek()[0])
            self.dim += 1
        if self.like is not None and len(dims) != len(self.like):
            raise ValueError(f"syntax error in symbolic shape '{self.spec}': the shape has "
                             f"{len(dims)} dimensions but the 'like' shape has "
                             f"{len(self.like)}.")
        return tuple(dims)

    def expr(self):
        negate = self.take("-")
        acc = self.term()
        if negate:
            acc = -acc
        while True:
            if self.take("+"):
                acc = acc + self.term()
            elif self.take("-"):
                acc = acc - self.term()
            else:
                return acc

    def term(self):
        acc = self.power()
        while self.take("*"):
            acc = acc * self.power()
        tok = self.peek()
        if tok is not None and tok[0] in ("NAME", "NUMBER"):
            raise self.error("expecting one of {STAR} but found " + tok[0])
        return acc

    def power(self):
        base = self.atom()
        if self.take("^"):
            tok = self.peek()
            if tok is None or tok[0] != "NUMBER":
                raise self.error("expecting an integer exponent")
            self.i += 1
            result = 1
            for _ in range(int(tok[1])):
                result = base * result
            return result
        return base

    def atom(self):
        tok = self.peek()
        if tok is None or tok[0] in ("OTHER", "OP"):
            # JAX's grammar has no parenthesised sub-expressions: write them expanded
            found = "ENDMARKER" if tok is None else {
                ",": "COMMA", "(": "LPAR", ")": "RPAR", "*": "STAR", "+": "PLUS",
                "^": "CIRCUMFLEX"}.get(tok[1], tok[1])
            raise self.error("expecting one of {NAME, MINUS, NUMBER} but found " + found)
        self.i += 1
        if tok[0] == "NUMBER":
            return int(tok[1])
        if tok[1] in _OPERATIONS and self.take("("):
            a = self.expr()
            if not self.take(","):
                raise self.error(f"expecting ',' between the operands of {tok[1]}")
            b = self.expr()
            if not self.take(")"):
                raise self.error("expecting ')'")
            return _operation(tok[1], [a, b], self.scope)
        return _var(tok[1], self.scope)


def symbolic_shape(shape_spec: str | None, *, constraints: Sequence[str] = (),
                   scope: SymbolicScope | None = None,
                   like: Sequence[int | None] | None = None) -> tuple:
    """Parse ``"b, 2*a + 1"`` into a shape of symbolic dimensions and ints."""
    if scope is None:
        scope = SymbolicScope(constraints)
    elif constraints:
        raise ValueError("Cannot specify both a `scope` and `constraints`.")
    if shape_spec is None:
        shape_spec = ", ".join("_" for _ in like) if like is not None else ""
    if "..." in shape_spec:
        if like is None:
            raise ValueError(f"syntax error in symbolic shape '{shape_spec}' in dimension 0: "
                             "spec contains ... but no 'like' shape was given. Parsed '', "
                             f"remaining '{shape_spec}'.")
        before, _, after = shape_spec.partition("...")
        if after.strip():
            raise ValueError(f"syntax error in symbolic shape '{shape_spec}': '...' may only "
                             "end the shape (it stands for the remaining dimensions of "
                             "'like').")
        n_before = len([p for p in before.split(",") if p.strip()])
        fill = ", ".join("_" for _ in range(len(like) - n_before))
        shape_spec = ", ".join(p for p in (before.strip(" ,"), fill) if p)
    return _Parser(shape_spec, like, scope).parse()


def symbolic_args_specs(args: Any, shapes_specs: Any, constraints: Sequence[str] = (),
                        scope: SymbolicScope | None = None) -> Any:
    """``ShapeDtypeStruct``s like ``args`` with the symbolic shapes ``shapes_specs`` (one string
    for all, or a pytree of strings matching ``args``); all share one scope."""
    leaves, tree = tree_util.tree_flatten(args)
    if shapes_specs is None or isinstance(shapes_specs, str):
        specs = [shapes_specs] * len(leaves)
    else:
        specs = tree.flatten_up_to(shapes_specs)
    if scope is None:
        scope = SymbolicScope(constraints)
    elif constraints:
        raise ValueError("Cannot use both `scope` and `constraints`")
    out = [ShapeDtypeStruct(symbolic_shape(spec, like=np.shape(x), scope=scope),
                            dtypes.canonicalize_dtype(np.result_type(x)))
           for x, spec in zip(leaves, specs)]
    return tree_util.tree_unflatten(tree, out)
