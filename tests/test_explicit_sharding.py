"""Explicit sharding: over a mesh whose axes are ``Explicit`` an array's type carries its layout
(``float32[8@x,4]``) and each primitive's sharding rule gives its result's.

Runs on an extra 8-device CPU backend in this process. Every record is an expression over a
few laid-out arrays; its type (or its error's class and text) and its value are compared
with JAX 0.10.2's, computed on 8 CPU devices in a subprocess, eagerly and under ``jit``.
Values are also checked against NumPy.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import jaxkit as jax
import jaxkit.numpy as jnp
from jaxkit import lax
from jaxkit.runtime import multi_device
from jaxkit.sharding import AxisType, NamedSharding, PartitionSpec as P

DEVICES = multi_device.add_cpu_backend("explicit8", 8).devices

# The arrays every record reads (``DEV`` is the 8 devices on either side).
PRELUDE = """
mesh = jax.make_mesh((4, 2), ('x', 'y'), axis_types=(AxisType.Explicit,) * 2, devices=DEV)
context = jax.sharding.set_mesh(mesh)
a = jax.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), P('x', 'y'))
b = jax.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), P('x', None))
c = jax.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), P(None, 'x'))
r = jax.device_put(np.arange(4.0, dtype=np.float32).reshape(4, 1), P('x', None))
s = jax.device_put(np.arange(8.0, dtype=np.float32).reshape(1, 8), P(None, 'y'))
q = jax.device_put(np.arange(64.0, dtype=np.float32).reshape(4, 16), P('x', None))
v = jax.device_put(np.arange(8.0, dtype=np.float32), P('x'))
w = jax.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), P(('x', 'y'), None))
ARGS = (a, b, c, r, s, q, v, w)
ROW_DNUMS = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
KERNEL_SPLIT = jax.device_put(np.ones((4, 1, 3), np.float32), P('x'))
FEATURES_SPLIT = jax.device_put(np.ones((4, 8, 2), np.float32), P(None, 'x'))
U = jax.device_put(a, P('x', None, unreduced={'y'}))  # summands over 'y', split by XLA
R = jax.device_put(a, P('x', None, reduced={'y'}))  # the whole sum on each device along 'y'

def collectives(f, *args):
    # The collectives in the compiled program (an unreduced result needs no all-reduce).
    text = jax.jit(f).lower(*args).compile().as_text()
    return [op for op in ('all-reduce', 'reduce-scatter', 'all-gather', 'all-to-all') if op in text]

DOT_UNREDUCED = lambda t, u: jnp.dot(t, u, out_sharding=P(None, None, unreduced={'x'}))
# Results unreduced over a mesh axis (JAX gives no value of one: the CASES reduce them)
# Data-parallel weights reduced over 'y': their gradient is unreduced over it (no all-reduce)
XY = jax.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), P('y', None))
W = jax.device_put(np.ones((4, 3), np.float32), P(None, None, reduced={'y'}))
GRAD_W = jax.grad(lambda w, t: (t @ w).sum())
SUM_UNREDUCED = lambda t: lax.reduce_sum(t, (1,), out_sharding=P(None, unreduced={'x'}))
# Primitives that keep their operand's unreduced/reduced axes (their types, traced only)
STRUCTURAL = lambda u: (jnp.concatenate([u, u], 1), jnp.stack([u, u], 1), u[None],
                        lax.pad(u, 0.0, ((0, 0, 0), (1, 1, 0))), lax.split(u, (1, 3), axis=1)[1],
                        lax.dynamic_update_slice(u, u, (0, 0)), lax.reduce_precision(u, 5, 10),
                        u[:, 1:3], lax.broadcast_in_dim(u, (2, 8, 4), (1, 2)), u.T,
                        lax.stop_gradient(u))
UR_RESULTS = lambda u, t, v: (u.sum(0), u.astype(jnp.float16).T, DOT_UNREDUCED(t, v), u * R,
                              SUM_UNREDUCED(t), GRAD_W(W, XY))

