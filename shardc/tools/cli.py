"""The `shardc` command: see what the compiler decided for a function, and why.

    shardc ir FILE.py:FUNC --mesh data=2,model=4 --arg "f32[64,256]@P('data',None)" ...
    shardc ir model.py:train_step --example-args make_args   (or model.py:train_step_args)
    shardc ir ... --explain | --stage traced | --format json
    shardc stablehlo ... | shardc hlo ... | shardc report ...
    shardc propagate FILE.ir [--explain]

Each subcommand is one `Command` in COMMANDS (its options and its run function);
a subcommand implemented elsewhere is one line in EXTERNAL, called with the rest of
the command line. jax is imported only after the arguments are read, so --devices
can set the number of simulated CPU devices first. Errors are one message on stderr
and exit status 1 (2 for a malformed command line); --traceback shows the traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Callable

from .loader import (UsageError, check_spec, example_args, example_args_function,
                     load_target, parse_arg, parse_mesh, stage)

PROG = "shardc"


@dataclass
class Command:
    name: str
    help: str
    add_arguments: Callable      # (parser) -> None
    run: Callable                # (args) -> str (printed) or None
    program: bool = True         # takes FILE.py:FUNC, --mesh, --arg, --devices


# Subcommands implemented in other modules: name -> (module, help). The module's
# `main(argv)` gets everything after the subcommand's name and returns an exit code.
EXTERNAL: dict[str, tuple[str, str]] = {
    "launch": ("shardc.tools.launch", "run a program as N local processes over one global mesh"),
}


# ---------------------------------------------------------------- subcommands


def _ir_args(p):
    p.add_argument("--explain", action="store_true",
                   help="under each value, its sharding's origin (argument or "
                        "constraint) and the ops it came through, with FILE:LINE")
    p.add_argument("--stage", choices=("traced", "propagated"), default="propagated",
                   help="'traced': before sharding propagation; 'propagated' (default)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="'json' for tools: values, types, shardings, ops, provenance")


def _run_ir(args):
    traced = _traced(args)
    from .irjson import program_json
    if args.stage == "traced":
        from ..ir.parse import parse_program
        program = parse_program(traced.traced_ir)
        if args.format == "json":
            return _json(program_json(program, stage="traced"))
        return traced.traced_ir
    if args.format == "json":
        return _json(program_json(traced.program, stage="propagated"))
    return traced.explain() if args.explain else traced.ir


def _stablehlo_args(p):
    p.add_argument("--debug-info", action="store_true",
                   help="print each op's source location (MLIR loc)")


def _run_stablehlo(args):
    return _traced(args).lower().as_text(debug_info=args.debug_info)


def _run_hlo(args):
    return _traced(args).lower().compile().as_text()


def _report_args(p):
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="'json' for tools")


def _run_report(args):
    from .report import report
    r = report(_traced(args).lower().compile())
    return _json(r.json()) if args.format == "json" else r.text()


def _propagate_args(p):
    p.add_argument("file", metavar="FILE.ir", help="IR text, as `shardc ir` prints it")
    p.add_argument("--explain", action="store_true",
                   help="under each value, where its sharding came from")
    p.add_argument("--format", choices=("text", "json"), default="text")


def _run_propagate(args):
    from ..propagate import passes
    from ..propagate.explain import explain_program
    from ..ir.program import print_program
    from .irjson import program_json
    from ..ir.parse import ParseError, parse_program
    from ..errors import ShardcError
    from ..ir.verify import VerifyError, verify
    try:
        with open(args.file, "rb") as f:
            data = f.read()
    except OSError as e:
        raise UsageError(f"cannot read {args.file}: {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise UsageError(f"the file is not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                         f"{e.start}); give IR text as `shardc ir` prints it",
                         f"{args.file}:{line}") from None
    try:
        program = parse_program(text)
    except ParseError as e:
        msg = re.sub(r"^line \d+:\d+: ", "", e.message)
        raise UsageError(msg, f"{args.file}:{e.line}:{e.col}") from None
    if program.mesh is None:
        raise UsageError("the IR has no mesh; its first line should be like "
                         "'mesh <data=2, model=4>'", f"{args.file}:1")
    # hand-written IR: check operand counts and declared types before the passes, and
    # report any mistake at its line in the file
    ir_lines = program.meta.pop("ir_lines", {})
    try:
        verify(program)
        passes.prepare(program)
        passes.propagate(program)
    except VerifyError as e:
        line = ir_lines.get(e.op)
        raise UsageError(e.message, f"{args.file}:{line}" if line else args.file) from None
    except ShardcError:
        raise
    except Exception as e:   # params of the wrong kind (axes=0 for axes=(0,)), or a bug
        if args.traceback:
            raise
        raise UsageError(f"cannot propagate this IR: {type(e).__name__}: {e}; check the ops' "
                         "parameters against `shardc ir` output (rerun with --traceback if "
                         "they are right: then it is a shardc bug)", args.file) from None
    if args.format == "json":
        return _json(program_json(program, stage="propagated"))
    return explain_program(program) if args.explain else print_program(program)


COMMANDS = [
    Command("ir", "print shardc's IR with every value's sharding", _ir_args, _run_ir),
    Command("stablehlo", "print the lowered StableHLO module (Shardy shardings)",
            _stablehlo_args, _run_stablehlo),
    Command("hlo", "print XLA's partitioned, optimized HLO", lambda p: None, _run_hlo),
    Command("report", "per-op table, every collective XLA inserted (bytes, mesh axes, "
            "the line that caused it), per-device memory, flops; for shardc.AUTO shardings "
            "the search's prediction beside them", _report_args, _run_report),
    Command("propagate", "read IR text, propagate shardings, print it", _propagate_args,
            _run_propagate, program=False),
]


# ---------------------------------------------------------------- shared machinery


def _json(obj):
    return json.dumps(obj, indent=2)


def _program_args(p):
    p.add_argument("target", metavar="FILE.py:FUNC",
                   help="the function: a file and a function in it (or module:func)")
    p.add_argument("--mesh", metavar="AXIS=N,...",
                   help="the device mesh, e.g. data=2,model=4 (optional when the "
                        "function's in_shardings name a mesh)")
    p.add_argument("--arg", action="append", default=[], metavar="TYPE[@SPEC]",
                   help="one per argument: dtype and shape, optionally @ a PartitionSpec, "
                        "e.g. \"f32[64,256]@P('data',None)\"; functions decorated with "
                        "@shardc.jit(in_shardings=...) need only dtype and shape")
    p.add_argument("--example-args", metavar="NAME",
                   help="a function in the same file that returns a tuple of example "
                        "arguments: arrays or jax.ShapeDtypeStructs, pytrees allowed (a "
                        "flax model's params, an optax state), each sharded as its "
                        "`.sharding` says. Without --arg or --example-args, FUNC_args is "
                        "used if the file defines it (e.g. train_step_args for train_step)")
    p.add_argument("--devices", type=int, metavar="N",
                   help="simulated CPU devices when there is no accelerator (default: "
                        "the mesh's size)")


def _common_args(p):
    p.add_argument("--traceback", action="store_true",
                   help="on error, show the Python traceback (for debugging)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="shardc: a tracing compiler for sharded array programs. "
        "Shows what it decided for a function: shardings and why, the lowered and "
        "partitioned programs, and the collectives XLA inserted.",
        epilog="Run 'shardc COMMAND --help' for a command's options.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for c in COMMANDS:
        p = sub.add_parser(c.name, help=c.help, description=c.help)
        if c.program:
            _program_args(p)
        c.add_arguments(p)
        _common_args(p)
        p.set_defaults(command_obj=c)
    for name, (_, help_) in EXTERNAL.items():
        sub.add_parser(name, help=help_, add_help=False)
    return parser


def _set_devices(args):
    """Ask for simulated CPU devices before jax starts its backends."""
    n = args.devices
    if n is None:
        if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
            return
        n = 8
        if args.mesh:
            n = 1
            for _, s in parse_mesh(args.mesh):
                n *= s
    if n < 1:
        raise UsageError(f"--devices {n}: need at least one device")
    flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "",
                   os.environ.get("XLA_FLAGS", ""))
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()
    if "jax" in sys.modules:   # imported (e.g. by `python -m shardc`) but not started
        import jax
        try:
            jax.config.update("jax_num_cpu_devices", n)
        except Exception:
            pass


def _traced(args):
    """Load the function, build the mesh and abstract arguments, trace and propagate."""
    mesh_axes = parse_mesh(args.mesh) if args.mesh else ()
    arg_types = [parse_arg(a, i) for i, a in enumerate(args.arg)]
    for i, a in enumerate(arg_types):
        check_spec(a, i, mesh_axes)
    module, fun = load_target(args.target)
    builder = None
    if args.example_args is not None or not args.arg:
        builder = example_args_function(module, args.target, args.example_args)
    if builder is not None and args.arg:
        raise UsageError("give the arguments either with --arg or with --example-args, "
                         "not both")
    mesh = None
    if mesh_axes:
        import jax

        from ..runtime.meshes import make_mesh
        need = 1
        for _, s in mesh_axes:
            need *= s
        have = len(jax.devices())
        if have < need:
            raise UsageError(f"--mesh {args.mesh} needs {need} devices but only {have} "
                             f"are available; pass --devices {need} (CPU) or a smaller mesh")
        mesh = make_mesh([s for _, s in mesh_axes], [n for n, _ in mesh_axes],
                         (jax.sharding.AxisType.Auto,) * len(mesh_axes))
    given_by = None
    if builder is not None:
        arg_types = example_args(builder, args.target.rpartition(":")[0])
        given_by = f"{getattr(builder, '__name__', args.example_args)}()"
    from ..errors import ShardcError
    try:
        traced = stage(fun, mesh, arg_types, given_by)
        traced.propagate()      # its errors reported as before, with the tracing's
        return traced
    except ShardcError as e:
        if mesh is None and "needs a mesh" in e.message:
            raise UsageError(f"{e.message}; on the command line, pass --mesh, e.g. "
                             "--mesh data=2,model=4") from None
        raise


def _message(e, args) -> tuple[str, str | None]:
    """(message, FILE:LINE or None) for an exception raised while running a command."""
    from ..errors import UNKNOWN, ShardcError, _is_internal
    if isinstance(e, UsageError):
        return e.message, e.where
    if isinstance(e, ShardcError):
        loc = e.loc
        ok = loc is not UNKNOWN and loc.file.endswith(".py") and not _is_internal(loc.file)
        return e.message, (str(loc) if ok else None)
    from .loader import user_frame
    where = user_frame(e.__traceback__)
    name = type(e).__name__
    if where is None:
        return (f"internal error: {name}: {e} (this is a shardc bug; rerun with "
                "--traceback and report it)"), None
    return f"{name}: {e}", f"{where[0]}:{where[1]}"


def _relative(where):
    """'/cwd/dir/f.py:3' -> 'dir/f.py:3' for files under the current directory."""
    if not where:
        return where
    cwd = os.getcwd() + os.sep
    return where[len(cwd):] if where.startswith(cwd) else where


def main(argv=None) -> int:
    """Entry point of the `shardc` console script and `python -m shardc`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in EXTERNAL:
        import importlib
        return importlib.import_module(EXTERNAL[argv[0]][0]).main(argv[1:]) or 0
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.traceback:
        os.environ["SHARDC_TRACEBACK"] = "1"
    try:
        if args.command_obj.program:
            _set_devices(args)
        out = args.command_obj.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:
        if args.traceback:
            raise
        msg, where = _message(e, args)
        where = _relative(where)
        print(f"{where}: error: {msg}" if where else f"{PROG}: error: {msg}",
              file=sys.stderr)
        return 1
    if out:
        try:
            sys.stdout.write(out if out.endswith("\n") else out + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
