"""64-bit types where the inputs are (jax_enable_x64), checked in a fresh process."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent("""
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import shardc, shardc.numpy as snp
    x = np.linspace(0.1, 1.0, 8)
    i = np.arange(8)
    for name, f in [
            ("float", lambda m, a, b: m.sin(a) * 2 + b),
            ("int", lambda m, a, b: b * 3 + 1),
            ("mixed", lambda m, a, b: a.astype(m.float32) + b),
            ("weak complex", lambda m, a, b: m.asarray(1j) * a.astype(m.complex64)
             + m.array(2j)),
            ("reduce", lambda m, a, b: (m.sum(a), m.mean(b), m.argmax(a))),
            ("grad", lambda m, a, b: (shardc.grad if m is snp else jax.grad)(
                lambda t: m.sum(m.tanh(t) ** 2))(a))]:
        ours = shardc.jit(lambda a, b: f(snp, a, b))(x, i)
        ref = jax.jit(lambda a, b: f(jnp, a, b))(x, i)
        for o, r in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(ref)):
            assert o.dtype == r.dtype, (name, o.dtype, r.dtype)
            assert o.weak_type == r.weak_type, name
            np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=1e-12)
    print("ok")
""")


def test_x64_dtypes_and_values():
    env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
