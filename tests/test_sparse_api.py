"""The rest of ``jax.experimental.sparse``'s public names against the JAX oracle: the
format-generic ``todense`` primitive, ``bcoo_gather``, ``bcoo_conv_general_dilated``, BCSR's
``broadcast_in_dim``/``concatenate``, the raw COO products, the layout tuples and the list
helpers the modules re-export. One record per operation; each runs eagerly and under ``jit``."""
from __future__ import annotations

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit import lax as klax
from jaxkit.experimental import sparse as ksparse
from jaxkit.experimental.sparse import ad as kad
from jaxkit.experimental.sparse import bcoo as kbcoo
from jaxkit.experimental.sparse import bcsr as kbcsr

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax import lax as jlax  # noqa: E402
from jax._src import util as jutil  # noqa: E402
from jax._src.lax import lax as jlax_src  # noqa: E402
from jax.experimental import sparse as jsparse  # noqa: E402
from jax.experimental.sparse import bcoo as jbcoo  # noqa: E402
from jax.experimental.sparse import bcsr as jbcsr  # noqa: E402
from jax.experimental.sparse.linalg import lobpcg_standard as jax_lobpcg  # noqa: E402
from jax.experimental.sparse.util import flatten_axes as jax_flatten_axes  # noqa: E402

M = np.array([[0, 1, 0, 2], [3, 0, 0, 0], [0, 0, 4, 5]], np.float32)
M2 = np.stack([M, -2 * M[::-1]])
X = np.array([[[0, 1, 0, 2, 0, 3]]], np.float32)
K = np.array([[[1, 0, 2]]], np.float32)
W = np.arange(12, dtype=np.float32).reshape(3, 4)

_SIDES = {"k": (ksparse, kjnp, klax, jaxkit), "j": (jsparse, jjnp, jlax, jax)}


def _gdn(lax, offset, collapsed, start):
    return lax.GatherDimensionNumbers(offset_dims=offset, collapsed_slice_dims=collapsed,
                                      start_index_map=start)


def _bcoo(sp, n, x, **kw):
    return sp.BCOO.fromdense(n.asarray(x), **kw)


def _bcsr(sp, n, x, **kw):
    return sp.BCSR.fromdense(n.asarray(x), **kw)


