"""Unreduced and reduced manual axes in a typed ``shard_map`` body over an Explicit mesh,
against JAX 0.10.2's output (recorded on 8 CPU devices by running ``_lines`` with JAX: no
subprocess here): ``pcast`` to ``unreduced``/``reduced``/``varying`` and the types it gives
(``f32[2,2]{V:y, U:x}``), ``psum``/``psum_scatter`` of an unreduced value (``unreduced_psum``,
``unreduced_reduce_scatter``) with their values, ``all_gather(to='reduced')``, out_specs with
unreduced/reduced sets (the result's type and sharding), reverse mode through the casts, and
JAX's errors for the casts and operations it refuses; ``all_gather(to='invarying')`` (the
``all_gather_invariant`` primitive) with its transpose."""
import re

import numpy as np

import jaxkit
from jaxkit.runtime import multi_device

DEVICES = multi_device.add_cpu_backend("spmd8", 8).devices

JAX_OUTPUT = [
    'float32[2,2]{V:y, U:x}',
    "{ lambda ; a:f32[4@x,8@y]. let\n    b:f32[2,8@y]{U:x} = shard_map[\n      check_vma=True\n      in_specs=(P('x', 'y'),)\n      jaxpr={ lambda ; c:f32[2,2]{V:(x,y)}. let\n          d:f32[2,2]{V:y, U:x} = vary_unreduced_cast_p[axes=('x',)] c\n        in (d,) }\n      mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, platform=cpu)\n      newly_manual_axes=frozenset({'x', 'y'})\n      out_specs=(P(None, 'y', unreduced={'x'}),)\n    ] a\n  in (b,) }",
    "ShapedArray(float32[2,8@y]{U:x}) NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit)), spec=P(None, 'y', unreduced={'x'}), memory_kind=device)",
    "Array(shape=(2, 8), dtype=float32, sharding=NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit)), spec=P(None, 'y', unreduced={'x'}), memory_kind=device))",
    "{ lambda ; a:f32[4@x,8@y]. let\n    b:f32[2,8@y] = shard_map[\n      check_vma=True\n      in_specs=(P('x', 'y'),)\n      jaxpr={ lambda ; c:f32[2,2]{V:(x,y)}. let\n          d:f32[2,2]{V:y, U:x} = vary_unreduced_cast_p[axes=('x',)] c\n          e:f32[2,2]{V:y, U:x} = vary_unreduced_cast_p[axes=('x',)] c\n          f:f32[2,2]{V:y, U:x} = add d e\n          g:f32[2,2]{V:y} = unreduced_psum[axes=('x',)] f\n        in (g,) }\n      mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, platform=cpu)\n      newly_manual_axes=frozenset({'x', 'y'})\n      out_specs=(P(None, 'y'),)\n    ] a\n  in (b,) }",
    '[[32.0, 36.0, 40.0, 44.0, 48.0, 52.0, 56.0, 60.0], [64.0, 68.0, 72.0, 76.0, 80.0, 84.0, 88.0, 92.0]]',
    "{ lambda ; a:f32[4@x,8@y]. let\n    b:f32[2,8@(y,x)] = shard_map[\n      check_vma=True\n      in_specs=(P('x', 'y'),)\n      jaxpr={ lambda ; c:f32[2,2]{V:(x,y)}. let\n          d:f32[2,2]{V:y, U:x} = vary_unreduced_cast_p[axes=('x',)] c\n          e:f32[2,1]{V:(x,y)} = unreduced_reduce_scatter[\n            axis_name=('x',)\n            axis_size=2\n            scatter_dimension=1\n            tiled=True\n          ] d\n        in (e,) }\n      mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, platform=cpu)\n      newly_manual_axes=frozenset({'x', 'y'})\n      out_specs=(P(None, ('y', 'x')),)\n    ] a\n  in (b,) }",
    '[[16.0, 18.0, 20.0, 22.0, 24.0, 26.0, 28.0, 30.0], [32.0, 34.0, 36.0, 38.0, 40.0, 42.0, 44.0, 46.0]]',
    "{ lambda ; a:f32[2,8@y]. let\n    b:f32[2,8@y]{R:x} c:f32[4@x,8@y] d:f32[4,8@y]{R:x} = shard_map[\n      check_vma=True\n      in_specs=(P(None, 'y'),)\n      jaxpr={ lambda ; e:f32[2,2]{V:y}. let\n          f:f32[2,2]{V:y, R:x} = preduced[axes=('x',)] e\n          g:f32[2,2]{V:(x,y)} = reduced_vary_cast_p[axes=('x',)] f\n          h:f32[2,2]{V:(x,y)} = mul g g\n          i:f32[2,2]{V:(x,y)} = mul g g\n          j:f32[4,2]{V:y, R:x} = all_gather_reduced[\n            all_gather_dimension=0\n            axis_name=('x',)\n            axis_size=2\n            tiled=True\n          ] i\n        in (f, h, j) }\n      mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, platform=cpu)\n      newly_manual_axes=frozenset({'x', 'y'})\n      out_specs=(P(None, 'y', reduced={'x'}), P('x', 'y'), P(None, 'y', reduced={'x'}))\n    ] a\n  in (b, c, d) }",
    '[-0.14550000429153442, -0.9110999703407288, -0.8391000032424927, 0.004399999976158142, 0.8439000248908997, 0.9074000120162964, 0.13670000433921814, -0.7597000002861023]',
    "{ lambda ; a:f32[4@x,8@y]. let\n    b:f32[16@(x,y),2] c:f32[2,8@y]{U:x} = shard_map[\n      check_vma=True\n      in_specs=(P('x', 'y'),)\n      jaxpr={ lambda ; d:f32[2,2]{V:(x,y)}. let\n          e:f32[2,2]{V:(x,y)} = sin d\n          f:f32[2,2]{V:(x,y)} = cos d\n          g:f32[2,2]{V:y, U:x} = vary_unreduced_cast_p[axes=('x',)] e\n        in (f, g) }\n      mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, platform=cpu)\n      newly_manual_axes=frozenset({'x', 'y'})\n      out_specs=(P(('x', 'y'),), P(None, 'y', unreduced={'x'}))\n    ] a\n    h:f32[2,8@y] = reshard c\n    _:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] h\n    i:f32[] = reshard 1.0:f32[]\n    j:f32[2,8@y] = broadcast_in_dim i\n    k:f32[2,8@y]{R:x} = reshard j\n    l:f32[4@x,8@y] = shard_map[\n      check_vma=True\n      in_specs=(P(None, 'y', reduced={'x'}), P(('x', 'y'),))\n      jaxpr={ lambda ; m:f32[2,2]{V:y, R:x} n:f32[2,2]{V:(x,y)}. let\n          o:f32[2,2]{V:(x,y)} = reduced_vary_cast_p[axes=('x',)] m\n          p:f32[2,2]{V:(x,y)} = mul o n\n        in (p,) }\n      mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, platform=cpu)\n      newly_manual_axes=frozenset({'x', 'y'})\n      out_specs=(P('x', 'y'),)\n    ] k b\n  in (l,) }",
    '[-0.14550000429153442, -0.9110999703407288, -0.8391000032424927, 0.004399999976158142, 0.8439000248908997, 0.9074000120162964, 0.13670000433921814, -0.7597000002861023]',
    "{ lambda ; a:f32[4@x]. let\n    b:f32[]{U:x} = dot_general[\n      dimension_numbers=(([0], [0]), ([], []))\n      preferred_element_type=float32\n    ] a a\n    c:f32[] = shard_map[\n      check_vma=True\n      in_specs=(P(unreduced={'x'}),)\n      jaxpr={ lambda ; d:f32[]{U:x}. let\n          e:f32[] = unreduced_psum[axes=('x',)] d\n        in (e,) }\n      mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, platform=cpu)\n      newly_manual_axes=frozenset({'x', 'y'})\n      out_specs=(P(),)\n    ] b\n  in (c,) }",
    '896.0',
    "{ lambda ; a:f32[4,8]. let\n    b:f32[2,8] = shard_map[\n      check_vma=False\n      in_specs=(P('x', 'y'),)\n      jaxpr={ lambda ; c:f32[2,2]. let\n          d:f32[2,2] = psum[axes=('x',) axis_index_groups=None] c\n        in (d,) }\n      mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Auto, Auto), device_kind=cpu, num_cores=None, platform=cpu)\n      newly_manual_axes=frozenset({'x', 'y'})\n      out_specs=(P(None, 'y'),)\n    ] a\n  in (b,) }",
    "ValueError: Unsupported pcast from=invarying, to='unreduced'",
    "ValueError: Unsupported pcast from=varying, to='reduced'",
    "ValueError: Unsupported pcast from=unreduced, to='reduced'",
    "ValueError: jax.lax.pcast can only accept axis_name which corresponds to one of varying, unreduced, reduced or invarying state of the input. Got input type: float32[2,2]{V:y, U:x}, axes: ('x', 'y') and input state: {'varying', 'unreduced'}",
    'NotImplementedError: unreduced rule for sin is not implemented. Please file an issue at https://github.com/jax-ml/jax/issues',
    'ShardingTypeError: RHS should be reduced along the same axes LHS is unreduced on. Got lhs=float32[2,2]{V:y, U:x} and rhs=float32[]{V:y}',
    "ValueError: pvary cannot accept args which are unreduced. Got f32[2,2]{V:y, U:x} and axes={'x'}",
    "ValueError: shard_map applied to the function '<lambda>' was given out_specs which require replication which can't be statically inferred given the mesh:\n\nThe mesh given has shape (2, 4) with corresponding axis names ('x', 'y').\n\nout_specs is P(None, 'y') which implies that the corresponding output value is replicated across mesh axis 'x', but could not infer replication over any axes\n\nCheck if these output values are meant to be replicated over those mesh axes. If not, consider revising the corresponding out_specs entries. If so, consider disabling the check by passing the check_vma=False argument to `jax.shard_map`.",
    "ValueError: pvary cannot accept args which are unreduced. Got f32[2,2]{V:y, U:x} and axes={'x'}",
    "ValueError: vary_unreduced_cast is a Varying->Unreduced collective. This means that the axis names mentioned in `axes` passed to `vary_unreduced_cast` must be present in `jax.typeof(x).mat.varying`. Got axes=('x',) and jax.typeof(x).mat.varying=frozenset({'y'})",
    "ValueError: unreduced in out_specs P(None, 'y', unreduced={'x'}) can only be used when the mesh passed to shard_map contains axis names all of type `Explicit`. Got mesh AbstractMesh('x': 2, 'y': 4, axis_types=(Auto, Auto), device_kind=cpu, num_cores=None, platform=cpu)",
    'ValueError: unexpected JAX type (e.g. shape/dtype) for argument to VJP function: got float32[]{V:y}, but expected float32[]{V:y, U:x} because the corresponding output of the differentiated function had JAX type float32[]{V:y, R:x}',
    "ValueError: in_specs passed to shard_map: P() does not match the specs of the input: P(unreduced={'x'}) for arg: float32[]{U:x}. `in_specs` is an optional argument so you can omit specifying it and shard_map will infer the in_specs from the arguments. If you want to reshard your inputs, you can use `jax.reshard` on the arguments and then pass those args to shard_map.",
    "ValueError: Unsupported pcast from=invarying, to='unreduced'",
    'NameError: Found an unbound axis name: x. To fix this, please call preduced under `jax.shard_map`.',
]


