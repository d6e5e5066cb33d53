"""NVIDIA GPUs through the CUDA PJRT plugin, found without importing jax.

The ``jax-cuda12-pjrt`` wheel ships the plugin as a shared library
(``jax_plugins/xla_cuda12/xla_cuda_plugin.so``) next to a Python package whose ``__init__``
imports jax, so the library is located through the wheel's *installed-distribution metadata*
(``importlib.metadata``) and loaded directly. As jax does, the NVIDIA libraries of the
``nvidia-*-cu12`` wheels are preloaded first so that the plugin's own ``dlopen`` calls find
them, and the custom calls of ``jax-cuda12-plugin`` (linear algebra kernels) are registered
when that wheel is present.

``install()`` registers the ``gpu`` backend (aliases ``cuda``) with the runtime: it is created
on first use and becomes the default backend when a plugin is installed *and* a GPU is visible
(``JAXKIT_PLATFORMS=cpu`` keeps the CPU). Without a plugin, ``jaxkit.devices("gpu")`` raises a
``RuntimeError`` that says what to install; the CPU stays the default.
"""
from __future__ import annotations

import ctypes
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import pathlib
from typing import Any

from jaxkit.runtime import pjrt
from jaxkit.runtime import multi_device

logger = logging.getLogger("jaxkit")

PLUGIN_DISTRIBUTION = "jax-cuda12-pjrt"
PLUGIN_LIBRARY = "jax_plugins/xla_cuda12/xla_cuda_plugin.so"
KERNELS_PACKAGE = "jax_cuda12_plugin"
INSTALL_HINT = "pip install 'jaxkit[cuda12]'"
PLATFORM_NAMES = ("gpu", "cuda")

# The CUDA 12 libraries jax preloads from the nvidia-*-cu12 wheels, by nvidia.<module>.
NVIDIA_LIBRARIES = (
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
)


class PluginNotFoundError(RuntimeError):
    """No CUDA PJRT plugin is installed."""


def find_cuda_plugin() -> pathlib.Path | None:
    """The plugin library: ``$JAXKIT_CUDA_PLUGIN_PATH`` if set, else the file of the installed
    ``jax-cuda12-pjrt`` distribution (found through its metadata, never by importing it)."""
    override = os.environ.get("JAXKIT_CUDA_PLUGIN_PATH")
    if override:
        path = pathlib.Path(override)
        return path if path.is_file() else None
    try:
        dist = importlib.metadata.distribution(PLUGIN_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    candidates = [pathlib.Path(str(dist.locate_file(PLUGIN_LIBRARY)))]
    for f in dist.files or ():  # a different layout in another release of the wheel
        if f.name == "xla_cuda_plugin.so":
            candidates.append(pathlib.Path(str(dist.locate_file(f))))
    for path in candidates:
        if path.is_file():
            return path
    return None


def plugin_version() -> str | None:
    """The version of the installed ``jax-cuda12-pjrt`` distribution, if any."""
    try:
        return importlib.metadata.version(PLUGIN_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def _package_lib_dir(module: str) -> pathlib.Path | None:
    """``<site-packages>/nvidia/<module>/lib`` without importing anything."""
    try:
        spec = importlib.util.find_spec(f"nvidia.{module}")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return pathlib.Path(next(iter(spec.submodule_search_locations))) / "lib"


def preload_nvidia_libraries() -> list[str]:
    """Load the NVIDIA libraries from the ``nvidia-*-cu12`` wheels (if installed) so that the
    plugin finds them; returns the paths loaded. Missing ones are left to the system's
    library search path."""
    loaded = []
    for module, names in NVIDIA_LIBRARIES:
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


def _register_kernels(c_api: Any) -> None:
    """Custom calls of the ``jax-cuda12-plugin`` wheel (cuSOLVER, cuBLAS, ...), if present."""
    if importlib.util.find_spec(KERNELS_PACKAGE) is None:
        logger.info("%s is not installed: GPU linear algebra custom calls are unavailable",
                    KERNELS_PACKAGE)
        return
    extension = importlib.import_module(f"{KERNELS_PACKAGE}.cuda_plugin_extension")
    multi_device.register_plugin_custom_calls("CUDA", extension, c_api)


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
            "installed: install it with "
            f"`{INSTALL_HINT}` (the {PLUGIN_DISTRIBUTION} wheel matching jaxlib "
            f"{pjrt.jaxlib_version}), or set JAXKIT_CUDA_PLUGIN_PATH to its "
            "xla_cuda_plugin.so.")
    version = plugin_version()
    if version is not None and version != pjrt.jaxlib_version:
        raise RuntimeError(f"{PLUGIN_DISTRIBUTION} {version} does not match jaxlib "
                           f"{pjrt.jaxlib_version}: install the matching version with "
                           f"`{INSTALL_HINT}`.")
    preload_nvidia_libraries()
    try:
        c_api = multi_device.load_pjrt_plugin("cuda", str(path))
        client = multi_device.make_plugin_client("cuda")
    except RuntimeError as e:  # jaxlib's XlaRuntimeError, e.g. "No visible GPU devices"
        raise RuntimeError(f"The CUDA plugin at {path} could not start a GPU client: {e}") \
            from None
    if c_api is not None:
        _register_kernels(c_api)
    return pjrt.Backend(client)


def _platforms_allow_gpu() -> bool:
    value = os.environ.get("JAXKIT_PLATFORMS") or os.environ.get("JAX_PLATFORMS") or ""
    names = {p.strip().lower() for p in value.split(",") if p.strip()}
    return not names or bool(names & set(PLATFORM_NAMES))


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
