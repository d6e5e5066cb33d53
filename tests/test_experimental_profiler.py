"""``jaxkit.experimental.profiler.get_profiled_instructions_proto`` against JAX's, on the
same captured traces (jaxkit's and JAX's)."""
from __future__ import annotations

import glob
import os
import pathlib

import pytest

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit import profiler
from jaxkit.runtime import pjrt
from jaxkit.experimental.profiler import get_profiled_instructions_proto

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax.experimental import profiler as jprofiler  # noqa: E402


def _run_dir(log_dir) -> str:
    runs = glob.glob(os.path.join(str(log_dir), "plugins", "profile", "*", ""))
    assert len(runs) == 1, runs
    return runs[0]


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory):
    ours = tmp_path_factory.mktemp("kit")
    with profiler.trace(str(ours)):
        jaxkit.jit(lambda x: kjnp.sin(x) @ x)(kjnp.ones((32, 32))).block_until_ready()
    theirs = tmp_path_factory.mktemp("jax")
    with jax.profiler.trace(str(theirs)):
        jax.jit(lambda x: jjnp.sin(x) @ x)(jjnp.ones((32, 32))).block_until_ready()
    return {"kit": _run_dir(ours), "jax": _run_dir(theirs)}


@pytest.mark.parametrize("which", ["kit", "jax"])
def test_matches_jax_on_the_same_trace(run_dirs, which):
    ours = get_profiled_instructions_proto(run_dirs[which])
    assert isinstance(ours, bytes)
    assert ours == jprofiler.get_profiled_instructions_proto(run_dirs[which])


def test_accepts_a_path_object(run_dirs):
    path = pathlib.Path(run_dirs["kit"])
    assert get_profiled_instructions_proto(path) == \
        jprofiler.get_profiled_instructions_proto(str(path))


def test_missing_directory_raises_runtime_error(tmp_path):
    missing = str(tmp_path / "nothing")
    with pytest.raises(jax.errors.JaxRuntimeError, match="NOT_FOUND"):
        jprofiler.get_profiled_instructions_proto(missing)
    with pytest.raises(pjrt.JaxRuntimeError, match="NOT_FOUND"):
        get_profiled_instructions_proto(missing)
