"""The members of jaxprs, equations and variables, against JAX 0.10.2: ``effects`` (callbacks'
and refs', through nested jaxprs), ``pretty_print`` and its options (colour, annotations,
width, shapes, effects), ``replace``, ``map_jaxpr`` and ``ClosedJaxpr``'s views."""
from __future__ import annotations

import re

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as knp
from jaxkit.experimental import io_callback as kit_io_callback

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.experimental import io_callback as jax_io_callback  # noqa: E402

SIDES = {"jax": (jax, jnp, jax_io_callback), "jaxkit": (jaxkit, knp, kit_io_callback)}


def _effect_names(effects) -> list[str]:
    """Effects as comparable text: the class name, and for an effect on an input, its type."""
    return sorted(type(e).__name__ + (f"({e.input.aval})" if hasattr(e, "input") else "")
                  for e in effects)


def _prints(j, np_, io_callback):
    def f(x):
        j.debug.print("{}", x)
        j.debug.print("{}", x, ordered=True)
        return x
    return f, (1.0,)


def _io(j, np_, io_callback):
    def g(x):
        return io_callback(np.sin, j.ShapeDtypeStruct((), np.float32), x, ordered=True)
    return j.jit(g), (1.0,)


def _io_in_cond(j, np_, io_callback):
    g, _ = _io(j, np_, io_callback)
    return (lambda x: j.lax.cond(x > 0, g, lambda x: x, x)), (1.0,)


def _unordered_io(j, np_, io_callback):
    return (lambda x: io_callback(np.sin, j.ShapeDtypeStruct((), np.float32), x)), (1.0,)


def _ref_rw(j, np_, io_callback):
    def h(r):
        r[...] = r[...] + 1
        return r[...]
    return h, (j.new_ref(np_.ones(3)),)


def _ref_in_jit(j, np_, io_callback):
    h, args = _ref_rw(j, np_, io_callback)
    return j.jit(h), args


def _local_ref(j, np_, io_callback):
    def k(x):
        r = j.new_ref(x)
        r[...] += 1
        return r[...]
    return k, (1.0,)


def _ref_in_fori(j, np_, io_callback):
    def k(r):
        j.lax.fori_loop(0, 3, lambda i, c: (r.__setitem__(..., r[...] + 1), c)[1], 0)
        return r[...]
    return k, (j.new_ref(np_.ones(3)),)


def _ref_in_cond(j, np_, io_callback):
    def k(r):
        j.lax.cond(True, lambda: r.__setitem__(..., r[...] + 1), lambda: None)
        return r[...]
    return k, (j.new_ref(np_.ones(3)),)


def _ref_in_scan(j, np_, io_callback):
    def k(r, x):
        def body(c, y):
            r[...] += y
            return c, None
        j.lax.scan(body, 0.0, x)
        return r[...]
    return k, (j.new_ref(np_.ones(())), np_.ones(3))


def _ref_in_while(j, np_, io_callback):
    def k(r):
        j.lax.while_loop(lambda c: c < 3, lambda c: (r.__setitem__(..., r[...] + 1), c + 1)[1],
                         0)
        return r[...]
    return k, (j.new_ref(np_.ones(())),)


def _refs_in_while_cond_and_body(j, np_, io_callback):
    def k(r1, r2):  # the cond reads one ref (a cond const), the body writes another
        j.lax.while_loop(lambda c: c < r1[...],
                         lambda c: (r2.__setitem__(..., r2[...] + 1), c + 1)[1], 0.0)
        return r2[...]
    return k, (j.new_ref(np_.float32(3)), j.new_ref(np_.ones(())))


def _ref_addupdate(j, np_, io_callback):
    def k(r):
        r.addupdate(2.0)
        return None
    return k, (j.new_ref(np_.ones(())),)


def _pure(j, np_, io_callback):
    return (lambda x: np_.sin(x) * 2), (1.0,)


