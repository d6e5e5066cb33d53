"""The names ``bench/missing_jax_names.py`` found missing, against the JAX oracle: one record
per behaviour (a function of the library's namespace returning plain values), run on jaxkit
and on JAX, whose results must be equal. Then the names that are JAX's re-exports: each must
be the very object jaxkit's own module has.

Covered: ``colocated_python``'s submodules (stores, registry, specializations), the roofline's
sharded output shapes and helpers, sparse BCSR rules and methods, ``transfer``'s class
decorators, ``AbstractValue`` and ``jax.core``'s names, ``EArray``/``primal_tangent_dtype``,
``experimental.rnn`` and ``serialize_executable``."""
from __future__ import annotations

import importlib
import types

import numpy as np
import pytest

import jaxkit
import jaxkit._src_compat.earray as kearray
from jaxkit import _util as kutil
from jaxkit import source_info as ksource_info
from jaxkit import tree_util as ktree_util
from jaxkit.experimental.colocated_python import api as kcp_api
from jaxkit.experimental.colocated_python import func as kcp_func
from jaxkit.experimental.colocated_python import obj as kcp_obj
from jaxkit.experimental.colocated_python import serialization as kcp_serialization
from jaxkit.extend import backend as kbackend
from jaxkit.interpreters import partial_eval as kpe
from jaxkit.runtime import multi_device as kmulti_device

jax = pytest.importorskip("jax")
from jax._src import tree_util as jtree_util  # noqa: E402
from jax._src import util as jutil  # noqa: E402


def _namespace(lib, prefix: str, util, tree_util) -> types.SimpleNamespace:
    mod = lambda name: importlib.import_module(f"{prefix}.{name}")
    return types.SimpleNamespace(
        lib=lib, jnp=lib.numpy, lax=lib.lax, util=util, tree_util=tree_util,
        experimental=mod("experimental"), cp=mod("experimental.colocated_python"),
        cp_func=mod("experimental.colocated_python.func"),
        cp_obj=mod("experimental.colocated_python.obj"),
        cp_func_backend=mod("experimental.colocated_python.func_backend"),
        cp_obj_backend=mod("experimental.colocated_python.obj_backend"),
        roofline=mod("experimental.roofline"), sparse=mod("experimental.sparse"),
        transfer=mod("experimental.transfer"), hijax=mod("experimental.hijax"),
        rnn=mod("experimental.rnn"), serialize=mod("experimental.serialize_executable"))


KIT = _namespace(jaxkit, "jaxkit", kutil, ktree_util)
# (the package's ``roofline`` attribute is the function, as in JAX)
kroofline = importlib.import_module("jaxkit.experimental.roofline.roofline")
JAX = _namespace(jax, "jax", jutil, jtree_util)


def _error(call) -> str:
    try:
        call()
    except Exception as e:  # noqa: BLE001  (the class is the result)
        return f"{type(e).__name__}: {e}" if isinstance(e, ValueError) else type(e).__name__
    return "no error"


# ---- colocated_python ----------------------------------------------------------------------


def _result_store(m):
    store = type(m.cp_func_backend.SINGLETON_RESULT_STORE)()
    store.push(7, ["a"])
    return [_error(lambda: store.push(7, [])), store.pop(7), _error(lambda: store.pop(7))]


def _object_store(m):
    store = type(m.cp_obj_backend.SINGLETON_OBJECT_STORE)()
    made = []
    first = store.get_or_create(1, lambda: made.append(1) or "obj")
    again = store.get_or_create(1, lambda: made.append(2) or "other")

    def fail():
        raise KeyError("no")
    return [first, again, made, _error(lambda: store.get_or_create(2, fail)),
            _error(lambda: store.get_or_create(2, lambda: "late"))]


def _consumable_ref(m):
    class Obj:
        pass
    ref = m.cp_obj_backend._ConsumableRef(Obj())
    obj = ref()
    out = [type(obj).__name__, ref() is obj]
    del obj
    return out + [ref()]


def _instance_registry(m):
    registry = type(m.cp_obj.SINGLETON_INSTANCE_REGISTRY)()
    uid = registry.new_instance()
    registry.update_devices(uid, {"d0"})
    registry.update_devices(uid, {"d1"})
    return [sorted(registry.pop_instance(uid)), _error(lambda: registry.pop_instance(uid))]


def _specialization(m):
    spec = m.cp_func.Specialization()
    fn = lambda *a: a
    once = spec.update(out_specs_fn=fn, devices=m.lib.devices()[:1])
    return [once.out_specs_fn is fn, repr(list(once.devices)), once.in_specs_leaves,
            _error(lambda: once.update(out_specs_fn=fn)),
            _error(lambda: once.update(devices=m.lib.devices())),
            _error(lambda: once.update(in_specs_treedef=1).update(in_specs_treedef=2))]


def _func_helpers(m):
    key = m.lib.random.key(0)
    return [m.cp_func.is_prng_key_dtype(key.dtype), m.cp_func.is_prng_key_dtype(np.float32),
            m.cp_func.is_prng_key_dtype(None),
            repr(m.cp_func.physical_sharding(m.lib.typeof(key), key.sharding)),
            m.cp_func.FunctionInfo(len, None, None).fun is len]


