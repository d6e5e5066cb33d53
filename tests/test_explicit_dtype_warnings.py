"""Explicit 64-bit dtypes with x64 off: JAX 0.10.2's ``UserWarning`` (or, with
``jax_explicit_x64_dtypes='error'``, its ``ValueError``), compared with the oracle.

One record per user-facing dtype entry point (``jnp`` creation functions, ``astype``, the
reductions' ``dtype=``, ``preferred_element_type``, ``lax``, ``random``, ``nn``, ``scipy``).
Each record runs once in each library; the warnings (category and text, which names the
function as JAX names it) and any error must be the same. jaxkit's warnings must also point at
the line of this file that made the call, eager or under ``jit`` (JAX's fixed ``stacklevel=4``
often lands in its own files instead).

Records that must give *no* warning are part of the same table: Python types, float32,
``dtype=None`` and functions that request 64-bit dtypes internally (JAX warns only at user
entry points, and jaxkit's own requests go through ``canonicalize_dtype``, which never warns).

JAX warns when it traces, so a jitted ``jnp`` function warns only the first time it meets a
shape and dtype: the inputs have shapes (13,) and (3, 5) that the rest of the suite does not
use with 64-bit dtypes, and no record repeats another's call.
"""
import types
import warnings

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as knp
import jaxkit.scipy.linalg
from jaxkit import config as kconfig

jax = pytest.importorskip("jax")
pytest.importorskip("jax.numpy")
pytest.importorskip("jax.scipy.linalg")

F, I = "float64", "int64"


def _lib(mod, jnp) -> types.SimpleNamespace:
    """One library's modules and small inputs, built once."""
    return types.SimpleNamespace(
        jax=mod, jnp=jnp, lax=mod.lax, random=mod.random, nn=mod.nn, jsp=mod.scipy,
        v=jnp.arange(13.0), m=jnp.ones((3, 5), "float32"), iv=jnp.array([0, 1]),
        k=mod.random.key(0))


