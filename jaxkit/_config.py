"""Global configuration: the ``jaxkit.config`` singleton (JAX's ``jax.config``).

Options are read as attributes (``config.jax_enable_x64``) and changed with
``config.update(name, value)`` or temporarily with ``with config.override(name=value): ...``.
Initial values come from environment variables (``JAXKIT_ENABLE_X64``, also ``JAX_ENABLE_X64``,
``JAXKIT_DEBUG_NANS``, ``JAXKIT_DISABLE_JIT``, ``JAXKIT_EXPLAIN_CACHE_MISSES``, and for the
persistent compilation cache ``JAXKIT_COMPILATION_CACHE`` (0 turns it off) and
``JAXKIT_COMPILATION_CACHE_DIR``, also under their ``JAX_`` names).

Two things exist for the runtime rather than for users:

* ``config.x64`` mirrors ``jax_enable_x64`` as a plain instance attribute. Dtype
  canonicalisation runs on every operation, so it must not pay for a property or a dict lookup.
* ``config.on_change(callback)`` registers ``callback(name, value)``, called after an option
  changes value, so that caches keyed on configuration (compiled executables, traced jaxprs)
  can be dropped.

This module imports nothing from jaxkit: everything else imports it.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

_TRUE_STRINGS = frozenset({"1", "true", "yes", "on", "y", "t"})
_FALSE_STRINGS = frozenset({"0", "false", "no", "off", "n", "f", ""})


def _to_bool(name: str, value: Any) -> bool:
    """Coerce a flag value: bools, ints and the usual strings ("1", "true", "yes", ...)."""
    if value is None:
        return False
    if isinstance(value, str):
        low = value.strip().lower()
        if low in _TRUE_STRINGS:
            return True
        if low in _FALSE_STRINGS:
            return False
        raise ValueError(f"{name} expects a boolean, got the string {value!r}")
    if isinstance(value, (bool, int, np.bool_, np.integer)):
        return bool(value)
    raise TypeError(f"{name} expects a boolean, got {value!r} of type {type(value).__name__}")


def _optional_path(name: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    raise TypeError(f"{name} expects a directory path or None, got {value!r}")


def _number(kind: type) -> Callable[[str, Any], Any]:
    def check(name: str, value: Any) -> Any:
        try:
            return kind(value)
        except (TypeError, ValueError):
            raise TypeError(f"{name} expects a{'n' if kind is int else ''} {kind.__name__}, "
                            f"got {value!r}") from None
    check.flag_type = kind  # type: ignore[attr-defined]  # the absl flag's type
    return check


def _enum(*allowed: Any) -> Callable[[str, Any], Any]:
    def check(name: str, value: Any) -> Any:
        if value not in allowed:
            raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")
        return value
    check.enum_values = allowed  # type: ignore[attr-defined]  # the absl flag's choices
    return check


# JAX's accepted values for jax_default_matmul_precision: the legacy names and the dot
# algorithm presets.
_MATMUL_PRECISIONS = (
    None, "default", "high", "highest", "bfloat16", "tensorfloat32", "float32",
    "ANY_F8_ANY_F8_F32", "ANY_F8_ANY_F8_F32_FAST_ACCUM", "ANY_F8_ANY_F8_ANY",
    "ANY_F8_ANY_F8_ANY_FAST_ACCUM", "F16_F16_F16", "F16_F16_F32", "BF16_BF16_BF16",
    "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6", "BF16_BF16_F32_X9",
    "TF32_TF32_F32", "TF32_TF32_F32_X3", "F32_F32_F32", "F64_F64_F64",
)

def _only(*supported: Any) -> Callable[[str, Any], Any]:
    """An option JAX has whose other values jaxkit does not implement: they raise."""
    def check(name: str, value: Any) -> Any:
        if isinstance(supported[0], bool):
            value = _to_bool(name, value)
        if value not in supported:
            raise NotImplementedError(f"jaxkit does not implement {name}={value!r}; supported: "
                                      f"{', '.join(map(repr, supported))}")
        return value
    check.enum_values = supported  # type: ignore[attr-defined]
    return check


def _gc_guard(name: str, value: Any) -> Any:
    """jax_array_garbage_collection_guard: JAX's enum check, then the one level jaxkit has."""
    allowed = ["allow", "log", "fatal"]
    if value is not None and value not in allowed:
        raise ValueError(f"new enum value must be None or in {allowed}, got {value} of type "
                         f"{type(value)}.")
    return _only(None, "allow")(name, value)


