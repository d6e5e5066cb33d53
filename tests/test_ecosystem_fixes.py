"""Regression tests for the causes of Optax/chex/Flax test-suite failures on jaxkit
(``bench/ecosystem_tests.py``), each checked against the JAX oracle where it is installed.

Each block names the library tests it came from. Checks run in this process on jaxkit and on
the real ``jax`` (the oracle, skipped where it is not installed) side by side.
"""
import functools
import re
import sys

import numpy as np
import pytest

import jaxkit
import jaxkit.extend
import jaxkit.numpy as jnp
from jaxkit import _config
from jaxkit._src_compat import traceback_util


def _oracle():
    return pytest.importorskip("jax")


# --------------------------------------------------------------------------------------------
# Typed keys are jax.Array instances (Flax's _is_valid_rng; optax linear_algebra_test
# test_power_iteration_mlp_hessian, Flax linen init with jax.random.key)
# --------------------------------------------------------------------------------------------

KEY_MAKERS = [
    ("key", lambda m: m.random.key(0)),
    ("split_keys", lambda m: m.random.split(m.random.key(1), 3)),
    ("wrapped", lambda m: m.random.wrap_key_data(m.random.key_data(m.random.key(2)))),
    ("raw_prngkey", lambda m: m.random.PRNGKey(0)),
]


@pytest.mark.parametrize("name,make", KEY_MAKERS, ids=[k[0] for k in KEY_MAKERS])
def test_key_arrays_are_jax_arrays(name, make):
    jax = _oracle()
    for mod, np_mod in ((jaxkit, jnp), (jax, jax.numpy)):
        k = make(mod)
        got = (isinstance(k, mod.Array), isinstance(k, np_mod.ndarray),
               issubclass(type(k), mod.Array), str(k.dtype), k.shape)
        if mod is jaxkit:
            mine = got
        else:
            assert mine == got, name


def test_non_arrays_are_still_not_jax_arrays():
    for x in (0, 1.5, [1, 2], (jnp.ones(2),), None, "a"):
        assert not isinstance(x, jaxkit.Array)


# --------------------------------------------------------------------------------------------
# Lowered.as_text("hlo") / compiler_ir("hlo") give XLA HLO (optax numerics_test
# test_abs_sqr_hlo_equivalence*, which reads compiler_ir(dialect="hlo").as_hlo_text())
# --------------------------------------------------------------------------------------------

HLO_FUNS = [
    ("square_mul", lambda m: lambda x: x * x, 3.0),
    ("square_pow", lambda m: lambda x: x ** 2, 3.0),
    ("jnp_square", lambda m: m.numpy.square, [4.0, 5.2]),
    ("complex_abs_sq", lambda m: lambda x: (x.conj() * x).real, 3.0 + 1j),
    ("two_outputs", lambda m: lambda x, y: (m.numpy.sin(x) + y, x @ y), ([[1.0]], [[2.0]])),
]


def _entry_opcodes(hlo_text: str) -> list[str]:
    """The instruction opcodes of the ENTRY computation (names and argument labels left out:
    jaxkit names parameters Arg_i where JAX uses the Python argument names)."""
    entry = hlo_text[hlo_text.index("ENTRY"):]
    return re.findall(r"= \S+ ([\w-]+)\(", entry)


@pytest.mark.parametrize("name,make,arg", HLO_FUNS, ids=[r[0] for r in HLO_FUNS])
def test_lowered_hlo_dialect(name, make, arg):
    jax = _oracle()
    args = arg if isinstance(arg, tuple) else (arg,)
    texts = {}
    for mod in (jaxkit, jax):
        lowered = mod.jit(make(mod)).lower(*map(np.asarray, args))
        text = lowered.as_text(dialect="hlo")
        assert text == lowered.compiler_ir(dialect="hlo").as_hlo_text()
        assert text.startswith("HloModule ")
        texts[mod.__name__] = text
    assert _entry_opcodes(texts["jaxkit"]) == _entry_opcodes(texts["jax"]), texts


def test_lowered_dialect_default_and_errors():
    jax = _oracle()
    for mod in (jaxkit, jax):
        lowered = mod.jit(lambda x: x + 1).lower(1.0)
        assert lowered.as_text().startswith("module @")
        assert lowered.as_text(dialect="stablehlo") == lowered.as_text()
        with pytest.raises(ValueError, match="unknown dialect: mhlo"):
            lowered.as_text(dialect="mhlo")
        with pytest.raises(ValueError, match="unknown dialect: mhlo"):
            lowered.compiler_ir(dialect="mhlo")


