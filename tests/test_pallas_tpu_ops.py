"""The TPU kernel-language operations (``pltpu.bitcast``, ``roll``, ``load``/``store``,
``einshape``, ``touch``, ``trace_value``, packing, ``matmul_*``,
``with_memory_space_constraint``) and Pallas's helpers (``pl.empty*``, ``broadcast_to``,
``run_state``, ``select_ref``, ``Indirect``, ``RevisitMode``, the debug switches) against the
JAX oracle: each record runs inside a kernel in interpret mode (values compared) or outside
one (jaxprs, values or errors compared), as JAX 0.10.2 runs them on a CPU."""
from __future__ import annotations

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit.experimental import pallas as kpl
from jaxkit.experimental.pallas import tpu as kpltpu

jax = pytest.importorskip("jax")
jjnp = pytest.importorskip("jax.numpy")
jpl = pytest.importorskip("jax.experimental.pallas")
jpltpu = pytest.importorskip("jax.experimental.pallas.tpu")

LIBS = {"jax": (jax, jjnp, jpl, jpltpu), "jaxkit": (jaxkit, kjnp, kpl, kpltpu)}

X = np.arange(16 * 128, dtype=np.float32).reshape(16, 128) / 7
XI = (np.arange(16 * 128, dtype=np.int32).reshape(16, 128) * 37) % 251 - 120


def _store_masked(J, jnp, pl, pltpu):
    def body(x, o):
        o[...] = jnp.zeros_like(o)
        pltpu.store(o, x[...] * 2, mask=x[...] > 100)
    return body, (X,), (16, 128), np.float32


# name -> (kernel body, args, out shape, out dtype)
KERNELS = {
    "bitcast_f32_i32": lambda J, jnp, pl, pltpu: (
        lambda x, o: o.__setitem__(..., pltpu.bitcast(x[...], jnp.int32)), (X,), (16, 128),
        np.int32),
    "bitcast_i32_i16": lambda J, jnp, pl, pltpu: (
        lambda x, o: o.__setitem__(..., pltpu.bitcast(x[...], jnp.int16)), (XI,), (32, 128),
        np.int16),
    "bitcast_i16_i32": lambda J, jnp, pl, pltpu: (
        lambda x, o: o.__setitem__(..., pltpu.bitcast(x[...].astype(jnp.int16), jnp.int32)),
        (XI,), (8, 128), np.int32),
    "roll": lambda J, jnp, pl, pltpu: (
        lambda x, o: o.__setitem__(..., pltpu.roll(x[...], 3, 1)), (X,), (16, 128),
        np.float32),
    "roll_stride": lambda J, jnp, pl, pltpu: (
        lambda x, o: o.__setitem__(..., pltpu.roll(x[...], 3, 1, stride=2, stride_axis=0)),
        (X,), (16, 128), np.float32),
    "load_view": lambda J, jnp, pl, pltpu: (
        lambda x, o: o.__setitem__(..., pltpu.load(x.at[4:12])), (X,), (8, 128), np.float32),
    "store_masked": _store_masked,
    "einshape_split_transpose": lambda J, jnp, pl, pltpu: (
        lambda x, o: o.__setitem__(..., pltpu.einshape("a(bc)->bac", x[...], c=64)), (X,),
        (2, 16, 64), np.float32),
    "einshape_merge": lambda J, jnp, pl, pltpu: (
        lambda x, o: o.__setitem__(..., pltpu.einshape("a(bc)->(ba)c", x[...], b=4)), (X,),
        (64, 32), np.float32),
    "pl_empty_and_broadcast_to": lambda J, jnp, pl, pltpu: (
        lambda x, o: o.__setitem__(..., pl.empty((16, 128), jnp.float32) * 0
                                   + pl.broadcast_to(x[0, :], (16, 128))), (X,), (16, 128),
        np.float32),
}


def _kernel_value(lib, name):
    J, jnp, pl, pltpu = LIBS[lib]
    body, args, shape, dtype = KERNELS[name](J, jnp, pl, pltpu)

    def kernel(*refs):
        body(*refs)
    f = pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct(shape, dtype), interpret=True)
    return np.asarray(f(*args))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_values_match_jax(name):
    np.testing.assert_array_equal(_kernel_value("jaxkit", name), _kernel_value("jax", name))


