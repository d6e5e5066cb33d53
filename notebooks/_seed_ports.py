"""The seed tutorials (``shared/seeds/``) ported to ``import jaxkit as jax``: notebooks 01-05.

Each notebook is a list of cells; speed claims are measured where the notebook runs, never
copied from the seed.
"""
from __future__ import annotations

from _cells import SETUP, code, md

NOTEBOOKS: dict[str, list] = {}


NOTEBOOKS["01_quickstart"] = [
    md("""
# Quickstart: matrix multiply, `jit`, `grad`, `vmap`

JAX is Autograd and XLA brought together: NumPy code that can be differentiated, compiled
and vectorised. **jaxkit** is that programming model written from scratch on `jaxlib`; the
tutorial code below runs unchanged with `import jaxkit as jax`.
"""),
    code(SETUP),
    md("## Devices\n\nArrays live on a device. On this machine that is the CPU; asking for a "
       "GPU that is not there is a clear error."),
    code("""
print(jax.devices())
print(jax.devices('cpu'))
try:
    jax.devices('gpu')
except RuntimeError as e:
    print('RuntimeError:', e)
"""),
    md("""
## Multiplying matrices

`random.normal` takes an explicit key (random numbers are functional in JAX). jaxkit gives the
same numbers as JAX for the same key. Dispatch is asynchronous, so timings call
`block_until_ready()`. (The seed uses 5000x5000; we use 1000x1000 so the notebook runs
quickly on a small CPU.)
"""),
    code("""
size = 1000
key = random.PRNGKey(0)
x = random.normal(key, (size, size), dtype=jnp.float32)
print(x[:2, :3])
"""),
    code("%timeit -n 3 -r 3 jnp.dot(x, x.T).block_until_ready()", ignore_output=True),
    code("""
x_np = np.asarray(x)
%timeit -n 3 -r 3 np.dot(x_np, x_np.T)
""", ignore_output=True),
    md("NumPy arrays work too, but are copied to the device on every call; `device_put` "
       "moves them once."),
    code("""
x_dev = device_put(x_np)
print(type(x_dev).__name__, x_dev.device)
np.testing.assert_allclose(jnp.dot(x_dev, x_dev.T), np.dot(x_np, x_np.T), rtol=2e-3, atol=2e-2)
"""),
    md("""
## `jit`: compile a function with XLA

`selu` below runs op by op when called eagerly; `jit` traces it once into a jaxpr, compiles
it with XLA (fusing the elementwise operations) and reuses the executable. `%jit_timeit`
measures both on this machine and draws the speedup.
"""),
    code("""
def selu(x, alpha=1.67, lmbda=1.05):
    return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)

x = random.normal(key, (1000000,))
selu_jit = jit(selu)
np.testing.assert_allclose(selu(x), selu_jit(x), rtol=1e-5, atol=1e-6)
print(jax.make_jaxpr(selu)(x[:3]))
"""),
    code("%jit_timeit selu(x)", ignore_output=True),
    md("""
## `grad`: derivatives

`grad(sum_logistic)` agrees with the closed form and with central finite differences.
"""),
    code("""
def sigmoid(x):
    return 1.0 / (1.0 + jnp.exp(-x))

def sum_logistic(x):
    return jnp.sum(sigmoid(x))

def derivative_sum_logistic(x):
    y = sigmoid(x)
    return y * (1 - y)

def first_finite_differences(f, x):
    eps = 1e-3
    return jnp.array([(f(x + eps * v) - f(x - eps * v)) / (2 * eps)
                      for v in jnp.eye(len(x))])

x_small = jnp.arange(3.)
derivative_fn = grad(sum_logistic)
print(derivative_fn(x_small))
print(derivative_sum_logistic(x_small))
print(first_finite_differences(sum_logistic, x_small))
"""),
    code("%grad sum_logistic(x_small)"),
    md("""
## `vmap`: automatic vectorisation

`apply_matrix` is written for one vector. Batching it with a Python loop is slow; batching by
hand is fast but rewrites the function; `vmap` gives the hand-batched speed from the
per-example code. `%vmap_timeit` measures all of them across batch sizes.
"""),
    code("""
mat = random.normal(key, (150, 100))
batched_x = random.normal(key, (10, 100))

def apply_matrix(v):
    return jnp.dot(mat, v)

def naively_batched_apply_matrix(v_batched):
    return jnp.stack([apply_matrix(v) for v in v_batched])

@jit
def batched_apply_matrix(v_batched):
    return jnp.dot(v_batched, mat.T)

@jit
def vmap_batched_apply_matrix(v_batched):
    return vmap(apply_matrix)(v_batched)

np.testing.assert_allclose(naively_batched_apply_matrix(batched_x),
                           batched_apply_matrix(batched_x), atol=1e-4, rtol=1e-4)
np.testing.assert_allclose(vmap_batched_apply_matrix(batched_x),
                           batched_apply_matrix(batched_x), atol=1e-4, rtol=1e-4)
print(vmap_batched_apply_matrix(batched_x).shape)
"""),
    code("%vmap_timeit apply_matrix batched_x[0] --sizes 1,10,100,1000 "
         "--hand batched_apply_matrix", ignore_output=True),
    md("""
What we found is printed in the table above: on a CPU the Python loop grows linearly with the
batch, while `jit(vmap)` and the hand-batched version stay close to each other.
"""),
]


