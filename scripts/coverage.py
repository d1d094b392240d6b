"""API coverage of shardc against jax, per namespace.

    python scripts/coverage.py            # counts
    python scripts/coverage.py --missing  # and the names shardc lacks (owner in brackets)

A name counts when shardc's counterpart has it (any public attribute). jax.lax counts
functions only (not primitives, classes or constants). `counts()` is what
tests/test_api_coverage.py holds floors on."""
from __future__ import annotations

import importlib
import inspect
import os
import sys
import types

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NAMESPACES = [  # (jax module, shardc module, functions only)
    ("jax.numpy", "shardc.numpy", False),
    ("jax.lax", "shardc.lax", True),
    ("jax.nn", "shardc.nn", False),
    ("jax.random", "shardc.random", False),
    ("jax.numpy.linalg", "shardc.numpy.linalg", False),
    ("jax.numpy.fft", "shardc.numpy.fft", False),
    ("jax.scipy.special", "shardc.scipy.special", False),
    ("jax.scipy.linalg", "shardc.scipy.linalg", False),
    ("jax.scipy.signal", "shardc.scipy.signal", False),
    ("jax.scipy.stats", "shardc.scipy.stats", False),
    ("jax.scipy.fft", "shardc.scipy.fft", False),
    ("jax.scipy.ndimage", "shardc.scipy.ndimage", False),
    ("jax.scipy.integrate", "shardc.scipy.integrate", False),
    ("jax.scipy.interpolate", "shardc.scipy.interpolate", False),
    ("jax.scipy.optimize", "shardc.scipy.optimize", False),
    ("jax.scipy.sparse.linalg", "shardc.scipy.sparse.linalg", False),
    ("jax.scipy.cluster.vq", "shardc.scipy.cluster.vq", False),
    ("jax.scipy.spatial.transform", "shardc.scipy.spatial.transform", False),
    ("jax.ops", "shardc.ops", False),
] + [(f"jax.scipy.stats.{d}", f"shardc.scipy.stats.{d}", False) for d in """bernoulli beta
    betabinom binom cauchy chi2 dirichlet expon gamma gennorm geom gumbel_l gumbel_r laplace
    logistic multinomial multivariate_normal nbinom norm pareto poisson t truncnorm uniform
    vonmises wrapcauchy""".split()]

# names the other helpers of issue 16 build (reported, not counted differently)
_OWNERS = {
    "sort": """argsort sort searchsorted bincount nonzero argwhere flatnonzero unique
        unique_all unique_counts unique_inverse unique_values take_along_axis put_along_axis
        partition argpartition lexsort median nanmedian quantile percentile nanquantile
        nanpercentile histogram histogram2d histogramdd histogram_bin_edges digitize isin
        union1d intersect1d setdiff1d setxor1d cumprod cumulative_sum cumulative_prod
        nancumsum nancumprod sort_key_val top_k approx_max_k approx_min_k cumsum cummax
        cummin cumlogsumexp dynamic_slice dynamic_slice_in_dim dynamic_update_slice
        dynamic_update_slice_in_dim dynamic_index_in_dim dynamic_update_index_in_dim""",
    "linalg": """convolve correlate conv conv_general_dilated conv_general_dilated_local
        conv_general_dilated_patches conv_transpose conv_with_general_padding
        conv_dimension_numbers conv_general_permutations conv_general_shape_tuple
        conv_shape_tuple conv_transpose_shape_tuple ConvGeneralDilatedDimensionNumbers
        polyfit roots poly""",
    "dtypes": """complex64 complex128 complex_ cdouble csingle angle conj conjugate real imag
        iscomplex iscomplexobj isreal isrealobj sort_complex float8_e4m3fn float8_e5m2
        float8_e3m4 float8_e4m3 float8_e4m3b11fnuz float8_e4m3fnuz float8_e5m2fnuz
        float8_e8m0fnu float4_e2m1fn float6_e2m3fn float6_e3m2fn int1 int2 int4 uint1 uint2
        uint4 cbrt exp2 nextafter spacing bitwise_count frexp complex clz population_count
        reduce_precision fft""",
    "random": """i0 kaiser bitcast_convert_type erf_inv lgamma digamma igamma igammac
        igamma_grad_a random_gamma_grad bessel_i0e bessel_i1e polygamma zeta betainc
        rng_bit_generator rng_uniform mulhi""",
    "lead/transforms": "vectorize",
}
OWNER = {n: who for who, names in _OWNERS.items() for n in names.split()}


def _module(name):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def public(mod, functions_only=False):
    out = set()
    for n in dir(mod):
        if n.startswith("_"):
            continue
        v = getattr(mod, n)
        if isinstance(v, types.ModuleType):
            continue
        if functions_only and (not callable(v) or inspect.isclass(v) or
                               type(v).__name__ == "Primitive"):
            continue
        out.add(n)
    return out


def counts():
    """{jax namespace: (have, total, sorted missing names)}."""
    res = {}
    for jname, sname, fonly in NAMESPACES:
        jax_names = public(importlib.import_module(jname), fonly)
        smod = _module(sname)
        ours = public(smod) if smod is not None else set()
        res[jname] = (len(jax_names & ours), len(jax_names), sorted(jax_names - ours))
    return res


def main(argv):
    show = "--missing" in argv
    for (jname, sname, _), (have, total, missing) in zip(NAMESPACES, counts().values()):
        print(f"{sname:34s} {have:4d} / {total:4d} of {jname}")
        if show and missing:
            mine = [n for n in missing if n not in OWNER]
            theirs = [f"{n} [{OWNER[n]}]" for n in missing if n in OWNER]
            for line in (mine, theirs):
                if line:
                    print("    " + " ".join(line))


if __name__ == "__main__":
    main(sys.argv[1:])
