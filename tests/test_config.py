"""``jaxkit.config`` against JAX 0.10.2's ``jax.config``: the option names, defaults, value
checks (error class and text), environment variables, ``read`` refusing the options that have
a context manager, the State objects (``jax.debug_nans``, ...), and one effect test for each
option jaxkit implements.

``CLASSIFICATION`` sorts the 95 options jaxkit lacked before (issue #22): each has its effect
(tested below) or is not available, in which case it holds JAX's default and any other value
raises ``NotImplementedError`` with the reason. Its counts are the ones reported.
"""
from __future__ import annotations

import logging
import os
import re
import threading
import traceback
import warnings

import numpy as np
import pytest
from jaxlib import _jax

import jaxkit
from jaxkit import _config, _config_options
from jaxkit._src_compat import traceback_util
from jaxkit._config import _OPTIONS, CONTEXT_MANAGER_OPTIONS, Config, config
from jaxkit.runtime import compile_cache, compile_config, pjrt
from jaxkit.runtime import gpu as _gpu

jax = pytest.importorskip("jax")
from jax._src import config as jax_config  # noqa: E402  (the oracle's parsers, side-effect free)

# The options jaxkit lacked, each with the test that checks its effect, or "unavailable".
EFFECT, UNAVAILABLE = "effect", "unavailable"
CLASSIFICATION = {
    **dict.fromkeys([
        "jax_optimization_level", "jax_memory_fitting_level", "jax_exec_time_optimization_effort",
        "jax_memory_fitting_effort", "jax_disable_most_optimizations",
        "jax_compiler_enable_remat_pass"], (EFFECT, "test_compile_options")),
    **dict.fromkeys(["jax_dump_ir_to", "jax_dump_ir_modes", "jax_include_debug_info_in_dumps"],
                    (EFFECT, "test_dump_ir")),
    "jax_random_seed_offset": (EFFECT, "test_random_seed_offset"),
    "jax_pprint_use_color": (EFFECT, "test_pprint_use_color"),
    "jax_compilation_cache_include_metadata_in_key": (EFFECT, "test_metadata_in_cache_key"),
    "jax_captured_constants_warn_bytes": (EFFECT, "test_captured_constants_warning"),
    "jax_logging_level": (EFFECT, "test_logging_level"),
    "jax_debug_log_modules": (EFFECT, "test_debug_log_modules"),
    "jax_platforms": (EFFECT, "test_platforms"),
    "jax_platform_name": (EFFECT, "test_platform_name"),
    "jax_traceback_filtering": (EFFECT, "test_traceback_filtering"),
    "eager_constant_folding": (EFFECT, "test_eager_constant_folding"),
    **dict.fromkeys([
        "check_vma", "jax2tf_default_native_serialization",
        "jax_backend_target", "jax_bcoo_cusparse_lowering", "jax_captured_constants_report_frames",
        "jax_check_proxy_envs", "jax_check_static_indices",
        "jax_compilation_cache_check_contents", "jax_compilation_cache_expect_pgle",
        "jax_compiler_detailed_logging_min_ops",
        "jax_cpu_collectives_implementation", "jax_cpu_enable_async_dispatch",
        "jax_cpu_get_global_topology_timeout_minutes",
        "jax_cpu_get_local_topology_timeout_minutes", "jax_cross_host_transfer_socket_address",
        "jax_cross_host_transfer_timeout_seconds", "jax_cross_host_transfer_transfer_size",
        "jax_cross_host_transport_addresses", "jax_cuda_visible_devices", "jax_custom_vjp3",
        "jax_debug_leaked_clients_on_clear_backends", "jax_disable_bwd_checks",
        "jax_disable_vmap_shmap_error", "jax_disallow_mesh_context_manager",
        "jax_distributed_debug", "jax_embedded_constants_max_bytes", "jax_enable_pgle",
        "jax_enable_preemption_service", "jax_enable_recoverability",
        "jax_error_checking_behavior_divide", "jax_error_checking_behavior_nan",
        "jax_error_checking_behavior_oob", "jax_experimental_unsafe_xla_runtime_errors",
        "jax_explicit_x64_dtypes", "jax_export_calling_convention_version",
        "jax_export_ignore_forward_compatibility", "jax_force_dcn_cross_host_transfers",
        "jax_high_dynamic_range_gumbel", "jax_hlo_source_file_canonicalization_regex",
        "jax_include_full_tracebacks_in_locations", "jax_log_checkpoint_residuals",
        "jax_mock_gpu_topology", "jax_mosaic_allow_hlo", "jax_mutable_array_checks",
        "jax_oneapi_visible_devices", "jax_pallas_enable_debug_checks",
        "jax_pallas_poison_buffers", "jax_pallas_use_mosaic_gpu", "jax_pallas_verbose_errors",
        "jax_persistent_cache_enable_xla_caches", "jax_pgle_aggregation_percentile",
        "jax_pgle_profiling_runs", "jax_pjrt_client_create_options",
        "jax_ragged_dot_use_gpu_pallas_triton_lowering",
        "jax_ragged_dot_use_ragged_dot_instruction", "jax_refs_to_pins", "jax_remat3",
        "jax_remove_custom_partitioning_ptr_from_cache_key", "jax_rocm_visible_devices",
        "jax_scan3", "jax_send_traceback_to_runtime", "jax_serialization_version",
        "jax_share_binary_between_hosts", "jax_share_binary_between_hosts_timeout_ms",
        "jax_sort_devices_by_process_index", "jax_source_url_schema",
        "jax_threefry_gpu_kernel_lowering",
        "jax_traceback_in_locations_limit", "jax_tracer_error_num_traceback_frames",
        "jax_use_direct_linearize", "jax_use_emit_pipeline_primitive",
        "jax_use_shardy_partitioner", "jax_use_simplified_jaxpr_constants", "jax_xla_backend",
        "jax_xla_profile_version", "mock_num_gpu_processes"], (UNAVAILABLE, None)),
}

