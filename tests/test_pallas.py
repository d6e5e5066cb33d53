"""``jax.experimental.pallas`` in interpret mode against the JAX oracle: one record per kernel
(grids of several dimensions, index maps, squeezed, element and ragged blocks, scratch
buffers, scalar prefetch, ``pl.ds`` with static and traced starts, ref views, ``pl.when``,
loops, aliasing, Triton's masked loads/stores and atomics), each run under ``jit`` with its values
compared (NaN where the kernel leaves outputs unwritten, as JAX), some printed with
``make_jaxpr``, batched with ``vmap`` and differentiated with ``jvp``; JAX's errors where it
refuses (no interpret mode on a CPU, reverse mode, captured constants)."""
from __future__ import annotations

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit.experimental import pallas as kpl
from jaxkit.experimental.pallas import tpu as kpltpu
from jaxkit.experimental.pallas import triton as kplgpu

jax = pytest.importorskip("jax")
jjnp = pytest.importorskip("jax.numpy")
jpl = pytest.importorskip("jax.experimental.pallas")
jpltpu = pytest.importorskip("jax.experimental.pallas.tpu")
jplgpu = pytest.importorskip("jax.experimental.pallas.triton")

LIBS = {"jax": (jax, jjnp, jpl), "jaxkit": (jaxkit, kjnp, kpl)}
TPU = {"jax": jpltpu, "jaxkit": kpltpu}
TRITON = {"jax": jplgpu, "jaxkit": kplgpu}


def _add(J, jnp, pl):
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]
    f = pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((8,), jnp.float32), interpret=True)
    return f, (np.arange(8.0, dtype=np.float32), np.ones(8, np.float32))


def _static_ds_program_id(J, jnp, pl):
    # Half of each output block stays unwritten: NaN in interpret mode.
    def kernel(x_ref, o_ref):
        i = pl.program_id(0)
        o_ref[pl.ds(0, 2)] = x_ref[pl.ds(0, 2)] * i + pl.num_programs(0)
    spec = pl.BlockSpec((4,), lambda i: (i,))
    f = pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((8,), jnp.float32), grid=(2,),
                       in_specs=[pl.BlockSpec((pl.Element(4),), lambda i: (4 * i,))],
                       out_specs=spec, interpret=True)
    return f, (np.arange(8.0, dtype=np.float32),)


def _matmul_2d_grid(J, jnp, pl):
    def kernel(x_ref, y_ref, z_ref):
        z_ref[...] = x_ref[...] @ y_ref[...] + pl.program_id(1)
    f = pl.pallas_call(
        kernel, out_shape=J.ShapeDtypeStruct((4, 6), jnp.float32), grid=(2, 3),
        in_specs=[pl.BlockSpec((2, 5), lambda i, j: (i, 0)),
                  pl.BlockSpec((5, 2), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((2, 2), lambda i, j: (i, j)), interpret=True)
    x = np.arange(20, dtype=np.float32).reshape(4, 5) / 7
    y = np.arange(30, dtype=np.float32).reshape(5, 6) / 5
    return f, (x, y)


def _when_accumulate(J, jnp, pl):
    # A scratch buffer lives across the grid: a running sum, written out at each step.
    def kernel(x_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += x_ref[...]
        o_ref[...] = acc_ref[...] * 2
    vmem = TPU["jax" if J is jax else "jaxkit"].VMEM
    f = pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((2, 4), jnp.float32), grid=(3,),
                       in_specs=[pl.BlockSpec((None, 2, 4), lambda k: (k, 0, 0))],
                       out_specs=pl.BlockSpec((2, 4), lambda k: (0, 0)),
                       scratch_shapes=[vmem((2, 4), jnp.float32)], interpret=True)
    return f, (np.arange(24.0, dtype=np.float32).reshape(3, 2, 4),)


def _ragged_blocks_pl_loop(J, jnp, pl):
    # 10 elements in blocks of 4: the last block is padded (its reads past the end are NaN);
    # traced pl.ds starts, and the loop body closes over program_id (JAX 0.10.2's interpreter
    # fails on program_id called inside a loop body; jaxkit's runs it).
    def kernel(x_ref, o_ref):
        i = pl.program_id(0)

        @pl.loop(0, 4, step=2)
        def _(j):
            o_ref[pl.ds(j, 2)] = x_ref[pl.ds(j, 2)] * 2 + i
    spec = pl.BlockSpec((4,), lambda i: (i,))
    f = pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((10,), jnp.float32),
                       grid=(pl.cdiv(10, 4),), in_specs=[spec], out_specs=spec,
                       interpret=True)
    return f, (np.arange(10.0, dtype=np.float32),)


def _int_alias_squeezed(J, jnp, pl):
    def kernel(x_ref, y_ref, o_ref):
        o_ref[1:] = x_ref[1:] * y_ref[...] + pl.program_id(0)
    spec = pl.BlockSpec((None, 3), lambda i, j: (i, j))
    f = pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((2, 6), jnp.int32), grid=(2, 2),
                       in_specs=[spec, pl.BlockSpec((), lambda i, j: ())], out_specs=spec,
                       input_output_aliases={0: 0}, interpret=True)
    return f, (np.arange(12, dtype=np.int32).reshape(2, 6), np.int32(3))


