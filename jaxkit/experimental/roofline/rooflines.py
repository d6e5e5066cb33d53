"""jaxkit's roofline rules, one per primitive family, as JAX's ``rooflines`` counts them.

Every primitive of jaxkit's ``lax``, ``random`` and ``transforms`` packages first gets the
standard rule (no cost of its own: data movement that XLA folds away), then the families
that compute get theirs: elementwise ops one flop per element and their operands' and
result's bytes; matrix products ``2 * M * N * K`` flops (fused and unfused); convolutions
their valid multiply-adds; reductions ``n - 1`` adds per result; gathers and scatters their
index checks and update functions; callbacks their transfers; collectives their
interconnect bytes and hops per mesh axis, modelled on rings (and, for ``ppermute``, on the
links a torus route uses).
"""
from __future__ import annotations

import importlib
import itertools
import pkgutil
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from jaxkit import core
from jaxkit import lax
from jaxkit import random as _random_pkg
from jaxkit import transforms as _transforms_pkg
from jaxkit.api import ShapeDtypeStruct
from jaxkit.experimental.roofline import roofline
from jaxkit.lax import convolution, parallel_vma
from jaxkit.lax.gather_scatter import GatherScatterMode
from jaxkit.transforms import callback

__all__ = ["prim"]

# One fused multiply-add counts as two flops.
_FMA_FLOPS_FACTOR = 2


