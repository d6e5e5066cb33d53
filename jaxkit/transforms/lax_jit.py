"""The ``jit`` behind ``jaxkit.lax.nested_jit``: the lax functions JAX 0.10.2 wraps in a plain
``jit`` (``lax.fft``, ``dynamic_index_in_dim``...) get a real one here, once ``transforms``,
where ``jit`` lives, is imported."""
from __future__ import annotations

from collections.abc import Callable

from jaxkit.lax import nested_jit
from jaxkit.transforms.jit import JitFunction


def _make_jit(fun: Callable, static_argnums: tuple, static_argnames: tuple) -> Callable:
    # No static_argnums means None, so that jit infers the numbers of static_argnames from the
    # signature (as JAX's jit does when given only names).
    return JitFunction(fun, static_argnums or None, static_argnames or None).as_function()


nested_jit.register_provider(_make_jit)