def _lines(jax, devices) -> list[str]:
    """What the cases print, written for JAX's API so that the same code recorded JAX's
    output (``jax``: jaxkit here, JAX 0.10.2 with 8 CPU devices for the record)."""
    lax, jnp = jax.lax, jax.numpy
    P, AT = jax.sharding.PartitionSpec, jax.sharding.AxisType
    ex = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AT.Explicit,) * 2, devices=devices)
    au = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AT.Auto,) * 2, devices=devices)
    out, seen = [], []
    xy, yy = P("x", "y"), P(None, "y")
    data = np.arange(32, dtype=np.float32).reshape(4, 8)

    def unreduced(a):
        b = lax.pcast(a, "x", to="unreduced")
        seen.append(str(jax.typeof(b)))
        return b

    def sm(body, in_specs, out_specs, **kw):
        return jax.shard_map(body, in_specs=in_specs, out_specs=out_specs, **kw)

    with jax.set_mesh(ex):
        x = jax.device_put(data, xy)
        half = jax.device_put(data[:2], yy)
        f = sm(unreduced, xy, P(None, "y", unreduced={"x"}))
        text = str(jax.make_jaxpr(f)(x))
        out += [seen[0], text]
        r = jax.jit(f)(x)
        out.append(f"{jax.typeof(r)!r} {r.sharding}")
        out.append(repr(f(x)))  # eager: an unreduced array
        # psum of an unreduced value is its all-reduce; psum_scatter its reduce-scatter
        g = sm(lambda a: lax.psum(unreduced(a) + unreduced(a), "x"), xy, yy)
        out += [str(jax.make_jaxpr(g)(x)), str(np.asarray(jax.jit(g)(x)).tolist())]
        h = sm(lambda a: lax.psum_scatter(unreduced(a), "x", scatter_dimension=1, tiled=True),
               xy, P(None, ("y", "x")))
        out += [str(jax.make_jaxpr(h)(x)), str(np.asarray(jax.jit(h)(x)).tolist())]

        def reduced(a):  # invariant -> reduced -> varying; a product with itself
            b = lax.pcast(a, "x", to="reduced")
            c = lax.pcast(b, "x", to="varying")
            return b, c * c, lax.all_gather(c * c, "x", axis=0, tiled=True, to="reduced")
        red = P(None, "y", reduced={"x"})
        out.append(str(jax.make_jaxpr(sm(reduced, yy, (red, xy, red)))(half)))
        # reverse mode: unreduced_psum transposes to preduced, the cast to its mirror; an
        # unreduced output's cotangent is reduced (the transposed shard_map's in_specs)
        k = sm(jax.grad(lambda a: lax.psum(lax.pcast(jnp.sin(a), "x", to="unreduced"),
                                           "x").sum()), xy, xy)
        out.append(str(np.round(np.asarray(jax.jit(k)(x))[1], 4).tolist()))
        u = sm(lambda a: lax.pcast(jnp.sin(a), "x", to="unreduced"), xy,
               P(None, "y", unreduced={"x"}))
        k = jax.grad(lambda a: jax.sharding.reshard(u(a), yy).sum())
        out.append(str(jax.make_jaxpr(k)(x)))
        out.append(str(np.round(np.asarray(jax.jit(k)(x))[1], 4).tolist()))
        # an argument unreduced over Explicit axes: in_specs inferred from its type, the
        # body's block unreduced too
        def dot_psum(a, **kw):
            u = jnp.dot(a, a, out_sharding=P(unreduced={"x"}))
            return jax.shard_map(lambda b: lax.psum(b, "x"), out_specs=P(), **kw)(u)
        v = jax.device_put(data[:, 0], P("x"))
        out += [str(jax.make_jaxpr(dot_psum)(v)), str(jax.jit(dot_psum)(v))]
        errors = [
            sm(lambda a: lax.pcast(a, "x", to="unreduced"), yy, yy),
            sm(lambda a: lax.pcast(a, "x", to="reduced"), xy, xy),
            sm(lambda a: lax.pcast(unreduced(a), "x", to="reduced"), xy, yy),
            sm(lambda a: lax.pcast(unreduced(a), ("x", "y"), to="unreduced"), xy, yy),
            sm(lambda a: jnp.sin(unreduced(a)), xy, yy),
            sm(lambda a: unreduced(a) * 2.0, xy, P(None, "y", unreduced={"x"})),
            sm(lambda a: unreduced(a) + a, xy, xy),
            sm(lambda a: unreduced(a), xy, yy),
            sm(lambda a: unreduced(a), xy, xy),
            sm(lambda a: a, yy, P(None, "y", unreduced={"x"})),
            sm(jax.grad(lambda a: lax.pcast(a, "x", to="reduced").sum()), yy,
               P(None, "y", unreduced={"x"})),
        ]
        arg = [half, x, x, x, x, x, x, x, x, half, half]
        msgs = [_error_text(lambda e=e, a=a: jax.make_jaxpr(e)(a)) for e, a in zip(errors, arg)]
        msgs.append(_error_text(lambda: jax.make_jaxpr(lambda a: dot_psum(a, in_specs=P()))(v)))
        # outside a shard_map: the cast is refused first, then the unbound name
        msgs += [_error_text(lambda: jax.make_jaxpr(lambda a: lax.pcast(a, "x", to=to))(x))
                 for to in ("unreduced", "reduced")]
    with jax.set_mesh(au):
        xa = jax.device_put(data, P("x", "y"))
        # without checking types, the cast is nothing and psum the plain psum
        plain = sm(lambda a: lax.psum(lax.pcast(a, "x", to="reduced"), "x"), xy, yy,
                   check_vma=False)
        out.append(str(jax.make_jaxpr(plain)(xa)))
        auto = sm(lambda a: a, xy, P(None, "y", unreduced={"x"}))
        out += msgs[:-4] + [_error_text(lambda: jax.make_jaxpr(auto)(xa)), *msgs[-4:]]
    return out


