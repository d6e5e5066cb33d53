"""``%load_ext jaxkit.magics.as_jax``: in a notebook, ``import jax`` (and every ``jax.X``) gives
jaxkit from then on, so cells written for JAX, and libraries such as Flax and Optax, run on
jaxkit unchanged. Load it before anything imports the real ``jax`` (else it says so and
changes nothing); it also loads jaxkit's magics."""
import jaxkit
from jaxkit.magics import load_ipython_extension as _load_magics


def load_ipython_extension(ipython) -> None:
    jaxkit.install_as_jax()
    _load_magics(ipython)
