"""``jaxkit.extend`` against JAX 0.10.2's ``jax.extend``: every name JAX defines exists (but for
a listed few, each with its reason), and the objects behave as JAX's do: primitives are the
objects jaxkit's jaxprs hold, call primitives print and transform as JAX's, the MLIR bindings
parse and compile jaxkit's own StableHLO, PRNG implementations give JAX's bits, name stacks
print as JAX's.
"""
import functools
import importlib
import os
import random

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit import lax
from jaxkit.extend import backend, core, linear_util, lowering, mlir, sharding, xla
from jaxkit.extend import random as jex_random
from jaxkit.extend import source_info_util as siu
from jaxkit.extend.core import primitives
from jaxkit.extend.mlir import ir, passmanager
from jaxkit.extend.mlir.dialects import chlo, func, stablehlo
from jaxkit.interpreters import mlir as jaxkit_mlir
from jaxkit.runtime import compile_cache, pjrt

jax = pytest.importorskip("jax")
import jax.extend  # noqa: E402
import jax.extend.ifrt_programs  # noqa: E402
import jax.numpy as jax_jnp  # noqa: E402

# --------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------

EXTEND_MODULES = [
    "", ".backend", ".core", ".core.primitives", ".ifrt_programs", ".linear_util", ".lowering",
    ".mlir", ".mlir.ir", ".mlir.passmanager", ".random", ".sharding", ".source_info_util",
    ".xla", *(f".mlir.dialects.{d}" for d in (
        "arith", "builtin", "chlo", "func", "math", "memref", "mpmd", "scf", "sdy",
        "sparse_tensor", "stablehlo", "vector")),
]

# What jaxkit lacks of jax.extend, and why (the reasons are in the modules' MISSING tables).
MISSING = {
    ".core.primitives": set(primitives.MISSING),
}


def _public(module) -> set:
    """Public names, less plain imported modules (``import os`` is not a module's API)."""
    return {n for n in dir(module) if not n.startswith("_")
            and not (type(getattr(module, n)) is type(os)
                     and not getattr(module, n).__name__.startswith(("jax", "jaxkit")))}


@pytest.mark.parametrize("suffix", EXTEND_MODULES)
def test_every_jax_extend_name_exists(suffix):
    ref = importlib.import_module("jax.extend" + suffix)
    ours = importlib.import_module("jaxkit.extend" + suffix)
    missing = {n for n in _public(ref) - _public(ours)
               if not (type(getattr(ref, n)) is type(os)
                       and getattr(ref, n).__name__.startswith("jax.extend"))}
    assert missing == MISSING.get(suffix, set())


def test_pallas_is_the_one_module_left_out():
    # jax.extend.pallas (GridMapping, register_lowering_rule) extends Pallas kernels, which
    # need TPU/GPU Mosaic or Triton backends jaxkit does not have.
    with pytest.raises(ImportError):
        importlib.import_module("jaxkit.extend.pallas")


@pytest.mark.parametrize("suffix", [s for s in EXTEND_MODULES if s.startswith((".mlir.",))]
                         + [".mlir"])
def test_mlir_modules_are_jaxlibs_objects(suffix):
    """The MLIR bindings are jaxlib's own, as JAX's are: the very same classes."""
    ref = importlib.import_module("jax.extend" + suffix)
    ours = importlib.import_module("jaxkit.extend" + suffix)
    for name in _public(ref) - {"lower_with_sharding_in_types"}:  # jaxkit's own, tested below
        if type(getattr(ref, name)) is type(os):
            continue
        assert getattr(ours, name) is getattr(ref, name), name


# --------------------------------------------------------------------------------------------
# core.primitives
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", primitives.__all__)
def test_primitive_is_a_jaxkit_primitive_named_as_jaxs(name):
    prim = getattr(primitives, name)
    assert isinstance(prim, core.Primitive)
    assert prim.name == getattr(jax.extend.core.primitives, name).name


@pytest.mark.parametrize("name", sorted(primitives.MISSING))
def test_missing_primitive_says_why(name):
    assert hasattr(jax.extend.core.primitives, name)
    with pytest.raises(AttributeError, match=f"{name} is not available in jaxkit: .+"):
        getattr(primitives, name)