def _canonical(lines: list[str]) -> list[str]:
    """A set's order follows the string hash, which differs between processes."""
    return [re.sub(r"\{'y', 'x'\}", "{'x', 'y'}",
                   re.sub(r"\{'varying', 'unreduced'\}", "{'unreduced', 'varying'}", s))
            for s in lines]



def _error_text(thunk) -> str:
    """What ``thunk()`` raises, as ``Class: message`` (the record compared), else "no error"."""
    try:
        thunk()
    except Exception as e:  # noqa: BLE001  (the class and words are the record)
        return f"{type(e).__name__}: {e}"
    return "no error"

def test_unreduced_reduced_manual_axes_as_jax():
    assert _canonical(_lines(jaxkit, DEVICES)) == _canonical(JAX_OUTPUT)


INVARIANT_OUTPUT = [
    "{ lambda ; a:f32[8@x,2]. let\n    b:f32[2,8] = shard_map[\n      check_vma=True\n      in_specs=(P('x',),)\n      jaxpr={ lambda ; c:f32[2,2]{V:x}. let\n          d:f32[2,8] = all_gather_invariant[\n            all_gather_dimension=1\n            axis_name=('x',)\n            axis_size=4\n            tiled=True\n          ] c\n        in (d,) }\n      mesh=AbstractMesh('x': 4, 'y': 2, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, platform=cpu)\n      newly_manual_axes=frozenset({'x', 'y'})\n      out_specs=(P(),)\n    ] a\n  in (b,) }",
    'float32[2,8]',
    '[[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]], [[8.0, 9.0], [10.0, 11.0]], [[12.0, 13.0], [14.0, 15.0]]]',
    '[[0.0, 2.0], [4.0, 6.0], [8.0, 10.0], [12.0, 14.0], [16.0, 18.0], [20.0, 22.0], [24.0, 26.0], [28.0, 30.0]]',
    "let jaxpr = { lambda ; a:f32[2,2]{V:x}. let\n    b:f32[8,2] = all_gather_invariant[\n      all_gather_dimension=0\n      axis_name=('x',)\n      axis_size=4\n      tiled=True\n    ] a\n    c:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] b\n    d:f32[8,2] = broadcast_in_dim 1.0:f32[]\n    e:i32[]{V:x} = axis_index[axis_name=x] \n    f:i32[]{V:x} = pvary[axes=('x',)] 1:i32[]\n    g:i32[]{V:x} = mul e f\n    h:i32[]{V:x} = pvary[axes=('x',)] 0:i32[]\n    i:i32[]{V:x} = add h g\n    j:i32[]{V:x} = pvary[axes=('x',)] 2:i32[]\n    k:i32[]{V:x} = mul i j\n    l:i32[]{V:x} = pvary[axes=('x',)] 0:i32[]\n    m:bool[]{V:x} = lt k l\n    n:i32[]{V:x} = pvary[axes=('x',)] 8:i32[]\n    o:i32[]{V:x} = add k n\n    p:i32[]{V:x} = select_n m k o\n    q:f32[8,2]{V:x} = pvary[axes=('x',)] d\n    r:i32[]{V:x} = pvary[axes=('x',)] 0:i32[]\n    s:f32[2,2]{V:x} = dynamic_slice[slice_sizes=(2, 2)] q p r\n  in (s,) } in\n{ lambda ; t:f32[8@x,2]. let\n    u:f32[8@x,2] = shard_map[\n      check_vma=True\n      in_specs=(P('x',),)\n      jaxpr=jaxpr\n      mesh=AbstractMesh('x': 4, 'y': 2, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, platform=cpu)\n      newly_manual_axes=frozenset({'x', 'y'})\n      out_specs=(P('x',),)\n    ] t\n  in (u,) }",
    "{ lambda ; a:f32[8,2]. let\n    b:f32[4,8,2] = shard_map[\n      check_vma=True\n      in_specs=(P(),)\n      jaxpr={ lambda ; c:f32[8,2]. let\n          d:f32[8,2]{V:x} = pvary[axes=('x',)] c\n          e:f32[4,8,2] = all_gather_invariant[\n            all_gather_dimension=0\n            axis_name=('x',)\n            axis_size=4\n            tiled=False\n          ] d\n        in (e,) }\n      mesh=AbstractMesh('x': 4, 'y': 2, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, platform=cpu)\n      newly_manual_axes=frozenset({'x', 'y'})\n      out_specs=(P(),)\n    ] a\n  in (b,) }",
    '[0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]',
    "{ lambda ; a:f32[8@x,2]. let\n    b:f32[4,2,2] = shard_map[\n      check_vma=True\n      in_specs=(P('x',),)\n      jaxpr={ lambda ; c:f32[2,2]{V:x}. let\n          d:f32[4,2,2] = all_gather_invariant[\n            all_gather_dimension=0\n            axis_name=('x',)\n            axis_size=4\n            tiled=False\n          ] c\n          e:f32[4,2,2] = transpose[permutation=(0, 2, 1)] d\n        in (e,) }\n      mesh=AbstractMesh('x': 4, 'y': 2, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, platform=cpu)\n      newly_manual_axes=frozenset({'x', 'y'})\n      out_specs=(P(),)\n    ] a\n  in (b,) }",
    "ValueError: pvary cannot accept args which are unreduced. Got f32[2,2]{U:x} and axes={'x'}",
    'NameError: unbound axis name: q',
]