# Defaults jaxkit chose differently, on purpose (documented in jaxkit/_config.py): its
# persistent compilation cache is on, stores every compile and is bounded.
OWN_DEFAULTS = {"jax_enable_compilation_cache", "jax_persistent_cache_min_compile_time_secs",
                "jax_compilation_cache_max_size"}
BAD_VALUES = (1.5, "zz", None, 7, True, "allow", object())


# Options JAX refuses to change once its backends started (the other two are not available in
# jaxkit at all: NotImplementedError whatever the state).
FIXED_ONCE_STARTED = {"jax_num_cpu_devices", "jax_cpu_get_local_topology_timeout_minutes",
                      "jax_cpu_get_global_topology_timeout_minutes"}


def _outcome(fn):
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001  (the outcome is what is compared)
        return type(e).__name__, str(e)


def _jax_parse(name, value):
    """The oracle's check of a new value, without setting it (plain flags take anything)."""
    holder = jax.config._value_holders[name]
    parser = getattr(holder, "_parser", None)
    return parser(value) if parser is not None else value


def test_classification_covers_the_options_jaxkit_lacked():
    assert len(CLASSIFICATION) == 95
    assert set(CLASSIFICATION) == set(_config_options.OPTIONS)
    counts = {kind: sum(k == kind for k, _ in CLASSIFICATION.values())
              for kind in (EFFECT, UNAVAILABLE)}
    assert counts == {EFFECT: 19, UNAVAILABLE: 76}
    for name, (kind, test_name) in CLASSIFICATION.items():
        coerce = _OPTIONS[name][1]
        assert hasattr(coerce, "unsupported_reason") is (kind == UNAVAILABLE), name
        if kind == EFFECT:
            assert callable(globals()[test_name]), name


# Flags of JAX's own test harness, defined when a test imports jax._src.test_util or
# jax._src.test_loader (chex and others do): not options of the library.
JAX_TEST_HARNESS_FLAGS = {"jax_test_dut", "jax_num_generated_cases", "max_cases_sampling_retries",
                          "jax_skip_slow_tests", "jax_test_with_persistent_compilation_cache",
                          "test_targets", "exclude_test_targets", "jax_test_num_threads"}


