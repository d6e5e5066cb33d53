"""The members of arrays and tracers against JAX's: every public member of ``jax.Array``
exists, concrete arrays answer as JAX's do, and tracers (under ``jit``, ``grad``, ``vmap``)
raise the same error classes for the members only a concrete array has, or answer as JAX's
(``x in tracer``, ``reversed``, ``copy.copy``, ``to_device``, ``__array_namespace__``)."""
import copy
import re
import pickle

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as kjnp

SIDES = {"jax": (jax, jjnp), "jaxkit": (jaxkit, kjnp)}

# JAX's own members that are not part of the Array interface (private state, C++ plumbing).
_INTERNAL = {"__annotations__", "__del__", "__dict__", "__module__", "__weakref__",
             "__slots__", "__orig_bases__", "__parameters__", "__class_getitem__",
             "__init_subclass__", "__subclasshook__"}


def test_every_public_member_of_jax_arrays_exists():
    a, b = jjnp.arange(3.0), kjnp.arange(3.0)
    public = {n for n in dir(a) if not n.startswith("_") or
              (n.startswith("__") and n.endswith("__"))} - _INTERNAL
    assert sorted(n for n in public if not hasattr(type(b), n) and not hasattr(b, n)) == []


ARRAY_CASES = {
    "tobytes": lambda J, jnp: jnp.arange(6.0).reshape(2, 3).tobytes(),
    "tobytes_fortran": lambda J, jnp: jnp.arange(6.0).reshape(2, 3).tobytes("F"),
    "platform": lambda J, jnp: jnp.arange(3.0).platform(),
    "on_device_size_in_bytes": lambda J, jnp: jnp.arange(3.0).on_device_size_in_bytes(),
    "pointer_is_int": lambda J, jnp: type(jnp.arange(3.0).unsafe_buffer_pointer()),
    "clone": lambda J, jnp: jnp.arange(3.0).clone(),
    "clone_committed": lambda J, jnp: J.device_put(jnp.arange(3.0),
                                                   J.devices()[0]).clone().committed,
    "clone_uncommitted": lambda J, jnp: jnp.arange(3.0).clone().committed,
    "clone_same_memory": lambda J, jnp: (lambda a: a.clone().unsafe_buffer_pointer()
                                         == a.unsafe_buffer_pointer())(jnp.arange(3.0)),
    "device_buffer": lambda J, jnp: jnp.arange(3.0).device_buffer,
    "device_buffers": lambda J, jnp: jnp.arange(3.0).device_buffers,
    "cuda_interface_on_cpu": lambda J, jnp: jnp.arange(3.0).__cuda_array_interface__,
    "hex": lambda J, jnp: jnp.int32(26).__hex__(),
    "oct": lambda J, jnp: jnp.int32(26).__oct__(),
    "hex_of_float": lambda J, jnp: hex(jnp.float32(2.0)),
    "contains": lambda J, jnp: 2.0 in jnp.arange(3.0),
    "contains_not": lambda J, jnp: 5 in jnp.arange(3.0),
    "contains_result": lambda J, jnp: jnp.arange(3.0).__contains__(1.0),
    "contains_none": lambda J, jnp: None in jnp.arange(3.0),
    "contains_str": lambda J, jnp: "a" in jnp.arange(3.0),
    "contains_2d": lambda J, jnp: 1.0 in jnp.ones((2, 2)),
    "contains_vector": lambda J, jnp: jnp.ones(2) in jnp.arange(3.0),
    "namespace_version_refused": lambda J, jnp: jnp.arange(3.0).__array_namespace__(
        api_version="2023.12"),
    "namespace_version": lambda J, jnp: jnp.__array_api_version__,
    "module_refuses_lists": lambda J, jnp: jnp.arange(3.0).__array_module__([list]),
    "to_device": lambda J, jnp: jnp.arange(3.0).to_device(J.devices()[0]),
    "to_device_committed": lambda J, jnp: jnp.arange(3.0).to_device(J.devices()[0]).committed,
    "to_device_sharding": lambda J, jnp: jnp.arange(3.0).to_device(
        J.sharding.SingleDeviceSharding(J.devices()[0])).committed,
    "to_device_stream": lambda J, jnp: jnp.arange(3.0).to_device(J.devices()[0], stream=1),
    "info_capabilities": lambda J, jnp: jnp.__array_namespace_info__().capabilities(),
    "info_default_device": lambda J, jnp: jnp.__array_namespace_info__().default_device(),
    "info_devices": lambda J, jnp: len(jnp.__array_namespace_info__().devices()),
    "info_default_dtypes": lambda J, jnp: jnp.__array_namespace_info__().default_dtypes(),
    "info_dtypes": lambda J, jnp: jnp.__array_namespace_info__().dtypes(),
    "info_integral": lambda J, jnp: jnp.__array_namespace_info__().dtypes(kind="integral"),
    "info_kinds": lambda J, jnp: jnp.__array_namespace_info__().dtypes(
        kind=("bool", "complex floating")),
}


