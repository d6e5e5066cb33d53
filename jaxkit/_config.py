"""Global configuration: the ``jaxkit.config`` singleton (JAX's ``jax.config``).

Options are read as attributes (``config.jax_enable_x64``) and changed with
``config.update(name, value)`` or temporarily with ``with config.override(name=value): ...``.
Every option of JAX 0.10.2 exists, checks a new value as JAX does (same error class and text)
and starts from JAX's environment variable (``JAX_<NAME>``); the options jaxkit defines here
also read ``JAXKIT_`` names first (``JAXKIT_ENABLE_X64``, ``JAXKIT_DEBUG_NANS``,
``JAXKIT_DISABLE_JIT``, ``JAXKIT_EXPLAIN_CACHE_MISSES``, and for the persistent compilation
cache ``JAXKIT_COMPILATION_CACHE`` (0 turns it off) and ``JAXKIT_COMPILATION_CACHE_DIR``).
The rest of JAX's options, and which of them jaxkit cannot honour (those refuse any value but
JAX's default with ``NotImplementedError``), are tabled in ``jaxkit._config_options``. As in
JAX, ``config.read`` refuses the options that have a context manager.

Two things exist for the runtime rather than for users:

* ``config.x64`` mirrors ``jax_enable_x64`` as a plain instance attribute. Dtype
  canonicalisation runs on every operation, so it must not pay for a property or a dict lookup.
* ``config.on_change(callback)`` registers ``callback(name, value)``, called after an option
  changes value, so that caches keyed on configuration (compiled executables, traced jaxprs)
  can be dropped. The logging options take effect here that way.

This module imports nothing from jaxkit but its option table: everything else imports it.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from jaxkit._config_options import OPTIONS as _JAX_OPTIONS
from jaxkit._config_options import (PLAIN_FLAGS, LegacyPrngKeyState, NumpyDtypePromotion,
                                    bool_state, enum_class_state, enum_state,
                                    float_state, int_state, limited, optional_enum_state,
                                    optional_string_state, tag_parser)


@tag_parser("str", from_env=str)
def _optional_path(name: str, value: Any) -> str | None:
    """jax_compilation_cache_dir: JAX's optional string, a path object too; "" is None."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    return optional_string_state(name, value) or None


# JAX's accepted values for jax_default_matmul_precision: the legacy names and the dot
# algorithm presets.
_MATMUL_PRECISIONS = (
    "default", "high", "highest", "bfloat16", "tensorfloat32", "float32",
    "ANY_F8_ANY_F8_F32", "ANY_F8_ANY_F8_F32_FAST_ACCUM", "ANY_F8_ANY_F8_ANY",
    "ANY_F8_ANY_F8_ANY_FAST_ACCUM", "F16_F16_F16", "F16_F16_F32", "BF16_BF16_BF16",
    "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6", "BF16_BF16_F32_X9",
    "TF32_TF32_F32", "TF32_TF32_F32_X3", "F32_F32_F32", "F64_F64_F64",
)
_PRNG_IMPLS = ("threefry2x32", "threefry4x32", "rbg", "unsafe_rbg", "philox2x32", "philox4x32")
# None (JAX's default, no guard set) and "allow" both transfer freely.
_TRANSFER_GUARD = limited(
    optional_enum_state("allow", "log", "disallow", "log_explicit", "disallow_explicit"), None,
    "jaxkit has no transfer guards: every transfer is allowed, as JAX's default", ("allow",))


def _false_only(reason: str) -> Callable[[str, Any], Any]:
    return limited(bool_state, False, reason)


# 'log'/'fatal' report an Array freed by the cycle collector through hooks of jaxlib's guard
# library that JAX's own Array wires up; jaxkit implements the default, 'allow'.
_gc_guard = limited(optional_enum_state("allow", "log", "fatal"), None,
                    "jaxkit does not report arrays freed by the garbage collector",
                    also=("allow",))


