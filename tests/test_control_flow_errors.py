"""Bad input to shardc.lax control flow: each a ShardcError / ShardcTypeError naming
this file's line, with the leaf's path and both types, where jax raises too."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp
from shardc.errors import ShardcTypeError

F = np.float32
X = np.ones((3,), F)


def _cases(lax, m):
    """name -> (function of x, substrings both messages must contain)."""
    return {
        "scan_carry_shape": (lambda x: lax.scan(
            lambda c, e: ({"a": m.concatenate([c["a"], e[None]])}, None), {"a": x}, x),
            ["['a']", "f32[3]", "f32[4]", "carry"]),
        "scan_carry_dtype": (lambda x: lax.scan(
            lambda c, e: ((c[0], c[1].astype(m.int32)), None), (x, x), x),
            ["[1]", "f32[3]", "i32[3]", "carry"]),
        "while_carry_shape": (lambda x: lax.while_loop(
            lambda c: c[0].sum() < 10, lambda c: (c[0], c[1][:2]), (x, x)),
            ["[1]", "f32[3]", "f32[2]", "while_loop body function carry"]),
        "while_carry_dtype": (lambda x: lax.while_loop(
            lambda c: c.sum() < 10, lambda c: c.astype(m.float16), x),
            ["f32[3]", "f16[3]", "while_loop body function carry"]),
        "fori_carry_dtype": (lambda x: lax.fori_loop(
            0, 3, lambda i, c: {"v": (c["v"] * i).astype(m.int32)}, {"v": x}),
            ["['v']", "f32[3]", "i32[3]"]),
        "fori_traced_carry_shape": (lambda x: lax.fori_loop(
            0, x.astype(m.int32)[0], lambda i, c: c.sum(), x),
            ["f32[3]", "f32[]"]),
        "while_cond_float": (lambda x: lax.while_loop(lambda c: c.sum(), lambda c: c, x),
                             ["cond_fun must return a boolean scalar", "f32[]"]),
        "while_cond_vector": (lambda x: lax.while_loop(lambda c: c > 0, lambda c: c, x),
                              ["cond_fun must return a boolean scalar", "bool[3]"]),
        "scan_not_pair": (lambda x: lax.scan(lambda c, e: c, x, x), ["pair"]),
        "nested_in_scan": (lambda x: lax.scan(lambda c, e: (lax.cond(
            e > 0, lambda: c, lambda: c[:2]), None), x, x), ["f32[3]", "f32[2]"]),
        "cond_types": (lambda x: lax.cond(
            x[0] > 0, lambda: (x, x), lambda: (x, x.astype(m.int32))),
            ["[1]", "f32[3]", "i32[3]", "true_fun", "false_fun"]),
        "cond_structure": (lambda x: lax.cond(
            x[0] > 0, lambda: (x, x), lambda: [x, x]),
            ["structure"]),
        "cond_nonscalar_pred": (lambda x: lax.cond(x > 0, lambda: x, lambda: x),
                                ["scalar"]),
        "switch_float_index": (lambda x: lax.switch(x[0], [lambda: x, lambda: x]),
                               ["integer", "f32"]),
        "switch_types": (lambda x: lax.switch(1, [lambda: x, lambda: x[:2]]),
                         ["f32[3]", "f32[2]", "branch 0"]),
        "scan_xs_lengths": (lambda x: lax.scan(lambda c, e: (c, None), 0.0,
                                               (x, m.ones((4,)))),
                            ["leading axis", "3", "4"]),
        "scan_length_mismatch": (lambda x: lax.scan(lambda c, e: (c, None), 0.0, x,
                                                    length=5),
                                 ["length", "5", "3"]),
        "scan_no_length": (lambda x: lax.scan(lambda c, e: (c, None), 0.0, None),
                           ["length"]),
    }


def _jax_message(fn):
    try:
        jax.jit(fn)(X)
    except (TypeError, ValueError) as e:
        return str(e)
    raise AssertionError("jax accepts it")


def _short(msg):
    """jax spells types float32[3]; shardc f32[3]: compare in shardc's spelling."""
    for long, short in (("float32", "f32"), ("int32", "i32"), ("float16", "f16")):
        msg = msg.replace(long, short)
    return msg


@pytest.mark.parametrize("name", list(_cases(jax.lax, jnp)))
def test_bad_input(name):
    fn, words = _cases(shardc.lax, snp)[name]
    jfn, _ = _cases(jax.lax, jnp)[name]
    want = _short(_jax_message(jfn))
    with pytest.raises(shardc.ShardcError) as e:
        shardc.jit(fn)(X)
    err = e.value
    assert err.loc.file == __file__ and err.loc.line > 0, f"{name}: at {err.loc}"
    got = str(err)
    assert "Traceback" not in got and "stablehlo" not in got, got
    for w in words:
        assert w in got, f"{name}: {w!r} not in shardc's message {got!r}"
        assert w in want, f"{name}: {w!r} not in jax's message {want!r}"


def test_cond_order_in_message():
    """true_fun's type is named first, as jax's message does."""
    with pytest.raises(ShardcTypeError, match=re.escape(
            "true_fun output[1] has type f32[3] but false_fun output[1] has type i32[3]")):
        shardc.jit(_cases(shardc.lax, snp)["cond_types"][0])(X)


def test_scan_arguments_as_jax():
    x = np.arange(8, dtype=np.float32)
    for m in (jax, shardc):     # jax's errors and acceptances, side by side
        with pytest.raises(ValueError, match="non-negative"):
            m.lax.scan(lambda c, a: (c + a, c), 0.0, x, unroll=-1)
    # a float length is its int; a list from the body is a list
    got = shardc.lax.scan(lambda c, _: (c * 2, c), 1.0, None, length=3.0)
    want = jax.lax.scan(lambda c, _: (c * 2, c), 1.0, None, length=3.0)
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))
    out = shardc.lax.scan(lambda c, a: [c + a, c], 0.0, x)
    assert type(out) is list and type(jax.lax.scan(lambda c, a: [c + a, c], 0.0, x)) is list
    mesh = jax.make_mesh((2, 4), ("d", "m"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
    xs = jax.device_put(np.ones((8, 16), np.float32),
                        jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d")))
    for m in (jax, shardc):     # scanning over a sharded dim is jax's error, as map
        with pytest.raises(ValueError, match="0th dimension of all xs should be replicated"):
            m.jit(lambda x: m.lax.scan(lambda c, r: (c + r, r), np.zeros(16, np.float32),
                                       x))(xs)
        with pytest.raises(ValueError, match="0th dimension of all xs should be replicated"):
            m.jit(lambda x: m.lax.map(lambda r: r * 2, x))(xs)
