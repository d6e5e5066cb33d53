"""Snippets run against a library bound to ``jax``: what they print, for the tests that
compare jaxkit's printing with JAX's (``RECORDS`` of code, one run per library)."""
import contextlib
import io
import textwrap

import numpy as np


def printed(snippet: str, library) -> str:
    """What ``snippet`` prints with ``jax``, ``jnp``, ``lax`` and ``np`` bound (``library``
    as ``jax``; its ``from jax.x import y`` lines import the library's own modules)."""
    out = io.StringIO()
    env = {"jax": library, "jnp": library.numpy, "lax": library.lax, "np": np}
    if library.__name__ != "jax":
        snippet = snippet.replace("from jax.", f"from {library.__name__}.")
    with contextlib.redirect_stdout(out):
        exec(compile(textwrap.dedent(snippet), "<snippet>", "exec"), env)  # noqa: S102
    return out.getvalue()
