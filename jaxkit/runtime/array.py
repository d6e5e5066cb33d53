"""``Array``: an immutable array living in a device buffer.

A thin ``__slots__`` wrapper around jaxlib's ``ArrayImpl`` (which cannot be subclassed, and
whose class jax itself monkey-patches, so we leave it alone). Results of computations are
wrapped without copying; conversion to NumPy happens only when asked for (``np.asarray``,
printing, ``float()``), and the NumPy view is cached.

Operators and NumPy-style methods (``x + y``, ``x.sum()``, ``x[1:]``, ``x.at[...]``) are
installed by ``jaxkit.numpy`` on this class and on tracers alike.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit.runtime import dlpack_io, pjrt
from jaxkit.runtime import mesh as runtime_mesh
from jaxkit._config import config
from jaxkit.core import ShapedArray
from jaxkit.literals import float0_zeros


class Array:
    """An immutable n-dimensional array on a device (like ``jax.Array``)."""

    __slots__ = ("_buf", "aval", "_npy", "__weakref__")
    __array_priority__ = 100

    def __init__(self, buf: pjrt.ArrayImpl):
        # Every dispatch makes one of these: _npy (the host copy) stays unset until asked for.
        self._buf = buf
        self.aval: ShapedArray = buf.aval

    # ---- metadata ----
    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def device(self):
        return pjrt.device_of(self._buf)

    def devices(self) -> set:
        return {self.device}

    @property
    def sharding(self):
        return self._buf._sharding

    @property
    def committed(self) -> bool:
        """Whether the array was placed on its device by the user (``device_put(x, device)``,
        ``to_device``) or computed from such an array: computations on it run there."""
        return self._buf._committed

    # JAX's own (private) name, which libraries read
    _committed = committed

    # One device holds the whole array: one shard, fully addressable and replicated.
    is_fully_addressable = True
    is_fully_replicated = True

    @property
    def addressable_shards(self) -> list[Shard]:
        return [Shard(self.device, tuple(slice(None) for _ in self.shape), 0, self)]

    global_shards = addressable_shards

    def addressable_data(self, index: int) -> Array:
        if index != 0:
            raise IndexError(f"shard index {index} out of range for an array with 1 shard")
        return self

    # (``to_device``, the array API's copy to a device or sharding, is ``api_devices``'s)

    # ---- synchronisation ----
    def block_until_ready(self) -> Array:
        """Wait until the computation producing this array has finished; return self."""
        self._check_alive()
        self._buf.block_until_ready()
        return self

    def is_ready(self) -> bool:
        return self._buf.is_ready()

    def copy_to_host_async(self) -> None:
        """Start copying the value to host memory (what ``np.asarray`` waits for later)."""
        self._check_alive()
        # jaxlib's buffer names the method as JAX's single-device arrays call it.
        self._buf._copy_single_device_array_to_host_async()

    def delete(self) -> None:
        self._buf.delete()
        try:
            del self._npy  # the host copy, if it was fetched
        except AttributeError:
            pass

    def is_deleted(self) -> bool:
        return self._buf.is_deleted()

    # ---- the device memory ----
    def platform(self) -> str:
        """The platform of the array's device (``'cpu'``, ``'gpu'``)."""
        return self.device.platform

    def unsafe_buffer_pointer(self) -> int:
        """The address of the array's device memory (valid while the array lives)."""
        self._check_alive()
        return self._buf.unsafe_buffer_pointer()

    def on_device_size_in_bytes(self) -> int:
        """The bytes the array takes on its device (its layout's padding included)."""
        self._check_alive()
        return self._buf.on_device_size_in_bytes()

    @property
    def __cuda_array_interface__(self):
        if self.platform() != "gpu":
            raise AttributeError("__cuda_array_interface__ is only defined for GPU buffers.")
        return self._buf.__cuda_array_interface__

    def clone(self) -> Array:
        """A new array of the same value, device and commitment (sharing the immutable
        memory, as JAX's)."""
        self._check_alive()
        return Array(self._buf.clone())

    @property
    def traceback(self):
        """Where the array was made: the Python stack jaxlib recorded when its program ran."""
        return self._buf.traceback

    # Removed from JAX's arrays; the message says what replaced them, as JAX's does.
    @property
    def device_buffer(self):
        raise AttributeError("arr.device_buffer has been deprecated. Use arr.addressable_data(0)")

    @property
    def device_buffers(self):
        raise AttributeError("arr.device_buffers has been deprecated. Use [x.data for x in "
                             "arr.addressable_shards]")

    def _check_alive(self) -> None:
        if self._buf.is_deleted():
            raise RuntimeError(pjrt.deleted_message(self.aval))

    # ---- conversion to host values ----
    @property
    def _value(self) -> np.ndarray:
        try:
            return self._npy
        except AttributeError:  # not fetched yet
            self._check_alive()
            npy = self._npy = pjrt.fetch(self._buf)
            return npy

    def __array__(self, dtype=None, copy=None):
        value = self._value
        if dtype is not None and np.dtype(dtype) != value.dtype:
            return value.astype(dtype)
        return value.copy() if copy else value

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None):
        """A DLPack capsule of this array's device memory (a copy with ``copy=True``)."""
        self._check_alive()
        if dl_device is not None and tuple(dl_device) != tuple(self.__dlpack_device__()):
            raise BufferError(f"__dlpack__: the array is on {self.device}, which DLPack "
                              f"names {self.__dlpack_device__()}; copying to {dl_device} is "
                              "not supported: device_put the array there first.")
        buf = self._buf
        if copy:
            buf = pjrt.put(np.array(self._value), self.aval, self.device, may_alias=True)
        return dlpack_io.to_dlpack(buf, stream)

    def __dlpack_device__(self) -> tuple:
        return dlpack_io.dlpack_device(self.device)

    def item(self, *args):
        return self._value.item(*args)

    def tolist(self):
        return self._value.tolist()

    def tobytes(self, order: str = "C") -> bytes:
        return self._value.tobytes(order)

    @property
    def __numpy_dtype__(self) -> np.dtype:
        # NumPy 2.4's protocol for ``np.dtype(x)``; JAX deprecates it, with this warning.
        warnings.warn("Implicit conversion of an array to a dtype is deprecated; rather than "
                      "dtype=arr use dtype=arr.dtype. In the future this will result in an "
                      "error.", DeprecationWarning, stacklevel=2)
        return self.dtype

    def __float__(self):
        return float(self._value)

    def __int__(self):
        return int(self._value)

    def __complex__(self):
        return complex(self._value)

    def __bool__(self):
        if self.size != 1:
            raise ValueError("The truth value of an array with more than one element is "
                             "ambiguous. Use a.any() or a.all()")
        return bool(self._value)

    def __index__(self):
        if self.shape or not np.issubdtype(self.dtype, np.integer):  # JAX's words
            raise TypeError("Only integer scalar arrays can be converted to a scalar index.")
        return int(self._value)

    def __hex__(self):
        return hex(self.__index__())

    def __oct__(self):
        return oct(self.__index__())

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __format__(self, spec):
        return format(self._value.item() if self.ndim == 0 else self._value, spec)

    def __repr__(self):
        if self._buf.is_deleted():
            return "Array(<deleted>)"
        prefix = "Array("
        dtype_text = f"dtype={self.dtype.name}" + (", weak_type=True" if self.weak_type else "")
        if self.size == 0:
            body = f"[], shape={self.shape}"
        else:
            body = np.array2string(self._value, prefix=prefix, suffix=",", separator=", ",
                                   max_line_width=np.get_printoptions()["linewidth"])
        # JAX's layout: the dtype follows on the last line, after a wider gap when that line
        # is already long (kept identical so that printed outputs match JAX's).
        last_line = len(body) - body.rfind("\n") + 1
        gap = " " * len(prefix) if last_line + len(dtype_text) + 2 > np.get_printoptions()[
            "linewidth"] else " "
        return f"{prefix}{body},{gap}{dtype_text})"

    def __str__(self):
        return str(self._value)

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))

    def __reduce__(self):
        return (_reconstruct, (np.array(self._value), self.weak_type))

    def __setitem__(self, idx, value):
        raise TypeError(core.IMMUTABLE_MESSAGE)

    __hash__ = None  # type: ignore[assignment]

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def _reconstruct(value: np.ndarray, weak_type: bool) -> Array:
    return device_put_value(value, weak_type=weak_type)