# label -> call(lib). The label is what the record checks; the call is the user's line.
RECORDS = {
    # jnp creation
    "array": lambda L: L.jnp.array(1.0, dtype=F),
    "array np.float64": lambda L: L.jnp.array(2.0, dtype=np.float64),
    "array jnp.float64": lambda L: L.jnp.array(3.0, dtype=L.jnp.float64),
    "array complex128": lambda L: L.jnp.array(1j, dtype="complex128"),
    "array uint64": lambda L: L.jnp.array(1, dtype="uint64"),
    "array float (no warning)": lambda L: L.jnp.array(1.0, dtype=float),
    "array int (no warning)": lambda L: L.jnp.array(1, dtype=int),
    "array float32 (no warning)": lambda L: L.jnp.array(1.0, dtype="float32"),
    "array None (no warning)": lambda L: L.jnp.array(np.float64(1.0), dtype=None),
    "asarray": lambda L: L.jnp.asarray(1.0, dtype=F),
    "asarray of an array": lambda L: L.jnp.asarray(L.v, dtype=F),
    "jnp.int64(1)": lambda L: L.jnp.int64(1),
    "zeros": lambda L: L.jnp.zeros(2, F),
    "zeros int (no warning)": lambda L: L.jnp.zeros(2, int),
    "ones": lambda L: L.jnp.ones(2, F),
    "empty": lambda L: L.jnp.empty(2, F),
    "full": lambda L: L.jnp.full(2, 1, F),
    "full array fill": lambda L: L.jnp.full(3, L.iv[:1], I),
    "zeros_like": lambda L: L.jnp.zeros_like(L.v, F),
    "ones_like": lambda L: L.jnp.ones_like(L.v, F),
    "empty_like": lambda L: L.jnp.empty_like(L.v, F),
    "full_like": lambda L: L.jnp.full_like(L.v, 1, F),
    "arange": lambda L: L.jnp.arange(3, dtype=I),
    "arange (no warning)": lambda L: L.jnp.arange(4),
    "linspace": lambda L: L.jnp.linspace(0, 1, 3, dtype=F),
    "logspace": lambda L: L.jnp.logspace(0, 1, 3, dtype=F),
    "geomspace": lambda L: L.jnp.geomspace(1, 2, 3, dtype=F),
    "eye": lambda L: L.jnp.eye(2, dtype=F),
    "identity": lambda L: L.jnp.identity(2, dtype=F),
    "tri": lambda L: L.jnp.tri(2, dtype=F),
    "indices": lambda L: L.jnp.indices((2,), dtype=I),
    "fromfunction": lambda L: L.jnp.fromfunction(lambda i: i, (2,), dtype=F),
    # casts
    "astype": lambda L: L.jnp.astype(L.v, F),
    "Array.astype": lambda L: L.m.astype("complex128"),
    "Array.view (no warning)": lambda L: L.v.view("int32"),
    "Array.view": lambda L: L.m[:, :4].view(I),
    # reductions
    "trace": lambda L: L.jnp.trace(L.m, dtype=F),
    "sum (name: two warnings)": lambda L: L.jnp.sum(L.v, dtype=F),
    "sum np.dtype (one warning)": lambda L: L.jnp.sum(L.m, dtype=np.dtype(I)),
    "prod": lambda L: L.jnp.prod(L.v, dtype=F),
    "Array.sum": lambda L: L.m.sum(dtype="complex128"),
    "mean": lambda L: L.jnp.mean(L.v, dtype=F),
    "var": lambda L: L.jnp.var(L.v, dtype=F),
    "std": lambda L: L.jnp.std(L.v, dtype=F),
    "nansum": lambda L: L.jnp.nansum(L.v, dtype=F),
    "nanprod": lambda L: L.jnp.nanprod(L.v, dtype=F),
    "nanmean": lambda L: L.jnp.nanmean(L.v, dtype=F),
    "nanvar": lambda L: L.jnp.nanvar(L.v, dtype=F),
    "nanstd": lambda L: L.jnp.nanstd(L.v, dtype=F),
    "cumsum": lambda L: L.jnp.cumsum(L.v, dtype=F),
    "cumprod": lambda L: L.jnp.cumprod(L.v, dtype=F),
    "nancumsum": lambda L: L.jnp.nancumsum(L.v, dtype=F),
    "cumulative_sum": lambda L: L.jnp.cumulative_sum(L.v, dtype=F),
    "cumulative_prod": lambda L: L.jnp.cumulative_prod(L.v, dtype=F),
    "logaddexp.reduce": lambda L: L.jnp.logaddexp.reduce(L.v, dtype=F),
    "add.reduce": lambda L: L.jnp.add.reduce(L.m, dtype=F),
    # dtype functions: JAX's dtype() warns for a 64-bit name, NumPy dtype or NumPy scalar
    # type reaching result_type (naming "dtype"), not for jnp.float64, Python types or values
    "result_type": lambda L: L.jnp.result_type(F),
    "result_type np.float64": lambda L: L.jnp.result_type(np.float64, "float32"),
    "result_type np.dtype": lambda L: L.jax.dtypes.result_type(np.dtype("uint64")),
    "result_type complex128": lambda L: L.jnp.result_type(L.m, "complex128"),
    "result_type jnp.float64 (no warning)": lambda L: L.jnp.result_type(L.jnp.float64),
    "result_type values (no warning)": lambda L: L.jnp.result_type(np.float64(1), np.ones(2)),
    "result_type float (no warning)": lambda L: L.jnp.result_type(float, int),
    "promote_types (no warning)": lambda L: L.jnp.promote_types(F, "float32"),
    "dtype (no warning)": lambda L: L.jnp.dtype(F),
    "canonicalize_dtype (no warning)": lambda L: L.jax.dtypes.canonicalize_dtype(I),
    "can_cast (no warning)": lambda L: L.jnp.can_cast(F, "float32"),
    "issubdtype (no warning)": lambda L: L.jnp.issubdtype(np.int64, L.jnp.integer),
    "finfo (no warning)": lambda L: L.jnp.finfo(F),
    # index dtypes
    "argsort": lambda L: L.jnp.argsort(L.v, dtype=I),
    "ravel_multi_index": lambda L: L.jnp.ravel_multi_index((L.iv, L.iv), (2, 2), dtype=I),
    # preferred_element_type
    "dot": lambda L: L.jnp.dot(L.v, L.v, preferred_element_type=F),
    "matmul": lambda L: L.jnp.matmul(L.m, L.m.T, preferred_element_type=F),
    "tensordot": lambda L: L.jnp.tensordot(L.m, L.m, preferred_element_type=F),
    "einsum": lambda L: L.jnp.einsum("i,i", L.v, L.v, preferred_element_type=F),
    "inner": lambda L: L.jnp.inner(L.m, L.m, preferred_element_type=F),
    "vdot": lambda L: L.jnp.vdot(L.m, L.m, preferred_element_type=F),
    # lax
    "lax.convert_element_type": lambda L: L.lax.convert_element_type(L.v, F),
    "lax.bitcast_convert_type": lambda L: L.lax.bitcast_convert_type(L.iv, "float32"),
    "lax.full": lambda L: L.lax.full((2,), 1, F),
    "lax.full np fill (no warning)": lambda L: L.lax.full((2,), np.float64(1)),
    "lax.full_like": lambda L: L.lax.full_like(L.v, 1, F),
    "lax.iota": lambda L: L.lax.iota(I, 3),
    "lax.broadcasted_iota": lambda L: L.lax.broadcasted_iota(I, (3,), 0),
    "lax.dot": lambda L: L.lax.dot(L.v, L.v, preferred_element_type=F),
    "lax.dot_general": lambda L: L.lax.dot_general(
        L.m, L.m, (((1,), (1,)), ((), ())), preferred_element_type=F),
    "lax.argmax": lambda L: L.lax.argmax(L.v, 0, I),
    "lax.argmin": lambda L: L.lax.argmin(L.v, 0, I),
    "lax.conv_general_dilated": lambda L: L.lax.conv_general_dilated(
        L.m[None], L.m[None, :, :2], (1,), "VALID", preferred_element_type=F),
    "lax.rng_bit_generator": lambda L: L.lax.rng_bit_generator(
        L.jnp.zeros(4, "uint32"), (2,), np.uint64),
    # random (JAX names no function)
    "random.uniform": lambda L: L.random.uniform(L.k, (2,), F),
    "random.randint": lambda L: L.random.randint(L.k, (2,), 0, 3, I),
    "random.bits": lambda L: L.random.bits(L.k, (2,), "uint64"),
    "random.exponential": lambda L: L.random.exponential(L.k, (2,), F),
    "random.geometric": lambda L: L.random.geometric(L.k, 0.5, (2,), I),
    # nn, scipy
    "nn.one_hot": lambda L: L.nn.one_hot(L.iv, 3, dtype=F),
    "nn.initializers.normal": lambda L: L.nn.initializers.normal()(L.k, (2,), F),
    "nn.initializers.zeros": lambda L: L.nn.initializers.zeros(L.k, (2,), F),
    "scipy.linalg.dft (then JAX's error)": lambda L: L.jsp.linalg.dft(2, dtype=F),
    "scipy.linalg.dft complex128": lambda L: L.jsp.linalg.dft(2, dtype="complex128"),
    "make_array_from_callback": lambda L: L.jax.make_array_from_callback(
        (2,), L.jax.sharding.SingleDeviceSharding(L.jax.devices()[0]),
        lambda i: np.zeros(2, np.float32), dtype=F),
    # traced: JAX warns at trace time; the warning points at the traced function's line
    "jit zeros": lambda L: L.jax.jit(lambda: L.jnp.zeros(4, F))(),
    "jit prod": lambda L: L.jax.jit(lambda a: L.jnp.prod(a, dtype=F))(L.m),
    # 64-bit requests inside the libraries, never warned about
    "internal: searchsorted": lambda L: L.jnp.searchsorted(L.v, 1.0),
    "internal: nonzero": lambda L: L.jnp.nonzero(L.v, size=2),
    "internal: count_nonzero": lambda L: L.jnp.count_nonzero(L.v),
    "internal: argmax": lambda L: L.jnp.argmax(L.v),
    "internal: argsort": lambda L: L.jnp.argsort(L.v),
    "internal: bincount": lambda L: L.jnp.bincount(L.iv, length=3),
    "internal: cumsum bool": lambda L: L.jnp.cumsum(L.v > 2),
    "internal: mean int": lambda L: L.jnp.mean(L.iv),
    "internal: norm": lambda L: L.jnp.linalg.norm(L.m),
    "internal: fft": lambda L: L.jnp.fft.fft(L.v),
    "internal: bernoulli": lambda L: L.random.bernoulli(L.k, 0.5, (2,)),
    "internal: choice": lambda L: L.random.choice(L.k, 3, (2,)),
    "internal: randint default": lambda L: L.random.randint(L.k, (2,), 0, 3),
    # float64 NumPy inputs are values, not requests
    "internal: logsumexp np64": lambda L: L.jsp.special.logsumexp(np.ones(13)),
    "internal: norm.logpdf np64": lambda L: L.jsp.stats.norm.logpdf(np.ones(13), 0.0, 1.0),
    "internal: softmax np64": lambda L: L.nn.softmax(np.ones(13)),
    "internal: linalg.solve np64": lambda L: L.jsp.linalg.solve(np.eye(3), np.ones(3)),
}