_gc_guard.enum_values = ("allow", "log", "fatal")  # type: ignore[attr-defined]


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
    if coerce is _to_bool:
        return "bool", ()
    if coerce is _optional_path:
        return "str", ()
    if hasattr(coerce, "flag_type"):
        return coerce.flag_type.__name__, ()
    allowed = coerce.enum_values  # type: ignore[attr-defined]
    if isinstance(allowed[0], bool):
        return "bool", ()
    return "enum", tuple(v for v in allowed if isinstance(v, str))


# name -> (default, validator/coercer, environment variables read at start-up, first wins)
_OPTIONS: dict[str, tuple[Any, Callable[[str, Any], Any], tuple[str, ...]]] = {
    "jax_enable_x64": (False, _to_bool, ("JAXKIT_ENABLE_X64", "JAX_ENABLE_X64")),
    "jax_debug_nans": (False, _to_bool, ("JAXKIT_DEBUG_NANS",)),
    "jax_disable_jit": (False, _to_bool, ("JAXKIT_DISABLE_JIT",)),
    "jax_explain_cache_misses": (False, _to_bool, ("JAXKIT_EXPLAIN_CACHE_MISSES",)),
    "jax_numpy_rank_promotion": ("allow", _enum("allow", "warn", "raise"), ()),
    "jax_default_matmul_precision": (None, _enum(*_MATMUL_PRECISIONS), ()),
    # The persistent compilation cache (runtime/compile_cache.py). Unlike JAX's it is on by
    # default: with no directory set it uses $XDG_CACHE_HOME/jaxkit/xla, every compile is
    # stored (JAX's minimum compile time is 1 s) and the directory is bounded to 1 GiB (JAX's
    # default is unbounded, -1).
    "jax_enable_compilation_cache": (True, _to_bool, ("JAXKIT_COMPILATION_CACHE",
                                                      "JAX_ENABLE_COMPILATION_CACHE")),
    "jax_compilation_cache_dir": (None, _optional_path, ("JAXKIT_COMPILATION_CACHE_DIR",
                                                         "JAX_COMPILATION_CACHE_DIR")),
    "jax_persistent_cache_min_compile_time_secs": (0.0, _number(float), ()),
    "jax_persistent_cache_min_entry_size_bytes": (0, _number(int), ()),
    "jax_compilation_cache_max_size": (1 << 30, _number(int), ()),
    "jax_raise_persistent_cache_errors": (False, _to_bool, ()),
    # False selects JAX's original (pre-2025) key layout for split/random_bits.
    "jax_threefry_partitionable": (True, _to_bool, ("JAX_THREEFRY_PARTITIONABLE",)),
    "jax_default_prng_impl": ("threefry2x32", _only("threefry2x32"), ()),
    "jax_numpy_dtype_promotion": ("standard", _only("standard"), ()),
    "jax_log_compiles": (False, _to_bool, ("JAX_LOG_COMPILES",)),
    "jax_debug_infs": (False, _only(False), ()),
    "jax_check_tracer_leaks": (False, _to_bool, ("JAX_CHECK_TRACER_LEAKS",)),
    # False: reduce_sum of float16/bfloat16 over a dimension longer than 1 is an error.
    "jax_allow_f16_reductions": (True, _to_bool, ()),
    # jit raises instead of tracing (a cache miss) while set.
    "jax_no_tracing": (False, _to_bool, ()),
    "jax_enable_checks": (False, _only(False), ()),
    "jax_transfer_guard": ("allow", _only("allow"), ()),
    "jax_transfer_guard_host_to_device": ("allow", _only("allow"), ()),
    "jax_transfer_guard_device_to_host": ("allow", _only("allow"), ()),
    "jax_transfer_guard_device_to_device": ("allow", _only("allow"), ()),
    "jax_softmax_custom_jvp": (False, _only(False), ()),
    "jax_enable_custom_prng": (False, _only(False), ()),
    "jax_legacy_prng_key": ("allow", _only("allow"), ()),
    "jax_debug_key_reuse": (False, _only(False), ()),
    # Executing any compiled program raises while set (tracing and lowering still work).
    "jax_no_execution": (False, _to_bool, ()),
    # Multi-process only: raise when a collective program is launched from another thread
    # than the one that set it. jaxkit launches multi-process programs from the calling
    # thread only, so the check can never fire; the option is accepted for JAX code.
    "jax_thread_guard": (False, _to_bool, ()),
    # jax2tf's lowering choice for cumulative reductions; jaxkit has no jax2tf, so it is read
    # by nothing, as in JAX without TensorFlow.
    "jax2tf_associative_scan_reductions": (False, _to_bool, ()),
    # 'log'/'fatal' report an Array freed by the cycle collector through hooks of jaxlib's
    # guard library that JAX's own Array wires up; jaxkit implements the default, 'allow'.
    "jax_array_garbage_collection_guard": (None, _gc_guard, ()),
    # How many CPU devices the CPU backend gets (-1: the environment's choice); read when
    # the backend starts (runtime/pjrt.py), so it must be set before any computation.
    "jax_num_cpu_devices": (-1, _number(int), ()),
    # True: mesh axes of size 1 are left out of the shardings in types (f32[8@x,4] over a
    # mesh whose 'y' has one device never says @y). Read by runtime/sharding.py.
    "jax_remove_size_one_mesh_axis_from_type": (False, _to_bool, ()),
    # JAX inserts pvary to match the varying axes of operands inside shard_map; jaxkit infers
    # variation from the traced body, which is what True gives.
    "jax_auto_pcast": (True, _only(True), ()),
    # Where computations without committed arguments run (None: the default backend's first
    # device); ``with default_device(...)`` overrides it in its thread (runtime/pjrt.py).
    "jax_default_device": (None, validate_default_device, ()),
    # Whether the GPU's hybrid eig/geqp3 kernels may use MAGMA (lax/linalg/_lapack.py).
    "jax_use_magma": ("auto", _enum("off", "on", "auto"), ()),
    # How library entry points marked with jax._src.traceback_util.api_boundary filter their
    # exceptions' tracebacks (_src_compat/traceback_util.py).
    "jax_traceback_filtering": ("auto", _enum("off", "tracebackhide", "remove_frames",
                                              "quiet_remove_frames", "auto"),
                                ("JAX_TRACEBACK_FILTERING",)),
}