# (name, make(sparse module, jnp) -> arguments, fn(sparse module, jnp, lax, *arguments)); the
# arguments are built outside jit (fromdense needs a concrete nse), the fn runs eager and jitted.
RECORDS = [
    ("gather_rows", lambda sp, n: (_bcoo(sp, n, M), n.array([[2], [0]])),
     lambda sp, n, lax, m, i: sp.bcoo_gather(m, i, _gdn(lax, (1,), (0,), (0,)), (1, 4))),
    ("gather_points", lambda sp, n: (_bcoo(sp, n, M), n.array([[2, 3], [0, 1], [1, 1]])),
     lambda sp, n, lax, m, i: sp.bcoo_gather(m, i, _gdn(lax, (), (0, 1), (0, 1)), (1, 1))),
    ("gather_cols_batched", lambda sp, n: (_bcoo(sp, n, M, n_batch=1), n.array([[1], [3]])),
     lambda sp, n, lax, m, i: sp.bcoo_gather(m, i, _gdn(lax, (0,), (1,), (1,)), (3, 1))),
    ("gather_window", lambda sp, n: (_bcoo(sp, n, M2, n_batch=1), n.array([[1, 0]])),
     lambda sp, n, lax, m, i: sp.bcoo_gather(m, i, _gdn(lax, (1, 2), (0,), (0, 2)), (1, 3, 2))),
    ("conv_sparse_sparse_same", lambda sp, n: (_bcoo(sp, n, X), _bcoo(sp, n, K)),
     lambda sp, n, lax, x, k: sp.bcoo_conv_general_dilated(x, k, window_strides=(1,),
                                                           padding="SAME")),
    ("conv_dense_sparse_valid", lambda sp, n: (n.asarray(X), _bcoo(sp, n, K)),
     lambda sp, n, lax, x, k: sp.bcoo_conv_general_dilated(x, k, window_strides=(1,),
                                                           padding="VALID")),
    ("conv_sparse_dense_pairs", lambda sp, n: (_bcoo(sp, n, X), n.asarray(K)),
     lambda sp, n, lax, x, k: sp.bcoo_conv_general_dilated(x, k, window_strides=(1,),
                                                           padding=[(1, 2)])),
    ("bcsr_concatenate_rows", lambda sp, n: (_bcsr(sp, n, M), _bcsr(sp, n, 2 * M)),
     lambda sp, n, lax, a, b: sp.bcsr_concatenate([a, b], dimension=0)),
    ("bcsr_concatenate_cols", lambda sp, n: (_bcsr(sp, n, M), _bcsr(sp, n, 2 * M)),
     lambda sp, n, lax, a, b: sp.bcsr_concatenate([a, b], dimension=1)),
    ("bcsr_concatenate_batch", lambda sp, n: (_bcsr(sp, n, M2, n_batch=1),),
     lambda sp, n, lax, a: sp.bcsr_concatenate([a, a], dimension=0)),
    ("bcsr_broadcast_in_dim", lambda sp, n: (_bcsr(sp, n, M),),
     lambda sp, n, lax, a: sp.bcsr_broadcast_in_dim(a, shape=(2, 3, 4),
                                                    broadcast_dimensions=(1, 2))),
    ("todense_bcoo", lambda sp, n: (_bcoo(sp, n, M2, n_batch=1),),
     lambda sp, n, lax, a: sp.todense(a)),
    ("todense_bcsr", lambda sp, n: (_bcsr(sp, n, M),), lambda sp, n, lax, a: sp.todense(a)),
    ("todense_coo", lambda sp, n: (sp.COO.fromdense(n.asarray(M)),),
     lambda sp, n, lax, a: sp.todense(a)),
    ("todense_csr", lambda sp, n: (sp.CSR.fromdense(n.asarray(M)),),
     lambda sp, n, lax, a: sp.todense(a)),
    ("todense_dense", lambda sp, n: (n.asarray(M),), lambda sp, n, lax, a: sp.todense(a)),
]


def _check(out_k, out_j):
    """``out_k`` (jaxkit's) against ``out_j``: JAX's, or jaxkit's own eager result."""
    if isinstance(out_j, (jsparse.JAXSparse, ksparse.JAXSparse)):
        assert type(out_k).__name__ == type(out_j).__name__
        assert repr(out_k) == repr(out_j)
        out_k, out_j = out_k.todense(), out_j.todense()
    assert np.asarray(out_k).dtype == np.asarray(out_j).dtype
    np.testing.assert_allclose(np.asarray(out_k), np.asarray(out_j), rtol=1e-6)


# Each record's results computed once, shared by its eager and its jit case. The oracle is JAX's
# result under jax.jit: op by op, JAX 0.10.2 compiles each primitive of these operations
# separately, several times the CPU of one compiled program; the values, dtypes and printing
# (nse is static in every record) are the same.
_ORACLE: dict = {}
_KIT_EAGER: dict = {}


def _run(side, record, transform=None):
    _, make, fn = record
    sp, n, lax, top = _SIDES[side]
    f = lambda *args: fn(sp, n, lax, *args)  # noqa: E731
    return (top.jit(f) if transform == "jit" else f)(*make(sp, n))


def _oracle(record):
    if record[0] not in _ORACLE:
        _ORACLE[record[0]] = _run("j", record, "jit")
    return _ORACLE[record[0]]


def _kit_eager(record):
    if record[0] not in _KIT_EAGER:
        _KIT_EAGER[record[0]] = _run("k", record)
    return _KIT_EAGER[record[0]]


@pytest.mark.parametrize("transform", [None, "jit"])
@pytest.mark.parametrize("record", RECORDS, ids=[r[0] for r in RECORDS])
def test_records_match_jax(record, transform):
    if transform == "jit":
        out = _run("k", record, "jit")
        _check(out, _oracle(record))
        _check(out, _kit_eager(record))  # jit against jaxkit's eager run
    else:
        _check(_kit_eager(record), _oracle(record))


