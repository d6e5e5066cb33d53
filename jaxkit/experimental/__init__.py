"""``jax.experimental``: ``io_callback`` and ``cur_qdd`` (a mutable high-level value's current
quasi-dynamic data, see ``jaxkit.interpreters.hijax``) here; submodules (``checkify``,
``compilation_cache``) live in their own files."""
from jaxkit.interpreters.hijax import cur_qdd
from jaxkit.transforms.callback import io_callback

__all__ = ["cur_qdd", "io_callback"]
