"""Ordered callbacks keep program order through control flow and nested ``jit``: the order in
which ``debug.callback(ordered=True)``, ``io_callback(ordered=True)`` and
``debug.print(ordered=True)`` run, in loop bodies, branches, nested jits, scans, under grad,
vmap, checkpoint and custom_jvp, compared with JAX's. Each program puts many ordered calls on
values that do not depend on one another, so that only the tokens order them (without tokens
through nested blocks, XLA ran a loop's calls after the ones that follow it, or in reverse)."""
import importlib
import os
import subprocess
import sys

import numpy as np
import pytest

import jaxkit

jax_oracle = pytest.importorskip("jax")


def _debug(lib, log, tag, *xs):
    """An ordered debug callback appending ``(kind, tag, values)`` to ``log``."""
    lib.debug.callback(lambda *v: log.append(("debug", tag, *np.asarray(v).ravel().tolist())),
                       *xs, ordered=True)


def _io(lib, log, tag, x):
    """An ordered io_callback appending ``(kind, tag, value)`` and returning ``x``."""
    def record(v):
        log.append(("io", tag, *np.asarray(v).ravel().tolist()))
        return v
    return lib.experimental.io_callback(record, lib.ShapeDtypeStruct(x.shape, x.dtype), x,
                                        ordered=True)


def _around(lib, log, x, n, tag):
    """``n`` ordered calls on ``x`` (each independent of the others' results)."""
    for k in range(n):
        _debug(lib, log, f"{tag}{k}", x)


def fori_io(lib, log):
    def body(i, c):
        for k in range(20):  # 20 ordered io_callbacks per iteration
            c = _io(lib, log, f"body{k}", c + i)
        return c

    def f(x):
        x = _io(lib, log, "pre", x)
        y = lib.lax.fori_loop(0, 3, body, x)
        for k in range(5):
            _io(lib, log, f"post{k}", x * k)
        return y
    return lib.jit(f), (np.float32(1.0),)


def while_cond_effects(lib, log):
    def cond(c):
        _debug(lib, log, "cond", c[0])
        return c[0] < 3

    def body(c):
        for k in range(8):
            _debug(lib, log, f"body{k}", c[1])
        return c[0] + 1, c[1]

    def f(x):
        _around(lib, log, x, 6, "pre")
        out = lib.lax.while_loop(cond, body, (0, x))
        _around(lib, log, x, 6, "post")
        return out
    return lib.jit(f), (np.float32(2.0),)


def cond_branches(lib, log):
    def branch(tag):
        def run(v):
            _around(lib, log, v, 10, tag)
            return v * 2
        return run

    def f(p, x):
        _around(lib, log, x, 10, "pre")
        y = lib.lax.cond(p, branch("T"), branch("F"), x)
        _around(lib, log, x, 10, "post")
        z = lib.lax.cond(p, branch("T2"), lambda v: v, x)
        _around(lib, log, x, 3, "end")
        return y + z
    return lib.jit(f), (True, np.float32(3.0))


def switch_in_loop(lib, log):
    def step(i, c):
        branches = [lambda v, k=k: (_around(lib, log, i, 4, f"br{k}_"), v + k)[1]
                    for k in range(3)]
        _debug(lib, log, "step", i)
        return lib.lax.switch(i % 3, branches, c)

    def f(x):
        _around(lib, log, x, 5, "pre")
        y = lib.lax.fori_loop(0, 5, step, x)
        _around(lib, log, x, 5, "post")
        return y
    return lib.jit(f), (np.float32(0.0),)


def nested_jit(lib, log):
    @lib.jit
    def inner(v):
        _around(lib, log, v, 6, "inner")
        return lib.jit(lambda w: (_around(lib, log, w, 6, "innermost"), w + 1)[1])(v)

    def f(x):
        _around(lib, log, x, 6, "a")
        y = inner(x)
        _around(lib, log, x, 6, "b")
        z = inner(x * 2)
        _around(lib, log, x, 6, "c")
        return y + z
    return lib.jit(f), (np.float32(1.0),)


def scan_body(lib, log):
    def body(c, v):
        for k in range(6):
            _debug(lib, log, f"s{k}", v)
        return c + v, c

    def f(xs):
        _around(lib, log, xs[0], 6, "pre")
        c, ys = lib.lax.scan(body, 0.0, xs)
        _around(lib, log, xs[0], 6, "post")
        return c, ys
    return lib.jit(f), (np.arange(4, dtype=np.float32),)


