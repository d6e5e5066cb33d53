"""``pltpu.einshape``: reshape and transpose by an equation such as ``"a(bc)->bac"``.

A side of the equation is a sequence of dimensions, each a name or a parenthesised group of
names; a group on the left splits that dimension (sizes the input does not give are passed as
keywords), a group on the right merges. The result is the split (a reshape), the reordering
(a transpose) and the merge (a reshape). JAX's TPU lowering can also check that the
transformation keeps the TPU's (8, 128) tiles whole (``assert_is_tile_preserving``); interpret
mode computes the same values without that check.
"""
from __future__ import annotations

import math
from typing import Any

from jaxkit import lax
from jaxkit import numpy as jnp

__all__ = ["einshape"]


def _parse_side(s: str) -> list[list[str]]:
    s = s.replace(" ", "")
    groups, i = [], 0
    while i < len(s):
        if s[i] == "(":
            j = s.find(")", i)
            if j == -1:
                raise ValueError(f"Unmatched parenthesis in {s!r}")
            groups.append(list(s[i + 1:j]))
            i = j + 1
        elif s[i] == ")":
            raise ValueError(f"Unmatched parenthesis in {s!r}")
        else:
            groups.append([s[i]])
            i += 1
    return groups


def _dim_sizes(lhs: list[list[str]], shape: tuple[int, ...], sizes: dict) -> dict[str, int]:
    if len(lhs) != len(shape):
        raise ValueError(f"Equation LHS has {len(lhs)} groups but input has {len(shape)} "
                         f"dims. LHS: {lhs}, Input shape: {shape}")
    known: dict[str, int] = {}
    for group, n in zip(lhs, shape):
        if len(group) == 1:
            name = group[0]
            if name in known and known[name] != n:
                raise ValueError(f"Inconsistent size for {name}: {known[name]} vs {n}")
            known[name] = n
            continue
        for name in group:
            if name in sizes:
                known[name] = sizes[name]
        unknown = [name for name in group if name not in known]
        product = math.prod(known[name] for name in group if name in known)
        if not unknown:
            if product != n:
                raise ValueError(f"Size mismatch for group {group}: expected {n}, got "
                                 f"{product}")
        elif len(unknown) == 1:
            if n % product != 0:
                raise ValueError(f"Cannot split size {n} with known sizes {product}")
            known[unknown[0]] = n // product
        else:
            raise ValueError(f"Ambiguous split for {group} with size {n}. Unknowns: "
                             f"{unknown}. Provide sizes via kwargs.")
    return known


def einshape(equation: str, x: Any, assert_is_tile_preserving: bool = False,
             **sizes: int) -> Any:
    """``x`` split, transposed and merged as ``equation`` says (``"ab(cd)->cabd"``)."""
    if equation.count("->") != 1:
        raise ValueError("Equation must contain exactly one '->'")
    lhs_str, rhs_str = equation.split("->")
    lhs, rhs = _parse_side(lhs_str), _parse_side(rhs_str)
    x = jnp.asarray(x)
    known = _dim_sizes(lhs, x.shape, sizes)
    flat_lhs = [n for g in lhs for n in g]
    flat_rhs = [n for g in rhs for n in g]
    for name in flat_rhs:
        if name not in known:
            if name not in sizes:
                raise ValueError(f"Unknown dimension {name} in RHS")
            known[name] = sizes[name]
    if set(flat_lhs) != set(flat_rhs):
        raise NotImplementedError(
            "Only reordering/splitting/merging supported (no broadcast yet).")
    y = lax.reshape(x, tuple(known[n] for n in flat_lhs))
    if flat_lhs != flat_rhs:
        y = lax.transpose(y, tuple(flat_lhs.index(n) for n in flat_rhs))
    return lax.reshape(y, tuple(math.prod(known[n] for n in g) for g in rhs))
