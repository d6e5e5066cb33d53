"""``jax._src.distributed``: the multi-process runtime's state. Orbax asks
``global_state.client is not None`` (is ``jax.distributed`` initialized?) and reads
``global_state.process_id``. ``global_state`` reads jaxkit's own state
(``jaxkit.distributed``) on each access, with JAX's values for a process that never called
``jax.distributed.initialize``: process 0 of 1, no client, no service."""
from __future__ import annotations

from typing import Any

from jaxkit import distributed as _distributed
from jaxkit.distributed import initialize, shutdown  # noqa: F401


class State:
    """A read-only view of ``jaxkit.distributed``'s state under JAX's attribute names."""

    def _get(self, name: str, default: Any) -> Any:
        state = _distributed._state
        return default if state is None else getattr(state, name)

    @property
    def process_id(self) -> int:
        return self._get("process_id", 0)

    @property
    def num_processes(self) -> int:
        return self._get("num_processes", 1)

    @property
    def client(self) -> Any:
        return self._get("client", None)

    @property
    def service(self) -> Any:
        return self._get("service", None)

    @property
    def preemption_sync_manager(self) -> Any:
        return self._get("preemption_sync_manager", None)

    @property
    def coordinator_address(self) -> str | None:
        return self._get("coordinator_address", None)


global_state = State()


def is_initialized() -> bool:
    """Whether ``jax.distributed.initialize`` has connected this process (as JAX's)."""
    return global_state.client is not None