core.pytype_aval_mappings[Array] = lambda x: x.aval


def device_put_value(x: Any, device=None, weak_type: bool | None = None,
                     dtype=None, memory_kind: str | None = None) -> Array:
    """Any array-like (NumPy, Python scalar, Array) -> Array on ``device``, committed to it,
    in its memory space ``memory_kind`` (None: the default one); with no ``device``, an Array
    stays as it is and other values go to the default device, uncommitted."""
    if type(x) is Array and dtype is None:
        if device is None:
            return x
        return Array(pjrt.copy_to_device(x._buf, x.aval, device, memory_kind=memory_kind))
    if getattr(type(x), "laid_out", False) and dtype is None and (device is None or (
            x.committed and x.device == device)):
        return x  # an array laid out in another order stays as it is where it is
    aval = core.get_aval(x)
    if isinstance(aval.dtype, dtypes.ExtendedDType):  # a key array moves its data
        if device is None:
            return x
        data = device_put_value(aval.dtype.to_physical(x), device)
        return aval.dtype.from_physical(data._buf)
    if dtype is not None:
        aval = aval.update(dtype=dtypes.canonicalize_dtype(dtype), weak_type=False)
    if weak_type is not None:
        aval = aval.update(weak_type=weak_type)
    if aval.dtype == dtypes.float0:  # no data, no device: JAX's host zeros
        return float0_zeros(aval.shape)
    host = x._value if type(x) is Array else _canonical_host_value(x)
    value = np.asarray(host, dtype=aval.dtype)
    return Array(pjrt.put(value, aval, device, committed=device is not None,
                          memory_kind=memory_kind))


