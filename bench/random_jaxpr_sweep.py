"""Sweep: do ``jax.random``'s samplers stage the same programs in jaxkit as in JAX 0.10.2?

    python bench/random_jaxpr_sweep.py [-v] [--lower] [NAME ...]

For every sampler both ``jax.random`` and ``jaxkit.random`` define, traces one small call on
a typed key (``random.key(0)``) and on a raw key (``random.PRNGKey(0)``) in each library and
compares the printed jaxprs (with ``--lower``: the lowered StableHLO text too). Prints the
names that differ (``-v``: with both texts) and, last, the counts: same / different / jaxkit
error. With names, sweeps only those.
"""
from __future__ import annotations

import sys

import jax
import numpy as np

import jaxkit

S = (3,)
A = np.array([0.5, 1.5, 2.0], np.float32)  # a parameter array (shape S)

# name -> function of (the random namespace, key); the sampler's standard small call.
CALLS = {
    "uniform": lambda R, k: R.uniform(k, S),
    "normal": lambda R, k: R.normal(k, S),
    "bits": lambda R, k: R.bits(k, S),
    "randint": lambda R, k: R.randint(k, S, 0, 10),
    "split": lambda R, k: R.split(k),
    "fold_in": lambda R, k: R.fold_in(k, 3),
    "bernoulli": lambda R, k: R.bernoulli(k, 0.3, S),
    "beta": lambda R, k: R.beta(k, 2.0, 3.0, S),
    "binomial": lambda R, k: R.binomial(k, 5.0, 0.3, S),
    "categorical": lambda R, k: R.categorical(k, np.log(A)),
    "cauchy": lambda R, k: R.cauchy(k, S),
    "chisquare": lambda R, k: R.chisquare(k, 2.0, S),
    "choice": lambda R, k: R.choice(k, 5, (2,)),
    "dirichlet": lambda R, k: R.dirichlet(k, A),
    "double_sided_maxwell": lambda R, k: R.double_sided_maxwell(k, 0.0, 1.0, S),
    "exponential": lambda R, k: R.exponential(k, S),
    "f": lambda R, k: R.f(k, 2.0, 3.0, S),
    "gamma": lambda R, k: R.gamma(k, A),
    "generalized_normal": lambda R, k: R.generalized_normal(k, 2.0, S),
    "geometric": lambda R, k: R.geometric(k, 0.3, S),
    "gumbel": lambda R, k: R.gumbel(k, S),
    "laplace": lambda R, k: R.laplace(k, S),
    "loggamma": lambda R, k: R.loggamma(k, A),
    "logistic": lambda R, k: R.logistic(k, S),
    "lognormal": lambda R, k: R.lognormal(k, 0.5, S),
    "maxwell": lambda R, k: R.maxwell(k, S),
    "multinomial": lambda R, k: R.multinomial(k, 4.0, A / A.sum()),
    "multivariate_normal": lambda R, k: R.multivariate_normal(k, A, np.eye(3, dtype=np.float32)),
    "orthogonal": lambda R, k: R.orthogonal(k, 2),
    "pareto": lambda R, k: R.pareto(k, 2.0, S),
    "permutation": lambda R, k: R.permutation(k, 4),
    "poisson": lambda R, k: R.poisson(k, 2.0, S),
    "rademacher": lambda R, k: R.rademacher(k, S),
    "rayleigh": lambda R, k: R.rayleigh(k, 1.0, S),
    "t": lambda R, k: R.t(k, 3.0, S),
    "triangular": lambda R, k: R.triangular(k, 0.0, 0.5, 1.0, S),
    "truncated_normal": lambda R, k: R.truncated_normal(k, -1.0, 1.0, S),
    "wald": lambda R, k: R.wald(k, 1.0, S),
    "weibull_min": lambda R, k: R.weibull_min(k, 1.0, 2.0, S),
    "ball": lambda R, k: R.ball(k, 2),
}

KEYS = {"typed": lambda R: R.key(0), "raw": lambda R: R.PRNGKey(0)}


def _text(lib, name, key_kind, lower):
    R = lib.random
    fn = CALLS[name]
    key = KEYS[key_kind](R)
    if lower:
        return lib.jit(lambda k: fn(R, k)).lower(key).as_text()
    return str(lib.make_jaxpr(lambda k: fn(R, k))(key))


def main(argv):
    verbose = "-v" in argv
    lower = "--lower" in argv
    names = [a for a in argv if not a.startswith("-")] or sorted(CALLS)
    same = differ = errors = 0
    for name in names:
        if not hasattr(jaxkit.random, name):
            print(f"{name}: missing in jaxkit.random")
            errors += 1
            continue
        for kind in KEYS:
            ref = _text(jax, name, kind, lower)
            try:
                ours = _text(jaxkit, name, kind, lower)
            except Exception as e:  # noqa: BLE001 (a sweep reports every failure and goes on)
                print(f"{name}[{kind}]: jaxkit error {type(e).__name__}: {e}")
                errors += 1
                continue
            if ours == ref:
                same += 1
                continue
            differ += 1
            print(f"{name}[{kind}]: differs")
            if verbose:
                print("--- jax\n" + ref + "\n--- jaxkit\n" + ours)
    print(f"same {same} / different {differ} / jaxkit error {errors}")


if __name__ == "__main__":
    main(sys.argv[1:])