def _loop_of_calls(lib, log, x):
    def body(i, c):
        _around(lib, log, i, 5, "loop")
        return c * 1.5
    _around(lib, log, x, 5, "pre")
    y = lib.lax.fori_loop(0, 3, body, x)
    _around(lib, log, x, 5, "post")
    return y


def grad_of_loop(lib, log):
    return lib.jit(lib.grad(lambda x: _loop_of_calls(lib, log, x))), (np.float32(2.0),)


def grad_of_checkpoint(lib, log):
    f = lib.checkpoint(lambda x: _loop_of_calls(lib, log, x))
    return lib.jit(lib.grad(f)), (np.float32(2.0),)


def custom_jvp_in_loop(lib, log):
    @lib.custom_jvp
    def g(v):
        _around(lib, log, v, 4, "g")
        return lib.numpy.sin(v)

    g.defjvp(lambda p, t: (g(p[0]), lib.numpy.cos(p[0]) * t[0]))

    def f(x):
        _around(lib, log, x, 4, "pre")
        y = lib.lax.fori_loop(0, 3, lambda i, c: g(c), x)
        _around(lib, log, x, 4, "post")
        return y
    return lib.jit(lib.grad(f)), (np.float32(0.5),)


def vmap_of_loop(lib, log):
    def f(x):
        return _loop_of_calls(lib, log, x)
    return lib.jit(lib.vmap(f)), (np.arange(3, dtype=np.float32),)


def extend_call_primitive(lib, log):
    call_p = importlib.import_module(f"{lib.__name__}.extend.core.primitives").call_p
    lu = importlib.import_module(f"{lib.__name__}.extend.linear_util")

    def body(v):
        _around(lib, log, v, 6, "in")
        return [v + 1]

    def f(x):
        for k in range(6):
            _debug(lib, log, f"pre{k}", x * k)
        fun = lu.wrap_init(body, debug_info=lib.api_util.debug_info("call", body, (x,), {}))
        (y,) = call_p.bind(x, subfuns=(fun,))
        _around(lib, log, x, 6, "post")
        return y
    return lib.jit(f), (np.float32(1.0),)


def two_kinds_in_loop(lib, log):
    """Ordered debug callbacks and io_callbacks: one token per kind through the same loop,
    branch and nested jit (each kind compared in its own order)."""
    def body(i, c):
        for k in range(5):
            c = _io(lib, log, f"io{k}", c + i)
            _debug(lib, log, f"dbg{k}", i)
        c = lib.lax.cond(i > 1, lambda v: _io(lib, log, "io_T", v), lambda v: v, c)
        return lib.jit(lambda v: (_debug(lib, log, "dbg_jit", v), v)[1])(c)

    def f(x):
        x = _io(lib, log, "io_pre", x)
        _around(lib, log, x, 4, "dbg_pre")
        y = lib.lax.fori_loop(0, 3, body, x)
        for k in range(4):
            _io(lib, log, f"io_post{k}", x * k)
        _around(lib, log, x, 4, "dbg_post")
        return y
    return lib.jit(f), (np.float32(1.0),)


CASES = [fori_io, while_cond_effects, cond_branches, switch_in_loop, nested_jit, scan_body,
         grad_of_loop, grad_of_checkpoint, custom_jvp_in_loop, vmap_of_loop,
         extend_call_primitive, two_kinds_in_loop]


def _run(lib, case):
    log = []
    fun, args = case(lib, log)
    out = fun(*args)
    lib.effects_barrier()
    # Each effect kind has its own chain (as in JAX): compare each kind's order.
    by_kind = {kind: [e[1:] for e in log if e[0] == kind] for kind in ("debug", "io")}
    return lib.tree_util.tree_map(np.asarray, out), by_kind


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_ordered_calls_follow_program_order_as_jax(case):
    got_out, got = _run(jaxkit, case)
    want_out, want = _run(jax_oracle, case)
    assert sum(map(len, want.values())) > 10
    assert got == want
    jaxkit.tree_util.tree_map(np.testing.assert_allclose, got_out, want_out)


