"""``jax.image``: resizing and resampling images (any number of spatial dimensions).

Every method but nearest-neighbour is separable resampling with a kernel: for each resized
dimension an ``(input size, output size)`` weight matrix says how much each input pixel
contributes to each output pixel, and one ``einsum`` applies them all. Output pixel ``j``
samples the input at ``(j + 0.5) / scale - translation / scale - 0.5``; when shrinking with
``antialias`` the kernel is stretched by ``1 / scale`` (a low-pass filter). Weights are
normalised per output pixel, and output pixels that sample outside the input get zero.
``cubic-pytorch`` without antialiasing repeats the edge pixels instead (PyTorch/OpenCV).
Nearest-neighbour picks input pixel ``floor((j + 0.5) * in / out)``.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Sequence

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.transforms.jit import jit

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    """Image resize methods (``jax.image.ResizeMethod``)."""

    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(name: str) -> ResizeMethod:
        for method, names in _NAMES.items():
            if name in names:
                return method
        raise ValueError(f'Unknown resize method "{name}"')


_NAMES = {
    ResizeMethod.NEAREST: ("nearest",),
    ResizeMethod.LINEAR: ("linear", "bilinear", "trilinear", "triangle"),
    ResizeMethod.LANCZOS3: ("lanczos3",),
    ResizeMethod.LANCZOS5: ("lanczos5",),
    ResizeMethod.CUBIC: ("cubic", "bicubic", "tricubic"),
    ResizeMethod.CUBIC_PYTORCH: ("cubic-pytorch", "bicubic-pytorch"),
    ResizeMethod.AREA: ("area",),
}


# ---- kernels: weight of an input pixel at distance x (>= 0) from the sample point ----------


def _triangle(x):
    return jnp.maximum(0.0, 1.0 - x)


def _keys_cubic(x, a: float = -0.5):
    """Keys' cubic convolution kernel (a = -0.5: Pillow/TensorFlow; -0.75: OpenCV)."""
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return jnp.where(x >= 2.0, 0.0, jnp.where(x >= 1.0, far, near))


def _lanczos(radius: float):
    def kernel(x):
        y = radius * jnp.sin(np.pi * x) * jnp.sin(np.pi * x / radius)
        safe = jnp.where(x != 0, np.pi ** 2 * x * x, 1.0)
        # sinc(x) sinc(x/r) is 1 at 0; near 0 the quotient loses precision, so use its limit
        value = jnp.where(x > 1e-3, y / safe, 1.0)
        return jnp.where(x > radius, 0.0, value)
    return kernel


_AREA = "area"  # not a function of distance: the overlap of pixel intervals

# method -> (radius, kernel)
_KERNELS: dict[ResizeMethod, tuple[int, Callable | str]] = {
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)),
    ResizeMethod.CUBIC: (2, _keys_cubic),
    ResizeMethod.CUBIC_PYTORCH: (2, lambda x: _keys_cubic(x, -0.75)),
    ResizeMethod.AREA: (1, _AREA),
}


def _weights(in_size: int, out_size: int, scale, translation, kernel, antialias: bool,
             edge_radius: int | None):
    """The ``(in_size, out_size)`` resampling matrix of one dimension."""
    inv = 1.0 / scale
    out_pos = jnp.arange(out_size, dtype=jnp.result_type(scale, translation))
    sample = (out_pos + 0.5) * inv - translation * inv - 0.5
    if kernel == _AREA:
        left = out_pos * inv - translation * inv
        right = left + inv
        pixels = jnp.arange(in_size, dtype=left.dtype)
        w = jnp.maximum(0.0, jnp.minimum(right[None, :], pixels[:, None] + 1.0)
                        - jnp.maximum(left[None, :], pixels[:, None]))
        return _normalised(w, sample, in_size)
    stretch = jnp.maximum(inv, 1.0) if antialias else 1.0
    pad = edge_radius or 0
    positions = jnp.arange(-pad, in_size + pad, dtype=sample.dtype)
    w = kernel(jnp.abs(sample[None, :] - positions[:, None]) / stretch)
    if not pad:
        return _normalised(w, sample, in_size)
    # Repeat the edges: the weight of a position outside the image goes to the edge pixel.
    edge = jnp.clip(positions.astype(np.int32), 0, in_size - 1)
    folded = jnp.zeros((in_size, out_size), w.dtype).at[edge].add(w)
    return _normalised(folded, None, in_size)


def _normalised(w, sample, in_size: int):
    total = jnp.sum(w, axis=0, keepdims=True)
    eps = 1000.0 * float(np.finfo(np.float32).eps)
    w = jnp.where(jnp.abs(total) > eps, w / jnp.where(total != 0, total, 1.0), 0.0)
    if sample is None:
        return w
    inside = (sample >= -0.5) & (sample <= in_size - 0.5)
    return jnp.where(inside[None, :], w, 0.0)


