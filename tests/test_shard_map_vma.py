"""Varying manual axes in ``shard_map`` (``check_vma``), against JAX 0.10.2: the types inside a
body (``f32[2]{V:i}``), the ``pvary`` a mixed operation inserts, the collectives' typing
rules, ``pcast``, the ``out_specs`` check and its errors, and the automatic ``psum`` of a
replicated parameter's gradient (the transpose of its ``pvary``). The references are JAX's
outputs for the same code (recorded from JAX 0.10.2 on 8 CPU devices: no subprocess here)."""
import re

import numpy as np
import pytest

import jaxkit as jax
import jaxkit.numpy as jnp
from jaxkit import lax
from jaxkit.experimental import shard_map as legacy_shard_map_module
from jaxkit.runtime import multi_device
from jaxkit.sharding import AxisType, PartitionSpec as P

DEVICES = multi_device.add_cpu_backend("spmd8", 8).devices
MESH = jax.make_mesh((2, 2), ("i", "j"), devices=DEVICES[:4], axis_types=(AxisType.Auto,) * 2)
X = np.arange(8, dtype=np.float32).reshape(4, 2)
W = np.array([1.5, -2.0], np.float32)

# ---- JAX 0.10.2's outputs ----
TYPED_JAXPR = """\
{ lambda ; a:f32[4,2] b:f32[2]. let
    c:f32[4,2] d:f32[2,1] e:f32[4,2] f:f32[4] g:i32[2] = shard_map[
      check_vma=True
      in_specs=(P('i', 'j'), P())
      jaxpr={ lambda ; h:f32[2,1]{V:(i,j)} i:f32[2]. let
          j:f32[1,2] = broadcast_in_dim[broadcast_dimensions=(1,)] i
          k:f32[1,2]{V:(i,j)} = pvary[axes=('i', 'j')] j
          l:f32[2,2]{V:(i,j)} = mul h k
          m:f32[2,2]{V:i} = psum_invariant[axes=('j',)] l
          n:f32[2]{V:j} = pvary[axes=('j',)] i
          o:f32[2,2]{V:j} = all_gather[
            all_gather_dimension=0
            axis_index_groups=None
            axis_name=('j',)
            axis_size=2
            tiled=False
          ] n
          p:i32[]{V:i} = axis_index[axis_name=i]
          q:f32[2,1] = pmax[axes=('i', 'j') axis_index_groups=None] h
          r:f32[2]{V:i} = pvary[axes=('i',)] i
          s:i32[1]{V:i} = broadcast_in_dim p
        in (m, q, o, r, s) }
      mesh=Mesh('i': 2, 'j': 2, axis_types=(Auto, Auto))
      newly_manual_axes=frozenset({'i', 'j'})
      out_specs=(P('i',), P(), P('j',), P('i',), P('i',))
    ] a b
  in (c, d, e, f, g) }"""

UNCHECKED_JAXPR = """\
{ lambda ; a:f32[4,2] b:f32[2]. let
    c:f32[4,2] d:f32[2,1] e:f32[4,2] f:f32[4] g:i32[2] = shard_map[
      check_vma=False
      in_specs=(P('i', 'j'), P())
      jaxpr={ lambda ; h:f32[2,1] i:f32[2]. let
          j:f32[1,2] = broadcast_in_dim[broadcast_dimensions=(1,)] i
          k:f32[2,2] = mul h j
          l:f32[2,2] = psum[axes=('j',) axis_index_groups=None] k
          m:f32[2,2] = all_gather[
            all_gather_dimension=0
            axis_index_groups=None
            axis_name=('j',)
            axis_size=2
            tiled=False
          ] i
          n:i32[] = axis_index[axis_name=i]
          o:f32[2,1] = pmax[axes=('i', 'j') axis_index_groups=None] h
          p:i32[1] = broadcast_in_dim n
        in (l, o, m, i, p) }
      mesh=Mesh('i': 2, 'j': 2, axis_types=(Auto, Auto))
      newly_manual_axes=frozenset({'i', 'j'})
      out_specs=(P('i',), P(), P('j',), P('i',), P('i',))
    ] a b
  in (c, d, e, f, g) }"""

