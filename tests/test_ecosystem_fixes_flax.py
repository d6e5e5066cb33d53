"""Regression tests for the causes of Flax 0.12.8 test-suite failures on jaxkit, found by
running the whole suite (``bench/ecosystem_tests.py --suites flax``) on both backends.

Each block names the Flax tests it came from; each check runs on jaxkit and on the real
``jax`` (the oracle, skipped where it is not installed) side by side in this process.
"""
import numpy as np
import pytest

import jaxkit
import jaxkit.numpy  # noqa: F401  (m.numpy below)


def _oracle():
    return pytest.importorskip("jax")


def _same(mine, theirs):
    """Same type kind, dtype, weak type, shape and values."""
    assert isinstance(mine, jaxkit.Array) == hasattr(theirs, "aval")
    assert str(mine.dtype) == str(theirs.dtype)
    assert mine.weak_type == theirs.weak_type
    np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))


# --------------------------------------------------------------------------------------------
# builtin round() of an array of any shape gives an integer array (Flax cursor_test
# test_magic_methods: round(cursor + 0.123) on a 2x2 array)
# --------------------------------------------------------------------------------------------

ROUND_CASES = [
    ("matrix", lambda m: m.numpy.array([[1, -2], [3, 4]]) + 0.123, ()),
    ("scalar_half", lambda m: m.numpy.array(2.5), ()),
    ("ndigits", lambda m: m.numpy.array([1.26, -3.14159]), (1,)),
    ("ndigits0", lambda m: m.numpy.array([1.5, 2.5]), (0,)),
]


@pytest.mark.parametrize("make,args", [c[1:] for c in ROUND_CASES],
                         ids=[c[0] for c in ROUND_CASES])
def test_builtin_round_of_arrays(make, args):
    jax = _oracle()
    _same(round(make(jaxkit), *args), round(make(jax), *args))


def test_builtin_round_under_jit():
    jax = _oracle()
    x = np.array([0.5, 1.5, -2.7], np.float32)
    _same(jaxkit.jit(round)(x), jax.jit(round)(x))


# --------------------------------------------------------------------------------------------
# Lowered.cost_analysis(): XLA's estimate of the unoptimized program (Flax linen summary_test,
# 15 tests: tabulate counts flops through jit(f).lower(...).cost_analysis())
# --------------------------------------------------------------------------------------------

def _matmul_tanh(m):
    return lambda x, w: m.numpy.tanh(x @ w).sum()


def test_lowered_cost_analysis():
    jax = _oracle()
    x, w = np.ones((4, 8), np.float32), np.ones((8, 3), np.float32)
    mine = jaxkit.jit(_matmul_tanh(jaxkit)).lower(x, w).cost_analysis()
    theirs = jax.jit(_matmul_tanh(jax)).lower(x, w).cost_analysis()
    assert mine == theirs
    assert mine["flops"] > 0
    # A program with no operations costs nothing: an empty dict, not None.
    assert jaxkit.jit(lambda: None).lower().cost_analysis() == \
        jax.jit(lambda: None).lower().cost_analysis()


# --------------------------------------------------------------------------------------------
# Orbax checkpointing (Flax checkpoints_test, 26 tests; nnx integration_test, 17): the modules
# Orbax imports, the Sharding methods it reads, and device_put of a layout.Format
# --------------------------------------------------------------------------------------------

