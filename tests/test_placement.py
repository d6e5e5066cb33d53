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


def _callback(m):
    """An ordered io_callback adding one on the host (JAX orders it with a token)."""
    experimental = jaxkit.experimental if m is jaxkit else jax.experimental
    return lambda x: experimental.io_callback(lambda v: v + 1, m.ShapeDtypeStruct(
        (4,), np.float32), x, ordered=True)


_JITTED_CALLBACKS = {}


def _jitted_callback(m):
    """A jitted function with an ordered effect (which JAX threads a token through)."""
    if m not in _JITTED_CALLBACKS:
        _JITTED_CALLBACKS[m] = m.jit(lambda x: _callback(m)(x * 2) + 1)
    return _JITTED_CALLBACKS[m]


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
    ("eager io_callback, ordered", lambda m, x: _callback(m)(x)),
    ("eager pure_callback", lambda m, x: m.pure_callback(
        lambda v: v * 3, m.ShapeDtypeStruct((4,), np.float32), x)),
    ("jit with an ordered io_callback", lambda m, x: _jitted_callback(m)(x)),
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
     ("t[0]", "<lambda>.<locals>.<lambda>", "t[1]", "<lambda>.<locals>.<lambda>")),
]


@pytest.mark.parametrize("fn, names", MISMATCHES)
def test_arguments_on_two_devices_raise_jax_error(fn, names):
    x, w = jaxkit.device_put(HOST, DEVICES[3]), jaxkit.device_put(HOST, DEVICES[1])
    with pytest.raises(ValueError) as info:
        fn(x, w)
    assert str(info.value) == _MISMATCH.format(*names)
    fn(x, jaxkit.device_put(HOST, DEVICES[3]))  # the same computation on one device runs


# Under a transformation the mismatch is found in the program run for the jit call (a jnp
# function's too), which names its own arguments; tracers have no device, so JAX names their
# side by the mismatch's kind (and, when it names one argument only, pairs it with the second
# device whichever side it found: JAX's text, kept). Raw lax primitives name their own.
def _on(device_id):
    return f"with device ids [{device_id}] on platform CPU"


_ARG = "argument {} of {} with shape float32[4] and " + _on("{}")
TRANSFORMED_MISMATCHES = [
    (lambda x, w: jaxkit.grad(lambda a, b: (a * b).sum())(x, w),
     f"{_ARG.format('y', 'multiply', 1)} and ARG_SHARDING {_on(1)}"),
    (lambda x, w: jaxkit.grad(lambda a, b: (a * b).sum(), argnums=(0, 1))(x, w),
     f"ARG_SHARDING {_on(3)} and ARG_SHARDING {_on(1)}"),
    (lambda x, w: jaxkit.vmap(kjnp.add)(x, w), f"ARG_SHARDING {_on(3)} and ARG_SHARDING {_on(1)}"),
    (lambda x, w: jaxkit.vmap(klax.add)(x, w),
     f"{_ARG.format('args[0]', 'add', 3)} and {_ARG.format('args[1]', 'add', 1)}"),
    (lambda x, w: jaxkit.jvp(lambda a, b: a * b, (x, w), (x, w)),
     f"ARG_SHARDING {_on(3)} and ARG_SHARDING {_on(1)}"),
    (lambda x, w: jaxkit.grad(jaxkit.jit(lambda a, b: (a * b).sum()))(x, w),
     f"{_ARG.format('b', '<lambda>.<locals>.<lambda>', 1)} and ARG_SHARDING {_on(1)}"),
]


def test_arguments_on_two_devices_under_transformations_raise_jax_error():
    x, w = jaxkit.device_put(HOST, DEVICES[3]), jaxkit.device_put(HOST, DEVICES[1])
    for fn, got in TRANSFORMED_MISMATCHES:
        with pytest.raises(ValueError) as info:
            fn(x, w)
        assert str(info.value) == f"Received incompatible devices for jitted computation. Got {got}"


def test_unused_committed_arguments_take_no_part_in_placement():
    x, w = jaxkit.device_put(HOST, DEVICES[3]), jaxkit.device_put(HOST, DEVICES[1])
    pruned = jaxkit.jit(lambda a, b: a * 2)
    for _ in range(2):  # the call that compiles, then the cached one
        for a, b, k in ((x, w, 3), (w, x, 1)):
            out = pruned(a, b)  # as JAX: b is unused, wherever it is
            assert out.devices() == {DEVICES[k]} and out.committed
    with pytest.raises(ValueError, match="argument a of .*<lambda> .* and argument b of"):
        jaxkit.jit(lambda a, b: a * 2, keep_unused=True)(x, w)


