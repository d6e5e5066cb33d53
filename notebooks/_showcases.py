"""The notebooks that show what jaxkit adds: the magics tour, a Flax model trained with
Optax (06) and sharded arrays on 8 CPU devices (07).
"""
from __future__ import annotations

from _cells import SETUP, code, md

NOTEBOOKS: dict[str, list] = {}

NOTEBOOKS["magics_tour"] = [
    md("""
# A tour of the jaxkit magics

`%load_ext jaxkit` adds magics that show what tracing, compiling, differentiating and
batching did. Each returns a result object (`-o`) with a stable text form and a rich HTML
form (graph, tables, charts).
"""),
    code(SETUP),
    code("%devices"),
    md("## `%%jit`: define, compile and inspect in one cell"),
    code("""
%%jit --no-timeit selu(x)
def selu(x, alpha=1.67, lmbda=1.05):
    return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)
x = jnp.linspace(-2.0, 2.0, 8)
""", ignore_output=True),
    code("""
report = %jit -o -q --no-timeit selu(x)
# the cell above replaced selu by jit(selu), which holds one compiled entry so far
print(report.cache_hit, selu._cache_size())
print(report.jaxpr)
"""),
    code("""
report = %jit -o -q --no-timeit selu(jnp.ones(16))
print(report.cache_hit, report.miss_reason)
"""),
    code("print(report.dot)"),
    md("## `%jaxpr` and `%hlo`"),
    code("%jaxpr selu(x)"),
    code("%hlo selu(x)"),
    md("""
## `%%jit -a`: the source annotated line by line

Like Cython's `%%cython -a`: each line of the cell with the jaxpr equations traced from it,
the instructions of XLA's optimised HLO that came from it (XLA keeps every equation's source
line in its instructions' metadata, through fusion), and the flops and bytes of those
instructions, estimated from their shapes, with a bar per line. XLA's own `cost_analysis` of
the whole program is shown beside the estimate. The call can be the cell's last line.
"""),
    code("""
%%jit -a
def predict(x, w, b):
    # one dense layer with a ReLU, then a scalar
    h = x @ w + b
    h = jnp.maximum(h, 0.0)
    return jnp.sum(h ** 2)

predict(jnp.ones((64, 128)), jnp.ones((128, 32)), jnp.zeros(32))
""", ignore_output=True),
    code("""
r = %jit -a -o -q predict(jnp.ones((64, 128)), jnp.ones((128, 32)), jnp.zeros(32))
for line in r.lines:
    print(f"{line.number}  {line.text:44} {', '.join(line.equations)}".rstrip())
matmul = next(line for line in r.lines if "x @ w" in line.text)
print(matmul.flops >= 2 * 64 * 128 * 32, any("dot" in h for h in matmul.hlo))
"""),
    md("## `%jit_timeit`: eager against jit, measured here"),
    code("big = jnp.linspace(-3.0, 3.0, 1_000_000)\n%jit_timeit selu(big)", ignore_output=True),
    md("## `%grad`: gradient, programs and a finite-difference check"),
    code("""
def loss(w):
    return jnp.sum(jnp.tanh(w) ** 2)

w = jnp.array([0.1, -0.4, 0.7])
r = %grad -o -q loss(w)
print(r.grads, r.max_abs_error < 1e-3)
"""),
    code("%grad loss(w)", ignore_output=True),
    md("""
The arguments can be any pytree. Here an MLP's parameters are a list of `(w, b)` layers: the
gradient comes back in the same structure, shown leaf by leaf under the names the call used
(`params[0][1]`). The check against finite differences goes along a few random directions
(two evaluations each, whatever the parameter count); `--check full` compares every element,
`--check none` skips it.
"""),
    code("""
def init_mlp(key, sizes):
    params = []
    for k, (m, n) in zip(random.split(key, len(sizes) - 1), zip(sizes[:-1], sizes[1:])):
        params.append((random.normal(k, (m, n)) / np.sqrt(m), jnp.zeros(n)))
    return params

def mlp_loss(params, x, y):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return jnp.mean((x @ w + b - y) ** 2)

params = init_mlp(random.PRNGKey(0), [4, 16, 16, 1])
xs = random.normal(random.PRNGKey(1), (32, 4))
ys = jnp.sin(xs.sum(axis=1, keepdims=True))
r = %grad -o -q mlp_loss(params, xs, ys)
for path, kind, norm, lo, hi in r.grad_rows():
    print(path, kind)
print(len(r.probes), r.max_abs_error < 1e-2)
"""),
    code("%grad mlp_loss(params, xs, ys)", ignore_output=True),
    md("""
Mistakes in the magic line are one-line errors, not tracebacks through the magic; an error in
your own function shows your frames only:
"""),
    code("%grad mlp_loss(parms, xs, ys)", raises=True),
    md("""
## Big programs: folded, zoomable graphs

A graph is drawn at its natural size in a box you can scroll, drag (pan) and zoom (−, +, fit,
1:1, or ctrl+wheel). An equation that holds a program of its own (a `jit`, a `custom_jvp`
function, a `scan` body, `cond`'s branches) is one 3-D node; under the graph each such
program is folded away, and clicking its node (or its line) unfolds its own graph, folded the
same way. Here a 25-layer MLP whose layer is a jitted function: 25 nodes, not 75. With
ipywidgets, `report.graph_widget()` (or the graph tab of `report.widget()`) lists the nested
programs: choose some and the graph is redrawn with them unfolded in place, each in a box.
"""),
    code("""
@jit
def dense(x, w, b):
    return jnp.tanh(x @ w + b)

def deep_mlp(params, x):
    for w, b in params:
        x = dense(x, w, b)
    return jnp.sum(x)

deep = init_mlp(random.PRNGKey(2), [16] * 26)  # 25 layers
xb = jnp.ones((8, 16))
"""),
    code("%jit --no-timeit --panels graph deep_mlp(deep, xb)", ignore_output=True),
    code("""
from jaxkit.magics import graphview
r = %jaxpr -o -q deep_mlp(deep, xb)
folded = graphview.nested_tree(r.jaxpr.jaxpr)
print(len(r.jaxpr.eqns), "equations;", len(folded), "of them fold a program:",
      folded[0].title, "with", len(folded[0].jaxpr.eqns), "equations")
"""),
    md("""
Timings (`%jit_timeit` above, `%vmap_timeit` below) draw the spread of their repeats next to
mean ± std. dev.: one tick per run, the fastest in green, mean ± std. dev. shaded. In a
terminal IPython, long compiles and timings show a progress line on stderr (`compiling f…
1.2 s`) that is erased when done; notebooks get none.
"""),
    md("## `%memory`: what is on the device, and what a program needs"),
    code("%memory --top 5", ignore_output=True),
    code("%memory mlp_loss(params, xs, ys)", ignore_output=True),
    md("## `%vmap_timeit`: four ways to batch"),
    code("""
mat = random.normal(random.PRNGKey(1), (64, 32))
def apply_matrix(v):
    return jnp.dot(mat, v)
def by_hand(vs):
    return jnp.dot(vs, mat.T)
v = jnp.ones(32)
"""),
    code("%vmap_timeit apply_matrix v --sizes 1,10,100 --hand by_hand", ignore_output=True),
]

