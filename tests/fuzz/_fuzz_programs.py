"""Random programs: short compositions (2 to 4 steps) of elementwise and reduction ops under a
random stack of ``jit``, ``vmap`` and ``grad``, built from one description for jaxkit and for JAX
and compared like single ops (``_fuzz_core.compare``)."""
from __future__ import annotations

import numpy as np
from _fuzz_core import GRAD_RTOL, JK, JX, RTOL, Raised, compare, run, values
from hypothesis import strategies as st

# Each step maps (h, y) to a new h: y is the program's second input, used by binary steps while
# it still has h's shape (before any reduction) and through its sum after.
UNARY = {
    "sin": lambda j, h: j.sin(h), "cos": lambda j, h: j.cos(h), "tanh": lambda j, h: j.tanh(h),
    "exp": lambda j, h: j.exp(j.clip(h, -20, 20)), "log1p_abs": lambda j, h: j.log1p(j.abs(h)),
    "square": lambda j, h: j.square(h), "abs": lambda j, h: j.abs(h),
    "neg": lambda j, h: -h, "sqrt_abs": lambda j, h: j.sqrt(j.abs(h) + 1.0),
    "sigmoid": lambda j, h: 1 / (1 + j.exp(-h)), "where_pos": lambda j, h: j.where(h > 0, h, 0.1 * h),
}
BINARY = {
    "add": lambda j, h, y: h + y, "mul": lambda j, h, y: h * y,
    "max": lambda j, h, y: j.maximum(h, y), "sub": lambda j, h, y: h - y,
    "hypot": lambda j, h, y: j.hypot(h, y), "div": lambda j, h, y: h / (j.abs(y) + 1.0),
}
REDUCE = {
    "sum": lambda j, h: j.sum(h, axis=-1), "max": lambda j, h: j.max(h, axis=-1),
    "mean": lambda j, h: j.mean(h, axis=0), "logsumexp": None,
}


def _step(ns, kind, name, h, y, reduced):
    j = ns.jnp
    if kind == "unary":
        return UNARY[name](j, h), reduced
    if kind == "binary":
        return BINARY[name](j, h, j.sum(y) if reduced else y), reduced
    if h.ndim == 0:
        return h, reduced
    if name == "logsumexp":
        return ns.special.logsumexp(h, axis=-1), True
    return REDUCE[name](j, h), True


def build(ns, steps, transforms):
    """The program for ``ns``: ``steps`` in order, then ``transforms`` applied innermost first."""
    def f(x, y):
        h, reduced = x, False
        for kind, name in steps:
            h, reduced = _step(ns, kind, name, h, y, reduced)
        return h

    g = f
    for t in transforms:
        if t == "jit":
            g = ns.jit(g)
        elif t == "vmap":
            g = ns.vmap(g)
        else:
            g = ns.grad(lambda x, y, inner=g: ns.jnp.sum(inner(x, y)), argnums=(0, 1))
    return g


@st.composite
def program_st(draw):
    n = draw(st.integers(2, 4))
    steps = []
    for _ in range(n):
        kind = draw(st.sampled_from(["unary", "unary", "binary", "reduce"]))
        table = {"unary": UNARY, "binary": BINARY, "reduce": REDUCE}[kind]
        steps.append((kind, draw(st.sampled_from(sorted(table)))))
    transforms = draw(st.lists(st.sampled_from(["jit", "vmap", "grad"]), max_size=3))
    base = tuple(draw(st.lists(st.sampled_from([1, 2, 3]), max_size=2)))
    seed = draw(st.integers(0, 2**32 - 1))
    return steps, transforms, base, seed


def check_program(steps, transforms, base, seed) -> list[str]:
    """Run one program under jaxkit and JAX; the mismatches as text."""
    rng = np.random.default_rng(seed)
    shape = (2,) * transforms.count("vmap") + base
    x = values(rng, shape, np.float32, special=0.03)
    y = values(rng, shape, np.float32, special=0.03)
    ours = run(JK, lambda: build(JK, steps, transforms)(x, y))
    theirs = run(JX, lambda: build(JX, steps, transforms)(x, y))
    # Gradients through several steps compound rounding: the gradient tolerances, and more
    # room per grad in the stack.
    grads = transforms.count("grad")
    rtols = GRAD_RTOL if grads else RTOL
    msg = compare(ours, theirs, rtols, scale=10.0 ** grads)
    if msg is None:
        return []
    extra = f" ({ours!r})" if isinstance(ours, Raised) else ""
    return [f"[program] steps={steps} transforms={transforms} x: f32{list(shape)} "
            f"seed={seed}: {msg}{extra}"]
