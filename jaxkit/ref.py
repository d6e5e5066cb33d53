"""``jax.ref``: mutable array references (``Ref``) and their primitives.

``new_ref(x)`` makes a ``Ref``; ``ref[idx]`` is ``get``, ``ref[idx] = v`` is ``swap``,
``ref[idx] += v`` is a ``get`` and a ``swap`` (``addupdate`` adds in place), and ``freeze``
gives the final value. Each primitive is written here with all its rules: the shape rule, the
jaxpr printing JAX uses (``c:f32[] <- a[1]``, ``a[...] <- d``, ``a[...] += i``), the
*discharge* rule (what it does to the value a ref holds, see ``interpreters.state``: eager
execution, ``jit`` and lowering all go through it), JVP (a ref's tangent is a ref), partial
evaluation (a ref written with an unknown value becomes unknown) and batching.

An index is kept as a static ``indexer`` parameter, one entry per dimension of the ref: an
int, a slice ``(start, stop, step)``, ``None`` for "the next dynamic operand" (an integer
array or traced scalar), or ``("ds", size)`` for ``jax.ds(start, size)`` with a traced start
(the next dynamic operand; Pallas kernels index blocks so); ``indexer=None`` is the whole ref
(``ref[...]``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.effects import (AccumEffect, ReadEffect, WriteEffect,
                            internal_mutable_array_effect)
from jaxkit.indexing import Slice
from jaxkit.jaxpr import effect_rules
from jaxkit import numpy as jnp
from jaxkit.interpreters import ad, batching, hijax
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.state import (AbstractRef, Ref, accept_refs_eagerly, defdischarge,
                                      discharge_closed, impl_via_discharge, is_ref_aval,
                                      ref_methods)
from jaxkit.lax.cond import cond_p
from jaxkit.lax import loops

__all__ = ["AbstractRef", "Ref", "addupdate", "empty_ref", "free_ref", "freeze", "get",
           "new_ref", "set", "swap"]

_FULL = "full"  # marker in an indexer for a whole dimension (printed ``:``)
_DS = "ds"  # first item of a dynamic-start slice entry ``("ds", size)``


def _is_ds(entry) -> bool:
    return isinstance(entry, tuple) and len(entry) == 2 and entry[0] == _DS


# --------------------------------------------------------------------------------------------
# Indexers
# --------------------------------------------------------------------------------------------


def _check_ref(ref, what: str) -> None:
    if not is_ref_aval(_aval(ref)):
        raise TypeError(f"jax.ref.{what} expects a Ref (made by jax.new_ref), got a value of "
                        f"type {type(ref).__name__}; index arrays directly, or make a ref "
                        "with jax.new_ref.")


def _aval(x):
    try:
        return core.get_aval(x)
    except TypeError:
        return None


def _parse_index(shape: tuple, idx: Any) -> tuple[tuple | None, list]:
    """``(indexer, dynamic operands)`` for a NumPy-style ``idx`` into a ref of ``shape``."""
    if idx is None or idx is Ellipsis or (isinstance(idx, tuple) and not idx):
        return None, []
    if not isinstance(idx, tuple):
        idx = (idx,)
    if any(i is None for i in idx):
        raise ValueError("Ref indexing does not support np.newaxis (None); read the value "
                         "with ref[...] and add the axis to the array.")
    n_ell = sum(i is Ellipsis for i in idx)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = len(idx) - n_ell
    if n_real > len(shape):
        raise IndexError(f"Too many indices for a Ref of shape {shape}: got {n_real} "
                         f"indices for {len(shape)} dimensions.")
    if n_ell:
        k = idx.index(Ellipsis)
        idx = idx[:k] + (slice(None),) * (len(shape) - n_real) + idx[k + 1:]
    idx = idx + (slice(None),) * (len(shape) - len(idx))
    indexer, dyn = [], []
    for dim, i in zip(shape, idx):
        if isinstance(i, slice):
            if any(isinstance(b, core.Tracer) for b in (i.start, i.stop, i.step)):
                raise TypeError("Ref slices must have static bounds; for a traced start use "
                                "jax.lax.dynamic_slice on ref[...] or an index array.")
            start, stop, step = i.indices(dim)
            indexer.append(_FULL if (start, stop, step) == (0, dim, 1)
                           else (start, stop, step))
        elif isinstance(i, (int, np.integer)) and not isinstance(i, bool):
            indexer.append(int(i))
        elif isinstance(i, Slice):
            indexer.append(_slice_entry(dim, i, dyn))
        else:
            aval = _aval(i)
            if aval is None or not dtypes.issubdtype(aval.dtype, np.integer):
                raise TypeError(f"Ref indices must be integers, slices, ellipsis or integer "
                                f"arrays; got {i!r}.")
            indexer.append(None)
            dyn.append(i)
    return tuple(indexer), dyn


def _slice_entry(dim: int, s: Slice, dyn: list):
    """The indexer entry of a ``jax.ds`` slice: a static slice when its start is known, else a
    dynamic-start entry whose start becomes the next dynamic operand."""
    if s.is_dynamic_size:
        raise ValueError("Ref slices must have a static size (jax.ds(start, size) with an int "
                         "size); the start may be traced.")
    if not s.is_dynamic_start:
        start, size, stride = int(s.start), int(s.size), s.stride
        stop = start + (size - 1) * stride + 1 if size else start
        if start < 0 or stop > dim:
            raise IndexError(f"jax.ds({start}, {size}) is out of bounds for a dimension of size "
                             f"{dim}")
        return _FULL if (start, stop, stride) == (0, dim, 1) else (start, stop, stride)
    if s.stride != 1:
        raise NotImplementedError("Ref indexing with a traced-start jax.ds of stride "
                                  f"{s.stride} is not implemented; use stride 1")
    if not dtypes.issubdtype(core.get_aval(s.start).dtype, np.integer):
        raise TypeError(f"jax.ds start must be an integer, got {s.start!r}")
    dyn.append(s.start)
    return (_DS, int(s.size))


def _to_numpy_index(indexer: tuple | None, dyn) -> tuple:
    if indexer is None:
        return ()
    it = iter(dyn)
    out = []
    for i in indexer:
        if _is_ds(i):  # only in shape computations: where the window starts does not matter
            next(it)
            out.append(slice(0, i[1]))
        elif i is None:
            out.append(next(it))
        elif i == _FULL:
            out.append(slice(None))
        elif isinstance(i, tuple):
            out.append(slice(*i))
        else:
            out.append(i)
    return tuple(out)


def _indexed_shape(shape: tuple, indexer, dyn_avals) -> tuple:
    # NumPy's indexing on a zero-stride stand-in: the result shape without the memory. A
    # traced index is not bounds-checked (as in JAX): probe an empty dimension with one entry.
    if indexer is not None:
        shape = tuple(max(d, 1) if k < len(indexer) and indexer[k] is None else d
                      for k, d in enumerate(shape))
    dummy = np.broadcast_to(np.zeros((), bool), shape)
    return dummy[_to_numpy_index(indexer, [np.zeros(a.shape, np.intp) for a in dyn_avals])].shape


def _pp_indexer(eqn: core.JaxprEqn, namer: core.Namer, ref_aval, indexer, dyn) -> str:
    if indexer is None:
        return "..."
    it = iter(dyn)
    parts = []
    for dim, i in zip(ref_aval.shape, indexer):
        if _is_ds(i):  # as JAX: ``a[i:i+4]``
            start = namer(next(it))
            parts.append(f"{start}:{start}+{i[1]}")
        elif i is None:
            parts.append(namer(next(it)))
        elif i == _FULL:
            parts.append(":")
        elif isinstance(i, tuple):  # as JAX: start and end, blank at the ends of the axis
            start, stop, step = i
            size = max(0, -(-(stop - start) // step))
            end = start + size
            parts.append(f"{start or ''}:{'' if end == dim else end}")
        else:
            parts.append(str(i))
    return ",".join(parts)


# --------------------------------------------------------------------------------------------
# new_ref and freeze
# --------------------------------------------------------------------------------------------


def new_ref(init_val: Any, *, memory_space: Any = None, kind: str | None = None) -> Ref:
    """A new mutable array reference holding ``init_val`` (``jax.new_ref``)."""
    if kind not in (None, "no_grad_no_remat"):
        raise ValueError(f"new_ref kind must be None or 'no_grad_no_remat', got {kind!r}")
    if is_ref_aval(_aval(init_val)):
        raise TypeError("new_ref of a Ref: higher-order refs (refs to refs) are not supported")
    if not isinstance(init_val, core.Tracer):
        init_val = jnp.asarray(init_val)
    return new_ref_p.bind(init_val, memory_space=memory_space, kind=kind)


new_ref_p = core.Primitive("new_ref")
new_ref_p.def_abstract_eval(lambda aval, **_: AbstractRef(aval))
defdischarge(new_ref_p, lambda in_avals, x, **_: ([None], x))
core.defpp_params(new_ref_p, lambda p: {"kind": p["kind"], "memory_space": p["memory_space"]})


def empty_ref(ty, *, memory_space: Any = None) -> Ref:
    """A new ref of type ``ty`` (a ``ShapeDtypeStruct`` or aval) whose contents are unspecified
    until written (``jax.empty_ref``); jaxkit fills it with zeros."""
    aval = core.ShapedArray(ty.shape, ty.dtype)
    return new_ref(lax.full(aval.shape, 0, aval.dtype), memory_space=memory_space)


def freeze(ref: Ref) -> Any:
    """The final value of ``ref`` (``jax.freeze``); the ref should not be used afterwards."""
    _check_ref(ref, "freeze")
    return freeze_p.bind(ref)


freeze_p = core.Primitive("freeze")
freeze_p.def_abstract_eval(lambda ref_aval: ref_aval.inner_aval)
defdischarge(freeze_p, lambda in_avals, x: ([None], x))
pe.defeffectful(freeze_p)


def free_ref(ref: Ref) -> None:
    """Release ``ref`` (``jax.free_ref``): its buffer is deleted and it must not be used."""
    _check_ref(ref, "free_ref")
    if isinstance(ref, Ref):
        ref._buf.delete()


# --------------------------------------------------------------------------------------------
# get, swap, addupdate
# --------------------------------------------------------------------------------------------


def get(ref: Ref, idx: Any = ()) -> Any:
    """``ref[idx]`` (``jax.ref.get``)."""
    _check_ref(ref, "get")
    indexer, dyn = _parse_index(_aval(ref).shape, idx)
    return get_p.bind(ref, *dyn, indexer=indexer)


def _get_abstract_eval(ref_aval, *dyn_avals, indexer):
    inner = ref_aval.inner_aval
    return inner.update(shape=_indexed_shape(inner.shape, indexer, dyn_avals))


def _split_dynamic_slices(x, indexer, dyn):
    """For an indexer with dynamic-start slices: the window of ``x`` they select (made by
    ``dynamic_slice``), its start indices, and the indexer and operands left to apply to it."""
    starts, sizes, rest, rest_dyn = [], [], [], []
    it = iter(dyn)
    for dim, i in zip(x.shape, indexer):
        if _is_ds(i):
            starts.append(next(it))
            sizes.append(i[1])
            rest.append(_FULL)
        else:
            if i is None:
                rest_dyn.append(next(it))
            starts.append(0)
            sizes.append(dim)
            rest.append(i)
    starts = [lax.convert_element_type(s, np.int32) if isinstance(s, core.Tracer) else s
              for s in starts]
    window = lax.dynamic_slice(x, starts, sizes)
    return window, starts, tuple(rest), rest_dyn


def _has_ds(indexer) -> bool:
    return indexer is not None and any(_is_ds(i) for i in indexer)


def _get_discharge(in_avals, x, *dyn, indexer):
    if _has_ds(indexer):
        x, _, indexer, dyn = _split_dynamic_slices(x, indexer, dyn)
    return [None] * (1 + len(dyn)), x[_to_numpy_index(indexer, dyn)] if indexer else x


def _get_pp(eqn, namer, binder, top_level):
    ref, *dyn = eqn.invars
    return (f"{binder(eqn.outvars[0])} <- {namer(ref)}"
            f"[{_pp_indexer(eqn, namer, ref.aval, eqn.params['indexer'], dyn)}]")


get_p = core.Primitive("get")
get_p.def_abstract_eval(_get_abstract_eval)
defdischarge(get_p, _get_discharge)
core.pp_eqn_rules[get_p] = _get_pp


def _implicit_cast(dtype, value):
    # As JAX: a weakly typed float into a float ref (and any integer into an integer ref) takes
    # the ref's dtype; other mismatches are errors.
    aval = _aval(value)
    if aval is None or is_ref_aval(aval):
        return value
    floats = dtypes.issubdtype(dtype, np.floating) and dtypes.issubdtype(aval.dtype, np.floating)
    ints = dtypes.issubdtype(dtype, np.integer) and dtypes.issubdtype(aval.dtype, np.integer)
    if aval.weak_type and floats or ints:
        if isinstance(value, (int, float, np.generic, np.ndarray)):  # a constant: fold it
            return np.asarray(value, dtype)
        return lax.convert_element_type(value, dtype)
    return value


def _check_value(name: str, ref_aval, indexer, dyn, value) -> Any:
    value = _implicit_cast(ref_aval.dtype, value)
    if not isinstance(value, core.Tracer):
        value = jnp.asarray(value)
    v_aval = _aval(value)
    expected = _indexed_shape(ref_aval.shape, indexer, [_aval(d) for d in dyn])
    if v_aval.shape != expected:
        raise ValueError(f"Invalid shape for `{name}`. Ref shape: {ref_aval.shape}. Expected "
                         f"shape: {expected}. Value shape: {v_aval.shape}. Refs do not "
                         "broadcast: give a value of the indexed shape.")
    if v_aval.dtype != ref_aval.dtype:
        raise ValueError(f"Invalid dtype for `{name}`. Ref dtype: {ref_aval.dtype}. Value "
                         f"dtype: {v_aval.dtype}. Convert the value with .astype first.")
    return value


def swap(ref: Ref, idx: Any, value: Any) -> Any:
    """Write ``value`` at ``ref[idx]`` and return what was there (``jax.ref.swap``)."""
    _check_ref(ref, "swap")
    aval = _aval(ref)
    indexer, dyn = _parse_index(aval.shape, idx)
    value = _check_value("swap", aval, indexer, dyn, value)
    return swap_p.bind(ref, value, *dyn, indexer=indexer)


def set(ref: Ref, idx: Any, value: Any) -> None:  # noqa: A001  (JAX's name)
    """``ref[idx] = value`` (``jax.ref.set``)."""
    swap(ref, idx, value)


def _swap_discharge(in_avals, x, v, *dyn, indexer):
    if _has_ds(indexer):
        window, starts, rest, rest_dyn = _split_dynamic_slices(x, indexer, dyn)
        i = _to_numpy_index(rest, rest_dyn)
        new = lax.dynamic_update_slice(x, window.at[i].set(v), starts)
        return [new] + [None] * (1 + len(dyn)), window[i]
    if indexer is None:
        return [v] + [None] * (1 + len(dyn)), x
    i = _to_numpy_index(indexer, dyn)
    return [x.at[i].set(v)] + [None] * (1 + len(dyn)), x[i]


def _swap_pp(eqn, namer, binder, top_level):
    ref, val, *dyn = eqn.invars
    where = f"{namer(ref)}[{_pp_indexer(eqn, namer, ref.aval, eqn.params['indexer'], dyn)}]"
    out = eqn.outvars[0]
    # As JAX prints it: a write whose old value is unused is ``a[i] <- v`` in a top-level
    # jaxpr (where JAX drops unused results); jaxprs nested in an equation keep the result.
    if isinstance(out, core.DropVar) or top_level and binder(out).startswith("_:"):
        return f"{where} <- {namer(val)}"
    return f"{namer(out)}:{out.aval.str_short()}, {where} <- {where}, {namer(val)}"


swap_p = core.Primitive("swap")
swap_p.def_abstract_eval(lambda ref_aval, v_aval, *dyn, indexer: v_aval)
defdischarge(swap_p, _swap_discharge)
core.pp_eqn_rules[swap_p] = _swap_pp
pe.defeffectful(swap_p)


def addupdate(ref: Ref, idx: Any, value: Any) -> None:
    """``ref[idx] += value``, in place (``jax.ref.addupdate``)."""
    _check_ref(ref, "addupdate")
    aval = _aval(ref)
    indexer, dyn = _parse_index(aval.shape, idx)
    value = _check_value("addupdate", aval, indexer, dyn, value)
    addupdate_p.bind(ref, value, *dyn, indexer=indexer)


def _addupdate_discharge(in_avals, x, v, *dyn, indexer):
    if _has_ds(indexer):
        window, starts, rest, rest_dyn = _split_dynamic_slices(x, indexer, dyn)
        window = window.at[_to_numpy_index(rest, rest_dyn)].add(v)
        return [lax.dynamic_update_slice(x, window, starts)] + [None] * (1 + len(dyn)), []
    new = x + v if indexer is None else x.at[_to_numpy_index(indexer, dyn)].add(v)
    return [new] + [None] * (1 + len(dyn)), []


def _addupdate_pp(eqn, namer, binder, top_level):
    ref, val, *dyn = eqn.invars
    where = f"{namer(ref)}[{_pp_indexer(eqn, namer, ref.aval, eqn.params['indexer'], dyn)}]"
    return f"{where} += {namer(val)}"


addupdate_p = core.Primitive("addupdate")
addupdate_p.multiple_results = True
addupdate_p.def_abstract_eval(lambda ref_aval, v_aval, *dyn, indexer: [])
defdischarge(addupdate_p, _addupdate_discharge)
core.pp_eqn_rules[addupdate_p] = _addupdate_pp
pe.defeffectful(addupdate_p)

ref_primitives = (new_ref_p, freeze_p, get_p, swap_p, addupdate_p)

for _p in ref_primitives:
    impl_via_discharge(_p)


# --------------------------------------------------------------------------------------------
# Indexing syntax, on Ref values and on traced refs
# --------------------------------------------------------------------------------------------


def _setitem(ref, idx, value) -> None:
    swap(ref, idx, value)


ref_methods.update(getitem=get, setitem=_setitem, addupdate=addupdate)
_array_getitem = core.Tracer.__getitem__
_array_setitem = core.Tracer.__setitem__


def _tracer_getitem(self, idx):
    if is_ref_aval(self.aval):
        return get(self, idx)
    return _array_getitem(self, idx)


def _tracer_setitem(self, idx, value):
    if is_ref_aval(self.aval):
        swap(self, idx, value)  # (``r.__setitem__(i, v)`` gives None, as a statement does)
        return None
    return _array_setitem(self, idx, value)


def _tracer_addupdate(self, x, idx=()):
    if not is_ref_aval(self.aval):
        raise AttributeError(f"'{type(self).__name__}' object has no attribute 'addupdate'")
    addupdate(self, idx, x)


core.Tracer.__getitem__ = _tracer_getitem
core.Tracer.__setitem__ = _tracer_setitem
core.Tracer.addupdate = _tracer_addupdate



# --------------------------------------------------------------------------------------------
# Autodiff: a ref's tangent is a ref of tangents
# --------------------------------------------------------------------------------------------


def _new_ref_jvp(primals, tangents, **params):
    (x,), (t,) = primals, tangents
    return new_ref_p.bind(x, **params), new_ref_p.bind(ad.instantiate_zeros(t), **params)


def _freeze_jvp(primals, tangents):
    (t,) = tangents
    return freeze_p.bind(primals[0]), t if ad.is_zero(t) else freeze_p.bind(t)


def _get_jvp(primals, tangents, *, indexer):
    ref, *dyn = primals
    out = get_p.bind(ref, *dyn, indexer=indexer)
    t_ref = tangents[0]
    if ad.is_zero(t_ref):
        return out, ad.Zero(core.get_aval(out).to_tangent_aval())
    return out, get_p.bind(t_ref, *dyn, indexer=indexer)


def _plumbing_error(op: str, ref) -> Exception:
    # JAX raises a bare Exception here (and for vmap below); jaxkit raises the same class.
    return Exception(f"performing a {op} operation with a differentiated value on a "
                     f"non-differentiated array reference of type {core.get_aval(ref)}. Move "
                     "the array reference to be an argument of the differentiated function?")


def _swap_jvp(primals, tangents, *, indexer):
    ref, val, *dyn = primals
    t_ref, t_val = tangents[:2]
    out = swap_p.bind(ref, val, *dyn, indexer=indexer)
    if ad.is_zero(t_ref):
        if not ad.is_zero(t_val):
            raise _plumbing_error("set/swap", ref)
        return out, ad.Zero(core.get_aval(out).to_tangent_aval())
    return out, swap_p.bind(t_ref, ad.instantiate_zeros(t_val), *dyn, indexer=indexer)


def _addupdate_jvp(primals, tangents, *, indexer):
    ref, val, *dyn = primals
    t_ref, t_val = tangents[:2]
    addupdate_p.bind(ref, val, *dyn, indexer=indexer)
    if ad.is_zero(t_ref):
        if not ad.is_zero(t_val):
            raise _plumbing_error("addupdate", ref)
    elif not ad.is_zero(t_val):
        addupdate_p.bind(t_ref, t_val, *dyn, indexer=indexer)
    return [], []


for _p, _rule in [(new_ref_p, _new_ref_jvp), (freeze_p, _freeze_jvp), (get_p, _get_jvp),
                  (swap_p, _swap_jvp), (addupdate_p, _addupdate_jvp)]:
    ad.defjvp_rule(_p, _rule)
    ad.jvp_always_rules.add(_p)


def _write_partial_eval(prim, trace: pe.JaxprTrace, ref, val, *dyn, **params):
    # An unknown value written into a known ref (a tangent ref made from known zeros, when
    # linearizing): from here on the ref is unknown. A staged ref takes over, made from the
    # value the known one holds now; the trace uses it wherever the known ref appears later.
    if trace.is_known(ref):
        with core.set_current_trace(trace.parent):
            current = get_p.bind(ref, indexer=None)
        staged = trace.record(new_ref_p, [current], {"memory_space": None, "kind": None})
        trace.__dict__.setdefault("ref_subst", {})[id(ref)] = (ref, staged)
        ref = staged
    return trace.record(prim, [ref, val, *dyn], params)


pe.defpartial_eval(swap_p, lambda trace, *a, **p: _write_partial_eval(swap_p, trace, *a, **p))
pe.defpartial_eval(addupdate_p,
                   lambda trace, *a, **p: _write_partial_eval(addupdate_p, trace, *a, **p))


# --------------------------------------------------------------------------------------------
# Batching: a batched ref holds the whole batch, with a batch axis like an array's
# --------------------------------------------------------------------------------------------


def _batched_indexer(indexer, ref_dim: int, ndim: int, prim_name: str):
    """The indexer of the batched ref (a whole dimension inserted at ``ref_dim``) and where the
    batch axis lands in the indexed result."""
    if indexer is None:
        return None, ref_dim
    if any(i is None for i in indexer):
        raise NotImplementedError(f"batching rule for '{prim_name}' with array indices into a "
                                  "batched Ref is not implemented; index with ints and slices")
    new = indexer[:ref_dim] + (_FULL,) + indexer[ref_dim:]
    return new, sum(not isinstance(i, int) for i in indexer[:ref_dim])


def _check_ref_batched(prim_name: str, ref_dim, dyn_dims, what: str) -> None:
    if any(d is not batching.not_mapped for d in dyn_dims):
        raise NotImplementedError(f"batching rule for '{prim_name}' with vmapped indices is "
                                  "not implemented")
    if ref_dim is batching.not_mapped:
        raise Exception(what)  # JAX's class for this error


def _new_ref_batch(axis_data, vals, dims, **params):
    return new_ref_p.bind(vals[0], **params), dims[0]


def _freeze_batch(axis_data, vals, dims):
    return freeze_p.bind(vals[0]), dims[0]


def _get_batch(axis_data, vals, dims, *, indexer):
    ref, *dyn = vals
    _check_ref_batched("get", dims[0], dims[1:], "internal: get of an unbatched ref")
    new, out_dim = _batched_indexer(indexer, dims[0], core.get_aval(ref).ndim - 1, "get")
    return get_p.bind(ref, *dyn, indexer=new), out_dim


def _unbatched_ref_message(op: str, ref) -> str:
    return (f"performing a {op} operation with vmapped value on an unbatched array reference "
            f"of type {core.get_aval(ref)}. Move the array reference to be an argument to the "
            "vmapped function?")


def _write_batch(prim, op: str, axis_data, vals, dims, *, indexer):
    ref, val, *dyn = vals
    _check_ref_batched(prim.name, dims[0], dims[2:], _unbatched_ref_message(op, ref))
    new, out_dim = _batched_indexer(indexer, dims[0], core.get_aval(ref).ndim - 1, prim.name)
    val = batching.matchaxis(dims[1], out_dim, val, axis_data.size)
    out = prim.bind(ref, val, *dyn, indexer=new)
    return (out, out_dim) if prim is swap_p else ([], [])


batching.batch_rules[new_ref_p] = _new_ref_batch
batching.batch_rules[freeze_p] = _freeze_batch
batching.batch_rules[get_p] = _get_batch
batching.batch_rules[swap_p] = lambda ad_, v, d, **p: _write_batch(swap_p, "set/swap", ad_, v,
                                                                  d, **p)
batching.batch_rules[addupdate_p] = lambda ad_, v, d, **p: _write_batch(
    addupdate_p, "addupdate", ad_, v, d, **p)


# --------------------------------------------------------------------------------------------
# Control flow: refs closed over by a scan body become carried values
# --------------------------------------------------------------------------------------------


def _scan_discharge(in_avals, *vals, jaxpr, length, reverse, num_consts, num_carry, unroll):
    is_ref = [is_ref_aval(a) for a in in_avals]
    if any(is_ref[num_consts:]):
        raise ValueError("a Ref cannot be a scan carry or scanned-over value; close over it "
                         "in the body instead")
    body = discharge_closed(jaxpr)  # outs: carry, ys, then the refs' final values
    n_refs = sum(is_ref)
    ref_pos = [i for i in range(num_consts) if is_ref[i]]
    plain_pos = [i for i in range(num_consts) if not is_ref[i]]

    def new_body(*args):
        plain, ref_vals = args[:len(plain_pos)], args[len(plain_pos):len(plain_pos) + n_refs]
        rest = args[len(plain_pos) + n_refs:]
        consts = [None] * num_consts
        for i, v in zip(plain_pos, plain):
            consts[i] = v
        for i, v in zip(ref_pos, ref_vals):
            consts[i] = v
        outs = core.eval_jaxpr(body.jaxpr, body.consts, *consts, *rest)
        return [*outs[len(outs) - n_refs:], *outs[:len(outs) - n_refs]]

    new_avals = ([body.in_avals[i] for i in plain_pos]
                 + [body.in_avals[i].strip_weak_type() for i in ref_pos]
                 + body.in_avals[num_consts:])
    new_jaxpr, consts = pe.trace_to_jaxpr(new_body, new_avals)
    new = core.ClosedJaxpr(new_jaxpr, consts)
    # A ref's carried value takes the ref's dtype strongly, as the body's writes produce it.
    ref_vals = [lax.convert_element_type(vals[i], in_avals[i].dtype) for i in ref_pos]
    args = [vals[i] for i in plain_pos] + ref_vals + list(vals[num_consts:])
    outs = loops.scan_p.bind(*args, jaxpr=new, length=length, reverse=reverse,
                             num_consts=len(plain_pos), num_carry=n_refs + num_carry,
                             unroll=unroll)
    finals = iter(outs[:n_refs])
    return [next(finals) if r else None for r in is_ref], outs[n_refs:]


defdischarge(loops.scan_p, _scan_discharge)
accept_refs_eagerly(loops.scan_p)


def _while_discharge(in_avals, *vals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    # Refs closed over by the body become carried values; the condition may not read refs.
    if any(is_ref_aval(a) for a in in_avals[:cond_nconsts]):
        raise NotImplementedError("discharge rule for 'while' with a Ref read by cond_fun is "
                                  "not implemented: read the ref in body_fun and carry the "
                                  "value instead")
    n_b = body_nconsts
    b_avals = in_avals[cond_nconsts:cond_nconsts + n_b]
    if any(is_ref_aval(a) for a in in_avals[cond_nconsts + n_b:]):
        raise ValueError("a Ref cannot be a while_loop carry; close over it in the body")
    cc, bc = vals[:cond_nconsts], vals[cond_nconsts:cond_nconsts + n_b]
    carry = vals[cond_nconsts + n_b:]
    ref_pos = [i for i, a in enumerate(b_avals) if is_ref_aval(a)]
    plain_pos = [i for i, a in enumerate(b_avals) if not is_ref_aval(a)]
    n_refs = len(ref_pos)
    body = discharge_closed(body_jaxpr)  # outs: carry, then the refs' final values
    ref_avals = [b_avals[i].inner_aval.strip_weak_type() for i in ref_pos]
    carry_avals = body_jaxpr.out_avals

    def new_body(*args):
        plain, refs, c = args[:len(plain_pos)], args[len(plain_pos):-len(carry)], \
            args[len(args) - len(carry):]
        consts = [None] * n_b
        for i, v in zip(plain_pos, plain):
            consts[i] = v
        for i, v in zip(ref_pos, refs):
            consts[i] = v
        outs = core.eval_jaxpr(body.jaxpr, body.consts, *consts, *c)
        return [*outs[len(carry):], *outs[:len(carry)]]

    def new_cond(*args):
        return core.eval_jaxpr(cond_jaxpr.jaxpr, cond_jaxpr.consts,
                               *args[:cond_nconsts], *args[cond_nconsts + n_refs:])

    b_in = [b_avals[i] for i in plain_pos] + ref_avals + list(carry_avals)
    body_j, body_c = pe.trace_to_jaxpr(new_body, b_in)
    cond_j, cond_c = pe.trace_to_jaxpr(new_cond, list(in_avals[:cond_nconsts]) + ref_avals
                                       + list(carry_avals))
    ref_vals = [lax.convert_element_type(bc[i], b_avals[i].dtype) for i in ref_pos]
    outs = loops.while_p.bind(*cc, *[bc[i] for i in plain_pos], *ref_vals, *carry,
                              cond_jaxpr=core.ClosedJaxpr(cond_j, cond_c),
                              body_jaxpr=core.ClosedJaxpr(body_j, body_c),
                              cond_nconsts=cond_nconsts, body_nconsts=len(plain_pos))
    finals = iter(outs[:n_refs])
    new_vals = [None] * cond_nconsts + [next(finals) if is_ref_aval(a) else None
                                        for a in b_avals] + [None] * len(carry)
    return new_vals, outs[n_refs:]


def _cond_discharge(in_avals, index, *ops, branches, **params):
    # Each branch takes the refs' values and returns their final values after its results.
    # A ref closed over by several branches is one operand per branch: each branch's copy
    # starts from, and its result is, the value of the one ref.
    aliases = [a - 1 for a in getattr(in_avals, "aliases", range(len(in_avals)))[1:]]
    ref_pos = [i for i, a in enumerate(in_avals[1:]) if is_ref_aval(a)]
    firsts = sorted({aliases[i] for i in ref_pos})

    def merged(branch):
        body = discharge_closed(branch)
        n = len(branch.out_avals)

        def run(*args):
            outs = core.eval_jaxpr(body.jaxpr, body.consts, *args)
            final = dict(zip(ref_pos, outs[n:]))
            # The copy this branch wrote (the one differing from its input) wins.
            result = {f: args[f] for f in firsts}
            for i in ref_pos:
                if final[i] is not args[i]:
                    result[aliases[i]] = final[i]
            return [*outs[:n], *(result[f] for f in firsts)]

        avals = [a.inner_aval if is_ref_aval(a) else a for a in in_avals[1:]]
        j, c = pe.trace_to_jaxpr(run, avals)
        return core.ClosedJaxpr(j, c)

    outs = cond_p.bind(index, *ops, branches=tuple(merged(b) for b in branches), **params)
    n = len(branches[0].out_avals)
    new = dict(zip(firsts, outs[n:]))
    return [None] + [new.get(i) for i in range(len(ops))], outs[:n]


for _p, _rule in [(loops.while_p, _while_discharge), (cond_p, _cond_discharge)]:
    defdischarge(_p, _rule)
    accept_refs_eagerly(_p)


# High-level mutable values closed over by a traced body keep their leaves in refs (see
# ``interpreters.hijax``), which sits below this module.
hijax.ref_ops[:] = [new_ref, get, lambda ref, value: swap(ref, (), value)]

# Reading or writing a Ref is a state effect (JAX's RefEffect), which some rules refuse.
for _prim, _effect in ((get_p, ReadEffect), (swap_p, WriteEffect), (addupdate_p, AccumEffect)):
    pe.defeffect_kind(_prim, "state")
    effect_rules[_prim] = lambda eqn, _effect=_effect: {_effect(eqn.invars[0])}
effect_rules[new_ref_p] = lambda eqn: {internal_mutable_array_effect}
