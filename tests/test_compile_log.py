"""What ``jit`` traces, lowers and compiles, as ``jax_log_compiles`` reports it, compared with
JAX 0.10.2 on 8 CPU devices: each stage logged once per program (a lowering or compilation
asked for again, by ``f.lower(x)`` twice or a call after ``f.lower(x).compile()``, comes from
the caches, as JAX's does), the arguments' types and shardings ("Argument mapping"), and the
``compute_on`` / ``set_xla_metadata`` blocks that make a traced function trace and lower
again."""
from _jax_on_8_cpus import against_jax

PRELUDE = """
import importlib
import logging
import re
import warnings

compute_on = importlib.import_module(jax.__name__ + '.experimental.compute_on').compute_on
set_xla_metadata = importlib.import_module(
    jax.__name__ + '.experimental.xla_metadata').set_xla_metadata


class _Messages(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(re.sub(r'in [0-9.e-]+ sec', 'in T sec', record.getMessage()))


def compile_log(thunk):
    # The records of the 'jax' loggers while thunk runs, and the donation warnings.
    handler, logger = _Messages(), logging.getLogger('jax')
    logger.addHandler(handler)
    jax.config.update('jax_log_compiles', True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            thunk()
    finally:
        jax.config.update('jax_log_compiles', False)
        logger.removeHandler(handler)
    return handler.messages + [str(w.message) for w in caught if 'donated' in str(w.message)]


def fresh(**jit_kwargs):
    def scaled(a):
        return jnp.sin(a) * 2
    return jax.jit(scaled, **jit_kwargs)


def summed(a, b):
    return a + b


x = jnp.ones(8)
on_dev1 = jax.device_put(jnp.ones(8), DEV[1])
laid = jax.device_put(jnp.arange(8.0), s)
"""

CASES = {
    "call": "compile_log(lambda: fresh()(x))",
    "call_twice": "compile_log(lambda f=fresh(): (f(x), f(x)))",
    "lower_twice": "compile_log(lambda f=fresh(): (f.lower(x), f.lower(x)))",
    "trace_then_lower_twice": "compile_log(lambda f=fresh(): (f.trace(x).lower(), "
                              "f.trace(x).lower()))",
    "lower_compile_then_call": "compile_log(lambda f=fresh(): (f.lower(x).compile(), f(x)))",
    "lower_compile_twice": "compile_log(lambda f=fresh(): (f.lower(x).compile(), "
                           "f.lower(x).compile()))",
    "call_then_lower_compile": "compile_log(lambda f=fresh(): (f(x), f.lower(x).compile()))",
    "other_shape_lowers_again": "compile_log(lambda f=fresh(): (f.lower(x), "
                                "f.lower(jnp.ones(4))))",
    "unusable_donation_warned_once": "compile_log(lambda f=jax.jit(lambda a: a.sum(), "
                                     "donate_argnums=0): (f.lower(x), f(jnp.ones(8))))",
    "committed_argument": "compile_log(lambda: fresh()(on_dev1))",
    "laid_out_and_host_arguments": "compile_log(lambda: jax.jit(summed)(laid, x))",
    "in_shardings": "compile_log(lambda: fresh(in_shardings=s)(x))",
    "weak_scalar_argument": "compile_log(lambda: jax.jit(summed)(x, 2.0))",
    "unused_argument_dropped": "compile_log(lambda: jax.jit(lambda a, b: a * 2)(x, on_dev1))",
}

# A block's own equations: the lowering inside carries the attribute, the one after does not.
PRELUDE += """

def lowered_inside_and_after(block):
    f = fresh()
    f(x)
    with block:
        inside = f.lower(x).as_text()
        f(x)
    after = f.lower(x).as_text()
    return ['_xla_compute_type' in inside or 'k = "v"' in inside,
            '_xla_compute_type' in after or 'k = "v"' in after]
"""
CASES.update({
    "compute_on_block": "lowered_inside_and_after(compute_on('device_host'))",
    "xla_metadata_block": "lowered_inside_and_after(set_xla_metadata(k='v'))",
    "compute_on_block_logs": "compile_log(lambda: lowered_inside_and_after("
                             "compute_on('device_host')))",
})

oracle, ns, test_matches_jax = against_jax(PRELUDE, CASES)