def validate_default_device(name: str, value: Any) -> Any:
    """jax_default_device: None, a platform name, or a device (told by its type's name: this
    module imports no jaxlib), as JAX's validator accepts."""
    if value is None or value in ("cpu", "gpu", "tpu") or "Device" in str(type(value)):
        return value
    raise ValueError("jax.default_device must be passed either a Device object (e.g. "
                     "`jax.devices('cpu')[0]`) or a platform name string like 'cpu' or 'gpu'"
                     f", got: {value!r}")


# JAX defines its absl flag as a string
validate_default_device.flag_type = str  # type: ignore[attr-defined]


def _absl_flag_kind(coerce: Callable[[str, Any], Any]) -> tuple[str, tuple[str, ...]]:
    """The absl flag kind ('bool', 'int', 'float', 'str' or 'enum') JAX defines for an option
    with this coercer, and an enum's string choices."""
    if hasattr(coerce, "absl_kind"):  # the parsers of jaxkit._config_options
        return coerce.absl_kind, tuple(getattr(coerce, "enum_values", ()))
    return coerce.flag_type.__name__, ()  # type: ignore[attr-defined]


# name -> (default, validator/coercer, environment variables read at start-up, first wins)
_OPTIONS: dict[str, tuple[Any, Callable[[str, Any], Any], tuple[str, ...]]] = {
    "jax_enable_x64": (False, bool_state, ("JAXKIT_ENABLE_X64", "JAX_ENABLE_X64")),
    "jax_debug_nans": (False, bool_state, ("JAXKIT_DEBUG_NANS",)),
    "jax_disable_jit": (False, bool_state, ("JAXKIT_DISABLE_JIT",)),
    "jax_explain_cache_misses": (False, bool_state, ("JAXKIT_EXPLAIN_CACHE_MISSES",)),
    "jax_numpy_rank_promotion": ("allow", enum_state("allow", "warn", "raise"), ()),
    "jax_default_matmul_precision": (None, optional_enum_state(*_MATMUL_PRECISIONS), ()),
    # The persistent compilation cache (runtime/compile_cache.py). Unlike JAX's it is on by
    # default: with no directory set it uses $XDG_CACHE_HOME/jaxkit/xla, every compile is
    # stored (JAX's minimum compile time is 1 s) and the directory is bounded to 1 GiB (JAX's
    # default is unbounded, -1).
    "jax_enable_compilation_cache": (True, bool_state, ("JAXKIT_COMPILATION_CACHE",
                                                      "JAX_ENABLE_COMPILATION_CACHE")),
    "jax_compilation_cache_dir": (None, _optional_path, ("JAXKIT_COMPILATION_CACHE_DIR",
                                                         "JAX_COMPILATION_CACHE_DIR")),
    "jax_persistent_cache_min_compile_time_secs": (0.0, float_state, ()),
    "jax_persistent_cache_min_entry_size_bytes": (0, int_state, ()),
    "jax_compilation_cache_max_size": (1 << 30, int_state, ()),
    "jax_raise_persistent_cache_errors": (False, bool_state, ()),
    # False selects JAX's original (pre-2025) key layout for split/random_bits.
    "jax_threefry_partitionable": (True, bool_state, ("JAX_THREEFRY_PARTITIONABLE",)),
    "jax_default_prng_impl": ("threefry2x32", limited(
        enum_state(*_PRNG_IMPLS), "threefry2x32", "jaxkit's keys are threefry2x32 only"), ()),
    "jax_numpy_dtype_promotion": (NumpyDtypePromotion.STANDARD, limited(
        enum_class_state(NumpyDtypePromotion), NumpyDtypePromotion.STANDARD,
        "jaxkit.numpy has JAX's standard promotion only"), ()),
    "jax_log_compiles": (False, bool_state, ("JAX_LOG_COMPILES",)),
    "jax_debug_infs": (False, _false_only("jaxkit does not check for infinities"), ()),
    "jax_check_tracer_leaks": (False, bool_state, ("JAX_CHECK_TRACER_LEAKS",)),
    # False: reduce_sum of float16/bfloat16 over a dimension longer than 1 is an error.
    "jax_allow_f16_reductions": (True, bool_state, ()),
    # jit raises instead of tracing (a cache miss) while set.
    "jax_no_tracing": (False, bool_state, ()),
    "jax_enable_checks": (False, _false_only("jaxkit has no internal consistency checks to "
                                             "enable"), ()),
    "jax_transfer_guard": (None, _TRANSFER_GUARD, ()),
    "jax_transfer_guard_host_to_device": (None, _TRANSFER_GUARD, ()),
    "jax_transfer_guard_device_to_host": (None, _TRANSFER_GUARD, ()),
    "jax_transfer_guard_device_to_device": (None, _TRANSFER_GUARD, ()),
    "jax_softmax_custom_jvp": (False, _false_only("jaxkit's softmax has one derivative rule"), ()),
    "jax_enable_custom_prng": (False, _false_only("jaxkit has no custom PRNG implementations"), ()),
    "jax_legacy_prng_key": (LegacyPrngKeyState.ALLOW, limited(
        enum_class_state(LegacyPrngKeyState), LegacyPrngKeyState.ALLOW,
        "jaxkit does not warn about raw uint32 keys"), ()),
    "jax_debug_key_reuse": (False, _false_only("jaxkit does not track key reuse"), ()),
    # Executing any compiled program raises while set (tracing and lowering still work).
    "jax_no_execution": (False, bool_state, ()),
    # Multi-process only: raise when a collective program is launched from another thread
    # than the one that set it. jaxkit launches multi-process programs from the calling
    # thread only, so the check can never fire; the option is accepted for JAX code.
    "jax_thread_guard": (False, bool_state, ()),
    # jax2tf's lowering choice for cumulative reductions; jaxkit has no jax2tf, so it is read
    # by nothing, as in JAX without TensorFlow.
    "jax2tf_associative_scan_reductions": (False, bool_state, ()),
    "jax_array_garbage_collection_guard": (None, _gc_guard, ()),
    # How many CPU devices the CPU backend gets (-1: the environment's choice); read when
    # the backend starts (runtime/pjrt.py), so it must be set before any computation.
    "jax_num_cpu_devices": (-1, int_state, ()),
    # True: mesh axes of size 1 are left out of the shardings in types (f32[8@x,4] over a
    # mesh whose 'y' has one device never says @y). Read by runtime/sharding.py.
    "jax_remove_size_one_mesh_axis_from_type": (False, bool_state, ()),
    # JAX inserts pvary to match the varying axes of operands inside shard_map; jaxkit infers
    # variation from the traced body, which is what True gives.
    "jax_auto_pcast": (True, limited(bool_state, True, "jaxkit infers variation from the "
                                     "traced body"), ()),
    # Where computations without committed arguments run (None: the default backend's first
    # device); ``with default_device(...)`` overrides it in its thread (runtime/pjrt.py).
    "jax_default_device": (None, validate_default_device, ()),
    # Whether the GPU's hybrid eig/geqp3 kernels may use MAGMA (lax/linalg/_lapack.py).
    "jax_use_magma": ("auto", enum_state("off", "on", "auto"), ()),
    # JAX's other options, each with JAX's checks: see jaxkit/_config_options.py.
    **_JAX_OPTIONS,
}
# As in JAX, config.read refuses the options that have a context manager (thread-local
# states): their value is read as ``config.<name>``.
CONTEXT_MANAGER_OPTIONS = frozenset(_OPTIONS) - PLAIN_FLAGS


