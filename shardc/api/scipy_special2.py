"""shardc.scipy.special, part 2: the normal distribution (ndtr, ndtri, log_ndtr), erfcx,
dawsn and wofz, as jax.scipy.special (jax's segments and rational approximations)."""
from __future__ import annotations

import math

import numpy as np

from ..errors import ArgumentError, ShardcTypeError
from ..ir import dtypes
from ..ops import complex as cx
from ..ops import elementwise as ew
from ..transforms.custom_jvp import custom_jvp
from . import numpy as snp
from .numpy._util import aval
from .scipy_special import promote

__all__ = ["ndtr", "ndtri", "log_ndtr", "erfcx", "dawsn", "wofz"]


def _c(x, v):
    return np.array(v, aval(x).dtype)


def _polyval(coeffs, x):
    y = snp.zeros_like(x)
    for c in coeffs:
        y = y * x + _c(x, c)
    return y


def _f32_or_f64(name, x):
    x = snp.asarray(x)
    dt = aval(x).dtype
    if dt not in (np.float32, np.float64):
        raise ShardcTypeError(f"{name}: x.dtype={dt} is not supported (float32 or float64 only, "
                          "as jax's); convert it first, e.g. x.astype(jnp.float32)")
    return x


# ---------------------------------------------------------------- the normal distribution

def ndtr(x):
    """The standard normal CDF: erf near 0, erfc in the tails (jax's piecewise)."""
    return _ndtr(_f32_or_f64("ndtr", x))


def _ndtr(x):
    half_sqrt_2 = _c(x, 0.5 * np.sqrt(2.0))
    w = x * half_sqrt_2
    z = snp.abs(w)
    y = snp.where(z < half_sqrt_2, _c(x, 1.0) + ew.erf_p.bind(w),
                  snp.where(w > _c(x, 0.0), _c(x, 2.0) - ew.erfc_p.bind(z), ew.erfc_p.bind(z)))
    return _c(x, 0.5) * y


_NDTRI_P0 = [-59.96335010141079, 98.00107541859997, -56.67628574690703, 13.931260938727968,
             -1.2391658386738125]
_NDTRI_Q0 = [1.0, 1.9544885833814176, 4.676279128988815, 86.36024213908905,
             -225.46268785411937, 200.26021238006066, -82.03722561683334, 15.90562251262117,
             -1.1833162112133]
_NDTRI_P1 = [4.0554489230596245, 31.525109459989388, 57.16281922464213, 44.08050738932008,
             14.684956192885803, 2.1866330685079025, -0.1402560791713545,
             -0.03504246268278482, -0.0008574567851546854]
_NDTRI_Q1 = [1.0, 15.779988325646675, 45.39076351288792, 41.3172038254672, 15.04253856929075,
             2.504649462083094, -0.14218292285478779, -0.03808064076915783,
             -0.0009332594808954574]
_NDTRI_P2 = [3.2377489177694603, 6.915228890689842, 3.9388102529247444, 1.3330346081580755,
             0.20148538954917908, 0.012371663481782003, 0.00030158155350823543,
             2.6580697468673755e-06, 6.239745391849833e-09]
_NDTRI_Q2 = [1.0, 6.02427039364742, 3.6798356385616087, 1.3770209948908132,
             0.21623699359449663, 0.013420400608854318, 0.00032801446468212774,
             2.8924786474538068e-06, 6.790194080099813e-09]


