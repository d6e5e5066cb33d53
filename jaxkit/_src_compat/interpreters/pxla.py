"""``jax._src.interpreters.pxla``, which Flax's fp8 layers import beside ``earray`` (together they
decide ``fp8_ops.CAN_USE_EARRAY``), and the public ``jax.interpreters.pxla`` (Orbax imports it
for a Pathways plugin's result handlers, which jaxkit has no use for either). Flax reads
``global_result_handlers`` only in its dtype's ``global_sharded_result_handler`` rule, which
jaxkit never calls: a program's results of an extended dtype are wrapped by the dtype's
``from_physical``. No name is provided here: what a library reads raises an AttributeError (so
``hasattr`` stays false) that says why, except ``create_compile_options``, which JAX 0.10.2 still
exports."""
from jaxkit.interpreters.pxla import create_compile_options  # noqa: F401


def __getattr__(name: str):
    raise AttributeError(f"jax._src.interpreters.pxla.{name}: jaxkit has no pxla interpreter "
                         "(results of extended dtypes are made by the dtype's from_physical)")
