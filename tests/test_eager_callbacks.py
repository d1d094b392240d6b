"""Eager transforms (grad, vmap, jvp outside jit) of functions with host callbacks:
traced on every call, as jax's, they compile once and share the executable (equal
traces lower to equal text), yet every call runs its own trace's Python functions (a
closure over a value that changed). Printed and returned values against eager jax."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import io_callback

import shardc
import shardc.experimental
import shardc.numpy as snp
from shardc.runtime import backend

X = np.arange(4, dtype=np.float32)
K = [1.0]      # read by the traced functions: each call's closures see its value


@pytest.fixture
def compiles(monkeypatch):
    calls, orig = [], backend.compile

    def counting(*a, **k):
        calls.append(1)
        return orig(*a, **k)
    monkeypatch.setattr(backend, "compile", counting)
    return calls


def _fns(lib, np_):
    io = io_callback if lib is jax else shardc.experimental.io_callback
    seen = []

    def printed(x):
        k = K[0]
        lib.debug.print(f"k={k} x={{x}}", x=x)
        lib.debug.callback(lambda v: seen.append(("cb", k, float(v))), x.sum())
        return np_.sin(x).sum()      # (k only in the callbacks: equal traces)

    def called(x):
        k = K[0]
        y = lib.pure_callback(lambda v: np.asarray(v * k, np.float32),
                              jax.ShapeDtypeStruct((), np.float32), x,
                              vmap_method="sequential")
        z = io(lambda v: (seen.append(("io", k, float(v))), np.float32(v + k))[1],
               jax.ShapeDtypeStruct((), np.float32), x)
        return y + z
    runs = {"grad": lib.grad(printed), "vmap": lib.vmap(called),
            "jvp": lambda x: lib.jvp(printed, (x,), (x,))}
    return runs, seen


@pytest.mark.parametrize("name", ["grad", "vmap", "jvp"])
def test_eager_transforms_with_callbacks_compile_once_and_call_new_closures(
        name, capsys, compiles):
    results = {}
    for lib, np_ in ((jax, jnp), (shardc, snp)):
        runs, seen = _fns(lib, np_)
        compiles.clear()
        outs = []
        for k in (1.0, 2.0, 3.0):
            K[0] = k
            outs.append(np.asarray(jax.block_until_ready(runs[name](X))))
            jax.effects_barrier()
        results[lib.__name__] = (outs, capsys.readouterr().out.splitlines(), sorted(seen))
        if lib is shardc:
            assert len(compiles) == 1, f"{len(compiles)} compiles for 3 equal traces"
    K[0] = 1.0
    (wo, wp, ws), (go, gp, gs) = results["jax"], results["shardc"]
    assert ws and gp == wp and gs == ws
    for g, w in zip(go, wo):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_equal_traces_running_at_once_in_threads_call_their_own_functions():
    """Two threads run an eager transform's shared executable at once, with closures
    over different values: each run calls its own trace's functions (the table the
    executable calls through was swapped by whichever thread ran last)."""
    import threading
    started, second = threading.Event(), threading.Event()

    def run(k, first=None):
        def step1(v):
            if first is not None:
                first(k)
            return np.asarray(v * k, np.float32)

        def step2(v):
            if k == 1.0:
                second.set()
            return np.asarray(v + k, np.float32)

        def f(x):
            s = jax.ShapeDtypeStruct((), np.float32)
            y = shardc.pure_callback(step1, s, x, vmap_method="expand_dims")
            return shardc.pure_callback(step2, s, y, vmap_method="expand_dims")
        return np.asarray(shardc.vmap(f)(X))    # (one line: locations in the text)

    def first(k):
        if k == 1.0:        # A: waits until B's run has begun
            started.wait(10)
        else:               # B: begun; waits until A has made its second call
            started.set()
            second.wait(2)
    np.testing.assert_allclose(run(0.0), X * 0)   # compiles: neither A's nor B's trace
    out = {}
    a = threading.Thread(target=lambda: out.setdefault("a", run(1.0, first)))
    a.start()
    out["b"] = run(2.0, first)
    a.join()
    np.testing.assert_allclose(out["a"], X * 1 + 1)
    np.testing.assert_allclose(out["b"], X * 2 + 2)
