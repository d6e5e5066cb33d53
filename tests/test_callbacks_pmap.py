"""Host callbacks (``debug.print``, ``debug.callback``, ``pure_callback``, ``io_callback``,
ordered and unordered) inside ``pmap`` over one and several devices, nested under
``jit``/``vmap``/``grad``, in ``shard_map`` and in programs partitioned over a mesh; and callback
equations printed as JAX prints them.

Everything is compared with the JAX oracle: the jaxprs in this process (golden text, addresses
masked), the programs' printed output and results in two fresh processes with 8 CPU devices
(one for JAX, one for jaxkit) running the same table of scenarios. Lines that devices print
concurrently are compared sorted; a single device's are compared in order.
"""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit.experimental import io_callback

_ADDRESS = re.compile(r" at 0x[0-9a-fA-FX]+")


def _masked(text: str) -> str:
    return _ADDRESS.sub(" at 0x?", text)


# --------------------------------------------------------------------------------------------
# Jaxprs: each case builds (function, arguments) from a library (jax or jaxkit), its numpy
# and its io_callback; the printed jaxprs must be the same text.
# --------------------------------------------------------------------------------------------


def _sin(x):
    return np.sin(x)


def _noop(*args, **kwargs):
    return None


JAXPR_CASES = {
    "debug_print_ordered": lambda jx, jn, io: (
        lambda x: jx.debug.print("a {}", x, ordered=True), (1.0,)),
    "debug_print_kwargs_and_python_int": lambda jx, jn, io: (
        lambda x: jx.debug.print("b {x} {y}", x=x, y=3), (1.0,)),
    "debug_print_static_string": lambda jx, jn, io: (
        lambda x: jx.debug.print("{a} {b}", a=x, b="s"), (1.0,)),
    "debug_print_no_placeholders": lambda jx, jn, io: (
        lambda x: jx.debug.print("plain"), (1.0,)),
    "debug_print_two_call_form": lambda jx, jn, io: (
        lambda x: jx.debug.print(ordered=True)("t {}", x), (1.0,)),
    "debug_print_partitioned": lambda jx, jn, io: (
        lambda x: jx.debug.print("p {}", x, partitioned=True), (jn.arange(3.0),)),
    "debug_callback": lambda jx, jn, io: (
        lambda x: jx.debug.callback(_noop, x), (1.0,)),
    "debug_callback_ordered_partitioned_static": lambda jx, jn, io: (
        lambda x: jx.debug.callback(_noop, x, "s", ordered=True, partitioned=True), (1.0,)),
    "debug_callback_two_call_form": lambda jx, jn, io: (
        lambda x: jx.debug.callback(ordered=True)(_noop, x, k=x), (1.0,)),
    "pure_callback": lambda jx, jn, io: (
        lambda x: jx.pure_callback(_sin, jx.ShapeDtypeStruct((), jn.float32), x), (1.0,)),
    "pure_callback_sequential": lambda jx, jn, io: (
        lambda x: jx.pure_callback(_sin, jx.ShapeDtypeStruct((3,), jn.float32), x,
                                   vmap_method="sequential"), (jn.arange(3.0),)),
    "pure_callback_vmapped_expand_dims": lambda jx, jn, io: (
        jx.vmap(lambda x: jx.pure_callback(_sin, jx.ShapeDtypeStruct((), jn.float32), x,
                                           vmap_method="expand_dims")), (jn.arange(2.0),)),
    "io_callback_ordered": lambda jx, jn, io: (
        lambda x: io(_sin, jx.ShapeDtypeStruct((), jn.float32), x, ordered=True), (1.0,)),
    "io_callback_unordered_in_jit": lambda jx, jn, io: (
        lambda x: jx.jit(lambda y: io(_sin, jx.ShapeDtypeStruct((), jn.float32), y))(x),
        (1.0,)),
    "debug_print_under_grad": lambda jx, jn, io: (
        jx.grad(lambda x: (jx.debug.print("g {x}", x=x), x * x)[1]), (1.0,)),
    "debug_print_under_grad_of_checkpoint": lambda jx, jn, io: (
        jx.grad(jx.checkpoint(lambda x: (jx.debug.print("ck {}", x), jn.sin(x))[1])), (1.0,)),
    "debug_prints_in_scan_and_cond": lambda jx, jn, io: (
        lambda x: jx.lax.cond(x[0] > 1, lambda: jx.debug.print("big {}", x, ordered=True),
                              lambda: jx.debug.print("small")) or jx.lax.scan(
            lambda c, v: ((jx.debug.print("s {} {}", c, v), c + v)[1], None), 0.0, x),
        (jn.arange(3.0),)),
    "debug_callback_under_vmap": lambda jx, jn, io: (
        jx.vmap(lambda x: (jx.debug.callback(_noop, x, "a"), x * x)[1]), (jn.arange(2.0),)),
}


