"""Print, per module of JAX's public module tree, the names jaxkit lacks (needs the test
extra: it imports jax as the reference).

    python bench/missing_jax_names.py [--all]

Walks every importable public module under ``jax`` (no ``_src``, no private names) and
compares ``dir()`` with the jaxkit module of the same name (``jax.a.b`` -> ``jaxkit.a.b``).
Each missing name is marked with the open issue that owns it (by module prefix), or with the
reason it is not counted (hardware or third-party packages this project cannot run). The last
lines give the totals: missing names in all, those owned by other issues, and the rest.
``--all`` prints every missing name (default: the first 25 per module).
"""
from __future__ import annotations

import importlib
import pkgutil
import sys
import typing
import warnings

import jax

# Module prefix -> the open issue that owns its missing names (longest prefix wins).
OWNERS = {
    "jax.extend": "#16",
    "jax.experimental.checkify": "#16",
    "jax.experimental.compilation_cache": "#21",
    "jax.lax.linalg": "#23",
    "jax.numpy.linalg": "#23",
    "jax.scipy.linalg": "#23",
    "jax.sharding": "#17",
    "jax.experimental.shard_map": "#17",
    "jax.experimental.shard": "#17",
    "jax.experimental.mesh_utils": "#17",
    "jax.experimental.multihost_utils": "#17",
    "jax.experimental.pjit": "#17",
    "jax.experimental.custom_partitioning": "#17",
    "jax.experimental.layout": "#17",
    "jax.experimental.topologies": "#17",
    "jax.experimental.pallas": "#22",
    "jax.extend.pallas": "#22",
}

# Single names of a module owned by an issue other than the module's (module, name) -> issue.
NAME_OWNERS = {
    ("jax", n): "#17" for n in (
        "NamedSharding", "P", "Shard", "make_mesh", "reshard", "set_mesh", "shard_map", "smap",
        "remove_size_one_mesh_axis_from_type", "auto_pcast")
}

# Module prefix -> why its names are not counted.
NOT_COUNTED = {
    # Pallas's interpret mode runs on the CPU and is counted (#22); these parts only lower
    # kernels for, or are written for, one kind of accelerator:
    "jax.experimental.pallas.mosaic_gpu": "Mosaic GPU kernel lowering (NVIDIA GPUs only)",
    "jax.experimental.pallas.tpu_sc": "TPU SparseCore kernels (TPU only)",
    "jax.experimental.pallas.ops": "reference kernels built on TPU DMAs/semaphores or GPU "
                                   "Triton/Mosaic-GPU operations",
    "jax.experimental.mosaic": "Mosaic is TPU/GPU-only",
    "jax.experimental.jax2tf": "needs TensorFlow",
    "jax.experimental.buffer_callback": "GPU/TPU buffer callbacks",
    "jax.lib": "jaxlib bridge module",
    "jax.tools": "command-line tools",
    "jax.version": "version module",
    "jax.collect_profile": "command-line tool",
    "jax.cloud_tpu_init": "TPU-only",
    "jax.example_libraries": "examples (stax, optimizers), not API",
    # odeint is the module's API (JAX's docs list nothing else) and jaxkit has it; the rest are
    # helpers of JAX's own solver, which works on raveled arrays where jaxkit's takes pytrees.
    "jax.experimental.ode": "helpers of JAX's ODE solver; its API, odeint, is present",
}

# Names jaxkit has but that raise NotImplementedError on every backend it runs: listed with
# the reason instead of being counted as present or missing.
HARDWARE_ONLY = {
    ("jax.nn", n): "cuDNN block-scaled matmul (NVIDIA Blackwell); JAX raises on CPU too"
    for n in ("scaled_matmul", "scaled_dot_general")
} | {
    ("jax.experimental.rnn", n): "cuDNN fused LSTM (GPU only); JAX raises on CPU too"
    for n in ("lstm", "lstm_fwd", "lstm_bwd", "rnn_abstract_eval", "rnn_fwd_p", "rnn_bwd_p")
}


def _prefix_lookup(table: dict, module: str):
    best = None
    for prefix in table:
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > len(best):
                best = prefix
    return table[best] if best else None


