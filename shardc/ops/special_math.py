"""Special functions lowered as jax lowers them: chlo ops (erf_inv, lgamma, digamma,
polygamma, zeta, bessel_i1e), which XLA expands before it partitions, so each is
elementwise for sharding (Shardy's pointwise rule, as jax's results keep the operand's
sharding)."""
from __future__ import annotations

import math

from ..errors import ArgumentError, ShardcNotImplementedError
from ..ir.primitive import Trait
from .batching import elementwise_rule
from .elementwise import defvjp, elementwise

erf_inv_p = elementwise("erf_inv", "chlo.erf_inv", "float", 1)
erf_inv_p.traits |= Trait.EXPENSIVE
lgamma_p = elementwise("lgamma", "chlo.lgamma", "float", 1)
digamma_p = elementwise("digamma", "chlo.digamma", "float", 1)
bessel_i1e_p = elementwise("bessel_i1e", "chlo.bessel_i1e", "float", 1)
polygamma_p = elementwise("polygamma", "chlo.polygamma", "float", 2)   # (m, x)
zeta_p = elementwise("zeta", "chlo.zeta", "float", 2)                  # (x, q)

ALL = (erf_inv_p, lgamma_p, digamma_p, bessel_i1e_p, polygamma_p, zeta_p)


def _i1e_vjp(ctx, cts, x):
    """Its derivative needs i0e, a composite of the api layer: the op is bound only
    inside shardc.scipy.special.i1e's custom_jvp, which carries jax's rule. Reaching
    this means a new caller bound it bare, whose gradient must not be silently zero."""
    from ..errors import ShardcError
    raise ShardcError("internal: bessel_i1e was differentiated as a bare op; call "
                      "shardc.scipy.special.i1e (or shardc.lax.bessel_i1e), which carries "
                      "its derivative")


def _polygamma_vjp(ctx, g, m, x):
    from . import lax as L
    if ctx.active is None or ctx.active[0]:     # (a zero would be silently wrong)
        raise ArgumentError("polygamma gradient with respect to m is not supported",
                            ctx.op.loc)
    return None, L.mul(g, polygamma_p.bind(L.add(m, 1), x))


def _zeta_vjp(ctx, g, x, q):
    from . import lax as L
    if ctx.active is None or ctx.active[0]:
        raise ShardcNotImplementedError(
            "Differentiation rule for 'zeta' with respect to its first argument not "
            "implemented (as jax's lax.zeta); shardc.scipy.special.zeta has one",
            ctx.op.loc)
    return None, L.mul(g, L.mul(L.neg(x), zeta_p.bind(L.add(x, 1), q)))


def _vjps():
    from . import lax as L
    half_sqrt_pi = math.sqrt(math.pi) / 2
    defvjp(erf_inv_p, lambda c, g, x: (L.mul(g, L.mul(half_sqrt_pi, L.exp(L.square(c.out)))),))
    defvjp(lgamma_p, lambda c, g, x: (L.mul(g, digamma_p.bind(x)),))
    defvjp(digamma_p, lambda c, g, x: (L.mul(g, polygamma_p.bind(L.full_like(x, 1), x)),))
    # d/dx polygamma(m, x) = polygamma(m + 1, x); m is not differentiable (jax raises)
    defvjp(polygamma_p, _polygamma_vjp)
    # d/dq zeta(x, q) = -x * zeta(x + 1, q); x is not differentiable (jax raises)
    defvjp(zeta_p, _zeta_vjp)
    bessel_i1e_p.vjp = _i1e_vjp
    for p in ALL:
        p.batch = elementwise_rule(p)


_vjps()