@pytest.mark.parametrize("name", list(JAXPR_CASES))
def test_callback_jaxpr_prints_as_jax(name):
    jax = pytest.importorskip("jax")
    jax_io = pytest.importorskip("jax.experimental").io_callback
    f_jax, args_jax = JAXPR_CASES[name](jax, jax.numpy, jax_io)
    f_kit, args_kit = JAXPR_CASES[name](jaxkit, jnp, io_callback)
    expected = _masked(str(jax.make_jaxpr(f_jax)(*args_jax)))
    assert _masked(str(jaxkit.make_jaxpr(f_kit)(*args_kit))) == expected


def test_callback_parameters_are_jax_s():
    """The parameters themselves (not only their printing) are JAX's: names and values."""
    jaxpr = jaxkit.make_jaxpr(lambda x: (jaxkit.debug.print("{} {}", x, "s", ordered=True),
                                         io_callback(_sin, jaxkit.ShapeDtypeStruct(
                                             (), jnp.float32), x, ordered=True)))(1.0)
    dp, io = jaxpr.eqns
    assert sorted(dp.params) == ["fmt", "has_placeholders", "in_tree", "logging_record",
                                 "np_printoptions", "ordered", "partitioned", "static_args"]
    assert dp.params["static_args"] == ((1, "s"),) and dp.params["ordered"] is True
    assert dict(dp.params["np_printoptions"]) == np.get_printoptions()
    assert sorted(io.params) == ["callback", "ordered", "result_avals", "sharding"]
    assert io.params["callback"].callback_func is _sin and io.params["sharding"] is None
    eff = jaxkit.make_jaxpr(lambda x: jaxkit.debug.callback(_noop, x, ordered=True))(1.0)
    assert isinstance(eff.eqns[0].params["effect"], jaxkit.debug.OrderedDebugEffect)


def test_debug_callback_rejects_a_non_callable_and_extra_two_call_arguments():
    jax = pytest.importorskip("jax")
    for lib in (jax, jaxkit):
        with pytest.raises(TypeError) as err:
            lib.debug.callback(3, 1.0)
        assert str(err.value) == ("first argument to jax.debug.callback must be callable, "
                                  "but got an object of type <class 'int'>")
        with pytest.raises(TypeError, match="two-call form"):
            lib.debug.callback(None, 1.0)


# --------------------------------------------------------------------------------------------
# Running: the scenarios run in fresh processes with 8 CPU devices, under JAX and under
# jaxkit. Each is (name, code, sort): ``code`` uses ``jax``, ``jnp``, ``np``, ``io_callback``,
# ``out(text)`` (one line, written at once), ``mesh``/``xs``/``sm`` (a 4-device mesh, an array
# laid out over it, a shard_map over it), ``mesh2``/``xs2``/``sm_x`` (the same on a 2x2 mesh,
# the shard_map manual over "x" only); it ends with the expression whose value is printed.
# ``sort``: lines printed from several devices concurrently are compared sorted; "chains":
# lines of independent ordered effects, each kind (first word) compared in its order.
# --------------------------------------------------------------------------------------------

_P1 = "jnp.arange(1.)"
_P4 = "jnp.arange(4.)"
_PRINT = "lambda x: (jax.debug.print('p {{}}', x{opts}), x)[1]"
_IO = ("lambda x: io_callback(lambda v: (out(f'io {{v}}'), v * 2)[1], "
       "jax.ShapeDtypeStruct((), jnp.float32), x{opts})")