def _all_primitives() -> list[core.Primitive]:
    """The primitives defined in jaxkit's lax, random and transforms packages."""
    found: dict[core.Primitive, None] = {}
    for pkg in (lax, _random_pkg, _transforms_pkg):
        modules = [pkg] + [importlib.import_module(info.name) for info in
                           pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
        for module in modules:
            for value in vars(module).values():
                if isinstance(value, core.Primitive):
                    found[value] = None
    return list(found)


for prim in _all_primitives():
    roofline.register_standard_roofline(prim)


def _shapes(avals) -> list[roofline.RooflineShape]:
    return [roofline.RooflineShape.from_aval(a) for a in avals]


def _unary_roofline(ctx: roofline.RooflineRuleContext, *args, **kw) -> roofline.RooflineResult:
    (x,), (out,) = _shapes(ctx.avals_in), _shapes(ctx.avals_out)
    return roofline.RooflineResult(unfused_flops=x.size, unfused_hbm_bytes=x.bytes + out.bytes)


for prim in (lax.abs_p, lax.acos_p, lax.asin_p,
             lax.atan_p, lax.cbrt_p, lax.ceil_p,
             lax.conj_p, lax.cos_p, lax.cosh_p,
             lax.exp_p, lax.expm1_p, lax.floor_p,
             lax.imag_p, lax.integer_pow_p, lax.is_finite_p,
             lax.log_p, lax.log1p_p, lax.logistic_p,
             lax.neg_p, lax.not_p, lax.real_p, lax.round_p,
             lax.rsqrt_p, lax.sign_p, lax.sin_p,
             lax.sinh_p, lax.sqrt_p, lax.square_p,
             lax.tan_p, lax.bessel_i0e_p, lax.bessel_i1e_p,
             lax.digamma_p, lax.erf_inv_p, lax.erf_p, lax.erfc_p,
             lax.lgamma_p):
    roofline.register_roofline(prim)(_unary_roofline)


def _binary_roofline(ctx: roofline.RooflineRuleContext, *args,
                     **kw) -> roofline.RooflineResult:
    (lhs, rhs), (out,) = _shapes(ctx.avals_in), _shapes(ctx.avals_out)
    # lax operands have equal ranks (or size-1 dimensions); JAX pairs dimensions from the
    # front, and so does this, so the counts agree for any operand shapes.
    broadcast = [max(a, b) for a, b in itertools.zip_longest(lhs.shape, rhs.shape,
                                                             fillvalue=1)]
    return roofline.RooflineResult(unfused_flops=int(np.prod(broadcast)),
                                   unfused_hbm_bytes=lhs.bytes + rhs.bytes + out.bytes)


for prim in (lax.add_p, lax.sub_p, lax.mul_p, lax.div_p,
             lax.rem_p, lax.and_p, lax.or_p, lax.xor_p,
             lax.gt_p, lax.lt_p, lax.ge_p, lax.le_p,
             lax.eq_p, lax.ne_p, lax.min_p, lax.max_p):
    roofline.register_roofline(prim)(_binary_roofline)


def _cumulative_roofline(ctx: roofline.RooflineRuleContext, *args, axis: int,
                         **kw) -> roofline.RooflineResult:
    (x,), (out,) = _shapes(ctx.avals_in), _shapes(ctx.avals_out)
    # JAX counts one pass along the scanned axis.
    return roofline.RooflineResult(unfused_flops=x.shape[axis],
                                   unfused_hbm_bytes=x.bytes + out.bytes)


for prim in (lax.cummax_p, lax.cummin_p, lax.cumprod_p,
             lax.cumsum_p):
    roofline.register_roofline(prim)(_cumulative_roofline)


@roofline.register_roofline(lax.cumlogsumexp_p)
def _cumlogsumexp_roofline(ctx: roofline.RooflineRuleContext, *args, axis: int,
                           **kw) -> roofline.RooflineResult:
    (x,), (out,) = _shapes(ctx.avals_in), _shapes(ctx.avals_out)
    # An exp and an add per element along the axis (and one log): about 2 flops each.
    return roofline.RooflineResult(unfused_flops=2 * x.shape[axis],
                                   unfused_hbm_bytes=x.bytes + out.bytes)


@roofline.register_roofline(lax.dot_general_p)
def _dot_general_roofline(ctx: roofline.RooflineRuleContext, *args, dimension_numbers,
                          **kw) -> roofline.RooflineResult:
    (lhs, rhs), (out,) = _shapes(ctx.avals_in), _shapes(ctx.avals_out)
    (lhs_contract, _), (lhs_batch, _) = dimension_numbers
    # lhs.size * rhs.size counts every pair; dividing by the contracted and batch sizes
    # leaves one multiply-add per (output element, contracted index).
    flops = (_FMA_FLOPS_FACTOR * lhs.size * rhs.size
             / np.prod([lhs.shape[i] for i in lhs_contract])
             / np.prod([lhs.shape[i] for i in lhs_batch]))
    hbm = 0
    if not ctx.pin_lhs_in_vmem:
        hbm += lhs.bytes + out.bytes
    if not ctx.pin_rhs_in_vmem:
        hbm += rhs.bytes
    return roofline.RooflineResult(flops=int(flops), unfused_flops=int(flops), hbm_bytes=hbm,
                                   unfused_hbm_bytes=hbm)


def _valid_positions_one_dim(stride: int, base_dilation: int, window_dilation: int,
                             kernel: int, size_in: int, size_out: int,
                             padding: tuple[int, int]) -> int:
    """How many (output position, kernel tap) pairs of one spatial dimension read a real
    input element (not padding, not a hole of the input's dilation)."""
    low, high = padding
    # Two shapes XLA makes of transposed convolutions, where the general count below is
    # quadratic but the answer is known.
    if (size_in == size_out == kernel == base_dilation and window_dilation == 1
            and max(1, size_in - 1) == stride and low == 0 and high == 0):
        return size_in
    if (size_in == 1 and kernel == size_out and window_dilation == 1 and base_dilation == 1
            and stride == 1 and low == size_out - 1 and high == size_out - 1):
        return size_out
    count = 0
    for k in range(kernel):
        if stride == 1 and base_dilation == 1:  # a contiguous range of outputs per tap
            start = low - k * window_dilation
            count += max(min(size_in + start, size_out) - max(0, start), 0)
            continue
        for o in range(size_out):
            undilated = o * stride - low + k * window_dilation
            index = int(undilated / base_dilation)
            if undilated == index * base_dilation and 0 <= index < size_in:
                count += 1
    return count


@roofline.register_roofline(lax.conv_general_dilated_p)
def _conv_general_dilated_roofline(ctx: roofline.RooflineRuleContext, *args,
                                   window_strides: Sequence[int],
                                   padding: Sequence[tuple[int, int]],
                                   lhs_dilation: Sequence[int], rhs_dilation: Sequence[int],
                                   dimension_numbers, batch_group_count: int,
                                   **kw) -> roofline.RooflineResult:
    (lhs, rhs), (out,) = _shapes(ctx.avals_in), _shapes(ctx.avals_out)
    dnums = convolution.conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
    positions = 1
    for d, (li, ri, oi) in enumerate(zip(dnums.lhs_spec[2:], dnums.rhs_spec[2:],
                                         dnums.out_spec[2:])):
        positions *= _valid_positions_one_dim(
            window_strides[d], lhs_dilation[d], rhs_dilation[d], rhs.shape[ri], lhs.shape[li],
            out.shape[oi], padding[d])
    batch = lhs.shape[dnums.lhs_spec[0]] / batch_group_count
    fmas = rhs.shape[dnums.rhs_spec[1]] * out.shape[dnums.out_spec[1]] * batch * positions
    return roofline.RooflineResult(unfused_flops=int(fmas * _FMA_FLOPS_FACTOR),
                                   unfused_hbm_bytes=lhs.bytes + rhs.bytes + out.bytes)


def _zeros_if_one_sized(ctx: roofline.RooflineRuleContext,
                        axes: tuple[str, ...]) -> roofline.RooflineResult | None:
    if np.prod([_axis_sizes(ctx)[a] for a in axes]) > 1:
        return None
    return roofline.RooflineResult(ici_bytes={a: 0 for a in axes},
                                   ici_latency={a: 0 for a in axes})


def _axis_sizes(ctx: roofline.RooflineRuleContext) -> dict[str, int]:
    if ctx.mesh is None:
        raise ValueError(f"the roofline of '{ctx.primitive}' needs the mesh its axes live "
                         "on: pass mesh=, in_specs= and out_specs= to roofline")
    return dict(ctx.mesh.shape)


def _ring_collective_roofline(ctx: roofline.RooflineRuleContext, *args,
                              axes: tuple[str, ...], is_reduce: bool = True,
                              **kw) -> roofline.RooflineResult:
    axes = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)
    if (zeros := _zeros_if_one_sized(ctx, axes)) is not None:
        return zeros
    mesh = _axis_sizes(ctx)
    shard = roofline.RooflineShape.total_bytes(ctx.avals_in)
    if is_reduce:
        shard /= np.prod([mesh[a] for a in axes])
    # The largest axis is the bottleneck; the data is split over the axes, and each ring
    # phase sends (size - 1) shards before the shard grows by the axis size.
    ordered = sorted(axes, key=lambda a: mesh[a], reverse=True)
    shard //= len(ordered)
    ici_bytes = 0
    for a in ordered:
        ici_bytes += shard * (mesh[a] - 1)
        shard *= mesh[a]
    latency = mesh[ordered[0]] * len(ordered)
    return roofline.RooflineResult(ici_bytes={a: int(ici_bytes) for a in ordered},
                                   ici_latency={a: int(latency) for a in ordered})


