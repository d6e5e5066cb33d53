"""``jax.interpreters.*`` (ad, batching, mlir, partial_eval, pxla, xla) as user code calls it:
custom primitives with their rules, tracing entry points, lowering helpers.

Each case is a piece of JAX user code run twice in subprocesses, once on the JAX oracle and once
on jaxkit installed as ``jax`` (``jaxkit.install_as_jax``); what it prints must be the same.
A few checks that need jaxkit's runtime (compiling a module built by ``lower_jaxpr_to_module``)
run in this process.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit.interpreters import mlir
from jaxkit.runtime import pjrt

HAVE_JAX = importlib.util.find_spec("jax") is not None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Shared by every case: a small custom primitive (JAX's tutorial style), and a FlatTree-like
# class, since JAX 0.10.2's ``ad.jvp``/``ad.linearize`` take FlatTrees.
PRELUDE = """
import jax, jax.numpy as jnp, numpy as np
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir, partial_eval as pe, pxla, xla
from jax.extend.mlir.dialects import stablehlo as hlo
from jax.extend import linear_util as lu

def fma_impl(x, y, z):
    return np.add(np.multiply(x, y), z)

fma_p = Primitive("fma")
fma_p.def_impl(fma_impl)
fma_p.def_abstract_eval(lambda x, y, z: x)

class FT:
    def __init__(self, vals, tree):
        self.vals, self.tree = tuple(vals), tree
    @staticmethod
    def flatten(x):
        vals, tree = jax.tree_util.tree_flatten(x)
        return FT(vals, tree)
    def update(self, vals):
        return FT(vals, self.tree)
    def map(self, f):
        return self.update(f(v) for v in self.vals)
    def map2(self, f, other):
        return self.update(f(a, b) for a, b in zip(self.vals, list(other)))
    def unflatten(self):
        return jax.tree_util.tree_unflatten(self.tree, self.vals)
    def __iter__(self):
        return iter(self.vals)
    def __len__(self):
        return len(self.vals)