TYPED_TYPES = [
    'float32[2,1]{V:(i,j)}',
    'float32[2]',
    'float32[2,2]{V:(i,j)}',
    "float32[2,2]{V:i} ['i']",
    'float32[2,2]{V:j}',
    'int32[]{V:i}',
    'float32[2,1]',
    'float32[2]{V:i}',
]
UNCHECKED_TYPES = [
    'float32[2,1]',
    'float32[2]',
    'float32[2,2]',
    'float32[2,2] []',
    'float32[2,2]',
    'int32[]',
    'float32[2,1]',
    'float32[2]',
]
TYPED_VALUES = [
    [[1.5, -2.0], [7.5, -10.0], [13.5, -18.0], [19.5, -26.0]],
    [[5.0], [7.0]],
    [[1.5, -2.0], [1.5, -2.0], [1.5, -2.0], [1.5, -2.0]],
    [1.5, -2.0, 1.5, -2.0],
    [0, 1],
]
GRAD = [-3.6060855388641357, -0.7738327980041504]
INNER_GRAD_UNCHECKED = [0.0, -0.416146844625473, -1.979984998703003, 2.8805108070373535,
                        3.8406810760498047, -4.195357322692871, -5.4667816162109375, 0.957160472869873]
ERRORS = {
    'replicated': ('ValueError',
        "shard_map applied to the function '_rem_singleton' was given out_specs which"
        " require replication which can't be statically inferred given the mesh:\n\nThe"
        " mesh given has shape (2, 2) with corresponding axis names ('i', 'j').\n\nout_"
        'specs is P() which implies that the corresponding output value is only varyi'
        'ng across mesh axes {} and not {i,j}, but it was inferred to be possibly var'
        'ying over {i,j}\n\nCheck if these output values are meant to be replicated ove'
        'r those mesh axes. If not, consider revising the corresponding out_specs ent'
        'ries. If so, consider disabling the check by passing the check_vma=False arg'
        'ument to `jax.shard_map`.'),
    'partly': ('ValueError',
        "shard_map applied to the function '_rem_singleton' was given out_specs which"
        " require replication which can't be statically inferred given the mesh:\n\nThe"
        " mesh given has shape (2, 2) with corresponding axis names ('i', 'j').\n\nout_"
        "specs is P('i',) which implies that the corresponding output value is replic"
        "ated across mesh axis 'j', but could not infer replication over any axes\n\nCh"
        'eck if these output values are meant to be replicated over those mesh axes. '
        'If not, consider revising the corresponding out_specs entries. If so, consid'
        'er disabling the check by passing the check_vma=False argument to `jax.shard'
        '_map`.'),
    'pcast_varying': ('ValueError',
        "Unsupported pcast from=varying, to='varying'"),
    'pcast_mixed': ('ValueError',
        'jax.lax.pcast can only accept axis_name which corresponds to one of varying,'
        ' unreduced, reduced or invarying state of the input. Got input type: float32'
        "[2,2]{V:i}, axes: ('i', 'j') and input state: {'invarying', 'varying'}"),
}


OUT_SPECS = (P("i"), P(), P("j"), P("i"), P("i"))

