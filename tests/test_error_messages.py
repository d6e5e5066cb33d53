"""The errors of common mistakes, against JAX itself: class and whole message, as JAX words
them (the shapes or types at fault, and what to use instead where JAX says it). Each record
runs on both sides. Differences kept, with their reasons: a clear error where JAX fails in
MLIR (a negative shape for random.normal or ShapeDtypeStruct); and the class paths in a
has_aux error."""
import re

import jax
import numpy as np
import pytest

import jaxkit


def _a(J):
    return J.numpy.ones((2, 3))


class _NotAnArray:
    pass


def _two(x, y):
    return x


def _many(*a):
    return a[0]


def _generator(x):
    yield x


def _positional_only(x, /):
    return x


def _custom_jvp_with_bad_tangent(J):
    f = J.custom_jvp(lambda x: x)
    f.defjvp(lambda p, t: (p[0], J.numpy.ones(3)))
    return J.jvp(f, (1.,), (1.,))


CASES = {
    "matmul_shapes": lambda J: _a(J) @ J.numpy.ones((4, 5)),
    "dot_shapes": lambda J: J.numpy.dot(_a(J), J.numpy.ones((4, 5))),
    "add_shapes": lambda J: _a(J) + J.numpy.ones((4, 5)),
    "reshape_size": lambda J: _a(J).reshape(4, 2),
    "concatenate_shapes": lambda J: J.numpy.concatenate([_a(J), J.numpy.ones((4, 5))]),
    "stack_shapes": lambda J: J.numpy.stack([_a(J), J.numpy.ones((4, 5))]),
    "lax_ranks": lambda J: J.lax.add(_a(J), J.numpy.ones(3, J.numpy.int32)),
    "static_unhashable": lambda J: J.jit(lambda x, y: x, static_argnums=1)(1., [1]),
    "static_keyword_unhashable": lambda J: J.jit(lambda x, n: x * n,
                                                 static_argnames="n")(1., n=[1]),
    "grad_of_int": lambda J: J.grad(lambda x: x * 2)(1),
    "grad_of_vector_output": lambda J: J.grad(lambda x: x)(J.numpy.ones(2)),
    "vmap_sizes": lambda J: J.vmap(lambda x, y: x + y)(J.numpy.ones(2), J.numpy.ones(3)),
    "vmap_axis": lambda J: J.vmap(lambda x: x, in_axes=2)(J.numpy.ones(2)),
    "index_float": lambda J: _a(J)[1.5],
    "index_too_many": lambda J: _a(J)[0, 0, 0],
    "setitem": lambda J: _a(J).__setitem__(0, 1),
    "setitem_traced": lambda J: J.jit(lambda x: x.__setitem__(0, 1))(_a(J)),
    "where_shapes": lambda J: J.numpy.where(J.numpy.ones(2) > 0, J.numpy.ones(3), 0),
    "split_unequal": lambda J: J.numpy.split(J.numpy.ones(5), 2),
    "random_int_key": lambda J: J.random.normal(0, (2,)),
    "random_int_shape": lambda J: J.random.normal(J.random.key(0), 3),
    "cond_branch_types": lambda J: J.lax.cond(True, lambda: 1., lambda: J.numpy.ones(2)),
    "scan_carry_type": lambda J: J.lax.scan(lambda c, x: (c + x, x), 0., J.numpy.ones((2, 3))),
    "astype_bad_dtype": lambda J: _a(J).astype("foo"),
    "transpose_not_permutation": lambda J: J.numpy.transpose(_a(J), (0, 0)),
    "inv_not_square": lambda J: J.numpy.linalg.inv(_a(J)),
    "array_ragged": lambda J: J.numpy.array([[1, 2], [3]]),
    "array_of_string": lambda J: J.numpy.array("abc"),
    "dynamic_slice_rank": lambda J: J.lax.dynamic_slice(_a(J), (0,), (1,)),
    "broadcast_to_shape": lambda J: J.numpy.broadcast_to(_a(J), (3, 3)),
    "take_bad_mode": lambda J: J.numpy.take(_a(J), 0, mode="bad"),
    "fori_float_bound": lambda J: J.lax.fori_loop(0., 3, lambda i, x: x, 0),
    "fori_int_bounds_of_two_types": lambda J: J.lax.fori_loop(
        np.int32(0), np.int16(3), lambda i, x: x, 0),
    "zeros_negative": lambda J: J.numpy.zeros(-1),
    "ones_negative": lambda J: J.numpy.ones((2, -1)),
    "full_negative": lambda J: J.numpy.full(-1, 0.),
    "iota_negative": lambda J: J.lax.iota(J.numpy.int32, -1),
    "eye_negative": lambda J: J.numpy.eye(-1),
    "zeros_like_negative": lambda J: J.numpy.zeros_like(J.numpy.ones(2), shape=(-1,)),
    "broadcast_negative": lambda J: J.lax.broadcast(1., (-1,)),
    "tree_map_structures": lambda J: J.tree.map(lambda x, y: x, (1, 2), (1,)),
    "tree_map_types": lambda J: J.tree_util.tree_map(lambda x, y: x, {"a": (1, 2)},
                                                     {"a": [1, 2]}),
    "tree_map_keys": lambda J: J.tree.map(lambda x, y: x, {"a": 1}, {"b": 1}),
    "device_put_object": lambda J: J.device_put(_NotAnArray()),
    "device_put_string": lambda J: J.device_put("abc"),
    "jit_object_argument": lambda J: J.jit(_two)(1., _NotAnArray()),
    "jit_object_in_pytree": lambda J: J.jit(_two)(1., y={"a": [1, _NotAnArray()]}),
    "jit_object_in_varargs": lambda J: J.jit(_many)(1., _NotAnArray()),
    "jit_string_argument": lambda J: J.jit(_two)(1., "abc"),
    "lax_object_operand": lambda J: J.lax.add(_NotAnArray(), 1.),
    "grad_object_argument": lambda J: J.grad(lambda x: x)(_NotAnArray()),
    "vmap_object_argument": lambda J: J.vmap(lambda x: x)(_NotAnArray()),
    "einsum_label_sizes": lambda J: J.numpy.einsum("ij,jk->ik", _a(J), _a(J)),
    "einsum_repeated_label": lambda J: J.numpy.einsum("ii->i", _a(J)),
    # functions returning what is no array (the cond traces true_fun first, as JAX)
    "jit_returns_string": lambda J: J.jit(lambda x: "s")(1.),
    "jit_returns_object_in_tuple": lambda J: J.jit(lambda x: (x, _NotAnArray()))(1.),
    "grad_returns_string": lambda J: J.grad(lambda x: "s")(1.),
    "scan_returns_string": lambda J: J.lax.scan(lambda c, x: (c, "s"), 0., J.numpy.ones(2)),
    "cond_returns_strings": lambda J: J.lax.cond(True, lambda: "s", lambda: "t"),
    "vmap_returns_string": lambda J: J.vmap(lambda x: "s")(J.numpy.ones(2)),
    "eval_shape_returns_string": lambda J: J.eval_shape(lambda x: "s", 1.),
    "make_jaxpr_returns_string": lambda J: J.make_jaxpr(lambda x: {"a": "s"})(1.),
    "while_returns_string": lambda J: J.lax.while_loop(lambda c: False, lambda c: "s", 0.),
    "bernoulli_p_shape": lambda J: J.random.bernoulli(J.random.key(0), J.numpy.ones(3), (2,)),
    "randint_float_bound": lambda J: J.random.randint(J.random.key(0), (2,), 0.5, 3),
    "normal_int_dtype": lambda J: J.random.normal(J.random.key(0), (2,), J.numpy.int32),
    "reshape_two_unknowns": lambda J: J.numpy.ones(6).reshape(-1, -1),
    "boolean_index_under_jit": lambda J: J.jit(lambda x: x[x > 0])(J.numpy.ones(3)),
    # axis specifications that are no prefix of the value (JAX's pytree diff)
    "vmap_out_axes_prefix": lambda J: J.vmap(lambda x: (x, x), out_axes=(0,))(J.numpy.ones(2)),
    "vmap_in_axes_keys": lambda J: J.vmap(lambda x: x, in_axes=({"a": 0},))(
        {"b": J.numpy.ones(2)}),
    "vmap_in_axes_lengths": lambda J: J.vmap(lambda x: x, in_axes=((0, 0),))(
        (J.numpy.ones(2),)),
    "vmap_in_axes_types": lambda J: J.vmap(lambda x: x, in_axes=([0, 1],))(
        (J.numpy.ones(2), J.numpy.ones(2))),
    "vjp_cotangent_shape": lambda J: J.vjp(J.numpy.sin, J.numpy.ones(2))[1](J.numpy.ones(3)),
    "linearize_tangent_shape": lambda J: J.linearize(J.numpy.sin, J.numpy.ones(2))[1](
        J.numpy.ones(3)),
    "cond_vector_predicate": lambda J: J.lax.cond(J.numpy.ones(2), lambda: 1., lambda: 2.),
    "while_float_condition": lambda J: J.lax.while_loop(lambda c: c, lambda c: c, 1.),
    "scan_leading_sizes": lambda J: J.lax.scan(lambda c, x: (c, x), 0.,
                                               (J.numpy.ones(2), J.numpy.ones(3))),
    "jit_donate_argnums_range": lambda J: J.jit(lambda x: x, donate_argnums=3)(1.),
    "jit_static_argnames_unknown": lambda J: J.jit(lambda x: x, static_argnames="y")(1.),
    "jit_static_argnames_positional_only": lambda J: J.jit(_positional_only,
                                                           static_argnames="x")(1.),
    "custom_jvp_tangent_shape": _custom_jvp_with_bad_tangent,
    "int_too_large_for_jnp": lambda J: J.numpy.ones(2) + 2 ** 31,
    "int_too_large_for_jit": lambda J: J.jit(lambda x, y: x)(1, y=[2 ** 40]),
    "int_too_large_for_array": lambda J: J.numpy.array([2 ** 31]),
    "tree_unflatten_too_few": lambda J: J.tree.unflatten(J.tree.structure((1, 2)), [1]),
    "tree_unflatten_too_many": lambda J: J.tree.unflatten(J.tree.structure((1, 2)), [1, 2, 3]),
    "split_float_num": lambda J: J.random.split(J.random.key(0), 2.5),
    "jnp_function_object_argument": lambda J: J.numpy.sin(_NotAnArray()),
    "jnp_function_list_argument": lambda J: J.numpy.sum([1, 2]),
    "fori_python_int_bound": lambda J: J.lax.fori_loop(0, np.int32(3), lambda i, x: x + i, 0),
    "jit_of_a_non_callable": lambda J: J.jit(3),
    "jit_of_a_generator_function": lambda J: J.jit(_generator),
    "make_jaxpr_of_a_non_callable": lambda J: J.make_jaxpr(3),
    "eval_shape_of_a_non_callable": lambda J: J.eval_shape(3, 1.),
    "eval_shape_of_a_string": lambda J: J.eval_shape(lambda x: x, "a"),
}


def _outcome(record, lib):
    try:
        out = record(lib)
    except Exception as e:  # noqa: BLE001 - the class and message are compared
        return type(e).__name__, re.sub(r"0x[0-9a-f]+", "ADDR", str(e))
    return repr(out)


@pytest.mark.parametrize("name", CASES)
def test_error_as_in_jax(name):
    assert _outcome(CASES[name], jaxkit) == _outcome(CASES[name], jax)


@pytest.mark.parametrize("cast", [lambda J, x: J.numpy.astype(x, J.numpy.float32),
                                  lambda J, x: x.astype(J.numpy.int32)],
                         ids=["jnp.astype", "method"])
def test_complex_to_real_cast_warns_as_jax(cast):
    """Every call warns (jaxkit's astype body is jitted: the warning is outside it)."""
    for lib in (jax, jaxkit):
        x = lib.numpy.array([1 + 1j])
        for _ in range(2):
            with pytest.warns(DeprecationWarning, match="Casting from complex to real dtypes "
                                                        "will soon raise a ValueError"):
                cast(lib, x)
