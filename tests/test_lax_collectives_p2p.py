"""pbroadcast, ragged_all_to_all, psend/precv and pcast under pmap, shard_map and vmap with an
axis name, against JAX 0.10.2 run on 8 CPU devices in a subprocess (the oracle needs
``XLA_FLAGS`` set before its backend starts, which this process may already have done).

Where JAX on CPU gives no value the reference is stated: JAX has no CPU lowering for
``pbroadcast`` (XLA:CPU lacks collective-broadcast), so its values come from the equivalent
JAX's docstring gives (a psum of the value masked to the source index), run by JAX under
pmap and shard_map; XLA:CPU lacks ragged-all-to-all, so ``ragged_all_to_all`` is checked
against JAX's docstring example and a NumPy model of its docstring semantics. Jaxpr
equations and error classes (and texts where they are JAX's) are JAX's.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jaxkit
from jaxkit import lax
from jaxkit.api import grad, jvp
from jaxkit.interpreters import batching
from jaxkit.runtime import multi_device
from jaxkit.sharding import AxisType, PartitionSpec as P
from jaxkit.transforms.pmap import pmap
from jaxkit.transforms.vmap import vmap

DEVICES = multi_device.add_cpu_backend("spmd8", 8).devices
N = 8
X = np.arange(N * 3, dtype=np.float32).reshape(N, 3) - 5.0
C = np.array([1.0, -2.0, 0.5], np.float32)

ORACLE = textwrap.dedent("""
    import json, os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import numpy as np, jax, jax.numpy as jnp
    from jax import lax
    from jax.sharding import PartitionSpec as P, AxisType
    mesh = jax.make_mesh((8,), ("i",), axis_types=(AxisType.Auto,))
    X = np.arange(24, dtype=np.float32).reshape(8, 3) - 5.0
    C = np.array([1.0, -2.0, 0.5], np.float32)
    out = {}

    def sm(f, ins=P("i")):
        return jax.shard_map(f, mesh=mesh, in_specs=ins, out_specs=P("i"))

    def masked(v, source):  # pbroadcast as JAX's docstring writes it
        return lax.psum(jnp.where(lax.axis_index("i") == source, v, jnp.zeros_like(v)), "i")

    def error(fn):
        try:
            fn()
        except Exception as e:
            return [type(e).__name__, str(e)]
        return None

    def eqns(fn, *args, name):
        text = str(jax.make_jaxpr(fn)(*args))
        return [l.split("= ", 1)[1].strip() for l in text.splitlines() if name + "[" in l]

    for s in (0, 5):
        out[f"vmap{s}"] = np.asarray(
            jax.vmap(lambda v: lax.pbroadcast(v, "i", s), axis_name="i")(X)).tolist()
        out[f"pmap{s}"] = np.asarray(jax.pmap(lambda v: masked(v, s), "i")(X)).tolist()
        out[f"shmap{s}"] = np.asarray(sm(lambda v: masked(v, s))(X)).tolist()
        out[f"pmap_grad{s}"] = np.asarray(jax.pmap(jax.grad(
            lambda v: (masked(v, s) * C).sum()), "i")(X)).tolist()
    out["pbroadcast_cpu"] = error(lambda: jax.pmap(lambda v: lax.pbroadcast(v, "i", 2), "i")(X))
    out["pbroadcast_eqn"] = eqns(sm(lambda v: lax.pbroadcast(v, "i", 2)), X, name="pbroadcast")
    out["pbroadcast_eqn_tuple"] = eqns(sm(lambda v: lax.pbroadcast(v, ("i",), 3)), X,
                                       name="pbroadcast")
    out["pbroadcast_jit_unbound"] = error(lambda: jax.jit(lambda v: lax.pbroadcast(v, "i", 0))(X))

    i32 = np.zeros(8, np.int32)
    def ragged(v, o, a, b, c, d):
        return lax.ragged_all_to_all(v, o, a, b, c, d, axis_name="i")
    out["ragged_eqn"] = eqns(sm(ragged), X, X, i32, i32, i32, i32, name="ragged_all_to_all")
    out["ragged_eager"] = error(lambda: ragged(X, X, i32, i32, i32, i32))
    out["ragged_jit_unbound"] = error(lambda: jax.jit(ragged)(X, X, i32, i32, i32, i32))
    out["ragged_float_offsets"] = error(lambda: jax.make_jaxpr(sm(ragged))(
        X, X, i32.astype(np.float32), i32, i32, i32))
    out["ragged_rank2_sizes"] = error(lambda: jax.make_jaxpr(sm(ragged, ins=(
        P("i"), P("i"), P("i"), P("i", None), P("i"), P("i"))))(
        X, X, i32, np.zeros((8, 2), np.int32), i32, i32))
    out["ragged_vmap_named"] = error(lambda: jax.vmap(ragged, axis_name="i")(
        X, X, *[np.zeros((8, 8), np.int32)] * 4))

    perm = [(0, 1), (1, 2)]
    sds = jax.ShapeDtypeStruct((1, 3), np.float32)
    def send_recv(v):
        return lax.precv(lax.psend(v, "i", perm), sds, "i", perm)
    out["p2p_eqns"] = (eqns(sm(send_recv), X, name="psend")
                       + eqns(sm(send_recv), X, name="precv"))
    out["p2p_types"] = [l.split("=")[0].strip() for l in str(jax.make_jaxpr(sm(send_recv))(X))
                        .splitlines() if "psend[" in l]
    out["psend_unused_kept"] = eqns(sm(lambda v: (lax.psend(v, "i", perm), v)[1]), X,
                                    name="psend")
    out["psend_pmap"] = error(lambda: jax.pmap(lambda v: (lax.psend(v, "i", perm), v)[1], "i")(X))
    out["psend_eager"] = error(lambda: lax.psend(X, "i", perm))
    out["precv_jit"] = error(lambda: jax.jit(lambda: lax.precv(lax.create_token(), sds, "i",
                                                                perm))())
    out["psend_jvp"] = error(lambda: jax.jvp(sm(lambda v: (lax.psend(v, "i", perm), v)[1]),
                                             (X,), (X,)))

    out["pcast_pmap"] = np.asarray(jax.pmap(lambda v: lax.pcast(v, "i", to="varying"), "i")(X)
                                   ).tolist()
    out["pcast_pmap_reduced"] = np.asarray(jax.pmap(lambda v: lax.pcast(v, "i", to="reduced"), "i")(
        X)).tolist()
    out["pcast_pmap_eqns"] = eqns(jax.pmap(lambda v: lax.pcast(v, "i", to="varying"), "i"), X,
                                  name="pvary")
    out["pcast_bad_to"] = error(lambda: jax.pmap(lambda v: lax.pcast(v, "i", to="invariant"), "i")(X))
    out["pcast_set"] = error(lambda: jax.pmap(lambda v: lax.pcast(v, {"i"}, to="varying"), "i")(X))
    out["pcast_empty"] = np.asarray(lax.pcast(X, (), to="bogus")).tolist()
    out["pcast_jit_unbound"] = error(lambda: jax.jit(lambda v: lax.pcast(v, "i", to="varying"))(X))
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def oracle():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", ORACLE], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def mesh(n=N):
    return jaxkit.make_mesh((n,), ("i",), devices=DEVICES[:n], axis_types=(AxisType.Auto,))