def _x(J, jnp):
    return jnp.asarray(X)


def _touch_in_kernel(J, jnp, pl, pltpu):
    def kernel(x, o):
        pltpu.touch(o)
        o[...] = x[...]
    pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((16, 128), jnp.float32),
                   interpret=True)(X)


def _mxu(J, jnp, pl, pltpu):
    def kernel(x, o):
        pltpu.matmul_push_rhs(x[...], 0, 0)
        pltpu.matmul_acc_lhs(0, x[...], 0, load_staged_rhs=0)
        o[...] = pltpu.matmul_pop(0, (16, 128), jnp.float32, 0)
    pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((16, 128), jnp.float32),
                   interpret=True)(X)


def _in_kernel(op):
    def make(J, jnp, pl, pltpu):
        def kernel(x, o):
            o[...] = op(J, jnp, pltpu, x[...])
        pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((16, 128), jnp.uint32),
                       interpret=True)(XI)
    return make


# name -> a function that fails (or returns something printable) in both libraries
OUTSIDE = {
    "bitcast_jaxpr": lambda J, jnp, pl, pltpu: J.make_jaxpr(
        lambda x: pltpu.bitcast(x, jnp.int16))(X),
    "bitcast_vmap": lambda J, jnp, pl, pltpu: J.jit(J.vmap(
        lambda x: pltpu.bitcast(x, jnp.int16)))(X.reshape(2, 8, 128)),
    "bitcast_1d": lambda J, jnp, pl, pltpu: pltpu.bitcast(X[0], jnp.int16),
    "bitcast_unpackable": lambda J, jnp, pl, pltpu: pltpu.bitcast(X[:3], jnp.int8),
    "roll_jaxpr": lambda J, jnp, pl, pltpu: J.make_jaxpr(lambda x: pltpu.roll(x, 3, 1))(X),
    "roll_traced_shift": lambda J, jnp, pl, pltpu: J.jit(
        lambda x, s: pltpu.roll(x, s, 1))(X, 5),
    "roll_negative": lambda J, jnp, pl, pltpu: pltpu.roll(X, -3, 1),
    "roll_bad_axis": lambda J, jnp, pl, pltpu: pltpu.roll(X, 3, 2),
    "roll_stride_alone": lambda J, jnp, pl, pltpu: pltpu.roll(X, 3, 1, stride=1),
    "roll_vmap": lambda J, jnp, pl, pltpu: J.vmap(
        lambda x: pltpu.roll(x, 3, 1))(X.reshape(2, 8, 128)),
    "roll_grad": lambda J, jnp, pl, pltpu: J.grad(lambda x: pltpu.roll(x, 3, 1).sum())(X),
    "touch_jaxpr": lambda J, jnp, pl, pltpu: J.make_jaxpr(
        lambda: pltpu.touch(J.new_ref(jnp.ones(3))))(),
    "touch_vmap": lambda J, jnp, pl, pltpu: J.make_jaxpr(J.vmap(
        lambda x: pltpu.touch(J.new_ref(x))))(X),
    "touch_in_kernel": _touch_in_kernel,
    "trace_value_jaxpr": lambda J, jnp, pl, pltpu: J.make_jaxpr(
        lambda x: pltpu.trace_value("a", x))(1.0),
    "trace_value_not_scalar": lambda J, jnp, pl, pltpu: J.make_jaxpr(
        lambda x: pltpu.trace_value("a", x))(X),
    "trace_value_int16": lambda J, jnp, pl, pltpu: J.make_jaxpr(
        lambda x: pltpu.trace_value("a", x))(np.int16(1)),
    "pack_one_source": lambda J, jnp, pl, pltpu: J.make_jaxpr(
        lambda x: pltpu.pack_elementwise([x], packed_dtype=jnp.bfloat16))(X),
    "pack_f32_to_i8": lambda J, jnp, pl, pltpu: J.make_jaxpr(
        lambda x: pltpu.pack_elementwise([x] * 4, packed_dtype=jnp.int8))(X),
    "pack_in_kernel": _in_kernel(lambda J, jnp, pltpu, x: pltpu.pack_elementwise(
        [x, x + 1], packed_dtype=jnp.int16)),
    "unpack_bad_index": lambda J, jnp, pl, pltpu: J.make_jaxpr(
        lambda x: pltpu.unpack_elementwise(x, index=2, packed_dtype=jnp.int16,
                                           unpacked_dtype=jnp.int32))(XI),
    "unpack_bad_width": lambda J, jnp, pl, pltpu: J.make_jaxpr(
        lambda x: pltpu.unpack_elementwise(x, index=0, packed_dtype=jnp.int8,
                                           unpacked_dtype=jnp.int16))(XI),
    "mxu_jaxpr": lambda J, jnp, pl, pltpu: J.make_jaxpr(lambda x: (
        pltpu.matmul_push_rhs(x, 0, 0), pltpu.matmul_acc_lhs(0, x, 0, load_staged_rhs=0),
        pltpu.matmul_pop(0, (16, 128), jnp.float32, 0))[2])(X),
    "mxu_bool_register": lambda J, jnp, pl, pltpu: pltpu.matmul_acc_lhs(
        0, X, 0, load_staged_rhs=True),
    "mxu_f16_accumulator": lambda J, jnp, pl, pltpu: J.make_jaxpr(
        lambda: pltpu.matmul_pop(0, (16, 128), jnp.float16, 0))(),
    "mxu_in_kernel": _mxu,
    "wmsc_any": lambda J, jnp, pl, pltpu: J.make_jaxpr(
        lambda x: pltpu.with_memory_space_constraint(x, pl.ANY))(X),
    "wmsc_cmem": lambda J, jnp, pl, pltpu: pltpu.with_memory_space_constraint(X, pltpu.CMEM),
    "wmsc_eager": lambda J, jnp, pl, pltpu: pltpu.with_memory_space_constraint(
        _x(J, jnp), pltpu.VMEM),
    "wmsc_jit": lambda J, jnp, pl, pltpu: J.jit(
        lambda x: pltpu.with_memory_space_constraint(x, pltpu.SMEM))(X),
    "einshape_eager": lambda J, jnp, pl, pltpu: pltpu.einshape("ab->ba", X),
    "einshape_ambiguous": lambda J, jnp, pl, pltpu: pltpu.einshape("a(bc)->abc", X),
    "einshape_two_arrows": lambda J, jnp, pl, pltpu: pltpu.einshape("a->b->a", X),
    "einshape_unmatched": lambda J, jnp, pl, pltpu: pltpu.einshape("a(b->ab", X),
    "einshape_bad_split": lambda J, jnp, pl, pltpu: pltpu.einshape("a(bc)->abc", X, b=3),
    "einshape_rank": lambda J, jnp, pl, pltpu: pltpu.einshape("abc->abc", X),
    "einshape_broadcast": lambda J, jnp, pl, pltpu: pltpu.einshape("ab->abc", X, c=2),
    "empty_like_jaxpr": lambda J, jnp, pl, pltpu: J.make_jaxpr(
        lambda x: pl.empty_like((x, x[0])))(X),
    "empty_ref_like_bad": lambda J, jnp, pl, pltpu: pl.empty_ref_like(X),
    "broadcast_to_jaxpr": lambda J, jnp, pl, pltpu: J.make_jaxpr(
        lambda x: pl.broadcast_to(x[0], (4, 128)))(X),
    "broadcast_to_same": lambda J, jnp, pl, pltpu: J.make_jaxpr(
        lambda x: pl.broadcast_to(x, (16, 128)))(X),
    "broadcast_to_eager": lambda J, jnp, pl, pltpu: pl.broadcast_to(X[0, :3], (2, 3)),
    "broadcast_to_vmap": lambda J, jnp, pl, pltpu: J.vmap(
        lambda x: pl.broadcast_to(x, (2, 128)))(X),
    "run_state": lambda J, jnp, pl, pltpu: pl.run_state(
        lambda r: r[0].__setitem__(..., r[0][...] + r[1][...]))(
            (jnp.ones(3), jnp.arange(3.0))),
    "run_state_jit": lambda J, jnp, pl, pltpu: J.jit(pl.run_state(
        lambda r: r.__setitem__(..., r[...] * 2)))(jnp.arange(3.0)),
    "select_ref_one": lambda J, jnp, pl, pltpu: pl.select_ref(0, J.new_ref(jnp.ones(2))),
    "indirect": lambda J, jnp, pl, pltpu: (pl.Indirect(4), pl.Indirect(4) == pl.Indirect(4)),
    "revisit_mode": lambda J, jnp, pl, pltpu: (list(pl.RevisitMode), str(pl.RevisitMode.ANY)),
    "debug_switches": lambda J, jnp, pl, pltpu: (pl.enable_debug_checks.value,
                                                 pl.enable_poison_buffers.value),
    "tiling": lambda J, jnp, pl, pltpu: (list(pltpu.Tiling), pltpu.Tiling.COMPACT.shape,
                                         pltpu.Tiling.SPARSE_CORE.shape),
    "buffer_type": lambda J, jnp, pl, pltpu: [(b, b.is_input, b.is_output)
                                              for b in pltpu.BufferType],
    "lowering_exception": lambda J, jnp, pl, pltpu: (
        pltpu.LoweringException.__module__, pltpu.LoweringException.__mro__[1]),
}


