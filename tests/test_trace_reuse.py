"""Traces kept and reused as JAX keeps them, against JAX 0.10.2 on 8 CPU devices.

``make_jaxpr(f)`` and ``eval_shape(f, ...)`` are ``jit(f).trace(...)``: they reuse the trace a
``jit(f)`` call at the same types keeps, and ``f`` runs once for all of them (``calls``
counts). A kept trace is reused only where the function would trace the same: under other
named axes (a vmap's or ``axis_env``'s, of another size), another mesh in context, or with
x64 switched, the function is traced again (a stale trace gave silently wrong numbers:
``psum(1, 'i')`` is the axis size, folded into the program). ``trace``, ``eval_shape`` and
``make_jaxpr`` take abstract values and objects with a shape and a dtype, as JAX's do. With
only an abstract mesh in context (``use_abstract_mesh``), programs are traced and lowered but
one with no devices from its arguments is not run where the mesh has an Explicit axis (a
program compiled outside was run)."""
from _jax_on_8_cpus import against_jax

PRELUDE = """
lax = jax.lax
x3 = jnp.arange(3.)

def counted(body):
    calls = []
    def f(*args):
        calls.append(1)
        return body(*args)
    return f, calls

def after(f, calls, *steps):
    outs = [step(f) for step in steps]
    return [str(o) if not hasattr(o, 'tolist') else o.tolist() for o in outs] + [len(calls)]

jitted = lambda f: jax.jit(f)(x3)
jaxpr = lambda f: jax.make_jaxpr(f)(x3)
shape = lambda f: jax.eval_shape(f, x3)
lowered = lambda f: jax.jit(f).lower(x3).as_text().count('func.func')

def vmapped_sizes(f, sizes=(2, 3)):
    return [jax.vmap(f, axis_name='i')(jnp.zeros(n)).tolist() for n in sizes]

plus_size = lambda x: x + lax.psum(1, 'i')
def carry_plus_size(c, _):  # (bodies named once: their traces are kept)
    return plus_size(c), None
def scan_plus_size(x):
    return lax.scan(carry_plus_size, x, None, length=2)[0]

def under_x64(f):
    out = []
    for on in (False, True):
        with jax.enable_x64(on):
            try:
                out.append(str(f().dtype))
            except TypeError as e:
                out.append(type(e).__name__)
    return out
i32 = jnp.zeros((), jnp.int32)
add_arange = lambda c: c + jnp.arange(2).sum()
carry_add_arange = lambda c, _: (add_arange(c), None)
out_add_arange = lambda c, _: (c, add_arange(c))
carry_mesh_size = lambda c, _: (mesh_size(c), None)

def mesh_size(x):
    m = jax.sharding.get_abstract_mesh()
    return x * (1 if m.empty else m.size)
mesh2 = jax.make_mesh((2,), ('a',), axis_types=(AxisType.Explicit,), devices=DEV[:2])
mesh4 = jax.make_mesh((4,), ('a',), axis_types=(AxisType.Explicit,), devices=DEV[:4])
def under_meshes(run):
    out = [run()]
    for m in (mesh2, mesh4):
        with jax.set_mesh(m):
            out.append(run())
    return out

def error_class(thunk):
    try:
        thunk()
    except Exception as e:
        return type(e).__name__

def under_abstract_mesh(run, mesh=mesh4):
    with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
        return run()
mesh4_auto = jax.make_mesh((4,), ('a',), axis_types=(AxisType.Auto,), devices=DEV[:4])
x4_split = jax.device_put(jnp.ones(4), NamedSharding(mesh4, P('a')))

class HasShapeAndDtype:
    shape, dtype = (2,), jnp.float32
"""

