"""Asynchronous checkpointing of arrays with TensorStore: ``GlobalAsyncCheckpointManager``
writes a pytree of arrays to their specs, returning once the data is copied off the
devices; a background thread waits for the commits and then runs ``on_commit_callback``.
``wait_until_finished`` joins it and re-raises what it raised.

JAX coordinates several processes here (a barrier in its distributed key-value store
before the callback); jaxkit's managers run in one process and refuse to start in a
multi-process job, where the coordination would be missing.
"""
from __future__ import annotations

import abc
import asyncio
import functools
import itertools
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from jaxkit import monitoring, tree_util
from jaxkit.api import process_count, process_index
from jaxkit.experimental.array_serialization import tensorstore_impl as ts_impl
from jaxkit.experimental.array_serialization.tensorstore_impl import (  # noqa: F401
    _run_deserialization as run_deserialization, _run_serialization as run_serialization,
    _TS_CONTEXT as TS_CONTEXT, Format, async_deserialize, async_serialize)

# This module's specs are the older layout: a zarr array per path, no OCDBT database.
get_tensorstore_spec = functools.partial(ts_impl.get_tensorstore_spec, driver="zarr",
                                         ocdbt=False)

__all__ = ["AsyncManager", "BarrierTimeoutError", "Format", "GlobalAsyncCheckpointManager",
           "GlobalAsyncCheckpointManagerBase", "TS_CONTEXT", "async_deserialize",
           "async_serialize", "get_tensorstore_spec", "is_remote_storage",
           "run_deserialization", "run_serialization"]

logger = logging.getLogger(__name__)

_REMOTE_URL_PREFIXES = ("gs://", "s3://")
_REMOTE_DRIVERS = ("gcs", "s3")
_counter = itertools.count()


class BarrierTimeoutError(Exception):
    """The processes of a checkpoint did not all reach its barrier in time."""


def is_remote_storage(tspec: dict[str, Any] | str) -> bool:
    """Whether a spec (or kvstore URL) writes to cloud storage (GCS or S3); a mounted
    bucket (gcsfuse) looks local."""
    if isinstance(tspec, str):
        return tspec.startswith(_REMOTE_URL_PREFIXES)
    for key in ("base", "kvstore"):
        if key in tspec:
            return is_remote_storage(tspec[key])
    return tspec.get("driver") in _REMOTE_DRIVERS


class GlobalAsyncCheckpointManagerBase(abc.ABC):
    """The interface: serialize in the background, check for and wait on its errors,
    deserialize.

        manager = GlobalAsyncCheckpointManager()
        manager.serialize(arrays, specs, on_commit_callback=rename_to_final)
        ...                                   # training goes on
        manager.check_for_errors()            # non-blocking
        manager.wait_until_finished()         # before exiting
    """

    @abc.abstractmethod
    def check_for_errors(self):
        """Raise what the background commit raised, if anything (non-blocking)."""

    @abc.abstractmethod
    def wait_until_finished(self):
        """Block until the background commit has finished."""

    @abc.abstractmethod
    def serialize(self, arrays, tensorstore_specs, *, on_commit_callback: Callable[[], None]):
        """Write ``arrays`` to ``tensorstore_specs`` asynchronously."""

    @abc.abstractmethod
    def deserialize(self, shardings: Sequence[Any], tensorstore_specs: Sequence[dict],
                    global_shapes: Sequence[Sequence[int]] | None = None,
                    dtypes: Sequence[Any] | None = None):
        """Read arrays back from ``tensorstore_specs`` with ``shardings``."""