# (primitive attribute, function of (lax, numpy) module pair, arguments): the primitive appears
# in the jaxpr of the function, in JAX as in jaxkit.
def _cond(lax_, np_, x):
    return lax_.cond(x > 0, np_.sin, np_.cos, x)


def _scan(lax_, np_, x):
    return lax_.scan(lambda c, a: (c + a, c * a), 0.0, x)


def _while(lax_, np_, x):
    return lax_.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x)


def _custom(lax_, np_, x):
    f = (jaxkit if np_ is jnp else jax).custom_jvp(np_.sin)
    f.defjvp(lambda p, t: (np_.sin(p[0]), np_.cos(p[0]) * t[0]))
    return f(x)


def _remat(lax_, np_, x):
    return (jaxkit if np_ is jnp else jax).checkpoint(np_.sin)(x)


def _jit(lax_, np_, x):
    return (jaxkit if np_ is jnp else jax).jit(np_.sin)(x)


IN_JAXPR = [
    ("sin_p", lambda l, n, x: n.sin(x), (1.0,)),
    ("add_p", lambda l, n, x: x + x, (1.0,)),
    ("dot_general_p", lambda l, n, x: n.dot(x, x), (np.ones(3, np.float32),)),
    ("reduce_sum_p", lambda l, n, x: n.sum(x), (np.ones(3, np.float32),)),
    ("cumsum_p", lambda l, n, x: n.cumsum(x), (np.ones(3, np.float32),)),
    ("integer_pow_p", lambda l, n, x: x ** 3, (2.0,)),
    ("cond_p", _cond, (1.0,)),
    ("scan_p", _scan, (np.ones(3, np.float32),)),
    ("while_p", _while, (1.0,)),
    ("custom_jvp_call_p", _custom, (1.0,)),
    ("remat_p", _remat, (1.0,)),
    ("jit_p", _jit, (1.0,)),
    ("sort_p", lambda l, n, x: n.sort(x), (np.ones(3, np.float32),)),
    ("argmax_p", lambda l, n, x: n.argmax(x), (np.ones(3, np.float32),)),
]


