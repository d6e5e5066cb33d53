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
from jaxkit.extend import backend, core, ifrt_programs, linear_util, lowering, mlir, sharding, xla
from jaxkit.extend import random as jex_random
from jaxkit.extend import source_info_util as siu
from jaxkit.extend.core import primitives
from jaxkit.extend.mlir import ir, passmanager
from jaxkit.extend.mlir.dialects import chlo, func, stablehlo
from jaxkit.interpreters import mlir as jaxkit_mlir
from jaxkit.runtime import compile_cache, pjrt

jax = pytest.importorskip("jax")
importlib.import_module("jax.extend.ifrt_programs")  # not imported by jax.extend itself
import jax.numpy as jax_jnp  # noqa: E402

# --------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------

EXTEND_MODULES = [
    "", ".backend", ".core", ".core.primitives", ".ifrt_programs", ".linear_util", ".lowering",
    ".mlir", ".mlir.ir", ".mlir.passmanager", ".pallas", ".random", ".sharding",
    ".source_info_util",
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


def test_missing_primitive_says_why():
    for name in sorted(primitives.MISSING):  # (none left: JAX's names all exist)
        assert hasattr(jax.extend.core.primitives, name)
        with pytest.raises(AttributeError, match=f"{name} is not available in jaxkit: .+"):
            getattr(primitives, name)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_p'"):
        primitives.no_such_p


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
    ("random_seed_p", lambda l, n, x: _random(n).key(x), (0,)),
    ("random_split_p", lambda l, n, x: _random(n).split(_random(n).key(x)), (0,)),
    ("random_fold_in_p", lambda l, n, x: _random(n).fold_in(_random(n).key(x), 1), (0,)),
    ("random_bits_p", lambda l, n, x: _random(n).bits(_random(n).key(x), (2,)), (0,)),
]


def _random(np_):
    return (jaxkit if np_ is jnp else jax).random


def test_empty2_binds_as_jaxs():
    # JAX's scan fills its output buffers from it; bound directly, eagerly, under jit and
    # make_jaxpr (params and type as JAX's), under grad (a zero-tangent constant).
    ours = functools.partial(primitives.empty2_p.bind, dtype=np.dtype(np.float32),
                             memory_space=jaxkit.memory.Space.Device)
    theirs = functools.partial(jax.extend.core.primitives.empty2_p.bind,
                               dtype=np.dtype(np.float32), memory_space=jax.memory.Space.Device)
    assert str(jaxkit.make_jaxpr(ours)()) == str(jax.make_jaxpr(theirs)())
    assert float(ours()) == float(jaxkit.jit(ours)()) == float(theirs()) == 0.0
    assert float(jaxkit.grad(lambda x: x * ours())(1.0)) == 0.0
    # In host memory its type says so, as JAX's does.
    host = functools.partial(ours, memory_space=jaxkit.memory.Space.Host)
    theirs_host = functools.partial(theirs, memory_space=jax.memory.Space.Host)
    assert str(jaxkit.make_jaxpr(host)()) == str(jax.make_jaxpr(theirs_host)())


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


# --------------------------------------------------------------------------------------------
# core: the other names
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool", "float16", "bfloat16", "float32",
                                   "complex64"])
def test_primal_dtype_to_tangent_dtype(dtype):
    dt = jax_jnp.dtype(dtype)
    assert np.dtype(core.primal_dtype_to_tangent_dtype(dt)) == \
        np.dtype(jax.extend.core.primal_dtype_to_tangent_dtype(dt))


def _probe(ext, seen):
    def f(x):
        seen.append((ext.unsafe_get_axis_names_DO_NOT_USE(), ext.nonempty_axis_env_DO_NOT_USE(),
                     ext.unsafe_am_i_under_a_jit_DO_NOT_USE(),
                     ext.unsafe_am_i_under_a_vmap_DO_NOT_USE()))
        return x
    return f


