"""lax functions staged as a nested ``jit``, as JAX 0.10.2 stages them.

JAX wraps a few lax-level functions in a plain ``jit`` (``lax.fft``, ``dynamic_index_in_dim``,
``dynamic_update_index_in_dim``, fft's internal ``_rfft_transpose``): traced, each stages one
``jit[name=...]`` equation (a private ``func.func`` in lowered text), and an eager call is one
cached jit call rather than one dispatch per primitive of the body.

``jit`` lives in ``jaxkit.transforms``, above ``lax``, so lax cannot build one itself. A lax
function asks for one with ``@nested_jit(static_argnames=...)``; ``jaxkit.transforms`` (always
imported with ``jaxkit``) provides the jit through ``register_provider``, and every function
declared before or after that runs through it. Until a provider exists, calls run the body
directly (same values, flat jaxprs), which is what importing ``jaxkit.lax`` alone can give.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

__all__ = ["nested_jit", "register_provider"]

# (fun, static_argnums, static_argnames) -> the jit's call function
Provider = Callable[[Callable, tuple, tuple], Callable]

_provider: Provider | None = None
# Every declared function's (body, static argnums, static argnames, slot): the slot holds what
# a call runs, the body until the provider replaces it with the jit.
_declared: list[tuple[Callable, tuple, tuple, list]] = []


def register_provider(provider: Provider) -> None:
    """Install ``provider``, which makes ``jit(fun, static_argnums, static_argnames)``: every
    declared function (and every one declared later) calls through its jit from now on."""
    global _provider
    _provider = provider
    for fun, nums, names, slot in _declared:
        slot[0] = provider(fun, nums, names)


def nested_jit(*, static_argnums: Sequence[int] = (), static_argnames: Sequence[str] = ()
               ) -> Callable[[Callable], Callable]:
    """Decorate a lax function that JAX 0.10.2 wraps in ``jit`` with these static arguments.

    The decorated function keeps the body's name (the ``name=`` of its ``jit`` equation) and
    signature, and has the jit's ``lower``/``trace``/``eval_shape`` as JAX's jitted lax
    functions do (``lax.fft.lower(x, "fft", (4,))``)."""
    nums, names = tuple(static_argnums), tuple(static_argnames)

    def make(fun: Callable) -> Callable:
        slot: list[Callable] = [fun if _provider is None else _provider(fun, nums, names)]

        # One indirection through the slot: the jit cannot exist yet when lax is imported.
        def call(*args, **kwargs):
            return slot[0](*args, **kwargs)

        functools.update_wrapper(call, fun)
        for stage in ("lower", "trace", "eval_shape"):
            setattr(call, stage, _stage(slot, fun, stage))
        _declared.append((fun, nums, names, slot))
        return call

    return make


def _stage(slot: list, fun: Callable, stage: str) -> Callable:
    def run(*args, **kwargs):
        method = getattr(slot[0], stage, None)
        if method is None:
            raise RuntimeError(f"{fun.__name__}.{stage} needs jaxkit.transforms, which provides "
                               "jit: import jaxkit first")
        return method(*args, **kwargs)
    run.__name__ = stage
    return run
