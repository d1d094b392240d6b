"""Run a program under shardc.jit and jax.jit on the same placed inputs and classify.

Kinds: ok; value, dtype, weak_type, sharding (mismatches); internal (shardc failed,
where jax.jit did not, in a way a user must never see: not a ShardcError, or "a
shardc bug"); vjp_fn (a gradient program's vjp function, returned from jit,
disagrees with shardc.grad or fails); shardc_error (a clear ShardcError where jax
accepts); both_error; jax_error (jax rejects, shardc accepts); harness (the fuzzer's
own failure). On a value mismatch eager jax (op by op, no jit) breaks the tie.

Explicit mode (prog.explicit: the mesh's axes Explicit, both sides under set_mesh):
type_mismatch (str(typeof) of an output or of a line's value differs), explicit_sharding
(same types, output shardings not equivalent, on a fully explicit mesh) and
sharding_error_mismatch (shardc raises a sharding/type error where jax.jit runs) are
failures; both_raise (jax raises a sharding error and shardc raises too) is fine;
shardc_more_permissive (jax raises a sharding error, shardc runs and its values match
jax.jit's on the same mesh with Auto axes) is fine but counted.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from .gen import Program, build, make_mesh

BAD = ("value", "dtype", "weak_type", "internal",      # never acceptable
       "type_mismatch", "explicit_sharding", "sharding_error_mismatch", "vjp_fn")
KINDS = ("ok",) + BAD + ("sharding", "shardc_error", "both_error", "jax_error", "harness",
                         "both_raise", "shardc_more_permissive")


def _vjp_function_differs(prog, xs, grad):
    """A gradient program once more as shardc.vjp's function returned from jit and
    called outside it (its backward pass traced into a region, compiled on its own):
    what differs from shardc.grad's value, or None."""
    import shardc
    low = "bfloat16" in prog.source()
    try:
        with _in_mesh(prog, "shardc"):
            out, fn = shardc.jit(build(prog, "shardc", vjp_out=True))(*xs)
            (g,) = jax.block_until_ready(fn(np.ones(np.shape(out), out.dtype)))
    except Exception as e:  # noqa: BLE001 -- shardc.grad ran, so this must too
        return f"{type(e).__name__}: {_first_line(e)}"
    if g.dtype != grad.dtype or not _close(g, grad, low):
        return f"vjp function's gradient {g.dtype} differs from shardc.grad's {grad.dtype}"
    return None


@dataclasses.dataclass
class Outcome:
    kind: str
    detail: str = ""
    bytes_shardc: int | None = None
    bytes_jax: int | None = None
    eager_agrees_with: str = ""


def inputs(prog: Program, seed: int):
    rng = np.random.default_rng(seed)
    mesh = make_mesh(prog.mesh, prog.explicit)
    out = []
    for k, ((shape, dt), spec) in enumerate(zip(prog.inputs, prog.in_specs)):
        if prog.vmap is not None and prog.vmap[1][k] is not None:   # the batch dim
            ax = prog.vmap[1][k]
            shape = shape[:ax] + (prog.vmap[0],) + shape[ax:]
            spec = tuple(spec[:ax]) + (None,) + tuple(spec[ax:])
        if dt == "bool":
            a = rng.random(shape) > 0.5
        elif dt == "int32":
            a = rng.integers(-5, 6, shape).astype(np.int32)
        else:
            a = (rng.standard_normal(shape) * 2).astype(jnp.dtype(dt))
        out.append(jax.device_put(np.asarray(a), NamedSharding(mesh, PartitionSpec(*spec))))
    return out


def _tol(dt):
    dt = np.dtype(dt)
    if dt.name in ("bfloat16", "float16"):
        return 3e-2
    return 1e-4 if dt.kind == "f" else 0