EFFECT_CASES = [_prints, _io, _io_in_cond, _unordered_io, _ref_rw, _ref_in_jit, _local_ref,
                _ref_in_fori, _ref_in_cond, _ref_in_scan, _ref_in_while,
                _refs_in_while_cond_and_body, _ref_addupdate, _pure]


def _effects_of(side, case):
    j, np_, io_callback = SIDES[side]
    fn, args = case(j, np_, io_callback)
    closed = j.make_jaxpr(fn)(*args)
    jaxpr = closed.jaxpr
    inputs = {id(v): i for i, v in enumerate(jaxpr.invars)}
    # an effect on an input names the jaxpr's own variable (its position, to compare)
    positions = sorted(inputs[id(e.input)] for e in closed.effects if hasattr(e, "input"))
    return (_effect_names(closed.effects), _effect_names(jaxpr.effects),
            [_effect_names(e.effects) for e in closed.eqns], positions)


@pytest.mark.parametrize("case", EFFECT_CASES, ids=lambda c: c.__name__.strip("_"))
def test_effects_as_jax(case):
    assert _effects_of("jaxkit", case) == _effects_of("jax", case)


def _fori(j, np_):
    return j.make_jaxpr(lambda x: j.lax.fori_loop(0, 3, lambda i, c: c * 2.0, x))(1.0)


def _sin(j, np_):
    return j.make_jaxpr(lambda x: np_.sin(x) * 2)(1.0)


def _printing(j, np_):
    def f(x):
        j.debug.print("{}", x)
        return x
    return j.make_jaxpr(f)(1.0)


PRINT_CASES = [
    (_sin, dict(use_color=True)),
    (_sin, dict(print_shapes=False)),
    (_sin, dict(width=20)),
    (_sin, dict(print_effects=True)),
    (_printing, dict(print_effects=True)),
    (_fori, dict(use_color=True)),
    (_fori, dict(name_stack=True)),
    (_fori, dict(name_stack=True, use_color=True)),
    (_fori, dict(print_shapes=False, width=30)),
    (_sin, dict(annotation_prefix=" // ", name_stack=True)),
]


@pytest.mark.parametrize("case,kw", PRINT_CASES,
                         ids=[f"{c.__name__.strip('_')}-{'-'.join(kw)}" for c, kw in PRINT_CASES])
def test_pretty_print_as_jax(case, kw):
    got = case(jaxkit, knp).pretty_print(**kw)
    want = case(jax, jnp).pretty_print(**kw)
    assert got == want
    assert case(jaxkit, knp).jaxpr.pretty_print(**kw) == want


def test_source_info_annotations_as_jax():
    """Each equation's line, as a comment aligned after the widest line (the file names are
    this file's in both)."""
    def body(j, np_):
        def f(x):
            y = np_.sin(x)
            return y * 2
        return j.make_jaxpr(f)(1.0)
    strip = re.compile(r":\d+:\d+ ")  # columns: JAX gives the call's, jaxkit the expression's
    got = strip.sub(" ", body(jaxkit, knp).pretty_print(source_info=True, width=40))
    want = strip.sub(" ", body(jax, jnp).pretty_print(source_info=True, width=40))
    assert got == want
    assert "test_jaxpr_members.py" in got and "body.<locals>.f)" in got


def test_repr_pretty_is_coloured_as_jax():
    from IPython.lib.pretty import pretty
    assert pretty(_fori(jaxkit, knp)) == pretty(_fori(jax, jnp))
    assert "\x1b[34;1mlambda" in pretty(_fori(jaxkit, knp))


