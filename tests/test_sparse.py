"""``jaxkit.experimental.sparse`` against the JAX oracle: one record per operation on BCOO
arrays of several layouts (n_batch, n_dense); generic checks compare values, printing and
stored-element counts eagerly, under ``jit``, under ``vmap`` (over a batch dimension) and the
gradients with respect to the stored data (``sparse.grad``)."""
from __future__ import annotations

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit import lax as klax
from jaxkit.experimental import sparse as ksparse

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax import lax as jlax  # noqa: E402
from jax.experimental import sparse as jsparse  # noqa: E402

rng = np.random.default_rng(0)


def _sparse_array(shape, density=0.4, seed=0):
    r = np.random.default_rng(seed)
    x = r.standard_normal(shape).astype(np.float32)
    return np.where(r.random(shape) < density, x, 0).astype(np.float32)


M23 = _sparse_array((2, 3), seed=1)
M34 = _sparse_array((3, 4), seed=2)
M234 = _sparse_array((2, 3, 4), seed=3)
V4 = rng.standard_normal(4).astype(np.float32)
V3 = rng.standard_normal(3).astype(np.float32)
A42 = rng.standard_normal((4, 2)).astype(np.float32)
B23 = rng.standard_normal((2, 3)).astype(np.float32)
B24 = rng.standard_normal((2, 4, 5)).astype(np.float32)


def _dn(lc, rc, lb=(), rb=()):
    return ((lc, rc), (lb, rb))


