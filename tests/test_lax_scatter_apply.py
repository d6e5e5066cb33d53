"""``lax.scatter_apply`` and ``x.at[idx].apply`` against the JAX oracle, and the ``update_jaxpr``
/ ``update_consts`` parameters that every scatter primitive carries: values (duplicate indices
apply ``func`` repeatedly), dimension numbers, modes, ``jit`` vs eager, ``vmap`` vs a Python
loop, jaxpr text, the eager program cache and the errors (``scatter_apply`` is not
differentiable, as in JAX)."""
import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit import core, lax
from jaxkit.interpreters import ad
from jaxkit.interpreters import dispatch as _dispatch

jax = pytest.importorskip("jax")
jjnp = jax.numpy

RNG = np.random.default_rng(0)
F32 = RNG.standard_normal((5, 3)).astype(np.float32)

POINT = {"update_window_dims": (), "inserted_window_dims": (0, 1),
         "scatter_dims_to_operand_dims": (0, 1)}
ROW = {"update_window_dims": (1,), "inserted_window_dims": (0,),
       "scatter_dims_to_operand_dims": (0,)}
WINDOW = {"update_window_dims": (1, 2), "inserted_window_dims": (),
          "scatter_dims_to_operand_dims": (0, 1)}
BATCHED = {"update_window_dims": (2,), "inserted_window_dims": (1,),
           "scatter_dims_to_operand_dims": (1,), "operand_batching_dims": (0,),
           "scatter_indices_batching_dims": (0,)}


def _i32(*rows):
    return np.array(rows, np.int32)


# name -> (operand, indices, dimension numbers, update_shape, func name, keyword arguments)
CASES = {
    "points_duplicates": (F32, _i32([0, 1], [4, 2], [0, 1], [0, 1]), POINT, (4,), "sin", {}),
    "rows_duplicates": (F32, _i32([1], [3], [1]), ROW, (3, 3), "affine", {}),
    "overlapping_windows": (RNG.standard_normal((6, 4)).astype(np.float32),
                            _i32([0, 0], [1, 1], [0, 0]), WINDOW, (3, 2, 2), "affine", {}),
    "batching_dims": (RNG.standard_normal((2, 5, 3)).astype(np.float32),
                      np.array([[[1], [4], [1]], [[0], [0], [2]]], np.int32), BATCHED,
                      (2, 3, 3), "sin", {}),
    "clip": (F32, _i32([1], [7], [-3], [4]), ROW, (4, 3), "affine", {"mode": "clip"}),
    "fill": (F32, _i32([1], [7], [-3], [4]), ROW, (4, 3), "affine", {"mode": "fill"}),
    "promise_in_bounds": (F32, _i32([2], [0]), ROW, (2, 3), "sin",
                          {"mode": "promise_in_bounds"}),
    "sorted_unique": (F32, _i32([0], [2], [3]), ROW, (3, 3), "sin",
                      {"indices_are_sorted": True, "unique_indices": True}),
    "int32": (np.arange(15, dtype=np.int32).reshape(5, 3), _i32([1], [1], [4]), ROW, (3, 3),
              "affine", {}),
}


def _func(name, np_mod):
    if name == "sin":
        return np_mod.sin
    return lambda v: v * 2 + 1


def _run(module, np_mod, name, operand):
    _, indices, dn, update_shape, func, kw = CASES[name]
    return module.lax.scatter_apply(operand, indices, _func(func, np_mod),
                                    module.lax.ScatterDimensionNumbers(**dn),
                                    update_shape=update_shape, **kw)


class _Kit:
    lax = lax


@pytest.mark.parametrize("name", list(CASES))
def test_values_match_jax_and_jit_matches_eager(name):
    operand = CASES[name][0]
    want = np.asarray(_run(jax, jjnp, name, operand))
    got = _run(_Kit, jnp, name, operand)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)
    jitted = jaxkit.jit(lambda x: _run(_Kit, jnp, name, x))(operand)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(got), rtol=1e-6, atol=1e-6)


