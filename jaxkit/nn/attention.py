"""``jax.nn.dot_product_attention``: scaled dot-product attention, as XLA computes it.

Per head: ``softmax(Q K^T * scale + bias) V``, with ``scale = 1/sqrt(H)`` by default. Shapes
are ``query (B, T, N, H)``, ``key``/``value (B, S, K, H)``; ``N`` may be a multiple of ``K``
(grouped-query attention: each key/value head serves ``N / K`` query heads). Masks (``mask``,
``is_causal``, a local window, per-example sequence lengths) replace masked logits by a large
negative number; the softmax runs in float32. Lower-rank inputs get leading axes of size 1.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jaxkit import dtypes
from jaxkit import numpy as jnp
from jaxkit.nn import logsumexp, softmax

__all__ = ["dot_product_attention"]


def _as_4d(t):
    t = jnp.asarray(t)
    return t.reshape((1,) * (4 - t.ndim) + t.shape) if t.ndim < 4 else t


def _check(t, shape: Sequence[int], dtype, name: str) -> None:
    if t is None:
        return
    if t.ndim != len(shape):
        raise ValueError(f"{name} ndim should be {len(shape)}, but got {t.ndim}")
    if dtype is not None and t.dtype != dtype:
        raise ValueError(f"{name} dtype should be {np.dtype(dtype)}, but got {t.dtype}")
    if any(want != -1 and got != want for got, want in zip(t.shape, shape)):
        raise ValueError(f"{name} shape should be {list(shape)}: but got {t.shape}")


def _grouped(t, K: int, G: int):
    """A (B, N or 1, T, S) bias or mask as (B, K, G, T, S)."""
    if t is None:
        return None
    b, n, tt, s = t.shape
    if n == 1:
        return jnp.broadcast_to(t[:, :, None], (b, 1, G, tt, s))
    return t.reshape(b, K, G, tt, s)


def _keep(T: int, S: int, B: int, mask, is_causal: bool, window, q_len, kv_len):
    """Which logits (B, K|1, G|1, T, S) take part, or None when all do."""
    keep = None

    def both(a, b):
        return b if a is None else jnp.logical_and(a, b)

    if mask is not None:
        keep = both(keep, mask)
    rows, cols = np.arange(T)[:, None], np.arange(S)[None, :]
    if is_causal:
        keep = both(keep, jnp.asarray(rows >= cols)[None, None, None])
    if window is not None:
        left, right = window
        keep = both(keep, jnp.asarray((rows <= cols + left) & (rows >= cols - right))
                    [None, None, None])
    if q_len is not None:
        keep = both(keep, (jnp.arange(T)[None, :, None] < q_len[:, None, None])
                    [:, None, None])
    if kv_len is not None:
        keep = both(keep, (jnp.arange(S)[None, None, :] < kv_len[:, None, None])
                    [:, None, None])
    return keep


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal: bool = False, query_seq_lengths=None,
                          key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual: bool = False):
    """Scaled dot-product attention (see the module docstring). With ``return_residual``
    also returns the softmax's log-normaliser, shape ``(B, T, N)``."""
    if implementation not in (None, "xla"):
        raise ValueError(f"dot_product_attention implementation {implementation!r} is not "
                         "available: jaxkit computes attention with XLA ('xla'); 'cudnn' "
                         "needs a CUDA GPU and cuDNN's fused kernel.")
    out_shape = jnp.shape(query)
    q, k, v = _as_4d(query), _as_4d(key), _as_4d(value)
    bias = None if bias is None else _as_4d(bias)
    mask = None if mask is None else _as_4d(mask)
    q_len = None if query_seq_lengths is None else jnp.asarray(query_seq_lengths)
    kv_len = None if key_value_seq_lengths is None else jnp.asarray(key_value_seq_lengths)
    if isinstance(local_window_size, int):
        local_window_size = (local_window_size, local_window_size)
    B, S, K, H = k.shape
    _check(v, [B, S, K, H], k.dtype, "value")
    _check(q, [B, -1, -1, H], k.dtype, "query")
    _check(mask, [-1] * 4, np.dtype(bool), "mask")
    _check(bias, [-1] * 4, None, "bias")
    _check(q_len, [B], np.dtype("int32"), "query_seq_lengths")
    _check(kv_len, [B], np.dtype("int32"), "key_value_seq_lengths")
    T, N = q.shape[1], q.shape[2]
    if N % K:
        raise ValueError(f"The number of query heads must be a multiple of key/value heads, "
                         f"but got {N} vs {K}")
    G = N // K
    scale = 1.0 / np.sqrt(H) if scale is None else scale

    logits_dtype = jnp.promote_types(q.dtype, np.float32)
    logits = jnp.einsum("BTKGH,BSKH->BKGTS", q.reshape(B, T, K, G, H), k,
                        preferred_element_type=logits_dtype)
    logits = logits * jnp.array(scale, dtype=logits.dtype)
    if bias is not None:
        logits = (logits + _grouped(bias, K, G)).astype(logits.dtype)
    keep = _keep(T, S, B, _grouped(mask, K, G), is_causal, local_window_size, q_len, kv_len)
    if keep is not None:
        # Large but finite in float32, where the softmax runs (so debug_infs stays quiet).
        big = min(float(dtypes.finfo(logits.dtype).max), float(np.finfo(np.float32).max))
        logits = jnp.where(keep, logits, jnp.asarray(-0.7 * big, logits.dtype))
    logits32 = logits.astype(np.float32)
    probs = softmax(logits32, axis=-1).astype(k.dtype)
    out = jnp.einsum("BKGTS,BSKH->BTKGH", probs, v)
    if q_len is not None:
        out = out * (jnp.arange(T)[None, :] < q_len[:, None]).astype(out.dtype)[
            :, :, None, None, None]
    out = out.reshape(out_shape)
    if not return_residual:
        return out
    lse = logsumexp(logits32, axis=-1).astype(k.dtype)  # (B, K, G, T)
    lse = jnp.transpose(lse, (0, 3, 1, 2)).reshape(out_shape[:-1])
    return out, lse
