"""What jaxkit emits for NVIDIA GPUs, checked without a GPU against JAX's own lowering for
``cuda`` (``.trace(...).lower(lowering_platforms=("cuda",))``): the kernel calls of the linear
algebra primitives (cuSOLVER, cuSPARSE, jaxlib's CUDA and hybrid kernels: names, attributes,
operand and result types, layouts, aliasing) and the operations around them (transposes,
slices, conjugations), XLA's ``triangular_solve``, and sort comparators in the exact shape
XLA's GPU compiler turns into a CUB radix sort."""
import re

import jax
import jax._src.lax.linalg as jax_linalg
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as knp
import jaxkit.scipy.linalg as ksl
from jaxkit.interpreters import mlir
from jaxkit.lax.linalg.eig import _unpack_conjugate_pairs
from jaxkit.lax.linalg.lu import _thomas
from jaxkit.runtime import gpu as _gpu

jl, kl = jax.lax.linalg, jaxkit.lax.linalg


def kit_text(f, *args, platform="cuda"):
    closed = jaxkit.make_jaxpr(f)(*args)
    return str(mlir.lower_jaxpr("f", closed.jaxpr, consts=closed.consts, platform=platform))


def jax_text(f, *args):
    return jax.jit(f).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def _normalized(line):
    """An operation without its SSA names and JAX's Shardy sharding rule."""
    line = re.sub(r"%[\w#:]+", "%v", line)
    return re.sub(r", sdy\.sharding_rule = #sdy\.op_sharding_rule<.*?custom>", "", line)


def kernel_calls(text):
    """The GPU kernel custom calls, with their attributes and operand/result types."""
    return [_normalized(m.group(0)) for m in
            map(re.compile(r"custom_call @cu\w+.*").search, text.splitlines()) if m]


def around_kernels(text):
    """The layout and conjugation operations of the lowering (JAX transposes cuSOLVER's V
    into V^H, slices economic factors, ...), as a set: JAX computes some twice."""
    op = re.compile(r"stablehlo\.(transpose|slice|complex|real|imag|negate)\b.*")
    return {_normalized(m.group(0)) for m in map(op.search, text.splitlines()) if m}


def _jax_and_kit(name, **kw):
    """(JAX function, jaxkit function) calling lax.linalg.<name>(*args, **kw) of each (an
    enum option given as JAX's member stands for jaxkit's of the same name)."""
    kit_kw = {k: getattr(getattr(kl, type(v).__name__), v.name) if hasattr(v, "name") else v
              for k, v in kw.items()}
    return (lambda *a: getattr(jl, name)(*a, **kw), lambda *a: getattr(kl, name)(*a, **kit_kw))


A = np.eye(4, dtype=np.float32) * 3 + 1
WIDE = np.ones((3, 5), np.float32)
V4 = np.ones(4, np.float32)
QR, POLAR = jl.SvdAlgorithm.QR, jl.SvdAlgorithm.POLAR
KQR, KPOLAR = kl.SvdAlgorithm.QR, kl.SvdAlgorithm.POLAR


def _svd(**kw):
    algorithm = kw.pop("algorithm", None)
    return (lambda a: jl.svd(a, algorithm=algorithm, **kw),
            lambda a: kl.svd(a, algorithm={QR: KQR, POLAR: KPOLAR}.get(algorithm), **kw))


def _eig(impl=None, **kw):
    return (lambda a: jl.eig(a, implementation=impl and getattr(jl.EigImplementation, impl),
                             **kw),
            lambda a: kl.eig(a, implementation=impl and getattr(kl.EigImplementation, impl),
                             **kw))


