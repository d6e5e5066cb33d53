"""Solves differentiated implicitly at their solution: ``custom_linear_solve`` and
``custom_root``; the ``custom_linear_solve`` and ``custom_root`` primitives with all rules.

Both trace the user's functions to closed jaxprs (their constants become leading operands, so
enclosing transformations see them) and run only the solver forward. Derivatives never go
through the solver (which may be a ``while_loop``, or not differentiable at all):

* ``custom_linear_solve``: ``x = A^{-1} b`` for the linear map ``A = matvec``. Forward mode
  solves again, ``x' = A^{-1} (b' - A' x)``, where ``A'`` is the derivative of ``matvec`` with
  respect to the values it closes over; the primitive is linear in ``b``, and its transpose is
  the same solve with the roles swapped (``vecmat``, the transpose of ``matvec`` found by
  transposing its jaxpr, and ``transpose_solve``; or ``matvec``/``solve`` when symmetric).
* ``custom_root``: ``x = solve(f, guess)`` with ``f(x) = 0``. By the implicit function
  theorem ``x' = -(df/dx)^{-1} (df/dp p')`` for the values ``p`` that ``f`` closes over; the
  inverse is ``tangent_solve`` applied to ``f`` linearized at the root (traced once, as a
  third jaxpr). JAX writes it with ``custom_jvp``, which lives above ``lax`` here, so it is a
  primitive of its own whose JVP rule is that formula.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

from jaxkit import core
from jaxkit import tree_util
from jaxkit.core import ClosedJaxpr
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.lax.bodies import avals_of, run_jaxpr, trace_function, zeros_of_aval
from jaxkit.lax.elementwise import neg

# --------------------------------------------------------------------------------------------
# custom_linear_solve
# --------------------------------------------------------------------------------------------


class _LinearSolveTuple(NamedTuple):
    """One entry per function of a linear solve: closed jaxprs (``vecmat`` and
    ``transpose_solve`` may be None) in the ``jaxprs`` parameter, constant counts in
    ``const_lengths``."""

    matvec: Any
    vecmat: Any
    solve: Any
    transpose_solve: Any

    def transpose(self) -> _LinearSolveTuple:
        """The same tuple for the transposed system ``A^T y = c``."""
        return _LinearSolveTuple(self.vecmat, self.matvec, self.transpose_solve, self.solve)


def _split(args, lengths: tuple):
    """``(groups, rest)``: ``args`` cut into consecutive groups of ``lengths`` (same tuple
    type), then what remains."""
    groups, i = [], 0
    for n in lengths:
        groups.append(list(args[i:i + n]))
        i += n
    return type(lengths)(*groups), list(args[i:])


def _flat(groups) -> list:
    return [x for g in groups for x in g]


def _check_shapes(name: str, expected_name: str, actual, expected) -> None:
    actual_shapes = [tuple(core.get_aval(x).shape) for x in actual]
    expected_shapes = [tuple(core.get_aval(x).shape) for x in expected]
    if actual_shapes != expected_shapes:
        raise ValueError(f"{name}() output shapes must match {expected_name}, got "
                         f"{actual_shapes} and {expected_shapes}")


def _check_tree(name: str, expected_name: str, actual_tree, expected_tree,
                has_aux: bool = False) -> None:
    if has_aux:
        children = tree_util.treedef_children(actual_tree)
        if len(children) != 2:
            raise ValueError(f"{name}() produced a pytree with structure {actual_tree}, but a "
                             "pytree tuple with auxiliary output was expected because has_aux "
                             "was set to True.")
        actual_tree = children[0]
    if actual_tree != expected_tree:
        raise TypeError(f"{name}() output pytree structure must match {expected_name}, got "
                        f"{actual_tree} and {expected_tree}.")


def _shape_checked(fun: Callable, name: str, b_leaves: list, has_aux: bool) -> Callable:
    """``fun`` checking, while it is traced, that its result has the shapes of ``b`` (before
    the structure is compared, as JAX does, so a wrong count of leaves is a ValueError)."""
    def checked(x):
        out = y = fun(x)
        if has_aux:
            y, _ = out  # unpacked like JAX: a non-pair fails here or in the shape check
        _check_shapes(name, "b", tree_util.tree_leaves(y), b_leaves)
        return out
    return checked


def _vecmat_of(matvec: Callable, b_tree, b_avals) -> Callable:
    """The transpose of the linear map ``matvec`` (a pytree function), as JAX's
    ``linear_transpose``: ``matvec`` traced again with ``b`` unknown (so equations that
    staging forwards, such as identity broadcasts, are transposed too: ``reduce_sum`` over no
    axes, as JAX prints), and that jaxpr transposed whenever ``vecmat`` is called."""
    def flat_matvec(*leaves):
        return tree_util.tree_leaves(matvec(tree_util.tree_unflatten(b_tree, list(leaves))))

    jaxpr, _, residuals = pe.trace_to_subjaxpr(
        flat_matvec, [pe.PartialVal.unknown(a) for a in b_avals], instantiate=True)

    def vecmat(y):
        cts = ad.backward_pass(jaxpr, residuals, [ad.UndefinedPrimal(a) for a in b_avals],
                               tree_util.tree_leaves(y), transform_stack=False)
        return tree_util.tree_unflatten(b_tree, [
            zeros_of_aval(a.to_tangent_aval()) if ad.is_zero(c) else c
            for c, a in zip(cts, b_avals)])
    return vecmat


def custom_linear_solve(matvec: Callable, b: Any, solve: Callable[[Callable, Any], Any],
                        transpose_solve: Callable[[Callable, Any], Any] | None = None,
                        symmetric: bool = False, has_aux: bool = False) -> Any:
    """``solve(matvec, b)``, differentiated implicitly: derivatives assume that the result
    ``x`` satisfies ``matvec(x) == b`` and never differentiate ``solve``. ``matvec`` is linear
    and differentiable; reverse mode needs ``transpose_solve`` (``transpose_solve(vecmat, y)``
    solves with the transposed map), or ``symmetric=True`` to use ``solve`` for it. With
    ``has_aux``, ``solve``/``transpose_solve`` return ``(x, aux)``. ``b`` may be a pytree. The
    solve jaxpr is inlined into the program."""
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    b_leaves, b_tree = tree_util.tree_flatten(b)
    b_avals = avals_of(b_leaves)
    in_tree = tree_util.treedef_tuple([b_tree])

    matvec_jaxpr, matvec_consts, out_tree = trace_function(
        _shape_checked(matvec, "matvec", b_leaves, False), in_tree, b_avals,
        "matvec of custom_linear_solve")
    _check_tree("matvec", "b", out_tree, b_tree)

    solve_jaxpr, solve_consts, solve_tree = trace_function(
        _shape_checked(partial(solve, matvec), "solve", b_leaves, has_aux), in_tree, b_avals,
        "solve of custom_linear_solve")
    _check_tree("solve", "b", solve_tree, b_tree, has_aux)

    if transpose_solve is None:
        vecmat_jaxpr = tr_solve_jaxpr = None
        vecmat_consts, tr_solve_consts = [], []
    else:
        if symmetric:
            vecmat = matvec
            vecmat_jaxpr, vecmat_consts = matvec_jaxpr, matvec_consts
        else:
            vecmat = _vecmat_of(matvec, b_tree, b_avals)
            vecmat_jaxpr, vecmat_consts, _ = trace_function(
                vecmat, in_tree, b_avals, "vecmat of custom_linear_solve")
        tr_solve_jaxpr, tr_solve_consts, tr_tree = trace_function(
            _shape_checked(partial(transpose_solve, vecmat), "transpose_solve", b_leaves,
                           has_aux), in_tree, b_avals, "transpose_solve of custom_linear_solve")
        _check_tree("transpose_solve", "b", tr_tree, b_tree, has_aux)

    consts = _LinearSolveTuple(matvec_consts, vecmat_consts, solve_consts, tr_solve_consts)
    jaxprs = _LinearSolveTuple(matvec_jaxpr, vecmat_jaxpr, solve_jaxpr, tr_solve_jaxpr)
    outs = linear_solve_p.bind(*_flat(consts), *b_leaves,
                               const_lengths=_LinearSolveTuple(*map(len, consts)), jaxprs=jaxprs)
    return tree_util.tree_unflatten(solve_tree, outs)


def _solving_primitive(name: str) -> core.Primitive:
    """A primitive whose forward computation is its ``jaxprs.solve`` applied to that jaxpr's
    constants and the trailing operands (``b`` or the initial guess): both solves here. The
    results' types are what ``solve`` returns (their shapes were checked when tracing)."""

    def impl(*args, const_lengths, jaxprs):
        consts, rest = _split(args, const_lengths)
        return run_jaxpr(jaxprs.solve, *consts.solve, *rest)

    def lowering(ctx: mlir.LoweringRuleContext, *args, const_lengths, jaxprs):
        consts, rest = _split(args, const_lengths)
        return mlir.closed_subcomp(ctx.module_context, jaxprs.solve, *consts.solve, *rest)

    prim = core.Primitive(name)
    prim.multiple_results = True
    prim.def_impl(impl)
    prim.def_abstract_eval(lambda *args, const_lengths, jaxprs: list(jaxprs.solve.out_avals))
    mlir.register_lowering(prim, lowering)
    return prim


