"""Programs run under JAX 0.10.2 (the test-only oracle) and under jaxkit must print the same.

Each record is a snippet written against ``jax``/``jnp``/``lax``; it runs once with the real
JAX modules and once with jaxkit's, and what it prints (values, dtypes, reprs, exception
classes) must agree line by line. Snippets print exceptions as ``type(e).__name__`` plus, where
the record says so, the key phrase the message must contain."""
from __future__ import annotations

import contextlib
import functools
import importlib
import io
import logging
import re
import textwrap

import numpy as np

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jax_jnp  # noqa: E402

import jaxkit  # noqa: E402
import jaxkit.numpy as jk_jnp  # noqa: E402

CUSTOM_FUNCTION_NOT_CALLED = """
@jax.custom_jvp
def f(x, y):
    print("called f!")
    return jnp.sin(x) * y

@f.defjvp
def f_jvp(primals, tangents):
    print("called f_jvp!")
    x, y = primals
    x_dot, y_dot = tangents
    return f(x, y), jnp.cos(x) * x_dot * y + jnp.sin(x) * y_dot

print(f(2., 3.))
print(*jax.jvp(f, (2., 3.), (1., 0.)))
print(jax.grad(f)(2., 3.))
print(jax.jit(jax.grad(f))(2., 3.))
print(jax.grad(jax.jit(f))(2., 3.))

@jax.custom_vjp
def g(x, y):
    print("called g!")
    return jnp.sin(x) * y

def g_fwd(x, y):
    print("called g_fwd!")
    return g(x, y), (jnp.cos(x), jnp.sin(x), y)

def g_bwd(res, ct):
    print("called g_bwd!")
    cos_x, sin_x, y = res
    return (cos_x * ct * y, sin_x * ct)

g.defvjp(g_fwd, g_bwd)
print(g(3., 4.))
print(jax.grad(g)(3., 4.))
print(jax.value_and_grad(g)(3., 4.))
print(jax.vmap(jax.grad(g))(jnp.arange(3.), jnp.ones(3)))
"""

PYTHON_IF_IN_RULE = """
@jax.custom_jvp
def relu(x):
    return jnp.maximum(x, 0.)

@relu.defjvp
def relu_jvp(primals, tangents):
    x, = primals
    t, = tangents
    if x > 0:
        return relu(x), t
    return relu(x), 0. * t

print(jax.grad(relu)(3.), jax.grad(relu)(-3.))

@jax.custom_vjp
def clip_gradient(x):
    return x

def clip_fwd(x):
    if x > 10:
        print("big")
    return x, None

clip_gradient.defvjp(clip_fwd, lambda _, g: (jnp.clip(g, -1., 1.),))
print(jax.grad(lambda x: 3. * clip_gradient(x))(20.))

@jax.custom_jvp
def f(x):
    if x > 0:
        return jnp.sin(x)
    return jnp.cos(x)

@f.defjvp
def f_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    ans = f(x)
    return (ans, 2 * x_dot) if x > 0 else (ans, 3 * x_dot)

print(jax.grad(f)(1.), jax.grad(f)(-1.))
"""

LOOP_CARRY_PROMOTION = """
def t(f):
    try:
        print(repr(f()))
    except Exception as e:
        print(type(e).__name__, e)

t(lambda: lax.fori_loop(0, 3, lambda i, c: c + 0.5, 0))
t(lambda: lax.fori_loop(0, 3, lambda i, c: c + i, 0))
t(lambda: lax.fori_loop(0, 3, lambda i, c: c + jnp.float32(0.5), 0))
t(lambda: lax.fori_loop(0, 3, lambda i, c: c + 0.5, jnp.int32(0)))
t(lambda: lax.fori_loop(0, 3, lambda i, c: c + 0.5, 1.0))
t(lambda: lax.fori_loop(0, 3, lambda i, c: c + jnp.float32(0.5), 1.0))
t(lambda: lax.fori_loop(jnp.int32(0), 3, lambda i, c: c + i, 0))
t(lambda: lax.fori_loop(0, 3, lambda i, c: (c[0] + 2, c[1] * 1.5), (0, 1)))
t(lambda: lax.scan(lambda c, x: (c + x, c), 0, jnp.arange(3.)))
t(lambda: lax.scan(lambda c, x: (c + x, c), 0., jnp.arange(3)))
t(lambda: lax.scan(lambda c, x: (c + x, c), jnp.int32(0), jnp.arange(3.)))
t(lambda: lax.scan(lambda c, x: ((c[0] + x, jnp.zeros(3)), c), (jnp.int32(0), jnp.zeros(2)),
                   jnp.arange(3.)))
t(lambda: lax.while_loop(lambda c: c < 3, lambda c: c + 0.5, 0))
t(lambda: lax.while_loop(lambda c: c < 3, lambda c: c + 1, 0))
t(lambda: lax.while_loop(lambda c: c < 3, lambda c: c + 0.5, jnp.int32(0)))
t(lambda: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 0.5, c[1] + 1), (0, 0.)))
t(lambda: jax.jit(lambda n: lax.fori_loop(0, n, lambda i, c: c + 0.5, 0))(3))
"""