def sm(f, in_specs=P("i"), n=N):
    return jaxkit.shard_map(f, mesh=mesh(n), in_specs=in_specs, out_specs=P("i"))


def ppmap(f, n=N):
    return pmap(f, "i", backend="spmd8", devices=DEVICES[:n])


def eqns(fn, *args, name):
    text = str(jaxkit.make_jaxpr(fn)(*args))
    return [line.split("= ", 1)[1].strip() for line in text.splitlines() if name + "[" in line]


# ---- pbroadcast -----------------------------------------------------------------------------


@pytest.mark.parametrize("source", [0, 5])
def test_pbroadcast_values_match_jax(oracle, source):
    want = np.asarray(oracle[f"vmap{source}"], np.float32)
    np.testing.assert_array_equal(want, np.broadcast_to(X[source], X.shape))
    with batching.checking_rules():
        got_vmap = vmap(lambda v: lax.pbroadcast(v, "i", source), axis_name="i")(X)
    np.testing.assert_array_equal(np.asarray(got_vmap), want)
    got_pmap = ppmap(lambda v: lax.pbroadcast(v, "i", source))(X)
    np.testing.assert_array_equal(np.asarray(got_pmap), np.asarray(oracle[f"pmap{source}"]))
    got_shmap = sm(lambda v: lax.pbroadcast(v, "i", source))(X)
    np.testing.assert_array_equal(np.asarray(got_shmap), np.asarray(oracle[f"shmap{source}"]))
    # vmap with the batch axis elsewhere, and a pytree
    got = vmap(lambda t: lax.pbroadcast(t, "i", source), in_axes=1, out_axes=1,
               axis_name="i")({"a": X.T})
    np.testing.assert_array_equal(np.asarray(got["a"]), want.T)