def test_option_names_and_defaults_match_jax():
    assert set(config.option_names) == set(jax.config._value_holders) - JAX_TEST_HARNESS_FLAGS
    fresh = Config(environ={}).values
    theirs = {n: v for n, v in jax.config.values.items() if n not in JAX_TEST_HARNESS_FLAGS}
    set_by_env = {n for n in theirs if n.upper() in os.environ}
    differ = {n for n in theirs
              if n not in OWN_DEFAULTS | set_by_env and
              (fresh[n] != theirs[n] or  # jaxkit keeps two StrEnum options as their strings
               type(fresh[n]).__name__ != type(theirs[n]).__name__ and
               jax.config.meta[n][0] != "enum_class" or type(fresh[n]) is not type(fresh[n]))}
    assert differ == set()


def test_read_refuses_context_manager_options_as_jax():
    assert CONTEXT_MANAGER_OPTIONS == jax.config._contextmanager_flags
    for name in config.option_names:
        ours, theirs = _outcome(lambda: config.read(name)), _outcome(lambda: jax.config.read(name))
        assert ours[0] == theirs[0], name
        if theirs[0] != "ok":
            assert ours == theirs
    assert _outcome(lambda: config.read("jax_nope"))[0] == "AttributeError"


def test_bad_values_fail_as_in_jax():
    """Every option, each bad value: the same error class and text as JAX's; a value JAX
    accepts is accepted, or refused with NotImplementedError where jaxkit lacks the feature."""
    checked = 0
    for name in config.option_names:
        if name == "jax_default_device":  # its validator is JAX's; the values are devices
            continue
        if name in FIXED_ONCE_STARTED:  # JAX's parser refuses them once its backend started:
            continue                    # state, not type (test_num_cpu_devices_fixed_once_started)
        coerce = _OPTIONS[name][1]
        for value in BAD_VALUES:
            theirs = _outcome(lambda: _jax_parse(name, value))
            ours = _outcome(lambda: coerce(name, value))
            if theirs[0] == "ok":
                if ours[0] == "NotImplementedError":
                    assert name in ours[1] and hasattr(coerce, "unsupported_reason"), name
                else:
                    assert ours == theirs, (name, value)
            else:
                checked += 1
                # object() prints its address: compare up to it
                strip = re.compile(r" at 0x[0-9a-f]+")
                assert (ours[0], strip.sub("", ours[1])) == (theirs[0], strip.sub("", theirs[1]))
    assert checked > 100


def test_unavailable_options_refuse_other_values():
    c = Config(environ={})
    for name, (kind, _) in CLASSIFICATION.items():
        if kind != UNAVAILABLE:
            continue
        default = _OPTIONS[name][0]
        c.update(name, default)  # JAX's default is always accepted
        choices = getattr(_OPTIONS[name][1], "enum_values", None) or getattr(
            _OPTIONS[name][1], "enum_class", None)
        accepted = (default, *_config_options._ALSO.get(name, ()))
        if choices is not None:  # another valid choice
            other = next(v for v in choices if v not in accepted)
        elif isinstance(default, bool):
            if (not default) in accepted:
                continue  # both booleans accepted: nothing to refuse
            other = not default
        else:
            other = default + 1 if isinstance(default, int) else "x"
        with pytest.raises(NotImplementedError, match=re.escape(name)):
            c.update(name, other)
        assert getattr(c, name) == default
    # values that say what jaxkit does anyway are accepted
    c.update("jax_enable_preemption_service", False)


