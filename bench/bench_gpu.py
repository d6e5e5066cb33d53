"""GPU benchmarks: jaxkit against JAX on one GPU, each library in processes of its own.

    python bench/bench_gpu.py [--rounds N] [--cases SUBSTR,...]
                              [--jax-cmd CMD] [--jaxkit-cmd CMD]

On a GPU the two libraries cannot share a process unless their jaxlib and CUDA plugin wheels
are the same build, so every round starts one process per library, alternating, and each case
keeps its best time over the rounds (the least disturbed). ``--jax-cmd``/``--jaxkit-cmd`` name
the interpreter command of each (``"env -u PYTHONPATH python3"`` runs a system JAX of another
version: the ratio then compares releases too, and the table says which). Prints per-case
times, throughput and the jaxkit/JAX ratio (below 1: jaxkit faster).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys

# Run in each child process: ``lib`` is jaxkit or jax; prints one JSON line of
# {case: [seconds per call, work units per call or null]}, or {case: "error ..."}.
_CHILD = r'''
import json, sys, time
import numpy as np
lib, wanted = sys.argv[1], [s for s in sys.argv[2].split(",") if s]
platform = sys.argv[3]
if lib == "jax":
    import jax, jax.numpy as jnp
else:
    import jaxkit as jax, jaxkit.numpy as jnp
lax = jax.lax
gpu = jax.devices()[0]
assert gpu.platform == platform, f"{lib}'s default device is {gpu}, not a {platform} device"


def best(fn, number, windows=5):
    jax.block_until_ready(fn())  # compile, warm up
    t = float("inf")
    for _ in range(windows):
        start = time.perf_counter()
        for _ in range(number):
            out = fn()
        jax.block_until_ready(out)
        t = min(t, (time.perf_counter() - start) / number)
    return t


def rand(shape, dtype="float32", seed=0):
    host = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    return jax.device_put(host).astype(dtype)


def selu(x, alpha=1.67, lmbda=1.05):
    return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)


def case_dispatch():
    x, f = rand((1000,)), jax.jit(lambda v: v + 1)
    return best(lambda: f(x), 2000), None


def case_eager_add():
    x, y = rand((1000,)), rand((1000,), seed=1)
    return best(lambda: x + y, 2000), None


def case_selu_1e8():  # bytes moved: read 4e8 + write 4e8
    x, f = rand((100_000_000,)), jax.jit(selu)
    return best(lambda: f(x), 20), 8e8


def case_sum_1e8():
    x, f = rand((100_000_000,)), jax.jit(jnp.sum)
    return best(lambda: f(x), 20), 4e8


def case_matmul_bf16_8192():
    a, b = rand((8192, 8192), "bfloat16"), rand((8192, 8192), "bfloat16", 1)
    f = jax.jit(jnp.matmul)
    return best(lambda: f(a, b), 10), 2 * 8192**3


def case_matmul_f32_4096():
    a, b = rand((4096, 4096)), rand((4096, 4096), seed=1)
    f = jax.jit(jnp.matmul)
    return best(lambda: f(a, b), 10), 2 * 4096**3


def case_mlp_train_step():
    sizes, batch = [1024, 4096, 4096, 1024], 4096
    params = [(rand((m, n), seed=i) * 0.02, jnp.zeros((n,)))
              for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:]))]
    x, y = rand((batch, sizes[0]), seed=7), rand((batch, sizes[-1]), seed=8)

    def loss(ps):
        h = x
        for w, b in ps[:-1]:
            h = jax.nn.relu(h @ w + b)
        w, b = ps[-1]
        return jnp.mean((h @ w + b - y) ** 2)

    @jax.jit
    def step(ps):
        g = jax.grad(loss)(ps)
        return jax.tree_util.tree_map(lambda p, d: p - 1e-3 * d, ps, g)
    flops = 6 * batch * sum(m * n for m, n in zip(sizes[:-1], sizes[1:]))
    return best(lambda: step(params), 10), flops


def case_conv_bf16():
    x, w = rand((64, 56, 56, 256), "bfloat16"), rand((3, 3, 256, 256), "bfloat16", 1)
    f = jax.jit(lambda a, b: lax.conv_general_dilated(
        a, b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    return best(lambda: f(x, w), 10), 2 * 64 * 56 * 56 * 256 * 256 * 9


def case_random_normal_1e8():
    f = jax.jit(lambda k: jax.random.normal(k, (100_000_000,)))
    key = jax.random.key(0)
    return best(lambda: f(key), 10), 4e8


def case_fft_4m():
    x = rand((1 << 22,)).astype("complex64")
    f = jax.jit(jnp.fft.fft)
    return best(lambda: f(x), 20), None


def case_sort_1e7():
    x, f = rand((10_000_000,)), jax.jit(jnp.sort)
    return best(lambda: f(x), 10), None


def case_scan_1000():
    def body(c, _):
        return c * 0.999 + 1.0, None
    f = jax.jit(lambda c: lax.scan(body, c, None, length=1000)[0])
    x = rand((128,))
    return best(lambda: f(x), 10), None


def case_cold_compile_200():
    x = rand((1000,))
    times = []
    for r in range(3):
        def fn(v, r=r):  # a new constant each time: no compile cache may serve it
            for i in range(200):
                v = v * (1.0001 + r * 1e-4 + time.perf_counter_ns() % 997 * 1e-9) + 0.5 \
                    if i % 2 else v - 0.25
            return v
        start = time.perf_counter()
        jax.block_until_ready(jax.jit(fn)(x))
        times.append(time.perf_counter() - start)
    return sorted(times)[1], None


def case_host_to_device_256mb():
    host = np.ones(64 * 2**20, np.float32)
    return best(lambda: jax.device_put(host), 10), 256 * 2**20


out = {}
for name, fn in list(globals().items()):
    if not name.startswith("case_") or (wanted and not any(s in name for s in wanted)):
        continue
    try:
        out[name[5:]] = fn()
    except Exception as e:
        out[name[5:]] = f"error {type(e).__name__}: {str(e).splitlines()[0][:200]}"
print("RESULT " + json.dumps(out), flush=True)
'''

UNITS = {"selu_1e8": "GB/s", "sum_1e8": "GB/s", "random_normal_1e8": "GB/s",
         "host_to_device_256mb": "GB/s", "matmul_bf16_8192": "TFLOP/s",
         "matmul_f32_4096": "TFLOP/s", "mlp_train_step": "TFLOP/s", "conv_bf16": "TFLOP/s"}


def run_child(cmd: str, lib: str, cases: str, platform: str) -> dict:
    proc = subprocess.run([*shlex.split(cmd), "-c", _CHILD, lib, cases, platform],
                          capture_output=True, text=True, check=False, timeout=900,
                          cwd=os.path.dirname(os.path.abspath(__file__)))
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"the {lib} process failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")


def version(cmd: str, lib: str) -> str:
    code = (f"import {lib}, sys; print({lib}.__version__, "
            f"__import__('jaxlib').__version__, {lib}.devices()[0].device_kind)")
    proc = subprocess.run([*shlex.split(cmd), "-c", code], capture_output=True, text=True,
                          check=False, timeout=300)
    return proc.stdout.strip() or proc.stderr.strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cases", default="")
    parser.add_argument("--platform", default="gpu", help="cpu checks the script without a GPU")
    parser.add_argument("--jax-cmd", default=shlex.quote(sys.executable))
    parser.add_argument("--jaxkit-cmd", default=shlex.quote(sys.executable))
    args = parser.parse_args()
    cmds = {"jaxkit": args.jaxkit_cmd, "jax": args.jax_cmd}
    for lib, cmd in cmds.items():
        print(f"{lib:7s} (version, jaxlib, device): {version(cmd, lib)}", flush=True)
    best: dict[str, dict[str, object]] = {"jaxkit": {}, "jax": {}}
    for r in range(args.rounds):
        order = list(cmds) if r % 2 == 0 else list(cmds)[::-1]
        for lib in order:
            for case, value in run_child(cmds[lib], lib, args.cases, args.platform).items():
                old = best[lib].get(case)
                if isinstance(value, list) and (not isinstance(old, list) or value[0] < old[0]):
                    best[lib][case] = value
                elif old is None:
                    best[lib][case] = value
    print(f"\n{'case':24s} {'jaxkit':>22s} {'JAX':>22s} {'jaxkit/JAX':>10s}")
    for case in best["jaxkit"]:
        cells = []
        for lib in ("jaxkit", "jax"):
            v = best[lib].get(case)
            if not isinstance(v, list):
                cells.append(str(v)[:60])
                continue
            seconds, work = v
            text = f"{seconds * 1e3:.3f} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.1f} us"
            if work and case in UNITS:
                scale = 1e12 if UNITS[case] == "TFLOP/s" else 1e9
                text += f" ({work / seconds / scale:.0f} {UNITS[case]})"
            cells.append(text)
        kit, ref = best["jaxkit"].get(case), best["jax"].get(case)
        ratio = (f"{kit[0] / ref[0]:.2f}" if isinstance(kit, list) and isinstance(ref, list)
                 else "-")
        print(f"{case:24s} {cells[0]:>22s} {cells[1]:>22s} {ratio:>10s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
