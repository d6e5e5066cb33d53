"""jaxkit.ffi: a real XLA FFI handler compiled here with g++ against jaxlib's headers, registered
through a ctypes PyCapsule and called eagerly, under jit and under vmap with every vmap_method
(compared with NumPy); jaxprs, lowerings and errors compared with the JAX oracle."""
import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

import jaxkit
from jaxkit import export, ffi
from jaxkit.interpreters import partial_eval as pe

_HANDLER = r"""
#include <cstdint>
#include "xla/ffi/api/ffi.h"
namespace ffi = xla::ffi;
// y[r, j] = scale * sum_{k<=j} x[r, k] along the last axis; every leading axis is a row.
static ffi::Error RowCumsumImpl(float scale, ffi::Buffer<ffi::F32> x,
                                ffi::ResultBuffer<ffi::F32> y) {
  auto dims = x.dimensions();
  if (dims.size() == 0) return ffi::Error::InvalidArgument("row_cumsum: rank 0 input");
  int64_t n = dims.back();
  int64_t total = static_cast<int64_t>(x.element_count());
  for (int64_t r = 0; n > 0 && r < total / n; ++r) {
    float acc = 0.f;
    for (int64_t j = 0; j < n; ++j) {
      acc += x.typed_data()[r * n + j];
      y->typed_data()[r * n + j] = scale * acc;
    }
  }
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(RowCumsum, RowCumsumImpl,
    ffi::Ffi::Bind().Attr<float>("scale").Arg<ffi::Buffer<ffi::F32>>()
        .Ret<ffi::Buffer<ffi::F32>>());
"""

TARGET = "jaxkit_test_row_cumsum"


@pytest.fixture(scope="module")
def row_cumsum(tmp_path_factory):
    """The compiled handler, registered once for the process."""
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("g++ is needed to build the FFI test handler")
    folder = tmp_path_factory.mktemp("ffi")
    (folder / "row_cumsum.cc").write_text(_HANDLER)
    lib_path = folder / "librow_cumsum.so"
    subprocess.run([compiler, "-std=c++17", "-O1", "-shared", "-fPIC", "-w",
                    f"-I{ffi.include_dir()}", str(folder / "row_cumsum.cc"), "-o",
                    str(lib_path)], check=True, capture_output=True, timeout=300)
    lib = ctypes.cdll.LoadLibrary(str(lib_path))
    ffi.register_ffi_target(TARGET, ffi.pycapsule(lib.RowCumsum), platform="cpu")
    return lib


def _call(x, method="sequential", lib=jaxkit, scale=2.0):
    return lib.ffi.ffi_call(TARGET, lib.ShapeDtypeStruct(x.shape, x.dtype),
                            vmap_method=method)(x, scale=np.float32(scale))


def _want(x, scale=2.0):
    return scale * np.cumsum(np.asarray(x), axis=-1)


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
def test_eager_and_jit_match_numpy(row_cumsum, shape):
    x = X.reshape(-1)[:int(np.prod(shape))].reshape(shape)
    np.testing.assert_allclose(_call(x), _want(x), rtol=1e-6)
    np.testing.assert_allclose(jaxkit.jit(_call)(x), _want(x), rtol=1e-6)
    np.testing.assert_allclose(jaxkit.jit(lambda x: _call(x, scale=-0.5))(x),
                               _want(x, -0.5), rtol=1e-6)


@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled", "expand_dims",
                                    "broadcast_all", "legacy_vectorized"])
@pytest.mark.parametrize("in_axes", [0, 1])
def test_vmap_methods_match_a_python_loop(row_cumsum, method, in_axes):
    x = X[0] if in_axes == 0 else X[0].T.copy()  # a (3, 4) batch of rows along in_axes
    got = jaxkit.vmap(lambda r: _call(r, method), in_axes=in_axes)(x)
    rows = [x[i] if in_axes == 0 else x[:, i] for i in range(x.shape[in_axes])]
    np.testing.assert_allclose(got, np.stack([_want(r) for r in rows]), rtol=1e-6)
    nested = jaxkit.jit(jaxkit.vmap(jaxkit.vmap(lambda r: _call(r, method))))(X)
    np.testing.assert_allclose(nested, _want(X), rtol=1e-6)


def test_unbatched_operand_under_vmap(row_cumsum):
    def f(a, b):
        return ffi.ffi_call(TARGET, jaxkit.ShapeDtypeStruct(a.shape, a.dtype),
                            vmap_method="broadcast_all")(a + b, scale=np.float32(1.0))
    got = jaxkit.vmap(f, in_axes=(0, None))(X[0], np.ones(4, np.float32))
    np.testing.assert_allclose(got, np.cumsum(X[0] + 1, axis=-1), rtol=1e-6)