def test_environment_variables_as_jax():
    c = Config(environ={"JAX_RANDOM_SEED_OFFSET": "3", "JAX_OPTIMIZATION_LEVEL": "O1",
                        "JAX_EXEC_TIME_OPTIMIZATION_EFFORT": "0.5", "JAX_DUMP_IR_TO": "/d",
                        "JAX_INCLUDE_DEBUG_INFO_IN_DUMPS": "false", "JAX_PLATFORMS": "cpu",
                        "JAX_LOGGING_LEVEL": "INFO", "JAX_COMPILER_ENABLE_REMAT_PASS": "0",
                        "JAX_CUDA_VISIBLE_DEVICES": "0"})  # JAX reads no variable for this one
    assert (c.jax_random_seed_offset, c.jax_optimization_level) == (3, "O1")
    assert (c.jax_exec_time_optimization_effort, c.jax_dump_ir_to) == (0.5, "/d")
    assert c.jax_include_debug_info_in_dumps is False and c.jax_compiler_enable_remat_pass is False
    assert (c.jax_platforms, c.jax_logging_level, c.jax_cuda_visible_devices) == (
        "cpu", "INFO", "all")
    assert Config(environ={"JAXKIT_PLATFORMS": "cuda", "JAX_PLATFORMS": "cpu"}).jax_platforms \
        == "cuda"
    with pytest.raises(ValueError, match='Invalid value "x" for JAX flag jax_random_seed_offset'):
        Config(environ={"JAX_RANDOM_SEED_OFFSET": "x"})
    with pytest.raises(ValueError, match='Invalid value "O9" for JAX flag jax_optimization_l'):
        Config(environ={"JAX_OPTIMIZATION_LEVEL": "O9"})
    with pytest.warns(UserWarning, match="JAX_ENABLE_PGLE='1' is ignored"):
        assert Config(environ={"JAX_ENABLE_PGLE": "1"}).jax_enable_pgle is False


def test_state_objects_as_jax():
    for name in jaxkit.flags.__all__:
        ours, theirs = getattr(jaxkit, name), getattr(jax, name)
        # (jaxkit's default_device is a function giving the same thread-local block)
        if not isinstance(theirs, jax_config.State) or name == "default_device":
            continue
        assert (ours.name, ours.__name__) == (theirs.name, theirs.__name__)
        assert _outcome(lambda: bool(ours)) == _outcome(lambda: bool(theirs))
        # bool options default to True; the others need a value
        assert _outcome(ours)[0] == _outcome(theirs)[0], name
        if _outcome(theirs)[0] != "ok":
            assert _outcome(ours) == _outcome(theirs)
    with pytest.raises(ValueError, match="new enum value must be in"):
        jaxkit.numpy_rank_promotion("sometimes")

    @jaxkit.numpy_rank_promotion("raise")  # a context manager is also a decorator
    def inside():
        return jaxkit.numpy_rank_promotion.value

    assert (inside(), jaxkit.numpy_rank_promotion.value) == ("raise", "allow")


# ---- effects -------------------------------------------------------------------------------


def test_compile_options():
    with config.override(jax_optimization_level="O1", jax_memory_fitting_level="O3",
                         jax_exec_time_optimization_effort=-0.5, jax_memory_fitting_effort=0.25,
                         jax_disable_most_optimizations=True,
                         jax_compiler_enable_remat_pass=False):
        opts = compile_config.apply_config_to_compile_options(_jax.CompileOptions())
    build = opts.executable_build_options
    assert (build.optimization_level, build.memory_fitting_level) == (19, 39)
    assert (build.exec_time_optimization_effort, build.memory_fitting_effort) == (-0.5, 0.25)
    debug = build.debug_options
    assert debug.xla_backend_optimization_level == 0 and debug.xla_llvm_disable_expensive_passes
    assert debug.xla_disable_hlo_passes == "rematerialization"
    default = compile_config.apply_config_to_compile_options(_jax.CompileOptions())
    assert default.executable_build_options.memory_fitting_level == 29  # JAX's O2
    assert default.executable_build_options.debug_options.xla_disable_hlo_passes == ""


def _dump(module, tmp_path, fn, **options):
    with module.config.override(**options) if module is jaxkit else _jax_options(options):
        module.jit(fn)(np.float32(1.5))
    return {re.sub(r"\d+", "N", f): (tmp_path / f).read_text() for f in os.listdir(tmp_path)}


