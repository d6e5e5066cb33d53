"""``jax.experimental.layout`` (Flax's ``core.spmd`` checks values against ``Format``): jaxkit
keeps every array in XLA's default layout, so no value is a ``Format`` and making one raises
``NotImplementedError``."""


class Layout:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("jax.experimental.layout.Layout: jaxkit uses XLA's default "
                                  "layouts only")


class Format(Layout):
    pass
