"""``jax.extend.ifrt_programs``: jaxlib's IFRT program constructors (``make_hlo_program``,
``make_plugin_program``, ...) and compile options, re-exported as JAX does."""
from __future__ import annotations

from jaxkit.interpreters.mlir import jaxlib_module

__all__ = ["ifrt_programs"]

ifrt_programs = jaxlib_module("jaxlib._jax.ifrt_programs")
