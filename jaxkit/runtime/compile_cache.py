"""Compiled executables reused instead of compiled again: in this process and across processes.

``compile_and_load(client, module, device_list, devices, options)`` is what the runtime calls
in place of jaxlib's ``client.compile_and_load``. It derives one key from everything that
decides the machine code (the serialized StableHLO module, the serialized ``CompileOptions``,
the devices, the platform and its version, jaxlib's and jaxkit's versions, ``XLA_FLAGS`` and the
host CPU) and looks it up

1. in a bounded in-process LRU of loaded executables, so that a new function object with a
   byte-identical program (``jit(lambda ...)`` created in a loop) reuses the executable, then
2. in the persistent cache directory, where each entry is one file holding the executable
   serialized by jaxlib (``LoadedExecutable.serialize``), loaded back with
   ``client.deserialize_executable`` at a few percent of the compile's cost.

Only on a miss in both does XLA compile; the result is kept in memory and written to disk.

The persistent cache is on by default, in ``$XDG_CACHE_HOME/jaxkit/xla`` (``~/.cache/...``).
JAX's settings apply: ``jax_compilation_cache_dir`` (also ``JAXKIT_COMPILATION_CACHE_DIR`` /
``JAX_COMPILATION_CACHE_DIR``), ``jax_enable_compilation_cache`` (``JAXKIT_COMPILATION_CACHE=0``
turns the cache off), ``jax_persistent_cache_min_compile_time_secs``,
``jax_persistent_cache_min_entry_size_bytes``, ``jax_compilation_cache_max_size`` (bytes; -1
for no bound) and ``jax_raise_persistent_cache_errors``.

Safety rules, since a wrong executable would be a silent wrong answer:

* An entry file is ``MAGIC | key | payload length | sha256(payload) | payload``. A file whose
  header, key, length or checksum does not match (truncated, garbled, foreign) is deleted and
  the program compiled again; so is one that jaxlib fails to deserialize.
* Writes go to a private temporary file in the cache directory and are published with
  ``os.replace``, which is atomic: several processes writing the same key leave one complete
  entry, and a reader sees either a complete file or none.
* The directory is bounded: after writes push its size over the limit, the least recently used
  entries (by mtime, refreshed on every hit, since atime is unreliable) are deleted. Deleting a
  file another process is reading is harmless on POSIX.
* Cache errors (a read-only directory, a full disk) never fail a compile: they are logged once
  and the cache is skipped.
* Programs that call back into Python hold per-process callables and are never cached.

A cache directory is trusted, as JAX's is: whoever can write to it can make this process run
their code. It is created private to the user (mode 0700).
"""
from __future__ import annotations

import collections
import hashlib
import importlib.metadata
import io
import logging
import os
import platform
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from jaxlib import version as _jaxlib_version

from jaxkit._config import config
from jaxkit.runtime import compile_config

logger = logging.getLogger("jaxkit.compilation_cache")

# Where an executable came from; stored as ``Executable.cache_source``.
COMPILED = "compiled"
MEMORY = "memory"
PERSISTENT = "persistent"

_MAGIC = b"JAXKIT-XLA-EXE\x01\n"
_HEADER = struct.Struct(f"<{len(_MAGIC)}s32sQ32s")  # magic, key, payload length, sha256
_SUFFIX = ".xlaexe"
_TMP_PREFIX = ".tmp-"
_STALE_TMP_SECONDS = 3600.0
_EVICT_TO_FRACTION = 0.9  # evict down to this fraction of the bound, so writes do not rescan
_RESCAN_EVERY_WRITES = 64  # other processes' writes are seen at least this often

# Counters for tests, benchmarks and the magics.
stats = collections.Counter()


# --------------------------------------------------------------------------------------------
# The key
# --------------------------------------------------------------------------------------------


def _module_bytes(module: Any) -> bytes:
    """The serialized module: MLIR bytecode of an ``ir.Module``, or the text/bytes given."""
    if isinstance(module, bytes):
        return module
    if isinstance(module, str):
        return module.encode()
    buf = io.BytesIO()
    module.operation.write_bytecode(file=buf)
    return buf.getvalue()


