"""shardc.scipy.spatial.transform: Rotation and Slerp, as jax.scipy.spatial.transform's.
A Rotation is a NamedTuple of unit quaternions (x, y, z, w), one per rotation in the
leading dims (a pytree, so it passes through jit); each conversion is written for one
quaternion and vectorized over the rest."""
from __future__ import annotations

import functools
import re
import typing

import numpy as np

from ..errors import ArgumentError, ShardcNotImplementedError, ShardcTypeError, wrap_public
from . import numpy as snp
from .numpy._util import aval

__all__ = ["Rotation", "Slerp"]


def _vectorize(signature):
    return functools.partial(snp.vectorize, signature=signature)


def _check_seq(seq, n_min, n_max):
    """(intrinsic, extrinsic) of an Euler axis sequence such as 'xyz' or 'ZXZ'."""
    if not n_min <= len(seq) <= n_max:
        if n_min == n_max:
            raise ArgumentError(f"Expected {n_max} axes, got {seq}.")
        raise ArgumentError("Expected axis specification to be a non-empty string of upto 3 "
                         f"characters, got {seq}")
    intrinsic = re.match(r"^[XYZ]{1,3}$", seq) is not None
    extrinsic = re.match(r"^[xyz]{1,3}$", seq) is not None
    if not (intrinsic or extrinsic):
        raise ArgumentError("Expected axes from `seq` to be from ['x', 'y', 'z'] or ['X', 'Y', "
                         f"'Z'], got {seq}")
    if any(seq[i] == seq[i + 1] for i in range(len(seq) - 1)):
        raise ArgumentError(f"Expected consecutive axes to be different, got {seq}")
    return intrinsic, extrinsic


def _basis_index(axis):
    if axis in "xyz" and len(axis) == 1:
        return "xyz".index(axis)
    raise ArgumentError(f"Expected axis to be from ['x', 'y', 'z'], got {axis}")


class Rotation(typing.NamedTuple):
    """Rotations in 3 dimensions, as jax.scipy.spatial.transform.Rotation."""
    quat: typing.Any

    @classmethod
    def concatenate(cls, rotations):
        """The rotations of a sequence of Rotations, in one."""
        return cls(snp.concatenate([r.quat for r in rotations]))

    @classmethod
    def from_euler(cls, seq, angles, degrees=False):
        """From Euler angles about the axes of `seq` (upper case: intrinsic)."""
        intrinsic, _ = _check_seq(seq, 1, 3)
        angles = snp.atleast_1d(angles)
        axes = snp.array([_basis_index(a) for a in seq.lower()])
        return cls(_elementary_quat_compose(angles, axes, intrinsic, degrees))

    @classmethod
    def from_matrix(cls, matrix):
        return cls(_from_matrix(matrix))

    @classmethod
    def from_mrp(cls, mrp):
        """From Modified Rodrigues Parameters."""
        return cls(_from_mrp(mrp))

    @classmethod
    def from_quat(cls, quat):
        """From (x, y, z, w) quaternions, normalized."""
        return cls(_normalize_quaternion(quat))

    @classmethod
    def from_rotvec(cls, rotvec, degrees=False):
        return cls(_from_rotvec(rotvec, degrees))

    @classmethod
    def identity(cls, num=None, dtype=float):
        """The identity rotation (jax supports num=None only)."""
        assert num is None
        return cls(snp.array([0.0, 0.0, 0.0, 1.0], dtype=dtype))

    @classmethod
    def random(cls, random_key, num=None):
        # as jax's: it would need scipy.stats.special_ortho_group
        raise ShardcNotImplementedError(
            "Rotation.random is not implemented (as in jax: it needs "
            "scipy.stats.special_ortho_group)")

    def __getitem__(self, indexer):
        if self.single:
            raise ShardcTypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[indexer])

    def __len__(self):
        if self.single:
            raise ShardcTypeError("Single rotation has no len().")
        return aval(self.quat).shape[0]

    def __mul__(self, other):
        """This rotation composed with `other` (other applied first)."""
        return Rotation.from_quat(_compose_quat(self.quat, other.quat))

    def apply(self, vectors, inverse=False):
        return _apply(self.as_matrix(), vectors, inverse)

    def as_euler(self, seq, degrees=False):
        """Euler angles about the 3 axes of `seq` (upper case: intrinsic)."""
        _, extrinsic = _check_seq(seq, 3, 3)
        axes = snp.array([_basis_index(a) for a in seq.lower()])
        return _compute_euler_from_quat(self.quat, axes, extrinsic, degrees)

    def as_matrix(self):
        return _as_matrix(self.quat)

    def as_mrp(self):
        return _as_mrp(self.quat)

    def as_rotvec(self, degrees=False):
        return _as_rotvec(self.quat, degrees)

    def as_quat(self, canonical=False, scalar_first=False):
        """(x, y, z, w) quaternions; canonical: w >= 0 (the first nonzero entry positive
        when w == 0); scalar_first: (w, x, y, z)."""
        quat = _make_canonical(self.quat) if canonical else self.quat
        return snp.roll(quat, shift=1, axis=-1) if scalar_first else quat

    def inv(self):
        return Rotation(_inv(self.quat))

    def magnitude(self):
        """The rotation angle(s) in radians, in [0, pi]."""
        return _magnitude(self.quat)

    def mean(self, weights=None):
        """The (weighted) mean rotation: the top eigenvector of sum w q q^T."""
        dt = aval(self.quat).dtype
        w = snp.ones(aval(self.quat).shape[0], dtype=dt) if weights is None else \
            snp.asarray(weights, dtype=dt)
        if aval(w).ndim != 1:
            raise ArgumentError(f"Expected `weights` to be 1 dimensional, got shape "
                             f"{aval(w).shape}.")
        if aval(w).shape[0] != len(self):
            raise ArgumentError("Expected `weights` to have number of values equal to number "
                             f"of rotations, got {aval(w).shape[0]} values and {len(self)} "
                             "rotations.")
        K = snp.dot(w[None, :] * self.quat.T, self.quat)
        _, v = snp.linalg.eigh(K)
        return Rotation(v[:, -1])

    @property
    def single(self):
        return aval(self.quat).ndim == 1