def test_todense_jaxpr_and_transforms_match_jax():
    kd, jd = ksparse.BCOO.fromdense(kjnp.asarray(M2), n_batch=1), jsparse.BCOO.fromdense(
        jjnp.asarray(M2), n_batch=1)
    assert str(jaxkit.make_jaxpr(ksparse.todense)(M)) == str(jax.make_jaxpr(jsparse.todense)(M))
    eqn = jaxkit.make_jaxpr(ksparse.todense)(kd).jaxpr.eqns
    assert [e.primitive.name for e in eqn] == ["todense"]
    _check(jaxkit.vmap(ksparse.todense)(kd), jax.vmap(jsparse.todense)(jd))
    # jvp along the stored data
    kt = jaxkit.jvp(lambda d: ksparse.todense(ksparse.BCOO((d, kd.indices), shape=kd.shape)),
                    (kd.data,), (kjnp.ones_like(kd.data),))
    jt = jax.jvp(lambda d: jsparse.todense(jsparse.BCOO((d, jd.indices), shape=jd.shape)),
                 (jd.data,), (jjnp.ones_like(jd.data),))
    for a, b in zip(kt, jt):
        _check(a, b)


@pytest.mark.parametrize("fmt", ["BCOO", "BCSR", "COO", "CSR", "CSC"])
def test_todense_grad_matches_jax(fmt):
    def grad(sp, n, top):
        mat = getattr(sp, fmt).fromdense(n.asarray(M))
        bufs, tree = top.tree_util.tree_flatten(mat)

        def loss(data):
            dense = sp.todense(top.tree_util.tree_unflatten(tree, [data, *bufs[1:]]))
            return (dense ** 2 * n.asarray(W)).sum()

        # JAX's gradient under jax.jit: one compiled program instead of one per primitive.
        return (top.grad(loss) if top is jaxkit else jax.jit(jax.grad(loss)))(bufs[0])

    if fmt in ("CSR", "CSC"):
        # JAX's todense has no transpose rule for CSR/CSC (NotImplementedError); jaxkit's reads
        # the cotangent at the stored positions: check that against the dense derivative.
        with pytest.raises(NotImplementedError):
            grad(jsparse, jjnp, jax)
        got = grad(ksparse, kjnp, jaxkit)
        rows, cols = np.nonzero(M) if fmt == "CSR" else np.nonzero(M.T)[::-1]
        order = np.lexsort((rows, cols)) if fmt == "CSC" else np.arange(len(rows))
        rows, cols = rows[order], cols[order]
        np.testing.assert_allclose(np.asarray(got), 2 * M[rows, cols] * W[rows, cols])
        return
    np.testing.assert_allclose(np.asarray(grad(ksparse, kjnp, jaxkit)),
                               np.asarray(grad(jsparse, jjnp, jax)), rtol=1e-6)


def test_bcoo_gather_modes_and_grad_match_jax():
    dn = _gdn(klax, (1,), (0,), (0,))
    with pytest.raises(NotImplementedError, match="bcoo_gather: mode="):
        ksparse.bcoo_gather(ksparse.BCOO.fromdense(M), kjnp.array([[0]]), dn, (1, 4),
                            mode="clip")

    def g(sp, n, lax, top):
        idx = sp.BCOO.fromdense(n.asarray(M)).indices

        def f(d):
            mat = sp.BCOO((d, idx), shape=M.shape)
            out = sp.bcoo_gather(mat, n.array([[2], [0]]), _gdn(lax, (1,), (0,), (0,)), (1, 4))
            return (out.todense() * n.arange(8.0).reshape(2, 4)).sum()

        # JAX's gradient under jax.jit: one compiled program instead of one per primitive.
        grad = top.grad(f) if top is jaxkit else jax.jit(jax.grad(f))
        return grad(n.asarray(M[M != 0]))

    np.testing.assert_allclose(np.asarray(g(ksparse, kjnp, klax, jaxkit)),
                               np.asarray(g(jsparse, jjnp, jlax, jax)))


