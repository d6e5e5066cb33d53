"""jaxkit on a GPU: every family of operations run on the default (GPU) device and compared
with the same program on the CPU.

    python bench/gpu_smoke.py [--cases SUBSTR,...]

The CPU's values come from a second process (``JAXKIT_PLATFORMS=cpu``).
Needs a CUDA plugin (``pip install 'jaxkit[cuda13]'``; see ``jaxkit/runtime/gpu.py``). Each
case prints ``ok`` with the largest relative difference from the CPU, or ``FAIL`` with the
error; the PRNG cases must agree bit for bit (JAX's threefry bits are the same on every
platform). Float32 matrix products are compared loosely: XLA's GPU default precision for
float32 dots is TF32, as in JAX.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import traceback

import numpy as np

import jaxkit as jax
import jaxkit.numpy as jnp
from jaxkit import lax
from jaxkit.lax.linalg.qr import geqrf

# TF32 keeps 10 bits of each float32 factor: a product of K terms is off by up to ~K * 2^-11
# relative to its largest terms, more relative to a sum that cancels.
TOLERANCE = {"exact": 0.0, "f32": 2e-5, "tf32": 3e-2, "bf16": 2e-2, "f64": 1e-12,
             # float32 factorizations by different algorithms (Jacobi vs divide and conquer,
             # ...): invariants agree to a few hundred ulps of the matrix's norm
             "linalg32": 2e-4}


def _rng(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _spd(n):
    a = _rng((n, n))
    return (a @ a.T + n * np.eye(n)).astype(np.float32)


def _mm(a, b):
    return jnp.matmul(a, b, precision=lax.Precision.HIGHEST)


def _h(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _svd_invariants(a, **kw):
    """Singular values, U S V^H and the Gram matrices of U and V^H: the same on every
    platform, unlike the singular vectors' signs and phases."""
    u, s, vh = lax.linalg.svd(a, **kw)
    k = s.shape[-1]
    us = u[..., :k] * s[..., None, :].astype(u.dtype)
    return s, _mm(us, vh[..., :k, :]), _mm(_h(u), u), _mm(vh, _h(vh))


def _gpu_algorithm(name):
    """An SVD algorithm the GPU has and the CPU (computing the reference) has not."""
    return getattr(lax.linalg.SvdAlgorithm, name) if jax.default_backend() == "gpu" else None


def _eig_invariants(a, **kw):
    """Order-free functions of the eigenvalues (sum, sum of squares, product) and the
    residuals A V - V diag(w) (and W^H A - diag(w) W^H): zero on every platform."""
    outs = lax.linalg.eig(a, **kw)
    w = outs[0]
    ac = a.astype(w.dtype)
    found = [w.sum(-1), (w * w).sum(-1), w.prod(-1)]
    if kw.get("compute_right_eigenvectors", True):
        vr = outs[-1]
        found += [_mm(ac, vr) - vr * w[..., None, :], jnp.linalg.norm(vr, axis=-2)]
    if kw.get("compute_left_eigenvectors", True):
        vl = outs[1]
        found.append(_mm(_h(vl), ac) - w[..., :, None] * _h(vl))
    return found


def _tridiag(m, batch=(), seed=0):
    dl, d, du = (_rng(batch + (m,), seed=seed + i) for i in range(3))
    return dl, d + 4, du, _rng(batch + (m, 3), seed=seed + 3)


def _ormqr_invariants(a, c):
    """Q c, c^T Q and their inverses (Q^T, from the left and the right) checked against each
    other and against the leading columns of Q that householder_product forms."""
    r, taus = geqrf(a)
    qc = lax.linalg.ormqr(r, taus, c, left=True, transpose=False)
    ctq = lax.linalg.ormqr(r, taus, c.T, left=False, transpose=False)
    q1 = lax.linalg.householder_product(r, taus)
    return (lax.linalg.ormqr(r, taus, qc, left=True, transpose=True) - c,
            lax.linalg.ormqr(r, taus, ctq, left=False, transpose=True) - c.T,
            _mm(q1.T, qc) - c[:q1.shape[1]], jnp.linalg.norm(qc, axis=0))


def _geqp3_invariants(a):
    q, r, p = jax.scipy.linalg.qr(a, pivoting=True, mode="economic")
    return p, jnp.abs(jnp.diagonal(r)), _mm(q, r) - a[:, p]


def _tridiagonal_invariants(a):
    _, d, e, _ = lax.linalg.tridiagonal(a, lower=True)
    return d, jnp.abs(e)


def _mlp_grad(params, x):
    def loss(p):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"]) ** 2)
    return jax.grad(loss)(params)


def _scan_cumsum(x):
    return lax.scan(lambda c, v: (c + v, c * v), jnp.zeros(x.shape[1:], x.dtype), x)


