"""Which donated arguments a program reuses, and how it says so, as in JAX 0.10.2: an output
of the argument's type is written into its buffer (``tf.aliasing_output``); an output of the
same size only, or one whose layout XLA chooses in a partitioned program, may reuse it
(``jax.buffer_donor``); an argument nothing can reuse is named in a warning ("Some donated
buffers were not usable") and stays alive. Compared with JAX on 8 CPU devices: the
parameters' attributes in the lowered text, the warnings, whether the argument was deleted
and the values."""

from _jax_on_8_cpus import against_jax

PRELUDE = """
import warnings

def donate(f, make_arg, **jit_kwargs):
    jf = jax.jit(f, donate_argnums=0, **jit_kwargs)
    arg = make_arg()
    with warnings.catch_warnings(record=True) as caught:  # (the first call lowers it)
        warnings.simplefilter("always")
        out = jf(arg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        main = [line.strip() for line in jf.lower(make_arg()).as_text().splitlines()
                if 'func.func public' in line]
    return [main, [str(w.message) for w in caught if 'donated' in str(w.message)],
            arg.is_deleted(), [np.asarray(o).tolist() for o in jax.tree.leaves(out)]]

ones = lambda: jnp.ones(8)
laid = lambda: jax.device_put(jnp.arange(8.0), s)
"""

CASES = {
    "same_type": "donate(lambda x: x * 2, ones)",
    "reduced": "donate(lambda x: x.sum(), ones)",
    "same_size": "donate(lambda x: x.reshape(2, 4), ones)",
    "other_dtype_same_size": "donate(lambda x: x.astype('int32'), ones)",
    "two_halves": "donate(lambda x: (x[:4], x[4:]), ones)",
    "two_outputs_one_donation": "donate(lambda x: (x + 1, x - 1), ones)",
    "partitioned_chosen_layout": "donate(lambda x: wsc(x * 2, s), ones)",
    "partitioned_laid_out_argument": "donate(lambda x: wsc(x * 2, s), laid)",
    "partitioned_out_shardings": "donate(lambda x: x * 2, laid, out_shardings=s)",
    "partitioned_shard_mismatch": "donate(lambda x: x * 2, ones, out_shardings=s)",
}


oracle, ns, test_matches_jax = against_jax(PRELUDE, CASES)