def _make_callable(m):
    f = m.cp_func.make_callable(lambda x: x * 2, None, None)
    x = m.jnp.arange(3)
    g = f.specialize(devices=m.lib.devices()[:1])
    return [repr(f(x)), repr(g(x)), _error(lambda: g.specialize(devices=m.lib.devices()))]


# ---- the other modules ---------------------------------------------------------------------


def _foreach_and_broadcast_prefix(m):
    def calls(*args):
        out = []
        return out, _error(lambda: m.util.foreach(lambda *a: out.append(a), *args))
    prefix = m.tree_util.broadcast_prefix
    return [calls([1, 2], [3, 4]), calls([1, 2], [3]), calls([1], [3, 4]),
            prefix((1, 2), ([3, 4], 5)), prefix({"a": 1, "b": 2}, {"b": [1, 2], "a": None}),
            _error(lambda: prefix([1, 2], [1])).split(":")[0]]


def _roofline_sharded_shapes(m):
    mesh = m.lib.sharding.AbstractMesh((2,), ("x",))
    x = m.lib.ShapeDtypeStruct((4, 2), np.float32)
    f = lambda a: (a * 2, m.lax.psum(a.sum(0), "x"))
    out, _ = m.roofline.roofline(f, mesh, m.lib.P("x"), (m.lib.P("x"), m.lib.P()))(x)
    return repr(out)


def _bcsr_rules(m):
    # built from its buffers: JAX's BCSR.fromdense costs seconds of compiling
    mat = m.sparse.BCSR((m.jnp.array([1.0, 2.0]), m.jnp.array([0, 1], m.jnp.int32),
                         m.jnp.array([0, 1, 2], m.jnp.int32)), shape=(2, 2))
    both = lambda a: m.sparse.sparsify(lambda a, b: m.jnp.concatenate([a, b]))(a, a)
    cat, prod = m.lib.jit(lambda a: (both(a).todense(), a @ m.jnp.ones(2)))(mat)
    return [type(m.lib.eval_shape(both, mat)).__name__, np.asarray(cat).tolist(),
            np.asarray(prod).tolist()]


def _cpp_class(m):
    class Cpp:
        def f(self):
            return "cpp f"

        def g(self):
            return "cpp g"

    class Py:
        """doc"""

        @m.transfer.use_cpp_method()
        def f(self):
            return "py f"

        def g(self):
            return "py g"

        @property
        @m.transfer.use_cpp_method(False)
        def p(self):
            return "py p"

    cls = m.transfer.use_cpp_class(Cpp)(Py)
    obj = cls()
    return [cls is Cpp, cls.__doc__, obj.f(), obj.g(), obj.p,
            m.transfer.use_cpp_class(None)(Py) is Py,
            _error(lambda: m.transfer.use_cpp_method("yes"))]


def _abstract_value(m):
    class Ty(m.hijax.HiType):
        pass
    x = m.jnp.ones(2)
    av = m.hijax.AbstractValue
    return [av is m.lib.core.AbstractValue, isinstance(m.lib.typeof(x), av),
            isinstance(m.lib.typeof(m.lib.new_ref(x)), av), isinstance(Ty(), av),
            isinstance(x, av), isinstance(3, av)]


def _core_names(m):
    @m.lib.jit
    def f(x):
        with m.lib.core.ensure_compile_time_eval():
            n = int(m.jnp.arange(4).sum())
        with m.lib.core.eval_context():
            k = m.jnp.ones(2).sum()
        return x + n + k
    return [m.lib.core.max_dim(3, 5), m.lib.core.min_dim(3, np.int64(5)),
            m.lib.core.ensure_compile_time_eval is m.lib.ensure_compile_time_eval,
            np.asarray(f(m.jnp.ones(2))).tolist(), _error(lambda: m.lib.core.max_dim(3, "a"))]


def _primal_tangent_dtype(m):
    dt = m.experimental.primal_tangent_dtype(m.jnp.float32, m.jnp.int8)
    x = m.jnp.arange(3.0)
    f = lambda x: m.lax.convert_element_type(m.lax.convert_element_type(x, dt), np.float32)
    return [repr(dt), str(m.experimental.primal_tangent_dtype("float16", "bfloat16")),
            str(m.experimental.primal_tangent_dtype("float16", "uint8", name="foo")),
            str(dt.primal_dtype), str(dt.tangent_dtype), str(m.lib.make_jaxpr(f)(x)),
            np.asarray(m.lib.jit(f)(x)).tolist(),
            str(m.lib.eval_shape(lambda x: m.lax.convert_element_type(x, dt), x))]


_RNG = np.random.default_rng(0)
_LSTM_W = _RNG.uniform(-0.5, 0.5, 56).astype(np.float32)  # input 3, hidden 2, one layer
_LSTM_X = _RNG.normal(size=(2, 4, 3)).astype(np.float32)
_LSTM_H = _RNG.normal(size=(1, 2, 2)).astype(np.float32)