linear_solve_p = _solving_primitive("custom_linear_solve")


def _matvec_tangent(matvec: ClosedJaxpr, consts: list, consts_dot: list, x: list) -> list:
    """``A' x``: the derivative of ``matvec(x)`` with respect to its constants only."""
    nonzero = [not ad.is_zero(t) for t in consts_dot]
    jvp, _ = ad.jvp_jaxpr(matvec, nonzero + [False] * len(x), instantiate=True)
    outs = run_jaxpr(jvp, *consts, *x, *[t for t, nz in zip(consts_dot, nonzero) if nz])
    return outs[len(matvec.out_avals):]


def _linear_solve_jvp(primals, tangents, *, const_lengths, jaxprs):
    params = dict(const_lengths=const_lengths, jaxprs=jaxprs)
    x = linear_solve_p.bind(*primals, **params)
    consts, _ = _split(primals, const_lengths)
    consts_dot, b_dot = _split(tangents, const_lengths)
    nb = len(b_dot)
    # Differentiating A x = b: A' x + A x' = b', so x' = A^{-1} (b' - A' x). Only matvec's
    # constants define A; the solvers' constants have no say in the solution.
    rhs = list(b_dot)
    if not all(ad.is_zero(t) for t in consts_dot.matvec):
        a_dot_x = _matvec_tangent(jaxprs.matvec, consts.matvec, consts_dot.matvec, x[:nb])
        # b' + (-(A' x)), summed as tangents (``add_any``), as JAX's rule stages it
        rhs = [ad.add_tangents(t, m if ad.is_zero(m) else neg(m)) for t, m in zip(rhs, a_dot_x)]
    out_avals = [a.to_tangent_aval() for a in jaxprs.solve.out_avals]
    if all(ad.is_zero(t) for t in rhs):
        return x, [ad.Zero(a) for a in out_avals]
    rhs = [ad.instantiate_zeros(t) for t in rhs]
    x_dot = linear_solve_p.bind(*_flat(consts), *rhs, **params)
    # Auxiliary outputs (solver diagnostics) are not differentiated.
    return x, list(x_dot[:nb]) + [ad.Zero(a) for a in out_avals[nb:]]