def test_conv_unsupported_options_raise_as_jax():
    for kw in [dict(window_strides=(2,), padding="SAME"),
               dict(window_strides=(1,), padding="SAME", rhs_dilation=(2,))]:
        for sp, n in [(ksparse, kjnp), (jsparse, jjnp)]:
            with pytest.raises(NotImplementedError, match="bcoo convolution"):
                sp.bcoo_conv_general_dilated(sp.BCOO.fromdense(n.asarray(X)), n.asarray(K), **kw)


@pytest.mark.parametrize("prim,rhs,transpose", [
    ("coo_spmv_p", np.arange(4.0, dtype=np.float32), False),
    ("coo_spmv_p", np.arange(3.0, dtype=np.float32), True),
    ("coo_spmm_p", np.arange(8.0, dtype=np.float32).reshape(4, 2), False),
    ("coo_spmm_p", np.arange(6.0, dtype=np.float32).reshape(3, 2), True)])
def test_raw_coo_products_match_numpy(prim, rhs, transpose):
    # JAX lowers these only to cuSPARSE; the reference is the dense product.
    p = getattr(kbcoo, prim)
    row, col = (kjnp.asarray(a, np.int32) for a in np.nonzero(M))
    data = kjnp.asarray(M[np.nonzero(M)])
    want = (M.T if transpose else M) @ rhs
    for f in (p.bind, jaxkit.jit(lambda *a, **k: p.bind(*a, **k), static_argnames=(
            "transpose", "shape"))):
        got = f(data, row, col, kjnp.asarray(rhs), transpose=transpose, shape=M.shape)
        np.testing.assert_allclose(np.asarray(got), want)
    batched = jaxkit.vmap(lambda d: p.bind(d, row, col, kjnp.asarray(rhs), transpose=transpose,
                                           shape=M.shape))(kjnp.stack([data, 2 * data]))
    np.testing.assert_allclose(np.asarray(batched), np.stack([want, 2 * want]), rtol=1e-6)
    with pytest.raises(TypeError, match="must share"):
        p.bind(data, row, col, kjnp.asarray(rhs, np.int32), transpose=transpose, shape=M.shape)


def test_layout_tuples_and_constants_match_jax():
    assert kbcoo.BCOOProperties._fields == jbcoo.BCOOProperties._fields
    assert kbcsr.BCSRProperties._fields == jbcsr.BCSRProperties._fields
    assert kbcoo.CUSPARSE_DATA_DTYPES == jbcoo.CUSPARSE_DATA_DTYPES
    assert kbcoo.CUSPARSE_INDEX_DTYPES == jbcoo.CUSPARSE_INDEX_DTYPES
    assert isinstance(ksparse.BCOO.fromdense(M), kbcoo.JAXSparse)
    assert isinstance(ksparse.BCOO.fromdense(M).data, kbcoo.Array)
    assert issubclass(kbcsr.CuSparseEfficiencyWarning, kbcsr.SparseEfficiencyWarning)


@pytest.mark.parametrize("name,args", [
    ("split_list", ([1, 2, 3, 4, 5], [2, 0, 1])),
    ("split_list", ([], [])),
    ("unzip2", ([(1, "a"), (2, "b")],)),
    ("unzip2", ([],)),
    ("safe_zip", ([1, 2], "ab")),
])
def test_list_helpers_match_jax(name, args):
    assert getattr(kbcoo, name)(*args) == getattr(jutil, name)(*args)


def test_ranges_like_remaining_and_wraps_match_jax():
    assert list(kbcoo.ranges_like([1, 2], [], "abc")) == list(
        jlax_src.ranges_like([1, 2], [], "abc"))
    assert kbcoo.remaining(range(6), [1, 4], (0,)) == jlax_src.remaining(range(6), [1, 4], (0,))

    def target(x: int) -> int:
        """Doc of target."""
        return x

    for wraps in (kad.wraps, jutil.wraps):
        @wraps(target, namestr="sparse_{fun}", docstr="Sparse {fun}: {doc}")
        def f(x):
            return x
        assert (f.__name__, f.__doc__, f.__wrapped__) == (
            "sparse_target", "Sparse target: Doc of target.", target)


