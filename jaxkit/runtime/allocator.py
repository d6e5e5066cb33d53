"""Make freed large device buffers (CPU) reusable instead of returning them to the OS.

XLA's CPU client allocates each output buffer with ``malloc``. glibc serves large blocks
(above a dynamic threshold of at most 32 MiB, and anything over 64 MiB requested from a thread
other than the main one, since thread arenas are 64 MiB heaps) with a fresh ``mmap`` and hands
them back with ``munmap`` on free. A program with a 40 MB output therefore pays ~10,000 page
faults per call, each zero-filling a page: ``jit(selu)`` on 1e7 float32 ran at ~10% of memory
bandwidth, and ``a + b`` on 5e7 float32 at ~15% of what NumPy reaches.

``configure()``, run once when the runtime is imported, tells glibc (``mallopt``):

* ``M_ARENA_MAX = 1``: one arena for all threads, so that XLA's worker threads allocate from the
  growable main heap, not from 64 MiB thread heaps that must ``mmap`` anything larger;
* ``M_MMAP_THRESHOLD = keep / 2``: blocks up to that size come from the heap and are reused;
* ``M_TRIM_THRESHOLD = keep``: free memory at the top of the heap is given back to the OS only
  beyond ``keep`` bytes. This is the bound on what the process retains: at most its own peak
  usage, and never more than ``keep`` of free memory at the top of the heap.

``keep`` defaults to 1 GiB or an eighth of the physical memory, whichever is smaller; set it
with ``JAXKIT_MALLOC_KEEP_BYTES``. ``JAXKIT_MALLOC_TUNING=0`` leaves malloc alone. Nothing is
done on a C library other than glibc (the settings are glibc's).
"""
from __future__ import annotations

import ctypes
import gc
import os
import warnings
from typing import Any

# glibc's mallopt parameter numbers (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8

_DEFAULT_KEEP_MAX = 1 << 30
_FALSE_STRINGS = frozenset({"0", "false", "no", "off", "n", "f"})

# What configure() did, for tests and benchmarks: {"enabled": False, "reason": ...} or the
# values set.
settings: dict[str, Any] = {"enabled": False, "reason": "not configured yet"}


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _keep_bytes(environ) -> int:
    phys = _physical_memory()
    default = min(_DEFAULT_KEEP_MAX, phys // 8) if phys else _DEFAULT_KEEP_MAX
    raw = environ.get("JAXKIT_MALLOC_KEEP_BYTES")
    if raw is None:
        return default
    try:
        value = int(float(raw))
    except ValueError:
        value = 0
    if value <= 0:
        # A typo in the environment must not make `import jaxkit` fail.
        warnings.warn(f"JAXKIT_MALLOC_KEEP_BYTES must be a positive number of bytes, got "
                      f"{raw!r}; using {default}. To leave malloc as it is, set "
                      "JAXKIT_MALLOC_TUNING=0.", RuntimeWarning, stacklevel=3)
        return default
    return value


def configure(environ=None) -> dict[str, Any]:
    """Tune glibc malloc as described in the module docstring (once per process)."""
    env = os.environ if environ is None else environ
    if settings.get("enabled"):
        return settings
    if env.get("JAXKIT_MALLOC_TUNING", "1").strip().lower() in _FALSE_STRINGS:
        settings.update(enabled=False, reason="JAXKIT_MALLOC_TUNING=0")
        return settings
    try:
        os.confstr("CS_GNU_LIBC_VERSION")
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (ValueError, OSError, AttributeError):
        settings.update(enabled=False, reason="not glibc")
        return settings
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    keep = min(_keep_bytes(env), (1 << 31) - 1)  # mallopt takes an int
    mmap_threshold = keep // 2
    ok = (mallopt(_M_ARENA_MAX, 1) == 1
          and mallopt(_M_MMAP_THRESHOLD, mmap_threshold) == 1
          and mallopt(_M_TRIM_THRESHOLD, keep) == 1)
    settings.clear()
    settings.update(enabled=ok, reason=None if ok else "mallopt refused a setting",
                    arena_max=1, mmap_threshold=mmap_threshold, trim_threshold=keep)
    if ok:
        _install_trim(libc, keep)
    return settings


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _install_trim(libc, keep: int) -> None:
    """Bound the free memory kept inside the heap, not only at its top: freed blocks split by
    later small allocations stay in the middle of the heap, where M_TRIM_THRESHOLD does not
    reach. After each full garbage collection, if more than ``keep`` bytes of the heap are
    free, ``malloc_trim`` hands the free pages back to the OS."""
    try:
        mallinfo2, malloc_trim = libc.mallinfo2, libc.malloc_trim
    except AttributeError:  # glibc < 2.33
        return
    mallinfo2.restype = _Mallinfo2
    malloc_trim.argtypes = [ctypes.c_size_t]

    def trim_after_full_collection(phase: str, info: dict) -> None:
        if phase == "stop" and info.get("generation") == 2 and mallinfo2().fordblks > keep:
            malloc_trim(0)
            settings["trims"] = settings.get("trims", 0) + 1

    gc.callbacks.append(trim_after_full_collection)