def _run(call, lib) -> tuple[list, tuple | None]:
    """The warnings ``call(lib)`` gives (category, text, filename) and its error, if any."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call(lib)
            err = None
        except Exception as e:  # noqa: BLE001  (compared with the oracle's)
            err = (type(e).__name__, str(e))
    return [(w.category, str(w.message), w.filename) for w in caught], err


@pytest.fixture(scope="module")
def results() -> dict:
    """Every record run once in each library (JAX first: its traces must not be cached)."""
    oracle, kit = _lib(jax, jax.numpy), _lib(jaxkit, knp)
    return {label: (_run(call, oracle), _run(call, kit)) for label, call in RECORDS.items()}


@pytest.mark.parametrize("label", list(RECORDS))
def test_warning_matches_oracle(results, label):
    (jax_ws, jax_err), (kit_ws, kit_err) = results[label]
    assert [w[:2] for w in kit_ws] == [w[:2] for w in jax_ws]
    assert kit_err == jax_err
    # Every jaxkit warning names the user's line (this file), eager or traced.
    assert all(w[2] == __file__ for w in kit_ws), [w[2] for w in kit_ws]
    if "no warning" in label or label.startswith("internal"):
        assert not kit_ws


def test_the_table_checks_warnings(results):
    """The table is not vacuous: most records warn, with JAX's text."""
    texts = [w[1] for _, (ws, _) in results.values() for w in ws]
    assert len(texts) > 60
    assert ("Explicitly requested dtype float64 requested in zeros is not available, and will "
            "be truncated to dtype float32. To enable more dtypes, set the jax_enable_x64 "
            "configuration option or the JAX_ENABLE_X64 shell environment variable. See "
            "https://github.com/jax-ml/jax#current-gotchas for more.") in texts