def persistent_module_bytes(module: Any) -> bytes:
    """What the persistent key hashes of a module: its text without source locations, or with
    them under ``jax_compilation_cache_include_metadata_in_key`` (as JAX's option)."""
    if config.jax_compilation_cache_include_metadata_in_key:
        return _module_bytes(module)
    return _module_bytes_without_locations(module)


def _module_bytes_without_locations(module: Any) -> bytes:
    """The module as text without source locations: the persistent key, so that a program
    whose source moved (a line added above it, a notebook cell's file named after the
    kernel's process) is still found in another process. The executable found may then carry
    the old lines in its HLO metadata; ``%%jit -a`` compiles with the persistent cache off."""
    if isinstance(module, (bytes, str)):
        return _module_bytes(module)
    return module.operation.get_asm(binary=False, enable_debug_info=False).encode()


_host_fingerprint: list[bytes] = []


def _host() -> bytes:
    """The host CPU's identity: XLA's CPU code is generated for the features of this CPU, so an
    entry from another machine sharing the directory (an NFS home) must not be used here."""
    if not _host_fingerprint:
        parts = [platform.machine(), platform.system()]
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                for line in f:
                    if line.startswith(("flags", "model name", "Features", "CPU part")):
                        parts.append(line.strip())
                    elif not line.strip() and len(parts) > 2:
                        break  # the first processor's block is enough
        except OSError:
            parts.append(platform.processor())
        _host_fingerprint.append(hashlib.sha256("\n".join(parts).encode()).digest())
    return _host_fingerprint[0]


def _jaxkit_version() -> str:
    try:
        return importlib.metadata.version("jaxkit")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


_VERSIONS = (f"jaxkit-compile-cache-1|jaxlib {_jaxlib_version.__version__}"
             f"|jaxkit {_jaxkit_version()}")


def cache_key(module_bytes: bytes, client: Any, devices: Sequence, options: Any) -> bytes:
    """The 32-byte key of a compile: everything that decides the executable."""
    h = hashlib.sha256()
    h.update(_VERSIONS.encode())
    h.update(_host())
    h.update(f"|{client.platform}|{client.platform_version}|{client.runtime_type}|".encode())
    for d in devices:
        h.update(f"{d.platform}:{d.device_kind}:{d.id}:{d.process_index};".encode())
    h.update(f"|XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}|".encode())
    opts = options.SerializeAsString()
    h.update(struct.pack("<Q", len(opts)))
    h.update(opts)
    h.update(module_bytes)
    return h.digest()


# --------------------------------------------------------------------------------------------
# In-process LRU of loaded executables
# --------------------------------------------------------------------------------------------

# A loaded executable belongs to the client that loaded it: it runs on that client's devices
# and thread pools. ``cache_key`` names devices by id, which every CPU client numbers from 0
# (``multi_device.add_cpu_backend`` makes several), so the in-process key adds the client's
# identity: an executable of one client executed with another client's buffers crashes the
# process inside XLA. ``id(client)`` cannot be reused while an entry lives, since the cached
# executable keeps its client alive (``exe.client``). The disk cache needs no such part: its
# entries are loaded by the asking client.
_MEMORY_CAPACITY = int(os.environ.get("JAXKIT_EXECUTABLE_CACHE_SIZE", "512"))
_memory: collections.OrderedDict[tuple[bytes, int], Any] = collections.OrderedDict()
_memory_lock = threading.Lock()


def _memory_get(key: bytes, client: Any) -> Any:
    with _memory_lock:
        exe = _memory.get((key, id(client)))
        if exe is not None:
            _memory.move_to_end((key, id(client)))
        return exe


def _memory_put(key: bytes, client: Any, exe: Any) -> None:
    if _MEMORY_CAPACITY <= 0:
        return
    with _memory_lock:
        _memory[key, id(client)] = exe
        _memory.move_to_end((key, id(client)))
        while len(_memory) > _MEMORY_CAPACITY:
            _memory.popitem(last=False)