def test_flatten_fun_for_sparse_ad_gives_jax_gradients():
    km, jm = ksparse.BCOO.fromdense(kjnp.asarray(M)), jsparse.BCOO.fromdense(jjnp.asarray(M))

    def run(ad, sp, n, top, mat):
        fun = lambda m, w: (sp.todense(m) * w).sum()  # noqa: E731
        f, nums, flat, post = ad.flatten_fun_for_sparse_ad(fun, 0, (mat, n.asarray(W)))
        return post(top.grad(f, argnums=nums)(*flat))

    gk = run(kad, ksparse, kjnp, jaxkit, km)
    gj = run(jsparse.ad, jsparse, jjnp, jax, jm)
    gj = gj[0] if isinstance(gj, tuple) else gj
    _check(gk, gj)
    assert kad.is_sparse(km) and not kad.is_sparse(M)


def test_empty_formats_and_errors_match_jax():
    _check(ksparse.empty((3, 4), sparse_format="bcsr"), jsparse.empty((3, 4), sparse_format="bcsr"))
    for sp in (ksparse, jsparse):
        with pytest.raises(ValueError, match="not recognized"):
            sp.empty((3, 4), sparse_format="dia")
        with pytest.raises(KeyError):
            sp.eye(3, sparse_format="bcsr")


def _symmetric(seed, n, shift=0.0):
    r = np.random.default_rng(seed)
    A = r.standard_normal((n, n)).astype(np.float32)
    return (A + A.T - shift * np.eye(n, dtype=np.float32)), r.standard_normal(
        (n, 3)).astype(np.float32)


@pytest.mark.parametrize("seed,n,shift,as_callable", [
    (0, 30, 0.0, False), (1, 40, 20.0, False), (2, 25, 0.0, True)])
def test_lobpcg_standard_matches_jax_and_numpy(seed, n, shift, as_callable):
    A, X = _symmetric(seed, n, shift)
    ka = (lambda v: kjnp.asarray(A) @ v) if as_callable else kjnp.asarray(A)
    ja = (lambda v: jjnp.asarray(A) @ v) if as_callable else jjnp.asarray(A)
    tk, Uk, ik = ksparse.linalg.lobpcg_standard(ka, kjnp.asarray(X))
    tj, Uj, ij = jax_lobpcg(ja, jjnp.asarray(X))
    top = np.linalg.eigvalsh(A.astype(np.float64))[::-1][:3]
    np.testing.assert_allclose(np.asarray(tk), top, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(tk), np.asarray(tj), rtol=1e-4, atol=1e-4)
    # Eigenvectors agree with JAX's up to sign, and are eigenvectors of A.
    np.testing.assert_allclose(np.abs(np.sum(np.asarray(Uk) * np.asarray(Uj), 0)), 1, atol=1e-3)
    np.testing.assert_allclose(A @ np.asarray(Uk), np.asarray(Uk) * np.asarray(tk), atol=1e-3)
    assert np.asarray(ik).dtype == np.asarray(ij).dtype and 0 < int(ik) <= 100
    assert Uk.shape == Uj.shape and tk.dtype == tj.dtype


def test_lobpcg_standard_under_jit_with_few_iterations():
    A, X = _symmetric(3, 30)
    f = jaxkit.jit(lambda A, X: ksparse.linalg.lobpcg_standard(lambda v: A @ v, X, m=2))
    t, U, i = f(kjnp.asarray(A), kjnp.asarray(X))
    assert int(i) == 2
    # Two steps already lie below the true eigenvalues (Rayleigh quotients never exceed them).
    top = np.linalg.eigvalsh(A.astype(np.float64))[::-1][:3]
    assert np.all(np.asarray(t) <= top + 1e-4)
    np.testing.assert_allclose(np.asarray(U).T @ np.asarray(U), np.eye(3), atol=1e-4)


