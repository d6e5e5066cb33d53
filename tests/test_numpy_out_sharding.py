"""``out_sharding=`` of ``jax.numpy`` functions: over a mesh whose axes are ``Explicit`` the
result is laid out as asked, its type says so, and the printed jaxpr is JAX's (the layout a
parameter of ``iota``/``broadcast_in_dim``/``reshape``/``dot_general``/
``convert_element_type``, not a constraint; or, where JAX does so, the body run under
``auto_axes``, whose reshards these records also check).

One record per call: its expression over two laid-out arrays, a NumPy reference for its
value, and JAX 0.10.2's result spec, type and ``make_jaxpr`` text, recorded on 8 CPU devices
(``jax.config.update('jax_num_cpu_devices', 8)``, the same mesh and arrays; the abstract
mesh's repr is written ``{M}``). jaxkit runs them on an extra 8-device CPU backend in this
process. Cheap: each expression runs once eagerly and is traced once.
"""
import re
from typing import NamedTuple

import numpy as np
import pytest

import jaxkit as jax
import jaxkit.numpy as jnp
from jaxkit.avals import ShardingTypeError
from jaxkit.runtime import multi_device
from jaxkit.sharding import AxisType, PartitionSpec as P

DEVICES = multi_device.add_cpu_backend("explicit8", 8).devices
M = ("AbstractMesh('x': 4, 'y': 2, axis_types=(Explicit, Explicit), device_kind=cpu, "
     "num_cores=None, platform=cpu)")


class Record(NamedTuple):
    name: str
    expr: str  # over a: f32[8,4] laid out P('x', 'y') and v: f32[8] laid out P('x')
    numpy: str  # the value, from NumPy's a and v
    spec: str  # JAX's x.sharding.spec
    type: str  # JAX's jax.typeof(x)
    jaxpr: tuple  # JAX's make_jaxpr text, line by line
    # 'all': the whole text. 'reshard': only its reshard equations (binder type and literal
    # operand, in order): the auto_axes wrapping, around a jnp body whose equations are
    # compared with JAX's elsewhere (test_numpy_jaxprs) and may still differ from them.
    match: str = "all"


def _reshards(text: str) -> tuple:
    return tuple(re.sub(r"^\s*[a-z_]+:(\S+) = reshard(?: [a-z]+$)?", r"\1 = reshard", line)
                 for line in text.splitlines() if "= reshard" in line)


