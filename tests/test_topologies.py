"""``jax.experimental.topologies`` on jaxkit, side by side with the JAX oracle (one CPU device
in each process): the attached topology, meshes built from it, and the errors
``get_topology_desc`` raises where no PjRt plugin provides a topology."""
import pytest

import jaxkit
from jaxkit.experimental import topologies

jax = pytest.importorskip("jax")
jtopologies = pytest.importorskip("jax.experimental.topologies")


def test_attached_topology_lists_the_devices():
    ours, theirs = topologies.get_attached_topology(), jtopologies.get_attached_topology()
    assert isinstance(ours, topologies.TopologyDescription)
    assert [str(d) for d in ours.devices] == [str(d) for d in theirs.devices]
    assert ours.devices == jaxkit.devices()
    assert topologies.get_attached_topology("cpu").devices == jaxkit.devices("cpu")
    assert isinstance(ours.devices[0], topologies.Device)
    assert topologies.Device is jtopologies.Device  # both are jaxlib's Device


@pytest.mark.parametrize("shape, names, contiguous", [
    ((1,), ("x",), False), ((1, 1), ("x", "y"), False), ((1,), ("x",), True)])
def test_make_mesh_matches_jax(shape, names, contiguous):
    ours = topologies.make_mesh(topologies.get_attached_topology(), shape, names,
                                contiguous_submeshes=contiguous)
    theirs = jtopologies.make_mesh(jtopologies.get_attached_topology(), shape, names,
                                   contiguous_submeshes=contiguous)
    assert (str(ours), repr(ours)) == (str(theirs), repr(theirs))
    assert ours.devices.shape == theirs.devices.shape


def test_make_mesh_refuses_a_shape_that_does_not_fit():
    with pytest.raises(ValueError, match="Number of devices 1 must equal the product"):
        topologies.make_mesh(topologies.get_attached_topology(), (2,), ("x",))


@pytest.mark.parametrize("args", [("x", "cpu"), ("", "gpu"), ("v5e:2x2", None), ("", "tpu")])
def test_get_topology_desc_raises_as_jax_does_without_a_topology_plugin(args):
    with pytest.raises(Exception) as theirs:
        jtopologies.get_topology_desc(*args)
    with pytest.raises(Exception) as ours:
        topologies.get_topology_desc(*args)
    # jaxkit's error for an absent GPU plugin is a RuntimeError that adds how to install it
    assert isinstance(ours.value, type(theirs.value))
    assert str(ours.value).startswith(str(theirs.value))