def _while_count(x):
    return lax.while_loop(lambda c: c[0] < 100, lambda c: (c[0] + 1, c[1] * 0.99 + 1), (0, x))


def _cond_both(x):
    return lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x)


# (name, tolerance key, function, argument builder)
CASES = [
    ("add", "f32", lambda x, y: x + y, lambda: (_rng((1000,)), _rng((1000,), seed=1))),
    ("sin_exp_tanh_erf", "f32",
     lambda x: (jnp.sin(x), jnp.exp(x), jnp.tanh(x), jax.scipy.special.erf(x)),
     lambda: (_rng((4096,)),)),
    ("bf16_elementwise", "bf16", lambda x: jnp.exp(x.astype(jnp.bfloat16)) * 2,
     lambda: (_rng((4096,)),)),
    ("f16_elementwise", "bf16", lambda x: jnp.tanh(x.astype(jnp.float16)) + 1,
     lambda: (_rng((4096,)),)),
    ("reductions", "f32",
     lambda x: (x.sum(0), x.mean(1), x.max(), jnp.argmax(x, 1), jnp.cumsum(x, 0)),
     lambda: (_rng((257, 129)),)),
    ("matmul_f32", "tf32", lambda a, b: a @ b, lambda: (_rng((512, 256)), _rng((256, 384)))),
    ("matmul_f32_highest", "f32",
     lambda a, b: jnp.matmul(a, b, precision=lax.Precision.HIGHEST),
     lambda: (_rng((512, 256)), _rng((256, 384)))),
    ("matmul_bf16", "bf16", lambda a, b: (a.astype(jnp.bfloat16) @ b.astype(jnp.bfloat16)),
     lambda: (_rng((256, 256)), _rng((256, 256)))),
    ("einsum", "tf32", lambda a, b: jnp.einsum("bij,bjk->bik", a, b),
     lambda: (_rng((8, 32, 16)), _rng((8, 16, 24)))),
    ("conv2d_nhwc", "tf32",
     lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                           dimension_numbers=("NHWC", "HWIO", "NHWC")),
     lambda: (_rng((4, 32, 32, 8)), _rng((3, 3, 8, 16)))),
    ("mlp_grad", "tf32", _mlp_grad,
     lambda: ({"w1": _rng((64, 128)), "b1": _rng((128,)), "w2": _rng((128, 10))},
              _rng((32, 64)))),
    ("vmap_jit", "f32", jax.jit(jax.vmap(lambda v: jnp.sin(v) @ jnp.cos(v))),
     lambda: (_rng((16, 100)),)),
    ("scan", "f32", _scan_cumsum, lambda: (_rng((50, 8)),)),
    ("while_loop", "f32", _while_count, lambda: (_rng((8,)),)),
    ("cond", "f32", _cond_both, lambda: (_rng((8,)),)),
    ("sort_argsort_topk", "exact",
     lambda x: (jnp.sort(x), jnp.argsort(x), lax.top_k(x, 5)[0]), lambda: (_rng((1000,)),)),
    ("gather_scatter", "f32",
     lambda x, i: (x[i], x.at[i].add(1.0), x.at[i].max(0.5)),
     lambda: (_rng((100,)), np.array([3, 3, 7, 99, 0, 7], np.int32))),
    ("random_bits", "exact",
     lambda: (jax.random.bits(jax.random.key(0), (1000,)),
              jax.random.randint(jax.random.key(2), (100,), 0, 1000),
              jax.random.categorical(jax.random.key(3), jnp.zeros((5, 7))),
              jax.random.permutation(jax.random.key(4), 50)),
     lambda: ()),
    # the same bits; floats made from them may differ in the last place (erf_inv, log)
    ("random_floats", "f32",
     lambda: (jax.random.normal(jax.random.key(0), (1000,)),
              jax.random.uniform(jax.random.PRNGKey(1), (10, 10)),
              jax.random.gamma(jax.random.key(5), 2.0, (100,))),
     lambda: ()),
    ("fft", "f32",
     lambda x: (jnp.fft.fft(x), jnp.fft.rfft(x), jnp.fft.ifft2(x.reshape(32, 32))),
     lambda: (_rng((1024,)),)),
    ("softmax_logsumexp", "f32",
     lambda x: (jax.nn.softmax(x, -1), jax.nn.logsumexp(x, -1), jax.nn.gelu(x)),
     lambda: (_rng((16, 64)),)),
    ("attention", "tf32",
     lambda q, k, v: jax.nn.dot_product_attention(q, k, v),
     lambda: (_rng((2, 16, 4, 32)), _rng((2, 16, 4, 32), seed=1), _rng((2, 16, 4, 32), seed=2))),
    ("cholesky", "f32", jnp.linalg.cholesky, lambda: (_spd(64),)),
    ("solve", "tf32", jnp.linalg.solve, lambda: (_spd(64), _rng((64, 3)))),
    ("inv_det_slogdet", "tf32", lambda a: (jnp.linalg.inv(a), jnp.linalg.slogdet(a)),
     lambda: (_spd(32),)),
    ("qr", "tf32", lambda a: jnp.abs(jnp.linalg.qr(a)[1]), lambda: (_rng((40, 30)),)),
    ("svd", "tf32", lambda a: jnp.linalg.svd(a, compute_uv=False), lambda: (_rng((40, 30)),)),
    ("eigh", "tf32", lambda a: jnp.linalg.eigvalsh(a), lambda: (_spd(32),)),
    ("lu", "tf32", lambda a: jax.scipy.linalg.lu_factor(a)[0], lambda: (_spd(32),)),
    ("triangular_solve", "tf32",
     lambda a, b: jax.scipy.linalg.solve_triangular(a, b, lower=True),
     lambda: (np.tril(_spd(32)), _rng((32, 4)))),
    # the GPU linear algebra of cuSOLVER, cuSPARSE, jaxlib's CUDA and hybrid kernels
    ("svd_jacobi_c64_wide", "linalg32", _svd_invariants,
     lambda: ((_rng((6, 9)) + 1j * _rng((6, 9), seed=1)).astype(np.complex64),)),
    ("svd_jacobi_economy_batched", "linalg32",
     lambda a: _svd_invariants(a, full_matrices=False), lambda: (_rng((3, 40, 33)),)),
    ("svd_jacobi_economy_small", "linalg32",
     lambda a: _svd_invariants(a, full_matrices=False), lambda: (_rng((2, 7, 5)),)),
    ("svd_qr_wide", "linalg32",
     lambda a: _svd_invariants(a, algorithm=lax.linalg.SvdAlgorithm.QR), lambda: (_rng((5, 8)),)),
    ("svd_polar_tall", "linalg32",
     lambda a: _svd_invariants(a, full_matrices=False, algorithm=_gpu_algorithm("POLAR")),
     lambda: (_rng((8, 5)),)),
    ("svd_values_over_1024", "linalg32", lambda a: jnp.linalg.svd(a, compute_uv=False),
     lambda: (_rng((1100, 3)),)),
    ("eig_right", "linalg32",
     lambda a: _eig_invariants(a, compute_left_eigenvectors=False), lambda: (_rng((6, 6)),)),
    ("eig_left_right_hybrid", "linalg32", _eig_invariants, lambda: (_rng((6, 6)),)),
    ("eigvals_c64_batched", "linalg32",
     lambda a: _eig_invariants(a, compute_left_eigenvectors=False,
                               compute_right_eigenvectors=False),
     lambda: ((_rng((2, 5, 5)) + 1j * _rng((2, 5, 5), seed=1)).astype(np.complex64),)),
    ("tridiagonal_solve_gtsv2", "linalg32", lax.linalg.tridiagonal_solve,
     lambda: _tridiag(64, (2,))),
    ("tridiagonal_solve_two_equations", "linalg32", lax.linalg.tridiagonal_solve,
     lambda: _tridiag(2)),
    ("tridiagonal_solve_perturbed", "linalg32",
     lambda *a: lax.linalg.tridiagonal_solve(*a, perturb_singular=True), lambda: _tridiag(16)),
    ("ormqr", "linalg32", _ormqr_invariants, lambda: (_rng((12, 7)), _rng((12, 3)))),
    ("geqp3", "linalg32", _geqp3_invariants, lambda: (_rng((9, 6)),)),
    ("tridiagonal_sytrd", "linalg32", _tridiagonal_invariants, lambda: (_spd(12),)),
    ("lu_pivots_to_permutation", "exact",
     lambda p: lax.linalg.lu_pivots_to_permutation(p, 6),
     lambda: (np.array([[2, 2, 5, 3], [0, 4, 2, 3]], np.int32),)),
    ("cholesky_update", "linalg32",  # the upper factor (JAX leaves the lower triangle as is)
     lambda r, w: jnp.triu(lax.linalg.cholesky_update(r, w)),
     lambda: (np.linalg.cholesky(_spd(8)).T.astype(np.float32), _rng((8,)))),
    ("symmetric_product", "linalg32",  # syrk writes the lower triangle
     lambda a, c: (jnp.tril(lax.linalg.symmetric_product(a, c, alpha=2.0, beta=0.5)),
                   lax.linalg.symmetric_product(a, c, alpha=2.0, beta=0.5,
                                                symmetrize_output=True)),
     lambda: (_rng((6, 4)), _spd(6))),
]


