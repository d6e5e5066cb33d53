"""The generic checks over every lax op record (``_lax_records.RECORDS``): values against the
jax oracle and NumPy, jit against eager, the JVP, transpose and batching rules."""
import pytest
from _lax_checks import (check_batching, check_jit, check_jvp, check_numpy, check_transpose,
                         check_vs_jax)
from _lax_records import RECORDS
from platform_checks import KIT_PLATFORM

jax = pytest.importorskip("jax")


def _params(keep=lambda case: True):
    return [pytest.param(c, id=c.name, marks=_platform_marks(c)) for c in RECORDS if keep(c)]


def _platform_marks(case):
    if case.platforms is None or KIT_PLATFORM in case.platforms:
        return ()
    return pytest.mark.skip(reason=f"XLA compiles {case.name} only for {case.platforms}")


@pytest.mark.parametrize("case", _params())
def test_vs_jax(case):
    check_vs_jax(case, jax.lax)


@pytest.mark.parametrize("case", _params(lambda c: c.np_ref))
def test_vs_numpy(case):
    check_numpy(case)


@pytest.mark.parametrize("case", _params())
def test_jit(case):
    check_jit(case)


@pytest.mark.parametrize("case", _params(lambda c: c.diff))
def test_jvp(case):
    check_jvp(case, jax)


@pytest.mark.parametrize("case", _params(lambda c: c.linear))
def test_transpose(case):
    check_transpose(case, jax)


@pytest.mark.parametrize("case", _params(lambda c: c.batch or c.diff))
def test_batching(case):
    check_batching(case)