def test_pbroadcast_exact_for_integers_and_bools_and_jit():
    ints = np.arange(N * 2, dtype=np.int32).reshape(N, 2) * -3
    bools = (np.arange(N * 2).reshape(N, 2) % 3) == 0
    got = ppmap(lambda a, b: lax.pbroadcast((a, b), "i", 3))(ints, bools)
    np.testing.assert_array_equal(np.asarray(got[0]), np.broadcast_to(ints[3], ints.shape))
    np.testing.assert_array_equal(np.asarray(got[1]), np.broadcast_to(bools[3], bools.shape))
    jitted = jaxkit.jit(sm(lambda v: lax.pbroadcast(v, "i", 7)))
    np.testing.assert_array_equal(np.asarray(jitted(X)), np.broadcast_to(X[7], X.shape))
    # pmap inside jit runs the body as a vmap: the batching rule
    inner = jaxkit.jit(ppmap(lambda v: lax.pbroadcast(v, "i", 1)))
    np.testing.assert_array_equal(np.asarray(inner(X)), np.broadcast_to(X[1], X.shape))


@pytest.mark.parametrize("source", [0, 5])
def test_pbroadcast_gradients(oracle, source):
    def loss(v):
        return lax.reduce_sum(lax.mul(lax.pbroadcast(v, "i", source), C), (0,))

    want = np.asarray(oracle[f"pmap_grad{source}"], np.float32)
    expected = np.zeros_like(X)
    expected[source] = N * C  # every index received the source's value
    np.testing.assert_allclose(want, expected)
    np.testing.assert_allclose(np.asarray(ppmap(grad(loss))(X)), want)
    np.testing.assert_allclose(np.asarray(vmap(grad(loss), axis_name="i")(X)), want)
    np.testing.assert_allclose(np.asarray(grad(lambda x: lax.reduce_sum(
        vmap(loss, axis_name="i")(x), (0,)))(X)), want)
    _, tangent = jvp(ppmap(lambda v: lax.pbroadcast(v, "i", source)), (X,), (2 * X,))
    np.testing.assert_allclose(np.asarray(tangent), np.broadcast_to(2 * X[source], X.shape))


def test_pbroadcast_jaxpr_and_errors(oracle):
    assert eqns(sm(lambda v: lax.pbroadcast(v, "i", 2)), X, name="pbroadcast") == \
        oracle["pbroadcast_eqn"] == ["pbroadcast[axis_name=i source=2] c"]
    assert eqns(sm(lambda v: lax.pbroadcast(v, ("i",), 3)), X, name="pbroadcast") == \
        oracle["pbroadcast_eqn_tuple"]
    # Unbound names: JAX raises NameError under jit (eagerly it has no evaluation rule).
    assert oracle["pbroadcast_jit_unbound"][0] == "NameError"
    with pytest.raises(NameError, match="unbound axis name: i"):
        jaxkit.jit(lambda v: lax.pbroadcast(v, "i", 0))(X)
    with pytest.raises(NameError, match="unbound axis name: i"):
        lax.pbroadcast(X, "i", 0)
    # JAX on CPU cannot lower it at all; jaxkit lowers it to an all_gather.
    assert oracle["pbroadcast_cpu"][0] == "NotImplementedError"
    with pytest.raises(ValueError, match="source 9 is out of range"):
        vmap(lambda v: lax.pbroadcast(v, "i", 9), axis_name="i")(X)
    with pytest.raises(NotImplementedError, match="several axes"):
        vmap(vmap(lambda v: lax.pbroadcast(v, ("i", "j"), 0), axis_name="j"),
             axis_name="i")(X.reshape(2, 4, 3))


