"""Complex gamma and loggamma for shardc.scipy.special, as jax's: Lanczos (g=7, N=9)
with the reflection formula, and for loggamma scipy's principal branch (a recurrence
up to Re(z) >= 1/2, then Lanczos)."""
from __future__ import annotations

import numpy as np

from . import numpy as snp
from .numpy._util import aval

_LANCZOS_G = 7.0
_LANCZOS_COEFFS = [0.9999999999998099, 676.5203681218851, -1259.1392167224028,
                   771.3234287776531, -176.6150291621406, 12.507343278686905,
                   -0.13857109526572012, 9.984369578019572e-06, 1.5056327351493116e-07]


def _loggamma_lanczos(z):
    dt = aval(z).dtype
    refl = snp.real(z) < 0.5
    zl = snp.where(refl, 1.0 - z, z)
    zz = zl - 1.0
    coeffs = np.asarray(_LANCZOS_COEFFS, dt)
    ks = np.arange(1, 9, dtype=dt)
    ag = coeffs[0] + snp.sum(coeffs[1:] / (zz[..., None] + ks), axis=-1)
    t = zz + _LANCZOS_G + 0.5
    half_log2pi = np.asarray(0.5 * np.log(2.0 * np.pi), dt)
    lg = half_log2pi + (zz + 0.5) * snp.log(t) - t + snp.log(ag)
    z_safe = snp.where(refl, z, snp.full_like(z, 0.5))
    reflected = snp.log(np.asarray(np.pi, dt)) - snp.log(snp.sin(np.pi * z_safe)) - lg
    return snp.where(refl, reflected, lg)


def _poles(z):
    is_nan = snp.isnan(z)
    re = snp.real(z)
    is_pole = (snp.imag(z) == 0) & (re == snp.floor(re)) & (re <= 0)
    safe = is_pole | is_nan
    return safe, snp.where(safe, snp.ones_like(z), z), np.asarray(complex(np.nan, np.nan),
                                                                aval(z).dtype)


def complex_gamma(z):
    safe, z_safe, nan = _poles(z)
    return snp.where(safe, nan, snp.exp(_loggamma_lanczos(z_safe)))


def complex_loggamma(z):
    from . import lax as slax
    safe, z_safe, nan = _poles(z)
    n = snp.maximum(0, snp.astype(snp.ceil(0.5 - snp.real(z_safe)), int))

    def body(st):
        k, acc = st
        mask = k < n
        zk = snp.where(mask, z_safe + k, snp.ones_like(z_safe))
        return k + 1, acc + snp.where(mask, snp.log(zk), snp.zeros_like(acc))
    _, sum_log = slax.while_loop(lambda st: snp.any(st[0] < n), body,
                                 (np.int32(0), snp.zeros_like(z_safe)))
    return snp.where(safe, nan, _loggamma_lanczos(z_safe + n) - sum_log)