class _jax_options:  # noqa: N801  (the oracle's options for a block, restored after)
    def __init__(self, options):
        self.options = options

    def __enter__(self):
        self.saved = {n: jax.config.values[n] for n in self.options}
        for n, v in self.options.items():
            jax.config.update(n, v)

    def __exit__(self, *exc):
        for n, v in self.saved.items():
            jax.config.update(n, v)


def test_dump_ir(tmp_path):
    ours_dir, theirs_dir = tmp_path / "ours", tmp_path / "theirs"
    opts = {"jax_dump_ir_modes": "stablehlo,jaxpr", "jax_include_debug_info_in_dumps": False}
    ours = _dump(jaxkit, ours_dir, lambda x: jaxkit.numpy.sin(x) * 2,
                 jax_dump_ir_to=str(ours_dir), **opts)
    theirs = _dump(jax, theirs_dir, lambda x: jax.numpy.sin(x) * 2,
                   jax_dump_ir_to=str(theirs_dir), **opts)
    assert sorted(ours) == sorted(theirs) == ["jax_N_<lambda>.jaxpr.txt",
                                              "jax_irN_jit__lambda_compile.mlir"]
    assert ours["jax_N_<lambda>.jaxpr.txt"] == theirs["jax_N_<lambda>.jaxpr.txt"]
    module = ours["jax_irN_jit__lambda_compile.mlir"]
    assert "stablehlo.sine" in module and "loc(" not in module  # no debug info asked
    with config.override(jax_dump_ir_to=str(ours_dir), jax_dump_ir_modes="jaxpr_html"):
        with pytest.raises(NotImplementedError, match="jaxpr_html"):
            jaxkit.jit(lambda x: x - 1)(np.float32(1.5))


def test_random_seed_offset():
    with _jax_options({"jax_random_seed_offset": 5}):
        theirs = [np.asarray(jax.random.PRNGKey(0)), np.asarray(jax.jit(jax.random.PRNGKey)(1))]
    with config.override(jax_random_seed_offset=5):
        ours = [np.asarray(jaxkit.random.PRNGKey(0)),
                np.asarray(jaxkit.jit(jaxkit.random.PRNGKey)(1))]
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(ours, [[0, 5], [0, 6]])
    np.testing.assert_array_equal(jaxkit.jit(jaxkit.random.PRNGKey)(1), [0, 1])  # retraced


def test_metadata_in_cache_key():
    module = jaxkit.jit(lambda x: x * 3).lower(np.float32(1.0)).compiler_ir()
    assert b"test_config.py" not in compile_cache.persistent_module_bytes(module)
    with config.override(jax_compilation_cache_include_metadata_in_key=True):
        assert b"test_config.py" in compile_cache.persistent_module_bytes(module)


def test_captured_constants_warning():
    big = np.arange(100, dtype=np.float32)

    def messages(module, options):
        with options, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module.jit(lambda x: x + big)(np.float32(1))
        return [str(w.message) for w in caught if "constants" in str(w.message)]

    ours = messages(jaxkit, config.override(jax_captured_constants_warn_bytes=100))
    theirs = messages(jax, _jax_options({"jax_captured_constants_warn_bytes": 100}))
    assert len(ours) == 1 and ours == theirs and "(400.00B total)" in ours[0]
    assert messages(jaxkit, config.override(jax_captured_constants_warn_bytes=-1)) == []


def test_logging_level():
    logger = logging.getLogger("jaxkit")
    before = logger.level
    with config.override(jax_logging_level="DEBUG"):
        assert logger.level == logging.DEBUG and logger.handlers
        assert logging.getLogger("jax").level == logging.DEBUG
    assert logger.level == before and not logger.handlers


def test_debug_log_modules():
    logger = logging.getLogger("jaxkit.compilation_cache")
    before = logger.level
    with config.override(jax_debug_log_modules="jaxkit.compilation_cache,jax._src.dispatch"):
        assert logger.level == logging.DEBUG and logger.handlers
        assert logging.getLogger("jax._src.dispatch").level == logging.DEBUG
    assert logger.level == before and not logger.handlers