def test_ordered_prints_in_loop_and_branch_as_jax(capfd):
    def prog(lib):
        def body(i, c):
            for k in range(6):
                lib.debug.print("body {k} i={i}", k=k, i=i, ordered=True)
            return c

        def f(p, x):
            for k in range(6):
                lib.debug.print("pre {k}", k=k, ordered=True)
            y = lib.lax.fori_loop(0, 2, body, x)
            y = lib.lax.cond(p, lambda v: (lib.debug.print("T {}", v, ordered=True), v)[1],
                             lambda v: v, y)
            for k in range(6):
                lib.debug.print("post {k}", k=k, ordered=True)
            return y
        lib.jit(f)(True, np.float32(1.0))
        lib.effects_barrier()
        return capfd.readouterr().out

    assert prog(jaxkit) == prog(jax_oracle)


def test_tokens_thread_through_while_case_and_call_ops():
    """The lowered program carries the token: the loop, the ``case`` and the nested function
    take it and return it (one ``after_all`` starts the program's chain)."""
    def f(p, x):
        _debug(jaxkit, [], "a", x)
        y = jaxkit.lax.fori_loop(0, 2, lambda i, c: (_debug(jaxkit, [], "b", c), c)[1], x)
        y = jaxkit.lax.cond(p, lambda v: (_debug(jaxkit, [], "c", v), v)[1], lambda v: v, y)
        return jaxkit.jit(lambda v: (_debug(jaxkit, [], "d", v), v)[1])(y)
    text = jaxkit.jit(f).lower(True, np.float32(1.0)).as_text()
    assert text.count("stablehlo.after_all") == 1
    assert "stablehlo.while(%iterArg = " in text and ": !stablehlo.token, " in text
    assert "stablehlo.case" in text and "(!stablehlo.token, tensor<f32>)" in text
    assert ('func.func private @"<lambda>"(%arg0: !stablehlo.token {jax.token = true}, '
            '%arg1: tensor<f32>) -> (!stablehlo.token {jax.token = true}, tensor<f32>)') in text
    assert 'call @"<lambda>"(%4, %arg1) : (!stablehlo.token, tensor<f32>)' in text


# Programs over 4 CPU devices, run in a fresh process per library (the device count is fixed
# at start). ``shard_map``: a chain through a jitted shard_map; devices run concurrently, so only
# each device's own order is defined and device 0's calls (values below 100) are compared.
# ``mesh``: a jit partitioned over the mesh, whose ordered calls run on device 0, through a loop
# and a branch.
_PREAMBLE = """
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
import numpy as np
import {lib} as jax
log = []
def io(tag, x):
    def rec(v):
        log.append((tag, np.asarray(v).tolist()))
        return v
    return jax.experimental.io_callback(rec, jax.ShapeDtypeStruct(x.shape, x.dtype), x,
                                        ordered=True)
mesh = jax.sharding.Mesh(np.array(jax.devices()), ("x",))
P = jax.sharding.PartitionSpec
"""
_PROGRAMS = {
    "shard_map": """
def body(x):
    for k in range(6):
        x = io(f"sm{{k}}", x + 1)
    return x
sm = jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x"))
@jax.jit
def f(x):
    x = io("pre", x)
    y = sm(x)
    for k in range(4):
        io(f"post{{k}}", x * k)
    return y
out = f(jax.numpy.arange(4.) * 100)
jax.effects_barrier()
print(np.asarray(out).tolist())
print([e for e in log if not e[0].startswith("sm") or e[1][0] < 100])
""",
    "mesh": """
@jax.jit
def f(x):
    x = io("pre", x)
    y = jax.lax.fori_loop(0, 3, lambda i, c: io("b", c + i), x)
    y = jax.lax.cond(y[0] > 0, lambda v: io("T", v), lambda v: v, y)
    for k in range(3):
        io(f"post{{k}}", x * k)
    return y
out = f(jax.device_put(np.arange(4.), jax.sharding.NamedSharding(mesh, P("x"))))
jax.effects_barrier()
print(np.asarray(out).tolist())
print(log)
""",
}


@pytest.mark.parametrize("program", sorted(_PROGRAMS))
def test_ordered_calls_over_devices_as_jax(program, tmp_path):
    # The jaxkit this test imports, ahead of what the working directory holds.
    here = os.path.dirname(os.path.dirname(os.path.abspath(jaxkit.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, *sys.path])}

    def run(lib):
        code = (_PREAMBLE + _PROGRAMS[program]).format(lib=lib)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout.splitlines()[-2:]

    got, want = run("jaxkit"), run("jax")
    assert "'post0'" in want[1] and want[1].index("'pre'") < want[1].index("'post0'")
    assert got == want