SCENARIOS = [
    ("pmap1_print_ordered", f"jax.pmap({_PRINT.format(opts=', ordered=True')})({_P1})", False),
    ("pmap1_print", f"jax.pmap({_PRINT.format(opts='')})({_P1})", False),
    ("pmap4_print", f"jax.pmap({_PRINT.format(opts='')})({_P4})", True),
    ("pmap4_print_ordered", f"jax.pmap({_PRINT.format(opts=', ordered=True')})({_P4})", True),
    ("pmap4_debug_callback_ordered",
     "jax.pmap(lambda x: (jax.debug.callback(lambda v: out(f'cb {v}'), x, ordered=True), "
     f"x)[1])({_P4})", True),
    ("pmap4_pure_callback",
     "jax.pmap(lambda x: jax.pure_callback(lambda v: np.sin(v), "
     f"jax.ShapeDtypeStruct((), jnp.float32), x))({_P4})", True),
    ("pmap4_pure_callback_rows",
     "jax.pmap(lambda x: jax.pure_callback(lambda v: np.cumsum(v), "
     "jax.ShapeDtypeStruct((3,), jnp.float32), x))(jnp.arange(12.).reshape(4, 3))", True),
    ("pmap4_io_callback", f"jax.pmap({_IO.format(opts='')})({_P4})", True),
    ("pmap4_io_callback_ordered", f"jax.pmap({_IO.format(opts=', ordered=True')})({_P4})",
     True),
    ("pmap1_io_callback_ordered", f"jax.pmap({_IO.format(opts=', ordered=True')})({_P1})",
     False),
    ("pmap4_debug_callback_static",
     "jax.pmap(lambda x: (jax.debug.callback(lambda v, s: out(f'{s} {v}'), x, 'dev'), x)[1])"
     f"({_P4})", True),
    ("pmap2_of_jit", "jax.pmap(jax.jit(lambda x: (jax.debug.print('j {}', x), x + 1)[1]))"
                     "(jnp.arange(2.))", True),
    ("pmap2_of_vmap", "jax.pmap(jax.vmap(lambda x: (jax.debug.print('v {}', x), x + 1)[1]))"
                      "(jnp.arange(4.).reshape(2, 2))", True),
    ("pmap2_of_grad", "jax.pmap(jax.grad(lambda x: (jax.debug.print('g {}', x), x * x)[1]))"
                      "(jnp.arange(2.))", True),
    ("grad_of_pmap2",
     "jax.grad(lambda x: jax.pmap(lambda y: (jax.debug.print('gp {}', y), y * y)[1])(x)"
     ".sum())(jnp.arange(2.))", True),
    ("jit_of_pmap2", "jax.jit(jax.pmap(lambda x: (jax.debug.print('jp {}', x), x + 1)[1]))"
                     "(jnp.arange(2.))", True),
    ("vmap_of_pmap2", "jax.vmap(jax.pmap(lambda x: (jax.debug.print('vp {}', x), x + 1)[1]))"
                      "(jnp.arange(4.).reshape(2, 2))", True),
    ("pmap2_axis_index",
     "jax.pmap(lambda x: (jax.debug.print('ai {} {}', jax.lax.axis_index('i'), x), x)[1], "
     "axis_name='i')(jnp.arange(2.))", True),
    ("pmap1_two_ordered_prints_keep_order",
     "jax.pmap(lambda x: (jax.debug.print('a {}', x, ordered=True), "
     f"jax.debug.print('b {{}}', x, ordered=True), x)[2])({_P1})", False),
    ("pmap4_psum_then_print",
     "jax.pmap(lambda x: (jax.debug.print('s {}', jax.lax.psum(x, 'i')), x)[1], "
     f"axis_name='i')({_P4})", True),
    ("jit_ordered_prints_keep_program_order",
     "jax.jit(lambda x: ([jax.debug.print('o {}', x[i], ordered=True) for i in range(20)], "
     "x)[1])(jnp.arange(20.))", False),
    ("jit_ordered_io_callbacks_keep_program_order",
     "jax.jit(lambda x: [io_callback(lambda v: out(f'io {v}'), None, x[i] * 3, ordered=True) "
     "for i in range(12)] and x)(jnp.arange(12.))", False),
    # Without tokens XLA ran the io_callbacks here in reverse order. The two effect kinds are
    # ordered each in itself (as JAX's tokens are per effect), not with each other.
    ("jit_two_ordered_effect_kinds_keep_their_orders",
     "jax.jit(lambda x: ([jax.debug.print('A {}', jnp.sin(x[i]), ordered=True) "
     "for i in range(10)], [io_callback(lambda v: out(f'IO {v}'), None, x[i] * 3, "
     "ordered=True) for i in range(10)], x)[2])(jnp.arange(10.))", "chains"),
    ("jit_print_partitioned_one_device",
     "jax.jit(lambda x: jax.debug.print('j {}', x, partitioned=True))(jnp.arange(3.))", False),
    # (a pmap without outputs: its program's token is waited on once)
    ("pmap2_print_partitioned_no_outputs",
     "jax.pmap(lambda x: jax.debug.print('p {}', x, partitioned=True))(jnp.arange(2.))", True),
    ("pmap2_debug_callback_no_outputs",
     "jax.pmap(lambda x: jax.debug.callback(lambda v: out(f'c {v}'), x))(jnp.arange(2.))",
     True),
    ("mesh_jit_pure_callback_on_a_chosen_device",
     "jax.jit(lambda x: jax.pure_callback(lambda v: (out(type(v).__name__), np.sin(v))[1], "
     "jax.ShapeDtypeStruct((8,), jnp.float32), x, "
     "sharding=jax.sharding.SingleDeviceSharding(jax.devices()[2])) * 2)(xs)", False),
    ("mesh_jit_io_callback_ordered",
     "jax.jit(lambda x: io_callback(lambda v: (out(f'io {v}'), v * 2)[1], "
     "jax.ShapeDtypeStruct((8,), jnp.float32), x, ordered=True) + 1)(xs)", False),
    ("mesh_jit_print", "jax.jit(lambda x: (jax.debug.print('s {}', x), x + 1)[1])(xs)", False),
    ("mesh_jit_print_ordered",
     "jax.jit(lambda x: (jax.debug.print('s {}', x, ordered=True), x + 1)[1])(xs)", False),
    ("mesh_jit_pure_callback_then_compute",
     "jax.jit(lambda x: jax.pure_callback(lambda v: np.sin(v), "
     "jax.ShapeDtypeStruct((8,), jnp.float32), x) * 2)(xs)", False),
    ("mesh_jit_print_partitioned",
     "jax.jit(lambda x: (jax.debug.print('s {}', x, partitioned=True), x + 1)[1])(xs)", True),
    ("mesh_jit_debug_callback_partitioned",
     "jax.jit(lambda x: (jax.debug.callback(lambda v: out(f'cb {v}'), x, partitioned=True), "
     "x + 1)[1])(xs)", True),
    ("lowered_mesh_jit_print", "out(jax.jit(lambda x: (jax.debug.print('s {}', x), x + 1)[1])"
                               ".lower(xs).as_text())", False),
    ("lowered_mesh_jit_print_partitioned",
     "out(jax.jit(lambda x: (jax.debug.print('s {}', x, partitioned=True), x + 1)[1])"
     ".lower(xs).as_text())", False),
    ("lowered_mesh_jit_pure_callback_on_a_chosen_device",
     "out(jax.jit(lambda x: jax.pure_callback(np.sin, jax.ShapeDtypeStruct((8,), jnp.float32), "
     "x, sharding=jax.sharding.SingleDeviceSharding(jax.devices()[2])) * 2).lower(xs)"
     ".as_text())", False),
    ("lowered_jit_shard_map_print",
     "out(jax.jit(sm(lambda x: (jax.debug.print('sm {}', x), x + 1)[1])).lower(xs).as_text())",
     False),
    # manual over "x" only: printed once per block of x, gathered over "y" (as JAX does)
    ("jit_partial_manual_shard_map_print",
     "jax.jit(sm_x(lambda x: (jax.debug.print('pm {}', x), x + 1)[1]))(xs2)", True),
    ("partial_manual_shard_map_print", "sm_x(lambda x: (jax.debug.print('pm {}', x), x)[1])(xs2)",
     True),
    ("jit_partial_manual_shard_map_debug_callback",
     "jax.jit(sm_x(lambda x: (jax.debug.callback(lambda v: out(f'cb {v.tolist()}'), x), "
     "x)[1]))(xs2)", True),
    ("jit_partial_manual_shard_map_pure_callback_refused",
     "jax.jit(sm_x(lambda x: jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), "
     "x)))(xs2)", False),
    ("shard_map_print", "sm(lambda x: (jax.debug.print('sm {}', x), x + 1)[1])(xs)", True),
    ("jit_shard_map_print", "jax.jit(sm(lambda x: (jax.debug.print('sm {}', x), x + 1)[1]))(xs)",
     True),
    ("shard_map_print_ordered",
     "sm(lambda x: (jax.debug.print('sm {}', x, ordered=True), x + 1)[1])(xs)", True),
    ("shard_map_pure_callback",
     "sm(lambda x: jax.pure_callback(lambda v: np.sin(v), "
     "jax.ShapeDtypeStruct((2,), jnp.float32), x))(xs)", True),
    ("shard_map_io_callback_ordered",
     "sm(lambda x: io_callback(lambda v: (out(f'io {v}'), v * 2)[1], "
     "jax.ShapeDtypeStruct((2,), jnp.float32), x, ordered=True))(xs)", True),
    ("shard_map_debug_callback",
     "sm(lambda x: (jax.debug.callback(lambda v: out(f'cb {v}'), x), x)[1])(xs)", True),
]