# --------------------------------------------------------------------------------------------
# jax.typeof of a key array (Flax nnx's is_array_ref on every Rngs stream key: nnx
# rngs_test went from 45 failures to 15 with this and the isinstance fix above)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,make", KEY_MAKERS[:3], ids=[k[0] for k in KEY_MAKERS[:3]])
def test_typeof_key_array(name, make):
    jax = _oracle()
    mine, theirs = jaxkit.typeof(make(jaxkit)), jax.typeof(make(jax))
    assert (repr(mine), str(mine.dtype), mine.shape, mine.ndim, mine.str_short()) == \
        (repr(theirs), str(theirs.dtype), theirs.shape, theirs.ndim, theirs.str_short())
    assert jaxkit.dtypes.issubdtype(mine.dtype, jaxkit.dtypes.prng_key)
    assert mine == jaxkit.typeof(make(jaxkit)) and mine != jaxkit.typeof(jnp.zeros(mine.shape))


# --------------------------------------------------------------------------------------------
# out_sharding= on lax.dot_general, lax.dot and jnp.dot (Flax nnx Linear passes
# out_sharding=None to dot_general; nnx Embed.attend to jnp.dot)
# --------------------------------------------------------------------------------------------

DOT_CALLS = [
    ("dot_general", lambda m, x, y, s: m.lax.dot_general(x, y, (((1,), (0,)), ((), ())),
                                                         out_sharding=s)),
    ("lax_dot", lambda m, x, y, s: m.lax.dot(x, y, out_sharding=s)),
    ("jnp_dot", lambda m, x, y, s: m.numpy.dot(x, y, out_sharding=s)),
]


@pytest.mark.parametrize("name,call", DOT_CALLS, ids=[c[0] for c in DOT_CALLS])
def test_dot_out_sharding_none(name, call):
    jax = _oracle()
    x = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    y = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    mine, theirs = (call(m, m.numpy.asarray(x), m.numpy.asarray(y), None) for m in (jaxkit, jax))
    np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))
    assert mine.dtype == theirs.dtype


@pytest.mark.parametrize("name,call", DOT_CALLS, ids=[c[0] for c in DOT_CALLS])
def test_dot_out_sharding_refused(name, call):
    """out_sharding names Explicit mesh axes only (tests/test_explicit_sharding.py uses
    them); an Auto axis is refused with JAX's ValueError, never ignored."""
    mesh = jaxkit.sharding.Mesh(np.array(jaxkit.devices()[:1]), ("a",))
    s = jaxkit.sharding.NamedSharding(mesh, jaxkit.sharding.PartitionSpec("a"))
    with pytest.raises(ValueError, match="cannot contain axis names that are of type Auto or "
                                         "Manual. Got PartitionSpec: P\\('a',\\) with axis name: a"):
        call(jaxkit, jnp.ones((4, 3)), jnp.ones((3, 2)), s)


# --------------------------------------------------------------------------------------------
# Samplers take out_sharding=None (Flax nnx Dropout calls bernoulli so); key arrays copy()
# (Flax nnx rngs_test test_fork_rngs*)
# --------------------------------------------------------------------------------------------

SAMPLER_CALLS = [
    ("bernoulli", lambda m, k, s: m.random.bernoulli(k, 0.3, (5,), out_sharding=s)),
    ("uniform", lambda m, k, s: m.random.uniform(k, (2, 3), out_sharding=s)),
    ("normal", lambda m, k, s: m.random.normal(k, (4,), out_sharding=s)),
    ("exponential", lambda m, k, s: m.random.exponential(k, (3,), out_sharding=s)),
]


@pytest.mark.parametrize("name,call", SAMPLER_CALLS, ids=[c[0] for c in SAMPLER_CALLS])
def test_sampler_out_sharding(name, call):
    jax = _oracle()
    mine, theirs = (call(m, m.random.key(7), None) for m in (jaxkit, jax))
    np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))
    # a layout over an Auto mesh lays the sample out (its values do not change), as in JAX
    laid_out = []
    for m in (jaxkit, jax):
        mesh = m.sharding.Mesh(np.array(m.devices()[:1]), ("a",))
        s = m.sharding.NamedSharding(mesh, m.sharding.PartitionSpec())
        laid_out.append(np.asarray(call(m, m.random.key(7), s)))
    np.testing.assert_array_equal(*laid_out)
    np.testing.assert_array_equal(laid_out[0], np.asarray(mine))