IN_SHARDED = jax.jit(lambda t, u: (t * 2, u.sum()),
                     in_shardings=(jax.sharding.NamedSharding(mesh, P('x')),
                                   jax.sharding.NamedSharding(mesh, P())))

def on_mesh8(t):
    # The tutorial's cell: a block typed over another mesh of the same 8 devices.
    with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((8,), ('A',),
                                                                  (AxisType.Explicit,))):
        return jax.sharding.reshard(t, P('A', None)) * 2

def auto_constraint():
    # Over Auto axes XLA picks the result's layout: its spec is the first argument's only
    # when that layout is the same, else the shortest one (P('x',), not P('x', None)).
    auto = jax.make_mesh((4, 2), ('x', 'y'), axis_types=(AxisType.Auto,) * 2, devices=DEV)
    with jax.sharding.set_mesh(auto):
        t = jax.device_put(np.ones((8, 4), np.float32), P(None, 'x'))
        u = jax.device_put(np.ones((4, 16), np.float32), P('x', None))
        f = jax.jit(lambda t, u: lax.with_sharding_constraint(jnp.dot(t, u), P('x', None)))
        g = jax.jit(lambda u: lax.with_sharding_constraint(u * 2, P('x', None)))
        return f(t, u).sharding.spec, g(u).sharding.spec