@pytest.mark.parametrize("platforms, gpu_first", [
    (None, True), ("cpu", False), ("cuda,cpu", True), ("cpu,cuda", False), ("tpu,gpu", True)])
def test_platforms(platforms, gpu_first):
    with config.override(jax_platforms=platforms):
        assert _gpu._platforms_allow_gpu() is gpu_first


def test_platform_name():
    with config.override(jax_platform_name="cpu"):
        assert jaxkit.default_backend() == "cpu"
        assert pjrt.current_default_device().platform == "cpu"
    with config.override(jax_platform_name="tpu"):
        with pytest.raises(RuntimeError, match="Unknown backend 'tpu'"):
            pjrt.get_backend()
    np.testing.assert_array_equal(jaxkit.numpy.ones(2), [1, 1])


def test_num_cpu_devices_fixed_once_started():
    """Once the CPU backend runs, a new device count is refused with JAX's RuntimeError and
    the option keeps its value."""
    jaxkit.numpy.zeros(1).block_until_ready()  # the backend has started
    before = config.jax_num_cpu_devices
    with pytest.raises(RuntimeError, match="jax_num_cpu_devices config should be updated "
                       "before backends are initialized"):
        config.update("jax_num_cpu_devices", 7)
    assert config.jax_num_cpu_devices == before


def test_traceback_filtering(tmp_path):
    """An api_boundary entry point (Flax's init/apply) drops a library's frames from the
    traceback under "remove_frames" and keeps them under "off" (modes compared with JAX's in
    test_ecosystem_fixes_flax)."""
    hidden = str(tmp_path / "lib.py")
    namespace: dict = {}
    exec(compile("def library_call():\n    raise ValueError('boom')\n", hidden, "exec"),
         namespace)
    entry = traceback_util.api_boundary(lambda: namespace["library_call"]())
    traceback_util._exclude_paths.append(hidden)
    try:
        shown = {}
        for mode in ("off", "remove_frames"):
            with config.override(jax_traceback_filtering=mode), \
                    pytest.raises(ValueError) as info:
                entry()
            shown[mode] = [f.f_code.co_filename for f, _ in
                           traceback.walk_tb(info.value.__traceback__)]
    finally:
        traceback_util._exclude_paths.remove(hidden)
    assert hidden in shown["off"] and hidden not in shown["remove_frames"]


# ---- thread-local blocks -------------------------------------------------------------------

# (top-level name, block argument, a value that differs from the default for `update`)
THREAD_LOCAL_STATES = [
    ("enable_x64", True, True), ("numpy_rank_promotion", "raise", "warn"),
    ("default_matmul_precision", "highest", "high"), ("debug_nans", True, True),
    ("check_tracer_leaks", True, True), ("log_compiles", True, True),
]


def _in_thread(fn):
    out = []
    thread = threading.Thread(target=lambda: out.append(_outcome(fn)))
    thread.start()
    thread.join()
    return out[0]


def _thread_story(module, name, value, other):
    """What this thread and another one read of option ``name`` inside and after a block
    of this thread setting it to ``value``, with `config.update(other)` (global) in between."""
    state, option = getattr(module, name), getattr(module, name).name
    read = lambda: getattr(module.config, option)  # noqa: E731
    default = read()
    story = []
    with state(value):
        story += [read(), state.value, _in_thread(read)]
        module.config.update(option, other)  # global: the block's value stays in this thread
        story += [read(), _in_thread(read)]
        module.config.update(option, default)
        with state(other):  # nested blocks restore the enclosing block's value
            story.append(read())
        story.append(read())
    story += [read(), _in_thread(read)]
    return story


@pytest.mark.parametrize("name, value, other", THREAD_LOCAL_STATES)
def test_blocks_are_thread_local_as_jax(name, value, other):
    assert _thread_story(jaxkit, name, value, other) == _thread_story(jax, name, value, other)


