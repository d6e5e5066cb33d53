"""The differential fuzzer's CI slice: every op record (``_fuzz_records.py``) against JAX,
eagerly and under jit, vmap and grad, for a few derandomized hypothesis examples each. A
mismatch fails unless ``_fuzz_allow.py`` lists it with its reason. ``bench/fuzz_long.py`` runs
the same records with many more examples."""
import numpy as np
import pytest
from _fuzz_allow import allowed
from _fuzz_core import case_st, check_case
from _fuzz_records import RECORDS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Two examples per record keep the slice near two minutes on two cores (about 180 records,
# each example compiled eight ways); the long run explores.
CI_EXAMPLES = 2


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