roofline.register_roofline(lax.reduce_scatter_p)(
    lambda ctx, *args, axis_name, **kw: _ring_collective_roofline(ctx, *args, axes=axis_name,
                                                                  **kw))
roofline.register_roofline(lax.all_gather_p)(
    lambda ctx, *args, axis_name, **kw: _ring_collective_roofline(
        ctx, *args, axes=axis_name, is_reduce=False, **kw))


def _scalar_collective_roofline(ctx: roofline.RooflineRuleContext, *args,
                                axes: tuple[str, ...], **kw) -> roofline.RooflineResult:
    ctx = replace(ctx, avals_in=[core.ShapedArray((1,), s.dtype)
                                 for s in _shapes(ctx.avals_in)])
    return _ring_collective_roofline(ctx, *args, axes=axes, is_reduce=False, **kw)


roofline.register_roofline(lax.pmin_p)(_scalar_collective_roofline)
roofline.register_roofline(lax.pmax_p)(_scalar_collective_roofline)


@roofline.register_roofline(lax.psum_p)
@roofline.register_roofline(parallel_vma.psum_invariant_p)  # psum in a check_vma body
def _psum_roofline(ctx: roofline.RooflineRuleContext, *args, axes: tuple[str, ...],
                   **kw) -> roofline.RooflineResult:
    # An all-reduce is a reduce-scatter then an all-gather: twice a ring's traffic.
    ring = _ring_collective_roofline(ctx, *args, axes=axes, **kw)
    return roofline.RooflineResult(ici_bytes={k: 2 * v for k, v in ring.ici_bytes.items()},
                                   ici_latency={k: 2 * v for k, v in ring.ici_latency.items()})


