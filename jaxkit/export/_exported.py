"""``Exported``: a jitted function lowered to StableHLO with its calling signature.

``export(jit(f))(*args)`` traces and lowers ``f`` at the arguments' shapes and dtypes (arrays
or ``ShapeDtypeStruct``s) and keeps the module as a StableHLO portable artifact, beside the
pytree structures and avals needed to call it. ``Exported.call`` binds ``call_exported``,
whose lowering inlines the module's functions into the calling program (so it works eagerly,
under ``jit`` and inside other exports); differentiation goes through a ``custom_vjp`` whose
backward pass calls the exported VJP (``Exported.vjp()``, kept when serializing with
``vjp_order``).

Supported: single-device programs, for the platform jaxkit runs on, for another one, or for
several at once (the module then takes the platform's index first and ``call`` passes it:
``interpreters.mlir_platforms``). Not supported (each raises ``NotImplementedError`` saying
so): symbolic (shape-polymorphic) argument shapes and programs partitioned over several
devices; ``vmap`` of ``call_exported`` has no rule, as in JAX.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import api, core, dtypes
from jaxkit import tree_util
from jaxkit import numpy as jnp
from jaxkit.export import _shape_poly
from jaxkit.interpreters import dispatch, mlir, mlir_platforms
from jaxkit.runtime import pjrt, stablehlo_io
from jaxkit.transforms.custom_vjp import custom_vjp
from jaxkit.transforms.jit import jit, jit_object

minimum_supported_calling_convention_version = 9
maximum_supported_calling_convention_version = 10
_CALLING_CONVENTION_VERSION = 10

# Custom-call targets whose implementation promises a stable ABI (as JAX lists them): a module
# calling any other target would not run in another process or jaxlib version.
# The custom-call targets whose compatibility JAX 0.10.2 guarantees (its
# ``_CUSTOM_CALL_TARGETS_GUARANTEED_STABLE``): LAPACK on CPUs, cuSOLVER/hipSOLVER on GPUs,
# the TPU and sharding ones.
_LAPACK_ROUTINES = ("potrf", "geqrf", ("orgqr", "ungqr"), ("syevd", "heevd"), "geev", "gesdd",
                    "getrf", ("sytrd", "hetrd"), "gehrd", "gees", "trsm", "gtsv")
_CPU_TARGETS = {f"lapack_{t}{name if isinstance(name, str) else name[t in 'cz']}_ffi"
                for name in _LAPACK_ROUTINES for t in "sdcz"}
_GPU_TARGETS = {
    "cu_lu_pivots_to_permutation", "cusolver_getrf_ffi", "hip_lu_pivots_to_permutation",
    "hipsolver_getrf_ffi", "cusolver_geqrf_ffi", "cusolver_orgqr_ffi", "hipsolver_geqrf_ffi",
    "hipsolver_orgqr_ffi", "cusolver_potrf_ffi", "hipsolver_potrf_ffi", "cusolver_syevd_ffi",
    "hipsolver_syevd_ffi", "cusolver_gesvd_ffi", "cusolver_gesvdj_ffi", "hipsolver_gesvd_ffi",
    "hipsolver_gesvdj_ffi", "hipsolver_gesdd_ffi", "cusolver_sytrd_ffi", "hipsolver_sytrd_ffi",
    "cusparse_gtsv2_ffi"}
_STABLE_TARGETS = frozenset({
    *_CPU_TARGETS, *_GPU_TARGETS,
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "annotate_device_placement",
    "cu_threefry2x32_ffi", "hip_threefry2x32_ffi", "Eigh", "Qr",
    "ProductOfElementaryHouseholderReflectors", "LuDecomposition", "ApproxTopK",
    "stablehlo.dynamic_approx_top_k", "tf.call_tf_function", "tpu_custom_call",
    "AllocateBuffer", "mosaic_gpu_v2", "stablehlo.dynamic_reduce_window",
    "stablehlo.dynamic_rng_bit_generator", "stablehlo.dynamic_top_k", "shape_assertion"})
# (a module calling LAPACK needs jaxlib's LAPACK targets registered before it compiles)
_STABLE_TARGET_PATTERN = re.compile(r"^lapack_[sdcz]\w+_ffi$")


class DisabledSafetyCheck:
    """A safety check that ``export`` should skip: ``platform()`` (call on any platform) or
    ``custom_call(target)`` (allow a custom-call target without stability guarantees)."""

    def __init__(self, _impl: str):
        self._impl = _impl

    @classmethod
    def platform(cls) -> DisabledSafetyCheck:
        """Allow calling the export on a platform it was not lowered for."""
        return cls("platform")

    @classmethod
    def custom_call(cls, target_name: str) -> DisabledSafetyCheck:
        """Allow the custom-call target ``target_name`` in the exported module."""
        return cls(f"custom_call:{target_name}")

    def is_custom_call(self) -> str | None:
        """The target name of a ``custom_call`` check, else None."""
        m = re.match(r"^custom_call:(.+)$", self._impl)
        return m.group(1) if m else None

    def __str__(self) -> str:
        return self._impl

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return isinstance(other, DisabledSafetyCheck) and self._impl == other._impl

    def __hash__(self) -> int:
        return hash(self._impl)


def default_export_platform() -> str:
    """The platform ``export`` lowers for by default: that of the default backend."""
    platform = api.default_backend()
    return "cuda" if platform == "gpu" else platform


@dataclasses.dataclass(frozen=True, eq=False)
class Exported:
    """A lowered function with its calling signature (see ``export``)."""

    fun_name: str
    in_tree: tree_util.PyTreeDef
    in_avals: tuple[core.ShapedArray, ...]
    out_tree: tree_util.PyTreeDef
    out_avals: tuple[core.ShapedArray, ...]
    in_shardings_hlo: tuple[Any, ...]
    out_shardings_hlo: tuple[Any, ...]
    nr_devices: int
    platforms: tuple[str, ...]
    ordered_effects: tuple
    unordered_effects: tuple
    disabled_safety_checks: Sequence[DisabledSafetyCheck]
    mlir_module_serialized: bytes
    calling_convention_version: int
    module_kept_var_idx: tuple[int, ...]
    uses_global_constants: bool
    _get_vjp: Callable[[Exported], Exported] | None

    _serialize = None  # set by _serialization, which owns the byte format

    def __str__(self) -> str:
        # the short form, as JAX prints it inside jaxprs
        return f"Exported(fun_name={self.fun_name}, ...)"

    def mlir_module(self) -> str:
        """The StableHLO module as text."""
        with mlir.make_ir_context() as context:
            module = stablehlo_io.deserialize(context, self.mlir_module_serialized)
            return stablehlo_io.module_text(module)

    def in_shardings_jax(self, mesh: Any) -> tuple:
        """The input shardings on ``mesh``: None for each input (jaxkit exports single-device
        programs, whose HLO shardings are all None)."""
        return tuple(None for _ in self.in_shardings_hlo)

    def out_shardings_jax(self, mesh: Any) -> tuple:
        """The output shardings on ``mesh`` (all None; see ``in_shardings_jax``)."""
        return tuple(None for _ in self.out_shardings_hlo)

    def has_vjp(self) -> bool:
        """Whether ``vjp()`` is available (and so ``grad`` of ``call``)."""
        return self._get_vjp is not None

    def vjp(self) -> Exported:
        """The exported VJP: it takes the primal inputs then the output cotangents (flat) and
        returns the input cotangents."""
        if self._get_vjp is None:
            raise ValueError(f"No VJP is available for {self.fun_name}: it was deserialized "
                             "from bytes serialized without it; serialize with vjp_order >= "
                             "1 to differentiate it.")
        return self._get_vjp(self)

    def serialize(self, vjp_order: int = 0) -> bytes:
        """Bytes that ``deserialize`` turns back into this ``Exported`` (jaxkit's format, not
        JAX's flatbuffer); ``vjp_order`` VJPs are kept with it for differentiation."""
        return Exported._serialize(self, vjp_order)

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Run the exported function on arguments of the exported structure, shapes and
        dtypes (from jaxkit code: eagerly, under ``jit`` and, with a VJP, under ``grad``)."""
        return _call(self, args, kwargs)


def _check_custom_calls(module, fun_name: str, disabled: Sequence[DisabledSafetyCheck]) -> None:
    allowed = {c.is_custom_call() for c in disabled} - {None}
    bad = [t for t in stablehlo_io.custom_call_targets(module)
           if t not in _STABLE_TARGETS and t not in allowed]
    if bad:
        examples = "\n".join(f"custom_call @{t}" for t in dict.fromkeys(bad))
        raise ValueError(
            "Cannot serialize code with custom calls whose targets have no compatibility "
            "guarantees. See https://docs.jax.dev/en/latest/export/export.html"
            "#compatibility-guarantees-for-custom-calls. Examples are:\n"
            f"{examples}.\n(In {fun_name}: a pure_callback or debug.print calls back into "
            "this process and cannot be exported; for an FFI target pass "
            "disabled_checks=[DisabledSafetyCheck.custom_call(name)].)")


def export(fun_jit: Any, *, platforms: Sequence[str] | None = None,
           disabled_checks: Sequence[DisabledSafetyCheck] = ()) -> Callable[..., Exported]:
    """``export(jit(f))(*args, **kwargs)``: the ``Exported`` of ``f`` at the arguments' shapes
    and dtypes (arrays or ``ShapeDtypeStruct``s)."""
    if jit_object(fun_jit) is None:
        raise ValueError(f"Function to be exported must be the result of `jit` but is: "
                         f"{fun_jit}")
    if platforms is None:
        platforms = (default_export_platform(),)
    platforms = tuple(p.lower() for p in platforms)
    disabled_checks = tuple(disabled_checks)

    def do_export(*args: Any, **kwargs: Any) -> Exported:
        for leaf in tree_util.tree_leaves((args, kwargs)):
            shape = getattr(leaf, "shape", ())
            if any(_shape_poly.is_symbolic_dim(d) for d in shape):
                raise NotImplementedError(
                    f"export with symbolic dimensions (shape {tuple(shape)}): shape "
                    "polymorphism is not supported by jaxkit; export once per concrete shape.")
        traced = fun_jit.trace(*args, **kwargs)
        if traced.sharding_plan is not None:
            raise NotImplementedError(
                f"export of {traced.fun_name}: programs partitioned over several devices are "
                "not supported by jaxkit's export; export the single-device function.")
        if any(isinstance(a, core.AbstractToken) for a in
               (*traced.jaxpr.in_avals, *traced.jaxpr.out_avals)):
            raise NotImplementedError(f"export of {traced.fun_name}: functions with ordered "
                                      "effects (tokens) are not supported by jaxkit's export.")
        # (for other platforms than this one too; for several, the module takes the
        # platform's index first: ``interpreters.mlir_platforms``)
        lowered = traced.lower(lowering_platforms=platforms)
        module = lowered.module
        multi = len(platforms) > 1
        if multi:  # (as JAX marks a module whose global constants the caller refines)
            with module.context:
                module.operation.attributes["jax.uses_shape_polymorphism"] = \
                    mlir.ir.BoolAttr.get(True)
        _check_custom_calls(module, traced.fun_name, disabled_checks)
        in_avals, out_avals = tuple(traced.jaxpr.in_avals), tuple(traced.jaxpr.out_avals)
        return Exported(
            fun_name=traced.fun_name, in_tree=traced.in_tree, in_avals=in_avals,
            out_tree=traced.out_tree, out_avals=out_avals,
            in_shardings_hlo=(None,) * len(in_avals),
            out_shardings_hlo=(None,) * len(out_avals), nr_devices=1, platforms=platforms,
            ordered_effects=(), unordered_effects=(), disabled_safety_checks=disabled_checks,
            mlir_module_serialized=stablehlo_io.serialize(module),
            calling_convention_version=_CALLING_CONVENTION_VERSION,
            # the arguments the module takes (jit leaves the unused ones out, as JAX's)
            module_kept_var_idx=tuple(range(len(in_avals)) if lowered.program.kept is None
                                      else lowered.program.kept),
            uses_global_constants=multi,
            _get_vjp=lambda exp: _export_vjp(fun_jit, exp, platforms, disabled_checks))

    return do_export


def _differentiable(aval: core.ShapedArray) -> bool:
    return bool(np.issubdtype(aval.dtype, np.inexact))


def _export_vjp(fun_jit, exp: Exported, platforms, disabled_checks) -> Exported:
    """Export the VJP of ``fun_jit`` at ``exp``'s types: ``(*primals, *out_cts) -> in_cts``,
    all flat, as JAX's exported VJPs are. The ``float0`` cotangents of integer and boolean
    values cross the boundary as ``bool`` zeros (XLA has no empty element type; JAX lowers
    them the same way)."""
    n_in = len(exp.in_avals)

    def fun_vjp_jax(*primals_and_cts):
        primals, cts = primals_and_cts[:n_in], primals_and_cts[n_in:]

        def flat_fun(*flat):
            args, kwargs = tree_util.tree_unflatten(exp.in_tree, flat)
            return tree_util.tree_leaves(fun_jit(*args, **kwargs))

        _, pullback = api.vjp(flat_fun, *primals)
        cts = [ct if _differentiable(a) else np.zeros(a.shape, dtypes.float0)
               for ct, a in zip(cts, exp.out_avals)]
        in_cts = pullback(list(cts))
        return [ct if _differentiable(a) else jnp.zeros(a.shape, np.bool_)
                for ct, a in zip(in_cts, exp.in_avals)]

    specs = [api.ShapeDtypeStruct(a.shape, a.dtype) for a in exp.in_avals]
    specs += [api.ShapeDtypeStruct(a.shape, a.dtype if _differentiable(a) else np.bool_)
              for a in exp.out_avals]
    return export(jit(fun_vjp_jax), platforms=platforms,
                  disabled_checks=disabled_checks)(*specs)


# --------------------------------------------------------------------------------------------
# Calling an Exported
# --------------------------------------------------------------------------------------------

def _arg_label(path: tuple) -> str:
    head, rest = path[0], path[1:]
    return ("args" if getattr(head, "idx", 0) == 0 else "kwargs") + tree_util.keystr(rest)


def _check_call_args(exp: Exported, args: tuple, kwargs: dict) -> list:
    current = default_export_platform()
    if (current not in exp.platforms
            and DisabledSafetyCheck.platform() not in exp.disabled_safety_checks):
        raise ValueError(f"Function '{exp.fun_name}' was exported for platforms "
                         f"'{exp.platforms}' but it is used on '{(current,)}'.")
    with_paths, in_tree = tree_util.tree_flatten_with_path((args, kwargs))
    if in_tree != exp.in_tree:
        raise ValueError(
            "The invocation args and kwargs must have the same pytree structure as when the "
            f"function '{exp.fun_name}' was exported, but they differ: called with "
            f"{in_tree}, exported with {exp.in_tree}.")
    flat = []
    for (path, x), aval in zip(with_paths, exp.in_avals):
        shape, dtype = np.shape(x), core.get_aval(x).dtype
        label = _arg_label(path)
        shape = tuple(shape)
        if len(shape) != len(aval.shape):
            raise ValueError(f"Rank mismatch for {label}: expected {aval.shape} and called "
                             f"with {shape}")
        for i, (want, got) in enumerate(zip(aval.shape, shape)):
            if want != got:
                raise ValueError(f"Shape mismatch for {label}.shape[{i}] (expected same "
                                 f"constant): expected {aval.shape} and called with {shape}")
        if np.dtype(dtype) != np.dtype(aval.dtype):
            raise ValueError(f"Dtype mismatch for {label}: expected {np.dtype(aval.dtype)} and "
                             f"called with {np.dtype(dtype)}")
        flat.append(x)
    return flat


def _call(exp: Exported, args: tuple, kwargs: dict) -> Any:
    flat = _check_call_args(exp, args, kwargs)

    @custom_vjp
    def f_flat(*xs):
        return tuple(call_exported_p.bind(*xs, exported=exp))

    def f_flat_vjp_fwd(*xs):
        return f_flat(*xs), xs

    def f_flat_vjp_bwd(residuals, cts):
        # integer and boolean values have float0 cotangents: bool zeros in the exported VJP
        cts = [ct if _differentiable(a) else np.zeros(a.shape, np.bool_)
               for ct, a in zip(cts, exp.out_avals)]
        in_cts = exp.vjp().call(*residuals, *cts)
        return tuple(ct if _differentiable(a) else np.zeros(a.shape, dtypes.float0)
                     for ct, a in zip(in_cts, exp.in_avals))

    f_flat.defvjp(f_flat_vjp_fwd, f_flat_vjp_bwd)
    return tree_util.tree_unflatten(exp.out_tree, list(f_flat(*flat)))


def _call_exported_abstract_eval(*avals, exported: Exported):
    return list(exported.out_avals)


def _call_exported_lowering(ctx: mlir.LoweringRuleContext, *args, exported: Exported):
    module = stablehlo_io.deserialize(mlir.make_ir_context(), exported.mlir_module_serialized)
    if any(_STABLE_TARGET_PATTERN.match(t) for t in stablehlo_io.custom_call_targets(module)):
        pjrt.lapack_target("getrf_ffi", np.float32)  # registers jaxlib's LAPACK targets
    name = stablehlo_io.inline_module(ctx.module_context.module, module,
                                      f"call_exported_{exported.fun_name}")
    args = [args[i] for i in exported.module_kept_var_idx]
    if len(exported.platforms) > 1:  # the module takes the platform's index first
        args = [_platform_index(ctx.module_context, exported), *args]
    return stablehlo_io.call(name, args,
                             [mlir.aval_to_ir_type(a) for a in exported.out_avals])


def _platform_index(mctx: Any, exported: Exported) -> Any:
    """The index among ``exported.platforms`` of the platform the caller is lowered for (the
    first where the platform check is disabled and it is not one of them); for a caller
    lowered for several platforms, the index for each of them."""
    def index(platform: str) -> int:
        if platform in exported.platforms:
            return exported.platforms.index(platform)
        if DisabledSafetyCheck.platform() in exported.disabled_safety_checks:
            return 0
        raise ValueError(f"Function '{exported.fun_name}' was lowered for platforms "
                         f"'{exported.platforms}' but it is used on '{(platform,)}'.")

    if len(mctx.platforms) > 1:
        return mlir_platforms.branch_index(mctx, [index(p) for p in mctx.platforms])
    return mlir.ir_constant(np.int32(index(mctx.platform)))


call_exported_p = core.Primitive("call_exported")
call_exported_p.multiple_results = True
call_exported_p.def_impl(lambda *args, **params: dispatch.apply_primitive(
    call_exported_p, *args, **params))
call_exported_p.def_abstract_eval(_call_exported_abstract_eval)
mlir.register_lowering(call_exported_p, _call_exported_lowering)
