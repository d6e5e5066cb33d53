"""The table of JAX 0.10.2 configuration options beyond the core set ``jaxkit._config`` defines
itself, with JAX's value checking.

Each option is described by its kind (how JAX checks a new value and reads its environment
variable), its default, and what jaxkit does with it:

* ``None``: every value JAX accepts is honoured (the hook that gives its effect is named in
  the comment beside it, and ``tests/test_config.py`` checks the effect);
* a reason string: the feature does not exist in jaxkit (TPU, Pallas, jax2tf, PGLE, ...), so
  the option holds JAX's default and any other value raises ``NotImplementedError`` with the
  reason, instead of being silently ignored.

The parsers reproduce JAX's checks and error messages, so that a bad value fails in jaxkit as
it does in JAX (``ValueError: new int config value must be None or of type int, ...``).

``CONTEXT_MANAGER_OPTIONS`` lists the options JAX defines as thread-local states with a
context manager; as in JAX, ``config.read`` refuses them (read ``config.<name>`` instead).

This module imports nothing from jaxkit: ``jaxkit._config`` builds on it.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

_TRUE_STRINGS = frozenset({"1", "true", "yes", "on", "y", "t"})
_FALSE_STRINGS = frozenset({"0", "false", "no", "off", "n", "f", ""})


class ExplicitX64Mode(enum.IntEnum):
    """``jax_explicit_x64_dtypes``: what an explicit 64-bit dtype does while x64 is off."""

    WARN = 1
    ERROR = 2
    ALLOW = 3

    @classmethod
    def _missing_(cls, value: object) -> ExplicitX64Mode | None:
        # The lower-case names are accepted too (JAX_EXPLICIT_X64_DTYPES=allow).
        return {"warn": cls.WARN, "error": cls.ERROR, "allow": cls.ALLOW}.get(value)  # type: ignore[call-overload]


class NumpyDtypePromotion(enum.StrEnum):
    """``jax_numpy_dtype_promotion``: JAX's promotion lattice, or explicit casts only."""

    STANDARD = "standard"
    STRICT = "strict"


class LegacyPrngKeyState(enum.StrEnum):
    """``jax_legacy_prng_key``: what using a raw ``uint32`` key does."""

    ALLOW = "allow"
    WARN = "warn"
    ERROR = "error"


class RuntimeTracebackMode(enum.StrEnum):
    """``jax_send_traceback_to_runtime``: whether Python tracebacks go to the runtime."""

    OFF = "off"
    ON = "on"
    FULL = "full"

    @classmethod
    def _missing_(cls, value: object) -> RuntimeTracebackMode | None:
        if isinstance(value, str):
            return cls.__members__.get(value.upper())
        return None


def _env_bool(raw: str) -> bool:
    # Lenient as jaxkit's other options: a typo must not make `import jaxkit` fail.
    return raw.strip().lower() in _TRUE_STRINGS


