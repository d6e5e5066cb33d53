"""The rest of JAX's top-level API: ``typeof``, ``ensure_compile_time_eval``,
``named_scope``/``named_call``, ``linear_transpose``, ``custom_gradient``, ``live_arrays``,
``clear_caches``, the ``make_array_from_*`` constructors, ``print_environment_info`` and the
host/process queries."""
from __future__ import annotations

import contextlib
import contextvars
import functools
import gc
import importlib.metadata
import platform
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, source_info
from jaxkit import tree_util
from jaxkit.api import device_put, process_count, process_index, vjp
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters import dispatch
from jaxkit.runtime import compile_cache, global_arrays, pjrt
from jaxkit.runtime.array import Array
from jaxkit.runtime.sharding import NamedSharding
from jaxkit.transforms import jit as _jit
from jaxkit.transforms import jit_caches
from jaxkit.transforms.compile_time_eval import ensure_compile_time_eval
from jaxkit.transforms.custom_vjp import custom_vjp

__all__ = [
    "clear_caches", "copy_to_host_async", "custom_gradient", "ensure_compile_time_eval",
    "float0", "host_count", "host_id", "host_ids", "linear_transpose", "live_arrays",
    "make_array_from_callback", "make_array_from_process_local_data",
    "make_array_from_single_device_arrays", "named_call", "named_scope",
    "print_environment_info", "process_indices", "typeof",
]

float0 = dtypes.float0


def typeof(x: Any) -> core.ShapedArray:
    """The abstract type of ``x`` (shape, dtype, weak type), as ``jax.typeof``
    (``ShapedArray(key<fry>[])`` for a key)."""
    return core.get_aval(x)


# ---- compile-time evaluation ---------------------------------------------------------------


core.ensure_compile_time_eval = ensure_compile_time_eval  # ``jax.core`` names it too


# ---- names ---------------------------------------------------------------------------------


@contextlib.contextmanager
def named_scope(name: str) -> Iterator[None]:
    """Push ``name`` on the name stack for the block: equations traced inside record it
    (``eqn.source_info.name_stack``) and the compiled program's ops are named
    ``jit(f)/name/primitive`` (HLO ``op_name`` metadata, for profilers)."""
    if not isinstance(name, str):
        raise ValueError("named_scope name must be a string.")
    with source_info.name_stack_context(source_info.current_name_stack().extend(name)):
        yield


def named_call(fun: Callable, *, name: str | None = None) -> Callable:
    """``fun`` run inside ``named_scope(name or fun.__name__)``."""
    scope = name if name is not None else getattr(fun, "__name__", "named_call")

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        with named_scope(scope):
            return fun(*args, **kwargs)
    return wrapped


# ---- derivatives ---------------------------------------------------------------------------


def linear_transpose(fun: Callable, *primals, reduce_axes=()) -> Callable:
    """The transpose of the linear function ``fun``, whose inputs look like ``primals``
    (arrays or ShapeDtypeStructs; only their shapes and dtypes matter)."""
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to transpose is deprecated")
    flat, in_tree = tree_util.tree_flatten(primals)
    avals = [core.get_aval(x) if not hasattr(x, "shape") or isinstance(x, (Array, core.Tracer))
             or np.ndim(x) == 0 and not hasattr(x, "dtype")
             else core.ShapedArray(tuple(x.shape), np.dtype(x.dtype)) for x in flat]
    for a in avals:
        if not dtypes.issubdtype(a.dtype, np.inexact):
            raise TypeError(f"linear_transpose only supports [float or complex] -> [float or "
                            f"complex], and integer -> integer functions, but got "
                            f"{a.dtype}")
    zeros = [np.zeros(a.shape, a.dtype) for a in avals]
    _, pullback = vjp(lambda *xs: fun(*xs), *tree_util.tree_unflatten(in_tree, zeros))

    def transposed(out_cotangent):
        return pullback(out_cotangent)
    return transposed


@tree_util.register_pytree_node_class
class _GradientRule:
    """The backward rule returned by a ``custom_gradient`` function, as a jaxpr whose
    constants (the values it closes over) are the residuals."""

    def __init__(self, consts, jaxpr, in_tree, out_tree):
        self.consts, self.jaxpr, self.in_tree, self.out_tree = consts, jaxpr, in_tree, out_tree

    def tree_flatten(self):
        return list(self.consts), (self.jaxpr, self.in_tree, self.out_tree)

    @classmethod
    def tree_unflatten(cls, aux, consts):
        return cls(consts, *aux)


