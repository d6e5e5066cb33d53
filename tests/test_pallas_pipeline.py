"""``pltpu.emit_pipeline`` in interpret mode against the JAX oracle: one record per pipeline
(nested in a pallas_call over ``pl.ANY`` refs, as JAX's tutorials use it), run where JAX runs
it on a CPU (under an abstract mesh whose device is a TPU, which gives the tiling), with
values compared; JAX's errors where it refuses (a CPU default device, bad grids, block specs
that do not fit)."""
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


def _tpu_mesh(J):
    device = J.sharding.AbstractDevice(device_kind="TPU v5 lite", num_cores=1, platform="tpu")
    return J.sharding.use_abstract_mesh(
        J.sharding.AbstractMesh((1,), ("x",), abstract_device=device))


def _any_call(J, pl, kernel, out_shape, n_in, scratch_shapes=()):
    # JAX's TPU interpreter (InterpretParams) runs blocks of dynamic size; interpret=True
    # (its discharge interpreter) cannot. jaxkit runs both the same way.
    spec = pl.BlockSpec(memory_space=pl.ANY)
    pltpu = LIBS["jax" if J is jax else "jaxkit"][3]
    return pl.pallas_call(kernel, in_specs=[spec] * n_in, out_specs=spec,
                          out_shape=out_shape, scratch_shapes=scratch_shapes,
                          interpret=pltpu.InterpretParams())


def _double(J, jnp, pl, pltpu):
    def kernel(x_hbm, o_hbm):
        def body(x_vmem, o_vmem):
            o_vmem[...] = x_vmem[...] * 2 + pl.program_id(0)
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        pltpu.emit_pipeline(body, grid=(4,), in_specs=[spec], out_specs=spec)(x_hbm, o_hbm)
    x = np.arange(32 * 128, dtype=np.float32).reshape(32, 128) / 3
    return _any_call(J, pl, kernel, J.ShapeDtypeStruct(x.shape, x.dtype), 1), (x,)


