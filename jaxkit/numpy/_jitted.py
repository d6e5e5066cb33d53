"""``@jitted``: how jnp functions made of several lax operations stay fast when called eagerly.

As in JAX (whose jnp functions are ``jit(..., inline=True)``), such a function is a jit with
``inline=True``: outside any transformation a call goes through jit's cache, so a Python loop
of ``jnp.dot(mat, v)`` costs one cached dispatch per call instead of one per primitive; under a
transformation (``inline``) the body is traced in place, so jaxprs show its operations and no
``jit`` equation. The functions JAX wraps in a plain ``jit`` use ``inline=False`` and stage a
nested ``jit`` equation, as JAX's do. Non-array parameters (``axis``, ``dtype``,
``keepdims``...) are named static.

A call that jit cannot take as it is (a list where an array is expected, an unhashable static
value such as ``axis=[0, 1]``) runs the function directly, as a plain function would: same
result, same error messages.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from jaxkit import core, tree_util
from jaxkit.runtime import context_mesh
from jaxkit.runtime.array import device_put_value
from jaxkit.transforms.jit import JitFunction

# Types of the leaves jit takes as traced arguments (Array, NumPy values, Python scalars).
_leaf_types = core.pytype_aval_mappings


def _hashable(x) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


def _traceable(x) -> bool:
    """Whether jit takes ``x`` as a traced argument as it is (a tracer reaches here only for
    ``inline=False`` functions: inline ones are traced in place without coming to jit)."""
    return x is None or type(x) in _leaf_types or isinstance(x, core.Tracer)


class JnpFunction(JitFunction):
    """A jnp function: ``jit(fun, static_argnames=..., inline=True)`` that falls back to a
    plain call for arguments jit cannot take. ``name`` replaces the body's own name (its
    programs are ``jit_<name>``), for a body that cannot be called by its public name."""

    def __init__(self, fun: Callable, static_argnums, static_argnames, *, inline: bool,
                 name: str | None = None, pytree_args: bool = False,
                 converts_first: bool = False, jax_jits: bool = True):
        super().__init__(fun, static_argnums, static_argnames, inline=inline)
        self._inline_as_program = jax_jits
        if name is not None:
            self._name = name
        self._pytree_args = pytree_args
        self._converts_first = converts_first

    def _call(self, args, kwargs):
        if self._jittable(args, kwargs):
            if self._converts_first and context_mesh.eager_meshes and \
                    core.current_trace() is core.eval_trace:
                args, kwargs = self._host_laid_out(args, kwargs)
            return super()._call(args, kwargs)
        if self._inline_as_program:
            self._check_leaves(args, kwargs)
        return self._fun(*args, **kwargs)

    def _check_leaves(self, args, kwargs) -> None:
        """JAX's jit error for a traced argument with a leaf that is no array (a list of
        arrays is a pytree jit takes: the function's own check speaks for it then)."""
        nums, names = self._static_argnums, self._static_argnames
        dyn_args = tuple(x for i, x in enumerate(args) if i not in nums)
        dyn_kwargs = {k: x for k, x in kwargs.items() if k not in names}
        flat = tree_util.tree_leaves((dyn_args, dyn_kwargs))
        for leaf in flat:
            if isinstance(leaf, (str, bytes)) or _traceable(leaf):
                continue
            try:
                core.get_aval(leaf)
            except (TypeError, OverflowError):
                raise self._not_an_array(flat, dyn_args, dyn_kwargs) from None

    def _host_laid_out(self, args, kwargs) -> tuple:
        """The arguments with host data (NumPy values, Python scalars) laid out over the mesh
        of ``jax.set_mesh`` as JAX's ``ensure_arraylike`` does before its jit: what the
        function computes from them is then typed over the mesh."""
        nums, names = self._static_argnums, self._static_argnames
        args = tuple(x if i in nums else _host_laid_out(x) for i, x in enumerate(args))
        kwargs = {k: x if k in names else _host_laid_out(x) for k, x in kwargs.items()}
        return args, kwargs

    def _jittable(self, args, kwargs) -> bool:
        static_nums, static_names = self._static_argnums, self._static_argnames
        traceable = _traceable_tree if self._pytree_args else _traceable
        for i, x in enumerate(args):
            if not (_hashable(x) if i in static_nums else traceable(x)):
                return False
        for k, x in kwargs.items():
            if not (_hashable(x) if k in static_names else traceable(x)):
                return False
        return True


