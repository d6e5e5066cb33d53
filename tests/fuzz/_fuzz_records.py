"""The fuzzer's op registry: one ``Op`` per function, grouped by area (elementwise, reduction,
shape, indexing, linalg, lax, special, random). Parameter strategies draw valid values and,
now and then, invalid ones (an axis out of range, a wrong permutation, a bad dtype), where both
libraries must raise the same class of error."""
from __future__ import annotations

import numpy as np
from _fuzz_core import ALL, BF16, BOOL, FLOAT, INEXACT, INT, NUMBER, SINT, UINT, Op, \
    shape_st, shapes_st, values
from hypothesis import strategies as st

REAL = INT + FLOAT
REAL_FLOAT = FLOAT


# ---- parameter strategies ------------------------------------------------------------------
def _rank(shapes):
    return len(shapes[0]) if shapes else 0


def axis_p(draw, shapes, none=True, allow_tuple=True):
    """An axis of the first argument: in range mostly, one past either end sometimes."""
    r = _rank(shapes)
    choices = [st.integers(-r - 1, r)]
    if none:
        choices.append(st.none())
    if allow_tuple and r >= 2:
        choices.append(st.lists(st.integers(-r, r - 1), min_size=1, max_size=r,
                                unique=True).map(tuple))
    return draw(st.one_of(*choices))


def reduce_p(draw, shapes):
    return {"axis": axis_p(draw, shapes), "keepdims": draw(st.booleans())}


def cum_p(draw, shapes):
    return {"axis": axis_p(draw, shapes, allow_tuple=False)}


def one_axis_p(draw, shapes):
    return {"axis": axis_p(draw, shapes, none=False, allow_tuple=False)}


def perm_p(draw, shapes):
    r = _rank(shapes)
    perm = draw(st.permutations(range(r)))
    if draw(st.integers(0, 6)) == 0:  # a wrong permutation
        perm = list(perm) + [0] if draw(st.booleans()) or not perm else list(perm[:-1])
    return {"axes": tuple(perm)}


