"""``jaxkit._src_compat.util`` (``jax._src.util`` for JAX's custom-interpreter tutorial):
``safe_map``/``safe_zip`` agree with JAX's on results and on the error class."""
from __future__ import annotations

import operator

import pytest

from jaxkit._src_compat import util as kit_util

jax_util = pytest.importorskip("jax._src.util")

CASES = [
    ("map_one", lambda u: u.safe_map(abs, [-1, 2, -3])),
    ("map_two", lambda u: u.safe_map(operator.add, [1, 2], (10, 20))),
    ("map_empty", lambda u: u.safe_map(abs, [])),
    ("map_mismatch", lambda u: u.safe_map(operator.add, [1, 2], [1])),
    ("zip_two", lambda u: u.safe_zip([1, 2], "ab")),
    ("zip_mismatch", lambda u: u.safe_zip([1, 2], [1, 2, 3])),
    ("zip_none", lambda u: u.safe_zip()),
]


def _outcome(fn, module):
    try:
        return fn(module)
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return type(e)


@pytest.mark.parametrize("fn", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_matches_jax(fn):
    assert _outcome(fn, kit_util) == _outcome(fn, jax_util)