def _resample(x, shape: tuple[int, ...], dims: Sequence[int], scales, translations,
              method: ResizeMethod, antialias: bool, precision):
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC  # with antialiasing PyTorch's cubic is Keys' a = -0.5
    radius, kernel = _KERNELS[method]
    edge_radius = radius if method == ResizeMethod.CUBIC_PYTORCH else None
    if not dims:
        return x
    operands, out_labels = [], list(range(x.ndim))
    for i, d in enumerate(dims):
        w = _weights(x.shape[d], shape[d], scales[i], translations[i], kernel, antialias,
                     edge_radius).astype(x.dtype)
        operands += [w, [d, x.ndim + i]]
        out_labels[d] = x.ndim + i
    return jnp.einsum(x, list(range(x.ndim)), *operands, out_labels, precision=precision)


def _method_of(method) -> ResizeMethod:
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    if not isinstance(method, ResizeMethod):
        raise TypeError(f"method must be a string or a ResizeMethod, got {method!r}")
    return method


def _check_rank(image, shape) -> tuple[int, ...]:
    shape = tuple(int(core.concrete_or_error(s, "the output shape")) for s in shape)
    if len(shape) != np.ndim(image):
        raise ValueError(f"shape must have length equal to the number of dimensions of x;  "
                         f"{shape} vs {np.shape(image)}")
    return shape


def _resize_nearest(x, shape: tuple[int, ...]):
    for d, (m, n) in enumerate(zip(x.shape, shape)):
        if m == n:
            continue
        # float32 on purpose, as JAX computes these offsets
        picks = np.floor(((np.arange(n, dtype=np.float32) + 0.5) * np.float32(m)
                          / np.float32(n)).astype(np.float32)).astype(np.int32)
        index = [slice(None)] * x.ndim
        index[d] = picks
        x = x[tuple(index)]
    return x


@jit(static_argnums=(1, 2, 3, 4))
def _resize(image, shape, method, antialias, precision):
    if method == ResizeMethod.NEAREST:
        return _resize_nearest(jnp.asarray(image), shape)
    x = jnp.asarray(image)
    if not dtypes.issubdtype(x.dtype, np.inexact):
        x = x.astype(dtypes.canonicalize_dtype(np.float64))
    dims = [d for d in range(x.ndim) if x.shape[d] != shape[d]]
    scales = [1.0 if shape[d] == 0 else shape[d] / x.shape[d] for d in dims]
    return _resample(x, shape, dims, scales, [0.0] * len(dims), method, antialias, precision)


def resize(image, shape: Sequence[int], method: str | ResizeMethod, antialias: bool = True,
           precision=lax.Precision.HIGHEST):
    """``image`` resampled to ``shape`` (every dimension whose size changes is resized).
    Methods: ``nearest``, ``linear``, ``lanczos3``, ``lanczos5``, ``cubic``,
    ``cubic-pytorch``, ``area``; all but ``nearest`` return a floating-point image."""
    return _resize(image, _check_rank(image, shape), _method_of(method), bool(antialias),
                   precision)


def scale_and_translate(image, shape: Sequence[int], spatial_dims: Sequence[int], scale,
                        translation, method: str | ResizeMethod, antialias: bool = True,
                        precision=lax.Precision.HIGHEST):
    """Resample ``image`` to ``shape``: along ``spatial_dims[i]``, input location ``p`` maps
    to output location ``p * scale[i] + translation[i]`` (``scale`` and ``translation`` may
    be traced, so they can be learned)."""
    shape = _check_rank(image, shape)
    method = _method_of(method)
    if method == ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for "
                         "scale_and_translate.")
    x = jnp.asarray(image)
    if not dtypes.issubdtype(x.dtype, np.inexact):
        x = x.astype(dtypes.canonicalize_dtype(np.float64))
    scale, translation = jnp.asarray(scale), jnp.asarray(translation)
    if not dtypes.issubdtype(scale.dtype, np.inexact):
        scale = scale.astype(x.dtype)
    if not dtypes.issubdtype(translation.dtype, np.inexact):
        translation = translation.astype(x.dtype)
    dims = [d % x.ndim for d in spatial_dims]
    for name, v in (("scale", scale), ("translation", translation)):
        if v.shape != (len(dims),):
            raise ValueError(f"{name} needs one entry per spatial dimension ({len(dims)}), "
                             f"got shape {v.shape}")
    return _resample(x, shape, dims, [scale[i] for i in range(len(dims))],
                     [translation[i] for i in range(len(dims))], method, antialias, precision)