def _linear_solve_transpose(cts, *args, const_lengths, jaxprs):
    if jaxprs.transpose_solve is None:
        raise TypeError("transpose_solve required for backwards mode automatic "
                        "differentiation of custom_linear_solve")
    consts, b = _split(args, const_lengths)
    if any(ad.is_undefined_primal(c) for c in _flat(consts)):
        raise NotImplementedError(
            "transpose rule for 'custom_linear_solve' with respect to the constants of its "
            "functions is not implemented: the solve is linear in b only")
    nb = len(b)
    if not all(ad.is_zero(c) for c in cts[nb:]):
        raise NotImplementedError(
            "transpose rule for 'custom_linear_solve' with a cotangent for its auxiliary "
            "outputs is not implemented (they are not differentiable)")
    x_ct = [ad.instantiate_zeros(c) for c in cts[:nb]]
    # The transposed system: A^T y = c, solved by transpose_solve with vecmat as its map.
    b_ct = linear_solve_p.bind(*_flat(consts.transpose()), *x_ct,
                               const_lengths=const_lengths.transpose(),
                               jaxprs=jaxprs.transpose())[:nb]
    return [None] * sum(const_lengths) + [c if ad.is_undefined_primal(bi) else None
                                          for c, bi in zip(b_ct, b)]


