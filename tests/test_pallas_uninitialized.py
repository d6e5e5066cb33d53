"""What unwritten memory holds in Pallas's interpret mode, as JAX's interpreters give it:
the generic one (``interpret=True``: NaN, the least integer, False) and the TPU one
(``pltpu.InterpretParams``: by ``uninitialized_memory``, "nan": NaN, the greatest integer,
True; "zero": zeros), for unwritten outputs, scratch buffers, ``pl.run_scoped`` buffers and
the padding of partial blocks."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.experimental import pallas as jpl
from jax.experimental.pallas import tpu as jpltpu

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit.experimental import pallas as kpl
from jaxkit.experimental.pallas import tpu as kpltpu

SIDES = {"jax": (jax, jjnp, jpl, jpltpu), "jaxkit": (jaxkit, kjnp, kpl, kpltpu)}
MODES = {"generic": lambda pltpu: True,
         "tpu-nan": lambda pltpu: pltpu.InterpretParams(),
         "tpu-zero": lambda pltpu: pltpu.InterpretParams(uninitialized_memory="zero")}


def _unwritten(dtype):
    def run(J, jnp, pl, pltpu, interpret):
        def kernel(x_ref, o_ref):
            pass
        return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((2,), dtype),
                              interpret=interpret)(np.zeros(2, dtype))
    return run


def _scratch_and_scoped(J, jnp, pl, pltpu, interpret):
    def kernel(x_ref, o_ref, s_ref):
        o_ref[0:2] = s_ref[...]

        def body(t_ref):
            o_ref[2:4] = t_ref[...]
        pl.run_scoped(body, pltpu.VMEM((2,), jnp.int32))
    return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((4,), np.int32),
                          scratch_shapes=[pltpu.VMEM((2,), jnp.int32)],
                          interpret=interpret)(np.zeros(4, np.int32))


def _padding(J, jnp, pl, pltpu, interpret):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    spec = pl.BlockSpec((2,), lambda i: (i,))
    return pl.pallas_call(kernel, out_shape=J.ShapeDtypeStruct((4,), np.float32), grid=(2,),
                          in_specs=[spec], out_specs=spec,
                          interpret=interpret)(np.ones(3, np.float32))  # a partial block


CASES = {"float32 output": _unwritten(np.float32), "int32 output": _unwritten(np.int32),
         "bool output": _unwritten(np.bool_), "scratch and run_scoped": _scratch_and_scoped,
         "padding": _padding}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES)
def test_unwritten_memory_as_jax(case, mode):
    outs = {}
    for side, (J, jnp, pl, pltpu) in SIDES.items():
        out = np.asarray(CASES[case](J, jnp, pl, pltpu, MODES[mode](pltpu)))
        outs[side] = out
    assert outs["jaxkit"].dtype == outs["jax"].dtype
    np.testing.assert_array_equal(outs["jaxkit"], outs["jax"])


def test_forced_interpret_mode_applies_its_memory_setting():
    with kpltpu.force_tpu_interpret_mode(kpltpu.InterpretParams(uninitialized_memory="zero")):
        out = _unwritten(np.float32)(jaxkit, kjnp, kpl, kpltpu, False)
    np.testing.assert_array_equal(np.asarray(out), np.zeros(2, np.float32))


def test_an_unknown_setting_is_refused_with_the_choices():
    params = kpltpu.InterpretParams(uninitialized_memory="garbage")
    with pytest.raises(ValueError, match="the choices are 'nan' and 'zero'"):
        _unwritten(np.float32)(jaxkit, kjnp, kpl, kpltpu, params)
