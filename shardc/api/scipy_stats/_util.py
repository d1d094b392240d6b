"""What the distributions share: jax's argument promotion, and running the functions jax
jits (truncnorm, betabinom.logpmf, poisson.entropy, mode, ...) as one compiled program
outside a trace."""
from __future__ import annotations

from ...ir.program import Lit
from ...ops import shape as _shp
from ..numpy._util import lax_const as _lax_const
from ..random._run import run
from ..scipy_special import promote

__all__ = ["promote", "jitted", "lax_const", "materialize"]


def materialize(*xs):
    """Inline scalar literals (what promote_dtypes* make of Python scalars) as traced
    values, so that Python's operators apply to them."""
    return [_shp.broadcast_in_dim_p.bind(v, shape=(), broadcast_dimensions=())
            if isinstance(v, Lit) else v for v in xs]


def lax_const(x, value):
    """jax's lax._const: `value` in x's dtype, weakly typed only if x is a weak scalar."""
    return _shp.broadcast_in_dim_p.bind(_lax_const(x, value), shape=(),
                                        broadcast_dimensions=())


def jitted(fn, *args, **static):
    """fn(*args, **static) traced in place inside a trace, else compiled once per static
    parameters (jax decorates these with jit: eager calls give one program's values and
    output shardings, and Python scalars become weakly typed arrays)."""
    return run(fn, *args, **static)