def test_key_array_copy():
    jax = _oracle()
    mine, theirs = (m.random.split(m.random.key(5), 2).copy() for m in (jaxkit, jax))
    assert repr(mine) == repr(theirs)
    np.testing.assert_array_equal(np.asarray(jaxkit.random.key_data(mine)),
                                  np.asarray(jax.random.key_data(theirs)))


@pytest.mark.parametrize("name,call", SAMPLER_CALLS,
                         ids=[c[0] for c in SAMPLER_CALLS])
def test_out_sharding_over_an_empty_mesh(name, call):
    """Flax passes NamedSharding(AbstractMesh((), ()), P(None, ...)): it lays nothing out."""
    jax = _oracle()
    outs = []
    for m in (jaxkit, jax):
        s = m.sharding.NamedSharding(m.sharding.AbstractMesh((), (), axis_types=()),
                                     m.sharding.PartitionSpec(None))
        outs.append(np.asarray(call(m, m.random.key(3), s)))
    np.testing.assert_array_equal(*outs)


def test_jit_with_shardings_that_are_all_unspecified():
    # Flax's nnx.jit passes in_shardings as a pytree of None ("unspecified"): no mesh is
    # named, so the call is an ordinary one (it used to fail looking for the mesh).
    def f(a, b):
        return {"y": a * 2 + b["c"]}

    args = (np.arange(3.0, dtype=np.float32), {"c": np.float32(1)})
    got = jaxkit.jit(f, in_shardings=(None, {"c": None}), out_shardings=None)(*args)
    want = _oracle().jit(f, in_shardings=(None, {"c": None}), out_shardings=None)(*args)
    np.testing.assert_array_equal(np.asarray(got["y"]), np.asarray(want["y"]))


def test_jit_with_unspecified_shardings_writes_refs_back():
    # nnx.compat.jit (Flax nnx mutable_array_test test_jit_mutable) passes out_shardings as a
    # pytree of None together with a ref: the call writes the ref back as one without
    # shardings does (it failed lowering a program that takes a ref).
    def f(r, x):
        r[...] += x
        return (x * 2,)

    seen = []
    for m in (jaxkit, _oracle()):
        r = m.new_ref(m.numpy.arange(3.0))
        out = m.jit(f, out_shardings=(None,))(r, m.numpy.float32(1))
        seen.append((np.asarray(r[...]).tolist(), np.asarray(out[0]).tolist()))
    assert seen[0] == seen[1] == ([1.0, 2.0, 3.0], 2.0)


# --------------------------------------------------------------------------------------------
# Flax nnx nn/linear_test (115 failures, two causes): jnp.einsum takes out_sharding=None
# (nnx.Einsum, LinearGeneral: 97 tests), and variables made with out_sharding metadata under
# set_mesh go through mesh.are_all_axes_auto and with_sharding_constraint on a
# NamedSharding over the abstract mesh (TestLayersParamsMetadata: 18 tests)
# --------------------------------------------------------------------------------------------


def test_einsum_out_sharding_none():
    jax = _oracle()
    x = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    y = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    mine, theirs = (m.numpy.einsum("ij,jk->ik", x, y, out_sharding=None) for m in (jaxkit, jax))
    np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))
    mesh = jaxkit.sharding.Mesh(np.array(jaxkit.devices()[:1]), ("a",))
    s = jaxkit.sharding.NamedSharding(mesh, jaxkit.sharding.PartitionSpec("a"))
    # a layout over Auto axes cannot be asked for, as in JAX (Explicit ones: see
    # tests/test_explicit_sharding.py)
    with pytest.raises(ValueError, match="PartitionSpec passed to einsum cannot contain axis "
                       "names that are of type Auto or Manual"):
        jnp.einsum("ij,jk->ik", x, y, out_sharding=s)


MESH_TYPES = [("auto", "Auto"), ("explicit", "Explicit"), ("manual", "Manual"),
              ("mixed", None)]