class _ThreadValues(threading.local):
    """The option values set by the open blocks of one thread (``with jax.enable_x64(True):``,
    ``with jax.default_device(d):``), by name, and the ``trace_context`` they make."""

    def __init__(self):
        self.values: dict[str, Any] = {}
        self.context: tuple = ()
        self.generation = -1  # the global values' generation that ``context`` was made at


# The runtime sets and deletes default_device's entry of ``thread_blocks.values`` directly
# (runtime/pjrt.py); ``config.jax_default_device`` reads it back in that thread.
thread_blocks = _ThreadValues()


class LocalBlocks:
    """How many blocks with thread-local option values are open, over all threads. Caches
    keyed on configuration check ``open`` before reading ``config.trace_context`` (the open
    blocks of the calling thread): while it is 0 every thread sees the global values, and a
    plain attribute read is all the hot paths pay."""

    def __init__(self):
        self.open = 0
        self.lock = threading.Lock()
        self.by_name: dict[str, int] = {}  # option -> blocks of it open, over all threads


local_blocks = LocalBlocks()
# The options whose block values caches key on: those in JAX's trace context (its jit key)
# and those jaxkit's jit fast path reads (transforms/jit.py's _clear_on_config_change). Any
# other block (``jax.log_compiles()``, ...) costs no retrace, as in JAX (Optax's tests
# check that nothing recompiles inside one). The default device is in JAX's trace context;
# jaxkit handles it by placement (runtime/pjrt.py).
_IN_CONTEXT = frozenset({
    "jax_debug_key_reuse", "jax_check_static_indices", "jax_random_seed_offset",
    "jax_threefry_partitionable", "jax_use_direct_linearize", "jax_softmax_custom_jvp",
    "jax_explicit_x64_dtypes", "jax_numpy_dtype_promotion", "jax_enable_x64",
    "jax_disable_jit", "jax_numpy_rank_promotion", "jax_default_matmul_precision",
    "jax_allow_f16_reductions", "jax_no_execution", "jax_mutable_array_checks",
    "jax_use_shardy_partitioner", "jax_high_dynamic_range_gumbel",
    "jax_hlo_source_file_canonicalization_regex", "jax_enable_pgle",
    "jax_error_checking_behavior_nan", "jax_error_checking_behavior_divide",
    "jax_error_checking_behavior_oob", "jax_debug_nans", "jax_optimization_level",
    "jax_memory_fitting_level", "jax_embedded_constants_max_bytes",
    "jax_remove_size_one_mesh_axis_from_type", "jax_use_simplified_jaxpr_constants",
    "jax_auto_pcast", "jax_xla_profile_version", "jax_pgle_profiling_runs",
    "jax_scan3", "jax_remat3", "jax_custom_vjp3", "jax_threefry_gpu_kernel_lowering",
    "jax_ragged_dot_use_gpu_pallas_triton_lowering", "jax_pallas_enable_debug_checks",
    "jax_pallas_use_mosaic_gpu", "jax_use_emit_pipeline_primitive", "eager_constant_folding"})
