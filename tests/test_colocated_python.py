"""``jax.experimental.colocated_python`` against the JAX oracle: what the functions and the
wrapped classes return and print, and the errors they raise."""
from __future__ import annotations

import contextlib
import io

import pytest

import jaxkit

jax = pytest.importorskip("jax")
import jax.experimental.colocated_python as jax_colocated  # noqa: E402

import jaxkit.experimental.colocated_python as jk_colocated  # noqa: E402


def _session(lib, colocated) -> list[str]:
    """What a short colocated-Python session prints (reprs and exception texts)."""
    out = []
    cpus = colocated.colocated_cpu_devices(lib.devices())
    mesh = lib.sharding.Mesh(cpus, ["x"])
    sharding = lib.sharding.NamedSharding(mesh, lib.P())
    x = lib.device_put(1, sharding)
    out.append(repr(cpus))
    out.append(repr(colocated.colocated_cpu_devices(mesh).devices))
    f = colocated.colocated_python(lambda x: x + 1)
    y = f(x)
    out.append(f"{y!r} {y.sharding == x.sharding}")
    spec = lib.ShapeDtypeStruct((), "int32", sharding=sharding)
    g = f.specialize(in_specs=((spec,), {}), out_specs_fn=lambda x: spec)
    out.append(repr(g(x)))
    out.append(repr(spec))

    class Adder:
        def __init__(self, increment):
            print("Adder created")
            self.increment = increment

        def __del__(self):
            print("Adder destroyed")

        def add(self, x):
            return x + self.increment

    wrapped = colocated.colocated_python_class(Adder)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        adder = wrapped(2)
        print("made")
        print(adder.add(x))
        del adder
    out.append(printed.getvalue())
    for call in [lambda: colocated.colocated_python(lambda: None)(),
                 lambda: colocated.colocated_python(lambda x: 3)(x),
                 lambda: g.specialize(out_specs_fn=lambda x: x)]:
        try:
            call()
        except ValueError as e:
            out.append(f"ValueError {e}")
    return out


def test_colocated_python_as_jax():
    assert _session(jaxkit, jk_colocated) == _session(jax, jax_colocated)