NOTEBOOKS["02_intro_to_jax"] = [
    md("""
# Introduction: JAX as NumPy, and where its speed comes from

JAX offers a NumPy-compatible API (`jax.numpy`) with arrays that live on a device, plus
composable transformations: `grad`, `jit`, `vmap`, `pmap`. This notebook ports the speed
example of *JAX in Action*, chapter 1, and measures it here instead of quoting the book.
"""),
    code(SETUP),
    md("## Arrays are immutable\n\nIn-place updates are replaced by the functional "
       "`.at[...]` API, which returns a new array."),
    code("""
arr = jnp.array([1, 2, 3, 4])
try:
    arr[0] = 10
except TypeError as e:
    print('TypeError:', e)
print(arr.at[0].set(10), arr)
print(arr.at[1:3].add(100), arr.at[-1].mul(7), arr.at[0].min(-5), arr.at[0].max(-5))
"""),
    md("""
## The speed example

A function with some arithmetic, evaluated with NumPy, with jaxkit op by op (each operation
is dispatched to XLA separately) and with `jit` (one compiled, fused program). The input is
placed on the CPU with `device_put`, and computations run where their committed inputs are
(the seed's `jit(f, backend=...)` is deprecated in JAX). The seed also times a GPU: on a
machine with one, `jax.device_put(x, jax.devices('gpu')[0])` moves the same program there.
"""),
    code("""
def f(x):
    y1 = x + x*x + 3
    y2 = x*x + x*x.T
    return y1*y2

x = np.random.default_rng(0).standard_normal((3000, 3000)).astype('float32')
jax_x_cpu = jax.device_put(jnp.array(x), jax.devices('cpu')[0])
jax_f_cpu = jax.jit(f)  # runs on the CPU: its input is committed there
jax_f_cpu(jax_x_cpu).block_until_ready()  # warm-up: compiles
np.testing.assert_allclose(jax_f_cpu(jax_x_cpu), f(x), rtol=1e-5, atol=1e-4)
"""),
    code("""
from jaxkit.magics.timing import time_call
from jaxkit.magics.reports import SpeedupReport
timings = {
    'NumPy': time_call(lambda: f(x), repeat=3),
    'jaxkit eager': time_call(lambda: f(jax_x_cpu), repeat=3),
    'jaxkit jit': time_call(lambda: jax_f_cpu(jax_x_cpu), repeat=3),
}
SpeedupReport('f(x) on a 3000x3000 float32 array', timings, 'NumPy')
""", ignore_output=True),
    md("""
On the machine that ran this notebook, the table above gives the measured times; the compiled
version fuses the five elementwise operations and the transpose into one pass over memory.
"""),
]