# Public name: jit keys its caches on the global values of these (global_trace_context).
trace_context_options = _IN_CONTEXT
_IN_CONTEXT_SORTED = tuple(sorted(_IN_CONTEXT))


def global_trace_context(overrides: tuple = ()) -> tuple:
    """The global values of the options in JAX's trace context, with ``overrides`` (a block's
    ``trace_context``) in place of theirs."""
    d = config.__dict__
    if overrides:
        d = {**d, **dict(overrides)}
    return tuple(d[name] for name in _IN_CONTEXT_SORTED)
_UNSET = object()


# Bumped when the global value of an option in _IN_CONTEXT changes: a thread's context,
# made against the global values, is then made again (Config.trace_context).
_generation = [0]


def _same(a: Any, b: Any) -> bool:
    return a == b and type(a) is type(b)


# Not an option: the ``compute_on`` and ``set_xla_metadata`` entries in force in a thread
# (``Config.trace_metadata_block``). JAX's trace context holds them (its
# compute_on_context_manager and xla_metadata_context_manager): a function jitted inside
# one is traced and lowered again, its equations carrying them.
TRACE_METADATA = "trace_metadata"


def _context(values: dict[str, Any], globals_: dict[str, Any]) -> tuple:
    """The block values that differ from the global ones: JAX keys its caches on the values in
    effect, so a block that sets an option to the value it already has changes no key."""
    return tuple(sorted((k, v) for k, v in values.items()
                        if (k in _IN_CONTEXT and not _same(v, globals_[k]))
                        or (k == TRACE_METADATA and v)))


# Class attributes are set and removed past Config.__setattr__ (which is config.update).
setattr_, delattr_ = type.__setattr__, type.__delattr__