def clear_memory_cache() -> None:
    """Drop the in-process executables (``jax.clear_caches`` should call this)."""
    with _memory_lock:
        _memory.clear()


def memory_cache_size() -> int:
    return len(_memory)


# --------------------------------------------------------------------------------------------
# The persistent cache directory
# --------------------------------------------------------------------------------------------


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxkit", "xla")


def cache_dir() -> str | None:
    """The persistent cache directory in use, or None when the persistent cache is off."""
    if not config.jax_enable_compilation_cache:
        return None
    path = config.jax_compilation_cache_dir
    return os.path.abspath(os.path.expanduser(os.fspath(path))) if path else default_cache_dir()


class _DirState:
    """What this process knows about one cache directory."""

    def __init__(self):
        self.ready = False
        self.estimated_bytes: int | None = None  # None: scan before trusting it
        self.writes_since_scan = 0


_dirs: dict[str, _DirState] = {}
_dirs_lock = threading.Lock()
_warned: set[str] = set()


def reset_cache() -> None:
    """Back to the state of a fresh process for the persistent cache (JAX's ``reset_cache``):
    directories are checked again and size estimates forgotten."""
    with _dirs_lock:
        _dirs.clear()
        _warned.clear()


def _cache_error(what: str, path: str, err: Exception) -> None:
    if config.jax_raise_persistent_cache_errors:
        raise err
    stats["errors"] += 1
    if what not in _warned:
        _warned.add(what)
        logger.warning("jaxkit persistent compilation cache: %s failed for %s (%s: %s); "
                       "continuing without it", what, path, type(err).__name__, err)


def _state(directory: str) -> _DirState | None:
    with _dirs_lock:
        state = _dirs.get(directory)
        if state is None:
            state = _dirs[directory] = _DirState()
    if not state.ready:
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        except OSError as err:
            _cache_error("creating the directory", directory, err)
            return None
        state.ready = True
    return state


def _entry_path(directory: str, key: bytes) -> str:
    return os.path.join(directory, key.hex() + _SUFFIX)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def read_entry(directory: str, key: bytes) -> bytes | None:
    """The payload stored under ``key``, or None when absent or invalid (then deleted)."""
    path = _entry_path(directory, key)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as err:
        _cache_error("reading an entry", path, err)
        return None
    if len(data) >= _HEADER.size:
        magic, stored_key, length, digest = _HEADER.unpack_from(data)
        payload = data[_HEADER.size:]
        if (magic == _MAGIC and stored_key == key and length == len(payload)
                and hashlib.sha256(payload).digest() == digest):
            try:
                os.utime(path)  # recency for the LRU eviction
            except OSError:
                pass
            return payload
    stats["corrupt"] += 1
    logger.warning("jaxkit persistent compilation cache: dropping the invalid entry %s", path)
    _unlink_quietly(path)
    return None


def write_entry(directory: str, key: bytes, payload: bytes) -> None:
    """Store ``payload`` under ``key`` atomically, then keep the directory within its bound."""
    state = _state(directory)
    if state is None:
        return
    max_size = config.jax_compilation_cache_max_size
    max_size = -1 if max_size is None else max_size  # None (JAX's type allows it): unbounded
    total = _HEADER.size + len(payload)
    if 0 <= max_size < total:
        return  # could never fit: JAX does not store these either
    header = _HEADER.pack(_MAGIC, key, len(payload), hashlib.sha256(payload).digest())
    path = _entry_path(directory, key)
    try:
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=directory)
    except FileNotFoundError:  # the directory was removed while we ran: make it again
        state.ready = False
        state.estimated_bytes = None
        if _state(directory) is None:
            return
        try:
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=directory)
        except OSError as err:
            _cache_error("writing an entry", directory, err)
            return
    except OSError as err:
        _cache_error("writing an entry", directory, err)
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(header)
            f.write(payload)
        os.replace(tmp, path)
    except OSError as err:
        _unlink_quietly(tmp)
        _cache_error("writing an entry", path, err)
        return
    stats["writes"] += 1
    if max_size >= 0:
        state.writes_since_scan += 1
        if state.estimated_bytes is not None:
            state.estimated_bytes += total
        if (state.estimated_bytes is None or state.estimated_bytes > max_size
                or state.writes_since_scan >= _RESCAN_EVERY_WRITES):
            state.estimated_bytes = evict(directory, max_size)
            state.writes_since_scan = 0


