"""The errors of a traced value used where a concrete one is needed, against JAX itself:
class and whole message (JAX's words: what was needed, which arguments of which traced
function the value depends on, or the operations that made it, and the page that explains
the fixes). Each record runs on both sides; object ids are masked. Functions are defined in
this file (the messages name their lines, the same for both sides)."""
import pickle
import re

import jax
import numpy as np
import pytest

import jaxkit

C = np.arange(3.0)


def _branchy(x):
    if x > 0:
        return x
    return -x


def _scan_body(c, x):
    if x > 0:
        return c, x
    return c, -x


def _while_body(v):
    if v > 0:
        return v - 1
    return v


def _fori_body(i, v):
    if v > i:
        return v
    return v + 1.0


def _larger(a, b):
    return a if a > b else b


CASES = {
    "jit_if": lambda J: J.jit(_branchy)(1.0),
    "vmap_if": lambda J: J.vmap(_branchy)(J.numpy.ones(3)),
    "make_jaxpr_if": lambda J: J.make_jaxpr(_branchy)(1.0),
    "two_args": lambda J: J.jit(lambda x, y: x if x < y else y)(1., 2.),
    "three_args": lambda J: J.jit(lambda x, y, z: bool(x + y + z))(1., 2., 3.),
    "keyword_arg": lambda J: J.jit(lambda x, *, y: bool(y))(1., y=2.),
    "pytree_arg": lambda J: J.jit(lambda d: bool(d["a"]))({"a": 1., "b": 2.}),
    "from_constants": lambda J: J.jit(lambda x: bool(J.numpy.sin(C)[0] > 0))(1.0),
    "from_literals": lambda J: J.jit(lambda x: bool(J.numpy.sin(1.0) > 0))(1.0),
    "int": lambda J: J.jit(lambda x: int(x))(1.0),
    "float": lambda J: J.jit(lambda x: float(x))(1.0),
    "complex": lambda J: J.jit(lambda x: complex(x))(1.0),
    "index": lambda J: J.jit(lambda x: [0, 1][x])(1),
    "hex": lambda J: J.jit(lambda x: hex(x))(1),
    "range": lambda J: J.jit(lambda x: list(range(x)))(3),
    "item": lambda J: J.jit(lambda x: x.item())(1.0),
    "tolist": lambda J: J.jit(lambda x: x.tolist())(1.0),
    "numpy_function": lambda J: J.jit(lambda x: np.sin(x))(1.0),
    "committed": lambda J: J.jit(lambda x: x.committed)(1.0),
    "devices": lambda J: J.jit(lambda x: x.devices())(1.0),
    "is_fully_replicated": lambda J: J.jit(lambda x: x.is_fully_replicated)(1.0),
    "pickle": lambda J: J.jit(lambda x: pickle.dumps(x))(1.0),
    "sharding": lambda J: J.jit(lambda x: x.sharding)(1.0),
    "device": lambda J: J.jit(lambda x: x.device)(1.0),
    "block_until_ready": lambda J: J.jit(lambda x: x.block_until_ready())(1.0),
    "hash": lambda J: J.jit(lambda x: hash(x))(1.0),
    "hash_batched": lambda J: J.vmap(lambda x: {x: 1})(J.numpy.ones(2)),
    "arange": lambda J: J.jit(lambda n: J.numpy.arange(n))(3),
    "vmap_int": lambda J: J.vmap(lambda x: int(x))(J.numpy.ones(2)),
    "vmap_of_jit": lambda J: J.vmap(J.jit(lambda x: bool(x)))(J.numpy.ones(2)),
    # control-flow bodies: traced "for scan", "while_body", "fori_loop" (its wrappers name
    # the user's body and its arguments), "cond", "switch"
    "scan": lambda J: J.lax.scan(_scan_body, 0., J.numpy.ones(2)),
    "scan_under_jit": lambda J: J.jit(lambda xs: J.lax.scan(_scan_body, 0., xs))(
        J.numpy.ones(2)),
    "scan_pytrees": lambda J: J.lax.scan(lambda c, x: (c, bool(c[1] > x["a"])), (0., 1.),
                                         {"a": J.numpy.ones(2)}),
    "while_body": lambda J: J.lax.while_loop(lambda v: v < 3, _while_body, 0.),
    "while_cond": lambda J: J.lax.while_loop(lambda v: bool(v > 0), lambda v: v + 1, 0.),
    "fori_static_bounds": lambda J: J.lax.fori_loop(0, 3, _fori_body, 0.),
    "fori_traced_bounds": lambda J: J.jit(lambda n: J.lax.fori_loop(0, n, _fori_body, 0.))(3),
    "cond": lambda J: J.lax.cond(True, _larger, lambda a, b: a, 1., 2.),
    "switch": lambda J: J.lax.switch(0, [_larger, lambda a, b: a], 1., 2.),
    "grad_concrete_primal": lambda J: J.grad(
        lambda x: x if J.lax.stop_gradient(x) > J.numpy.sin(x) else 0.)(1.0),
}


def _outcome(record, lib):
    try:
        record(lib)
    except Exception as e:  # noqa: BLE001 - the class and message are compared
        return type(e).__name__, re.sub(r"object id \d+", "object id N", str(e))
    return None


@pytest.mark.parametrize("name", CASES)
def test_tracer_error_as_in_jax(name):
    assert _outcome(CASES[name], jaxkit) == _outcome(CASES[name], jax)
