"""Shardy sharding rules for ``custom_partitioning``: which dimensions of the operands and
results of a custom op correspond, so Shardy can propagate shardings through it.

A rule names a *factor* for every dimension of every operand and result, as an einsum-like
string (``"i j, j k -> i k"``) or as ``SdyShardingRule`` of ``ArrayMapping``s. A dimension may
be the product of several factors (``CompoundFactor('a', 'b')``, written ``(a b)``), and a
leading ``BATCHING`` (``...`` in strings, ``...1`` for a second group) stands for any number
of leading batch dimensions. Factors are passthrough unless named a reduction,
need-replication or permutation factor. ``sdy_sharding_rule_to_mlir`` checks a rule against
the op's types and emits it as the ``#sdy.op_sharding_rule`` attribute.
"""
from __future__ import annotations

import re
from typing import Any

from jaxkit.interpreters.mlir import ir, sdy

__all__ = ["BATCHING", "ArrayMapping", "CompoundFactor", "SdyShardingRule",
           "sdy_sharding_rule_to_mlir", "str_to_sdy_sharding_rule"]

BATCHING: str = "\u2026"  # the one-character ellipsis "…" stands for "..." internally
# Batch dimensions become factors named "?<group>_<position>": no user factor starts with "?".
_BATCH_FACTOR_PREFIX = "?"
_UNKNOWN = -1


def _check_factor(name: str) -> None:
    """A factor name is a letter followed by letters, digits and underscores."""
    if not name[0].isalpha():
        raise ValueError(f"Factor names have to start with a letter, but got '{name[0]}'")
    bad = next((c for c in name[1:] if not (c == "_" or c.isalnum())), None)
    if bad is not None:
        raise ValueError(f"Unknown character '{bad}'")


def _batching_group(entry: Any) -> str | None:
    """The group of a leading-batch-dimensions entry (``…`` is group 0), else None."""
    if not isinstance(entry, str) or not entry.startswith(BATCHING):
        return None
    digits = entry[1:]
    if digits and not digits.isdigit():
        return None
    return digits or "0"


class CompoundFactor(tuple):
    """One dimension that is the product of two or more factors, e.g.
    ``CompoundFactor('b', 'c')``."""

    def __new__(cls, *factors: str):
        if len(factors) < 2:
            raise ValueError("A compound factor should contain at least two factors")
        for factor in factors:
            if not isinstance(factor, str):
                raise ValueError(f"Each element of CompoundFactor must be a str, but got "
                                 f"{type(factor)}")
            if _batching_group(factor) is not None:
                raise ValueError("Ellipsis can't be used in a compound factor")
            _check_factor(factor)
        return tuple.__new__(cls, factors)


class ArrayMapping(tuple):
    """The factors of the dimensions of one operand or result: factor names and
    ``CompoundFactor``s, optionally led by ``BATCHING``."""

    def __new__(cls, *dims: str | CompoundFactor):
        for position, dim in enumerate(dims):
            if isinstance(dim, CompoundFactor):
                continue
            if not isinstance(dim, str):
                raise ValueError(f"Each element of ArrayMapping must be a str or "
                                 f"CompoundFactor, but got {type(dim)}")
            if _batching_group(dim) is not None:
                if position != 0:
                    raise ValueError("Ellipsis can only be used at the beginning of a "
                                     "dimension")
            else:
                _check_factor(dim)
        return tuple.__new__(cls, dims)


