"""``conv_general_dilated``: XLA's general convolution (strides, padding, lhs/rhs dilation,
feature and batch grouping, any layout), with ``conv``, ``conv_with_general_padding`` and
``conv_transpose``, as in ``jax.lax``.

Layouts are ``ConvDimensionNumbers(lhs_spec, rhs_spec, out_spec)``: (batch, feature,
spatial...) positions of the input and output, (out feature, in feature, spatial...) of the
kernel; or strings such as ``('NCHW', 'OIHW', 'NCHW')``. The primitive is bilinear; each
operand's transpose is another convolution (JAX's ``_conv_general_dilated_transpose_lhs/rhs``),
and ``vmap`` folds the batch axis into the batch or feature dimension with grouping.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from jaxkit import core, dtypes
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax import elementwise as ew
from jaxkit.lax import sharding_rules as shr
from jaxkit.lax.standard import _all_weak, as_tuple_of_ints, standard_primitive
from jaxkit.lax.dot import PrecisionLike, _precision_attr, canonicalize_precision
from jaxkit.lax.structural import convert_element_type, full, reshape, rev
from jaxkit.runtime.sharding import NamedSharding, PartitionSpec
from jaxkit.typing import Array, ArrayLike, DTypeLike


class ConvDimensionNumbers(NamedTuple):
    """Where the batch, feature and spatial dimensions are: ``lhs_spec`` and ``out_spec`` are
    (batch, feature, spatial...), ``rhs_spec`` is (out feature, in feature, spatial...)."""

    lhs_spec: Sequence[int]
    rhs_spec: Sequence[int]
    out_spec: Sequence[int]


def conv_general_permutations(dimension_numbers) -> tuple[tuple[int, ...], ...]:
    """The (batch, feature, spatial...) permutations of layout strings like 'NCHW'."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    charpairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for i, (a, b) in enumerate(charpairs):
        if not dimension_numbers[i].count(a) == dimension_numbers[i].count(b) == 1:
            raise TypeError(f"convolution dimension_numbers[{i}] must contain the characters "
                            f"'{a}' and '{b}' exactly once, got {dimension_numbers[i]}.")
        if len(dimension_numbers[i]) != len(set(dimension_numbers[i])):
            raise TypeError(f"convolution dimension_numbers[{i}] cannot have duplicate "
                            f"characters, got {dimension_numbers[i]}.")
    if not (set(lhs_spec) - {"N", "C"} == set(rhs_spec) - {"O", "I"} ==
            set(out_spec) - {"N", "C"}):
        raise TypeError("convolution dimension_numbers elements must each have the same set of "
                        f"spatial characters, got {dimension_numbers}.")

    def getperm(spec, charpair):
        spatial = [i for i, c in enumerate(spec) if c not in charpair]
        if spec is not rhs_spec:
            spatial = sorted(spatial, key=lambda i: rhs_spec.index(spec[i]))
        return (spec.index(charpair[0]), spec.index(charpair[1])) + tuple(spatial)

    return tuple(getperm(s, c) for s, c in zip(dimension_numbers, charpairs))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """``dimension_numbers`` (None, layout strings or ConvDimensionNumbers) in canonical
    form."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return ConvDimensionNumbers(*(as_tuple_of_ints(s, "conv dimension_numbers")
                                      for s in dimension_numbers))
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError("convolution requires lhs and rhs ndim to be equal, got "
                        f"{len(lhs_shape)} and {len(rhs_shape)}.")
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if not isinstance(dimension_numbers, (list, tuple)):
        raise TypeError("convolution dimension_numbers must be tuple/list or None, got "
                        f"{type(dimension_numbers)}.")
    if len(dimension_numbers) != 3:
        raise TypeError("convolution dimension_numbers list/tuple must be length 3, got "
                        f"{len(dimension_numbers)}.")
    if not all(isinstance(e, str) for e in dimension_numbers):
        raise TypeError("convolution dimension_numbers elements must be strings, got "
                        f"{tuple(map(type, dimension_numbers))}.")
    for i, e in enumerate(dimension_numbers):
        if len(e) != len(lhs_shape):
            raise TypeError(f"convolution dimension_numbers[{i}] must have len equal to the "
                            f"ndim of lhs and rhs, got {len(e)} for lhs and rhs shapes "
                            f"{tuple(lhs_shape)} and {tuple(rhs_shape)}.")
    return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))


def padtype_to_pads(in_shape, window_shape, window_strides, padding) -> list[tuple[int, int]]:
    """'SAME' (extra padding at the end), 'SAME_LOWER' (at the start) or 'VALID' as
    (low, high) pairs per spatial dimension."""
    kind = padding.upper()
    if kind not in ("SAME", "SAME_LOWER", "VALID"):
        raise RuntimeError("Unrecognized padding type: expected 'VALID', 'SAME', or "
                           f"'SAME_LOWER', got {padding}.")
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    pads = []
    for d, w, s in zip(in_shape, window_shape, window_strides):
        out = -(-int(d) // int(s))
        size = max((out - 1) * int(s) + int(w) - int(d), 0)
        pads.append((size // 2, size - size // 2) if kind == "SAME"
                    else (size - size // 2, size // 2))
    return pads


def _dilate_shape(shape, dilation):
    return tuple(0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dilation))


# ---- conv_general_dilated ------------------------------------------------------------------
def conv_general_dilated(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int],
                         padding: str | Sequence[tuple[int, int]],
                         lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers=None, feature_group_count: int = 1,
                         batch_group_count: int = 1, precision: PrecisionLike = None,
                         preferred_element_type: DTypeLike | None = None,
                         out_sharding=None) -> Array:
    """General n-d convolution with strides, padding ('SAME', 'SAME_LOWER', 'VALID' or
    (low, high) pairs), input (transposed-conv) and kernel (atrous) dilation, and grouping.
    Lowers to ``stablehlo.convolution``. ``out_sharding`` (a sharding or a spec over the
    mesh in context) lays the result out over Explicit mesh axes."""
    out_sharding = shr.resolve_out_sharding("conv_general_dilated", out_sharding)
    lhs_shape, rhs_shape = np.shape(lhs), np.shape(rhs)
    dnums = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    nspatial = len(lhs_shape) - 2
    lhs_dilation = (1,) * nspatial if lhs_dilation is None else \
        as_tuple_of_ints(lhs_dilation, "lhs_dilation")
    rhs_dilation = (1,) * nspatial if rhs_dilation is None else \
        as_tuple_of_ints(rhs_dilation, "rhs_dilation")
    window_strides = as_tuple_of_ints(window_strides, "window_strides")
    if isinstance(padding, str):
        if any(d != 1 for d in lhs_dilation):
            raise ValueError("String padding is not implemented for transposed convolution "
                             "using this op. Please either exactly specify the required "
                             "padding or use conv_transpose.")
        in_spatial = [lhs_shape[i] for i in dnums.lhs_spec[2:]]
        window = _dilate_shape([rhs_shape[i] for i in dnums.rhs_spec[2:]], rhs_dilation)
        padding = padtype_to_pads(in_spatial, window, window_strides, padding)
    try:
        padding = tuple((int(lo), int(hi)) for lo, hi in padding)
    except (ValueError, TypeError) as e:
        raise ValueError("padding argument to conv_general_dilated should be a string or a "
                         f"sequence of (low, high) pairs, got {padding}") from e
    pet = (None if preferred_element_type is None
           else dtypes.check_and_canonicalize_user_dtype(preferred_element_type,
                                                         "conv_general_dilated"))
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dnums,
        feature_group_count=int(feature_group_count), batch_group_count=int(batch_group_count),
        precision=canonicalize_precision(precision), preferred_element_type=pet,
        out_sharding=out_sharding)  # its spec as given, as JAX keeps it


def _conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
    """The output shape of a convolution in canonical (N, C, spatial...) order."""
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected "
                        f"{len(lhs_shape) - 2}, got {len(pads)}.")
    padded = [d + lo + hi for d, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise ValueError("Negative padding is larger than the size of the corresponding "
                         f"dimension: got padding={pads} for lhs_shape[2:]="
                         f"{tuple(lhs_shape[2:])}")
    out_space = tuple(max((p - w) // s + 1, 0) for p, w, s in zip(padded, rhs_shape[2:],
                                                                   strides))
    return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + out_space


def _conv_general_dilated_shape_rule(lhs, rhs, *, window_strides, padding, lhs_dilation,
                                     rhs_dilation, dimension_numbers, feature_group_count,
                                     batch_group_count, **params):
    dn = dimension_numbers
    if lhs.ndim != rhs.ndim:
        raise ValueError("conv_general_dilated lhs and rhs must have the same number of "
                         f"dimensions, but got {lhs.shape} and {rhs.shape}.")
    if not feature_group_count > 0:
        raise ValueError("conv_general_dilated feature_group_count must be a positive "
                         f"integer, got {feature_group_count}.")
    lhs_features = lhs.shape[dn.lhs_spec[1]]
    quot, rem = divmod(lhs_features, feature_group_count)
    if rem:
        raise ValueError("conv_general_dilated feature_group_count must divide lhs feature "
                         f"dimension size, but {feature_group_count} does not divide "
                         f"{lhs_features}.")
    if quot != rhs.shape[dn.rhs_spec[1]]:
        raise ValueError("conv_general_dilated lhs feature dimension size divided by "
                         "feature_group_count must equal the rhs input feature dimension "
                         f"size, but {lhs_features} // {feature_group_count} != "
                         f"{rhs.shape[dn.rhs_spec[1]]}.")
    if rhs.shape[dn.rhs_spec[0]] % feature_group_count:
        raise ValueError("conv_general_dilated rhs output feature dimension size must be a "
                         f"multiple of feature_group_count, but {rhs.shape[dn.rhs_spec[0]]} "
                         f"is not a multiple of {feature_group_count}.")
    if not batch_group_count > 0:
        raise ValueError("conv_general_dilated batch_group_count must be a positive integer, "
                         f"got {batch_group_count}.")
    lhs_batch = lhs.shape[dn.lhs_spec[0]]
    if batch_group_count > 1 and lhs_batch % batch_group_count:
        raise ValueError("conv_general_dilated batch_group_count must divide lhs batch "
                         f"dimension size, but {batch_group_count} does not divide "
                         f"{lhs_batch}.")
    if rhs.shape[dn.rhs_spec[0]] % batch_group_count:
        raise ValueError("conv_general_dilated rhs output feature dimension size must be a "
                         f"multiple of batch_group_count, but {rhs.shape[dn.rhs_spec[0]]} is "
                         f"not a multiple of {batch_group_count}.")
    if batch_group_count > 1 and feature_group_count > 1:
        raise ValueError("At most one of batch_group_count and feature_group_count may be > 1, "
                         f"got batch_group_count={batch_group_count} and "
                         f"feature_group_count={feature_group_count}")
    if len(dn.rhs_spec) - 2 != len(window_strides):
        raise ValueError("conv_general_dilated window and window_strides must have the same "
                         f"number of dimensions, but got {len(dn.rhs_spec) - 2} and "
                         f"{len(window_strides)}")
    lhs_trans = _dilate_shape([lhs.shape[i] for i in dn.lhs_spec], (1, 1) + lhs_dilation)
    rhs_trans = _dilate_shape([rhs.shape[i] for i in dn.rhs_spec], (1, 1) + rhs_dilation)
    out_trans = _conv_shape_tuple(lhs_trans, rhs_trans, window_strides, padding,
                                  batch_group_count)
    return tuple(out_trans[i] for i in np.argsort(dn.out_spec))


def _conv_general_dilated_dtype_rule(lhs, rhs, *, preferred_element_type, **params):
    if lhs.dtype != rhs.dtype:
        raise TypeError("lax.conv_general_dilated requires arguments to have the same dtypes, "
                        f"got {lhs.dtype}, {rhs.dtype}.")
    if preferred_element_type is None:
        return lhs.dtype
    _validate_preferred_element_type(lhs.dtype, preferred_element_type)
    return np.dtype(preferred_element_type)


def _validate_preferred_element_type(input_dtype, preferred):
    int_to_float = (dtypes.issubdtype(input_dtype, np.integer) and
                    dtypes.issubdtype(preferred, np.floating))
    if not int_to_float:
        if any(dtypes.issubdtype(input_dtype, t) and not dtypes.issubdtype(preferred, t)
               for t in (np.integer, np.floating, np.complexfloating)):
            raise TypeError("Input type is incompatible with `preferred_element_type`. The "
                            "compatible combinations of (input_type, preferred_element_type) "
                            "are (integral, integral), (integral, floating), (floating, "
                            "floating), (complex, complex.")
        if dtypes.issubdtype(input_dtype, np.signedinteger) and \
                not dtypes.issubdtype(preferred, np.signedinteger):
            raise TypeError("`preferred_element_type` must have the same signedness as the "
                            "original type.")
    if np.dtype(preferred).itemsize < np.dtype(input_dtype).itemsize:
        raise TypeError("`preferred_element_type` must not be narrower than the original "
                        f"type, got preferred_element_type of {preferred} for result type of "
                        f"{input_dtype}.")


def _spec_transpose(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


def _reshape_axis_into(src, dst, x):
    """Merge axis ``src`` into axis ``dst`` (numbered after removing ``src``), major."""
    shape = np.shape(x)
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    new_shape = [d for i, d in enumerate(shape) if i != src]
    new_shape[dst] *= shape[src]
    return reshape(x, new_shape, perm)


def _reshape_axis_out_of(src, size1, x):
    """Split axis ``src`` into (size1, rest)."""
    shape = list(np.shape(x))
    size2, ragged = divmod(shape[src], size1)
    assert not ragged
    shape[src:src + 1] = [size1, size2]
    return reshape(x, shape)


def _conv_general_vjp_lhs_padding(in_shape, window_dimensions, window_strides, out_shape,
                                  padding, lhs_dilation, rhs_dilation):
    lhs_dilated = _dilate_shape(in_shape, lhs_dilation)
    rhs_dilated = _dilate_shape(window_dimensions, rhs_dilation)
    out_dilated = _dilate_shape(out_shape, window_strides)
    before = [r - lo - 1 for r, (lo, _) in zip(rhs_dilated, padding)]
    after = [ld + r - 1 - o - b for ld, r, o, b in zip(lhs_dilated, rhs_dilated, out_dilated,
                                                      before)]
    return tuple(zip(before, after))


def _conv_general_vjp_rhs_padding(in_shape, window_dimensions, window_strides, out_shape,
                                  padding, lhs_dilation, rhs_dilation):
    if not len(in_shape):
        return ()
    lhs_dilated = _dilate_shape(in_shape, lhs_dilation)
    rhs_dilated = _dilate_shape(window_dimensions, rhs_dilation)
    out_dilated = _dilate_shape(out_shape, window_strides)
    pads_lo = [lo for lo, _ in padding]
    pads_hi = [o - ld + r - lo - 1 for o, ld, r, lo in zip(out_dilated, lhs_dilated,
                                                          rhs_dilated, pads_lo)]
    return tuple(zip(pads_lo, pads_hi))


def _conv_general_dilated_transpose_lhs(g, lhs, rhs, *, window_strides, padding, lhs_dilation,
                                        rhs_dilation, dimension_numbers, feature_group_count,
                                        batch_group_count, precision, preferred_element_type,
                                        out_sharding=None):
    dn = dimension_numbers
    lhs_aval = lhs.aval
    rhs_shape = np.shape(rhs)
    lhs_spec, rhs_spec, out_spec = dn
    if feature_group_count > 1:
        # Move the feature groups from the kernel's output features to its input features.
        rhs = _reshape_axis_out_of(rhs_spec[0], feature_group_count, rhs)
        rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[1], rhs)
    elif batch_group_count > 1:
        rhs = _reshape_axis_out_of(rhs_spec[0], batch_group_count, rhs)
        rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[1], rhs)
        feature_group_count = batch_group_count
    trans_dn = ConvDimensionNumbers(out_spec, _spec_transpose(rhs_spec), lhs_spec)
    g_shape = np.shape(g)
    pads = _conv_general_vjp_lhs_padding(
        [lhs_aval.shape[i] for i in lhs_spec[2:]], [rhs_shape[i] for i in rhs_spec[2:]],
        window_strides, [g_shape[i] for i in out_spec[2:]], padding, lhs_dilation,
        rhs_dilation)
    revd_weights = rev(rhs, rhs_spec[2:])
    g_dtype = core.get_aval(g).dtype
    if core.get_aval(revd_weights).dtype != g_dtype:
        revd_weights = convert_element_type(revd_weights, g_dtype)
    out = conv_general_dilated(g, revd_weights, window_strides=lhs_dilation, padding=pads,
                               lhs_dilation=window_strides, rhs_dilation=rhs_dilation,
                               dimension_numbers=trans_dn,
                               feature_group_count=feature_group_count, batch_group_count=1,
                               precision=precision,
                               preferred_element_type=preferred_element_type)
    if core.get_aval(out).dtype != lhs_aval.dtype:
        out = convert_element_type(out, lhs_aval.dtype)
    if batch_group_count > 1:
        out = _reshape_axis_out_of(lhs_spec[1], batch_group_count, out)
        out = _reshape_axis_into(lhs_spec[1], lhs_spec[0], out)
    return out


def _conv_general_dilated_transpose_rhs(g, lhs, rhs, *, window_strides, padding, lhs_dilation,
                                        rhs_dilation, dimension_numbers, feature_group_count,
                                        batch_group_count, precision, preferred_element_type,
                                        out_sharding=None):
    dn = dimension_numbers
    if np.size(g) == 0:
        # Avoid a degenerate convolution whose kernel has spatial size 0.
        return ad.Zero(rhs.aval)
    lhs_shape, rhs_aval = np.shape(lhs), rhs.aval
    lhs_trans, rhs_trans, out_trans = map(_spec_transpose, dn)
    if batch_group_count > 1:
        feature_group_count, batch_group_count = batch_group_count, 1
    elif feature_group_count > 1:
        feature_group_count, batch_group_count = 1, feature_group_count
    trans_dn = ConvDimensionNumbers(lhs_trans, out_trans, rhs_trans)
    g_shape = np.shape(g)
    pads = _conv_general_vjp_rhs_padding(
        [lhs_shape[i] for i in dn.lhs_spec[2:]], [rhs_aval.shape[i] for i in dn.rhs_spec[2:]],
        window_strides, [g_shape[i] for i in dn.out_spec[2:]], padding, lhs_dilation,
        rhs_dilation)
    g_dtype = core.get_aval(g).dtype
    if core.get_aval(lhs).dtype != g_dtype:
        lhs = convert_element_type(lhs, g_dtype)
    out = conv_general_dilated(lhs, g, window_strides=rhs_dilation, padding=pads,
                               lhs_dilation=lhs_dilation, rhs_dilation=window_strides,
                               dimension_numbers=trans_dn,
                               feature_group_count=feature_group_count,
                               batch_group_count=batch_group_count, precision=precision,
                               preferred_element_type=preferred_element_type)
    if core.get_aval(out).dtype != rhs_aval.dtype:
        out = convert_element_type(out, rhs_aval.dtype)
    return out


def _conv_general_dilated_batch(axis_data, args, dims, *, window_strides, padding, lhs_dilation,
                                rhs_dilation, dimension_numbers, feature_group_count,
                                batch_group_count, precision, preferred_element_type,
                                out_sharding=None):
    (lhs, rhs), (lhs_bdim, rhs_bdim) = args, dims
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    params = {"window_strides": window_strides, "padding": padding,
              "lhs_dilation": lhs_dilation, "rhs_dilation": rhs_dilation,
              "dimension_numbers": dimension_numbers, "precision": precision,
              "preferred_element_type": preferred_element_type}

    def conv(x, y, fgc=feature_group_count, bgc=batch_group_count, fold=None):
        # the batch is folded into result dimension ``fold``: over an Explicit vmapped mesh
        # axis that dimension is split over it too (it must not be split already); a batched
        # grouped kernel has no rule with out_sharding (JAX's NotImplementedError)
        extra = {}
        if out_sharding is not None:
            spec = list(out_sharding.spec)
            spec += [None] * (len(out_spec) - len(spec))
            if fold is None:
                raise NotImplementedError(
                    "batching rule for 'conv_general_dilated' with out_sharding and a batched "
                    "grouped kernel is not implemented (as in JAX)")
            if axis_data.explicit_mesh_axis is not None:
                if spec[fold] is not None:
                    raise NotImplementedError(
                        "batching rule for 'conv_general_dilated' with out_sharding: the "
                        "batch cannot be folded into a dimension that is split already")
                spec[fold] = axis_data.explicit_mesh_axis
            extra["out_sharding"] = NamedSharding(out_sharding.mesh, PartitionSpec(*spec))
        return conv_general_dilated_p.bind(x, y, feature_group_count=fgc,
                                           batch_group_count=bgc, **params, **extra)

    size = batching.batch_size(args, dims)
    if size == 0:
        # Folding a size-0 batch into another axis is not possible: the result is empty.
        lhs_aval, rhs_aval = core.get_aval(lhs), core.get_aval(rhs)
        unbatched = [a.update(shape=tuple(d for i, d in enumerate(a.shape) if i != bd))
                     if bd is not None else a for a, bd in ((lhs_aval, lhs_bdim),
                                                            (rhs_aval, rhs_bdim))]
        out = conv_general_dilated_p.abstract_eval(
            *unbatched, feature_group_count=feature_group_count,
            batch_group_count=batch_group_count, **params)
        return full((0,) + out.shape, 0, out.dtype), 0
    if lhs_bdim is not None and rhs_bdim is not None:
        if batch_group_count > 1:
            new_lhs = _reshape_axis_into(lhs_bdim, lhs_spec[0], lhs)
            out = conv(new_lhs, _reshape_axis_into(rhs_bdim, rhs_spec[0], rhs),
                       bgc=batch_group_count * size, fold=out_spec[1])
        else:
            new_lhs = _reshape_axis_into(lhs_bdim, lhs_spec[1], lhs)
            out = conv(new_lhs, _reshape_axis_into(rhs_bdim, rhs_spec[0], rhs),
                       fgc=feature_group_count * size, fold=out_spec[1])
        return _reshape_axis_out_of(out_spec[1], size, out), out_spec[1]
    if lhs_bdim is not None:
        if batch_group_count == 1:
            out = conv(_reshape_axis_into(lhs_bdim, lhs_spec[0], lhs), rhs, fold=out_spec[0])
            return _reshape_axis_out_of(out_spec[0], size, out), out_spec[0]
        new_lhs = _reshape_axis_out_of(lhs_spec[0] + int(lhs_bdim <= lhs_spec[0]),
                                       batch_group_count, lhs)
        new_lhs = _reshape_axis_into(lhs_bdim + int(lhs_spec[0] < lhs_bdim), lhs_spec[0] + 1,
                                     new_lhs)
        new_lhs = _reshape_axis_into(lhs_spec[0], lhs_spec[0], new_lhs)
        out = conv(new_lhs, rhs, fold=out_spec[0])
        return _reshape_axis_out_of(out_spec[0], size, out), out_spec[0]
    if feature_group_count == 1 and batch_group_count == 1:
        out = conv(lhs, _reshape_axis_into(rhs_bdim, rhs_spec[0], rhs), fold=out_spec[1])
        return _reshape_axis_out_of(out_spec[1], size, out), out_spec[1]
    # Groups must stay outermost in the kernel's output features: factor them out, fold the
    # batch in, put them back; the same on the output.
    groups = feature_group_count if feature_group_count > 1 else batch_group_count
    new_rhs = _reshape_axis_out_of(rhs_spec[0] + int(rhs_bdim <= rhs_spec[0]), groups, rhs)
    new_rhs = _reshape_axis_into(rhs_bdim + int(rhs_spec[0] < rhs_bdim), rhs_spec[0] + 1,
                                 new_rhs)
    new_rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[0], new_rhs)
    out = conv(lhs, new_rhs)
    out = _reshape_axis_out_of(out_spec[1], groups, out)
    out = _reshape_axis_out_of(out_spec[1] + 1, size, out)
    return _reshape_axis_into(out_spec[1], out_spec[1] + 1, out), out_spec[1]


def _complex_conv(lhs, rhs, **params):
    """A complex convolution as three real ones (Gauss's trick), since the CPU backend has
    no fast complex convolution."""
    pet = params.pop("preferred_element_type")
    if pet is not None:
        pet = np.finfo(pet).dtype

    def conv(x, y):
        return conv_general_dilated_p.bind(x, y, preferred_element_type=pet, **params)

    x_re, x_im, y_re, y_im = ew.real(lhs), ew.imag(lhs), ew.real(rhs), ew.imag(rhs)
    k1 = conv(ew.add(x_re, x_im), y_re)
    k2 = conv(x_re, ew.sub(y_im, y_re))
    k3 = conv(x_im, ew.add(y_re, y_im))
    return ew.complex(ew.sub(k1, k3), ew.add(k1, k2))


def _conv_general_dilated_lowering(ctx, lhs, rhs, *, window_strides, padding, lhs_dilation,
                                   rhs_dilation, dimension_numbers, feature_group_count,
                                   batch_group_count, precision, preferred_element_type,
                                   out_sharding=None):
    # (an ``out_sharding`` is the result's type: the equation's lowering constrains it)
    if dtypes.issubdtype(ctx.avals_in[0].dtype, np.complexfloating):
        return mlir.lower_fun(_complex_conv)(
            ctx, lhs, rhs, window_strides=window_strides, padding=padding,
            lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
            dimension_numbers=dimension_numbers, feature_group_count=feature_group_count,
            batch_group_count=batch_group_count, precision=precision,
            preferred_element_type=preferred_element_type)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    dnums = hlo.ConvDimensionNumbers.get(
        input_batch_dimension=lhs_spec[0], input_feature_dimension=lhs_spec[1],
        input_spatial_dimensions=list(lhs_spec[2:]),
        kernel_output_feature_dimension=rhs_spec[0],
        kernel_input_feature_dimension=rhs_spec[1],
        kernel_spatial_dimensions=list(rhs_spec[2:]), output_batch_dimension=out_spec[0],
        output_feature_dimension=out_spec[1], output_spatial_dimensions=list(out_spec[2:]))
    nspatial = len(rhs_spec) - 2
    pads = np.asarray(padding, np.int64).reshape(nspatial, 2)
    return hlo.ConvolutionOp(
        mlir.aval_to_ir_type(ctx.avals_out[0]), lhs, rhs, dnums, feature_group_count,
        batch_group_count, window_strides=mlir.i64_attr(window_strides),
        padding=ir.DenseIntElementsAttr.get(pads, shape=[nspatial, 2]),
        lhs_dilation=mlir.i64_attr(lhs_dilation), rhs_dilation=mlir.i64_attr(rhs_dilation),
        window_reversal=ir.DenseBoolArrayAttr.get([False] * nspatial),
        precision_config=_precision_attr(precision)).result


conv_general_dilated_p = standard_primitive(_conv_general_dilated_shape_rule,
                                            _conv_general_dilated_dtype_rule,
                                            "conv_general_dilated", _all_weak)
conv_general_dilated_p.def_param_defaults(out_sharding=None)
ad.defbilinear(conv_general_dilated_p, _conv_general_dilated_transpose_lhs,
               _conv_general_dilated_transpose_rhs)
batching.defrule(conv_general_dilated_p, _conv_general_dilated_batch)
mlir.register_lowering(conv_general_dilated_p, _conv_general_dilated_lowering)
shr.defsharding(conv_general_dilated_p, shr.conv_general_dilated_rule)


# ---- conveniences --------------------------------------------------------------------------
def conv(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int], padding: str,
         precision: PrecisionLike = None, preferred_element_type: DTypeLike | None = None
         ) -> Array:
    """``conv_general_dilated`` in NCHW/OIHW layout with 'SAME' or 'VALID' padding."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int],
                              padding, lhs_dilation: Sequence[int] | None,
                              rhs_dilation: Sequence[int] | None,
                              precision: PrecisionLike = None,
                              preferred_element_type: DTypeLike | None = None) -> Array:
    """``conv_general_dilated`` in NCHW/OIHW layout with dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


def _conv_transpose_padding(k, s, padding):
    """Low and high padding of one spatial axis of a transposed convolution."""
    if padding == "SAME":
        pad_len = k + s - 2
        pad_a = k - 1 if s > k - 1 else int(np.ceil(pad_len / 2))
    elif padding == "VALID":
        pad_len = k + s - 2 + max(k - s, 0)
        pad_a = k - 1
    elif isinstance(padding, tuple):
        pads = tuple(k - p - 1 for p in padding)
        pad_a, pad_len = pads[0], sum(pads)
    else:
        raise ValueError(f"Invalid padding mode: {padding}")
    return pad_a, pad_len - pad_a


def conv_transpose(lhs: ArrayLike, rhs: ArrayLike, strides: Sequence[int], padding,
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers=None,
                   transpose_kernel: bool = False, precision: PrecisionLike = None,
                   preferred_element_type: DTypeLike | None = None,
                   use_consistent_padding: bool = False) -> Array:
    """A fractionally strided ("transposed") convolution, with Keras's output padding
    conventions; ``transpose_kernel`` flips the kernel and swaps its feature axes."""
    lhs_shape, rhs_shape = np.shape(lhs), np.shape(rhs)
    ndims = len(lhs_shape)
    if dimension_numbers is None:
        defaults = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                    4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}
        if ndims not in defaults:
            raise ValueError("No 4+ dimensional dimension_number defaults.")
        dimension_numbers = defaults[ndims]
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    k_sdims = [rhs_shape[i] for i in dn.rhs_spec[2:]]
    if rhs_dilation is None:
        rhs_dilation = (1,) * (ndims - 2)
    if use_consistent_padding or (isinstance(padding, str) and padding in {"SAME", "VALID"}):
        effective_k = _dilate_shape(k_sdims, rhs_dilation)
        replicated = [padding] * len(strides) if isinstance(padding, str) else padding
        pads = tuple(_conv_transpose_padding(k, s, p)
                     for k, s, p in zip(effective_k, strides, replicated))
    else:
        pads = padding
    if transpose_kernel:
        rhs = rev(rhs, dn.rhs_spec[2:])
        perm = list(range(ndims))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = perm[dn.rhs_spec[1]], perm[dn.rhs_spec[0]]
        rhs = reshape(rhs, [np.shape(rhs)[p] for p in perm], perm)
    return conv_general_dilated(lhs, rhs, (1,) * (ndims - 2), pads, strides, rhs_dilation, dn,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


# ---- shape helpers (as jax.lax exports them) ---------------------------------------------------
def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1) -> tuple:
    """The output shape of a convolution of an (N, C, spatial...) input with an (O, I,
    spatial...) kernel; ``pads`` is a padding name or (low, high) pairs."""
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    return tuple(int(d) for d in _conv_shape_tuple(tuple(lhs_shape), tuple(rhs_shape),
                                                   tuple(strides), list(pads),
                                                   batch_group_count))


def _permuted_shapes(lhs_shape, rhs_shape, dimension_numbers):
    dnums = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    lhs = tuple(lhs_shape[i] for i in dnums.lhs_spec)
    rhs = tuple(rhs_shape[i] for i in dnums.rhs_spec)
    return dnums, lhs, rhs


def _unpermute(canonical, out_spec) -> tuple:
    out = [0] * len(canonical)
    for size, axis in zip(canonical, out_spec):
        out[axis] = int(size)
    return tuple(out)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                             dimension_numbers) -> tuple:
    """The output shape of ``conv_general_dilated`` (no dilation) in the output layout of
    ``dimension_numbers``."""
    dnums, lhs, rhs = _permuted_shapes(lhs_shape, rhs_shape, dimension_numbers)
    return _unpermute(conv_shape_tuple(lhs, rhs, window_strides, padding), dnums.out_spec)


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers) -> tuple:
    """The output shape of ``conv_transpose`` in the output layout of
    ``dimension_numbers``: each spatial size (i - 1) * stride + kernel, less the padding the
    transposed convolution removes."""
    dnums, lhs, rhs = _permuted_shapes(lhs_shape, rhs_shape, dimension_numbers)
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(k, s, padding)
                   for k, s in zip(rhs[2:], window_strides)]
    space = [(i - 1) * s - k + 2 + lo + hi
             for i, k, s, (lo, hi) in zip(lhs[2:], rhs[2:], window_strides, padding)]
    return _unpermute((lhs[0], rhs[0], *space), dnums.out_spec)


__all__ = ["ConvDimensionNumbers", "conv", "conv_dimension_numbers", "conv_general_dilated",
           "conv_general_dilated_p", "conv_general_permutations", "conv_general_shape_tuple",
           "conv_shape_tuple", "conv_transpose", "conv_transpose_shape_tuple",
           "conv_with_general_padding", "padtype_to_pads"]