CASES = {
    # one trace for jit, make_jaxpr, eval_shape and lower at the same types
    "jit then make_jaxpr": "after(*counted(lambda x: x * 2), jitted, jaxpr)",
    "make_jaxpr twice": "after(*counted(lambda x: x + 1), jaxpr, jaxpr)",
    "make_jaxpr then jit": "after(*counted(lambda x: x + 1), jaxpr, jitted, lowered)",
    "eval_shape then jit": "after(*counted(jnp.sin), shape, jitted, shape)",
    "make_jaxpr of a jitted function": "after(*counted(jnp.cos), jitted,"
                                       " lambda f: jax.make_jaxpr(jax.jit(f))(x3))",
    "make_jaxpr at other types": "after(*counted(jnp.cos), jaxpr,"
                                 " lambda f: jax.make_jaxpr(f)(jnp.arange(3)))",
    "make_jaxpr static_argnums": "after(*counted(lambda x, n: x * n),"
                                " lambda f: jax.jit(f, static_argnums=1)(x3, 2),"
                                " lambda f: jax.make_jaxpr(f, static_argnums=1)(x3, 2),"
                                " lambda f: jax.make_jaxpr(f, static_argnums=1)(x3, 3))",
    "eval_shape of a jit with statics": "after(*counted(lambda x, n: x[:n]),"
                                       " lambda f: jax.jit(f, static_argnums=1)(x3, 2),"
                                       " lambda f: jax.eval_shape(jax.jit(f, static_argnums=1),"
                                       " x3, 2))",
    "make_jaxpr return_shape": "[str(o) for o in jax.make_jaxpr(lambda x: (x, x.sum()),"
                               " return_shape=True)(x3)]",
    "make_jaxpr names": "[jax.make_jaxpr(mesh_size).__name__,"
                        " jax.make_jaxpr(mesh_size).__qualname__]",
    "make_jaxpr of closed-over constants": "str(jax.make_jaxpr(lambda x: x + x3)(1.))",
    "make_jaxpr closing over a tracer": "jax.jit(lambda y: y * len(jax.make_jaxpr("
                                        "lambda x: x * y)(1.).consts))(2.).tolist()",
    # named axes and their sizes
    "jit under vmaps of two sizes": "vmapped_sizes(jax.jit(plus_size))",
    "scan under vmaps of two sizes": "vmapped_sizes(scan_plus_size)",
    "checkpoint under vmaps of two sizes": "vmapped_sizes(jax.checkpoint(plus_size))",
    "axis_index under vmaps of two sizes":
        "vmapped_sizes(jax.jit(lambda x: x + lax.axis_index('i')))",
    "make_jaxpr axis_env of two sizes": "[str(jax.make_jaxpr(plus_size, axis_env=[('i', n)])(1.))"
                                        " for n in (3, 5)]",
    "jit in make_jaxpr axis_env of two sizes":
        "[str(jax.make_jaxpr(jax.jit(plus_size), axis_env=[('i', n)])(1.)) for n in (3, 5)]",
    # x64 on and off
    "scan body with x64 switched": "under_x64(lambda: lax.scan(carry_add_arange, i32, None,"
                                   " length=2)[0])",
    "scan outputs with x64 switched": "under_x64(lambda: lax.scan(out_add_arange, i32, None,"
                                      " length=2)[1])",
    "cond with x64 switched": "under_x64(lambda: lax.cond(True, add_arange, add_arange, i32))",
    "while_loop with x64 switched": "under_x64(lambda: lax.while_loop(lambda c: c < 3,"
                                    " add_arange, i32))",
    "checkpoint with x64 switched": "under_x64(lambda: jax.checkpoint(add_arange)(i32))",
    "jit with x64 switched": "under_x64(lambda: jax.jit(add_arange)(i32))",
    # the mesh in context
    "jit under meshes": "under_meshes(lambda: jax.jit(mesh_size)(jnp.ones(4)).tolist())",
    "make_jaxpr under meshes": "under_meshes(lambda: str(jax.make_jaxpr(mesh_size)(1.)))",
    "scan under meshes": "under_meshes(lambda: lax.scan(carry_mesh_size, 1., None,"
                         " length=1)[0].tolist())",
    # only an abstract mesh in context: programs are traced and lowered, not run
    "jit under an abstract mesh after a call outside":
        "[jax.jit(jnp.sin)(x3).tolist(), under_abstract_mesh(lambda: jax.jit(jnp.sin)(x3))]",
    "eager op under an abstract mesh": "under_abstract_mesh(lambda: x3 + 1)",
    "jit of no arguments under an abstract mesh": "under_abstract_mesh(jax.jit(lambda: 1.))",
    "make_jaxpr under an abstract mesh":
        "under_abstract_mesh(lambda: str(jax.make_jaxpr(jax.jit(jnp.sin))(x3)))",
    "eval_shape under an abstract mesh":
        "under_abstract_mesh(lambda: str(jax.eval_shape(lambda a: a * 2, x3)))",
    "lower under an abstract mesh":
        "under_abstract_mesh(lambda: type(jax.jit(jnp.sin).lower(x3)).__name__)",
    "sharded argument under an abstract mesh":
        "under_abstract_mesh(lambda: jax.jit(jnp.cos)(x4_split).tolist())",
    "device_put under an abstract mesh":
        "under_abstract_mesh(lambda: jax.device_put(np.ones(2)).tolist())",
    "eager op after an abstract mesh": "[under_abstract_mesh(lambda: 0), (x3 + 1).tolist()]",
    "jit under an abstract mesh of Auto axes":
        "under_abstract_mesh(lambda: jax.jit(jnp.sin)(x3).tolist(), mesh4_auto)",
    # abstract arguments
    "trace of a ShapedArray": "str(jax.jit(jnp.sin).trace(jax.core.ShapedArray((2,),"
                              " jnp.float32)).out_info)",
    "make_jaxpr of a ShapedArray": "str(jax.make_jaxpr(jnp.sin)(jax.core.ShapedArray((2,),"
                                   " jnp.float32)))",
    "eval_shape of an object with shape and dtype": "str(jax.eval_shape(jnp.sin,"
                                                    " HasShapeAndDtype()))",
    "make_jaxpr of an object with shape and dtype": "str(jax.make_jaxpr(jnp.sin)"
                                                    "(HasShapeAndDtype()))",
    "a call with a ShapedArray": "error_class(lambda: jax.jit(jnp.sin)(jax.core.ShapedArray("
                                 "(2,), jnp.float32)))",
}

oracle, ns, test_matches_jax = against_jax(PRELUDE, CASES)
