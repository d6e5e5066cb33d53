"""Random keys laid out over a mesh, compared with JAX 0.10.2 on 8 CPU devices: the layout of
their data (``P('x')`` keys hold ``P('x', None)`` data), the types over Explicit axes
(``key<fry>[8@x]``), and the layouts and values of what is computed from them, eagerly and
under ``jit``, ``vmap``, ``pmap`` and ``shard_map``: new keys (``split``, ``fold_in``,
``wrap_key_data``), bits, samples, slicing, reshaping and comparing."""
from _jax_on_8_cpus import against_jax

PRELUDE = """
explicit = jax.make_mesh((4,), ('x',), axis_types=(AxisType.Explicit,), devices=DEV[:4])


def describe(x):
    # Its type, its layout (the spec, or the kind of sharding) and its values.
    s = x.sharding
    layout = str(s.spec) if hasattr(s, 'spec') else type(s).__name__
    is_key = jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
    values = np.asarray(jax.random.key_data(x) if is_key else x)
    return [str(jax.typeof(x)), layout, np.round(values.astype(float), 5).tolist()]


def keys_on(m, spec, shape=(8,)):
    return jax.device_put(jax.random.split(jax.random.key(0), shape), NamedSharding(m, spec))


def under(m, thunk):
    with jax.set_mesh(m):
        return describe(thunk())


fold = jax.vmap(lambda k: jax.random.fold_in(k, 3))
normal = jax.vmap(lambda k: jax.random.normal(k, (3,)))
uniform = jax.vmap(lambda k: jax.random.uniform(k))
bits = jax.vmap(lambda k: jax.random.bits(k, (2,)))
"""

CASES = {}
for mesh_name in ("mesh", "explicit"):
    for spec in ("P('x')", "P()", "P(None)"):
        keys = f"keys_on({mesh_name}, {spec})"
        CASES.update({
            f"{mesh_name}-{spec}-keys": f"describe({keys})",
            f"{mesh_name}-{spec}-key_data": f"describe(jax.random.key_data({keys}))",
            f"{mesh_name}-{spec}-wrap_of_data": f"describe(jax.random.wrap_key_data("
                                               f"jax.random.key_data({keys})))",
            f"{mesh_name}-{spec}-fold_in": f"describe(fold({keys}))",
        })
    keys = f"keys_on({mesh_name}, P('x'))"
    for what, made in [("key", "jax.random.key(1)"),
                       ("split", "jax.random.split(jax.random.key(1), 4)"),
                       ("fold_in", "jax.random.fold_in(jax.random.key(1), 2)"),
                       ("key_data", "jax.random.key_data(jax.random.key(1))"),
                       ("bits", "jax.random.bits(jax.random.key(1), (4,))")]:
        CASES[f"{mesh_name}-{what}_under_set_mesh"] = f"under({mesh_name}, lambda: {made})"
    CASES.update({
        f"{mesh_name}-keys_2d": f"describe(keys_on({mesh_name}, P('x', None), (8, 2)))",
        f"{mesh_name}-key_data_2d": f"describe(jax.random.key_data(keys_on({mesh_name}, "
                                    "P('x', None), (8, 2))))",
        f"{mesh_name}-jit_fold_in": f"describe(jax.jit(fold)({keys}))",
        f"{mesh_name}-split": f"describe(jax.vmap(jax.random.split)({keys}))",
        f"{mesh_name}-bits": f"describe(bits({keys}))",
        f"{mesh_name}-jit_bits": f"describe(jax.jit(bits)({keys}))",
        f"{mesh_name}-normal": f"describe(normal({keys}))",
        f"{mesh_name}-jit_normal": f"describe(jax.jit(normal)({keys}))",
        f"{mesh_name}-uniform": f"describe(uniform({keys}))",
        f"{mesh_name}-slice": f"describe({keys}[2:6])",
        f"{mesh_name}-reshape": f"describe({keys}.reshape(4, 2))",
        f"{mesh_name}-concatenate": f"describe(jnp.concatenate([{keys}, {keys}]))",
        f"{mesh_name}-jit_key_data": f"describe(jax.jit(jax.random.key_data)({keys}))",
        f"{mesh_name}-jit_identity": f"describe(jax.jit(lambda k: k)({keys}))",
        f"{mesh_name}-fold_in_jaxpr": f"str(jax.make_jaxpr(fold)({keys}))",
        f"{mesh_name}-wrap_of_laid_out_data": "describe(jax.random.wrap_key_data(jax.device_put("
                                              "jnp.zeros((8, 2), 'uint32'), NamedSharding("
                                              f"{mesh_name}, P('x')))))",
    })
CASES.update({
    # (Over the Explicit mesh JAX raises from inside its own lowering of gamma, whose vmap
    # meets the split keys and the unsplit alphas: "Mapped away dimension ... x vs None";
    # jaxkit samples them, split as the keys.)
    "auto-gamma": "describe(jax.vmap(lambda k: jax.random.gamma(k, 2.0))(keys_on(mesh, P('x'))))",
    "explicit-vmap_split_and_unsplit": "describe(jax.vmap(jax.random.fold_in)(keys_on("
                                       "explicit, P('x')), jnp.arange(8, dtype='uint32')))",
    "explicit-vmap_unsplit_and_split": "describe(jax.vmap(lambda m, k: jax.random.fold_in(k, m))("
                                       "jnp.arange(8, dtype='uint32'), keys_on(explicit, P('x'))))",
    "auto-jit_out_shardings": "describe(jax.jit(lambda k: jax.random.split(k, 8), "
                              "out_shardings=s)(jax.random.key(3)))",
    "auto-shard_map_split": "describe(jax.shard_map(lambda k: jax.random.split(k[0])[None], "
                            "mesh=mesh, in_specs=P('x'), out_specs=P('x'))("
                            "keys_on(mesh, P('x'))))",
    "auto-shard_map_fold_in_axis_index": "describe(jax.jit(jax.shard_map(lambda k: "
                                         "jax.random.fold_in(k, jax.lax.axis_index('x'))[None],"
                                         " mesh=mesh, in_specs=P(), out_specs=P('x')))("
                                         "jax.random.key(0)))",
    "auto-eq": "describe(keys_on(mesh, P('x')) == keys_on(mesh, P('x'))[::-1])",
    "auto-uniform_minval_laid_out": "describe(jax.jit(lambda k, lo: jax.random.uniform(k, (8,),"
                                    " minval=lo))(jax.random.key(0), jax.device_put("
                                    "jnp.zeros(8), s)))",
    "auto-bernoulli_p_laid_out": "describe(jax.jit(lambda k, p: jax.random.bernoulli(k, p))("
                                 "jax.random.key(0), jax.device_put(jnp.full(8, .5), s)))",
    "auto-shard_map_keys": "describe(jax.shard_map(lambda k: normal(k)[:, 0], mesh=mesh, "
                           "in_specs=P('x'), out_specs=P('x'))(keys_on(mesh, P('x'))))",
    "auto-keys_constrained": "describe(jax.jit(lambda k: wsc(jax.random.split(k, 8), s))("
                             "jax.random.key(0)))",
})

oracle, ns, test_matches_jax = against_jax(PRELUDE, CASES)
