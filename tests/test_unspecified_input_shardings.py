"""Arguments with no layout (host data, arrays on the default device) to a program partitioned
over a mesh of Auto axes: as in JAX their layout is left to XLA (no ``sdy.sharding`` on the
parameter, propagation to parameters allowed), each is put on the devices in the layout
XLA chose, and ``Compiled.input_shardings`` reports it as JAX does (``GSPMDSharding``, or a
``NamedSharding`` like a given argument's). Scalars and keys are replicated on
``@empty_mesh``. Results follow from the chosen layouts (a matmul of a column-split
argument stays column-split).

Every record is compared with JAX 0.10.2 on 8 CPU devices (``_jax_on_8_cpus``).
"""

from _jax_on_8_cpus import against_jax

PRELUDE = """
x = jnp.arange(8.0)
m = jnp.arange(64.0).reshape(8, 8)
laid = jax.device_put(x, s)

def show(f, *args, **jit_kwargs):
    jf = jax.jit(f, **jit_kwargs)
    lowered = jf.lower(*args)
    main = [line.strip() for line in lowered.as_text().splitlines()
            if 'func.func public' in line or 'sdy.mesh @' in line]
    outs = [[str(o.sharding), np.asarray(o).tolist()] for o in jax.tree.leaves(jf(*args))]
    return [main, str(lowered.compile().input_shardings), str(lowered.compile().output_shardings),
            outs]

def in_mesh(f, *args):
    with jax.set_mesh(mesh):
        return show(f, *args)
"""

CASES = {
    "constraint": "show(lambda a: wsc(a * 2, s), x)",
    "numpy_argument": "show(lambda a: wsc(a * 2, s), np.arange(8.0, dtype=np.float32))",
    "beside_a_laid_out_argument": "show(lambda a, b: a + b, laid, x)",
    "nested_jit_in_shardings": "show(lambda a: jax.jit(lambda t: t * 2, in_shardings=s)(a) + 1, x)",
    "out_shardings_only": "show(lambda a: a * 2, x, out_shardings=s)",
    "matmul_of_column_split": "show(lambda a: wsc(a, NamedSharding(mesh, P(None, 'x'))) @ a, m)",
    "python_scalar": "show(lambda a, b: wsc(a * b, s), x, 2.0)",
    "array_scalar": "show(lambda a, b: wsc(a * b, s), x, jnp.float32(2.0))",
    "one_element": "show(lambda a, b: wsc(a * b, s), x, np.ones(1, np.float32))",
    "key": "show(lambda a, k: (wsc(a * 2, s), jax.random.bits(k)), x, jax.random.key(0))",
    "unused": "show(lambda a, b: wsc(a * 2, s), x, x)",
    "kept_unused": "show(lambda a, b: wsc(a * 2, s), x, x, keep_unused=True)",
    "donated": "show(lambda a: wsc(a * 2, s), jnp.arange(8.0), donate_argnums=0)",
    "spec_in_context": "in_mesh(lambda a: wsc(a * 2, P('x')), x)",
}


oracle, ns, test_matches_jax = against_jax(PRELUDE, CASES)


def test_argument_is_put_in_the_chosen_layout(ns):
    # Each device is given its quarter of the host data (the layout XLA chose), not the
    # whole array to slice.
    jax = ns["jax"]
    compiled = jax.jit(lambda a: ns["wsc"](a, ns["s"]).sum()).lower(ns["x"]).compile()
    assert compiled.program.in_shardings == [ns["s"]]
    assert compiled.program.in_shardings != [ns["NamedSharding"](ns["mesh"], ns["P"]())]


def test_device_put_to_a_reported_sharding(ns):
    # As with JAX, an executable's reported input sharding is a placement: the argument put
    # there is already laid out as the program takes it.
    jax = ns["jax"]
    compiled = jax.jit(lambda a: ns["wsc"](a * 2, ns["s"])).lower(ns["x"]).compile()
    (chosen,), _ = compiled.input_shardings
    placed = jax.device_put(ns["np"].arange(8.0, dtype="float32"), chosen)
    assert placed.sharding == ns["s"]
    assert compiled(placed).tolist() == [2.0 * i for i in range(8)]