def test_duplicate_indices_apply_func_repeatedly():
    x = np.array([0.5, 1.0, 2.0, 3.0], np.float32)
    got = jnp.asarray(x).at[np.array([0, 0, 0, 2, 2])].apply(jnp.sin)
    want = x.copy()
    want[0] = np.sin(np.sin(np.sin(x[0])))
    want[2] = np.sin(np.sin(x[2]))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    # A gather-apply-scatter would apply it once: the old, wrong result differs.
    assert not np.allclose(np.asarray(got)[0], np.sin(x[0]))


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0), (1, None), (2, 1)])
def test_vmap_matches_loop(in_axes):
    operands = RNG.standard_normal((4, 5, 3)).astype(np.float32)
    indices = np.array([[[1], [3], [1]], [[0], [0], [0]], [[4], [2], [4]], [[2], [9], [2]]],
                       np.int32)
    operands = np.moveaxis(operands, 0, in_axes[0]) if in_axes[0] is not None else F32
    indices = np.moveaxis(indices, 0, in_axes[1]) if in_axes[1] is not None else indices[0]
    dn = lax.ScatterDimensionNumbers(**ROW)

    def f(x, i):
        return lax.scatter_apply(x, i, lambda v: jnp.cos(v) * 3, dn, update_shape=(3, 3),
                                 mode="clip")

    got = jaxkit.vmap(f, in_axes=in_axes)(operands, indices)
    want = [f(np.take(operands, k, axis=in_axes[0]) if in_axes[0] is not None else operands,
              np.take(indices, k, axis=in_axes[1]) if in_axes[1] is not None else indices)
            for k in range(4)]
    np.testing.assert_allclose(np.asarray(got), np.stack([np.asarray(w) for w in want]),
                               rtol=1e-6)


def test_vmap_of_at_apply_matches_jax():
    xs = RNG.standard_normal((3, 6)).astype(np.float32)
    idx = np.array([[0, 0, 5], [1, 2, 1], [4, 4, 4]], np.int32)
    got = jaxkit.vmap(lambda x, i: x.at[i].apply(jnp.exp))(xs, idx)
    want = jax.vmap(lambda x, i: x.at[i].apply(jjnp.exp))(xs, idx)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


# ---- .at[].apply -----------------------------------------------------------------------------

AT_INDEXES = {
    "duplicates": lambda: np.array([0, 1, 1, -1, 1]),
    "int": lambda: 2,
    "slice": lambda: slice(1, 4),
    "rows and columns": lambda: (np.array([0, 0, 2]), np.array([1, 1, 3])),
    "mask": lambda: np.arange(6) % 2 == 0,
    "out of bounds": lambda: np.array([1, 9, -9]),
}


@pytest.mark.parametrize("index", list(AT_INDEXES))
@pytest.mark.parametrize("kw", [{}, {"mode": "clip"}, {"mode": "drop"}])
def test_at_apply_matches_jax(index, kw):
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    idx = AT_INDEXES[index]()
    want = jjnp.asarray(x).at[idx].apply(jjnp.tanh, **kw)
    got = jnp.asarray(x).at[idx].apply(jnp.tanh, **kw)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    if index != "mask":
        got_jit = jaxkit.jit(lambda a: a.at[idx].apply(jnp.tanh, **kw))(x)
        np.testing.assert_allclose(np.asarray(got_jit), np.asarray(want), rtol=1e-6)


