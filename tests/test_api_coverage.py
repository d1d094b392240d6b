"""API coverage against jax (issue 16's floors, counted by scripts/coverage.py), and every
shardc name that jax also has takes jax's parameters."""
import importlib
import inspect
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "scripts"))
import coverage  # noqa: E402

COUNTS = coverage.counts()

FLOORS = [   # (jax namespace, floor, helper whose branch reaches it: None once merged)
    ("jax.numpy", 330, None),
    ("jax.lax", 120, None),
    ("jax.nn", 30, None),
    ("jax.random", 35, None),
    ("jax.numpy.linalg", 10, None),
    ("jax.scipy.special", 53, None),
]


@pytest.mark.parametrize("namespace,floor", [
    pytest.param(ns, floor, marks=[pytest.mark.xfail(
        strict=True, reason=f"filled by helper {who}")] if who else [])
    for ns, floor, who in FLOORS])
def test_coverage_floor(namespace, floor):
    have, total, missing = COUNTS[namespace]
    assert have >= floor, (f"{namespace}: shardc has {have} of {total} names, the floor is "
                           f"{floor}; missing: {' '.join(missing)}")


# the names shardc still lacks, pinned: the list only shrinks (a name that goes missing,
# as log2 did in a merge where two branches each left it to the other, fails here)
MISSING = {
    "jax.numpy": {"bitwise_count", "float6_e2m3fn", "float6_e3m2fn", "i0", "int1", "kaiser",
                  "put_along_axis", "sort_complex", "uint1"},
    "jax.numpy.linalg": set(), "jax.numpy.fft": set(), "jax.scipy.special": set(),
    **{ns: set() for ns, _, _ in coverage.NAMESPACES if ns.startswith(("jax.scipy.", "jax.ops"))
       and ns != "jax.scipy.special"},
}


@pytest.mark.parametrize("namespace", sorted(MISSING))
def test_no_name_goes_missing(namespace):
    _, _, missing = COUNTS[namespace]
    assert set(missing) <= MISSING[namespace], sorted(set(missing) - MISSING[namespace])


# keyword parameters of jax's that shardc does not take, everywhere: out_sharding (the
# creation ops have it; the rest arrive with explicit sharding), accuracy modes,
# axis_index_groups, and the out=/where= of jax's ufunc objects (jax raises
# NotImplementedError for both). device= is checked: every op of jax's with it has it.
IGNORED = {"out_sharding", "accuracy", "axis_index_groups", "_dot_general"}
UFUNC_IGNORED = {"out", "where"}

# deliberate differences, each with its reason
ALLOWED = {
    "shardc.numpy.set_printoptions": "NumPy's own function (jax wraps it in *args)",
    "shardc.numpy.pad": "constant_values is a named parameter (jax takes it in **kwargs)",
    "shardc.numpy.astype": "NumPy's array-API signature; jax's is positional-only",
    "shardc.lax.all_gather": "to= (jax's varying-manual-axes type) has no meaning in shardc",
    "shardc.lax.optimization_barrier": "operand is positional-or-keyword",
    "shardc.random.key_dtype": "random helper's: impl vs jax's impl_spec (to rename)",
}


def _params(f):
    try:
        sig = inspect.signature(inspect.unwrap(f))
    except (TypeError, ValueError):
        return None
    return list(sig.parameters.values())


def _mismatch(jf, sf):
    """How sf's parameters differ from jf's, or None."""
    jp, sp = _params(jf), _params(sf)
    if jp is None or sp is None:
        return None
    ufunc = any(p.kind == p.VAR_POSITIONAL for p in jp)
    s_kw = {p.name for p in sp if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    s_var_kw = any(p.kind == p.VAR_KEYWORD for p in sp)
    problems = []
    if not ufunc:
        jpos = [p for p in jp if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        spos = [p for p in sp if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(spos) != len(jpos) and not any(p.kind == p.VAR_POSITIONAL for p in sp):
            problems.append(f"positional {[p.name for p in spos]} vs jax's "
                            f"{[p.name for p in jpos]}")
        for j, s in zip(jpos, spos):
            if j.kind == j.POSITIONAL_OR_KEYWORD and j.name != s.name:
                problems.append(f"parameter {s.name!r} is jax's {j.name!r}")
    ignored = IGNORED | (UFUNC_IGNORED if ufunc else set())
    missing = {p.name for p in jp if p.kind == p.KEYWORD_ONLY} - ignored - s_kw
    if missing and not s_var_kw:
        problems.append(f"no keyword {sorted(missing)}")
    return "; ".join(problems) or None


def test_signatures_match_jax():
    bad = []
    for jname, sname, fonly in coverage.NAMESPACES:
        smod = coverage._module(sname)
        if smod is None:
            continue
        jmod = importlib.import_module(jname)
        for n in sorted(coverage.public(jmod, fonly) & coverage.public(smod)):
            jf, sf = getattr(jmod, n), getattr(smod, n)
            if not callable(jf) or inspect.isclass(jf) or inspect.isclass(sf) or \
                    f"{sname}.{n}" in ALLOWED:
                continue
            why = _mismatch(jf, sf)
            if why:
                bad.append(f"{sname}.{n}: {why}")
    assert not bad, "signatures that differ from jax's:\n" + "\n".join(bad)


def test_the_check_can_fail():
    def jaxs(x, axis=None, *, keepdims=False):
        pass

    def ours(x, dim=None):
        pass
    assert "parameter 'dim' is jax's 'axis'" in _mismatch(jaxs, ours)
    assert "no keyword ['keepdims']" in _mismatch(jaxs, ours)
