"""Which donated arguments a lowered program reuses, decided as JAX decides it: each donated
argument is paired with an output of its type and memory (per shard: in a partitioned
program the types are the shards'). A pair is an alias (``tf.aliasing_output``: the output
is written into the argument's buffer) when the output's layout is fixed; otherwise, or when
only the sizes agree, the argument is a buffer donor (``jax.buffer_donor``: XLA may reuse it).
In a partitioned program with an output whose layout XLA chooses, every other donated
argument is a donor too. Donated arguments left over are not donated, and a warning names
them."""
from __future__ import annotations

import collections
import warnings
from collections.abc import Sequence

from jaxkit import core

_FAQ = "See an explanation at https://docs.jax.dev/en/latest/faq.html#buffer-donation."


def set_up_donation(in_avals: Sequence, out_avals: Sequence, donated: Sequence[bool],
                    arg_kinds: Sequence | None, result_kinds: Sequence | None,
                    result_shardings: Sequence[str | None] | None
                    ) -> tuple[list[int | None], list[bool]]:
    """``(aliases, donors)`` per argument: the output each aliases (or None) and whether it
    is a buffer donor. ``result_shardings`` (the results' Shardy layouts, None for one XLA
    chooses) is given for a program of several partitions only."""
    n = len(in_avals)
    donated = list(donated) + [False] * (n - len(donated))
    if not arg_kinds or not result_kinds or None in arg_kinds or None in result_kinds:
        arg_kinds, result_kinds = [None] * n, [None] * len(out_avals)
    unfixed = lambda s: s is None or "?" in s  # noqa: E731  (XLA chooses some of it)
    aliases: list[int | None] = [None] * n
    donors = [False] * n
    waiting = collections.defaultdict(collections.deque)
    for i, (aval, kind, d) in enumerate(zip(in_avals, arg_kinds, donated)):
        if d:
            waiting[(_type(aval), kind)].append(i)
    left = list(donated)
    for j, (aval, kind) in enumerate(zip(out_avals, result_kinds)):
        if waiting.get((_type(aval), kind)):
            i = waiting[(_type(aval), kind)].popleft()
            left[i] = False
            if result_shardings is None or not unfixed(result_shardings[j]):
                aliases[i] = j
            else:
                donors[i] = True
    aliased = {j for j in aliases if j is not None}
    by_size = collections.defaultdict(collections.deque)
    for j, (aval, kind) in enumerate(zip(out_avals, result_kinds)):
        if j not in aliased and not _is_token(aval):
            by_size[(aval.size, kind)].append(j)
    for i, (aval, kind) in enumerate(zip(in_avals, arg_kinds)):
        if left[i] and not _is_token(aval) and by_size.get((aval.size, kind)):
            by_size[(aval.size, kind)].popleft()
            left[i], donors[i] = False, True
    if result_shardings is not None and (not result_shardings or
                                         any(unfixed(s) for s in result_shardings)):
        donors = [d or x for d, x in zip(donors, left)]
        left = [False] * n
    unused = [str(a) for a, x in zip(in_avals, left) if x]
    if unused:
        warnings.warn(f"Some donated buffers were not usable: {', '.join(unused)}.\n{_FAQ}",
                      stacklevel=2)
    return aliases, donors


def _type(aval) -> tuple:
    # Shape and dtype alone decide (not weak types or other metadata), as in JAX.
    return (getattr(aval, "shape", None), getattr(aval, "dtype", None), type(aval))


def _is_token(aval) -> bool:
    return type(aval) is core.AbstractToken