class Slerp(typing.NamedTuple):
    """Spherical linear interpolation of rotations, as
    jax.scipy.spatial.transform.Slerp: build with Slerp.init(times, rotations)."""
    times: typing.Any
    timedelta: typing.Any
    rotations: Rotation
    rotvecs: typing.Any

    @classmethod
    def init(cls, times, rotations):
        if not isinstance(rotations, Rotation):
            raise ShardcTypeError("`rotations` must be a `Rotation` instance.")
        if rotations.single or len(rotations) == 1:
            raise ArgumentError("`rotations` must be a sequence of at least 2 rotations.")
        times = snp.asarray(times, dtype=aval(rotations.quat).dtype)
        if aval(times).ndim != 1:
            raise ArgumentError("Expected times to be specified in a 1 dimensional array, got "
                             f"{aval(times).ndim} dimensions.")
        if aval(times).shape[0] != len(rotations):
            raise ArgumentError("Expected number of rotations to be equal to number of "
                             f"timestamps given, got {len(rotations)} rotations and "
                             f"{aval(times).shape[0]} timestamps.")
        # (times are not checked to increase: that needs concrete values, as in jax)
        starts = Rotation(rotations.as_quat()[:-1])
        return cls(times=times, timedelta=snp.diff(times), rotations=starts,
                   rotvecs=(starts.inv() * Rotation(rotations.as_quat()[1:])).as_rotvec())

    def __call__(self, times):
        """The interpolated rotation(s) at `times` (a scalar: a single rotation)."""
        t = snp.asarray(times, dtype=aval(self.times).dtype)
        if aval(t).ndim > 1:
            raise ArgumentError("`times` must be at most 1-dimensional.")
        single = aval(t).ndim == 0
        t = snp.atleast_1d(t)
        ind = snp.maximum(snp.searchsorted(self.times, t) - 1, 0)
        alpha = (t - self.times[ind]) / self.timedelta[ind]
        out = self.rotations[ind] * Rotation.from_rotvec(self.rotvecs[ind] * alpha[:, None])
        return out[0] if single else out