# loop carries and cond branches whose manual axes differ (JAX's texts)
CONTROL_FLOW_ERRORS = {
    'fori_scalar': ('TypeError',
        'scan body function carry input and carry output must have equal types, but t'
        'hey differ:\n\nThe input carry component loop_carry[1] has type float32[] but '
        'the corresponding output carry component has type float32[]{V:i}, so the man'
        'ual axis types do not match.\n\nThis might be fixed by applying `jax.lax.pcast'
        "(..., ('i',), to='varying')`, to the initial carry value corresponding to th"
        'e input carry component loop_carry[1].\nSee https://docs.jax.dev/en/latest/no'
        'tebooks/shard_map.html#scan-vma for more information.\n\nRevise the function s'
        'o that all output types match the corresponding input types.'),
    'cond': ('TypeError',
        'cond branches must have equal output types but they differ.\n\ntrue_fun is <la'
        'mbda> at /tmp/vmaw/gold2.py:13\nfalse_fun is <lambda> at /tmp/vmaw/gold2.py:1'
        '3\n\nThe output of true_fun at path [0] has type float32[2]{V:i} but the corre'
        'sponding output of false_fun has type float32[2], so the manual axis types d'
        "o not match.\n\nThis might be fixed by applying `jax.lax.pcast(..., (), to='va"
        "rying')` to the output of true_fun at path [0].\nSee https://docs.jax.dev/en/"
        'latest/notebooks/shard_map.html#scan-vma for more information.\n\nRevise true_'
        'fun and/or false_fun so that all output types match.'),
    'scan': ('TypeError',
        'scan body function carry input and carry output must have equal types, but t'
        'hey differ:\n\nThe input carry c has type float32[] but the corresponding outp'
        'ut carry component has type float32[]{V:i}, so the manual axis types do not '
        "match.\n\nThis might be fixed by applying `jax.lax.pcast(..., ('i',), to='vary"
        "ing')`, to the initial carry value corresponding to the input carry c.\nSee h"
        'ttps://docs.jax.dev/en/latest/notebooks/shard_map.html#scan-vma for more inf'
        'ormation.\n\nRevise the function so that all output types match the correspond'
        'ing input types.'),
    'while': ('TypeError',
        'while_loop body function carry input and carry output must have equal types,'
        ' but they differ:\n\nThe input carry component c[1] has type float32[2] but th'
        'e corresponding output carry component has type float32[2]{V:i}, so the manu'
        'al axis types do not match.\n\nThis might be fixed by applying `jax.lax.pcast('
        "..., ('i',), to='varying')`, to the initial carry value corresponding to the"
        ' input carry component c[1].\nSee https://docs.jax.dev/en/latest/notebooks/sh'
        'ard_map.html#scan-vma for more information.\n\nRevise the function so that all'
        ' output types match the corresponding input types.'),
}


def _canonical(text: str) -> str:
    """A set's order follows the string hash, which differs between processes; the golden
    texts are kept without JAX's trailing blanks (``axis_index[axis_name=i] ``)."""
    text = text.replace("{'j', 'i'}", "{'i', 'j'}").replace("{'varying', 'invarying'}",
                                                            "{'invarying', 'varying'}")
    text = re.sub(r"(_fun is <lambda> at )\S+", r"\1SOURCE", text)  # where the lambda is
    return "\n".join(line.rstrip() for line in text.splitlines())


def _typed(seen):
    def body(x, w):
        seen.append(str(jax.typeof(x)))
        seen.append(str(jax.typeof(w)))
        a = x * w  # w is pvary-ed to x's axes first
        seen.append(str(jax.typeof(a)))
        b = lax.psum(a, "j")
        seen.append(f"{jax.typeof(b)} {sorted(jax.typeof(b).manual_axis_type.varying)}")
        c = lax.all_gather(w, "j")
        seen.append(str(jax.typeof(c)))
        d = lax.axis_index("i")
        seen.append(str(jax.typeof(d)))
        e = lax.pmax(x, ("i", "j"))
        seen.append(str(jax.typeof(e)))
        f = lax.pcast(w, "i", to="varying")
        seen.append(str(jax.typeof(f)))
        return b, e, c, f, d[None]
    return body


@pytest.mark.parametrize("check_vma, jaxpr_text, types", [
    (True, TYPED_JAXPR, TYPED_TYPES), (False, UNCHECKED_JAXPR, UNCHECKED_TYPES)])
def test_body_types_and_jaxpr_match_jax(check_vma, jaxpr_text, types):
    seen = []
    f = jax.shard_map(_typed(seen), mesh=MESH, in_specs=(P("i", "j"), P()),
                      out_specs=OUT_SPECS, check_vma=check_vma)
    assert _canonical(str(jax.make_jaxpr(f)(X, W))) == _canonical(jaxpr_text)
    assert seen == types


