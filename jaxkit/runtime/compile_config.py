"""The ``jax.config`` options that act when a program is compiled: XLA's build options
(``jax_optimization_level``, ``jax_memory_fitting_level``, the two effort knobs,
``jax_disable_most_optimizations``, ``jax_compiler_enable_remat_pass``) and the dump of each
compiled StableHLO module and of each lowered jaxpr (``jax_dump_ir_to``,
``jax_dump_ir_modes``, ``jax_include_debug_info_in_dumps``), and the warning about large
captured constants (``jax_captured_constants_warn_bytes``) that lowering gives.

``compile_cache.compile_and_load``, through which every compilation goes, calls both before
looking in its caches: the options are part of the serialized ``CompileOptions`` and hence of
the cache key, and JAX dumps a module each time it is handed to the compiler, cached or not.
"""
from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
import math
import os
import pathlib
import re
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from jaxlib import _jax
from jaxlib.mlir import ir

from jaxkit._config import config

logger = logging.getLogger("jaxkit.compiler")

# XLA's effort levels, as the integers ExecutableBuildOptions takes (JAX's EffortLevel).
_EFFORT_LEVELS = {"UNKNOWN": 0, "O0": 9, "O1": 19, "O2": 29, "O3": 39}


# The XLA options of the compilation under way (``jit(compiler_options=)``,
# ``Lowered.compile(compiler_options)``): every compile path applies the config here, so the
# options reach each of them (and, being part of the serialized options, the cache keys).
_compiler_options: contextvars.ContextVar[dict] = contextvars.ContextVar(
    "jaxkit_compiler_options", default={})


@contextlib.contextmanager
def compiler_options(options: dict) -> Iterator[None]:
    """Compile with ``options`` (XLA option name -> value) within the block."""
    token = _compiler_options.set(dict(options))
    try:
        yield
    finally:
        _compiler_options.reset(token)


def apply_config_to_compile_options(options: Any) -> Any:
    """Set the build options the config asks for on a jaxlib ``CompileOptions``, then the
    compiler options in effect (``compiler_options``); returns it."""
    _apply_config(options)
    if _compiler_options.get():
        apply_compiler_options(options, _compiler_options.get())
    return options


def apply_compiler_options(options: Any, compiler_options: dict) -> None:
    """JAX's handling of ``compiler_options``: the build options' own knobs (``fdo_profile``,
    the effort levels) set on them, every other name an XLA option override (an unknown name
    or a value of the wrong type fails when compiled, as in JAX)."""
    build = options.executable_build_options
    overrides = dict(compiler_options)
    if "fdo_profile" in overrides:
        build.fdo_profile = overrides.pop("fdo_profile")
    for name in ("exec_time_optimization_effort", "memory_fitting_effort",
                 "optimization_level", "memory_fitting_level"):
        if name in overrides:
            setattr(build, name, overrides.pop(name))
    # merged by name, so that applying the options twice (both compile paths do) is harmless
    options.env_option_overrides = list({**dict(options.env_option_overrides),
                                         **overrides}.items())


def _apply_config(options: Any) -> Any:
    build = options.executable_build_options
    build.exec_time_optimization_effort = config.jax_exec_time_optimization_effort or 0.0
    build.memory_fitting_effort = config.jax_memory_fitting_effort or 0.0
    build.optimization_level = _EFFORT_LEVELS[config.jax_optimization_level]
    build.memory_fitting_level = _EFFORT_LEVELS[config.jax_memory_fitting_level]
    debug = build.debug_options
    if config.jax_disable_most_optimizations:
        debug.xla_backend_optimization_level = 0
        debug.xla_llvm_disable_expensive_passes = True
        debug.xla_test_all_input_layouts = False
    if not config.jax_compiler_enable_remat_pass:
        debug.xla_disable_hlo_passes = "rematerialization"
    return options


def create_compile_options(computation: Any, tuple_args: bool, allow_prop_to_inputs: Sequence,
                           allow_prop_to_outputs: Sequence, backend: Any, np_dev: Any,
                           compiler_options: dict) -> Any:
    """The ``CompileOptions`` of an SPMD program over the devices ``np_dev`` (one partition
    each; JAX's ``pxla.create_compile_options``): the config's build options, then
    ``compiler_options`` (XLA flags by name; the effort levels set on the build options)."""
    del computation, backend
    devices = np.asarray(np_dev, dtype=object).reshape(1, -1)
    options = _jax.CompileOptions()
    options.num_replicas, options.num_partitions = 1, devices.size
    options.device_assignment = _jax.DeviceAssignment.create(
        np.vectorize(lambda d: d.id, otypes=[np.int32])(devices))
    options.parameter_is_tupled_arguments = tuple_args
    build = apply_config_to_compile_options(options).executable_build_options
    build.use_spmd_partitioning = True
    build.use_shardy_partitioner = True
    build.allow_spmd_sharding_propagation_to_parameters = list(allow_prop_to_inputs)
    build.allow_spmd_sharding_propagation_to_output = list(allow_prop_to_outputs)
    apply_compiler_options(options, compiler_options)
    return options


