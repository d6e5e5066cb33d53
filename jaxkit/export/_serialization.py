"""Bytes for an ``Exported``: jaxkit's own container around the StableHLO portable artifact.

The format is *not* JAX's flatbuffer (reading that needs the ``flatbuffers`` package and JAX's
generated schema, neither of which jaxkit depends on), so artifacts move between jaxkit
processes, not between jaxkit and JAX. The module inside is the same kind of StableHLO
portable artifact JAX writes, so ``Exported.mlir_module_serialized`` is interchangeable.

Layout: ``MAGIC``, a little-endian u32 header length, the UTF-8 JSON header (names, pytree
structures, avals, platforms, checks, byte sizes), the module bytes, then the serialized VJP
``Exported`` (present when ``vjp_order > 0``). Nothing is pickled: reading bytes runs no code
besides the deserializers registered for custom pytree nodes.
"""
from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from jaxkit import core
from jaxkit import tree_util
from jaxkit.export._exported import (DisabledSafetyCheck, Exported,
                                     maximum_supported_calling_convention_version,
                                     minimum_supported_calling_convention_version)

MAGIC = b"jaxkit.Exported\x00"
_FORMAT_VERSION = 1

# serialized name -> (type, aux-data deserializer); type -> (name, aux-data serializer)
# name -> (type, deserialize_auxdata, from_children); both None for a namedtuple
_names_to_types: dict[str, tuple[type, Callable | None, Callable | None]] = {}
_types_to_names: dict[type, tuple[str, Callable[[Any], bytes] | None]] = {}


def register_pytree_node_serialization(nodetype: type, *, serialized_name: str,
                                       serialize_auxdata: Callable[[Any], bytes],
                                       deserialize_auxdata: Callable[[bytes], Any],
                                       from_children: Callable | None = None) -> type:
    """Let ``Exported.serialize`` write pytrees holding ``nodetype`` under
    ``serialized_name``, its auxiliary data through the two functions given. Deserialized,
    a node is rebuilt by ``from_children(aux_data, children)``, by default the unflatten of
    the type's pytree registration (which it then must have)."""
    if from_children is None:
        node = tree_util._node_of(nodetype)
        if node is None:
            raise ValueError("If `from_children` is not present, you must call first"
                             f"`jax.tree_util.register_pytree_node` for `{nodetype}`")
        from_children = node.unflatten
    _register(nodetype, serialized_name, serialize_auxdata, deserialize_auxdata, from_children)
    return nodetype


def register_namedtuple_serialization(nodetype: type, *, serialized_name: str) -> type:
    """Let ``Exported.serialize`` write pytrees holding the namedtuple class ``nodetype``."""
    if not (issubclass(nodetype, tuple) and hasattr(nodetype, "_fields")):
        raise ValueError(f"Cannot register {nodetype} as a namedtuple: it is not a namedtuple "
                         "class")
    _register(nodetype, serialized_name, None, None, None)
    return nodetype


def _register(nodetype, name, ser, deser, from_children) -> None:
    if name in _names_to_types:
        raise ValueError(f"a pytree node type is already registered for serialization with "
                         f"serialized_name {name!r}: {_names_to_types[name][0]}")
    if nodetype in _types_to_names:
        raise ValueError(f"{nodetype} is already registered for serialization under the name "
                         f"{_types_to_names[nodetype][0]!r}")
    _names_to_types[name] = (nodetype, deser, from_children)
    _types_to_names[nodetype] = (name, ser)


# --------------------------------------------------------------------------------------------
# Pytree structures and avals
# --------------------------------------------------------------------------------------------

def _tree_to_json(treedef) -> Any:
    data = treedef.node_data()
    if data is None:
        return "*"
    t, aux = data
    children = [_tree_to_json(c) for c in treedef.children()]
    if t is type(None):
        return {"node": "None"}
    if t in (tuple, list):
        return {"node": t.__name__, "children": children}
    if t is dict:
        if not all(isinstance(k, str) for k in aux):
            raise TypeError(f"Exported serialization supports dicts with str keys only; got "
                            f"keys {aux}")
        return {"node": "dict", "keys": list(aux), "children": children}
    registered = _types_to_names.get(t)
    if registered is None:
        kind = "namedtuple" if issubclass(t, tuple) and hasattr(t, "_fields") else "pytree node"
        fix = ("register_namedtuple_serialization" if kind == "namedtuple" else
               "register_pytree_node_serialization")
        raise ValueError(f"Cannot serialize PyTreeDef containing an unregistered type {t} "
                         f"({kind}). Use `export.{fix}`.")
    name, ser = registered
    out = {"node": "custom", "name": name, "children": children}
    if ser is not None:
        out["aux"] = base64.b64encode(ser(aux)).decode("ascii")
    return out


class _Leaf:
    """A placeholder leaf while a structure is rebuilt."""


def _example_from_json(spec: Any) -> Any:
    if spec == "*":
        return _Leaf()
    kind = spec["node"]
    if kind == "None":
        return None
    children = [_example_from_json(c) for c in spec.get("children", ())]
    if kind == "tuple":
        return tuple(children)
    if kind == "list":
        return children
    if kind == "dict":
        return dict(zip(spec["keys"], children))
    if spec["name"] not in _names_to_types:
        raise ValueError(f"Cannot deserialize a PyTreeDef holding the type serialized as "
                         f"{spec['name']!r}: register it in this process with "
                         "export.register_pytree_node_serialization (or "
                         "register_namedtuple_serialization) before deserialize.")
    t, deser, from_children = _names_to_types[spec["name"]]
    if deser is None:  # a namedtuple
        return t(*children)
    return from_children(deser(base64.b64decode(spec["aux"])), children)