"""
NAMES = "a, b, c, r, s, q, v, w"

# name -> expression over the arrays above
CASES = {
    # elementwise and broadcasting
    "sin": "jnp.sin(a)",
    "add_same": "a + a",
    "add_merge": "a + b",
    "add_scalar": "a * 2.0 + 1.0",
    "add_broadcast": "r + s",
    "add_conflict": "b + c",
    "compare": "a > b",
    "where": "jnp.where(a > 3.0, a, 0.0)",
    "integer_pow": "a ** 2",
    "softmax": "jax.nn.softmax(a, axis=1)",
    "concatenate": "jnp.concatenate([a, a], 1)",
    "cumsum_free_axis": "jnp.cumsum(b, 1)",
    "cumsum_split_axis": "jnp.cumsum(a, 0)",
    "select_mismatch": "lax.select(a > 3.0, a, b)",
    "convert": "a.astype(jnp.int32)",
    # structural
    "transpose": "a.T",
    "sin_transpose": "jnp.sin(a).T",
    "broadcast_in_dim": "lax.broadcast_in_dim(v, (8, 4), (0,))",
    "broadcast_to": "jnp.broadcast_to(r, (4, 8))",
    "expand_dims": "jnp.expand_dims(a, 0)",
    "reshape_singleton": "b.reshape(8, 1, 4)",
    "reshape_split": "b.reshape(4, 2, 4)",
    "reshape_merge": "b.reshape(32)",
    "reshape_bad": "c.reshape(32)",
    "squeeze": "jnp.squeeze(r.T.reshape(1, 4))",
    "flat_axes": "w * 2.0",
    # reductions
    "sum_0": "a.sum(0)",
    "sum_1": "a.sum(1)",
    "sum_all": "a.sum()",
    "max_0": "a.max(0)",
    "argmax": "lax.argmax(a, 1, jnp.int32)",
    # contractions
    "dot_free": "jnp.dot(b, jnp.ones((4, 3), jnp.float32))",
    "dot_contract_error": "jnp.dot(c, q)",
    "dot_out_sharding": "jnp.dot(c, q, out_sharding=P('x', None))",
    "dot_general_batch": "lax.dot_general(a, b, (((1,), (1,)), ((0,), (0,))))",
    # changing and setting the layout
    "reshard": "jax.sharding.reshard(a, P(None, 'x'))",
    "reshard_replicated": "jax.sharding.reshard(a, P())",
    "zeros": "jnp.zeros((8, 4), out_sharding=P('x'))",
    "normal": "jax.random.normal(jax.random.key(0), (8, 4), out_sharding=P('x', 'y'))",
    # transformations
    "grad": "jax.grad(lambda t: (jnp.sin(t) * 2.0).sum())(a)",
    "grad_dot": "jax.grad(lambda t: jnp.dot(t, q, out_sharding=P('x', None)).sum())(c)",
    "vmap": "jax.vmap(lambda t: t * 2.0 + 1.0)(a)",
    "vmap_sum": "jax.vmap(lambda t: t.sum())(b)",
    "grad_sum": "jax.grad(lambda t: t.sum(1).sum())(a)",
    "auto_axes": "jax.sharding.auto_axes(lambda t, u: t + u, out_sharding=P('x', None))(b, c)",
    "vmap_auto_axes": ("jax.vmap(jax.sharding.auto_axes(lambda t: t * 2.0, out_sharding=P('x')),"
                       " in_axes=1)(a)"),
    "grad_auto_axes": ("jax.grad(lambda t: jax.sharding.auto_axes(lambda u: u * 2.0, "
                       "out_sharding=P('x'))(t.sum(1)).sum())(a)"),
    # slicing, padding, indexing: a split dimension that changes size must stay divisible
    "slice_even": "lax.slice(a, (0, 0), (4, 4))",
    "slice_uneven": "lax.slice(a, (0, 0), (1, 4))",
    "dynamic_slice": "lax.dynamic_slice(a, (0, 0), (8, 2))",
    "dynamic_slice_uneven": "lax.dynamic_slice(a, (0, 0), (2, 4))",
    "pad_even": "lax.pad(a, 0.0, ((0, 0, 0), (1, 1, 0)))",
    "pad_uneven": "lax.pad(a, 0.0, ((1, 1, 0), (0, 0, 0)))",
    "dynamic_update_slice": "lax.dynamic_update_slice(a, a, (0, 0))",
    "dynamic_update_slice_mismatch": "lax.dynamic_update_slice(a, b, (0, 0))",
    "sort_free_axis": "jnp.sort(b, axis=1)",
    "sort_split_axis": "jnp.sort(a, axis=1)",
    "argsort": "jnp.argsort(b, axis=1)",
    "clamp": "lax.clamp(1.0, a, 5.0)",
    "take_unsplit_axis": "jnp.take(b, jnp.array([0, 2]), axis=1)",
    "take_split_axis": "jnp.take(a, jnp.array([0, 2]), axis=0)",
    "gather_batched": ("lax.gather(b, jnp.zeros((8, 1), jnp.int32), lax.GatherDimensionNumbers("
                       "offset_dims=(), collapsed_slice_dims=(1,), start_index_map=(1,), "
                       "operand_batching_dims=(0,), start_indices_batching_dims=(0,)), (1, 1))"),
    "scatter_unsplit_axis": "lax.scatter(c, jnp.array([[0]]), c[0][None], ROW_DNUMS)",
    "scatter_split_axis": "lax.scatter(a, jnp.array([[0]]), jnp.ones((1, 4)), ROW_DNUMS)",
    # operands whose type carries no sharding, under the mesh in context: unsplit over it
    "concatenate_untyped": "jnp.concatenate([a, jnp.zeros((8, 4))])",
    "where_untyped": "jnp.where(a > 3.0, a, jnp.zeros((8, 4)))",
    "where_scalar_predicate": "jnp.where(True, a, 1.0)",
    "stack": "jnp.stack([a, a])",
    "stack_inner": "jnp.stack([a, a], 1)",
    "stack_mismatch": "jnp.stack([a, b])",
    "stack_rows": "jnp.stack(b.reshape(2, 4, 4), 1)",
    "unstack": "lax.unstack(b, 1)[0]",
    "unstack_split_axis": "lax.unstack(b, 0)[0]",
    # with_sharding_constraint over Explicit axes asserts the layout the type already says
    "wsc_same": "lax.with_sharding_constraint(a, P('x', 'y'))",
    "wsc_other": "lax.with_sharding_constraint(a, P('x', None))",
    "wsc_unconstrained": "lax.with_sharding_constraint(a, P('x', P.UNCONSTRAINED))",
    "vmap_reshard": "jax.vmap(lambda t: jax.sharding.reshard(t, P()))(a)",
    "reshard_grad": "jax.grad(lambda t: jax.sharding.reshard(t, P(None, 'y')).sum())(a)",
    # shard_map's in_specs inferred from the arguments' types; its result typed by out_specs
    "shard_map": ("jax.shard_map(lambda t, u: lax.psum_scatter(jnp.dot(t, u), 'x', tiled=True),"
                  " out_specs=P('x', None))(c, q)"),
    # more rules: JAX's (``sharding_rule=`` of jax/_src/lax/*.py)
    "fft": "jnp.fft.fft(b.astype(jnp.complex64), axis=1).imag",  # (JSON has no complex)
    "fft_split_axis": "jnp.fft.fft(c.astype(jnp.complex64), axis=1).real",
    "rfft_indivisible": "jnp.fft.rfft(c, axis=1)",
    "top_k": "lax.top_k(b, 2)[1]",
    "top_k_split_axis": "lax.top_k(c, 2)[0]",
    "split": "lax.split(b, (1, 3), axis=1)[1]",
    "split_uneven": "lax.split(a, (1, 7), axis=0)[0]",
    "cummax": "lax.cummax(b, axis=1)",
    "sort_two_operands": "lax.sort((b, c), dimension=1, num_keys=1)[1]",
    "iota": "lax.broadcasted_iota(jnp.int32, (8, 4), 1, out_sharding=P('x', 'y'))",
    "rng_bit_generator": ("lax.rng_bit_generator(jnp.zeros(4, jnp.uint32), (8, 4), "
                          "out_sharding=P('x', None))[1]"),
    "conv": ("lax.conv_general_dilated(b.reshape(8, 1, 4), jnp.ones((2, 1, 3), jnp.float32), "
             "(1,), 'SAME')"),
    "conv_kernel_split": "lax.conv_general_dilated(b.reshape(8, 1, 4), KERNEL_SPLIT, (1,), 'SAME')",
    "conv_features_split": ("lax.conv_general_dilated(FEATURES_SPLIT, jnp.ones((2, 8, 1), "
                            "jnp.float32), (1,), 'SAME')"),
    # data-parallel gradient of unsplit weights: the cotangent of the weights is unsplit
    # (dot's transpose), relu's select and add_any keep the layouts
    "grad_data_parallel": ("jax.grad(lambda t: (jax.nn.relu(jnp.dot(b, t)) + jnp.dot(b, t))"
                           ".sum())(jnp.ones((4, 3), jnp.float32))"),
    # unreduced over 'y': reshard sums the summands
    "unreduced_reduce": "jax.sharding.reshard(U, P('x', None))",
    "unreduced_add": "jax.sharding.reshard(U + U, P('x', None))",
    "unreduced_add_mixed": "U + b",
    "unreduced_add_other_axes": "U + jax.device_put(a, P(None, None, unreduced={'x'}))",
    # JAX's unreduced/reduced rules: a product of a summand and the whole sum is a summand;
    # sums and structural primitives keep the sets; other primitives refuse unreduced
    # operands, and elementwise ones keep reduced operands reduced
    "unreduced_mul_reduced": "jax.sharding.reshard(U * R, P('x', None))",
    "unreduced_mul_split": "U * a",
    "unreduced_sub": "U - U",
    "unreduced_neg": "-U",
    "unreduced_integer_pow": "U ** 2",
    "unreduced_sum": "jax.sharding.reshard(U.sum(0), P())",
    "unreduced_convert_transpose": "jax.sharding.reshard(U.astype(jnp.float16).T, P(None, 'x'))",
    "dot_unreduced": "jax.sharding.reshard(DOT_UNREDUCED(c, q), P('x', None))",
    "dot_unreduced_other_axes": "jnp.dot(c, q, out_sharding=P(None, None, unreduced={'y'}))",
    "sum_unreduced": "jax.sharding.reshard(SUM_UNREDUCED(c), P())",
    "grad_reduced_weights": "jax.sharding.reshard(GRAD_W(W, XY), P())",
    "sum_unreduced_other_axes": "lax.reduce_sum(a, (0,), out_sharding=P(None, unreduced={'y'}))",
    "reduced_sin_scale": "jnp.sin(R) * 2.0",
    "reduced_add_split": "R + a",
    "reshard_to_reduced": "jax.sharding.reshard(a, P('x', None, reduced={'y'}))",
    "unreduced_to_reduced": "jax.sharding.reshard(U, P('x', None, reduced={'y'}))",
}

# Expressions whose repr (or error) is compared.
PRINTS = {
    "spec_unreduced": "P('x', None, unreduced={'y'})",
    "spec_reduced": "P('x', reduced={'y'})",
    "spec_only_unreduced": "P(unreduced={'y'})",
    "spec_canonical": "P(('x',), (), ['x', 'y'])",
    "spec_eq": ("(P('x', unreduced={'y'}) == P('x', unreduced={'y'}), "
                "P('x', unreduced={'y'}) == P('x'), "
                "hash(P('x', unreduced={'y'})) == hash(P('x', unreduced={'y'})))"),
    "spec_update": "P('x', None, unreduced={'y'}).update(unreduced=set())",
    "spec_not_a_set": "P('x', unreduced=['y'])",
    "spec_overlap": "P('x', unreduced={'x'})",
    "spec_both": "P(None, unreduced={'y'}, reduced={'y'})",
    "spec_index": "P('x', unreduced={'y'})[0]",
    "spec_iter": "list(P('x', unreduced={'y'}))",
    "spec_partitions": "P('x', unreduced={'y'}).partitions",
    "sharding_missing_axis": "NamedSharding(mesh, P('x', unreduced={'z'}))",
    "unreduced_sharding": "U.sharding",
    "unreduced_type": "str(jax.typeof(U))",
    "unreduced_repr": "U",
    "unreduced_shards": "[np.asarray(s.data).tolist() for s in U.addressable_shards]",
    "unreduced_index": "U.addressable_shards[0].index",
    "unreduced_value": "np.asarray(U)",
    "unreduced_replicated": "U.sharding.is_fully_replicated",
    "reduced_type": "(str(jax.typeof(R)), R.sharding, np.asarray(R))",
    "shape_dtype_struct_type": ("str(jax.typeof(jax.ShapeDtypeStruct((8, 4), jnp.float32, "
                                "sharding=jax.sharding.NamedSharding(mesh, P('x')))))"),
    "structural_types": ("[[str(t) for t in jax.make_jaxpr(STRUCTURAL)(x).out_avals] "
                         "for x in (U, R)]"),
    "reduced_elementwise_types": ("[str(t) for t in jax.make_jaxpr(lambda r: (jnp.exp(r), r * r, "
                                  "lax.dynamic_slice(r, (0, 0), (8, 2))))(R).out_avals]"),
    "unreduced_types": ("[[str(jax.typeof(o)) for o in f(U, c, q)] for f in (UR_RESULTS, "
                        "jax.jit(UR_RESULTS))]"),
    # a contraction over 'x' left unreduced has no all-reduce; reduced afterwards, one
    "dot_unreduced_collectives": ("(collectives(DOT_UNREDUCED, c, q), collectives(lambda t, u: "
                                  "jax.sharding.reshard(DOT_UNREDUCED(t, u), P()), c, q), "
                                  "collectives(SUM_UNREDUCED, c), collectives(GRAD_W, W, XY))"),
    # jit of a block over another abstract mesh of the same devices (eagerly JAX refuses
    # ``mul`` there, naming the source line)
    "abstract_mesh_sharding": "jax.jit(on_mesh8)(a).sharding",
    # a jit over host data: its results are named over the mesh in context (Explicit), not
    # over the Auto view the auto_axes body's constraint has of it
    "jit_auto_axes_host": ("jax.jit(lambda t: jax.sharding.auto_axes(lambda u: u * 2.0, "
                           "out_sharding=P('x'))(t))(np.arange(8.0, dtype=np.float32)).sharding"),
    "abstract_mesh_value": "(str(jax.typeof(jax.jit(on_mesh8)(a))), np.asarray(jax.jit(on_mesh8)(a)))",
    "auto_mesh_specs": "auto_constraint()",
    # shard_map over all-Explicit axes: in_specs must say what the arguments' types say
    "shard_map_specs_mismatch": ("jax.shard_map(lambda t: t * 2, in_specs=P('x', None), "
                                 "out_specs=P('x', None))(c)"),
    "shard_map_specs_agree": ("np.asarray(jax.shard_map(lambda t: t * 2, in_specs=P(None, 'x'),"
                              " out_specs=P(None, 'x'))(c))"),
    # a mesh over fewer devices than given takes the first ones
    "make_mesh_fewer": "jax.make_mesh((2,), ('i',), devices=DEV).devices",
    # under the mesh, results computed from host data that in_shardings lays out are
    # replicated over it, typed with no mesh axis (what JAX's types say)
    "in_shardings_host_data": ("[(str(jax.typeof(o)), o.sharding.spec) for o in "
                               "IN_SHARDED(np.ones(8, np.float32), np.ones(3, np.float32))]"),
    "in_shardings_committed_mismatch": "IN_SHARDED(jnp.ones(8), jnp.ones(3))",
}

# Expressions whose jaxpr text is compared too.
JAXPRS = {
    "chain": "lambda t: (jnp.sin(t).T * 2.0).sum(0)",
    "dot": "lambda t, u: jnp.dot(t, u, out_sharding=P('x', None))",
    "merge": "lambda t, u: t * u + 1.0",
    "reshard": "lambda t: jax.sharding.reshard(t, P('x', None))",
    "stack": "lambda t: jnp.stack([t, t], 1)",
    "wsc_same": "lambda t: lax.with_sharding_constraint(t, P('x', 'y'))",
    "dot_unreduced": "lambda t, u: DOT_UNREDUCED(t, u).sum(0)",
    # a jit equation records the mesh in context (``ctx_mesh``), also when differentiated
    "jit_ctx_mesh": "lambda t: jax.jit(lambda u: jax.sharding.reshard(u * 2, P('x', None)))(t)",
    "jvp_jit_ctx_mesh": "lambda t: jax.jvp(jax.jit(jnp.sin), (t,), (t,))",
    "sum_unreduced": "lambda t: lax.reduce_sum(t, (0,), out_sharding=P('y', unreduced={'x'}))",
}
JAXPR_ARGS = {"chain": "(a,)", "dot": "(c, q)", "merge": "(a, b)", "reshard": "(a,)",
              "stack": "(a,)", "wsc_same": "(a,)", "dot_unreduced": "(c, q)",
              "jit_ctx_mesh": "(a,)", "jvp_jit_ctx_mesh": "(a,)",
              "sum_unreduced": "(a,)"}

DRIVER = r"""
import json, sys
import numpy as np
import jax
jax.config.update('jax_num_cpu_devices', 8)
import jax.numpy as jnp
from jax import lax
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
prelude, cases, jaxprs, jaxpr_args, names, prints = (sys.argv[1], json.loads(sys.argv[2]),
    json.loads(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5], json.loads(sys.argv[6]))