# (value, type, aval, device[, sign]) -> device buffer of a Python scalar: `x * 2.0` in a loop
# puts the constant once. Safe because buffers are immutable; a donated one is re-put. The
# device is None for the default one while placement is not spread (see `pjrt.Placement`).
# Floats carry their sign in the key (-0.0 == 0.0); complex scalars are not cached.
_scalar_buffers: dict = {}
_cached_scalars = frozenset({int, float, bool})
config.on_change(lambda name, value: _scalar_buffers.clear())  # e.g. x64 changes avals
_placement = pjrt.placement


# Python type -> ``handler(x)``, the value a program receives for an argument of that type (or
# of a subclass), converted to a buffer of its aval: how a library's own array-like type
# (given an aval in ``core.pytype_aval_mappings``) becomes data. JAX's
# ``canonicalize_value_handlers`` (``jax.interpreters.xla.canonicalize_dtype_handlers``).
canonicalize_value_handlers: dict[type, Callable[[Any], Any]] = {}


def _canonical_host_value(x: Any) -> Any:
    for t in type(x).__mro__:
        handler = canonicalize_value_handlers.get(t)
        if handler is not None:
            return handler(x)
    return x


def to_buffer(x: Any, aval: ShapedArray, device=None) -> pjrt.ArrayImpl:
    """The device buffer for an argument of aval ``aval`` (which came from ``get_aval(x)``) of
    a program running on ``device`` (None: the current default device)."""
    if isinstance(aval.dtype, dtypes.ExtendedDType):  # a key array passes its data
        return to_buffer(aval.dtype.to_physical(x), core.physical_aval(aval), device)
    if device is None and _placement.spread:
        device = pjrt.current_default_device()
    if type(x) is Array:
        if device is not None and x._buf._sharding._device != device:
            return pjrt.copy_to_device(x._buf, x.aval, device, committed=False)
        return x._buf
    t = type(x)
    if t is core.Token:
        return x._buf
    if t in _cached_scalars:
        key = (x, t, aval, device, math.copysign(1.0, x)) if t is float else (x, t, aval, device)
        buf = _scalar_buffers.get(key)
        if buf is None or buf.is_deleted():
            if len(_scalar_buffers) >= 1024:  # NaNs never match: keep the table bounded
                _scalar_buffers.clear()
            buf = _scalar_buffers[key] = pjrt.put(np.asarray(x, dtype=aval.dtype), aval, device)
        return buf
    return pjrt.put(np.asarray(_canonical_host_value(x), dtype=aval.dtype), aval, device)


