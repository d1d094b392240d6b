"""Control-flow steps for the fuzzer: scan, map, cond/switch, fori_loop, while_loop and
checkpoint, their bodies made of the same random steps (with_sharding_constraint and
shard_map included), nested up to MAX_DEPTH.

A body stays one line of source: a lambda whose temporaries are walrus bindings,
`lambda c1, x1: (t0 := m.sin(c1[0]), t1 := t0 + v2, ((t1,), (t0,)))[-1]`, so a program
is still one `vK = expr` per line (shrink drops lines, closures over outer `vK` stay
visible to it). A body's locals are (name, aval) pairs: its parameters (`c1[0]`,
`x1[1]`, `i1`, `o1[0]`), a few closed-over outer values, then its temporaries `tN`.
Each body step is checked with jax.eval_shape over an environment binding those names.
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp

MAX_DEPTH = 2
_NS: dict = {}      # mesh -> jax's namespace for checking body steps
POLICIES = ["None", "CP.nothing_saveable", "CP.everything_saveable", "CP.dots_saveable",
            "CP.dots_with_no_batch_dims_saveable", "CP.save_only_these_names('n0')",
            "CP.save_any_names_but_these('n1')"]


def tup(items):
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def dtext(dtype):
    name = jnp.dtype(dtype).name
    return "m.bool_" if name == "bool" else f"m.{name}"


def _placeholders(expr, names):
    """A simple step's `vK` (index K into the locals) -> the local's name."""
    return re.sub(r"\bv(\d+)\b", lambda mt: names[int(mt.group(1))], expr)


class ControlSteps:
    """Mixed into Gen: needs self.rng, self.choice, self.simple_kinds(), self.limit_ok."""

    def control(self, avals, mesh):
        """A top-level control-flow step over the program's values `vK`."""
        locals_ = [(f"v{k}", a) for k, a in enumerate(avals)]
        env = {f"v{k}": a for k, a in enumerate(avals)}
        return self.control_in(locals_, env, mesh, 0)

    def control_in(self, locals_, env, mesh, depth):
        if not locals_:
            return None
        kinds = [self.scan, self.scan, self.cond, self.switch, self.fori, self.while_,
                 self.remat, self.map_]
        return self.choice(kinds)(locals_, env, mesh, depth + 1)

    # ------------------------------------------------------------ bodies

    def body(self, params, outer, env, mesh, depth, penv):
        """Random steps over `params` plus up to two closed-over `outer` locals.
        `penv` binds the parameter identifiers. Returns (walrus texts, locals, env)."""
        locals_ = list(params)
        if outer:
            for _ in range(int(self.rng.integers(0 if params else 1, 3))):
                c = self.choice(outer)
                if c not in locals_:
                    locals_.append(c)
        env = {**env, **penv}
        temps = []
        for _ in range(int(self.rng.integers(0, 4))):
            for _attempt in range(8):
                expr = self.body_step(locals_, env, mesh, depth)
                if expr is None:
                    continue
                got = self.eval_local(expr, env, mesh)
                if got is not None:
                    name = f"t{self.ntemp}"
                    self.ntemp += 1
                    temps.append(f"{name} := {expr}")
                    locals_.append((name, got))
                    env[name] = got
                    break
        return temps, locals_, env

    def body_step(self, locals_, env, mesh, depth):
        if not locals_:
            return None
        if depth < MAX_DEPTH and self.rng.random() < 0.2:
            return self.control_in(locals_, env, mesh, depth)
        kinds = self.simple_kinds() + [self.constraint, self.name_step]
        expr = self.choice(kinds)([a for _, a in locals_], mesh)
        return None if expr is None else _placeholders(expr, [n for n, _ in locals_])

    def name_step(self, avals, mesh):
        """checkpoint_name, which the remat policies with names look for."""
        k = self.pick(avals)
        return f"cn(v{k}, {self.choice(['n0', 'n1'])!r})"

    def eval_local(self, expr, env, mesh):
        """The aval of `expr` over `env` per jax, or None."""
        from .gen import make_mesh, namespace
        if mesh not in _NS:
            _NS[mesh] = namespace("jax", make_mesh(mesh))
        ns = _NS[mesh]
        names = list(env)
        try:
            code = compile(expr, "<fuzz body>", "eval")
            out = jax.eval_shape(lambda *vs: eval(code, {**ns, **dict(zip(names, vs))}),
                                 *[env[n] for n in names])
        except Exception:  # noqa: BLE001 -- rejected: sample another step
            return None
        if not isinstance(out, jax.ShapeDtypeStruct) or not self.limit_ok(out):
            return None
        return jax.ShapeDtypeStruct(out.shape, out.dtype)

    @staticmethod
    def wrap(temps, result):
        return result if not temps else "(" + ", ".join(temps + [result]) + ")[-1]"

    def matching(self, locals_, aval, strict=False):
        """An expression of exactly `aval`'s type from `locals_`."""
        same = [n for n, a in locals_ if a.shape == aval.shape and
                (not strict or a.dtype == aval.dtype)]
        if same:
            n = self.late(same)
            if jnp.issubdtype(aval.dtype, jnp.floating) and self.rng.random() < 0.3:
                n = f"m.tanh({n})"      # keeps loop carries bounded
            return f"{n}.astype({dtext(aval.dtype)})"
        if not locals_:
            return f"m.zeros({tuple(aval.shape)}, {dtext(aval.dtype)})"
        n, _ = self.choice(locals_)
        return f"m.broadcast_to(m.sum({n}), {tuple(aval.shape)}).astype({dtext(aval.dtype)})"

    def late(self, xs):
        """Mostly the last of `xs` (a body's latest temporary), so results use the body."""
        return xs[-1] if self.rng.random() < 0.6 else self.choice(xs)

    def carries(self, locals_, lo=0, hi=3):
        k = int(self.rng.integers(lo, hi))
        return [self.choice(locals_) for _ in range(k)]

    # ------------------------------------------------------------ constructs

    def scan(self, locals_, env, mesh, d):
        init = self.carries(locals_)
        seq = [(n, a) for n, a in locals_ if a.ndim >= 1 and a.shape[0] > 0]
        xs = []
        if seq and self.rng.random() < 0.75:
            first = self.choice(seq)
            xs = [first] + [s for s in seq if s[1].shape[0] == first[1].shape[0] and
                            s is not first and self.rng.random() < 0.4][:1]
        length = xs[0][1].shape[0] if xs else self.choice([1, 2, 3, 4])
        cp = [(f"c{d}[{i}]", a) for i, (_, a) in enumerate(init)]
        xp = [(f"x{d}[{j}]", jax.ShapeDtypeStruct(a.shape[1:], a.dtype))
              for j, (_, a) in enumerate(xs)]
        penv = {f"c{d}": tuple(a for _, a in cp), f"x{d}": tuple(a for _, a in xp)}
        temps, body, _ = self.body(cp + xp, locals_, env, mesh, d, penv)
        outs = [self.matching(body, a) for _, a in cp]
        ys = [self.late(body)[0] for _ in range(int(self.rng.integers(0, 3)))]
        leaves = [f"[0][{i}]" for i in range(len(outs))] + [f"[1][{j}]" for j in range(len(ys))]
        if not leaves:
            return None
        fn = f"lambda c{d}, x{d}: " + self.wrap(temps, tup([tup(outs), tup(ys)]))
        xs_text = tup([n for n, _ in xs]) if xs else "None"
        kw = "" if xs else f", length={length}"
        if self.rng.random() < 0.4:
            kw += ", reverse=True"
        return (f"L.scan({fn}, {tup([n for n, _ in init])}, {xs_text}{kw})"
                f"{self.choice(leaves)}")

    def map_(self, locals_, env, mesh, d):
        seq = [(n, a) for n, a in locals_ if a.ndim >= 1 and a.shape[0] > 0]
        if not seq:
            return None
        xs, a = self.choice(seq)
        xp = (f"x{d}", jax.ShapeDtypeStruct(a.shape[1:], a.dtype))
        temps, body, _ = self.body([xp], locals_, env, mesh, d, {xp[0]: xp[1]})
        fn = f"lambda x{d}: " + self.wrap(temps, self.late(body)[0])
        kw = f", batch_size={self.choice([1, 2, 3])}" if self.rng.random() < 0.5 else ""
        return f"L.map({fn}, {xs}{kw})"

    def fori(self, locals_, env, mesh, d):
        init = self.carries(locals_, 1, 3)
        lo = int(self.rng.integers(0, 3))
        hi = lo + int(self.rng.integers(0, 4))
        cp = [(f"c{d}[{i}]", a) for i, (_, a) in enumerate(init)]
        ip = (f"i{d}", jax.ShapeDtypeStruct((), jnp.int32))
        penv = {f"c{d}": tuple(a for _, a in cp), f"i{d}": ip[1]}
        temps, body, _ = self.body(cp + [ip], locals_, env, mesh, d, penv)
        outs = [self.matching(body, a) for _, a in cp]
        fn = f"lambda i{d}, c{d}: " + self.wrap(temps, tup(outs))
        k = int(self.rng.integers(len(outs)))
        return f"L.fori_loop({lo}, {hi}, {fn}, {tup([n for n, _ in init])})[{k}]"

    def while_(self, locals_, env, mesh, d):
        init = self.carries(locals_, 1, 3)
        n = int(self.rng.integers(0, 4))
        cp = [(f"c{d}[{i + 1}]", a) for i, (_, a) in enumerate(init)]
        counter = jax.ShapeDtypeStruct((), jnp.int32)
        penv = {f"c{d}": (counter,) + tuple(a for _, a in cp)}
        pred = f"c{d}[0] < {n}"
        if self.rng.random() < 0.4:      # a data-dependent exit as well
            pred = f"({pred}) & (m.sum(c{d}[1]) < {self.choice([0, 5, 50])})"
        temps, body, _ = self.body(cp + [(f"c{d}[0]", counter)], locals_, env, mesh, d, penv)
        outs = [f"c{d}[0] + 1"] + [self.matching(body, a) for _, a in cp]
        fn = f"lambda c{d}: " + self.wrap(temps, tup(outs))
        k = int(self.rng.integers(1, len(outs))) if self.rng.random() < 0.9 else 0
        init_text = tup(["np.int32(0)"] + [nm for nm, _ in init])
        return f"L.while_loop(lambda c{d}: {pred}, {fn}, {init_text})[{k}]"

    def branches(self, locals_, env, mesh, d, ops, nb):
        """`nb` branch lambdas over operands `ops` returning the same types."""
        op = [(f"o{d}[{j}]", a) for j, (_, a) in enumerate(ops)]
        penv = {f"o{d}": tuple(a for _, a in op)}
        fns, types = [], None
        for _ in range(nb):
            temps, body, _ = self.body(op, locals_, env, mesh, d, penv)
            if types is None:
                types = [self.late(body)[1] for _ in range(int(self.rng.integers(1, 3)))] \
                    if body else [None]
                if types == [None]:
                    return None, None
            outs = [self.matching(body, a, strict=True) for a in types]
            fns.append(f"lambda *o{d}: " + self.wrap(temps, tup(outs)))
        return fns, len(types)

    def cond(self, locals_, env, mesh, d):
        p, a = self.choice(locals_)
        pred = p if a.shape == () and a.dtype == jnp.bool_ else f"m.sum({p}) > 0"
        ops = self.carries(locals_, 0, 3)
        fns, n = self.branches(locals_, env, mesh, d, ops, 2)
        if fns is None:
            return None
        args = "".join(f", {nm}" for nm, _ in ops)
        return f"L.cond({pred}, {fns[0]}, {fns[1]}{args})[{int(self.rng.integers(n))}]"

    def switch(self, locals_, env, mesh, d):
        p, _ = self.choice(locals_)
        # (a constant index would let XLA fold jax's case away, its output sharding too)
        idx = self.choice([f"m.sum({p} > 0).astype(m.int32)", f"(m.sum({p}) > 0).astype(m.int32)",
                           f"m.sum({p} > 0).astype(m.int32) - 1"])
        ops = self.carries(locals_, 0, 3)
        fns, n = self.branches(locals_, env, mesh, d, ops, int(self.rng.integers(1, 4)))
        if fns is None:
            return None
        args = "".join(f", {nm}" for nm, _ in ops)
        return f"L.switch({idx}, [{', '.join(fns)}]{args})[{int(self.rng.integers(n))}]"

    def remat(self, locals_, env, mesh, d):
        ops = self.carries(locals_, 1, 3)
        fns, n = self.branches(locals_, env, mesh, d, ops, 1)
        if fns is None:
            return None
        kw = f"policy={self.choice(POLICIES)}"
        if self.rng.random() < 0.3:
            kw += ", prevent_cse=False"
        args = ", ".join(nm for nm, _ in ops)
        return f"ck({fns[0]}, {kw})({args})[{int(self.rng.integers(n))}]"