def evict(directory: str, max_size: int) -> int:
    """Delete least recently used entries until the directory holds at most ``max_size``
    bytes of entries (down to 90% when it must delete). Also removes temporary files left by
    writers that died. Returns the bytes left."""
    entries = []
    now = time.time()
    try:
        with os.scandir(directory) as it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if e.name.endswith(_SUFFIX):
                    entries.append((st.st_mtime, st.st_size, e.path))
                elif e.name.startswith(_TMP_PREFIX) and now - st.st_mtime > _STALE_TMP_SECONDS:
                    _unlink_quietly(e.path)
    except OSError as err:
        _cache_error("scanning the directory", directory, err)
        return 0
    total = sum(size for _, size, _ in entries)
    if total <= max_size:
        return total
    target = int(max_size * _EVICT_TO_FRACTION)
    for _, size, path in sorted(entries):
        if total <= target:
            break
        _unlink_quietly(path)
        total -= size
        stats["evictions"] += 1
    return total


# --------------------------------------------------------------------------------------------
# The lookup
# --------------------------------------------------------------------------------------------


def compile_and_load(client: Any, module: Any, device_list: Any, devices: Sequence, options: Any,
            compile_fn: Callable[[], Any] | None = None) -> tuple[Any, str]:
    """``client.compile_and_load(module, device_list, options)`` through the caches.

    Returns ``(loaded_executable, source)`` with ``source`` one of ``COMPILED``, ``MEMORY``,
    ``PERSISTENT``. ``compile_fn`` (default: that ``compile_and_load`` call) runs on a miss."""
    # The config's build options belong to the key; JAX dumps every module it compiles.
    compile_config.apply_config_to_compile_options(options)
    compile_config.dump_module(module)
    # In this process an executable is reused only for the same source lines (its HLO
    # metadata names them); across processes, for the same program wherever it was written.
    key = cache_key(_module_bytes(module), client, devices, options)
    exe = _memory_get(key, client)
    if exe is not None:
        stats["memory_hits"] += 1
        return exe, MEMORY
    directory = cache_dir()
    disk_key = None
    if directory is not None:
        disk_key = cache_key(persistent_module_bytes(module), client, devices, options)
        payload = read_entry(directory, disk_key)
        if payload is not None:
            try:
                exe = client.deserialize_executable(payload, device_list, options)
            except Exception as err:  # noqa: BLE001  (any failure: compile instead)
                stats["corrupt"] += 1
                logger.warning("jaxkit persistent compilation cache: could not load an entry "
                               "(%s: %s); compiling instead", type(err).__name__, err)
                _unlink_quietly(_entry_path(directory, disk_key))
            else:
                stats["persistent_hits"] += 1
                _memory_put(key, client, exe)
                return exe, PERSISTENT
        stats["persistent_misses"] += 1
    start = time.perf_counter()
    if compile_fn is None:
        exe = client.compile_and_load(module, device_list, options)
    else:
        exe = compile_fn()
    seconds = time.perf_counter() - start
    stats["compiles"] += 1
    _memory_put(key, client, exe)
    min_seconds = config.jax_persistent_cache_min_compile_time_secs or 0.0  # None: 0
    if directory is not None and seconds >= min_seconds:
        try:
            payload = exe.serialize()
        except Exception as err:  # noqa: BLE001  (a backend without serialization)
            _cache_error("serializing an executable", directory, err)
        else:
            if len(payload) >= (config.jax_persistent_cache_min_entry_size_bytes or 0):
                write_entry(directory, disk_key, payload)
    return exe, COMPILED
