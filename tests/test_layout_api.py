"""``jax.experimental.layout`` on jaxkit against the JAX oracle (one CPU device each):
``Layout``/``Format`` printing, equality and errors, ``x.format``, ``Compiled.input_formats``
and ``output_formats`` (also over 8 devices, against JAX in a subprocess), and
``with_layout_constraint`` eagerly, under jit (the
``LayoutConstraint`` custom call), vmap, grad and in jaxprs; ``device_put`` and ``jit``
in/out shardings with a ``Format`` laying values out column-major (formats, values, the
lowered ``mhlo.layout_mode`` attributes, JAX's errors for committed arguments)."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit.experimental import layout as klayout
from jaxkit.runtime import multi_device

jax = pytest.importorskip("jax")  # the oracle, in this process with one CPU device
jlayout = pytest.importorskip("jax.experimental.layout")
X = np.arange(6.0, dtype=np.float32).reshape(2, 3)


def _both(build):
    """``build(jax_like, layout_module)`` on jaxkit and on JAX, as text."""
    return build(jaxkit, klayout), build(jax, jlayout)


@pytest.mark.parametrize("build", [
    lambda J, L: repr(L.Layout((1, 0))),
    lambda J, L: repr(L.Layout((0, 1), ((8, 128),), 4)),
    lambda J, L: repr(L.Layout.AUTO),
    lambda J, L: repr(L.Format()),
    lambda J, L: repr(L.Format(L.Layout.AUTO)),
    lambda J, L: repr(L.Format(L.Layout((0,)), J.sharding.SingleDeviceSharding(J.devices()[0]))),
    lambda J, L: repr(L.Layout((1, 0)).update(tiling=((2,),))),
    lambda J, L: (L.Layout((1, 0)) == L.Layout((1, 0)), L.Layout((1, 0)) == L.Layout((0, 1)),
                  L.Layout((0,)) == (0,), L.Format() == L.Format(None, None),
                  hash(L.Layout((1, 0))) == hash(L.Layout((1, 0)))),
])
def test_layout_and_format_print_and_compare_as_jax(build):
    ours, theirs = _both(build)
    assert ours == theirs


@pytest.mark.parametrize("args, error", [
    ((3,), TypeError), ((None, 3), TypeError), (("layout",), ValueError)])
def test_format_refuses_bad_arguments_as_jax(args, error):
    def make(L):
        return L.Format(*[L.Layout((0,)) if a == "layout" else a for a in args])
    with pytest.raises(error) as theirs:
        make(jlayout)
    with pytest.raises(error) as ours:
        make(klayout)
    assert str(ours.value) == str(theirs.value).replace("jax._src.layout",
                                                        "jaxkit.experimental.layout")


@pytest.mark.parametrize("value", [X, np.float32(3.0), np.ones((2, 3, 4), np.int32)])
def test_array_format_matches_jax(value):
    ours, theirs = _both(lambda J, L: repr(J.numpy.asarray(value).format))
    assert ours == theirs


@pytest.mark.parametrize("fun, args, kwargs", [
    (lambda x: x.T, (X,), {}),
    (lambda x, y: (x.T, {"a": y}), (X,), {"y": 3.0}),
    (lambda x, y: x @ y, (X, X.T), {}),
])
def test_compiled_formats_match_jax(fun, args, kwargs):
    def build(J, L):
        compiled = J.jit(fun).lower(*args, **kwargs).compile()
        return repr(compiled.input_formats), repr(compiled.output_formats)
    ours, theirs = _both(build)
    assert ours == theirs


def _formats_through_jit(J, L):
    """notebooks/layout.md: compile with ``Format(Layout.AUTO)`` shardings, read the formats
    back, and compile another function whose outputs are given those formats."""
    duck = J.ShapeDtypeStruct((8, 16), np.float32)
    apply_exe = J.jit(lambda x, y: (x[0, :], y[:, 0]), in_shardings=L.Format(L.Layout.AUTO),
                      out_shardings=L.Format(L.Layout.AUTO)).trace(duck, duck).lower().compile()
    arg_formats, kwarg_formats = apply_exe.input_formats
    init_exe = J.jit(lambda x, y: (x * 2, y * 3), out_shardings=arg_formats).trace(
        duck, duck).lower().compile()
    out = init_exe(np.ones((8, 16), np.float32), np.ones((8, 16), np.float32))
    return (repr(arg_formats), kwarg_formats, repr(apply_exe.output_formats),
            init_exe.output_formats == arg_formats, repr(out[1].format),
            np.asarray(out[1]).sum().item())


def test_jit_accepts_formats_as_jax():
    got, expected = _both(_formats_through_jit)
    assert got == expected


def test_jit_with_a_tiled_layout_says_so():
    # JAX lays out tiles on TPUs; jaxkit lays parameters out by major_to_minor only.
    fmt = klayout.Format(klayout.Layout((0, 1), ((8, 128),)),
                         jaxkit.sharding.SingleDeviceSharding(jaxkit.devices()[0]))
    with pytest.raises(NotImplementedError, match="by major_to_minor only"):
        jaxkit.jit(lambda x: x * 2, in_shardings=fmt)


def _jit_formats(J, L):
    """jit with ``Format(Layout((1, 0)), sharding)`` in/out shardings: the layout attributes
    of the lowered program, the compiled formats, values and results' formats, and JAX's
    error for an argument committed to another layout."""
    one = J.sharding.SingleDeviceSharding(J.devices()[0])
    col = L.Format(L.Layout((1, 0)), one)
    f = J.jit(lambda a, b: (a * 2, a @ b), in_shardings=(col, None),
              out_shardings=(col, None))
    text = f.lower(X, X.T).as_text()
    compiled = f.lower(X, X.T).compile()
    y, z = f(X, X.T)
    g = J.jit(lambda a: a + 1, out_shardings=col)
    auto = J.jit(lambda a: a.T, in_shardings=L.Format(L.Layout.AUTO),
                 out_shardings=L.Format(L.Layout.AUTO)).lower(X).as_text()
    return [
        re.findall(r"mhlo.layout_mode = \"[^\"]*\"", text),
        re.findall(r"mhlo.layout_mode = \"[^\"]*\"", auto),
        repr(compiled.input_formats), repr(compiled.output_formats),
        repr(y), repr(y.format), repr(z.format), repr(f(y, X.T)[1]),
        repr(J.jit(lambda a: a.sum(0))(y)), repr(g(J.numpy.asarray(X)).format),
        repr(compiled(J.numpy.asarray(X), X.T)[0]),
        _error(lambda: f(J.device_put(X, J.devices()[0]), X.T)),
    ]


def test_jit_with_formats_lays_values_out_as_jax():
    ours, theirs = _both(_jit_formats)
    assert ours == theirs


@pytest.mark.parametrize("m2m", [(1, 0), (0, 1)])
def test_eager_with_layout_constraint_lays_the_array_out_as_jax(m2m):
    def build(J, L):
        y = L.with_layout_constraint(J.numpy.asarray(X), L.Layout(m2m))
        return np.asarray(y).tolist(), y.shape, y.dtype, repr(y.format), np.asarray(
            y + 1).tolist()
    ours, theirs = _both(build)
    assert ours == theirs


def _error(thunk):
    try:
        return repr(thunk())
    except Exception as e:  # noqa: BLE001  (the class and words are the record)
        return f"{type(e).__name__}: {e}"


def _device_put_formats(J, L):
    """``device_put`` with a ``Format``: a buffer in that layout (``x.format``), the values
    it holds, computations on it, AOT calls that need another layout, and the errors."""
    dev = J.devices()[0]
    one = J.sharding.SingleDeviceSharding(dev)
    cube = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    z = J.device_put(X, L.Format(L.Layout((1, 0)), one))
    c = J.device_put(cube, L.Format(L.Layout((2, 0, 1)), one))
    exe = J.jit(lambda a: a * 2).lower(X).compile()
    relaid = L.with_layout_constraint(J.numpy.asarray(X), L.Layout((1, 0)))  # uncommitted
    return [
        repr(z.format), repr(z), np.asarray(z).tolist(), repr(z + 1), repr(z.T),
        repr(J.jit(lambda a: a @ a.T)(z)), repr(c.format), repr(c[1]),
        repr(J.device_put(z, dev).format), repr(J.device_put(J.numpy.asarray(X), L.Format(
            L.Layout((1, 0)), one)).format),
        repr(J.device_put(X, L.Format(None, one)).format),
        repr(J.device_put(X, L.Format(L.Layout((0, 1)), one)).format),
        repr(J.lax.with_sharding_constraint(J.numpy.asarray(X), L.Format(L.Layout((1, 0)),
                                                                         one)).format),
        _error(lambda: exe(z)), _error(lambda: exe(relaid)),
        _error(lambda: J.device_put(X, L.Format(L.Layout.AUTO, one))),
        _error(lambda: J.device_put(X, L.Format(L.Layout((0,)), one))),
        _error(lambda: J.device_put(X, L.Format(L.Layout((0, 0)), one))),
    ]


def test_device_put_with_a_format_as_jax():
    ours, theirs = _both(_device_put_formats)
    assert ours == theirs


def test_jit_lowers_to_the_layout_constraint_custom_call_as_jax():
    def build(J, L):
        f = J.jit(lambda x: L.with_layout_constraint(x * 2, L.Layout((1, 0))))
        text = f.lower(X).as_text()
        y = f(X)  # a result the constraint makes is laid out so (XLA's choice: "auto")
        return [line.strip() for line in text.splitlines() if "LayoutConstraint" in line], (
            np.asarray(y).tolist(), re.findall(r"mhlo.layout_mode = \"[^\"]*\"", text),
            repr(y.format))
    ours, theirs = _both(build)
    assert ours == theirs
    assert ours[1][0] == (X * 2).tolist()
    # two such arrays added eagerly (JAX 0.10.2 reads one of them in the wrong order here)
    f = jaxkit.jit(lambda x: klayout.with_layout_constraint(x * 2, klayout.Layout((1, 0))))
    np.testing.assert_array_equal(f(X) + f(X), X * 4)


@pytest.mark.parametrize("transform", [
    lambda J, L: J.make_jaxpr(lambda x: L.with_layout_constraint(x, L.Layout((0, 1))))(X),
    lambda J, L: J.make_jaxpr(J.vmap(lambda x: L.with_layout_constraint(x, L.Layout((0,))),
                                     in_axes=1))(X),
    lambda J, L: J.make_jaxpr(J.vmap(lambda x: L.with_layout_constraint(x, L.Layout((0,)))))(X),
    lambda J, L: J.make_jaxpr(J.grad(
        lambda x: L.with_layout_constraint(x, L.Layout((1, 0))).sum()))(X),
    lambda J, L: J.make_jaxpr(lambda x: L.with_layout_constraint(
        {"a": x, "b": x[0]}, {"a": L.Layout((1, 0)), "b": L.Layout((0,))}))(X),
])
def test_jaxprs_of_with_layout_constraint_match_jax(transform):
    ours, theirs = _both(lambda J, L: str(transform(J, L)))
    assert ours == theirs


def test_values_under_transforms_match_numpy():
    f = lambda x: klayout.with_layout_constraint(jnp.sin(x), klayout.Layout((1, 0)))  # noqa: E731
    np.testing.assert_allclose(jaxkit.jit(f)(X), np.sin(X), rtol=1e-6)
    np.testing.assert_allclose(jaxkit.grad(lambda x: f(x).sum())(X), np.cos(X), rtol=1e-6)
    stacked = jnp.asarray(np.stack([X, X + 1], 2))
    for g in (jaxkit.vmap(f, in_axes=2), jaxkit.jit(jaxkit.vmap(f, in_axes=2))):
        np.testing.assert_allclose(g(stacked), np.sin(np.stack([X, X + 1])), rtol=1e-6)


@pytest.mark.parametrize("x, layouts, prefix", [
    (X, lambda L: L.Layout((0,)), "One of with_layout_constraint arguments is incompatible "
     "with its layout annotation Layout(major_to_minor=(0,), tiling=None, "
     "sub_byte_element_size_in_bits=0): Length of major_to_minor and the rank of the value "
     "should match. Got major_to_minor=(0,) and shape=(2, 3)"),
    (X, lambda L: (1, 0), "with_layout_constraint layouts specification must be a tree prefix "
     "of the corresponding value"),
    (1.0, lambda L: L.Layout(()), "with_layout_constraint in eager mode can only be applied to "
     "jax.Arrays. Got <class "),
])
def test_bad_with_layout_constraint_raises_as_jax(x, layouts, prefix):
    # The texts after ``prefix`` name each library's own pytree error and scalar class.
    for module in (jlayout, klayout):
        with pytest.raises(ValueError) as error:
            module.with_layout_constraint(x, layouts(module))
        assert str(error.value).startswith(prefix)


# ---- formats of arrays and executables partitioned over 8 devices ---------------------------
SHARDED_FORMATS = """
import importlib
import numpy as np
mesh = J.make_mesh((4, 2), ("x", "y"), devices=devs, axis_types=(J.sharding.AxisType.Auto,) * 2)
NS, P = J.sharding.NamedSharding, J.sharding.PartitionSpec
x = J.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), NS(mesh, P("x", "y")))
out = [repr(x.format), repr(x.addressable_shards[1].data.format)]
c = J.jit(lambda a: (a * 2).T).lower(x).compile()
out += [repr(c.input_formats), repr(c.output_formats)]
c = J.jit(lambda a, b: {"s": a + b}, out_shardings=NS(mesh, P("y"))).lower(x, 1.0).compile()
out += [repr(c.input_formats), repr(c.output_formats)]
L = importlib.import_module(J.__name__ + ".experimental.layout")
y = J.device_put(np.ones((8, 4), np.float32), L.Format(L.Layout((0, 1)), NS(mesh, P("x"))))
out += [repr(y.format), repr(J.device_put(x, L.Format(None, NS(mesh, P("y")))).format)]
col = L.Format(L.Layout((1, 0)), NS(mesh, P("x")))
z = J.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), col)  # column-major shards
out += [repr(z.format), z.sharding == col.sharding, np.asarray(z).tolist(), repr(z)]
out += [[repr(s.index), repr(s.data.format), np.asarray(s.data).tolist()]
        for s in z.addressable_shards[:3]]
