"""Known gaps against JAX 0.10.2, each checked side by side with the oracle: when jit traces
again under configuration blocks and global updates (JAX keys its caches on the values in
effect), jnp's rank-promotion check, the filtering of tracebacks at API boundaries (jitted
and jnp functions, grad, vmap, ...: docs/debugging/flags.md), the reprs of jaxpr atoms,
``ensure_compile_time_eval`` with jitted functions inside, and bad shape arguments."""
from __future__ import annotations

import re
import threading
import traceback
import warnings

import numpy as np
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


# ---- traceback filtering at API boundaries (jitted and jnp functions, grad, vmap, ...) -----

def _bad(J, x):
    return J.numpy.sin([1, 2])  # a list: TypeError from inside the library


def _branch(x):
    if x > 0:
        return x
    return -x


TRACEBACK_CASES = [
    ("jnp function", lambda J: J.numpy.sin([1, 2])),
    ("jitted user function", lambda J: J.jit(lambda x: _bad(J, x))(1.0)),
    ("python branch under jit", lambda J: J.jit(_branch)(1.0)),
    ("grad of a vector function", lambda J: J.grad(lambda x: x)(J.numpy.ones(2))),
    ("vmap axis out of range", lambda J: J.vmap(lambda x: x, in_axes=2)(J.numpy.ones(2))),
    ("python branch under vmap", lambda J: J.vmap(_branch)(J.numpy.ones(2))),
    ("jacrev", lambda J: J.jacrev(lambda x: _bad(J, x))(1.0)),
    ("vjp", lambda J: J.vjp(lambda x: _bad(J, x), 1.0)),
    ("make_jaxpr", lambda J: J.make_jaxpr(_branch)(1.0)),
    ("eval_shape", lambda J: J.eval_shape(_branch, 1.0)),
    ("user error under jit", lambda J: J.jit(lambda x: 1 / 0)(1.0)),
    ("nested jits", lambda J: J.jit(J.jit(lambda x: _bad(J, x)))(1.0)),
]


def _filtered(J, make, mode):
    """The exception class, the frames of this file left in its traceback, and its notes."""
    J.config.update("jax_traceback_filtering", mode)
    try:
        make(J)
    except Exception as e:  # noqa: BLE001
        frames = [f.name for f in traceback.extract_tb(e.__traceback__)
                  if f.filename == __file__]
        # remove_frames keeps the whole traceback on an UnfilteredStackTrace cause
        cause = type(e.__cause__).__name__ == "UnfilteredStackTrace"
        return type(e).__name__, frames, getattr(e, "__notes__", None), cause
    finally:
        J.config.update("jax_traceback_filtering", "auto")
    raise AssertionError("no exception")


@pytest.mark.parametrize("mode", ["auto", "off", "remove_frames"])
@pytest.mark.parametrize("name,make", TRACEBACK_CASES, ids=[c[0] for c in TRACEBACK_CASES])
def test_traceback_filtering_at_api_boundaries_as_jax(mode, name, make):
    assert _filtered(jaxkit, make, mode) == _filtered(jax, make, mode)


FLAGS_CELL = '''
import traceback
J.config.update("jax_debug_nans", True)

def f(x):
  w = 3 * J.numpy.square(x)
  return J.numpy.log(-w)

try:
  f(5.)
except FloatingPointError as e:
  print(traceback.format_exc(limit=2))
'''


def _flags_cell(J, capsys):
    try:
        exec(compile(FLAGS_CELL, "<cell>", "exec"), {"J": J})
    finally:
        J.config.update("jax_debug_nans", False)
    return capsys.readouterr().out


def test_debug_nans_traceback_prints_as_jax(capsys):
    """docs/debugging/flags.md's first cell: two user frames, the error, then JAX's note."""
    assert _flags_cell(jaxkit, capsys) == _flags_cell(jax, capsys)


# ---- reprs of jaxpr atoms (notebooks/Writing_custom_interpreters_in_Jax.md) -----------------

ATOM_CASES = [
    ("weak int literal", lambda N, x: x.astype(int) + 1, 1),
    ("weak float literal", lambda N, x: x + 1.0, 1.0),
    ("weak complex literal", lambda N, x: x * (1 + 2j), 1.0),
    ("numpy scalar literal", lambda N, x: x + np.float32(2), 1.0),
    ("bool literals", lambda N, x: N.where(x > 0, True, False) & True, 1.0),
    ("matrix and vectors", lambda N, w, b, x: (N.dot(w, x) + b, x),
     (np.ones((5, 10), np.float32), np.ones(5, np.float32), np.ones(10, np.float32))),
]