def test_jaxpr_and_lowering_match_jax():
    jax = pytest.importorskip("jax")
    x = X[0]
    assert str(jaxkit.make_jaxpr(_call)(x)) == str(jax.make_jaxpr(
        lambda x: _call(x, lib=jax))(x))
    batched = jaxkit.make_jaxpr(jaxkit.vmap(lambda r: _call(r, "expand_dims")))(x)
    want = jax.make_jaxpr(jax.vmap(lambda r: _call(r, "expand_dims", lib=jax)))(x)
    assert str(batched) == str(want)

    def custom_call_line(text):
        return next(line.strip() for line in text.splitlines() if "custom_call" in line)

    attrs = dict(i=3, f=0.5, b=True, s="text", i8=np.int8(-2), u=np.uint32(7),
                 arr=np.arange(3, dtype=np.int32), d={"k": np.float32(1.5)}, t=(1, 2))

    def with_attrs(lib):
        return lambda x: lib.ffi.ffi_call(
            "not_registered", lib.ShapeDtypeStruct(x.shape, x.dtype), has_side_effect=True,
            input_layouts=[(1, 0)], output_layouts=(0, 1))(x, **attrs)
    got = custom_call_line(jaxkit.jit(with_attrs(jaxkit)).lower(x).as_text())
    assert got == custom_call_line(jax.jit(with_attrs(jax)).lower(x).as_text())


def test_side_effects_survive_dead_code_elimination(row_cumsum):
    x = X[0]

    def f(x, effect):
        ffi.ffi_call(TARGET, jaxkit.ShapeDtypeStruct(x.shape, x.dtype),
                     has_side_effect=effect)(x, scale=np.float32(1))
        return x + 1
    for effect in (True, False):
        closed = jaxkit.make_jaxpr(lambda x: f(x, effect))(x)
        jaxpr, _ = pe.dce_jaxpr(closed.jaxpr)
        assert ("ffi_call" in str(jaxpr)) == effect
        hlo = jaxkit.jit(lambda x: f(x, effect)).lower(x).compile().as_text()
        assert (TARGET in hlo) == effect
        np.testing.assert_allclose(jaxkit.jit(lambda x: f(x, effect))(x), x + 1)


def test_errors_match_jax(row_cumsum):
    jax = pytest.importorskip("jax")
    x = X[0]
    cases = [
        lambda lib: lib.grad(lambda x: _call(x, lib=lib).sum())(x),
        lambda lib: lib.vmap(lambda r: _call(r, None, lib=lib))(x),
        lambda lib: lib.ffi.ffi_call(TARGET, x, vmap_method="bogus"),
        lambda lib: lib.ffi.ffi_call(TARGET, ["not an array"]),
        lambda lib: lib.ffi.ffi_call(TARGET, x, input_output_aliases={0: 0})(x[:, :2]),
        lambda lib: lib.ffi.ffi_call(TARGET, x, input_output_aliases={1: 0})(x),
        lambda lib: lib.ffi.ffi_call(TARGET, x, input_layouts=[None, None])(x),
        lambda lib: lib.ffi.ffi_call(TARGET, x, legacy_backend_config="c"),
        lambda lib: lib.ffi.register_ffi_type_id("t", None),
    ]
    for case in cases:
        with pytest.raises(Exception) as want:
            case(jax)
        with pytest.raises(type(want.value)) as got:
            case(jaxkit)
        assert str(got.value) == str(want.value)


def test_export_needs_the_custom_call_check_disabled(row_cumsum):
    f = jaxkit.jit(_call)
    with pytest.raises(ValueError, match=f"custom_call @{TARGET}"):
        export.export(f)(X[0])
    exp = export.export(f, disabled_checks=[export.DisabledSafetyCheck.custom_call(TARGET)])(
        X[0])
    back = export.deserialize(exp.serialize())
    np.testing.assert_allclose(back.call(X[0]), _want(X[0]), rtol=1e-6)


def test_helpers():
    assert os.path.exists(os.path.join(ffi.include_dir(), "xla", "ffi", "api", "ffi.h"))
    fn = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0)
    assert type(ffi.pycapsule(fn)).__name__ == "PyCapsule"
    jax = pytest.importorskip("jax")
    public = {n for n in dir(jax.ffi) if not n.startswith("_") and callable(getattr(jax.ffi, n))}
    assert public <= set(ffi.__all__), public - set(ffi.__all__)


def test_registration_entry_points(row_cumsum):
    ffi.register_ffi_target_as_batch_partitionable(TARGET)  # accepted by jaxlib's registry
    with pytest.raises(TypeError, match="non-empty str"):
        ffi.register_ffi_target("", ffi.pycapsule(row_cumsum.RowCumsum))


def test_ffi_call_results_are_replicated_over_an_explicit_mesh_as_in_jax():
    # No handler is needed: the result's type is decided when tracing, and an unregistered
    # target fails only when the program is compiled (XLA's NOT_FOUND, as in JAX).
    jax = pytest.importorskip("jax")

    def typed(lib):
        mesh = lib.make_mesh((1,), ("x",), axis_types=(lib.sharding.AxisType.Explicit,))
        x = lib.device_put(np.ones((8, 4), np.float32), lib.NamedSharding(mesh, lib.P("x")))
        call = lib.ffi.ffi_call("not_registered", lib.ShapeDtypeStruct(x.shape, x.dtype))
        types = []
        lib.jit(lambda x: types.append(str(lib.typeof(call(x)))) or x).trace(x)
        with pytest.raises(Exception) as err:
            lib.jit(call)(x)
        return types, err.type.__name__, str(err.value).split(":")[0]

    assert typed(jaxkit) == typed(jax)
