"""Random programs (compositions of ops under jit/vmap/grad, ``_fuzz_programs.py``) against
JAX: the CI slice, derandomized."""
from _fuzz_programs import check_program, program_st
from hypothesis import HealthCheck, given, settings


@settings(max_examples=30, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(program_st())
def test_random_programs_match_jax(program):
    bad = check_program(*program)
    assert not bad, "\n".join(bad)