_PRELUDE = """
import sys
import numpy as np
if sys.argv[1] == "jax":
    import jax, jax.numpy as jnp
    from jax.experimental import io_callback
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
else:
    import jaxkit as jax, jaxkit.numpy as jnp
    from jaxkit.experimental import io_callback
    from jaxkit.sharding import Mesh, NamedSharding, PartitionSpec as P

def out(text):
    sys.stdout.write(str(text) + "\\n")

mesh = Mesh(np.array(jax.devices()[:4]), ("x",))
xs = jax.device_put(jnp.arange(8.), NamedSharding(mesh, P("x")))
sm = lambda f: jax.shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=P("x"))
mesh2 = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"))
xs2 = jax.device_put(jnp.arange(8.).reshape(4, 2), NamedSharding(mesh2, P("x", "y")))
sm_x = lambda f: jax.shard_map(f, mesh=mesh2, in_specs=P("x"), out_specs=P("x"),
                               axis_names={"x"})

def run(name, thunk):
    out("== " + name)
    sys.stdout.flush()
    try:
        value = thunk()
        jax.effects_barrier()
        sys.stdout.flush()
        out("-> " + str(np.asarray(value).tolist()))
    except Exception as err:
        out("EXC " + type(err).__name__ + ": " + str(err))
    sys.stdout.flush()
"""


