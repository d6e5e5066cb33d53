"""Session-wide test settings.

The persistent compilation cache is on by default and lives in the user's cache directory;
the test session gets a private, empty one instead (removed at the end), so that tests neither
read entries left by earlier runs nor fill the user's cache. Subprocesses started by tests
inherit it through the environment.

Each test process (every pytest-xdist worker too) also gets its own IPython directory: the
magics tests' shells and the notebooks' kernels write IPython's history database there, and
processes sharing one SQLite file lock each other out ("database is locked").

After each test file, the executables jaxkit and the JAX oracle keep in memory are dropped:
a worker runs half the suite, and every loaded XLA executable maps memory regions of its own;
both libraries' caches together, bounded as they are, could otherwise approach the kernel's
limit on a process's memory maps (vm.max_map_count), where XLA's CPU client crashes.
"""
import atexit
import contextlib
import os
import shutil
import sys
import tempfile

import pytest

_CACHE_DIR = tempfile.mkdtemp(prefix="jaxkit-test-xla-cache-")
os.environ["JAXKIT_COMPILATION_CACHE_DIR"] = _CACHE_DIR
# Test processes keep at most 256 MB of freed heap for reuse (jaxkit's default is up to
# 1 GiB, runtime/allocator.py): tests measure no speed, and one worker per core each keeping
# its default would add up on a small CI machine.
os.environ.setdefault("JAXKIT_MALLOC_KEEP_BYTES", str(256 << 20))
_IPYTHON_DIR = tempfile.mkdtemp(prefix="jaxkit-test-ipython-")
os.environ["IPYTHONDIR"] = _IPYTHON_DIR
# Removed at exit, after the shells' own exit handlers (registered later, so run earlier)
# have closed their history database.
atexit.register(shutil.rmtree, _IPYTHON_DIR, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)


@pytest.fixture(autouse=True, scope="module")
def _drop_executables_after_each_file():
    yield
    for name in ("jaxkit", "jax"):  # only those the file imported
        module = sys.modules.get(name)
        if module is not None:
            module.clear_caches()


@contextlib.contextmanager
def _float64_on():
    """float64 on in jaxkit and in the JAX oracle (when installed); both restored after."""
    import jaxkit  # noqa: PLC0415  (imported when a test asks: some tests check a bare process)

    try:
        import jax  # noqa: PLC0415
    except ImportError:
        jax = None
    old = jax.config.jax_enable_x64 if jax is not None else None
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
    try:
        with jaxkit.config.override(jax_enable_x64=True):
            yield
    finally:
        if jax is not None:
            jax.config.update("jax_enable_x64", old)


@pytest.fixture
def x64():
    """float64 on for the test, in jaxkit and in the JAX oracle."""
    with _float64_on():
        yield


@pytest.fixture(scope="module")
def x64_module():
    """float64 on for a whole module (``pytestmark = pytest.mark.usefixtures("x64_module")``)."""
    with _float64_on():
        yield
