"""The pipeline's stages import downward only: a test of every import statement in shardc/,
function-level imports included, against the declared order of the stages."""
import ast
import pathlib

SHARDC = pathlib.Path(__file__).resolve().parents[2] / "shardc"

# Lowest first. A module may import its own stage and any stage before it.
STAGES = ["errors", "ir", "trace", "propagate", "auto", "lower", "ops", "transforms", "runtime",
          "api", "frontends", "tools", "public"]
PUBLIC = {"", "numpy", "lax", "nn", "debug", "distributed", "report", "launch", "__main__",
          "ad_checkpoint", "random", "scipy", "sharding", "checkpoints", "experimental",
          "custom_batching", "image"}

# Known back-edges being removed by the redesign (issue 14); each entry is
# "importer -> imported". The list only ever shrinks.
ALLOWED: set[str] = set()


def stage_of(module: str) -> str:
    """shardc.ops.shape -> 'ops'; shardc.numpy.linalg and shardc -> 'public'."""
    parts = module.split(".")[1:]
    if not parts or parts[0] in PUBLIC:
        return "public"
    return parts[0]


def module_name(path: pathlib.Path) -> str:
    parts = ["shardc", *path.relative_to(SHARDC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: pathlib.Path):
    """(line, imported shardc module) for every import in the file, at any depth."""
    mod = module_name(path)
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("shardc"):
                    yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("shardc"):
                continue
            for a in node.names:   # `from . import numpy` imports the module shardc.numpy
                sub = f"{target}.{a.name}"
                dotted = SHARDC.parent / sub.replace(".", "/")
                is_mod = dotted.with_suffix(".py").exists() or (dotted / "__init__.py").exists()
                yield node.lineno, sub if is_mod else target


def back_edges():
    out = {}
    for path in sorted(SHARDC.rglob("*.py")):
        me = module_name(path)
        for line, target in imports(path):
            if STAGES.index(stage_of(target)) > STAGES.index(stage_of(me)):
                out.setdefault(f"{me} -> {target}", []).append(
                    f"{path.relative_to(SHARDC.parent)}:{line}")
    return out


def test_every_module_belongs_to_a_declared_stage():
    for path in SHARDC.rglob("*.py"):
        assert stage_of(module_name(path)) in STAGES, path


def test_imports_go_down_the_pipeline():
    found = back_edges()
    new = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not new, "imports from a lower stage to a higher one:\n" + "\n".join(
        f"  {k}  ({', '.join(v)})" for k, v in sorted(new.items()))


def test_the_allowed_list_has_no_stale_entries():
    assert not ALLOWED - set(back_edges()), ALLOWED - set(back_edges())