# (name, dense input, n_batch, n_dense, fn(sparse module, jnp, lax, mat) -> array or BCOO,
#  differentiable with respect to the stored data)
RECORDS = [
    ("todense", M34, 0, 0, lambda sp, np_, lax, m: m.todense(), True),
    ("todense_batch", M234, 1, 0, lambda sp, np_, lax, m: m.todense(), True),
    ("todense_dense_dim", M234, 0, 1, lambda sp, np_, lax, m: m.todense(), True),
    ("T", M34, 0, 0, lambda sp, np_, lax, m: m.T, True),
    ("transpose_batch", M234, 1, 0, lambda sp, np_, lax, m: m.transpose((0, 2, 1)), True),
    ("matvec", M34, 0, 0, lambda sp, np_, lax, m: m @ np_.asarray(V4), True),
    ("matmat", M34, 0, 0, lambda sp, np_, lax, m: m @ np_.asarray(A42), True),
    ("rmatmul", M34, 0, 0, lambda sp, np_, lax, m: np_.asarray(B23) @ m, True),
    ("batched_matmul", M234, 1, 0,
     lambda sp, np_, lax, m: sp.bcoo_dot_general(m, np_.asarray(B24[:, :, :]).reshape(2, 4, 5),
                                                 dimension_numbers=_dn((2,), (1,), (0,), (0,))),
     True),
    ("batch_free_dot", M234, 1, 0,
     lambda sp, np_, lax, m: sp.bcoo_dot_general(m, np_.asarray(A42),
                                                 dimension_numbers=_dn((2,), (0,))), True),
    ("contract_batch_dim", M234, 1, 0,
     lambda sp, np_, lax, m: sp.bcoo_dot_general(m, np_.asarray(B23),
                                                 dimension_numbers=_dn((0, 1), (0, 1))), True),
    ("mul_scalar", M34, 0, 0, lambda sp, np_, lax, m: m * 3.0, True),
    ("rmul_scalar", M34, 0, 0, lambda sp, np_, lax, m: 2.0 * m, True),
    ("mul_dense", M34, 0, 0, lambda sp, np_, lax, m: m * np_.asarray(M34 + 1), True),
    ("mul_broadcast_row", M34, 0, 0, lambda sp, np_, lax, m: m * np_.asarray(V4), True),
    ("multiply_dense_fn", M234, 1, 0,
     lambda sp, np_, lax, m: sp.bcoo_multiply_dense(m, np_.asarray(M234 + 2)), True),
    ("div_scalar", M34, 0, 0, lambda sp, np_, lax, m: m / 4.0, True),
    ("neg", M34, 0, 0, lambda sp, np_, lax, m: -m, True),
    ("sin", M34, 0, 0, lambda sp, np_, lax, m: sp.sparsify(np_.sin)(m), True),
    ("square", M34, 0, 0, lambda sp, np_, lax, m: sp.sparsify(lambda x: x ** 2)(m), True),
    ("add_sparse", M34, 0, 0, lambda sp, np_, lax, m: m + m, True),
    ("sub_sparse", M34, 0, 0, lambda sp, np_, lax, m: m - 2 * m, True),
    ("mul_sparse", M34, 0, 0, lambda sp, np_, lax, m: m * m, True),
    ("sum_all", M34, 0, 0, lambda sp, np_, lax, m: m.sum(), True),
    ("sum_0", M34, 0, 0, lambda sp, np_, lax, m: m.sum(0), True),
    ("sum_1", M34, 0, 0, lambda sp, np_, lax, m: m.sum(1), True),
    ("reduce_sum_batch", M234, 1, 0,
     lambda sp, np_, lax, m: sp.bcoo_reduce_sum(m, axes=(0, 2)), True),
    ("reduce_sum_dense", M234, 0, 1,
     lambda sp, np_, lax, m: sp.bcoo_reduce_sum(m, axes=(2,)), True),
    ("concatenate_0", M34, 0, 0,
     lambda sp, np_, lax, m: sp.bcoo_concatenate([m, 2 * m], dimension=0), True),
    ("concatenate_1", M34, 0, 0,
     lambda sp, np_, lax, m: sp.bcoo_concatenate([m, m], dimension=1), True),
    ("concatenate_batch", M234, 1, 0,
     lambda sp, np_, lax, m: sp.bcoo_concatenate([m, m], dimension=0), True),
    ("slice_sparse", M34, 0, 0,
     lambda sp, np_, lax, m: sp.bcoo_slice(m, start_indices=(1, 0), limit_indices=(3, 3)),
     True),
    ("slice_batch", M234, 1, 0,
     lambda sp, np_, lax, m: sp.bcoo_slice(m, start_indices=(1, 0, 1), limit_indices=(2, 3, 4)),
     True),
    ("sort_indices", M34, 0, 0, lambda sp, np_, lax, m: m.T.sort_indices(), True),
    ("sum_duplicates_nse", M34, 0, 0,
     lambda sp, np_, lax, m: sp.bcoo_sum_duplicates(
         sp.BCOO((np_.concatenate([m.data, m.data]), np_.concatenate([m.indices, m.indices])),
                 shape=m.shape), nse=m.nse), True),
    ("extract", M34, 0, 0,
     lambda sp, np_, lax, m: sp.bcoo_extract(m, np_.asarray(M34 * 5 + 1)), False),
    ("squeeze", M234[:1], 0, 0, lambda sp, np_, lax, m: sp.bcoo_squeeze(m, dimensions=(0,)),
     True),
    ("reshape", M234, 0, 0, lambda sp, np_, lax, m: m.reshape(6, 4), True),
    ("reshape_batch", M234, 1, 0, lambda sp, np_, lax, m: m.reshape(2, 12), True),
    ("reshape_sparsify", M34, 0, 0, lambda sp, np_, lax, m: sp.sparsify(
        lambda x: x.reshape(2, 6) * 2)(m), True),
    ("rev", M234, 1, 0, lambda sp, np_, lax, m: sp.bcoo_rev(m, (1, 2)), True),
    ("spdot_matmul", M34, 0, 0, lambda sp, np_, lax, m: m @ m.T, False),
    ("spdot_batch", M234, 1, 0, lambda sp, np_, lax, m: sp.bcoo_dot_general(
        m, m, dimension_numbers=_dn((2,), (2,), (0,), (0,))), False),
    ("spdot_free_batch", M234, 1, 0, lambda sp, np_, lax, m: sp.bcoo_dot_general(
        m, sp.BCOO.fromdense(np_.asarray(M34), nse=5), dimension_numbers=_dn((2,), (1,))), False),
    ("spdot_vec", M34, 0, 0, lambda sp, np_, lax, m: m.T @ sp.BCOO.fromdense(
        np_.asarray(V3), nse=3), False),
    ("expand_dims", M34, 0, 0, lambda sp, np_, lax, m: sp.sparsify(lambda x: x[None])(m), True),
    ("broadcast_in_dim", M234, 1, 1, lambda sp, np_, lax, m: sp.bcoo_broadcast_in_dim(
        m, shape=(5, 2, 3, 4, 2), broadcast_dimensions=(1, 2, 3)), True),
    ("getitem_row", M34, 0, 0, lambda sp, np_, lax, m: m[1], True),
    ("getitem_slices", M234, 1, 0, lambda sp, np_, lax, m: m[:, 1:3, ::-1], True),
    ("getitem_int_col", M34, 0, 0, lambda sp, np_, lax, m: m[1:, 2], True),
    ("iter", M34, 0, 0, lambda sp, np_, lax, m: sp.bcoo_concatenate(
        [r[None] for r in m], dimension=0), True),
    ("dynamic_slice", M234, 1, 0, lambda sp, np_, lax, m: sp.bcoo_dynamic_slice(
        m, (np_.int32(1), np_.int32(1), np_.int32(3)), (1, 2, 2)), True),
    ("dynamic_slice_sparsify", M34, 0, 0, lambda sp, np_, lax, m: sp.sparsify(
        lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 2)))(m, np_.int32(2)), True),
    ("sparsify_chain", M34, 0, 0,
     lambda sp, np_, lax, m: sp.sparsify(lambda x, v: (np_.tanh(x) * 2).T @ v)(
         m, np_.asarray(V3)), True),
]