def placement(args: Sequence, fun_name: str,
              arg_names: Sequence[str] | Callable[[], Sequence[str]] | None = None,
              inner: bool = False) -> tuple:
    """``(sharding, committed)``: where a computation on ``args`` runs, as the one
    ``Sharding`` object of its device (``sharding._device``). On the device its committed
    ``Array`` arguments share (the results are committed there too), else on the current
    default device (uncommitted arguments elsewhere are moved). Arguments committed to
    different devices raise JAX's ``ValueError`` naming them (``arg_names``, or a function
    giving them, called only then; default ``args[i]``) and ``fun_name``; the ``inner``
    computation of a jit call under a transformation raises ``DeviceMismatch``, which that
    call renames (as JAX's)."""
    where = None
    for x in args:
        t = type(x)
        if t is Array:
            buf = x._buf
            if not buf._committed:
                continue
        elif t in _cached_scalars or t is np.ndarray:
            continue
        else:  # a key array: placed by its data
            dtype = getattr(x, "dtype", None)
            if not isinstance(dtype, dtypes.ExtendedDType) or type(
                    data := dtype.to_physical(x)) is not Array or not data._buf._committed:
                continue
            buf = data._buf
        s = buf._sharding
        if where is None:
            where = s if type(s) is pjrt.Sharding else pjrt.sharding_of(s._device)
            mesh_devices = _placement.mesh_devices  # under jax.set_mesh: its devices only
            if mesh_devices and (len(mesh_devices) != 1 or mesh_devices[0] != where._device):
                _raise_off_context_mesh(args, fun_name, arg_names, where._device,
                                        mesh_devices)
        elif s is not where and s._device != where._device:
            _raise_incompatible(args, fun_name, arg_names, inner)
    if where is None:
        if only_abstract_mesh_in_context():
            raise ValueError(
                "Passing lowering_platforms via jax.export or jit(f).trace(*args).lower("
                "lowering_platforms=...) is required when only AbstractMesh exists in a jitted "
                f"computation. Got context mesh: {runtime_mesh._abstract_mesh_stack[-1]}")
        return pjrt.current_default_sharding(), False
    return where, True


def only_abstract_mesh_in_context() -> bool:
    """Whether the mesh in context is abstract only (``use_abstract_mesh`` with no concrete
    mesh set) and types values (an Explicit axis: JAX's programs then carry it): a
    computation run there with no devices from its arguments has none to run on, and JAX
    refuses it (tracing and lowering still work). Over Auto or Manual axes alone JAX runs it
    on the default device."""
    stack = runtime_mesh._abstract_mesh_stack
    return bool(stack) and not runtime_mesh._mesh_stack and any(
        t is runtime_mesh.AxisType.Explicit for t in stack[-1].axis_types)


def place_results(values: Sequence, args: Sequence, fun_name: str) -> list[Array]:
    """Host values computed eagerly from ``args`` (an eager callback's results) as arrays
    placed where a computation on ``args`` puts its results: committed to the device of the
    committed arguments, else uncommitted on the default device."""
    if not _placement.spread:
        return [device_put_value(v) for v in values]
    where, committed = placement(args, fun_name)
    if not committed:
        return [device_put_value(v) for v in values]
    return [device_put_value(v, where._device) for v in values]


class DeviceMismatch(ValueError):
    """JAX's error for a computation whose arguments are committed to different devices.

    ``fails`` holds the two devices that disagree: the first committed argument's and the
    first other one. The message names the arguments of the computation that raised; as in
    JAX, the ``jit`` call that encloses it under a transformation names its own arguments
    instead (``mismatch_error``), and tracers, which have no device, are named by the
    mismatch's kind, ``ARG_SHARDING``."""

    def __init__(self, message: str, fails: tuple):
        super().__init__(message)
        self.fails = fails


