"""Known gaps against JAX 0.10.2, each checked side by side with the oracle: when jit traces
again under configuration blocks and global updates (JAX keys its caches on the values in
effect), jnp's rank-promotion check, the explicit-64-bit-dtype mode 'allow', and jit calls
inside ``ensure_compile_time_eval``."""
from __future__ import annotations

import threading
import warnings

import pytest

import jaxkit

jax = pytest.importorskip("jax")


def _traces_under_blocks(J):
    """(step, outcome, traces so far) for one jitted function called under blocks and global
    updates of jax_numpy_rank_promotion; the operands need rank promotion."""
    seen, count = [], [0]

    @J.jit
    def h(x, y):
        count[0] += 1
        return x + y

    a, b = J.numpy.ones(3), J.numpy.ones((2, 3))

    def call(step):
        try:
            h(a, b)
            seen.append((step, "ok", count[0]))
        except ValueError:
            seen.append((step, "ValueError", count[0]))

    try:
        call("plain")
        with J.numpy_rank_promotion("allow"):  # the value in force: no new trace
            call("block at the global value")
        call("plain again")
        J.config.update("jax_numpy_rank_promotion", "raise")
        call("global raise")
        with J.numpy_rank_promotion("raise"):
            call("block at the new global value")
        with J.numpy_rank_promotion("allow"):  # the first trace's values again
            call("block back at the old value")
            J.config.update("jax_numpy_rank_promotion", "allow")
            call("global update inside the block")
        call("after the block")
        J.config.update("jax_numpy_rank_promotion", "raise")
        call("global raise again")
        with J.numpy_rank_promotion("raise"):
            J.config.update("jax_numpy_rank_promotion", "allow")
            call("block raise over a new global allow")
        call("after")
        out = []

        def worker():
            with J.numpy_rank_promotion("allow"):
                h(a, b)
                out.append(count[0])
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        seen.append(("another thread's block", out))
        with J.numpy_dtype_promotion("standard"), J.enable_x64(False), J.debug_nans(False):
            call("several blocks at their global values")
    finally:
        J.config.update("jax_numpy_rank_promotion", "allow")
    return seen


def test_traces_under_config_blocks_and_updates_as_jax():
    assert _traces_under_blocks(jaxkit) == _traces_under_blocks(jax)


RANK_CASES = [
    ("add", lambda N: N.ones(3) + N.ones((2, 3))),
    ("mul", lambda N: N.multiply(N.ones((4, 1, 3)), N.ones((2, 3)))),
    ("where", lambda N: N.where(N.ones((2, 3)) > 0, N.ones(3), 0.0)),
    ("power", lambda N: N.power(N.ones((2, 3)), N.ones(3))),
    ("scalar beside a vector", lambda N: N.ones(3) * 2.0),
    ("equal ranks", lambda N: N.ones((1, 3)) + N.ones((2, 1))),
    ("incompatible", lambda N: N.ones(4) + N.ones((2, 3))),
]


def _rank_outcome(J, mode, make):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with J.numpy_rank_promotion(mode):
                out = ("ok", tuple(make(J.numpy).shape))
        except ValueError as e:
            out = ("ValueError", str(e))
    return out, [(w.category.__name__, str(w.message)) for w in caught]


@pytest.mark.parametrize("mode", ["allow", "warn", "raise"])
@pytest.mark.parametrize("name,make", RANK_CASES, ids=[c[0] for c in RANK_CASES])
def test_rank_promotion_modes_as_jax(mode, name, make):
    assert _rank_outcome(jaxkit, mode, make) == _rank_outcome(jax, mode, make)