def test_closed_jaxpr_views():
    closed = _fori(jaxkit, knp)
    assert closed.invars is closed.jaxpr.invars
    assert closed.outvars is closed.jaxpr.outvars
    assert closed.constvars is closed.jaxpr.constvars
    assert closed.debug_info is closed.jaxpr.debug_info
    emptied = closed.map_jaxpr(lambda j: j.replace(eqns=[], outvars=j.invars))
    assert type(emptied) is type(closed) and emptied.eqns == [] and emptied.consts == closed.consts
    assert str(emptied) == "{ lambda ; a:f32[]. let  in (a,) }"
    assert str(emptied) == str(_fori(jax, jnp).map_jaxpr(
        lambda j: j.replace(eqns=[], outvars=j.invars)))
    assert closed.replace(consts=[]).jaxpr is closed.jaxpr
    with pytest.raises(TypeError, match="unexpected keyword"):
        closed.jaxpr.replace(eqnz=[])


def test_var_and_literal_pretty_print():
    closed = _sin(jaxkit, knp)
    context = jaxkit.core.Namer()
    a, = closed.jaxpr.invars
    assert a.pretty_print(context) == "a"
    lit = closed.eqns[1].invars[1]
    assert lit.pretty_print(context) == "2.0:f32[]"
    assert lit.pretty_print(context, print_dtype=False) == "2.0"
    want = _sin(jax, jnp).eqns[1].invars[1]
    assert want.pretty_print(None, print_dtype=False) == "2.0"


def test_effect_classes_are_jax_extend_effects():
    from jaxkit.extend.core import Effect
    closed = jaxkit.make_jaxpr(_prints(jaxkit, knp, kit_io_callback)[0])(1.0)
    assert all(isinstance(e, Effect) for e in closed.effects)
    assert {str(e) for e in closed.effects} == {"Debug", "OrderedDebug"}


def _user_primitive_report(side):
    """A library's primitive with an effect of its own type, and one that binds itself."""
    j = SIDES[side][0]
    xc = j.extend.core
    mlir = j.interpreters.mlir
    pe = j.interpreters.partial_eval

    class MyEffect(xc.Effect):
        def __repr__(self):
            return "MyEffect"

    effect = MyEffect()
    p = xc.Primitive("my_prim")
    p.def_impl(lambda x: x)
    p.def_effectful_abstract_eval(lambda x: (x, {effect}))
    mlir.register_lowering(p, lambda ctx, x: [x])

    def f(x):
        p.bind(x)  # result unused: kept for its effect
        return x * 2

    closed = j.make_jaxpr(f)(1.0)
    kept = len(pe.dce_jaxpr(closed.jaxpr, [True])[0].eqns)
    flags = (p.call_primitive, p.ref_primitive, p.ref_allocating, p.skip_canonicalization,
             p.is_effectful, p.get_bind_params({"a": 1}))
    q = xc.Primitive("q")
    q.def_impl(lambda x: x + 1)
    q.def_abstract_eval(lambda x: x)
    seen = []

    def bind_with_trace(trace, args, avals, params):
        seen.append((type(trace).__name__, [str(a) for a in avals]))
        return q.impl(*args, **params)

    q.def_bind_with_trace(bind_with_trace)
    with pytest.raises(NotImplementedError) as lojax:
        p.to_lojax(1.0)
    with pytest.raises(ValueError) as unlowerable:  # until the library says how to lower it
        j.jit(f)(3.0)
    mlir.lowerable_effects.add_type(MyEffect)
    return (str(closed), repr(closed.effects), repr(closed.eqns[0].effects), kept, flags,
            q.bind(1.0), seen, str(lojax.value), str(unlowerable.value).splitlines()[0],
            float(j.jit(f)(3.0)))


def test_user_primitive_members_as_jax():
    import jax.extend  # noqa: F401  (the oracle's lazily loaded submodules)
    import jax.interpreters.mlir  # noqa: F401
    import jax.interpreters.partial_eval  # noqa: F401
    import jaxkit.extend  # noqa: F401
    import jaxkit.interpreters.mlir  # noqa: F401
    import jaxkit.interpreters.partial_eval  # noqa: F401
    assert _user_primitive_report("jaxkit") == _user_primitive_report("jax")