def _atoms(J, make, args):
    args = args if isinstance(args, tuple) else (args,)
    jaxpr = J.make_jaxpr(lambda *a: make(J.numpy, *a))(*args).jaxpr
    text = [repr(jaxpr.invars), repr(jaxpr.outvars)]
    text += [repr(e.invars) + repr(e.outvars) for e in jaxpr.eqns]
    return re.sub(r"id=\d+", "id=?", "\n".join(text))  # object ids differ from run to run


@pytest.mark.parametrize("name,make,args", ATOM_CASES, ids=[c[0] for c in ATOM_CASES])
def test_var_and_literal_reprs_as_jax(name, make, args):
    assert _atoms(jaxkit, make, args) == _atoms(jax, make, args)


# ---- ensure_compile_time_eval: an option of the trace context (eager_constant_folding) -------

def _compile_time_eval(J):
    """What runs when, and the kinds of values seen, with jitted functions called inside the
    block (JAX traces them again, folding their operations on constants)."""
    seen, count = [], [0]
    N = J.numpy

    @J.jit
    def g(a):
        count[0] += 1
        c = N.sin(2.0)
        seen.append(("g traced: constant concrete", not isinstance(c, J.core.Tracer)))
        return a + c

    seen.append(("eager", float(g(1.0)), count[0]))
    with J.ensure_compile_time_eval():
        seen.append(("inside", float(g(1.0)), count[0], J.config.eager_constant_folding))
        seen.append(("inside, again", float(g(1.0)), count[0]))
        seen.append(("make_jaxpr inside", str(J.make_jaxpr(g)(1.0).out_avals)))
    seen.append(("after", float(g(1.0)), count[0], J.config.eager_constant_folding))

    @J.jit
    def outer(x):
        with J.ensure_compile_time_eval():
            y = g(3.0)
            z = g(x)
            k = J.lax.fori_loop(0, 3, lambda i, v: v + i, 0)
            seen.append(("outer", type(y).__name__, isinstance(z, J.core.Tracer), int(k)))
            if y > 3:  # concrete: usable in Python control flow
                seen.append("branch")
        return y + z

    seen.append(("outer", float(outer(1.0)), count[0]))
    return seen


def test_ensure_compile_time_eval_with_jit_inside_as_jax():
    assert _compile_time_eval(jaxkit) == _compile_time_eval(jax)


# ---- shape arguments: JAX's TypeError for a traced or non-integer entry -------------------------

SHAPE_CASES = [
    ("random.normal", lambda J, n: J.random.normal(J.random.key(0), (n,))),
    ("random.uniform", lambda J, n: J.random.uniform(J.random.key(0), (n, 2))),
    ("jnp.reshape", lambda J, n: J.numpy.arange(4).reshape((n, -1))),
    ("lax.reshape", lambda J, n: J.lax.reshape(J.numpy.arange(4), (n, 2))),
    ("lax.full", lambda J, n: J.lax.full((n,), 1.0)),
    ("lax.iota", lambda J, n: J.lax.iota(int, n)),
    ("lax.broadcasted_iota", lambda J, n: J.lax.broadcasted_iota(int, (n,), 0)),
    ("jnp.zeros", lambda J, n: J.numpy.zeros((n, 2))),
]


def _shape_error(J, make, traced):
    try:
        if traced:
            J.jit(lambda n: make(J, n))(2)
        else:
            make(J, 2.5)
    except TypeError as e:
        # (where a traced value came from is worded by each library's tracer)
        return type(e).__name__, str(e).split("subfunctions.")[0]
    raise AssertionError("no error")


@pytest.mark.parametrize("traced", [True, False], ids=["traced", "float"])
@pytest.mark.parametrize("name,make", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_bad_shape_entries_raise_as_jax(name, make, traced):
    assert _shape_error(jaxkit, make, traced) == _shape_error(jax, make, traced)


@pytest.mark.parametrize("make", [lambda J: J.lax.broadcast(1.0, (2.5,)),
                                  lambda J: J.lax.broadcast_in_dim(1.0, (2.5,), ())])
def test_float_sizes_refused(make):
    """A float size is an error in JAX (its message differs: jaxkit names the argument)."""
    for J in (jax, jaxkit):
        with pytest.raises(TypeError):
            make(J)