def _matmul_accumulate(J, jnp, pl, pltpu):
    # The output block stays the same along k: the body accumulates into its window.
    def kernel(x_hbm, y_hbm, o_hbm):
        def body(x_ref, y_ref, o_ref):
            @pl.when(pl.program_id(2) == 0)
            def _():
                o_ref[...] = jnp.zeros_like(o_ref)
            o_ref[...] += x_ref[...] @ y_ref[...]
        pltpu.emit_pipeline(
            body, grid=(2, 2, 3),
            in_specs=[pl.BlockSpec((8, 128), lambda i, j, k: (i, k)),
                      pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
            out_specs=pl.BlockSpec((8, 128), lambda i, j, k: (i, j)))(x_hbm, y_hbm, o_hbm)
    x = (np.arange(16 * 384, dtype=np.float32).reshape(16, 384) % 7) / 7
    y = (np.arange(384 * 256, dtype=np.float32).reshape(384, 256) % 5) / 5
    return _any_call(J, pl, kernel, J.ShapeDtypeStruct((16, 256), np.float32), 2), (x, y)


def _ragged_last_block(J, jnp, pl, pltpu):
    # 24 rows in blocks of 16: the last block copies 8 rows (a multiple of the tiling; JAX's
    # interpreter refuses a copy running past the end, as 20 rows would give).
    def kernel(x_hbm, o_hbm):
        def body(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1
        spec = pl.BlockSpec((16, 128), lambda i: (i, 0))
        pltpu.emit_pipeline(body, grid=(2,), in_specs=spec, out_specs=spec)(x_hbm, o_hbm)
    x = np.arange(24 * 128, dtype=np.float32).reshape(24, 128)
    return _any_call(J, pl, kernel, J.ShapeDtypeStruct(x.shape, x.dtype), 1), (x,)


def _bounded_slices(J, jnp, pl, pltpu):
    # JAX's tutorial: dynamic-sized blocks given by pl.ds in the index map.
    def kernel(x_hbm, slices_hbm, o_hbm, slices_smem):
        pltpu.sync_copy(slices_hbm, slices_smem)

        def body(x_vmem, o_vmem):
            o_vmem[...] = x_vmem[...] * 3

        def index_map(i):
            start = slices_smem[i, 0]
            return (pl.ds(start, slices_smem[i, 1] - start), 0)
        spec = pl.BlockSpec(block_shape=(pl.BoundedSlice(8), 128), index_map=index_map)
        pltpu.emit_pipeline(body, grid=(4,), in_specs=[spec], out_specs=spec)(x_hbm, o_hbm)
    x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128) / 5
    slices = np.array([[0, 2], [2, 3], [3, 9], [9, 16]], np.int32)
    f = _any_call(J, pl, kernel, J.ShapeDtypeStruct(x.shape, x.dtype), 2,
                  scratch_shapes=(pltpu.SMEM(slices.shape, jnp.int32),))
    return f, (x, slices)


def _squeezed_and_views(J, jnp, pl, pltpu):
    # A squeezed leading dimension, refs given as views of the kernel's refs, and an outer
    # grid around the pipeline.
    def kernel(x_hbm, o_hbm):
        b = pl.program_id(0)

        def body(x_ref, o_ref):
            o_ref[...] = x_ref[...] * 10 + b
        spec = pl.BlockSpec((None, 8, 128), lambda i, j: (i, j, 0))
        pltpu.emit_pipeline(body, grid=(2, 2), in_specs=[spec], out_specs=[spec])(
            x_hbm.at[b], o_hbm.at[b])
    x = np.arange(2 * 2 * 16 * 128, dtype=np.float32).reshape(2, 2, 16, 128) / 9
    spec = pl.BlockSpec(memory_space=pl.ANY)
    f = pl.pallas_call(kernel, grid=(2,), in_specs=[spec], out_specs=spec,
                       out_shape=J.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)
    return f, (x,)


def _scratch_and_int(J, jnp, pl, pltpu):
    # Scratches passed to the body, a 1-D int operand (its tiling is the lane count).
    def kernel(x_hbm, o_hbm, acc):
        acc[...] = jnp.zeros_like(acc)

        def body(x_ref, o_ref, acc_ref):
            acc_ref[...] += x_ref[...]
            o_ref[...] = acc_ref[...]
        spec = pl.BlockSpec((1024,), lambda i: (i,))
        pltpu.emit_pipeline(body, grid=(3,), in_specs=[spec], out_specs=spec)(
            x_hbm, o_hbm, scratches=[acc])
    x = np.arange(3072, dtype=np.int32) % 17
    f = _any_call(J, pl, kernel, J.ShapeDtypeStruct(x.shape, x.dtype), 1,
                  scratch_shapes=[pltpu.VMEM((1024,), jnp.int32)])
    return f, (x,)


X4 = np.arange(4 * 16 * 128, dtype=np.float32).reshape(4, 16, 128) / 11


def _blocked_call(J, pl, pltpu, kernel, scratch_shapes=(), **kw):
    spec = pl.BlockSpec((None, 16, 128), lambda i: (i, 0, 0))
    return pl.pallas_call(kernel, grid=(4,), in_specs=[spec], out_specs=spec,
                          scratch_shapes=scratch_shapes, interpret=pltpu.InterpretParams(),
                          out_shape=J.ShapeDtypeStruct(X4.shape, X4.dtype), **kw), (X4,)


def _in_cond(J, jnp, pl, pltpu):
    # The pipeline called under pl.when, on views picked by the outer grid index.
    def kernel(x_hbm, o_hbm):
        i = pl.program_id(0)
        spec = pl.BlockSpec((8, 128), lambda j: (j, 0))
        p = pltpu.emit_pipeline(lambda a, o: o.__setitem__(..., a[...] + 1), grid=(2,),
                                in_specs=[spec], out_specs=spec)

        @pl.when(i % 2 == 0)
        def _():
            p(x_hbm.at[i], o_hbm.at[i])

        @pl.when(i % 2 == 1)
        def _():
            p(x_hbm.at[i - 1], o_hbm.at[i])
    spec = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(kernel, grid=(4,), in_specs=[spec], out_specs=spec,
                          interpret=pltpu.InterpretParams(),
                          out_shape=J.ShapeDtypeStruct(X4.shape, X4.dtype)), (X4,)


def _core_axis(J, jnp, pl, pltpu, cores):
    # The pipeline's grid split over the outer "cores" (evenly for 2, unevenly for 3).
    def kernel(x_hbm, o_hbm):
        def body(a, o):
            o[...] = a[...] * 2 + pl.program_id(0) * 100 + pl.program_id(1)
        spec = pl.BlockSpec((None, 8, 128), lambda i, j: (i, j, 0))
        pltpu.emit_pipeline(body, grid=(4, 2), in_specs=[spec], out_specs=spec, core_axis=0,
                            dimension_semantics=(pltpu.PARALLEL, pltpu.ARBITRARY))(
                                x_hbm, o_hbm)
    spec = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(kernel, grid=(cores,), in_specs=[spec], out_specs=spec,
                          interpret=pltpu.InterpretParams(),
                          out_shape=J.ShapeDtypeStruct(X4.shape, X4.dtype)), (X4,)


def _explicit_indices_unwritten(J, jnp, pl, pltpu):
    # The body gets the indices; half of each output window is never written (NaN).
    def kernel(x_hbm, o_hbm):
        def body(idx, a, o):
            o[0:4] = a[0:4] + idx[0] * 10 + idx[1]
        spec = pl.BlockSpec((None, 8, 128), lambda i, j: (i, j, 0))
        pltpu.emit_pipeline(body, grid=(4, 2), in_specs=[spec], out_specs=spec,
                            no_pipelining=True, _explicit_indices=True)(x_hbm, o_hbm)
    return _any_call(J, pl, kernel, J.ShapeDtypeStruct(X4.shape, X4.dtype), 1), (X4,)


def _dynamic_grid_sparse_core(J, jnp, pl, pltpu):
    # A grid size read from SMEM; SparseCore tiling.
    def kernel(n_ref, x_hbm, o_hbm):
        spec = pl.BlockSpec((8, 128), lambda j: (j, 0))
        pltpu.emit_pipeline(lambda a, o: o.__setitem__(..., a[...] + 5), grid=(n_ref[0],),
                            in_specs=[spec], out_specs=spec, tiling=pltpu.Tiling.SPARSE_CORE)(
                                x_hbm.at[0], o_hbm.at[0])
    spec = pl.BlockSpec(memory_space=pl.ANY)
    f = pl.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), spec],
                       out_specs=spec, interpret=pltpu.InterpretParams(),
                       out_shape=J.ShapeDtypeStruct(X4.shape, X4.dtype))
    return f, (np.array([1], np.int32), X4)