class _ThreadBlocks(threading.local):
    """Options set for a block in one thread (``with jax.default_device(d):``), as JAX's
    thread-local option values: while set, reading the option in that thread gives the
    block's value instead of the one ``update`` set."""

    def __init__(self):
        self.values: dict[str, Any] = {}


thread_blocks = _ThreadBlocks()
# The options such blocks set. Their ``update`` value is stored under ``_global_<name>``, so
# that reading ``config.<name>`` goes through ``Config.__getattr__``, which looks at this
# thread's blocks first; and, as in JAX, ``config.read`` refuses them.
_THREAD_LOCAL_OPTIONS = frozenset({"jax_default_device"})


def _stored(name: str) -> str:
    return f"_global_{name}" if name in _THREAD_LOCAL_OPTIONS else name


class Config:
    """Holds the option values. Use the module-level ``config`` singleton, not this class.

    Option values live in the instance ``__dict__`` so reads are ordinary attribute reads;
    ``__setattr__`` routes writes through :meth:`update` so validation and callbacks run.
    """

    x64: bool  # fast mirror of jax_enable_x64, kept in sync by update()

    def __init__(self, environ: dict[str, str] | None = None):
        env = os.environ if environ is None else environ
        d = self.__dict__
        d["_callbacks"] = []
        for name, (default, coerce, env_vars) in _OPTIONS.items():
            value = default
            # As JAX's, every option also reads its upper-case name (JAX_DEFAULT_DEVICE, ...).
            upper = name.upper()
            for var in env_vars if upper in env_vars else (*env_vars, upper):
                if var in env:
                    # Lenient for booleans: a typo in the environment must not make
                    # `import jaxkit` fail, so anything but a true-ish string is False.
                    raw = env[var]
                    try:
                        value = (raw.strip().lower() in _TRUE_STRINGS if coerce is _to_bool
                                 else coerce(name, raw))
                    except NotImplementedError as e:
                        # A setting JAX has and jaxkit cannot honour (JAX_ENABLE_CHECKS=1)
                        # is reported, not fatal to `import jaxkit`.
                        warnings.warn(f"{var}={raw!r} is ignored: {e}", stacklevel=2)
                    break
            d[_stored(name)] = value
        d["x64"] = d["jax_enable_x64"]
        d["use_absl"] = False  # set by config_with_absl, as JAX's attribute
        d["_absl_parsed"] = False

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
        if name in _THREAD_LOCAL_OPTIONS:
            blocks = thread_blocks.values
            return blocks[name] if name in blocks else self.__dict__[_stored(name)]
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
        if name in _THREAD_LOCAL_OPTIONS:
            raise AttributeError("For flags with a corresponding contextmanager, read their "
                                 f"value via e.g. `config.{name}` rather than "
                                 f"`config.FLAGS.{name}`.")
        return self.__dict__[name]

    def read_global(self, name: str) -> Any:
        """The value ``update`` last gave option ``name``, whatever blocks of this thread
        set (``default_device``)."""
        if name not in _OPTIONS:
            raise self._unknown(name)
        return self.__dict__[_stored(name)]

    def update(self, name: str, value: Any) -> None:
        """Set option ``name`` to ``value``; subscribers are told if the value changed."""
        if name not in _OPTIONS:
            raise self._unknown(name)
        value = _OPTIONS[name][1](name, value)
        d = self.__dict__
        old = d[_stored(name)]
        d[_stored(name)] = value
        if name == "jax_enable_x64":
            d["x64"] = value
        if old != value or type(old) is not type(value):
            for callback in tuple(d["_callbacks"]):
                callback(name, value)

    def on_change(self, callback: Callable[[str, Any], None]) -> Callable[[str, Any], None]:
        """Register ``callback(name, value)``, called after any option changes value.

        Returns the callback, so this can be used as a decorator.
        """
        self.__dict__["_callbacks"].append(callback)
        return callback

    def remove_on_change(self, callback: Callable[[str, Any], None]) -> None:
        """Unregister a callback added with :meth:`on_change`."""
        self.__dict__["_callbacks"].remove(callback)

    @contextlib.contextmanager
    def override(self, **options: Any) -> Iterator[Config]:
        """Temporarily set options: ``with config.override(jax_enable_x64=True): ...``.

        The previous values are restored on exit, also when the block raises.
        """
        for name in options:
            if name not in _OPTIONS:
                raise self._unknown(name)
        saved = {name: self.__dict__[_stored(name)] for name in options}
        try:
            for name, value in options.items():
                self.update(name, value)
            yield self
        finally:
            for name, value in saved.items():
                self.update(name, value)

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
                absl_flags.DEFINE_enum(name, d[_stored(name)], choices, help_text,
                                       flag_values=flag_values)
            else:
                define[kind](name, d[_stored(name)], help_text, flag_values=flag_values)
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

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self.values.items())
        return f"Config({body})"


config = Config()


class State:
    """A config option as JAX's top-level flag objects (``jax.enable_x64``, ``jax.debug_nans``,
    ...): ``.value`` reads it and calling it gives a context manager that sets it for a block
    (``with jax.debug_nans(True): ...``)."""

    def __init__(self, name: str, default_arg: Any = True):
        self.name = name
        self._default_arg = default_arg

    @property
    def value(self) -> Any:
        return getattr(config, self.name)

    def __call__(self, new_val: Any = ...) -> contextlib.AbstractContextManager:
        if new_val is ...:
            new_val = self._default_arg
        return config.override(**{self.name: new_val})

    def __bool__(self) -> bool:
        return bool(self.value)

    def __repr__(self) -> str:
        return f"State({self.name}={self.value!r})"
