"""How `shardc launch` runs SCRIPT in each process: `python .../_child.py SCRIPT ARGS`
(or `-m MODULE ARGS`). Run as a file, never imported; only the standard library, so
that SCRIPT still sees no jax (nor shardc) before its own first line.

It runs SCRIPT as `python SCRIPT` would and tells the launcher, on the pipe whose fd
is in SHARDC_LAUNCH_REPORT_FD, how the process ended -- before the interpreter shuts
down, because that shutdown can block: jax's atexit handler waits in
jax.distributed's shutdown barrier (up to 300 s) for processes that may never come.
So a process that fails (an exception, or sys.exit with a nonzero code) prints its
traceback once, reports, and, when jax.distributed is up, leaves at once with
os._exit (after flushing stdio and logging; other atexit handlers do not run: the
launch is over). A process that ends cleanly reports "done" and shuts down
normally; the launcher judges whether the others still needed it.
"""
import sys

# python put this file's directory (shardc/) first on sys.path, where shardc's own
# modules (shardc/numpy, ...) would shadow real ones: take it out before any import.
if not getattr(sys.flags, "safe_path", False):
    del sys.path[0]

import importlib.machinery  # noqa: E402
import io  # noqa: E402
import os  # noqa: E402
import runpy  # noqa: E402
import types  # noqa: E402

REPORT_FD = "SHARDC_LAUNCH_REPORT_FD"
_HERE = os.path.abspath(__file__)


def _report(fd, kind, code, cause):
    """One line to the launcher: 'kind<TAB>code<TAB>cause' (one write: atomic)."""
    if fd is None:
        return
    cause = " ".join(str(cause).split())[:1500]
    try:
        os.write(fd, f"{os.environ.get('SHARDC_PROCESS_ID', '?')}\t{kind}\t{code}\t"
                     f"{cause}\n".encode("utf-8", "replace"))
    except OSError:
        pass   # the launcher is gone; PDEATHSIG ends us


def _distributed_up() -> bool:
    d = sys.modules.get("jax._src.distributed")
    return d is not None and getattr(d.global_state, "client", None) is not None


def _flush():
    if "logging" in sys.modules:
        try:
            sys.modules["logging"].shutdown()
        except Exception:  # noqa: BLE001
            pass
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:  # noqa: BLE001
            pass


def _user_traceback(tb):
    """The traceback without this file's and runpy's frames."""
    skip = (_HERE, runpy.__file__, "<frozen runpy>")
    while tb is not None and tb.tb_frame.f_code.co_filename in skip:
        tb = tb.tb_next
    return tb


def _where(tb):
    """file:line of the innermost frame outside Python's, jax's and shardc's own files."""
    lib = tuple({os.path.dirname(os.__file__), os.path.dirname(_HERE) + os.sep})
    inner = last = None
    while tb is not None:
        f = tb.tb_frame.f_code.co_filename
        last = f"{os.path.basename(f)}:{tb.tb_lineno}"
        if not f.startswith(lib) and "site-packages" not in f and not f.startswith("<"):
            inner = last
        tb = tb.tb_next
    return inner or last


def _run(argv):
    if argv[0] == "-m":
        sys.argv = argv[1:]
        if not getattr(sys.flags, "safe_path", False):
            sys.path.insert(0, os.getcwd())   # as `python -m` does
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return
    script = argv[0]
    sys.argv = list(argv)
    if not getattr(sys.flags, "safe_path", False):
        sys.path.insert(0, os.path.dirname(os.path.realpath(script)))
    if os.path.isdir(script) or not script.endswith(".py") and _is_zip(script):
        runpy.run_path(script, run_name="__main__")
        return
    with io.open_code(script) as f:
        code = compile(f.read(), script, "exec")
    main = types.ModuleType("__main__")
    main.__file__, main.__cached__, main.__spec__ = script, None, None
    main.__builtins__ = __builtins__
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", script)
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


def _is_zip(path):
    import zipfile
    return zipfile.is_zipfile(path)


def main():
    fd = os.environ.pop(REPORT_FD, None)
    if fd is not None:
        fd = int(fd)
        os.set_inheritable(fd, False)   # not for the script's own subprocesses
    me = os.getpid()
    try:
        _run(sys.argv[1:])
    except SystemExit as e:
        if os.getpid() != me:   # a child the script forked: not the launched process
            raise
        code = e.code
        if code is None or code == 0:
            _report(fd, "done", 0, "")
            raise
        rc = code & 0xFF if isinstance(code, int) else 1
        if rc == 0:   # sys.exit(256): the OS says 0, a success
            _report(fd, "done", 0, "")
            raise
        what = f"sys.exit({code!r})" if isinstance(code, int) else f"sys.exit: {code}"
        _report(fd, "exit", rc, what)
        if not _distributed_up():
            raise
        if not isinstance(code, int):
            print(code, file=sys.stderr)
        _flush()
        os._exit(rc)
    except BaseException as e:  # noqa: BLE001 -- every way out is reported
        if os.getpid() != me:
            raise
        tb = _user_traceback(e.__traceback__)
        e.__traceback__ = tb               # python prints this one, not the argument
        sys.excepthook(type(e), e, tb)     # the traceback, once, as python prints it
        rc = 130 if isinstance(e, KeyboardInterrupt) else 1
        msg = str(e).strip().splitlines()
        where = _where(tb)
        _report(fd, "raised", rc, f"{type(e).__name__}" + (f": {msg[0]}" if msg else "") +
                (f" ({where})" if where else ""))
        _flush()
        if not _distributed_up():
            sys.exit(rc)
        os._exit(rc)
    if os.getpid() == me:
        _report(fd, "done", 0, "")


if __name__ == "__main__":
    main()