def _window_spaces(space):
    # Blocks of the pallas_call's own refs into a VMEM scratch: a VMEM spec aliases the
    # scratch (the body writes it in place), an SMEM one gets its own (uninitialized) window.
    def record(J, jnp, pl, pltpu):
        ms = None if space is None else getattr(pltpu, space)

        def kernel(x_ref, o_ref, s_ref):
            s_ref[...] = jnp.zeros_like(s_ref)
            spec = pl.BlockSpec((8, 128), lambda j: (j, 0), memory_space=ms)
            pltpu.emit_pipeline(lambda a, o: o.__setitem__(slice(0, 4), a[0:4] * 3),
                                grid=(2,), in_specs=[spec], out_specs=spec)(x_ref, s_ref)
            o_ref[...] = s_ref[...]
        return _blocked_call(J, pl, pltpu, kernel, [pltpu.VMEM((16, 128), jnp.float32)])
    record.__name__ = f"_window_{space}"
    return record


RECORDS = [_double, _matmul_accumulate, _ragged_last_block, _bounded_slices,
           _squeezed_and_views, _scratch_and_int, _in_cond, _explicit_indices_unwritten,
           _dynamic_grid_sparse_core, _window_spaces(None), _window_spaces("VMEM"),
           _window_spaces("SMEM")]
for _cores in (2, 3):
    def _rec(J, jnp, pl, pltpu, cores=_cores):
        return _core_axis(J, jnp, pl, pltpu, cores)
    _rec.__name__ = f"_core_axis_{_cores}"
    RECORDS.append(_rec)


def _run(lib, record):
    J, jnp, pl, pltpu = LIBS[lib]
    with _tpu_mesh(J):
        f, args = record(J, jnp, pl, pltpu)
        return np.asarray(J.jit(f)(*args))


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.__name__.strip("_"))
def test_pipeline_values_match_jax(record):
    np.testing.assert_allclose(_run("jaxkit", record), _run("jax", record), rtol=1e-6,
                               equal_nan=True)


def _errors(lib, make):
    J, jnp, pl, pltpu = LIBS[lib]
    try:
        make(J, jnp, pl, pltpu)
    except Exception as e:  # noqa: BLE001  (compared with JAX's)
        return type(e).__name__, str(e).split("\n")[0]
    return None


def _on_cpu(J, jnp, pl, pltpu):
    f, args = _double(J, jnp, pl, pltpu)
    f(*args)


def _not_interpreted(J, jnp, pl, pltpu):
    # As the tutorial's cell: without interpret mode a pallas_call fails on a CPU.
    spec = pl.BlockSpec(memory_space=pl.ANY)

    def kernel(x_hbm, o_hbm):
        block = pl.BlockSpec((8, 128), lambda i: (i, 0))
        pltpu.emit_pipeline(lambda a, b: None, grid=(1,), in_specs=[block],
                            out_specs=[block])(x_hbm, o_hbm)
    with _tpu_mesh(J):
        pl.pallas_call(kernel, in_specs=[spec], out_specs=spec,
                       out_shape=J.ShapeDtypeStruct((8, 128), np.float32))(
                           np.zeros((8, 128), np.float32))