@roofline.register_roofline(lax.all_to_all_p)
def _all_to_all_roofline(ctx: roofline.RooflineRuleContext, *args,
                         axis_name: tuple[str, ...], **kw) -> roofline.RooflineResult:
    axis_name = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    if (zeros := _zeros_if_one_sized(ctx, axis_name)) is not None:
        return zeros
    mesh = _axis_sizes(ctx)
    size = roofline.RooflineShape.total_bytes(ctx.avals_in) * np.prod(
        [mesh[a] for a in axis_name])
    smallest = min(axis_name, key=lambda a: mesh[a])
    bisection = mesh[smallest] ** (len(axis_name) - 1)
    if mesh[smallest] > 2:
        bisection *= 2  # a ring with wraparound has two links across the cut
    ici_bytes = size / 2 / bisection  # half the data crosses the bisection
    latency = sum(mesh[a] / 2 for a in axis_name)
    return roofline.RooflineResult(ici_bytes={a: int(ici_bytes) for a in axis_name},
                                   ici_latency={a: int(latency) for a in axis_name})


@roofline.register_roofline(lax.ppermute_p)
def _ppermute_roofline(ctx: roofline.RooflineRuleContext, *args,
                       axis_name: tuple[str, ...], perm: tuple[tuple[int, int], ...],
                       **kw) -> roofline.RooflineResult:
    axis_name = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    if (zeros := _zeros_if_one_sized(ctx, axis_name)) is not None:
        return zeros
    mesh = _axis_sizes(ctx)
    dims = [mesh.get(a, 1) for a in axis_name]
    shard = roofline.RooflineShape.total_bytes(ctx.avals_in)
    # Each transfer walks the shorter way round each axis; count transfers per link.
    links: dict[tuple, float] = defaultdict(float)
    latency = 0
    for src, dst in perm:
        if src == dst:
            continue
        src_at = tuple(int(i) for i in np.unravel_index(src, dims))
        dst_at = tuple(int(i) for i in np.unravel_index(dst, dims))
        hops = 0
        for i, size in enumerate(dims):
            if src_at[i] == dst_at[i]:
                continue
            forward = (dst_at[i] - src_at[i]) % size
            backward = (src_at[i] - dst_at[i]) % size
            step = 1 if forward <= backward else -1
            pos = src_at[i]
            while pos != dst_at[i]:
                here = src_at[:i] + (pos,) + src_at[i + 1:]
                pos = (pos + step) % size
                there = here[:i] + (pos,) + here[i + 1:]
                links[tuple(sorted([here, there]))] += 1
            hops += min(forward, backward)
        latency = max(latency, hops)
    ici_bytes = shard * max(links.values(), default=0)
    return roofline.RooflineResult(ici_bytes={a: int(ici_bytes) for a in axis_name},
                                   ici_latency={a: int(latency) for a in axis_name})