def _scalar_prefetch(J, jnp, pl):
    # The index map reads a scalar-prefetch ref: a gather of row blocks, in order idx.
    pltpu = TPU["jax" if J is jax else "jaxkit"]

    def kernel(idx_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] + idx_ref[pl.program_id(0)]
    gs = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(3,),
        in_specs=[pl.BlockSpec((2, 4), lambda i, idx: (idx[i], 0))],
        out_specs=pl.BlockSpec((2, 4), lambda i, idx: (i, 0)))
    f = pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((6, 4), jnp.float32),
                       grid_spec=gs, interpret=True)
    return f, (np.array([2, 0, 1], np.int32), np.arange(24.0, dtype=np.float32).reshape(6, 4))


def _tpu_local_copies(J, jnp, pl):
    # An unblocked (pl.ANY) input copied by pltpu.sync_copy and a local async copy, with a
    # scratch buffer and a DMA semaphore.
    pltpu = TPU["jax" if J is jax else "jaxkit"]

    def kernel(x_hbm_ref, o_ref, scratch_ref, sem):
        pltpu.sync_copy(x_hbm_ref.at[1:2], scratch_ref)
        o_ref[...] = scratch_ref[...] + 1
        copy = pltpu.make_async_copy(x_hbm_ref.at[0:1, 4:], o_ref.at[:, :4], sem.at[0])
        copy.start()
        copy.wait()
    f = pl.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_shape=J.ShapeDtypeStruct((1, 8), jnp.float32),
                       scratch_shapes=(pltpu.VMEM(shape=(1, 8), dtype=jnp.float32),
                                       pltpu.SemaphoreType.DMA((1,))), interpret=True)
    return f, (np.arange(16.0, dtype=np.float32).reshape(2, 8),)


def _triton_masked_atomic_views(J, jnp, pl):
    # Ref views (x_ref.at[...]), masked loads and stores running past the end of the ref
    # (the last window reads `other` there), and atomic read-modify-writes.
    plgpu = TRITON["jax" if J is jax else "jaxkit"]

    def kernel(x_ref, o_ref, a_ref):
        i = pl.program_id(0)
        m = i * 4 + jnp.arange(4) < 10
        v = plgpu.load(x_ref.at[pl.ds(i * 4, 4)], mask=m, other=-1.0)
        plgpu.store(o_ref.at[pl.ds(i * 4, 4)], v * 2, mask=m)

        @pl.when(i == 0)
        def _():
            a_ref[...] = jnp.zeros_like(a_ref)
        old = plgpu.atomic_add(a_ref, (pl.ds(1, 2),), x_ref[pl.ds(0, 2)])
        plgpu.atomic_max(a_ref, (pl.ds(0, 2),), old + 5)
    f = pl.pallas_call(kernel, out_shape=(J.ShapeDtypeStruct((10,), jnp.float32),
                                          J.ShapeDtypeStruct((4,), jnp.float32)),
                       grid=(3,), interpret=True)
    return lambda x: jnp.concatenate(f(x)), (np.arange(10.0, dtype=np.float32),)


RECORDS = {f.__name__[1:]: f for f in (
    _add, _static_ds_program_id, _matmul_2d_grid, _when_accumulate,
    _ragged_blocks_pl_loop, _int_alias_squeezed, _scalar_prefetch, _tpu_local_copies,
    _triton_masked_atomic_views)}
# records whose printed jaxprs are compared (a fori_loop's prints differently in jaxkit: its
# lower bound is staged as an operand; ref views print composed: c[2:4] for JAX's c[:4][2:])
PRINTED = ("add", "static_ds_program_id", "when_accumulate", "scalar_prefetch")
VMAPPED = ("static_ds_program_id",)


def _build(name: str, lib: str):
    J, jnp, pl = LIBS[lib]
    return RECORDS[name](J, jnp, pl)


@pytest.mark.parametrize("name", list(RECORDS))
def test_values_and_printing_match_jax(name):
    outs, texts = {}, {}
    for lib in LIBS:
        J = LIBS[lib][0]
        f, args = _build(name, lib)
        outs[lib] = np.asarray(J.jit(f)(*args))
        if name in PRINTED:
            texts[lib] = str(J.make_jaxpr(f)(*args))
        if name in VMAPPED:
            batched = [np.stack([a, a * 2 + 1]) for a in args]
            outs[lib + "vmap"] = np.asarray(J.vmap(f)(*batched))
    np.testing.assert_allclose(outs["jaxkit"], outs["jax"], rtol=1e-6)
    if name in VMAPPED:
        np.testing.assert_allclose(outs["jaxkitvmap"], outs["jaxvmap"], rtol=1e-6)
    if name in PRINTED:
        assert texts["jaxkit"] == texts["jax"]