def tag_parser(kind: str, *, from_env: Callable[[str], Any] | None = None,
            **meta: Any) -> Callable[[Callable[[str, Any], Any]], Callable[[str, Any], Any]]:
    """Tag a parser with its absl flag kind and how it reads its environment variable."""
    def tag(fn: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
        fn.absl_kind = kind  # type: ignore[attr-defined]
        fn.from_env = from_env  # type: ignore[attr-defined]
        for key, value in meta.items():
            setattr(fn, key, value)
        return fn
    return tag


@tag_parser("bool", from_env=_env_bool)
def bool_state(name: str, value: Any) -> bool:
    """JAX's boolean states take any value and keep its truth."""
    return bool(value)


@tag_parser("int", from_env=int)
def int_state(name: str, value: Any) -> int | None:
    if value is not None and not isinstance(value, int):
        raise ValueError("new int config value must be None or of type int, got "
                         f"{value} of type {type(value)}")
    return value


@tag_parser("float", from_env=float)
def float_state(name: str, value: Any) -> float | None:
    if value is not None and not isinstance(value, (float, int)):
        raise ValueError("new float config value must be None or of type float, got "
                         f"{value} of type {type(value)}")
    return value


@tag_parser("str", from_env=str)
def string_state(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("new string config value must be of type str, got "
                        f"{value} of type {type(value)}.")
    return value


@tag_parser("str", from_env=str)
def optional_string_state(name: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError("new string config value must be None or of type str, got "
                         f"{value} of type {type(value)}.")
    return value


@tag_parser("str", from_env=str)
def string_or_dict_state(name: str, value: Any) -> str | dict | None:
    """jax_pjrt_client_create_options: a ``key:value;...`` string or a dict."""
    if value is not None and not isinstance(value, (str, dict)):
        raise ValueError("new string config value must be None or of type dict | str, got "
                         f"{value} of type {type(value)}.")
    return value


def enum_state(*allowed: str) -> Callable[[str, Any], str]:
    values = list(allowed)

    @tag_parser("enum", from_env=str, enum_values=allowed)
    def parse(name: str, value: Any) -> str:
        if type(value) is not str or value not in values:
            raise ValueError(f"new enum value must be in {values}, got {value} of type "
                             f"{type(value)}.")
        return value
    return parse


def optional_enum_state(*allowed: str) -> Callable[[str, Any], str | None]:
    values = list(allowed)

    @tag_parser("enum", from_env=str, enum_values=allowed)
    def parse(name: str, value: Any) -> str | None:
        if value is not None and (type(value) is not str or value not in values):
            raise ValueError(f"new enum value must be None or in {values}, got {value} of "
                             f"type {type(value)}.")
        return value
    return parse


def enum_class_state(enum_class: type[enum.Enum]) -> Callable[[str, Any], enum.Enum]:
    @tag_parser("enum_class", from_env=enum_class, enum_class=enum_class)
    def parse(name: str, value: Any) -> enum.Enum:
        if isinstance(value, str):
            return enum_class(value)
        if not isinstance(value, enum_class):
            raise TypeError(f"new enum value must be an instance of {enum_class}, got "
                            f"{value} of type {type(value)}.")
        return value
    return parse


def flag(kind: type) -> Callable[[str, Any], Any]:
    """JAX's plain (absl-style) flags store whatever they are given, unchecked; ``kind`` is
    the flag's type, used for the environment variable and absl."""
    env = {bool: _env_bool, int: int, str: str}[kind]

    @tag_parser(kind.__name__, from_env=env)
    def parse(name: str, value: Any) -> Any:
        return value
    return parse


def limited(parse: Callable[[str, Any], Any], default: Any, reason: str,
            also: tuple = ()) -> Callable[[str, Any], Any]:
    """``parse`` (JAX's check), then refuse every value but ``default`` (and ``also``): the
    feature the option controls does not exist in jaxkit, and silently accepting another
    value would let a program believe it took effect."""
    accepted = (default, *also)

    def check(name: str, value: Any) -> Any:
        value = parse(name, value)
        if not any(value == ok and type(value) is type(ok) for ok in accepted):
            raise NotImplementedError(
                f"jaxkit does not implement {name}={value!r} (only "
                f"{' or '.join(map(repr, accepted))}): {reason}")
        return value
    for attr in ("absl_kind", "from_env", "enum_values", "enum_class"):
        if hasattr(parse, attr):
            setattr(check, attr, getattr(parse, attr))
    check.unsupported_reason = reason  # type: ignore[attr-defined]
    return check


# Why whole families of options cannot take effect here.
_TPU = "jaxkit runs on CPUs and NVIDIA GPUs only; there is no TPU backend"
_PALLAS = "jaxkit has no Pallas (no Mosaic or Triton kernel lowering)"
_JAX2TF = "jaxkit has no jax2tf (no TensorFlow interoperability)"
_PGLE = "jaxkit has no profile-guided latency estimation (PGLE) or XLA AutoFDO"
_MULTI_HOST = ("jaxkit's multi-process runtime uses gloo collectives over the distributed "
               "key-value service; it has no cross-host transfer server, preemption service, "
               "megascale or MPI")
_ROCM_SYCL = "jaxkit's GPU backend is the CUDA plugin; there is no ROCm or oneAPI backend"
_MOCK_GPU = "jaxkit cannot mock GPU topologies (no mock GPU client in its runtime)"
_INTERNAL = "an internal switch of JAX's own implementation with no counterpart in jaxkit"
_EXPORT = "jaxkit.export serialises only its fixed calling convention"

Option = tuple[Any, Callable[[str, Any], Any], tuple[str, ...]]


def _option(name: str, parse: Callable[[str, Any], Any], default: Any,
            reason: str | None = None, env: Sequence[str] = ()) -> Option:
    if reason is not None:
        parse = limited(parse, default, reason, _ALSO.get(name, ()))
    return default, parse, tuple(env)


# Values besides JAX's default that an unavailable option accepts because they describe what
# jaxkit does anyway.
_ALSO = {
    "jax_enable_preemption_service": (False,),  # jaxkit starts no preemption service
    # dtypes.check_and_canonicalize_user_dtype warns or raises; only 'allow' is missing.
    "jax_explicit_x64_dtypes": (ExplicitX64Mode.ERROR,),
}


def _env(name: str) -> tuple[str, ...]:
    return (name.upper(),)


# name -> (default, parser, environment variables read at start-up). ``env`` is JAX's: every
# state reads JAX_<NAME>; plain flags read only the variable JAX gives them, if any.
_NEW: dict[str, tuple[Any, ...]] = {
    # --- implemented: the option has its effect --------------------------------------------
    # How library entry points marked with jax._src.traceback_util.api_boundary (Flax's
    # init/apply) filter their exceptions' tracebacks (_src_compat/traceback_util.py).
    "jax_traceback_filtering": (enum_state("off", "tracebackhide", "remove_frames",
                                           "quiet_remove_frames", "auto"), "auto"),
    # Compile options (runtime/compile_cache.py: apply_config_to_compile_options).
    "jax_optimization_level": (enum_state("UNKNOWN", "O0", "O1", "O2", "O3"), "UNKNOWN"),
    "jax_memory_fitting_level": (enum_state("UNKNOWN", "O0", "O1", "O2", "O3"), "O2"),
    "jax_exec_time_optimization_effort": (float_state, 0.0),
    "jax_memory_fitting_effort": (float_state, 0.0),
    "jax_disable_most_optimizations": (flag(bool), False),
    "jax_compiler_enable_remat_pass": (bool_state, True),
    # Dumps of each compiled module (runtime/compile_cache.py: dump_module).
    "jax_dump_ir_to": (flag(str), ""),
    "jax_dump_ir_modes": (flag(str), "stablehlo"),
    "jax_include_debug_info_in_dumps": (flag(bool), True),
    # Added to the seed of random.key / PRNGKey (random/key_prims.py).
    "jax_random_seed_offset": (int_state, 0),
    # jaxprs print in colour where a terminal or a notebook shows it (jaxkit.jaxpr)
    "jax_pprint_use_color": (bool_state, True),
    # The warning about large captured constants (runtime/compile_config.py).
    "jax_captured_constants_warn_bytes": (int_state, 2000000000),
    # Source locations in the persistent cache key (runtime/compile_cache.py).
    "jax_compilation_cache_include_metadata_in_key": (bool_state, False),
    # Python logging of the jax/jaxkit loggers (jaxkit/_config.py: _update_logging).
    "jax_logging_level": (optional_enum_state("NOTSET", "DEBUG", "INFO", "WARNING", "ERROR",
                                              "CRITICAL"), "NOTSET"),
    "jax_debug_log_modules": (string_state, ""),
    # Which backends start (runtime/gpu.py reads jax_platforms; pjrt.default_backend reads
    # jax_platform_name).
    "jax_platforms": (optional_string_state, None),
    "jax_platform_name": (flag(str), ""),
    # Operations on concrete values run at trace time (transforms/compile_time_eval.py).
    "eager_constant_folding": (bool_state, False),
    # --- not available in jaxkit: JAX's default only ---------------------------------------
    "jax_compiler_detailed_logging_min_ops": (flag(int), 10, "jaxkit does not turn on XLA's "
                                              "detailed compile logging"),
    "jax_cpu_enable_async_dispatch": (flag(bool), True, "jaxkit's CPU client always "
                                      "dispatches asynchronously"),
    "check_vma": (bool_state, False, "check_vma is shard_map's internal tracing state; pass "
                  "check_vma= to jax.shard_map instead"),
    "jax2tf_default_native_serialization": (bool_state, True, _JAX2TF),
    "jax_backend_target": (flag(str), "", "jaxkit has no remote (gRPC) backend target"),
    "jax_bcoo_cusparse_lowering": (bool_state, False, "jaxkit.experimental.sparse does not "
                                   "lower to cuSPARSE"),
    "jax_captured_constants_report_frames": (int_state, 0, "jaxkit does not report where "
                                             "captured constants are used"),
    "jax_check_proxy_envs": (flag(bool), True, "jaxkit starts no gRPC client that reads "
                             "proxy variables"),
    "jax_check_static_indices": (bool_state, False, "jaxkit does not check static indices "
                                 "for out-of-bounds at trace time"),
    "jax_compilation_cache_check_contents": (bool_state, False, "jaxkit's persistent cache "
                                             "does not recompile to verify its entries"),
    "jax_compilation_cache_expect_pgle": (bool_state, False, _PGLE),
    "jax_cpu_collectives_implementation": (
        optional_enum_state("gloo", "mpi", "megascale"), "gloo", _MULTI_HOST),
    "jax_cpu_get_global_topology_timeout_minutes": (int_state, 5, _MULTI_HOST),
    "jax_cpu_get_local_topology_timeout_minutes": (int_state, 2, _MULTI_HOST),
    "jax_cross_host_transfer_socket_address": (flag(str), "", _MULTI_HOST),
    "jax_cross_host_transfer_timeout_seconds": (flag(int), None, _MULTI_HOST),
    "jax_cross_host_transfer_transfer_size": (flag(int), None, _MULTI_HOST),
    "jax_cross_host_transport_addresses": (flag(str), "", _MULTI_HOST),
    "jax_cuda_visible_devices": (flag(str), "all", "jaxkit's CUDA client sees every GPU "
                                 "(use CUDA_VISIBLE_DEVICES)"),
    "jax_custom_vjp3": (bool_state, False, _INTERNAL),
    "jax_debug_leaked_clients_on_clear_backends": (bool_state, False, _INTERNAL),
    "jax_disable_bwd_checks": (bool_state, False, _INTERNAL),
    "jax_disable_vmap_shmap_error": (bool_state, False, _INTERNAL),
    "jax_disallow_mesh_context_manager": (bool_state, False, "jaxkit keeps the `with mesh:` "
                                          "context manager"),
    "jax_distributed_debug": (bool_state, False, _MULTI_HOST),
    "jax_embedded_constants_max_bytes": (int_state, 32, _INTERNAL),
    "jax_enable_pgle": (bool_state, False, _PGLE),
    "jax_enable_preemption_service": (bool_state, True, _MULTI_HOST),
    "jax_enable_recoverability": (bool_state, False, _MULTI_HOST),
    "jax_error_checking_behavior_divide": (enum_state("ignore", "raise"), "ignore",
                                           "jaxkit has no jax.numpy error checking"),
    "jax_error_checking_behavior_nan": (enum_state("ignore", "raise"), "ignore",
                                        "jaxkit has no jax.numpy error checking"),
    "jax_error_checking_behavior_oob": (enum_state("ignore", "raise"), "ignore",
                                        "jaxkit has no jax.numpy error checking"),
    "jax_experimental_unsafe_xla_runtime_errors": (bool_state, False, "jaxkit lowers no "
                                                   "XLA runtime error checks"),
    "jax_explicit_x64_dtypes": (enum_class_state(ExplicitX64Mode), ExplicitX64Mode.WARN,
                                "jaxkit makes no 64-bit arrays while x64 is off: its lax "
                                "ops canonicalise every dtype (no ALLOW mode)"),
    "jax_export_calling_convention_version": (int_state, 10, _EXPORT),
    "jax_export_ignore_forward_compatibility": (bool_state, False, _EXPORT),
    "jax_force_dcn_cross_host_transfers": (flag(bool), False, _MULTI_HOST),
    "jax_high_dynamic_range_gumbel": (bool_state, False, "jaxkit.random.gumbel has only the "
                                      "standard sampler"),
    "jax_hlo_source_file_canonicalization_regex": (optional_string_state, None,
                                                   "jaxkit does not rewrite source file "
                                                   "names in locations"),
    "jax_include_full_tracebacks_in_locations": (bool_state, True, "jaxkit's locations are "
                                                 "its own"),
    "jax_log_checkpoint_residuals": (bool_state, False, "jaxkit does not log checkpoint "
                                     "residuals"),
    "jax_mock_gpu_topology": (flag(str), "", _MOCK_GPU),
    "jax_mosaic_allow_hlo": (bool_state, False, _PALLAS),
    "jax_mutable_array_checks": (bool_state, True, _INTERNAL),
    "jax_oneapi_visible_devices": (flag(str), "all", _ROCM_SYCL),
    "jax_pallas_enable_debug_checks": (bool_state, False, _PALLAS),
    "jax_pallas_poison_buffers": (bool_state, False, _PALLAS),
    "jax_pallas_use_mosaic_gpu": (bool_state, True, _PALLAS),
    "jax_pallas_verbose_errors": (flag(bool), False, _PALLAS),
    "jax_persistent_cache_enable_xla_caches": (optional_string_state,
                                               "xla_gpu_per_fusion_autotune_cache_dir",
                                               "jaxkit's persistent cache stores executables "
                                               "only, not XLA's autotuning caches"),
    "jax_pgle_aggregation_percentile": (int_state, 90, _PGLE),
    "jax_pgle_profiling_runs": (int_state, 3, _PGLE),
    "jax_pjrt_client_create_options": (string_or_dict_state, None, "jaxkit creates its PjRt "
                                       "clients with fixed options"),
    "jax_ragged_dot_use_gpu_pallas_triton_lowering": (bool_state, False, _PALLAS),
    "jax_ragged_dot_use_ragged_dot_instruction": (bool_state, True, _INTERNAL),
    "jax_refs_to_pins": (bool_state, False, _INTERNAL),
    "jax_remat3": (bool_state, False, _INTERNAL),
    "jax_remove_custom_partitioning_ptr_from_cache_key": (bool_state, False, _INTERNAL),
    "jax_rocm_visible_devices": (flag(str), "all", _ROCM_SYCL),
    "jax_scan3": (bool_state, False, _INTERNAL),
    "jax_send_traceback_to_runtime": (enum_class_state(RuntimeTracebackMode),
                                      RuntimeTracebackMode.OFF,
                                      "jaxkit sends no Python tracebacks to the runtime"),
    "jax_serialization_version": (int_state, 0, _EXPORT),
    "jax_share_binary_between_hosts": (bool_state, False, _MULTI_HOST),
    "jax_share_binary_between_hosts_timeout_ms": (int_state, 1200000, _MULTI_HOST),
    "jax_sort_devices_by_process_index": (flag(bool), True, "jaxkit always orders devices "
                                          "by process index"),
    "jax_source_url_schema": (optional_string_state, None, "jaxkit does not link source "
                              "locations to URLs"),
    "jax_threefry_gpu_kernel_lowering": (bool_state, False, "jaxkit lowers threefry to "
                                         "StableHLO only, with no custom GPU kernel"),
    "jax_traceback_in_locations_limit": (int_state, 100, "jaxkit's locations are its own"),
    "jax_tracer_error_num_traceback_frames": (flag(int), 5, "jaxkit's tracer errors name "
                                              "the argument instead of showing frames"),
    "jax_use_direct_linearize": (bool_state, True, _INTERNAL),
    "jax_use_emit_pipeline_primitive": (bool_state, False, _PALLAS),
    "jax_use_shardy_partitioner": (bool_state, True, "jaxkit lowers shardings to Shardy only"),
    "jax_use_simplified_jaxpr_constants": (bool_state, False, _INTERNAL),
    "jax_xla_backend": (flag(str), "", "deprecated in JAX, with no effect there either"),
    "jax_xla_profile_version": (int_state, 0, _PGLE),
    "mock_num_gpu_processes": (flag(int), 0, _MOCK_GPU),
}

# The environment variables JAX's plain flags read (states all read JAX_<NAME>).
_FLAG_ENV = {
    "jax_backend_target", "jax_platform_name", "jax_dump_ir_to", "jax_dump_ir_modes",
    "jax_include_debug_info_in_dumps", "jax_pallas_verbose_errors",
    "jax_tracer_error_num_traceback_frames", "jax_disable_most_optimizations",
    "jax_compiler_detailed_logging_min_ops",
}

# JAX's options that are plain flags, without a context manager: config.read accepts them.
PLAIN_FLAGS = frozenset({
    "jax_backend_target", "jax_check_proxy_envs", "jax_compiler_detailed_logging_min_ops",
    "jax_cpu_enable_async_dispatch", "jax_cross_host_transfer_socket_address",
    "jax_cross_host_transfer_timeout_seconds", "jax_cross_host_transfer_transfer_size",
    "jax_cross_host_transport_addresses", "jax_cuda_visible_devices",
    "jax_disable_most_optimizations", "jax_dump_ir_modes", "jax_dump_ir_to", "jax_enable_x64",
    "jax_force_dcn_cross_host_transfers", "jax_include_debug_info_in_dumps",
    "jax_mock_gpu_topology", "jax_oneapi_visible_devices", "jax_pallas_verbose_errors",
    "jax_platform_name", "jax_rocm_visible_devices", "jax_sort_devices_by_process_index",
    "jax_tracer_error_num_traceback_frames", "jax_xla_backend", "mock_num_gpu_processes",
})


def _build() -> dict[str, Option]:
    table = {}
    for name, (parse, default, *reason) in _NEW.items():
        is_state = name not in PLAIN_FLAGS
        env = _env(name) if is_state or name in _FLAG_ENV else ()
        if name == "jax_platforms":  # jaxkit's own name first, as for its other variables
            env = ("JAXKIT_PLATFORMS", *env)
        table[name] = _option(name, parse, default, reason[0] if reason else None, env)
    return table


OPTIONS: dict[str, Option] = _build()