NOTEBOOKS["03_grad_jit_vmap"] = [
    md("""
# `grad`, `jit` and `vmap` in detail

Ported from a JAX tutorial: arguments to differentiate (`argnums`), auxiliary outputs, side
effects, what `jit` cannot trace and how static arguments fix it, the jit cache, and
`vmap`'s `in_axes`/`out_axes`.
"""),
    code(SETUP),
    md("## `grad`"),
    code("""
def sum_of_squares(x):
    return jnp.sum(x**2)

sum_of_squares_dx = jax.grad(sum_of_squares)
x = jnp.asarray([1.0, 2.0, 3.0, 4.0])
print(sum_of_squares(x))
print(sum_of_squares_dx(x))
"""),
    code("""
def sum_squared_error(x, y):
    return jnp.sum((x-y)**2)

sum_squared_error_dx = jax.grad(sum_squared_error)
y = jnp.asarray([1.1, 2.1, 3.1, 4.1])
print(sum_squared_error_dx(x, y))
print(jax.grad(sum_squared_error, argnums=(0, 1))(x, y))
print(jax.value_and_grad(sum_squared_error)(x, y))
"""),
    md("## Auxiliary data\n\n`has_aux=True`: the function returns `(out, aux)`; `grad` "
       "differentiates `out` and passes `aux` through."),
    code("""
def squared_error_with_aux(x, y):
    return sum_squared_error(x, y), x-y

try:
    jax.grad(squared_error_with_aux)(x, y)
except TypeError as e:
    print('TypeError:', str(e).splitlines()[0])
print(jax.grad(squared_error_with_aux, has_aux=True)(x, y))
"""),
    md("## No side effects\n\nNumPy arrays can be modified in place; jaxkit arrays cannot."),
    code("""
def in_place_modify(x):
    x[0] = 123
    return None

x_np = np.array([1, 2, 3])
in_place_modify(x_np)
print(x_np)
try:
    in_place_modify(jnp.array(x_np))
except TypeError as e:
    print('TypeError:', e)

def jax_in_place_modify(x):
    return x.at[0].set(123)

y = jnp.array([1, 2, 3])
print(jax_in_place_modify(y), y)
"""),
    md("## `jit`"),
    code("""
def selu(x, alpha=1.67, lambda_=1.05):
    return lambda_ * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)

x = jnp.arange(1000000)
selu_jit = jax.jit(selu)
print(selu(x)[-3:], selu_jit(x)[-3:])
"""),
    code("%jit_timeit selu(x)", ignore_output=True),
    md("""
### What `jit` cannot see

Tracing replaces arguments by abstract values (shape and dtype only), so Python control flow
on their *values* fails, with an error that says which argument the value depends on (and
links to the page that explains the fixes).
"""),
    code("""
def f(x):
    if x > 0:
        return x
    else:
        return 2 * x

try:
    jax.jit(f)(10)
except jax.errors.TracerBoolConversionError as e:
    print(type(e).__name__ + ':', e)
"""),
    code("""
def g(x, n):
    i = 0
    while i < n:
        i += 1
    return x + i

try:
    jax.jit(g)(10, 20)
except jax.errors.ConcretizationTypeError as e:
    print(type(e).__name__ + ':', e)
"""),
    md("Jitting only the loop body works, and so do static arguments (compiled once per "
       "value):"),
    code("""
@jax.jit
def loop_body(prev_i):
    return prev_i + 1

def g_inner_jitted(x, n):
    i = 0
    while i < n:
        i = loop_body(i)
    return x + i

print(g_inner_jitted(10, 20))

f_jit_correct = jax.jit(f, static_argnums=0)
print(f_jit_correct(10))
g_jit_correct = jax.jit(g, static_argnames=['n'])
print(g_jit_correct(10, 20))

from functools import partial

@partial(jax.jit, static_argnames=['n'])
def g_jit_decorated(x, n):
    i = 0
    while i < n:
        i += 1
    return x + i

print(g_jit_decorated(10, 20))
"""),
    md("""
### The jit cache

`jax.jit(f)` caches compilations on the function object `f`. A new `partial` or `lambda` is a
new function each time, so calling `jax.jit` on one inside a loop recompiles every time; a
named function compiles once. jaxkit records every cache miss and why, so we can count them.
"""),
    code("""
def unjitted_loop_body(prev_i):
    return prev_i + 1

def g_inner_jitted_partial(x, n):
    i = 0
    misses = 0
    while i < n:
        step = jax.jit(partial(unjitted_loop_body))
        i = step(i)
        misses += len(step.cache_events)
    return x + i, misses

def g_inner_jitted_lambda(x, n):
    i = 0
    misses = 0
    while i < n:
        step = jax.jit(lambda x: unjitted_loop_body(x))
        i = step(i)
        misses += len(step.cache_events)
    return x + i, misses

def g_inner_jitted_normal(x, n):
    i = 0
    misses = 0
    while i < n:
        step = jax.jit(unjitted_loop_body)
        i = step(i)
        misses += len(step.cache_events)
    return x + i, misses

for fn in (g_inner_jitted_partial, g_inner_jitted_lambda, g_inner_jitted_normal):
    out, misses = fn(10, 20)
    print(f"{fn.__name__}: result {out}, compilations {misses}")
"""),
    code("""
%timeit -n 1 -r 3 g_inner_jitted_partial(10, 20)
%timeit -n 1 -r 3 g_inner_jitted_normal(10, 20)
""", ignore_output=True),
    md("## `vmap`"),
    code("""
x = jnp.arange(5)
w = jnp.array([2., 3., 4.])

def convolve(x, w):
    output = []
    for i in range(1, len(x)-1):
        output.append(jnp.dot(x[i-1:i+2], w))
    return jnp.array(output)

print(convolve(x, w))
xs = jnp.stack([x, x])
ws = jnp.stack([w, w])

def manually_batched_convolve(xs, ws):
    output = []
    for i in range(xs.shape[0]):
        output.append(convolve(xs[i], ws[i]))
    return jnp.stack(output)

def manually_vectorized_convolve(xs, ws):
    output = []
    for i in range(1, xs.shape[-1] - 1):
        output.append(jnp.sum(xs[:, i-1:i+2] * ws, axis=1))
    return jnp.stack(output, axis=1)

print(manually_batched_convolve(xs, ws))
print(manually_vectorized_convolve(xs, ws))
auto_batch_convolve = jax.vmap(convolve)
print(auto_batch_convolve(xs, ws))
"""),
    code("""
auto_batch_convolve_v2 = jax.vmap(convolve, in_axes=1, out_axes=1)
xst = jnp.transpose(xs)
wst = jnp.transpose(ws)
print(auto_batch_convolve_v2(xst, wst))
batch_convolve_v3 = jax.vmap(convolve, in_axes=[0, None])
print(batch_convolve_v3(xs, w))
jitted_batch_convolve = jax.jit(auto_batch_convolve)
print(jitted_batch_convolve(xs, ws))
"""),
]

