"""Random programs for the differential fuzzer.

A program is Python source over a namespace: `m` (shardc.numpy or jax.numpy), `L`
(shardc.lax or jax.lax), `nn`, `sm` (shard_map), `MESH`, `P`, `NS` (NamedSharding)
and `np`. Each step is one line `vK = <expression over earlier values>`, so one text
runs under both frameworks, shrinks by dropping lines, and prints as a repro.
Candidate steps are checked with jax.eval_shape and resampled when jax rejects them.
"""
from __future__ import annotations

import dataclasses
import itertools
import os

import jax
import jax.ad_checkpoint
import jax.numpy as jnp
import numpy as np

from .control import ControlSteps
from .ops import OpSteps

MESHES = [((8,), ("x",)), ((2, 4), ("x", "y")), ((4, 2), ("x", "y")),
          ((2, 2, 2), ("x", "y", "z")), ((1, 8), ("x", "y"))]
DTYPES = ["float32", "float32", "float32", "bfloat16", "int32", "bool"]
SIZES = [1, 2, 3, 4, 6, 8, 8, 16]
MAX_ELEMS = 4096
# FUZZ_CONTROL=1 (read by the worker processes too): mostly control flow, more gradients
CONTROL_FOCUS = os.environ.get("FUZZ_CONTROL") == "1"
# FUZZ_VMAP=1: most programs vmapped (over a batch dim inserted into some inputs)
VMAP_FOCUS = os.environ.get("FUZZ_VMAP") == "1"
# FUZZ_EXPLICIT=1: most programs on a mesh of AxisType.Explicit axes (sharding in types)
EXPLICIT_FOCUS = os.environ.get("FUZZ_EXPLICIT") == "1"
# FUZZ_FRONTEND=1: shardc's side runs the jax program (jax.numpy, jax.lax, jax.grad,
# jax.vmap) inside shardc.jit, so the frontend's translation is what is compared
FRONTEND = os.environ.get("FUZZ_FRONTEND") == "1"
# FUZZ_MANUAL=1: many shard_map steps (collectives, and transformations inside bodies)
MANUAL_FOCUS = os.environ.get("FUZZ_MANUAL") == "1"


@dataclasses.dataclass
class Program:
    mesh: tuple            # (shape, names)
    inputs: list           # [(shape, dtype name)]
    in_specs: list         # per input: tuple of (axis names tuple or None) per dim
    lines: list            # "vK = expr"
    out: list              # names of the values returned
    grad: bool = False     # differentiate sum(outputs) wrt v0, closing over v0
    out_specs: list | None = None
    vmap: tuple | None = None   # (size, in_axes): prog vmapped, the inputs batched there
    explicit: tuple | None = None   # axis types ("Explicit"/"Auto") per mesh axis: run
    #                                 under set_mesh, every value's type has a sharding

    def source(self, record=False) -> str:
        """`record`: after each line, `T(K, vK)` records the value's type (typeof)."""
        n = len(self.inputs)
        args = ", ".join(f"v{i}" for i in range(n))
        lines = [x for ln in self.lines for x in
                 ([ln, f"T({_defined(ln)}, v{_defined(ln)})"] if record else [ln])]
        body = "\n".join("    " + ln for ln in lines)
        ret = "(" + ", ".join(self.out) + ",)"
        text = f"def prog(m, L, nn, sm, {args}):\n{body or '    pass'}\n    return {ret}\n"
        if self.grad:
            rest = ", ".join(f"v{i}" for i in range(1, n))
            text += (
                "\n\ndef loss(m, L, nn, sm, p" + (", " + rest if rest else "") + "):\n"
                f"    outs = prog(m, L, nn, sm, p{', ' + rest if rest else ''})\n"
                "    total = sum(m.sum(o.astype(m.float32)) for o in outs\n"
                "                if str(o.dtype) in ('float32', 'bfloat16'))\n"
                "    return total + m.sum(p * v0_closed)\n")
        return text


def spec_text(spec) -> str:
    def dim(d):
        if d is None:
            return "None"
        return repr(d[0]) if len(d) == 1 else repr(tuple(d))
    return "P(" + ", ".join(dim(d) for d in spec) + ")"