LEGACY_THREEFRY = """
jax.config.update("jax_threefry_partitionable", False)
try:
    key = jax.random.PRNGKey(0)
    k1, k2 = jax.random.split(key)
    print(k1, k2, jax.random.split(key, 3))
    print(jax.random.normal(key, (3,)), jax.random.normal(key, (5,)))
    print(jax.random.uniform(k1, (2, 3)))
    print(jax.random.bits(key, (3,), jnp.uint8), jax.random.bits(key, (5,), jnp.uint16))
    print(jax.random.randint(key, (4,), 0, 10), jax.random.fold_in(key, 7))
    print(jax.random.permutation(key, 5), jax.random.bernoulli(key, 0.5, (4,)))
    print(jax.jit(lambda k: jax.random.normal(k, (3,)))(key))
    jax.config.update("jax_enable_x64", True)
    print(jax.random.bits(key, (3,), jnp.uint64), jax.random.normal(key, (3,)))
finally:
    jax.config.update("jax_enable_x64", False)
    jax.config.update("jax_threefry_partitionable", True)
print(jax.random.normal(jax.random.PRNGKey(0), (3,)))
"""

ERRORS_AND_DTYPES = """
def t(f):
    try:
        print(repr(f()))
    except Exception as e:
        print(type(e).__name__, str(e).split("at 0x")[0])

t(lambda: jax.jit(lambda x: x, static_argnums=3)(1.))
t(lambda: jnp.einsum('ij,jk->iz', jnp.ones((2, 2)), jnp.ones((2, 2))))
t(lambda: jnp.asarray('abc'))
t(lambda: jnp.ones(3) + jnp.ones(4))
t(lambda: jnp.array(None))
t(lambda: jnp.array([[1, 2], [3]]))
t(lambda: jnp.array(object()))
t(lambda: lax.cond(True, lambda: 1., lambda: jnp.int32(1)))
t(lambda: type(lax.top_k(jnp.arange(5.), 2)))
t(lambda: jax.jit(lambda x: isinstance(x, jax.Array))(1.))
t(lambda: jax.grad(lambda x, y: x, argnums=(0, 1))(1., 2.))
print(type(jnp.ones(2)), jnp.ones(2).sharding)
jax.config.update("jax_enable_x64", True)
try:
    t(lambda: jnp.searchsorted(jnp.arange(5.), 2.).dtype)
    t(lambda: jnp.tri(3).dtype)
finally:
    jax.config.update("jax_enable_x64", False)
"""

TRACER_REPRS = """
jax.vmap(lambda x: print(x) or x)(jnp.arange(2))
jax.vmap(lambda x, y: print(x * 2.) or x, in_axes=(1, None))(jnp.ones((3, 2)), 1.)
jax.jit(jax.grad(lambda x: print(x) or x))(1.)
jax.grad(lambda x: print(x * x) or x)(1.)
jax.jvp(lambda x: print(x * 2) or x, (jnp.ones(2),), (jnp.ones(2),))
jax.jit(lambda x: print(x, repr(x)))(1)
jax.jit(lambda x: print(x, repr(x)))(jnp.ones((2, 3), jnp.int32))
jax.jacfwd(lambda x: print(x) or x)(jnp.ones(2))
jax.hessian(lambda x: print(x) or x.sum())(jnp.ones(2))
jax.make_jaxpr(lambda x: print(x) or x)(1.)
"""

JAXPR_PRINTING = """
x = jnp.ones((2, 3))
y = jnp.ones((3, 4))
for f, args in [(lambda x: x.sum(), (x,)), (lambda x: jnp.max(x, axis=0), (x,)),
                (lambda x, y: x @ y, (x, y)), (lambda x: x * 1.67, (1.,)),
                (lambda x: x * jnp.float32(1.67), (1.,)),
                (lambda x: jnp.exp(x) - 1.67, (jnp.ones(2),)),
                (lambda x: jax.checkpoint(jnp.sin)(x), (1.,)),
                (lambda x: jnp.arange(3) * x, (1.,)), (lambda x: x.reshape(3, 2).T, (x,)),
                (lambda: lax.fori_loop(0, 3, lambda i, c: c + i, 0), ())]:
    print(jax.make_jaxpr(f)(*args))
print(jax.typeof(1.), jax.typeof(jnp.ones(3)))
"""

IO_CALLBACK = """
import numpy as np
from jax.experimental import io_callback  # noqa: the alias module maps it to jaxkit's

def cb(x):
    print('cb', x)
    return np.asarray(x * 2, np.float32)

sds = jax.ShapeDtypeStruct((), jnp.float32)
print(io_callback(cb, sds, 1.))
print(jax.jit(lambda x: io_callback(cb, sds, x, ordered=True))(2.))
print(jax.vmap(lambda x: io_callback(cb, sds, x))(jnp.arange(2.)))
for bad in (lambda: jax.grad(lambda x: io_callback(cb, sds, x))(1.),
            lambda: jax.vmap(lambda x: io_callback(cb, sds, x, ordered=True))(jnp.arange(2.))):
    try:
        bad()
    except Exception as e:
        print(type(e).__name__, e)
"""