@pytest.mark.parametrize("name,kind", MESH_TYPES, ids=[m[0] for m in MESH_TYPES])
def test_mesh_are_all_axes_of_a_type(name, kind):
    jax = _oracle()
    rows = []
    for m in (jaxkit, jax):
        t = m.sharding.AxisType
        types = (t.Auto, t.Explicit) if kind is None else (getattr(t, kind),) * 2
        mesh = m.sharding.Mesh(np.array(m.devices()[:1]).reshape(1, 1), ("a", "b"),
                               axis_types=types)
        empty = m.sharding.AbstractMesh((), (), axis_types=())
        rows.append([(x.are_all_axes_auto, x.are_all_axes_explicit, x.are_all_axes_manual)
                     for x in (mesh, mesh.abstract_mesh, empty)])
    assert rows[0] == rows[1]


def test_sharding_constraint_over_an_abstract_mesh_under_set_mesh():
    jax = _oracle()
    outs = []
    for m in (jaxkit, jax):
        P = m.sharding.PartitionSpec
        mesh = m.make_mesh((1, 1), ("a", "b"), axis_types=(m.sharding.AxisType.Auto,) * 2)
        with m.set_mesh(mesh):
            x = m.numpy.arange(6.0).reshape(2, 3)  # made under the mesh, as JAX lays it out
            target = m.sharding.NamedSharding(mesh.abstract_mesh, P("a", "b"))
            y = m.lax.with_sharding_constraint(x, target)
            z = m.jit(lambda v, t=target: m.lax.with_sharding_constraint(v * 2, t))(x)
        outs.append((np.asarray(y), np.asarray(z), y.sharding.spec, y.sharding.mesh.shape_tuple))
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)


def test_sharding_constraint_over_an_abstract_mesh_needs_a_concrete_one():
    jax = _oracle()
    for m in (jaxkit, jax):
        mesh = m.make_mesh((1,), ("a",))
        target = m.sharding.NamedSharding(mesh.abstract_mesh, m.sharding.PartitionSpec())
        with pytest.raises(TypeError, match="The sharding on the input must be a "
                           "`NamedSharding` since the target sharding has an `AbstractMesh`"):
            m.lax.with_sharding_constraint(m.numpy.ones(3), target)


# --------------------------------------------------------------------------------------------
# chex's is_traceable recognises jitted functions (chex asserts_internal_test
# test_is_traceable__with_jit): it looks for api_boundary among the wrapper's globals
# --------------------------------------------------------------------------------------------


def test_chex_is_traceable_recognises_jit():
    jax = _oracle()
    chex_internal = pytest.importorskip("chex._src.asserts_internal")
    def outer(fn):
        @functools.wraps(fn)
        def wrapped(*args):
            return fn(*args)
        return wrapped

    fn = lambda x: x.sum()  # noqa: E731
    for m in (jaxkit, jax):
        got = [chex_internal.is_traceable(g) for g in
               (fn, outer(fn), m.jit(fn), outer(m.jit(fn)), m.jit(outer(fn)))]
        assert got == [False, False, True, True, True], m.__name__
    assert "api_boundary" in jaxkit.jit(fn).__globals__  # what chex looks for
    assert callable(traceback_util.api_boundary)


# --------------------------------------------------------------------------------------------
# jnp.array / .copy() of an array give a new buffer, as in JAX, so a value and its copy can
# both be donated (optax schedule_free_test test_buffer_donation: the state holds
# params.copy() and a step donates params and state)
# --------------------------------------------------------------------------------------------

COPIES = [
    ("method", lambda m, x: x.copy()),
    ("jnp_copy", lambda m, x: m.numpy.copy(x)),
    ("jnp_array", lambda m, x: m.numpy.array(x)),
]


@pytest.mark.parametrize("name,copy", COPIES, ids=[c[0] for c in COPIES])
def test_copies_are_new_buffers(name, copy):
    jax = _oracle()
    for m in (jaxkit, jax):
        x = m.numpy.arange(3.0)
        y = copy(m, x)
        assert y is not x
        step = m.jit(lambda a, b: (a + 1, b * 2), donate_argnums=(0, 1))
        a, b = step(x, y)  # donating both is fine: they are distinct buffers
        assert np.asarray(a).tolist() == [1.0, 2.0, 3.0] and x.is_deleted()
    assert str(jaxkit.make_jaxpr(lambda a: copy(jaxkit, a))(np.ones(2, np.float32))) == \
        str(jax.make_jaxpr(lambda a: copy(jax, a))(np.ones(2, np.float32)))