@pytest.mark.parametrize("shape_a,shape_x,out_dtype,match", [
    ((10, 10), (10, 0), np.float32, "search dim > 0"),
    ((10, 10), (10, 2), np.float32, "search dim \\* 5 < matrix dim"),
    ((30, 30), (30, 2), np.int32, "same dtypes"),
    ((31, 30), (30, 2), np.float32, "must be \\(30, 30\\) matrix")])
def test_lobpcg_standard_errors_match_jax(shape_a, shape_x, out_dtype, match):
    for lob, n in [(ksparse.linalg.lobpcg_standard, kjnp), (jax_lobpcg, jjnp)]:
        A = np.ones(shape_a, np.float32)
        X = np.ones(shape_x, np.float32)
        with pytest.raises(ValueError, match=match):
            lob(lambda v: (n.asarray(A) @ v).astype(out_dtype), n.asarray(X))


def test_sparsify_env_values_roundtrip_as_jax():
    km = ksparse.BCSR.fromdense(kjnp.asarray(M))
    jm = jsparse.BCSR.fromdense(jjnp.asarray(M))
    args_k, args_j = [km, ksparse.BCOO.fromdense(M2, n_batch=1), kjnp.asarray(W)], [
        jm, jsparse.BCOO.fromdense(M2, n_batch=1), jjnp.asarray(W)]
    kenv, jenv = ksparse.transform.SparsifyEnv(), jsparse.transform.SparsifyEnv()
    kv = ksparse.transform.arrays_to_spvalues(kenv, args_k)
    jv = jsparse.transform.arrays_to_spvalues(jenv, args_j)
    assert [tuple(v) for v in kv] == [tuple(v) for v in jv]
    assert [(v.is_bcsr(), v.is_bcoo(), v.is_dense(), v.ndim) for v in kv] == [
        (v.is_bcsr(), v.is_bcoo(), v.is_dense(), v.ndim) for v in jv]
    assert ksparse.transform.spvalues_to_avals(kenv, kv) == [
        jaxkit.core.ShapedArray(a.shape, a.dtype, weak_type=a.weak_type)
        for a in jsparse.transform.spvalues_to_avals(jenv, jv)]
    for a, b in zip(ksparse.transform.spvalues_to_arrays(kenv, kv),
                    jsparse.transform.spvalues_to_arrays(jenv, jv)):
        _check(a, b)
    # A value sharing the indices of another, as elementwise rules make them.
    shared = kenv.sparse(M.shape, data=2 * kenv.data(kv[0]), indices_ref=kv[0].indices_ref,
                         indptr_ref=kv[0].indptr_ref)
    _check(ksparse.transform.spvalues_to_arrays(kenv, shared).todense(), 2 * M)
    with pytest.raises(RuntimeError, match="indices_ref=None"):
        kenv.indices(kv[2])


def test_sparsify_raw_and_sparsify_fun_match_jax():
    def f(x, v):
        return (x * 2) @ v, x.sum(0)

    outs = []
    for sp, n in [(ksparse, kjnp), (jsparse, jjnp)]:
        env = sp.transform.SparsifyEnv()
        vals = sp.transform.arrays_to_spvalues(env, [sp.BCOO.fromdense(n.asarray(M)),
                                                     n.asarray(W[0])])
        out, tree = sp.transform.sparsify_raw(f)(env, *vals)
        outs.append((sp.transform.spvalues_to_arrays(env, out), tree.num_leaves,
                     [v.is_sparse() for v in out]))
    for a, b in zip(outs[0][0], outs[1][0]):
        _check(a, b)
    assert outs[0][1:] == outs[1][1:]
    k = ksparse.transform.sparsify_fun(lambda x, v: [x @ v], [ksparse.BCOO.fromdense(M), W[0]])
    np.testing.assert_allclose(np.asarray(k[0]), M @ W[0], rtol=1e-6)