RECORDS = {  # name: (JAX function, jaxkit function, arguments)
    "cholesky": (jnp.linalg.cholesky, knp.linalg.cholesky, (A,)),
    "cholesky_c64_batched": (jnp.linalg.cholesky, knp.linalg.cholesky,
                             (np.stack([A, A]).astype(np.complex64),)),
    "lu_factor": (jsl.lu_factor, ksl.lu_factor, (A,)),
    "lu_permutation": (jsl.lu, ksl.lu, (A,)),  # getrf, then cu_lu_pivots_to_permutation
    "qr": (jnp.linalg.qr, knp.linalg.qr, (A,)),
    "qr_f64_wide": (jnp.linalg.qr, knp.linalg.qr, (np.ones((3, 5)),)),
    "eigh": (jnp.linalg.eigh, knp.linalg.eigh, (A,)),
    "eigh_upper": (lambda a: jnp.linalg.eigh(a, UPLO="U"), lambda a: knp.linalg.eigh(a, UPLO="U"),
                   (A,)),
    "eigh_jacobi": (*_jax_and_kit("eigh", implementation=jl.EighImplementation.JACOBI), (A,)),
    "solve": (jnp.linalg.solve, knp.linalg.solve, (A, A)),
    # svd: Jacobi (gesvdj) up to 1024 x 1024, transposing V and conjugating it for V^H; the
    # batched Jacobi kernel (up to 32 x 32) has no economic mode, so U and V^T are sliced
    "svd_values": (lambda a: jnp.linalg.svd(a, compute_uv=False),
                   lambda a: knp.linalg.svd(a, compute_uv=False), (A,)),
    "svd_full_c64_wide": (jnp.linalg.svd, knp.linalg.svd, (WIDE.astype(np.complex64),)),
    "svd_economy_f64_batched": (*_svd(full_matrices=False), (np.ones((2, 5, 3)),)),
    "svd_economy_over_32": (*_svd(full_matrices=False), (np.ones((40, 33), np.float32),)),
    "svd_over_1024_is_qr": (*_svd(compute_uv=False), (np.ones((1030, 2), np.float32),)),
    # QR (gesvd): a wide matrix passed row-major, read as its tall transpose
    "svd_qr_wide": (*_svd(algorithm=QR), (WIDE,)),
    "svd_qr_values_c128_batched": (*_svd(algorithm=QR, compute_uv=False),
                                   (np.ones((2, 3, 5), np.complex128),)),
    "svd_qr_tall_economy": (*_svd(algorithm=QR, full_matrices=False), (WIDE.T,)),
    "svd_polar_c64": (*_svd(algorithm=POLAR, full_matrices=False),
                      (WIDE.T.astype(np.complex64),)),
    # eig without cuSOLVER 11.7.1 (as here: no kernels wheel), or with left eigenvectors:
    # the hybrid kernel, LAPACK or MAGMA on the host
    "eig_hybrid_real": (*_eig(), (A,)),
    "eig_hybrid_c128_values": (*_eig(compute_left_eigenvectors=False,
                                     compute_right_eigenvectors=False),
                               (A.astype(np.complex128),)),
    "eig_hybrid_magma_f64_batched": (*_eig("MAGMA"), (np.stack([A, A]).astype(np.float64),)),
    "eig_hybrid_lapack_right": (*_eig("LAPACK", compute_left_eigenvectors=False), (A,)),
    "tridiagonal_solve_gtsv2": (*_jax_and_kit("tridiagonal_solve"),
                                (V4, V4, V4, np.ones((4, 2), np.float32))),
    "tridiagonal_solve_c64_batched": (*_jax_and_kit("tridiagonal_solve"),
                                      (*[np.ones((2, 4), np.complex64)] * 3,
                                       np.ones((2, 4, 3), np.complex64))),
    "tridiagonal_solve_perturbed": (*_jax_and_kit("tridiagonal_solve", perturb_singular=True),
                                    (V4, V4, V4, np.ones((4, 2), np.float32))),
    "ormqr_right_transposed": (*_jax_and_kit("ormqr", left=False, transpose=True),
                               (A, V4, np.ones((3, 4), np.float32))),
    "ormqr_left_c128": (*_jax_and_kit("ormqr"), (A.astype(np.complex128),
                                                 V4.astype(np.complex128),
                                                 np.ones((4, 3), np.complex128))),
    "geqp3_hybrid": (lambda a: jsl.qr(a, pivoting=True), lambda a: ksl.qr(a, pivoting=True),
                     (WIDE.T,)),
    "geqp3_hybrid_c64_batched": (lambda a: jsl.qr(a, pivoting=True, mode="economic"),
                                 lambda a: ksl.qr(a, pivoting=True, mode="economic"),
                                 (np.ones((2, 3, 5), np.complex64),)),
    "tridiagonal_sytrd_c64_upper": (*_jax_and_kit("tridiagonal", lower=False),
                                    (A.astype(np.complex64),)),
    "tridiagonal_sytrd_f64_batched": (*_jax_and_kit("tridiagonal"),
                                      (np.stack([A, A]).astype(np.float64),)),
    "cholesky_update": (*_jax_and_kit("cholesky_update"), (np.triu(A), V4)),
    "lu_pivots_to_permutation": (*_jax_and_kit("lu_pivots_to_permutation", permutation_size=5),
                                 (np.zeros((2, 4), np.int32),)),
    "symmetric_product_syrk": (*_jax_and_kit("symmetric_product", alpha=2.0, beta=0.5),
                               (WIDE, np.ones((3, 3), np.float32))),
}
# jnp.linalg.solve is a custom_linear_solve in JAX, whose transposes jaxkit's solve has not.
KERNEL_CALLS_ONLY = {"solve"}