def ndtri(p):
    """The inverse of ndtr (Cephes' rational approximations, as jax's)."""
    p = _f32_or_f64("ndtri", p)
    dt = aval(p).dtype.type
    mcp = snp.where(p > _c(p, -np.expm1(-2.0)), _c(p, 1.0) - p, p)
    mcp = snp.where(mcp == _c(p, 0.0), snp.full_like(p, 0.5), mcp)
    w = mcp - _c(p, 0.5)
    ww = snp.square(w)
    x_big = w + w * ww * (_polyval(_NDTRI_P0, ww) / _polyval(_NDTRI_Q0, ww))
    x_big = x_big * -_c(p, np.sqrt(2.0 * np.pi))
    z = snp.sqrt(_c(p, -2.0) * snp.log(mcp))
    first = z - snp.log(z) / z
    rz = 1 / z
    x_small = first - _polyval(_NDTRI_P2, rz) / _polyval(_NDTRI_Q2, rz) / z
    x_other = first - _polyval(_NDTRI_P1, rz) / _polyval(_NDTRI_Q1, rz) / z
    x = snp.where(mcp > _c(p, np.exp(-2.0)), x_big,
                  snp.where(z >= _c(p, 8.0), x_small, x_other))
    x = snp.where(p > _c(p, 1.0 - np.exp(-2.0)), x, -x)
    inf = snp.full_like(p, dt(np.inf))
    return snp.where(p == _c(p, 0.0), -inf, snp.where(p == _c(p, 1.0), inf, x))


_LOGNDTR_SEGMENTS = {np.dtype(np.float64): (-20.0, 8.0), np.dtype(np.float32): (-10.0, 5.0)}


def _log_ndtr(x, series_order=3):
    if not isinstance(series_order, int):
        raise ShardcTypeError("series_order must be a Python integer.")
    if series_order < 0:
        raise ArgumentError("series_order must be non-negative.")
    if series_order > 30:
        raise ArgumentError("series_order must be <= 30.")
    x = snp.asarray(x)
    seg = _LOGNDTR_SEGMENTS.get(aval(x).dtype)
    if seg is None:
        raise ShardcTypeError(f"log_ndtr: x.dtype={aval(x).dtype} is not supported (float32 or "
                          "float64, as jax's)")
    lower, upper = _c(x, seg[0]), _c(x, seg[1])
    above = x > upper
    ndtr_res = _ndtr(snp.where(above, -x, snp.maximum(x, lower)))
    return snp.where(above, -ndtr_res,
                     snp.where(x > lower, snp.log(ndtr_res),
                               _log_ndtr_lower(snp.minimum(x, lower), series_order)))


def _log_ndtr_lower(x, series_order):
    x_2 = snp.square(x)
    log_scale = -_c(x, 0.5) * x_2 - snp.log(-x) - _c(x, 0.5 * np.log(2.0 * np.pi))
    return log_scale + snp.log(_asymptotic_series(x, series_order))


def _asymptotic_series(x, series_order):
    if series_order <= 0:
        return _c(x, 1)
    x_2 = snp.square(x)
    even, odd = snp.zeros_like(x), snp.zeros_like(x)
    x_2n = x_2
    for n in range(1, series_order + 1):
        y = _c(x, math.prod(range(2 * n - 1, 1, -2))) / x_2n
        if n % 2:
            odd = odd + y
        else:
            even = even + y
        x_2n = x_2n * x_2
    return _c(x, 1.0) + even - odd


_log_ndtr_cj = custom_jvp(_log_ndtr, nondiff_argnums=(1,))


def log_ndtr(x, series_order=3):
    """log(ndtr(x)): log of ndtr in the middle, -ndtr(-x) above, an asymptotic series of
    `series_order` terms below (the segments at -10 and 5 in f32, -20 and 8 in f64)."""
    return _log_ndtr_cj(x, series_order)


@_log_ndtr_cj.defjvp
def _log_ndtr_jvp(series_order, primals, tangents):
    (x,), (t,) = primals, tangents
    ans = _log_ndtr_cj(x, series_order)
    logpdf = _c(x, -0.5) * snp.square(x) - _c(x, np.log(np.sqrt(2 * np.pi)))
    return ans, t * snp.exp(logpdf - ans)


# ---------------------------------------------------------------- erfcx, dawsn

_ERFCX_ASYMP = [7918.06640625, -1055.7421875, 162.421875, -29.53125, 6.5625, -1.875, 0.75,
                -0.5, 1.0]