# It reaches users when no jit call encloses the computation that raised (an eager primitive):
# a traceback then says ValueError, as JAX's.
DeviceMismatch.__name__ = DeviceMismatch.__qualname__ = "ValueError"
DeviceMismatch.__module__ = "builtins"


def _device_data(x):
    """The ``Array`` holding ``x``'s data (a key array's physical array), else None."""
    if type(x) is Array:
        return x
    data = getattr(getattr(x, "dtype", None), "to_physical", lambda v: None)(x)
    return data if type(data) is Array else None


def mismatch_error(fun_name: str, fails: tuple, args: Sequence,
                   arg_names: Sequence[str] | Callable[[], Sequence[str]] | None
                   ) -> DeviceMismatch:
    """The error for devices ``fails`` disagreeing, naming the first argument of ``args``
    on each device (committed or not, as JAX); one not found is named ``ARG_SHARDING``.
    JAX's pairing is kept when only one is found: that one, then the second device."""
    names = arg_names() if callable(arg_names) else arg_names
    names = names or [f"args[{k}]" for k in range(len(args))]

    def where(device) -> str:
        return f"with device ids [{device.id}] on platform {device.platform.upper()}"

    found = []
    for device in fails:
        for i, x in enumerate(args):
            data = _device_data(x)
            if data is not None and data._buf._sharding._device == device:
                aval = core.get_aval(x)
                # JAX spells the dtype out here (float32[4]), unlike in jaxprs (f32[4])
                shape = (f"{getattr(aval.dtype, 'name', aval.dtype)}"
                         f"[{','.join(map(str, aval.shape))}]")
                found.append(f"argument {names[i]} of {fun_name} with shape {shape} and "
                             f"{where(device)}")
                break
    if len(found) < 2:
        found.append(f"ARG_SHARDING {where(fails[1])}")
    if len(found) < 2:
        found.insert(0, f"ARG_SHARDING {where(fails[0])}")
    return DeviceMismatch("Received incompatible devices for jitted computation. Got "
                          f"{found[0]} and {found[1]}", fails)


def _raise_incompatible(args: Sequence, fun_name: str, arg_names, inner: bool) -> None:
    devices = [data._buf._sharding._device for x in args
               if (data := _device_data(x)) is not None and data._buf._committed]
    first = devices[0]
    error = mismatch_error(fun_name, (first, next(d for d in devices if d != first)), args,
                           arg_names)
    if inner:
        raise error
    raise ValueError(str(error))  # named here: an enclosing jit call does not rename it


def _raise_off_context_mesh(args: Sequence, fun_name: str, arg_names, device,
                            mesh_devices: tuple) -> None:
    """JAX's error for an argument committed to one device in a computation under
    ``jax.set_mesh``, which runs over the mesh's devices: the first such argument is named."""
    names = arg_names() if callable(arg_names) else arg_names
    names = names or [f"args[{k}]" for k in range(len(args))]
    for i, x in enumerate(args):
        data = _device_data(x)
        if data is not None and data._buf._committed and data._buf._sharding._device == device:
            aval = core.get_aval(x)
            shape = f"{getattr(aval.dtype, 'name', aval.dtype)}[{','.join(map(str, aval.shape))}]"
            break
    ids = ", ".join(str(d.id) for d in mesh_devices)
    raise ValueError(
        f"Received incompatible devices for jitted computation. Got argument {names[i]} of "
        f"{fun_name} with shape {shape} and with device ids [{device.id}] on platform "
        f"{device.platform.upper()} and jit's context mesh with device ids [{ids}] on "
        f"platform {mesh_devices[0].platform.upper()}")


def wrap_result(buf) -> Any:
    """A program's result as a value: an ``Array``, or the value a token's or an
    extended-dtype result's handler already made (a ``Token``, a key array)."""
    return Array(buf) if type(buf) is pjrt.ArrayImpl else buf


def wrap_buffers(bufs: Sequence[pjrt.ArrayImpl]) -> list[Array]:
    return [Array(b) for b in bufs]