def test_at_apply_keeps_dtype_and_weak_type():
    for make_kit, make_jax in [(lambda: jnp.asarray(2.0), lambda: jjnp.asarray(2.0)),
                               (lambda: jnp.arange(4), lambda: jjnp.arange(4))]:
        got = make_kit().at[()].apply(lambda v: v * 3)
        want = make_jax().at[()].apply(lambda v: v * 3)
        assert got.dtype == want.dtype and got.weak_type == want.weak_type
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_closing_over_a_concrete_array_gives_update_consts():
    # (JAX 0.10.2 fails here: its parameters must be hashable. Here the constant is kept in
    # update_consts and lowered as a StableHLO constant.)
    c = jnp.ones(3, np.float32)
    x, i = np.arange(5, dtype=np.float32), np.array([0, 1, 1], np.int32)

    def f(x, i):
        return x.at[i].apply(lambda v: v * c.sum())

    eqn = [e for e in jaxkit.make_jaxpr(f)(x, i).eqns if e.primitive is lax.scatter_p][0]
    assert len(eqn.params["update_consts"]) == 1
    want = np.array([0, 9, 2, 3, 4], np.float32)
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(x), i)), want)
    np.testing.assert_array_equal(np.asarray(jaxkit.jit(f)(x, i)), want)
    np.testing.assert_array_equal(np.asarray(jaxkit.vmap(f, (0, None))(np.stack([x, x]), i)),
                                  np.stack([want, want]))


# ---- jaxpr text ------------------------------------------------------------------------------

X5 = np.arange(5, dtype=np.float32)
I3 = np.array([0, 1, 1], np.int32)
Y3 = np.array([2.0, 3.0, 4.0], np.float32)

PRINTED = {
    "set": lambda m: (lambda x, i, y: x.at[i].set(y)),
    "add": lambda m: (lambda x, i, y: x.at[i].add(y)),
    "subtract": lambda m: (lambda x, i, y: x.at[i].subtract(y)),
    "mul": lambda m: (lambda x, i, y: x.at[i].mul(y)),
    "min": lambda m: (lambda x, i, y: x.at[i].min(y)),
    "max": lambda m: (lambda x, i, y: x.at[i].max(y)),
    "apply": lambda m: (lambda x, i, y: x.at[i].apply(m.sin)),
    "apply scalar index": lambda m: (lambda x, i, y: x.at[0].apply(m.sin, mode="clip")),
    "apply with literal": lambda m: (lambda x, i, y: x.at[i].apply(lambda v: v * np.float32(3))),
    "apply 2-D": lambda m: (lambda x, i, y: x.reshape(1, 5).at[:, i].apply(m.cos)),
    "int add": lambda m: (lambda x, i, y: x.astype(np.int32).at[i].add(y.astype(np.int32))),
}


@pytest.mark.parametrize("name", list(PRINTED))
def test_jaxpr_prints_like_jax(name):
    ours = str(jaxkit.make_jaxpr(PRINTED[name](jnp))(X5, I3, Y3))
    theirs = str(jax.make_jaxpr(PRINTED[name](jjnp))(X5, I3, Y3))
    assert ours == theirs


def test_lax_scatter_apply_jaxpr_prints_like_jax():
    def f(m):
        return lambda x: m.lax.scatter_apply(x, np.array([[1], [1]], np.int32), m.numpy.exp,
                                             m.lax.ScatterDimensionNumbers(**ROW),
                                             update_shape=(2, 3), mode="clip")
    assert str(jaxkit.make_jaxpr(f(jaxkit))(F32)) == str(jax.make_jaxpr(f(jax))(F32))


def test_equal_scatters_share_one_update_jaxpr_and_one_program():
    x, i, u = jnp.asarray(F32), np.array([[1], [1]], np.int32), np.ones((2, 3), np.float32)
    dn = lax.ScatterDimensionNumbers(**ROW)
    lax.scatter_add(x, i, u, dn)
    lax.scatter_apply(x, i, jnp.sin, dn, update_shape=(2, 3))
    before = _dispatch.programs.compiles
    lax.scatter_add(x, i, u, dn)
    lax.scatter_apply(x, i, jnp.sin, dn, update_shape=(2, 3))
    assert _dispatch.programs.compiles == before
    jaxprs = [jaxkit.make_jaxpr(lambda x: lax.scatter_add(x, i, u, dn))(F32) for _ in range(2)]
    assert jaxprs[0].eqns[0].params["update_jaxpr"] is jaxprs[1].eqns[0].params["update_jaxpr"]