NOTEBOOKS["06_flax_digits"] = [
    md("""
# A real model: a Flax CNN trained with Optax on handwritten digits, on jaxkit

Flax (networks) and Optax (optimisers) are JAX libraries; `%load_ext jaxkit.magics.as_jax`
makes `import jax` resolve to jaxkit, so they run on it unchanged. The data are the 8x8
handwritten digits that scikit-learn ships (`load_digits`, no download). Seeds are fixed: the
same notebook run on JAX reaches the same test accuracy (`bench/flax_digits_compare.py`
checks it).
"""),
    code("%load_ext jaxkit.magics.as_jax"),
    code("""
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn
from flax.training import train_state
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

print(jax.__version__, jax.numpy.__name__)
"""),
    md("## Data\n\n1797 images of 8x8 pixels (values 0..16), ten classes; 20% held out."),
    code("""
digits = load_digits()
images = (digits.images / 16.0).astype(np.float32)[..., None]   # NHWC
x_train, x_test, y_train, y_test = train_test_split(
    images, digits.target.astype(np.int32), test_size=0.2, random_state=0,
    stratify=digits.target)
print(x_train.shape, x_test.shape, np.bincount(y_train))
"""),
    md("## The model: two convolutions, dropout, two dense layers"),
    code("""
class CNN(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.relu(nn.Conv(16, (3, 3))(x))
        x = nn.relu(nn.Conv(32, (3, 3), strides=(2, 2))(x))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(64)(x))
        x = nn.Dropout(0.2, deterministic=not train)(x)
        return nn.Dense(10)(x)

model = CNN()
params = model.init(jax.random.PRNGKey(0), x_train[:1], train=False)['params']
print(jax.tree.map(jnp.shape, params))
state = train_state.TrainState.create(apply_fn=model.apply, params=params,
                                      tx=optax.adam(2e-3))
"""),
    md("## The loss, and `%grad` on it\n\n`%grad` takes arrays: here the loss as a function "
       "of the output layer's bias, differentiated and checked against finite differences."),
    code("""
def loss_fn(params, x, y, dropout_key):
    logits = model.apply({'params': params}, x, train=True, rngs={'dropout': dropout_key})
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

xb, yb, key0 = x_train[:64], y_train[:64], jax.random.PRNGKey(1)
print(loss_fn(state.params, xb, yb, key0))

def loss_of_bias(b):
    p = {**state.params, 'Dense_1': {**state.params['Dense_1'], 'bias': b}}
    return loss_fn(p, xb, yb, key0)
"""),
    code("%grad loss_of_bias(state.params['Dense_1']['bias'])", ignore_output=True),
    md("## The train step, compiled with `%%jit`"),
    code("""
%%jit --no-timeit train_step(state, xb, yb, key0)
def train_step(state, x, y, dropout_key):
    loss, grads = jax.value_and_grad(loss_fn)(state.params, x, y, dropout_key)
    return state.apply_gradients(grads=grads), loss
""", ignore_output=True),
    md("""
The graph folds the model the way JAX names its operations (each equation's
`source_info.name_stack`, which also names the compiled ops, `jit(train_step)/jvp(CNN)/Dense_0/…`):
the forward pass is one node, `jvp(CNN)`, the backward pass another, `transpose(jvp(CNN))`;
unfolding either shows one node per layer. The same folding of the loss, as text:
"""),
    code("""
from jaxkit.magics import graph
r = %jaxpr -o -q loss_fn(state.params, xb, yb, key0)
model_node = graph.fold_scopes(r.jaxpr).eqns[0]
print(model_node.params['name'], '->',
      [e.params.get('name', e.primitive.name) for e in model_node.params['jaxpr'].eqns])
"""),
    md("## Training: 20 epochs of batches of 64, in a fixed shuffled order"),
    code("""
@jax.jit
def accuracy(params, x, y):
    logits = model.apply({'params': params}, x, train=False)
    return jnp.mean(jnp.argmax(logits, -1) == y)

rng = np.random.RandomState(0)
key = jax.random.PRNGKey(2)
losses = []
for epoch in range(20):
    order = rng.permutation(len(x_train))
    for i in range(0, len(order) - 63, 64):
        idx = order[i:i + 64]
        key, sub = jax.random.split(key)
        state, loss = train_step(state, x_train[idx], y_train[idx], sub)
        losses.append(float(loss))
test_acc = float(accuracy(state.params, x_test, y_test))
print(f'{len(losses)} steps, final loss {np.mean(losses[-20:]):.3f}, '
      f'test accuracy {test_acc:.4f}')
"""),
    code("""
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(losses)
ax.set(xlabel='step', ylabel='cross-entropy', yscale='log')
ax.set_title('training loss');
""", ignore_output=True),
    md("The test accuracy printed above is a regression check under nbval; on JAX 0.10.2 the "
       "same cells (same seeds) give the same figure to within a fraction of a percent."),
]