# Where the probe runs, as a function of (jax module, probe); each runs a fresh probe, so JAX's
# tracing cache never skips it.
TRACE_STATES = [
    ("eager", lambda j, f: f(1.0)),
    ("vmap", lambda j, f: j.vmap(f)(np.ones(2, np.float32))),
    ("vmap_named", lambda j, f: j.vmap(f, axis_name="i")(np.ones(2, np.float32))),
    ("vmap_vmap", lambda j, f: j.vmap(j.vmap(f, axis_name="j"), axis_name="i")(
        np.ones((2, 2), np.float32))),
    ("jit", lambda j, f: j.jit(f)(1.0)),
    ("make_jaxpr", lambda j, f: j.make_jaxpr(f)(1.0)),
    ("grad", lambda j, f: j.grad(f)(1.0)),
    ("jit_vmap", lambda j, f: j.jit(j.vmap(f, axis_name="k"))(np.ones(2, np.float32))),
    ("pmap", lambda j, f: j.pmap(f, axis_name="p")(np.ones(1, np.float32))),
    ("pmap_vmap", lambda j, f: j.pmap(j.vmap(f, axis_name="v"), axis_name="p")(
        np.ones((1, 2), np.float32))),
]


@pytest.mark.parametrize("name,run", TRACE_STATES, ids=[t[0] for t in TRACE_STATES])
def test_unsafe_trace_state_queries_match_jax(name, run):
    expected, got = [], []
    run(jax, _probe(jax.extend.core, expected))
    run(jaxkit, _probe(core, got))
    assert got == expected


def test_trace_tag_gensym_and_classes():
    assert core.TraceTag() == core.TraceTag() and hash(core.TraceTag()) == hash(core.TraceTag())
    aval = core.ShapedArray((2,), np.float32)
    v = core.gensym()(aval)
    assert isinstance(v, core.Var) and v.aval is aval and v is not core.gensym()(aval)
    assert core.AbstractToken is jaxkit.core.AbstractToken
    assert issubclass(core.InconclusiveDimensionOperation, Exception)
    assert core.InconclusiveDimensionOperation is jaxkit.errors.InconclusiveDimensionOperation


def _debug_info_facts(mod, np_):
    d = mod.DebugInfo("jit", "f at /tmp/x.py:12", ("a", "b[0]"), None)
    tree = {"w": np_.ones(2), "b": (np_.ones(1), np_.ones(1))}
    return [d.func_name, d.func_filename, d.func_lineno, d.safe_arg_names(2),
            d.safe_result_paths(3), d.filter_arg_names([False, True]),
            d.replace_func_name("g").func_src_info, d.set_result_paths(tree).result_paths,
            d.with_unknown_names().safe_arg_names(2), d.resolve_result_paths(),
            mod.DebugInfo("jit", "h", None, lambda: ("r",)).resolve_result_paths().result_paths,
            mod.DebugInfo("vmap", "<lambda>", None, None).func_filename]


def test_debug_info_as_jax():
    assert _debug_info_facts(core, jnp) == _debug_info_facts(jax.extend.core, jax_jnp)
    assert core.DebugInfo("jit", "f", None, None)._fields == \
        jax.extend.core.DebugInfo("jit", "f", None, None)._fields


# --------------------------------------------------------------------------------------------
# A primitive defined by a library, lowered with jaxkit.extend.mlir's dialects
# --------------------------------------------------------------------------------------------


def _fma_lowering(ctx, x, y, z):
    assert isinstance(ctx, lowering.LoweringRuleContext)
    return stablehlo.add(stablehlo.multiply(x, y), z)


fma_p = core.Primitive("fma")
fma_p.def_abstract_eval(lambda x, y, z: x)
fma_p.def_impl(lambda *args: jaxkit.jit(lambda *a: fma_p.bind(*a))(*args))
jaxkit_mlir.register_lowering(fma_p, _fma_lowering)


def test_library_primitive_lowers_with_extend_dialects():
    x, y, z = (np.arange(3, dtype=np.float32) + i for i in range(3))
    np.testing.assert_allclose(fma_p.bind(x, y, z), x * y + z)
    jaxpr = jaxkit.make_jaxpr(lambda *a: fma_p.bind(*a))(x, y, z)
    assert jaxpr.jaxpr.eqns[0].primitive is fma_p
    assert "stablehlo.multiply" in jaxkit.jit(lambda *a: fma_p.bind(*a)).lower(x, y, z).as_text()


# --------------------------------------------------------------------------------------------
# mlir and lowering: parse, transform, serialize and compile jaxkit's own StableHLO
# --------------------------------------------------------------------------------------------


def _context():
    """A context as JAX builds one: no dialects, then the upstream ones and StableHLO/CHLO."""
    ctx = lowering.JaxIrContext()
    ctx.append_dialect_registry(lowering.upstream_dialects)
    ctx.load_all_available_dialects()
    stablehlo.register_dialect(ctx)
    chlo.register_dialect(ctx)
    return ctx