_sp = {"k": (ksparse, kjnp, klax, jaxkit), "j": (jsparse, jjnp, jlax, jax)}


def _operand(side, record):
    _, dense, n_batch, n_dense, _, _ = record
    sp, np_, _, _ = _sp[side]
    return sp.BCOO.fromdense(np_.asarray(dense), n_batch=n_batch, n_dense=n_dense)


def _fn(side, record):
    sp, np_, lax, _ = _sp[side]
    return lambda m: record[4](sp, np_, lax, m)


# Each record's results are computed once and shared by the tests that need them. The oracle's
# result is JAX's under jax.jit: op by op, JAX 0.10.2 compiles every primitive of a record
# separately (its eager results cost twice the CPU of its jitted ones here). Values and printing
# are the same for every record (nse is static in all of them: nothing inside a record's
# function asks for a data-dependent nse, which jax.jit would refuse).
_JAX: dict = {}
_KIT_EAGER: dict = {}


def _oracle(record):
    if record[0] not in _JAX:
        _JAX[record[0]] = jax.jit(_fn("j", record))(_operand("j", record))
    return _JAX[record[0]]


def _kit_eager(record):
    if record[0] not in _KIT_EAGER:
        _KIT_EAGER[record[0]] = _fn("k", record)(_operand("k", record))
    return _KIT_EAGER[record[0]]


