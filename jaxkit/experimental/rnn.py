"""``jax.experimental.rnn``: LSTMs with cuDNN's weight layout.

``lstm`` is cuDNN's fused kernel: its primitive (``rnn_fwd``) needs the GPU library even to
know its workspace size, so on the backends jaxkit runs it raises NotImplementedError naming
that rule (JAX, without its CUDA plugin, fails at the same point). The rest is ordinary array
code and runs anywhere: ``lstm_ref`` (the same computation with ``lax.scan``), the weight
helpers (``init_lstm_weight``, ``unpack_lstm_weights``, ``swap_lstm_gates``,
``get_num_params_in_lstm``).

Weights are one flat vector, cuDNN's layout: for each pseudo-layer (layer x direction) the
input and hidden matrices ``W_ih`` ``(4 * hidden, in)`` and ``W_hh`` ``(4 * hidden, hidden)``,
then for each pseudo-layer the biases ``b_ih`` and ``b_hh`` ``(4 * hidden,)``; the four gate
blocks are stacked in the order input, forget, cell, output. Inputs are batch-first.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from jaxkit import core, lax, random
from jaxkit import numpy as jnp
from jaxkit.api import vmap
from jaxkit.lax.dot import Precision, canonicalize_precision
from jaxkit.nn import sigmoid, tanh
from jaxkit.runtime.array import PublicArray as Array
from jaxkit.transforms.custom_vjp import custom_vjp
from jaxkit.transforms.jit import jit

__all__ = ["get_num_params_in_lstm", "init_lstm_weight", "lstm", "lstm_bwd", "lstm_fwd",
           "lstm_ref", "rnn_abstract_eval", "rnn_bwd_abstract_eval", "rnn_bwd_p", "rnn_fwd_p",
           "swap_lstm_gates", "unpack_lstm_weights",
           # names JAX's module imports
           "Array", "custom_vjp", "sigmoid", "tanh"]

Shape = tuple[int, ...]


def _param_shapes(input_size: int, hidden_size: int, num_layers: int,
                  bidirectional: bool) -> list[Shape]:
    """The shapes of the flat weight vector's pieces, in order (see the module docstring)."""
    directions = 2 if bidirectional else 1
    pseudo_layers = range(num_layers * directions)
    shapes: list[Shape] = []
    for i in pseudo_layers:
        # The first layer (both directions) reads the input; later ones the previous
        # layer's outputs, concatenated over directions.
        fan_in = input_size if i < directions else directions * hidden_size
        shapes += [(4 * hidden_size, fan_in), (4 * hidden_size, hidden_size)]
    for _ in pseudo_layers:
        shapes += [(4 * hidden_size,), (4 * hidden_size,)]
    return shapes


def get_num_params_in_lstm(input_size: int, hidden_size: int, num_layers: int,
                           bidirectional: bool) -> int:
    """The length of the flat weight vector of such an LSTM."""
    return sum(math.prod(s) for s in _param_shapes(input_size, hidden_size, num_layers,
                                                    bidirectional))


def init_lstm_weight(rng: Any, input_size: int, hidden_size: int, num_layers: int,
                     bidirectional: bool) -> Array:
    """A flat float32 weight vector drawn from U(-k, k), k = sqrt(1 / hidden_size)."""
    n = get_num_params_in_lstm(input_size, hidden_size, num_layers, bidirectional)
    k = np.sqrt(1.0 / hidden_size)
    return random.uniform(rng, shape=(n,), dtype=jnp.float32, minval=-k, maxval=k)


def swap_lstm_gates(weights: Any, input_size: int, hidden_size: int, num_layers: int,
                    bidirectional: bool) -> Array:
    """``weights`` with the cell and output gate blocks (the third and fourth) swapped in
    every matrix and bias, walking the pieces layer by layer and direction by direction."""
    weights = jnp.asarray(weights)
    shapes = iter(_param_shapes(input_size, hidden_size, num_layers, bidirectional))
    offset = 0
    for _ in range(num_layers * (2 if bidirectional else 1) * 4):
        shape = next(shapes)
        size = math.prod(shape)
        i, f, g, o = jnp.split(weights[offset:offset + size].reshape(shape), 4, axis=0)
        weights = weights.at[offset:offset + size].set(
            jnp.concatenate([i, f, o, g], axis=0).ravel())
        offset += size
    return weights