def _outcome(lib, name):
    J, jnp, pl, pltpu = LIBS[lib]
    try:
        out = OUTSIDE[name](J, jnp, pl, pltpu)
    except Exception as e:  # noqa: BLE001  (compared with JAX's)
        # dtypes given as classes print with their module (jaxkit.numpy.int8)
        msg = str(e).split("\n")[0].replace("jaxkit", "jax")
        # The first line of errors jaxkit words its own way (a missing rule's message).
        keep = not isinstance(e, NotImplementedError) or "only supports" in msg
        return type(e).__name__, msg if keep else ""
    if isinstance(out, tuple) or isinstance(out, list):
        return str(out).replace("jaxkit", "jax")
    if hasattr(out, "jaxpr"):
        return str(out)
    return np.asarray(out).tolist()


@pytest.mark.parametrize("name", sorted(OUTSIDE))
def test_operation_outcomes_match_jax(name):
    assert _outcome("jaxkit", name) == _outcome("jax", name)


def test_select_ref_reads_and_writes_the_chosen_ref():
    def kernel(a_ref, b_ref, i_ref, o_ref, p_ref):
        sel = kpl.select_ref(i_ref[0], a_ref, b_ref)
        o_ref[...] = sel[...]
        p_ref[...] = jnp_zeros()
        kpltpu.sync_copy(sel.at[1:3], p_ref.at[0:2])

    def jnp_zeros():
        return kjnp.zeros((4,), kjnp.float32)
    a, b = np.arange(4.0, dtype=np.float32), np.arange(4.0, dtype=np.float32) + 10
    f = kpl.pallas_call(kernel, out_shape=(jaxkit.ShapeDtypeStruct((4,), np.float32),) * 2,
                        interpret=True)
    for i, want in ((0, a), (1, b)):
        out, part = f(a, b, np.array([i], np.int32))
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(part, [want[1], want[2], 0, 0])
    with pytest.raises(TypeError, match="Cannot select from Refs of different types"):
        kpl.select_ref(0, jaxkit.new_ref(kjnp.ones(2)), jaxkit.new_ref(kjnp.ones(3)))


def test_emit_pipeline_with_allocations_gives_buffered_refs():
    spec = kpl.BlockSpec((8, 128), lambda i: (i, 0))
    pipeline, make_allocations = kpltpu.emit_pipeline_with_allocations(
        lambda x, o: None, grid=(2,), in_specs=[spec], out_specs=[spec])
    x = jaxkit.ShapeDtypeStruct((16, 128), np.float32)
    brefs = make_allocations(x, x)
    assert [b.buffer_type for b in brefs] == [kpltpu.BufferType.INPUT,
                                              kpltpu.BufferType.OUTPUT]
    assert brefs[0].window_ref.shape == (2, 8, 128) and brefs[0].is_input
    assert isinstance(brefs[1], kpltpu.BufferedRefBase) and callable(pipeline)