ns = dict(np=np, jax=jax, jnp=jnp, lax=lax, P=P, AxisType=AxisType, DEV=jax.devices())
exec(prelude, ns)
""" + """
def describe(thunk):
    try:
        out = thunk()
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}
    return {"type": str(jax.typeof(out)), "value": np.asarray(out).tolist()}

out = {}
for name, code in cases.items():
    f = eval(f"lambda {names}: {code}", ns)
    out[name] = {"eager": describe(lambda: f(*ns["ARGS"])),
                 "jit": describe(lambda: jax.jit(f)(*ns["ARGS"]))}
for name, code in jaxprs.items():
    out["jaxpr/" + name] = str(jax.make_jaxpr(eval(code, ns))(*eval(jaxpr_args[name], ns)))
for name, code in prints.items():
    try:
        out["print/" + name] = repr(eval(code, ns))
    except Exception as e:
        out["print/" + name] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


def _namespace() -> dict:
    ns = dict(np=np, jax=jax, jnp=jnp, lax=lax, P=P, AxisType=AxisType, DEV=DEVICES)
    exec(PRELUDE, ns)
    return ns


def _describe(thunk) -> dict:
    try:
        out = thunk()
    except Exception as e:  # noqa: BLE001  (the class and text are what is compared)
        return {"error": f"{type(e).__name__}: {e}"}
    return {"type": str(jax.typeof(out)), "value": np.asarray(out).tolist(), "out": out}