TREE_NAMESPACE = """
import dataclasses
t = {'a': 1, 'b': (2, 3), 'c': [4, {'d': 5}]}
print(jax.tree.leaves(t), jax.tree.structure(t), jax.tree.map(lambda x: x * 2, t))
print(jax.tree.flatten(t), jax.tree.unflatten(jax.tree.structure(t), range(5)))
print(jax.tree.leaves_with_path(t), jax.tree.flatten_with_path(t)[0][:2])
print(jax.tree.map_with_path(lambda p, x: len(p) + x, t))
print(jax.tree.reduce(lambda a, b: a + b, t), jax.tree.reduce_associative(lambda a, b: a + b, t))
print(jax.tree.all(t), jax.tree.all([1, 0]))
print(jax.tree.broadcast((1, 2), ((3, 4), {'a': 5})), jax.tree.broadcast(1, [1, 2, 3]))
print(jax.tree.transpose(jax.tree.structure([0, 0]), jax.tree.structure((0, 0)),
                         [(1, 2), (3, 4)]))
print(jax.tree_util.flatten_one_level({'a': 1, 'b': (2, 3)}))
print(jax.tree_util.flatten_one_level_with_keys({'a': 1, 'b': (2, 3)}))
print(jax.tree_util.tree_broadcast((1, 2), ((3, 4), {'a': 5})))
try:
    jax.tree.reduce_associative(lambda a, b: a + b, [])
except Exception as e:
    print(type(e).__name__, e)

@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Op:
    x: object
    op: str = jax.tree.static(default="add")

print(jax.tree.structure(Op(1)), jax.tree.leaves(Op(jnp.ones(2))))
"""

TOP_LEVEL_NAMES = """
import numpy as np
print(jax.typeof(1.), jax.typeof(jnp.ones((2, 3), jnp.int8)), jax.float0)
with jax.enable_x64(True):
    print(jnp.ones(2).dtype, jax.enable_x64.value)
print(jnp.ones(2).dtype, jax.enable_x64.value)
with jax.disable_jit():
    jax.jit(lambda x: print(type(x).__name__))(1.)

@jax.jit
def f(x):
    with jax.ensure_compile_time_eval():
        y = jnp.sin(2.)
        print(y)
    return x * y

print(f(1.))
with jax.named_scope("outer"):
    print(jax.named_call(lambda x: x + 1, name="inc")(1.))
g = jax.linear_transpose(lambda x: (2. * x, x.sum()), jnp.ones(3))
print(g((jnp.arange(3.), 1.)))

@jax.custom_gradient
def h(x):
    return jnp.sin(x), lambda g: (g * 10.,)

print(h(1.), jax.grad(h)(1.), jax.vmap(jax.grad(h))(jnp.arange(2.)))
x = jnp.arange(3.)
print(x.addressable_shards[0].index, x.is_fully_replicated, x.addressable_data(0))
print(x.byteswap(), jnp.array([0, 1]).choose([jnp.ones(2), jnp.zeros(2)]))
print(jax.jit(lambda t: (t.nbytes, t.itemsize))(x))
dev = jax.devices()[0]
print(jax.make_array_from_callback((2, 2), jnp.ones(1).sharding,
                                   lambda idx: np.arange(4.).reshape(2, 2)[idx]))
print(jax.host_count(), jax.host_id(), jax.host_ids(), jax.process_indices())
print(isinstance(jnp.ones(1), jax.Device), isinstance(dev, jax.Device))
print(jax.dtypes.itemsize_bits(jnp.int4), jax.dtypes.scalar_type_of(jnp.ones(2, jnp.int8)))
"""

NAMESPACE_MODULES = """
from jax.flatten_util import ravel_pytree
from jax.custom_batching import custom_vmap, sequential_vmap
from jax.test_util import check_grads
flat, unravel = ravel_pytree({'a': jnp.ones(2), 'b': (jnp.arange(3), 2.)})
print(flat, unravel(flat))

@custom_vmap
def f(x, y):
    return x + y

@f.def_vmap
def rule(axis_size, in_batched, xs, ys):
    print('rule', axis_size, in_batched)
    return xs + ys, in_batched[0] or in_batched[1]

print(f(1., 2.), jax.vmap(f)(jnp.ones(3), jnp.ones(3)))
print(jax.vmap(f, in_axes=(0, None))(jnp.ones(3), 2.))
print(jax.vmap(sequential_vmap(lambda x, y: x * y), in_axes=(0, None))(jnp.ones(3), 3.))
check_grads(lambda x: jnp.sin(x) * x ** 2, (jnp.arange(3.),), order=2)

@jax.custom_jvp
def wrong(x):
    return jnp.sin(x)

wrong.defjvp(lambda p, t: (wrong(p[0]), 2 * t[0]))
try:
    check_grads(wrong, (1.,), 1)
except AssertionError:
    print("AssertionError")
"""