# ---- ragged_all_to_all -----------------------------------------------------------------------

# JAX's docstring example, over an axis of size 2 (one row per axis index).
DOC_ARGS = (np.array([[1, 2, 2], [3, 4, 0]], np.float32), np.zeros((2, 4), np.float32),
            np.array([[0, 1], [0, 1]], np.int32), np.array([[1, 2], [1, 1]], np.int32),
            np.array([[0, 0], [1, 2]], np.int32), np.array([[1, 1], [2, 1]], np.int32))
DOC_RESULT = np.array([[1, 3, 0, 0], [2, 2, 4, 0]], np.float32)


def ragged(*args, **kw):
    return lax.ragged_all_to_all(*args, axis_name="i", **kw)


def ragged_reference(operand, output, input_offsets, send_sizes, output_offsets, *_):
    """JAX's docstring semantics on stacked per-index arrays (index d at row d)."""
    n, k = input_offsets.shape
    s = k // n
    result = output.copy()
    for src in range(n):
        for i in range(k):
            dst, start, size = i // s, input_offsets[src, i], send_sizes[src, i]
            at = output_offsets[src, i]
            result[dst, at:at + size] = operand[src, start:start + size]
    return result


def random_ragged(n, per_dest=2, seed=0, trailing=(2,)):
    """Consistent tables: each index sends ``per_dest`` runs of its operand (disjoint, in a
    shuffled order) to every index, which packs what it receives contiguously from row 1 (row
    0 and the last rows keep their value)."""
    rng = np.random.default_rng(seed)
    k = n * per_dest
    rows_out = 2 * k + 3
    send = rng.integers(0, 3, size=(n, k)).astype(np.int32)
    # receiver d gets from sender p the slices p*s..: recv_sizes[d, p*s+j] = send[p, d*s+j]
    recv = np.zeros_like(send)
    out_off = np.zeros_like(send)
    for d in range(n):
        at = 1
        for p in range(n):
            for j in range(per_dest):
                size = send[p, d * per_dest + j]
                recv[d, p * per_dest + j] = size
                out_off[p, d * per_dest + j] = at
                at += size
    rows_in = 2 * k + 1
    in_off = np.zeros_like(send)
    for p in range(n):
        at = 0
        for i in rng.permutation(k):
            in_off[p, i] = at
            at += send[p, i]
    operand = rng.normal(size=(n, rows_in, *trailing)).astype(np.float32)
    output = rng.normal(size=(n, rows_out, *trailing)).astype(np.float32)
    return operand, output, in_off, send, out_off, recv


def test_ragged_docstring_example_everywhere():
    np.testing.assert_array_equal(ragged_reference(*DOC_ARGS), DOC_RESULT)
    with batching.checking_rules():
        np.testing.assert_array_equal(np.asarray(vmap(ragged, axis_name="i")(*DOC_ARGS)),
                                      DOC_RESULT)
    np.testing.assert_array_equal(np.asarray(ppmap(ragged, n=2)(*DOC_ARGS)), DOC_RESULT)
    squeezed = sm(lambda *a: lax.expand_dims(ragged(*(lax.squeeze(b, (0,)) for b in a)), (0,)),
                  n=2)
    np.testing.assert_array_equal(np.asarray(squeezed(*DOC_ARGS)), DOC_RESULT)


