"""``jaxkit.random``: JAX's counter-based random numbers, bit for bit.

Keys are raw ``uint32[2]`` arrays (``PRNGKey``) or typed keys (``key``: values of the extended
dtype ``key<fry>``, concretely a ``PRNGKeyArray`` over the same data, printed
``Array((), dtype=key<fry>)``; traced, a tracer of that dtype). Every function takes either and
returns keys of the kind it was given. For the same key the numbers are those of JAX 0.10.2
(Threefry-2x32 with JAX's default partitionable derivation of ``split``, ``fold_in`` and
``bits``; each sampler is JAX's algorithm). The samplers work eagerly, under ``jit`` and
under ``vmap`` over keys. Implementation: ``prng`` (Threefry, the key dtype, key arrays),
``key_prims`` (the ``random_*`` primitives and the key functions), ``samplers``
(transformations of uniform bits), ``gamma`` (the rejection samplers).
"""
from jaxkit.random.prng import PRNGKeyArray
from jaxkit.random.key_prims import (
                          PRNGKey,
                          bits,
                          clone,
                          fold_in,
                          key,
                          key_data,
                          key_dtype,
                          key_impl,
                          split,
                          wrap_key_data,
)
from jaxkit.random.gamma import (
                          ball,
                          beta,
                          binomial,
                          chisquare,
                          dirichlet,
                          f,
                          gamma,
                          generalized_normal,
                          loggamma,
                          multinomial,
                          poisson,
                          random_gamma_p,
                          t,
)
from jaxkit.random.samplers import (
                          bernoulli,
                          categorical,
                          cauchy,
                          choice,
                          double_sided_maxwell,
                          exponential,
                          geometric,
                          gumbel,
                          laplace,
                          logistic,
                          lognormal,
                          maxwell,
                          multivariate_normal,
                          normal,
                          orthogonal,
                          pareto,
                          permutation,
                          rademacher,
                          randint,
                          rayleigh,
                          triangular,
                          truncated_normal,
                          uniform,
                          wald,
                          weibull_min,
)

__all__ = [
    "PRNGKey", "PRNGKeyArray", "ball", "bernoulli", "beta", "binomial", "bits", "categorical",
    "cauchy", "chisquare", "choice", "clone", "dirichlet", "double_sided_maxwell",
    "exponential", "f", "fold_in", "gamma", "generalized_normal", "geometric", "gumbel", "key",
    "key_data", "key_dtype", "key_impl", "laplace", "loggamma", "logistic", "lognormal",
    "maxwell", "multinomial", "multivariate_normal", "normal", "orthogonal", "pareto",
    "permutation", "poisson", "rademacher", "random_gamma_p", "randint", "rayleigh", "split", "t",
    "triangular", "truncated_normal", "uniform", "wald", "weibull_min", "wrap_key_data",
]
