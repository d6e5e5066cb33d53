"""Checking a gradient against central finite differences, at any parameter count.

Elementwise differences cost two evaluations per parameter element: a quarter of an hour for
a million parameters. Along a random direction ``v`` (a pytree shaped like the arguments),
one pair of evaluations gives ``(f(x + eps v) - f(x - eps v)) / (2 eps)``, which must match
the directional derivative ``<grad f(x), v>``; a few directions catch a wrong gradient with
near certainty. The elementwise check stays available (``full``) for small inputs.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

import jaxkit.numpy as jnp
from jaxkit import tree_util


@dataclass
class Probe:
    """One comparison: the analytic and the finite-difference derivative along ``label``."""

    label: str
    analytic: float
    numeric: float

    @property
    def error(self) -> float:
        return abs(self.analytic - self.numeric)


def _inexact(leaf) -> bool:
    return jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.inexact)


def _shifted(args: Sequence, argnums: tuple[int, ...], direction: list, scale: float) -> list:
    """``args`` with ``scale * direction`` added to the differentiated arguments (same
    dtypes; integer leaves untouched)."""
    out = list(args)
    for n, d in zip(argnums, direction):
        out[n] = tree_util.tree_map(
            lambda x, v: jnp.asarray(np.asarray(x, np.float64) + scale * v,
                                     jnp.asarray(x).dtype) if v is not None else x,
            args[n], d, is_leaf=lambda v: v is None)
    return out


def _difference(fn: Callable, args, argnums, direction, eps: float) -> float:
    plus = float(fn(*_shifted(args, argnums, direction, eps)))
    minus = float(fn(*_shifted(args, argnums, direction, -eps)))
    return (plus - minus) / (2 * eps)


def _dot(grads: list, direction: list) -> float:
    total = 0.0
    for g, d in zip(grads, direction):
        for gl, dl in zip(tree_util.tree_leaves(g), tree_util.tree_leaves(
                d, is_leaf=lambda v: v is None)):
            if dl is not None:
                total += float(np.vdot(np.asarray(gl, np.float64), dl))
    return total


def directions(fn: Callable, args: Sequence, argnums: tuple[int, ...], grads: list,
               eps: float, count: int = 3, seed: int = 0) -> list[Probe]:
    """Compare along ``count`` random unit directions (over all differentiated leaves)."""
    rng = np.random.default_rng(seed)
    probes = []
    for k in range(count):
        direction = [tree_util.tree_map(
            lambda x: rng.standard_normal(np.shape(x)) if _inexact(x) else None, args[n])
            for n in argnums]
        norm = np.sqrt(sum(float(np.sum(v * v)) for d in direction
                           for v in tree_util.tree_leaves(d)))
        if norm == 0:
            break
        direction = [tree_util.tree_map(lambda v: v / norm, d) for d in direction]
        probes.append(Probe(f"random direction {k + 1}", _dot(grads, direction),
                            _difference(fn, args, argnums, direction, eps)))
    return probes


def elementwise(fn: Callable, args: Sequence, argnums: tuple[int, ...], grads: list,
                eps: float, arg_names: Sequence[str] = ()) -> list[Probe]:
    """Compare along every element of every differentiated leaf (two calls each)."""
    probes = []
    for pos, (n, g) in enumerate(zip(argnums, grads)):
        paths = tree_util.tree_flatten_with_path(args[n])[0]
        for (path, leaf), gl in zip(paths, tree_util.tree_leaves(g)):
            if not _inexact(leaf):
                continue
            shape = np.shape(leaf)
            for index in np.ndindex(*shape):
                unit = np.zeros(shape)
                unit[index] = 1.0
                direction = [None] * len(argnums)
                direction[pos] = _one_hot_tree(args[n], path, unit)
                direction = [d if d is not None else tree_util.tree_map(lambda _: None, args[m])
                             for d, m in zip(direction, argnums)]
                name = arg_names[n] if n < len(arg_names) else f"arg {n}"
                label = f"{name}{tree_util.keystr(path)}{list(index) if index else ''}"
                probes.append(Probe(label, float(np.asarray(gl, np.float64)[index]),
                                    _difference(fn, args, argnums, direction, eps)))
    return probes


def _one_hot_tree(tree, target_path, unit):
    """A direction tree: ``unit`` at ``target_path``, None (no step) elsewhere."""
    return tree_util.tree_map_with_path(
        lambda path, _: unit if path == target_path else None, tree)