class Shard:
    """One shard of an array: the device, the index it covers, replica id, and its data."""

    __slots__ = ("device", "index", "replica_id", "data")

    def __init__(self, device, index: tuple, replica_id: int, data: Array):
        self.device, self.index, self.replica_id, self.data = device, index, replica_id, data

    def __repr__(self) -> str:
        return (f"Shard(device={self.device!r}, index={self.index}, "
                f"replica_id={self.replica_id}, data={self.data})")


# JAX's concrete array class prints as ``jaxlib._jax.ArrayImpl``; ours does too, so that
# ``type(x)`` in a user's program prints what it prints under JAX.
Array.__name__ = Array.__qualname__ = "ArrayImpl"
Array.__module__ = "jaxlib._jax"


class _ArrayMeta(type):
    """``isinstance(x, jax.Array)`` holds for concrete arrays and for tracers (as in JAX), and
    for the array types of higher layers that ``register`` adds (typed PRNG key arrays, which
    JAX makes ``jax.Array`` subclasses: Flax accepts a key only if it is one)."""

    _members: tuple[type, ...] = (Array, core.Tracer)

    def __instancecheck__(cls, x) -> bool:
        return isinstance(x, cls._members)

    def __subclasscheck__(cls, sub) -> bool:
        return type.__subclasscheck__(cls, sub) or issubclass(sub, cls._members)

    def register(cls, sub: type) -> type:
        """Count instances of ``sub`` as ``jax.Array`` (an ABC's ``register``)."""
        cls._members = (*cls._members, sub)
        return sub


class PublicArray(metaclass=_ArrayMeta):
    """The public array type (``jaxkit.Array``, ``jnp.ndarray``): an abstract base covering
    device arrays and tracers, for ``isinstance`` checks and annotations. Arrays are made by
    ``jnp.array``, ``device_put`` and every operation, never by calling this class."""

    def __new__(cls, *args, **kwargs):
        raise TypeError("jax.Array cannot be instantiated directly; use jnp.array or "
                        "jax.device_put to make an array.")


PublicArray.__name__ = PublicArray.__qualname__ = "Array"
PublicArray.__module__ = "jax.jaxlib._jax"


def abstract_member(name: str, is_property: bool = False, message: str | None = None):
    """A member the abstract array type declares and does not implement: JAX's error when
    used (``jax.Array.sum(x)``; a key array's ``sum``)."""
    text = f"Cannot call abstract method {name}" if message is None else message

    def raiser(self, *args, **kwargs):
        raise NotImplementedError(text)
    raiser.__name__ = name
    return property(raiser) if is_property else raiser


# The members of JAX's abstract ``jax.Array``, each JAX's NotImplementedError when called
# through the class (the concrete arrays and tracers have their own).
for _name in ("__abs__ __add__ __and__ __array_namespace__ __contains__ __copy__ __deepcopy__ "
              "__divmod__ __floordiv__ __getitem__ __invert__ __lshift__ __matmul__ __mod__ "
              "__mul__ __neg__ __pos__ __pow__ __radd__ __rand__ __rdivmod__ __rfloordiv__ "
              "__rlshift__ __rmatmul__ __rmod__ __rmul__ __round__ __rpow__ __rrshift__ "
              "__rshift__ __rsub__ __rtruediv__ __rxor__ __setitem__ __sub__ __truediv__ "
              "__xor__ addressable_data all any argmax argmin argpartition argsort astype "
              "byteswap choose clip compress conj conjugate copy copy_to_host_async cumprod "
              "cumsum diagonal dot flatten item max mean min nonzero prod ptp ravel repeat "
              "reshape round searchsorted sort squeeze std sum swapaxes take to_device trace "
              "transpose var view").split():
    setattr(PublicArray, _name, abstract_member(_name))
for _name in ("T", "at", "flat", "imag", "itemsize", "mT", "nbytes", "real"):
    setattr(PublicArray, _name, abstract_member(_name, is_property=True))
for _name in ("addressable_shards", "committed", "device", "dtype", "global_shards",
              "is_fully_addressable", "is_fully_replicated", "ndim", "shape", "sharding",
              "size"):
    setattr(PublicArray, _name, abstract_member(_name, is_property=True, message=""))
PublicArray.__numpy_dtype__ = Array.__dict__["__numpy_dtype__"]  # (implemented, as JAX's)