def _gather_flops(mode, indices_size: int, output_size: int) -> int:
    if GatherScatterMode.from_any(mode) == GatherScatterMode.FILL_OR_DROP:
        # Upper and lower bound checks, their `and`, a reduce per window (4 per index),
        # then a select per output element.
        return 4 * indices_size + output_size
    return 0


@roofline.register_roofline(lax.gather_p)
def _gather_roofline(ctx: roofline.RooflineRuleContext, *args, mode,
                     **kw) -> roofline.RooflineResult:
    (_, indices), (out,) = _shapes(ctx.avals_in), _shapes(ctx.avals_out)
    # A gather copies output-many elements (read and write) and reads the indices.
    return roofline.RooflineResult(unfused_flops=_gather_flops(mode, indices.size, out.size),
                                   unfused_hbm_bytes=2 * out.bytes + indices.bytes)


def _scatter_roofline(ctx: roofline.RooflineRuleContext, *args,
                      **kw) -> roofline.RooflineResult:
    """The update function's flops per element (its roofline on scalars) times the number
    of updates; memory: operand, result and updates (three update-sized accesses) and the
    indices."""
    _, indices, updates = _shapes(ctx.avals_in)
    update_jaxpr = kw.get("update_jaxpr")
    flops = 0
    if update_jaxpr:
        scalars = [ShapeDtypeStruct((), updates.dtype) for _ in update_jaxpr.invars]
        _, per_element = roofline.roofline(
            lambda *xs: core.eval_jaxpr(update_jaxpr, [], *xs))(*scalars)
        flops = per_element.unfused_flops * updates.size
    return roofline.RooflineResult(unfused_flops=flops,
                                   unfused_hbm_bytes=3 * updates.bytes + indices.bytes)


for prim in (lax.scatter_add_p, lax.scatter_max_p,
             lax.scatter_min_p, lax.scatter_mul_p,
             lax.scatter_sub_p, lax.scatter_p):
    roofline.register_roofline(prim)(_scatter_roofline)


@roofline.register_roofline(lax.reduce_sum_p)
def _reduce_sum_roofline(ctx: roofline.RooflineRuleContext, *args, axes: tuple[int, ...],
                         **kw) -> roofline.RooflineResult:
    (x,) = _shapes(ctx.avals_in)
    reduced = np.prod([x.shape[i] for i in axes])
    kept = np.prod([x.shape[i] for i in set(range(len(x.shape))) - set(axes)])
    # n - 1 adds per result; the result doubles as the accumulator.
    return roofline.RooflineResult(unfused_flops=int((reduced - 1) * kept),
                                   unfused_hbm_bytes=int(x.dtype.itemsize * (x.size + kept)))


@roofline.register_roofline(lax.select_n_p)
def _select_n_roofline(ctx: roofline.RooflineRuleContext, *args,
                       **kw) -> roofline.RooflineResult:
    (x, *_), (out,) = _shapes(ctx.avals_in), _shapes(ctx.avals_out)
    return roofline.RooflineResult(unfused_flops=out.size,
                                   unfused_hbm_bytes=x.bytes + out.bytes)


@roofline.register_roofline(callback.pure_callback_p)
@roofline.register_roofline(callback.io_callback_p)
def _callback_with_output_roofline(ctx: roofline.RooflineRuleContext, *args,
                                   **kw) -> roofline.RooflineResult:
    # Operands go to the host and results come back; the Python function's own work is
    # not visible here and counts as nothing.
    return roofline.RooflineResult(unfused_hbm_bytes=(
        roofline.RooflineShape.total_bytes(ctx.avals_in)
        + roofline.RooflineShape.total_bytes(ctx.avals_out)))


@roofline.register_roofline(callback.debug_callback_p)
def _debug_callback_roofline(ctx: roofline.RooflineRuleContext, *args,
                             **kw) -> roofline.RooflineResult:
    return roofline.RooflineResult(
        unfused_hbm_bytes=roofline.RooflineShape.total_bytes(ctx.avals_in))