class Gen(ControlSteps, OpSteps):
    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.ntemp = 0      # control-flow bodies' temporaries t0, t1, ...

    def choice(self, xs):
        return xs[int(self.rng.integers(len(xs)))]

    def program(self, n_steps=None) -> Program:
        rng = self.rng
        mesh = self.choice(MESHES)
        n_in = int(rng.integers(1, 4))
        inputs = [self.input_type() for _ in range(n_in)]
        if self.rng.random() < (0.6 if CONTROL_FOCUS else 0.25):   # a float input to differentiate
            inputs[0] = (inputs[0][0], "float32")
        specs = [self.spec(shape, mesh) for shape, _ in inputs]
        prog = Program(mesh, inputs, specs, [], [])
        avals = [jax.ShapeDtypeStruct(s, jnp.dtype(d)) for s, d in inputs]
        steps = n_steps if n_steps is not None else int(rng.integers(1, 9))
        for _ in range(steps):
            for _attempt in range(12):
                expr = self.step(avals, mesh)
                if expr is None:
                    continue
                got = _abstract(prog, expr, avals)
                if got is not None:
                    prog.lines.append(f"v{len(avals)} = {expr}")
                    avals.append(got)
                    break
        k = len(avals)
        last = [f"v{k - 1}"]
        if k > 2 and rng.random() < 0.4:
            last.append(f"v{int(rng.integers(n_in, k - 1)) if k - 1 > n_in else 0}")
        prog.out = last
        p_grad = 0.6 if CONTROL_FOCUS else 0.3
        prog.grad = inputs[0][1] == "float32" and rng.random() < p_grad and bool(prog.lines)
        if any("L.while_loop" in ln for ln in prog.lines):
            prog.grad = False       # reverse mode through while_loop: jax refuses too
        if rng.random() < 0.2:
            outs = ["v0"] if prog.grad else prog.out    # a gradient program returns d/dv0
            prog.out_specs = [self.spec(avals[int(o[1:])].shape, mesh) for o in outs]
        if rng.random() < (0.8 if VMAP_FOCUS else 0.2):
            axes = [None if rng.random() < 0.3 else int(rng.integers(0, len(s) + 1))
                    for s, _ in inputs]
            if all(a is None for a in axes):
                axes[0] = 0
            prog.vmap = (int(self.choice((2, 3, 4))), tuple(axes))
        # drawn last, so the program's text is the same as without the explicit mode
        if rng.random() < (0.8 if EXPLICIT_FOCUS else 0.2):
            self.make_explicit(prog)
        return prog

    def make_explicit(self, prog):
        """Explicit (sometimes mixed Explicit/Auto) axis types; most sharding constraints
        become reshards (with_sharding_constraint is an assert over explicit axes)."""
        rng = self.rng
        n = len(prog.mesh[0])
        types = ["Explicit"] * n
        if n > 1 and rng.random() < 0.3:
            types[int(rng.integers(n))] = "Auto"
        prog.explicit = tuple(types)
        prog.lines = [ln.replace("L.with_sharding_constraint(", "RS(")
                      if rng.random() < 0.7 else ln for ln in prog.lines]

    def input_type(self):
        rank = int(self.rng.integers(0, 4))
        shape = tuple(self.choice(SIZES) for _ in range(rank))
        while np.prod(shape, dtype=np.int64) > 512:
            shape = shape[1:]
        return shape, self.choice(DTYPES)

    def spec(self, shape, mesh, even=True):
        """A random spec: each dim None or one or two unused mesh axes dividing it."""
        sizes = dict(zip(mesh[1], mesh[0]))
        free = list(mesh[1])
        self.rng.shuffle(free)
        spec = []
        for n in shape:
            axes = []
            while free and self.rng.random() < 0.45:
                a = free[-1]
                k = int(np.prod([sizes[b] for b in axes + [a]]))
                if even and n % k:
                    break
                axes.append(free.pop())
            spec.append(tuple(axes) or None)
        return tuple(spec)

    # ------------------------------------------------------------ steps

    def step(self, avals, mesh):
        kinds = self.simple_kinds() + [self.control] * (40 if CONTROL_FOCUS else 8) + \
            [self.shard_map] * (30 if MANUAL_FOCUS else 0)
        return self.choice(kinds)(avals, mesh)

    def simple_kinds(self):
        return [self.unary, self.binary, self.binary, self.scalar, self.reduce, self.shape_op,
                self.slice_, self.pad, self.concat, self.dot, self.gather, self.at,
                self.cumsum, self.softmax, self.constraint, self.shard_map, self.astype] + \
            [self.more_op] * 6

    @staticmethod
    def limit_ok(out):
        n = int(np.prod(out.shape, dtype=np.int64))
        return not (n > MAX_ELEMS or (out.ndim and n == 0) or out.ndim > 4)

    def pick(self, avals, pred=lambda a: True):
        ks = [k for k, a in enumerate(avals) if pred(a)]
        return None if not ks else self.choice(ks)

    def unary(self, avals, mesh):
        k = self.pick(avals)
        f = self.choice(["m.sin({})", "m.exp(m.tanh({}))", "m.abs({})", "-{}", "m.sqrt(m.abs({}))",
                         "m.log1p(m.abs({}))", "m.maximum({}, 0)", "m.square({})",
                         "m.logical_not({})", "m.sign({})", "m.floor({})", "nn.relu({})"])
        return f.format(f"v{k}")

    def astype(self, avals, mesh):
        k = self.pick(avals)
        return f"v{k}.astype(m.{self.choice(['float32', 'bfloat16', 'int32', 'bool_'])})"

    def binary(self, avals, mesh):
        k = self.pick(avals)
        a = avals[k]
        # partners: same shape, a scalar, or a broadcastable suffix shape
        ok = [j for j, b in enumerate(avals)
              if b.shape == a.shape or b.shape == () or b.shape == a.shape[-len(b.shape):]]
        j = self.choice(ok)
        op = self.choice(["{} + {}", "{} - {}", "{} * {}", "m.maximum({}, {})",
                          "m.minimum({}, {})", "m.where({0} > {1}, {0}, {1})",
                          "m.divide({}, {})", "m.logical_and({} > 0, {} > 0)"])
        pair = [f"v{k}", f"v{j}"] if self.rng.random() < 0.5 else [f"v{j}", f"v{k}"]
        return op.format(*pair)

    def scalar(self, avals, mesh):
        k = self.pick(avals)
        c = self.choice(["2", "0.5", "-1", "3.0", "True"])
        return self.choice(["v{k} + {c}", "v{k} * {c}", "{c} - v{k}", "m.maximum(v{k}, {c})",
                            "v{k} / 2"]).format(k=k, c=c)

    def reduce(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0)
        if k is None:
            return None
        ax = int(self.rng.integers(avals[k].ndim))
        f = self.choice(["sum", "max", "mean", "min", "argmax", "any", "prod"])
        kd = self.choice(["", ", keepdims=True"])
        if f == "argmax":
            kd = ""
        return f"m.{f}(v{k}, axis={ax}{kd})"

    def shape_op(self, avals, mesh):
        k = self.pick(avals)
        a = avals[k]
        r = self.rng.random()
        if r < 0.35 and a.ndim > 1:
            perm = list(self.rng.permutation(a.ndim))
            return f"m.transpose(v{k}, {tuple(int(p) for p in perm)})"
        if r < 0.7:
            n = int(np.prod(a.shape, dtype=np.int64))
            shape = _factor(n, self.rng)
            return f"m.reshape(v{k}, {shape})"
        if r < 0.85:
            return f"m.broadcast_to(v{k}, {(self.choice([2, 4]),) + tuple(a.shape)})"
        return f"m.expand_dims(v{k}, {int(self.rng.integers(a.ndim + 1))})"

    def slice_(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0)
        if k is None:
            return None
        a = avals[k]
        d = int(self.rng.integers(a.ndim))
        n = a.shape[d]
        s = int(self.rng.integers(-n, n)) if n else 0
        t = self.choice([None, n, int(self.rng.integers(-n, n + 1)) if n else 0])
        st = self.choice([None, 1, 2, 3, -1, -2])
        idx = ", ".join([":"] * d + [f"{s}:{'' if t is None else t}:{'' if st is None else st}"])
        return f"v{k}[{idx}]"

    def pad(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and a.dtype != jnp.bool_)
        if k is None:
            return None
        a = avals[k]
        cfg = [(int(self.rng.integers(-1, 3)), int(self.rng.integers(-1, 3)),
                int(self.rng.integers(0, 2))) for _ in a.shape]
        return f"L.pad(v{k}, m.zeros((), v{k}.dtype), {cfg})"

    def concat(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0)
        if k is None:
            return None
        a = avals[k]
        d = int(self.rng.integers(a.ndim))
        ok = [j for j, b in enumerate(avals) if b.ndim == a.ndim and b.dtype == a.dtype and
              all(x == y for i, (x, y) in enumerate(zip(a.shape, b.shape)) if i != d)]
        j = self.choice(ok)
        return f"m.concatenate([v{k}, v{j}], axis={d})"

    def dot(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim >= 1)
        if k is None:
            return None
        a = avals[k]
        ok = [j for j, b in enumerate(avals) if b.ndim >= 1 and
              (b.shape[0] == a.shape[-1] if b.ndim <= 2 else
               b.ndim == a.ndim and b.shape[:-2] == a.shape[:-2] and b.shape[-2] == a.shape[-1])]
        if not ok:
            return None
        j = self.choice(ok)
        if a.ndim == 3 and avals[j].ndim == 3 and self.rng.random() < 0.5:
            return f"m.einsum('bij,bjk->bik', v{k}, v{j})"
        return f"v{k} @ v{j}"

    def gather(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and a.shape[0] > 0)
        if k is None:
            return None
        n = avals[k].shape[0]
        idx = [int(i) for i in self.rng.integers(-n, n, int(self.rng.integers(1, 5)))]
        return f"v{k}[np.array({idx})]"

    def at(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and a.shape[0] > 0)
        if k is None:
            return None
        n = avals[k].shape[0]
        s = int(self.rng.integers(0, n))
        # traced indices too: one repeats, and the clipped one may be out of bounds
        hot = f"m.argmax(v{k}.reshape(-1))"
        idx = self.choice([f"{s}:{s + 1}", f"{s}", f"{s}::2", f"np.array([{s}, {n - 1}])",
                           f"({hot} + np.array([0, 1, 0])) % {n}",
                           f"{hot} - np.array([0, {n}, {2 * n}, {n - 1}])"])
        meth = self.choice(["set(1)", "add(2)", "multiply(3)", "max(0)", "min(0.5)",
                            "set(v{k}[0] * 2)".format(k=k), "get()"])
        if hot in idx and meth != "get()":
            meth = meth[:-1] + ", mode='clip')"
        return f"v{k}.at[{idx}].{meth}"

    def cumsum(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and a.dtype != jnp.bool_)
        if k is None:
            return None
        return f"m.cumsum(v{k}, axis={int(self.rng.integers(avals[k].ndim))})"

    def softmax(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0 and jnp.issubdtype(a.dtype, jnp.floating))
        if k is None:
            return None
        return f"nn.softmax(v{k}, axis={int(self.rng.integers(avals[k].ndim))})"

    def constraint(self, avals, mesh):
        k = self.pick(avals, lambda a: a.ndim > 0)
        if k is None:
            return None
        spec = self.spec(avals[k].shape, mesh, even=self.rng.random() < 0.7)
        return f"L.with_sharding_constraint(v{k}, NS(MESH, {spec_text(spec)}))"

    def shard_map(self, avals, mesh):
        """A body with one collective, fully or partially manual."""
        k = self.pick(avals, lambda a: a.ndim >= 1 and a.dtype != jnp.bool_)
        if k is None:
            return None
        a = avals[k]
        shape, names = mesh
        manual = list(names) if self.rng.random() < 0.7 else [names[0]]
        sizes = dict(zip(names, shape))
        ax = self.choice(manual)
        # split dim 0 over `ax` when it divides, else replicate the input
        split = a.shape[0] % sizes[ax] == 0 and self.rng.random() < 0.7
        in_spec = f"P({ax!r})" if split else "P()"
        body = self.choice([
            ("L.psum(y, {ax!r})", "P()"),
            ("L.pmax(y, {ax!r})", "P()"),
            ("L.pmean(y * 2, {ax!r})", "P()"),
            ("L.all_gather(y, {ax!r}, axis=0, tiled=True)", "P()"),
            ("L.psum_scatter(y, {ax!r}, scatter_dimension=0, tiled=True)", "P({ax!r})"),
            ("L.ppermute(y, {ax!r}, [(i, (i + 1) % {n}) for i in range({n})])", "P({ax!r})"),
            ("y + L.axis_index({ax!r}).astype(y.dtype)", "P({ax!r})"),
            ("L.psum(L.psum_scatter(y, {ax!r}, scatter_dimension=0, tiled=True), {ax!r})",
             "P()"),
        ])
        expr, out = body
        expr, out = expr.format(ax=ax, n=sizes[ax]), out.format(ax=ax)
        expr, out = self._transformed(expr, out, in_spec, a)
        names_kw = "" if len(manual) == len(names) else f", axis_names={set(manual)!r}"
        return (f"sm(lambda y: {expr}, mesh=MESH, in_specs={in_spec}, out_specs={out}"
                f"{names_kw})(v{k})")


    def _transformed(self, expr, out, in_spec, a):
        """Sometimes the body's collective under a transformation traced inside the body
        (each retraces the body's function into a region, whose arguments must vary as
        the body's values do): the tangent of a jvp, a gradient, or a vmap over rows."""
        r = self.rng.random()
        floating = jnp.issubdtype(a.dtype, jnp.floating)
        if r < 0.15 and floating:
            return f"TF.jvp(lambda y: {expr}, (y,), (y * 0.5,))[1]", out
        if r < 0.3 and floating:
            return f"TF.grad(lambda y: m.sum({expr}))(y)", in_spec
        if r < 0.4 and "gather" not in expr and "scatter" not in expr:
            return f"TF.vmap(lambda y: {expr})(y)", out
        return expr, out