class _ThreadLocalOption:
    """Installed on the class of ``config`` as option ``name`` while some thread has a block
    of it open: reads give the calling thread's block value, else the global one (which stays
    in the instance ``__dict__``). A data descriptor, so it comes before that ``__dict__``;
    while no block of the option is open anywhere it is not there, and reading the option
    is a plain instance attribute read."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        values = thread_blocks.values
        name = self.name
        return values[name] if name in values else obj.__dict__[name]

    def __set__(self, obj: Any, value: Any) -> None:
        obj.update(self.name, value)


def _from_env(name: str, convert: Callable[[str], Any], raw: str) -> Any:
    try:
        value = convert(raw)
        _OPTIONS[name][1](name, value)  # a bad value: JAX's message, naming the variable's flag
    except (TypeError, ValueError):  # JAX_RANDOM_SEED_OFFSET=abc and the like
        raise ValueError(f'Invalid value "{raw}" for JAX flag {name}') from None
    return value


class Config:
    """Holds the option values. Use the module-level ``config`` singleton, not this class.

    As JAX's, an option has a global value (set by :meth:`update`, seen by every thread) and,
    inside a block (:meth:`thread_override`, ``with jax.enable_x64(True):``), a value of the
    calling thread only. Reads must be fast (``config.x64`` is read by every operation): the
    global values live in the instance ``__dict__``, so reads are ordinary attribute reads,
    and only while a thread has a block of an option open is that option's read routed,
    by a descriptor put on the instance's own class (``_ThreadLocalOption``), through the
    thread's block values. ``__setattr__`` routes writes through :meth:`update` so validation
    and callbacks run.
    """

    x64: bool  # fast mirror of jax_enable_x64, kept in sync by update() and thread_override()
    # JAX's older name for it (``config.x64_enabled``), read-only.
    x64_enabled = property(lambda self: self.x64)

    def __new__(cls, environ: dict[str, str] | None = None):
        # A class of its own per instance, to put the descriptors of its open blocks on.
        own = type(cls.__name__, (cls,), {"__module__": cls.__module__,
                                           "__qualname__": cls.__qualname__})
        # Read through this thread's blocks always: the runtime sets it directly.
        own.jax_default_device = _ThreadLocalOption("jax_default_device")
        return super().__new__(own)

    def __init__(self, environ: dict[str, str] | None = None):
        env = os.environ if environ is None else environ
        d = self.__dict__
        d["_callbacks"] = []
        for name, (default, coerce, env_vars) in _OPTIONS.items():
            value = default
            # As JAX's, every option also reads its upper-case name (JAX_DEFAULT_DEVICE, ...).
            # (The options of _config_options list exactly the variables JAX reads.)
            upper = name.upper()
            exact = name in _JAX_OPTIONS or upper in env_vars
            for var in env_vars if exact else (*env_vars, upper):
                if var in env:
                    # Lenient for booleans: a typo in the environment must not make
                    # `import jaxkit` fail, so anything but a true-ish string is False.
                    raw = env[var]
                    from_env = getattr(coerce, "from_env", None)
                    try:
                        value = coerce(name, _from_env(name, from_env or str, raw))
                    except NotImplementedError as e:
                        # A setting JAX has and jaxkit cannot honour (JAX_ENABLE_CHECKS=1)
                        # is reported, not fatal to `import jaxkit`.
                        warnings.warn(f"{var}={raw!r} is ignored: {e}", stacklevel=2)
                    break
            d[name] = value
        d["x64"] = d["jax_enable_x64"]
        d["use_absl"] = False  # set by config_with_absl, as JAX's attribute
        d["_absl_parsed"] = False

    @property
    def trace_context(self) -> tuple:
        """This thread's block values of the options that can change a program, as a sorted
        tuple of ``(name, value)`` pairs; () outside blocks. Caches keyed on configuration
        add it to their keys while ``local_blocks.open`` (jit: transforms/jit.py, eager ops:
        interpreters/dispatch.py). Only values that differ from the global ones count."""
        blocks = thread_blocks
        if blocks.generation != _generation[0]:
            blocks.context = _context(blocks.values, self.__dict__)
            blocks.generation = _generation[0]
        return blocks.context

    @property
    def option_names(self) -> tuple[str, ...]:
        """The valid option names."""
        return tuple(_OPTIONS)

    @property
    def values(self) -> dict[str, Any]:
        """A snapshot of all option values."""
        return {name: getattr(self, name) for name in _OPTIONS}

    def _unknown(self, name: str) -> AttributeError:
        return AttributeError(f"Unrecognized config option: {name!r}. "
                              f"Valid options are: {', '.join(_OPTIONS)}")

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails, i.e. for names that are not options.
        if name.startswith("__"):
            raise AttributeError(name)
        raise self._unknown(name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "x64":
            name = "jax_enable_x64"
        self.update(name, value)

    def read(self, name: str) -> Any:
        """The value of option ``name`` (as ``jax.config.read``)."""
        if name not in _OPTIONS:
            raise self._unknown(name)
        if name in CONTEXT_MANAGER_OPTIONS:
            raise AttributeError("For flags with a corresponding contextmanager, read their "
                                 f"value via e.g. `config.{name}` rather than "
                                 f"`config.FLAGS.{name}`.")
        return getattr(self, name)

    def read_global(self, name: str) -> Any:
        """The value ``update`` last gave option ``name``, whatever blocks of this thread
        set."""
        if name not in _OPTIONS:
            raise self._unknown(name)
        return self.__dict__[name]

    def update(self, name: str, value: Any) -> None:
        """Set the global value of option ``name`` (every thread's, outside its blocks of
        that option); subscribers are told if the value changed."""
        if name not in _OPTIONS:
            raise self._unknown(name)
        value = _OPTIONS[name][1](name, value)
        d = self.__dict__
        old = d[name]
        d[name] = value
        if name == "jax_enable_x64":
            d["x64"] = value
        if old != value or type(old) is not type(value):
            if name in _IN_CONTEXT:
                _generation[0] += 1  # every thread's block context is made again
            try:
                for callback in tuple(d["_callbacks"]):
                    callback(name, value)
            except Exception:  # a subscriber refused the value (as JAX's validators): unset
                d[name] = old
                if name == "jax_enable_x64":
                    d["x64"] = old
                raise

    def on_change(self, callback: Callable[[str, Any], None]) -> Callable[[str, Any], None]:
        """Register ``callback(name, value)``, called after the global value of an option
        changes (:meth:`update`; a block's thread-local value is seen by the caches through
        ``trace_context`` instead). Returns the callback, so this can be used as a decorator.
        """
        self.__dict__["_callbacks"].append(callback)
        return callback

    def remove_on_change(self, callback: Callable[[str, Any], None]) -> None:
        """Unregister a callback added with :meth:`on_change`."""
        self.__dict__["_callbacks"].remove(callback)

    @contextlib.contextmanager
    def override(self, **options: Any) -> Iterator[Config]:
        """Temporarily set the global values of options, for every thread (jaxkit's own API,
        for tests and tools): ``with config.override(jax_enable_x64=True): ...``. The
        previous values are restored on exit, also when the block raises. JAX's context
        managers (``jax.enable_x64``, ...) set a value for the calling thread only: that is
        :meth:`thread_override`."""
        for name in options:
            if name not in _OPTIONS:
                raise self._unknown(name)
        saved = {name: self.read_global(name) for name in options}
        try:
            for name, value in options.items():
                self.update(name, value)
            yield self
        finally:
            for name, value in saved.items():
                self.update(name, value)

    @contextlib.contextmanager
    def thread_override(self, **options: Any) -> Iterator[Config]:
        """Set options for a block in the calling thread only, as JAX's context managers
        (``with jax.enable_x64(True):``): other threads keep seeing the global values, and
        ``update`` inside the block changes those, not this thread's. This thread's previous
        values come back on exit, also when the block raises. Subscribers of
        :meth:`on_change` are not told: caches see the block through ``trace_context``."""
        for name in options:
            if name not in _OPTIONS:
                raise self._unknown(name)
        values = {name: _OPTIONS[name][1](name, value) for name, value in options.items()}
        if "jax_enable_x64" in values:
            values["x64"] = values["jax_enable_x64"]
        with self._thread_values(values):
            yield self

    @contextlib.contextmanager
    def trace_metadata_block(self, entries: tuple) -> Iterator[None]:
        """In the calling thread, for the block: ``entries`` (the hashable ``compute_on`` /
        ``set_xla_metadata`` entries of the name stack in force) are part of
        ``trace_context``, so that caches of traces and programs key on them."""
        with self._thread_values({TRACE_METADATA: entries}):
            yield

    @contextlib.contextmanager
    def _thread_values(self, values: dict[str, Any]) -> Iterator[None]:
        """The block values ``values`` in the calling thread; its previous ones back on exit,
        also when the block raises."""
        local = thread_blocks.values
        saved = {name: local.get(name, _UNSET) for name in values}
        self._open(values, +1)
        local.update(values)
        thread_blocks.generation = -1  # trace_context makes it again
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is _UNSET:
                    del local[name]
                else:
                    local[name] = value
            thread_blocks.generation = -1
            self._open(values, -1)

    def _open(self, names: Iterable[str], opened: int) -> None:
        """Count blocks of ``names`` opened (+1) or closed (-1); the first one opened puts the
        descriptor that reads thread values on the class, the last one closed takes it off."""
        cls = type(self)
        with local_blocks.lock:
            local_blocks.open += opened
            counts = local_blocks.by_name
            for name in names:
                count = counts.get(name, 0) + opened
                counts[name] = count
                if name in ("jax_default_device", TRACE_METADATA):
                    continue  # always read through the blocks (the latter by caches only)
                if count == opened == 1:
                    setattr_(cls, name, _ThreadLocalOption(name))
                elif count == 0:
                    delattr_(cls, name)

    def config_with_absl(self) -> None:
        """Define an absl flag for every option, named as the option, defaulting to its current
        value, and once ``absl.app.run`` has initialised copy the flags given on the command
        line into the config. For programs started with ``absl.app.run(main)``; as in JAX,
        defining the flags twice raises absl's ``DuplicateFlagError``.
        """
        # absl is an optional dependency (Flax, Optax and chex tests use it), so it is imported
        # only when asked for, as JAX does.
        from absl import app
        from absl import flags as absl_flags
        flag_values = absl_flags.FLAGS
        define = {"bool": absl_flags.DEFINE_bool, "int": absl_flags.DEFINE_integer,
                  "float": absl_flags.DEFINE_float, "str": absl_flags.DEFINE_string}
        d = self.__dict__
        d["use_absl"] = True
        d["absl_flags"] = absl_flags
        for name, (_, coerce, _) in _OPTIONS.items():
            kind, choices = _absl_flag_kind(coerce)
            help_text = f"jaxkit config option {name} (jax.config.update({name!r}, value))."
            if kind == "enum":
                absl_flags.DEFINE_enum(name, d[name], choices, help_text,
                                       flag_values=flag_values)
            elif kind == "enum_class":
                absl_flags.DEFINE_enum_class(name, d[name], coerce.enum_class,
                                             help_text, flag_values=flag_values)
            else:
                define[kind](name, d[name], help_text, flag_values=flag_values)
        app.call_after_init(lambda: self._complete_absl_config(flag_values))

    def _complete_absl_config(self, flag_values: Any) -> None:
        """Copy the absl flags given on the command line (``present``) into the options."""
        for name in _OPTIONS:
            try:
                flag = flag_values[name]
            except KeyError:
                continue
            if flag.present:
                self.update(name, flag.value)

    def parse_flags_with_absl(self) -> None:
        """Parse the ``--jax...`` arguments of ``sys.argv`` (those before a ``--``) into the
        config through absl flags, once; later calls do nothing. Test files call it at import
        (``jax.config.parse_flags_with_absl()``) so that ``--jax_enable_x64`` and the like on
        the command line take effect without ``absl.app.run``.
        """
        if self.__dict__["_absl_parsed"]:
            return
        # Only --jax flags: under IPython or pytest the rest of argv is not absl's to parse.
        before_dashes = itertools.takewhile(lambda a: a != "--", sys.argv)
        jax_argv = ["", *(a for a in before_dashes if a.startswith("--jax"))]
        self.config_with_absl()
        flag_values = self.__dict__["absl_flags"].FLAGS
        flag_values(jax_argv, known_only=True)
        self._complete_absl_config(flag_values)
        self.__dict__["_absl_parsed"] = True


config = Config()  # (its repr is the default object's, as JAX's; .values holds the options)


class State:
    """A config option as JAX's top-level flag objects (``jax.enable_x64``, ``jax.debug_nans``,
    ...): ``.value`` reads it and calling it gives a context manager, also usable as a
    decorator, that sets it for a block (``with jax.debug_nans(True): ...``). As in JAX, a
    boolean option's context manager defaults to True and the others need a value."""

    def __init__(self, name: str):
        if name not in _OPTIONS:
            raise config._unknown(name)
        self.name = name
        self.__name__ = name[4:] if name.startswith("jax_") else name
        self.__doc__ = f"Context manager for `{name}` config option."

    @property
    def value(self) -> Any:
        return getattr(config, self.name)

    def get_global(self) -> Any:
        """The value ``config.update`` last set, outside any block."""
        return config.read_global(self.name)

    def __call__(self, new_val: Any = ...) -> contextlib.AbstractContextManager:
        if new_val is ...:
            if not isinstance(_OPTIONS[self.name][0], bool):
                raise TypeError(f"Context manager for {self.__name__} config option requires "
                                "an argument representing the new value for the config "
                                "option.")
            new_val = True
        try:  # a bad value fails here, as in JAX
            _OPTIONS[self.name][1](self.name, new_val)
        except NotImplementedError:  # a value JAX takes: refused when the block is entered
            pass
        return config.thread_override(**{self.name: new_val})

    def __bool__(self) -> bool:
        # JAX's message: truth-testing the object instead of its value is a bug.
        raise TypeError("bool() not supported for instances of type 'State' (did you mean "
                        "to use 'State.value' instead?)")

    def __repr__(self) -> str:
        return f"State({self.name}={self.value!r})"


