"""The differential fuzzer's CI slice: every op record (``_fuzz_records.py``) against JAX,
eagerly and under jit, vmap and grad, for one derandomized hypothesis example each. A
mismatch fails unless ``_fuzz_allow.py`` lists it with its reason. ``bench/fuzz_long.py`` runs
the same records with many more examples."""
import numpy as np
import pytest
from _fuzz_allow import allowed
from _fuzz_core import case_st, check_case
from _fuzz_records import RECORDS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# One example per record (about 180 records, each compiled eight ways) keeps the slice near a
# minute on two cores: the whole suite must fit CI's 40 minutes there. The long run
# (bench/fuzz_long.py) explores with many examples per record.
CI_EXAMPLES = 1


def unexplained(op, failures):
    return [f for f in failures if allowed(op.name, f) is None]


@pytest.mark.parametrize("op", RECORDS, ids=lambda op: op.name)
def test_op_matches_jax(op):
    @settings(max_examples=CI_EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data):
        arrays, params, seed = data.draw(case_st(op))
        bad = unexplained(op, check_case(op, arrays, params, np.random.default_rng(seed)))
        assert not bad, "\n".join(bad)

    check()