def _linear_solve_batch(axis_data, vals, dims, *, const_lengths, jaxprs):
    consts, b = _split(vals, const_lengths)
    consts_dims, b_dims = _split(dims, const_lengths)
    c_bat = _LinearSolveTuple(*[[d is not batching.not_mapped for d in g] for g in consts_dims])
    b_bat0 = [d is not batching.not_mapped for d in b_dims]
    nb = len(b)
    n_aux = len(jaxprs.solve.out_avals) - nb
    # x and b live in the same space, and the four jaxprs map between them (solve and vecmat:
    # b -> x; matvec and transpose_solve: x -> b), so all four must agree on which leaves of
    # x and of b are batched: grow both sets until no jaxpr batches anything more.
    b_bat, x_bat = list(b_bat0), [False] * (nb + n_aux)
    while True:
        solve_b, solve_x_bat = batching.batch_jaxpr(jaxprs.solve, axis_data,
                                                    c_bat.solve + b_bat, x_bat)
        new_x_bat = list(solve_x_bat)
        vecmat_b = None
        if jaxprs.vecmat is not None:
            vecmat_b, vm_bat = batching.batch_jaxpr(jaxprs.vecmat, axis_data,
                                                    c_bat.vecmat + b_bat, b_bat)
            new_x_bat = [a or c for a, c in zip(new_x_bat, vm_bat + [True] * n_aux)]
        x_lin = new_x_bat[:nb]
        matvec_b, mv_bat = batching.batch_jaxpr(jaxprs.matvec, axis_data,
                                                c_bat.matvec + x_lin, b_bat)
        new_b_bat = [a or c for a, c in zip(mv_bat, b_bat0)]
        tr_b = None
        if jaxprs.transpose_solve is not None:
            tr_b, ts_bat = batching.batch_jaxpr(jaxprs.transpose_solve, axis_data,
                                                c_bat.transpose_solve + x_lin, new_x_bat)
            new_b_bat = [a or c for a, c in zip(new_b_bat, ts_bat[:nb])]
        if new_x_bat == x_bat and new_b_bat == b_bat:
            break
        x_bat, b_bat = new_x_bat, new_b_bat
    size = axis_data.size
    new_consts = [batching.moveaxis(x, d, 0) if d is not batching.not_mapped else x
                  for x, d in zip(_flat(consts), _flat(consts_dims))]
    new_b = [batching.bdim_at_front(x, d, size) if bat else x
             for x, d, bat in zip(b, b_dims, b_bat)]
    outs = linear_solve_p.bind(*new_consts, *new_b, const_lengths=const_lengths,
                               jaxprs=_LinearSolveTuple(matvec_b, vecmat_b, solve_b, tr_b))
    return outs, [0 if bat else batching.not_mapped for bat in solve_x_bat]


ad.defjvp_rule(linear_solve_p, _linear_solve_jvp)
ad.deftranspose(linear_solve_p, _linear_solve_transpose)
batching.defrule(linear_solve_p, _linear_solve_batch, named_axis=True)


# --------------------------------------------------------------------------------------------
# custom_root
# --------------------------------------------------------------------------------------------


class RootTuple(NamedTuple):
    """One entry per function of a root solve: ``f``, ``solve`` (the root finder) and
    ``l_and_s`` (``tangent_solve`` of ``f`` linearized at a point)."""

    f: Any
    solve: Any
    l_and_s: Any