def test_asarray_does_not_copy():
    x = jnp.arange(3.0)
    assert jnp.asarray(x) is x and jnp.asarray(x, dtype=x.dtype) is x


# --------------------------------------------------------------------------------------------
# lax.cond takes its single operand as the ``operand=`` keyword too (optax _projections_test
# test_projection_ball*, test_projection_l1_ball_grad_at_zero: projection_l1_ball)
# --------------------------------------------------------------------------------------------

COND_OPERANDS = [
    ("array_true", lambda m: m.numpy.array([1.0, -2.0]), True),
    ("array_false", lambda m: m.numpy.array([1.0, -2.0]), False),
    ("tree", lambda m: {"w": m.numpy.ones(2), "b": 0.5}, False),
    ("none", lambda m: None, True),
]


@pytest.mark.parametrize("name,make,pred", COND_OPERANDS, ids=[c[0] for c in COND_OPERANDS])
def test_cond_operand_keyword(name, make, pred):
    jax = _oracle()
    results = []
    for mod in (jaxkit, jax):
        def run(p, mod=mod):
            return mod.lax.cond(p, lambda t: t, lambda t: mod.tree_util.tree_map(
                lambda x: x * 2, t), operand=make(mod))
        results.append((mod.tree_util.tree_map(np.asarray, run(pred)),
                        mod.tree_util.tree_map(np.asarray, mod.jit(run)(pred))))
    for got, want in zip(mod_leaves(results[0]), mod_leaves(results[1])):
        np.testing.assert_array_equal(got, want)


def mod_leaves(tree):
    return jaxkit.tree_util.tree_leaves(tree)


def test_cond_operand_keyword_with_positional_operands_is_an_error():
    jax = _oracle()
    messages = []
    for mod in (jaxkit, jax):
        with pytest.raises(TypeError) as e:
            mod.lax.cond(True, lambda a, b: a, lambda a, b: b, 1.0, operand=2.0)
        messages.append(str(e.value))
    assert messages[0] == messages[1]


# --------------------------------------------------------------------------------------------
# jax.config.parse_flags_with_absl parses --jax... command-line flags into the config (Flax's
# linen tests call it at import; linen_module_test failed at collection without it)
# --------------------------------------------------------------------------------------------

@pytest.fixture
def fresh_absl(monkeypatch):
    """A new Config and an empty absl flag registry, so the process's own are left alone."""
    flags = pytest.importorskip("absl.flags")
    monkeypatch.setattr(flags, "FLAGS", flags.FlagValues())
    return _config.Config(environ={}), flags


def test_parse_flags_with_absl_reads_jax_flags_of_argv(fresh_absl, monkeypatch):
    cfg, flags = fresh_absl
    monkeypatch.setattr(sys, "argv", ["prog", "-k", "x", "--jax_enable_x64",
                                      "--jax_numpy_rank_promotion=raise", "--not_jax=1", "--",
                                      "--jax_debug_nans"])
    assert not cfg.use_absl
    cfg.parse_flags_with_absl()
    assert (cfg.jax_enable_x64, cfg.x64, cfg.jax_numpy_rank_promotion, cfg.jax_debug_nans,
            cfg.use_absl) == (True, True, "raise", False, True)
    assert flags.FLAGS.jax_enable_x64 is True
    assert flags.FLAGS["jax_default_matmul_precision"].value is None
    cfg.update("jax_enable_x64", False)
    cfg.parse_flags_with_absl()  # parsed once: a second call changes nothing
    assert cfg.jax_enable_x64 is False


def test_parse_flags_with_absl_rejects_bad_values(fresh_absl, monkeypatch):
    cfg, flags = fresh_absl
    monkeypatch.setattr(sys, "argv", ["prog", "--jax_numpy_rank_promotion=sometimes"])
    with pytest.raises(flags.IllegalFlagValueError):
        cfg.parse_flags_with_absl()


def test_absl_flag_kinds_match_jax():
    jax = _oracle()
    kinds = {name: _config._absl_flag_kind(coerce)[0]
             for name, (_, coerce, _) in _config._OPTIONS.items()}
    theirs = {name: jax.config.meta[name][0] for name in kinds if name in jax.config.meta}
    # JAX keeps two options as Enum members (absl enum_class flags); jaxkit keeps their values
    # as the strings, so the same command-line spelling gives a string enum flag.
    theirs = {n: ("enum" if k == "enum_class" and kinds[n] == "enum"
                  else k if isinstance(k, str) else k.__name__)
              for n, k in theirs.items()}
    assert len(theirs) > 30
    assert {n: kinds[n] for n in theirs} == theirs