def custom_gradient(fun: Callable) -> Callable:
    """``fun(*args) -> (value, vjp_rule)`` as a function differentiated by ``vjp_rule``
    (``vjp_rule(cotangent) -> cotangents``, one per argument, or one for a single argument)."""

    @custom_vjp
    def wrapped(*args):
        return fun(*args)[0]

    def fwd(*args):
        ans, rule = fun(*args)
        ans_flat, out_tree = tree_util.tree_flatten(ans)
        ct_avals = [core.get_aval(x).to_tangent_aval() for x in ans_flat]
        jaxpr, consts, in_tree = pe.trace_tree_to_jaxpr(rule, out_tree, ct_avals)
        return ans, _GradientRule(consts, jaxpr, in_tree, out_tree)

    def bwd(res, cts):
        cts_flat = tree_util.tree_leaves(cts)
        out = core.eval_jaxpr(res.jaxpr, res.consts, *cts_flat)
        out = tree_util.tree_unflatten(res.in_tree, out)
        return out if isinstance(out, tuple) else (out,)

    wrapped.defvjp(fwd, bwd)
    return functools.wraps(fun)(lambda *args: wrapped(*args))


# ---- arrays --------------------------------------------------------------------------------


def live_arrays(platform: str | None = None) -> list[Array]:
    """Every array alive in this process (not yet deleted), as ``jax.live_arrays``."""
    name = (platform or pjrt.default_backend()).lower()
    out = []
    for obj in gc.get_objects():
        if type(obj) is Array and not obj.is_deleted() and obj.device.platform == name:
            out.append(obj)
    return out


def clear_caches() -> None:
    """Drop what this process cached: jit's traced and compiled functions, eager dispatch's
    programs and the in-memory executables. The persistent cache on disk stays, as in JAX."""
    jit_caches.clear_all()
    dispatch.programs.clear()
    compile_cache.clear_memory_cache()


def _single_device(sharding, what: str):
    devices = getattr(sharding, "device_set", None)
    if devices is None or len(devices) != 1:
        raise TypeError(f"{what}: sharding should be a NamedSharding or a single-device "
                        f"sharding, got {sharding!r}")
    return next(iter(devices))


def make_array_from_callback(shape: Sequence[int], sharding, data_callback: Callable,
                             dtype=None) -> Array:
    """The global array of ``shape`` laid out as ``sharding``: each addressable device's
    shard is ``data_callback(index)`` (``index``: the shard's slices of the whole array)."""
    if isinstance(sharding, NamedSharding):
        return global_arrays.from_callback(shape, sharding, data_callback, dtype)
    device = _single_device(sharding, "make_array_from_callback")
    data = data_callback(tuple(slice(None, None, None) for _ in shape))
    if dtype is not None:
        data = np.asarray(data, dtypes.check_and_canonicalize_user_dtype(
            dtype, "make_array_from_callback"))
    if tuple(np.shape(data)) != tuple(shape):
        raise ValueError(f"Expected shard shape {tuple(shape)} doesn't match the data shape "
                         f"{tuple(np.shape(data))}")
    return device_put(data, device)


def make_array_from_single_device_arrays(shape: Sequence[int], sharding,
                                         arrays: Sequence, *, dtype=None) -> Array:
    """The global array made of per-device ``arrays``: one single-device array per
    addressable device of ``sharding`` (this process's shards in a multi-process run)."""
    if isinstance(sharding, NamedSharding):
        return global_arrays.from_single_device_arrays(shape, sharding, arrays, dtype)
    _single_device(sharding, "make_array_from_single_device_arrays")
    if len(arrays) != 1 or tuple(arrays[0].shape) != tuple(shape):
        raise ValueError(f"make_array_from_single_device_arrays: expected one array of shape "
                         f"{tuple(shape)}, got {[tuple(a.shape) for a in arrays]}")
    return arrays[0]


def make_array_from_process_local_data(sharding, local_data, global_shape=None) -> Array:
    """The global array of which ``local_data`` (a pytree of host arrays) is this process's
    part; ``sharding`` and ``global_shape`` are one for all leaves or a pytree prefix. With
    one process the data is the whole array."""
    leaves, treedef = tree_util.tree_flatten(local_data)
    shardings = _broadcast_prefix(sharding, local_data)
    shapes = _broadcast_prefix(global_shape, local_data,
                               is_leaf=lambda x: x is None or isinstance(x, tuple))
    if process_count() == 1:
        for s, d in zip(shapes, leaves):
            if s is not None and tuple(s) != tuple(np.shape(d)):
                raise ValueError("When calling `make_array_from_process_local_data` on a "
                                 "single process, global_shape should be None or equal to "
                                 f"local_data.shape.Got global_shape={tuple(s)} and "
                                 f"local_data.shape={tuple(np.shape(d))}.")
        return device_put(local_data, sharding)
    out = []
    for s, d, shape in zip(shardings, leaves, shapes):
        if not isinstance(s, NamedSharding):
            raise TypeError("make_array_from_process_local_data over several processes needs "
                            f"NamedShardings, got {s!r}")
        out.append(global_arrays.from_process_local_data(s, d, shape))
    return tree_util.tree_unflatten(treedef, out)


def _broadcast_prefix(prefix, full, is_leaf=None) -> list:
    """One entry of the pytree prefix ``prefix`` per leaf of ``full``."""
    n = len(tree_util.tree_leaves(full))
    if prefix is None or isinstance(prefix, NamedSharding) or (
            is_leaf is not None and is_leaf(prefix)):
        return [prefix] * n
    entries, prefix_def = tree_util.tree_flatten(prefix, is_leaf=is_leaf)
    subtrees = prefix_def.flatten_up_to(full)
    return [e for e, sub in zip(entries, subtrees) for _ in tree_util.tree_leaves(sub)]