def _invariant_lines(jax, devices) -> list[str]:
    """``all_gather(..., to='invarying')`` (the ``all_gather_invariant`` primitive): its
    types and jaxpr, values eager and under jit, reverse mode (a dynamic slice at the
    device's index) and JAX's errors, written for JAX's API as ``_lines``."""
    lax = jax.lax
    P, AT = jax.sharding.PartitionSpec, jax.sharding.AxisType
    mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AT.Explicit,) * 2, devices=devices)
    data = np.arange(16, dtype=np.float32).reshape(8, 2)
    out, seen = [], []

    def gather(a, **kw):
        b = lax.all_gather(a, "x", to="invarying", **kw)
        seen.append(str(jax.typeof(b)))
        return b

    def sm(body, in_specs=P("x"), out_specs=P(), **kw):
        return jax.shard_map(body, in_specs=in_specs, out_specs=out_specs, **kw)

    with jax.set_mesh(mesh):
        x = jax.device_put(data, P("x"))
        f = sm(lambda a: gather(a, axis=1, tiled=True))
        out += [str(jax.make_jaxpr(f)(x)), seen[0]]
        out.append(str(np.asarray(sm(gather)(x)).tolist()))  # eager: stacked blocks
        loss = jax.jit(jax.grad(lambda a: (sm(lambda b: gather(b, tiled=True))(a) ** 2).sum()))
        out.append(str(np.asarray(loss(x)).tolist()))
        out.append(str(jax.make_jaxpr(sm(jax.grad(lambda b: gather(b, tiled=True).sum()),
                                         out_specs=P("x")))(x)))
        # an invariant operand is made varying first; two axes gather in row-major order
        out.append(str(jax.make_jaxpr(sm(gather, in_specs=P()))(jax.device_put(data, P()))))
        two = sm(lambda a: lax.all_gather(a, ("x", "y"), to="invarying", tiled=True),
                 in_specs=P(("x", "y")))
        out.append(str(np.asarray(jax.jit(two)(jax.device_put(data[:, 0], P(("x", "y"))))
                                  ).tolist()))
        out.append(str(jax.make_jaxpr(sm(jax.vmap(gather, in_axes=1, out_axes=1)))(x)))
        out += [
            _error_text(lambda: jax.make_jaxpr(sm(lambda a: gather(lax.pcast(a, "x",
                                                                       to="unreduced"))))(x)),
            _error_text(lambda: jax.make_jaxpr(lambda a: lax.all_gather(a, "q", to="invarying"))(x)),
        ]
    return out


