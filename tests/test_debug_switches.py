"""jax's debugging switches hold for shardc as for jax: jax_debug_nans / jax_debug_infs
raise FloatingPointError naming the op (its line the traceback's last), on cached and
uncached calls, jitted and eager; jax.disable_jit() runs a jitted function as Python."""
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp
from shardc import lax as slax
from shardc import random as sr


def _log_twice(x):
    y = x * 2
    return snp.log(y) + 1          # the op that makes the NaN


def _raises(fn, *args, match):
    with pytest.raises(FloatingPointError, match=match) as e:
        fn(*args)
    return traceback.extract_tb(e.value.__traceback__)[-1]


@pytest.mark.parametrize("switch, bad, kind", [(jax.debug_nans, -1.0, "nan"),
                                               (jax.debug_infs, 0.0, "inf")])
def test_invalid_values_name_the_op_at_the_users_line(switch, bad, kind):
    f = shardc.jit(_log_twice)
    good = f(np.float32(1.0))                   # compiled and cached before the switch
    with switch(True):
        for _ in range(2):                      # the cached call, then a new signature
            last = _raises(f, np.float32(bad), match=rf"invalid value \({kind}\) "
                                                     "encountered in log")
            assert last.name == "_log_twice" and "snp.log" in last.line
            _raises(f, np.full(3, bad, np.float32), match=kind)
        for _ in range(2):
            _raises(snp.log, np.float32(bad), match=f"{kind}.*encountered in log")
        c = f.lower(np.float32(1.0)).compile()
        for _ in range(2):
            _raises(c, np.float32(bad), match=f"{kind}.*encountered in compiled _log_twice")
        assert f(np.float32(1.0)) == good       # no invalid value: no error
    assert np.isnan(f(np.float32(-1.0))) if kind == "nan" else np.isinf(f(np.float32(0.)))


@pytest.mark.parametrize("fn, match", [(lambda x: x + 0, "encountered in add"),
                                       (lambda x: x, "de-optimized function did not")])
def test_nan_from_the_input_is_reported_as_jax_reports_it(fn, match):
    nan = jnp.float32(np.nan)
    with jax.debug_nans(True):
        with pytest.raises(FloatingPointError, match=match) as je:
            jax.jit(fn)(nan)
        with pytest.raises(FloatingPointError, match=match) as se:
            shardc.jit(fn)(nan)
        assert shardc.jit(fn)(np.int32(3)) == 3     # integers are not checked
    # (jax names the program in the first words on a first call, 'jit' on a cached one)
    assert str(se.value).split("\n")[0].split(")")[-1] == \
        str(je.value).split("\n")[0].split(")")[-1]


def test_nested_jits_check_the_outer_result():
    inner = shardc.jit(lambda x: snp.log(x))
    outer = shardc.jit(lambda x: inner(x) * 2)
    with jax.debug_nans(True):
        assert np.isclose(outer(np.float32(2.0)), 2 * np.log(2))
        _raises(outer, np.float32(-2.0), match="encountered in log")


def test_nan_in_a_sharded_result_and_the_gradient(mesh2x4):
    from jax.sharding import NamedSharding, PartitionSpec as P
    x = jax.device_put(np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4),
                       NamedSharding(mesh2x4, P("x", "y")))
    f = shardc.jit(lambda x: snp.sqrt(x).sum(axis=1))
    with jax.debug_nans(True):
        _raises(f, x, match="encountered in sqrt")
        # a transform's ops run as one program: the NaN is named after it
        def loss(x):
            return snp.sqrt(x).sum()
        _raises(shardc.jit(shardc.grad(loss)), x, match=r"\(nan\) encountered in grad\(loss\)")
        _raises(shardc.vmap(snp.sqrt), x, match=r"\(nan\) encountered in vmap\(sqrt\)")
    assert np.isnan(f(x)).any()


def test_disable_jit_runs_the_python_function(mesh2x4):
    seen = []

    @shardc.jit
    def f(k, x):
        seen.append(type(x))
        y = slax.fori_loop(0, 3, lambda i, c: c * 2, x)
        return y + sr.normal(k, x.shape), shardc.grad(lambda v: (v ** 3).sum())(x)

    k, x = jax.random.key(0), jnp.arange(4.0)
    want = f(k, x)
    with jax.disable_jit():
        got = f(k, x)
        assert not isinstance(seen[-1], shardc.trace.core.Tracer)
    assert len(seen) == 2
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    with jax.disable_jit():     # shardc's own jits (transforms, samplers) still compile
        np.testing.assert_allclose(shardc.vmap(lambda v: v * 2)(x), x * 2)
        np.testing.assert_allclose(shardc.grad(lambda v: (v ** 2).sum())(x), 2 * x)
        np.testing.assert_array_equal(sr.uniform(k, (3,)), jax.random.uniform(k, (3,)))
        np.testing.assert_allclose(slax.scan(lambda c, v: (c + v, c), 0., x)[0], 6.)
        from jax.sharding import PartitionSpec as P
        sm = shardc.shard_map(lambda v: v * 2, mesh=mesh2x4, in_specs=P("x"), out_specs=P("x"))
        np.testing.assert_allclose(sm(x), x * 2)