# ---- errors ----------------------------------------------------------------------------------

def _error(fn):
    """The class, message and notes (JAX's traceback-filtering note) of what ``fn`` raises."""
    with pytest.raises(Exception) as info:
        fn()
    return info.type, str(info.value), getattr(info.value, "__notes__", [])


@pytest.mark.parametrize("transform", ["grad", "jvp", "linearize"])
def test_not_differentiable_as_in_jax(transform):
    def run(m, np_mod):
        f = lambda x: x.at[np.array([0, 1, 1])].apply(np_mod.sin)  # noqa: E731
        x = np.arange(3, dtype=np.float32)
        if transform == "grad":
            return m.grad(lambda x: f(x).sum())(x)
        if transform == "jvp":
            return m.jvp(f, (x,), (x,))
        return m.linearize(f, x)

    want = _error(lambda: run(jax, jjnp))
    assert want[:2] == (NotImplementedError, "scatter_apply JVP not implemented")
    assert _error(lambda: run(jaxkit, jnp)) == want


def test_differentiating_other_arguments_still_works():
    # The scatter_apply does not depend on the differentiated argument: no JVP rule runs.
    x = np.arange(3, dtype=np.float32)
    got = jaxkit.grad(lambda y: jnp.asarray(x).at[0].apply(jnp.sin).sum() * y)(2.0)
    want = jax.grad(lambda y: jjnp.asarray(x).at[0].apply(jjnp.sin).sum() * y)(2.0)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_transpose_rule_refuses_scatter_apply():
    x = np.arange(5, dtype=np.float32)
    eqn = [e for e in jaxkit.make_jaxpr(lambda x: x.at[I3].apply(jnp.sin))(x).eqns
           if e.primitive is lax.scatter_p][0]
    operand, indices, updates = (ad.UndefinedPrimal(core.get_aval(x)),
                                 np.array([[0], [1], [1]], np.int32), np.zeros(3, np.float32))
    with pytest.raises(NotImplementedError, match="scatter_apply transpose not implemented"):
        ad.transpose_rules[lax.scatter_p](x, operand, indices, updates, **eqn.params)


@pytest.mark.parametrize("wrap", ["vmap", "jit"])
def test_func_closing_over_a_tracer_is_refused_as_in_jax(wrap):
    def run(m, np_mod):
        f = lambda x, y: x.at[0].apply(lambda v: v * y)  # noqa: E731
        if wrap == "vmap":
            return m.vmap(f)(np_mod.ones((2, 3)), np_mod.ones(2))
        return m.jit(f)(np_mod.ones(3), 2.0)

    assert _error(lambda: run(jax, jjnp))[0] is NotImplementedError
    with pytest.raises(NotImplementedError, match="closes over a traced value"):
        run(jaxkit, jnp)


def test_func_returning_a_non_array_raises_value_error_as_in_jax():
    assert _error(lambda: jjnp.arange(3.0).at[0].apply(lambda v: (v, v)))[0] is ValueError
    with pytest.raises(ValueError, match="func must return an array, got tuple"):
        jnp.arange(3.0).at[0].apply(lambda v: (v, v))


def test_func_changing_the_dtype_is_a_type_error():
    # (JAX fails later, when XLA verifies the lowered scatter body, with a ValueError.)
    with pytest.raises(TypeError, match=r"operand's type f32\[\] to the same type, but <lambda> "
                                        r"returns bool\[\]"):
        jnp.arange(3.0).at[0].apply(lambda v: v > 0)


def test_update_shape_must_match_the_indices():
    dn = lax.ScatterDimensionNumbers(**ROW)
    with pytest.raises(TypeError, match="Bounds of the scatter dimensions of updates must be"):
        lax.scatter_apply(F32, np.array([[1], [2]], np.int32), jnp.sin, dn, update_shape=(3, 3))
