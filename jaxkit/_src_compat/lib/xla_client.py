"""``jax._src.lib.xla_client``: jaxlib's ``xla_client`` module (the PjRt client API:
``Client``, ``batched_device_put``, ``OpSharding``, ``GSPMDSharding``, ...), which code written
against JAX's private modules (autodidax's XLA backend, for one) reaches by this name."""
from jaxkit.extend._reexport import star_exports

globals().update(star_exports("jaxlib.xla_client"))
del star_exports