class SdyShardingRule:
    """The ``ArrayMapping``s of an op's operands and results, the special factor kinds, and
    the sizes of the factors that appear only inside compound factors."""

    def __init__(self, operand_mappings: tuple[ArrayMapping, ...],
                 result_mappings: tuple[ArrayMapping, ...], *,
                 reduction_factors: tuple[str, ...] = (),
                 need_replication_factors: tuple[str, ...] = (),
                 permutation_factors: tuple[str, ...] = (), **factor_sizes: int):
        # factor -> whether some dimension is exactly that factor (so its size is known)
        whole: dict[str, bool] = {}
        for mapping in (*operand_mappings, *result_mappings):
            for dim in mapping:
                if isinstance(dim, CompoundFactor):
                    for factor in dim:
                        whole.setdefault(factor, False)
                else:
                    whole[dim] = True
        for factor in factor_sizes:
            if factor not in whole:
                raise ValueError(f"Factor {factor} is not used in the rule, but size is "
                                 f"provided")
        for factor, is_whole in whole.items():
            if not is_whole and factor not in factor_sizes:
                raise ValueError(f"Factor {factor} is only used in compound factors; must "
                                 f"specify its size")
            if is_whole and factor in factor_sizes:
                raise ValueError(f"Factor {factor} represents a whole dimension; do not "
                                 f"specify its size")
        seen: set[str] = set()
        for kind, factors in (("reduction_factors", reduction_factors),
                              ("need_replication_factors", need_replication_factors),
                              ("permutation_factors", permutation_factors)):
            if not isinstance(factors, tuple):
                raise ValueError(f"{kind} must be a tuple of factors")
            if len(set(factors)) != len(factors):
                raise ValueError(f"{kind} contains duplicated factors")
            for factor in factors:
                if factor not in whole:
                    raise ValueError(f"Factor {factor} in {kind} is not used in the rule")
                if factor in seen:
                    raise ValueError(f"Factor {factor} can only be in one of the reduction, "
                                     f"need replication, or permutation factor sets.")
                seen.add(factor)
        self.operand_mappings = operand_mappings
        self.result_mappings = result_mappings
        self.factor_sizes = factor_sizes
        self.reduction_factors = reduction_factors
        self.need_replication_factors = need_replication_factors
        self.permutation_factors = permutation_factors

    def __str__(self) -> str:
        kinds = "".join(f" {kind}={factors}" for kind, factors in (
            ("reduction_factors", self.reduction_factors),
            ("need_replication_factors", self.need_replication_factors),
            ("permutation_factors", self.permutation_factors)) if factors)
        return (f"SdyShardingRule({self.operand_mappings}, {self.result_mappings}, "
                f"{self.factor_sizes}{kinds})")


# ---- the einsum-like notation ---------------------------------------------------------------
_TOKEN = re.compile(rf"{BATCHING}\d*|\w+|[(), ]|.")


def _parse_side(text: str) -> tuple[ArrayMapping, ...]:
    """The ``ArrayMapping``s of one side of ``->`` (comma-separated values)."""
    text = " ".join(text.split())
    if not text:
        return (ArrayMapping(),)
    values: list[ArrayMapping] = []
    dims: list = []  # the dimensions of the value being read
    compound: list[str] | None = None  # the factors of an open "(", if any
    for token in _TOKEN.findall(text):
        if token.startswith(BATCHING):
            if compound is not None or dims:
                raise ValueError("Ellipsis can only be used at the beginning of a dimension")
            group = str(int(token[1:])) if len(token) > 1 else "0"
            dims.append(BATCHING + group)
        elif token[0] == "_" or token[0].isalnum():
            if token[0].isdigit():
                raise ValueError(f"Factor names have to start with a letter, but got "
                                 f"'{token[0]}'")
            (dims if compound is None else compound).append(token)
        elif token == "(":
            if compound is not None:
                raise ValueError("Compound factors should be one level, nested brackets are "
                                 "not allowed")
            compound = []
        elif token == ")":
            if compound is None:
                raise ValueError("Brackets are not balanced")
            if len(compound) < 2:
                raise ValueError("Brackets should contain at least two factors")
            dims.append(CompoundFactor(*compound))
            compound = None
        elif token == ",":
            values.append(ArrayMapping(*dims))
            dims = []
        elif token != " ":
            raise ValueError(f"Unknown character '{token}'")
    if compound is not None:
        raise ValueError(f"Brackets are not balanced in rule: '{text}'")
    values.append(ArrayMapping(*dims))
    return tuple(values)


def str_to_sdy_sharding_rule(rule: str, *, reduction_factors: tuple[str, ...] = (),
                             need_replication_factors: tuple[str, ...] = (),
                             permutation_factors: tuple[str, ...] = (),
                             **factor_sizes: int) -> SdyShardingRule:
    """The ``SdyShardingRule`` written as ``rule`` (``"... i j, j k -> ... i k"``), with the
    special factor kinds and the sizes of factors used only in compound factors."""
    if not isinstance(rule, str):
        raise TypeError(f"rule must be a str, but got {type(rule)}")
    if not all(isinstance(size, int) for size in factor_sizes.values()):
        raise TypeError(f"factor_sizes must be a dict of str to int, but got {factor_sizes}")
    if BATCHING in rule:
        raise ValueError(f"Unknown character '{BATCHING}'")
    rule = rule.replace("...", BATCHING)
    if "." in rule:
        raise ValueError("Character '.' must be used inside ellipsis '...'")
    sides = rule.split("->")
    if len(sides) != 2:
        raise ValueError(f"There is no -> in rule: '{rule}'")
    return SdyShardingRule(_parse_side(sides[0]), _parse_side(sides[1]),
                           reduction_factors=reduction_factors,
                           need_replication_factors=need_replication_factors,
                           permutation_factors=permutation_factors, **factor_sizes)