def erfcx(x):
    """exp(x**2) erfc(x): direct below sqrt(log(max)), an asymptotic series above
    (complex x: wofz(i x)), as jax's."""
    (x,) = promote("erfcx", x)
    if dtypes.is_complex(aval(x).dtype):
        return _wofz(cx.complex_p.bind(-cx.imag_p.bind(x), cx.real_p.bind(x)))
    return _erfcx(x)


def _erfcx_fn(x):
    dt = aval(x).dtype
    if dt == np.float64:
        return _erfcx_impl(x, 9)
    if dt == np.float32:
        return _erfcx_impl(x, 5)
    return snp.astype(_erfcx_impl(snp.astype(x, np.float32), 5), dt)


def _erfcx_impl(x, nterms):
    threshold = np.sqrt(np.log(np.finfo(aval(x).dtype).max))
    large = x > _c(x, threshold)
    safe_x = snp.where(large, snp.full_like(x, 1.0), x)
    direct = snp.exp(snp.square(safe_x)) * ew.erfc_p.bind(safe_x)
    t = _c(x, 1.0) / snp.square(x)
    asymp = _polyval(_ERFCX_ASYMP[-nterms:], t) / (x * _c(x, np.sqrt(np.pi)))
    return snp.where(large, asymp, direct)


_erfcx = custom_jvp(_erfcx_fn)
_erfcx.defjvps(lambda g, ans, x: g * (2 * x * ans - _c(x, 2.0 / np.sqrt(np.pi))))

_DAWSN_AN = [1.1368149897175597e-11, 8.492622676674738e-10, 1.9443420417555306e-08,
             9.531517412544844e-07, 3.078283098749132e-06, 0.00035251336852028877,
             -0.0008501498467244109, 0.04226182230055466, -0.09174803717734524, 1.0]
_DAWSN_AD = [2.403720730667626e-11, 1.488646813684934e-09, 5.212652810105416e-08,
             1.2725847827318697e-06, 2.324902498207895e-05, 0.00032552474182605793,
             0.003488058146571626, 0.027944853119882897, 0.15887424196012057,
             0.5749186294893204, 1.0]
_DAWSN_BN = [0.5089551564179009, -0.24475441814269785, 0.09415123353035344,
             -0.021871125514203903, 0.003662076123295692, -0.0004232091144603888,
             3.5964130479389666e-05, -2.1464035171996896e-06, 9.100107800763914e-08,
             -2.4027452082825098e-09, 3.592333854409284e-11]
_DAWSN_BD = [1.0, -0.6318398698733682, 0.2367067882282487, -0.053180636700322324,
             0.008480417185862954, -0.0009479967684866654, 7.810255929445524e-05,
             -4.558751532524426e-06, 1.8910035811142186e-07, -4.913246913319206e-09,
             7.184664032357345e-11]
_DAWSN_CN = [-0.5905928605347732, 0.6292352427243688, -0.17285897538038814,
             0.016483704782518965, -0.0004868276130204627]
_DAWSN_CD = [1.0, -2.698200571975449, 1.7327079904594784, -0.3937085822819395,
             0.03442789240412334, -0.0009736552260409412]


def dawsn(x):
    """Dawson's integral: three rational approximations on |x| < 3.25, < 6.25, above."""
    (x,) = promote("dawsn", x)
    if dtypes.is_complex(aval(x).dtype):
        raise ArgumentError("dawsn does not support complex-valued inputs.")
    return _dawsn(x)


def _dawsn_fn(x):
    if aval(x).dtype in (np.float32, np.float64):
        return _dawsn_impl(x)
    return snp.astype(_dawsn_impl(snp.astype(x, np.float32)), aval(x).dtype)


