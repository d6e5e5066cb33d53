"""``jax.custom_derivatives``: the public names of user-defined derivatives."""
from jaxkit.api_extra import custom_gradient
from jaxkit.transforms.custom_derivatives import (SymbolicZero, closure_convert,
                                                  custom_jvp, custom_jvp_call_p, custom_vjp,
                                                  custom_vjp_call_p)

__all__ = ["SymbolicZero", "closure_convert", "custom_gradient", "custom_jvp",
           "custom_jvp_call_p", "custom_vjp", "custom_vjp_call_p"]
