"""``jax.extend``: the interfaces JAX 0.10.2 offers to libraries built on it (Flax, chex, ...).

``core`` (primitives and the jaxpr IR), ``linear_util`` (wrapped functions), ``backend``
(the PjRt clients), ``source_info_util`` (source locations and name stacks), ``mlir`` and
``lowering`` (jaxlib's MLIR bindings and what lowering rules use), ``random`` (PRNG
implementations), ``sharding`` (XLA sharding protos), ``xla`` (HLO module transformations).
Each is jaxkit's own machinery, or the jaxlib module JAX re-exports, under the names
``jax.extend`` gives it; ``pallas`` the Pallas backend hooks. ``ifrt_programs`` is imported on
demand, as in JAX.
"""
from jaxkit.extend import (backend, core, linear_util, lowering, mlir, pallas, random,
                           sharding, source_info_util, xla)

__all__ = ["backend", "core", "linear_util", "lowering", "mlir", "pallas", "random", "sharding",
           "source_info_util", "xla"]
