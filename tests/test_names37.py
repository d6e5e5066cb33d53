"""The last public names JAX 0.10.2 has that no other part of jaxkit owned, against the oracle:
``scheduling_groups.FlatTree``, ``sparse.transform.lift_jvp``, ``hijax.TransformedRef`` and
``hijax.HiPspec``, ``custom_derivatives.remat_opt_p`` (``custom_vjp``'s ``optimize_remat``),
and ``experimental.x64_context`` (no such module in JAX 0.10.2). Each record is an expression
and its ``str()`` (or ``"ErrorClass: message"``) under JAX 0.10.2, recorded with the oracle;
the setup below runs with ``jax`` bound to jaxkit."""
import functools
import importlib
import re

import numpy as np
import pytest

import jaxkit as jax
import jaxkit.custom_derivatives as custom_derivatives
import jaxkit.experimental.hijax as hijax  # noqa: F401  (the records' expressions use it)
import jaxkit.experimental.scheduling_groups as scheduling_groups
import jaxkit.experimental.sparse.transform as sparse_transform
import jaxkit.numpy as jnp
from jaxkit.extend import linear_util

PKG = "jaxkit"


FlatTree = scheduling_groups.FlatTree
lift_jvp = sparse_transform.lift_jvp
SymbolicZero = custom_derivatives.SymbolicZero
F32 = jax.core.ShapedArray((), np.float32)
tree = ({"a": 1, "b": (2, 3)}, [4])
ft = FlatTree.flatten(tree)


def unzipped(ft):
    a, b = ft.map(lambda v: (v, -v)).unzip2()
    return a.unflatten(), b.unflatten()


def statics(s):
    return s.vals, s.statics, s.unflatten(), str(s.tree_without_statics)


def filtered(ft):
    f = ft.filter(lambda v: v % 2 == 0)
    return f.unpack_aux()[0].unflatten(), f.unfilter().unflatten()


def jvp_rule(*zeros):
    """JAX's form of a custom_jvp rule for (x, y) -> (x * y, sin x): which input tangents
    are symbolic zeros -> (jvp jaxpr, consts, which output tangents are zero)."""
    def jvp(x, y, *nz):
        it = iter(nz)
        tx = 0.0 if zeros[0] else next(it)
        ty = 0.0 if zeros[1] else next(it)
        return x * y, jnp.sin(x), tx * y + x * ty
    closed = jax.make_jaxpr(jvp)(*[np.float32(1)] * (2 + sum(not z for z in zeros)))
    return closed.jaxpr, closed.consts, [False, True]


lifted = lift_jvp(0, linear_util.wrap_init(jvp_rule, debug_info=None))
lifted_consts = lift_jvp(1, linear_util.wrap_init(jvp_rule, debug_info=None))
f32 = np.float32


def described(outs):
    return [f"SymbolicZero {o.aval}" if type(o) is SymbolicZero else str(o) for o in outs]


def import_error(name):
    try:
        importlib.import_module(name)
    except ImportError as e:
        return f"{type(e).__name__}: {e}"
    return "imported"


def fresh_ref():
    return jax.new_ref(jnp.arange(6.0).reshape(2, 3))


def static_of(fn):
    """What ``fn`` gives for a traced ref under jit (Python values kept from the trace)."""
    seen = []

    def body(r):
        try:
            seen.append(str(fn(r)))
        except Exception as e:  # the record holds JAX's class and message
            seen.append(f"{type(e).__name__}: {e}")
        return r[...]
    jax.jit(body)(fresh_ref())
    return seen[0]


def value_of(fn):
    return jax.jit(fn)(fresh_ref())


def after(fn):
    """The ref's value after ``fn`` wrote through a view of it under jit."""
    r = fresh_ref()
    jax.jit(lambda r: fn(r))(r)
    return r[...]


def thunkless(text):
    """A jaxpr's text with the remat_opt thunk's value left out (JAX prints the function
    with its address)."""
    return re.sub(r"fun_jaxpr_thunk=[^\n]*\n", "fun_jaxpr_thunk=...\n", str(text))


@jax.custom_vjp
def f_opt(x):
    return jnp.sin(x)


def f_opt_fwd(x):
    return jnp.sin(x), jnp.cos(x)


def f_opt_bwd(c, g):
    return (g * c,)


f_opt.defvjp(f_opt_fwd, f_opt_bwd, optimize_remat=True)
W = np.array([1.0, 2.0, 3.0], np.float32)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def g_opt(k, x, y):
    return k * x * y * W


