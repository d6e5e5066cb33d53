"""``jaxkit.scipy.special``: SciPy's special functions as JAX 0.10.2 provides them.

The functions live in family modules (gamma/beta, error function, logarithmic/entropy,
exponential integrals and Bessel, hypergeometric and the rest); this module gathers the public
names.
"""
# ruff: noqa: F401
from jaxkit.scipy._special_error import dawsn, erf, erfc, erfcx, erfinv, log_ndtr, ndtr, ndtri, wofz
from jaxkit.scipy._special_expint import bessel_jn, exp1, expi, expn, i0, i0e, i1, i1e, spence
from jaxkit.scipy._special_gamma import (
                                         bernoulli,
                                         beta,
                                         betainc,
                                         betaln,
                                         comb,
                                         digamma,
                                         factorial,
                                         gamma,
                                         gammainc,
                                         gammaincc,
                                         gammaln,
                                         gammasgn,
                                         loggamma,
                                         multigammaln,
                                         poch,
                                         polygamma,
                                         zeta,
)
from jaxkit.scipy._special_hyp2f1 import hyp2f1
from jaxkit.scipy._special_log import (
                                         boxcox,
                                         boxcox1p,
                                         entr,
                                         expit,
                                         kl_div,
                                         log_softmax,
                                         logit,
                                         logsumexp,
                                         rel_entr,
                                         softmax,
                                         xlog1py,
                                         xlogy,
)
from jaxkit.scipy._special_oscillatory import fresnel, hyp1f1, owens_t, sici
from jaxkit.scipy._special_sph_harm import sph_harm_y

from jaxkit._deprecations import deprecation_getattr as _deprecation_getattr  # noqa: E402
from jaxkit.scipy import _special_legendre  # noqa: E402

# As JAX 0.10.2: deprecated names still served (with a warning), removed ones explained.
_deprecations = {
    "lpmn": ("jax.scipy.special.lpmn is deprecated; no replacement is planned.",
             _special_legendre.lpmn),
    "lpmn_values": ("jax.scipy.special.lpmn_values is deprecated; no replacement is planned.",
                    _special_legendre.lpmn_values),
    "sph_harm": ("jax.scipy.special.sph_harm was deprecated in v0.7.0 and removed in v0.10.0. "
                 "Use jax.scipy.special.sph_harm_y instead.", None),
}
__getattr__ = _deprecation_getattr(__name__, _deprecations)
