"""``Rotation`` and ``Slerp`` of ``jax.scipy.spatial.transform``: rotations in 3-D stored as
unit quaternions ``(x, y, z, w)`` (scalar last, as SciPy), any number of leading batch axes.

As in JAX, both are NamedTuples (so pytrees that pass through ``jit`` and ``vmap``), and
every conversion works on the last axis of whole arrays at once.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from jaxkit import numpy as jnp
from jaxkit import random
from jaxkit.scipy._util import promote_dtypes_inexact
from jaxkit.typing import Array, ArrayLike

_AXES = {"x": 0, "y": 1, "z": 2}


def _axis_indices(seq: str) -> list[int]:
    return [_AXES[a] for a in seq.lower()]


def _check_seq(seq: str, exactly_three: bool) -> bool:
    """Validate an Euler axis sequence; True for intrinsic (upper case) axes."""
    if exactly_three and len(seq) != 3:
        raise ValueError(f"Expected 3 axes, got {seq}.")
    if not 1 <= len(seq) <= 3:
        raise ValueError("Expected axis specification to be a non-empty string of upto 3 "
                         f"characters, got {seq}")
    intrinsic = re.match(r"^[XYZ]{1,3}$", seq) is not None
    if not (intrinsic or re.match(r"^[xyz]{1,3}$", seq)):
        raise ValueError("Expected axes from `seq` to be from ['x', 'y', 'z'] or "
                         f"['X', 'Y', 'Z'], got {seq}")
    if any(a == b for a, b in zip(seq, seq[1:])):
        raise ValueError(f"Expected consecutive axes to be different, got {seq}")
    return intrinsic


def _norm(v: Array) -> Array:
    """The Euclidean norm over the last axis, with a zero (not NaN) derivative at v = 0: the
    identity rotation is the commonest point to differentiate at (a Slerp at a key time)."""
    squared = jnp.sum(v * v, axis=-1)
    nonzero = squared > 0
    return jnp.where(nonzero, jnp.sqrt(jnp.where(nonzero, squared, 1)), 0)


def _normalize(quat: Array) -> Array:
    return quat / _norm(quat)[..., None]


def _compose(p: Array, q: Array) -> Array:
    """The quaternion of rotating by q, then by p (Hamilton product p q, scalar last)."""
    pv, pw, qv, qw = p[..., :3], p[..., 3:], q[..., :3], q[..., 3:]
    vector = pw * qv + qw * pv + jnp.cross(pv, qv)
    scalar = pw * qw - jnp.sum(pv * qv, axis=-1, keepdims=True)
    return jnp.concatenate([vector, scalar], axis=-1)


def _canonical(quat: Array) -> Array:
    """The representative of ±quat whose first nonzero entry of (w, x, y, z) is positive."""
    negative, zero = quat < 0, quat == 0
    flip = (negative[..., 3]
            | (zero[..., 3] & negative[..., 0])
            | (zero[..., 3] & zero[..., 0] & negative[..., 1])
            | (zero[..., 3] & zero[..., 0] & zero[..., 1] & negative[..., 2]))
    return jnp.where(flip[..., None], -quat, quat)


def _as_matrix(quat: Array) -> Array:
    x, y, z, w = (quat[..., i] for i in range(4))
    rows = [[x * x - y * y - z * z + w * w, 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), -x * x + y * y - z * z + w * w, 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), -x * x - y * y + z * z + w * w]]
    return jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)


def _from_matrix(m: Array) -> Array:
    """Shepperd's method: build the quaternion from whichever of the trace and the three
    diagonal entries is largest, where the division is best conditioned."""
    diag = [m[..., i, i] for i in range(3)]
    trace = diag[0] + diag[1] + diag[2]
    candidates = []
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        q = [None] * 4
        q[i] = 1 - trace + 2 * diag[i]
        q[j] = m[..., j, i] + m[..., i, j]
        q[k] = m[..., k, i] + m[..., i, k]
        q[3] = m[..., k, j] - m[..., j, k]
        candidates.append(jnp.stack(q, axis=-1))
    candidates.append(jnp.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                                 m[..., 1, 0] - m[..., 0, 1], 1 + trace], axis=-1))
    choice = jnp.argmax(jnp.stack(diag + [trace], axis=-1), axis=-1)
    quat = jnp.take_along_axis(jnp.stack(candidates, axis=-2), choice[..., None, None],
                               axis=-2)[..., 0, :]
    return _normalize(quat)


def _from_rotvec(rotvec: Array) -> Array:
    angle = _norm(rotvec)[..., None]
    small = angle <= 1e-3  # sin(a/2)/a by its Taylor series, where the division loses digits
    safe = jnp.where(small, 1, angle)
    scale = jnp.where(small, 0.5 - angle ** 2 / 48 + angle ** 4 / 3840,
                      jnp.sin(safe / 2) / safe)
    return jnp.concatenate([scale * rotvec, jnp.cos(angle / 2)], axis=-1)


def _as_rotvec(quat: Array) -> Array:
    quat = jnp.where(quat[..., 3:] < 0, -quat, quat)  # w >= 0: the angle in [0, pi]
    angle = (2 * jnp.arctan2(_norm(quat[..., :3]), quat[..., 3]))[..., None]
    small = angle <= 1e-3
    safe = jnp.where(small, 1, angle)
    scale = jnp.where(small, 2 + angle ** 2 / 12 + 7 * angle ** 4 / 2880,
                      safe / jnp.sin(safe / 2))
    return scale * quat[..., :3]


def _elementary(axis: int, angle: Array) -> Array:
    parts = [jnp.zeros_like(angle)] * 3 + [jnp.cos(angle / 2)]
    parts[axis] = jnp.sin(angle / 2)
    return jnp.stack(parts, axis=-1)


def _as_euler(quat: Array, axes: list[int], intrinsic: bool) -> Array:
    """Bernardes and Viollet's direct quaternion-to-Euler conversion (SciPy's): the middle
    angle from a ratio of norms, the outer two from a half sum and a half difference."""
    if intrinsic:
        axes = axes[::-1]
    i, j, k = axes
    symmetric = i == k  # proper Euler angles (zxz, ...): the third axis is the unused one
    if symmetric:
        k = 3 - i - j
    sign = (i - j) * (j - k) * (k - i) // 2  # the Levi-Civita symbol of (i, j, k)
    w = quat[..., 3]
    qi, qj, qk = quat[..., i], quat[..., j], quat[..., k]
    if symmetric:
        a, b, c, d = w, qi, qj, qk * sign
    else:
        a, b, c, d = w - qj, qi + qk * sign, qj + w, qk * sign - qi
    middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
    half_sum, half_diff = jnp.arctan2(b, a), jnp.arctan2(d, c)
    eps = 1e-7
    at_zero, at_pi = jnp.abs(middle) <= eps, jnp.abs(middle - np.pi) <= eps
    # gimbal lock (middle angle 0 or pi): only the sum or the difference of the outer angles
    # is defined; as JAX and SciPy, the third angle (first, if intrinsic) is set to zero
    locked = jnp.where(at_zero, 2 * half_sum, 2 * half_diff * (1 if intrinsic else -1))
    free = at_zero | at_pi
    first = jnp.where(free, locked, half_sum - half_diff)
    third = jnp.where(free, 0, half_sum + half_diff)
    if intrinsic:  # the zeroed angle is the first of the reversed sequence
        first, third = jnp.where(free, 0, first), jnp.where(free, locked, third)
    if not symmetric:
        third = third * sign
        middle = middle - np.pi / 2
    angles = jnp.stack([first, middle, third], axis=-1)
    if intrinsic:
        angles = angles[..., ::-1]
    return (angles + np.pi) % (2 * np.pi) - np.pi


class Rotation(NamedTuple):
    """A rotation, or a batch of them, in 3-D (``scipy.spatial.transform.Rotation``)."""

    quat: Array

    @classmethod
    def concatenate(cls, rotations: Sequence[Rotation]) -> Rotation:
        return cls(jnp.concatenate([r.quat for r in rotations]))

    @classmethod
    def from_euler(cls, seq: str, angles: ArrayLike, degrees: bool = False) -> Rotation:
        """From Euler angles about the axes of ``seq``: lower case extrinsic (fixed axes),
        upper case intrinsic (the rotating body's axes); one angle per axis on the last axis
        of ``angles``, leading axes for a batch (a scalar for a single axis)."""
        intrinsic = _check_seq(seq, exactly_three=False)
        angles, = promote_dtypes_inexact(jnp.atleast_1d(jnp.asarray(angles)))
        if angles.shape[-1] != len(seq):
            raise ValueError(f"Expected angles of shape (..., {len(seq)}) for seq={seq!r}, "
                             f"got {angles.shape}.")
        if degrees:
            angles = jnp.deg2rad(angles)
        quats = [_elementary(a, angles[..., n]) for n, a in enumerate(_axis_indices(seq))]
        result = quats[0]
        for q in quats[1:]:
            result = _compose(result, q) if intrinsic else _compose(q, result)
        return cls(result)

    @classmethod
    def from_matrix(cls, matrix: ArrayLike) -> Rotation:
        return cls(_from_matrix(_float(matrix, (3, 3), "matrix")))

    @classmethod
    def from_mrp(cls, mrp: ArrayLike) -> Rotation:
        """From modified Rodrigues parameters ``axis * tan(angle / 4)``."""
        mrp = _float(mrp, (3,), "mrp")
        squared = jnp.sum(mrp * mrp, axis=-1, keepdims=True)
        return cls(jnp.concatenate([2 * mrp, 1 - squared], axis=-1) / (1 + squared))

    @classmethod
    def from_quat(cls, quat: ArrayLike) -> Rotation:
        return cls(_normalize(_float(quat, (4,), "quat")))

    @classmethod
    def from_rotvec(cls, rotvec: ArrayLike, degrees: bool = False) -> Rotation:
        rotvec = _float(rotvec, (3,), "rotvec")
        return cls(_from_rotvec(jnp.deg2rad(rotvec) if degrees else rotvec))

    @classmethod
    def identity(cls, num: int | None = None, dtype=float) -> Rotation:
        quat = jnp.array([0.0, 0.0, 0.0, 1.0], dtype=dtype)
        return cls(quat if num is None else jnp.tile(quat, (num, 1)))

    @classmethod
    def random(cls, random_key: Array, num: int | None = None) -> Rotation:
        """Uniformly distributed rotations: normalized 4-D Gaussian vectors."""
        shape = (4,) if num is None else (num, 4)
        return cls(_normalize(random.normal(random_key, shape)))

    def __getitem__(self, indexer) -> Rotation:
        if self.single:
            raise TypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[indexer])

    def __len__(self) -> int:
        if self.single:
            raise TypeError("Single rotation has no len().")
        return self.quat.shape[0]

    def __mul__(self, other: Rotation) -> Rotation:
        """The composition: ``(p * q).apply(v) == p.apply(q.apply(v))``."""
        return Rotation.from_quat(_compose(self.quat, other.quat))

    def apply(self, vectors: ArrayLike, inverse: bool = False) -> Array:
        matrix = self.as_matrix()
        if inverse:
            matrix = jnp.swapaxes(matrix, -1, -2)
        return jnp.einsum("...ij,...j->...i", matrix, jnp.asarray(vectors))

    def as_euler(self, seq: str, degrees: bool = False) -> Array:
        intrinsic = _check_seq(seq, exactly_three=True)
        angles = _as_euler(self.quat, _axis_indices(seq), intrinsic)
        return jnp.rad2deg(angles) if degrees else angles

    def as_matrix(self) -> Array:
        return _as_matrix(self.quat)

    def as_mrp(self) -> Array:
        sign = jnp.where(self.quat[..., 3:] < 0, -1.0, 1.0).astype(self.quat.dtype)
        return sign * self.quat[..., :3] / (1 + sign * self.quat[..., 3:])

    def as_rotvec(self, degrees: bool = False) -> Array:
        rotvec = _as_rotvec(self.quat)
        return jnp.rad2deg(rotvec) if degrees else rotvec

    def as_quat(self, canonical: bool = False, scalar_first: bool = False) -> Array:
        quat = _canonical(self.quat) if canonical else self.quat
        return jnp.roll(quat, 1, axis=-1) if scalar_first else quat

    def inv(self) -> Rotation:
        return Rotation(self.quat * jnp.array([-1, -1, -1, 1], dtype=self.quat.dtype))

    def magnitude(self) -> Array:
        """The rotation angle in radians, in [0, pi]."""
        return 2 * jnp.arctan2(_norm(self.quat[..., :3]), jnp.abs(self.quat[..., 3]))

    def mean(self, weights: ArrayLike | None = None) -> Rotation:
        """The rotation nearest the weighted quaternions (Markley's method: the principal
        eigenvector of sum w q q^T)."""
        n = len(self)
        w = (jnp.ones(n, self.quat.dtype) if weights is None
             else jnp.asarray(weights, dtype=self.quat.dtype))
        if w.ndim != 1:
            raise ValueError(f"Expected `weights` to be 1 dimensional, got shape {w.shape}.")
        if w.shape[0] != n:
            raise ValueError("Expected `weights` to have number of values equal to number "
                             f"of rotations, got {w.shape[0]} values and {n} rotations.")
        k = jnp.einsum("n,ni,nj->ij", w, self.quat, self.quat)
        _, vectors = jnp.linalg.eigh(k)
        return Rotation(vectors[:, -1])

    @property
    def single(self) -> bool:
        return self.quat.ndim == 1


def _float(x: ArrayLike, core: tuple[int, ...], name: str) -> Array:
    x, = promote_dtypes_inexact(jnp.asarray(x))
    if x.shape[x.ndim - len(core):] != core:
        raise ValueError(f"Expected `{name}` to have shape (..., {', '.join(map(str, core))}), "
                         f"got {x.shape}.")
    return x


class Slerp(NamedTuple):
    """Spherical linear interpolation of rotations keyed at increasing ``times``: build it
    with ``Slerp.init(times, rotations)``, then call it on times."""

    times: Array
    timedelta: Array
    rotations: Rotation
    rotvecs: Array

    @classmethod
    def init(cls, times: ArrayLike, rotations: Rotation) -> Slerp:
        if not isinstance(rotations, Rotation):
            raise TypeError("`rotations` must be a `Rotation` instance.")
        if rotations.single or len(rotations) == 1:
            raise ValueError("`rotations` must be a sequence of at least 2 rotations.")
        times = jnp.asarray(times, dtype=rotations.quat.dtype)
        if times.ndim != 1:
            raise ValueError("Expected times to be specified in a 1 dimensional array, got "
                             f"{times.ndim} dimensions.")
        if times.shape[0] != len(rotations):
            raise ValueError("Expected number of rotations to be equal to number of "
                             f"timestamps given, got {len(rotations)} rotations and "
                             f"{times.shape[0]} timestamps.")
        starts = Rotation(rotations.quat[:-1])
        # each interval as a rotation vector: from its start to its end
        steps = (starts.inv() * Rotation(rotations.quat[1:])).as_rotvec()
        return cls(times=times, timedelta=jnp.diff(times), rotations=starts, rotvecs=steps)

    def __call__(self, times: ArrayLike) -> Rotation:
        at = jnp.asarray(times, dtype=self.times.dtype)
        if at.ndim > 1:
            raise ValueError("`times` must be at most 1-dimensional.")
        single = at.ndim == 0
        at = jnp.atleast_1d(at)
        interval = jnp.maximum(jnp.searchsorted(self.times, at) - 1, 0)
        fraction = (at - self.times[interval]) / self.timedelta[interval]
        result = self.rotations[interval] * Rotation.from_rotvec(
            self.rotvecs[interval] * fraction[:, None])
        return result[0] if single else result
