"""Transformations that carry jaxprs as primitives and that the libraries need.

``jit`` (with its stages and cache-miss explanations), ``custom_jvp``/``custom_vjp``,
``checkpoint``, host callbacks, ``vmap`` and ``pmap``. They sit below ``jaxkit.numpy``,
``jaxkit.random``, ``jaxkit.nn`` and ``jaxkit.scipy``, which are built with them (as in JAX,
every jnp function is ``jit(inline=True)``); ``jaxkit.api`` on top adds differentiation.
"""

from jaxkit.transforms import lax_jit  # noqa: F401,E402  (gives lax's nested_jit functions a jit)