def _factor(n, rng):
    """A random shape with n elements (rank 0-3)."""
    if n == 0:
        return (0,)
    divs = [d for d in range(1, n + 1) if n % d == 0]
    a = divs[int(rng.integers(len(divs)))]
    rest = n // a
    if rng.random() < 0.5:
        return (a, rest) if rest > 1 else (a,)
    divs2 = [d for d in range(1, rest + 1) if rest % d == 0]
    b = divs2[int(rng.integers(len(divs2)))]
    return (a, b, rest // b)


def _defined(line):
    return line.split("=", 1)[0].strip()[1:]


def namespace(framework, mesh):
    """The names a program's source sees, for 'shardc' or 'jax'."""
    from jax.sharding import NamedSharding, PartitionSpec
    if framework == "shardc":
        import shardc
        import shardc.numpy as snp
        ns = dict(m=snp, L=shardc.lax, nn=shardc.nn, sm=shardc.shard_map, ck=shardc.checkpoint,
                  CP=shardc.checkpoint_policies, cn=shardc.ad_checkpoint.checkpoint_name,
                  RS=shardc.reshard, TF=shardc)
    else:
        ns = dict(m=jnp, L=jax.lax, nn=jax.nn, sm=jax.shard_map, ck=jax.checkpoint,
                  CP=jax.checkpoint_policies, cn=jax.ad_checkpoint.checkpoint_name,
                  RS=jax.sharding.reshard, TF=jax)
    ns.update(MESH=mesh, P=PartitionSpec, NS=NamedSharding, np=np)
    return ns


_MESH_CACHE: dict = {}


def make_mesh(spec, types=None):
    """The mesh `spec` = (shape, names), its axes Auto or of `types` (AxisType names)."""
    shape, names = spec
    types = types or ("Auto",) * len(shape)
    key = (shape, names, tuple(types))
    if key not in _MESH_CACHE:
        _MESH_CACHE[key] = jax.make_mesh(shape, names, axis_types=tuple(
            getattr(jax.sharding.AxisType, t) for t in types))
    return _MESH_CACHE[key]


def build(prog: Program, framework: str, record=None, vjp_out=False):
    """The program's function for `framework`: takes the inputs, returns a tuple.
    `record`, a dict: each line's value K gets record[K] = str(typeof(vK)) as traced."""
    if framework == "shardc" and FRONTEND:
        framework = "jax"       # the same jax code; the caller's shardc.jit translates it
    ns = namespace(framework, make_mesh(prog.mesh, prog.explicit))
    if record is not None:
        import shardc
        typeof = shardc.typeof if framework == "shardc" else jax.typeof

        def T(k, v):    # noqa: N802 -- the name the recording source calls
            try:
                record[k] = str(typeof(v))
            except Exception as e:  # noqa: BLE001 -- a typeof failure is a difference too
                record[k] = f"typeof raised {type(e).__name__}"
        ns["T"] = T
    exec(compile(prog.source(record is not None), "<fuzz program>", "exec"), ns)
    f = ns["prog"]
    fw = (ns["m"], ns["L"], ns["nn"], ns["sm"])
    import shardc
    if not prog.grad:
        g = lambda *xs: f(*fw, *xs)  # noqa: E731
    elif vjp_out:   # (loss, its vjp function): the function leaves the jit
        def g(*xs):
            ns["v0_closed"] = xs[0]
            return shardc.vjp(lambda p: ns["loss"](*fw, p, *xs[1:]), xs[0])
    else:
        grad = shardc.grad if framework == "shardc" else jax.grad

        def g(*xs):
            ns["v0_closed"] = xs[0]     # the loss closes over the array it differentiates
            return (grad(lambda p: ns["loss"](*fw, p, *xs[1:]))(xs[0]),)
    if prog.vmap is not None:
        vmap = shardc.vmap if framework == "shardc" else jax.vmap
        return vmap(g, in_axes=prog.vmap[1])
    return g


def _abstract(prog, expr, avals):
    """The aval of `expr` after the program's lines, per jax; None if jax rejects it,
    it is too large, or it has a zero-size dim."""
    trial = dataclasses.replace(prog, lines=prog.lines + [f"v{len(avals)} = {expr}"],
                                out=[f"v{len(avals)}"], grad=False)
    try:
        fn = build(trial, "jax")
        (out,) = jax.eval_shape(fn, *avals)
    except Exception:  # noqa: BLE001 -- any rejection means: sample another step
        return None
    if not Gen.limit_ok(out):
        return None
    return jax.ShapeDtypeStruct(out.shape, out.dtype)


_ = itertools