@pytest.mark.parametrize("seed", [0, 1])
def test_ragged_random_exchanges(seed):
    args = random_ragged(4, seed=seed)
    want = ragged_reference(*args)
    np.testing.assert_allclose(np.asarray(ppmap(ragged, n=4)(*args)), want)
    np.testing.assert_allclose(np.asarray(vmap(ragged, axis_name="i")(*args)), want)
    np.testing.assert_allclose(np.asarray(jaxkit.jit(ppmap(ragged, n=4))(*args)), want)
    # tiled over shard_map: each device's block is one row of the stacked arrays
    blocks = sm(lambda *a: lax.expand_dims(ragged(*(lax.squeeze(b, (0,)) for b in a)), (0,)),
                n=4)
    np.testing.assert_allclose(np.asarray(blocks(*args)), want)


def test_ragged_axis_index_groups_and_plain_vmap():
    a = random_ragged(2, seed=3)
    b = random_ragged(2, seed=4)
    stacked = [np.concatenate([u, v]) for u, v in zip(a, b)]  # index 0,1 from a; 2,3 from b
    got = ppmap(lambda *t: ragged(*t, axis_index_groups=[[0, 1], [2, 3]]), n=4)(*stacked)
    want = np.concatenate([ragged_reference(*a), ragged_reference(*b)])
    np.testing.assert_allclose(np.asarray(got), want)
    # a batch of exchanges (vmap without the axis name, inside pmap)
    examples = [random_ragged(2, seed=s) for s in (5, 6, 7)]
    batch = [np.stack(parts, axis=1) for parts in zip(*examples)]  # (2, B, ...)
    with batching.checking_rules():
        got = ppmap(vmap(ragged), n=2)(*batch)
    want = np.stack([ragged_reference(*e) for e in examples], axis=1)
    np.testing.assert_allclose(np.asarray(got), want)
    # only the data batched, the tables shared (in_axes None)
    shared = [np.stack([e[i] for e in examples], axis=1) for i in (0, 1)]
    got = ppmap(vmap(ragged, in_axes=(0, 0, None, None, None, None)), n=2)(*shared,
                                                                           *examples[0][2:])
    want = np.stack([ragged_reference(e[0], e[1], *examples[0][2:]) for e in examples], axis=1)
    np.testing.assert_allclose(np.asarray(got), want)


def test_ragged_gradients_are_the_reverse_exchange():
    args = random_ragged(4, seed=2)
    operand, output, tables = args[0], args[1], args[2:]
    rng = np.random.default_rng(9)
    weights = rng.normal(size=output.shape).astype(np.float32)

    # The loss weights each device's result with its own row of weights.
    def body(op, out, w, *t):
        return lax.reduce_sum(lax.mul(ragged(op, out, *t), w), (0, 1))

    g_op, g_out = ppmap(grad(body, argnums=(0, 1)), n=4)(operand, output, weights, *tables)
    # Numerically: the loss is linear in operand and output.
    def total(op, out):
        return float((ragged_reference(op, out, *tables) * weights).sum())

    base = total(operand, output)
    num_op = np.zeros_like(operand)
    for idx in np.ndindex(operand.shape):
        bumped = operand.copy()
        bumped[idx] += 1.0
        num_op[idx] = total(bumped, output) - base
    num_out = np.zeros_like(output)
    for idx in np.ndindex(output.shape):
        bumped = output.copy()
        bumped[idx] += 1.0
        num_out[idx] = total(operand, bumped) - base
    np.testing.assert_allclose(np.asarray(g_op), num_op, atol=1e-4)
    np.testing.assert_allclose(np.asarray(g_out), num_out, atol=1e-4)
    g_vmap = vmap(grad(body, argnums=(0, 1)), axis_name="i")(operand, output, weights, *tables)
    np.testing.assert_allclose(np.asarray(g_vmap[0]), num_op, atol=1e-4)
    np.testing.assert_allclose(np.asarray(g_vmap[1]), num_out, atol=1e-4)
    _, tangent = jvp(ppmap(ragged, n=4), args, (2 * operand, -output, *[
        np.zeros(t.shape, jaxkit.dtypes.float0) for t in tables]))
    np.testing.assert_allclose(np.asarray(tangent),
                               ragged_reference(2 * operand, -output, *tables), atol=1e-5)