def _outcome(fn, side):
    J, jnp = SIDES[side]
    try:
        value = fn(J, jnp)
    except Exception as e:  # noqa: BLE001 - class and message are compared
        return "raises", type(e).__name__, str(e)
    if isinstance(value, dict):
        return "dict", sorted((k, repr(v)) for k, v in value.items())
    return "value", repr(value)


@pytest.mark.parametrize("name", ARRAY_CASES)
def test_array_member_as_in_jax(name):
    assert _outcome(ARRAY_CASES[name], "jaxkit") == _outcome(ARRAY_CASES[name], "jax")


def test_namespace_is_jaxkit_numpy():
    x = kjnp.arange(3.0)
    assert x.__array_namespace__() is kjnp
    assert x.__array_namespace__(api_version="2024.12") is kjnp
    assert x.__array_module__([type(x), np.ndarray]) is kjnp


def test_traceback_says_where_the_array_was_made():
    x = kjnp.arange(3.0)
    assert "test_traceback_says_where_the_array_was_made" in str(x.traceback)


def test_info_dtypes_follow_x64(x64):
    info = kjnp.__array_namespace_info__()
    assert info.dtypes(kind="real floating") == jjnp.__array_namespace_info__().dtypes(
        kind="real floating")
    assert info.default_dtypes()["integral"] == np.dtype("int64")


# Under each transformation: what each member does on a tracer.
MEMBERS = {
    "__dlpack__": lambda x: x.__dlpack__(), "tobytes": lambda x: x.tobytes(),
    "addressable_data": lambda x: x.addressable_data(0), "delete": lambda x: x.delete(),
    "devices": lambda x: x.devices(), "is_deleted": lambda x: x.is_deleted(),
    "on_device_size_in_bytes": lambda x: x.on_device_size_in_bytes(),
    "unsafe_buffer_pointer": lambda x: x.unsafe_buffer_pointer(),
    "addressable_shards": lambda x: x.addressable_shards, "committed": lambda x: x.committed,
    "global_shards": lambda x: x.global_shards,
    "is_fully_addressable": lambda x: x.is_fully_addressable,
    "is_fully_replicated": lambda x: x.is_fully_replicated,
    "traceback": lambda x: x.traceback, "sharding": lambda x: x.sharding,
    "device": lambda x: x.device, "block_until_ready": lambda x: x.block_until_ready(),
    "copy_to_host_async": lambda x: x.copy_to_host_async(),
    "has_sharding": lambda x: hasattr(x, "sharding"),
    "has_device": lambda x: hasattr(x, "device"),
    "contains": lambda x: type(x[0] in x).__name__ != "bool",
    "reversed": lambda x: [r.shape for r in reversed(x)],
    "copy": lambda x: copy.copy(x).shape, "deepcopy": lambda x: copy.deepcopy(x).shape,
    "to_device": lambda x: x.to_device(None).shape,
    "hex": lambda x: hex(x), "pickle": lambda x: pickle.dumps(x),
}
TRANSFORMS = {
    "jit": lambda J, jnp, f: J.jit(f)(jnp.arange(3, dtype=jnp.int32)),
    "grad": lambda J, jnp, f: J.grad(lambda x: f(x).sum())(jnp.arange(3.0)),
    "vmap": lambda J, jnp, f: J.vmap(f)(jnp.arange(6.0).reshape(2, 3)),
}


