"""Special functions lowered as jax lowers them: chlo ops (erf_inv, lgamma, digamma,
polygamma, zeta, bessel_i1e), which XLA expands before it partitions, so each is
elementwise for sharding (Shardy's pointwise rule, as jax's results keep the operand's
sharding)."""
from __future__ import annotations

import math

from ..ir.primitive import Trait, nondiff
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


def _vjps():
    from . import lax as L
    half_sqrt_pi = math.sqrt(math.pi) / 2
    defvjp(erf_inv_p, lambda c, g, x: (L.mul(g, L.mul(half_sqrt_pi, L.exp(L.square(c.out)))),))
    defvjp(lgamma_p, lambda c, g, x: (L.mul(g, digamma_p.bind(x)),))
    defvjp(digamma_p, lambda c, g, x: (L.mul(g, polygamma_p.bind(L.full_like(x, 1), x)),))
    # d/dx polygamma(m, x) = polygamma(m + 1, x); m is not differentiable (jax raises)
    defvjp(polygamma_p, lambda c, g, m, x: (None, L.mul(g, polygamma_p.bind(L.add(m, 1), x))))
    # d/dq zeta(x, q) = -x * zeta(x + 1, q); x is not differentiable
    defvjp(zeta_p, lambda c, g, x, q: (None, L.mul(g, L.mul(L.neg(x),
                                                            zeta_p.bind(L.add(x, 1), q)))))
    bessel_i1e_p.vjp = nondiff      # needs i0e; jax's rule: i0e(x) - i1e(x) * (sign(x) + 1/x)
    for p in ALL:
        p.batch = elementwise_rule(p)


_vjps()
