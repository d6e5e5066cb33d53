"""NVIDIA GPUs through the CUDA PJRT plugin, found without importing jax.

JAX 0.10.2 ships its CUDA plugin for two CUDA releases: ``jax-cuda13-pjrt`` and
``jax-cuda12-pjrt`` (``pip install 'jaxkit[cuda13]'`` or ``'jaxkit[cuda12]'``). Each wheel holds
the plugin as a shared library (``jax_plugins/xla_cuda13/xla_cuda_plugin.so``) next to a Python
package whose ``__init__`` imports jax, so the library is located through the wheel's
*installed-distribution metadata* (``importlib.metadata``) and loaded directly. As jax does, the
NVIDIA libraries of the matching ``nvidia-*`` wheels are preloaded first so that the plugin's
own ``dlopen`` calls find them, and the custom calls of ``jax-cuda13-plugin`` /
``jax-cuda12-plugin`` (linear algebra kernels) are registered when that wheel is present.

``install()`` registers the ``gpu`` backend (aliases ``cuda``) with the runtime: it is created
on first use and becomes the default backend when a plugin is installed *and* a GPU is visible
(``JAXKIT_PLATFORMS=cpu``, the ``jax_platforms`` option, keeps the CPU). Without a plugin,
``jaxkit.devices("gpu")`` raises a ``RuntimeError`` that says what to install; the CPU stays
the default.
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import logging
import os
import pathlib
import sys
from typing import Any

from jaxkit._config import config
from jaxkit.runtime import ffi_registry, multi_device, pjrt

logger = logging.getLogger("jaxkit")

PLATFORM_NAMES = ("gpu", "cuda")
# The modules of the kernels wheel whose kernels jaxkit's GPU lowerings call: cuSOLVER's
# (``cusolver_*_ffi``), cuSPARSE's (``cusparse_gtsv2_ffi``), jaxlib's own CUDA kernels
# (``cu_lu_pivots_to_permutation``, ...) and the hybrid ones that run LAPACK on the host
# (``cuhybrid_eig_real``, ...). The modules whose every kernel is a typed-FFI handler, whatever
# its name, as jaxlib registers them; in the others only names ending ``_ffi`` are.
KERNEL_MODULES = ("_solver", "_sparse", "_linalg", "_hybrid")
TYPED_FFI_MODULES = ("_linalg", "_hybrid")


@dataclasses.dataclass(frozen=True)
class CudaWheels:
    """The wheels of one CUDA release: the plugin, its kernels, and the NVIDIA libraries
    (``(module under nvidia., file names)``) jax preloads for it."""
    cuda: str
    libraries: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def distribution(self) -> str:
        return f"jax-cuda{self.cuda}-pjrt"

    @property
    def library(self) -> str:
        return f"jax_plugins/xla_cuda{self.cuda}/xla_cuda_plugin.so"

    @property
    def kernels_package(self) -> str:
        return f"jax_cuda{self.cuda}_plugin"

    @property
    def install_hint(self) -> str:
        return f"pip install 'jaxkit[cuda{self.cuda}]'"


# CUDA 13's wheels put every library in one folder (nvidia/cu13/lib); CUDA 12's, one per wheel.
CUDA13 = CudaWheels("13", (
    ("cu13", ("libcudart.so.13", "libnvrtc.so.13", "libcublas.so.13", "libcublasLt.so.13",
              "libcupti.so.13", "libcusparse.so.12", "libcusolver.so.12", "libcufft.so.12")),
    ("nccl", ("libnccl.so.2",)),
    ("nvshmem", ("libnvshmem_host.so.3",)),
    ("cudnn", ("libcudnn.so.9",)),
))
CUDA12 = CudaWheels("12", (
    ("cuda_runtime", ("libcudart.so.12",)),
    ("cuda_nvrtc", ("libnvrtc.so.12",)),
    ("cublas", ("libcublas.so.12", "libcublasLt.so.12")),
    ("nccl", ("libnccl.so.2",)),
    ("cuda_cupti", ("libcupti.so.12",)),
    ("cusparse", ("libcusparse.so.12",)),
    ("cusolver", ("libcusolver.so.11",)),
    ("cufft", ("libcufft.so.11",)),
    ("nvshmem", ("libnvshmem_host.so.3",)),
    ("cudnn", ("libcudnn.so.9",)),
))
RELEASES = (CUDA13, CUDA12)  # the newer first, when both are installed


class PluginNotFoundError(RuntimeError):
    """No CUDA PJRT plugin is installed."""


def _installed_release() -> CudaWheels | None:
    """The CUDA release whose plugin wheel is installed (the newest, if several)."""
    for release in RELEASES:
        try:
            importlib.metadata.distribution(release.distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
        return release
    return None


def _release_of(path: pathlib.Path) -> CudaWheels | None:
    """The release a plugin file belongs to, read from its folder (``xla_cuda13``)."""
    for release in RELEASES:
        if f"cuda{release.cuda}" in str(path):
            return release
    return _installed_release()


def find_cuda_plugin() -> pathlib.Path | None:
    """The plugin library: ``$JAXKIT_CUDA_PLUGIN_PATH`` if set, else the file of the installed
    ``jax-cuda13-pjrt`` or ``jax-cuda12-pjrt`` distribution (found through its metadata, never
    by importing it)."""
    override = os.environ.get("JAXKIT_CUDA_PLUGIN_PATH")
    if override:
        path = pathlib.Path(override)
        return path if path.is_file() else None
    release = _installed_release()
    if release is None:
        return None
    dist = importlib.metadata.distribution(release.distribution)
    candidates = [pathlib.Path(str(dist.locate_file(release.library)))]
    for f in dist.files or ():  # a different layout in another release of the wheel
        if f.name == "xla_cuda_plugin.so":
            candidates.append(pathlib.Path(str(dist.locate_file(f))))
    for path in candidates:
        if path.is_file():
            return path
    return None


def plugin_version() -> str | None:
    """The version of the installed plugin distribution, if any."""
    release = _installed_release()
    return None if release is None else importlib.metadata.version(release.distribution)


def _package_lib_dir(module: str) -> pathlib.Path | None:
    """``<site-packages>/nvidia/<module>/lib`` without importing anything."""
    try:
        spec = importlib.util.find_spec(f"nvidia.{module}")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return pathlib.Path(next(iter(spec.submodule_search_locations))) / "lib"


def preload_nvidia_libraries(release: CudaWheels | None = None) -> list[str]:
    """Load the NVIDIA libraries of ``release`` (default: the installed plugin's, else CUDA
    12's) from their wheels, if installed, so that the plugin finds them; returns the paths
    loaded. Missing ones are left to the system's library search path."""
    release = release or _installed_release() or CUDA12
    loaded = []
    for module, names in release.libraries:
        lib_dir = _package_lib_dir(module)
        if lib_dir is None:
            continue
        for name in names:
            path = lib_dir / name
            if not path.is_file():
                continue
            try:
                ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
                loaded.append(str(path))
            except OSError as e:
                logger.debug("could not preload %s: %s", path, e)
    return loaded


def _load_submodule(package: str, module: str) -> Any:
    """The extension module ``package.module`` loaded from its file without running
    ``package/__init__.py``: the kernels wheels' ``__init__`` may import jax (0.11's does),
    and ``import jaxkit`` never imports jax."""
    name = f"{package}.{module}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(package)
    for directory in (spec.submodule_search_locations or ()) if spec else ():
        for suffix in importlib.machinery.all_suffixes():
            path = pathlib.Path(directory, module + suffix)
            if path.is_file():
                module_spec = importlib.util.spec_from_file_location(name, path)
                loaded = importlib.util.module_from_spec(module_spec)
                module_spec.loader.exec_module(loaded)
                sys.modules[name] = loaded
                return loaded
    raise ImportError(f"{name} not found (no {module} module in {package})")


def _register_kernels(c_api: Any, release: CudaWheels) -> None:
    """Custom calls of the ``jax-cuda13-plugin``/``jax-cuda12-plugin`` wheel (cuSOLVER,
    cuBLAS, ...), if present. The GPU still starts without them (jax does the same): only
    the operations that call these kernels are then unavailable, and say so when compiled."""
    package = release.kernels_package
    if importlib.util.find_spec(package) is None:
        logger.info("%s is not installed: GPU linear algebra custom calls are unavailable",
                    package)
        return
    try:
        extension = _load_submodule(package, "cuda_plugin_extension")
        multi_device.register_plugin_custom_calls("CUDA", extension, c_api)
        # The kernels themselves (cuSOLVER factorizations, cuSPARSE's gtsv2, LU pivots, the
        # hybrid eig/geqp3), imported directly rather than through jaxlib's plugin lookup,
        # which would pick them by jaxlib's version instead of the plugin's; API versions as
        # jaxlib's gpu_solver/gpu_sparse/gpu_linalg give them (TYPED_FFI_MODULES).
        names = []
        for module in KERNEL_MODULES:
            kernels = _load_submodule(package, module)
            for name, capsule in kernels.registrations().items():
                typed = module in TYPED_FFI_MODULES or name.endswith("_ffi")
                ffi_registry.register_target(name, capsule, "CUDA", int(typed))
                names.append(name)
        logger.info("registered %d GPU kernels of %s", len(names), package)
    except (ImportError, AttributeError, RuntimeError, TypeError) as e:
        logger.warning("The GPU kernels of %s could not be registered (%s); GPU linear algebra "
                       "custom calls are unavailable. Install the version matching jaxlib %s "
                       "with `%s`.", package, e, pjrt.jaxlib_version, release.install_hint)


def _kernels_module(module: str) -> Any | None:
    """``<kernels package>.<module>`` of the installed CUDA release (its NVIDIA libraries
    loaded first, as for the backend), or None where the kernels wheel is not installed or
    does not load."""
    release = _installed_release()
    if release is None or importlib.util.find_spec(release.kernels_package) is None:
        return None
    preload_nvidia_libraries(release)
    try:
        return _load_submodule(release.kernels_package, module)
    except ImportError as e:
        logger.warning("%s.%s could not be loaded: %s", release.kernels_package, module, e)
        return None


@functools.cache
def initialize_hybrid_kernels() -> bool:
    """Give the hybrid GPU kernels (``cuhybrid_eig_real``, ``cuhybrid_geqp3``, ...) the host
    LAPACK routines they call between copies, as jax does before lowering one: the plugin's
    ``_hybrid.initialize`` looks them up in SciPy's LAPACK (a jaxlib dependency). Returns
    whether it ran (False without the kernels wheel: the GPU cannot run them then anyway)."""
    hybrid = _kernels_module("_hybrid")
    if hybrid is None:
        return False
    try:
        hybrid.initialize()
    except ImportError as e:  # no SciPy: the hybrid kernels would fail when run
        logger.warning("The hybrid GPU kernels (eig, pivoted QR) could not find LAPACK: %s. "
                       "Install SciPy (`pip install scipy`).", e)
        return False
    return True


@functools.cache
def cusolver_version() -> int | None:
    """cuSOLVER's version number (``cusolverGetProperty``: 11701 for 11.7.1) from the kernels
    wheel's ``_versions`` module, or None without that wheel. JAX chooses eig's GPU kernel by
    it (cuSOLVER's own ``geev`` from 11.7.1 on)."""
    versions = _kernels_module("_versions")
    if versions is None:
        return None
    try:
        return int(versions.cusolver_get_version())
    except RuntimeError as e:  # the library is missing or too old for the query
        logger.warning("cuSOLVER's version could not be read: %s", e)
        return None


def make_gpu_backend() -> pjrt.Backend:
    """Load and initialise the CUDA plugin and create a backend on its devices.

    Raises ``PluginNotFoundError`` (a RuntimeError) naming the package to install when there
    is no plugin, and ``RuntimeError`` when the plugin cannot start (no visible GPU, driver or
    library mismatch)."""
    path = find_cuda_plugin()
    if path is None:
        # JAX's words first (libraries match them), then what to install.
        present = ", ".join(sorted({b.platform for b in pjrt._backends.values()})) or "cpu"
        raise PluginNotFoundError(
            "Unknown backend: 'gpu' requested, but no platforms that are instances of gpu are "
            f"present. Platforms present are: {present}. The CUDA PJRT plugin is not "
            f"installed: install it with `{CUDA13.install_hint}` (or "
            f"`{CUDA12.install_hint}` for CUDA 12 drivers; the wheels matching jaxlib "
            f"{pjrt.jaxlib_version}), or set JAXKIT_CUDA_PLUGIN_PATH to its "
            "xla_cuda_plugin.so.")
    release = _release_of(path) or CUDA12
    # A file named by JAXKIT_CUDA_PLUGIN_PATH is the user's choice; an installed wheel must
    # match jaxlib, as jax requires.
    version = None if os.environ.get("JAXKIT_CUDA_PLUGIN_PATH") else plugin_version()
    if version is not None and version != pjrt.jaxlib_version:
        raise RuntimeError(f"{release.distribution} {version} does not match jaxlib "
                           f"{pjrt.jaxlib_version}: install the matching version with "
                           f"`{release.install_hint}`.")
    preload_nvidia_libraries(release)
    try:
        c_api = multi_device.load_pjrt_plugin("cuda", str(path))
        client = multi_device.make_plugin_client("cuda")
    except RuntimeError as e:  # jaxlib's XlaRuntimeError, e.g. "No visible GPU devices"
        raise RuntimeError(f"The CUDA plugin at {path} could not start a GPU client: {e}") \
            from None
    if c_api is not None:
        _register_kernels(c_api, release)
    return pjrt.Backend(client)


def _platforms_allow_gpu() -> bool:
    """Whether ``jax_platforms`` (JAXKIT_PLATFORMS / JAX_PLATFORMS at start-up) lets the GPU be
    the default: unset, or its first platform that jaxkit has is the GPU ("cuda,cpu"; but
    "cpu,cuda" keeps the CPU first, as in JAX)."""
    value = config.jax_platforms or ""
    names = [p.strip().lower() for p in value.split(",") if p.strip()]
    known = [n for n in names if n in ("cpu", *PLATFORM_NAMES)]
    return not names or bool(known) and known[0] in PLATFORM_NAMES


def gpu_is_default() -> bool:
    """Whether the GPU backend should be the default: a plugin is installed, the platforms
    setting allows it, and it starts (otherwise a warning says why and the CPU stays)."""
    if not _platforms_allow_gpu() or find_cuda_plugin() is None:
        return False
    try:
        pjrt.get_backend("gpu")
    except RuntimeError as e:
        logger.warning("A CUDA plugin is installed but the GPU backend did not start; falling "
                       "back to the CPU. %s", e)
        return False
    return True


def install() -> None:
    """Register the GPU backend with the runtime (created on first use)."""
    pjrt.register_backend_factory(PLATFORM_NAMES, make_gpu_backend, gpu_is_default)


install()