def custom_root(f: Callable, initial_guess: Any, solve: Callable[[Callable, Any], Any],
                tangent_solve: Callable[[Callable, Any], Any], has_aux: bool = False) -> Any:
    """``solve(f, initial_guess)``, a root of ``f``, differentiated implicitly (with respect
    to the values ``f`` closes over) by ``tangent_solve(g, y)``, which solves ``g(x) = y`` for
    ``g`` the linearization of ``f`` at the root (``lambda g, y: y / g(1.0)`` for scalars).
    With ``has_aux``, ``solve`` returns ``(root, aux)``; ``aux`` is not differentiated."""
    guess, guess_tree = tree_util.tree_flatten(initial_guess)
    avals = avals_of(guess)
    in_tree = tree_util.treedef_tuple([guess_tree])
    f_jaxpr, f_consts, f_tree = trace_function(f, in_tree, avals, "f of custom_root")
    _check_tree("f", "initial_guess", f_tree, guess_tree)
    solve_jaxpr, solve_consts, solution_tree = trace_function(
        partial(solve, f), in_tree, avals, "solve of custom_root")
    _check_tree("solve", "initial_guess", solution_tree, guess_tree, has_aux)

    def f_flat(*x):
        return tree_util.tree_leaves(f(tree_util.tree_unflatten(guess_tree, x)))

    def linearize_and_solve(x, b):
        # Linearized once (its primal part traced once), however often tangent_solve calls g.
        _, lin, _ = ad.linearize_flat(f_flat, tree_util.tree_leaves(x))

        def g(t):
            return tree_util.tree_unflatten(guess_tree, lin.jvp(tree_util.tree_leaves(t)))
        return tangent_solve(g, b)

    ls_jaxpr, ls_consts, ls_tree = trace_function(
        linearize_and_solve, tree_util.treedef_tuple([guess_tree, guess_tree]), avals + avals,
        "tangent_solve of custom_root")
    _check_tree("tangent_solve", "x", ls_tree, guess_tree)
    consts = RootTuple(f_consts, solve_consts, ls_consts)
    outs = custom_root_p.bind(*_flat(consts), *guess,
                              const_lengths=RootTuple(*map(len, consts)),
                              jaxprs=RootTuple(f_jaxpr, solve_jaxpr, ls_jaxpr))
    return tree_util.tree_unflatten(solution_tree, outs)


custom_root_p = _solving_primitive("custom_root")


def _root_jvp(primals, tangents, *, const_lengths, jaxprs):
    solution = custom_root_p.bind(*primals, const_lengths=const_lengths, jaxprs=jaxprs)
    consts, _ = _split(primals, const_lengths)
    consts_dot, _ = _split(tangents, const_lengths)
    n = len(jaxprs.f.out_avals)
    x = solution[:n]
    out_avals = [a.to_tangent_aval() for a in jaxprs.solve.out_avals]
    aux_dot = [ad.Zero(a) for a in out_avals[n:]]
    # f(p, x(p)) = 0 around the root, so df/dp p' + df/dx x' = 0: x' = -(df/dx)^{-1} df/dp p'.
    # Only f's constants are p: the solvers' constants do not move the root. The formula is
    # built from primitives, so differentiating it again gives higher derivatives.
    if all(ad.is_zero(t) for t in consts_dot.f):
        return solution, [ad.Zero(a) for a in out_avals[:n]] + aux_dot
    df_dp = _matvec_tangent(jaxprs.f, consts.f, consts_dot.f, x)
    x_dot = run_jaxpr(jaxprs.l_and_s, *consts.l_and_s, *x, *df_dp)
    return solution, [neg(t) for t in x_dot] + aux_dot


def _root_batch(axis_data, vals, dims, *, const_lengths, jaxprs):
    consts, guess = _split(vals, const_lengths)
    consts_dims, guess_dims = _split(dims, const_lengths)
    size = axis_data.size
    # Every value in the space of x (guess, root, f's values, tangents) is batched: the three
    # jaxprs pass them to one another, so they must agree, and a root generally depends on
    # everything batched anyway.
    c_bat = RootTuple(*[[d is not batching.not_mapped for d in g] for g in consts_dims])
    n = len(guess)
    f_b, _ = batching.batch_jaxpr(jaxprs.f, axis_data, c_bat.f + [True] * n, True)
    solve_b, _ = batching.batch_jaxpr(jaxprs.solve, axis_data, c_bat.solve + [True] * n, True)
    ls_b, _ = batching.batch_jaxpr(jaxprs.l_and_s, axis_data, c_bat.l_and_s + [True] * 2 * n,
                                   True)
    new_consts = [batching.moveaxis(x, d, 0) if d is not batching.not_mapped else x
                  for x, d in zip(_flat(consts), _flat(consts_dims))]
    new_guess = [batching.bdim_at_front(x, d, size) for x, d in zip(guess, guess_dims)]
    outs = custom_root_p.bind(*new_consts, *new_guess, const_lengths=const_lengths,
                              jaxprs=RootTuple(f_b, solve_b, ls_b))
    return outs, [0] * len(outs)


ad.defjvp_rule(custom_root_p, _root_jvp)
batching.defrule(custom_root_p, _root_batch, named_axis=True)


__all__ = ["custom_linear_solve", "custom_root", "linear_solve_p"]