def copy_to_host_async(x) -> None:
    """Start copying the arrays of pytree ``x`` to host memory (jaxkit copies on first use,
    so there is nothing to start early)."""
    for leaf in tree_util.tree_leaves(x):
        if isinstance(leaf, Array):
            leaf.copy_to_host_async()


# ---- processes and environment -------------------------------------------------------------

def process_indices(backend: str | None = None) -> list[int]:
    """The indices of all processes: ``range(process_count(backend))``."""
    return list(range(process_count(backend)))


# JAX's old names, each with its warning (JAX's text, typos included).
def host_id(backend: str | None = None) -> int:
    warnings.warn("jax.process_index has been renamed to jax.process_index. This alias will "
                  "eventually be removed; please update your code.", stacklevel=2)
    return process_index(backend)


def host_count(backend: str | None = None) -> int:
    warnings.warn("jax.process_count has been renamed to jax.process_count. This alias will "
                  "eventually be removed; please update your code.", stacklevel=2)
    return process_count(backend)


def host_ids(backend: str | None = None) -> list[int]:
    warnings.warn("jax.process_indexs has been renamed to jax.process_indices. This alias "
                  "will eventually be removed; please update your code.", stacklevel=2)
    return process_indices(backend)


def print_environment_info(return_string: bool = False) -> str | None:
    """The versions and devices jaxkit runs with."""
    devices = pjrt.local_devices()
    text = "\n".join([
        f"jaxkit: {importlib.metadata.version('jaxkit')}",
        f"jaxlib: {pjrt.jaxlib_version}",
        f"numpy:  {np.__version__}",
        f"python: {sys.version}",
        f"device info: {pjrt.default_backend()}-{len(devices)}, {len(devices)} local devices",
        f"process_count: {process_count()}",
        f"platform: {platform.uname()}",
    ]) + "\n"
    if return_string:
        return text
    print(text)
    return None


def fwd_and_bwd(fun: Callable, argnums: int | Sequence[int], has_aux: bool = False,
                jitted: bool = True) -> tuple[Callable, Callable]:
    """``fwd(*args)`` is ``vjp`` of ``fun`` in the arguments ``argnums``, returning
    ``(out, vjp_fun)`` (and ``aux``); ``bwd(vjp_fun, ct)`` applies it. Jitted (the default),
    both compile once and are reused across iterations (``jax.fwd_and_bwd``)."""
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun}")
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    def fwd(*args):
        def partial_fun(*dyn):
            full = list(args)
            for i, d in zip(nums, dyn):
                full[i] = d
            return fun(*full)
        return vjp(partial_fun, *[args[i] for i in nums], has_aux=has_aux)

    def bwd(f_vjp, outgrad):
        g = f_vjp(outgrad)
        return g[0] if isinstance(argnums, int) else g

    if jitted:
        fwd, bwd = _jit.jit(fwd), _jit.jit(bwd)
    return fwd, bwd


class UserContext:
    """``with ctx(value):`` — sets a user context's value for the block (``make_user_context``)."""

    __slots__ = ("_config", "_new_value", "_token")

    def __init__(self, config: UserConfig, new_value: Any):
        self._config = config
        self._new_value = new_value

    def __enter__(self) -> None:
        before = self._config.value
        self._token = self._config._local.set(self._new_value)
        self._config._changed(before)

    def __exit__(self, *exc) -> None:
        before = self._config.value
        self._config._local.reset(self._token)
        self._config._changed(before)


_UNSET = object()


class UserConfig:
    """A value that ``jit`` depends on (``jax.make_user_context``): changing it makes jitted
    functions trace and compile again. jaxkit's jit keys carry no user values, so a change
    drops the traced and compiled functions (JAX keeps one entry per value)."""

    def __init__(self, default_value: Any = None):
        self._global = default_value
        self._local: contextvars.ContextVar = contextvars.ContextVar("user_context",
                                                                     default=_UNSET)

    @property
    def value(self) -> Any:
        local = self._local.get()
        return self._global if local is _UNSET else local

    def get_global(self) -> Any:
        return self._global

    def set_global(self, new_value: Any) -> None:
        before = self.value
        self._global = new_value
        self._changed(before)

    def _changed(self, before: Any) -> None:
        after = self.value
        if after is not before and not _same_value(after, before):
            jit_caches.clear_all()

    def __call__(self, new_value: Any) -> UserContext:
        return UserContext(self, new_value)


def _same_value(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001  (values that cannot be compared count as different)
        return False


def make_user_context(default_value: Any = None) -> UserConfig:
    """A context whose value ``jit``'s caches depend on: ``ctx = make_user_context(None)``,
    then ``with ctx(1): f(x)`` traces ``f`` anew when the value differs."""
    return UserConfig(default_value)