def _close(a, b, low=False):
    """`low`: the program computes in bfloat16 somewhere, so even a float32 output
    carries bfloat16 rounding (which XLA may fuse differently)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "biu" or a.dtype == np.bool_:
        return np.array_equal(a, b)
    t = _tol("bfloat16" if low else a.dtype)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return bool(np.allclose(a64, b64, rtol=t, atol=t * (1 + np.abs(b64).max(initial=0)),
                            equal_nan=True))


def _internal(e: Exception) -> bool:
    import shardc
    return not isinstance(e, shardc.ShardcError) or "shardc bug" in str(e)


def _sharding_error(e) -> bool:
    """jax's ShardingTypeError, or another error of explicit mode naming shardings."""
    from jax._src.core import ShardingTypeError
    return isinstance(e, ShardingTypeError) or (
        isinstance(e, (TypeError, ValueError, AssertionError, NotImplementedError)) and
        re.search(r"shard|explicit|mesh|axis ?type|replicated", str(e), re.I) is not None)


def _in_mesh(prog, framework):
    """Explicit mode: the program traces and runs under set_mesh, as a user writes it."""
    if prog.explicit is None:
        return contextlib.nullcontext()
    import shardc
    mesh = make_mesh(prog.mesh, prog.explicit)
    return (shardc.set_mesh if framework == "shardc" else jax.set_mesh)(mesh)


def _first_line(e):
    s = str(e).strip().splitlines()
    return f"{type(e).__name__}: {s[0][:300] if s else ''}"


def run(prog: Program, seed: int = 0, collectives=True, mark=lambda stage: None) -> Outcome:
    """`mark(stage)` is called as each side finishes ("jax", "shardc"), so a caller
    running this in a worker process can tell which side a process abort came from."""
    import shardc
    from bench.metrics import collective_bytes
    xs = inputs(prog, seed)
    mesh = make_mesh(prog.mesh, prog.explicit)
    types = {"jax": {}, "shardc": {}}     # explicit mode: each line's str(typeof(vK))
    out_sh = None
    if prog.out_specs is not None:
        lead = (None,) if prog.vmap is not None else ()    # the results' batch dim
        out_sh = tuple(NamedSharding(mesh, PartitionSpec(*lead, *s)) for s in prog.out_specs)
    kw = {} if out_sh is None else {"out_shardings": out_sh}
    # FUZZ_AUTO=1: shardc's side searches for every input's and output's sharding
    # (shardc.AUTO; the arrays are placed as the search chose), so its values (not its
    # shardings, which differ by design) are compared; Explicit meshes run as usual
    auto = os.environ.get("FUZZ_AUTO") == "1" and prog.explicit is None

    def compile_run(jit, framework):
        """(compiled, outputs, None), or (None, None, the exception)."""
        record = types[framework] if prog.explicit is not None else None
        try:
            with _in_mesh(prog, framework):
                kws = kw
                if auto and framework == "shardc":
                    kws = {"in_shardings": shardc.AUTO(mesh), "out_shardings":
                           shardc.AUTO(mesh) if out_sh is None else out_sh}
                c = jit(build(prog, framework, record), **kws).lower(*xs).compile()
                outs = jax.block_until_ready(c(*xs))
            for o in outs:   # reading the result back can fail too (shards of a wrong
                np.asarray(o)   # shape: XLA's interior pad over a split dim, jax.jit too)
            return c, outs, None
        except Exception as e:  # noqa: BLE001
            return None, None, e
        finally:
            mark(framework)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jc, ref, jerr = compile_run(jax.jit, "jax")
        sc, got, serr = compile_run(shardc.jit, "shardc")
    explicit = prog.explicit is not None
    if serr is not None:
        if jerr is not None:    # the same program fails under jax.jit as well
            kind = "both_raise" if explicit and _sharding_error(jerr) else "both_error"
            return Outcome(kind, f"{_first_line(serr)} | jax: {_first_line(jerr)}")
        if _internal(serr):
            return Outcome("internal", _first_line(serr))
        if explicit and (isinstance(serr, TypeError) or _sharding_error(serr)):
            return Outcome("sharding_error_mismatch", _first_line(serr))
        return Outcome("shardc_error", _first_line(serr))
    if jerr is not None:
        if explicit and _sharding_error(jerr):
            return _more_permissive(prog, seed, got, jerr)
        return Outcome("jax_error", _first_line(jerr))
    res = Outcome("ok")
    if collectives:
        res.bytes_shardc = collective_bytes(sc.as_text())
        res.bytes_jax = collective_bytes(jc.as_text())
    for i, (o, r) in enumerate(zip(got, ref)):
        if o.dtype != r.dtype:
            return dataclasses.replace(res, kind="dtype", detail=f"out {i}: {o.dtype} vs {r.dtype}")
        if o.weak_type != r.weak_type:
            return dataclasses.replace(res, kind="weak_type",
                                       detail=f"out {i}: {o.weak_type} vs {r.weak_type}")
        low = "bfloat16" in prog.source() or any(d == "bfloat16" for _, d in prog.inputs)
        if not _close(o, r, low):
            eager = _eager(prog, xs)
            who = ""
            if eager is not None:
                who = ("shardc" if _close(o, eager[i], low) else
                       "jax" if _close(r, eager[i], low) else "neither")
            return dataclasses.replace(res, kind="value", eager_agrees_with=who,
                                       detail=f"out {i}: max |diff| "
                                              f"{_maxdiff(o, r)}")
    if explicit:
        bad = _type_difference(got, ref, types)
        if bad:
            return dataclasses.replace(res, kind="type_mismatch", detail=bad)
    if prog.grad and prog.vmap is None and not auto:
        bad = _vjp_function_differs(prog, xs, got[0])
        if bad:
            return dataclasses.replace(res, kind="vjp_fn", detail=bad)
    for i, (o, r) in enumerate(zip(got, ref)):
        if not auto and not _same_sharding(o, r):
            full = explicit and all(t == "Explicit" for t in prog.explicit)
            return dataclasses.replace(res, kind="explicit_sharding" if full else "sharding",
                                       detail=(
                f"out {i}: {getattr(o.sharding, 'spec', o.sharding)} vs "
                f"{getattr(r.sharding, 'spec', r.sharding)}"))
    return res


