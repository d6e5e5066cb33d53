"""Placement: computations run where their committed arguments are, else on the default device.

``jax.device_put(x, device)`` commits ``x``; ``jnp.array``, results of uncommitted computations
and Python scalars are uncommitted and follow. The devices here are a second CPU backend's
(``spmd8``, as the sharding tests use), besides the default backend's device: committed data
on another backend must work (a GPU machine's CPU next to its GPU). Where JAX's oracle (one CPU
device in this process) can answer, results are compared with it; the texts of errors that
need several devices are JAX 0.10.2's, run with ``--xla_force_host_platform_device_count=4``.
"""
import threading

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit import lax as klax
from jaxkit.runtime import multi_device

jax = pytest.importorskip("jax")
jnp = jax.numpy

DEVICES = multi_device.add_cpu_backend("spmd8", 8).devices
HOST = np.arange(4.0, dtype=np.float32)


def _square_sum(m):
    return lambda a: (a * a).sum()


_JITTED = {}


def _jitted(m):
    """One jitted function per library, reused by every test (compiled once per device)."""
    if m not in _JITTED:
        _JITTED[m] = m.jit(lambda a, b: a * b + 1.0)
    return _JITTED[m]


def _np(m):
    return kjnp if m is jaxkit else jnp


# (label, computation of the library module `m` on array `x`)
OPS = [
    ("eager x + 1", lambda m, x: x + 1),
    ("eager x * 2.0 (cached scalar)", lambda m, x: x * 2.0),
    ("lax.sin", lambda m, x: (klax if m is jaxkit else jax.lax).sin(x)),
    ("jnp.dot", lambda m, x: _np(m).dot(x, x)),
    ("jit", lambda m, x: _jitted(m)(x, x)),
    ("jit, scalar argument", lambda m, x: _jitted(m)(x, 3.0)),
    ("grad", lambda m, x: m.grad(_square_sum(m))(x)),
    ("vmap", lambda m, x: m.vmap(_np(m).sin)(x)),
    ("with an uncommitted array", lambda m, x: x + _np(m).ones(4)),
]
IDS = [label for label, _ in OPS]


@pytest.mark.parametrize("op", [op for _, op in OPS], ids=IDS)
def test_committed_argument_places_the_result(op):
    for k in (3, 5):  # two devices: a program compiled for one never runs on the other
        x = jaxkit.device_put(HOST, DEVICES[k])
        out = op(jaxkit, x)
        assert out.devices() == {DEVICES[k]} and out.committed
    np.testing.assert_allclose(np.asarray(out), np.asarray(op(jax, jnp.asarray(HOST))),
                               rtol=1e-6)


@pytest.mark.parametrize("op", [op for _, op in OPS], ids=IDS)
def test_committedness_follows_arguments_as_in_jax(op):
    # The default device: uncommitted in, uncommitted out; committed in, committed out.
    for put in (lambda m: _np(m).asarray(HOST), lambda m: m.device_put(HOST, m.devices()[0])):
        mine, theirs = op(jaxkit, put(jaxkit)), op(jax, put(jax))
        assert (mine.committed, mine.devices()) == (theirs.committed, {jaxkit.devices()[0]})


@pytest.mark.parametrize("op", [op for _, op in OPS], ids=IDS)
def test_default_device_runs_uncommitted_computations(op):
    x = kjnp.asarray(HOST)  # uncommitted on the default backend's device: moved
    with jaxkit.default_device(DEVICES[2]):
        out = op(jaxkit, x)
    assert out.devices() == {DEVICES[2]} and not out.committed


# JAX 0.10.2's messages (the oracle here has one device, so they are golden text)
_MISMATCH = ("Received incompatible devices for jitted computation. Got argument {} of {} with "
             "shape float32[4] and with device ids [3] on platform CPU and argument {} of {} "
             "with shape float32[4] and with device ids [1] on platform CPU")
MISMATCHES = [
    (lambda x, w: x + w, ("x", "add", "y", "add")),
    (lambda x, w: klax.add(x, w), ("args[0]", "add", "args[1]", "add")),
    (lambda x, w: kjnp.dot(x, w), ("a", "dot", "b", "dot")),
    (lambda x, w: jaxkit.jit(lambda t: t[0] + t[1])((x, w)),
     ("t[0]", "<lambda>", "t[1]", "<lambda>")),
]


@pytest.mark.parametrize("fn, names", MISMATCHES)
def test_arguments_on_two_devices_raise_jax_error(fn, names):
    x, w = jaxkit.device_put(HOST, DEVICES[3]), jaxkit.device_put(HOST, DEVICES[1])
    with pytest.raises(ValueError) as info:
        fn(x, w)
    assert str(info.value) == _MISMATCH.format(*names)
    fn(x, jaxkit.device_put(HOST, DEVICES[3]))  # the same computation on one device runs


