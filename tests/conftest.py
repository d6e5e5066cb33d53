"""Session-wide test settings.

The persistent compilation cache is on by default and lives in the user's cache directory;
the test session gets a private, empty one instead (removed at the end), so that tests neither
read entries left by earlier runs nor fill the user's cache. Subprocesses started by tests
inherit it through the environment.
"""
import os
import shutil
import tempfile

_CACHE_DIR = tempfile.mkdtemp(prefix="jaxkit-test-xla-cache-")
os.environ["JAXKIT_COMPILATION_CACHE_DIR"] = _CACHE_DIR


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)