def _fn(x):
    return jnp.sin(x) * 2.0 + jnp.cumsum(x)


X = np.linspace(-1, 1, 5, dtype=np.float32)


def _run(module, *args):
    """Compile ``module`` (an ir.Module, text or bytecode) with jaxkit's runtime and run it."""
    out_aval = jaxkit.core.ShapedArray(X.shape, X.dtype)
    exe = pjrt.compile_module(module, [out_aval])
    bufs = [pjrt.put(np.asarray(a), jaxkit.core.ShapedArray(a.shape, a.dtype)) for a in args]
    return np.asarray(exe(bufs)[0])


def test_compiler_ir_is_an_extend_mlir_module():
    module = jaxkit.jit(_fn).lower(X).compiler_ir()
    assert isinstance(module, ir.Module)
    assert isinstance(module.body.operations[0], func.FuncOp)


def test_context_parses_and_round_trips_lowered_stablehlo():
    text = jaxkit.jit(_fn).lower(X).as_text()
    with _context():
        module = ir.Module.parse(text)
        assert str(module) == text
        np.testing.assert_allclose(_run(module, X), _fn(X), rtol=1e-6)


def test_plain_context_lacks_the_dialects():
    # As with JAX's bindings: ir.Context() alone knows only the builtin dialect.
    with ir.Context(), pytest.raises(ir.MLIRError, match="func"):
        ir.Module.parse(jaxkit.jit(_fn).lower(X).as_text())


def test_passmanager_runs_on_lowered_module():
    with _context():
        module = ir.Module.parse(jaxkit.jit(_fn).lower(X).as_text())
        passmanager.PassManager.parse("builtin.module(canonicalize,cse)").run(module.operation)
        np.testing.assert_allclose(_run(module, X), _fn(X), rtol=1e-6)


def test_portable_artifact_round_trip():
    text = jaxkit.jit(_fn).lower(X).as_text()
    artifact = mlir.serialize_portable_artifact(text, stablehlo.get_current_version())
    assert isinstance(artifact, bytes) and artifact.startswith(b"ML\xefR")
    assert artifact == jax.extend.mlir.serialize_portable_artifact(
        text, stablehlo.get_current_version())
    ctx = _context()
    module = mlir.deserialize_portable_artifact(artifact, ctx)
    assert isinstance(module, ir.Module)
    np.testing.assert_allclose(_run(module, X), _fn(X), rtol=1e-6)
    with ctx:  # re-serialising the deserialised module is a fixed point
        again = mlir.serialize_portable_artifact(str(module), stablehlo.get_current_version())
    assert mlir.deserialize_portable_artifact(again, ctx).operation.verify()


def test_hlo_to_stablehlo_runs_jaxs_hlo_on_jaxkit():
    hlo = jax.jit(lambda x: jax_jnp.cos(x) + x).lower(X).compiler_ir("hlo")
    bytecode = mlir.hlo_to_stablehlo(hlo.as_serialized_hlo_module_proto())
    with _context():
        module = ir.Module.parse(bytecode)
        assert "stablehlo.cosine" in str(module)
        np.testing.assert_allclose(_run(module, X), np.cos(X) + X, rtol=1e-6)


def test_refine_polymorphic_shapes_keeps_a_static_module():
    text = jaxkit.jit(_fn).lower(X).as_text()
    with _context():
        refined = ir.Module.parse(mlir.refine_polymorphic_shapes(text.encode()))
        np.testing.assert_allclose(_run(refined, X), _fn(X), rtol=1e-6)


def test_lower_with_sharding_in_types_leaves_unsharded_ops():
    with _context(), ir.Location.unknown():
        op = ir.Module.create()
        aval = jaxkit.core.ShapedArray((2,), np.float32)
        assert mlir.lower_with_sharding_in_types(None, op, aval) is op


def test_jaxlib_modules_outside_the_allowlist_are_refused():
    with pytest.raises(ValueError, match="not a jaxlib module jaxkit re-exports"):
        jaxkit_mlir.jaxlib_module("jaxlib.mlir.dialects.tpu")


# --------------------------------------------------------------------------------------------
# backend
# --------------------------------------------------------------------------------------------


def _options(o):
    b = o.executable_build_options
    return (o.num_replicas, o.num_partitions, str(o.device_assignment),
            sorted(o.env_option_overrides), b.use_spmd_partitioning, b.use_shardy_partitioner,
            b.debug_options.xla_detailed_logging, b.fdo_profile, b.optimization_level,
            b.exec_time_optimization_effort)