def test_ragged_jaxpr_and_errors(oracle):
    i32 = np.zeros(N, np.int32)
    assert eqns(sm(ragged), X, X, i32, i32, i32, i32, name="ragged_all_to_all") == \
        oracle["ragged_eqn"]
    kind, text = oracle["ragged_eager"]
    with pytest.raises(RuntimeError) as info:
        ragged(X, X, i32, i32, i32, i32)
    assert (kind, text) == ("RuntimeError", str(info.value))
    assert oracle["ragged_jit_unbound"][0] == "NameError"
    with pytest.raises(NameError, match="unbound axis name: i"):
        jaxkit.jit(ragged)(X, X, i32, i32, i32, i32)
    for key, call in [
            ("ragged_float_offsets", lambda: jaxkit.make_jaxpr(sm(ragged))(
                X, X, i32.astype(np.float32), i32, i32, i32)),
            ("ragged_rank2_sizes", lambda: jaxkit.make_jaxpr(sm(ragged, in_specs=(
                P("i"), P("i"), P("i"), P("i", None), P("i"), P("i"))))(
                X, X, i32, np.zeros((N, 2), np.int32), i32, i32))]:
        kind, text = oracle[key]
        with pytest.raises(ValueError) as info:
            call()
        assert (kind, text) == ("ValueError", str(info.value))
    # JAX has no rule for vmap over the collective's own axis; jaxkit computes it.
    assert oracle["ragged_vmap_named"][0] == "NotImplementedError"
    with pytest.raises(TypeError, match="same dtype"):
        vmap(ragged, axis_name="i")(X, X.astype(np.int32), *[np.zeros((N, N), np.int32)] * 4)


# ---- psend / precv ---------------------------------------------------------------------------

PERM = [(0, 1), (1, 2)]


def send_recv(v):
    token = lax.psend(v, "i", PERM)
    return lax.precv(token, jaxkit.ShapeDtypeStruct((1, 3), np.float32), "i", PERM)


def test_psend_precv_jaxprs_match_jax(oracle):
    assert eqns(sm(send_recv), X, name="psend") + eqns(sm(send_recv), X, name="precv") == \
        oracle["p2p_eqns"]
    text = str(jaxkit.make_jaxpr(sm(send_recv))(X))
    types = [line.split("=")[0].strip() for line in text.splitlines() if "psend[" in line]
    assert types == oracle["p2p_types"] == ["d:Tok"]
    # psend has an effect: kept although its token is unused
    assert eqns(sm(lambda v: (lax.psend(v, "i", PERM), v)[1]), X, name="psend") == \
        oracle["psend_unused_kept"]


def test_psend_precv_errors_match_jax_on_cpu(oracle):
    # JAX lowers psend/precv on GPU only (inside shard_map): on CPU they cannot run.
    kind, text = oracle["psend_pmap"]
    with pytest.raises(NotImplementedError) as info:
        ppmap(lambda v: (lax.psend(v, "i", PERM), v)[1])(X)
    assert (kind, text) == ("NotImplementedError", str(info.value))
    with pytest.raises(NotImplementedError, match="psend is currently only implemented on GPU"):
        sm(send_recv)(X)
    assert oracle["psend_eager"][0] == "NameError"
    with pytest.raises(NameError, match="unbound axis name: i"):
        lax.psend(X, "i", PERM)
    kind, text = oracle["precv_jit"]
    with pytest.raises(NotImplementedError) as info:  # (jaxkit has no create_token)
        lax.precv(np.zeros((), np.bool_), jaxkit.ShapeDtypeStruct((3,), np.float32), "i", PERM)
    assert (kind, text) == ("NotImplementedError", str(info.value))
    assert oracle["psend_jvp"][0] == "NotImplementedError"
    with pytest.raises(NotImplementedError, match="psend"):
        jvp(sm(lambda v: (lax.psend(v, "i", PERM), v)[1]), (X,), (X,))
    # over the vmapped axis there is nothing to send between (JAX fails with an assertion)
    with pytest.raises(NotImplementedError, match="vmapped axis"):
        vmap(lambda v: lax.psend(v, "i", PERM), axis_name="i")(X)
    with pytest.raises(NotImplementedError, match="precv over a vmapped axis"):
        vmap(lambda v: lax.precv(np.zeros((), np.bool_), jaxkit.ShapeDtypeStruct(
            (3,), np.float32), "i", PERM), axis_name="i")(X)


