"""``jax.experimental.profiler``: the profiled-instructions proto of a captured trace, the
input of XLA's profile-guided latency-hiding scheduler."""
from __future__ import annotations

from jaxkit.runtime.profiling import get_profiled_instructions_proto

__all__ = ["get_profiled_instructions_proto"]