def _tree_from_json(spec: Any):
    return tree_util.tree_structure(_example_from_json(spec),
                                    is_leaf=lambda x: isinstance(x, _Leaf))


_DTYPES = {name: np.dtype(getattr(ml_dtypes, name)) for name in (
    "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
    "float8_e4m3b11fnuz", "int4", "uint4") if hasattr(ml_dtypes, name)}


def _dtype(name: str) -> np.dtype:
    return _DTYPES.get(name) or np.dtype(name)


def _aval_to_json(aval: core.ShapedArray) -> list:
    return [list(aval.shape), np.dtype(aval.dtype).name, bool(aval.weak_type)]


def _aval_from_json(spec: list) -> core.ShapedArray:
    # (strongly typed, as JAX deserializes them: its format keeps no weak types)
    shape, dtype, _ = spec
    return core.ShapedArray(tuple(shape), _dtype(dtype))


# --------------------------------------------------------------------------------------------
# Exported <-> bytes
# --------------------------------------------------------------------------------------------

def serialize(exp: Exported, vjp_order: int = 0) -> bytes:
    """``exp`` as bytes, with its VJPs up to order ``vjp_order`` (so that ``grad`` of the
    deserialized function works to that order)."""
    if vjp_order < 0:
        raise ValueError(f"vjp_order must be >= 0; got {vjp_order}")
    vjp = b""
    if vjp_order > 0:
        if not exp.has_vjp():
            raise ValueError(f"serialize(vjp_order={vjp_order}) of {exp.fun_name}: the "
                             "Exported has no VJP (it was deserialized with a lower "
                             "vjp_order); serialize with a smaller vjp_order.")
        vjp = serialize(exp.vjp(), vjp_order - 1)
    header = {
        "format": _FORMAT_VERSION,
        "fun_name": exp.fun_name,
        "in_tree": _tree_to_json(exp.in_tree),
        "out_tree": _tree_to_json(exp.out_tree),
        "in_avals": [_aval_to_json(a) for a in exp.in_avals],
        "out_avals": [_aval_to_json(a) for a in exp.out_avals],
        "nr_devices": exp.nr_devices,
        "platforms": list(exp.platforms),
        "disabled_safety_checks": [str(c) for c in exp.disabled_safety_checks],
        "calling_convention_version": exp.calling_convention_version,
        "module_kept_var_idx": list(exp.module_kept_var_idx),
        "uses_global_constants": exp.uses_global_constants,
        "module_size": len(exp.mlir_module_serialized),
        "vjp_size": len(vjp),
    }
    head = json.dumps(header).encode("utf-8")
    return MAGIC + struct.pack("<I", len(head)) + head + exp.mlir_module_serialized + vjp


def deserialize(blob: bytes | bytearray) -> Exported:
    """The ``Exported`` that ``Exported.serialize`` wrote into ``blob``."""
    blob = bytes(blob)
    if not blob.startswith(MAGIC):
        raise ValueError("deserialize: the bytes are not an Exported serialized by jaxkit "
                         "(JAX's flatbuffer format is not readable by jaxkit: re-export the "
                         "function with jaxkit.export)")
    (size,) = struct.unpack_from("<I", blob, len(MAGIC))
    start = len(MAGIC) + 4
    header = json.loads(blob[start:start + size].decode("utf-8"))
    if header["format"] != _FORMAT_VERSION:
        raise ValueError(f"deserialize: serialization format {header['format']} is not "
                         f"supported (this jaxkit reads format {_FORMAT_VERSION})")
    version = header["calling_convention_version"]
    if not (minimum_supported_calling_convention_version <= version
            <= maximum_supported_calling_convention_version):
        raise ValueError(f"The calling convention version {version} is not supported; this "
                         "jaxkit supports versions "
                         f"{minimum_supported_calling_convention_version} to "
                         f"{maximum_supported_calling_convention_version}.")
    pos = start + size
    module = blob[pos:pos + header["module_size"]]
    pos += header["module_size"]
    vjp_blob = blob[pos:pos + header["vjp_size"]]
    get_vjp = (lambda _exp: deserialize(vjp_blob)) if vjp_blob else None
    in_avals = tuple(map(_aval_from_json, header["in_avals"]))
    out_avals = tuple(map(_aval_from_json, header["out_avals"]))
    return Exported(
        fun_name=header["fun_name"], in_tree=_tree_from_json(header["in_tree"]),
        in_avals=in_avals, out_tree=_tree_from_json(header["out_tree"]), out_avals=out_avals,
        in_shardings_hlo=(None,) * len(in_avals), out_shardings_hlo=(None,) * len(out_avals),
        nr_devices=header["nr_devices"], platforms=tuple(header["platforms"]),
        ordered_effects=(), unordered_effects=(),
        disabled_safety_checks=tuple(DisabledSafetyCheck(c)
                                     for c in header["disabled_safety_checks"]),
        mlir_module_serialized=module, calling_convention_version=version,
        module_kept_var_idx=tuple(header["module_kept_var_idx"]),
        uses_global_constants=header["uses_global_constants"], _get_vjp=get_vjp)


Exported._serialize = staticmethod(serialize)  # Exported.serialize lives here, beside the format