def _with_cusolver_version(monkeypatch, version):
    """JAX and jaxkit both believing the installed cuSOLVER is ``version`` (None: none)."""
    fake = None if version is None else type("V", (), {
        "cusolver_get_version": staticmethod(lambda: version)})
    monkeypatch.setattr(jax_linalg, "cuda_versions", fake)
    monkeypatch.setattr(_gpu, "cusolver_version", lambda: version)


def _check_lowering(jf, kf, args, kernel_calls_only=False):
    with jax.enable_x64(True), jaxkit.enable_x64(True):
        want, got = jax_text(jf, *args), kit_text(kf, *args)
    assert kernel_calls(want) and kernel_calls(got) == kernel_calls(want)
    if not kernel_calls_only:
        assert around_kernels(got) == around_kernels(want)


@pytest.mark.parametrize("name", RECORDS)
def test_gpu_kernel_calls_are_jaxs(name, monkeypatch):
    _with_cusolver_version(monkeypatch, None)
    jf, kf, args = RECORDS[name]
    _check_lowering(jf, kf, args, name in KERNEL_CALLS_ONLY)


@pytest.mark.parametrize("jf,kf,a", [
    # from cuSOLVER 11.7.1 on, right eigenvectors come from cuSOLVER's geev (a real matrix's
    # packed ones unpacked into complex vectors); left ones still need the hybrid kernel
    (jnp.linalg.eig, knp.linalg.eig, np.arange(16.0, dtype=np.float32).reshape(4, 4)),
    (jnp.linalg.eigvals, knp.linalg.eigvals, np.ones((2, 3, 3), np.complex64)),
    (*_eig(), np.ones((3, 3), np.float32)),
    (*_eig("CUSOLVER", compute_left_eigenvectors=False), np.ones((3, 3), np.float64)),
])
def test_eig_uses_cusolver_geev_from_11_7_1(jf, kf, a, monkeypatch):
    _with_cusolver_version(monkeypatch, 11701)
    _check_lowering(jf, kf, (a,))


@pytest.mark.parametrize("jf,kf,version,error,match", [
    (*_svd(algorithm=jl.SvdAlgorithm.DIVIDE_AND_CONQUER)[:1],
     lambda a: kl.svd(a, algorithm=kl.SvdAlgorithm.DIVIDE_AND_CONQUER), None,
     NotImplementedError, "only supported on AMD"),
    (*_eig("CUSOLVER", compute_left_eigenvectors=False), None, RuntimeError,
     "requires cusolver 11.7.1"),
    (*_eig("CUSOLVER"), 11701, NotImplementedError, "Left eigenvectors are not supported"),
])
def test_gpu_lowering_errors_are_jaxs(jf, kf, version, error, match, monkeypatch):
    _with_cusolver_version(monkeypatch, version)
    with pytest.raises(error, match=match):
        jax_text(jf, A)
    with pytest.raises(error, match=match):
        kit_text(kf, A)


@pytest.mark.parametrize("name", ["schur", "hessenberg"])
def test_primitives_without_a_gpu_kernel_say_how_to_use_the_cpu(name):
    # JAX has no GPU rule for these either: the same error class and first words
    with pytest.raises(NotImplementedError) as theirs:
        jax_text(getattr(jl, name), A)
    with pytest.raises(NotImplementedError) as ours:
        kit_text(getattr(kl, name), A)
    assert str(ours.value).startswith(str(theirs.value))
    assert "jax.device_put(x, jax.devices('cpu')[0])" in str(ours.value)
    assert "lapack_" in kit_text(getattr(kl, name), A, platform="cpu")


@pytest.mark.parametrize("name,kw,match", [
    ("svd", dict(algorithm="SvdAlgorithm.JACOBI"), "Jacobi and Polar algorithms are not "
                                                   "implemented on CPU"),
    ("eigh", dict(implementation="EighImplementation.JACOBI"), "Jacobi implementation is "
                                                               "not supported on CPU"),
])
def test_gpu_only_algorithms_are_refused_on_the_cpu_as_in_jax(name, kw, match):
    def option(lax_linalg):
        return {k: getattr(getattr(lax_linalg, v.split(".")[0]), v.split(".")[1])
                for k, v in kw.items()}
    with pytest.raises(NotImplementedError, match=match):
        jax.jit(lambda a: getattr(jl, name)(a, **option(jl))).lower(A)
    with pytest.raises(NotImplementedError, match=match):
        kit_text(lambda a: getattr(kl, name)(a, **option(kl)), A, platform="cpu")