# The kernel asks for 8 CPU devices before jaxkit first touches a device.
NOTEBOOKS["07_sharding"] = [
    md("""
# Sharded arrays: one program, many devices

An array can live *spread over* several devices. A `Mesh` names the axes of a grid of
devices; a `NamedSharding(mesh, PartitionSpec(...))` says which mesh axes split each
dimension of an array. `jit` then compiles a program that XLA's SPMD partitioner splits over
the devices: jaxkit only annotates the program with the layouts (in Shardy attributes), XLA
decides the rest and inserts the communication.

This notebook runs on 8 CPU devices, which jaxkit creates when `JAXKIT_NUM_CPU_DEVICES` is
set before the first device is used (JAX's equivalent is
`XLA_FLAGS=--xla_force_host_platform_device_count=8`)."""),
    code("""
import os
os.environ['JAXKIT_NUM_CPU_DEVICES'] = '8'
import numpy as np
import jaxkit as jax
import jaxkit.numpy as jnp
from jaxkit.sharding import NamedSharding, PartitionSpec as P
jax.devices()"""),
    md("## A mesh and a layout"),
    code("""
mesh = jax.make_mesh((4, 2), ('x', 'y'))
print(mesh)
x = jax.device_put(np.arange(32, dtype=np.float32).reshape(8, 4),
                   NamedSharding(mesh, P('x', 'y')))
print(x.sharding)
jax.debug.visualize_array_sharding(x)"""),
    md("Each device holds one block; `addressable_shards` lists them with the slices of the "
       "whole array they hold:"),
    code("""
for shard in x.addressable_shards[:3]:
    print(shard.device, shard.index, shard.data.shape)"""),
    md("Split over `'x'` only, each block is held by the two devices of a row of the mesh "
       "(`replica_id` counts the copies):"),
    code("""
rows = jax.device_put(x, NamedSharding(mesh, P('x')))
jax.debug.visualize_array_sharding(rows)
[(s.device.id, s.replica_id) for s in rows.addressable_shards[:4]]"""),
    md("""
## jit over a mesh

A jitted function called on laid-out arrays is partitioned over their mesh. The lowered
module carries the layouts; XLA propagates them and picks the outputs' layout:"""),
    code("""
w = jax.device_put(np.ones((4, 2), np.float32), NamedSharding(mesh, P(None, 'y')))

@jax.jit
def layer(x, w):
    return jnp.tanh(x @ w)

print(layer.lower(x, w).as_text())
y = layer(x, w)
print(y.sharding)"""),
    md("""
The mesh's axes are `Explicit` (`make_mesh`'s default, as in JAX), so an array's layout is
part of its type, and each operation's result type says how it is laid out:"""),
    code("""
print(jax.typeof(x))
print(jax.make_jaxpr(lambda x, w: jnp.tanh(x @ w).T)(x, w))"""),
    md("When the contracted dimension is split on both sides, every device holds a partial "
       "sum, and the result's layout is a choice: the types refuse to guess, and "
       "`out_sharding` makes it. XLA then adds the partial sums up with an all-reduce; the "
       "compiled program shows it:"),
    code("""
a = jax.device_put(np.ones((4, 8), np.float32), NamedSharding(mesh, P(None, 'x')))
b = jax.device_put(np.ones((8, 2), np.float32), NamedSharding(mesh, P('x', None)))
try:
    a @ b
except Exception as e:
    print(type(e).__name__, e)
matmul = jax.jit(lambda a, b: jnp.dot(a, b, out_sharding=NamedSharding(mesh, P())))
hlo = matmul.lower(a, b).compile().as_text()
for line in hlo.splitlines():
    if 'all-reduce(' in line:
        print(line.strip()[:90])
matmul(a, b)"""),
    md("`in_shardings` and `out_shardings` fix layouts at the boundary of a program; inside "
       "it, `reshard` changes a value's layout, and so its type. (Over `Explicit` axes, "
       "`with_sharding_constraint` refuses to, as in JAX: it only hints XLA on `Auto` axes.)"),
    code("""
total = jax.jit(lambda x: x.sum(0), out_shardings=NamedSharding(mesh, P()))(x)
print(total, total.sharding.spec)

@jax.jit
def relayout(x):
    y = jax.reshard(2 * x, NamedSharding(mesh, P('y')))
    print('traced as', jax.typeof(y))
    return y

jax.debug.visualize_array_sharding(relayout(x))"""),
    md("""
## shard_map: per-device code with collectives

`shard_map` runs a function on every device's block and lets it talk to the others over
the mesh's named axes. Here is a data-parallel training step: every device takes the
gradient on its share of the batch. The parameters are replicated (`P()`), so inside the body
their type is *invariant* over the mesh axes and `jax.grad` already sums their gradient over
all devices (the transpose of the `pvary` that meets them with the varying batch); dividing
by the number of devices makes it the mean:"""),
    code("""
def loss(p, x, y):
    return jnp.mean((jnp.tanh(x @ p['w'] + p['b']) - y) ** 2)

def step(p, x, y):
    n = jax.lax.axis_size(('x', 'y'))
    g = jax.tree.map(lambda v: v / n, jax.grad(loss)(p, x, y))
    return jax.tree.map(lambda a, b: a - 0.1 * b, p, g)

rng = np.random.default_rng(0)
params = {'w': rng.normal(size=(3, 2)).astype(np.float32), 'b': np.zeros(2, np.float32)}
xs = rng.normal(size=(64, 3)).astype(np.float32)
ys = rng.normal(size=(64, 2)).astype(np.float32)

parallel_step = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P(), P(('x', 'y')),
                                                                 P(('x', 'y'))),
                                      out_specs=P()))
# The batch is laid out as in_specs says: over Explicit axes its type must agree.
batch = NamedSharding(mesh, P(('x', 'y')))
xs_split, ys_split = jax.device_put(xs, batch), jax.device_put(ys, batch)
p = params
for _ in range(50):
    p = parallel_step(p, xs_split, ys_split)
print(f'loss {float(loss(params, xs, ys)):.4f} -> {float(loss(p, xs, ys)):.4f}')"""),
    md("The same 50 steps on one device, with the whole batch, give the same parameters:"),
    code("""
q = params
one_device_step = jax.jit(lambda p, x, y: jax.tree.map(
    lambda a, b: a - 0.1 * b, p, jax.grad(loss)(p, x, y)))
for _ in range(50):
    q = one_device_step(q, xs, ys)
print(all(np.allclose(p[k], q[k], atol=1e-6) for k in p))"""),
    md("""
## The `%%jit` sharding panel

With `%load_ext jaxkit`, `%%jit` on laid-out arrays adds a *sharding* panel: each input's and
output's blocks on the mesh (which devices hold which block), and the collectives XLA's
partitioner inserted, read from the optimised HLO. Its text form:"""),
    code("""
%load_ext jaxkit
report = %jit -o -q --no-timeit layer(x, w)
print('\\n'.join(report.sharding.summary_lines()))
report = %jit -o -q --no-timeit matmul(a, b)
print('\\n'.join(report.sharding.summary_lines()))
for c in report.sharding.collectives:
    print(c.kind, c.shape, c.groups, c.source)"""),
    md("and the grid the notebook shows (the whole report's HTML holds it too):"),
    code("""
from IPython.display import HTML
HTML(report.sharding.html())"""),
    md("""
## What is not there yet

Unreduced and reduced types (`P(..., unreduced=...)`), `jax.experimental.layout`,
`custom_partitioning` and memory kinds (host offloading: `device_put` to `pinned_host` inside
`jit`, typed `f32<host>[...]`, and the checkpoint policies that offload residuals to the host)
work as in JAX. Still to come: arrays laid out in memory in another order than row-major over
several devices (one device works), and the GPU's placement annotations for a `device_put`
between memory spaces inside `jit` (on the CPU, as in JAX, the program's result memory kinds
carry them)."""),
]
