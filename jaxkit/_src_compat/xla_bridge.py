"""``jax._src.xla_bridge``: the PjRt backends. ``get_backend`` gives, as in JAX, jaxlib's
``Client`` of a platform (autodidax compiles and runs on it directly); ``_backends`` is
jaxkit's table of initialised backends by platform (chex's ``fake`` helpers read it)."""
from __future__ import annotations

from typing import Any

from jaxkit.runtime.pjrt import _backends  # noqa: F401
from jaxkit.runtime.pjrt import get_backend as _jaxkit_backend


def get_backend(platform: str | None = None) -> Any:
    """jaxlib's PjRt ``Client`` for ``platform`` (the default backend's when None)."""
    return _jaxkit_backend(platform).client