def test_values_and_replicated_parameter_gradients_match_jax():
    f = jax.shard_map(_typed([]), mesh=MESH, in_specs=(P("i", "j"), P()), out_specs=OUT_SPECS)
    for got, want in zip(jax.jit(f)(X, W), TYPED_VALUES):
        np.testing.assert_allclose(np.asarray(got), want)

    def loss(w, x):  # w replicated, x split: w's gradient is psum-med by pvary's transpose
        return jax.shard_map(lambda w, x: lax.psum(jnp.sum(jnp.sin(x * w)), ("i", "j")),
                             mesh=MESH, in_specs=(P(), P(("i", "j"))), out_specs=P())(w, x)

    np.testing.assert_allclose(np.asarray(jax.grad(loss)(W, X)), GRAD, rtol=1e-6)

    def inner_grad(w, x):  # grad inside the body: the same psum happens there
        return jax.grad(lambda w: jnp.sum(jnp.sin(x * w)))(w)

    for check_vma, spec, want in [(True, P(), GRAD),
                                  (False, P(("i", "j")), INNER_GRAD_UNCHECKED)]:
        g = jax.shard_map(inner_grad, mesh=MESH, in_specs=(P(), P(("i", "j"))),
                          out_specs=spec, check_vma=check_vma)(W, X)
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-6)


def _ident(x):
    return x


ERROR_CASES = {
    "replicated": lambda: jax.shard_map(_ident, mesh=MESH, in_specs=P("i", "j"),
                                        out_specs=P())(X),
    "partly": lambda: jax.shard_map(_ident, mesh=MESH, in_specs=P("i", "j"),
                                    out_specs=P("i"))(X),
    # eagerly JAX reports the first offending output alone, as for "replicated"
    "two_outputs": lambda: jax.shard_map(lambda b: (b, lax.psum(b, "i")), mesh=MESH,
                                         in_specs=P("i", "j"), out_specs=(P(), P("i")))(X),
    "pcast_varying": lambda: jax.shard_map(lambda v: lax.pcast(v, "i", to="varying"),
                                           mesh=MESH, in_specs=P("i"), out_specs=P("i"))(X),
    "pcast_mixed": lambda: jax.shard_map(lambda v: lax.pcast(v, ("i", "j"), to="varying"),
                                         mesh=MESH, in_specs=P("i"), out_specs=P("i", "j"))(X),
}


@pytest.mark.parametrize("name", sorted(ERROR_CASES))
def test_errors_match_jax(name):
    kind, text = ERRORS["replicated" if name == "two_outputs" else name]
    with pytest.raises(Exception) as info:
        ERROR_CASES[name]()
    assert (type(info.value).__name__, _canonical(str(info.value))) == (kind, _canonical(text))


MESH1 = jax.make_mesh((2,), ("i",), devices=DEVICES[:2], axis_types=(AxisType.Auto,))
X1 = np.arange(4, dtype=np.float32)
CONTROL_FLOW = {
    # zeros_like(v) varies as v does, so the carry's type holds
    "fori": lambda v: lax.fori_loop(0, 3, lambda i, c: c + v, jnp.zeros_like(v)),
    "fori_scalar": lambda v: lax.fori_loop(0, 3, lambda i, c: c + v.sum(), 0.)[None],
    "cond": lambda v: lax.cond(v.sum() > 1, lambda: (v * 2, v), lambda: (jnp.zeros(2), v))[0],
    "scan": lambda v: lax.scan(lambda c, a: (c + a, c), 0., v)[1],
    "while": lambda v: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + v),
                                      (0, jnp.zeros(2)))[1],
}


