"""``jaxkit.scipy.spatial.transform`` (``Rotation``, ``Slerp``) against SciPy and the JAX
oracle: one record per conversion or operation, checked for values, shapes and dtypes, jit vs
eager, vmap vs a loop and float64 gradients; then pytrees, random rotations and errors."""
from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_grads
from scipy.spatial.transform import Rotation as SciRotation
from scipy.spatial.transform import Slerp as SciSlerp

import jaxkit
from jaxkit.scipy.spatial.transform import Rotation, Slerp

jax = pytest.importorskip("jax")
from jax.scipy.spatial.transform import Rotation as JaxRotation  # noqa: E402
from jax.scipy.spatial.transform import Slerp as JaxSlerp  # noqa: E402


class Lib:
    """One library's Rotation and a Slerp constructor with a common signature."""

    def __init__(self, rotation, slerp):
        self.R, self.slerp = rotation, slerp


KIT = Lib(Rotation, Slerp.init)
JAX = Lib(JaxRotation, JaxSlerp.init)
SCI = Lib(SciRotation, SciSlerp)


def _quats(rng, n=4):
    return rng.normal(size=(n, 4))


def _angles(rng, n=4):
    return rng.uniform(-3, 3, size=(n, 3))


def _rotvecs(rng, n=4):
    v = rng.normal(size=(n, 3))
    v[0] *= 1e-5  # the small-angle series
    return v


KEY_TIMES = np.array([0.0, 1.0, 2.5, 3.0])
# (name, inputs(rng) -> arrays, fn(lib, *arrays) -> array)
RECORDS = [
    ("from_quat-as_quat", lambda r: (_quats(r),), lambda L, q: L.R.from_quat(q).as_quat()),
    ("as_quat-canonical", lambda r: (_quats(r),),
     lambda L, q: L.R.from_quat(q).as_quat(canonical=True, scalar_first=True)),
    ("as_matrix", lambda r: (_quats(r),), lambda L, q: L.R.from_quat(q).as_matrix()),
    ("as_rotvec", lambda r: (_quats(r),), lambda L, q: L.R.from_quat(q).as_rotvec()),
    ("as_rotvec-degrees", lambda r: (_quats(r),),
     lambda L, q: L.R.from_quat(q).as_rotvec(degrees=True)),
    ("as_mrp", lambda r: (_quats(r),), lambda L, q: L.R.from_quat(q).as_mrp()),
    ("magnitude", lambda r: (_quats(r),), lambda L, q: L.R.from_quat(q).magnitude()),
    ("inv", lambda r: (_quats(r),), lambda L, q: L.R.from_quat(q).inv().as_quat()),
    ("compose", lambda r: (_quats(r), _quats(r)),
     lambda L, p, q: (L.R.from_quat(p) * L.R.from_quat(q)).as_quat()),
    ("apply", lambda r: (_quats(r), r.normal(size=(4, 3))),
     lambda L, q, v: L.R.from_quat(q).apply(v)),
    ("apply-inverse", lambda r: (_quats(r), r.normal(size=(4, 3))),
     lambda L, q, v: L.R.from_quat(q).apply(v, inverse=True)),
    *[(f"as_euler-{seq}", lambda r: (_quats(r),),
       lambda L, q, seq=seq: L.R.from_quat(q).as_euler(seq))
      for seq in ("xyz", "ZYX", "zxz", "XYX", "yzx")],
    ("as_euler-degrees", lambda r: (_quats(r),),
     lambda L, q: L.R.from_quat(q).as_euler("zyx", degrees=True)),
    *[(f"from_euler-{seq}", lambda r: (_angles(r),),
       lambda L, a, seq=seq: L.R.from_euler(seq, a).as_quat())
      for seq in ("xyz", "ZYX", "zxz", "YXY")],
    ("from_euler-degrees", lambda r: (_angles(r) * 50,),
     lambda L, a: L.R.from_euler("xzy", a, degrees=True).as_quat()),
    ("from_matrix", lambda r: (SciRotation.from_quat(_quats(r)).as_matrix(),),
     lambda L, m: L.R.from_matrix(m).as_quat(canonical=True)),
    ("from_rotvec", lambda r: (_rotvecs(r),), lambda L, v: L.R.from_rotvec(v).as_quat()),
    ("from_rotvec-degrees", lambda r: (_rotvecs(r) * 50,),
     lambda L, v: L.R.from_rotvec(v, degrees=True).as_quat()),
    ("from_mrp", lambda r: (_rotvecs(r),), lambda L, v: L.R.from_mrp(v).as_quat()),
    ("mean", lambda r: (_quats(r),), lambda L, q: L.R.from_quat(q).mean().as_quat(True)),
    ("mean-weights", lambda r: (_quats(r), r.uniform(0.1, 1, size=4)),
     lambda L, q, w: L.R.from_quat(q).mean(w).as_quat(True)),
    ("slerp", lambda r: (_quats(r), np.array([0.0, 0.4, 1.0, 1.7, 2.9, 3.0])),
     lambda L, q, t: L.slerp(KEY_TIMES, L.R.from_quat(q))(t).as_quat()),
]
IDS = [name for name, _, _ in RECORDS]


@pytest.mark.parametrize("name,inputs,fn", RECORDS, ids=IDS)
def test_values_vs_scipy_and_jax(name, inputs, fn, x64):
    args = inputs(np.random.default_rng(0))
    ours, theirs = np.asarray(fn(KIT, *args)), np.asarray(fn(JAX, *args))
    ref = fn(SCI, *args)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name,inputs,fn", RECORDS, ids=IDS)