def test_fftfreq_warns_jax_first_warning():
    """JAX's fftfreq passes the dtype on to arange, astype and array, warning in each; jaxkit
    checks it once and gives the first of those warnings."""
    ws = [[w[:2] for w in _run(lambda jnp: jnp.fft.fftfreq(6, dtype=F), jnp)[0]]
          for jnp in (jax.numpy, knp)]
    assert len(ws[0]) == 4 and ws[1] == ws[0][:1]
    assert "requested in arange" in ws[1][0][1]


def _modes(mode: str):
    """Both libraries' ``jax_explicit_x64_dtypes`` set to ``mode`` for a block."""
    return jax._src.config.explicit_x64_dtypes(mode), kconfig.override(
        jax_explicit_x64_dtypes=mode)


def test_error_mode_raises_jax_value_error():
    outcomes = []
    for lib, mode_ctx in ((jax, _modes("error")[0]), (jaxkit, _modes("error")[1])):
        with mode_ctx:
            errs = []
            for call in (lambda: lib.numpy.zeros(5, "float64"),
                         lambda: lib.lax.convert_element_type(1.0, "int64"),
                         lambda: lib.random.uniform(lib.random.key(1), (3,), "float64"),
                         # traced in 'warn' mode by the table: the mode is in the jit key
                         lambda: lib.numpy.sum(lib.numpy.arange(13.0), dtype="float64")):
                with pytest.raises(ValueError) as e:
                    call()
                errs.append(str(e.value))
            assert lib.numpy.zeros(2, "float32").dtype == np.float32  # the rest still works
        outcomes.append(errs)
    assert outcomes[1] == outcomes[0]
    assert outcomes[1][0].startswith("Explicitly requested dtype float64 requested in zeros "
                                     "is not available. To enable")


def test_allow_mode_is_refused():
    """jaxkit makes no 64-bit arrays without x64, so 'allow' cannot take effect."""
    with pytest.raises(NotImplementedError, match="jax_explicit_x64_dtypes"):
        jaxkit.config.update("jax_explicit_x64_dtypes", "allow")
    assert kconfig.jax_explicit_x64_dtypes.name == "WARN"


def test_no_warning_with_x64():
    with kconfig.override(jax_enable_x64=True), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert knp.zeros(2, "float64").dtype == np.float64
        assert knp.arange(2, dtype="int64").dtype == np.int64
        assert jaxkit.random.uniform(jaxkit.random.key(0), (2,), "float64").dtype == np.float64


@pytest.mark.parametrize("bad", [object, "S", "zeros array"])
def test_bad_dtypes_match_oracle(bad):
    """A dtype JAX does not support, or an array given as a dtype: JAX's error class and
    text, naming the function."""
    errs = []
    for jnp in (jax.numpy, knp):
        with pytest.raises((TypeError, ValueError)) as e:
            jnp.zeros(2, jnp.zeros(1) if bad == "zeros array" else bad)
        errs.append((type(e.value), str(e.value)))
    assert errs[1] == errs[0]