COMPILE_OPTIONS = [
    ((1, 1), {}),
    ((1, 1), {"device_assignment": [0]}),
    ((1, 1), {"device_assignment": np.array([[0]])}),
    ((1, 1), {"env_options_overrides": {"xla_cpu_enable_fast_math": True,
                                        "exec_time_optimization_effort": 0.5},
              "detailed_logging": False, "fdo_profile": b"profile"}),
]


@pytest.mark.parametrize("args,kwargs", COMPILE_OPTIONS)
def test_get_compile_options_as_jax(args, kwargs):
    assert _options(backend.get_compile_options(*args, **kwargs)) == \
        _options(jax.extend.backend.get_compile_options(*args, **kwargs))


def test_get_compile_options_rejects_a_mismatched_assignment():
    with pytest.raises(ValueError, match="device_assignment does not match num_replicas"):
        backend.get_compile_options(2, 1, device_assignment=[0])


def test_backend_xla_version_and_ifrt_proxy():
    assert backend.backend_xla_version() == jax.extend.backend.backend_xla_version()
    assert backend.ifrt_proxy is jax.extend.backend.ifrt_proxy
    assert ifrt_programs.ifrt_programs is jax.extend.ifrt_programs.ifrt_programs


def test_clear_in_memory_compilation_cache():
    jaxkit.jit(lambda x: x * 4.5 - 1.0)(X)
    assert compile_cache.memory_cache_size() > 0
    backend.clear_in_memory_compilation_cache()
    assert compile_cache.memory_cache_size() == 0


def test_register_backend_cache_is_cleared_by_clear_caches():
    @functools.lru_cache
    def square(n):
        return n * n
    backend.register_backend_cache(square, "squares")
    square(3)
    assert square.cache_info().currsize == 1
    jaxkit.clear_caches()
    assert square.cache_info().currsize == 0
    with pytest.raises(TypeError, match="no cache_clear"):
        backend.register_backend_cache(object(), "nothing")


# --------------------------------------------------------------------------------------------
# random: the implementations give JAX's bits
# --------------------------------------------------------------------------------------------

IMPLS = ["threefry_prng_impl", "rbg_prng_impl", "unsafe_rbg_prng_impl"]


@pytest.fixture(params=[32, 64])
def bits_x64(request):
    """32-bit runs without x64, 64-bit ones with it in jaxkit and JAX (64-bit values need it)."""
    if request.param == 32:
        yield 32
        return
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        with jaxkit.config.override(jax_enable_x64=True):
            yield 64
    finally:
        jax.config.update("jax_enable_x64", old)


@pytest.mark.parametrize("name", IMPLS)
def test_prng_impl_bits_match_jax(name, bits_x64):
    ours, ref = getattr(jex_random, name), getattr(jax.extend.random, name)
    assert (str(ours), ours.name, ours.key_shape) == (str(ref), ref.name, ref.key_shape)
    k, r = ours.seed(np.int32(7)), ref.seed(np.int32(7))
    np.testing.assert_array_equal(k, r)
    for shape in [(3,), (2, 2)]:
        np.testing.assert_array_equal(ours.split(k, shape), ref.split(r, shape))
    np.testing.assert_array_equal(ours.fold_in(k, np.uint32(9)), ref.fold_in(r, np.uint32(9)))
    widths = (8, 16, 32) if bits_x64 == 32 else (64,)
    for width in widths:
        np.testing.assert_array_equal(ours.random_bits(k, width, (5,)),
                                      ref.random_bits(r, width, (5,)))


@pytest.mark.parametrize("shape", [(), (4,), (5,), (2, 3)])
def test_threefry_2x32_matches_jax(shape):
    count = np.arange(int(np.prod(shape)), dtype=np.uint32).reshape(shape)
    keypair = (np.uint32(1), np.uint32(2))
    np.testing.assert_array_equal(jex_random.threefry_2x32(keypair, count),
                                  jax.extend.random.threefry_2x32(keypair, count))
    with pytest.raises(TypeError, match="threefry_2x32 requires uint32 arguments"):
        jex_random.threefry_2x32(keypair, count.astype(np.int32))


@pytest.mark.parametrize("seeds", [5, np.arange(3), np.arange(4).reshape(2, 2)],
                         ids=["int", "vector", "matrix"])