_TRACER_CASES = [
    ("matvec", lambda n: lambda x, v: (n.sin(x) * 2) @ v),
    ("transpose_sum", lambda n: lambda x, v: (x.T, x.sum(), x.sum(1) * v[:3])),
    ("abs_and_scale", lambda n: lambda x, v: (n.abs(x) @ v, x * 3)),
    ("inner_jit", lambda n: lambda x, v: n.matmul(x, v) + 1),
]


_TRACER_ORACLE: dict = {}


@pytest.mark.parametrize("transform", [None, "jit"])
@pytest.mark.parametrize("case", _TRACER_CASES, ids=[c[0] for c in _TRACER_CASES])
def test_sparsify_use_tracer_matches_jax(case, transform):
    # Eager and jit against JAX's eager result (computed once per case), jit also against
    # jaxkit's eager run; not against JAX's compiled program, which repeats the comparison.
    def run(sp, n, top=None):
        f = sp.sparsify(case[1](n), use_tracer=True)
        out = (top.jit(f) if top else f)(sp.BCOO.fromdense(n.asarray(M)), n.asarray(W[0]))
        return out if isinstance(out, tuple) else (out,)

    if case[0] not in _TRACER_ORACLE:
        _TRACER_ORACLE[case[0]] = run(jsparse, jjnp)
    got = run(ksparse, kjnp, jaxkit if transform == "jit" else None)
    for a, b in zip(got, _TRACER_ORACLE[case[0]], strict=True):
        _check(a, b)
    if transform == "jit":
        for a, b in zip(got, run(ksparse, kjnp), strict=True):
            _check(a, b)


def test_sparse_tracer_under_grad_and_its_repr():
    idx = ksparse.BCOO.fromdense(M).indices

    def loss(sp, n, top, d):
        mat = sp.BCOO((d, idx if sp is ksparse else jjnp.asarray(idx)), shape=M.shape)
        return sp.sparsify(lambda x: (x * x).sum(), use_tracer=True)(mat)

    gk = jaxkit.grad(lambda d: loss(ksparse, kjnp, jaxkit, d))(kjnp.asarray(M[M != 0]))
    # JAX's gradient under jax.jit: one compiled program instead of one per primitive.
    gj = jax.jit(jax.grad(lambda d: loss(jsparse, jjnp, jax, d)))(jjnp.asarray(M[M != 0]))
    _check(gk, gj)
    seen = []
    ksparse.sparsify(lambda x: seen.append(x) or x, use_tracer=True)(ksparse.BCOO.fromdense(M))
    assert isinstance(seen[0], ksparse.SparseTracer) and seen[0].shape == M.shape
    with pytest.raises(NotImplementedError, match="sparse rule for"):
        ksparse.sparsify(lambda x: kjnp.exp(x), use_tracer=True)(ksparse.BCOO.fromdense(M))


@pytest.mark.parametrize("tree,axes", [
    (((1, 2), {"a": 3}), (0, {"a": None})), (((1, 2), {"a": 3}), 1),
    (((1, 2), {"a": 3}), ((0, None), {"a": 1}))])
def test_util_flatten_axes_matches_jax(tree, axes):
    got = ksparse.util.flatten_axes("in_axes", jaxkit.tree_util.tree_structure(tree), axes)
    assert got == jax_flatten_axes("in_axes", jax.tree_util.tree_structure(tree), axes)


def test_util_flatten_axes_error_and_safe_helpers_match_jax():
    with pytest.raises(ValueError, match="in_axes specification must be a tree prefix"):
        ksparse.util.flatten_axes("in_axes", jaxkit.tree_util.tree_structure((1, 2)), (0, 0, 0))
    for mod in (ksparse.util, kad):
        with pytest.raises(ValueError, match=r"safe_zip\(\) argument 1 has length 1"):
            mod.safe_zip([1, 2], [3])
    assert ksparse.transform.safe_map(lambda a, b: a + b, [1, 2], [3, 4]) == [4, 6]
    assert kad.api_boundary(len) is len