"""

CASES = {
    "ad_tables_and_helpers": """
        def fma_lowering(ctx, x, y, z):
            return [hlo.add(hlo.multiply(x, y), z)]
        mlir.register_lowering(fma_p, fma_lowering, platform="cpu")
        ad.primitive_jvps[fma_p] = lambda p, t: (
            fma_p.bind(*p), fma_p.bind(ad.instantiate_zeros(t[0]), p[1], fma_p.bind(
                p[0], ad.instantiate_zeros(t[1]), ad.instantiate_zeros(t[2]))))
        print(jax.jvp(lambda x: fma_p.bind(x, x, 1.0), (2.0,), (1.0,)))
        print(repr(ad.add_jaxvals(jnp.ones(2), jnp.arange(2.0))))
        print(ad.zeros_like_aval(jax.core.ShapedArray((2,), jnp.float32)))
        print(ad.is_undefined_primal(ad.UndefinedPrimal(jax.core.ShapedArray((), jnp.float32))))
        print(ad.get_primitive_transpose(jax.lax.neg_p) is ad.primitive_transposes[jax.lax.neg_p])
        try:
            ad.get_primitive_transpose(fma_p)
        except NotImplementedError as e:
            print("NotImplementedError:", e)
        ad.primitive_transposes[fma_p] = lambda ct, x, y, z: [
            fma_p.bind(ct, y, 0.0) if ad.is_undefined_primal(x) else None, None,
            ct if ad.is_undefined_primal(z) else None]
        print(ad.get_primitive_transpose(fma_p) is ad.primitive_transposes[fma_p])
    """,
    "ad_jvp": """
        def f(x, y):
            return {"a": jnp.sin(x) * y, "b": x * 3.0, "c": x}
        outs = ad.jvp(f, FT.flatten((2.0, 3.0)), FT.flatten((1.0, 0.5)))
        print(len(outs), outs[0].vals[1:], outs[1].vals[1:])
        print(np.round(np.asarray(outs[0].vals[0]), 5), np.round(np.asarray(outs[1].vals[0]), 5))
        p, t, aux = ad.jvp(lambda x: (x * 2.0, "aux"), FT.flatten((1.0,)), FT.flatten((3.0,)),
                           has_aux=True)
        print(p.vals, t.vals, aux)
        zero = ad.Zero(jax.core.ShapedArray((), jnp.float32, weak_type=True))
        p, t = ad.jvp(lambda x, y: x * 2.0, FT.flatten((1.0, 5.0)),
                      FT.flatten((1.0, 1.0)).update([zero, 1.0]), instantiate=False)
        print(p.vals, t.vals)
        p, t = ad.jvp(lambda x, y: x * 2.0, FT.flatten((1.0, 5.0)),
                      FT.flatten((1.0, 1.0)).update([zero, 1.0]))
        print(p.vals, t.vals)
    """,
    "ad_linearize": """
        out, out_zeros, jaxpr, consts = ad.linearize(
            lambda x, y: (jnp.sin(x) * y, y * 0 + 2.0, jnp.cos(y)), FT.flatten((1.0, 2.0)))
        print([np.round(np.asarray(v), 5) for v in out.vals], out_zeros)
        print(len(jaxpr.invars), len(jaxpr.outvars), len(jaxpr.constvars) == len(consts))
        res = jax.core.eval_jaxpr(jaxpr, consts, 1.0, 0.5)
        print([np.round(np.asarray(r), 5) for r in res])
        out, out_zeros, jaxpr, consts, aux = ad.linearize(
            lambda x: (x * x, {"aux": 3}), FT.flatten((4.0,)), has_aux=True)
        print(out.vals, out_zeros, aux)
    """,
    "batching_tables": """
        calls = []
        def rule(vals, dims):
            calls.append(("plain", dims))
            return fma_p.bind(*[batching.bdim_at_front(v, d, 3) for v, d in zip(vals, dims)]), 0
        batching.primitive_batchers[fma_p] = rule
        x = np.arange(3.0, dtype=np.float32)
        print(jax.vmap(lambda a: fma_p.bind(a, a, 1.0))(x))
        def axis_rule(size, name, spmd, vals, dims):
            calls.append(("axis", size, name, spmd, dims))
            return rule(vals, dims)
        batching.axis_primitive_batchers[fma_p] = axis_rule
        print(jax.vmap(lambda a: fma_p.bind(a, 2.0, a), axis_name="i")(x))
        def fancy(axis_data, vals, dims):
            calls.append(("fancy", axis_data.size, dims))
            return rule(vals, dims)
        batching.fancy_primitive_batchers[fma_p] = fancy
        print(jax.vmap(lambda a: fma_p.bind(1.0, a, a))(x))
        print(calls)
    """,
    "register_vmappable": """
        class Pair:
            def __init__(self, a, b):
                self.a, self.b = a, b
            @property
            def shape(self):
                return self.a.shape
        def to_elt(cont, get_idx, x, spec):
            print("to_elt", spec)
            return Pair(cont(x.a, spec), cont(x.b, spec))
        def from_elt(cont, size, x, spec):
            print("from_elt", size, spec)
            return Pair(cont(size, x.a, spec), cont(size, x.b, spec))
        batching.register_vmappable(Pair, int, int, to_elt, from_elt, None)
        p = Pair(jnp.arange(3.0), jnp.ones(3))
        r = jax.vmap(lambda q: Pair(q.a * 2, q.b + q.a))(p)
        print(r.a, r.b)
        r = jax.vmap(lambda q, y: Pair(q.a * y, q.b), in_axes=(0, None), out_axes=1)(
            Pair(jnp.ones((3, 2)), jnp.zeros((3, 2))), 2.0)
        print(r.a.shape, r.b.shape)
        print(jax.vmap(lambda q: q.a.sum() + q.b[0])(Pair(jnp.ones((2, 4)), jnp.ones((2, 3)))))
        print(batching.unregister_vmappable(Pair))
    """,
    "trace_to_jaxpr_dynamic": """
        def f(x, y):
            return [jnp.sin(x) * y, x + 1.0]
        avals = [jax.core.ShapedArray((3,), jnp.float32)] * 2
        jaxpr, out_avals, consts = pe.trace_to_jaxpr_dynamic(
            lu.wrap_init(f, debug_info=jax.api_util.debug_info("test", f, (1, 2), {})), avals)
        print(jaxpr)
        print(out_avals, consts)
        jp, used_consts, used_ins = pe.dce_jaxpr_consts(jaxpr, [True, False])
        print(jp, used_consts, used_ins)
        jp, used_consts, used_ins = pe.dce_jaxpr_consts(jaxpr, [False, True])
        print(jp, used_consts, used_ins)
        jp, used_consts, used_ins = pe.dce_jaxpr_consts(jaxpr, [False, True], instantiate=True)
        print(jp, used_consts, used_ins)
    """,
    "trace_to_jaxpr_nounits": """
        def f(x, y):
            return [x * 2.0, jax.lax.mul(jnp.sin(x), y)]
        pvals = [pe.PartialVal.known(np.float32(3.0)),
                 pe.PartialVal.unknown(jax.core.ShapedArray((), jnp.float32))]
        jaxpr, out_pvals, consts = pe.trace_to_jaxpr_nounits(
            lu.wrap_init(f, debug_info=jax.api_util.debug_info("test", f, (1, 2), {})), pvals)
        print(jaxpr)
        print([pv.is_known() for pv in out_pvals], out_pvals[0].get_known(), consts)
    """,
    "partial_eval_tables": """
        print(pe.dce_rules[jax.extend.core.primitives.call_p] is pe.dce_jaxpr_call_rule)
        print(pe.dce_rules[jax.extend.core.primitives.closed_call_p]
              is pe.dce_jaxpr_closed_call_rule)
        print(type(pe.custom_partial_eval_rules).__name__,
              type(pe.partial_eval_jaxpr_custom_rules).__name__)
    """,
    "partial_eval_jaxpr_custom_rules": """
        calls = []
        p = Primitive("twice_mul")
        p.def_impl(lambda x, y: 2 * x * y)
        p.def_abstract_eval(lambda x, y: x)
        mlir.register_lowering(p, mlir.lower_fun(lambda x, y: [2 * x * y]))
        ad.defjvp(p, lambda t, x, y: p.bind(t, y), lambda t, x, y: p.bind(x, t))
        def transpose(ct, x, y):
            return [p.bind(ct, y) if ad.is_undefined_primal(x) else None,
                    p.bind(x, ct) if ad.is_undefined_primal(y) else None]
        ad.primitive_transposes[p] = transpose
        def rule(saveable, unks_in, inst_in, eqn):
            calls.append(tuple(unks_in))
            if any(unks_in):
                return (None, eqn, [True], [True],
                        [v for v, uk in zip(eqn.invars, unks_in) if not uk])
            return eqn, None, [False], [False], []
        pe.partial_eval_jaxpr_custom_rules[p] = rule
        f = jax.checkpoint(lambda x, y: jnp.sin(p.bind(x, y)))
        print(jax.grad(f)(1.0, 2.0))
        print(jax.grad(f, argnums=(0, 1))(1.0, 2.0))
        print((False, True) in calls, (True, False) in calls)
    """,
    "mlir_helpers": """
        seen = []
        def low(ctx, x, y, z):
            seen.append([str(t) for t in mlir.aval_to_ir_types(ctx.module_context,
                                                                 ctx.avals_in[0])])
            seen.append(str(mlir.aval_to_ir_type(ctx.module_context, ctx.avals_in[0])))
            seen.append((len(ctx.tokens_in.effects()), ctx.tokens_out))
            c, = mlir.ir_constants(np.float32(0.5))
            seen.append(str(c.type))
            seen.append(str(mlir.ir_constant(np.arange(3, dtype=np.int32)).type))
            seen.append(str(mlir.dense_int_array([1, 2])))
            seen.append(str(mlir.dense_int_elements([1, 2])))
            seen.append(str(mlir.i32_attr(3)))
            seen.append(str(mlir.ir_attribute({"a": 1, "b": [True, "s"]})))
            seen.append(str(mlir.token_type()))
            seen.append(str(mlir.shape_tensor(ctx.module_context, [2, 3]).type))
            flat = mlir.ir_tree_registry.flatten([x, (y, z)])[0]
            seen.append(len(flat))
            out = hlo.add(hlo.multiply(x, y), z)
            return [hlo.multiply(out, hlo.broadcast_in_dim(
                out.type, c, mlir.dense_int_array([])))]
        mlir.register_lowering(fma_p, low)
        print(jax.jit(lambda a: fma_p.bind(a, a, a))(np.arange(2.0, dtype=np.float32)))
        print(seen)
        print(mlir.RECV_FROM_HOST_TYPE, mlir.SEND_TO_HOST_TYPE, mlir.DEVICE_TO_DEVICE_TYPE)
        print(mlir.Value is mlir.ir.Value)
        print(mlir.LoweringParameters())
        print(mlir.ShardingContext(1))
        ts = mlir.TokenSet()
        print(len(ts.effects()), ts.items())
        class MyEffect(jax.extend.core.Effect):
            pass
        mlir.lowerable_effects.add_type(MyEffect)
        print(mlir.lowerable_effects.contains(MyEffect()), mlir.lowerable_effects.contains(1))
    """,
    "constant_and_type_handlers": """
        class Celsius:
            def __init__(self, v):
                self.v = v
        mlir.register_constant_handler(
            Celsius, lambda val, aval: mlir.ir_constant(np.float32(val.v + 273.15)))
        def low(ctx, x, y, z):
            return [hlo.add(x, mlir.ir_constant(Celsius(1.0)))]
        mlir.register_lowering(fma_p, low)
        print(jax.jit(lambda a: fma_p.bind(a, a, a))(np.float32(1.0)))
        print(type(jax.core.ShapedArray((), np.float32)) in mlir.ir_type_handlers)
        try:
            mlir.ir_constant(object())
        except TypeError as e:
            print("TypeError")
    """,
    "emit_python_callback": """
        def cb(x, y, z):
            return [np.asarray(x) * 10 + z]
        def low(ctx, x, y, z):
            outs, token, keep = mlir.emit_python_callback(
                ctx, cb, None, [x, y, z], ctx.avals_in, ctx.avals_out, has_side_effect=False)
            print("token", token)
            return outs
        mlir.register_lowering(fma_p, low)
        print(jax.jit(lambda a: fma_p.bind(a, a, a))(np.arange(3.0, dtype=np.float32)))
        def bad(x, y, z):
            return [np.zeros(5, np.float32)]
        def low2(ctx, x, y, z):
            return mlir.emit_python_callback(ctx, bad, None, [x, y, z], ctx.avals_in,
                                             ctx.avals_out, has_side_effect=False)[0]
        mlir.register_lowering(fma_p, low2)
        try:
            jax.block_until_ready(jax.jit(lambda a: fma_p.bind(a, a, a))(np.ones(3, np.float32)))
        except Exception as e:
            print(type(e).__name__, "Incorrect output shape" in str(e))
    """,
    "lower_jaxpr_to_module": """
        def f(x, y):
            return jnp.sin(x) * y + 1.0
        closed = jax.make_jaxpr(f)(np.float32(1), np.float32(2))
        res = mlir.lower_jaxpr_to_module(
            "jit_f", closed, num_const_args=0, in_avals=closed.in_avals, ordered_effects=[],
            platforms=("cpu",), backend=None, axis_context=mlir.ShardingContext(1),
            donated_args=[False, False], lowering_parameters=mlir.LoweringParameters())
        m = res.module
        print(type(res).__name__, res.host_callbacks, res.keepalive)
        print(m.operation.attributes["sym_name"], [op.operation.name for op in m.body.operations])
        main = list(m.body.operations)[0]
        print(main.type, main.attributes["sym_visibility"])
        print([op.operation.name for op in main.regions[0].blocks[0].operations])
        print(type(mlir.module_to_bytecode(m)).__name__)
    """,
    "xla_and_pxla": """
        print(repr(xla.apply_primitive(jax.lax.add_p, 1.0, 2.0)))
        print(repr(xla.apply_primitive(jax.lax.mul_p, np.ones(2), 2.0)))
        print(isinstance(jax.extend.backend.get_backend(), xla.Backend))
        r = xla.canonicalize_dtype_handlers[np.ndarray](np.ones(2))
        print(isinstance(r, np.ndarray), r.dtype)
        class Box:
            def __init__(self, v):
                self.v = v
        jax.core.pytype_aval_mappings[Box] = lambda b: jax.core.ShapedArray((2,), np.float32)
        xla.canonicalize_dtype_handlers[Box] = lambda b: np.asarray(b.v, np.float32)
        print(jax.jit(lambda x: x * 2)(Box([1.0, 2.0])))
        module = jax.jit(lambda x: x + 1).lower(1.0).compiler_ir()
        opts = pxla.create_compile_options(module, False, [False], [False],
                                           jax.extend.backend.get_backend(),
                                           np.array(jax.devices()[:1]), {})
        print(type(opts).__name__, opts.num_partitions, opts.num_replicas,
              opts.parameter_is_tupled_arguments)
    """,
    "removed_names": """
        for name in ("device_put_sharded", "device_put_replicated"):
            try:
                getattr(jax, name)
            except AttributeError as e:
                print(e)
    """,
}

_RUNNER = r"""
import contextlib, io, json, os, sys, textwrap, traceback
if sys.argv[1] == "jaxkit":
    sys.path.insert(0, sys.argv[2])
    import jaxkit
    jaxkit.install_as_jax()