@pytest.mark.parametrize("name", sorted(CONTROL_FLOW))
def test_control_flow_types_match_jax(name):
    f = jax.jit(jax.shard_map(CONTROL_FLOW[name], mesh=MESH1, in_specs=P("i"),
                              out_specs=P("i")))
    if name == "fori":
        np.testing.assert_array_equal(np.asarray(f(X1)), [0.0, 3.0, 6.0, 9.0])
        return
    kind, text = CONTROL_FLOW_ERRORS[name]
    with pytest.raises(Exception) as info:
        f(X1)
    assert (type(info.value).__name__, _canonical(str(info.value))) == (kind, _canonical(text))


def test_experimental_shard_map_check_rep_is_check_vma():
    with pytest.warns(DeprecationWarning, match="jax.experimental.shard_map is deprecated"):
        legacy = legacy_shard_map_module.shard_map
    for check_rep, marker in [(True, "{V:i}"), (False, "f32[2]. let")]:
        f = legacy(lambda v: v * 2, MESH1, P("i"), P("i"), check_rep=check_rep)
        text = str(jax.make_jaxpr(f)(X1))
        assert f"check_vma={check_rep}" in text and marker in text


def test_vmap_of_a_typed_body():
    """vmap over the replicated argument: the body's pvary and psum_invariant are batched."""
    f = jax.shard_map(lambda x, w: lax.psum(x * w, "i"), mesh=MESH1, in_specs=(P("i"), P()),
                      out_specs=P())
    ws = np.array([[1.0, 2.0], [-1.0, 0.5], [3.0, 0.0]], np.float32)
    got = jax.vmap(f, in_axes=(None, 0))(X1, ws)
    np.testing.assert_allclose(np.asarray(got), (X1[:2] + X1[2:]) * ws)


def test_none_spec_over_an_empty_subtree_covers_no_leaf():
    # Flax's nnx state holds ``bias=None``: its spec (None) must not shift the specs of the
    # leaves after it. JAX 0.10.2 gives [0, 3, 2, 5] (c replicated, w split over i).
    x = np.arange(4.0, dtype=np.float32)
    state = {"w": x, "b": None, "c": x * 2}
    f = jax.shard_map(lambda s: s["w"] + s["c"][:2], mesh=jax.make_mesh(
        (2,), ("i",), devices=DEVICES[:2], axis_types=(AxisType.Auto,)),
        in_specs=({"w": P("i"), "b": None, "c": P()},), out_specs=P("i"))
    np.testing.assert_array_equal(f(state), [0.0, 3.0, 2.0, 5.0])