out += [repr(J.jit(lambda a: a * 2)(z).format), np.asarray((z * 2)[1:3]).tolist()]
out += [repr(J.device_put(z, NS(mesh, P("x"))).format),
        repr(J.device_put(z, L.Format(L.Layout((0, 1)), NS(mesh, P("x")))).format),
        repr(J.device_put(z, L.Format(L.Layout((1, 0)), NS(mesh, P(None, "y")))).format)]
r = J.device_put(np.ones((4, 2, 2), np.float32), L.Format(L.Layout((2, 0, 1)), NS(mesh, P())))
out += [repr(r.format), repr(r.addressable_shards[5].data.format), float(r.sum())]
w = L.with_layout_constraint(x, L.Layout((1, 0)))
out += [repr(w.format), np.asarray(w).tolist()]
"""


def test_sharded_formats_match_jax_on_8_devices():
    ns = {"J": jaxkit, "devs": multi_device.add_cpu_backend("spmd8", 8).devices}
    exec(SHARDED_FORMATS, ns)
    driver = ("import json, sys, jax\nns = {'J': jax, 'devs': jax.devices()}\n"
              "exec(sys.argv[1], ns)\nprint(json.dumps(ns['out']))")
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    proc = subprocess.run([sys.executable, "-c", driver, SHARDED_FORMATS], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ns["out"] == json.loads(proc.stdout.strip().splitlines()[-1])