def test_devices_of_two_backends_do_not_mix():
    x = jaxkit.device_put(HOST, jaxkit.devices()[0])  # the default backend's device
    with pytest.raises(ValueError, match="Received incompatible devices"):
        x + jaxkit.device_put(HOST, DEVICES[1])
    assert (x + 1).devices() == {jaxkit.devices()[0]}


def test_transfers_commit_and_device_put_keeps():
    x = kjnp.asarray(HOST)
    moved = x.to_device(DEVICES[4])
    assert moved.committed and moved.devices() == {DEVICES[4]} and not x.committed
    assert jaxkit.device_put(moved) is moved
    again = jaxkit.device_put(moved, DEVICES[6])
    assert again.committed and again.devices() == {DEVICES[6]}
    np.testing.assert_array_equal(np.asarray(again), HOST)
    key = jaxkit.device_put(jaxkit.random.key(0), DEVICES[2])  # keys are placed by their data
    sample = jaxkit.random.normal(key, (2,))
    assert sample.devices() == {DEVICES[2]} and sample.committed
    np.testing.assert_array_equal(np.asarray(sample),
                                  np.asarray(jax.random.normal(jax.random.key(0), (2,))))


def test_from_dlpack_commits_and_get_default_device_follows_the_setting():
    for device in (None, DEVICES[3]):  # JAX commits either way
        got = jaxkit.dlpack.from_dlpack(HOST, device=device)
        want = jax.dlpack.from_dlpack(HOST)
        assert got.committed and got._committed == want._committed
    assert got.devices() == {DEVICES[3]}
    with jaxkit.default_device(DEVICES[5]):
        assert jaxkit.extend.backend.get_default_device() == DEVICES[5]
    assert jaxkit.extend.backend.get_default_device() == jaxkit.devices()[0]


def test_default_device_context_nests_and_is_thread_local():
    seen = {}

    def other_thread():
        seen["thread"] = kjnp.ones(1).devices()

    with jaxkit.default_device(DEVICES[2]):
        with jaxkit.default_device(DEVICES[1]):
            assert kjnp.ones(1).devices() == {DEVICES[1]}
        created = kjnp.ones(1)
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
    assert created.devices() == {DEVICES[2]} and not created.committed
    assert seen["thread"] == {jaxkit.devices()[0]}  # as in JAX: the block is this thread's
    assert kjnp.ones(1).devices() == {jaxkit.devices()[0]}


def test_default_device_option_takes_devices_and_platforms():
    try:
        jaxkit.config.update("jax_default_device", DEVICES[7])
        assert kjnp.ones(2).devices() == {DEVICES[7]}
        assert (kjnp.asarray(HOST) * 2.0).devices() == {DEVICES[7]}
        with jaxkit.default_device(DEVICES[1]):  # the block wins over the option
            assert kjnp.ones(2).devices() == {DEVICES[1]}
        jaxkit.config.update("jax_default_device", "cpu")
        assert kjnp.ones(2).devices() == {jaxkit.devices("cpu")[0]}
    finally:
        jaxkit.config.update("jax_default_device", None)
    assert kjnp.ones(2).devices() == {jaxkit.devices()[0]}


def test_default_device_rejects_other_values_as_jax():
    for value in (3, "spmd8-typo"):
        with pytest.raises(ValueError) as theirs:
            jax.config.update("jax_default_device", value)
        with pytest.raises(ValueError) as mine:
            jaxkit.config.update("jax_default_device", value)
        assert str(mine.value) == str(theirs.value)
        with pytest.raises(ValueError, match="must be passed either a Device"):
            with jaxkit.default_device(value):
                pass


def test_jit_device_and_backend_options_fix_the_device():
    with pytest.warns(DeprecationWarning, match="backend and device argument on jit"):
        on_two = jaxkit.jit(lambda a: a * 2, device=DEVICES[2])
    with pytest.warns(DeprecationWarning):
        on_spmd8 = jaxkit.jit(lambda a: a * 2, backend="spmd8")
    x = jaxkit.device_put(HOST, DEVICES[3])
    for _ in range(2):  # the call that compiles, then the cached one
        for fn, device in ((on_two, DEVICES[2]), (on_spmd8, DEVICES[0])):
            for arg in (x, kjnp.asarray(HOST)):  # as in JAX, committed arguments move too
                out = fn(arg)
                assert out.devices() == {device} and out.committed
    np.testing.assert_array_equal(np.asarray(out), HOST * 2)


def test_lowered_compiles_for_the_committed_device():
    x = jaxkit.device_put(HOST, DEVICES[3])
    compiled = jaxkit.jit(lambda a: a * 2).lower(x).compile()
    for arg in (x, kjnp.asarray(HOST)):  # as in JAX: results committed, arguments moved
        out = compiled(arg)
        assert out.devices() == {DEVICES[3]} and out.committed
    np.testing.assert_array_equal(np.asarray(out), HOST * 2)