def dump_directory() -> pathlib.Path | None:
    """The folder ``jax_dump_ir_to`` names, created if missing (None when it is unset).
    ``sponge`` means the test runner's ``TEST_UNDECLARED_OUTPUTS_DIR``, as in JAX."""
    where = config.jax_dump_ir_to
    if not where:
        return None
    where = os.fspath(where)
    if where == "sponge":
        where = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR", "")
        if not where:
            raise ValueError("Got output directory (e.g., via JAX_DUMP_IR_TO) 'sponge' but "
                             "TEST_UNDECLARED_OUTPUTS_DIR is not defined.")
    path = pathlib.Path(where)
    path.mkdir(parents=True, exist_ok=True)
    return path


def dump_modes() -> list[str]:
    """The kinds of dump ``jax_dump_ir_modes`` asks for (comma-separated)."""
    return str(config.jax_dump_ir_modes).split(",")


_module_ids = itertools.count()
_jaxpr_ids = itertools.count()


def _safe_for_filename(name: str) -> str:
    return re.sub(r"[^\w.)( -]", "", name)


def dump_module(module: Any, stage: str = "compile") -> str | None:
    """Write ``module`` (an ``ir.Module`` or its text) to the dump folder as JAX names it,
    ``jax_ir<NNNN>_<module name>_<stage>.mlir``; returns the file name, or None when dumps are
    off or do not include ``stablehlo``."""
    out_dir = dump_directory()
    if out_dir is None or "stablehlo" not in dump_modes():
        return None
    debug_info = str(config.jax_include_debug_info_in_dumps).lower() not in ("false", "0")
    if isinstance(module, ir.Module):
        name = ir.StringAttr(module.operation.attributes["sym_name"]).value
        text = module.operation.get_asm(enable_debug_info=debug_info)
    else:  # text or bytecode handed straight to the compiler: written as it is
        text = module
        found = re.search(r"module @([\w.$-]+)", module if isinstance(module, str) else "")
        name = found.group(1) if found else "module"
    file_name = f"jax_ir{next(_module_ids):04d}_{_safe_for_filename(name)}_{stage}.mlir"
    path = out_dir / file_name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    logger.info("Dumped the module to %s.", file_name)
    return file_name


def dump_jaxpr(fun_name: str, jaxpr: Any) -> str | None:
    """Write the jaxpr of a program being lowered to the dump folder as JAX names it,
    ``jax_<NNNNNN>_<function name>.jaxpr.txt``, when ``jax_dump_ir_modes`` has ``jaxpr``;
    returns the file name."""
    out_dir = dump_directory()
    if out_dir is None:
        return None
    modes = dump_modes()
    unknown = {"jaxpr_html", "eqn_count_pprof"} & set(modes)
    if unknown:
        raise NotImplementedError(f"jax_dump_ir_modes={config.jax_dump_ir_modes!r}: jaxkit "
                                  f"dumps 'stablehlo' and 'jaxpr', not {sorted(unknown)}")
    if "jaxpr" not in modes:
        return None
    file_name = f"jax_{next(_jaxpr_ids):06d}_{fun_name}.jaxpr.txt"
    logger.info("Dumping jaxpr for %s to %s.", fun_name, out_dir)
    (out_dir / file_name).write_text(str(jaxpr))
    return file_name


def _bytes_text(num_bytes: float) -> str:
    """``4.00KB``: bytes in powers of 1000 with two decimals, as JAX's messages print them."""
    if num_bytes <= 0:
        return "0.00B"
    prefixes = ("", "K", "M", "G", "T")
    exponent = min(math.floor(math.log(num_bytes, 1000)), len(prefixes) - 1)
    return f"{num_bytes / 1000 ** exponent:.2f}{prefixes[exponent]}B"


def warn_captured_constants(consts: Sequence) -> None:
    """Warn, as JAX's lowering does, when the constants captured by a program being lowered
    add up to ``jax_captured_constants_warn_bytes`` or more (-1: never)."""
    threshold = config.jax_captured_constants_warn_bytes
    if threshold is None or threshold == -1 or not consts:
        return
    total = sum(getattr(c, "nbytes", 0) for c in consts)
    if total < threshold:
        return
    warnings.warn(
        f"A large amount of constants were captured during lowering ({_bytes_text(total)} "
        "total). If this is intentional, disable this warning by setting "
        "JAX_CAPTURED_CONSTANTS_WARN_BYTES=-1. To obtain a report of where these constants "
        "were encountered, set JAX_CAPTURED_CONSTANTS_REPORT_FRAMES=-1.", stacklevel=2)
