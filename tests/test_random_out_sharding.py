"""``out_sharding=`` of the ``jax.random`` samplers (and of ``jax.nn.initializers``), and
``key_dtype(impl_spec)``, compared with JAX 0.10.2.

One record per sampler: its name and its arguments after the key, for a result whose first
axis has 8 elements. Generic checks run each record over a mesh whose axes are ``Explicit``
(``set_mesh``) with ``out_sharding=P('x')``, with a ``NamedSharding``, with none, and under
``jit``, and compare the values, the result's sharding and its type (``jax.typeof``) with
JAX's, computed on 8 CPU devices in a subprocess (jaxkit runs on an extra 8-device CPU backend
in this process). A scalar sample with no layout asked for is compared too (JAX asks for an
unsplit one under a mesh whose axes are all Explicit). Jaxprs are not compared: JAX runs a
sampler's body under ``auto_axes`` (``reshard`` equations around it), jaxkit lays the result
out after the body (a ``sharding_constraint``).
"""
import importlib.util
import inspect
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import jaxkit as jax
import jaxkit.numpy as jnp
from jaxkit.runtime import multi_device
from jaxkit.sharding import AxisType, NamedSharding, PartitionSpec as P

DEVICES = multi_device.add_cpu_backend("explicit8", 8).devices

# The names every record reads (``DEV`` is the 8 devices on either side).
PRELUDE = """
mesh = jax.make_mesh((4, 2), ('x', 'y'), axis_types=(AxisType.Explicit,) * 2, devices=DEV)
auto_mesh = jax.make_mesh((4, 2), ('x', 'y'), axis_types=(AxisType.Auto,) * 2, devices=DEV)
K = jax.random.key(0)
LOGITS = np.linspace(-1.0, 1.0, 40, dtype=np.float32).reshape(8, 5)
"""

# sampler -> its arguments after the key (a result of 8 rows).
SAMPLERS = {
    "ball": "3, 2, (8,)",
    "bernoulli": "0.3, (8,)",
    "beta": "2.0, 3.0, (8,)",
    "bits": "(8,)",
    "categorical": "LOGITS",
    "cauchy": "(8,)",
    "chisquare": "3.0, (8,)",
    "dirichlet": "np.ones(3, np.float32), (8,)",
    "exponential": "(8,)",
    "f": "3.0, 4.0, (8,)",
    "gamma": "2.0, (8,)",
    "generalized_normal": "1.5, (8,)",
    "geometric": "0.3, (8,)",
    "gumbel": "(8,)",
    "laplace": "(8,)",
    "loggamma": "2.0, (8,)",
    "logistic": "(8,)",
    "lognormal": "0.5, (8,)",
    "maxwell": "(8,)",
    "multivariate_normal": "np.zeros(2, np.float32), np.eye(2, dtype=np.float32), (8,)",
    "normal": "(8,)",
    "orthogonal": "3, (8,)",
    "pareto": "2.0, (8,)",
    "permutation": "8",
    "poisson": "3.0, (8,)",
    "rademacher": "(8,)",
    "randint": "(8,), 0, 10",
    "rayleigh": "1.0, (8,)",
    "t": "3.0, (8,)",
    "triangular": "0.0, 0.5, 1.0, (8,)",
    "truncated_normal": "-1.0, 1.0, (8,)",
    "uniform": "(8,)",
    "wald": "1.0, (8,)",
}

# The samplers that take a shape, for a scalar sample: with no layout asked for, JAX asks for
# an unsplit one under a mesh whose axes are all Explicit (some samplers only); jaxkit's is
# typed and laid out so already.
SCALARS = {
    "bits": "()", "cauchy": "()", "chisquare": "3.0, ()", "exponential": "()",
    "f": "3.0, 4.0, ()", "gamma": "2.0, ()", "generalized_normal": "1.5, ()",
    "geometric": "0.3, ()", "gumbel": "()", "laplace": "()", "loggamma": "2.0, ()",
    "logistic": "()", "lognormal": "0.5, ()", "maxwell": "()", "normal": "()",
    "pareto": "2.0, ()", "poisson": "3.0, ()", "rademacher": "()", "randint": "(), 0, 10",
    "rayleigh": "1.0, ()", "t": "3.0, ()", "triangular": "0.0, 0.5, 1.0, ()",
    "uniform": "()", "wald": "1.0, ()",
}