def test_jit_matches_eager_float32(name, inputs, fn):
    args = [a.astype(np.float32) for a in inputs(np.random.default_rng(1))]
    f = lambda *a: fn(KIT, *a)  # noqa: E731
    np.testing.assert_allclose(np.asarray(jaxkit.jit(f)(*args)), np.asarray(f(*args)),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(f(*args)), fn(SCI, *args), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("name,inputs,fn", RECORDS, ids=IDS)
def test_vmap_matches_loop(name, inputs, fn):
    rng = np.random.default_rng(2)
    batches = [inputs(rng) for _ in range(3)]
    stacked = [np.stack(xs).astype(np.float32) for xs in zip(*batches)]
    got = np.asarray(jaxkit.vmap(lambda *a: fn(KIT, *a))(*stacked))
    want = np.stack([np.asarray(fn(KIT, *(a.astype(np.float32) for a in b)))
                     for b in batches])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


SMOOTH = ["as_matrix", "as_rotvec", "as_mrp", "compose", "apply", "as_euler-xyz",
          "from_euler-ZYX", "from_rotvec", "from_mrp", "from_matrix", "slerp"]


@pytest.mark.parametrize("name", SMOOTH)
def test_grads_float64(name, x64):
    _, inputs, fn = RECORDS[IDS.index(name)]
    args = inputs(np.random.default_rng(3))
    if name == "slerp":  # differentiate in the key rotations, not the sorted times
        q, t = args
        check_grads(lambda q: fn(KIT, q, t), (q,), order=1, modes=("fwd", "rev"))
        return
    check_grads(lambda *a: fn(KIT, *a), args, order=1, modes=("fwd", "rev"))


def test_rotations_are_pytrees_and_print_as_jax():
    r = Rotation.from_euler("z", 90, degrees=True)
    assert repr(r) == ("Rotation(quat=Array([0.        , 0.        , 0.70710677, "
                       "0.70710677], dtype=float32))")
    assert repr(r) == repr(JaxRotation.from_euler("z", 90, degrees=True))
    batch = Rotation.from_quat(np.random.default_rng(4).normal(size=(5, 4)))
    assert str(jaxkit.tree_util.tree_structure(batch)) == \
        "PyTreeDef(CustomNode(namedtuple[Rotation], [*]))"
    doubled = jaxkit.jit(lambda r: r * r)(batch)
    assert isinstance(doubled, Rotation) and len(doubled) == 5
    np.testing.assert_allclose(np.asarray(doubled.magnitude()),
                               np.asarray((batch * batch).magnitude()), atol=1e-5)
    assert len(Rotation.concatenate([batch, batch[:2]])) == 7
    assert Rotation.identity().single and len(Rotation.identity(3)) == 3
    with pytest.raises(TypeError, match="not subscriptable"):
        r[0]
    with pytest.raises(TypeError, match="no len"):
        len(r)


def test_random_rotations_are_uniform_unit_quaternions():
    r = Rotation.random(jaxkit.random.key(0), 2000)
    q = np.asarray(r.as_quat())
    np.testing.assert_allclose(np.linalg.norm(q, axis=-1), 1, atol=1e-5)
    # uniform on SO(3): the rotation angle has density (1 - cos t) / pi, mean pi/2 + 2/pi
    assert abs(np.asarray(r.magnitude()).mean() - (np.pi / 2 + 2 / np.pi)) < 0.05
    assert Rotation.random(jaxkit.random.key(1)).single


def test_errors():
    with pytest.raises(ValueError, match="Expected axes from `seq`"):
        Rotation.from_euler("xyw", np.zeros(3))
    with pytest.raises(ValueError, match="consecutive axes"):
        Rotation.from_euler("xxz", np.zeros(3))
    with pytest.raises(ValueError, match="upto 3"):
        Rotation.from_euler("xyzx", np.zeros(4))
    with pytest.raises(ValueError, match=r"Expected angles of shape \(\.\.\., 3\)"):
        Rotation.from_euler("xyz", np.zeros(2))
    with pytest.raises(ValueError, match="Expected 3 axes"):
        Rotation.identity().as_euler("xy")
    with pytest.raises(ValueError, match=r"`quat` to have shape \(\.\.\., 4\)"):
        Rotation.from_quat(np.ones(3))
    with pytest.raises(ValueError, match=r"`matrix` to have shape \(\.\.\., 3, 3\)"):
        Rotation.from_matrix(np.eye(4))
    batch = Rotation.identity(3)
    with pytest.raises(ValueError, match="weights` to be 1 dimensional"):
        batch.mean(np.ones((3, 1)))
    with pytest.raises(ValueError, match="equal to number of rotations"):
        batch.mean(np.ones(2))
    with pytest.raises(TypeError, match="must be a `Rotation` instance"):
        Slerp.init([0, 1], np.ones((2, 4)))
    with pytest.raises(ValueError, match="at least 2 rotations"):
        Slerp.init([0], Rotation.identity(1))
    with pytest.raises(ValueError, match="number of timestamps"):
        Slerp.init([0, 1, 2], Rotation.identity(2))
    with pytest.raises(ValueError, match="at most 1-dimensional"):
        Slerp.init([0, 1], Rotation.identity(2))(np.zeros((2, 2)))


def test_single_axis_angles_as_scipy_and_jax():
    # one axis: a scalar is one rotation, and the angles' last axis must have length 1
    assert Rotation.from_euler("x", 0.5).single
    batch = Rotation.from_euler("x", [[0.1], [0.2], [0.3]])
    np.testing.assert_allclose(np.asarray(batch.as_quat()),
                               SciRotation.from_euler("x", [[0.1], [0.2], [0.3]]).as_quat(),
                               atol=1e-6)
    with pytest.raises(ValueError, match=r"Expected angles of shape \(\.\.\., 1\)"):
        Rotation.from_euler("x", [0.1, 0.2, 0.3])
