"""The last public names JAX 0.10.2 has that no other part of jaxkit owned, against the oracle:
``scheduling_groups.FlatTree``, ``sparse.transform.lift_jvp``, ``hijax.TransformedRef`` and
``hijax.HiPspec``, ``custom_derivatives.remat_opt_p`` (``custom_vjp``'s ``optimize_remat``),
and ``experimental.x64_context`` (no such module in JAX 0.10.2). Each record is an expression
and its ``str()`` (or ``"ErrorClass: message"``) under JAX 0.10.2, recorded with the oracle;
the setup below runs with ``jax`` bound to jaxkit."""
import importlib

import numpy as np
import pytest

import jaxkit as jax
import jaxkit.custom_derivatives as custom_derivatives
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