def unpack_lstm_weights(weights: Array, input_size: int, hidden_size: int, num_layers: int,
                        bidirectional: bool) -> tuple[dict[int, Array], dict[int, Array],
                                                      dict[int, Array], dict[int, Array]]:
    """``(W_ih, W_hh, b_ih, b_hh)``, dicts by pseudo-layer (``2 * layer + direction`` when
    bidirectional) of the pieces of the flat vector ``weights``."""
    shapes = iter(_param_shapes(input_size, hidden_size, num_layers, bidirectional))
    W_ih: dict[int, Array] = {}  # noqa: N806  (cuDNN's and PyTorch's names)
    W_hh: dict[int, Array] = {}  # noqa: N806
    b_ih: dict[int, Array] = {}
    b_hh: dict[int, Array] = {}
    offset = 0
    pseudo_layers = range(num_layers * (2 if bidirectional else 1))
    for pieces in ((W_ih, W_hh), (b_ih, b_hh)):
        for layer in pseudo_layers:
            for piece in pieces:
                shape = next(shapes)
                size = math.prod(shape)
                piece[layer] = weights[offset:offset + size].reshape(shape)
                offset += size
    return W_ih, W_hh, b_ih, b_hh


# --------------------------------------------------------------------------------------------
# The reference implementation
# --------------------------------------------------------------------------------------------