def test_the_gpu_rules_jaxkit_operations_compute_what_the_kernels_would():
    # The two GPU fallbacks written in jaxkit operations, run on the CPU (one compile each):
    # tridiagonal systems of one or two equations (gtsv2 needs three) ...
    rng = np.random.default_rng(0)
    for m in (1, 2):
        dl, d, du = rng.standard_normal((3, 2, m))
        d += 4
        b = rng.standard_normal((2, m, 3))
        full = [np.diag(d[i]) + np.diag(dl[i, 1:], -1) + np.diag(du[i, :-1], 1) for i in (0, 1)]
        got = jaxkit.jit(_thomas)(dl, d, du, b)
        np.testing.assert_allclose(np.asarray(got), np.linalg.solve(np.stack(full), b),
                                   rtol=1e-5)
    # ... and cuSOLVER geev's packed real eigenvectors (LAPACK's format) made complex
    a = rng.standard_normal((2, 5, 5))
    w, v = np.linalg.eig(a)
    assert (w.imag > 0).any()
    packed = v.real.copy()
    for i, j in zip(*np.nonzero(w.imag > 0)):
        packed[i, :, j + 1] = v[i, :, j].imag
    (got,) = jaxkit.jit(_unpack_conjugate_pairs)(w.astype(np.complex64),
                                                  packed.astype(np.float32))
    np.testing.assert_allclose(np.asarray(got), v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lower,transpose_a,conjugate_a", [
    (True, False, False), (False, True, False), (True, True, True), (True, False, True)])
def test_triangular_solve_is_xlas_operation(lower, transpose_a, conjugate_a):
    a = (A + 1j * A.T).astype(np.complex64)
    kw = dict(left_side=True, lower=lower, transpose_a=transpose_a, conjugate_a=conjugate_a)
    want = jax_text(lambda a, b: jax.lax.linalg.triangular_solve(a, b, **kw), a, a)
    got = kit_text(lambda a, b: jaxkit.lax.linalg.triangular_solve(a, b, **kw), a, a)
    op = re.compile(r'(chlo\.conj|"?stablehlo\.triangular_solve"?.*)')
    assert [m.group(0) for m in map(op.search, got.splitlines()) if m] == \
        [m.group(0) for m in map(op.search, want.splitlines()) if m]


def _comparator(text):
    start = text.index('"stablehlo.sort"')
    body = text[start:text.index("}) :", start)]
    return re.sub(r"%cst(_\d+)?", "%c", body)


@pytest.mark.parametrize("fn,dtype", [
    ("sort", np.float32), ("sort", jnp.bfloat16), ("sort", np.float16), ("argsort", np.float32),
    ("sort_descending", np.float32), ("argsort_descending", np.float32)])
def test_sort_comparator_is_the_one_xla_sorts_with_cub(fn, dtype):
    base, _, order = fn.partition("_")
    kw = {"descending": True} if order else {}
    x = np.zeros(16, dtype)
    want = jax.jit(lambda v: getattr(jnp, base)(v, **kw)).lower(x).as_text()
    got = jaxkit.jit(lambda v: getattr(knp, base)(v, **kw)).lower(x).as_text()
    assert _comparator(got) == _comparator(want)


def _host_callback_calls(text):
    """The Python host callback custom calls: target, side effect, types, index."""
    return [_normalized(m.group(0)) for m in
            map(re.compile(r"custom_call @xla_ffi_python\w+.*").search, text.splitlines()) if m]


@pytest.mark.parametrize("fn", [
    lambda x: jaxkit.pure_callback(np.sin, x, x) * 2,
    lambda x: jaxkit.experimental.io_callback(np.sin, x, x) * 2,
], ids=["pure_callback", "io_callback"])
def test_python_callbacks_call_jaxlibs_gpu_handler(fn):
    # On a GPU, XLA runs jaxlib's xla_ffi_python_gpu_callback (the CPU handler is not
    # registered for CUDA: "No FFI handler registered for xla_ffi_python_cpu_callback"), as
    # JAX's callback lowering names it; the call is otherwise the CPU's (JAX cannot lower a
    # callback for cuda without a GPU backend, so the CPU call is the reference here).
    x = np.ones(3, np.float32)
    cpu = _host_callback_calls(kit_text(fn, x, platform="cpu"))
    gpu = _host_callback_calls(kit_text(fn, x))
    assert len(cpu) == 1 and cpu[0].startswith("custom_call @xla_ffi_python_cpu_callback")
    assert gpu == [cpu[0].replace("python_cpu_callback", "python_gpu_callback")]