def _dawsn_impl(x):
    one = _c(x, 1.0)
    sign = snp.sign(x)
    ax = snp.abs(x)
    t = one / snp.square(ax)
    r1 = ax < _c(x, 3.25)
    r2 = (ax >= _c(x, 3.25)) & (ax < _c(x, 6.25))
    r3 = ax >= _c(x, 6.25)
    a1 = snp.where(r1, ax, snp.full_like(ax, 1.0))
    a1s = snp.square(a1)
    v1 = a1 * _polyval(_DAWSN_AN, a1s) / _polyval(_DAWSN_AD, a1s)
    t2 = snp.where(r2, t, snp.full_like(t, 1.0))
    a2 = snp.where(r2, ax, snp.full_like(ax, 1.0))
    v2 = _c(x, 0.5) / a2 * (one + t2 * _polyval(_DAWSN_BN, t2) / _polyval(_DAWSN_BD, t2))
    t3 = snp.where(r3, t, snp.full_like(t, 1.0))
    a3 = snp.where(r3, ax, snp.full_like(ax, 1.0))
    v3 = _c(x, 0.5) / a3 * (one + t3 * _polyval(_DAWSN_CN, t3) / _polyval(_DAWSN_CD, t3))
    return sign * snp.where(r1, v1, snp.where(ax < _c(x, 6.25), v2, v3))


_dawsn = custom_jvp(_dawsn_fn)
_dawsn.defjvps(lambda g, ans, x: g * (_c(x, 1.0) - _c(x, 2.0) * x * ans))


# ---------------------------------------------------------------- wofz

_WOFZ_L = 4.756828460010884
_WOFZ_C = [-1.3034426067909105e-12, 3.741183837373847e-12, 8.030427700497756e-12,
           -2.154359355749088e-11, -5.544244996323793e-11, 1.165824698850374e-10,
           4.1537441121999766e-10, -5.231020211492061e-10, -3.2080151339721323e-09,
           8.124886421653591e-10, 2.3797556530014025e-08, 2.2930438438915445e-08,
           -1.4813078929137642e-07, -4.1840763750512053e-07, 4.2558331397138446e-07,
           4.401531731283225e-06, 6.821031944357515e-06, -2.1409619201999998e-05,
           -0.0001307544925457942, -0.00024532980270038237, 0.00039259136070109705,
           0.004519541105349309, 0.0190061557848455, 0.05730440352983728,
           0.14060716226893755, 0.2954445107150874, 0.5460139720639338, 0.9019254893648001,
           1.345544169234545, 1.8256696296324815, 2.2635372999002676, 2.5722534081245696]


def wofz(z):
    """The Faddeeva function exp(-z**2) erfc(-i z) (Weideman's rational series, jax's)."""
    (z,) = promote("wofz", z)
    if not dtypes.is_complex(aval(z).dtype):
        cdt = np.complex128 if aval(z).dtype == np.float64 else np.complex64
        z = snp.astype(z, cdt)
    return _wofz(z)


def _cc(re, v):
    return cx.complex_p.bind(_c(re, v.real), _c(re, v.imag))


def _wofz_upper(z):
    re, im = cx.real_p.bind(z), cx.imag_p.bind(z)
    L = _cc(re, complex(_WOFZ_L))
    iz = cx.complex_p.bind(-im, re)
    denom = L - iz
    Z = (L + iz) / denom
    p = _polyval(_WOFZ_C, Z)
    return 2 * p / (denom * denom) + _cc(re, complex(1.0 / np.sqrt(np.pi))) / denom


def _wofz_fn(z):
    upper = cx.imag_p.bind(z) >= _c(cx.real_p.bind(z), 0.0)
    z_up = snp.where(upper, z, -z)
    w_up = _wofz_upper(z_up)
    correction = 2 * snp.exp(-(z * z)) - w_up
    return snp.where(upper, w_up, correction)


_wofz = custom_jvp(_wofz_fn)
_wofz.defjvps(lambda g, ans, z: g * (-(2 * z * ans)
                                     + _cc(cx.real_p.bind(z), complex(0, 2 / np.sqrt(np.pi)))))