EAGER_OUTPUT = [
    "Array(shape=(2, 8), dtype=float32, sharding=NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit)), spec=P(None, 'y', unreduced={'x'}), memory_kind=device))",
    'float32[2,8@y]{U:x}',
    'float32[2,8@y]{R:x}',
    'float32[2,8@y]{U:x}',
    'ShardingTypeError: lhs is unreduced while rhs is not. `add` operation does not allow this because there will be implicit communication. Please reduce lhs via `reshard` before calling `add`.',
    'ShardingTypeError: RHS should be reduced along the same axes LHS is unreduced on. Got lhs=float32[2,8@y]{U:x} and rhs=float32[]',
    'ShardingTypeError: lhs is unreduced while rhs is not. `add` operation does not allow this because there will be implicit communication. Please reduce lhs via `reshard` before calling `add`.',
    'NotImplementedError: unreduced rule for sin is not implemented. Please file an issue at https://github.com/jax-ml/jax/issues',
    "NotImplementedError: device_indices_map doesn't work with unreduced. Please file a bug at https://github.com/jax-ml/jax/issues",
    "NotImplementedError: device_indices_map doesn't work with unreduced. Please file a bug at https://github.com/jax-ml/jax/issues",
    'ValueError: Using *pspec is dangerous when PartitionSpec has non-empty unreduced/reduced set. Please use *spec.partitions',
    'ValueError: Using *pspec is dangerous when PartitionSpec has non-empty unreduced/reduced set. Please use *spec.partitions',
    'ValueError: Using *pspec is dangerous when PartitionSpec has non-empty unreduced/reduced set. Please use *spec.partitions',
    'float32[1,2,8@y]{U:x}',
    '[[16.0, 18.0, 20.0, 22.0, 24.0, 26.0, 28.0, 30.0], [32.0, 34.0, 36.0, 38.0, 40.0, 42.0, 44.0, 46.0]]',
    '[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0]]',
    '[[16.0, 18.0, 20.0, 22.0, 24.0, 26.0, 28.0, 30.0], [32.0, 34.0, 36.0, 38.0, 40.0, 42.0, 44.0, 46.0]]',
    "ValueError: in_specs passed to shard_map: P(None, 'y') does not match the specs of the input: P(None, 'y', unreduced={'x'}) for arg: float32[2,8@y]{U:x}. `in_specs` is an optional argument so you can omit specifying it and shard_map will infer the in_specs from the arguments. If you want to reshard your inputs, you can use `jax.reshard` on the arguments and then pass those args to shard_map.",
    "ValueError: pvary cannot accept args which are unreduced. Got f32[2,2]{V:y, U:x} and axes={'x'}",
    "ValueError: pvary cannot accept args which are unreduced. Got f32[2,2]{V:y, U:x} and axes={'x'}",
    'NotImplementedError: unreduced rule for sin is not implemented. Please file an issue at https://github.com/jax-ml/jax/issues',
    "ValueError: pvary cannot accept args which are unreduced. Got f32[2,2]{V:y, U:x} and axes={'x'}",
    "ValueError: pvary cannot accept args which are unreduced. Got f32[2,2]{V:y, U:x} and axes={'x'}",
    "ValueError: Unsupported pcast from=varying, to='reduced'",
    "ValueError: in_specs passed to shard_map: P(None, 'y', unreduced={'x'}) does not match the specs of the input: P(None, 'y') for arg: float32[2,8@y]. `in_specs` is an optional argument so you can omit specifying it and shard_map will infer the in_specs from the arguments. If you want to reshard your inputs, you can use `jax.reshard` on the arguments and then pass those args to shard_map.",
]