# ---- shard_map called eagerly: JAX runs the body per device, so printing a value shows
# every device's block, and a replicated value is concrete (JAX 0.10.2's output) ----
EAGER_PRINTED = (
    'On cpu:0 at mesh coordinates (i, j,) = (0, 0):\n'
    '[[0.]\n'
    ' [2.]]\n'
    '\n'
    'On cpu:1 at mesh coordinates (i, j,) = (0, 1):\n'
    '[[1.]\n'
    ' [3.]]\n'
    '\n'
    'On cpu:2 at mesh coordinates (i, j,) = (1, 0):\n'
    '[[4.]\n'
    ' [6.]]\n'
    '\n'
    'On cpu:3 at mesh coordinates (i, j,) = (1, 1):\n'
    '[[5.]\n'
    ' [7.]]\n'
    '\n'
    'On cpu:0 at mesh coordinates (i, j,) = (0, 0):\n'
    '[[1.]\n'
    ' [5.]]\n'
    '\n'
    'On cpu:1 at mesh coordinates (i, j,) = (0, 1):\n'
    '[[1.]\n'
    ' [5.]]\n'
    '\n'
    'On cpu:2 at mesh coordinates (i, j,) = (1, 0):\n'
    '[[ 9.]\n'
    ' [13.]]\n'
    '\n'
    'On cpu:3 at mesh coordinates (i, j,) = (1, 1):\n'
    '[[ 9.]\n'
    ' [13.]]\n'
    '\n'
    'total 28 2\n'
    'ConcretizationTypeError\n'
    '[[ 1.]\n'
    ' [ 5.]\n'
    ' [ 9.]\n'
    ' [13.]]\n'
    'On cpu:0 at mesh coordinates (i,) = (0,):\n'
    '[0. 2.]\n'
    '\n'
    'On cpu:1 at mesh coordinates (i,) = (1,):\n'
    '[4. 6.]\n'
    '\n'
    'NameError Found an unbound axis name: j. To fix this, please call pvary under `jax.shard_map`.\n'
    'TracerBoolConversionError\n'
    '{ lambda ; a:f32[4]. let\n'
    '    b:f32[4] = shard_map[\n'
    '      check_vma=True\n'
    "      in_specs=(P('i',),)\n"
    '      jaxpr={ lambda ; c:f32[2]{V:i}. let  in (c,) }\n'
    "      mesh=AbstractMesh('i': 2, axis_types=(Auto,), device_kind=cpu, num_cores=None, platform=cpu)\n"
    "      newly_manual_axes=frozenset({'i'})\n"
    "      out_specs=(P('i',),)\n"
    '    ] a\n'
    '  in (b,) }\n'
    # a shard_map nested in an eager body: its values print every device's block too
    'On cpu:0 at mesh coordinates (i, j,) = (0, 0):\n'
    '[[ 0.]\n'
    ' [12.]]\n'
    '\n'
    'On cpu:1 at mesh coordinates (i, j,) = (0, 1):\n'
    '[[ 6.]\n'
    ' [18.]]\n'
    '\n'
    'On cpu:2 at mesh coordinates (i, j,) = (1, 0):\n'
    '[[ 88.]\n'
    ' [132.]]\n'
    '\n'
    'On cpu:3 at mesh coordinates (i, j,) = (1, 1):\n'
    '[[110.]\n'
    ' [154.]]\n'
    '\n'
    '[[ 1.]\n'
    ' [ 5.]\n'
    ' [ 9.]\n'
    ' [13.]]\n'
)


def _eager_body(x):
    print(x)
    y = lax.psum(x, "j")
    print(y)
    s = lax.psum(x.sum(), ("i", "j"))
    if s > 20:  # replicated: concrete, for bool(), int() and indexing but not float()
        print("total", int(s), [0, 1, 2][s.astype(jnp.int32) // 14])
    try:
        float(s)
    except Exception as e:
        print(type(e).__name__)
    return y


def _nested(v):  # manual over i; the nested body, over j, prints every device's block
    s = v.sum()

    def inner(b):
        print(b * s)
        return lax.psum(b, "j")
    return jax.shard_map(inner, in_specs=P(None, "j"), out_specs=P(), axis_names={"j"})(v)


def test_eager_body_prints_each_device_block_as_jax(capsys):
    r = jax.shard_map(_eager_body, mesh=MESH, in_specs=P("i", "j"), out_specs=P("i"))(X)
    print(r)
    jax.shard_map(lambda v: print(v * 2) or v, mesh=MESH1, in_specs=P("i"), out_specs=P("i"),
                  check_vma=False)(X1)
    try:  # over some mesh axes only: JAX's pvary to every axis fails
        jax.shard_map(lambda v: print(v) or v, mesh=MESH, in_specs=P("i"), out_specs=P("i"),
                      axis_names={"i"})(X)
    except Exception as e:
        print(type(e).__name__, e)
    try:  # varying: not concrete
        jax.shard_map(lambda v: v * bool(v.sum() > 0), mesh=MESH1, in_specs=P("i"),
                      out_specs=P("i"))(X1)
    except Exception as e:
        print(type(e).__name__)
    # without mesh=, the jaxpr holds (and shows) the context's abstract mesh
    with jax.set_mesh(MESH1):
        print(jax.make_jaxpr(jax.shard_map(lambda v: v, in_specs=P("i"), out_specs=P("i")))(X1))
    with jax.set_mesh(MESH):
        print(jax.shard_map(_nested, in_specs=P("i"), out_specs=P("i"), axis_names={"i"})(X))
    assert _canonical(capsys.readouterr().out) == _canonical("".join(EAGER_PRINTED))
