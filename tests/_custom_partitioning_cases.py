"""custom_partitioning cases run the same way on jaxkit (in the test process) and on the JAX
oracle (in a subprocess with 8 CPU devices): each builds a partitioned call over an 8-device
mesh and reports what can be compared between the two: the lowered custom call (its
``backend_config`` key left out), the shapes and shardings ``partition`` was called with, the
collectives in the compiled per-device program, the result's sharding and its values."""
import json
import re
import sys

import numpy as np

COLLECTIVES = ("all-gather", "all-reduce", "all-to-all", "collective-permute",
               "reduce-scatter", "dynamic-slice")


def _summary(J, fn, args, calls):
    jitted = J.jit(fn)
    lowered = jitted.lower(*args).as_text()
    custom = [re.sub(r'backend_config = "[^"]*"', "backend_config = KEY", line.strip())
              for line in lowered.splitlines() if "CustomSPMDPartitioning" in line]
    calls.clear()  # what partition sees while this program compiles
    hlo = jitted.lower(*args).compile().as_text()
    out = jitted(*args)
    leaves = out if isinstance(out, tuple) else (out,)
    return {"custom_call": custom, "partition_calls": sorted(set(calls)),
            "collectives": sorted({c for c in COLLECTIVES if f" {c}(" in hlo}),
            "shardings": [repr(o.sharding) for o in leaves],
            "values": [np.asarray(o).round(4).tolist() for o in leaves]}


def run_cases(J, jnp, lax, cp, devices) -> dict:
    """Every case's summary, on the library ``J`` (jax or jaxkit) over ``devices``."""
    NamedSharding, P = J.sharding.NamedSharding, J.sharding.PartitionSpec
    auto = J.sharding.AxisType.Auto
    mesh1 = J.make_mesh((8,), ("x",), devices=devices, axis_types=(auto,))
    mesh2 = J.make_mesh((4, 2), ("x", "y"), devices=devices, axis_types=(auto, auto))
    calls: list = []

    def put(value, mesh, *spec):
        return J.device_put(np.asarray(value, np.float32), NamedSharding(mesh, P(*spec)))

    def record(*shapes):
        calls.append(repr(shapes))

    results = {}

    # rows: each row on its own device, the rule keeps rows split and columns whole
    def rows_fn(x):
        return jnp.sin(x) + x.sum(axis=-1, keepdims=True)

    def rows_partition(mesh, arg_shapes, result_shape):
        record(arg_shapes, result_shape)
        s = arg_shapes[0].sharding
        return mesh, rows_fn, s, (s,)

    rows = cp.custom_partitioning(rows_fn)
    rows.def_partition(rows_partition, sharding_rule="i j -> i j",
                       need_replication_factors=("j",))
    x = np.arange(32.0).reshape(8, 4) / 7
    results["rows"] = _summary(J, rows, [put(x, mesh1, "x")], calls)

    # the same rule given as a callable of the mesh and the MLIR types
    rows_callable = cp.custom_partitioning(rows_fn)
    rows_callable.def_partition(
        rows_partition,
        sharding_rule=lambda mesh, ops, res: ("i j -> i j", {"need_replication_factors": ("j",)}))
    results["rule_callable"] = _summary(J, rows_callable, [put(x, mesh1, "x")], calls)

    # matmul over a contracted dimension split on "x": partial products summed with psum
    def mm_partition(mesh, arg_shapes, result_shape):
        record(arg_shapes, result_shape)
        a = NamedSharding(mesh, P(None, "x"))
        b = NamedSharding(mesh, P("x", None))
        return (mesh, lambda u, v: lax.psum(u @ v, "x"), NamedSharding(mesh, P()), (a, b))

    mm = cp.custom_partitioning(lambda u, v: u @ v)
    mm.def_partition(mm_partition, sharding_rule="i j, j k -> i k", reduction_factors=("j",))
    a = np.arange(128.0).reshape(8, 16) / 100
    b = np.arange(64.0).reshape(16, 4) / 50
    results["matmul_psum"] = _summary(J, mm, [put(a, mesh2, None, "x"), put(b, mesh2, "x")],
                                      calls)

    # leading batch dimensions (...) split, the last one gathered: cumsum needs it whole
    def scan_partition(mesh, arg_shapes, result_shape):
        record(arg_shapes, result_shape)
        spec = arg_shapes[0].sharding.spec
        s = NamedSharding(mesh, P(*spec[:-1], None))
        return mesh, lambda v: jnp.cumsum(v, axis=-1), s, (s,)

    scan = cp.custom_partitioning(lambda v: jnp.cumsum(v, axis=-1))
    scan.def_partition(scan_partition, sharding_rule="... i -> ... i")
    c = np.arange(128.0).reshape(2, 4, 16) / 10
    results["batching_gather"] = _summary(J, scan, [put(c, mesh2, None, "x", "y")], calls)

    # a static argument and two results (a tuple shape for XLA)
    def two_partition(k, mesh, arg_shapes, result_shape):
        record(k, arg_shapes, result_shape)
        s = arg_shapes[0].sharding
        return mesh, lambda v: (v * k, v + 1), (s, s), (s,)

    two = cp.custom_partitioning(lambda v, k: (v * k, v + 1), static_argnums=(1,))
    two.def_partition(two_partition, sharding_rule="i j -> i j, i j")
    results["static_two_results"] = _summary(
        J, lambda v: two(v, 3.0), [put(x, mesh2, "x", "y")], calls)

    # a compound factor: rows of x are pairs of rows of the result
    def split_partition(mesh, arg_shapes, result_shape):
        record(arg_shapes, result_shape)
        return (mesh, lambda v: v.reshape(v.shape[0] // 2, 2, v.shape[1]),
                NamedSharding(mesh, P("x", None, None)), (NamedSharding(mesh, P("x", None)),))

    split = cp.custom_partitioning(lambda v: v.reshape(8, 2, 4))
    split.def_partition(split_partition, sharding_rule=cp.SdyShardingRule(
        (cp.ArrayMapping(cp.CompoundFactor("i", "j"), "k"),),
        (cp.ArrayMapping("i", "j", "k"),)))
    d = np.arange(64.0).reshape(16, 4)
    results["compound_factor"] = _summary(J, split, [put(d, mesh1, "x")], calls)

    # decode_shardings=False: partition sees XLA's shardings as GSPMDShardings
    def raw_partition(mesh, arg_shapes, result_shape):
        record(arg_shapes, result_shape, type(arg_shapes[0].sharding).__name__)
        s = arg_shapes[0].sharding
        return mesh, jnp.sin, s, (s,)

    raw = cp.custom_partitioning(jnp.sin)
    raw.def_partition(raw_partition, decode_shardings=False, sharding_rule="i j -> i j")
    results["undecoded"] = _summary(J, raw, [put(x, mesh2, "x", "y")], calls)
    return results


if __name__ == "__main__":  # the JAX oracle: python _custom_partitioning_cases.py OUT.json
    import jax
    import jax.numpy as jjnp
    from jax.experimental import custom_partitioning as jcp
    out = run_cases(jax, jjnp, jax.lax, jcp, jax.devices())
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)
