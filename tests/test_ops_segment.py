"""jax.ops segment reductions against JAX (values, dtypes, dropped ids, empty segments) and
under jit, vmap and grad."""
import numpy as np
import pytest

import jaxkit as jk
import jaxkit.numpy as jnp

jax = pytest.importorskip("jax")

FUNCS = ["segment_sum", "segment_prod", "segment_max", "segment_min"]
CASES = [
    (np.arange(6.0, dtype=np.float32), np.array([0, 0, 2, 2, 2, 5]), 4),
    (np.arange(6, dtype=np.int32), np.array([0, 0, 2, 2, 2, 5]), 4),
    (np.arange(6.0, dtype=np.float32), np.array([0, -1, 1, 7, 1, 0]), 3),
    (np.arange(12.0, dtype=np.float32).reshape(6, 2), np.array([1, 1, 0, 3, 3, 3]), None),
    (np.array([True, False, True]), np.array([0, 1, 1]), 3),
]


@pytest.mark.parametrize("name", FUNCS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_matches_jax(name, case):
    data, ids, n = CASES[case]
    try:
        want = getattr(jax.ops, name)(data, ids, n)
    except TypeError:  # JAX refuses (sum/prod of bools): so must jaxkit
        with pytest.raises(TypeError):
            getattr(jk.ops, name)(data, ids, n)
        return
    got = getattr(jk.ops, name)(data, ids, n)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_under_jit_vmap_and_grad():
    data = np.arange(6.0, dtype=np.float32)
    ids = np.array([0, 0, 2, 2, 2, 1])
    f = jk.jit(lambda d, i: jk.ops.segment_sum(d, i, num_segments=3))
    np.testing.assert_array_equal(np.asarray(f(data, ids)), [1, 5, 9])
    batched = jk.vmap(lambda d: jk.ops.segment_max(d, ids, 3))(np.stack([data, -data]))
    np.testing.assert_array_equal(np.asarray(batched), [[1, 5, 4], [0, -5, -2]])
    g = jk.grad(lambda d: jnp.sum(jk.ops.segment_sum(d, ids, 3) ** 2))(data)
    np.testing.assert_array_equal(np.asarray(g), 2 * np.array([1, 1, 9, 9, 9, 5]))
    with pytest.raises(jk.errors.ConcretizationTypeError, match="num_segments"):
        jk.jit(lambda d, i: jk.ops.segment_sum(d, i))(data, ids)
