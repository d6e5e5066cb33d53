"""``jaxkit.numpy``: JAX's NumPy API, written only in terms of ``jaxkit.lax``.

Submodules ``jaxkit.numpy.linalg`` and ``jaxkit.numpy.fft`` follow ``jax.numpy.linalg`` and
``jax.numpy.fft``.

Functions promote dtypes (with JAX's weak types: ``float32_array + 1.0`` stays float32) and
broadcast shapes, then call lax primitives; they never bind primitives themselves. Importing
this package installs the operators and methods of arrays and tracers
(``_array_methods.install``).
"""

import numpy as _np

from jaxkit.runtime.array import PublicArray as ndarray  # noqa: F401  (isinstance(x, jnp.ndarray))
from jaxkit.numpy import _array_methods, fft, linalg  # noqa: F401
from jaxkit.numpy._dlpack import from_dlpack  # noqa: F401
from jaxkit.numpy._array_api import __array_api_version__, __array_namespace_info__  # noqa: F401
from jaxkit.numpy._creation import (  # noqa: F401
    arange,
    array,
    asarray,
    copy,
    empty,
    empty_like,
    eye,
    fromfunction,
    full,
    full_like,
    geomspace,
    identity,
    indices,
    linspace,
    logspace,
    meshgrid,
    ones,
    ones_like,
    tri,
    tril,
    triu,
    zeros,
    zeros_like,
)
from jaxkit.numpy._bytes import (  # noqa: F401
    array_repr,
    array_str,
    frombuffer,
    fromfile,
    fromiter,
    fromstring,
    iterable,
    load,
    packbits,
    save,
    savez,
    unpackbits,
)
from jaxkit.numpy._differences import (  # noqa: F401
    diff,
    ediff1d,
    gradient,
    interp,
    trapezoid,
    unwrap,
)
from jaxkit.numpy._elementwise import (  # noqa: F401
    allclose,
    angle,
    around,
    array_equal,
    array_equiv,
    astype,
    clip,
    fmax,
    fmin,
    gcd,
    isclose,
    iscomplex,
    iscomplexobj,
    isreal,
    isrealobj,
    isscalar,
    lcm,
    nan_to_num,
    piecewise,
    round,
    select,
    trunc,
)
from jaxkit.numpy._polynomial import (  # noqa: F401
    vander,
)
from jaxkit.numpy._statistics import (  # noqa: F401
    corrcoef,
    cov,
    histogram,
    histogram2d,
    histogram_bin_edges,
    histogramdd,
)
from jaxkit.numpy._vectorize import (  # noqa: F401
    apply_over_axes,
)
from jaxkit.numpy._windows import (  # noqa: F401
    bartlett,
    blackman,
    hamming,
    hanning,
    i0,
    kaiser,
)
from jaxkit.numpy._index_tricks import (  # noqa: F401
    c_,
    choose,
    diag_indices,
    diag_indices_from,
    fill_diagonal,
    index_exp,
    ix_,
    mask_indices,
    mgrid,
    ogrid,
    r_,
    s_,
    tril_indices,
    tril_indices_from,
    triu_indices,
    triu_indices_from,
)
from jaxkit.numpy._contractions import (  # noqa: F401
    cross,
    diag,
    diagflat,
    diagonal,
    dot,
    einsum,
    einsum_path,
    inner,
    kron,
    matmul,
    matvec,
    outer,
    tensordot,
    trace,
    vdot,
    vecdot,
    vecmat,
)
from jaxkit.numpy._pad import pad  # noqa: F401
from jaxkit.numpy._polynomial import (  # noqa: F401
    convolve,
    correlate,
    poly,
    polyadd,
    polyder,
    polydiv,
    polyfit,
    polyint,
    polymul,
    polysub,
    polyval,
    roots,
)
from jaxkit.numpy._promotion import broadcast_arrays, broadcast_shapes, broadcast_to  # noqa: F401
from jaxkit.numpy._quantiles import (  # noqa: F401
    median,
    nanmedian,
    nanpercentile,
    nanquantile,
    percentile,
    quantile,
)
from jaxkit.numpy._reductions import (  # noqa: F401
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    average,
    count_nonzero,
    cumprod,
    cumsum,
    cumulative_prod,
    cumulative_sum,
    max,
    mean,
    min,
    nanargmax,
    nanargmin,
    nancumprod,
    nancumsum,
    nanmax,
    nanmean,
    nanmin,
    nanprod,
    nanstd,
    nansum,
    nanvar,
    prod,
    ptp,
    std,
    sum,
    var,
)
from jaxkit.numpy._scalar_types import *
from jaxkit.numpy._setops import (  # noqa: F401
    intersect1d,
    isin,
    setdiff1d,
    setxor1d,
    union1d,
    unique,
    unique_all,
    unique_counts,
    unique_inverse,
    unique_values,
)
from jaxkit.numpy._insert_delete import delete, insert  # noqa: F401
from jaxkit.numpy._shape import (  # noqa: F401
    append,
    array_split,
    atleast_1d,
    atleast_2d,
    atleast_3d,
    block,
    column_stack,
    concat,
    concatenate,
    dsplit,
    dstack,
    expand_dims,
    flip,
    fliplr,
    flipud,
    hsplit,
    hstack,
    matrix_transpose,
    moveaxis,
    permute_dims,
    ravel,
    repeat,
    reshape,
    resize,
    roll,
    rollaxis,
    rot90,
    split,
    squeeze,
    stack,
    swapaxes,
    tile,
    transpose,
    trim_zeros,
    unstack,
    vsplit,
    vstack,
)
from jaxkit.numpy._sorting import (  # noqa: F401
    argpartition,
    argsort,
    argwhere,
    bincount,
    compress,
    digitize,
    extract,
    flatnonzero,
    lexsort,
    nonzero,
    partition,
    searchsorted,
    sort,
    sort_complex,
    where,
)
from jaxkit.numpy._put_place import place, put  # noqa: F401
from jaxkit.numpy._take import (  # noqa: F401
    put_along_axis,
    ravel_multi_index,
    take,
    take_along_axis,
    unravel_index,
)
from jaxkit.numpy._ufunc_objects import (  # noqa: F401
    add,
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    frompyfunc,
    logaddexp,
    logaddexp2,
    logical_and,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    multiply,
    negative,
    subtract,
    ufunc,
)
from jaxkit.numpy._ufuncs import (  # noqa: F401
    abs,
    absolute,
    acos,
    acosh,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_count,
    bitwise_invert,
    bitwise_left_shift,
    bitwise_not,
    bitwise_right_shift,
    cbrt,
    ceil,
    conj,
    conjugate,
    copysign,
    cos,
    cosh,
    deg2rad,
    degrees,
    divide,
    divmod,
    equal,
    exp,
    exp2,
    expm1,
    fabs,
    float_power,
    floor,
    floor_divide,
    fmod,
    greater,
    greater_equal,
    imag,
    invert,
    isfinite,
    isinf,
    isnan,
    isneginf,
    isposinf,
    left_shift,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    logical_not,
    mod,
    modf,
    nextafter,
    not_equal,
    positive,
    pow,
    power,
    rad2deg,
    radians,
    real,
    reciprocal,
    remainder,
    right_shift,
    rint,
    sign,
    signbit,
    sin,
    sinh,
    sqrt,
    square,
    tan,
    tanh,
    true_divide,
)
from jaxkit.numpy._ufuncs_special import (  # noqa: F401
    frexp,
    heaviside,
    hypot,
    ldexp,
    sinc,
    spacing,
)
from jaxkit.numpy._type_queries import (  # noqa: F401
    can_cast,
    dtype,
    finfo,
    iinfo,
    isdtype,
    issubdtype,
    ndim,
    promote_types,
    result_type,
    shape,
    size,
)
from jaxkit.numpy._vectorize import apply_along_axis, vectorize  # noqa: F401

# Constants and NumPy's abstract scalar types (used with issubdtype).
pi = _np.pi
e = _np.e
euler_gamma = _np.euler_gamma
inf = _np.inf
nan = _np.nan
newaxis = None
generic, number, inexact, floating = _np.generic, _np.number, _np.inexact, _np.floating
integer, signedinteger, unsignedinteger = _np.integer, _np.signedinteger, _np.unsignedinteger
complexfloating, character, flexible = _np.complexfloating, _np.character, _np.flexible
object_ = _np.object_
bool = bool_
ComplexWarning = _np.exceptions.ComplexWarning
printoptions = _np.printoptions
get_printoptions = _np.get_printoptions
set_printoptions = _np.set_printoptions

_array_methods.install()

from jaxkit._deprecations import deprecation_getattr as _deprecation_getattr  # noqa: E402
from jaxkit._deprecations import removed as _removed  # noqa: E402

# As JAX 0.10.2, which still answers for the name it dropped.
_deprecations = {
    "fix": _removed("jax.numpy.fix was deprecated in JAX v0.9.0, and will be removed in JAX "
                    "v0.10.0. Use jax.numpy.trunc instead."),
}
__getattr__ = _deprecation_getattr(__name__, _deprecations)
