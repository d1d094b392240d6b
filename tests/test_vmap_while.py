"""vmap of a vmapped while loop: the outer batching adds no per-example select of its own
(the inner body already selects by each inner example's predicate, elementwise), so the
body ORs no predicate across a sharded dim in every iteration; values, jvps and output
shardings as jax's, and the `masked` param through printing, parsing, jvp and rebinding."""
import re

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.ir.parse import parse_program
from tests.helpers import check_outputs

RNG = np.random.default_rng(0)
A = RNG.uniform(0.5, 3.0, (8, 16)).astype(np.float32)
B = RNG.uniform(-1.0, 1.0, (8, 16)).astype(np.float32)


def _loop(lax, m):
    """Each example runs its own trip count (a data-dependent predicate)."""
    def f(v, w):
        c = lax.while_loop(lambda c: c[1] < v * 3,
                           lambda c: (c[0] * 0.75 + m.sin(w), c[1] + 1.0), (v, 0.0))
        return c[0]
    return f


def _both(wrap):
    return wrap(shardc, _loop(shardc.lax, snp)), wrap(jax, _loop(jax.lax, jnp))


def _whiles(ops):
    for op in ops:
        if op.prim.name == "while":
            yield op
        for r in op.regions:
            yield from _whiles(r.ops)


def test_nested_vmap_body_has_no_per_step_or(mesh2x4):
    ours, ref = _both(lambda j, f: j.vmap(j.vmap(f)))
    prog = shardc.jit(ours).trace(A, B).program
    (op,) = _whiles(prog.ops)
    assert op.params.get("masked") is True
    cond, body = op.regions
    assert [o.prim.name for o in cond.ops if o.prim.name == "reduce_or"] != []
    # the body selects by the full-rank predicate only: nothing reduces it
    assert all(o.prim.name != "reduce_or" for o in body.ops), [o.prim.name for o in body.ops]
    sh = NamedSharding(mesh2x4, P("x", "y"))
    a, b = jax.device_put(A, sh), jax.device_put(B, sh)
    check_outputs(shardc.jit(ours)(a, b), jax.jit(ref)(a, b))
    hlo = shardc.jit(ours).lower(a, b).compile().as_text()
    (name,) = re.findall(r" while\(.*body=%([\w.\-]+)", hlo)
    (body_hlo,) = [c for c in hlo.split("\n\n") if c.startswith(f"%{name} ")]
    assert "all-reduce(" not in body_hlo, body_hlo


def test_masked_prints_and_parses():
    ours, _ = _both(lambda j, f: j.vmap(j.vmap(f)))
    text = str(shardc.jit(ours).trace(A, B).program)
    assert "masked=True" in text
    again = parse_program(text)
    (op,) = _whiles(again.ops)
    assert op.params["masked"] is True and str(again) == text


def test_three_levels_and_unbatched_operands():
    a3 = np.stack([A, A * 0.5, A + 1.0])
    ours, ref = _both(lambda j, f: j.vmap(j.vmap(j.vmap(f))))
    check_outputs(ours(a3, np.stack([B] * 3)), ref(a3, np.stack([B] * 3)))
    # the outer vmap maps only the body's operand: the predicate stays the inner one's
    ours, ref = _both(lambda j, f: j.vmap(j.vmap(f), in_axes=(None, 0)))
    bs = np.stack([B[:, 0], -B[:, 0]])
    check_outputs(ours(A[:, 0], bs), ref(A[:, 0], bs))
    # the outer vmap maps only the predicate's operand: the inner loop was not masked
    ours, ref = _both(lambda j, f: j.vmap(j.vmap(f, in_axes=(None, 0)), in_axes=(0, None)))
    check_outputs(ours(A[:, 0], B[0]), ref(A[:, 0], B[0]))


def test_jvp_of_nested_vmap_and_vmap_of_jvp():
    def jv(j, f):
        g = j.vmap(j.vmap(f))
        return lambda a, b: j.jvp(g, (a, b), (b, a))
    ours, ref = _both(jv)
    check_outputs(ours(A, B), ref(A, B))

    def vj(j, f):
        inner = j.vmap(lambda a, b: j.jvp(f, (a, b), (b * 0.5, a))[1])
        return j.vmap(inner)
    ours, ref = _both(vj)
    check_outputs(shardc.jit(ours)(A, B), jax.jit(ref)(A, B))
    # the jvp'd loop of a masked loop stays masked
    prog = shardc.jit(jv(shardc, _loop(shardc.lax, snp))).trace(A, B).program
    assert all(op.params.get("masked") for op in _whiles(prog.ops))


def test_an_imported_batched_loop_is_masked():
    # jax's own vmapped loop (a predicate per example) becomes a masked loop, so shardc's
    # vmap of it adds no select either
    f = jax.vmap(_loop(jax.lax, jnp))
    prog = shardc.jit(shardc.vmap(f)).trace(A, B).program
    (op,) = _whiles(prog.ops)
    assert op.params.get("masked") is True
    assert all(o.prim.name != "reduce_or" for o in op.regions[1].ops)
    check_outputs(shardc.jit(shardc.vmap(f))(A, B), jax.jit(jax.vmap(f))(A, B))