def test_psend_under_plain_vmap_keeps_one_send():
    # vmap over another axis sends the whole batch: one psend of the batched value.
    f = sm(vmap(lambda v: (lax.psend(v, "i", PERM), v)[1], in_axes=1, out_axes=1))
    assert eqns(f, X.reshape(N, 3, 1), name="psend") == [
        "psend[axis_name=('i',) perm=((0, 1), (1, 2))] c"]


# ---- pcast -----------------------------------------------------------------------------------


def test_pcast_is_the_identity_where_jax_lets_it_run(oracle):
    np.testing.assert_array_equal(np.asarray(ppmap(lambda v: lax.pcast(v, "i", to="varying"))(
        X)), np.asarray(oracle["pcast_pmap"]))
    np.testing.assert_array_equal(np.asarray(ppmap(lambda v: lax.pcast(v, "i", to="reduced"))(
        X)), np.asarray(oracle["pcast_pmap_reduced"]))
    # in shard_map: invariant -> varying is pvary; an already varying value raises, as in JAX
    np.testing.assert_array_equal(np.asarray(sm(lambda v: lax.pcast(v, ("i",), to="varying"),
                                                in_specs=P())(X)), np.concatenate([X] * N))
    with pytest.raises(ValueError, match="Unsupported pcast from=varying, to='varying'"):
        sm(lambda v: lax.pcast(v, ("i",), to="varying"))(X)
    # no equation: under pmap JAX's pvary disappears too
    assert eqns(ppmap(lambda v: lax.pcast(v, "i", to="varying")), X, name="pvary") == \
        oracle["pcast_pmap_eqns"] == []
    # untyped (vmap): every value is invariant, and invariant -> unreduced is refused (JAX)
    with pytest.raises(ValueError, match="Unsupported pcast from=invarying, to='unreduced'"):
        vmap(lambda v: lax.pcast({"a": v, "b": (v,)}, "i", to="unreduced"), axis_name="i")(X)
    tree = vmap(lambda v: lax.pcast({"a": v, "b": (v,)}, "i", to="reduced"),
                axis_name="i")(X)
    np.testing.assert_array_equal(np.asarray(tree["b"][0]), X)
    np.testing.assert_array_equal(np.asarray(lax.pcast(X, (), to="bogus")),
                                  np.asarray(oracle["pcast_empty"]))
    g = ppmap(grad(lambda v: lax.reduce_sum(lax.mul(lax.pcast(v, "i", to="varying"), C),
                                            (0,))))(X)
    np.testing.assert_array_equal(np.asarray(g), np.broadcast_to(C, X.shape))


def test_pcast_errors_match_jax(oracle):
    kind, text = oracle["pcast_bad_to"]
    with pytest.raises(ValueError) as info:
        ppmap(lambda v: lax.pcast(v, "i", to="invariant"))(X)
    assert kind == "ValueError"
    assert str(info.value).split(":")[0] == text.split(":")[0]  # the allowed set's order varies
    kind, text = oracle["pcast_set"]
    with pytest.raises(TypeError) as info:
        ppmap(lambda v: lax.pcast(v, {"i"}, to="varying"))(X)
    assert (kind, text) == ("TypeError", str(info.value))
    assert oracle["pcast_jit_unbound"][0] == "NameError"
    with pytest.raises(NameError, match="unbound axis name: i"):
        jaxkit.jit(lambda v: lax.pcast(v, "i", to="varying"))(X)