CASES = {}
for _name, _args in SAMPLERS.items():
    _call = f"jax.random.{_name}(K, {_args}"
    CASES[f"{_name}/spec"] = f"{_call}, out_sharding=P('x'))"
    CASES[f"{_name}/named"] = f"{_call}, out_sharding=NamedSharding(mesh, P('x')))"
    CASES[f"{_name}/none"] = f"{_call})"
    CASES[f"{_name}/jit"] = (f"jax.jit(lambda k: jax.random.{_name}(k, {_args}, "
                             "out_sharding=P('x')))(K)")
for _name, _args in SCALARS.items():
    CASES[f"{_name}/scalar"] = f"jax.random.{_name}(K, {_args})"

# The checks in JAX's order: which error comes first when several arguments are wrong.
ERRORS = {
    "type": "jax.random.uniform(K, (8,), out_sharding='x')",
    "type_before_dtype": "jax.random.normal(K, (8,), jnp.int32, out_sharding='x')",
    "dtype_before_type": "jax.random.gamma(K, 1.0, (8,), jnp.int32, out_sharding='x')",
    "shape_before_type": "jax.random.rayleigh(K, 1.0, 2.5, out_sharding='x')",
    "type_before_cast": "jax.random.t(K, 1.0, (8,), jnp.float16, out_sharding='x')",
    "cast_before_type": "jax.random.pareto(K, 1.0, (8,), jnp.float16, out_sharding='x')",
    "mode_before_type": "jax.random.gumbel(K, (8,), mode='bad', out_sharding='x')",
    "key_before_type": "jax.random.bits(np.float32(1), (8,), out_sharding='x')",
    "permutation_type": "jax.random.permutation(K, 8, out_sharding=3)",
    "auto_axes": "jax.random.normal(K, (8,), out_sharding=NamedSharding(auto_mesh, P('x')))",
    "other_mesh": "jax.random.normal(K, (8,), out_sharding=NamedSharding(auto_mesh, P()))",
}
CASES.update({f"error/{k}": v for k, v in ERRORS.items()})

# key_dtype(impl_spec) and the keys made with an impl.
KEY_DTYPES = ["None", "'threefry2x32'", "K.dtype", "jax.random.key_dtype()",
              "jax.random.key_impl(K)", "'fry'", "'key<fry>'", "3", "'nonsense'"]
for _i, _spec in enumerate(KEY_DTYPES):
    CASES[f"key_dtype/{_i}"] = f"str(jax.random.key_dtype({_spec}))"
CASES["key_dtype/keyword"] = "str(jax.random.key_dtype(impl_spec='threefry2x32'))"
CASES["key/impl_fry"] = "jax.random.key(0, impl='fry')"
CASES["key/impl_dtype"] = "jax.random.key_data(jax.random.key(0, dtype=K.dtype))"

# nn.initializers: ones/zeros take out_sharding, and so do the initializers the constructors
# return (orthogonal's and delta_orthogonal's refuse one, as JAX's).
INITS = {
    "ones": "jax.nn.initializers.ones",
    "zeros": "jax.nn.initializers.zeros",
    "constant": "jax.nn.initializers.constant(1.5)",
    "uniform": "jax.nn.initializers.uniform()",
    "normal": "jax.nn.initializers.normal()",
    "truncated_normal": "jax.nn.initializers.truncated_normal()",
    "glorot_uniform": "jax.nn.initializers.glorot_uniform()",
    "glorot_normal": "jax.nn.initializers.glorot_normal()",
    "he_normal": "jax.nn.initializers.variance_scaling(2.0, 'fan_in', 'normal')",
    "orthogonal": "jax.nn.initializers.orthogonal()",
}
for _name, _init in INITS.items():
    CASES[f"init/{_name}/spec"] = f"{_init}(K, (8, 4), out_sharding=P('x'))"
    CASES[f"init/{_name}/named"] = (f"{_init}(K, (8, 4), jnp.float32, "
                                    "NamedSharding(mesh, P(None, 'y')))")
    CASES[f"init/{_name}/none"] = f"{_init}(K, (8, 4))"
    CASES[f"init/{_name}/signature"] = f"str(list(inspect.signature({_init}).parameters))"