# Tutorial cells (jax-ml/jax docs at jax-v0.10.2): jnp functions JAX wraps in a plain jit
# stage a nested ``jit[name=...]`` equation; jaxprs lay out as JAX's pretty-printer lays them
# out (one line when they fit, variable lists filling lines, big or repeated bodies printed
# once as ``let name = ... in``); ``ShapeDtypeStruct.like`` (external-callbacks.md).
NESTED_JIT_JNP = """
x = jnp.arange(4.0)
selu = lambda x: 1.05 * jnp.where(x > 0, x, 1.67 * jnp.exp(x) - 1.67)
print(jax.make_jaxpr(selu)(x))
print(jax.make_jaxpr(jax.grad(lambda x: jnp.where(x > 0, x, 0.01 * x).sum()))(x))
print(jax.make_jaxpr(jax.vmap(lambda x: jnp.where(x > 0, x, 1.0)))(x))
print(jax.make_jaxpr(lambda x: jnp.where(x[0] > 1, x, 2))(x))
print(jax.make_jaxpr(lambda x: jnp.where(x, 1, 2))(x))
print(jax.make_jaxpr(lambda x: jnp.clip(x, 0, 1))(x))
print(jax.make_jaxpr(lambda x: jnp.clip(x, -1.5, x[0]))(x))
print(jax.make_jaxpr(lambda x: jnp.round(x, 1))(x))
print(jax.make_jaxpr(lambda x: jnp.cumsum(x))(x))
print(jax.make_jaxpr(jax.grad(lambda x: jnp.cumsum(x).sum()))(x))
print(jnp.where(x > 1, x, 0.0), jnp.clip(x, 1, 2), jnp.round(x / 3, 2), jnp.cumprod(x + 1))
"""

JAXPR_LAYOUT = """
import numpy as np
ones = [np.ones(3, np.float32)] * 30
print(jax.make_jaxpr(lambda x: jnp.cos(jnp.sin(x)))(1.0))
print(jax.make_jaxpr(lambda *xs: jnp.concatenate(xs))(*ones))
print(jax.make_jaxpr(lambda *xs: jax.jit(lambda *a: a[0] * 2)(*xs))(*ones[:12]))
print(jax.make_jaxpr(lambda: jax.lax.rng_uniform(0.0, 1.0, (3,)))())
def permissive_sum(*xs):
    return sum(xs)
print(jax.make_jaxpr(permissive_sum)(*range(10)))
g = jax.jit(lambda y: y * 2 + 1)
print(jax.make_jaxpr(lambda x: g(x) + g(x))(1.0))
def big(x):
    for _ in range(11):
        x = jnp.sin(x)
    return x
print(jax.make_jaxpr(lambda x: jax.jit(big)(x) * 2)(1.0))
print(jax.make_jaxpr(jax.grad(lambda x: jnp.clip(x, 0.0, 1.0).sum()))(np.ones(4, np.float32)))
"""

SHAPE_DTYPE_STRUCT_LIKE = """
import numpy as np
print(jax.ShapeDtypeStruct.like(jnp.arange(5.0)), jax.ShapeDtypeStruct.like(2.0))
print(jax.ShapeDtypeStruct.like(jax.ShapeDtypeStruct((2,), jnp.int32)))
def f(x):
    return jax.pure_callback(lambda v: np.sin(v).astype(v.dtype), jax.ShapeDtypeStruct.like(x),
                             x, vmap_method='sequential')
x = jnp.arange(5.0)
print(f(x), jax.jit(f)(x), jax.vmap(f)(x))
"""

# Writing_custom_interpreters_in_Jax.md: a closed jaxpr's constants are also ``literals``.
CLOSED_JAXPR_LITERALS = """
closed = jax.make_jaxpr(lambda x: jnp.exp(jnp.tanh(x)))(jnp.ones(5))
print(closed.jaxpr)
print(closed.literals)
closed = jax.make_jaxpr(lambda x: x + jnp.arange(3.0))(jnp.ones(3))
print(len(closed.literals), closed.literals is closed.consts or closed.literals == closed.consts)
"""

# vmapped_log_probs.md: jnp's broadcasting error is a ValueError listing the shapes when the
# ranks differ (equal ranks reach the lax operation, whose error is a TypeError).
JNP_BROADCAST_ERROR = """
import numpy as np
for f in [lambda: jnp.add(np.ones(100), np.ones((100, 10))),
          lambda: jnp.add(np.ones(3), np.ones(4)),
          lambda: jnp.ones(100) * jnp.ones((100, 10)),
          lambda: jnp.where(jnp.ones(3) > 0, jnp.ones(4), 0.),
          lambda: jax.jit(lambda a, b: a - b)(jnp.ones(3), jnp.ones((2, 4)))]:
    try:
        f()
    except Exception as e:
        print(type(e).__name__, e)
"""