def test_random_seed_matches_jax(seeds):
    keys = jex_random.random_seed(seeds, jex_random.threefry_prng_impl)
    ref = jax.extend.random.random_seed(seeds, jax.extend.random.threefry_prng_impl)
    assert keys.shape == ref.shape
    np.testing.assert_array_equal(jaxkit.random.key_data(keys), jax.random.key_data(ref))
    key = jex_random.seed_with_impl(jex_random.threefry_prng_impl, 3)
    ref_key = jax.extend.random.seed_with_impl(jax.extend.random.threefry_prng_impl, 3)
    np.testing.assert_array_equal(jaxkit.random.uniform(key, (3,)),
                                  jax.random.uniform(ref_key, (3,)))


def test_random_seed_of_other_impls_says_keys_are_threefry():
    with pytest.raises(NotImplementedError, match="threefry2x32 keys only, not 'rbg'"):
        jex_random.random_seed(0, jex_random.rbg_prng_impl)
    spec = jex_random.define_prng_impl(key_shape=(2,), seed=None, split=None, random_bits=None,
                                       fold_in=None, tag="mine")
    assert str(spec) == str(jax.extend.random.define_prng_impl(
        key_shape=(2,), seed=None, split=None, random_bits=None, fold_in=None, tag="mine"))


# --------------------------------------------------------------------------------------------
# sharding, source_info_util, xla
# --------------------------------------------------------------------------------------------


def test_sharding_protos_round_trip_as_jax():
    xc = sharding.xla_client
    assert sharding.GSPMDSharding is jax.extend.sharding.GSPMDSharding
    op = xc.OpSharding()
    op.type = xc.OpSharding.Type.OTHER
    op.tile_assignment_dimensions = [2, 1]
    op.tile_assignment_devices = [0, 1]
    hlo = xc.HloSharding.from_proto(op)
    data = sharding.get_serialized_proto_from_hlo_sharding(hlo)
    assert data == jax.extend.sharding.get_serialized_proto_from_hlo_sharding(hlo)
    assert sharding.get_hlo_sharding_from_serialized_proto(data) == hlo
    assert sharding.get_op_sharding_from_serialized_proto(data).tile_assignment_devices == [0, 1]


def _name_stacks(mod, api):
    out = []
    with api.named_scope("outer"):
        with mod.extend_name_stack("inner"):
            out.append(str(mod.current_name_stack()))
            with mod.transform_name_stack("jvp"), mod.extend_name_stack("f"):
                out.append(str(mod.current_name_stack()))
            with mod.reset_name_stack():
                out.append(str(mod.current_name_stack()))
                with mod.set_name_stack(mod.new_name_stack("x").transform("vmap").extend("y")):
                    out.append(str(mod.current_name_stack()))
    out.append(str(mod.current_name_stack()))
    stack = mod.NameStack().extend("a").transform("jvp").transform("vmap").extend("b")
    out += [str(stack), str(stack[1:]), len(stack), str(stack + mod.new_name_stack("z")),
            str(mod.NameStack().transform("t")), str(mod.new_name_stack())]
    decorated = mod.extend_name_stack("deco")(lambda: str(mod.current_name_stack()))
    out.append(decorated())
    return out


def test_name_stacks_as_jax():
    assert _name_stacks(siu, jaxkit) == _name_stacks(jax.extend.source_info_util, jax)


def test_source_info_summaries():
    info = jaxkit.source_info.SourceInfo("/tmp/x.py", 3, "f")
    assert siu.summarize(info) == "/tmp/x.py:3 (f)"
    assert siu.summarize(siu.new_source_info()) == "unknown"


def test_hlo_module_transformation_runs_on_cpu_compiles():
    seen = []
    name = f"jaxkit_test_pass_{os.getpid()}"
    xla.register_hlo_module_transformation(lambda proto: seen.append(len(proto)), name=name,
                                           platforms="cpu")
    try:
        c = np.float32(random.random())  # a program no cache has seen
        jaxkit.jit(lambda x: x * c + 1.0)(X)
        assert seen and all(n > 0 for n in seen)
    finally:
        assert xla.clear_hlo_module_transformation(name, platforms=["cpu"])
    assert not xla.clear_hlo_module_transformation(name)
    with pytest.raises(TypeError, match="stage must be a PipelineStage enum"):
        xla.register_hlo_module_transformation(lambda p: None, name=name, stage=0)
    assert [s.name for s in xla.PipelineStage] == [s.name for s in jax.extend.xla.PipelineStage]