RECORDS = [
    Record('arange',
           "jnp.arange(8, out_sharding=P('x'))",
           'np.arange(8)', "P('x',)", 'int32[8@x]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:i32[8@x] = iota[',
               '      dimension=0',
               '      dtype=int32',
               '      shape=(8,)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x',))",
               '    ] ',
               '  in (c,) }',
           )),
    Record('zeros',
           "jnp.zeros((8, 4), out_sharding=P('x'))",
           'np.zeros((8, 4))', "P('x', None)", 'float32[8@x,4]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8@x,4] = broadcast_in_dim 0.0:f32[]',
               '  in (c,) }',
           )),
    Record('ones',
           "jnp.ones((8,), dtype=jnp.int32, out_sharding=P(('x', 'y')))",
           'np.ones(8)', "P(('x', 'y'),)", 'int32[8@(x,y)]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:i32[8@(x,y)] = broadcast_in_dim 1:i32[]',
               '  in (c,) }',
           )),
    Record('full_array_fill',
           "jnp.full((8, 4), jnp.arange(4.0), out_sharding=P('x'))",
           'np.broadcast_to(np.arange(4.0), (8, 4))', "P('x', None)", 'float32[8@x,4]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[4] = iota[dimension=0 dtype=float32 shape=(4,) sharding=None] ',
               '    d:f32[8@x,4] = broadcast_in_dim[broadcast_dimensions=(1,)] c',
               '  in (d,) }',
           )),
    Record('zeros_like',
           "jnp.zeros_like(a, out_sharding=P('y'))",
           'np.zeros((8, 4))', "P('y', None)", 'float32[8@y,4]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8@y,4] = broadcast_in_dim 0.0:f32[]',
               '  in (c,) }',
           )),
    Record('ones_like',
           'jnp.ones_like(v, out_sharding=P())',
           'np.ones(8)', 'P(None,)', 'float32[8]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8] = broadcast_in_dim 1.0:f32[]',
               '  in (c,) }',
           )),
    Record('full_like',
           "jnp.full_like(a, 3, out_sharding=P(None, 'x'))",
           'np.full((8, 4), 3)', "P(None, 'x')", 'float32[8,4@x]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8,4@x] = broadcast_in_dim 3.0:f32[]',
               '  in (c,) }',
           )),
    Record('full_like_shape',
           "jnp.full_like(a, 2, shape=(4, 8), out_sharding=P('x'))",
           'np.full((4, 8), 2)', "P('x', None)", 'float32[4@x,8]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[4@x,8] = broadcast_in_dim 2.0:f32[]',
               '  in (c,) }',
           )),
    Record('reshape',
           "jnp.reshape(a, (32,), out_sharding=P('x'))",
           'a.reshape(32)', "P('x',)", 'float32[32@x]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[32@x] = reshape[',
               '      dimensions=None',
               '      new_sizes=(32,)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x',))",
               '    ] a',
               '  in (c,) }',
           )),
    Record('reshape_method',
           "a.reshape(32, out_sharding=P('x'))",
           'a.reshape(32)', "P('x',)", 'float32[32@x]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[32@x] = reshape[',
               '      dimensions=None',
               '      new_sizes=(32,)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x',))",
               '    ] a',
               '  in (c,) }',
           )),
    Record('ravel',
           "jnp.ravel(a, out_sharding=P('x'))",
           'a.ravel()', "P('x',)", 'float32[32@x]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[32@x] = reshape[',
               '      dimensions=None',
               '      new_sizes=(32,)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x',))",
               '    ] a',
               '  in (c,) }',
           )),
    Record('flatten',
           "a.flatten(out_sharding=P('x'))",
           'a.ravel()', "P('x',)", 'float32[32@x]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[32@x] = reshape[',
               '      dimensions=None',
               '      new_sizes=(32,)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x',))",
               '    ] a',
               '  in (c,) }',
           )),
    Record('broadcast_to',
           "jnp.broadcast_to(v, (4, 8), out_sharding=P(None, 'x'))",
           'np.broadcast_to(v, (4, 8))', "P(None, 'x')", 'float32[4,8@x]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[4,8@x] = broadcast_in_dim[broadcast_dimensions=(1,)] b',
               '  in (c,) }',
           )),
    Record('matmul',
           "jnp.matmul(a, a.T, out_sharding=P('x', None))",
           'a @ a.T', "P('x', None)", 'float32[8@x,8]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[4@y,8@x] = transpose[permutation=(1, 0)] a',
               '    d:f32[8@x,8] = dot_general[',
               '      dimension_numbers=(([1], [0]), ([], []))',
               '      preferred_element_type=float32',
               '    ] a c',
               '  in (d,) }',
           )),
    Record('tensordot',
           "jnp.tensordot(a, a, axes=([0], [0]), out_sharding=P('x', 'y'))",
           'a.T @ a', "P('x', 'y')", 'float32[4@x,4@y]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[4@x,4@y] = dot_general[',
               '      dimension_numbers=(([0], [0]), ([], []))',
               '      preferred_element_type=float32',
               '    ] a a',
               '  in (c,) }',
           )),
    Record('dot',
           "jnp.dot(a, a.T, out_sharding=P('x', 'y'))",
           'a @ a.T', "P('x', 'y')", 'float32[8@x,8@y]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[4@y,8@x] = transpose[permutation=(1, 0)] a',
               '    d:f32[8@x,8@y] = dot_general[',
               '      dimension_numbers=(([1], [0]), ([], []))',
               '      preferred_element_type=float32',
               '    ] a c',
               '  in (d,) }',
           )),
    Record('einsum',
           "jnp.einsum('ij,kj->ik', a, a, out_sharding=P('x', None))",
           'a @ a.T', "P('x', None)", 'float32[8@x,8]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8@x,8] = dot_general[',
               '      dimension_numbers=(([1], [1]), ([], []))',
               '      preferred_element_type=float32',
               '    ] a a',
               '  in (c,) }',
           )),
    Record('jit_zeros_like',
           "jax.jit(lambda x: jnp.zeros_like(x, out_sharding=P('y')))(a)",
           'np.zeros((8, 4))', "P('y', None)", 'float32[8@y,4]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8@y,4] = jit[',
               '      name=<lambda>',
               "      ctx_mesh=Mesh('x': 4, 'y': 2, axis_types=(Explicit, Explicit))",
               '      jaxpr={ lambda ; a:f32[8@x,4@y]. let',
               '          c:f32[8@y,4] = broadcast_in_dim 0.0:f32[]',
               '        in (c,) }',
               '    ] a',
               '  in (c,) }',
           )),
    Record('grad_reshape',
           "jax.grad(lambda x: jnp.reshape(x, (32,), out_sharding=P('x')).sum())(a)",
           'np.ones((8, 4))', "P('x', 'y')", 'float32[8@x,4@y]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[32@x] = reshape[',
               '      dimensions=None',
               '      new_sizes=(32,)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x',))",
               '    ] a',
               '    _:f32[] = reduce_sum[axes=(0,) out_sharding=None] c',
               '    d:f32[] = reshard 1.0:f32[]',
               '    e:f32[32@x] = broadcast_in_dim d',
               '    f:f32[8@x,4@y] = reshape[',
               '      dimensions=None',
               '      new_sizes=(8, 4)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x', 'y'))",
               '    ] e',
               '  in (f,) }',
           )),
    Record('vmap_reshape',
           "jax.vmap(lambda x: jnp.reshape(x, (2, 2), out_sharding=P('y')))(a)",
           'a.reshape(8, 2, 2)', "P('x', 'y', None)", 'float32[8@x,2@y,2]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8@x,2@y,2] = reshape[',
               '      dimensions=None',
               '      new_sizes=(8, 2, 2)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x', 'y'))",
               '    ] a',
               '  in (c,) }',
           )),
    # The second part (#16/#17): auto_axes/explicit_axes print JAX's reshard; array/asarray
    # type their final conversion; repeat, a gather's .at[].get, a scatter's .at[].add,
    # percentile, bincount and einsum over several contractions run under auto_axes.
    Record('auto_axes',
           "jax.sharding.auto_axes(lambda x: x.sum(0), out_sharding=P('y'))(a)",
           'a.sum(0)', "P('y',)", 'float32[4@y]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8,4] = reshard a',
               '    d:f32[4] = reduce_sum[axes=(0,) out_sharding=None] c',
               '    e:f32[4@y] = reshard d',
               '  in (e,) }',
           )),
    Record('auto_axes_some',
           "jax.sharding.auto_axes(lambda x: x * 2, axes='x', out_sharding=P('y'))(a)",
           'a * 2', "P('y', None)", 'float32[8@y,4]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8,4@y] = reshard a',
               '    d:f32[8,4@y] = mul c 2.0:f32[]',
               '    e:f32[8@y,4] = reshard d',
               '  in (e,) }',
           )),
    Record('explicit_axes',
           "jax.sharding.explicit_axes(lambda x: x * 2, in_sharding=P('x'))(a)",
           'a * 2', "P('x', None)", 'float32[8@x,4]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8@x,4] = reshard a',
               '    d:f32[8@x,4] = mul c 2.0:f32[]',
               '    e:f32[8@x,4] = reshard d',
               '  in (e,) }',
           )),
    Record('grad_auto_axes',
           'jax.grad(lambda t: jax.sharding.auto_axes(lambda u: (u * u).sum(), out_sharding=P())(t))(a)',
           '2 * a', "P('x', 'y')", 'float32[8@x,4@y]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8,4] = reshard a',
               '    d:f32[8,4] = mul c c',
               '    e:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] d',
               '    _:f32[] = reshard e',
               '    f:f32[] = reshard 1.0:f32[]',
               '    g:f32[] = reshard f',
               '    h:f32[8,4] = broadcast_in_dim g',
               '    i:f32[8,4] = mul c h',
               '    j:f32[8,4] = mul h c',
               '    k:f32[8,4] = add_any i j',
               '    l:f32[8@x,4@y] = reshard k',
               '  in (l,) }',
           )),
    Record('vmap_asarray',
           'jax.vmap(lambda r: jnp.asarray(r, out_sharding=P()))(a)',
           'a', "P('x', None)", 'float32[8@x,4]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8@x,4] = convert_element_type[new_dtype=float32 weak_type=False] a',
               '  in (c,) }',
           )),
    Record('array_host',
           "jnp.array(np.arange(8.0), out_sharding=P('x'))",
           'np.arange(8.0)', "P('x',)", 'float32[8@x]', (
               '{ lambda a:f32[8]; b:f32[8@x,4@y] c:f32[8@x]. let',
               '    d:f32[8@x] = convert_element_type[new_dtype=float32 weak_type=False] a',
               '  in (d,) }',
           )),
    Record('array_list',
           "jnp.array([1.0, 2.0, 3.0, 4.0], out_sharding=P('x'))",
           'np.arange(1.0, 5.0)', "P('x',)", 'float32[4@x]', (
               '{ lambda a:f32[4]; b:f32[8@x,4@y] c:f32[8@x]. let',
               '    d:f32[4@x] = convert_element_type[new_dtype=float32 weak_type=False] a',
               '  in (d,) }',
           )),
    Record('asarray',
           "jnp.asarray(a, out_sharding=P('y'))",
           'a', "P('y', None)", 'float32[8@y,4]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8@y,4] = convert_element_type[new_dtype=float32 weak_type=False] a',
               '  in (c,) }',
           )),
    Record('repeat',
           "jnp.repeat(v, 2, out_sharding=P('x'))",
           'np.repeat(v, 2)', "P('x',)", 'float32[16@x]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8] = reshard b',
               '    d:f32[8,2] = broadcast_in_dim[broadcast_dimensions=(0,)] c',
               '    e:f32[16] = reshape[dimensions=None new_sizes=(16,) sharding=None] d',
               '    f:f32[16@x] = reshard e',
               '  in (f,) }',
           )),
    Record('repeat_axis',
           "jnp.repeat(a, 2, axis=0, out_sharding=P('x'))",
           'np.repeat(a, 2, axis=0)', "P('x', None)", 'float32[16@x,4]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8,4] = reshard a',
               '    d:f32[8,2,4] = broadcast_in_dim[broadcast_dimensions=(0, 2)] c',
               '    e:f32[16,4] = reshape[dimensions=None new_sizes=(16, 4) sharding=None] d',
               '    f:f32[16@x,4] = reshard e',
               '  in (f,) }',
           )),
    Record('at_get',
           "a.at[jnp.array([0, 2])].get(out_sharding=P(None, 'y'))",
           'a[[0, 2]]', "P(None, 'y')", 'float32[2,4@y]', (
               '{ lambda a:i32[2]; b:f32[8@x,4@y] c:f32[8@x]. let',
               '    d:f32[8,4] = reshard b',
               '    e:i32[2] = reshard a',
               '    f:bool[2] = lt e 0:i32[]',
               '    g:i32[2] = add e 8:i32[]',
               '    h:i32[2] = select_n f e g',
               '    i:i32[2,1] = broadcast_in_dim[broadcast_dimensions=(0,)] h',
               '    j:f32[2,4] = gather[',
               '      dimension_numbers=GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), operand_batching_dims=(), start_indices_batching_dims=())',
               '      fill_value=None',
               '      indices_are_sorted=False',
               '      mode=GatherScatterMode.PROMISE_IN_BOUNDS',
               '      slice_sizes=(1, 4)',
               '      unique_indices=False',
               '    ] d i',
               '    k:f32[2,4@y] = reshard j',
               '  in (k,) }',
           )),
    Record('at_add',
           'jnp.zeros(4).at[jnp.array([1, 2])].add(1.0, out_sharding=P())',
           'np.array([0.0, 1, 1, 0])', 'P(None,)', 'float32[4]', (
               '{ lambda a:i32[2]; b:f32[8@x,4@y] c:f32[8@x]. let',
               '    d:f32[4] = broadcast_in_dim 0.0:f32[]',
               '    e:f32[4] = reshard d',
               '    f:f32[] = reshard 1.0:f32[]',
               '    g:i32[2] = reshard a',
               '    h:bool[2] = lt g 0:i32[]',
               '    i:i32[2] = add g 4:i32[]',
               '    j:i32[2] = select_n h g i',
               '    k:i32[2,1] = broadcast_in_dim[broadcast_dimensions=(0,)] j',
               '    l:f32[] = convert_element_type[new_dtype=float32 weak_type=False] f',
               '    m:f32[2] = broadcast_in_dim l',
               '    n:f32[4] = scatter-add[',
               '      dimension_numbers=ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=())',
               '      indices_are_sorted=False',
               '      mode=GatherScatterMode.FILL_OR_DROP',
               '      unique_indices=False',
               '      update_consts=()',
               '      update_jaxpr={ lambda ; o:f32[] p:f32[]. let q:f32[] = add o p in (q,) }',
               '    ] e k m',
               '    r:f32[4] = reshard n',
               '  in (r,) }',
           )),
    Record('full_float',
           "jnp.full((8, 4), 1.5, out_sharding=P('x'))",
           'np.full((8, 4), 1.5)', "P('x', None)", '~float32[8@x,4]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8@x,4] = broadcast_in_dim 1.5:f32[]',
               '  in (c,) }',
           )),
    Record('einsum_swapped',
           "jnp.einsum('ij,kj->ki', a, a, out_sharding=P('x', None))",
           'a @ a.T', "P('x', None)", 'float32[8@x,8]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8@x,8] = dot_general[',
               '      dimension_numbers=(([1], [1]), ([], []))',
               '      preferred_element_type=float32',
               '    ] a a',
               '  in (c,) }',
           )),
    Record('percentile',
           "jnp.percentile(a, 50.0, axis=0, out_sharding=P('y'))",
           'np.percentile(a, 50.0, axis=0)', "P('y',)", 'float32[4@y]', (
               'f32[8,4] = reshard',
               'f32[] = reshard',
               'f32[4@y] = reshard',
           ), match='reshard'),
    Record('bincount',
           'jnp.bincount(jnp.arange(8) % 3, length=4, out_sharding=P())',
           'np.bincount(np.arange(8) % 3, minlength=4)', 'P(None,)', 'int32[4]', (
               'i32[4] = reshard',
               'i32[] = reshard 1:i32[]',
               'i32[8] = reshard',
               'i32[4] = reshard',
           ), match='reshard'),
    Record('repeat_total',
           "jnp.repeat(a, jnp.array([1, 2, 1, 0]), axis=1, total_repeat_length=4, out_sharding=P('x'))",
           'np.repeat(a, [1, 2, 1, 0], axis=1)', "P('x', None)", 'float32[8@x,4]', (
               'i32[4] = reshard',
               'f32[8,4] = reshard',
               'f32[8@x,4] = reshard',
           ), match='reshard'),
    Record('einsum_three',
           "jnp.einsum('ij,jk,kl->il', a, a.T, a, out_sharding=P('x', None))",
           'a @ a.T @ a', "P('x', None)", 'float32[8@x,4]', (
               'f32[8,4] = reshard',
               'f32[4,8] = reshard',
               'f32[8,4] = reshard',
               'f32[8@x,4] = reshard',
           ), match='reshard'),
]