def _all_eqns(jaxpr):
    """The equations of ``jaxpr`` and of the jaxprs in their parameters (JAX's or jaxkit's)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            for item in value if isinstance(value, tuple) else (value,):
                inner = getattr(item, "jaxpr", item)
                if hasattr(inner, "eqns"):
                    yield from _all_eqns(inner)


@pytest.mark.parametrize("attr,fn,args", IN_JAXPR, ids=[r[0] for r in IN_JAXPR])
def test_primitive_is_the_object_in_jaxprs(attr, fn, args):
    ref_jaxpr = jax.make_jaxpr(functools.partial(fn, jax.lax, jax_jnp))(*args)
    assert any(e.primitive is getattr(jax.extend.core.primitives, attr)
               for e in _all_eqns(ref_jaxpr.jaxpr))
    jaxpr = jaxkit.make_jaxpr(functools.partial(fn, lax, jnp))(*args)
    assert any(e.primitive is getattr(primitives, attr) for e in _all_eqns(jaxpr.jaxpr))


# (attribute, operands, params): bound directly, eagerly and under jit, as JAX binds them.
BINDS = [
    ("add_p", (np.float32(1.5), np.float32(2.0)), {}),
    ("mul_p", (np.arange(3, dtype=np.float32), np.float32(2.0) * np.ones(3, np.float32)), {}),
    ("sign_p", (np.linspace(-1, 1, 4, dtype=np.float32),), {}),
    ("neg_p", (np.arange(3, dtype=np.int32),), {}),
    ("max_p", (np.float32(1.0), np.float32(3.0)), {}),
    ("integer_pow_p", (np.arange(4, dtype=np.float32),), {"y": 3}),
    ("select_n_p", (np.array([True, False]), np.ones(2, np.float32), np.zeros(2, np.float32)),
     {}),
    ("abs_p", (np.arange(-2, 2, dtype=np.int32),), {}),
]


@pytest.mark.parametrize("attr,args,params", BINDS, ids=[r[0] for r in BINDS])
def test_bind_matches_jax(attr, args, params):
    expected = getattr(jax.extend.core.primitives, attr).bind(*args, **params)
    prim = getattr(primitives, attr)
    np.testing.assert_allclose(prim.bind(*args, **params), expected, rtol=1e-6)
    np.testing.assert_allclose(jaxkit.jit(lambda *a: prim.bind(*a, **params))(*args),
                               expected, rtol=1e-6)


# --------------------------------------------------------------------------------------------
# Call primitives
# --------------------------------------------------------------------------------------------


def _callee(np_, x, y):
    return np_.sin(x) * y + 1.0


def _closed_call(jx, np_, x, y):
    p = jx.extend.core.primitives.closed_call_p
    body = jx.make_jaxpr(functools.partial(_callee, np_))(1.0, 2.0)
    return p.bind(x, y, **p.get_bind_params({"call_jaxpr": body}))[0]


def _call(jx, np_, x, y):
    fun = jx.extend.linear_util.wrap_init(lambda a, b: [np_.sin(a) * b],
                                          debug_info=jx.extend.core.DebugInfo(
                                              "call", "g", None, None))
    return jx.extend.core.primitives.call_p.bind(x, y, subfuns=(fun,))[0]


CALLS = [("closed_call", _closed_call), ("call", _call)]
CALL_TRANSFORMS = [
    ("eager", lambda j, f: f),
    ("jit", lambda j, f: j.jit(f)),
    ("grad", lambda j, f: j.grad(f)),
    ("grad_y", lambda j, f: j.grad(f, argnums=1)),
    ("jit_grad", lambda j, f: j.jit(j.grad(f))),
    ("vmap", lambda j, f: j.vmap(f)),
    ("vmap_grad", lambda j, f: j.vmap(j.grad(f))),
    ("jvp", lambda j, f: lambda x, y: j.jvp(f, (x, y), (x, y))[1]),
    ("hessian", lambda j, f: j.hessian(f)),
]


@pytest.mark.parametrize("name,call", CALLS, ids=[c[0] for c in CALLS])
@pytest.mark.parametrize("tname,transform", CALL_TRANSFORMS, ids=[t[0] for t in CALL_TRANSFORMS])
def test_call_primitive_transforms_as_jax(name, call, tname, transform):
    batched = tname.startswith("vmap")
    x = np.linspace(0.1, 0.9, 3, dtype=np.float32) if batched else np.float32(0.3)
    y = np.full(3, 2.0, np.float32) if batched else np.float32(2.0)
    expected = transform(jax, functools.partial(call, jax, jax_jnp))(x, y)
    got = transform(jaxkit, functools.partial(call, jaxkit, jnp))(x, y)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


@pytest.mark.parametrize("name,call", CALLS, ids=[c[0] for c in CALLS])
def test_call_primitive_prints_as_jax(name, call):
    expected = str(jax.make_jaxpr(functools.partial(call, jax, jax_jnp))(1.0, 2.0))
    assert str(jaxkit.make_jaxpr(functools.partial(call, jaxkit, jnp))(1.0, 2.0)) == expected


def test_call_primitive_lowers_to_a_private_function_call():
    text = jaxkit.jit(functools.partial(_closed_call, jaxkit, jnp)).lower(1.0, 2.0).as_text()
    assert "call @closed_call(" in text
    assert "func.func private @closed_call(" in text


def test_call_primitive_closing_over_a_tracer():
    def f(x):
        fun = linear_util.wrap_init(lambda a: [a * x])  # x: a tracer of grad
        return primitives.call_p.bind(2.0, subfuns=(fun,))[0]
    assert jaxkit.grad(f)(3.0) == 2.0
    assert "call[" in str(jaxkit.make_jaxpr(f)(3.0))


def test_library_call_primitive_gets_every_rule():
    my_call_p = core.CallPrimitive("my_call")
    f = lambda x: my_call_p.bind(x, subfuns=(lambda a: [jnp.cos(a) * a],))[0]
    np.testing.assert_allclose(jaxkit.grad(f)(0.5), np.cos(0.5) - 0.5 * np.sin(0.5),
                               rtol=1e-6)
    assert "my_call[" in str(jaxkit.make_jaxpr(f)(0.5))


def test_call_primitive_bind_needs_a_function_or_a_jaxpr():
    with pytest.raises(TypeError, match=r"call.bind needs the function to call"):
        primitives.call_p.bind(1.0)


def test_call_impl_runs_the_function():
    fun = linear_util.wrap_init(lambda a, b: [a + b])
    assert core.call_impl(fun, 1.0, 2.0, name="ignored") == [3.0]
