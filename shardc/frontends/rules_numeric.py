"""jax primitives shardc has as functions rather than ops: the inverse hyperbolics, the
Bessel and incomplete gamma / beta functions (with their derivative rules), mulhi,
stack / unstack, reduce_xor, the general reduce, zeros_like and empty."""
from __future__ import annotations

from ..api import lax_special as S
from ..api import lax_ops, lax_reduce
from ..api import numpy as snp
from ..trace import core
from .translate import _bind, rule, with_sharding


def _unary(fn):
    def run(x, accuracy=None):
        return fn(x)
    return run


rule("acosh")(_unary(snp.arccosh))
rule("asinh")(_unary(snp.arcsinh))
rule("atanh")(_unary(snp.arctanh))
# through shardc.scipy.special's, which carry jax's derivative rules
rule("bessel_i0e")(_unary(S.bessel_i0e))
rule("bessel_i1e")(_unary(S.bessel_i1e))


def _nary(fn):
    """jaxprs mix rank-0 operands with arrays: broadcast them first."""
    def run(*xs):
        shape = max((core.aval_of(x).shape for x in xs), key=len)
        return fn(*[x if core.aval_of(x).shape == shape else _bind(
            "broadcast_in_dim", x, shape=shape, broadcast_dimensions=()) for x in xs])
    return run


rule("igamma")(_nary(S.igamma))
rule("igammac")(_nary(S.igammac))
rule("igamma_grad_a")(_nary(S.igamma_grad_a))
rule("random_gamma_grad")(_nary(S.random_gamma_grad))
rule("regularized_incomplete_beta")(_nary(S.betainc))
rule("mulhi")(_nary(S.mulhi))


@rule("approx_top_k")
def _approx_top_k(x, *, k, reduction_dimension, is_max_k, recall_target, aggregate_to_topk,
                  reduction_input_size_override, **_):
    """jax binds reduction_dimension=-1 by default: shardc's function canonicalizes it."""
    from ..api.lax_sorting import _approx
    return list(_approx(is_max_k, x, k, reduction_dimension, recall_target,
                        reduction_input_size_override, aggregate_to_topk))


@rule("reduce_xor")
def _reduce_xor(x, *, axes, out_sharding=None):
    return lax_reduce.reduce_xor(x, axes)


@rule("stack")
def _stack(*xs, axis):
    return lax_ops.stack(xs, axis)


@rule("unstack")
def _unstack(x, *, axis):
    return list(lax_ops.unstack(x, axis))


rule("zeros_like")(snp.zeros_like)


@rule("empty")
def _empty(*, shape, dtype, out_sharding=None):
    """An array whose contents do not matter (jax's lax.empty): zeros, as jax's CPU
    lowering gives when it is not a buffer allocation."""
    return with_sharding(out_sharding, snp.zeros, shape, dtype)


@rule("empty2")
def _empty2(*, dtype, memory_space=None):
    """The scalar jax broadcasts into a residual no branch of a cond wrote (its grad)."""
    return snp.zeros((), dtype)


@rule("reduce")
def _reduce(*args, computation, jaxpr, dimensions):
    """lax.reduce with a reducer jax has no reduce_* for: the reducer's jaxpr folds
    halves (lax_special.reduce_tree)."""
    from .translate import eval_closed
    n = len(args) // 2
    return S.reduce_tree(list(args[:n]), list(args[n:]),
                         lambda a, b: eval_closed(jaxpr, [*a, *b]), tuple(dimensions))


@rule("composite")
def _composite(*args, jaxpr, name=None, attributes=(), version=0):
    """lax.composite: its decomposition, inlined (as shardc.lax.composite)."""
    from .translate import eval_closed
    return eval_closed(jaxpr, list(args))


@rule("conj")
def _conj(x, *, input_dtype=None):
    # jax's conj of a real array is that array as complex
    from ..ir import dtypes
    from ..ops.complex import conj_p
    dt = core.aval_of(x).dtype
    if dtypes.is_complex(dt):
        return conj_p.bind(x)
    return lax_ops.convert_element_type(x, dtypes.complex_dtype(dt))


