"""Pallas TPU kernels with semaphores, DMAs (local and remote), scoped buffers and core meshes,
run in interpret mode on 8 CPU devices, against JAX 0.10.2 (its TPU interpreter, run in a
subprocess with 8 host devices).

Each case below is written once, in ``CASES``, with the names ``jax``, ``jnp``, ``lax``, ``pl``,
``pltpu``, ``P``, ``mesh`` (8 devices, axis ``x``) bound to JAX's or jaxkit's; it returns a
JSON-able value (arrays as lists, errors as ``[class, message]``) and the two are compared.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit import lax as klax
from jaxkit.experimental import pallas as kpl
from jaxkit.experimental.pallas import tpu as kpltpu
from jaxkit.runtime import multi_device
from jaxkit.sharding import AxisType, PartitionSpec

DEVICES = multi_device.add_cpu_backend("spmd8", 8).devices

CASES = textwrap.dedent('''
    import functools
    import numpy as np
    INTERP = pltpu.InterpretParams()
    READ_SEMAPHORES = False
    N = 8
    X = (np.arange(8 * 128 * N, dtype=np.float32).reshape(8, 128 * N) % 97) / 7.0
    cases = {}

    def case(fn):
        cases[fn.__name__] = fn
        return fn

    def error(fn):
        try:
            fn()
        except Exception as e:
            return [type(e).__name__, str(e)]
        return None

    def sharded(kernel, out_shape, in_spec, out_spec, scratch, grid=(), collective=False):
        call = pl.pallas_call(
            kernel, out_shape=out_shape, interpret=INTERP,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=0, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                out_specs=pl.BlockSpec(memory_space=pl.ANY), scratch_shapes=scratch,
                grid=grid),
            compiler_params=pltpu.CompilerParams(collective_id=0) if collective else None)
        return jax.jit(jax.shard_map(call, mesh=mesh, in_specs=in_spec, out_specs=out_spec,
                                     check_vma=False))

    @case
    def right_permute():
        def kernel(x_ref, o_ref, send, recv):
            right = lax.rem(lax.axis_index("x") + 1, N)
            copy = pltpu.make_async_remote_copy(x_ref, o_ref, send, recv, device_id=(right,),
                                                device_id_type=pl.DeviceIdType.MESH)
            copy.start()
            copy.wait()
        f = sharded(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32), P(None, "x"),
                    P(None, "x"), [pltpu.SemaphoreType.DMA] * 2)
        return np.asarray(f(X)).tolist()

    @case
    def logical_and_dict_ids():
        # device i sends to i+3 by logical id, then to i-1 by a {axis: index} id
        def kernel(x_ref, o_ref, send, recv):
            me = lax.axis_index("x")
            a = pltpu.make_async_remote_copy(x_ref, o_ref.at[0], send, recv.at[0],
                                             device_id=lax.rem(me + 3, N),
                                             device_id_type=pl.DeviceIdType.LOGICAL)
            a.start()
            a.wait()
            b = pltpu.async_remote_copy(x_ref, o_ref.at[1], send, recv.at[1],
                                        device_id={"x": lax.rem(me + N - 1, N)})
            b.wait_send()
            b.wait_recv()
        f = sharded(kernel, jax.ShapeDtypeStruct((2, 8, 128), jnp.float32), P(None, "x"),
                    P(None, None, "x"),
                    [pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA((2,))])
        return np.asarray(f(X)).tolist()

    @case
    def ring_all_gather():
        # each step sends the slot received last step on to the right neighbour; the
        # receiver's window differs from the sender's (slots are relative to the device)
        def kernel(x_ref, o_ref, local_sem, send, recvs):
            step = pl.program_id(0)
            me = lax.axis_index("x")
            slot = lax.rem(me - step + N, N)

            @pl.when(step == 0)
            def _():
                pltpu.async_copy(x_ref, o_ref.at[me], local_sem).wait()

            copy = pltpu.make_async_remote_copy(
                o_ref.at[slot], o_ref.at[slot], send, recvs.at[step],
                device_id=(lax.rem(me + 1, N),), device_id_type=pl.DeviceIdType.MESH)
            copy.start()
            copy.wait()
        f = sharded(kernel, jax.ShapeDtypeStruct((N, 8, 128), jnp.float32), P("x", None),
                    P("x", None, None),
                    [pltpu.SemaphoreType.DMA] * 2 + [pltpu.SemaphoreType.DMA((N - 1,))],
                    grid=(N - 1,))
        x = X.reshape(N * 8, 128)
        return np.asarray(f(x)).reshape(N, N, 8, 128)[:, :, 0, :4].tolist()

    @case
    def regular_semaphores_and_barrier():
        # signal the right neighbour by (my id + 1), synchronize with both neighbours
        # through the barrier semaphore, then read what arrived
        def kernel(x_ref, o_ref, sem, out_sem):
            me = lax.axis_index("x")
            pl.semaphore_signal(sem, me + 1, device_id=(lax.rem(me + 1, N),),
                                device_id_type=pl.DeviceIdType.MESH)
            barrier = pltpu.get_barrier_semaphore()
            for nb in (lax.rem(me + 1, N), lax.rem(me + N - 1, N)):
                pl.semaphore_signal(barrier, device_id=(nb,),
                                    device_id_type=pl.DeviceIdType.MESH)
            pl.semaphore_wait(barrier, 2)
            left = lax.rem(me + N - 1, N)
            pl.semaphore_wait(sem, left + 1)  # blocks until the left neighbour's signal
            if READ_SEMAPHORES:  # (JAX's TPU interpreter has no semaphore_read)
                got, left = pl.semaphore_read(sem) + left + 1, pl.semaphore_read(sem)
            else:
                got = me

            @functools.partial(pl.run_scoped, buf=pltpu.VMEM((8, 128), jnp.float32),
                               s=pltpu.SemaphoreType.DMA)
            def _(buf, s):
                buf[...] = jnp.full((8, 128), got * 10 + left, jnp.float32)
                pltpu.async_copy(buf, o_ref, s).wait()
        f = sharded(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32), P(None, "x"),
                    P(None, "x"), [pltpu.SemaphoreType.REGULAR] * 2, collective=True)
        return np.asarray(f(X))[0, ::128].tolist()

    @case
    def local_semaphores():
        # (JAX's HLO interpreter mistypes indexed semaphore arrays: scalar ones here)
        def kernel(x_ref, o_ref, a, b):
            pl.semaphore_signal(b, 5)
            pl.semaphore_signal(a, jnp.int32(2))
            pl.semaphore_wait(b, 3)
            pl.semaphore_wait(a, 2, decrement=False)
            o_ref[0] = pl.semaphore_read(a)
            o_ref[1] = pl.semaphore_read(b)
        f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((2,), jnp.int32),
                           in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
                           out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
                           scratch_shapes=[pltpu.SemaphoreType.REGULAR] * 2,
                           interpret=True)  # JAX's TPU interpreter cannot semaphore_read
        return np.asarray(f(np.zeros(2, np.int32))).tolist()

    @case
    def dma_semaphore_counts():
        # a local DMA adds its element count (capped) to its semaphore; wait takes it back
        def kernel(x_ref, o_ref, small, big):
            copy = pltpu.make_async_copy(x_ref.at[:8], o_ref.at[:8], small)
            copy.start()
            started = pl.semaphore_read(small)
            copy.wait()
            whole = pltpu.async_copy(x_ref, o_ref, big)
            o_ref[0, 0] = started.astype(jnp.float32)
            o_ref[0, 1] = pl.semaphore_read(small).astype(jnp.float32)
            o_ref[0, 2] = pl.semaphore_read(big).astype(jnp.float32)
            whole.wait()
        f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((256, 256), jnp.float32),
                           scratch_shapes=[pltpu.SemaphoreType.DMA] * 2,
                           interpret=True)  # JAX's TPU interpreter cannot semaphore_read
        out = np.asarray(f(np.ones((256, 256), np.float32)))
        return [out[0, :4].tolist(), float(out.sum())]

    @case
    def scoped_buffers():
        @pl.with_scoped(pltpu.VMEM((4, 128), jnp.float32), sem=pltpu.SemaphoreType.DMA)
        def double(x_ref, o_ref, buf, sem):
            pltpu.async_copy(x_ref, buf, sem).wait()
            buf[...] = buf[...] * 2
            pltpu.sync_copy(buf, o_ref)

        def kernel(x_ref, o_ref):
            double(x_ref, o_ref)
            pl.delay(100)
        f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4, 128), jnp.float32),
                           in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                           out_specs=pl.BlockSpec(memory_space=pl.ANY), interpret=INTERP)
        return np.asarray(f(X[:4, :128]))[:, :3].tolist()

    @case
    def tensorcore_mesh_kernel():
        cores = pltpu.create_tensorcore_mesh("core", num_cores=2)

        def body(x_hbm, o_hbm, buf, sem):
            c = lax.axis_index("core")
            rows = pl.ds(c * 4, 4)
            pltpu.async_copy(x_hbm.at[rows], buf, sem).wait()
            buf[...] = buf[...] * 2 + c.astype(jnp.float32)

            @pltpu.run_on_first_core("core")
            def _():
                buf[0, 0] = -1.0
            pltpu.sync_copy(buf, o_hbm.at[rows])
        f = pl.kernel(body, out_type=jax.ShapeDtypeStruct((8, 8), jnp.float32), mesh=cores,
                      scratch_types=[pltpu.VMEM((4, 8), jnp.float32),
                                     pltpu.SemaphoreType.DMA],
                      interpret=INTERP)
        x = np.arange(64, dtype=np.float32).reshape(8, 8)
        return [repr(cores), np.asarray(jax.jit(f)(x)).tolist(), np.asarray(f(x)).tolist()]

    @case
    def forced_interpret_mode():
        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1
        def call():
            return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8,), jnp.float32))
        outside = call()
        with pltpu.force_tpu_interpret_mode():
            inside = call()
        pltpu.reset_tpu_interpret_mode_state()
        x = np.arange(8, dtype=np.float32)
        return [np.asarray(inside(x)).tolist(), error(lambda: outside(x))]

    @case
    def tpu_info():
        infos = [repr(pltpu.get_tpu_info_for_chip(v, n)) for v in pltpu.ChipVersion
                 for n in (1, 2) if n == 1 or v.supports_megacore]
        return [infos, error(pltpu.get_tpu_info), pltpu.is_tpu_device(),
                error(lambda: pltpu.get_tpu_info_for_chip(pltpu.ChipVersion.TPU_V5E, 2)),
                error(lambda: pltpu.create_tensorcore_mesh("core")),
                [str(v) for v in pltpu.ChipVersion], [repr(c) for c in pltpu.CoreType],
                [repr(e) for e in pltpu.SideEffectType], [repr(e) for e in pl.DeviceIdType],
                repr(pltpu.CORE_PARALLEL), repr(pltpu.SUBCORE_PARALLEL),
                pltpu.get_tpu_info_for_chip(pltpu.ChipVersion.TPU_V4, 1).is_split_chip,
                pltpu.get_tpu_info_for_chip(pltpu.ChipVersion.TPU_V6E, 1).is_matmul_supported(
                    jnp.int8, jnp.int8)]

    @case
    def semaphore_errors():
        def signal_array(x_ref, o_ref, sems):
            pl.semaphore_signal(sems, 1)
        def signal_float(x_ref, o_ref, sems):
            pl.semaphore_signal(sems.at[0], 1.5)
        def run(kernel):
            return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((2,), jnp.int32),
                                  scratch_shapes=[pltpu.SemaphoreType.REGULAR((2,))],
                                  interpret=INTERP)(np.zeros(2, np.int32))
        def signal_int16(x_ref, o_ref, sems):
            pl.semaphore_signal(sems.at[0], jnp.int16(1))
        def signal_value(x_ref, o_ref, sems):
            pl.semaphore_signal(jnp.zeros(()), 1)
        return [error(lambda: run(signal_array)), error(lambda: run(signal_float)),
                error(lambda: run(signal_int16)), error(lambda: run(signal_value))]
''')

ORACLE = textwrap.dedent('''
    import json, os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import jax, jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
    from jax.sharding import PartitionSpec as P, AxisType
    mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
    ns = dict(jax=jax, jnp=jnp, lax=lax, pl=pl, pltpu=pltpu, P=P, mesh=mesh)
    exec(CASES, ns)
    out = {}
    for name, fn in ns["cases"].items():
        try:
            out[name] = fn()
        except Exception as e:
            out[name] = ["raised", type(e).__name__, str(e)]
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def oracle():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               JAX_PLATFORMS="cpu")
    src = f"CASES = {CASES!r}\n" + ORACLE
    done = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, env=env,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def cases():
    mesh = jaxkit.make_mesh((8,), ("x",), devices=DEVICES, axis_types=(AxisType.Auto,))
    ns = dict(jax=jaxkit, jnp=kjnp, lax=klax, pl=kpl, pltpu=kpltpu, P=PartitionSpec, mesh=mesh)
    exec(CASES, ns)
    return ns["cases"]


CASE_NAMES = ["right_permute", "logical_and_dict_ids", "ring_all_gather",
              "regular_semaphores_and_barrier", "local_semaphores", "dma_semaphore_counts",
              "scoped_buffers",
              "tensorcore_mesh_kernel", "forced_interpret_mode", "tpu_info",
              "semaphore_errors"]


def _close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return bool(np.isclose(a, b, rtol=1e-6, atol=1e-6, equal_nan=True))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("name", CASE_NAMES)
def test_matches_jax(name, oracle, cases):
    assert name in oracle, sorted(oracle)
    got = json.loads(json.dumps(cases[name]()))
    want = oracle[name]
    assert _close(got, want), f"\njaxkit: {got}\njax:    {want}"


def test_all_cases_listed():
    assert sorted(CASE_NAMES) == sorted(
        line.split("def ", 1)[1].split("(")[0] for line, prev in zip(
            CASES.splitlines()[1:], CASES.splitlines()) if prev.strip() == "@case")


def test_remote_signal_counts(cases):
    # what JAX's TPU interpreter cannot show: the counts themselves (after the wait, 0 left;
    # before it, the left neighbour's id + 1)
    fn = cases["regular_semaphores_and_barrier"]
    fn.__globals__["READ_SEMAPHORES"] = True
    try:
        got = fn()
    finally:
        fn.__globals__["READ_SEMAPHORES"] = False
    assert got == [(i - 1) % 8 * 10 + 10 for i in range(8)]


def test_core_communication_is_refused():
    # cores of a core_map run one after the other in interpret mode: a barrier between
    # them cannot be interpreted, and says so
    cores = kpltpu.create_tensorcore_mesh("core", num_cores=2)

    def body(x_hbm, o_hbm, sem):
        kpltpu.core_barrier(sem, core_axis_name="core")
    f = kpl.kernel(body, out_type=jaxkit.ShapeDtypeStruct((2,), kjnp.float32), mesh=cores,
                   scratch_types=[kpltpu.SemaphoreType.REGULAR], interpret=True)
    with pytest.raises(NotImplementedError, match="core_index"):
        f(np.zeros(2, np.float32))


def _mesh():
    return jaxkit.make_mesh((8,), ("x",), devices=DEVICES, axis_types=(AxisType.Auto,))


@pytest.mark.parametrize("when", ["device", "data", "loop"])
def test_remote_copy_under_device_dependent_condition_raises(when):
    # every device runs a remote copy as a collective: under a condition differing between
    # devices XLA would abort waiting; the kernel is refused before it runs
    def kernel(x_ref, o_ref, send, recv):
        me = klax.axis_index("x")
        copy = kpltpu.make_async_remote_copy(x_ref, o_ref, send, recv,
                                             device_id=(klax.rem(me + 1, 8),))
        if when == "loop":  # as many steps as the device's index
            klax.fori_loop(0, me, lambda i, c: (copy.start(), c)[1], 0)
            return
        cond = me % 2 == 0 if when == "device" else x_ref[0, 0] > 0

        @kpl.when(cond)
        def _():
            copy.start()

    call = kpl.pallas_call(kernel, out_shape=jaxkit.ShapeDtypeStruct((8, 128), kjnp.float32),
                           in_specs=[kpl.BlockSpec(memory_space=kpl.ANY)],
                           out_specs=kpl.BlockSpec(memory_space=kpl.ANY),
                           scratch_shapes=[kpltpu.SemaphoreType.DMA] * 2, interpret=True)
    f = jaxkit.jit(jaxkit.shard_map(call, mesh=_mesh(), in_specs=PartitionSpec(None, "x"),
                                    out_specs=PartitionSpec(None, "x"), check_vma=False))
    with pytest.raises(NotImplementedError, match="may differ between devices"):
        f(np.ones((8, 1024), np.float32))


def test_remote_copy_under_uniform_condition_in_loop():
    # conditions on grid ids and loop counters are the same everywhere: allowed
    def kernel(x_ref, o_ref, send, recv):
        me = klax.axis_index("x")

        def body(i, carry):
            copy = kpltpu.make_async_remote_copy(x_ref, o_ref, send, recv,
                                                 device_id=(klax.rem(me + 1 + i, 8),))

            @kpl.when((i == 1) & (kpl.program_id(0) == 0))
            def _():
                copy.start()
                copy.wait()
            return carry
        klax.fori_loop(0, 2, body, 0)

    call = kpl.pallas_call(kernel, out_shape=jaxkit.ShapeDtypeStruct((8, 128), kjnp.float32),
                           in_specs=[kpl.BlockSpec(memory_space=kpl.ANY)],
                           out_specs=kpl.BlockSpec(memory_space=kpl.ANY), grid=(1,),
                           scratch_shapes=[kpltpu.SemaphoreType.DMA] * 2, interpret=True)
    f = jaxkit.jit(jaxkit.shard_map(call, mesh=_mesh(), in_specs=PartitionSpec(None, "x"),
                                    out_specs=PartitionSpec(None, "x"), check_vma=False))
    x = np.repeat(np.arange(8, dtype=np.float32), 128)[None].repeat(8, 0)
    out = np.asarray(f(x))
    np.testing.assert_array_equal(out[0, ::128], (np.arange(8) - 2) % 8)


def test_core_map_on_closed_over_refs():
    # pl.core_map as JAX's core_map.md uses it: refs made in a jitted function, a body per
    # core allocating its own buffers with run_scoped
    cores = kpltpu.create_tensorcore_mesh("core", num_cores=2)

    def per_core(x_hbm, o_hbm, buf, sem):
        c = klax.axis_index("core")
        cols = kpl.ds(c * 4, 4)
        kpltpu.async_copy(x_hbm.at[:, cols], buf, sem).wait()
        buf[...] = buf[...] * 10 + c.astype(kjnp.float32)
        kpltpu.async_copy(buf, o_hbm.at[:, cols], sem).wait()

    @jaxkit.jit
    def f(x):
        x_ref = jaxkit.new_ref(x)
        o_ref = jaxkit.new_ref(kjnp.zeros_like(x))

        @kpl.core_map(cores, interpret=True)
        def _():
            kpl.run_scoped(lambda *r: per_core(x_ref, o_ref, *r),
                           kpltpu.VMEM((2, 4), kjnp.float32), kpltpu.SemaphoreType.DMA)
        return o_ref[...]

    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    want = x * 10 + np.repeat([0.0, 1.0], 4)[None]
    np.testing.assert_array_equal(np.asarray(f(x)), want)


def test_swapping_between_cores_is_refused():
    # core_map.md's swap between the two cores of a device needs them running side by side
    cores = kpltpu.create_tensorcore_mesh("core", num_cores=2)

    def body(x_hbm, o_hbm, buf, send, recv):
        other = (klax.axis_index("core") + 1) % 2
        kpltpu.make_async_remote_copy(buf, buf, send, recv, device_id={"core": other}).start()
    f = kpl.kernel(body, out_type=jaxkit.ShapeDtypeStruct((2,), kjnp.float32), mesh=cores,
                   scratch_types=[kpltpu.VMEM((2,), kjnp.float32)]
                   + [kpltpu.SemaphoreType.DMA] * 2, interpret=True)
    with pytest.raises(NotImplementedError, match="between the cores of a pl.core_map"):
        f(np.zeros(2, np.float32))


def test_get_global_and_collective_axes_raise():
    with pytest.raises(NotImplementedError, match="get_global discharge is not supported"):
        kpl.get_global(kpltpu.SemaphoreType.REGULAR)
    with pytest.raises(NotImplementedError, match="collective_axes"):
        kpl.run_scoped(lambda r: None, kpltpu.VMEM((2,), kjnp.float32), collective_axes="x")
