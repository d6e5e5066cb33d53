"""Start a group of fresh Python processes on 127.0.0.1 that form one multi-process program.

Each run gets a random free port, every process a bounded wait, and all of them are killed
at the end whatever happens. Workers print one JSON line last; ``run_group`` returns the
parsed lines (and stderr), in process order. ``have_jax`` says whether the JAX oracle can run
the same worker (JAX needs gloo for multi-process CPU collectives, set through the
environment: ``JAX_CPU_COLLECTIVES_IMPLEMENTATION=gloo``).
"""
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time

have_jax = importlib.util.find_spec("jax") is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_group(script, argv, n_started: int, wait: float, devices: int = 1, env=None):
    """Run ``script`` (a path) as processes ``0..n_started-1``; process ``i`` gets the
    arguments ``argv(address, i)``. Each process has ``devices`` CPU devices (for jaxkit and
    for JAX). Returns the address and ``[(json_result, stderr), ...]``."""
    address = f"127.0.0.1:{free_port()}"
    env = dict(os.environ, JAXKIT_NUM_CPU_DEVICES=str(devices),
               JAX_NUM_CPU_DEVICES=str(devices), JAX_CPU_COLLECTIVES_IMPLEMENTATION="gloo",
               JAX_PLATFORMS="cpu", **(env or {}))
    procs = [subprocess.Popen([sys.executable, str(script), *map(str, argv(address, i))],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for i in range(n_started)]
    results = []
    try:
        deadline = time.monotonic() + wait
        for p in procs:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            assert p.returncode == 0, err[-3000:]
            results.append((json.loads(out.strip().splitlines()[-1]), err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return address, results