def _leaves(tree):
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(tree)]


def _max_rel_diff(got, want) -> float:
    worst = 0.0
    for g, w in zip(_leaves(got), _leaves(want), strict=True):
        if g.shape != w.shape or g.dtype != w.dtype:
            raise AssertionError(f"GPU gave {g.dtype}{g.shape}, CPU {w.dtype}{w.shape}")
        if g.dtype.kind in "biu" or g.dtype == np.bool_:
            worst = max(worst, float(np.sum(g != w)))
            continue
        g64, w64 = g.astype(np.complex128), w.astype(np.complex128)
        scale = np.maximum(np.abs(w64), 1.0)
        worst = max(worst, float(np.max(np.abs(g64 - w64) / scale, initial=0.0)))
    return worst


def reference_values(wanted: list[str]) -> dict[str, list[np.ndarray]]:
    """Every case's outputs computed by jaxkit on the CPU, in a process of its own
    (``JAXKIT_PLATFORMS=cpu``), so that the GPU process never needs a second platform."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "reference.npz")
        env = dict(os.environ, JAXKIT_PLATFORMS="cpu")
        subprocess.run([sys.executable, __file__, "--save-reference", path,
                        "--cases", ",".join(wanted)], env=env, check=True)
        with np.load(path) as saved:
            found: dict[str, list[np.ndarray]] = {}
            for key in sorted(saved.files, key=lambda k: int(k.rsplit("__", 1)[1])):
                name, dtype, _ = key.rsplit("__", 2)
                found.setdefault(name, []).append(saved[key].astype(jnp.dtype(dtype)))
            return found


def _report_failure(name: str, e: Exception) -> None:
    last = traceback.extract_tb(e.__traceback__)[-1]
    print(f"FAIL {name}: {type(e).__name__}: {str(e).splitlines()[0][:300]} "
          f"(at {last.filename.split('jaxkit/')[-1]}:{last.lineno})", flush=True)


def run_case(name, tol, fn, build, device, reference) -> bool:
    args = build()
    try:
        if name not in reference:
            raise RuntimeError("the CPU reference failed for this case")
        want = reference[name]
        got = jax.jit(fn)(*args)
        placed = {d for leaf in jax.tree_util.tree_leaves(got) for d in leaf.devices()}
        if placed != {device}:
            raise AssertionError(f"result placed on {placed}, not on {device}")
        eager = fn(*jax.tree_util.tree_map(jnp.asarray, args))
        diff = max(_max_rel_diff(got, want), _max_rel_diff(eager, want))
    except Exception as e:  # noqa: BLE001  (report every failure and go on)
        _report_failure(name, e)
        return False
    ok = diff <= TOLERANCE[tol]
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max relative difference from the CPU "
          f"{diff:.2e} (tolerance {TOLERANCE[tol]:.0e}, {tol})", flush=True)
    return ok


def save_reference(path: str, cases) -> None:
    arrays = {}
    for name, _, fn, build in cases:
        try:
            for i, leaf in enumerate(_leaves(jax.jit(fn)(*build()))):
                # .npz keeps NumPy's own dtypes only: bfloat16 & co. travel as float32
                arrays[f"{name}__{leaf.dtype.name}__{i}"] = (
                    leaf.astype(np.float32) if leaf.dtype.kind == "V" else leaf)
        except Exception as e:  # noqa: BLE001  (the GPU side reports the case as failed)
            _report_failure(f"{name} (CPU reference)", e)
    np.savez(path, **arrays)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="", help="comma-separated substrings of case names")
    parser.add_argument("--platform", default="gpu",
                        help="the platform checked against the CPU (cpu checks the script)")
    parser.add_argument("--save-reference", help=argparse.SUPPRESS)
    args = parser.parse_args()
    wanted = [s for s in args.cases.split(",") if s]
    cases = [case for case in CASES if not wanted or any(s in case[0] for s in wanted)]
    if args.save_reference:
        save_reference(args.save_reference, cases)
        return 0
    print("jaxkit", jax.__version__, "default backend:", jax.default_backend())
    print("devices:", jax.devices())
    device = jax.devices(args.platform)[0]
    print("device_kind:", device.device_kind, "| platform:", device.platform)
    x = jnp.arange(6.0).reshape(2, 3)
    print("array on the default device:", repr(x), x.devices())
    print("memory_stats:", {k: v for k, v in (device.memory_stats() or {}).items()
                            if k in ("bytes_in_use", "bytes_limit", "peak_bytes_in_use")})
    reference = reference_values(wanted)
    results = [run_case(*case, device=device, reference=reference) for case in cases]
    print(f"{sum(results)} of {len(results)} cases agree with the CPU")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
