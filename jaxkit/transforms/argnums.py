"""How ``jit``, ``pmap`` and the other transformations taking ``static_argnums``/
``donate_argnums``-like options read them: argument numbers and names inferred from each other
through the function's signature, checked as JAX checks them, and static values hashed."""
from __future__ import annotations

import inspect
from collections.abc import Callable


def hashable_static(value, name: str):
    try:
        hash(value)
    except TypeError as e:
        # JAX's words (the fix: a hashable value, a tuple for a list, or not static)
        raise ValueError(
            "Non-hashable static arguments are not supported. An error occurred while trying "
            f"to hash an object of type {type(value)}, {value!r}. The error was:\n"
            f"TypeError: {e}\n") from None
    return value


def positional_params(fun: Callable) -> list[str]:
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _signature(fun: Callable) -> inspect.Signature | None:
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return None


def check_argnames(fun: Callable, argnames, what: str) -> None:
    """JAX's errors for ``what`` (``static_argnames``, ``donate_argnames``) naming
    positional-only parameters or parameters ``fun`` does not have (any name is one of a
    function taking ``**kwargs``)."""
    sig = _signature(fun)
    if sig is None or argnames is None:
        return
    names = {argnames} if isinstance(argnames, str) else set(argnames)
    params = sig.parameters.values()
    positional_only = {p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                             p.VAR_POSITIONAL)}
    if bad := names & positional_only:
        raise ValueError(f"Jitted function has invalid argnames {bad} in {what}. These are "
                         "positional-only")
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return
    if bad := names - {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                             p.KEYWORD_ONLY)}:
        raise ValueError(f"Jitted function has invalid argnames {bad} in {what}. Function "
                         "does not take these args.")


def check_argnums_in_range(fun: Callable, argnums: frozenset, what: str) -> None:
    """JAX's error for ``what`` (``static_argnums``, ``donate_argnums``) beyond a function's
    positional parameters (any number is one of a function taking ``*args``)."""
    sig = _signature(fun)
    if sig is None or any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values()):
        return
    n = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            for p in sig.parameters.values())
    if argnums and (max(argnums) >= n or -min(argnums) > n):
        raise ValueError(f"Jitted function has {what}={tuple(sorted(argnums))}, but only "
                         f"accepts {n} positional arguments.")


def infer_argnums_and_argnames(fun, argnums, argnames) -> tuple[frozenset, frozenset]:
    """Normalise argnums/argnames and infer each from the other through the signature. As in
    JAX, when both are given neither is inferred from the other (Flax's lifted jit names
    ``static_argnames`` of the method it wraps, whose signature ``functools.wraps`` copies,
    while passing those arguments by keyword)."""
    both = argnums is not None and argnames is not None
    if isinstance(argnums, int):
        argnums = (argnums,)
    if isinstance(argnames, str):
        argnames = (argnames,)
    argnums = tuple(argnums or ())
    argnames = tuple(argnames or ())
    params = positional_params(fun)
    try:
        sig_params = dict(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        sig_params = {}
    nums = set()
    for i in argnums:
        if not isinstance(i, int):
            raise TypeError(f"argnums must be integers, got {i!r}")
        if i < 0:
            if not params:
                raise ValueError(f"negative argnum {i} needs a function with a signature")
            i += len(params)
        nums.add(i)
    names = set(argnames)
    for name in argnames:
        if name in params:
            if not both:
                nums.add(params.index(name))
        elif sig_params and name not in sig_params and not any(
                p.kind == p.VAR_KEYWORD for p in sig_params.values()):
            raise ValueError(f"static/donated argument name {name!r} is not a parameter of "
                             f"{getattr(fun, '__name__', fun)}")
    if not both:
        for i in list(nums):
            if i < len(params):
                names.add(params[i])
    return frozenset(nums), frozenset(names)