# ---- options whose effect lives here: Python logging -------------------------------------
# JAX's jax_logging_level sets the level of its root loggers (and sends them to stderr);
# jaxkit's loggers are named "jaxkit..." and, where they stand for JAX's, "jax._src...".
_LOG_FORMAT = logging.Formatter("{levelname}:{asctime}:{name}:{lineno}: {message}", style="{")
_ROOT_LOGGERS = ("jax", "jaxlib", "jaxkit")


@functools.cache
def _stderr_handler(level: int = logging.NOTSET) -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LOG_FORMAT)
    handler.setLevel(level)
    return handler


_logging_saved: dict[str, int] = {}  # logger -> level before jax_logging_level set it
_debug_saved: dict[str, int] = {}  # logger -> level before jax_debug_log_modules set it


def _update_logging(name: str, value: Any) -> None:
    if name == "jax_logging_level":
        for logger_name, level in _logging_saved.items():
            logger = logging.getLogger(logger_name)
            logger.removeHandler(_stderr_handler())
            logger.setLevel(level)
        _logging_saved.clear()
        if value is None:  # None: leave the loggers alone
            return
        for logger_name in _ROOT_LOGGERS:
            logger = logging.getLogger(logger_name)
            _logging_saved[logger_name] = logger.level
            logger.setLevel(logging.getLevelName(value))
            if value != "NOTSET":
                logger.addHandler(_stderr_handler())
    elif name == "jax_debug_log_modules":
        for logger_name, level in _debug_saved.items():
            logger = logging.getLogger(logger_name)
            logger.removeHandler(_stderr_handler(logging.DEBUG))
            logger.setLevel(level)
        _debug_saved.clear()
        for logger_name in filter(None, (m.strip() for m in value.split(","))):
            logger = logging.getLogger(logger_name)
            _debug_saved[logger_name] = logger.level
            logger.addHandler(_stderr_handler(logging.DEBUG))
            logger.setLevel(logging.DEBUG)


config.on_change(_update_logging)
for _name in ("jax_logging_level", "jax_debug_log_modules"):
    if config.read_global(_name) != _OPTIONS[_name][0]:  # set by the environment
        _update_logging(_name, config.read_global(_name))
