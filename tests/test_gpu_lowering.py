"""What jaxkit emits for NVIDIA GPUs, checked without a GPU against JAX's own lowering for
``cuda`` (``.trace(...).lower(lowering_platforms=("cuda",))``): the cuSOLVER kernel calls of
the factorizations (names, attributes, layouts, aliasing), XLA's ``triangular_solve``, and
sort comparators in the exact shape XLA's GPU compiler turns into a CUB radix sort."""
import re

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as knp
import jaxkit.scipy.linalg as ksl
from jaxkit.interpreters import mlir


def kit_text(f, *args, platform="cuda"):
    closed = jaxkit.make_jaxpr(f)(*args)
    return str(mlir.lower_jaxpr("f", closed.jaxpr, consts=closed.consts, platform=platform))


def jax_text(f, *args):
    return jax.jit(f).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def kernel_calls(text):
    """The cuSOLVER custom calls, SSA names and JAX's sharding rule left out."""
    calls = []
    for line in text.splitlines():
        m = re.search(r"custom_call @(cusolver\w+)(.*)", line)
        if m:
            body = re.sub(r"%[\w#:]+", "%v", m.group(1) + m.group(2))
            calls.append(re.split(r", sdy\.sharding_rule|\} :", body)[0])
    return calls


A = np.eye(4, dtype=np.float32) * 3 + 1
RECORDS = {  # name: (JAX function, jaxkit function, arguments)
    "cholesky": (jnp.linalg.cholesky, knp.linalg.cholesky, (A,)),
    "cholesky_c64_batched": (jnp.linalg.cholesky, knp.linalg.cholesky,
                             (np.stack([A, A]).astype(np.complex64),)),
    "lu_factor": (jsl.lu_factor, ksl.lu_factor, (A,)),
    "qr": (jnp.linalg.qr, knp.linalg.qr, (A,)),
    "qr_f64_wide": (jnp.linalg.qr, knp.linalg.qr, (np.ones((3, 5)),)),
    "eigh": (jnp.linalg.eigh, knp.linalg.eigh, (A,)),
    "eigh_upper": (lambda a: jnp.linalg.eigh(a, UPLO="U"), lambda a: knp.linalg.eigh(a, UPLO="U"),
                   (A,)),
    "solve": (jnp.linalg.solve, knp.linalg.solve, (A, A)),
}


@pytest.mark.parametrize("name", RECORDS)
def test_cusolver_calls_are_jaxs(name):
    jf, kf, args = RECORDS[name]
    with jax.enable_x64(True), jaxkit.enable_x64(True):
        want, got = kernel_calls(jax_text(jf, *args)), kernel_calls(kit_text(kf, *args))
    assert want and got == want


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


def test_lapack_only_primitives_say_so_on_the_gpu():
    with pytest.raises(NotImplementedError, match="lowering rule for 'svd' on the GPU"):
        kit_text(lambda a: knp.linalg.svd(a, compute_uv=False), A)
    assert "lapack_" in kit_text(lambda a: knp.linalg.svd(a, compute_uv=False), A,
                                 platform="cpu")


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