def _cell(carry, x, *, W_ih, W_hh, b_ih, b_hh):  # noqa: N803
    h, c = carry
    gates = x @ W_ih.T + b_ih[None] + h @ W_hh.T + b_hh[None]
    i, f, g, o = jnp.split(gates, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * tanh(g)
    h = sigmoid(o) * tanh(c)
    return (h, c), h


def _run_layer(params: tuple, h0, c0, xs, seq_lengths):
    """One direction of one layer over time-major ``xs``: the carry at each sequence's last
    step, and the outputs with the steps past each sequence's end zeroed."""
    W_ih, W_hh, b_ih, b_hh = params  # noqa: N806
    cell = functools.partial(_cell, W_ih=W_ih, W_hh=W_hh, b_ih=b_ih, b_hh=b_hh)

    def step(carry, x):
        carry, y = cell(carry, x)
        return carry, (carry, y)  # every carry, to pick each sequence's last one after

    _, ((hs, cs), ys) = lax.scan(step, (h0, c0), xs)
    batch = jnp.arange(hs.shape[1])
    h_last, c_last = hs[seq_lengths - 1, batch], cs[seq_lengths - 1, batch]
    valid = seq_lengths[None] > jnp.arange(ys.shape[0], dtype=jnp.int32)[:, None]
    return (h_last, c_last), jnp.where(valid[..., None], ys, 0)


def _reverse_valid(xs, seq_lengths):
    """Each sequence's valid steps reversed in time, its padding kept at the end."""
    roll = functools.partial(jnp.roll, axis=0)
    return vmap(roll, in_axes=(1, 0), out_axes=1)(xs, xs.shape[0] - seq_lengths)[::-1]


@functools.partial(jit, static_argnums=(8, 9, 10, 11, 12))
def lstm_ref(x: Array, h_0: Array, c_0: Array, W_ih: dict[int, Array],  # noqa: N803
             W_hh: dict[int, Array], b_ih: dict[int, Array], b_hh: dict[int, Array],
             seq_lengths: Array, input_size: int, hidden_size: int, num_layers: int,
             dropout: float, bidirectional: bool) -> tuple[Array, Array, Array]:
    """The LSTM computed with ``lax.scan`` (PyTorch's ``torch.nn.LSTM`` equations): ``(y,
    h_n, c_n)`` for batch-first ``x`` ``(batch, time, input_size)``, initial states
    ``(layers * directions, batch, hidden_size)`` and int32 ``seq_lengths`` ``(batch,)``."""
    if seq_lengths.dtype != jnp.dtype("int32"):
        raise NotImplementedError("`seq_lengths` can only be int32.")
    if dropout != 0.0:
        raise NotImplementedError("Dropout not supported in LSTM reference because we cannot "
                                  "determine CUDNN dropout mask.")
    directions = 2 if bidirectional else 1
    ys = x.transpose(1, 0, 2)  # time-major for scan
    h_n, c_n = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(directions):
            i = layer * directions + d
            params = (W_ih[i], W_hh[i], b_ih[i], b_hh[i])
            inp = ys if d == 0 else _reverse_valid(ys, seq_lengths)
            (h, c), out = _run_layer(params, h_0[i], c_0[i], inp, seq_lengths)
            outs.append(out if d == 0 else _reverse_valid(out, seq_lengths))
            h_n.append(h)
            c_n.append(c)
        ys = outs[0] if directions == 1 else jnp.concatenate(outs, axis=-1)
    return ys.transpose(1, 0, 2), jnp.stack(h_n), jnp.stack(c_n)


# --------------------------------------------------------------------------------------------
# cuDNN's fused LSTM
# --------------------------------------------------------------------------------------------


def _lstm_cudnn_allow_tf32(precision: Any) -> bool:
    """Whether cuDNN may use TF32 for ``precision`` (one setting for the whole op)."""
    precision = canonicalize_precision(precision)
    if precision is None or not (isinstance(precision, tuple) and len(precision) == 2):
        return True
    if precision[0] is Precision.HIGHEST:
        return False
    if precision[0] is Precision.HIGH:
        return True
    if precision[0] is Precision.DEFAULT:
        raise NotImplementedError("bfloat16 support not implemented for LSTM")
    raise ValueError(f"Unexpected precision specifier value {precision}")


def _no_cudnn(name: str, rule: str = "abstract evaluation") -> NotImplementedError:
    return NotImplementedError(
        f"{rule} rule for '{name}': cuDNN's fused LSTM needs the GPU library (its workspace "
        "size comes from cuDNN), which jaxkit's backends lack; use "
        "jax.experimental.rnn.lstm_ref (unpack the weights with unpack_lstm_weights)")


def rnn_abstract_eval(x_aval, h_0_aval, c_0_aval, w_aval, seq_lengths_aval, input_size: int,
                      hidden_size: int, num_layers: int, dropout: float, bidirectional: bool,
                      cudnn_allow_tf32: bool):
    """The types of ``rnn_fwd``'s results; its reserve space's size is cuDNN's to say."""
    raise _no_cudnn("rnn_fwd")


def rnn_bwd_abstract_eval(dy_aval, dhn_aval, dcn_aval, x_aval, h0_aval, c0_aval, w_aval,
                          y_aval, reserve_space_aval, seq_lengths_aval, input_size: int,
                          hidden_size: int, num_layers: int, dropout: float,
                          bidirectional: bool, cudnn_allow_tf32: bool):
    """``rnn_bwd``'s results have the types of the inputs they are the cotangents of."""
    return x_aval, h0_aval, c0_aval, w_aval


rnn_fwd_p = core.Primitive("rnn_fwd")
rnn_fwd_p.multiple_results = True
rnn_fwd_p.def_abstract_eval(rnn_abstract_eval)
rnn_bwd_p = core.Primitive("rnn_bwd")
rnn_bwd_p.multiple_results = True
rnn_bwd_p.def_abstract_eval(rnn_bwd_abstract_eval)


# No lowering: both are cuDNN custom calls (GPU only), so eager evaluation says so too.
def _no_cudnn_impl(name: str):
    def impl(*args, **params):
        raise _no_cudnn(name, "eager evaluation")
    return impl


rnn_fwd_p.def_impl(_no_cudnn_impl("rnn_fwd"))
rnn_bwd_p.def_impl(_no_cudnn_impl("rnn_bwd"))


@functools.partial(custom_vjp, nondiff_argnums=(5, 6, 7, 8, 9, 10))
def lstm(x: Array, h_0: Array, c_0: Array, weights: Array, seq_lengths: Array,
         input_size: int, hidden_size: int, num_layers: int, dropout: float,
         bidirectional: bool, precision: Any = None) -> tuple[Array, Array, Array]:
    """cuDNN's LSTM, ``(y, h_n, c_n)``, with batch-first ``x`` and the flat ``weights`` (see
    the module docstring). GPU only: elsewhere it raises NotImplementedError."""
    (y, h_n, c_n), _ = lstm_fwd(x, h_0, c_0, weights, seq_lengths, input_size=input_size,
                                hidden_size=hidden_size, num_layers=num_layers,
                                dropout=dropout, bidirectional=bidirectional,
                                precision=precision)
    return y, h_n, c_n


def lstm_fwd(x: Array, h_0: Array, c_0: Array, w: Array, seq_lengths: Array, input_size: int,
             hidden_size: int, num_layers: int, dropout: float, bidirectional: bool,
             precision: Any):
    """``lstm``'s forward rule: its results and the residuals cuDNN's backward pass reads."""
    if seq_lengths.dtype != jnp.dtype("int32"):
        raise NotImplementedError("`seq_lengths` can only be int32.")
    allow_tf32 = _lstm_cudnn_allow_tf32(precision)
    y, h_n, c_n, reserve_space = rnn_fwd_p.bind(
        x, h_0, c_0, w, seq_lengths, input_size=input_size, hidden_size=hidden_size,
        num_layers=num_layers, dropout=dropout, bidirectional=bidirectional,
        cudnn_allow_tf32=allow_tf32)
    return (y, h_n, c_n), (x, h_0, c_0, w, seq_lengths, y, reserve_space)


def lstm_bwd(input_size: int, hidden_size: int, num_layers: int, dropout: float,
             bidirectional: bool, precision: Any, residuals, gradients):
    """``lstm``'s backward rule: cuDNN's backward kernel on the residuals."""
    allow_tf32 = _lstm_cudnn_allow_tf32(precision)
    x, h_0, c_0, w, seq_lengths, y, reserve_space = residuals
    dy, dh_n, dc_n = gradients
    dx, dh_0, dc_0, dw = rnn_bwd_p.bind(
        dy, dh_n, dc_n, x, h_0, c_0, w, y, reserve_space, seq_lengths,
        input_size=input_size, hidden_size=hidden_size, num_layers=num_layers,
        dropout=dropout, bidirectional=bidirectional, cudnn_allow_tf32=allow_tf32)
    return dx, dh_0, dc_0, dw, jnp.zeros_like(seq_lengths)


lstm.defvjp(lstm_fwd, lstm_bwd)