# Writing_custom_interpreters 13: the JVP rules JAX writes with ``_one`` (a ``full_like``) keep
# a weak primal's derivative weak; the others use strong constants.
JVP_WEAK_TYPES = """
import numpy as np
for name in ["arctanh", "arcsinh", "arccosh", "tanh", "log1p", "expm1", "arctan", "sqrt",
             "arcsin", "tan"]:
    fn = getattr(jnp, name)
    x = 1.5 if name == "arccosh" else 0.5
    print(name, repr(jax.grad(fn)(x)), repr(jax.grad(fn)(np.float32(x))))
print(repr(jax.grad(jax.nn.sigmoid)(0.5)))
print(repr(jax.jit(jax.vmap(jax.grad(lambda y: jnp.arctanh(jnp.log(y)))))(
    (jnp.arange(5) + 1.) / 5.)))
"""

# tracing.md 6 and custom_pytrees.md 10: the error classes JAX raises.
ERROR_CLASSES = """
import numpy as np

@jax.jit
def f(x):
    return x.reshape(jnp.array(x.shape).prod())

try:
    f(jnp.ones((2, 3)))
except Exception as e:
    print(type(e).__name__, "Shapes must be 1D sequences" in str(e))
print(jnp.ones((2, 3)).reshape(jnp.array([3, 2])).shape)

class MyTree:
    def __init__(self, a):
        self.a = jnp.asarray(a)

jax.tree_util.register_pytree_node(MyTree, lambda t: ((t.a,), None),
                                   lambda _, args: MyTree(*args))
tree = MyTree(jnp.arange(5.0))
for transform in [jax.jacobian, jax.jacrev, jax.jacfwd]:
    try:
        transform(lambda x: x)(tree)
    except Exception as e:
        print(transform.__name__, type(e).__name__, e)
print(jax.jacobian(lambda x: x * 2)(jnp.arange(2.0)))
"""

# Variance and friends compute as JAX's (values, dtypes and weak types).
VAR_STD_VALUES = """
import numpy as np
x = np.arange(12, dtype=np.float32).reshape(3, 4) ** 1.5
for kw in [{}, {"axis": 1}, {"axis": 0, "ddof": 1}, {"keepdims": True},
           {"axis": 1, "correction": 2}, {"where": x > 3}]:
    print(jnp.var(x, **kw), jnp.std(x, **kw))
print(repr(jnp.var(np.arange(5))), repr(jnp.std(jnp.arange(4.0), ddof=4)))
print(repr(jnp.var(np.ones(3, np.complex64) * (1 + 2j))))
print(jax.grad(lambda a: jnp.std(a))(jnp.arange(4.0)))
print(jnp.tril(x, -1), jnp.triu(x.reshape(3, 2, 2), 1), jnp.diagonal(x, -1))
print(jnp.diag(jnp.arange(3.0), 1), jnp.diag(jnp.arange(3.0), -1), jnp.diag(x, 2))
print(jax.nn.softmax(x, axis=0), jax.grad(lambda a: jax.nn.softmax(a)[1])(jnp.arange(3.0)))
print(x - x[:, :1], jax.grad(lambda a: (a - a[:1]).sum())(jnp.arange(3.0)))
"""

# gradient-checkpointing.md 21 / autodiff_remat.md 22: a function checkpointed again reuses its
# first trace (JAX caches it per function and argument types), whatever the policy; a global
# redefined since is not seen.
CHECKPOINT_TRACE_CACHE = """
from jax.ad_checkpoint import checkpoint_name, print_saved_residuals

def loss(w, x):
    return jnp.sum(predict(w, x) ** 2)

def predict(w, x):
    return jnp.sin(jnp.dot(w, x))

w, x = jnp.ones((3, 3)), jnp.ones(3)
policies = jax.checkpoint_policies
print_saved_residuals(jax.checkpoint(loss, policy=policies.dots_saveable), w, x)

def predict(w, x):
    return checkpoint_name(jnp.sin(jnp.dot(w, x)), "h")

print_saved_residuals(jax.checkpoint(loss, policy=policies.save_any_names_but_these("g")), w, x)
print_saved_residuals(jax.checkpoint(lambda w, x: loss(w, x),
                                     policy=policies.save_any_names_but_these("g")), w, x)
print_saved_residuals(jax.checkpoint(loss, policy=policies.dots_saveable), w[:2], x)
"""

