"""``multihost_utils.ltg_abstract_eval``/``gtl_abstract_eval`` (the types of the
host-local <-> global views) against the JAX oracle on a one-process mesh; the two-process
behaviour of the primitives they type is tested in ``test_multihost.py``."""
import numpy as np
import pytest

import jaxkit
from jaxkit.core import ShapedArray
from jaxkit.experimental import multihost_utils as kmu

jax = pytest.importorskip("jax")
jmu = pytest.importorskip("jax.experimental.multihost_utils")


@pytest.mark.parametrize("name", ["ltg_abstract_eval", "gtl_abstract_eval"])
@pytest.mark.parametrize("shape, dtype, spec", [
    ((4, 3), np.float32, ("x",)), ((2,), np.int32, ()), ((), np.float32, ())])
def test_abstract_evals_match_jax(name, shape, dtype, spec):
    def run(J, mu, shaped):
        mesh = J.sharding.Mesh(np.array(J.devices()[:1]), ("x",))
        out = getattr(mu, name)(shaped(shape, np.dtype(dtype)), global_mesh=mesh,
                                pspec=J.sharding.PartitionSpec(*spec))
        return type(out).__name__, out.shape, out.dtype, out.weak_type
    assert run(jaxkit, kmu, ShapedArray) == run(jax, jmu, jax.core.ShapedArray)


def test_the_primitives_are_typed_by_them():
    mesh = jaxkit.sharding.Mesh(np.array(jaxkit.devices()[:1]), ("x",))
    spec = jaxkit.sharding.PartitionSpec("x")
    jaxpr = jaxkit.make_jaxpr(lambda x: kmu.global_array_to_host_local_array(
        kmu.host_local_array_to_global_array(x, mesh, spec), mesh, spec))(np.ones((4, 3)))
    assert [str(v.aval) for e in jaxpr.eqns for v in e.outvars] == [
        str(kmu.ltg_abstract_eval(ShapedArray((4, 3), np.float32), global_mesh=mesh,
                                  pspec=spec))] * 2


def test_the_names_jax_imports_into_the_module_work_as_jax():
    tree = {"a": (1, 2), "b": [3]}
    assert kmu.safe_zip([1, 2], "ab") == jmu.safe_zip([1, 2], "ab")
    with pytest.raises(ValueError):
        kmu.safe_zip([1, 2], [3])
    leaves, treedef = kmu.tree_flatten(tree)
    assert leaves == jmu.tree_flatten(tree)[0]
    assert kmu.tree_unflatten(treedef, [4, 5, 6]) == jmu.tree_unflatten(
        jmu.tree_flatten(tree)[1], [4, 5, 6])
    assert kmu.xla_client is jmu.xla_client  # jaxlib's own module