def _rnn(m):
    lengths = m.jnp.array([4, 2], m.jnp.int32)
    args = (3, 2, 1, 0.0, False)  # input size, hidden size, layers, dropout, bidirectional

    @m.lib.jit
    def run(w, x, h):  # one program: the weights unpacked, the LSTM and the gates swapped
        pieces = m.rnn.unpack_lstm_weights(w, *args[:3], args[4])
        swapped = m.rnn.swap_lstm_gates(w, *args[:3], args[4])
        return m.rnn.lstm_ref(x, h, h, *pieces, lengths, *args), swapped

    (y, h_n, c_n), swapped = run(_LSTM_W, _LSTM_X, _LSTM_H)
    pieces = m.lib.eval_shape(lambda w: m.rnn.unpack_lstm_weights(w, 3, 2, 1, False), _LSTM_W)
    shapes = [{k: v.shape for k, v in d.items()} for d in pieces]
    w = m.rnn.init_lstm_weight(m.lib.random.key(0), 3, 2, 1, False)
    return [m.rnn.get_num_params_in_lstm(3, 4, 2, True), m.rnn.get_num_params_in_lstm(3, 2, 1,
                                                                                     False),
            np.asarray(w).round(5).tolist(), shapes,
            [np.asarray(a).round(5).tolist() for a in (y, h_n, c_n, swapped)],
            _error(lambda: m.rnn.lstm(_LSTM_X, _LSTM_H, _LSTM_H, _LSTM_W,
                                      lengths.astype(np.float32), *args)),
            _error(lambda: m.rnn.lstm_ref(_LSTM_X, _LSTM_H, _LSTM_H, *m.rnn.unpack_lstm_weights(
                _LSTM_W, 3, 2, 1, False), lengths, 3, 2, 1, 0.5, False))]


def _serialize_executable(m):
    args = (m.jnp.arange(3.0), 2.0)
    compiled = m.lib.jit(lambda x, y: (x * 2 + y, x.sum())).lower(*args).compile()
    payload, in_tree, out_tree = m.serialize.serialize(compiled)
    loaded = m.serialize.deserialize_and_load(payload, in_tree, out_tree)
    return [str(in_tree), str(out_tree), str(loaded.args_info),
            [np.asarray(r).tolist() for r in loaded(*args)],
            _error(lambda: loaded(m.jnp.ones(4), 2.0)), _error(lambda: loaded(args[0]))]


RECORDS = [_result_store, _object_store, _consumable_ref, _instance_registry, _specialization,
           _func_helpers, _make_callable, _foreach_and_broadcast_prefix,
           _roofline_sharded_shapes, _bcsr_rules, _cpp_class, _abstract_value, _core_names,
           _primal_tangent_dtype, _rnn, _serialize_executable]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.__name__.strip("_"))
def test_matches_jax(record):
    assert record(KIT) == record(JAX)


# (module, name, the jaxkit object it must be): JAX's modules import these names from
# elsewhere; jaxkit's modules name the same objects as jaxkit's own.
SAME_OBJECTS = [
    (kcp_api, "make_callable", kcp_func.make_callable), (kcp_api, "wrap_class", kcp_obj.wrap_class),
    (kcp_func, "jax_register_backend_cache", kbackend.register_backend_cache),
    (kcp_obj, "register_cache", kbackend.register_backend_cache),
    (kcp_func, "api_boundary", ksource_info.api_boundary), (kcp_func, "wraps", kutil.wraps),
    (kcp_serialization, "DeviceList", kmulti_device.DeviceList),
    (kroofline, "tree_map", ktree_util.tree_map),
    (kroofline, "broadcast_prefix", ktree_util.broadcast_prefix),
    (kroofline, "foreach", kutil.foreach), (kroofline, "map", kutil.safe_map),
    (kroofline, "dce_jaxpr", kpe.dce_jaxpr),
    (kroofline, "NamedSharding", jaxkit.sharding.NamedSharding),
    (KIT.transfer, "use_cpp_class", kutil.use_cpp_class),
    (KIT.experimental, "EArray", kearray.EArray),
    (KIT.rnn, "custom_vjp", jaxkit.custom_vjp), (KIT.rnn, "sigmoid", jaxkit.nn.sigmoid),
    (KIT.rnn, "Array", jaxkit.Array),
]


def test_reexported_names_are_jaxkits_objects():
    wrong = [f"{mod.__name__}.{name}" for mod, name, want in SAME_OBJECTS
             if getattr(mod, name) is not want]
    assert not wrong


def test_loop_variables_as_jaxs():
    """JAX's modules leave their registration loops' last entries as module names."""
    def last_bcsr_rule(m):
        transform = importlib.import_module(f"{m.lib.__name__}.experimental.sparse.transform")
        return transform.prim.name
    assert last_bcsr_rule(KIT) == last_bcsr_rule(JAX) == "concatenate"


def test_colocated_package_has_jaxs_submodules():
    subs = ["api", "func", "func_backend", "obj", "obj_backend", "serialization"]
    for sub in subs:
        importlib.import_module(f"jax.experimental.colocated_python.{sub}")
    assert sorted(KIT.cp.__all__) == sorted(
        n for n in dir(JAX.cp) if not n.startswith("_") and n not in subs)