def jax_modules() -> list[str]:
    names = {"jax"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for info in pkgutil.walk_packages(jax.__path__, "jax.", onerror=lambda _: None):
            parts = info.name.split(".")
            if any(p.startswith("_") for p in parts) or "tests" in parts:
                continue
            if _prefix_lookup(NOT_COUNTED, info.name):
                names.add(info.name)
                continue
            names.add(info.name)
    return sorted(names)


def _from_stdlib(obj) -> bool:
    """Whether ``obj`` is a standard-library function, class or typing form (``Any``,
    ``partial``, ``lru_cache``): a module's ``from typing import Any`` is not its API."""
    mod = getattr(obj, "__module__", None)
    if not isinstance(mod, str) or isinstance(obj, (int, float, str, bytes, tuple, dict)):
        return False
    return mod.split(".")[0] in sys.stdlib_module_names


def _typing_constant(name: str, obj) -> bool:
    """Whether ``name`` is ``from typing import TYPE_CHECKING`` (a bool, which
    ``_from_stdlib`` cannot trace to its module)."""
    return name == "TYPE_CHECKING" and obj is typing.TYPE_CHECKING


def public(module) -> set[str]:
    """Public names, less imported modules that are not a JAX submodule (``import os``,
    ``import jax`` inside ``jax.experimental.jet``), standard-library imports and
    ``from __future__`` features."""
    out = set()
    for n in dir(module):
        if n.startswith("_"):
            continue
        obj = getattr(module, n, None)
        # jaxlib's modules (``xc``, ``pytree``) are imports too: "jaxlib." is not "jax.".
        if type(obj) is type(jax) and (not obj.__name__.startswith(("jax.", "jaxkit."))
                                       or obj.__name__ in ("jax", "jaxkit")):
            continue
        if type(obj).__name__ == "_Feature" or _from_stdlib(obj) or _typing_constant(n, obj):
            continue
        out.add(n)
    return out


def main() -> int:
    show_all = "--all" in sys.argv
    import jaxkit  # noqa: F401, PLC0415

    totals = {"missing": 0, "owned": 0, "not_counted": 0}
    per_owner: dict[str, int] = {}
    for name in jax_modules():
        skip = _prefix_lookup(NOT_COUNTED, name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                ref = importlib.import_module(name)
            except Exception:  # noqa: BLE001  (optional dependencies of JAX's own modules)
                continue
        ours_name = "jaxkit" + name[3:]
        try:
            ours = importlib.import_module(ours_name)
            ours_names = public(ours)
        except ImportError:
            ours = None
            ours_names = set()
        missing = []
        for n in sorted(public(ref) - ours_names):
            obj = getattr(ref, n, None)
            if type(obj) is type(jax) and obj.__name__.startswith("jax.") and \
                    obj.__name__ != f"{name}.{n}" and not obj.__name__.startswith(name + "."):
                continue  # a re-exported module is compared under its own name
            if type(obj) is type(jax) and obj.__name__.startswith(name + "."):
                continue  # submodules are compared separately
            missing.append(n)
        if not missing:
            continue
        for n in [n for n in missing if (name, n) in NAME_OWNERS]:
            issue = NAME_OWNERS[name, n]
            totals["owned"] += 1
            totals["missing"] += 1
            per_owner[issue] = per_owner.get(issue, 0) + 1
            print(f"{name}.{n}: missing [owned by issue {issue}]")
        missing = [n for n in missing if (name, n) not in NAME_OWNERS]
        if not missing:
            continue
        owner = _prefix_lookup(OWNERS, name)
        if skip:
            totals["not_counted"] += len(missing)
            tag = f"not counted: {skip}"
        elif owner:
            totals["owned"] += len(missing)
            per_owner[owner] = per_owner.get(owner, 0) + len(missing)
            tag = f"owned by issue {owner}"
        else:
            tag = "unowned"
        totals["missing"] += 0 if skip else len(missing)
        where = "" if ours is not None else f" (no module {ours_name})"
        print(f"{name}: {len(missing)} missing{where} [{tag}]")
        shown = missing if show_all else missing[:25]
        print("    " + ", ".join(shown) + (" ..." if len(shown) < len(missing) else ""))
    for (module, n), why in sorted(HARDWARE_ONLY.items()):
        print(f"{module}.{n}: present, raises NotImplementedError [not counted: {why}]")
    unowned = totals["missing"] - totals["owned"]
    print()
    print(f"missing names: {totals['missing']} counted; {totals['owned']} owned by other "
          f"issues ({', '.join(f'{k}: {v}' for k, v in sorted(per_owner.items()))}); "
          f"{unowned} unowned; {totals['not_counted']} more in modules not counted")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