def _compare(out_k, out_j, rtol=2e-5):
    """``out_k`` (jaxkit's) against ``out_j``: JAX's, or jaxkit's own eager result."""
    if isinstance(out_j, (jsparse.BCOO, ksparse.BCOO)):
        assert isinstance(out_k, ksparse.BCOO), type(out_k)
        assert repr(out_k) == repr(out_j)
        assert (out_k.n_batch, out_k.n_dense) == (out_j.n_batch, out_j.n_dense)
        np.testing.assert_allclose(np.asarray(out_k.todense()), np.asarray(out_j.todense()),
                                   rtol=rtol, atol=1e-6)
    else:
        assert not isinstance(out_k, ksparse.BCOO)
        assert np.asarray(out_k).dtype == np.asarray(out_j).dtype
        np.testing.assert_allclose(np.asarray(out_k), np.asarray(out_j), rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("record", RECORDS, ids=[r[0] for r in RECORDS])
def test_eager_matches_jax(record):
    _compare(_kit_eager(record), _oracle(record))


@pytest.mark.parametrize("record", RECORDS, ids=[r[0] for r in RECORDS])
def test_jit_matches_jax(record):
    # jaxkit's jit against jaxkit's eager run, and its printing, layout and values against
    # the oracle's (JAX's jitted result, computed once for both tests).
    out = jaxkit.jit(_fn("k", record))(_operand("k", record))
    _compare(out, _kit_eager(record))
    _compare(out, _oracle(record))


def _loss(side, record):
    sp, np_, _, _ = _sp[side]
    fn = _fn(side, record)

    def loss(m):
        out = fn(m)
        out = out.todense() if isinstance(out, sp.BCOO) else out
        return (np_.sin(out) * np_.arange(out.size, dtype=out.dtype).reshape(out.shape)).sum()

    return loss


@pytest.mark.parametrize("record", [r for r in RECORDS if r[5]], ids=[r[0] for r in RECORDS
                                                                     if r[5]])
def test_sparse_grad_matches_jax(record):
    # jaxkit's eager sparse.grad against JAX's sparse.grad, run under jax.jit (a third of the
    # CPU of JAX's op-by-op run; the gradients, their printing and indices are the same).
    g_k = ksparse.grad(_loss("k", record))(_operand("k", record))
    g_j = jax.jit(jsparse.grad(_loss("j", record)))(_operand("j", record))
    assert repr(g_k) == repr(g_j)
    np.testing.assert_allclose(np.asarray(g_k.data), np.asarray(g_j.data), rtol=2e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(g_k.indices), np.asarray(g_j.indices))


def test_fromdense_buffers_and_repr():
    for n_batch, n_dense, mat in [(0, 0, M34), (1, 0, M234), (0, 1, M234), (1, 1, M234)]:
        k = ksparse.BCOO.fromdense(kjnp.asarray(mat), n_batch=n_batch, n_dense=n_dense)
        j = jsparse.BCOO.fromdense(jjnp.asarray(mat), n_batch=n_batch, n_dense=n_dense)
        assert repr(k) == repr(j)
        np.testing.assert_array_equal(np.asarray(k.data), np.asarray(j.data))
        np.testing.assert_array_equal(np.asarray(k.indices), np.asarray(j.indices))
        assert (k.indices_sorted, k.unique_indices) == (j.indices_sorted, j.unique_indices)
    k = ksparse.BCOO.fromdense(kjnp.asarray(M34), nse=10)
    j = jsparse.BCOO.fromdense(jjnp.asarray(M34), nse=10)
    np.testing.assert_array_equal(np.asarray(k.indices), np.asarray(j.indices))
    np.testing.assert_array_equal(np.asarray(k.data), np.asarray(j.data))


@pytest.mark.parametrize("args", [dict(N=3), dict(N=3, M=4, k=1), dict(N=4, k=-2),
                                  dict(N=3, k=5), dict(N=3, n_batch=1), dict(N=3, M=5, k=2,
                                                                             n_batch=1)])
def test_eye_matches_jax(args):
    k, j = ksparse.eye(**args), jsparse.eye(**args)
    assert repr(k) == repr(j)
    np.testing.assert_array_equal(np.asarray(k.todense()), np.asarray(j.todense()))


def test_empty_and_todense():
    k, j = ksparse.empty((2, 3), nse=2, n_batch=1), jsparse.empty((2, 3), nse=2, n_batch=1)
    assert repr(k) == repr(j)
    np.testing.assert_array_equal(np.asarray(k.indices), np.asarray(j.indices))
    np.testing.assert_array_equal(np.asarray(ksparse.todense(k)), np.asarray(jsparse.todense(j)))


@pytest.mark.parametrize("kw", [dict(shape=(4, 5)), dict(shape=(3, 4, 5), n_batch=1, nse=3),
                                dict(shape=(4, 5, 2), n_dense=1, nse=0.5),
                                dict(shape=(6, 6), sorted_indices=True)])
def test_random_bcoo_matches_jax(kw):
    k = ksparse.random_bcoo(jaxkit.random.key(3), **kw)
    j = jsparse.random_bcoo(jax.random.key(3), dtype=np.float32, **kw)
    assert repr(k) == repr(j)
    np.testing.assert_array_equal(np.asarray(k.indices), np.asarray(j.indices))
    np.testing.assert_array_equal(np.asarray(k.data), np.asarray(j.data))


def test_sum_duplicates_eager_nse():
    data = np.array([1.0, 2.0, 0.0, 4.0], np.float32)
    idx = np.array([[0, 1], [0, 1], [2, 2], [1, 0]], np.int32)
    k = ksparse.BCOO((kjnp.asarray(data), kjnp.asarray(idx)), shape=(3, 3))
    j = jsparse.BCOO((jjnp.asarray(data), jjnp.asarray(idx)), shape=(3, 3))
    for f in (lambda m: m.sum_duplicates(), lambda m: m.sum_duplicates(remove_zeros=False)):
        a, b = f(k), f(j)
        assert repr(a) == repr(b)
        np.testing.assert_array_equal(np.asarray(a.indices), np.asarray(b.indices))
        np.testing.assert_array_equal(np.asarray(a.data), np.asarray(b.data))


def test_vmap_over_batched_bcoo():
    v = rng.standard_normal((2, 4)).astype(np.float32)
    k = ksparse.BCOO.fromdense(kjnp.asarray(M234), n_batch=1)
    j = jsparse.BCOO.fromdense(jjnp.asarray(M234), n_batch=1)
    out_k = jaxkit.vmap(lambda m, x: m @ x)(k, kjnp.asarray(v))
    out_j = jax.vmap(lambda m, x: m @ x)(j, jjnp.asarray(v))
    np.testing.assert_allclose(np.asarray(out_k), np.asarray(out_j), rtol=1e-5)
    # BCOO in and out of vmap keeps its shape in step with its buffers.
    out_k = jaxkit.vmap(lambda m: (m * 2).T)(k)
    out_j = jax.vmap(lambda m: (m * 2).T)(j)
    _compare(out_k, out_j)


@pytest.mark.parametrize("prim_case", ["todense", "fromdense", "dot", "rdot", "transpose"])
def test_primitive_vmap_of_dense_inputs(prim_case):
    """vmap over dense arrays feeding the primitives exercises every batching rule."""
    xs = np.stack([M34, 2 * M34 + (M34 != 0)])
    cases = {
        "todense": lambda sp, np_, x: sp.BCOO((x[0, :3], np_.array([[0, 1], [2, 3], [1, 1]])),
                                              shape=(3, 4)).todense(),
        "fromdense": lambda sp, np_, x: sp.BCOO.fromdense(x, nse=6).todense(),
        "dot": lambda sp, np_, x: sp.BCOO.fromdense(np_.asarray(M34)) @ x[0],
        "rdot": lambda sp, np_, x: x[:, 0] @ sp.BCOO.fromdense(np_.asarray(M34)),
        "transpose": lambda sp, np_, x: sp.BCOO.fromdense(x, nse=6).T.todense(),
    }
    # The reference: each example's result by NumPy, in a loop (JAX's vmap program would only
    # repeat that comparison at the cost of compiling it). Both examples keep every nonzero
    # within nse=6, so fromdense and transpose round-trip them exactly.
    assert (xs[0] != 0).sum() <= 6

    def todense_ref(x):
        out = np.zeros((3, 4), np.float32)
        out[[0, 2, 1], [1, 3, 1]] = x[0, :3]
        return out

    refs = {"todense": todense_ref, "fromdense": lambda x: x, "dot": lambda x: M34 @ x[0],
            "rdot": lambda x: x[:, 0] @ M34, "transpose": lambda x: x.T}
    out_k = jaxkit.vmap(lambda x: cases[prim_case](ksparse, kjnp, x))(kjnp.asarray(xs))
    np.testing.assert_allclose(np.asarray(out_k), np.stack([refs[prim_case](x) for x in xs]),
                               rtol=1e-5)


def test_grad_through_fromdense_and_dot_rhs():
    def f(sp, np_, x, v):
        m = sp.BCOO.fromdense(x, nse=6)
        return ((m @ v) ** 2).sum() + (m.T @ np_.ones(3)).sum()
    gk = jaxkit.grad(lambda x, v: f(ksparse, kjnp, x, v), (0, 1))(kjnp.asarray(M34),
                                                                   kjnp.asarray(V4))
    # JAX's gradient under jax.jit: one compiled program instead of one per primitive.
    gj = jax.jit(jax.grad(lambda x, v: f(jsparse, jjnp, x, v), (0, 1)))(jjnp.asarray(M34),
                                                                        jjnp.asarray(V4))
    for a, b in zip(gk, gj):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_errors_match_jax():
    k = ksparse.BCOO.fromdense(kjnp.asarray(M234), n_batch=1)
    with pytest.raises(NotImplementedError, match="contracting over dense"):
        ksparse.bcoo_dot_general(ksparse.BCOO.fromdense(kjnp.asarray(M234), n_dense=1),
                                 kjnp.ones(4), dimension_numbers=_dn((2,), (0,)))
    with pytest.raises(NotImplementedError, match="sparse rule for cumsum"):
        ksparse.sparsify(lambda x: kjnp.cumsum(x, 0))(k)
    with pytest.raises(ValueError, match="data batch dimensions not compatible"):
        ksparse.BCOO((kjnp.ones((3, 2)), kjnp.zeros((2, 2, 1), np.int32)), shape=(2, 4))
    with pytest.raises(jaxkit.errors.ConcretizationTypeError):
        jaxkit.jit(lambda x: ksparse.BCOO.fromdense(x))(kjnp.asarray(M34))


def test_primitive_names_match_jax():
    for name in ("bcoo_todense_p", "bcoo_fromdense_p", "bcoo_extract_p", "bcoo_transpose_p",
                 "bcoo_dot_general_p", "bcoo_sort_indices_p", "bcoo_sum_duplicates_p"):
        assert getattr(ksparse, name).name == getattr(jsparse, name).name


# ---- COO / CSR / CSC -----------------------------------------------------------------------

FORMAT_CASES = [
    ("todense", lambda m, np_: m.todense()),
    ("matvec", lambda m, np_: m @ np_.asarray(V4 if m.shape[1] == 4 else V3)),
    ("matmat", lambda m, np_: m @ np_.asarray(A42 if m.shape[1] == 4 else A42[:3])),
    ("T_todense", lambda m, np_: m.T.todense()),
    ("T_matvec", lambda m, np_: m.T @ np_.asarray(V3 if m.shape[0] == 3 else V4)),
]


_FORMAT_ORACLE: dict = {}


@pytest.mark.parametrize("fmt", ["COO", "CSR", "CSC"])
@pytest.mark.parametrize("case", FORMAT_CASES, ids=[c[0] for c in FORMAT_CASES])
@pytest.mark.parametrize("transform", [None, "jit"])
def test_formats_match_jax(fmt, case, transform):
    _, f = case
    k = getattr(ksparse, fmt).fromdense(kjnp.asarray(M34))
    j = getattr(jsparse, fmt).fromdense(jjnp.asarray(M34))
    assert repr(k) == repr(j)
    for a, b in zip(k.tree_flatten()[0], j.tree_flatten()[0]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # Eager and jit against JAX's eager values (computed once per case), jit also against
    # jaxkit's eager run; not against JAX's compiled program, which repeats the comparison.
    key = (fmt, case[0])
    if key not in _FORMAT_ORACLE:
        _FORMAT_ORACLE[key] = np.asarray(f(j, jjnp))
    got = np.asarray((jaxkit.jit(lambda m: f(m, kjnp)) if transform == "jit" else
                      (lambda m: f(m, kjnp)))(k))
    np.testing.assert_allclose(got, _FORMAT_ORACLE[key], rtol=1e-5, atol=1e-6)
    if transform == "jit":
        np.testing.assert_allclose(got, np.asarray(f(k, kjnp)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fmt", ["COO", "CSR"])
def test_format_grads_match_jax(fmt):
    def loss(mod, np_, data, v):
        m = getattr(mod, fmt).fromdense(np_.asarray(M34))
        m = type(m).tree_unflatten(m.tree_flatten()[1], (data, *m.tree_flatten()[0][1:]))
        return (np_.sin(m @ v) + (m @ np_.stack([v, 2 * v], 1)).sum()).sum()

    k0 = getattr(ksparse, fmt).fromdense(kjnp.asarray(M34))
    j0 = getattr(jsparse, fmt).fromdense(jjnp.asarray(M34))
    gk = jaxkit.grad(lambda d, v: loss(ksparse, kjnp, d, v), (0, 1))(k0.data, kjnp.asarray(V4))
    gj = jax.grad(lambda d, v: loss(jsparse, jjnp, d, v), (0, 1))(j0.data, jjnp.asarray(V4))
    for a, b in zip(gk, gj):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    # Through fromdense: the gradient of the dense input.
    gk = jaxkit.grad(lambda x: getattr(ksparse, fmt).fromdense(x, nse=5).todense().sum())(
        kjnp.asarray(M34))
    # JAX's gradient under jax.jit: one compiled program instead of one per primitive.
    gj = jax.jit(jax.grad(lambda x: getattr(jsparse, fmt).fromdense(x, nse=5).todense().sum()))(
        jjnp.asarray(M34))
    np.testing.assert_allclose(np.asarray(gk), np.asarray(gj))


@pytest.mark.parametrize("fmt", ["bcoo", "coo", "csr", "csc"])
@pytest.mark.parametrize("args", [dict(N=3), dict(N=3, M=4, k=1), dict(N=4, M=3, k=-2),
                                  dict(N=3, k=7)])
def test_format_eye_empty_match_jax(fmt, args):
    k = ksparse.eye(**args, sparse_format=fmt)
    j = jsparse.eye(**args, sparse_format=fmt)
    assert repr(k) == repr(j)
    np.testing.assert_array_equal(np.asarray(k.todense()), np.asarray(j.todense()))
    for a, b in zip(k.tree_flatten()[0], j.tree_flatten()[0]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    k, j = ksparse.empty((2, 5), sparse_format=fmt), jsparse.empty((2, 5), sparse_format=fmt)
    with pytest.raises(KeyError):  # JAX's constructors know no "bcsr" format
        ksparse.eye(3, sparse_format="bcsr")
    assert repr(k) == repr(j)
    np.testing.assert_array_equal(np.asarray(k.todense()), np.asarray(j.todense()))


def test_spdot_jvp_and_vmap_match_jax():
    def run(sp, np_, top):
        m = sp.BCOO.fromdense(np_.asarray(M34))

        def f(d):
            a = sp.BCOO((d, m.indices), shape=m.shape)
            return (a @ a.T).todense()

        primal, tangent = top.jvp(f, (m.data,), (np_.arange(m.nse, dtype=np.float32),))
        mb = sp.BCOO.fromdense(np_.asarray(M234), n_batch=1)
        batched = top.vmap(lambda a: (a @ a.T).todense())(mb)
        return primal, tangent, batched

    for a, b in zip(run(ksparse, kjnp, jaxkit), run(jsparse, jjnp, jax)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_spsolve_matches_jax():
    a = np.array([[4.0, 1, 0, 0], [1, 3, 0, 1], [0, 2, 5, 0], [1, 0, 0, 2]], np.float32)
    b = np.array([1.0, 2, 3, 4], np.float32)

    def run(sp, np_, top):
        m = sp.CSR.fromdense(np_.asarray(a))
        solve = lambda d, rhs: sp.linalg.spsolve(d, m.indices, m.indptr, rhs)
        x = top.jit(solve)(m.data, np_.asarray(b))
        gd, gb = top.grad(lambda d, rhs: (solve(d, rhs) * np_.arange(4.0)).sum(), (0, 1))(
            m.data, np_.asarray(b))
        return x, gd, gb

    for k, j in zip(run(ksparse, kjnp, jaxkit), run(jsparse, jjnp, jax)):
        np.testing.assert_allclose(np.asarray(k), np.asarray(j), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(run(ksparse, kjnp, jaxkit)[0]),
                               np.linalg.solve(a, b), rtol=1e-5)


# ---- BCSR ----------------------------------------------------------------------------------

BCSR_CASES = [
    ("todense", M34, 0, 0, lambda sp, np_, m: m.todense()),
    ("todense_batch", M234, 1, 0, lambda sp, np_, m: m.todense()),
    ("todense_dense_dim", M234, 0, 1, lambda sp, np_, m: m.todense()),
    ("matvec", M34, 0, 0, lambda sp, np_, m: m @ np_.asarray(V4)),
    ("matmat", M34, 0, 0, lambda sp, np_, m: m @ np_.asarray(A42)),
    ("batched_dot", M234, 1, 0, lambda sp, np_, m: sp.bcsr_dot_general(
        m, np_.asarray(B24), dimension_numbers=_dn((2,), (1,), (0,), (0,)))),
    ("sin", M34, 0, 0, lambda sp, np_, m: sp.sparsify(np_.sin)(m).todense()),
    ("to_bcoo", M234, 1, 0, lambda sp, np_, m: m.to_bcoo().todense()),
    ("from_bcoo", M34, 0, 0, lambda sp, np_, m: sp.BCSR.from_bcoo(m.to_bcoo().T).todense()),
    ("extract", M34, 0, 0, lambda sp, np_, m: sp.bcsr_extract(m.indices, m.indptr,
                                                              np_.asarray(M34 * 3 + 1))),
]


_BCSR_ORACLE: dict = {}


@pytest.mark.parametrize("transform", [None, "jit"])
@pytest.mark.parametrize("case", BCSR_CASES, ids=[c[0] for c in BCSR_CASES])
def test_bcsr_matches_jax(case, transform):
    name, dense, n_batch, n_dense, f = case
    mk = ksparse.BCSR.fromdense(kjnp.asarray(dense), n_batch=n_batch, n_dense=n_dense)
    mj = jsparse.BCSR.fromdense(jjnp.asarray(dense), n_batch=n_batch, n_dense=n_dense)
    assert repr(mk) == repr(mj)
    for a, b in zip(mk.tree_flatten()[0], mj.tree_flatten()[0]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # Eager and jit against JAX's eager values (computed once per case), jit also against
    # jaxkit's eager run; not against JAX's compiled program, which repeats the comparison.
    if name not in _BCSR_ORACLE:
        _BCSR_ORACLE[name] = np.asarray(f(jsparse, jjnp, mj))
    ok = np.asarray((jaxkit.jit(lambda m: f(ksparse, kjnp, m)) if transform else
                     (lambda m: f(ksparse, kjnp, m)))(mk))
    np.testing.assert_allclose(ok, _BCSR_ORACLE[name], rtol=1e-5, atol=1e-6)
    if transform:
        np.testing.assert_allclose(ok, np.asarray(f(ksparse, kjnp, mk)), rtol=1e-5, atol=1e-6)


def test_bcsr_grad_and_vmap_match_jax():
    def run(sp, np_, top):
        m = sp.BCSR.fromdense(np_.asarray(M234), n_batch=1)
        g = sp.grad(lambda m, v: np_.sin(top.vmap(lambda a, x: a @ x)(m, v)).sum())(
            m, np_.asarray(B24[:, :, 0]))
        gx = top.grad(lambda x: (sp.BCSR.fromdense(x, nse=5) @ np_.arange(4.0)).sum())(
            np_.asarray(M34))
        return g.data, gx

    for a, b in zip(run(ksparse, kjnp, jaxkit), run(jsparse, jjnp, jax)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_dot_general_sampled_matches_jax():
    a = rng.standard_normal((2, 3, 5)).astype(np.float32)
    b = rng.standard_normal((2, 5, 4)).astype(np.float32)
    dims = _dn((2,), (1,), (0,), (0,))

    def run(sp, np_, top):
        m = sp.BCOO.fromdense(np_.asarray(M234), n_batch=1)
        f = lambda x, y: sp.bcoo_dot_general_sampled(x, y, m.indices, dimension_numbers=dims)
        out = top.jit(f)(np_.asarray(a), np_.asarray(b))
        ga, gb = top.grad(lambda x, y: np_.sin(f(x, y)).sum(), (0, 1))(np_.asarray(a),
                                                                       np_.asarray(b))
        return out, ga, gb

    for k, j in zip(run(ksparse, kjnp, jaxkit), run(jsparse, jjnp, jax)):
        np.testing.assert_allclose(np.asarray(k), np.asarray(j), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", [(1, 0), (0, 1), (1, 1), (2, 0)])
def test_update_layout_matches_jax(layout):
    nb, nd = layout
    outs = []
    for sp, np_ in ((ksparse, kjnp), (jsparse, jjnp)):
        m = sp.BCOO.fromdense(np_.asarray(M234))
        t = m.update_layout(n_batch=nb, n_dense=nd, on_inefficient=None)
        outs.append((t, t.update_layout(n_batch=0, n_dense=0)))
    for k, j in zip(*outs):
        assert repr(k) == repr(j)
        np.testing.assert_array_equal(np.asarray(k.data), np.asarray(j.data))
        np.testing.assert_array_equal(np.asarray(k.indices), np.asarray(j.indices))
    with pytest.raises(ksparse.SparseEfficiencyError, match="increasing n_batch"):
        ksparse.BCOO.fromdense(kjnp.asarray(M234)).update_layout(n_batch=1)


def test_vmap_of_coo_csr_and_spsolve_against_a_loop():
    """JAX has no batching rules for these; jaxkit's vmap them and must equal a loop."""
    xs = np.stack([M34, 2 * M34 + (M34 != 0)])
    for fmt in ("COO", "CSR"):
        cls = getattr(ksparse, fmt)
        f = lambda x: (cls.fromdense(x, nse=6) @ kjnp.asarray(V4),
                       cls.fromdense(x, nse=6).todense())
        out = jaxkit.vmap(f)(kjnp.asarray(xs))
        for i in range(2):
            for a, b in zip(out, f(kjnp.asarray(xs[i]))):
                np.testing.assert_allclose(np.asarray(a[i]), np.asarray(b), rtol=1e-6)
    a = np.array([[4.0, 1, 0], [1, 3, 0], [0, 2, 5]], np.float32)
    m = ksparse.CSR.fromdense(kjnp.asarray(a))
    bs = rng.standard_normal((3, 3)).astype(np.float32)
    out = jaxkit.vmap(lambda b: ksparse.linalg.spsolve(m.data, m.indices, m.indptr, b))(
        kjnp.asarray(bs))
    np.testing.assert_allclose(np.asarray(out), np.linalg.solve(a, bs.T).T, rtol=1e-5)


# ---- vmap over sparse arrays: mapped along a batch dimension, or refused (never buffers mapped
# along the wrong axis) ------------------------------------------------------------------------
_VX = (np.arange(24, dtype=np.float32).reshape(2, 3, 4)
       * (np.arange(24).reshape(2, 3, 4) % 3 == 0))
VMAP_AXES = [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1)]  # (n_batch, in_axes)


@pytest.mark.parametrize("n_batch,axis", VMAP_AXES, ids=[f"nb{n}-in{a}" for n, a in VMAP_AXES])
def test_vmap_in_axes_of_bcoo_match_jax(n_batch, axis):
    def run(lib, sp, call=lambda f, m: f(m)):
        m = sp.BCOO.fromdense(_VX, n_batch=n_batch)
        return call(lib.vmap(lambda a: a.todense().sum(0), in_axes=axis), m)
    # Which in_axes JAX accepts: its vmap traced (jax.eval_shape, never compiled). The values:
    # each mapped slice's column sums by NumPy, in a loop.
    try:
        want = run(jax, jsparse, jax.eval_shape)
    except ValueError as e:
        with pytest.raises(ValueError, match="Cannot map in_axis"):
            run(jaxkit, ksparse)
        assert "must correspond to a batch dimension" in str(e)
        return
    got = run(jaxkit, ksparse)
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    loop = [np.take(_VX, i, axis=axis).sum(0) for i in range(_VX.shape[axis])]
    np.testing.assert_array_equal(np.asarray(got), np.stack(loop))


def test_vmap_of_bcoo_off_its_leading_batch_axis_is_refused():
    # JAX maps n_batch=2 arrays along batch axis 1 too; jaxkit refuses it rather than map
    # the buffers along the wrong axis.
    m = ksparse.BCOO.fromdense(_VX, n_batch=2)
    with pytest.raises(NotImplementedError, match="leading batch dimension only"):
        jaxkit.vmap(lambda a: a.todense(), in_axes=1)(m)
    with pytest.raises(NotImplementedError, match="out_axes=0"):
        jaxkit.vmap(lambda a: ksparse.BCOO.fromdense(a, nse=6), out_axes=1)(_VX)


def test_vmap_out_axes_stacks_bcoo_results_as_jax():
    got = jaxkit.vmap(lambda a: ksparse.BCOO.fromdense(a, nse=6))(_VX)
    want = jax.vmap(lambda a: jsparse.BCOO.fromdense(a, nse=6))(_VX)
    assert repr(got) == repr(want)
    np.testing.assert_array_equal(np.asarray(got.todense()), np.asarray(want.todense()))
