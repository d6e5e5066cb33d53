"""Bad input stops in Python with a clear error, never in XLA or by aborting the process.

Each case runs in a fresh interpreter where it could kill one (an abort in jaxlib's C++ would
otherwise take the test run with it): the child must exit normally, having caught an
exception of JAX's class whose message names the problem. JAX 0.10.2 itself aborts on the
overflowing shapes and gives an MLIRError for ``jnp.tile`` with a negative count.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

# (code that must raise, exception class, text the message must contain)
CASES = [
    ("jnp.zeros((2**62, 2**62))", "ValueError", "too big"),
    ("jnp.ones((2**40, 2**40))", "ValueError", "too big"),
    ("jnp.ones((2**31, 2**31))", "ValueError", "2**63 - 1 bytes"),
    ("jnp.arange(2**62)", "ValueError", "too big"),
    ("jnp.full((-3,), 1.0)", "TypeError", "nonnegative, got (-3,)"),
    ("jnp.broadcast_to(jnp.ones(3), (-1, 3))", "TypeError", "nonnegative, got (-1, 3)"),
    ("jax.jit(lambda: jnp.zeros((-1,)))()", "TypeError", "nonnegative, got (-1,)"),
    ("jnp.tile(jnp.ones(3), -2)", "TypeError", "nonnegative"),
    ("jax.vmap(lambda x: jnp.zeros((-2,)))(jnp.ones(3))", "TypeError", "nonnegative"),
    ("jax.grad(lambda x: jnp.sum(jnp.broadcast_to(x, (-1,))))(1.)", "TypeError",
     "nonnegative"),
    ("jax.lax.broadcast_in_dim(1.0, (-2,), ())", "TypeError", "nonnegative"),
]


def test_bad_shapes_raise_in_python():
    # One child runs every case (starting an interpreter per case would cost a second each);
    # an abort would end it early, and the missing lines say where.
    program = "import jaxkit as jax, jaxkit.numpy as jnp\n" + "".join(
        f"try:\n    {code}\nexcept Exception as e:\n"
        f"    print(type(e).__name__ + ': ' + str(e).replace(chr(10), ' '))\n"
        f"else:\n    print('no error')\n" for code, _, _ in CASES)
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert len(lines) == len(CASES), out.stdout
    for (code, cls, text), line in zip(CASES, lines):
        assert line.startswith(cls + ": ") and text in line, (code, line)


@pytest.mark.parametrize("make_deleted", [
    "x.delete()",
    "jax.jit(lambda a: a * 2, donate_argnums=0)(x)",
], ids=["delete", "donate"])
@pytest.mark.parametrize("use", [
    "x + 1",                                                 # an eager primitive
    "jnp.sin(x)",                                            # a jitted jnp function
    "jax.jit(lambda a: a * 2, donate_argnums=0)(x)",         # jit's one-argument fast path
    "jax.jit(lambda a, b, c: a + b + c)(x, x, x)",           # jit's general path
    "jax.jit(lambda a, b: a + b)(x, x)",                     # jit's two-argument fast path
    "x.sum()",
    "print(x)",
])
def test_deleted_arrays_raise_jax_runtime_error(make_deleted, use):
    import jaxkit as jax
    import jaxkit.numpy as jnp
    x = jnp.ones(3)
    f2 = jax.jit(lambda a, b: a + b)
    f2(x, x)  # compiled and cached: the second call takes the fast path
    if "lambda a, b: a + b" in use:
        use = use.replace("jax.jit(lambda a, b: a + b)", "f2")
    exec(make_deleted, {"jax": jax, "jnp": jnp, "x": x})
    with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=float32\[3\]"):
        exec(use, {"jax": jax, "jnp": jnp, "x": x, "f2": f2})


def test_deleted_argument_of_pmap():
    import jaxkit as jax
    import jaxkit.numpy as jnp
    x = jnp.ones((1, 3))
    x.delete()
    with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=float32\[1,3\]"):
        jax.pmap(lambda a: a + 1)(x)