prelude, cases = json.loads(sys.stdin.read())
results = {}
for name, src in cases.items():
    out = io.StringIO()
    ns = {"__name__": "__main__"}
    try:
        with contextlib.redirect_stdout(out):
            exec(prelude, ns)
            exec(textwrap.dedent(src), ns)
    except BaseException as e:  # noqa: BLE001
        out.write(f"<raised {type(e).__name__}: {e}>\n")
    results[name] = out.getvalue()
print(json.dumps(results))
"""


def _run(mode: str) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", _RUNNER, mode, ROOT],
                          input=json.dumps([PRELUDE, CASES]), text=True, capture_output=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def outputs():
    return _run("jax"), _run("jaxkit")


def _mask(text: str) -> str:
    return re.sub(r"0x[0-9a-f]+", "0x?", text)


@pytest.mark.skipif(not HAVE_JAX, reason="needs the jax oracle")
@pytest.mark.parametrize("case", sorted(CASES))
def test_same_as_jax(outputs, case):
    ref, ours = outputs
    assert "<raised" not in ref[case], ref[case]
    assert _mask(ours[case]) == _mask(ref[case])


def test_lower_jaxpr_to_module_compiles_and_runs():
    """The module ``lower_jaxpr_to_module`` builds is one jaxlib compiles, as JAX's is."""
    closed = jaxkit.make_jaxpr(lambda x, y: jnp.sin(x) * y + 1.0)(np.float32(1), np.float32(2))
    res = mlir.lower_jaxpr_to_module("jit_f", closed, platforms=("cpu",),
                                     axis_context=mlir.ShardingContext(1),
                                     donated_args=[False, False])
    exe = pjrt.compile_module(res.module, closed.out_avals)
    x, y = np.float32(0.5), np.float32(3.0)
    out, = exe([jnp.asarray(x)._buf, jnp.asarray(y)._buf])
    np.testing.assert_allclose(np.asarray(out), np.sin(x) * y + 1.0, rtol=1e-6)


