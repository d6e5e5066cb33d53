"""Every public function and class of JAX's common modules takes the parameters JAX's does
(by name), compared with the test-only oracle through ``inspect.signature``: a JAX user's
keyword argument must not be a TypeError in jaxkit. One record per module; the few
differences kept on purpose are listed with their reason."""
from __future__ import annotations

import importlib
import inspect
import warnings

import pytest

jax = pytest.importorskip("jax")

MODULES = [
    "jax", "jax.numpy", "jax.lax", "jax.random", "jax.nn", "jax.nn.initializers",
    "jax.scipy.special", "jax.scipy.stats", "jax.scipy.stats.norm", "jax.scipy.linalg",
    "jax.numpy.linalg", "jax.numpy.fft", "jax.scipy.signal", "jax.scipy.ndimage",
    "jax.scipy.integrate", "jax.scipy.optimize", "jax.scipy.sparse.linalg", "jax.scipy.fft",
    "jax.tree", "jax.tree_util", "jax.debug", "jax.sharding", "jax.experimental",
    "jax.ad_checkpoint", "jax.custom_derivatives", "jax.experimental.shard_map", "jax.image",
    "jax.dlpack", "jax.lax.linalg", "jax.export", "jax.stages", "jax.test_util",
    "jax.flatten_util", "jax.experimental.checkify", "jax.profiler", "jax.ops",
    "jax.extend.core", "jax.experimental.multihost_utils", "jax.experimental.pallas",
]

# (module, name, member) -> why jaxkit's parameters differ from JAX's
KEPT = {
    ("jax.export", "export", ""): "_override_lowering_rules: a private JAX hook",
    ("jax.experimental.multihost_utils", "ltg_batcher", ""): "an internal batching rule",
    # constructors JAX's own code calls with its internal state (users get these objects
    # from jit/export/pallas, they do not build them)
    **{(m, c, "__init__"): "internal constructor" for m, c in [
        ("jax", "Ref"), ("jax", "Shard"), ("jax.stages", "Compiled"),
        ("jax.stages", "Lowered"), ("jax.stages", "Traced"), ("jax.export", "Exported"),
        ("jax.experimental.checkify", "Error"), ("jax.extend.core", "Token"),
        ("jax.extend.core", "Var"), ("jax.numpy", "ufunc")]},
    ("jax.export", "Exported", "mlir_module"): "a property in jaxkit",
    ("jax.extend.core", "Jaxpr", "__init__"): "is_high: jaxkit types say it",
    ("jax.experimental.pallas", "Buffered", "__init__"): "revisit: TPU pipelining only",
    ("jax.extend.core", "AbstractToken", "str_short"): "a token has no dtype to shorten",
}


def _names(f):
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        return None
    ps = sig.parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in ps):
        return None  # takes any keyword
    return {p.name for p in ps if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)} - {"self"}


def _pairs(module: str):
    import jaxkit  # noqa: F401
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = importlib.import_module(module)
        mine = importlib.import_module("jaxkit" + module[3:])
        for name in sorted(dir(theirs)):
            j, k = getattr(theirs, name, None), getattr(mine, name, None)
            if name.startswith("_") or k is None or not callable(j) or inspect.ismodule(j):
                continue
            if not inspect.isclass(j):
                yield name, "", j, k
                continue
            if not inspect.isclass(k):
                continue
            yield name, "__init__", j, k
            for attr in dir(j):
                jm, km = getattr(j, attr, None), getattr(k, attr, None)
                if not attr.startswith("_") and callable(jm) and km is not None \
                        and not inspect.isclass(jm):
                    yield name, attr, jm, km


@pytest.mark.parametrize("module", MODULES)
def test_parameters_match_jax(module):
    missing = []
    for name, member, j, k in _pairs(module):
        want, have = _names(j), _names(k)
        if want is None or have is None or (module, name, member) in KEPT:
            continue
        if want - have:
            missing.append(f"{module}.{name}{'.' + member if member else ''}: "
                           f"{sorted(want - have)}")
    assert not missing, "\n".join(missing)


def test_every_kept_difference_is_still_one():
    # a difference listed above that has gone away must leave the list
    for (module, name, member), why in KEPT.items():
        pairs = {(n, m): (j, k) for n, m, j, k in _pairs(module)}
        j, k = pairs[(name, member)]
        assert _names(j) - _names(k), (module, name, member, why)
