"""A Flax + Optax training smoke test, run by tests/test_ecosystem.py both on JAX and on jaxkit
(through ``install_as_jax``); prints one JSON line of losses and accuracies to compare.

Linen: Conv, BatchNorm, max and average pooling, Dropout with an RNG stream, Dense, ``nn.scan`` over a stack of layers,
``TrainState``. NNX: Linear, BatchNorm, Dropout with ``nnx.Rngs``, ``nnx.scan`` over layers
made with ``nnx.vmap``, ``nnx.Optimizer``. Data: a fixed synthetic MNIST-like set.
"""
import json
import sys

if "jaxkit" in sys.argv[1:]:
    import jaxkit
    jaxkit.install_as_jax()

import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import linen as nn  # noqa: E402
from flax import nnx  # noqa: E402
from flax.training import train_state  # noqa: E402

rs = np.random.RandomState(0)
X = rs.rand(64, 8, 8, 1).astype(np.float32)
Y = (X[:, :4].sum(axis=(1, 2, 3)) > X[:, 4:].sum(axis=(1, 2, 3))).astype(np.int32)


class Block(nn.Module):
    @nn.compact
    def __call__(self, h, _):
        return nn.relu(nn.Dense(16)(h)), None


class LinenCNN(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.Conv(8, (3, 3))(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
        x = nn.relu(x)
        x = nn.max_pool(x, (2, 2), strides=(2, 2))  # lax.reduce_window's max and its gradient
        x = nn.avg_pool(x, (3, 3), padding="SAME")  # the windowed sum and its transpose
        x = x.reshape((x.shape[0], -1))
        x = nn.Dense(16)(x)
        x = nn.Dropout(0.1, deterministic=not train)(x)
        stack = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True},
                        length=2)
        x, _ = stack()(x, None)
        return nn.Dense(2)(x)


class TrainState(train_state.TrainState):
    batch_stats: dict


def linen_run(steps=20):
    model = LinenCNN()
    variables = model.init({"params": jax.random.PRNGKey(0)}, X[:2], train=False)
    state = TrainState.create(apply_fn=model.apply, params=variables["params"],
                              batch_stats=variables["batch_stats"], tx=optax.adam(1e-2))

    @jax.jit
    def step(state, x, y, key):
        def loss_fn(params):
            logits, updates = state.apply_fn(
                {"params": params, "batch_stats": state.batch_stats}, x, train=True,
                rngs={"dropout": key}, mutable=["batch_stats"])
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
            return loss, updates
        (loss, updates), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        state = state.apply_gradients(grads=grads, batch_stats=updates["batch_stats"])
        return state, loss

    key = jax.random.PRNGKey(1)
    losses = []
    for _ in range(steps):
        key, sub = jax.random.split(key)
        state, loss = step(state, X, Y, sub)
        losses.append(float(loss))
    logits = model.apply({"params": state.params, "batch_stats": state.batch_stats}, X,
                         train=False)
    return losses, float((logits.argmax(-1) == Y).mean())


class NnxBlock(nnx.Module):
    def __init__(self, rngs):
        self.linear = nnx.Linear(16, 16, rngs=rngs)

    def __call__(self, h):
        return nnx.relu(self.linear(h))


class NnxMLP(nnx.Module):
    def __init__(self, rngs):
        self.inp = nnx.Linear(64, 16, rngs=rngs)
        self.bn = nnx.BatchNorm(16, momentum=0.9, rngs=rngs)
        self.drop = nnx.Dropout(0.1, rngs=rngs)

        @nnx.split_rngs(splits=2)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make_blocks(rngs):
            return NnxBlock(rngs)
        self.blocks = make_blocks(rngs)
        self.out = nnx.Linear(16, 2, rngs=rngs)

    def __call__(self, x):
        h = self.drop(nnx.relu(self.bn(self.inp(x.reshape((x.shape[0], -1))))))

        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def through(h, block):
            return block(h)
        return self.out(through(h, self.blocks))


def nnx_run(steps=20):
    model = NnxMLP(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    @nnx.jit
    def step(model, optimizer, x, y):
        def loss_fn(model):
            return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()
        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    losses = [float(step(model, optimizer, X, Y)) for _ in range(steps)]
    model.eval()
    return losses, float((model(X).argmax(-1) == Y).mean())


if __name__ == "__main__":
    # ``python flax_smoke.py [jaxkit] [linen] [nnx]``: which backend, which APIs (default both).
    parts = [p for p in ("linen", "nnx") if p in sys.argv[1:]] or ["linen", "nnx"]
    result = {"jax_version": jax.__version__}
    for part in parts:
        losses, acc = (linen_run if part == "linen" else nnx_run)()
        result[part] = {"losses": losses, "accuracy": acc}
    print(json.dumps(result))
