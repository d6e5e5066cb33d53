"""A ``jit`` called inside another program with ``in_shardings``/``out_shardings``: the
equation carries JAX's whole parameter set (``in_shardings``, ``out_shardings``,
``in_layouts``, ``out_layouts``, ``donated_invars``, ``ctx_mesh``, ``name``, ``keep_unused``,
``inline``, ``compiler_options_kvs``), printed as JAX prints it; the shardings follow the
equation through grad, jvp, linearize, vmap and dead-code elimination; they lay the values
out (the enclosing program is partitioned over their mesh, the types stay as they are) and
an equation evaluated on its own (a custom interpreter's ``bind``) honours them.

Every record is compared with JAX 0.10.2 on 8 CPU devices (``_jax_on_8_cpus``): the jaxpr's
text, each result's sharding, type and value, or the error's class and text.
"""

from _jax_on_8_cpus import against_jax

PRELUDE = """
mesh2 = jax.make_mesh((4, 2), ('x', 'y'), axis_types=(AxisType.Auto,) * 2, devices=DEV)
explicit = jax.make_mesh((4,), ('x',), axis_types=(AxisType.Explicit,), devices=DEV[:4])
s2 = NamedSharding(mesh2, P('x'))
inner = jax.jit(lambda x, y: (x * y, jnp.sin(x)), in_shardings=(s, None),
                out_shardings=(s, None))
double = jax.jit(lambda a: a * 2, in_shardings=s2, out_shardings=s2)
x = jnp.arange(8.0)
y = jnp.ones(8)

def results(out):
    return [[str(o.sharding), str(jax.typeof(o)), np.asarray(o).round(5).tolist()]
            for o in jax.tree.leaves(out)]

def show(f, *args):
    return [str(jax.make_jaxpr(f)(*args)), results(jax.jit(f)(*args))]

def in_mesh(m, f, *args):
    with jax.set_mesh(m):
        args = [jax.device_put(a, P('x')) if m is explicit else a for a in args]
        return show(f, *args)

def constraints(f, *args):
    # the layouts the lowered program asks for (the module's own args differ: see below)
    return [line.strip() for line in jax.jit(f).lower(*args).as_text().splitlines()
            if 'sharding_constraint' in line]

def incompatible(devices):
    # a nested jit asking for other devices than its program's: the error's class and lead
    # (the details after it are worded differently)
    other = NamedSharding(jax.make_mesh((len(devices),), ('x',), axis_types=(AxisType.Auto,),
                                        devices=devices), P('x'))
    inner = jax.jit(lambda a: a * 2, out_shardings=other)
    try:
        jax.jit(lambda a: inner(a) + 1)(jax.device_put(x, s))
    except Exception as e:
        return [type(e).__name__, str(e).split(" computation")[0]]
    return "no error"

def bound(*args):
    # one equation evaluated on its own, as a custom interpreter runs it
    e = jax.make_jaxpr(lambda x, y: inner(x, y))(x, y).eqns[0]
    return results(e.primitive.bind(*args, **e.params))

def params():
    e = jax.make_jaxpr(lambda x: jax.jit(lambda a: a + 1)(x))(x).eqns[0]
    p = e.params
    return [list(p), repr(p['ctx_mesh']), str(p['ctx_mesh']), repr(p['in_shardings']),
            repr(p['out_layouts']), p['keep_unused'], p['compiler_options_kvs'] == ()]
"""

CASES = {
    "plain": "show(lambda x, y: inner(x, y), x, y)",
    "grad": "show(jax.grad(lambda x, y: inner(x, y)[0].sum() + inner(x, y)[1].sum()), x, y)",
    "jvp": "show(lambda x, y: jax.jvp(lambda a: inner(a, y), (x,), (y,)), x, y)",
    "linearize": "show(lambda x, y: jax.linearize(lambda a: inner(a, y)[0], x)[1](y), x, y)",
    "vmap": "show(jax.vmap(inner), jnp.ones((3, 8)), jnp.ones((3, 8)))",
    "vmap_last_axis": "show(jax.vmap(inner, in_axes=1), jnp.ones((8, 3)), jnp.ones((8, 3)))",
    "vmap_spmd_axis_name": "in_mesh(mesh2, jax.vmap(double, spmd_axis_name='y'), "
                           "jnp.ones((2, 8)))",
    "out_shardings_only": "show(lambda x: jax.jit(lambda a: a + 1, out_shardings=s)(x) * 2, x)",
    "spec_in_context": "in_mesh(mesh, lambda x: jax.jit(lambda a: a + 1, "
                       "out_shardings=P('x'))(x) * 2, x)",
    "keep_unused": "show(lambda x: jax.jit(lambda a, b: a, keep_unused=True)(x, x), x)",
    "indivisible": "show(lambda x: jax.jit(lambda a: a, in_shardings=s)(x), jnp.ones(6))",
    "explicit_out": "in_mesh(explicit, lambda x: jax.jit(lambda a: a * 2, "
                    "out_shardings=P())(x) + 1, x)",
    "explicit_in": "in_mesh(explicit, lambda x: jax.jit(lambda a: a * 2, "
                   "in_shardings=P('x'))(x) + 1, x)",
    "explicit_in_mismatch": "in_mesh(explicit, lambda x: jax.jit(lambda a: a * 2, "
                            "in_shardings=P())(x) + 1, x)",
    "lowered": "constraints(lambda x, y: inner(x, y), x, y)",
    "lowered_unused_output": "constraints(lambda x, y: inner(x, y)[1], x, y)",
    "other_devices": "incompatible(DEV[4:])",
    "more_devices": "incompatible(DEV[:8])",
    "bound": "bound(x, y)",
    "params": "params()",
}


oracle, ns, test_matches_jax = against_jax(PRELUDE, CASES)


def test_values_are_laid_out_as_asked(ns):
    # Not a printing coincidence: the enclosing program runs partitioned over the mesh.
    out = ns["jax"].jit(lambda x: ns["inner"](x, x)[0])(ns["x"])
    assert len(out.sharding.device_set) == 4 and not out.sharding.is_fully_replicated