# the decompositions' primitives: jax's api symmetrizes (eigh) or handles empty
# matrices (svd) before binding, so these bind shardc's primitives alike, after jax's
# CPU checks on the algorithm and subset

@rule("svd")
def _svd(x, *, full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None):
    from ..api import lax_linalg as LL
    from ..ops.linalg_decomp import svd_p
    LL._full_subset(subset_by_index, min(core.aval_of(x).shape[-2:]), "svd")
    return list(svd_p.bind(x, full_matrices=full_matrices, compute_uv=compute_uv,
                           algorithm=LL._lapack_svd(algorithm)))


@rule("eigh")
def _eigh(x, *, lower=True, sort_eigenvalues=True, subset_by_index=None, algorithm=None):
    from ..api import lax_linalg as LL
    from ..ops.linalg_decomp import eigh_p
    LL._full_subset(subset_by_index, core.aval_of(x).shape[-1], "eigh")
    LL._eigh_algorithm(algorithm)
    return list(eigh_p.bind(x, lower=lower, sort_eigenvalues=sort_eigenvalues))


@rule("eig")
def _eig(x, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True,
         enable_eigvec_derivs=False, implementation=None, use_magma=None):
    from ..api.lax_linalg import eig
    return eig(x, compute_left_eigenvectors=compute_left_eigenvectors,
               compute_right_eigenvectors=compute_right_eigenvectors,
               enable_eigvec_derivs=enable_eigvec_derivs, implementation=implementation)


@rule("schur")
def _schur(x, *, compute_schur_vectors=True, sort_eig_vals=False, select_callable=None):
    from ..api.lax_linalg import schur
    return list(schur(x, compute_schur_vectors=compute_schur_vectors,
                      sort_eig_vals=sort_eig_vals))


@rule("qr")
def _qr(x, *, pivoting=False, full_matrices=True, use_magma=None):
    from ..api.lax_linalg import qr
    return list(qr(x, pivoting=pivoting, full_matrices=full_matrices))


@rule("cholesky_update")
def _cholesky_update(r, w):
    from ..api.lax_linalg import cholesky_update
    return cholesky_update(r, w)


@rule("symmetric_product")
def _symmetric_product(a, c, *, alpha=1., beta=0.):
    from ..api.lax_linalg import symmetric_product
    return symmetric_product(a, c, alpha=alpha, beta=beta)


@rule("tridiagonal_solve")
def _tridiagonal_solve(dl, d, du, b, *, perturb_singular=False):
    from ..api.lax_linalg import tridiagonal_solve
    return tridiagonal_solve(dl, d, du, b, perturb_singular=perturb_singular)


@rule("scaled_dot")
def _scaled_dot(lhs, rhs, lhs_scale, rhs_scale, *, dimension_numbers, preferred_element_type):
    from ..api.lax_scaled import scaled_dot
    return scaled_dot(lhs, rhs, lhs_scale=lhs_scale, rhs_scale=rhs_scale,
                      dimension_numbers=dimension_numbers,
                      preferred_element_type=preferred_element_type)


@rule("ragged_dot_general")
def _ragged_dot_general(lhs, rhs, group_sizes, *, ragged_dot_dimension_numbers, precision,
                        preferred_element_type, group_offset=None, out_sharding=None):
    from ..api.lax_ragged import RaggedDotDimensionNumbers, ragged_dot_general
    dn = ragged_dot_dimension_numbers
    return with_sharding(out_sharding, ragged_dot_general, lhs, rhs, group_sizes,
                         RaggedDotDimensionNumbers(dn.dot_dimension_numbers,
                                                   dn.lhs_ragged_dimensions,
                                                   dn.rhs_group_dimensions),
                         preferred_element_type=preferred_element_type,
                         group_offset=group_offset)
