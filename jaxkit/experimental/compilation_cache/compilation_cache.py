"""``jax.experimental.compilation_cache.compilation_cache``: the persistent cache's user API.

jaxkit's persistent compilation cache (``jaxkit/runtime/compile_cache.py``) is on by default
in ``$XDG_CACHE_HOME/jaxkit/xla``; these functions behave as JAX 0.10.2's do.
"""
from __future__ import annotations

import os

from jaxkit._config import config
from jaxkit.runtime import compile_cache as _compile_cache

__all__ = ["reset_cache", "set_cache_dir"]


def set_cache_dir(path: str | os.PathLike) -> None:
    """Sets the persistent compilation cache directory.

    After calling this, jit-compiled functions are saved to ``path``, so they do not need to be
    recompiled when the process is restarted, and compiled functions are looked up there
    before compiling. The directory is trusted: whoever can write to it can make this process
    run code of their choosing, so do not share it with users you do not trust.
    """
    config.update("jax_compilation_cache_dir", path)


def reset_cache() -> None:
    """Get back to the pristine, uninitialized state of the persistent cache: directories are
    checked again on the next compile and this process's knowledge of them is dropped."""
    _compile_cache.reset_cache()
