"""``jax.experimental.random``: ``stateful_rng`` and ``StatefulPRNG``, a generator whose state
updates implicitly (NumPy's ``Generator`` style) while giving JAX's bits.

The state is a typed base key plus a counter held in a ``Ref``: each draw folds the counter
into the base key and increments it in place. Because a ``Ref`` may be passed into ``jit``
and ``vmap`` and updated there, ``jax.jit(rng.uniform)()`` advances the generator too. As in
JAX a ``StatefulPRNG`` cannot be returned from a transformed function (refs cannot).
"""
from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core, random, ref, tree_util
from jaxkit import numpy as jnp
from jaxkit.random.key_prims import is_typed_key
from jaxkit.typing import Array, ArrayLike, DTypeLike

__all__ = ["StatefulPRNG", "stateful_rng"]


def _canonicalize_size(size: int | Sequence[int] | None, *args: ArrayLike) -> tuple[int, ...]:
    """``size`` as a shape; None means the broadcast shape of the distribution's parameters."""
    if size is None:
        return np.broadcast_shapes(*(np.shape(a) for a in args))
    if isinstance(size, (int, np.number)):
        return (operator.index(size),)
    return tuple(map(operator.index, size))


def _is_ref(x: Any) -> bool:
    return isinstance(x, ref.Ref) or (isinstance(x, core.Tracer) and
                                      isinstance(x.aval, ref.AbstractRef))


@tree_util.register_dataclass
@dataclasses.dataclass(frozen=True, slots=True)
class StatefulPRNG:
    """Stateful random generator; make one with :func:`stateful_rng`.

    ``_base_key`` is a typed PRNG key and ``_counter`` an integer ``Ref`` counting the keys
    drawn so far (an array of them for a generator made by :meth:`split`)."""

    _base_key: Array
    _counter: Any

    def __post_init__(self):
        if not is_typed_key(self._base_key):  # a key array or a traced key<fry> value
            raise ValueError(f"Expected base_key to be a typed PRNG key; got {self._base_key}")
        if not _is_ref(self._counter):
            raise ValueError(f"Expected counter to be a scalar integer ref; got {self._counter}")

    def key(self, shape: int | Sequence[int] = ()) -> Array:
        """A new independent typed key (or an array of ``shape`` of them); advances the
        generator."""
        if self._base_key.shape:
            raise ValueError("cannot operate on split stateful generator")
        key = random.fold_in(self._base_key, ref.get(self._counter))
        ref.addupdate(self._counter, (), 1)
        shape_tuple = _canonicalize_size(shape)
        return random.split(key, shape_tuple) if shape_tuple else key

    def random(self, size: int | Sequence[int] | None = None, dtype: DTypeLike = float
               ) -> Array:
        """Floats uniform in ``[0, 1)``."""
        return random.uniform(self.key(), shape=_canonicalize_size(size), dtype=dtype)

    def uniform(self, low: ArrayLike = 0, high: ArrayLike = 1,
                size: int | Sequence[int] | None = None, *, dtype: DTypeLike = float) -> Array:
        """Floats uniform in ``[low, high)``."""
        return random.uniform(self.key(), _canonicalize_size(size, low, high), minval=low,
                              maxval=high, dtype=dtype)

    def normal(self, loc: ArrayLike = 0, scale: ArrayLike = 1,
               size: int | Sequence[int] | None = None, *, dtype: DTypeLike = float) -> Array:
        """Normal samples with mean ``loc`` and standard deviation ``scale``."""
        norm = random.normal(self.key(), _canonicalize_size(size, loc, scale), dtype)
        return (jnp.asarray(loc) + jnp.asarray(scale) * norm).astype(dtype)

    def integers(self, low: ArrayLike, high: ArrayLike | None = None,
                 size: int | Sequence[int] | None = None, *, dtype: DTypeLike = int) -> Array:
        """Integers in ``[low, high)`` (``[0, low)`` when ``high`` is None)."""
        if high is None:
            low, high = 0, low
        return random.randint(self.key(), _canonicalize_size(size, low, high), minval=low,
                              maxval=high, dtype=dtype)

    def split(self, num: int | Sequence[int]) -> StatefulPRNG:
        """One generator holding ``num`` independent children, to map over with ``vmap``."""
        return StatefulPRNG(_base_key=self.key(num),
                            _counter=ref.new_ref(jnp.zeros(num, dtype=int)))

    def spawn(self, n_children: int) -> list[StatefulPRNG]:
        """A list of ``n_children`` independent generators."""
        return [StatefulPRNG(_base_key=k, _counter=ref.new_ref(0))
                for k in self.key(n_children)]


def stateful_rng(seed: ArrayLike | None = None, *, impl: str | None = None) -> StatefulPRNG:
    """A :class:`StatefulPRNG` seeded with ``seed`` (from NumPy's entropy when omitted at top
    level; inside a transformation a seed is required)."""
    if seed is None:
        if not isinstance(core.current_trace(), core.EvalTrace):
            raise TypeError("When used within transformed code, "
                            "jax.experimental.random.stateful_rng() requires an explicit seed "
                            "to be set.")
        entropy = np.random.SeedSequence().entropy
        seed = np.int64(entropy & np.iinfo(np.int64).max)
    return StatefulPRNG(_base_key=random.key(seed, impl=impl), _counter=ref.new_ref(0))
