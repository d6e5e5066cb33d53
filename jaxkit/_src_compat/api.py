"""``jax._src.api`` (imported as ``api`` by JAX's "How JAX primitives work" tutorial): the
transformations it calls, jaxkit's own."""
from jaxkit.api import (grad, hessian, jacfwd, jacobian, jacrev, jvp, linearize,  # noqa: F401
                        make_jaxpr, value_and_grad, vjp)
from jaxkit.transforms.jit import jit  # noqa: F401
from jaxkit.transforms.vmap import vmap  # noqa: F401
