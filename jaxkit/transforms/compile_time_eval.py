"""Compile-time evaluation: ``jax.ensure_compile_time_eval()`` and the ``eager_constant_folding``
option it sets (as JAX 0.10.2's, an option of the trace context, so jit keys its caches on it).

While the option is on, an operation whose operands are all concrete runs right away even
while tracing, and its result is concrete (usable in Python control flow); an operation on a
tracer is traced as usual. ``CompileTimeEvalTrace`` does this over the current trace, in the
block itself and in every jit or ``make_jaxpr`` trace started while the option is on
(:func:`folding`), as JAX's staging traces fold constants then.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from jaxkit import core
from jaxkit._config import config


class CompileTimeEvalTrace(core.Trace):
    """Evaluates operations on concrete values right away (even under jit); operations that
    involve a tracer go to the enclosing trace."""

    __slots__ = ()

    def process_primitive(self, primitive, args, params):
        if any(isinstance(x, core.Tracer) for x in args):
            with core.set_current_trace(self.parent):
                return primitive.bind(*args, **params)
        return primitive.impl(*args, **params)


def folding(fun: Callable) -> Callable:
    """``fun``, a function about to be traced, folding constants while ``eager_constant_folding``
    is on (its operations on concrete values run at trace time)."""
    if not config.eager_constant_folding:
        return fun

    def folded(*args):
        with core.set_current_trace(CompileTimeEvalTrace()):
            return fun(*args)
    return folded


@contextlib.contextmanager
def ensure_compile_time_eval() -> Iterator[None]:
    """Inside the block, operations on concrete values run eagerly even while tracing (e.g.
    under jit), so their results are concrete and usable in Python control flow; so do those
    of the functions jitted inside the block (traced again for it, as in JAX)."""
    with config.thread_override(eager_constant_folding=True):
        if core.current_trace() is core.eval_trace:  # eager already (custom_jvp calls too)
            yield
            return
        with core.set_current_trace(CompileTimeEvalTrace()):
            yield
