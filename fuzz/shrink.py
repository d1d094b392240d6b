"""Shrink a failing program to a small one that fails the same way, and print it as a
self-contained script."""
from __future__ import annotations

import ast
import dataclasses
import re

from .gen import Program, spec_text
from .run import run


def _uses(line):
    return set(re.findall(r"\bv(\d+)\b", line.split("=", 1)[1]))


def _defined(line):
    return line.split("=", 1)[0].strip()[1:]


def shrink(prog: Program, kind: str, seed: int = 0, budget: int = 60) -> Program:
    """Drop lines, outputs, grad, out_specs and input shardings while `kind` persists."""
    tries = [0]

    def still(p):
        if tries[0] >= budget:
            return False
        tries[0] += 1
        try:
            return run(p, seed, collectives=False).kind == kind
        except Exception:  # noqa: BLE001 -- a candidate that breaks the runner is no repro
            return False

    changed = True
    while changed:
        changed = False
        # one output: each in turn
        if len(prog.out) > 1:
            for o in prog.out:
                p = dataclasses.replace(prog, out=[o], out_specs=None)
                if still(p):
                    prog, changed = p, True
                    break
        for flag in ("grad", "out_specs"):
            if getattr(prog, flag):
                p = dataclasses.replace(prog, **{flag: False if flag == "grad" else None})
                if still(p):
                    prog, changed = p, True
        # lines no later line or output uses
        for i in reversed(range(len(prog.lines))):
            name = _defined(prog.lines[i])
            used = any(name in _uses(ln) for ln in prog.lines[i + 1:]) or \
                any(o == f"v{name}" for o in prog.out)
            if used:
                # make the line's first operand the output instead, if it is the output
                if prog.out == [f"v{name}"] and _uses(prog.lines[i]):
                    src = sorted(_uses(prog.lines[i]), key=int)[0]
                    p = dataclasses.replace(prog, lines=prog.lines[:i] + prog.lines[i + 1:],
                                            out=[f"v{src}"], out_specs=None)
                    if still(p):
                        prog, changed = p, True
                continue
            p = dataclasses.replace(prog, lines=prog.lines[:i] + prog.lines[i + 1:])
            if still(p):
                prog, changed = p, True
        # a control-flow body's temporaries no one uses
        for i, ln in enumerate(prog.lines):
            for cand in _drop_temps(ln):
                p = dataclasses.replace(prog, lines=prog.lines[:i] + [cand] +
                                        prog.lines[i + 1:])
                if still(p):
                    prog, changed = p, True
                    break
        # input shardings
        for i, spec in enumerate(prog.in_specs):
            if any(spec):
                specs = list(prog.in_specs)
                specs[i] = tuple(None for _ in spec)
                p = dataclasses.replace(prog, in_specs=specs)
                if still(p):
                    prog, changed = p, True
    return prog


def _drop_temps(line):
    """`line` without one walrus temporary `tN := ...` of a body (fuzz/control.py) that
    nothing reads, for each such temporary."""
    tree = ast.parse(line)
    names = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and
             isinstance(n.ctx, ast.Load)]
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Tuple):
            continue
        for j, e in enumerate(node.elts):
            if isinstance(e, ast.NamedExpr) and e.target.id not in names:
                node.elts.pop(j)
                out.append(ast.unparse(tree))
                node.elts.insert(j, e)
    return out


def repro(prog: Program, seed: int = 0, note: str = "") -> str:
    """A script that runs the program under shardc.jit and jax.jit and prints both."""
    ins = ", ".join(f"v{i}" for i in range(len(prog.inputs)))
    specs = ", ".join(spec_text(s) for s in prog.in_specs)
    out_kw = ""
    if prog.out_specs is not None:
        out_kw = ", out_shardings=(" + ", ".join(
            f"NS(MESH, {spec_text(s)})" for s in prog.out_specs) + ",)"
    return f'''# {note}
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax
import numpy as np
from fuzz.gen import Program, build, make_mesh
from fuzz.run import inputs

prog = Program(mesh={prog.mesh!r}, inputs={prog.inputs!r},
               in_specs={prog.in_specs!r},
               lines={prog.lines!r},
               out={prog.out!r}, grad={prog.grad!r}, out_specs={prog.out_specs!r},
               vmap={prog.vmap!r}, explicit={prog.explicit!r})
# the program (m = shardc.numpy or jax.numpy, L = shardc.lax or jax.lax):
{_comment(prog.source())}# inputs {ins} placed as {specs}{out_kw}
xs = inputs(prog, {seed})
import shardc
{_runs(prog, out_kw)}'''


def _runs(prog, out_kw):
    head = "from jax.sharding import NamedSharding as NS, PartitionSpec as P\n"
    head += f"MESH = make_mesh({prog.mesh!r}, {prog.explicit!r})\n"
    if prog.explicit is None:
        return head + (f'print("shardc", shardc.jit(build(prog, "shardc"){out_kw})(*xs))\n'
                       f'print("jax   ", jax.jit(build(prog, "jax"){out_kw})(*xs))\n')
    return head + (
        "with shardc.set_mesh(MESH):\n"
        f"    out = shardc.jit(build(prog, \"shardc\"){out_kw})(*xs)\n"
        "    print(\"shardc\", [str(jax.typeof(o)) for o in out], out)\n"
        "with jax.set_mesh(MESH):\n"
        f"    ref = jax.jit(build(prog, \"jax\"){out_kw})(*xs)\n"
        "    print(\"jax   \", [str(jax.typeof(o)) for o in ref], ref)\n")


def _comment(text):
    return "".join("#   " + ln + "\n" for ln in text.splitlines())
