"""The names JAX 0.10.2 deprecated or removed, answered as JAX answers them, read from JAX's
own tables (each public module's ``_deprecations``): a removed name raises JAX's
AttributeError, a deprecated one warns JAX's DeprecationWarning and works.

Two deliberate departures, each listed here so that a new one cannot slip in unnoticed:
names jaxkit's own modules define for their internal use (``jax.core`` is jaxkit's core),
which work without a warning, and deprecated internals of JAX's machinery jaxkit has no
counterpart for, which raise an AttributeError that starts with JAX's message and says so
(libraries probe some of them with ``hasattr``)."""
import importlib
import warnings

import jax
import numpy as np
import pytest

import jaxkit

MODULES = ["jax", "jax.ad_checkpoint", "jax.core", "jax.experimental.pallas",
           "jax.experimental.pallas.tpu", "jax.interpreters.ad", "jax.interpreters.batching",
           "jax.interpreters.pxla", "jax.lax", "jax.numpy", "jax.scipy.special"]

# jaxkit.core is the core jaxkit runs on: these are its own, in use
DEFINED_BY_JAXKIT = {
    "jax.core": {"get_aval", "set_current_trace", "subjaxprs", "AbstractToken", "DropVar",
                 "Effect", "Effects", "JaxprTypeError", "concrete_or_error", "no_effects",
                 "abstract_token", "pytype_aval_mappings"},
}
NOT_PROVIDED = {
    "jax.core": {"JaxprPpContext", "JaxprPpSettings", "OutputType", "aval_mapping_handlers",
                 "call", "concretization_function_error", "custom_typechecks", "is_concrete",
                 "literalable_types", "no_axis_name", "trace_ctx"},
    "jax.interpreters.pxla": {"Index", "MeshAxisName", "MeshComputation", "MeshExecutable",
                              "global_aval_to_result_handler",
                              "global_avals_to_results_handler", "global_result_handlers",
                              "thread_resources", "are_hlo_shardings_equal",
                              "is_hlo_sharding_replicated", "op_sharding_to_indices",
                              "ArrayMapping", "_UNSPECIFIED",
                              "array_mapping_to_axis_resources"},
}
CASES = [(m, name) for m in MODULES for name in importlib.import_module(m)._deprecations]


def _read(module, name):
    """('value', warnings, value) or ('error', class name, message)."""
    module.__getattr__.cache_clear()  # (a name warns on its first read only, as JAX's)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = getattr(module, name)
        except AttributeError as e:
            return "error", type(e).__name__, str(e)
    return "value", [str(w.message) for w in caught
                     if issubclass(w.category, DeprecationWarning)], value


def test_every_module_has_deprecations_to_check():
    assert len(CASES) >= 90


@pytest.mark.parametrize("module,name", CASES)
def test_deprecated_name_as_in_jax(module, name):
    kmodule = importlib.import_module("jaxkit" + module[3:])
    message, jax_value = importlib.import_module(module)._deprecations[name]
    if name in DEFINED_BY_JAXKIT.get(module, ()):
        assert name in vars(kmodule)
        return
    kind, *got = _read(kmodule, name)
    if jax_value is None:
        assert (kind, *got) == ("error", "AttributeError", message)
    elif name in NOT_PROVIDED.get(module, ()):
        assert kind == "error" and got[1].startswith(message) and "jaxkit does not provide" \
            in got[1]
    else:
        assert kind == "value" and got[0] == [message], got
        assert callable(got[1]) or isinstance(got[1], type) or got[1] is not None


@pytest.mark.parametrize("module,name,message", [
    ("jax", "device_put_sharded", "jax.device_put_sharded is deprecated; use jax.device_put"),
    ("jax.numpy", "fix", "jax.numpy.fix was deprecated in JAX v0.9.0"),
    ("jax.ad_checkpoint", "remat", "jax.ad_checkpoint.remat was deprecated"),
])
def test_removed_names_through_the_install_facade(module, name, message):
    # what `import jax` gives after jaxkit.install_as_jax() (made here without installing it)
    from jaxkit.install import _make_facade
    with pytest.raises(AttributeError, match=message):
        getattr(_make_facade(module), name)


@pytest.mark.parametrize("n", [0, 1, 2, 5])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lpmn_values_and_derivatives_as_in_jax(n, dtype):
    z = np.array([-1.0, -0.6, -0.1, 0.0, 0.35, 0.8, 1.0], dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with jax.enable_x64(dtype == np.float64), jaxkit.enable_x64(dtype == np.float64):
            want = [jax.scipy.special.lpmn(n, n, z),
                    jax.scipy.special.lpmn_values(n, n, z, True),
                    jax.scipy.special.lpmn_values(n, n, z, False)]
            got = [jaxkit.scipy.special.lpmn(n, n, z),
                   jaxkit.scipy.special.lpmn_values(n, n, z, True),
                   jaxkit.scipy.special.lpmn_values(n, n, z, False)]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for w, g in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


@pytest.mark.parametrize("call", [
    lambda sp: sp.lpmn(2, 3, np.zeros(3, np.float32)),
    lambda sp: sp.lpmn(2, 2, np.zeros((3, 1), np.float32)),
    lambda sp: sp.lpmn(2, 2, np.arange(3)),
    lambda sp: sp.lpmn_values(1, 2, np.zeros(3, np.float32), True),
])
def test_lpmn_errors_as_in_jax(call):
    def outcome(sp):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                call(sp)
            except Exception as e:  # noqa: BLE001 - class and message compared
                return type(e).__name__, str(e)
        return None
    assert outcome(jaxkit.scipy.special) == outcome(jax.scipy.special)
