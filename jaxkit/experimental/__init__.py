"""``jax.experimental``: ``io_callback`` and ``cur_qdd`` (a mutable high-level value's current
quasi-dynamic data, see ``jaxkit.interpreters.hijax``), ``EArray`` and ``primal_tangent_dtype``
(``_extended_dtypes``) here; submodules (``checkify``,
``compilation_cache``) live in their own files."""
from jaxkit.experimental._extended_dtypes import EArray, primal_tangent_dtype
from jaxkit.interpreters.hijax import cur_qdd
from jaxkit.transforms.callback import io_callback

__all__ = ["EArray", "cur_qdd", "io_callback", "primal_tangent_dtype"]