def _sin_kernel(J, jnp, pl):
    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.sin(x_ref[...]) * 2
    spec = pl.BlockSpec((4,), lambda i: (i,))
    return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((8,), jnp.float32), grid=(2,),
                          in_specs=[spec], out_specs=spec, interpret=True)


def test_jvp_matches_jax_and_grad_fails_as_jax():
    x = np.linspace(0, 3, 8, dtype=np.float32)
    res, texts, errors = {}, {}, {}
    for lib, (J, jnp, pl) in LIBS.items():
        f = _sin_kernel(J, jnp, pl)
        res[lib] = [np.asarray(v) for v in J.jvp(f, (x,), (x,))]
        texts[lib] = str(J.make_jaxpr(lambda x, t: J.jvp(f, (x,), (t,)))(x, x))
        with pytest.raises(ValueError) as e:
            J.grad(lambda x: f(x).sum())(x)
        errors[lib] = str(e.value)
    for a, b in zip(res["jaxkit"], res["jax"]):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert texts["jaxkit"] == texts["jax"]
    assert errors["jaxkit"] == errors["jax"]


def _no_interpret(J, jnp, pl):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((4,), jnp.float32))(
        jnp.ones(4))


def _captured_constant(J, jnp, pl):
    c = jnp.arange(4.0)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + c
    return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((4,), jnp.float32),
                          interpret=True)(jnp.ones(4))


@pytest.mark.parametrize("case,exc,exact", [
    (_no_interpret, ValueError, True),
    (_captured_constant, ValueError, False),
])
def test_errors_match_jax(case, exc, exact):
    msgs = {}
    for lib, mods in LIBS.items():
        with pytest.raises(exc) as e:
            case(*mods)
        msgs[lib] = str(e.value)
    if exact:
        assert msgs["jaxkit"] == msgs["jax"]
    else:
        assert msgs["jaxkit"].split(" captures ")[1] == msgs["jax"].split(" captures ")[1]


def test_tpu_names_and_interpret_params():
    pltpu = kpltpu
    assert str(pltpu.SMEM) == "smem" and str(kpl.ANY) == "any"
    def double(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2
    f = kpl.pallas_call(double, out_shape=jaxkit.ShapeDtypeStruct((4,), kjnp.float32),
                        interpret=pltpu.InterpretParams())
    np.testing.assert_array_equal(np.asarray(f(kjnp.arange(4.0))), np.arange(4.0) * 2)
    kpl.__getattr__.cache_clear()  # (it warns on the first read only, as JAX's)
    with pytest.warns(DeprecationWarning, match="moved to jax.experimental.pallas.triton"):
        kpl.dot  # noqa: B018


def test_helpers_match_jax():
    x = np.arange(8, dtype=np.int32)
    for lib in ("jax", "jaxkit"):
        J, pl = LIBS[lib][0], LIBS[lib][2]
        assert (pl.cdiv(9, 2), pl.align_to(5, 4), pl.next_power_of_2(5),
                pl.strides_from_shape((2, 3, 4))) == (5, 8, 8, (12, 4, 1))
        with pytest.raises(NotImplementedError, match="multiple_of"):  # no batching rule
            J.vmap(lambda v: pl.multiple_of(v * 4, 4))(x)


def test_program_id_inside_kernel_control_flow_against_numpy():
    # program_id called inside a loop body and a pl.when branch (JAX 0.10.2's interpreter
    # fails on the loop case): the grid index reaches both.
    def kernel(x_ref, o_ref):
        def body(j, c):
            o_ref[kpl.ds(j * 2, 2)] = x_ref[kpl.ds(j * 2, 2)] + kpl.program_id(0)
            return c
        jaxkit.lax.fori_loop(0, 2, body, 0)

        @kpl.when(kpl.program_id(0) == 1)
        def _():
            o_ref[0] = 100.0 * kpl.program_id(0)
    spec = kpl.BlockSpec((4,), lambda i: (i,))
    f = kpl.pallas_call(kernel, out_shape=jaxkit.ShapeDtypeStruct((8,), kjnp.float32),
                        grid=(2,), in_specs=[spec], out_specs=spec, interpret=True)
    expected = np.arange(8.0) + np.repeat([0.0, 1.0], 4)
    expected[4] = 100.0
    np.testing.assert_array_equal(np.asarray(f(np.arange(8.0, dtype=np.float32))), expected)