class AsyncManager:
    """Runs the commit of a serialization on a thread and reports its errors."""

    def __init__(self, timeout_secs: int = 300):
        if process_count() > 1:
            raise NotImplementedError(
                "checkpointing from several processes needs JAX's distributed barrier "
                "between them, which jaxkit's manager does not implement; write from one "
                "process, or a separate path per process with get_tensorstore_spec("
                "process_idx=...)")
        self._timeout_secs = timeout_secs
        self._timeout_in_ms = timeout_secs * 1000
        self._commit_futures: Sequence[Any] | None = None
        self._thread: threading.Thread | None = None
        self._exception: BaseException | None = None
        self._on_commit_callback: Callable[[], None] | None = None
        self._count: int | None = None

    def __del__(self):
        if self._thread is not None and self._thread.is_alive():
            logger.warning("Please add `.wait_until_finished()` in the main thread before "
                           "your program finishes because there is a possibility of losing "
                           "errors raised if the this class is deleted before writing is "
                           "completed.")

    def _thread_func(self) -> None:
        try:
            start = time.time()
            for future in self._commit_futures or ():
                future.result()
            logger.info("Finished committing to storage layer by process: %s",
                        process_index())
            if self._on_commit_callback is not None:
                self._on_commit_callback()
            monitoring.record_event_duration_secs(
                "/jax/checkpoint/write/async/thread_duration_sec", time.time() - start)
        except Exception as e:  # noqa: BLE001  (handed to the main thread)
            self._exception = e

    def _start_async_commit(self, on_commit_callback: Callable[[], None] | None) -> None:
        self._count = next(_counter)
        self._on_commit_callback = on_commit_callback
        self._thread = threading.Thread(target=self._thread_func)
        self._thread.start()

    def check_for_errors(self) -> None:
        """Raise (once) what the commit thread raised."""
        if self._exception is not None:
            exception, self._exception = self._exception, None
            if re.search("DEADLINE_EXCEEDED: Barrier timed out", str(exception)):
                raise BarrierTimeoutError(str(exception))
            raise exception

    def wait_until_finished(self) -> None:
        """Join the commit thread, then raise what it raised."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.check_for_errors()

    def _add_futures(self, futures: Sequence[Any]) -> None:
        self._commit_futures = futures


class GlobalAsyncCheckpointManager(AsyncManager, GlobalAsyncCheckpointManagerBase):
    """Serializes arrays with TensorStore, committing in the background."""

    def serialize(self, arrays, tensorstore_specs, *,
                  on_commit_callback: Callable[[], None] | None = None,
                  transaction: ts_impl.Transaction | None = None) -> None:
        """Write the pytree ``arrays`` to the matching pytree of specs: returns once the
        data is copied off the devices (after the previous serialization finished); the
        commit, then ``on_commit_callback``, run on a thread."""
        self.wait_until_finished()
        futures: list = []
        leaves = tree_util.tree_leaves(arrays)
        specs = tree_util.tree_leaves(tensorstore_specs,
                                      is_leaf=ts_impl.is_tensorstore_spec_leaf)
        if len(leaves) != len(specs):
            raise ValueError(f"serialize got {len(leaves)} arrays but {len(specs)} "
                             "tensorstore specs; pass one spec per array")

        async def run():
            return await asyncio.gather(*(
                ts_impl.async_serialize(a, s, commit_future=futures, transaction=transaction)
                for a, s in zip(leaves, specs)))
        asyncio.run(run())
        self._add_futures(futures)
        self._start_async_commit(on_commit_callback)

    def serialize_with_paths(self, arrays: Sequence[Any], paths: Sequence[str], *,
                             on_commit_callback: Callable[[], None] | None = None,
                             transaction: ts_impl.Transaction | None = None) -> None:
        """``serialize`` to the default spec of each path (a zarr array there)."""
        specs = tree_util.tree_map(get_tensorstore_spec, paths)
        return self.serialize(arrays, specs, on_commit_callback=on_commit_callback,
                              transaction=transaction)

    def deserialize(self, shardings: Sequence[Any], tensorstore_specs: Sequence[dict],
                    global_shapes: Sequence[Sequence[int]] | None = None,
                    dtypes: Sequence[Any] | None = None, concurrent_gb: int = 32) -> list:
        """The arrays stored at ``tensorstore_specs``, laid out as ``shardings``, at most
        ``concurrent_gb`` GB read at once (after any serialization finished)."""
        self.wait_until_finished()
        return run_deserialization(shardings, tensorstore_specs, global_shapes, dtypes,
                                   concurrent_gb)

    def deserialize_with_paths(self, shardings: Sequence[Any], paths: Sequence[str],
                               global_shapes: Sequence[Sequence[int]] | None = None,
                               dtypes: Sequence[Any] | None = None,
                               concurrent_gb: int = 32) -> list:
        """``deserialize`` from the default spec of each path."""
        specs = tree_util.tree_map(get_tensorstore_spec, paths)
        return self.deserialize(shardings, specs, global_shapes, dtypes, concurrent_gb)