# jax-primitives.md: a user-defined primitive with its rules, registered in the tables JAX
# names (tuples handed to the JVP and batching rules, tracer classes named as JAX's).
CUSTOM_PRIMITIVE_API = """
import numpy as np
from jax.extend import core as xcore
from jax.extend.mlir.dialects import stablehlo as hlo
from jax.interpreters import ad, batching, mlir

fma_p = xcore.Primitive("fma_demo")
fma_p.def_impl(lambda x, y, z: np.add(np.multiply(x, y), z))
fma_p.def_abstract_eval(lambda x, y, z: jax.core.ShapedArray(x.shape, x.dtype))

def fma(x, y, z):
    return fma_p.bind(x, y, z)

def fma_jvp(primals, tangents):
    print("jvp", type(primals).__name__, type(tangents).__name__, tangents)
    x, y, z = primals
    xt, yt, zt = tangents
    xt = jnp.zeros_like(x) if type(xt) is ad.Zero else xt
    yt = jnp.zeros_like(y) if type(yt) is ad.Zero else yt
    zt = jnp.zeros_like(z) if type(zt) is ad.Zero else zt
    return fma(x, y, z), fma(xt, y, fma(x, yt, zt))

def fma_transpose(ct, x, y, z):
    # (under jit(grad) the output cotangent is a JitTracer, as in JAX)
    print("transpose", type(ct).__name__, x, y)
    if not ad.is_undefined_primal(x):
        return None, fma(x, ct, jnp.zeros_like(ct)), ct
    return fma(ct, y, jnp.zeros_like(ct)), None, ct

def fma_batch(vals, dims):
    print("batch", type(vals).__name__, dims)
    return fma(*vals), dims[0]

def fma_lowering(ctx, x, y, z):
    return [hlo.AddOp(hlo.MulOp(x, y), z).result]

ad.primitive_jvps[fma_p] = fma_jvp
ad.primitive_transposes[fma_p] = fma_transpose
batching.primitive_batchers[fma_p] = fma_batch
print(mlir.register_lowering(fma_p, fma_lowering, platform="cpu"))
try:
    mlir.register_lowering(fma_p, fma_lowering, platform="nosuch")
except NotImplementedError as e:
    print(type(e).__name__, "unknown platform" in str(e))

def show(f):
    def g(*args):
        print(f.__name__, [type(a).__name__ for a in args], *args)
        return f(*args)
    return g

sq = lambda a, b: fma(a, a, b)
print(fma(2., 3., 4.))
print(jax.jit(show(sq))(2., 10.))
print(jax.jvp(sq, (2., 10.), (1., 1.)))
print(jax.grad(show(sq))(2., 10.))
print(jax.jit(jax.grad(sq))(2., 10.))
print(jax.vmap(show(sq))(np.array([2., 3.]), np.array([10., 20.])))
print(jax.jit(jax.vmap(sq))(np.array([2., 3.]), np.array([10., 20.])))
print(jax.make_jaxpr(jax.grad(sq))(2., 10.))
"""

# debugging/flags.md: with jax_debug_nans, each jit whose output has a NaN says so and runs its
# de-optimized version (jnp functions are jits too), until a primitive raises eagerly.
DEBUG_NANS_DEOPTIMIZED = """
import numpy as np
x = jnp.array([np.nan, 1.0])

def f(x):
    w = 3 * jnp.square(x)
    return jnp.log(-w)

@jax.jit
def g(x):
    return jnp.sin(x) + x / x * 2

inner = jax.jit(lambda y: lax.sqrt(y - 1.0))
with jax.debug_nans(True):
    for fn, a in [(jax.jit(lambda x: x * 2), x), (jax.jit(lambda x: jnp.log(x) * 2), -jnp.ones(2)),
                  (f, 5.), (jax.jit(f), 5.), (g, jnp.zeros(2)), (g, jnp.zeros(2)),
                  (jax.jit(lambda x: inner(x) * 2), jnp.zeros(3)),
                  (lambda x: lax.div(x, x), jnp.zeros(2))]:
        try:
            fn(a)
        except FloatingPointError as e:
            print(type(e).__name__, e)
"""

# jax-primitives.md tells tracers apart by their class names; zeros of a weak scalar are a
# literal in a jaxpr (JAX folds the conversion of the Python int).
TRACER_CLASSES_AND_WEAK_ZEROS = """
def show(x):
    print(type(x).__name__, x)
    return x

jax.jit(show)(1.0)
jax.grad(show)(1.0)
jax.jvp(show, (1.0,), (1.0,))
jax.vmap(show)(jnp.ones(2))
print(jax.make_jaxpr(lambda x: jnp.zeros_like(x))(2.0))
print(jax.make_jaxpr(lambda x: x * jnp.ones_like(x))(2.0))
print(jax.make_jaxpr(lambda x: x * lax.full_like(x, 3))(jnp.ones(2)))
print(jax.make_jaxpr(lambda x: x * jnp.zeros_like(x))(1))
print(jnp.zeros_like(2.0), jax.jit(lambda x: jnp.zeros_like(x))(2.0))
"""

PLATFORM_DEPENDENT = """
f = lambda x: lax.platform_dependent(x, cpu=jnp.sin, default=jnp.cos)
print(jax.make_jaxpr(f)(1.))
print(jax.make_jaxpr(lambda x: lax.platform_dependent(x, cpu=jnp.sin, tpu=jnp.sin,
                                                      cuda=jnp.tan))(1.))
print(f(1.), jax.jit(f)(1.), lax.switch(5, [jnp.sin], 1.))
print(jax.make_jaxpr(jnp.diagonal)(jnp.ones((2, 2))))
for kw in [dict(cuda=jnp.sin), dict(gpu=jnp.sin), dict(cpu=3), dict(cpu=jnp.sin, default=3)]:
    try:
        lax.platform_dependent(1., **kw)
    except Exception as e:
        print(type(e).__name__, e)
"""