@pytest.fixture(scope="module")
def mesh():
    mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Explicit,) * 2,
                         devices=DEVICES)
    with jax.sharding.set_mesh(mesh):
        yield mesh


@pytest.fixture(scope="module")
def operands(mesh):
    a = np.arange(32.0, dtype=np.float32).reshape(8, 4)
    v = np.arange(8.0, dtype=np.float32)
    return (a, v), (jax.device_put(a, P("x", "y")), jax.device_put(v, P("x")))


@pytest.mark.parametrize("rec", RECORDS, ids=[r.name for r in RECORDS])
def test_out_sharding_matches_jax(rec, operands):
    (a_np, v_np), (a, v) = operands
    f = eval("lambda a, v: " + rec.expr)  # noqa: S307 - the table's own expressions
    got = f(a, v)
    assert (str(got.sharding.spec), str(jax.typeof(got))) == (rec.spec, rec.type)
    want = eval(rec.numpy, {"np": np, "a": a_np, "v": v_np})  # noqa: S307
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    text = str(jax.make_jaxpr(f)(a, v))
    if rec.match == "reshard":
        assert _reshards(text) == rec.jaxpr
    else:
        assert text == "\n".join(rec.jaxpr).replace("{M}", M)


def test_out_sharding_is_refused_with_a_device(mesh):
    """JAX's ValueError when both ``device`` and ``out_sharding`` are given."""
    with pytest.raises(ValueError, match="Only one of `device` or `out_sharding` can be set"):
        jnp.zeros(8, device=DEVICES[0], out_sharding=P("x"))
    with pytest.raises(ValueError, match="Only one of `device` or `out_sharding` can be set"):
        jnp.arange(8, device=DEVICES[0], out_sharding=P("x"))


def test_out_sharding_refusals_match_jax(operands):
    """JAX 0.10.2's errors: repeat over a split axis needs ``out_sharding``; bincount's may
    only be replicated."""
    _, (a, v) = operands
    with pytest.raises(ValueError, match="Please pass sharding to `jnp.repeat` via "
                                         "`out_sharding` parameter."):
        jnp.repeat(a, 2, axis=1)
    with pytest.raises(ShardingTypeError, match="out_sharding passed to `jnp.bincount` can "
                                                "only be fully replicated or fully unreduced"):
        jnp.bincount(jnp.arange(8) % 3, length=4, out_sharding=P("x"))
