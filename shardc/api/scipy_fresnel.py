"""shardc.scipy.special.fresnel: the Fresnel integrals S(x), C(x), as jax's (Cephes'
rational approximations; f16/bf16 computed in f32)."""
from __future__ import annotations

import numpy as np

from ..errors import ShardcNotImplementedError
from ..ir import dtypes
from ..transforms.custom_jvp import custom_jvp
from . import numpy as snp
from .numpy._util import aval
from .scipy_special import promote

__all__ = ["fresnel"]


def _polyval(coeffs, x):
    y = snp.zeros_like(x)
    for c in coeffs:
        y = y * x + np.array(c, aval(x).dtype)
    return y


_FR32 = dict(
    sn=[1.6476294637887e-09, -1.522754752581096e-07, 8.4247488085024e-06,
        -0.0003120693124703272, 0.007244727626597022, -0.09228055941124598,
        0.5235987735681432],
    cn=[1.416802502367354e-08, -1.157231412229871e-06, 5.387223446683264e-05,
        -0.001604381798862293, 0.02818489036795073, -0.2467398198317899, 0.9999999760004487],
    fn=[-1903009855649.792, 135594238805.0252, -4158143148.511033, 73438484.63587323,
        -873235.6681548485, 8560.51546627547, -103.2877601091159, 2.999401847870011],
    gn=[-186084399762.465, 12783506733.93208, -377938771.3202229, 6492611.570598858,
        -77877.89623358162, 860.2931494734327, -14.93439396592284, 0.9999841934744914])
_FR64 = dict(
    sn=[-2991.8191940101983, 708840.0452577386, -62974148.62058625, 2548908805.7337637,
        -44297951805.96978, 318016297876.5678],
    sd=[1.0, 281.3762688899943, 45584.78108065326, 5173438.887700964, 419320245.8981112,
        22441179564.534092, 607366389490.0846],
    cn=[-4.9884311457357354e-08, 9.504280628298596e-06, -0.0006451914356839651,
        0.018884331939670384, -0.20552590095501388, 1.0],
    cd=[3.99982968972496e-12, 9.154392157746574e-10, 1.2500186247959882e-07,
        1.2226278902417902e-05, 0.0008680295429417843, 0.04121420907221998, 1.0],
    fn=[0.4215435550436775, 0.1434079197807589, 0.011522095507358577, 0.000345017939782574,
        4.6361374928786735e-06, 3.055689837902576e-08, 1.0230451416490724e-10,
        1.7201074326816183e-13, 1.3428327623306275e-16, 3.763297112699879e-20],
    fd=[1.0, 0.7515863983533789, 0.11688892585919138, 0.0064405152650885865,
        0.00015593440916415301, 1.8462756734893055e-06, 1.1269922476399903e-08,
        3.6014002958937136e-11, 5.887545336215784e-14, 4.5200143407412973e-17,
        1.2544323709001127e-20],
    gn=[0.5044420736433832, 0.1971028335255234, 0.018764858409257526, 0.0006840793809153931,
        1.1513882611188428e-05, 9.828524436884223e-08, 4.4534441586175015e-10,
        1.0826804113902088e-12, 1.375554606332618e-15, 8.363544356306774e-19,
        1.8695871016278324e-22],
    gd=[1.0, 1.4749575992512833, 0.33774898912002, 0.02536037414203388,
        0.0008146791071843061, 1.2754507566772912e-05, 1.0431458965757199e-07,
        4.6068072814652043e-10, 1.1027321506624028e-12, 1.3879653125957886e-15,
        8.391588162831187e-19, 1.8695871016278324e-22])


def _sincospi_sq_half(x):
    """sin and cos of pi x**2 / 2, reduced mod 2 first (jax's sincospisquaredhalf)."""
    x = snp.abs(x)
    s = snp.fmod(x, 2.0)
    r = snp.fmod(s * (x - s / 2), 2.0)
    sinpi = snp.where(r < 0.5, snp.sin(np.pi * r),
                      snp.where(r > 1.5, snp.sin(np.pi * (r - 2.0)), -snp.sin(np.pi * (r - 1.0))))
    cospi = snp.where(r == 0.5, 0.0, snp.where(r < 1.0, -snp.sin(np.pi * (r - 0.5)),
                                               snp.sin(np.pi * (r - 1.5))))
    return sinpi, cospi


def _fresnel_fn(x):
    (xx,) = promote("fresnel", x)
    odt = aval(xx).dtype
    if dtypes.is_complex(odt):
        raise ShardcNotImplementedError("Support for complex-valued inputs is not implemented yet.")
    if odt == np.float64:
        single, co = False, _FR64
    elif odt.itemsize <= 4:
        single, co = True, _FR32
        xx = snp.astype(xx, np.float32)
    else:
        raise ShardcNotImplementedError(f"Support for {odt} dtype is not implemented yet.")

    def pv(name, v):
        return _polyval(co[name], v)
    x = snp.abs(xx)
    x2 = x * x
    t = x2 * x2
    if single:
        s_small, c_small = x * x2 * pv("sn", t), x * pv("cn", t)
    else:
        s_small = x * x2 * pv("sn", t) / pv("sd", t)
        c_small = x * pv("cn", t) / pv("cd", t)
    sinpi, cospi = _sincospi_sq_half(x)
    if single:
        c_large = s_large = 0.5
    else:
        c_large = 0.5 + 1 / (np.pi * x) * sinpi
        s_large = 0.5 - 1 / (np.pi * x) * cospi
    t = np.pi * x2
    u = 1.0 / (t * t)
    t = 1.0 / t
    if single:
        f, g = 1.0 - u * pv("fn", u), t * pv("gn", u)
    else:
        f, g = 1.0 - u * pv("fn", u) / pv("fd", u), t * pv("gn", u) / pv("gd", u)
    t = np.pi * x
    c_other = 0.5 + (f * sinpi - g * cospi) / t
    s_other = 0.5 - (f * cospi + g * sinpi) / t
    isinf, small, large = snp.isinf(xx), x2 < 2.5625, x > 36974.0
    s = snp.where(isinf, 0.5, snp.where(small, s_small, snp.where(large, s_large, s_other)))
    c = snp.where(isinf, 0.5, snp.where(small, c_small, snp.where(large, c_large, c_other)))
    neg = xx < 0.0
    s, c = snp.where(neg, -s, s), snp.where(neg, -c, c)
    if odt != aval(xx).dtype:
        s, c = snp.astype(s, odt), snp.astype(c, odt)
    return s, c


fresnel = custom_jvp(_fresnel_fn)


@fresnel.defjvp
def _fresnel_jvp(primals, tangents):
    (x,), (xd,) = primals, tangents
    sinpi, cospi = _sincospi_sq_half(x)
    return fresnel(x), (sinpi * xd, cospi * xd)