# ------------------------------------------------- one quaternion at a time, vectorized

@_vectorize("(m,m),(m),()->(m)")
def _apply(matrix, vector, inverse):
    return snp.where(inverse, matrix.T, matrix) @ vector


@_vectorize("(m)->(n,n)")
def _as_matrix(quat):
    x, y, z, w = quat[0], quat[1], quat[2], quat[3]
    x2, y2, z2, w2 = x * x, y * y, z * z, w * w
    xy, zw, xz, yw, yz, xw = x * y, z * w, x * z, y * w, y * z, x * w
    return snp.array([[x2 - y2 - z2 + w2, 2 * (xy - zw), 2 * (xz + yw)],
                      [2 * (xy + zw), -x2 + y2 - z2 + w2, 2 * (yz - xw)],
                      [2 * (xz - yw), 2 * (yz + xw), -x2 - y2 + z2 + w2]])


@_vectorize("(m)->(n)")
def _as_mrp(quat):
    sign = snp.where(quat[3] < 0, -1.0, 1.0)
    return sign * quat[:3] / (1.0 + sign * quat[3])


@_vectorize("(m),()->(n)")
def _as_rotvec(quat, degrees):
    quat = snp.where(quat[3] < 0, -quat, quat)      # w >= 0: angle in [0, pi]
    angle = 2.0 * snp.arctan2(_vector_norm(quat[:3]), quat[3])
    a2 = angle * angle
    small = 2 + a2 / 12 + 7 * a2 * a2 / 2880         # angle / sin(angle / 2) near 0
    scale = snp.where(angle <= 1e-3, small, angle / snp.sin(angle / 2))
    scale = snp.where(degrees, snp.rad2deg(scale), scale)
    return scale * snp.array(quat[:3])


@_vectorize("(n),(n)->(n)")
def _compose_quat(p, q):
    c = snp.cross(p[:3], q[:3])
    return snp.array([p[3] * q[0] + q[3] * p[0] + c[0],
                      p[3] * q[1] + q[3] * p[1] + c[1],
                      p[3] * q[2] + q[3] * p[2] + c[2],
                      p[3] * q[3] - p[0] * q[0] - p[1] * q[1] - p[2] * q[2]])


