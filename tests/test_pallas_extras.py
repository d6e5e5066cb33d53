"""The rest of Pallas's names against the JAX oracle on a CPU: ``pl.estimate_cost``,
``pl.lower_as_mlir``/``pallas_export_experimental``, ``jax.extend.pallas``, the TPU PRNG
(``prng_seed``, ``prng_random_bits``, ``stateful_*``, ``stochastic_round``: JAX's errors
eagerly and in interpret mode, zeros under ``InterpretParams``; ``sample_block`` with
values), and Triton's ``debug_barrier``/``elementwise_inline_asm`` (JAX's errors)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import jaxkit
import jaxkit.extend.pallas as kep
import jaxkit.numpy as kjnp
from jaxkit.experimental import pallas as kpl
from jaxkit.experimental.pallas import tpu as kpltpu
from jaxkit.experimental.pallas import triton as kplgpu

jax = pytest.importorskip("jax")
jjnp = pytest.importorskip("jax.numpy")
jpl = pytest.importorskip("jax.experimental.pallas")
jpltpu = pytest.importorskip("jax.experimental.pallas.tpu")
jplgpu = pytest.importorskip("jax.experimental.pallas.triton")
jep = pytest.importorskip("jax.extend.pallas")

LIBS = {"jax": (jax, jjnp, jpl, jpltpu, jplgpu), "jaxkit": (jaxkit, kjnp, kpl, kpltpu, kplgpu)}


def _outcome(thunk):
    try:
        out = thunk()
    except Exception as e:  # noqa: BLE001 - the class and message are compared
        return type(e).__name__, str(e).split("\n")[0]
    leaves = jax.tree.leaves(out) if not hasattr(out, "flops") else [out]
    return [repr(x) if hasattr(x, "flops") else (np.asarray(x).dtype.name,
                                                 np.asarray(x).tolist()) for x in leaves]


def _shape(J, jnp, shape, dtype):
    return J.ShapeDtypeStruct(shape, dtype)


COST_CASES = {
    "matmul_sin": lambda J, jnp: (lambda x: jnp.sin(x) @ x, _shape(J, jnp, (8, 8), jnp.float32)),
    "exp_sum": lambda J, jnp: (lambda x: jnp.exp(x).sum(), jnp.ones((8, 8))),
    "binops": lambda J, jnp: (lambda x, y: (x * y - x) / (y + 1), jnp.ones((4, 5)),
                              jnp.ones((4, 5))),
    "integer_pow": lambda J, jnp: (lambda x: x ** 5 + x ** 2, jnp.ones((3, 3))),
    "batched_dot": lambda J, jnp: (lambda a, b: jnp.einsum("bij,bjk->bik", a, b),
                                   jnp.ones((2, 3, 4)), jnp.ones((2, 4, 5))),
    "jit_inside": lambda J, jnp: (lambda x: J.jit(jnp.tanh)(x) - jnp.floor(x),
                                  jnp.ones((16,), jnp.bfloat16)),
}


@pytest.mark.parametrize("name", sorted(COST_CASES))
def test_estimate_cost_like_jax(name):
    got = {}
    for lib, (J, jnp, pl, _, _) in LIBS.items():
        fun, *args = COST_CASES[name](J, jnp)
        got[lib] = repr(pl.estimate_cost(fun, *args))
    assert got["jaxkit"] == got["jax"]


def _ops(text: str) -> list[str]:
    return re.findall(r"stablehlo\.\w+", str(text))


def test_lower_as_mlir_like_jax():
    got = {}
    for lib, (J, jnp, pl, _, _) in LIBS.items():
        def k(x_ref, o_ref, pl=pl):
            o_ref[...] = x_ref[...] * 2.0
        f = pl.pallas_call(k, out_shape=J.ShapeDtypeStruct((4,), jnp.float32), interpret=True)
        got[lib] = (_ops(pl.lower_as_mlir(jnp.sin, jnp.ones(3), platforms=["cpu"])),
                    "func.func public @main" in str(pl.lower_as_mlir(f, jnp.ones(4),
                                                                     platforms=["cpu"])))
        with pl.pallas_export_experimental(True) as v:
            got[lib] += (v,)
    assert got["jaxkit"] == got["jax"]


def test_extend_pallas_like_jax():
    for lib, ep in (("jax", jep), ("jaxkit", kep)):
        assert ep.GridMapping.__name__ == "GridMapping", lib

    class Params:
        pass

    def rule(ctx, *args, **params):
        return args

    kep.register_lowering_rule(Params, rule, "tpu")
    assert kep.get_lowering_rule(Params, "tpu") is rule
    assert kep.get_lowering_rule(object, "tpu") is None
    with pytest.raises(ValueError, match="Compiler params for platform tpu cannot be used "
                                         "for gpu lowering."):
        kep.get_lowering_rule(Params, "gpu")


# ---- the TPU PRNG and Triton operations: JAX's errors, zeros under its TPU interpreter ---------


def _kernel_case(body, out, interpret):
    def go(J, jnp, pl, pltpu, plgpu):
        def kernel(o_ref):
            o_ref[...] = body(J, jnp, pltpu, plgpu, o_ref)
        mode = pltpu.InterpretParams() if interpret == "tpu" else True
        return lambda: pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct(*out(jnp)),
                                      interpret=mode)()
    return go


def _seeded_bits(J, jnp, pltpu, plgpu, o_ref):
    pltpu.prng_seed(3)
    return pltpu.prng_random_bits(o_ref.shape) + 1


def _seeded_normal(J, jnp, pltpu, plgpu, o_ref):
    pltpu.prng_seed(1, 2)
    return pltpu.stateful_normal(o_ref.shape)


def _unseeded_uniform(J, jnp, pltpu, plgpu, o_ref):
    return pltpu.stateful_uniform(o_ref.shape, minval=1.0, maxval=2.0)


def _bits_in_loop(J, jnp, pltpu, plgpu, o_ref):
    return J.lax.fori_loop(0, 3, lambda i, c: c + pltpu.prng_random_bits(o_ref.shape),
                           jnp.zeros(o_ref.shape, jnp.int32))


def _barrier(J, jnp, pltpu, plgpu, o_ref):
    plgpu.debug_barrier()
    return jnp.ones(o_ref.shape)


def _inline_asm(J, jnp, pltpu, plgpu, o_ref):
    x = jnp.ones(o_ref.shape)
    return plgpu.elementwise_inline_asm("neg.f32 $0, $1;", args=[x], constraints="=r,r",
                                        pack=1, result_shape_dtypes=[J.ShapeDtypeStruct(
                                            x.shape, x.dtype)])[0]


_I32 = lambda jnp: ((2, 4), jnp.int32)  # noqa: E731
_F32 = lambda jnp: ((2, 4), jnp.float32)  # noqa: E731

PRNG_CASES = {
    "eager_seed": lambda J, jnp, pl, pltpu, plgpu: lambda: pltpu.prng_seed(3),
    "eager_bits": lambda J, jnp, pl, pltpu, plgpu: lambda: pltpu.prng_random_bits((2,)),
    "jit_bits": lambda J, jnp, pl, pltpu, plgpu: lambda: J.jit(
        lambda: pltpu.prng_random_bits((2,)))(),
    "eager_stochastic_round": lambda J, jnp, pl, pltpu, plgpu: lambda: pltpu.stochastic_round(
        jnp.ones(3), jnp.ones(3, jnp.uint32), target_dtype=jnp.bfloat16),
    "stochastic_round_shape": lambda J, jnp, pl, pltpu, plgpu: lambda: J.eval_shape(
        lambda x, b: pltpu.stochastic_round(x, b, target_dtype=jnp.bfloat16),
        jnp.ones(3), jnp.ones(3, jnp.uint32)).dtype.name,
    "stochastic_round_bad_bits": lambda J, jnp, pl, pltpu, plgpu: lambda: J.eval_shape(
        lambda x, b: pltpu.stochastic_round(x, b, target_dtype=jnp.bfloat16),
        jnp.ones(3), jnp.ones(3, jnp.int32)),
    "stochastic_round_bad_shape": lambda J, jnp, pl, pltpu, plgpu: lambda: J.eval_shape(
        lambda x, b: pltpu.stochastic_round(x, b, target_dtype=jnp.bfloat16),
        jnp.ones(3), jnp.ones(2, jnp.uint32)),
    "kernel_bits_interpret": _kernel_case(_seeded_bits, _I32, True),
    "kernel_bits_tpu_interpreter": _kernel_case(_seeded_bits, _I32, "tpu"),
    "kernel_bits_loop_tpu_interpreter": _kernel_case(_bits_in_loop, _I32, "tpu"),
    "kernel_normal_interpret": _kernel_case(_seeded_normal, _F32, True),
    "kernel_normal_tpu_interpreter": _kernel_case(_seeded_normal, _F32, "tpu"),
    "kernel_uniform_tpu_interpreter": _kernel_case(_unseeded_uniform, _F32, "tpu"),
    "kernel_debug_barrier": _kernel_case(_barrier, _F32, True),
    "kernel_inline_asm": _kernel_case(_inline_asm, _F32, True),
    "inline_asm_bad_shapes": lambda J, jnp, pl, pltpu, plgpu: lambda: J.eval_shape(
        lambda x, y: plgpu.elementwise_inline_asm(
            "", args=[x, y], constraints="", pack=1,
            result_shape_dtypes=[J.ShapeDtypeStruct((3,), jnp.float32)]),
        jnp.ones(3), jnp.ones(2)),
}


@pytest.mark.parametrize("name", sorted(PRNG_CASES))
def test_tpu_prng_and_triton_ops_like_jax(name):
    got = {lib: _outcome(PRNG_CASES[name](*libs)) for lib, libs in LIBS.items()}
    assert got["jaxkit"] == got["jax"]


SAMPLE_CASES = {
    "uniform_2d": (lambda J: J.random.uniform, (4, 6), (2, 3), (8, 12), (1, 1), {}),
    "normal_2d": (lambda J: J.random.normal, (4, 6), (2, 3), (8, 12), (0, 1), {}),
    "bits_ragged_total": (lambda J: J.random.bits, (2, 4), (2, 2), (5, 7), (2, 1), {}),
    "uniform_kwargs": (lambda J: J.random.uniform, (4,), (2,), (16,), (3,),
                       {"minval": -2.0, "maxval": 5.0}),
    "bad_tile_rank": (lambda J: J.random.normal, (4, 6), (2,), (8, 12), (1, 1), {}),
}


@pytest.mark.parametrize("name", sorted(SAMPLE_CASES))
def test_sample_block_like_jax(name):
    sampler, block, tile, total, index, kw = SAMPLE_CASES[name]
    got = {}
    for lib, (J, jnp, pl, pltpu, _) in LIBS.items():
        key = J.random.key(42)
        got[lib] = _outcome(lambda: pltpu.sample_block(
            sampler(J), key, block_size=block, tile_size=tile, total_size=total,
            block_index=index, **kw))
    assert got["jaxkit"] == got["jax"]


def test_sample_block_in_kernel_is_block_invariant():
    # jaxkit only (JAX refuses the captured key): blocks of 8x128 and 16x64 give one array
    key = jaxkit.random.PRNGKey(7)

    def run(block, grid):
        def kernel(k_ref, o_ref):
            o_ref[...] = kpltpu.sample_block(jaxkit.random.uniform, k_ref[...], block_size=block,
                                             tile_size=(8, 64), total_size=(16, 256))
        return kpl.pallas_call(kernel, out_shape=jaxkit.ShapeDtypeStruct((16, 256),
                                                                         kjnp.float32),
                               grid=grid, in_specs=[kpl.BlockSpec((2,), lambda i, j: (0,))],
                               out_specs=kpl.BlockSpec(block, lambda i, j: (i, j)),
                               interpret=True)(key)
    np.testing.assert_array_equal(np.asarray(run((8, 128), (2, 2))),
                                  np.asarray(run((16, 64), (1, 4))))


def test_to_pallas_key_says_what_is_missing():
    with pytest.raises(NotImplementedError, match="to_pallas_key"):
        kpltpu.to_pallas_key(jaxkit.random.key(0))