def _eager_lines(jax, devices) -> list[str]:
    """Misuse of unreduced and reduced values run eagerly (no jit around): eager shard_map
    bodies that drop, mix or reduce them wrongly, and eager operations on an unreduced
    array (arithmetic with plain values, reading it to the host, indexing, device_put),
    with the few uses that work; written for JAX's API as ``_lines``."""
    lax, jnp = jax.lax, jax.numpy
    P, AT = jax.sharding.PartitionSpec, jax.sharding.AxisType
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AT.Explicit,) * 2, devices=devices)
    data = np.arange(32, dtype=np.float32).reshape(4, 8)
    xy, yy = P("x", "y"), P(None, "y")
    red, unr = P(None, "y", reduced={"x"}), P(None, "y", unreduced={"x"})

    def sm(body, in_specs, out_specs):
        return jax.shard_map(body, in_specs=in_specs, out_specs=out_specs)

    def to_u(b):
        return lax.pcast(b, "x", to="unreduced")

    def run(thunk):
        try:
            return str(thunk())
        except Exception as e:  # noqa: BLE001  (the class and words are the record)
            return f"{type(e).__name__}: {e}"

    with jax.set_mesh(mesh):
        x = jax.device_put(data, xy)
        half = jax.device_put(data[:2], yy)
        u = sm(to_u, xy, unr)(x)
        r = sm(lambda b: lax.pcast(b, "x", to="reduced"), yy, red)(half)
        return [run(thunk) for thunk in (
            lambda: repr(u), lambda: jax.typeof(u), lambda: jax.typeof(r),
            lambda: jax.typeof(u + u), lambda: u + 1, lambda: u * 2.0, lambda: u + half,
            lambda: jnp.sin(u), lambda: np.asarray(u), lambda: jax.device_put(u, yy),
            lambda: u[0], lambda: u[:, 1:], lambda: r[0], lambda: jax.typeof(u[None]),
            lambda: np.asarray(jax.sharding.reshard(u, yy)).tolist(),
            lambda: np.asarray(r + 1).tolist(),
            lambda: np.asarray(sm(lambda b: lax.psum(b, "x"), unr, yy)(u)).tolist(),
            lambda: sm(lambda b: b, yy, yy)(u),
            lambda: sm(to_u, xy, xy)(x),
            lambda: sm(lambda b: to_u(b) + b, xy, xy)(x),
            lambda: sm(lambda b: jnp.sin(to_u(b)), xy, unr)(x),
            lambda: sm(lambda b: lax.pmax(to_u(b), "x"), xy, yy)(x),
            lambda: sm(lambda b: lax.all_gather(to_u(b), "x"), xy, yy)(x),
            lambda: sm(lambda b: lax.pcast(b, "x", to="reduced"), xy, xy)(x),
            lambda: sm(lambda b: b, unr, unr)(half),
        )]


def test_unreduced_misuse_eagerly_as_jax():
    assert _canonical(_eager_lines(jaxkit, DEVICES)) == _canonical(EAGER_OUTPUT)


def test_all_gather_invarying_as_jax():
    assert _canonical(_invariant_lines(jaxkit, DEVICES)) == _canonical(INVARIANT_OUTPUT)