@_vectorize("(m),(l),(),()->(n)")
def _compute_euler_from_quat(quat, axes, extrinsic, degrees):
    """Euler angles from a quaternion (Bernardes & Viollet 2022, as scipy and jax)."""
    first = snp.where(extrinsic, 0, 2)
    third = snp.where(extrinsic, 2, 0)
    axes = snp.where(extrinsic, axes, axes[::-1])
    i, j, k = axes[0], axes[1], axes[2]
    symmetric = i == k
    k = snp.where(symmetric, 3 - i - j, k)
    sign = snp.array((i - j) * (j - k) * (k - i) // 2, dtype=aval(quat).dtype)
    eps = 1e-7
    a = snp.where(symmetric, quat[3], quat[3] - quat[j])
    b = snp.where(symmetric, quat[i], quat[i] + quat[k] * sign)
    c = snp.where(symmetric, quat[j], quat[j] + quat[3])
    d = snp.where(symmetric, quat[k] * sign, quat[k] * sign - quat[i])
    angles = snp.empty(3, dtype=aval(quat).dtype)
    angles = angles.at[1].set(2 * snp.arctan2(snp.hypot(c, d), snp.hypot(a, b)))
    case = snp.where(snp.abs(angles[1] - np.pi) <= eps, 2, 0)     # 1, 2: gimbal lock
    case = snp.where(snp.abs(angles[1]) <= eps, 1, case)
    half_sum = snp.arctan2(b, a)
    half_diff = snp.arctan2(d, c)
    angles = angles.at[0].set(snp.where(case == 1, 2 * half_sum,
                                        2 * half_diff * snp.where(extrinsic, -1, 1)))
    angles = angles.at[first].set(snp.where(case == 0, half_sum - half_diff, angles[first]))
    angles = angles.at[third].set(snp.where(case == 0, half_sum + half_diff, angles[third]))
    angles = angles.at[third].set(snp.where(symmetric, angles[third], angles[third] * sign))
    angles = angles.at[1].set(snp.where(symmetric, angles[1], angles[1] - np.pi / 2))
    angles = (angles + np.pi) % (2 * np.pi) - np.pi
    return snp.where(degrees, snp.rad2deg(angles), angles)


@_vectorize("(m),(m),(),()->(n)")
def _elementary_quat_compose(angles, axes, intrinsic, degrees):
    angles = snp.where(degrees, snp.deg2rad(angles), angles)
    out = _make_elementary_quat(axes[0], angles[0])
    for i in range(1, aval(axes).shape[0]):
        q = _make_elementary_quat(axes[i], angles[i])
        out = snp.where(intrinsic, _compose_quat(out, q), _compose_quat(q, out))
    return out


@_vectorize("(m),()->(n)")
def _from_rotvec(rotvec, degrees):
    rotvec = snp.where(degrees, snp.deg2rad(rotvec), rotvec)
    angle = _vector_norm(rotvec)
    a2 = angle * angle
    small = 0.5 - a2 / 48 + a2 * a2 / 3840          # sin(angle / 2) / angle near 0
    scale = snp.where(angle <= 1e-3, small, snp.sin(angle / 2) / angle)
    return snp.hstack([scale * rotvec, snp.cos(angle / 2)])


@_vectorize("(m,m)->(n)")
def _from_matrix(matrix):
    """The quaternion from whichever of the diagonal and the trace is largest (stable)."""
    trace = matrix[0, 0] + matrix[1, 1] + matrix[2, 2]
    dt = aval(matrix).dtype
    decision = snp.array([matrix[0, 0], matrix[1, 1], matrix[2, 2], trace], dtype=dt)
    i = snp.argmax(decision)
    j = (i + 1) % 3
    k = (j + 1) % 3
    q_diag = snp.empty(4, dtype=dt)
    q_diag = q_diag.at[i].set(1 - decision[3] + 2 * matrix[i, i])
    q_diag = q_diag.at[j].set(matrix[j, i] + matrix[i, j])
    q_diag = q_diag.at[k].set(matrix[k, i] + matrix[i, k])
    q_diag = q_diag.at[3].set(matrix[k, j] - matrix[j, k])
    q_trace = snp.empty(4, dtype=dt)
    q_trace = q_trace.at[0].set(matrix[2, 1] - matrix[1, 2])
    q_trace = q_trace.at[1].set(matrix[0, 2] - matrix[2, 0])
    q_trace = q_trace.at[2].set(matrix[1, 0] - matrix[0, 1])
    q_trace = q_trace.at[3].set(1 + decision[3])
    return _normalize_quaternion(snp.where(i != 3, q_diag, q_trace))


@_vectorize("(m)->(n)")
def _from_mrp(mrp):
    sq1 = snp.dot(mrp, mrp) + 1
    return snp.hstack([2 * mrp[:3], (2 - sq1)]) / sq1


@_vectorize("(n)->(n)")
def _inv(quat):
    return quat * snp.array([-1, -1, -1, 1], dtype=aval(quat).dtype)


@_vectorize("(n)->()")
def _magnitude(quat):
    return 2.0 * snp.arctan2(_vector_norm(quat[:3]), snp.abs(quat[3]))


@_vectorize("(),()->(n)")
def _make_elementary_quat(axis, angle):
    quat = snp.zeros(4, dtype=aval(angle).dtype)
    quat = quat.at[3].set(snp.cos(angle / 2.0))
    return quat.at[axis].set(snp.sin(angle / 2.0))


@_vectorize("(n)->(n)")
def _normalize_quaternion(quat):
    return quat / _vector_norm(quat)


@_vectorize("(n)->()")
def _vector_norm(vector):
    return snp.sqrt(snp.dot(vector, vector))


@_vectorize("(n)->(n)")
def _make_canonical(quat):
    neg, zero = quat < 0, quat == 0
    flip = (neg[3] | (zero[3] & neg[0]) | (zero[3] & zero[0] & neg[1])
            | (zero[3] & zero[0] & zero[1] & neg[2]))
    return snp.where(flip, -quat, quat)


wrap_public(globals())