def _on_tracer(transform, member, side):
    J, jnp = SIDES[side]
    seen = []

    def f(x):
        try:
            seen.append(("value", MEMBERS[member](x)))
        except Exception as e:  # noqa: BLE001
            seen.append(("raises", type(e).__name__))
        return x
    TRANSFORMS[transform](J, jnp, f)
    return seen


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("member", MEMBERS)
def test_tracer_member_as_in_jax(transform, member):
    assert _on_tracer(transform, member, "jaxkit") == _on_tracer(transform, member, "jax")


def _key_member(side, member):
    j, _ = SIDES[side]
    keys = j.random.split(j.random.key(0), 4)
    try:
        value = getattr(keys, member)
        if callable(value):
            args = {"addressable_data": (0,), "to_device": (j.devices()[0],)}.get(member, ())
            value = value(*args)
    except Exception as e:  # noqa: BLE001  (the outcome is what is compared)
        return type(e).__name__, str(e)
    if member == "pprint":  # the implementation's functions print with their addresses
        return re.sub(r" at 0x[0-9a-f]+", "", value)
    if member in ("addressable_data", "global_shards"):
        data = value if member == "addressable_data" else value[0].data
        return type(data).__name__, data.shape, str(data.dtype)
    if member == "unsafe_buffer_pointer":
        return type(value).__name__
    return repr(value) if value is None or isinstance(value, (int, bool)) else type(value).__name__


KEY_MEMBERS = ["all", "any", "argmax", "clip", "conj", "cumsum", "dot", "item", "max", "mean",
               "nonzero", "prod", "round", "sort", "std", "sum", "var", "view", "to_device",
               "flat", "real", "imag", "pprint", "addressable_data", "global_shards",
               "on_device_size_in_bytes", "unsafe_buffer_pointer", "copy_to_host_async",
               "nbytes", "itemsize", "size", "ndim", "tolist"]


@pytest.mark.parametrize("member", KEY_MEMBERS)
def test_key_array_member_as_in_jax(member):
    assert _key_member("jaxkit", member) == _key_member("jax", member)


def test_deleting_a_key_array():
    keys = jaxkit.random.split(jaxkit.random.key(0), 2)
    assert keys.is_deleted() is False
    keys.delete()
    assert keys.is_deleted() is True


def test_abstract_array_class_members_as_jax():
    """``jax.Array`` itself declares the members; used through the class they raise JAX's
    NotImplementedError (``jax.tree.map(jax.Array.sum, t)`` fails in JAX too)."""
    x_j, x_k = jjnp.ones((2, 3)), kjnp.ones((2, 3))
    names = sorted(n for n in set(dir(jax.Array)) - set(dir(object)) - _INTERNAL
                   if not n.startswith("_") or n.endswith("__"))
    assert [n for n in names if not hasattr(jaxkit.Array, n)] == []

    def outcome(cls, x, name):
        member = getattr(cls, name)
        try:
            member.fget(x) if isinstance(member, property) else member(x)
        except NotImplementedError as e:
            return str(e)
        return "ok"

    for name in ("sum", "T", "__add__", "shape", "dtype", "reshape", "at", "item", "flat",
                 "addressable_shards", "nbytes"):
        assert outcome(jaxkit.Array, x_k, name) == outcome(jax.Array, x_j, name), name