# --------------------------------------------------------------------------------------------
# A rank-0 constant made while staging (jnp.zeros((), uint32), lax.full, convert_element_type
# of a host scalar) is a tracer standing for a literal, not a NumPy scalar (Flax nnx.Rngs
# keeps its counter as one and assigns into it: module_test test_create_abstract,
# test_partial_init)
# --------------------------------------------------------------------------------------------

def _staged_constants(m):
    kinds: list = []

    def make():  # a new function each time, so eval_shape traces again (JAX caches by it)
        def f(x):
            made = [m.numpy.zeros((), np.uint32), m.lax.full((), 3, np.float32),
                    m.lax.convert_element_type(1.5, np.int32),
                    m.lax.convert_element_type(np.float32(2), np.int32)]
            kinds.append([isinstance(v, m.Array) and not isinstance(v, np.generic)
                          for v in made])
            return x + made[0].astype(np.int32) + made[1].astype(np.int32) + made[2] + \
                made[3], made[0]
        return f
    text = str(m.make_jaxpr(make())(1))
    m.eval_shape(make(), 1)
    return kinds, text


def test_staged_rank0_constants_are_tracers():
    jax = _oracle()
    kinds, text = _staged_constants(jaxkit)
    assert kinds == [[True] * 4] * 2
    assert (kinds, text) == _staged_constants(jax)


# --------------------------------------------------------------------------------------------
# The auxiliary output of grad/vjp/linearize/jacfwd/jacrev (has_aux=True) is rebuilt after
# the differentiation trace is left, as in JAX: Flax's Variables record the trace they are
# built under (nnx module_test TestCapture test_fwd_bwd, test_nested_modules: "Cannot return
# captured Variable of type Intermediate from nnx.jit")
# --------------------------------------------------------------------------------------------

AUX_TRANSFORMS = [
    ("grad", lambda m, f, x: m.grad(f, has_aux=True)(x)[1]),
    ("value_and_grad", lambda m, f, x: m.value_and_grad(f, has_aux=True)(x)[0][1]),
    ("vjp", lambda m, f, x: m.vjp(f, x, has_aux=True)[2]),
    ("linearize", lambda m, f, x: m.linearize(f, x, has_aux=True)[2]),
    ("jacfwd", lambda m, f, x: m.jacfwd(f, has_aux=True)(x)[1]),
    ("jacrev", lambda m, f, x: m.jacrev(f, has_aux=True)(x)[1]),
]


@functools.cache
def _trace_box(m):
    """A pytree node class remembering the trace it was built under, as Flax's Variable;
    one per library, registered once."""
    state = functools.partial(m.extend.core.get_opaque_trace_state, convention="nnx")

    class TraceBox:
        def __init__(self, value):
            self.value, self.trace_state = value, state()

    m.tree_util.register_pytree_node(TraceBox, lambda b: ((b.value,), None),
                                     lambda _, c: TraceBox(c[0]))
    return TraceBox, state


def _aux_built_outside(m, transform):
    box_type, state = _trace_box(m)
    seen = []

    @m.jit
    def outer(x):
        box = transform(m, lambda y: (y * 2.0, box_type(y * 3.0)), x)
        seen.append(box.trace_state == state())
        return box.value
    return seen, float(outer(1.0))


@pytest.mark.parametrize("name,transform", AUX_TRANSFORMS, ids=[t[0] for t in AUX_TRANSFORMS])
def test_aux_output_is_rebuilt_outside_the_trace(name, transform):
    jax = _oracle()
    pytest.importorskip("jax.extend")
    assert _aux_built_outside(jaxkit, transform) == ([True], 3.0)
    assert _aux_built_outside(jax, transform) == ([True], 3.0)


# --------------------------------------------------------------------------------------------
# Flax linen_test: jnp.einsum's private _dot_general hook (Fp8Einsum, attention with an
# injected einsum); that file's custom_jvp/custom_vjp causes are in
# test_ecosystem_fixes_custom_ad.py
# --------------------------------------------------------------------------------------------

