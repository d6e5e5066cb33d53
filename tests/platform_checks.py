"""Comparing jaxkit with the JAX oracle when the two run on different platforms.

On a CPU-only machine (CI) jaxkit and the oracle run the same XLA CPU code and the same LAPACK
drivers, so tests compare results bit for bit and eigenvectors phase for phase. In a GPU run
(``JAXKIT_PLATFORMS=cuda,cpu``, the oracle on ``JAX_PLATFORMS=cpu``) jaxkit's results come from
XLA's GPU code and cuSOLVER: eigen- and singular vectors are unique only up to a unit factor per
column, and transcendental functions or reassociated sums can differ in the last bit. The
helpers here relax exactly that, and only when the platforms differ.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp

KIT_PLATFORM = jaxkit.default_backend()
# The oracle is imported with JAX_PLATFORMS=cpu wherever jaxkit runs on an accelerator.
SAME_PLATFORM_AS_ORACLE = KIT_PLATFORM == "cpu"


def align_columns(got, want):
    """``got``'s columns times the unit factors that best match them to ``want``'s, and the
    factors (last axis). Identity when the platforms agree: phases are compared exactly."""
    got = np.asarray(got)
    if SAME_PLATFORM_AS_ORACLE:
        return got, np.ones(got.shape[-1], got.dtype)
    inner = np.sum(np.conj(np.asarray(want)) * got, axis=-2)
    mag = np.abs(inner)
    unit = np.where(mag > 0, inner / np.where(mag > 0, mag, 1), 1).astype(got.dtype)
    return got * np.conj(unit)[..., None, :], unit


def align_vectors(got, want, columns: int, rows: int | None = None):
    """``got`` (a sequence of outputs) with output ``columns``' columns, and output ``rows``'
    rows (an SVD's ``vh``), phase-matched to ``want``'s. Each is matched on its own; tests
    check the factors' product separately."""
    got = list(got)
    got[columns] = align_columns(got[columns], want[columns])[0]
    if rows is not None:
        h = lambda a: np.conj(np.swapaxes(np.asarray(a), -1, -2))  # noqa: E731
        got[rows] = h(align_columns(h(got[rows]), h(want[rows]))[0])
    return got


def assert_equal_or_ulps(x, ref, maxulp: int = 2):
    """Exact on the oracle's platform; floats within ``maxulp`` units in the last place
    elsewhere (integers and booleans always exact)."""
    x, ref = np.asarray(x), np.asarray(ref)
    if SAME_PLATFORM_AS_ORACLE or not np.issubdtype(x.dtype, np.inexact):
        np.testing.assert_array_equal(x, ref)
    else:
        assert x.shape == ref.shape and x.dtype == ref.dtype
        np.testing.assert_array_max_ulp(x, ref, maxulp=maxulp)


# Primitives JAX 0.10.2 computes only on the CPU (no GPU lowering rule): tests run them with
# the CPU as default device when jaxkit's default is an accelerator, as a user would.
CPU_ONLY_PRIMITIVES = frozenset({"schur", "hessenberg",
                                 # SciPy functions computed through a Schur form
                                 "sqrtm", "funm", "solve_sylvester"})


def cpu_only_on_the_cpu(operation_of_params):
    """An autouse fixture for a test module: each test whose parameters name a CPU-only
    operation (``operation_of_params(params) -> name or None``) runs under ``cpu_for``."""
    @pytest.fixture(autouse=True)
    def fixture(request):
        params = getattr(getattr(request.node, "callspec", None), "params", {})
        with cpu_for(operation_of_params(params)):
            yield
    return fixture


def cpu_for(primitive: str | None):
    """A context: the CPU as default device for a CPU-only primitive off the CPU, else nothing."""
    if SAME_PLATFORM_AS_ORACLE or primitive not in CPU_ONLY_PRIMITIVES:
        return contextlib.nullcontext()
    return jaxkit.default_device(jaxkit.devices("cpu")[0])


def canonical_phases(outs, columns: int, rows: int | None = None):
    """jaxkit outputs (traceable: for vmap-vs-loop checks) with each column of output
    ``columns`` scaled to make its largest entry real and positive, and output ``rows``'
    rows by the conjugate factors. Identity on the oracle's platform, where batched and
    single LAPACK calls give the same phases."""
    if SAME_PLATFORM_AS_ORACLE:
        return outs
    outs = list(outs)
    v = outs[columns]
    pivot = jnp.take_along_axis(v, jnp.argmax(jnp.abs(v), axis=-2, keepdims=True), axis=-2)
    unit = pivot / jnp.abs(pivot)
    outs[columns] = v * jnp.conj(unit)
    if rows is not None:
        # a full SVD's vectors past k = min(m, n) span a null space: any basis of it will do,
        # so only the first k pairs are kept
        vh = outs[rows]
        k = min(v.shape[-1], vh.shape[-2])
        outs[columns] = outs[columns][..., :k]
        outs[rows] = vh[..., :k, :] * jnp.swapaxes(unit, -1, -2)[..., :k, :]
    return outs