# ---- the MLIR attribute ---------------------------------------------------------------------
class _Factors:
    """The rule's factors in order of first use, each with its index and size (the smallest
    whole dimension it names; a batch dimension must name one size)."""

    def __init__(self):
        self.index: dict[str, int] = {}
        self.size: dict[str, int] = {}

    def add(self, factor: str, size: int) -> None:
        if factor not in self.index:
            self.index[factor] = len(self.index)
            self.size[factor] = size
            return
        known = self.size[factor]
        if size == _UNKNOWN or known == size:
            return
        if known != _UNKNOWN and factor.startswith(_BATCH_FACTOR_PREFIX):
            raise ValueError(f"Batching dimension {factor[1:]} corresponds to two sizes: "
                             f"{known} and {size}")
        if known == _UNKNOWN or size < known:
            self.size[factor] = size


def _split_batching(mapping: ArrayMapping) -> tuple[str | None, tuple]:
    group = _batching_group(mapping[0]) if mapping else None
    return (group, tuple(mapping[1:])) if group is not None else (None, tuple(mapping))


def sdy_sharding_rule_to_mlir(rule: SdyShardingRule, operand_types: list,
                              result_types: list) -> ir.Attribute:
    """``rule`` as ``#sdy.op_sharding_rule`` for an op with operands and results of these
    ``ir.Type``s; raises ``ValueError`` where the rule does not fit them."""
    for what, mappings, types in (("operands", rule.operand_mappings, operand_types),
                                  ("results", rule.result_mappings, result_types)):
        if len(mappings) != len(types):
            raise ValueError(f"Sharding rule has {len(mappings)} {what}, but the operation "
                             f"has {len(types)} {what}")
    types = list(operand_types) + list(result_types)
    if not all(isinstance(t, ir.Type) for t in types):
        raise TypeError(f"operand_types and result_types must be a list of ir.Type, but got "
                        f"{operand_types} and {result_types}")
    shapes = [list(ir.ShapedType(t).shape) for t in types]
    mappings = list(rule.operand_mappings) + list(rule.result_mappings)
    n_operands = len(operand_types)

    def which(i: int) -> str:
        return f"{i}th operand" if i < n_operands else f"{i - n_operands}th result"

    factors = _Factors()
    group_rank: dict[str, int] = {}
    batch_ranks = []
    for i, (mapping, shape) in enumerate(zip(mappings, shapes)):
        group, dims = _split_batching(mapping)
        batch_rank = 0
        if group is not None:
            batch_rank = max(len(shape) - len(dims), 0)
            if group_rank.setdefault(group, batch_rank) != batch_rank:
                raise ValueError(f"Ellipsis represents different number of leading "
                                 f"dimensions {group_rank[group]} and {batch_rank}")
        if batch_rank + len(dims) != len(shape):
            raise ValueError(f"Sharding rule {which(i)} has rank {batch_rank + len(dims)}, but "
                             f"the operation {which(i)} has rank {len(shape)}")
        batch_ranks.append(batch_rank)
        for j in range(batch_rank):
            factors.add(f"{_BATCH_FACTOR_PREFIX}{group}_{j}", shape[j])
        for j, dim in enumerate(dims, start=batch_rank):
            if isinstance(dim, CompoundFactor):
                for factor in dim:
                    factors.add(factor, rule.factor_sizes.get(factor, _UNKNOWN))
            else:
                factors.add(dim, shape[j])

    tensors = []
    for i, (mapping, shape, batch_rank) in enumerate(zip(mappings, shapes, batch_ranks)):
        group, dims = _split_batching(mapping)
        per_dim = [[factors.index[f"{_BATCH_FACTOR_PREFIX}{group}_{j}"]]
                   for j in range(batch_rank)]
        for j, dim in enumerate(dims, start=batch_rank):
            if isinstance(dim, CompoundFactor):
                product = 1
                for factor in dim:
                    product *= factors.size[factor]
                if product != shape[j]:
                    raise ValueError(f"{which(i)} actual size {shape[j]} doesn't match the size "
                                     f"{product} derived from the compound factors {dim}")
                per_dim.append([factors.index[f] for f in dim])
            else:
                per_dim.append([factors.index[dim]])
        tensors.append(sdy.TensorMappingAttr.get(
            dim_mappings=[sdy.DimMappingAttr.get(factor_indices=ix) for ix in per_dim]))
    return sdy.OpShardingRuleAttr.get(
        factor_sizes=[factors.size[f] for f in factors.index],
        operand_mappings=tensors[:n_operands], result_mappings=tensors[n_operands:],
        reduction_factors=[factors.index[f] for f in rule.reduction_factors],
        need_replication_factors=[factors.index[f] for f in rule.need_replication_factors],
        permutation_factors=[factors.index[f] for f in rule.permutation_factors],
        is_custom=True)
