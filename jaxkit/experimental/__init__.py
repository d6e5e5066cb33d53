"""``jax.experimental``: the parts jaxkit provides (``compilation_cache``)."""