def _host_laid_out(x):
    if isinstance(x, (np.ndarray, np.generic, bool, int, float, complex)):
        return context_mesh.lay_out(device_put_value(x), typed=False)
    return x


def _traceable_tree(x) -> bool:
    """Whether every leaf of the pytree ``x`` is traceable as it is (``jnp.block``'s nested
    lists, which JAX's jit takes as a pytree)."""
    return all(_traceable(leaf) for leaf in tree_util.tree_leaves(x))


def jitted(fun: Callable | None = None, *, static_argnames: Sequence[str] = (),
           static_argnums: Sequence[int] = (), inline: bool = True, name: str | None = None,
           stages_only: bool = False, pytree_args: bool = False, converts_first: bool = False,
           jax_jits: bool = True):
    """Decorate a jnp function: ``@jitted`` or ``@jitted(static_argnames=("axis", ...))``.
    The function gets jit's stages (``lower``, ``trace``, ``eval_shape``) as JAX's jitted
    jnp functions have them (``jnp.dot.lower(x, y)``).

    ``inline=False`` is for the functions JAX 0.10.2 wraps in a plain ``jit`` (``_where``,
    ``clip``, ``linalg.norm``...): traced, they stage one nested ``jit[name=...]`` equation,
    so printed jaxprs read as JAX's do. ``name`` is the name JAX's jitted function has, for a
    body named otherwise (``_dot`` behind ``dot``). ``stages_only`` is for a public function
    that prepares its arguments and calls a jitted body of its own (``dot`` resolves its
    ``out_sharding`` against the mesh in context, for ``_dot``'s cache key): calls run it as
    it is, and only its stages are those of a jit of it. ``pytree_args`` lets jit take
    pytrees of arrays as arguments (``block``'s nested lists), as JAX's jit does.
    ``converts_first`` is for the functions JAX does not jit as a whole but converts their
    array arguments first (``ensure_arraylike``) and then calls a jitted body (``sum``,
    ``transpose``...): called eagerly under ``jax.set_mesh``, host data is laid out over the
    mesh before the jit, as there (so the results are typed over the mesh, as JAX's).
    ``jax_jits=False`` is for the functions JAX does not jit at all (``transpose``,
    ``reshape``, ``astype``): jaxkit's jit only speeds their eager calls, and under ``vmap``
    or ``jvp`` their results are what the lax operations give (an identity ``transpose`` of a
    NumPy value passes it through, as in JAX, where a jitted body returns an Array)."""
    # No static_argnums means None to jit, so that the numbers of static_argnames are inferred
    # from the signature (jit infers neither when given both, as JAX's).
    nums = tuple(static_argnums) or None

    def make(f: Callable) -> Callable:
        jit = JnpFunction(f, nums, static_argnames, inline=inline, name=name,
                          pytree_args=pytree_args, converts_first=converts_first,
                          jax_jits=jax_jits)
        if not stages_only:
            return jit.as_function()
        f.lower, f.trace, f.eval_shape = jit.lower, jit.trace, jit.eval_shape
        f.clear_cache = jit.clear_cache
        return f

    return make if fun is None else make(fun)


def alias(fun: Callable, name: str) -> Callable:
    """``fun`` (a ``@jitted`` function) under another name, as JAX defines its aliases
    (``abs`` of ``absolute``, ``acos`` of ``arccos``...): a jit of its own, so its eager
    program is ``jit_<name>`` and it prints as ``name``."""
    jit = fun._jit
    # JAX's aliases are inline jits calling the original: an alias of a plain-jit function
    # (``acosh`` of ``arccosh``) stages the original's ``jit[name=arccosh]`` equation.
    target = jit._fun if jit._inline else fun

    def body(*args, **kwargs):
        return target(*args, **kwargs)
    functools.update_wrapper(body, jit._fun)
    body.__name__ = body.__qualname__ = name
    return JnpFunction(body, jit._static_argnums, jit._static_argnames, inline=True,
                       converts_first=jit._converts_first).as_function()
