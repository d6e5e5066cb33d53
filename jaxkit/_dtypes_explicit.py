"""What an explicitly requested 64-bit dtype does while ``jax_enable_x64`` is off, by
``jax_explicit_x64_dtypes`` (JAX's ``_maybe_canonicalize_explicit_dtype``): 'warn' (the
default) truncates it to its 32-bit counterpart with JAX's ``UserWarning``, 'error' raises
JAX's ``ValueError``.

The requests are the user's: a public function's ``dtype=`` (``jnp.zeros(2, 'float64')``,
through ``dtypes.check_and_canonicalize_user_dtype``) and the dtype specifiers given to
``result_type`` (``jnp.result_type('float64')``, which JAX names "dtype"). jaxkit's own 64-bit
requests go through ``canonicalize_dtype``, which never warns.

This module imports only the configuration: ``jaxkit.dtypes`` builds on it.
"""
from __future__ import annotations

import warnings

import numpy as np

from jaxkit._config import config
from jaxkit._config_options import ExplicitX64Mode
from jaxkit.source_info import user_stacklevel


def truncate_request(requested: np.dtype, canonical: np.dtype, fun_name: str | None) -> np.dtype:
    """``canonical``, the 32-bit dtype that ``requested`` (a 64-bit one, x64 being off) is
    truncated to, after JAX's warning naming ``fun_name``; or JAX's error in 'error' mode."""
    where = f" requested in {fun_name}" if fun_name else ""
    if config.jax_explicit_x64_dtypes == ExplicitX64Mode.ERROR:
        raise ValueError(f"Explicitly requested dtype {requested}{where} is not available. To "
                         "enable more dtypes, set the jax_enable_x64 or allow_explicit_x64_dtypes"
                         " configuration options.See "
                         "https://github.com/jax-ml/jax#current-gotchas for more.")
    warnings.warn(f"Explicitly requested dtype {requested}{where} is not available, and will "
                  f"be truncated to dtype {canonical.name}. To enable more dtypes, set the "
                  "jax_enable_x64 configuration option or the JAX_ENABLE_X64 shell environment "
                  "variable. See https://github.com/jax-ml/jax#current-gotchas for more.",
                  UserWarning, stacklevel=user_stacklevel())  # JAX's 4 can land in jax
    return canonical


def is_explicit_specifier(x: object) -> bool:
    """Whether ``result_type`` takes ``x`` as an explicit dtype request, as JAX's ``dtype()``
    does: a dtype name, a NumPy dtype or a NumPy scalar type (``np.float64``); not a Python
    type, nor ``jnp.float64``, nor a value."""
    if isinstance(x, type):
        return issubclass(x, np.generic)
    return isinstance(x, (str, np.dtype))