def _type_difference(got, ref, types) -> str:
    """The first output or line value whose str(typeof) differs (shardc vs jax)."""
    for i, (o, r) in enumerate(zip(got, ref)):
        so, sr = str(jax.typeof(o)), str(jax.typeof(r))
        if so != sr:
            return f"out {i}: {so} vs {sr}"
    s, j = types["shardc"], types["jax"]
    for k in sorted(set(s) & set(j)):
        if s[k] != j[k]:
            return f"v{k}: {s[k]} vs {j[k]}"
    return ""


def _more_permissive(prog, seed, got, jerr) -> Outcome:
    """jax.jit rejects the explicit program, shardc runs it: its values must be jax's
    for the same program on the mesh with Auto axes."""
    auto = dataclasses.replace(prog, explicit=None)
    why = f"jax: {_first_line(jerr)}"
    try:
        xs = inputs(auto, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = jax.block_until_ready(jax.jit(build(auto, "jax"))(*xs))
    except Exception:  # noqa: BLE001 -- jax cannot run it in either mode
        return Outcome("jax_error", why)
    low = "bfloat16" in prog.source() or any(d == "bfloat16" for _, d in prog.inputs)
    for i, (o, r) in enumerate(zip(got, ref)):
        if o.dtype != r.dtype:
            return Outcome("dtype", f"out {i}: {o.dtype} vs {r.dtype} (auto mesh); {why}")
        if not _close(o, r, low):
            return Outcome("value", f"out {i}: max |diff| {_maxdiff(o, r)} (auto mesh); "
                                    f"{why}")
    return Outcome("shardc_more_permissive", why)


def _maxdiff(a, b):
    a = np.asarray(a).astype(np.float64)
    b = np.asarray(b).astype(np.float64)
    with np.errstate(invalid="ignore"):
        return float(np.nanmax(np.abs(a - b), initial=0))


def _same_sharding(a, b):
    single = jax.sharding.SingleDeviceSharding
    if isinstance(a.sharding, single) or isinstance(b.sharding, single):
        return a.sharding.is_fully_replicated and b.sharding.is_fully_replicated
    return a.sharding.is_equivalent_to(b.sharding, a.ndim)


def _eager(prog, xs):
    """jax op by op, no jit: the tie-breaker."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with jax.disable_jit(), _in_mesh(prog, "jax"):
                return jax.block_until_ready(build(prog, "jax")(*xs))
    except Exception:  # noqa: BLE001
        return None
