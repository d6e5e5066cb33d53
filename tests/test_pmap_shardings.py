"""What a ``pmap`` result says of its layout, compared with JAX 0.10.2 on 8 CPU devices. JAX
runs ``pmap`` as a ``shard_map``: its results are split over a mesh of the mapped devices
whose one axis is the pmap's ``axis_name`` (``_internal_pmap_axis_name`` when unnamed), and
what is computed from them, eagerly or under ``jit``, is partitioned over that mesh."""
from _jax_on_8_cpus import against_jax

PRELUDE = """
def describe(x):
    # The layout as text, the type, the committed flag, the shards' shapes and the values.
    is_key = jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
    values = np.asarray(jax.random.key_data(x) if is_key else x)
    return [repr(x.sharding), str(jax.typeof(x)), x.committed,
            [list(s.data.shape) for s in x.addressable_shards],
            np.round(values.astype(float), 5).tolist()]


def double(x):
    return x * 2


rows = jnp.arange(24.0).reshape(8, 3)
pm = jax.pmap(double, devices=DEV)(rows)
"""

CASES = {
    "result": "describe(pm)",
    "vector": "describe(jax.pmap(double, devices=DEV)(jnp.arange(8.0)))",
    "out_axes_1": "describe(jax.pmap(double, out_axes=1, devices=DEV)(rows))",
    "four_devices": "describe(jax.pmap(double, devices=DEV[:4])(rows[:4]))",
    "reversed_devices": "describe(jax.pmap(double, devices=DEV[::-1])(rows))",
    "named_axis_unmapped": "describe(jax.pmap(lambda x: jax.lax.psum(x, 'i'), axis_name='i', "
                           "out_axes=None, devices=DEV)(jnp.ones(8)))",
    "named_axis_mapped": "describe(jax.pmap(lambda x: x - jax.lax.pmean(x, 'i'), axis_name='i',"
                         " devices=DEV)(rows))",
    "mesh": "[repr(pm.sharding.mesh), str(pm.sharding.mesh), pm.sharding.num_devices, "
            "pm.sharding.is_fully_replicated, pm.is_fully_replicated, "
            "[d.id for d in pm.sharding.mesh.devices.flat]]",
    "pmap_of_result": "describe(jax.pmap(lambda x: x + 1, devices=DEV)(pm))",
    "eager_op": "describe(pm + 1)",
    "eager_reduction": "describe(pm.sum())",
    "eager_reshape": "describe(pm.reshape(4, 6))",
    "eager_index": "describe(pm[3])",
    "jit": "describe(jax.jit(lambda x: x + 1)(pm))",
    "device_put_to_one": "describe(jax.device_put(pm, DEV[0]))",
    "keys": "describe(jax.pmap(jax.random.split, devices=DEV)(jax.random.split("
            "jax.random.key(0), 8)))",
    "key_data": "repr(jax.random.key_data(jax.pmap(jax.random.split, devices=DEV)("
                "jax.random.split(jax.random.key(0), 8))).sharding)",
    "samples": "describe(jax.pmap(lambda k: jax.random.normal(k, (2,)), devices=DEV)("
               "jax.random.split(jax.random.key(0), 8)))",
    "device_put_sharded_removed": "jax.device_put_sharded",
    "device_put_replicated_removed": "jax.device_put_replicated",
}

oracle, ns, test_matches_jax = against_jax(PRELUDE, CASES)