NOTEBOOKS["04_birds_eye_view"] = [
    md("""
# A bird's-eye view: `vmap` compositions, pytrees, `jvp` and `vjp`

Nested `vmap`s build matrix products from a dot product; a registered pytree class flows
through `jit` and `grad`; and forward- and reverse-mode products recover a Jacobian.
"""),
    code(SETUP),
    code("""
key = random.PRNGKey(0)
mat = random.normal(key, (150, 100))
batched_x = random.normal(key, (10, 100))

def apply_matrix(v):
    return jnp.dot(mat, v)

print(vmap(lambda mat, v: jnp.dot(mat, v), (None, 0))(mat, batched_x).shape)
print(vmap(lambda v: jnp.dot(mat, v), 0)(batched_x).shape)
print(vmap(lambda v: jnp.dot(mat, v), 1, 0)(random.normal(key, (100, 10))).shape)
print(vmap(lambda v: jnp.dot(mat, v), 1, 1)(random.normal(key, (100, 10))).shape)
"""),
    code("""
vv = lambda v1, v2: jnp.vdot(v1, v2)
mv = vmap(vv, (0, None), 0)    # ([b, a], [a]) -> [b]
mm = vmap(mv, (None, 1), 1)    # ([b, a], [a, c]) -> [b, c]
print(mm(mat, batched_x.T).shape)
print(vmap(mv, (None, 0), 0)(mat, batched_x).shape)
np.testing.assert_allclose(mm(mat, batched_x.T), mat @ batched_x.T, rtol=1e-4, atol=1e-4)
"""),
    md("## Pytrees: a registered class"),
    code("""
from jaxkit.tree_util import register_pytree_node_class

@register_pytree_node_class
class Point:
    def __init__(self, x, y, z):
        self.x = x
        self.y = y
        self.z = z

    def __repr__(self):
        return f"Point({self.x}, {self.y}, {self.z})"

    def tree_flatten(self):
        return ((self.x, self.y, self.z), None)

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        return cls(*children)

@jit
def dist_orig(pt: Point):
    return jnp.sqrt(pt.x**2 + pt.y**2 + pt.z**2)

print(dist_orig(Point(1., 2., 3.)))
print(grad(dist_orig)(Point(1., 2., 3.)))
"""),
    md("## `jvp` and `vjp` on a logistic model"),
    code("""
def sigmoid(x):
    return 0.5 * (jnp.tanh(x / 2) + 1)

def predict(W, b, inputs):
    return sigmoid(jnp.dot(inputs, W) + b)

inputs = jnp.array([[0.52, 1.12, 0.77],
                    [0.88, -1.08, 0.15],
                    [0.52, 0.06, -1.39],
                    [0.74, -2.49, 1.39]])
targets = jnp.array([True, True, False, True])

def loss(W, b):
    preds = predict(W, b, inputs)
    label_probs = preds * targets + (1 - preds) * (1 - targets)
    return -jnp.sum(jnp.log(label_probs))

key, W_key, b_key = random.split(key, 3)
W = random.normal(W_key, (3,))
b = random.normal(b_key, ())
print(W, b, loss(W, b))
"""),
    code("""
from jaxkit import jvp, vjp
key, subkey = random.split(key)
v = random.normal(subkey, W.shape)
y, u = jvp(lambda W: predict(W, b, inputs), primals=(W,), tangents=(v,))
print(y)
print(u)
"""),
    code("""
y, vjp_fun = vjp(lambda W: predict(W, b, inputs), W)
identity = jnp.eye(*y.shape, dtype=jnp.float32)
print("Recovering Jacobian elements row-wise!")
rows = [vjp_fun(identity[i])[0] for i in range(4)]
print(*rows, sep="\\n")
J_fwd = jax.jacfwd(lambda W: predict(W, b, inputs))(W)
J_rev = jax.jacrev(lambda W: predict(W, b, inputs))(W)
np.testing.assert_allclose(jnp.stack(rows), J_rev, rtol=1e-6)
np.testing.assert_allclose(J_fwd, J_rev, rtol=1e-5, atol=1e-7)
print(J_rev)
"""),
]