def _run_scenarios(lib: str) -> dict[str, list[str]]:
    calls = "".join(f"run({name!r}, lambda: {code})\n" for name, code, _ in SCENARIOS)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               JAXKIT_NUM_CPU_DEVICES="8", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_PRELUDE) + calls, lib],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line in proc.stdout.splitlines():
        if line.startswith("== "):
            current = sections.setdefault(line[3:], [])
        else:
            # Effects print as objects of their library's module.
            line = line.replace("jax._src.debugging.", "").replace(
                "jaxkit.transforms.callback.", "")
            current.append(_masked(line))
    return sections


@pytest.fixture(scope="module")
def outputs():
    pytest.importorskip("jax")
    return _run_scenarios("jax"), _run_scenarios("jaxkit")


@pytest.mark.parametrize("name,sort", [(n, s) for n, _, s in SCENARIOS],
                         ids=[n for n, _, _ in SCENARIOS])
def test_callbacks_over_devices_as_jax(outputs, name, sort):
    expected, got = outputs[0][name], outputs[1][name]
    if sort == "chains":  # each kind of line (its first word) in its order
        expected, got = (sorted(lines, key=lambda line: line.split()[0])
                         for lines in (expected, got))
    elif sort:
        expected, got = sorted(expected), sorted(got)
    assert got == expected


def test_scenarios_cover_what_jax_runs_and_refuses(outputs):
    """The table checks real work, not only agreement: callbacks ran on every device, and
    the ordered debug print over several devices is JAX's error."""
    got = outputs[1]
    assert sorted(got["pmap4_print"]) == ["-> [0.0, 1.0, 2.0, 3.0]", "p 0.0", "p 1.0",
                                          "p 2.0", "p 3.0"]
    assert got["pmap4_print_ordered"] == [
        "EXC ValueError: The following ordered effects are not supported for more than 1 "
        "device: [<OrderedDebugEffect object at 0x?>]"]
    assert len([line for line in got["pmap4_io_callback_ordered"] if line.startswith("io")]) == 4
    assert got["mesh_jit_print"] == ["s [0. 1. 2. 3. 4. 5. 6. 7.]",
                                     "-> [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]"]