def test_lower_jaxpr_to_module_refuses_what_it_cannot_lower():
    closed = jaxkit.make_jaxpr(lambda x: x + 1)(1.0)
    with pytest.raises(NotImplementedError, match="one platform"):
        mlir.lower_jaxpr_to_module("f", closed, platforms=("cpu", "cuda"))
    with pytest.raises(NotImplementedError, match="in_layouts"):
        mlir.lower_jaxpr_to_module("f", closed, in_layouts=[object()])


def test_merge_mlir_modules():
    closed = jaxkit.make_jaxpr(lambda x: jnp.sin(x))(np.float32(1))
    dst = mlir.lower_jaxpr_to_module("jit_f", closed, donated_args=[False]).module
    src = mlir.lower_jaxpr_to_module("jit_g", closed, donated_args=[False]).module
    with dst.context:
        name = mlir.merge_mlir_modules(dst, "main", src)
        names = [mlir.ir.StringAttr(op.attributes["sym_name"]).value for op in dst.body.operations]
        assert dst.operation.verify()
    assert name == "main_0" and names == ["main", "main_0"]
    assert not list(src.body.operations)


def test_lower_jaxpr_to_fun_and_core_call_lowering():
    """``lower_jaxpr_to_fun`` emits a function into a rule's module; ``core_call_lowering``
    lowers a call to it (as a call primitive's rule)."""
    from jaxkit.extend.core import Primitive

    inner = jaxkit.make_jaxpr(lambda x: jnp.cos(x) * 2.0)(np.float32(0))
    p = Primitive("called")
    p.def_abstract_eval(lambda x: x)
    fns = []

    def rule(ctx, x):
        fns.append(mlir.lower_jaxpr_to_fun(ctx.module_context, "helper", inner).name.value)
        return mlir.core_call_lowering(ctx, x, name="body", call_jaxpr=inner)

    mlir.register_lowering(p, rule)
    f = jaxkit.jit(lambda x: p.bind(x))
    np.testing.assert_allclose(f(np.float32(0.3)), np.cos(np.float32(0.3)) * 2, rtol=1e-6)
    text = f.lower(np.float32(0.3)).as_text()
    assert set(fns) == {"helper"} and "func.func private @helper" in text
    assert "call @body" in text


