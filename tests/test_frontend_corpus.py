"""jax library code inside shardc.jit, function by function: each program runs under
shardc.jit and jax.jit on sharded inputs (values, dtypes, output shardings), and where
it has a gradient, shardc.grad of it and jax.grad inside shardc.jit against jax.grad.
Each entry names the jax primitive(s) it reaches that needed a translation."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import shardc
from helpers import check_outputs

K = jax.random.key(3)
V = np.linspace(0.15, 0.95, 16, dtype=np.float32)
M = np.linspace(-1.5, 2.0, 32, dtype=np.float32).reshape(8, 4)
IMG = (np.sin(np.arange(2 * 6 * 6 * 2, dtype=np.float32)) * 3).round().reshape(2, 6, 6, 2)


def _argmax_pair(a, b):
    """a non-monoid reducer (lax.reduce_p): the larger value with its index."""
    (va, ia), (vb, ib) = a, b
    take = (va > vb) | ((va == vb) & (ia < ib))
    return jnp.where(take, va, vb), jnp.where(take, ia, ib)


CASES = {   # name: (fn, args as (array, spec), differentiable in arg 0)
    # jax's fft primitive takes its FftType enum (once refused: "fft_type must be one of")
    "fft": (lambda x: jnp.abs(jnp.fft.fft(x)) + jnp.fft.irfft(jnp.fft.rfft(x), n=4) +
            jnp.fft.ifft2(jnp.fft.fft2(x)).real, [(M, P("x"))], True),
    # jax.grad of a jit with a constant output (jnp.pad's): a literal reached jax
    "pad": (lambda x: jnp.pad(x, [(1, 2), (0, 1)]), [(M, P("x"))], True),
    # jnp.asarray(2) under a trace is a tracer (shardc's trace once returned jax's
    # literal TypedInt, which has no .ndim)
    "insert": (lambda x: jnp.insert(x, 2, 7.0, axis=1), [(M, P("x"))], True),
    "choice_poisson_binomial": (lambda x: (
        jax.random.choice(K, 10, (3,)).sum() + jax.random.choice(
            K, 4, (2,), replace=False, p=x[:4] / x[:4].sum()).sum()
        + jax.random.poisson(K, 3.0, (6,)).sum() + jax.random.binomial(K, 10, x).sum()
        + jax.random.randint(K, (6,), 0, 200, dtype=jnp.uint8).sum()), [(V, P("x"))],
        False),
    # its .astype(None) is the default float type, as jax's (it was refused)
    "multinomial": (lambda x: jax.random.multinomial(K, 10, x / x.sum()), [(V, P("x"))],
                    False),
    "stack": (lambda x: jnp.stack([x, 2 * x], axis=1), [(M, P("x"))], True),
    "unstack": (lambda x: jnp.unstack(x, axis=1)[2], [(M, P("x", "y"))], True),
    "acosh": (lambda x: jnp.arccosh(x + 1.5), [(M, P("x"))], True),
    "asinh_atanh": (lambda x: jnp.arcsinh(x) + jnp.arctanh(x / 3), [(M, P(None, "y"))],
                    True),
    "i0e_i1e": (lambda x: jax.scipy.special.i0e(x) * jax.scipy.special.i1e(x),
                [(M, P("x"))], True),
    "gammainc": (lambda x: jax.scipy.special.gammainc(2.0, x + 2) +
                 jax.scipy.special.gammaincc(x + 2, 1.5), [(M, P("x"))], True),
    "betainc": (lambda x: jax.scipy.special.betainc(2.0, 3.0, x), [(V, P("x"))], False),
    "searchsorted": (lambda x: jnp.searchsorted(jnp.sort(x), x * 0.9), [(V, P("x"))], False),
    "histogram": (lambda x: jnp.histogram(x, bins=5)[0], [(V, P("x"))], False),
    "interp": (lambda x: jnp.interp(x * 0.7, jnp.sort(x), jnp.sort(x) ** 2),
               [(V, P("x"))], False),
    "reduce_argmax_pair": (lambda x: jax.lax.reduce(
        (x, jax.lax.broadcasted_iota(jnp.int32, x.shape, 0)),
        (np.float32(-np.inf), np.int32(0)), _argmax_pair, (0,)), [(M, P("x"))], False),
    "max_pool_ties": (lambda x: jax.lax.reduce_window(
        x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
        [(IMG, P("x"))], True),
    "min_pool_padded": (lambda x: jax.lax.reduce_window(
        x, jnp.inf, jax.lax.min, (1, 3, 3, 1), (1, 2, 1, 1), "SAME"),
        [(IMG, P(None, "x"))], True),
    "sum_pool_dilated": (lambda x: jax.lax.reduce_window(
        x, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID",
        window_dilation=(1, 2, 1, 1)), [(IMG, P("x"))], True),
    "gamma": (lambda x: jax.random.gamma(K, x + 1.0), [(V, P("x"))], True),
    "beta_dirichlet": (lambda x: jax.random.beta(K, x + 1, 2.0) +
                       jax.random.dirichlet(K, x[:4] + 1, (4,)).sum(), [(V, P("x"))], False),
    "device_put": (lambda x: jax.device_put(
        x * 2, NamedSharding(_MESH[0], P(None, "y"))),
        [(M, P("x"))], True),
    "shard_alike": (lambda x: jax.experimental.shard_alike.shard_alike(x, x.T.T * 3)[1],
                    [(M, P("x", "y"))], True),
    "qr": (lambda x: jnp.abs(jnp.linalg.qr(x)[1]), [(M, P())], True),
    "tridiagonal_solve": (lambda x: jax.lax.linalg.tridiagonal_solve(
        x[:, 0] * 0.3, x[:, 1] + 4.0, x[:, 2] * 0.5, x), [(M, P())], True),
    "tridiagonal_solve_batched": (lambda x: jax.lax.linalg.tridiagonal_solve(
        x[..., 0] * 0.3, x[..., 1] + 4.0, x[..., 2] * 0.5, x),
        [(np.stack([M, M[::-1]]), P("x"))], True),
    "composite": (lambda x: jax.lax.composite(lambda v: jnp.tanh(v) * 2, "my.tanh2")(x),
                  [(M, P("x"))], False),     # jax has no gradient of a composite
}
_MESH = [None]


def _args(mesh, spec_args):
    return [jax.device_put(a, NamedSharding(mesh, s)) for a, s in spec_args]


@pytest.mark.parametrize("name", sorted(CASES))
def test_jax_code_matches_jax(name, mesh2x4):
    import jax.experimental.shard_alike  # noqa: F401
    _MESH[0] = mesh2x4
    fn, spec_args, diff = CASES[name]
    args = _args(mesh2x4, spec_args)
    check_outputs(shardc.jit(fn)(*args), jax.jit(fn)(*args), mesh2x4)
    if diff:
        loss = lambda *a: jnp.sum(fn(*a) ** 2)   # noqa: E731
        ref = jax.jit(jax.grad(loss))(*args)
        check_outputs(shardc.jit(shardc.grad(loss))(*args), ref, check_sharding=False)
        check_outputs(shardc.jit(jax.grad(loss))(*args), ref, check_sharding=False)


def test_device_put_inside_jit_is_a_reshard_on_explicit_axes():
    """jax.device_put to a NamedSharding inside jit: on Explicit axes the value's type
    (and layout) becomes that sharding; on Auto ones jax's CPU lowering drops it (the
    device_put case above)."""
    from jax.sharding import AxisType
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    x = jax.device_put(M, NamedSharding(mesh, P("x")))

    def f(x):
        y = jax.device_put(x * 2, NamedSharding(mesh, P(None, "y")))
        return y, y.sum(axis=1)
    with jax.set_mesh(mesh):
        check_outputs(shardc.jit(f)(x), jax.jit(f)(x), mesh)


def test_mulhi_and_reduce_xor_against_numpy(mesh2x4):
    """jax.jit cannot run these on CPU (XLA:CPU has neither chlo.mulhi nor a xor
    reduction): NumPy is the reference."""
    u = np.arange(16, dtype=np.uint32) * np.uint32(0x1234567) + np.uint32(0xF0000000)
    i = u.view(np.int32)
    x = jax.device_put(u, NamedSharding(mesh2x4, P("x")))

    def f(x):
        return (jax.lax.mulhi(x, jnp.uint32(0x9E3779B9)),
                jax.lax.mulhi(x.view(jnp.int32), jnp.int32(-7919)),
                jax.lax.mulhi(x.astype(jnp.uint16), jnp.uint16(40000)),
                jax.lax.mulhi(x.astype(jnp.int8), jnp.int8(-100)),
                jax.lax.reduce_xor(x.reshape(4, 4).view(jnp.int32), (0,)))
    hi_u, hi_i, hi_16, hi_8, xr = shardc.jit(f)(x)
    np.testing.assert_array_equal(hi_u, (u.astype(np.uint64) * 0x9E3779B9) >> 32)
    np.testing.assert_array_equal(hi_i, (i.astype(np.int64) * -7919) >> 32)
    np.testing.assert_array_equal(hi_16, (u.astype(np.uint16).astype(np.uint32) * 40000) >> 16)
    np.testing.assert_array_equal(hi_8, (u.astype(np.int8).astype(np.int32) * -100) >> 8)
    np.testing.assert_array_equal(xr, np.bitwise_xor.reduce(i.reshape(4, 4), axis=0))
    assert hi_u.dtype == np.uint32 and hi_i.dtype == np.int32 and hi_8.dtype == np.int8


_LITERAL_BODIES = {
    # region bodies whose results are jaxpr literals (False, 3, 0.5): a bool literal
    # once became True (a `while not_done` loop never ended; a carry came out True)
    "while": lambda q: jax.lax.while_loop(lambda c: c[1] & (c[0] < 1),
                                          lambda c: (c[0], False, c[2] * 2, 7, 2.5),
                                          (0, True, q, 1, 1.0)),
    "fori": lambda q: jax.lax.fori_loop(0, 3, lambda i, c: (False, c[1] + 1), (True, q)),
    "scan": lambda q: jax.lax.scan(lambda c, x: ((False, 3, 0.5, c[3] + x), (False, 0, -1.5)),
                                   (True, 1, 1.0, q), jnp.arange(3.0)),
    "cond": lambda q: jax.lax.cond(q > 0, lambda q: (False, 0, 0.0, q),
                                   lambda q: (True, 5, 1.5, q), q),
}


@pytest.mark.parametrize("name", sorted(_LITERAL_BODIES))
def test_literal_results_of_loop_and_branch_bodies(name):
    fn = _LITERAL_BODIES[name]
    got, want = shardc.jit(fn)(np.float32(1.0)), jax.jit(fn)(np.float32(1.0))
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_vmapped_while_with_per_example_predicates_and_grad_of_a_switch():
    # found by the fuzzer's FUZZ_FRONTEND mode: jax's batched while has a predicate per
    # example (once "cond_fun must return a boolean scalar"), and the gradient of a
    # switch fills unwritten residuals with jax's `empty2` (once untranslated)
    def count_up(x):
        return jax.lax.while_loop(lambda c: c[1].sum() < 10 * c[0],
                                  lambda c: (c[0], c[1] + 1.0), (x, jnp.zeros(3)))[1]
    xs = np.array([1.0, 2.0, 4.0], np.float32)
    f = jax.vmap(count_up)
    np.testing.assert_array_equal(np.asarray(shardc.jit(f)(xs)), np.asarray(jax.jit(f)(xs)))

    def loss(v, w):
        branches = [lambda u: jnp.pad(u, (0, 2)), lambda u: jnp.broadcast_to(u.sum(), (6,))]
        return jax.lax.switch(jnp.sum(w > 0).astype(jnp.int32), branches, v).sum()
    v, w = np.arange(4, dtype=np.float32), np.array([1.0, -1.0], np.float32)
    g = jax.grad(loss)
    np.testing.assert_array_equal(np.asarray(shardc.jit(g)(v, w)), np.asarray(jax.jit(g)(v, w)))


def test_grad_of_a_checkpointed_loop_closing_over_the_differentiated_value():
    # FUZZ_FRONTEND: jax's remat partial eval binds a closed_call whose body ran under
    # jax's eval trace, not shardc's (an UnexpectedTracerError)
    def loss(p, v):
        body = lambda o: jax.lax.fori_loop(1, 3, lambda i, c: c * p, o)  # noqa: E731
        return jax.checkpoint(body)(v) + p
    g = jax.grad(loss)
    assert float(shardc.jit(g)(np.float32(1.5), np.float32(2))) == \
        float(jax.jit(g)(np.float32(1.5), np.float32(2))) == 7.0


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_other_prng_impls_give_jax_numbers(impl):
    # (they once ran as threefry keys, then were an error; tests/test_prng_impls.py has
    # the samplers)
    made_inside = lambda: jax.random.normal(jax.random.key(0, impl=impl), (4,))  # noqa: E731
    np.testing.assert_array_equal(shardc.jit(made_inside)(), jax.jit(made_inside)())
    passed = lambda k: jax.random.normal(k, (3,))  # noqa: E731
    k = jax.random.key(0, impl=impl)
    np.testing.assert_array_equal(shardc.jit(passed)(k), jax.jit(passed)(k))


def test_jax_debug_print_and_callback(capfd):
    seen = []

    def f(x):
        jax.debug.print("sum {s}", s=x.sum())
        jax.debug.callback(lambda v: seen.append(np.asarray(v)), x[:2])
        return x * 2
    out = shardc.jit(f)(jnp.arange(4.0))
    out.block_until_ready()
    np.testing.assert_array_equal(out, np.arange(4.0) * 2)
    assert "sum 6.0" in capfd.readouterr().out
    np.testing.assert_array_equal(seen[0], [0.0, 1.0])


def test_a_max_pool_gradient_goes_to_the_first_maximum():
    """jax gives a window's gradient to one element (its first maximum), not shared
    between ties; ReLU then max pool makes ties common."""
    x = jnp.zeros((1, 4, 4, 1)).at[0, 1, 1, 0].set(1.0)

    def f(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                     "VALID").sum()
    ref = jax.grad(f)(x)
    np.testing.assert_array_equal(shardc.jit(shardc.grad(f))(x), ref)
    np.testing.assert_array_equal(shardc.grad(lambda x: shardc.lax.reduce_window(
        x, -np.inf, shardc.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID").sum())(x), ref)
    assert float(ref.sum()) == 4.0 and float(ref[0, 1, 1, 0]) == float(ref[0, 0, 2, 0]) == 1


def test_second_derivatives_of_i0e_and_i1e():
    """i0e's derivative is made of i1e's: differentiating it again goes through i1e's
    rule (the bare op's gradient is an error, never a silent zero)."""
    for f_s, f_j in ((shardc.scipy.special.i0e, jax.scipy.special.i0e),
                     (shardc.scipy.special.i1e, jax.scipy.special.i1e),
                     (jax.lax.bessel_i1e, jax.lax.bessel_i1e)):
        got = shardc.jit(shardc.grad(shardc.grad(f_s)))(1.3)
        np.testing.assert_allclose(got, jax.grad(jax.grad(f_j))(1.3), rtol=1e-5)


# the jax primitives shardc does not translate, each with why: the list only shrinks
UNTRANSLATED = {
    # state, references and internal plumbing that jax's public functions do not leave
    # in a jaxpr shardc sees (discharged or traced away before)
    **dict.fromkeys(["accum_grad_in_ref", "addupdate", "box_get", "box_set", "new_box",
                     "empty_ref", "free_ref", "freeze", "get", "swap", "new_ref", "run_state",
                     "log_extend", "log_read", "new_log", "call_hi_primitive",
                     "call_hi_primitive_linearized", "create_linear", "custom_lin",
                     "dce_sink", "pin", "unpin", "tie",
                     "from_edtype", "to_edtype", "reduced_vary_cast_p",
                     "vary_unreduced_cast_p", "dim_as_value", "dimension_size",
                     "shape_assertion", "eval_jaxpr", "call", "unreachable",
                     "xla_metadata_value", "broadcast_to",
                     "remat_opt", "custom_jvp_call_jaxpr", "compute_on", "layout_constraint",
                     "check"], "internal"),
    # collectives' async halves and unreduced/reduced types (shard_map's own
    # collectives translate)
    **dict.fromkeys(["all_gather_done", "all_gather_start", "all_gather_reduced",
                     "all_gather_reduced_start", "all_gather_invariant", "all_to_all_done",
                     "all_to_all_start", "pbroadcast_done", "pbroadcast_start",
                     "ppermute_done", "ppermute_start", "psum_done", "psum_start",
                     "psum_invariant_start", "reduce_scatter_done", "reduce_scatter_start",
                     "unreduced_psum", "unreduced_psum_start", "unreduced_reduce_scatter",
                     "unreduced_reduce_scatter_start", "preduced", "psend", "precv"],
                    "async or unreduced collectives"),
    # GPU/TPU kernels and foreign calls
    **dict.fromkeys(["cudnn_fusion", "dot_product_attention_bwd",
                     "dot_product_attention_bwd_wrapper", "dot_product_attention_fp8_bwd",
                     "dot_product_attention_fp8_bwd_wrapper", "dot_product_attention_fp8_fwd",
                     "dot_product_attention_fp8_fwd_wrapper", "dot_product_attention_fwd",
                     "dot_product_attention_fwd_wrapper", "scaled_matmul",
                     "scaled_matmul_wrapper", "ffi_call", "buffer_callback",
                     "custom_partitioning", "call_exported"], "device kernels and foreign calls"),
    # still to do
    **dict.fromkeys(["after_all", "create_token", "rng_uniform",
                     "select_and_scatter", "linear_call"], "not yet"),
}


def _jax_primitives():
    import importlib
    import pkgutil

    import jax._src
    from jax._src import core as jcore
    names = set()
    for m in pkgutil.walk_packages(jax._src.__path__, "jax._src."):
        if any(s in m.name for s in ("pallas", "mosaic", "triton", "tpu", "gpu", "cuda",
                                     "rocm", "test", "lib.", "jaxpr_util")):
            continue
        try:
            mod = importlib.import_module(m.name)
        except Exception:   # noqa: BLE001  (optional modules: GPU plugins, tensorflow)
            continue
        names |= {v.name for v in vars(mod).values() if isinstance(v, jcore.Primitive)}
    return names


def test_every_jax_primitive_translates_or_is_listed():
    from shardc.frontends import translate
    have = set(translate.RULES) | {n for n, p in translate.PRIMITIVES.items()
                                   if not p.has_regions}
    missing = _jax_primitives() - have
    assert missing <= set(UNTRANSLATED), sorted(missing - set(UNTRANSLATED))
    stale = set(UNTRANSLATED) & have
    assert not stale, f"translated now, drop from UNTRANSLATED: {sorted(stale)}"
