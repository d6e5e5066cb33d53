"""``lax.fft`` (the ``stablehlo.fft`` primitive) against NumPy and the JAX oracle: values,
dtypes, jit vs eager, vmap vs a loop, and float64 gradients (JVP and VJP, numerically and
against JAX's) for every transform type and 1-3 transformed axes."""
from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_grads

import jaxkit
import jaxkit.numpy as jnp
from jaxkit import lax

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", False)


def _rng(shape, dtype, seed=0):
    r = np.random.RandomState(seed)
    x = r.randn(*shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * r.randn(*shape)
    return x.astype(dtype)


def _np_ref(x, fft_type, lengths):
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    if fft_type == "fft":
        return np.fft.fftn(x, lengths, axes)
    if fft_type == "ifft":
        return np.fft.ifftn(x, lengths, axes)
    if fft_type == "rfft":
        return np.fft.rfftn(x, lengths, axes)
    return np.fft.irfftn(x, lengths, axes)


# (fft_type, input shape, input dtype, fft_lengths)
RECORDS = [
    ("fft", (8,), np.complex64, (8,)),
    ("fft", (3, 5), np.complex64, (5,)),
    ("fft", (2, 4, 6), np.complex64, (4, 6)),
    ("fft", (2, 3, 4, 5), np.complex64, (3, 4, 5)),
    ("ifft", (3, 7), np.complex64, (7,)),
    ("ifft", (4, 6), np.complex64, (4, 6)),
    ("rfft", (3, 8), np.float32, (8,)),
    ("rfft", (3, 7), np.float32, (7,)),
    ("rfft", (2, 4, 6), np.float32, (4, 6)),
    ("irfft", (3, 5), np.complex64, (8,)),
    ("irfft", (3, 4), np.complex64, (7,)),
    ("irfft", (2, 4, 4), np.complex64, (4, 6)),
]
IDS = [f"{t}-{s}-{n}" for t, s, _, n in RECORDS]


@pytest.mark.parametrize("typ,shape,dtype,lengths", RECORDS, ids=IDS)
def test_values_and_dtype_vs_numpy_and_jax(typ, shape, dtype, lengths):
    x = _rng(shape, dtype)
    out = lax.fft(x, typ, lengths)
    ref = jax.lax.fft(x, typ, lengths)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    np.testing.assert_allclose(np.asarray(out), _np_ref(x.astype(np.complex128)
                                                        if typ != "rfft" else x, typ, lengths),
                               rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("typ,shape,dtype,lengths", RECORDS, ids=IDS)
def test_jit_matches_eager(typ, shape, dtype, lengths):
    x = _rng(shape, dtype, 1)
    f = lambda v: lax.fft(v, typ, lengths)  # noqa: E731
    np.testing.assert_allclose(np.asarray(jaxkit.jit(f)(x)), np.asarray(f(x)),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("typ,shape,dtype,lengths", RECORDS, ids=IDS)
def test_vmap_matches_loop(typ, shape, dtype, lengths):
    x = _rng((3,) + shape, dtype, 2)
    f = lambda v: lax.fft(v, typ, lengths)  # noqa: E731
    for axis in (0, len(shape) - len(lengths)):
        xs = np.moveaxis(x, 0, axis)
        got = jaxkit.vmap(f, in_axes=axis)(xs)
        want = np.stack([np.asarray(f(np.take(xs, i, axis))) for i in range(3)])
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("typ,shape,dtype,lengths", RECORDS, ids=IDS)
def test_grads_float64(typ, shape, dtype, lengths):
    dt = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    x = _rng(shape, dt, 3)
    f = lambda v: lax.fft(v, typ, lengths)  # noqa: E731
    with jaxkit.config.override(jax_enable_x64=True):
        check_grads(f, (x,), order=1, modes=("fwd", "rev"))


@pytest.mark.parametrize("typ,shape,dtype,lengths", RECORDS, ids=IDS)
def test_vjp_matches_jax(typ, shape, dtype, lengths):
    x = _rng(shape, dtype, 4)
    out, vjp = jaxkit.vjp(lambda v: lax.fft(v, typ, lengths), x)
    ct = _rng(out.shape, out.dtype, 5)
    _, jvjp = jax.vjp(lambda v: jax.lax.fft(v, typ, lengths), x)
    np.testing.assert_allclose(np.asarray(vjp(ct)[0]), np.asarray(jvjp(ct)[0]),
                               rtol=1e-4, atol=1e-4)


def test_fft_type_enum_and_errors():
    x = _rng((4,), np.complex64)
    np.testing.assert_allclose(np.asarray(lax.fft(x, lax.FftType.FFT, (4,))),
                               np.fft.fft(x), rtol=1e-5, atol=1e-5)
    assert int(lax.FftType.IRFFT) == int(jax.lax.FftType.IRFFT)
    with pytest.raises(ValueError, match="Unknown FFT type"):
        lax.fft(x, "dft", (4,))
    with pytest.raises(ValueError, match="real valued"):
        lax.fft(x, "rfft", (4,))
    with pytest.raises(ValueError):
        lax.fft(x, "fft", (5,))


def test_jnp_fft_uses_the_primitive_and_scales():
    x = _rng((1 << 16,), np.float32)
    jaxpr = jaxkit.make_jaxpr(jnp.fft.fft)(x)
    assert "fft" in str(jaxpr) and "dot_general" not in str(jaxpr)
    np.testing.assert_allclose(np.asarray(jnp.fft.fft(x)), np.fft.fft(x), rtol=1e-3, atol=2e-2)