DRIVER = r"""
import inspect, json, sys
import numpy as np
import jax
jax.config.update('jax_num_cpu_devices', 8)
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
prelude, cases = sys.argv[1], json.loads(sys.argv[2])
ns = dict(np=np, jax=jax, jnp=jnp, P=P, NamedSharding=NamedSharding, AxisType=AxisType,
          inspect=inspect, DEV=jax.devices())
exec(prelude, ns)
""" + """
def describe(thunk):
    try:
        out = thunk()
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}
    if isinstance(out, str):
        return {"text": out}
    return {"sharding": str(out.sharding), "type": str(jax.typeof(out)),
            "value": np.asarray(out).tolist()}

out = {}
with jax.sharding.set_mesh(ns["mesh"]):
    for name, code in cases.items():
        out[name] = describe(lambda: eval(code, ns))
out["signatures"] = {
    n: list(inspect.signature(f).parameters) for n, f in vars(jax.random).items()
    if not n.startswith("_") and inspect.isfunction(f)}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def oracle() -> dict:
    """Every case as JAX 0.10.2 gives it on 8 CPU devices."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("the JAX oracle is not installed")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", DRIVER, PRELUDE, json.dumps(CASES)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def ns():
    namespace = dict(np=np, jax=jax, jnp=jnp, P=P, NamedSharding=NamedSharding,
                     AxisType=AxisType, inspect=inspect, DEV=DEVICES)
    exec(PRELUDE, namespace)
    with jax.sharding.set_mesh(namespace["mesh"]):
        yield namespace


# Where the words differ only in what each library adds after the same sentence: JAX where
# the error was raised, jaxkit what to do instead.
_TAILS = (" This error occurs at source", " (Lay the result out with")


def _head(message: str) -> str:
    for tail in _TAILS:
        message = message.split(tail)[0]
    return message


def _describe(thunk) -> dict:
    try:
        out = thunk()
    except Exception as e:  # noqa: BLE001  (the class and text are what is compared)
        return {"error": _head(f"{type(e).__name__}: {e}")}
    if isinstance(out, str):
        return {"text": out}
    return {"sharding": str(out.sharding), "type": str(jax.typeof(out)),
            "value": np.asarray(out).tolist()}


def _check(got: dict, want: dict, exact: bool = True) -> None:
    if "error" in want:
        assert got == {"error": _head(want["error"])}
        return
    assert "error" not in got, got["error"]
    if "text" in want:
        assert got == want
        return
    assert (got["sharding"], got["type"]) == (want["sharding"], want["type"])
    if exact:
        np.testing.assert_array_equal(np.asarray(got["value"]), np.asarray(want["value"]))
    else:
        np.testing.assert_allclose(np.asarray(got["value"]), np.asarray(want["value"]),
                                   rtol=1e-6)


def test_every_sampler_with_out_sharding_has_a_record(oracle):
    with_out_sharding = {n for n, params in oracle["signatures"].items()
                         if "out_sharding" in params}
    assert with_out_sharding == set(SAMPLERS)


def test_signatures_match_jax(oracle):
    """Every public function of ``jax.random`` is in ``jaxkit.random`` with the same
    parameter names, in the same order."""
    mine = {n: list(inspect.signature(getattr(jax.random, n)).parameters)
            for n in oracle["signatures"] if hasattr(jax.random, n)}
    assert mine == oracle["signatures"]
    for n in oracle["signatures"]:
        if "out_sharding" in oracle["signatures"][n]:
            param = inspect.signature(getattr(jax.random, n)).parameters["out_sharding"]
            assert (param.kind, param.default) == (inspect.Parameter.KEYWORD_ONLY, None), n


@pytest.mark.parametrize("case", list(CASES))
def test_matches_jax(oracle, ns, case):
    # Eager samples are JAX's bit for bit; a jitted one is one partitioned program, which XLA
    # fuses as it likes (JAX's runs the body under auto_axes, jaxkit's constrains the result):
    # the gamma samplers' floats may then differ in the last place.
    exact = not case.endswith("/jit")
    _check(_describe(lambda: eval(CASES[case], ns)), oracle[case], exact)  # noqa: S307


def test_out_sharding_is_keyword_only(ns):
    with pytest.raises(TypeError):
        jax.random.gamma(ns["K"], 2.0, (8,), jnp.float32, P("x"))  # a fifth positional argument