def reshape_p(draw, shapes):
    size = int(np.prod(shapes[0]))
    options = [(size,), (-1,), (1, size), (size, 1, -1)]
    if size and size % 2 == 0:
        options += [(2, size // 2), (-1, 2)]
    options += [(size + 1,), (-1, -1), (3, -1)]  # invalid, or valid only by chance
    return {"shape": draw(st.sampled_from(options))}


def lax_reshape_p(draw, shapes):
    p = reshape_p(draw, shapes)
    return {"new_sizes": tuple(abs(d) for d in p["shape"])}


def squeeze_p(draw, shapes):
    r = _rank(shapes)
    ones = [i for i, d in enumerate(shapes[0]) if d == 1]
    return {"axis": draw(st.one_of(st.none(), st.sampled_from(ones or [0]) if r else st.none(),
                                   st.integers(-r - 1, r)))}


def roll_p(draw, shapes):
    return {"shift": draw(st.integers(-5, 5)), **cum_p(draw, shapes)}


def clip_p(draw, shapes):
    return {"min": draw(st.sampled_from([None, -1.0, 0, 2])),
            "max": draw(st.sampled_from([None, 1.0, 3, -2]))}


def take_p(draw, shapes):
    n = shapes[0][0] if shapes[0] else 1
    idx = draw(st.lists(st.integers(-n - 2, n + 2), max_size=4))
    return {"indices": np.array(idx, np.int32),
            "axis": draw(st.sampled_from([None, 0, -1, 5])),
            "mode": draw(st.sampled_from([None, "clip", "wrap", "fill", "promise_in_bounds"]))}


def index_p(draw, shapes):
    """A NumPy index into the first argument: ints (some out of range), slices, None,
    Ellipsis, integer arrays."""
    r = _rank(shapes)
    items = []
    for d in shapes[0][:draw(st.integers(0, r))]:
        kind = draw(st.integers(0, 4))
        if kind == 0:
            items.append(draw(st.integers(-d - 1, d)))
        elif kind == 1:
            items.append(slice(draw(st.integers(-4, 4) | st.none()),
                               draw(st.integers(-4, 4) | st.none()),
                               draw(st.sampled_from([None, 1, 2, -1, -2]))))
        elif kind == 2:
            items.append(None)
        elif kind == 3:
            items.append(np.array(draw(st.lists(st.integers(-d, max(d - 1, 0)), max_size=3)),
                                  np.int32))
        else:
            items.append(slice(None) if any(i is Ellipsis for i in items) else Ellipsis)
    return {"index": tuple(items)}


def at_p(draw, shapes):
    p = index_p(draw, shapes)
    return {**p, "method": draw(st.sampled_from(["set", "add", "mul", "min", "max"])),
            "mode": draw(st.sampled_from([None, "drop", "clip"]))}


def int_pow_p(draw, shapes):
    return {"y": draw(st.integers(-3, 5))}


def rounding_p(draw, shapes):
    return {"rounding_method": draw(st.sampled_from([0, 1]))}


def lax_cum_p(draw, shapes):
    r = _rank(shapes)
    return {"axis": draw(st.integers(-1, r)), "reverse": draw(st.booleans())}


def argmax_p(draw, shapes):
    r = _rank(shapes)
    return {"axis": draw(st.integers(-1, r)),
            "index_dtype": draw(st.sampled_from([np.int32, np.int16, np.float32]))}


def convert_p(draw, shapes):
    return {"new_dtype": draw(st.sampled_from(ALL))}


def bitcast_p(draw, shapes):
    return {"new_dtype": draw(st.sampled_from([np.int32, np.uint32, np.float32, np.int16,
                                               np.float16, np.uint8, BF16]))}


def reduce_precision_p(draw, shapes):
    return {"exponent_bits": draw(st.integers(1, 8)), "mantissa_bits": draw(st.integers(0, 23))}


def pad_p(draw, shapes):
    r = _rank(shapes)
    cfg = [tuple(draw(st.integers(-2, 2)) for _ in range(2)) + (draw(st.integers(0, 2)),)
           for _ in range(r + (1 if draw(st.integers(0, 9)) == 0 else 0))]
    return {"padding_config": cfg}


def slice_p(draw, shapes):
    starts, limits, strides = [], [], []
    for d in shapes[0]:
        a = draw(st.integers(0, d))
        b = draw(st.integers(a, d + (1 if draw(st.integers(0, 9)) == 0 else 0)))
        starts.append(a)
        limits.append(b)
        strides.append(draw(st.integers(1, 2)))
    return {"start_indices": tuple(starts), "limit_indices": tuple(limits),
            "strides": tuple(strides)}


def dyn_slice_p(draw, shapes):
    starts = [draw(st.integers(-d - 1, d + 1)) for d in shapes[0]]
    sizes = [draw(st.integers(0, d)) for d in shapes[0]]
    return {"start_indices": tuple(starts), "slice_sizes": tuple(sizes)}


def top_k_p(draw, shapes):
    last = shapes[0][-1] if shapes[0] else 0
    return {"k": draw(st.integers(-1, last + 1))}


def tensordot_p(draw, shapes):
    return {"axes": draw(st.sampled_from([0, 1, 2]))}


def norm_p(draw, shapes):
    return {"ord": draw(st.sampled_from([None, 1, 2, np.inf, -np.inf, "fro", 0, 3])),
            "axis": draw(st.sampled_from([None, -1, (0, 1), (-2, -1)]))}


def matrix_power_p(draw, shapes):
    return {"n": draw(st.integers(-2, 4))}


def repeat_p(draw, shapes):
    return {"repeats": draw(st.integers(0, 3)), "axis": axis_p(draw, shapes, allow_tuple=False)}


def tile_p(draw, shapes):
    return {"reps": tuple(draw(st.lists(st.integers(0, 3), max_size=3)))}


def broadcast_to_p(draw, shapes):
    shape = list(shapes[0])
    return {"shape": tuple(draw(st.lists(st.integers(1, 3), max_size=2))) + tuple(
        d if draw(st.integers(0, 5)) else d + 1 for d in shape)}


def split_p(draw, shapes):
    return {"indices_or_sections": draw(st.sampled_from([1, 2, 3, [1], [0, 2]])),
            "axis": draw(st.sampled_from([0, -1, 3]))}




# ---- argument makers for the areas with fixed argument forms -------------------------------
def square_args(n_mats=1, dtypes=(np.float32, np.complex64, np.float16, BF16), batch=True):
    """Well-conditioned square matrices (a random matrix plus n on the diagonal); sometimes
    not square, 0x0 or a bad dtype."""
    def make(draw, rng):
        n = draw(st.sampled_from([0, 1, 2, 3, 4]))
        lead = tuple(draw(st.lists(st.integers(1, 2), max_size=1))) if batch else ()
        dtype = np.dtype(draw(st.sampled_from(dtypes + ((np.int32,) if draw(st.integers(0, 9)) == 0 else ()))))
        m = n + (1 if draw(st.integers(0, 9)) == 0 else 0)
        out = []
        for _ in range(n_mats):
            a = rng.standard_normal(lead + (n, m)) + n * np.eye(n, m)
            if dtype.kind == "c":
                a = a + 1j * rng.standard_normal(lead + (n, m))
            out.append(a.astype(dtype))
        return out
    return make


def spd_args(draw, rng):
    (a,) = square_args()(draw, rng)
    if a.shape[-1] != a.shape[-2] or a.dtype.kind not in "fc":
        return [a]
    ah = np.conj(np.swapaxes(a.astype(np.complex128), -1, -2))
    return [(a.astype(np.complex128) @ ah).astype(a.dtype) if a.dtype.kind == "c"
            else (a.astype(np.float64) @ ah.real).astype(a.dtype)]


def matmul_args(draw, rng):
    n, k, m = (draw(st.integers(0, 3)) for _ in range(3))
    k2 = k if draw(st.integers(0, 7)) else k + 1
    dt = draw(st.sampled_from(NUMBER))
    dt2 = dt if draw(st.integers(0, 3)) else draw(st.sampled_from(NUMBER))
    a_shape = draw(st.sampled_from([(n, k), (k,), (2, n, k)]))
    b_shape = draw(st.sampled_from([(k2, m), (k2,), (2, k2, m), (1, k2, m)]))
    return [values(rng, a_shape, dt, 0.02), values(rng, b_shape, dt2, 0.02)]


def key_args(extra=()):
    """A raw threefry key (``uint32[2]``, any bits are a valid key), then extra arrays drawn by
    ``extra`` (``(shape, dtypes)`` pairs)."""
    def make(draw, rng):
        key = rng.integers(0, 2**32, (2,), dtype=np.uint64).astype(np.uint32)
        out = [key]
        for shape, dtypes in extra:
            dt = draw(st.sampled_from(dtypes))
            if dt.kind == "f":
                out.append((np.abs(rng.standard_normal(shape)) * 3 + 0.1).astype(dt))
            else:
                out.append(values(rng, shape, dt, 0.0))
        return out
    return make


def rshape_p(draw, shapes):
    return {"shape": draw(shape_st((0, 3)))}


def rdtype_p(dtypes=FLOAT):
    def p(draw, shapes):
        return {"shape": draw(shape_st((0, 3))), "dtype": draw(st.sampled_from(dtypes))}
    return p


def small_int_args(draw, rng):
    """Two integer arguments in [-10, 10] (bools sometimes), without the edge values."""
    shapes = draw(shapes_st(2, (0, 3), True))
    return [values(rng, shape, draw(st.sampled_from(INT + BOOL)), special=0.0)
            for shape in shapes]


# ---- the registry --------------------------------------------------------------------------
def _u(names, dtypes=ALL, **kw):
    return [Op("jnp." + n, "elementwise", 1, dtypes, **kw) for n in names.split()]


def _b(names, dtypes=ALL, **kw):
    return [Op("jnp." + n, "elementwise", 2, dtypes, **kw) for n in names.split()]


ELEMENTWISE = [
    *_u("sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh exp exp2 "
        "expm1 log log2 log10 log1p sqrt cbrt reciprocal deg2rad rad2deg sinc", INEXACT + INT),
    *_u("square abs negative sign floor ceil round trunc rint fix real imag conj angle isnan "
        "isinf isfinite signbit positive fabs nan_to_num spacing i0 logical_not"),
    *_u("invert", INT + BOOL),
    *_b("add subtract multiply divide true_divide floor_divide remainder fmod power "
        "float_power maximum minimum fmax fmin equal not_equal less less_equal greater "
        "greater_equal logical_and logical_or logical_xor"),
    *_b("arctan2 hypot copysign nextafter logaddexp logaddexp2 heaviside", REAL_FLOAT + SINT),
    *_b("bitwise_and bitwise_or bitwise_xor left_shift right_shift", INT + BOOL),
    # gcd/lcm on small values only: with the extremes of the integer types (|INT_MIN| wraps
    # to itself, among others) Euclid's loop never ends, in JAX 0.10.2 and in jaxkit alike (a
    # hang, not a mismatch: a known gap, see bench/fuzz_long.py's docstring).
    *[Op("jnp." + n, "elementwise", 2, INT + BOOL, args=small_int_args) for n in ("gcd", "lcm")],
    Op("jnp.where", "elementwise", 3, ALL),
    Op("jnp.clip", "elementwise", 1, REAL, params=clip_p),
    Op("jnp.frexp", "elementwise", 1, FLOAT),
    Op("jnp.modf", "elementwise", 1, FLOAT),
    Op("jnp.divmod", "elementwise", 2, REAL),
    Op("jnp.ldexp", "elementwise", 2, FLOAT + SINT),
]

REDUCTION = [
    *[Op("jnp." + n, "reduction", 1, ALL, params=reduce_p)
      for n in "sum prod mean var std max min all any nansum nanprod nanmax nanmin nanmean "
               "ptp count_nonzero".split()],
    *[Op("jnp." + n, "reduction", 1, ALL, params=cum_p)
      for n in "cumsum cumprod nancumsum argmax argmin".split()],
    Op("jnp.median", "reduction", 1, REAL, params=reduce_p, grad=False),
    Op("special.logsumexp", "reduction", 1, INEXACT + INT, params=reduce_p),
    Op("jnp.average", "reduction", 1, INEXACT + INT, params=cum_p),
]

SHAPE = [
    Op("jnp.reshape", "shape", params=reshape_p),
    Op("jnp.transpose", "shape", params=perm_p),
    Op("jnp.swapaxes", "shape", rank=(1, 3), call=lambda ns, x, a, b: ns.jnp.swapaxes(x, a, b),
       params=lambda d, s: {"a": d(st.integers(-2, 2)), "b": d(st.integers(-2, 2))}),
    Op("jnp.moveaxis", "shape", rank=(1, 3),
       params=lambda d, s: {"source": d(st.integers(-2, 2)), "destination": d(st.integers(-2, 2))}),
    Op("jnp.expand_dims", "shape", params=lambda d, s: {"axis": d(st.integers(-4, 4))}),
    Op("jnp.squeeze", "shape", params=squeeze_p),
    Op("jnp.flip", "shape", params=cum_p),
    Op("jnp.roll", "shape", params=roll_p),
    Op("jnp.concatenate", "shape", 2, call=lambda ns, x, y, axis: ns.jnp.concatenate([x, y], axis),
       params=cum_p, broadcast=False),
    Op("jnp.stack", "shape", 2, call=lambda ns, x, y, axis: ns.jnp.stack([x, y], axis),
       params=lambda d, s: {"axis": d(st.integers(-4, 4))}, broadcast=False),
    Op("jnp.tile", "shape", params=tile_p),
    Op("jnp.repeat", "shape", params=repeat_p),
    Op("jnp.broadcast_to", "shape", params=broadcast_to_p),
    Op("jnp.ravel", "shape"),
    Op("jnp.triu", "shape", rank=(0, 3), params=lambda d, s: {"k": d(st.integers(-2, 2))}),
    Op("jnp.tril", "shape", rank=(0, 3), params=lambda d, s: {"k": d(st.integers(-2, 2))}),
    Op("jnp.diagonal", "shape", params=lambda d, s: {"offset": d(st.integers(-2, 2))}),
    Op("jnp.trace", "shape", params=lambda d, s: {"offset": d(st.integers(-2, 2))}),
    Op("jnp.sort", "shape", dtypes=REAL + BOOL, params=cum_p),
    Op("jnp.argsort", "shape", dtypes=REAL + BOOL, params=cum_p),
    Op("jnp.split", "shape", rank=(1, 3), params=split_p),
    Op("jnp.atleast_2d", "shape"),
    Op("jnp.diff", "shape", params=lambda d, s: {"n": d(st.integers(0, 3)), "axis": d(st.integers(-2, 1))}),
    Op("jnp.pad", "shape", call=lambda ns, x, w, mode: ns.jnp.pad(x, w, mode=mode),
       params=lambda d, s: {"w": d(st.integers(0, 2)),
                            "mode": d(st.sampled_from(["constant", "edge", "reflect", "wrap"]))}),
]

INDEXING = [
    Op("jnp.take", "indexing", rank=(0, 3), params=take_p, grad=False),
    Op("getitem", "indexing", rank=(0, 3), params=index_p, call=lambda ns, x, index: ns.jnp.asarray(x)[index]),
    Op("at", "indexing", 2, rank=(0, 3), params=at_p, broadcast=True, same_dtype=True,
       call=lambda ns, x, y, index, method, mode: getattr(ns.jnp.asarray(x).at[index], method)(
           ns.jnp.asarray(y).reshape(-1)[:1].reshape(()) if np.size(y) else 0, mode=mode)),
    Op("jnp.take_along_axis", "indexing", rank=(1, 2), grad=False,
       call=lambda ns, x, axis: ns.jnp.take_along_axis(x, ns.jnp.argsort(x, axis=axis), axis=axis),
       params=lambda d, s: {"axis": d(st.integers(-2, 1))}, dtypes=REAL),
    Op("jnp.nonzero", "indexing", grad=False, vmap=False),
    Op("mask_index", "indexing", grad=False, vmap=False,
       call=lambda ns, x: ns.jnp.asarray(x)[ns.jnp.asarray(x) > 0], dtypes=REAL),
]

LINALG = [
    Op("jnp.matmul", "linalg", args=matmul_args),
    Op("jnp.dot", "linalg", args=matmul_args),
    Op("jnp.vdot", "linalg", args=matmul_args),
    Op("jnp.inner", "linalg", args=matmul_args),
    Op("jnp.outer", "linalg", args=matmul_args),
    Op("jnp.tensordot", "linalg", args=matmul_args, params=tensordot_p),
    *[Op("jnp.linalg." + n, "linalg", args=square_args(), tol=50, grad_tol=50)
      for n in "det inv slogdet pinv matrix_rank".split()],
    Op("jnp.linalg.solve", "linalg", args=square_args(2), tol=50, grad_tol=50),
    Op("jnp.linalg.cholesky", "linalg", args=spd_args, tol=50, grad_tol=50),
    Op("jnp.linalg.eigh", "linalg", args=spd_args, tol=100, grad=False),
    Op("jnp.linalg.eigvalsh", "linalg", args=spd_args, tol=100, grad_tol=100),
    Op("jnp.linalg.qr", "linalg", args=square_args(), tol=50, grad=False),
    Op("jnp.linalg.svd", "linalg", args=square_args(), tol=50, grad=False,
       call=lambda ns, a: ns.jnp.linalg.svd(a, compute_uv=False)),
    Op("jnp.linalg.norm", "linalg", args=square_args(), params=norm_p, tol=50, grad_tol=50),
    Op("jnp.linalg.matrix_power", "linalg", args=square_args(), params=matrix_power_p, tol=50,
       grad_tol=50),
    Op("jnp.linalg.cross", "linalg", 2, FLOAT + SINT, rank=(1, 2),
       call=lambda ns, a, b: ns.jnp.cross(a, b)),
]


def _l(names, nargs, dtypes, **kw):
    return [Op("lax." + n, "lax", nargs, dtypes, broadcast=False, same_dtype=True, **kw)
            for n in names.split()]


LAX = [
    *_l("add sub mul div rem pow max min atan2 nextafter", 2, NUMBER),
    *_l("eq ne lt le gt ge", 2, ALL),
    *_l("shift_left shift_right_logical shift_right_arithmetic", 2, INT),
    *_l("bitwise_and bitwise_or bitwise_xor", 2, INT + BOOL),
    *_l("population_count clz", 1, INT),
    *_l("bitwise_not", 1, INT + BOOL),
    *_l("exp2 cbrt rsqrt logistic erf_inv lgamma digamma bessel_i0e bessel_i1e sign floor "
        "ceil is_finite abs neg tan atan asinh acosh atanh expm1 log1p", 1, INEXACT),
    *_l("igamma igammac", 2, FLOAT, grad=False),
    Op("lax.integer_pow", "lax", 1, NUMBER, params=int_pow_p),
    Op("lax.round", "lax", 1, FLOAT, params=rounding_p),
    Op("lax.reduce_precision", "lax", 1, FLOAT, params=reduce_precision_p),
    Op("lax.convert_element_type", "lax", 1, ALL, params=convert_p),
    Op("lax.bitcast_convert_type", "lax", 1, NUMBER, params=bitcast_p, grad=False),
    Op("lax.cumsum", "lax", 1, NUMBER, params=lax_cum_p, rank=(1, 3)),
    Op("lax.cummax", "lax", 1, NUMBER, params=lax_cum_p, rank=(1, 3)),
    Op("lax.cumlogsumexp", "lax", 1, FLOAT, params=lax_cum_p, rank=(1, 3)),
    Op("lax.argmax", "lax", 1, REAL, params=argmax_p, rank=(1, 3)),
    Op("lax.sort", "lax", 1, REAL + BOOL, params=lambda d, s: {"dimension": d(st.integers(-1, 2))},
       rank=(1, 3)),
    Op("lax.top_k", "lax", 1, REAL, params=top_k_p, rank=(1, 3)),
    Op("lax.transpose", "lax", 1, ALL, call=lambda ns, x, axes: ns.lax.transpose(x, axes),
       params=perm_p),
    Op("lax.rev", "lax", 1, ALL, params=lambda d, s: {"dimensions": tuple(d(st.lists(
        st.integers(0, max(len(s[0]), 1)), max_size=2, unique=True)))}),
    Op("lax.pad", "lax", 1, NUMBER, call=lambda ns, x, padding_config: ns.lax.pad(
        x, np.zeros((), x.dtype), padding_config), params=pad_p),
    Op("lax.slice", "lax", 1, ALL, params=slice_p),
    Op("lax.dynamic_slice", "lax", 1, ALL, params=dyn_slice_p),
    Op("lax.reshape", "lax", 1, ALL, params=lax_reshape_p),
    Op("lax.clamp", "lax", 3, REAL, broadcast=False, same_dtype=True),
    Op("lax.select_n", "lax", 3, ALL, broadcast=False,
       call=lambda ns, p, a, b: ns.lax.select_n(p != 0 if p.dtype != np.bool_ else p, a, b)),
    Op("lax.dot", "lax", args=matmul_args),
]

_SPECIAL_F = FLOAT + INT
SPECIAL = [
    *[Op("special." + n, "special", 1, _SPECIAL_F, tol=20, grad_tol=20)
      for n in "erf erfc erfinv gammaln digamma expit logit i0e i1e i0 i1 ndtr ndtri log_ndtr "
               "entr exp1 expi spence".split()],
    *[Op("special." + n, "special", 2, _SPECIAL_F, tol=20, grad_tol=20)
      for n in "xlogy xlog1py betaln gammainc gammaincc zeta rel_entr kl_div".split()],
    Op("special.polygamma", "special", 2, FLOAT, tol=50,
       call=lambda ns, n, x: ns.special.polygamma(np.abs(n).astype(np.int32) % 3, x),
       grad=False),
    Op("special.multigammaln", "special", 1, FLOAT, tol=20,
       call=lambda ns, a, d: ns.special.multigammaln(a, d),
       params=lambda dr, s: {"d": dr(st.integers(0, 3))}),
    Op("special.softmax", "special", 1, FLOAT, params=cum_p, tol=20),
]


def _r(name, params, extra=(), **kw):
    return Op("random." + name, "random", args=key_args(extra), params=params, grad=False, **kw)


POS = (np.dtype(np.float32),)
RANDOM = [
    _r("uniform", rdtype_p(FLOAT + (np.dtype(np.int32),))),
    _r("normal", rdtype_p(INEXACT)),
    _r("bits", rdtype_p(UINT + (np.dtype(np.uint16),))),
    _r("randint", lambda d, s: {"shape": d(shape_st((0, 3))), "minval": d(st.integers(-5, 5)),
                                "maxval": d(st.integers(-5, 20)),
                                "dtype": d(st.sampled_from([np.int32, np.uint8, np.int8]))}),
    _r("bernoulli", lambda d, s: {"shape": d(shape_st((0, 2)))},
       extra=[((), POS)], call=lambda ns, k, p, shape: ns.random.bernoulli(k, p / 4, shape)),
    _r("split", lambda d, s: {"num": d(st.integers(0, 4))}),
    _r("fold_in", lambda d, s: {"data": d(st.integers(0, 2**31))}),
    _r("permutation", lambda d, s: {"x": d(st.integers(0, 8))}),
    _r("choice", lambda d, s: {"a": d(st.integers(1, 8)), "shape": d(st.sampled_from([(), (2,), (3,)])),
                               "replace": d(st.booleans())}),
    _r("categorical", lambda d, s: {"axis": d(st.integers(-1, 1))}, extra=[((3, 4), POS)]),
    _r("gumbel", rdtype_p()),
    _r("exponential", rdtype_p()),
    _r("laplace", rdtype_p()),
    _r("logistic", rdtype_p()),
    _r("rademacher", rdtype_p((np.dtype(np.int32), np.dtype(np.float32)))),
    _r("truncated_normal", lambda d, s: {"lower": d(st.sampled_from([-2.0, 0.0, 1.0])),
                                         "upper": d(st.sampled_from([-1.0, 0.5, 3.0])),
                                         "shape": d(shape_st((0, 2)))}),
    _r("gamma", lambda d, s: {}, extra=[((3,), POS)], tol=10),
    _r("beta", lambda d, s: {}, extra=[((3,), POS), ((3,), POS)], tol=10),
    _r("poisson", lambda d, s: {}, extra=[((3,), POS)]),
    _r("dirichlet", lambda d, s: {}, extra=[((3,), POS)], tol=10),
]

RECORDS = ELEMENTWISE + REDUCTION + SHAPE + INDEXING + LINALG + LAX + SPECIAL + RANDOM
AREAS = ["elementwise", "reduction", "shape", "indexing", "linalg", "lax", "special", "random"]
BY_NAME = {op.name: op for op in RECORDS}
assert len(BY_NAME) == len(RECORDS), "record names must be unique"