def test_jit_caches_follow_the_calling_thread():
    """A function jitted in an x64 block of one thread and called in another (and the
    reverse) gives each thread's dtype, as JAX's jit cache keys on the thread's values."""
    def story(module):
        f = module.jit(lambda a: a * 2)
        add = lambda: (f(1.0).dtype.name, (module.numpy.ones(1) + 1).dtype.name)  # noqa: E731
        with module.enable_x64(True):
            story = [add(), _in_thread(add)]
        story += [add(), _in_thread(lambda: _with(module.enable_x64(True), add))]
        return story + [add()]

    def _with(block, fn):
        with block:
            return fn()

    assert story(jaxkit) == story(jax)
    assert story(jaxkit)[1][1] == ("float32", "float32")


def test_blocks_checks_hold_on_repeated_calls():
    """Inside a thread-local block the calls take the plans of that configuration: the checks
    it asks for (debug_nans, disable_jit) still run on the second, cached call, and once the
    block is closed the global plans run again."""
    def story(module):
        f = module.jit(lambda a: module.numpy.log(a) * 2)
        out = [_outcome(lambda: f(module.numpy.ones(2)).tolist())]
        with module.debug_nans(True):
            out += [_outcome(lambda: f(-module.numpy.ones(2)))[0] for _ in range(2)]
        with module.disable_jit():
            out += [type(f(module.numpy.ones(2))).__name__ for _ in range(2)]
        return out + [str(f(-module.numpy.ones(2)))]  # (nan != nan: compared as text)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nan reruns' messages
        assert story(jaxkit) == story(jax)


def test_blocks_that_change_no_program_cost_no_retrace():
    """Only the options in JAX's trace context (and those jaxkit's jit fast path reads) key
    the caches: a jitted call inside ``log_compiles()`` reuses the program compiled outside
    it, as in JAX (Optax's optimiser tests assert no recompilation there)."""
    assert _config._IN_CONTEXT <= set(_OPTIONS)
    traces = []

    @jaxkit.jit
    def f(a):
        traces.append(1)
        return a + 1

    f(1.0)
    with jaxkit.log_compiles():
        assert float(f(2.0)) == 3.0
    assert len(traces) == 1
    with jaxkit.enable_x64(False), jaxkit.numpy_rank_promotion("raise"):
        f(2.0)  # numpy_rank_promotion is in JAX's trace context: a retrace, as JAX's
    assert len(traces) == 2


def test_eager_constant_folding():
    """Set globally (ensure_compile_time_eval sets it for a block), jit traces run operations
    on concrete values at trace time, as JAX's; it is in the jit key."""
    def kinds(J):
        seen = []

        @J.jit
        def f(x):
            seen.append(isinstance(J.numpy.sin(2.0), J.core.Tracer))
            return x

        f(1.0)
        J.config.update("eager_constant_folding", True)
        try:
            f(1.0)
        finally:
            J.config.update("eager_constant_folding", False)
        f(1.0)
        return seen
    assert kinds(jaxkit) == kinds(jax) == [True, False]


def test_x64_enabled_mirrors_jax_enable_x64_as_in_jax():
    import jax
    assert jaxkit.config.x64_enabled is jax.config.x64_enabled is False
    with jaxkit.enable_x64(True), jax.enable_x64(True):
        assert jaxkit.config.x64_enabled is jax.config.x64_enabled is True
    with pytest.raises(AttributeError):
        jaxkit.config.x64_enabled = True


def test_pprint_use_color(monkeypatch):
    """Jaxprs print in colour where colour shows (a notebook, a terminal) unless the option is
    off; an explicit ``use_color`` wins."""
    from jaxkit import jaxpr as jaxpr_mod
    closed = jaxkit.make_jaxpr(lambda x: x * 2)(1.0)
    monkeypatch.setattr(jaxpr_mod, "CAN_USE_COLOR", True)
    assert "\x1b[" in str(closed)
    with jaxkit.config.override(jax_pprint_use_color=False):
        assert "\x1b[" not in str(closed)
        assert "\x1b[" in closed.pretty_print(use_color=True)
    monkeypatch.setattr(jaxpr_mod, "CAN_USE_COLOR", False)
    assert "\x1b[" not in str(closed)