def _zero_grid(J, jnp, pl, pltpu):
    pltpu.emit_pipeline(lambda: None, grid=(2, 0))


def _core_axes_both(J, jnp, pl, pltpu):
    pltpu.emit_pipeline(lambda: None, grid=(2,), core_axis=0, core_axis_name="x")


def _bounded_without_ds(J, jnp, pl, pltpu):
    def kernel(x_hbm, o_hbm):
        spec = pl.BlockSpec((pl.BoundedSlice(8), 128), lambda i: (i, 0))
        pltpu.emit_pipeline(lambda a, b: None, grid=(2,), in_specs=[spec],
                            out_specs=[spec])(x_hbm, o_hbm)
    with _tpu_mesh(J):
        _any_call(J, pl, kernel, J.ShapeDtypeStruct((16, 128), np.float32), 1)(
            np.zeros((16, 128), np.float32))


def _hbm_window(J, jnp, pl, pltpu):
    with _tpu_mesh(J):
        _window_spaces("HBM")(J, jnp, pl, pltpu)[0](X4)


def _any_window(J, jnp, pl, pltpu):
    # Pipelines nest, but a window cannot live in pl.ANY.
    def kernel(x_hbm, o_hbm):
        def outer(a_hbm, o2_hbm):
            spec = pl.BlockSpec((8, 128), lambda j: (j, 0))
            pltpu.emit_pipeline(lambda a, o: None, grid=(2,), in_specs=[spec],
                                out_specs=spec)(a_hbm, o2_hbm)
        spec = pl.BlockSpec((None, 16, 128), lambda i: (i, 0, 0), memory_space=pl.ANY)
        pltpu.emit_pipeline(outer, grid=(4,), in_specs=[spec], out_specs=spec)(x_hbm, o_hbm)
    with _tpu_mesh(J):
        _any_call(J, pl, kernel, J.ShapeDtypeStruct(X4.shape, X4.dtype), 1)(X4)


@pytest.mark.parametrize("make", [_on_cpu, _not_interpreted, _zero_grid, _core_axes_both,
                                  _bounded_without_ds, _hbm_window, _any_window],
                         ids=lambda m: m.__name__.strip("_"))
def test_pipeline_errors_match_jax(make):
    assert _errors("jaxkit", make) == _errors("jax", make)


def test_pipeline_with_allocations_matches_jax_without():
    # The BufferedRefs of emit_pipeline_with_allocations, given back to the pipeline (their
    # buffers unallocated: it allocates them; allocated ones come from pl.run_scoped in JAX).
    def kernel(x_hbm, o_hbm):
        def body(x_vmem, o_vmem):
            o_vmem[...] = x_vmem[...] * 2 + kpl.program_id(0)
        spec = kpl.BlockSpec((8, 128), lambda i: (i, 0))
        pipeline, make_allocations = kpltpu.emit_pipeline_with_allocations(
            body, grid=(4,), in_specs=[spec], out_specs=spec)
        allocations = make_allocations(x_hbm, o_hbm)
        assert [a.window_ref.shape for a in allocations] == [(2, 8, 128)] * 2
        pipeline(x_hbm, o_hbm, allocations=allocations)
    _, (x,) = _double(jaxkit, kjnp, kpl, kpltpu)
    with _tpu_mesh(jaxkit):
        got = _any_call(jaxkit, kpl, kernel, jaxkit.ShapeDtypeStruct(x.shape, x.dtype), 1)(x)
    np.testing.assert_array_equal(np.asarray(got), _run("jax", _double))


def test_buffered_ref_windows_as_jax_shapes_them():
    spec = kpl.BlockSpec((8, 128), lambda i: (i, 0))
    flat = kpl.BlockSpec((1024,), lambda i: (i,))
    assert kpltpu.BufferedRef.input(spec, np.float32).window_ref.shape == (2, 8, 128)
    assert kpltpu.BufferedRef.output(flat, np.int32, 3).window_ref.shape == (3072,)
    sc = kpltpu.BufferedRef.input(flat, np.int32, tiling=kpltpu.Tiling.SPARSE_CORE)
    assert sc.window_ref.shape == (2, 1024)
    both = kpltpu.BufferedRef.input_output(spec, np.float32)
    assert both.is_input and both.is_output and both.is_input_output and not both.is_manual
    assert both.with_spec(flat).spec is flat