def g_opt_fwd(k, x, y):
    return g_opt(k, x, y), (x, y * W)  # x is an input passed through: not an output


def g_opt_bwd(k, res, ct):
    x, yw = res
    return ct * k * yw, ct * k * x * W


g_opt.defvjp(g_opt_fwd, g_opt_bwd, optimize_remat=True)
xs = jnp.arange(3.0)


# (expression, what it gives under JAX 0.10.2)
CASES = [
    ('repr(ft)',
     'FlatTree((1, 2, 3, 4))'),
    ('ft.vals',
     '(1, 2, 3, 4)'),
    ('ft.tree',
     "PyTreeDef(({'a': *, 'b': (*, *)}, [*]))"),
    ('len(ft)',
     '4'),
    ('list(ft)',
     '[1, 2, 3, 4]'),
    ('ft.map(lambda v: v * 10).unflatten()',
     "({'a': 10, 'b': (20, 30)}, [40])"),
    ('unzipped(ft)',
     "(({'a': 1, 'b': (2, 3)}, [4]), ({'a': -1, 'b': (-2, -3)}, [-4]))"),
    ('ft.map2(lambda u, v: u + v, [1, 1, 1, 1]).unflatten()',
     "({'a': 2, 'b': (3, 4)}, [5])"),
    ('ft.map3(lambda u, v, w: u + v + w, [1] * 4, [2] * 4).vals',
     '(4, 5, 6, 7)'),
    ('ft.enumerate().vals',
     '((0, 1), (1, 2), (2, 3), (3, 4))'),
    ('[str(p) for p in ft.paths.vals]',
     '["(SequenceKey(idx=0), DictKey(key=\'a\'))", "(SequenceKey(idx=0), DictKey(key=\'b\'), SequenceKey(idx=0))", "(SequenceKey(idx=0), DictKey(key=\'b\'), SequenceKey(idx=1))", \'(SequenceKey(idx=1), SequenceKey(idx=0))\']'),
    ('FlatTree.pack((ft, FlatTree.flatten(5))).tree',
     "PyTreeDef((({'a': *, 'b': (*, *)}, [*]), *))"),
    ('FlatTree.pack((ft, FlatTree.flatten(5))).statics',
     '(False, False)'),
    ('[x.unflatten() for x in FlatTree.pack((ft, FlatTree.flatten(5))).unpack()]',
     "[({'a': 1, 'b': (2, 3)}, [4]), 5]"),
    ("ft.with_aux('hello').unpack_aux()[1]",
     'hello'),
    ("len(ft.with_aux('hello'))",
     '4'),
    ("statics(FlatTree.flatten_static_argnums((1, 'static', 3), (1,)))",
     "((1, 3), (False, True, False), (1, 'static', 3), 'PyTreeDef((*, *))')"),
    ("statics(FlatTree.flatten_static_argnums((1, 'static', 3), (-1,)))",
     "((1, 'static'), (False, False, True), (1, 'static', 3), 'PyTreeDef((*, *))')"),
    ("statics(FlatTree.flatten_static_argnames({'x': 1, 'mode': 'm'}, ('mode',)))",
     '((1,), {\'x\': False, \'mode\': True}, {\'mode\': \'m\', \'x\': 1}, "PyTreeDef({\'x\': *})")'),
    ("statics(FlatTree.flatten_static_argnums_argnames((1, 'st'), {'k': 2}, (1,), ()))",
     '((1, 2), ((False, True), False), ((1, \'st\'), {\'k\': 2}), "PyTreeDef(((*,), {\'k\': *}))")'),
    ('filtered(ft)',
     "((2, 4), ({'a': 1, 'b': (2, 3)}, [4]))"),
    ('FlatTree.flatten_args(1, (2, 3)).unflatten()',
     '((1, (2, 3)), {})'),
    ('FlatTree.flatten_list([1, (2, 3)]).vals',
     '(1, (2, 3))'),
    ('(ft == FlatTree.flatten(tree), hash(ft) == hash(FlatTree.flatten(tree)))',
     '(True, True)'),
    ('ft == FlatTree.flatten([1, 2, 3, 4])',
     'False'),
    ('FlatTree.pack_args(FlatTree.flatten(1), FlatTree.flatten(2)).unflatten()',
     '((1, 2), {})'),
    ('FlatTree.flatten([1, None, 2]).vals',
     '(1, 2)'),
    ('FlatTree.flatten([1, [2]], is_leaf=lambda x: isinstance(x, list) and len(x) == 1).vals',
     '(1, [2])'),
    ('FlatTree.singleton(7).unflatten()',
     '7'),
    ('type(lifted).__name__',
     'WrappedFun'),
    ('described(lifted.call_wrapped(f32(2), f32(3), f32(1), SymbolicZero(F32)))',
     "['6.0', '0.9092974', '3.0', 'SymbolicZero float32[]']"),
    ('described(lifted.call_wrapped(f32(2), f32(3), f32(1), f32(1)))',
     "['6.0', '0.9092974', '5.0', 'SymbolicZero float32[]']"),
    ('described(lifted.call_wrapped(f32(2), f32(3), SymbolicZero(F32), f32(1)))',
     "['6.0', '0.9092974', '2.0', 'SymbolicZero float32[]']"),
    ('described(lifted_consts.call_wrapped(f32(9), f32(2), f32(3), SymbolicZero(F32), f32(1), SymbolicZero(F32)))',
     "['6.0', '0.9092974', '3.0', 'SymbolicZero float32[]']"),
    ('static_of(lambda r: isinstance(r.at[0], hijax.TransformedRef))',
     'True'),
    ('static_of(lambda r: (r.at[0].shape, r.at[0].dtype, r.at[0].ndim, r.at[0].size))',
     "((3,), dtype('float32'), 1, 3)"),
    ('static_of(lambda r: r.at[:, 1:].T.shape)',
     '(2, 2)'),
    ('static_of(lambda r: r.at[0].ref is r)',
     'True'),
    ('static_of(lambda r: (r.at[0].type, r.at[...].T.type, r.at[...].bitcast(jnp.int32).type))',
     '(Ref{float32[3]}, Ref{float32[3,2]}, Ref{int32[2,3]})'),
    ('static_of(lambda r: len(r.at[0].at[1:].transforms))',
     '2'),
    ('static_of(lambda r: [type(t).__name__ for t in r.at[0].T.reshape(3).transforms])',
     "['NDIndexer', 'TransposeTransform', 'ReshapeTransform']"),
    ('static_of(lambda r: r.at[...].T.transforms[-1].permutation)',
     '(1, 0)'),
    ('static_of(lambda r: r.at[...].reshape(3, 2).transforms[-1].shape)',
     '(3, 2)'),
    ('static_of(lambda r: r.at[...].bitcast(jnp.int32).dtype)',
     'int32'),
    ('static_of(lambda r: r.at[:, 1:].transforms)',
     '(NDIndexer(indices=(Slice(start=0, size=2, stride=1), Slice(start=1, size=2, stride=1)), shape=(2, 3), int_indexer_shape=(), validate=True),)'),
    ('static_of(lambda r: r.at[:, 1:].at[1:, :1].transforms[1])',
     'NDIndexer(indices=(Slice(start=1, size=1, stride=1), Slice(start=0, size=1, stride=1)), shape=(2, 2), int_indexer_shape=(), validate=True)'),
    ('static_of(lambda r: r.at[...].reshape(4))',
     'ValueError: cannot reshape shape (2, 3) into shape (4,)'),
    ('value_of(lambda r: r.at[...].T[...])',
     'NotImplementedError: Unsupported transform: TransposeTransform(permutation=(1, 0))'),
    ('value_of(lambda r: r.at[...].reshape(3, 2)[...])',
     '[[0. 1.]\n [2. 3.]\n [4. 5.]]'),
    ('value_of(lambda r: r.at[...].reshape(-1)[1:3])',
     '[1. 2.]'),
    ('value_of(lambda r: r.at[...].bitcast(jnp.int32)[...])',
     '[[         0 1065353216 1073741824]\n [1077936128 1082130432 1084227584]]'),
    ('value_of(lambda r: r.at[1:].at[0, 1:][...])',
     '[4. 5.]'),
    ('value_of(lambda r: r.at[:, jax.ds(1, 2)][...])',
     '[[1. 2.]\n [4. 5.]]'),
    ('value_of(lambda r: r.at[1][1:])',
     '[4. 5.]'),
    ('value_of(lambda r: r.at[:, 1:].T[...])',
     'NotImplementedError: Unsupported transform: TransposeTransform(permutation=(1, 0))'),
    ('after(lambda r: r.at[1].__setitem__(slice(1, None), jnp.array([7.0, 8.0])))',
     '[[0. 1. 2.]\n [3. 7. 8.]]'),
    ('after(lambda r: r.at[1:].at[0, 1:].__setitem__(..., jnp.array([7.0, 8.0])))',
     '[[0. 1. 2.]\n [3. 7. 8.]]'),
    ('after(lambda r: r.at[:, jax.ds(1, 2)].__setitem__(0, jnp.array([7.0, 8.0])))',
     '[[0. 7. 8.]\n [3. 4. 5.]]'),
    ('after(lambda r: r.at[...].reshape(3, 2).__setitem__(..., jnp.ones((3, 2))))',
     'NotImplementedError: Unsupported transform: ReshapeTransform(shape=(3, 2))'),
    ('after(lambda r: r.at[...].reshape(3, 2).__setitem__(1, jnp.ones(2)))',
     'NotImplementedError: Unsupported transform: ReshapeTransform(shape=(3, 2))'),
    ('after(lambda r: r.at[...].bitcast(jnp.int32).__setitem__(..., jnp.ones((2, 3), jnp.int32)))',
     "NotImplementedError: Unsupported transform: BitcastTransform(dtype=dtype('int32'))"),
    ('after(lambda r: r.at[...].T.__setitem__(..., jnp.ones((3, 2))))',
     'NotImplementedError: Unsupported transform: TransposeTransform(permutation=(1, 0))'),
    ('after(lambda r: r.at[1:].reshape(3).__setitem__(..., jnp.ones(3)))',
     'NotImplementedError: Unsupported transform: ReshapeTransform(shape=(3,))'),
    ('hijax.HiPspec().to_lo()',
     'AssertionError: must override'),
    ('hijax.HiPspec().to_tangent_spec()',
     'AssertionError: must override'),
    ('hijax.HiPspec().to_ct_spec()',
     'AssertionError: must override'),
    ("[n for n in dir(hijax.HiPspec) if not n.startswith('_')]",
     "['to_ct_spec', 'to_lo', 'to_tangent_spec']"),
    ('custom_derivatives.remat_opt_p',
     'remat_opt'),
    ('thunkless(jax.make_jaxpr(f_opt)(xs))',
     '{ lambda ; a:f32[3]. let\n    b:f32[3] = custom_vjp_call[\n      name=f_opt\n      bwd=f_opt_bwd\n      call_jaxpr={ lambda ; c:f32[3]. let d:f32[3] = sin c in (d,) }\n      fwd=f_opt_fwd\n      symbolic_zeros=False\n    ] a\n  in (b,) }'),
    ('thunkless(jax.make_jaxpr(jax.grad(lambda x: f_opt(x).sum()))(xs))',
     '{ lambda ; a:f32[3]. let\n    b:f32[3] c:f32[3] = remat_opt[\n      fun_jaxpr_thunk=...\n      fwd_jaxpr={ lambda ; d:f32[3]. let\n          e:f32[3] = sin d\n          f:f32[3] = cos d\n        in (f, e) }\n      num_consts=0\n      num_res=1\n    ] a\n    _:f32[] = reduce_sum[axes=(0,) out_sharding=None] c\n    g:f32[3] = broadcast_in_dim 1.0:f32[]\n    h:f32[3] = mul g b\n  in (h,) }'),
    ('thunkless(jax.make_jaxpr(lambda x: jax.vjp(f_opt, x)[0])(xs))',
     '{ lambda ; a:f32[3]. let\n    _:f32[3] b:f32[3] = remat_opt[\n      fun_jaxpr_thunk=...\n      fwd_jaxpr={ lambda ; c:f32[3]. let\n          d:f32[3] = sin c\n          e:f32[3] = cos c\n        in (e, d) }\n      num_consts=0\n      num_res=1\n    ] a\n  in (b,) }'),
    ('[e.primitive is custom_derivatives.remat_opt_p for e in jax.make_jaxpr(lambda x: jax.vjp(f_opt, x))(xs).eqns]',
     '[True]'),
    ('jax.grad(lambda x: f_opt(x).sum())(xs)',
     '[ 1.          0.5403023  -0.41614684]'),
    ('jax.jit(jax.grad(lambda x: f_opt(x).sum()))(xs)',
     '[ 1.          0.5403023  -0.41614684]'),
    ('jax.hessian(lambda x: f_opt(x).sum())(xs)',
     '[[-0.         -0.         -0.        ]\n [-0.         -0.84147096 -0.        ]\n [-0.         -0.         -0.9092974 ]]'),
    ('jax.grad(jax.grad(lambda x: f_opt(x).sum()))(1.0)',
     'ValueError: Linearization failed to produce known values for all output primals. This is typically caused by attempting to differentiate a function uses an operation that does not support reverse-mode autodiff.'),
    ('jax.jvp(f_opt, (xs,), (xs,))',
     "TypeError: can't apply forward-mode autodiff (jvp) to a custom_vjp function."),
    ('jax.vmap(jax.grad(lambda x: f_opt(x).sum()))(xs[None])',
     '[[ 1.          0.5403023  -0.41614684]]'),
    ('thunkless(jax.make_jaxpr(jax.vmap(lambda x: jax.vjp(f_opt, x)))(xs[None]))',
     '{ lambda ; a:f32[1,3]. let\n    b:f32[1,3] c:f32[1,3] = remat_opt[\n      fun_jaxpr_thunk=...\n      fwd_jaxpr={ lambda ; d:f32[1,3]. let\n          e:f32[1,3] = sin d\n          f:f32[1,3] = cos d\n        in (f, e) }\n      num_consts=0\n      num_res=1\n    ] a\n  in (c, b) }'),
    ('thunkless(jax.make_jaxpr(jax.grad(lambda x, y: g_opt(2.0, x, y).sum(), argnums=(0, 1)))(xs, xs))',
     '{ lambda a:f32[3]; b:f32[3] c:f32[3]. let\n    d:f32[3] e:f32[3] = remat_opt[\n      fun_jaxpr_thunk=...\n      fwd_jaxpr={ lambda ; f:f32[3] g:f32[3] h:f32[3]. let\n          i:f32[3] = custom_vjp_call[\n            name=g_opt\n            bwd=g_opt_bwd\n            call_jaxpr={ lambda ; j:f32[3] k:f32[3] l:f32[3]. let\n                m:f32[3] = mul 2.0:f32[] k\n                n:f32[3] = mul m l\n                o:f32[3] = mul n j\n              in (o,) }\n            fwd=g_opt_fwd\n            num_consts=1\n            symbolic_zeros=False\n          ] f g h\n          p:f32[3] = mul h f\n        in (p, i) }\n      num_consts=1\n      num_res=1\n    ] a b c\n    _:f32[] = reduce_sum[axes=(0,) out_sharding=None] e\n    q:f32[3] = broadcast_in_dim 1.0:f32[]\n    r:f32[3] = mul q 2.0:f32[]\n    s:f32[3] = mul r d\n    t:f32[3] = mul q 2.0:f32[]\n    u:f32[3] = mul t b\n    v:f32[3] = mul u a\n  in (s, v) }'),
    ('jax.grad(lambda x, y: g_opt(2.0, x, y).sum(), argnums=(0, 1))(xs, xs)',
     '(Array([ 0.,  4., 12.], dtype=float32), Array([ 0.,  4., 12.], dtype=float32))'),
    ('jax.grad(lambda x: jax.checkpoint(lambda x: g_opt(2.0, x, x))(x).sum())(xs)',
     '[ 0.  8. 24.]'),
    ('jax.grad(lambda x: jax.checkpoint(f_opt)(x).sum())(xs)',
     '[ 1.          0.5403023  -0.41614684]'),
    ('jax.vmap(jax.grad(lambda x, y: g_opt(2.0, x, y).sum()))(xs[None], xs[None])',
     '[[ 0.  4. 12.]]'),
    ('jax.jit(lambda x: jax.vjp(f_opt, x)[1](x))(xs)',
     '(Array([ 0.       ,  0.5403023, -0.8322937], dtype=float32),)'),
    ('jax.vmap(jax.grad(lambda x: jax.checkpoint(f_opt)(x).sum()))(xs[None])',
     '[[ 1.          0.5403023  -0.41614684]]'),
    ('jax.vmap(lambda x: jax.checkpoint(f_opt)(x), in_axes=1)(xs[:, None])',
     '[[0.         0.84147096 0.9092974 ]]'),
    ('jax.jit(jax.vmap(jax.grad(lambda x, y: jax.checkpoint(g_opt, static_argnums=0)(2.0, x, y).sum()), in_axes=(1, None)))(jnp.stack([xs, xs], 1), xs)',
     '[[ 0.  4. 12.]\n [ 0.  4. 12.]]'),
    ("import_error(PKG + '.experimental.x64_context')",
     "ModuleNotFoundError: No module named 'jax.experimental.x64_context'"),
]


def _show(expr: str) -> str:
    try:
        return str(eval(expr))
    except Exception as e:  # the record holds JAX's class and message
        return f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("expr,want", CASES, ids=[c[0] for c in CASES])
def test_against_jax(expr, want):
    # Module paths name jaxkit's package where JAX's name jax's.
    assert _show(expr).replace("'jaxkit.", "'jax.") == want