SHARDED_SCALARS_AND_SPECS = """
mesh = jax.sharding.Mesh(jax.devices(), ["x"])
s = jax.sharding.NamedSharding(mesh, jax.P())
x = jax.device_put(1, s)
print(repr(x), x, x.shape)
print(repr(jax.ShapeDtypeStruct((), jnp.int32, sharding=s)))
print(jax.ShapeDtypeStruct((2,), jnp.float32) == jax.ShapeDtypeStruct((2,), jnp.float32,
                                                                      sharding=s))
try:
    jax.ShapeDtypeStruct((2,), jnp.float32, sharding=3)
except ValueError as e:
    print(e)
"""

LOWERED_TEXT = """
import collections
Pair = collections.namedtuple("Pair", "u v")
print(jax.jit(lambda x, y: (x, {"a": y * 2})).lower(1., 2.).as_text())
print(jax.jit(lambda x: Pair(x, [x * 2])).lower(1.).as_text())
print(jax.jit(lambda x: lax.platform_dependent(x, cpu=jnp.sin, default=jnp.cos)).lower(
    jnp.ones(3)).as_text())
print(jax.jit(lambda x, d: d["k"] + x).lower(1., {"k": 2.}).as_text(dialect="hlo"))
"""

UNUSED_ARGUMENTS = """
import numpy as np
x3, x2 = np.ones(3, np.float32), np.ones(2, np.float32)
for f, kw, args in [(lambda x, y: x, {}, (1., 2.)), (lambda x, y: x, dict(keep_unused=True), (1., 2.)),
                    (lambda x, y: y * 2, dict(donate_argnums=(0, 1)), (x3, x3)),
                    (lambda d: d["a"] + 1, {}, ({"a": 1., "b": 2.},)),
                    (lambda x, y: (x * y, x)[1], {}, (1., 2.)),
                    (lambda x, y: (x * y, x)[1], dict(keep_unused=True), (1., 2.)),
                    (lambda x, y: 3., {}, (1., 2.))]:
    lowered = jax.jit(f, **kw).lower(*args)
    print(lowered.as_text(), lowered.in_avals, lowered.args_info, lowered.donate_argnums)
compiled = jax.jit(lambda x, y: x + 1.).lower(x3, x2).compile()
print(compiled(x3, x2), compiled.in_avals, sorted(compiled.cost_analysis().items()))
print(jax.jit(lambda x, y: y).trace(1., 2.).jaxpr)
f = jax.jit(lambda x, y: x * 2, donate_argnums=1)
a, b = jnp.ones(3), jnp.ones(2)
print(f(a, b), f(a, b), f(a, 1.), f(a, 1.), b.is_deleted())
b.delete()
print(f(a, b), jax.grad(f)(1., 2.), jax.vmap(f)(a, a))
"""

# The parameter names of control-flow equations (a custom interpreter reads and rebinds them).
EQUATION_PARAMS = """
def params(f, *args):
    return [(e.primitive.name, sorted(e.params)) for e in jax.make_jaxpr(f)(*args).eqns]
step = lambda c, a: (c * a, c + a)
print(params(lambda x: lax.scan(step, x, jnp.ones(3)), 1.))
print(params(jax.grad(lambda x: lax.scan(step, x, jnp.ones(3))[0]), 1.))
print(params(jax.vmap(lambda x: lax.scan(step, x, jnp.ones(3))[0]), jnp.ones(2)))
print(params(lambda x: lax.map(jnp.sin, x), jnp.ones(3)))
print(params(lambda x: lax.while_loop(lambda c: c < 3, lambda c: c + 1, x), 1.))
print(params(lambda x: lax.fori_loop(0, 3, lambda i, c: c * 2, x), 1.))
"""

RECORDS = {
    "equation_params": EQUATION_PARAMS,
    "unused_arguments": UNUSED_ARGUMENTS,
    "lowered_text": LOWERED_TEXT,
    "sharded_scalars_and_specs": SHARDED_SCALARS_AND_SPECS,
    "platform_dependent": PLATFORM_DEPENDENT,
    "tracer_classes_and_weak_zeros": TRACER_CLASSES_AND_WEAK_ZEROS,
    "debug_nans_deoptimized": DEBUG_NANS_DEOPTIMIZED,
    "custom_primitive_api": CUSTOM_PRIMITIVE_API,
    "checkpoint_trace_cache": CHECKPOINT_TRACE_CACHE,
    "jvp_weak_types": JVP_WEAK_TYPES,
    "error_classes": ERROR_CLASSES,
    "var_std_values": VAR_STD_VALUES,
    "jnp_broadcast_error": JNP_BROADCAST_ERROR,
    "closed_jaxpr_literals": CLOSED_JAXPR_LITERALS,
    "nested_jit_jnp": NESTED_JIT_JNP,
    "jaxpr_layout": JAXPR_LAYOUT,
    "shape_dtype_struct_like": SHAPE_DTYPE_STRUCT_LIKE,
    "tree_namespace": TREE_NAMESPACE,
    "top_level_names": TOP_LEVEL_NAMES,
    "namespace_modules": NAMESPACE_MODULES,
    "jaxpr_printing": JAXPR_PRINTING,
    "io_callback": IO_CALLBACK,
    "legacy_threefry": LEGACY_THREEFRY,
    "errors_and_dtypes": ERRORS_AND_DTYPES,
    "tracer_reprs": TRACER_REPRS,
    "loop_carry_promotion": LOOP_CARRY_PROMOTION,
    "custom_function_not_called": CUSTOM_FUNCTION_NOT_CALLED,
    "python_if_in_rule": PYTHON_IF_IN_RULE,
}


