"""jaxkit.dlpack / jnp.from_dlpack / Array.__dlpack__ against the JAX oracle and NumPy, and the
jax.stages names ArgInfo and CompilerOptions."""
import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp

jax = pytest.importorskip("jax")

SOURCES = [
    np.arange(6, dtype=np.float32).reshape(2, 3),
    np.arange(4, dtype=np.int64),  # canonicalized to int32 without x64, as JAX does
    np.array([True, False]),
    np.arange(3.0),
    np.zeros((0, 2), np.uint8),
    np.arange(8, dtype=np.complex64).reshape(2, 2, 2),
    np.array(7, np.int8),
]


@pytest.mark.parametrize("x", SOURCES, ids=lambda x: f"{x.dtype}{list(x.shape)}")
@pytest.mark.parametrize("copy", [None, True])
def test_from_dlpack_matches_jax(x, copy):
    got = jaxkit.dlpack.from_dlpack(x, copy=copy)
    want = jax.dlpack.from_dlpack(x, copy=copy)
    assert repr(got) == repr(want)
    assert repr(jnp.from_dlpack(x, copy=copy)) == repr(jax.numpy.from_dlpack(x, copy=copy))
    assert got.__dlpack_device__() == want.__dlpack_device__()


@pytest.mark.parametrize("x", SOURCES, ids=lambda x: f"{x.dtype}{list(x.shape)}")
def test_numpy_reads_jaxkit_arrays(x):
    a = jnp.asarray(x) * 1
    back = np.from_dlpack(a)
    np.testing.assert_array_equal(back, np.asarray(a))
    assert back.dtype == a.dtype
    copied = np.from_dlpack(_Capsule(a.__dlpack__(copy=True), a.__dlpack_device__()))
    np.testing.assert_array_equal(copied, np.asarray(a))
    again = jaxkit.dlpack.from_dlpack(a)  # jaxkit -> DLPack -> jaxkit
    assert (again.dtype, again.shape) == (a.dtype, a.shape)
    np.testing.assert_array_equal(again, a)


class _Capsule:
    """A DLPack producer handing out a capsule made earlier."""

    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def test_from_dlpack_shares_memory_unless_copied():
    x = np.arange(4, dtype=np.float32)
    shared, copied = jnp.from_dlpack(x), jnp.from_dlpack(x, copy=True)
    x[0] = 100.0  # DLPack memory is not immutable: JAX documents the same sharing
    assert float(copied[0]) == 0.0
    assert float(shared[0]) in (0.0, 100.0)  # aliased when the CPU client can


def test_errors_match_jax():
    cases = [lambda lib: lib.dlpack.is_supported_dtype(None),
             lambda lib: lib.numpy.from_dlpack([1, 2])]
    for case in cases:
        with pytest.raises(Exception) as want:
            case(jax)
        with pytest.raises(type(want.value)) as got:
            case(jaxkit)
        assert str(got.value) == str(want.value)
    with pytest.raises(BufferError, match="device_put the array there first"):
        jnp.ones(2).__dlpack__(dl_device=(2, 0))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int4", "float16", "uint64", "bool",
                                   "complex128", "float8_e4m3fn", np.dtype("V4")])
def test_is_supported_dtype_matches_jax(dtype):
    dtype = getattr(jnp, dtype) if isinstance(dtype, str) and hasattr(jnp, dtype) else dtype
    assert jaxkit.dlpack.is_supported_dtype(dtype) == jax.dlpack.is_supported_dtype(dtype)


def test_stages_arg_info_and_compiler_options():
    spec = jaxkit.ShapeDtypeStruct((3,), np.float32)
    k = jaxkit.stages.ArgInfo(spec, False)
    j = jax.stages.ArgInfo(jax.ShapeDtypeStruct((3,), np.float32), False)
    assert (repr(k), k.shape, k.dtype, k.donated) == (repr(j), j.shape, j.dtype, j.donated)
    with pytest.raises(TypeError, match="No shape attribute"):
        jaxkit.stages.ArgInfo(object(), True).shape
    assert str(jaxkit.stages.CompilerOptions) == str(jax.stages.CompilerOptions)