def test_orbax_imports_resolve_under_install_as_jax():
    import importlib
    import warnings

    from jaxkit import install
    jax = _oracle()
    names = {"jax.interpreters.pxla": (), "jax.experimental.pjit": (),
             "jax.experimental.colocated_python.func": ("make_callable",),
             "jax.experimental.colocated_python.serialization": ("DeviceList",),
             "jax._src.distributed": ("global_state", "is_initialized"),
             "jax._src.tree_util": ("flatten_one_level",)}
    for name, attrs in names.items():
        mine = importlib.import_module(install.jaxkit_name(name))
        theirs = importlib.import_module(name)
        for attr in attrs:
            assert hasattr(mine, attr) and hasattr(theirs, attr), (name, attr)
    # Orbax reaches these as attributes of jax._src, without importing them.
    import jaxkit._src_compat as compat
    assert compat.tree_util.flatten_one_level({"a": [1], "b": 2}) == \
        jax._src.tree_util.flatten_one_level({"a": [1], "b": 2})
    for attr in ("client", "process_id", "num_processes", "service"):
        assert getattr(compat.distributed.global_state, attr) == \
            getattr(jax._src.distributed.global_state, attr), attr
    serialization = importlib.import_module(
        install.jaxkit_name("jax.experimental.colocated_python.serialization"))
    assert serialization.DeviceList is \
        jax.experimental.colocated_python.serialization.DeviceList
    pjit_mod = importlib.import_module("jaxkit.experimental.pjit")
    for mod in (pjit_mod, importlib.import_module("jax.experimental.pjit")):
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            pjit = mod.pjit
        assert int(pjit(lambda x: x * 2, None, None)(np.int32(3))) == 6


SHARDING_QUERIES = [
    ("devices_indices_map", lambda s: s.devices_indices_map((2, 3))),
    ("addressable_map", lambda s: s.addressable_devices_indices_map((4,))),
    ("has_addressable", lambda s: s.has_addressable_devices),
    ("device_assignment", lambda s: s._device_assignment),
    ("addressable_assignment", lambda s: s._addressable_device_assignment),
    ("check_aval", lambda s: s.check_compatible_aval((2, 3))),
]


@pytest.mark.parametrize("query", [q[1] for q in SHARDING_QUERIES],
                         ids=[q[0] for q in SHARDING_QUERIES])
def test_single_device_sharding_base_methods(query):
    jax = _oracle()
    mine = query(jaxkit.numpy.ones(3).sharding)
    theirs = query(jax.numpy.ones(3).sharding)
    assert repr(mine) == repr(theirs)


def test_named_sharding_addressable_device_assignment():
    jax = _oracle()
    for m in (jaxkit, jax):
        mesh = m.make_mesh((1,), ("x",))
        s = m.sharding.NamedSharding(mesh, m.sharding.PartitionSpec("x"))
        assert s._addressable_device_assignment == s._device_assignment == tuple(m.devices()[:1])


def test_copy_to_host_async_then_read():
    x = jaxkit.numpy.arange(4.0) * 2
    x.copy_to_host_async()
    np.testing.assert_array_equal(np.asarray(x), [0.0, 2.0, 4.0, 6.0])


def test_make_single_device_sharding_memory_kind():
    jax = _oracle()
    for kind in (None, "device", "pinned_host", "unpinned_host"):
        mine = jaxkit.sharding.make_single_device_sharding(jaxkit.devices()[0], memory_kind=kind)
        theirs = jax.sharding.make_single_device_sharding(jax.devices()[0], memory_kind=kind)
        assert repr(mine) == repr(theirs)
    errors = []
    for m in (jaxkit, jax):
        with pytest.raises(ValueError) as e:
            m.sharding.make_single_device_sharding(m.devices()[0], memory_kind="bogus")
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_device_put_of_a_format():
    import jax.experimental.layout as their_layout

    import jaxkit.experimental.layout as my_layout
    jax = _oracle()
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    for m, lay in ((jaxkit, my_layout), (jax, their_layout)):
        s = m.sharding.SingleDeviceSharding(m.devices()[0])
        for fmt in (lay.Format(None, s), lay.Format(lay.Layout((0, 1)), s)):
            y = m.device_put({"a": x}, {"a": fmt})["a"]
            np.testing.assert_array_equal(np.asarray(y), x)
            assert repr(y.sharding) == repr(s)
    errors = []
    for m, lay in ((jaxkit, my_layout), (jax, their_layout)):
        s = m.sharding.SingleDeviceSharding(m.devices()[0])
        with pytest.raises(ValueError) as e:
            m.device_put(x, lay.Format(lay.Layout.AUTO, s))
        errors.append(str(e.value))
    assert errors[0] == errors[1]
    # a column-major layout in a pytree of placements (laid out as asked, as JAX's)
    laid = []
    for m, lay in ((jaxkit, my_layout), (jax, their_layout)):
        s = m.sharding.SingleDeviceSharding(m.devices()[0])
        y = m.device_put({"a": x}, {"a": lay.Format(lay.Layout((1, 0)), s)})["a"]
        np.testing.assert_array_equal(np.asarray(y), x)
        laid.append(str(y.format.layout))
    assert laid[0] == laid[1]