def test_transfers_are_committed_and_then_disagree():
    x = jaxkit.device_put(HOST, DEVICES[3])
    for moved in (kjnp.asarray(HOST).to_device(DEVICES[1]),
                  jaxkit.dlpack.from_dlpack(HOST, device=DEVICES[1])):
        with pytest.raises(ValueError) as info:
            x + moved  # as in JAX, where both are committed
        assert str(info.value) == _MISMATCH.format("x", "add", "y", "add")


@pytest.mark.parametrize("f", [_jitted(jaxkit), lambda a, b: klax.add(klax.mul(a, b), 1.0)],
                         ids=["jit (its call-site plan)", "eager lax (two arrays, then a scalar)"])
def test_each_call_is_placed_as_its_arguments_say(f):
    c3, c5 = jaxkit.device_put(HOST, DEVICES[3]), jaxkit.device_put(HOST, DEVICES[5])
    u = kjnp.asarray(HOST)
    with jaxkit.default_device(DEVICES[2]):
        u2 = kjnp.asarray(HOST)  # uncommitted on DEVICES[2]: moved to the default device
    default = jaxkit.devices()[0]
    calls = [((c3, c3), DEVICES[3], True), ((u, u), default, False),
             ((c5, u), DEVICES[5], True), ((u, c3), DEVICES[3], True), ((u2, u), default, False)]
    for _ in range(2):
        for args, device, committed in calls:
            out = f(*args)
            assert (out.devices(), out.committed) == ({device}, committed)
        with jaxkit.default_device(DEVICES[6]):
            out = f(u, u)
        assert (out.devices(), out.committed) == ({DEVICES[6]}, False)
    np.testing.assert_array_equal(np.asarray(out), HOST * HOST + 1)


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
        seen["option"] = jaxkit.config.jax_default_device

    with jaxkit.default_device(DEVICES[2]):
        with jaxkit.default_device(DEVICES[1]):
            assert kjnp.ones(1).devices() == {DEVICES[1]}
            assert jaxkit.config.jax_default_device == DEVICES[1]  # read back, as JAX
            with jaxkit.default_device("cpu"):
                assert jaxkit.config.jax_default_device == "cpu"
        assert jaxkit.config.jax_default_device == DEVICES[2]
        created = kjnp.ones(1)
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
    assert created.devices() == {DEVICES[2]} and not created.committed
    assert seen["thread"] == {jaxkit.devices()[0]}  # as in JAX: the block is this thread's
    assert seen["option"] is None
    assert kjnp.ones(1).devices() == {jaxkit.devices()[0]}


def test_default_device_option_takes_devices_and_platforms():
    try:
        jaxkit.config.update("jax_default_device", DEVICES[7])
        assert kjnp.ones(2).devices() == {DEVICES[7]}
        assert (kjnp.asarray(HOST) * 2.0).devices() == {DEVICES[7]}
        with jaxkit.default_device(DEVICES[1]):  # the block wins over the option
            assert kjnp.ones(2).devices() == {DEVICES[1]}
        with jaxkit.default_device(None):  # as JAX: None is the default backend's device
            assert kjnp.ones(2).devices() == {jaxkit.devices()[0]}
            assert jaxkit.config.jax_default_device is None
        assert jaxkit.config.jax_default_device == DEVICES[7]
        jaxkit.config.update("jax_default_device", "cpu")
        assert kjnp.ones(2).devices() == {jaxkit.devices("cpu")[0]}
    finally:
        jaxkit.config.update("jax_default_device", None)
    assert kjnp.ones(2).devices() == {jaxkit.devices()[0]}


def test_default_device_option_is_read_as_an_attribute_as_jax():
    with pytest.raises(AttributeError) as theirs:
        jax.config.read("jax_default_device")
    with pytest.raises(AttributeError) as mine:
        jaxkit.config.read("jax_default_device")
    assert str(mine.value) == str(theirs.value)
    assert jaxkit.config.jax_default_device is jax.config.jax_default_device is None


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
