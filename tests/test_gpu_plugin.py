"""Finding and loading the CUDA PJRT plugin, tested on fake wheel layouts (no GPU needed).

A fake ``jax-cuda12-pjrt`` distribution (dist-info metadata plus the library file) on
``sys.path`` must be found through its metadata; fake ``nvidia-*`` wheels are preloaded; a
missing plugin, a version mismatch and a library that cannot start give RuntimeErrors that say
what to do, and the CPU stays the default backend."""
import _ctypes
import importlib
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import jaxkit
from jaxkit.runtime import gpu as _gpu
from jaxkit.runtime import pjrt as _runtime


def make_fake_wheel(site, version="0.10.2", library=None, cuda="12"):
    library = library or f"jax_plugins/xla_cuda{cuda}/xla_cuda_plugin.so"
    dist_info = site / f"jax_cuda{cuda}_pjrt-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: jax-cuda{cuda}-pjrt\nVersion: {version}\n")
    package = f"jax_plugins/xla_cuda{cuda}"
    (dist_info / "RECORD").write_text(f"{package}/__init__.py,,\n{library},,\n"
                                      f"{dist_info.name}/METADATA,,\n")
    lib = site / library
    lib.parent.mkdir(parents=True, exist_ok=True)
    lib.write_bytes(b"not really a shared library")
    (site / package / "__init__.py").write_text("raise ImportError('imports jax')\n")
    return lib


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A fake site-packages folder in place of the real ones: a machine whose real CUDA
    wheels are installed (a GPU machine) sees only the fakes of each test."""
    monkeypatch.delenv("JAXKIT_CUDA_PLUGIN_PATH", raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path)] + [
        p for p in sys.path if "site-packages" not in p and "dist-packages" not in p])
    return tmp_path


def test_plugin_found_through_wheel_metadata(site):
    lib = make_fake_wheel(site)
    assert _gpu.find_cuda_plugin() == lib
    assert _gpu.plugin_version() == "0.10.2"
    assert "jax_plugins.xla_cuda12" not in sys.modules  # found without importing the package


def test_cuda13_plugin_found_and_preferred_over_cuda12(site):
    make_fake_wheel(site, cuda="12")
    lib = make_fake_wheel(site, cuda="13")
    assert _gpu.find_cuda_plugin() == lib
    assert _gpu._installed_release() is _gpu.CUDA13
    assert _gpu._release_of(lib) is _gpu.CUDA13
    assert "jax_plugins.xla_cuda13" not in sys.modules


def test_plugin_found_in_another_layout_through_the_record(site):
    lib = make_fake_wheel(site, library="jax_plugins/xla_cuda12/lib/xla_cuda_plugin.so")
    assert _gpu.find_cuda_plugin() == lib


def test_plugin_path_override(site, monkeypatch):
    lib = site / "custom.so"
    lib.write_bytes(b"x")
    monkeypatch.setenv("JAXKIT_CUDA_PLUGIN_PATH", str(lib))
    assert _gpu.find_cuda_plugin() == lib
    monkeypatch.setenv("JAXKIT_CUDA_PLUGIN_PATH", str(site / "missing.so"))
    assert _gpu.find_cuda_plugin() is None


def test_no_plugin_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("JAXKIT_CUDA_PLUGIN_PATH", str(tmp_path / "missing.so"))
    with pytest.raises(_gpu.PluginNotFoundError,
                       match=r"pip install 'jaxkit\[cuda13\]'(.|\n)*'jaxkit\[cuda12\]'"):
        _gpu.make_gpu_backend()
    if "gpu" not in _runtime._backends:  # (a machine with a working GPU may have created it)
        for name in ("gpu", "cuda"):
            # JAX's "Unknown backend" first (libraries such as chex match it), then the fix.
            with pytest.raises(RuntimeError, match="^Unknown backend: 'gpu' requested, (.|\n)*"
                                                   "CUDA PJRT plugin is not installed"):
                jaxkit.devices(name)
    assert _gpu.gpu_is_default() is False


def test_version_mismatch(site):
    make_fake_wheel(site, version="0.9.0")
    with pytest.raises(RuntimeError, match="jax-cuda12-pjrt 0.9.0 does not match jaxlib 0.10.2"
                                           r".*jaxkit\[cuda12\]"):
        _gpu.make_gpu_backend()


def test_version_mismatch_cuda13(site):
    make_fake_wheel(site, version="0.9.0", cuda="13")
    with pytest.raises(RuntimeError, match="jax-cuda13-pjrt 0.9.0 does not match jaxlib 0.10.2"
                                           r".*jaxkit\[cuda13\]"):
        _gpu.make_gpu_backend()


def test_plugin_path_override_is_not_held_to_the_installed_wheels_version(site, monkeypatch):
    # The file named by JAXKIT_CUDA_PLUGIN_PATH is the user's choice; the installed wheel's
    # version does not describe it. (The fake library then fails to load, unless a real plugin was loaded before.)
    make_fake_wheel(site, version="0.9.0")
    monkeypatch.setenv("JAXKIT_CUDA_PLUGIN_PATH", str(site / "jax_plugins/xla_cuda12/"
                                                              "xla_cuda_plugin.so"))
    try:
        _gpu.make_gpu_backend()
    except RuntimeError as e:  # on a machine without a GPU plugin loaded already
        assert "does not match" not in str(e)
        assert "could not start a GPU client" in str(e)


def test_nvidia_libraries_are_preloaded_from_their_wheels(site, monkeypatch):
    real = site / "nvidia/cuda_runtime/lib/libcudart.so.12"
    real.parent.mkdir(parents=True)
    shutil.copy(_ctypes.__file__, real)  # any loadable shared library stands in for CUDA's
    bogus = site / "nvidia/cublas/lib/libcublas.so.12"
    bogus.parent.mkdir(parents=True)
    bogus.write_bytes(b"not a library")
    for name in [m for m in sys.modules if m == "nvidia" or m.startswith("nvidia.")]:
        monkeypatch.delitem(sys.modules, name)
    cu13 = site / "nvidia/cu13/lib/libcudart.so.13"
    cu13.parent.mkdir(parents=True)
    shutil.copy(_ctypes.__file__, cu13)
    try:
        assert _gpu.preload_nvidia_libraries() == [str(real)]  # no plugin: CUDA 12's names
        assert _gpu.preload_nvidia_libraries(_gpu.CUDA12) == [str(real)]
        # CUDA 13's wheels share one folder, nvidia/cu13/lib
        assert _gpu.preload_nvidia_libraries(_gpu.CUDA13) == [str(cu13)]
    finally:
        for name in [m for m in sys.modules if m == "nvidia" or m.startswith("nvidia.")]:
            del sys.modules[name]


def test_platforms_setting_keeps_the_cpu(site, monkeypatch):
    make_fake_wheel(site)
    with jaxkit.config.override(jax_platforms="cpu"):  # JAXKIT_PLATFORMS=cpu at start-up
        assert _gpu.gpu_is_default() is False


def test_a_plugin_that_cannot_start_falls_back_to_the_cpu(tmp_path):
    lib = make_fake_wheel(tmp_path / "site")
    script = textwrap.dedent("""
        import jaxkit, jaxkit.runtime.gpu
        print("default:", jaxkit.default_backend(), jaxkit.devices())
        try:
            jaxkit.devices("gpu")
        except RuntimeError as e:
            print("error:", e)
    """)
    env = dict(os.environ, JAXKIT_CUDA_PLUGIN_PATH=str(lib), JAXKIT_NUM_CPU_DEVICES="1")
    env.pop("JAXKIT_PLATFORMS", None)
    env.pop("JAX_PLATFORMS", None)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == "default: cpu [CpuDevice(id=0)]"
    assert out[1].startswith(f"error: The CUDA plugin at {lib} could not start a GPU client")
    assert "falling back to the CPU" in proc.stderr


KERNELS = {  # module of the kernels wheel: kernel names (each kind of name jaxlib registers)
    "_solver": ["cusolver_geev_ffi", "cusolver_getrf"],
    "_sparse": ["cusparse_gtsv2_ffi"],
    "_linalg": ["cu_lu_pivots_to_permutation", "cu_cholesky_update_ffi"],
    "_hybrid": ["cuhybrid_eig_real"],
}


@pytest.fixture
def fake_kernels(site, monkeypatch):
    """A fake CUDA "99" release with its plugin and kernels wheels (Python modules standing in
    for the extensions), so that no real installed wheel is ever imported."""
    release = _gpu.CudaWheels("99", ())
    monkeypatch.setattr(_gpu, "RELEASES", (release,))
    make_fake_wheel(site, cuda="99")
    package = site / release.kernels_package
    package.mkdir()
    # As the 0.11 wheels' __init__, which imports jax: jaxkit loads the modules by file
    (package / "__init__.py").write_text("raise ImportError('the package __init__ ran')\n")
    (package / "cuda_plugin_extension.py").write_text("")
    for module, names in KERNELS.items():
        (package / f"{module}.py").write_text(
            f"def registrations():\n    return {{n: 'capsule ' + n for n in {names!r}}}\n")
    with open(package / "_hybrid.py", "a") as f:
        f.write("initialized = []\n\ndef initialize():\n    initialized.append(True)\n")
    (package / "_versions.py").write_text("def cusolver_get_version():\n    return 11701\n")
    importlib.invalidate_caches()
    for cached in (_gpu.initialize_hybrid_kernels, _gpu.cusolver_version):
        cached.cache_clear()
    yield release
    for cached in (_gpu.initialize_hybrid_kernels, _gpu.cusolver_version):
        cached.cache_clear()
    for name in [m for m in sys.modules if m.startswith(release.kernels_package)]:
        del sys.modules[name]


def test_kernels_are_registered_with_jaxlibs_api_versions(fake_kernels, monkeypatch):
    registered = []
    monkeypatch.setattr(_gpu.multi_device, "register_plugin_custom_calls", lambda *a: None)
    monkeypatch.setattr(_gpu.ffi_registry, "register_target",
                        lambda name, capsule, platform, api: registered.append(
                            (name, capsule, platform, api)))
    _gpu._register_kernels(object(), fake_kernels)
    # typed FFI (api_version 1): every _linalg and _hybrid kernel, the others' "_ffi" names
    assert sorted(registered) == [
        ("cu_cholesky_update_ffi", "capsule cu_cholesky_update_ffi", "CUDA", 1),
        ("cu_lu_pivots_to_permutation", "capsule cu_lu_pivots_to_permutation", "CUDA", 1),
        ("cuhybrid_eig_real", "capsule cuhybrid_eig_real", "CUDA", 1),
        ("cusolver_geev_ffi", "capsule cusolver_geev_ffi", "CUDA", 1),
        ("cusolver_getrf", "capsule cusolver_getrf", "CUDA", 0),
        ("cusparse_gtsv2_ffi", "capsule cusparse_gtsv2_ffi", "CUDA", 1)]


def test_hybrid_kernels_initialized_and_cusolver_version_read_from_the_kernels_wheel(
        fake_kernels):
    assert _gpu.cusolver_version() == 11701
    assert _gpu.initialize_hybrid_kernels() is True
    assert _gpu.initialize_hybrid_kernels() is True  # once only
    assert sys.modules[f"{fake_kernels.kernels_package}._hybrid"].initialized == [True]


def test_without_the_kernels_wheel_there_is_no_cusolver_version(site, monkeypatch):
    monkeypatch.setattr(_gpu, "RELEASES", (_gpu.CudaWheels("99", ()),))
    make_fake_wheel(site, cuda="99")  # the plugin alone
    for cached in (_gpu.initialize_hybrid_kernels, _gpu.cusolver_version):
        cached.cache_clear()
    try:
        assert _gpu.cusolver_version() is None
        assert _gpu.initialize_hybrid_kernels() is False
    finally:
        for cached in (_gpu.initialize_hybrid_kernels, _gpu.cusolver_version):
            cached.cache_clear()