NOTEBOOKS["05_jax_for_the_impatient"] = [
    md("""
# JAX for the impatient

The NumPy API, immutability, explicit random keys, gradients, `jvp`/`vjp`, `jit`, `vmap`,
and a linear regression trained on a pytree of parameters: the Flax team's introduction,
run on jaxkit. The random numbers and the loss curve are JAX's.
"""),
    code(SETUP),
    code("""
m = jnp.ones((4, 4))
n = jnp.array([[1.0, 2.0, 3.0, 4.0],
               [5.0, 6.0, 7.0, 8.0]])
print(m)
print(jnp.dot(n, m).block_until_ready())
x = np.random.default_rng(0).normal(size=(4, 4))
print(jnp.dot(x, m).dtype)
x = jax.device_put(x)
print(type(x).__name__, x.dtype)
x = jnp.array([[1.0, 2.0, 3.0, 4.0],
               [5.0, 6.0, 7.0, 8.0]])
print(repr(np.array(x)))
"""),
    code("""
updated = x.at[0, 0].set(3.0)
print("x: \\n", x)
print("updated: \\n", updated)
"""),
    md("## Random numbers: explicit keys"),
    code("""
key = random.PRNGKey(0)
print(key)
for i in range(3):
    print("Printing the random number using key: ", key, " gives: ",
          random.normal(key, shape=(1,)))
print("old key", key, "--> normal", random.normal(key, shape=(1,)))
key, subkey = random.split(key)
print("    \\\\---SPLIT --> new key   ", key, "--> normal", random.normal(key, shape=(1,)))
print("             \\\\--> new subkey", subkey, "--> normal", random.normal(subkey, shape=(1,)))
key, *subkeys = random.split(key, 4)
print(key, subkeys)
"""),
    md("## Gradients, `jvp` and `vjp`"),
    code("""
key = random.PRNGKey(0)

def f(x):
    return jnp.dot(x.T, x) / 2.0

v = jnp.ones((4,))
print(f(v))
v = random.normal(key, (4,))
print("Original v:")
print(v)
print("Gradient of f taken at point v")
print(jax.grad(f)(v))
"""),
    code("""
def f(x):
    return jnp.multiply(x, x) / 2.0

x = random.normal(key, (5,))
v = jnp.ones(5)
print("(x,f(x))")
print((x, f(x)))
print("jax.jvp(f, (x,),(v,))")
print(jax.jvp(f, (x,), (v,)))
(val, vjp_fun) = jax.vjp(f, x)
print("x = ", x)
print("v^T Jf(x) = ", vjp_fun(jnp.ones((5,)))[0])
"""),
    md("## `jit` and `vmap`"),
    code("""
def selu(x, alpha=1.67, lmbda=1.05):
    return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)

v = random.normal(key, (1000000,))
"""),
    code("%jit_timeit selu(v)", ignore_output=True),
    code("""
mat = random.normal(key, (15, 10))
batched_x = random.normal(key, (5, 10))
single = random.normal(key, (10,))

def apply_matrix(v):
    return jnp.dot(mat, v)

print("Single apply shape: ", apply_matrix(single).shape)
print("Batched example shape: ", jax.vmap(apply_matrix)(batched_x).shape)
"""),
    md("""
## Linear regression

Losses and gradients are printed to 6 and 5 decimals: in float32 they agree with JAX's to the
last bit or two, and that last bit depends on how XLA fuses the program, which differs between
versions and machines.
"""),
    code("""
def predict(W, b, x):
    return jnp.dot(x, W) + b

def mse(W, b, x_batched, y_batched):
    def squared_error(x, y):
        y_pred = predict(W, b, x)
        return jnp.inner(y - y_pred, y - y_pred) / 2.0
    return jnp.mean(jax.vmap(squared_error)(x_batched, y_batched), axis=0)

n_samples = 20
x_dim = 10
y_dim = 5
key = random.PRNGKey(0)
k1, k2 = random.split(key)
W = random.normal(k1, (x_dim, y_dim))
b = random.normal(k2, (y_dim,))
key_sample, key_noise = random.split(k1)
x_samples = random.normal(key_sample, (n_samples, x_dim))
y_samples = predict(W, b, x_samples) + 0.1 * random.normal(key_noise, (n_samples, y_dim))
print('x shape:', x_samples.shape, '; y shape:', y_samples.shape)
"""),
    code("""
W_hat = jnp.zeros_like(W)
b_hat = jnp.zeros_like(b)

@jax.jit
def update_params(W, b, x, y, lr):
    W, b = W - lr * jax.grad(mse, 0)(W, b, x, y), b - lr * jax.grad(mse, 1)(W, b, x, y)
    return W, b

learning_rate = 0.3
print(f'Loss for "true" W,b: {mse(W, b, x_samples, y_samples):.6f}')
for i in range(101):
    W_hat, b_hat = update_params(W_hat, b_hat, x_samples, y_samples, learning_rate)
    if i % 5 == 0:
        print(f"Loss step {i}: {mse(W_hat, b_hat, x_samples, y_samples):.6f}")
"""),
    md("## Pytrees"),
    code("""
from jaxkit import tree_util
t = [1, {"k1": 2, "k2": (3, 4)}, 5]
print(tree_util.tree_leaves([1, "a", object()]).__len__(), tree_util.tree_leaves(t))
print(tree_util.tree_map(lambda x: x*x, t))
t2 = tree_util.tree_map(lambda x: x*x, t)
print(tree_util.tree_map(lambda x, y: x+y, t, t2))
"""),
    code("""
def predict_pytree(params, x):
    return jnp.dot(x, params['W']) + params['b']

def mse_pytree(params, x_batched, y_batched):
    def squared_error(x, y):
        y_pred = predict_pytree(params, x)
        return jnp.inner(y - y_pred, y - y_pred) / 2.0
    return jnp.mean(jax.vmap(squared_error)(x_batched, y_batched), axis=0)

params = {'W': jnp.zeros_like(W), 'b': jnp.zeros_like(b)}
grads = jax.grad(mse_pytree)(params, x_samples, y_samples)
print(jax.tree_util.tree_map(lambda g: g.shape, grads))
print(np.round(grads['b'], 5))

@jax.jit
def update_params_pytree(params, learning_rate, x_samples, y_samples):
    grads = jax.grad(mse_pytree)(params, x_samples, y_samples)
    return jax.tree_util.tree_map(lambda p, g: p - learning_rate * g, params, grads)

for i in range(101):
    params = update_params_pytree(params, learning_rate, x_samples, y_samples)
    if i % 20 == 0:
        print(f"Loss step {i}: {mse_pytree(params, x_samples, y_samples):.6f}")
"""),
]
