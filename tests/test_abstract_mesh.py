"""``jax.sharding.AbstractMesh``/``AbstractDevice`` and the abstract-mesh context
(``use_abstract_mesh``, ``get_abstract_mesh``, ``Mesh.abstract_mesh``) against JAX."""
from __future__ import annotations

import pytest

import jaxkit

jax = pytest.importorskip("jax")


def _cases(J):
    S = J.sharding
    device = S.AbstractDevice("cpu", None, "cpu")
    explicit = (S.AxisType.Explicit,)
    return [
        S.AbstractMesh((2, 4), ("x", "y")),
        S.AbstractMesh((2,), ("x",), axis_types=explicit),
        S.AbstractMesh((2,), ("x",), abstract_device=device),
        device,
        S.get_abstract_mesh(),
        J.make_mesh((1,), ("x",)).abstract_mesh,
    ]


def test_reprs_and_equality_match_jax():
    ours, theirs = _cases(jaxkit), _cases(jax)
    assert [repr(o) for o in ours] == [repr(t) for t in theirs]
    S = jaxkit.sharding
    assert S.AbstractMesh((2,), ("x",)) == S.AbstractMesh((2,), ("x",))
    assert S.AbstractMesh((2,), ("x",)) != ours[2]  # the device is part of the type
    assert ours[0].shape_tuple == theirs[0].shape_tuple and ours[0].size == theirs[0].size


def test_abstract_mesh_context_matches_jax():
    for J in (jaxkit, jax):
        S = J.sharding
        outer = S.AbstractMesh((2, 4), ("x", "y"))
        with S.use_abstract_mesh(outer):
            assert S.get_abstract_mesh() == outer
            with S.use_abstract_mesh(S.AbstractMesh((8,), ("d",))):
                assert S.get_abstract_mesh().axis_names == ("d",)
            assert S.get_abstract_mesh() == outer
        assert S.get_abstract_mesh().empty
        mesh = J.make_mesh((1,), ("x",))
        with J.set_mesh(mesh):
            assert S.get_abstract_mesh() == mesh.abstract_mesh


def test_errors_match_jax():
    for J in (jaxkit, jax):
        with pytest.raises(ValueError, match="Expected mesh of type"):
            with J.sharding.use_abstract_mesh(5):
                pass
        with pytest.raises(ValueError, match="AbstractMesh does not implement devices"):
            J.sharding.AbstractMesh((2,), ("x",)).devices  # noqa: B018
