"""eig's derivatives, as jax's eig_jvp_rule: the eigenvalues' always; the eigenvectors'
only when asked for (enable_eigvec_derivs), since they are right only under
assumptions on the input (distinct eigenvalues) that cannot be checked. eig is a
custom_jvp around the LAPACK primitive, so reverse mode is the rule's transpose.

The eigenvectors' rule differentiates LAPACK's normalization (unit 2-norm, real
largest-magnitude component), as jax's: nondegenerate perturbation theory for the part
orthogonal to each eigenvector, the two real constraints for the rest."""
from __future__ import annotations

from ..errors import ShardcNotImplementedError
from ..ops import linalg_decomp as D
from ..transforms.custom_jvp import custom_jvp
from . import lax as slax
from . import numpy as snp
from .numpy import linalg as snl
from .numpy._util import aval

_FNS: dict = {}


def eig(x, left, right, enable_eigvec_derivs):
    """[w, vl?, vr?] of each square matrix of x, differentiable as jax's."""
    key = (left, right, enable_eigvec_derivs)
    f = _FNS.get(key)
    if f is None:
        def impl(a):
            return tuple(D.eig_p.bind(a, compute_left_eigenvectors=left,
                                      compute_right_eigenvectors=right))
        f = _FNS[key] = custom_jvp(impl)
        f.defjvp(lambda primals, tangents: _jvp(left, right, enable_eigvec_derivs, primals,
                                                tangents))
    return list(f(x))


def _mT(x):
    return snp.swapaxes(x, -1, -2)


def _vec_jvp(w, v, da):
    """(dw, dv) for the eigenpairs (w, v) of a perturbed by da."""
    n = aval(w).shape[-1]
    eye = snp.eye(n, dtype=aval(w).dtype)
    fmat = 1 / (eye + w[..., None, :] - w[..., :, None]) - eye
    p = snl.solve(v, da) @ v
    dw = snp.diagonal(p, axis1=-2, axis2=-1)
    u = v @ (fmat * p)
    # dv_j = u_j + c_j v_j, c_j fixed by LAPACK's two real constraints on v_j
    k = snp.argmax(snp.abs(v), axis=-2)
    rows = slax.broadcasted_iota(k.dtype, aval(v).shape, aval(v).ndim - 2)
    mask = (rows == k[..., None, :]).astype(aval(v).dtype)
    c = slax.complex(-snp.real((snp.conj(v) * u).sum(-2)),
                     -snp.imag((mask * u).sum(-2)) / snp.real((mask * v).sum(-2)))
    return dw, u + v * c[..., None, :]


def _jvp(left, right, enable, primals, tangents):
    (a,), (da,) = primals, tangents
    if (left or right) and not enable:
        raise ShardcNotImplementedError(
            "Derivatives of non-symmetric eigenvectors are only valid under assumptions on "
            "the input that cannot be checked (see the enable_eigvec_derivs argument to "
            "shardc.lax.linalg.eig, as jax's). Pass enable_eigvec_derivs=True to opt in, "
            "or differentiate the eigenvalues only (eigvals).")
    outs = D.eig_p.bind(a, compute_left_eigenvectors=left, compute_right_eigenvectors=True)
    w, vr = outs[0], outs[-1]
    da = da.astype(aval(vr).dtype)
    if not (left or right):
        return (w,), ((snl.solve(vr, da) * _mT(vr)).sum(-1),)
    dw, dvr = _vec_jvp(w, vr, da)
    primal, tangent = [w], [dw]
    if left:
        _, dvl = _vec_jvp(snp.conj(w), outs[1], snp.conj(_mT(da)))
        primal.append(outs[1])
        tangent.append(dvl)
    if right:
        primal.append(vr)
        tangent.append(dvr)
    return tuple(primal), tuple(tangent)