def _einsum_with_hook(m):
    calls = []

    def dot_general(lhs, rhs, dims, precision=None, preferred_element_type=None):
        calls.append((dims, precision, np.dtype(preferred_element_type).name))
        return 2 * m.lax.dot_general(lhs, rhs, dims, precision=precision,
                                     preferred_element_type=preferred_element_type)
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    out = m.numpy.einsum("ij,kj->ik", x, x, _dot_general=dot_general)
    return np.asarray(out).tolist(), calls


def test_einsum_dot_general_hook():
    jax = _oracle()
    mine = _einsum_with_hook(jaxkit)
    assert mine[1] and mine == _einsum_with_hook(jax)


# --------------------------------------------------------------------------------------------
# eval_shape takes abstract values and any object with a shape and dtype, as JAX's (Flax
# ConvLocal: linen_linear_test test_circular_conv_*, test_conv_local); a vmap in_axes prefix
# may hold childless nodes, and is_leaf sees leaves too (nnx graph_utils_test TestTreeFlatten)
# --------------------------------------------------------------------------------------------

class _ShapeAndDtype:
    shape, dtype = (2, 3), np.dtype("int32")


def test_eval_shape_takes_abstract_values():
    jax = _oracle()
    got = [str(m.eval_shape(lambda a, b, c: (a + 1, b * 2, c),
                            m.core.ShapedArray((4, 2), np.float32), _ShapeAndDtype(),
                            m.ShapeDtypeStruct((1,), np.float16))) for m in (jaxkit, jax)]
    assert got[0] == got[1]


class _Childless:
    """A pytree node with no children (as Flax's PytreeState)."""


def _childless_prefix(m):
    if m not in _childless_prefix.registered:  # once per library
        m.tree_util.register_pytree_node(_Childless, lambda n: ((), None),
                                         lambda _, c: _Childless())
        _childless_prefix.registered.add(m)
    tree = {"s": _Childless(), "w": np.ones((3, 2), np.float32)}
    out = m.vmap(lambda t, x: t["w"] * x, in_axes=({"s": _Childless(), "w": 0}, None))(
        tree, 2.0)
    return np.asarray(out).tolist()


_childless_prefix.registered = set()


def test_vmap_prefix_with_childless_node():
    jax = _oracle()
    assert _childless_prefix(jaxkit) == _childless_prefix(jax)


def test_is_leaf_sees_leaves():
    jax = _oracle()
    seen = {}
    for m in (jaxkit, jax):
        calls = seen[m] = []
        tree = [1, (2.0, None), {"a": "s"}]
        m.tree_util.tree_flatten(tree, is_leaf=lambda x, c=calls: c.append(repr(x)) and False)
        m.tree_util.tree_flatten_with_path(
            tree, is_leaf=lambda p, x, c=calls: c.append(m.tree_util.keystr(p)) and False,
            is_leaf_takes_path=True)
    assert seen[jaxkit] == seen[jax]


# --------------------------------------------------------------------------------------------
# nnx transforms_test: vmap over an object answering any attribute (nnx.Rngs), make_mesh of
# fewer devices than there are (takes the first ones), and the out_axes=None error naming
# the output leaf's full path, as JAX's
# --------------------------------------------------------------------------------------------

class _AnyAttribute:
    """Answers every attribute, as Flax's nnx.Rngs (a stream per name)."""

    def __init__(self, x):
        self.x = x

    def __getattr__(self, name):
        return lambda *a: None


def _vmap_any_attribute(m):
    if m not in _vmap_any_attribute.registered:
        m.tree_util.register_pytree_node(_AnyAttribute, lambda n: ((n.x,), None),
                                         lambda _, c: _AnyAttribute(c[0]))
        _vmap_any_attribute.registered.add(m)
    out = m.vmap(lambda o: o.x * 2)(_AnyAttribute(np.arange(3.0, dtype=np.float32)))
    return np.asarray(out).tolist()


_vmap_any_attribute.registered = set()


def test_vmap_over_object_answering_any_attribute():
    jax = _oracle()
    assert _vmap_any_attribute(jaxkit) == _vmap_any_attribute(jax) == [0.0, 2.0, 4.0]