def _run(snippet: str, jax_module, jnp_module) -> str:
    out = io.StringIO()
    env = {"jax": jax_module, "jnp": jnp_module, "lax": jax_module.lax}
    if jax_module is jaxkit:  # `from jax.experimental import ...` inside a snippet
        snippet = snippet.replace("from jax.", "from jaxkit.")
    with contextlib.redirect_stdout(out):
        exec(compile(textwrap.dedent(snippet), "<snippet>", "exec"), env)
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_prints_as_jax(name):
    snippet = RECORDS[name]
    expected = _run(snippet, jax, jax_jnp)
    got = _run(snippet, jaxkit, jk_jnp)
    assert got == expected


# Eager calls of jnp functions whose jitted body or alias has another name: the program is
# named after JAX's function (``jit_dot``, not ``jit__dot``; ``jit_abs``, not
# ``jit_absolute``). Odd shapes, so that no earlier test has compiled these programs.
_A, _V = np.ones((7, 11), np.float32), np.linspace(0.1, 0.9, 11, dtype=np.float32)
EAGER_PROGRAMS = [("dot", (_A, _V)), ("abs", (_V,)), ("acos", (_V,)), ("around", (_V,)),
                  ("atan2", (_V, _V)), ("bitwise_invert", (_V.astype(np.int32),))]


def _module_name(lowered) -> str:
    return re.search(r"module @(\S+)", lowered.as_text()).group(1)


def test_eager_program_names_as_jax(caplog):
    for name, args in EAGER_PROGRAMS:
        theirs = _module_name(getattr(jax_jnp, name).lower(*args))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="jax"), jaxkit.log_compiles():
            getattr(jk_jnp, name)(*args)
        compiled = [re.sub(r"jit\((.*)\) in .*", r"jit_\1", r.getMessage())
                    for r in caplog.records if "Finished XLA compilation" in r.getMessage()]
        assert compiled == [f"Finished XLA compilation of {theirs}"], name


class _Callable:
    def __call__(self, x):
        return x


def _identity(x):
    return x


@pytest.mark.parametrize("fun", [lambda x: x, functools.partial(_identity), _Callable()],
                         ids=["lambda", "partial", "callable_object"])
def test_jit_module_names_as_jax(fun):
    # JAX's names: ``<lambda>`` -> ``jit__lambda`` (trailing ``_`` dropped), a partial's
    # function's name, ``<unnamed function>`` for other callables.
    assert _module_name(jaxkit.jit(fun).lower(1.0)) == _module_name(jax.jit(fun).lower(1.0))
    assert jaxkit.jit(fun).__name__ == jax.jit(fun).__name__


# The public functions JAX 0.10.2 defines as jitted functions carry jit's stages (``lower``,
# ``trace``, ``eval_shape``); jaxkit's get them from jnp's ``@jitted`` decorator, and jax.lax's
# three (below the layer of jit) from ``lax.nested_jit``.
_STAGED_MODULES = ["numpy", "numpy.linalg", "numpy.fft", "nn", "scipy.special", "scipy.linalg",
                   "lax", "random", "image"]


def _staged_names(root) -> set[str]:
    found = set()
    for name in _STAGED_MODULES:
        module = importlib.import_module(f"{root.__name__}.{name}")
        found |= {f"{name}.{n}" for n in dir(module) if not n.startswith("_")
                  and not isinstance(getattr(module, n), type)
                  and callable(getattr(module, n)) and hasattr(getattr(module, n), "lower")}
    return found


def test_jitted_public_functions_have_stages_as_jax():
    theirs = _staged_names(jax)
    assert len(theirs) > 200  # the oracle's table: 164 in jnp alone
    missing = theirs - _staged_names(jaxkit)
    assert missing == set()
    x, m = np.linspace(0.5, 2, 3, dtype=np.float32), np.eye(2, dtype=np.float32) * 2
    for name, args in [("dot", (x, x)), ("matmul", (m, m)), ("vander", (x,)),
                       ("linalg.norm", (m,)), ("atleast_2d", (x,)), ("lax.fft", (x, "fft", (3,))),
                       ("lax.dynamic_index_in_dim", (m, 1, 1, False)),
                       ("lax.dynamic_update_index_in_dim", (m, x[:2], np.int32(1), 1))]:
        ours, ref = jk_jnp, jax_jnp
        if name.startswith("lax."):
            ours, ref, name = jaxkit.lax, jax.lax, name[4:]
        for part in name.split("."):
            ours, ref = getattr(ours, part), getattr(ref, part)
        assert ours.lower(*args).as_text() == ref.lower(*args).as_text(), name
        assert repr(ours.eval_shape(*args)) == repr(ref.eval_shape(*args)), name
        assert str(ours.trace(*args).jaxpr) == str(ref.trace(*args).jaxpr), name
