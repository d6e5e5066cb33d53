"""``jax.experimental.colocated_python.func``: colocated Python functions.

``make_callable(fun, fun_sourceinfo, fun_signature)`` gives the callable ``colocated_python``
returns. Its state is a ``Specialization``: what is fixed so far (the input specs, the function
from input to output specs, the devices), each settable once through ``specialize``. A call
checks that the arguments are arrays on one device list, runs ``fun`` here (see the package
docstring) and, with ``out_specs_fn`` given, checks the results against it and places them as
it says.
"""
from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from jaxkit import dtypes, tree_util
from jaxkit._util import wraps
from jaxkit.api import ShapeDtypeStruct, device_put
from jaxkit.runtime.array import Array
from jaxkit.runtime.multi_device import DeviceList, device_list
from jaxkit.sharding import NamedSharding, PartitionSpec
from jaxkit.source_info import api_boundary
from jaxkit.transforms.cache_registry import register_backend_cache as jax_register_backend_cache

__all__ = ["FunctionInfo", "Specialization", "api_boundary", "is_prng_key_dtype",
           "jax_register_backend_cache", "make_callable", "physical_sharding", "wraps"]

ShapeDtypeStructTree = Any  # a pytree of ShapeDtypeStruct


@dataclasses.dataclass(frozen=True, slots=True)
class FunctionInfo:
    """The user function a colocated callable wraps, with its source and signature."""

    fun: Callable[..., Any]
    fun_sourceinfo: str | None
    fun_signature: inspect.Signature | None


@dataclasses.dataclass(frozen=True, slots=True)
class Specialization:
    """What is fixed about a colocated function's calls; None where nothing is yet."""

    in_specs_treedef: tree_util.PyTreeDef | None = None
    in_specs_leaves: tuple[ShapeDtypeStruct, ...] | None = None
    out_specs_fn: Callable[..., ShapeDtypeStructTree] | None = None
    out_specs_treedef: tree_util.PyTreeDef | None = None
    out_specs_leaves: tuple[ShapeDtypeStruct, ...] | None = None
    devices: DeviceList | None = None

    def update(self, *, in_specs_treedef: tree_util.PyTreeDef | None = None,
               in_specs_leaves: tuple[ShapeDtypeStruct, ...] | None = None,
               out_specs_fn: Callable[..., ShapeDtypeStructTree] | None = None,
               out_specs_treedef: tree_util.PyTreeDef | None = None,
               out_specs_leaves: tuple[ShapeDtypeStruct, ...] | None = None,
               devices: Sequence[Any] | DeviceList | None = None) -> Specialization:
        """A specialization with the given fields set; setting a field twice is an error."""
        given = {"in_specs_treedef": in_specs_treedef, "in_specs_leaves": in_specs_leaves,
                 "out_specs_fn": out_specs_fn, "out_specs_treedef": out_specs_treedef,
                 "out_specs_leaves": out_specs_leaves, "devices": devices}
        fields = {}
        for name, new in given.items():
            old = getattr(self, name)
            if new is not None and old is not None:
                what = name.replace("_treedef", "").replace("_leaves", "")
                raise ValueError(f"{what} already specified")
            fields[name] = old if new is None else new
        if devices is not None and not isinstance(devices, DeviceList):
            fields["devices"] = device_list(tuple(devices))
        return Specialization(**fields)


def is_prng_key_dtype(dtype: Any) -> bool:
    """Whether ``dtype`` is a typed PRNG key's dtype (``key<fry>``)."""
    return dtype is not None and dtypes.issubdtype(dtype, dtypes.prng_key)


def physical_sharding(aval: Any, sharding: Any) -> Any:
    """The sharding of the physical array under an extended-dtype value (a key's
    ``uint32[..., 2]``) laid out as ``sharding``: the trailing physical dimensions are
    replicated; a one-device sharding stays as it is."""
    if sharding.num_devices == 1:
        return sharding
    if isinstance(sharding, NamedSharding):
        trailing = [None] * len(aval.dtype.physical_shape)
        return sharding.update(spec=PartitionSpec(*sharding.spec, *trailing))
    raise NotImplementedError(f"physical_sharding rule for {type(sharding).__name__}: jaxkit "
                              "lays out extended-dtype arrays only with a NamedSharding or "
                              "on one device")


def _get_spec(x: Any) -> ShapeDtypeStruct:
    if not isinstance(x, Array):
        raise ValueError("colocated_python only supports jax.Array as input and output, but "
                         f"got {type(x)}.")
    return ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)


def _infer_devices_from_args(leaves: Sequence[Any]) -> frozenset | None:
    found = {frozenset(x.devices()) for x in leaves}
    if not found:
        return None
    if len(found) > 1:
        raise ValueError("All arguments must use the same device list, but got multiple "
                         f"device lists: {found}.")
    return found.pop()


def _call(info: FunctionInfo, spec: Specialization, args: tuple, kwargs: dict) -> Any:
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    if not leaves and spec.devices is None:
        raise ValueError("No devices found. colocated_python function without input "
                         "arguments must be first specialized with devices.")
    in_specs = [_get_spec(x) for x in leaves]
    _infer_devices_from_args(leaves)
    result = info.fun(*args, **kwargs)
    out_leaves, out_tree = tree_util.tree_flatten(result)
    got = [_get_spec(x) for x in out_leaves]
    if spec.out_specs_fn is None:
        return result
    if spec.in_specs_treedef is not None:
        given = tree_util.tree_unflatten(spec.in_specs_treedef, spec.in_specs_leaves)
    else:
        given = tree_util.tree_unflatten(in_tree, in_specs)
    want_args, want_kwargs = given
    want = tree_util.tree_leaves(spec.out_specs_fn(*want_args, **want_kwargs))
    if [(w.shape, w.dtype) for w in want] != [(g.shape, g.dtype) for g in got]:
        raise ValueError(f"colocated_python: the function returned {got}, but out_specs_fn "
                         f"gave {want}")
    out_leaves = [x if w.sharding is None or w.sharding == x.sharding
                  else device_put(x, w.sharding) for x, w in zip(out_leaves, want)]
    return tree_util.tree_unflatten(out_tree, out_leaves)


def _make_callable(info: FunctionInfo, spec: Specialization) -> Callable:
    def specialize(in_specs: Any = None, out_specs_fn: Callable | None = None,
                   devices: Sequence[Any] | None = None) -> Callable:
        """A callable with more fixed: the input specs (a pytree of ``ShapeDtypeStruct`` for
        ``(args, kwargs)``), the function from input to output specs, the devices."""
        if in_specs is not None:
            leaves, treedef = tree_util.tree_flatten(in_specs)
            new = spec.update(in_specs_treedef=treedef, in_specs_leaves=tuple(leaves),
                              out_specs_fn=out_specs_fn, devices=devices)
        else:
            new = spec.update(out_specs_fn=out_specs_fn, devices=devices)
        return _make_callable(info, new)

    @api_boundary
    def call(*args, **kwargs):
        return _call(info, spec, args, kwargs)

    call = wraps(info.fun)(call)
    call.specialize = specialize
    return call


def make_callable(fun: Callable[..., Any], fun_sourceinfo: str | None,
                  fun_signature: inspect.Signature | None) -> Callable:
    """``fun`` as a colocated Python callable with nothing specialized yet (what
    ``colocated_python(fun)`` returns); it has a ``specialize(in_specs=, out_specs_fn=,
    devices=)`` method."""
    return _make_callable(FunctionInfo(fun, fun_sourceinfo, fun_signature), Specialization())
