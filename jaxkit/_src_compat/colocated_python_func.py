"""``jax.experimental.colocated_python.func``: JAX's machinery behind ``colocated_python``
functions (serializing them for the hosts of their arguments, per-specialization caches).
Orbax imports it to patch a private helper when it is there
(``getattr(func, '_make_prng_wrapped_fun', None)``). jaxkit runs a colocated function in this
process (``jaxkit.experimental.colocated_python``), with no such machinery: its public entry
``make_callable`` is given; the private helpers are absent, as ``getattr`` with a default
expects."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxkit.experimental.colocated_python import colocated_python


def make_callable(fun: Callable, fun_sourceinfo: str | None = None,
                  fun_signature: Any = None) -> Callable:
    """``fun`` as a colocated Python function (what ``colocated_python(fun)`` returns; the
    source info and signature JAX records for error messages are not needed here)."""
    del fun_sourceinfo, fun_signature
    return colocated_python(fun)