# --------------------------------------------------------------------------------------------
# jax._src.tree_util.prefix_errors (Flax struct_test: 13 tests, the module imports it)
# --------------------------------------------------------------------------------------------

PREFIX_CASES = [
    ("list_length", [1, 2], [1, 2, 3]),
    ("nested_tuple", {"a": 1, "b": (1,)}, {"a": 1, "b": (1, 2)}),
    ("dict_keys", {"a": 1}, {"a": 1, "c": 2}),
    ("types", [[1], [2]], [[1, 2], (3,)]),
    ("none_vs_leaf", (1, None), (1, 2)),
    ("prefix", 1, [1, 2]),
]


def test_prefix_errors_as_jax():
    from jaxkit._src_compat.tree_util import prefix_errors
    jax = _oracle()
    theirs_fn = jax._src.tree_util.prefix_errors
    for name, prefix, full in PREFIX_CASES:
        mine = [str(e("in_axes")) for e in prefix_errors(prefix, full)]
        theirs = [str(e("in_axes")) for e in theirs_fn(prefix, full)]
        assert mine == theirs, name


# --------------------------------------------------------------------------------------------
# jax._src.traceback_util.api_boundary filters hidden frames as jax_traceback_filtering says
# (Flax traceback_util_test: 3 tests, through Flax's own boundaries and its hidden files)
# --------------------------------------------------------------------------------------------

def _raise_through_boundary(tbu, mode_setter, mode, hidden_file):
    """Raise from a function compiled as if in ``hidden_file`` (a library's file, registered
    as hidden) through two nested boundaries; give the exception."""
    src = "def library_call(f):\n    return f()\n"
    namespace: dict = {}
    exec(compile(src, hidden_file, "exec"), namespace)  # noqa: S102
    inner = tbu.api_boundary(lambda: namespace["library_call"](_user_error))
    outer = tbu.api_boundary(lambda: namespace["library_call"](inner))
    mode_setter(mode)
    try:
        outer()
    except ValueError as e:
        return e
    finally:
        mode_setter("auto")


def _user_error():
    raise ValueError("boom")


def _shown(tb):
    import traceback
    return [f.f_code.co_name for f, _ in traceback.walk_tb(tb)
            if "__tracebackhide__" not in f.f_locals]


@pytest.mark.parametrize("mode", ["off", "tracebackhide", "remove_frames",
                                  "quiet_remove_frames"])
def test_api_boundary_filters_as_jax(mode):
    import os
    import tempfile

    from jaxkit._src_compat import traceback_util as mine
    jax = _oracle()
    theirs = jax._src.traceback_util
    hidden = os.path.join(tempfile.gettempdir(), "jaxkit_hidden_library", "lib.py")
    got = []
    for tbu, setter in ((mine, lambda v: jaxkit.config.update("jax_traceback_filtering", v)),
                        (theirs, lambda v: jax.config.update("jax_traceback_filtering", v))):
        tbu._exclude_paths.append(hidden)
        try:
            e = _raise_through_boundary(tbu, setter, mode, hidden)
        finally:
            tbu._exclude_paths.remove(hidden)
        cause = e.__cause__
        got.append((_shown(e.__traceback__) if mode != "off" else None,
                    type(cause).__name__, str(cause).split("\n")[0] if cause else None,
                    getattr(e, "__notes__", None)))
    assert got[0] == got[1]