def test_jaxpr_custom_rule_not_used_outside_remat():
    """As in JAX, ``partial_eval_jaxpr_custom_rules`` serves rematerialization only."""
    from jaxkit.extend.core import Primitive
    from jaxkit.interpreters import ad
    from jaxkit.interpreters import partial_eval as pe

    p = Primitive("scaled")
    p.def_impl(lambda x: 3 * x)
    p.def_abstract_eval(lambda x: x)
    ad.deflinear2(p, lambda ct, x: [p.bind(ct)])
    mlir.register_lowering(p, mlir.lower_fun(lambda x: 3 * x))
    calls = []
    pe.partial_eval_jaxpr_custom_rules[p] = lambda *a: calls.append(a)
    assert float(jaxkit.grad(lambda x: jnp.sin(p.bind(x)))(1.0)) == pytest.approx(
        3 * np.cos(3.0), rel=1e-6)
    assert calls == []
    del pe.partial_eval_jaxpr_custom_rules[p]


if __name__ == "__main__":
    ref, ours = _run("jax"), _run("jaxkit")
    for name in CASES:
        if _mask(ref[name]) != _mask(ours[name]):
            print(f"--- {name}\njax:\n{textwrap.indent(ref[name], '  ')}"
                  f"jaxkit:\n{textwrap.indent(ours[name], '  ')}")
