"""Shared checks for table-driven lax primitive tests.

A ``Case`` is one call of a lax function written once for both libraries: ``fn(lax, *args)``
runs with ``jaxkit.lax`` and with ``jax.lax`` (the oracle), so values, dtypes, derivatives and
batching can be compared one to one. The primitive's rules are exercised directly (the JVP
rule on tangents, the transpose rule on ``UndefinedPrimal``s, the batching rule on stacked
examples) as well as through ``jit``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

import jaxkit
from jaxkit import core, lax
from jaxkit.interpreters import ad, batching

_AXIS = batching.AxisData(None, 0)  # a rule's axis_data; these rules do not read it


@dataclasses.dataclass
class Case:
    name: str
    prim: str  # the primitive the call binds (its equation is checked)
    fn: Callable  # fn(lax_module, *args)
    make_args: Callable  # make_args(rng) -> list of NumPy arrays
    np_ref: Callable | None = None  # NumPy reference on the same args
    diff: Sequence[int] = ()  # argument positions to differentiate (JVP check)
    linear: Sequence[int] = ()  # argument positions the primitive is linear in (transpose)
    batch: Sequence[Sequence[int | None]] | None = None  # in_dims over the primitive's args
    rtol: float = 1e-5
    jax_fn: Callable | None = None  # when the oracle needs a different call
    # the platforms whose XLA compiles the op (None: all); elsewhere XLA rejects it, in JAX too
    platforms: tuple[str, ...] | None = None

    def __str__(self):
        return self.name


def args_of(case: Case, seed: int = 0) -> list:
    return case.make_args(np.random.default_rng(seed))


def assert_same(x, ref, rtol=1e-5, check_dtype=True):
    x, ref = np.asarray(x), np.asarray(ref)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    if check_dtype:
        assert x.dtype == ref.dtype, (x.dtype, ref.dtype)
    if x.dtype == np.bool_ or np.issubdtype(x.dtype, np.integer):
        np.testing.assert_array_equal(x, ref)
    else:
        np.testing.assert_allclose(x, ref, rtol=rtol, atol=rtol, equal_nan=True)


def _tree_pairs(x, ref):
    xs = x if isinstance(x, (list, tuple)) else [x]
    refs = ref if isinstance(ref, (list, tuple)) else [ref]
    assert len(xs) == len(refs)
    return zip(xs, refs)


def check_vs_jax(case: Case, jax_lax):
    args = args_of(case)
    out = case.fn(lax, *args)
    ref = (case.jax_fn or case.fn)(jax_lax, *args)
    for o, r in _tree_pairs(out, ref):
        assert_same(o, r, case.rtol)
        assert getattr(o, "weak_type", False) == getattr(r, "weak_type", False)


def check_numpy(case: Case):
    args = args_of(case)
    for o, r in _tree_pairs(case.fn(lax, *args), case.np_ref(*args)):
        assert_same(o, r, case.rtol, check_dtype=False)


def check_jit(case: Case):
    args = args_of(case)
    eager = case.fn(lax, *args)
    jitted = jaxkit.jit(partial(case.fn, lax))(*args)
    for o, r in _tree_pairs(jitted, eager):
        assert_same(o, r, case.rtol)


def primitive_call(case: Case, args) -> tuple[core.Primitive, list, list, dict]:
    """The (last) equation of ``case.prim`` in the traced call: the primitive, its operands
    (computed by evaluating the equations before it), the argument position each operand is
    (None if it is computed, a literal or a constant) and the params."""
    with jaxkit.disable_jit():  # nested jits inlined (lax.fft, dynamic_index_in_dim are ones)
        closed = jaxkit.make_jaxpr(partial(case.fn, lax))(*args)
    jaxpr = closed.jaxpr
    idx = max((k for k, e in enumerate(jaxpr.eqns) if e.primitive.name == case.prim),
              default=None)
    assert idx is not None, f"{case.prim} not in\n{closed}"
    env = dict(zip(jaxpr.constvars, closed.consts))
    env.update(zip(jaxpr.invars, args))

    def read(v):
        return v.val if isinstance(v, core.Literal) else env[v]

    for e in jaxpr.eqns[:idx]:
        outs = e.primitive.bind(*map(read, e.invars), **e.params)
        env.update(zip(e.outvars, outs if e.primitive.multiple_results else [outs]))
    eqn = jaxpr.eqns[idx]
    positions = [jaxpr.invars.index(v) if not isinstance(v, core.Literal) and
                 v in jaxpr.invars else None for v in eqn.invars]
    return eqn.primitive, [read(v) for v in eqn.invars], positions, dict(eqn.params)


def _random_like(rng, x):
    x = np.asarray(x)
    return rng.standard_normal(x.shape).astype(x.dtype)


def check_jvp(case: Case, jax):
    args = args_of(case)
    prim, operands, positions, params = primitive_call(case, args)
    rng = np.random.default_rng(1)
    arg_tangents = {i: _random_like(rng, args[i]) for i in case.diff}
    tangents = [ad.Zero(core.get_aval(x).to_tangent_aval()) if p not in arg_tangents
                else arg_tangents[p] for x, p in zip(operands, positions)]
    out, t_out = ad.jvp_rules[prim](operands, tangents, **params)

    def f(*diff_args):
        full = list(args)
        for i, a in zip(case.diff, diff_args):
            full[i] = a
        return (case.jax_fn or case.fn)(jax.lax, *full)

    ref, t_ref = jax.jvp(f, [args[i] for i in case.diff], [arg_tangents[i] for i in case.diff])
    for o, r in _tree_pairs(out, ref):
        assert_same(o, r, case.rtol)
    for t, r in _tree_pairs(t_out, t_ref):
        if r.dtype == jax.dtypes.float0:  # the tangent of an integer output
            assert type(t) is ad.Zero or core.get_aval(t).dtype == jaxkit.dtypes.float0
            continue
        t = ad.instantiate_zeros(t) if type(t) is ad.Zero else t
        assert_same(t, r, max(case.rtol, 1e-4))


def check_transpose(case: Case, jax):
    """Transpose with respect to each linear argument in turn (the others given), against
    ``jax.vjp``."""
    args = args_of(case)
    prim, operands, positions, params = primitive_call(case, args)
    out = prim.bind(*operands, **params)
    rng = np.random.default_rng(2)
    outs = out if prim.multiple_results else [out]
    cts = [_random_like(rng, o) for o in outs]
    for i in case.linear:
        t_args = [ad.UndefinedPrimal(core.get_aval(x)) if p == i else x
                  for x, p in zip(operands, positions)]
        got = ad.transpose_rules[prim](cts if prim.multiple_results else cts[0], *t_args,
                                             **params)

        def f(a, i=i):
            full = list(args)
            full[i] = a
            return (case.jax_fn or case.fn)(jax.lax, *full)

        primal_out, vjp = jax.vjp(f, args[i])
        # the cotangent takes the structure of the function's output (a tuple, list or array)
        (ref,) = vjp(type(primal_out)(cts) if isinstance(primal_out, (list, tuple)) else cts[0])
        g = got[positions.index(i)]
        g = ad.instantiate_zeros(g) if type(g) is ad.Zero else g
        assert_same(g, ref, max(case.rtol, 1e-4))


def check_batching(case: Case, size: int = 3):
    calls = [primitive_call(case, args_of(case, seed)) for seed in range(size)]
    prim, _, positions, params = calls[0]
    configs = case.batch or [tuple(0 if p is not None else None for p in positions)]
    for dims in configs:
        batched = []
        for k, d in enumerate(dims):
            if d is None:
                batched.append(calls[0][1][k])
            else:
                stacked = np.stack([np.asarray(c[1][k]) for c in calls], 0)
                batched.append(np.moveaxis(stacked, 0, d))
        # Unbatched operands are example 0's in every example.
        exp = [prim.bind(*[c[1][k] if d is not None else calls[0][1][k]
                           for k, d in enumerate(dims)], **params) for c in calls]
        out, out_dim = batching.batch_rules[prim](_AXIS, batched, list(dims), **params)
        outs = out if prim.multiple_results else [out]
        out_dims = out_dim if prim.multiple_results else [out_dim]
        for j, (o, od) in enumerate(zip(outs, out_dims)):
            if od is None:  # an unbatched output: the same value for every example
                o, od = np.broadcast_to(np.asarray(o), (size, *np.shape(o))), 0
            ref = np.stack([np.asarray(e[j] if prim.multiple_results else e) for e in exp], 0)
            assert_same(np.moveaxis(np.asarray(o), od, 0), ref, case.rtol)
