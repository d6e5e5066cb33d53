"""``jax.extend.backend``: the PjRt clients jaxkit runs on, as JAX names them."""
from __future__ import annotations

from jaxkit.runtime import pjrt
from jaxkit.runtime.pjrt import default_device, get_backend, register_backend_factory

__all__ = ["backends", "clear_backends", "get_backend", "get_default_device",
           "register_backend_factory"]


def backends() -> dict:
    """The initialised backends by platform name (the default one at least)."""
    get_backend()
    return dict(pjrt._backends)


def get_default_device():
    return default_device()


def clear_backends() -> None:
    raise NotImplementedError("jax.extend.backend.clear_backends: jaxkit keeps its PjRt "
                              "clients for the life of the process")