@pytest.fixture(scope="module")
def oracle() -> dict:
    """Every record's type or error, and value, as JAX 0.10.2 gives them on 8 CPU devices."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("the JAX oracle is not installed")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", DRIVER, PRELUDE, json.dumps(CASES),
                           json.dumps(JAXPRS), json.dumps(JAXPR_ARGS), NAMES,
                           json.dumps(PRINTS)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def ns() -> dict:
    namespace = _namespace()
    yield namespace
    namespace["context"].__exit__(None, None, None)  # set_mesh outside a block stays set


# NumPy's value of some records, from the same data.
NUMPY = {
    "sin": lambda h: np.sin(h["a"]),
    "add_merge": lambda h: h["a"] + h["b"],
    "add_broadcast": lambda h: h["r"] + h["s"],
    "transpose": lambda h: h["a"].T,
    "reshape_split": lambda h: h["b"].reshape(4, 2, 4),
    "sum_0": lambda h: h["a"].sum(0),
    "dot_out_sharding": lambda h: h["c"] @ h["q"],
    "grad": lambda h: 2 * np.cos(h["a"]),
    "grad_dot": lambda h: np.ones((8, 16), np.float32) @ h["q"].T,
    "vmap_sum": lambda h: h["b"].sum(1),
    "auto_axes": lambda h: h["b"] + h["c"],
    "vmap_auto_axes": lambda h: 2 * h["a"].T,
    "grad_auto_axes": lambda h: np.full((8, 4), 2.0, np.float32),
    "shard_map": lambda h: h["c"] @ h["q"],
    "unreduced_mul_reduced": lambda h: h["a"] * h["a"],
    "dot_unreduced": lambda h: h["c"] @ h["q"],
    "sum_unreduced": lambda h: h["c"].sum(1),
}


# JAX's eager lax.slice computes the result shape with NumPy integers, which its message shows
# as ``(np.int64(1), np.int64(4))`` where jaxkit shows ``(1, 4)``: errors are compared with
# NumPy integer reprs written as plain integers.
def _plain_ints(text: str) -> str:
    return re.sub(r"np\.int(?:32|64)\((-?\d+)\)", r"\1", text)


@pytest.mark.parametrize("mode", ["eager", "jit"])
@pytest.mark.parametrize("name", list(CASES))
def test_type_or_error_matches_jax(oracle, ns, name, mode):
    f = eval(f"lambda {NAMES}: {CASES[name]}", ns)
    got = _describe((lambda: f(*ns["ARGS"])) if mode == "eager" else
                    (lambda: jax.jit(f)(*ns["ARGS"])))
    want = oracle[name][mode]
    if "error" in want:
        assert got.get("error") == _plain_ints(want["error"])
        return
    assert "error" not in got, got["error"]
    assert got["type"] == want["type"]
    np.testing.assert_allclose(np.asarray(got["value"]), np.asarray(want["value"]),
                               rtol=1e-5, atol=1e-5)
    if name in NUMPY:
        host = {k: np.asarray(ns[k]) for k in NAMES.split(", ")}
        np.testing.assert_allclose(np.asarray(got["out"]), NUMPY[name](host), rtol=1e-5)


@pytest.mark.parametrize("name", list(JAXPRS))
def test_jaxpr_prints_sharded_types_as_jax(oracle, ns, name):
    text = str(jax.make_jaxpr(eval(JAXPRS[name], ns))(*eval(JAXPR_ARGS[name], ns)))
    assert text == oracle["jaxpr/" + name]


@pytest.mark.parametrize("name", list(PRINTS))
def test_prints_as_jax(oracle, ns, name):
    try:
        got = repr(eval(PRINTS[name], ns))
    except Exception as e:  # noqa: BLE001  (the class and text are what is compared)
        got = f"{type(e).__name__}: {e}"
    assert got == oracle["print/" + name]


def test_type_sharding_is_a_named_sharding_over_the_abstract_mesh(ns):
    t = jax.typeof(ns["a"])
    assert str(t) == "float32[8@x,4@y]" and repr(t) == "ShapedArray(float32[8@x,4@y])"
    assert t.str_short() == "f32[8@x,4@y]"
    assert isinstance(t.sharding, NamedSharding) and t.sharding.spec == P("x", "y")
    assert t.sharding.mesh == ns["mesh"].abstract_mesh
    assert str(jax.typeof(ns["w"])) == "float32[8@(x,y),4]"
    # the concrete layout is the array's, on the concrete mesh
    assert ns["a"].sharding == NamedSharding(ns["mesh"], P("x", "y"))


def test_jit_result_is_laid_out_as_its_type(ns):
    out = jax.jit(lambda t, u: jnp.dot(t, u, out_sharding=P("x", None)))(ns["c"], ns["q"])
    assert out.sharding == NamedSharding(ns["mesh"], P("x", None))
    np.testing.assert_allclose(np.asarray(out), np.asarray(ns["c"]) @ np.asarray(ns["q"]))
    inside = []
    jax.jit(lambda t: inside.append(str(jax.typeof(t))) or t)(ns["a"])
    assert inside == ["float32[8@x,4@y]"]


def test_primitive_without_a_sharding_rule_raises_not_implemented(ns):
    window = lambda t: lax.reduce_window(t, 0.0, lax.add, (1, 2), (1, 1), "VALID")  # noqa: E731
    with pytest.raises(NotImplementedError,
                       match="sharding rule for 'reduce_window_sum' is not implemented"):
        window(ns["a"])
    # the same primitive on a value whose type carries no sharding is fine
    out = window(jax.sharding.reshard(ns["a"], P()))
    host = np.asarray(ns["a"])
    np.testing.assert_allclose(np.asarray(out), host[:, :-1] + host[:, 1:])


def test_unreduced_operand_without_an_unreduced_rule_raises_not_implemented(ns):
    with pytest.raises(NotImplementedError, match="unreduced rule for sin is not implemented"):
        jnp.sin(ns["U"])
    np.testing.assert_array_equal(jax.device_get(jax.sharding.reshard(ns["U"], P("x"))),
                                  np.asarray(ns["a"]))


def test_auto_axes_drops_the_axes_from_types_inside(ns):
    seen = []

    @jax.sharding.auto_axes
    def add(t, u):
        seen.append((str(jax.sharding.get_abstract_mesh().axis_types), str(jax.typeof(t))))
        return t + u

    out = add(ns["b"], ns["c"], out_sharding=P("x", None))
    assert seen == [("(Auto, Auto)", "float32[8,4]")]
    assert str(jax.typeof(out)) == "float32[8@x,4]"
    np.testing.assert_allclose(np.asarray(out), 2 * np.asarray(ns["b"]))


def test_explicit_axes_types_the_block_over_an_auto_mesh():
    auto = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2, devices=DEVICES)
    seen = []

    @jax.sharding.explicit_axes
    def g(t):
        seen.append(str(jax.typeof(t)))
        z = t * 2
        seen.append(str(jax.typeof(z)))
        return z

    with jax.sharding.use_mesh(auto):
        x = jax.device_put(np.arange(16.0, dtype=np.float32).reshape(4, 4), P("x", "y"))
        out = jax.jit(lambda t: g(jnp.sin(t), in_sharding=P("x", "y")) + 1)(x)
    assert seen == ["float32[4@x,4@y]", "float32[4@x,4@y]"]
    assert str(jax.typeof(out)) == "float32[4,4]"
    np.testing.assert_allclose(np.asarray(out), 2 * np.sin(np.arange(16.0)).reshape(4, 4) + 1,
                               rtol=1e-6)


def test_auto_mesh_arrays_carry_no_sharding_in_their_type():
    auto = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2, devices=DEVICES)
    x = jax.device_put(np.ones((8, 4), np.float32), NamedSharding(auto, P("x", "y")))
    assert str(jax.typeof(x)) == "float32[8,4]"
    assert "a:f32[8,4]" in str(jax.make_jaxpr(lambda t: t.T)(x))