def test_make_mesh_takes_the_first_devices():
    jax = _oracle()
    for m in (jaxkit, jax):
        mesh = m.make_mesh((1, 1), ("a", "b"))
        assert (mesh.devices.shape, [d.id for d in mesh.devices.flat]) == ((1, 1), [0])
    n = len(jaxkit.devices()) + 1
    errors = []
    for m in (jaxkit, jax):
        with pytest.raises(ValueError) as e:
            m.make_mesh((n,), ("a",))
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_vmap_out_axes_none_error_names_the_leaf():
    jax = _oracle()
    errors = []
    for m in (jaxkit, jax):
        with pytest.raises(ValueError) as e:
            m.vmap(lambda x: (x, {"a": [x, x * 2]}), out_axes=(0, None))(np.ones(3, np.float32))
        errors.append(str(e.value))
    assert errors[0] == errors[1] == ("at vmap out_axes[1]['a'][0], got axis spec None but "
                                      "output was batched on axis 0")


def test_lowered_compile_takes_jax_arguments():
    # nnx.jit(...).lower(...).compile() passes compiler_options positionally (transforms_test
    # TestJIT test_jit_wrapped, TestTreeJIT test_jit_partial_lower_compile).
    jax = _oracle()
    outs = [float(m.jit(lambda x: x * 2).lower(1.5).compile(None)(1.5)) for m in (jaxkit, jax)]
    assert outs == [3.0, 3.0]
    outs = [float(m.jit(lambda x: x * 2).lower(1.5).compile(
        {"xla_embed_ir_in_executable": True})(1.5)) for m in (jaxkit, jax)]
    assert outs == [3.0, 3.0]


def _static_both_given(m):
    def method(self, a, b):
        return a

    # Flax's lifted jit: static_argnames of the wrapped method, passed by keyword to a
    # function whose signature functools.wraps copied (linen_transforms_test
    # test_jit_static_argnames). Given both, JAX infers neither from the other.
    @functools.partial(m.jit, static_argnums=(0,), static_argnames=["b"])
    @functools.wraps(method)
    def jitted(fingerprint, variable_groups, rng_groups, *args, **kwargs):
        return args[0] + len(kwargs["b"])
    return float(jitted((1,), {}, (({},),), 1.0, b="hi"))


def test_jit_static_argnums_and_argnames_both_given():
    jax = _oracle()
    assert _static_both_given(jaxkit) == _static_both_given(jax) == 3.0


# --------------------------------------------------------------------------------------------
# cond/switch leave out the outputs every branch forwards from the same input, as JAX does:
# they are that input, unbatched under vmap when it is (nnx transforms_test TestVmap
# test_vmap_and_cond_passthrough*: broadcast state passed through an nnx.cond under
# nnx.vmap), and the staged cond does not list them
# --------------------------------------------------------------------------------------------

def _cond_forwarding(m):
    def f(p, x, y):
        return m.lax.cond(p, lambda x, y: (x, y * 2, y), lambda x, y: (x, y, y), x, y)

    def g(i, x, y):
        return m.lax.switch(i, [lambda x, y: (x, 1.0), lambda x, y: (x, y),
                                lambda x, y: (x, x)], x, y)
    texts = [str(m.make_jaxpr(f)(True, 1.0, 2.0)), str(m.make_jaxpr(g)(1, 1.0, 2.0))]
    outs = m.vmap(f, in_axes=(0, None, 0), out_axes=(None, 0, 0))(
        np.array([True, False]), np.float32(1.0), np.array([2.0, 3.0], np.float32))
    eager = f(True, 1.0, 2.0)[0]
    return texts, [np.asarray(o).tolist() for o in outs], isinstance(eager, m.Array)


def test_cond_forwards_passthrough_outputs():
    jax = _oracle()
    mine = _cond_forwarding(jaxkit)
    assert mine[1:] == ([1.0, [4.0, 3.0], [2.0, 3.0]], True)
    assert mine == _cond_forwarding(jax)


# --------------------------------------------------------------------------------------------
# lax.conv_general_dilated takes out_sharding (Flax's nnx.Conv passes out_sharding=None:
# nnx/nn/conv_test; a layout over Explicit mesh axes: tests/test_ecosystem_fixes_spmd.py)
# --------------------------------------------------------------------------------------------

def _conv_out_sharding(m):
    x = np.arange(8.0, dtype=np.float32).reshape(1, 1, 8)
    w = np.ones((1, 1, 3), np.float32)
    return np.asarray(m.lax.conv_general_dilated(x, w, (1,), "SAME", out_sharding=None,
                                                 rhs_dilation=(2,))).tolist()


def test_conv_general_dilated_out_sharding():
    jax = _oracle()
    assert _conv_out_sharding(jaxkit) == _conv_out_sharding(jax)
