"""pmap's options as jax.pmap's: static_broadcasted_argnums (constants, recompiled per
value, in_axes counted over all positional arguments), keyword arguments mapped over
their leading axis, donate_argnums, axis_size, backend, devices, `.lower`, and jax's
errors -- values against jax.pmap."""
import jax
import numpy as np
import pytest

import shardc

X = np.arange(16, dtype=np.float32).reshape(8, 2)
Y = np.arange(8, dtype=np.float32)


def _same(make, *args, **kwargs):
    want = make(jax.pmap)(*args, **kwargs)
    got = make(shardc.pmap)(*args, **kwargs)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want),
                    strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
    return got


def test_static_broadcasted_argnums():
    def make(pmap):
        return pmap(lambda a, k, b: a * k["scale"] + b if k["add"] else a * 2,
                    axis_name="i", static_broadcasted_argnums=1)
    for k in ({"scale": 3.0, "add": True}, {"scale": 3.0, "add": False}):
        class H(dict):     # static arguments must be hashable
            __hash__ = lambda self: hash(tuple(sorted(self.items())))  # noqa: E731
        _same(make, X, H(k), Y)


def test_static_argument_with_in_axes_over_all_positions():
    def make(pmap):
        return pmap(lambda n, a, b: (a * n).sum() + b, static_broadcasted_argnums=(0,),
                    in_axes=(None, 1, None))
    _same(make, 3, X.T, np.float32(1.5))


def test_keyword_arguments_are_mapped_over_their_leading_axis():
    _same(lambda pmap: pmap(lambda a, b=None: a.sum() + b, axis_name="i"), X, b=Y)


def test_donate_argnums():
    """Donated arguments are the program's buffer donors; one placed elsewhere than pmap
    places it is copied, and the copy donated, so the caller's array lives (as jax's)."""
    for pmap in (jax.pmap, shardc.pmap):
        a, b = jax.device_put(X), jax.device_put(X)
        out = pmap(lambda a, b: a + b, donate_argnums=0)(a, b)
        np.testing.assert_array_equal(np.asarray(out), 2 * X)
        assert not a.is_deleted() and not b.is_deleted()
    text = shardc.pmap(lambda a, k, b: a * k + b, donate_argnums=(0, 2),
                       static_broadcasted_argnums=1).lower(X, 2.0, X).as_text()
    assert text.count("jax.buffer_donor") == 2


def test_axis_size_backend_devices():
    _same(lambda pmap: pmap(lambda a: a * 2, axis_size=8, backend="cpu"), X)
    _same(lambda pmap: pmap(lambda a: jax.lax.psum(a, "i") if pmap is jax.pmap else
                            shardc.lax.psum(a, "i"), axis_name="i",
                            devices=jax.devices()[4:]), X[:4])
    for pmap in (jax.pmap, shardc.pmap):
        with pytest.raises(ValueError, match="Specified axis_size 4 doesn't match"):
            pmap(lambda a: a, axis_size=4)(X)


def test_lower_compiles_and_runs():
    c = shardc.pmap(lambda a: a * 2, axis_name="i").lower(X).compile()
    np.testing.assert_array_equal(np.asarray(c(X)), 2 * X)


@pytest.mark.parametrize("case", ["too_few", "unhashable", "bad_in_axes", "no_mapped"])
def test_errors_as_jax(case):
    calls = {
        "too_few": (dict(static_broadcasted_argnums=2), (X, X), ValueError,
                    "All static broadcasted arguments must be passed positionally"),
        "unhashable": (dict(static_broadcasted_argnums=1), (X, [1]), (ValueError, TypeError),
                       "hash"),
        "bad_in_axes": (dict(in_axes=(0, "a")), (X, X), TypeError,
                        "in_axes must be an int, None, or"),
        "no_mapped": (dict(in_axes=None), (X,), ValueError,
                      "requires at least one argument with a mapped axis"),
    }
    kw, args, kind, words = calls[case]
    for pmap in (jax.pmap, shardc.pmap):
        with pytest.raises(kind, match=words):
            pmap(lambda *a: a[0], **kw)(*args)
