"""A fixed-seed slice of the differential fuzzer (`make fuzz N=...` runs more): random
programs (control flow and gradients through it included) x meshes x shardings under
shardc.jit and jax.jit, no value, dtype or weak type mismatch and no internal error
allowed; about a fifth run on meshes of Explicit axes, where every output's and line's
jax.typeof must match too and shardc may not reject what jax accepts; another slice runs
with shardc.AUTO for every in/out sharding (values compared). Each program runs
in a worker process, so an XLA abort is an outcome, not the end of the test run."""
import numpy as np

from fuzz.driver import Workers
from fuzz.gen import Gen
from fuzz.run import BAD
from fuzz.shrink import repro

N_AUTO = 80
N = 110     # control flow and vmap make a program cost ~1.8x: about the time 200 took at first


def failures(seeds, env=None, label=""):
    """The repros of the seeds' programs that end in a BAD outcome."""
    workers = Workers(collectives=False, env=env)
    bad = []
    try:
        for i in seeds:
            res = workers.run(i)
            if res.kind in BAD:
                prog = Gen(np.random.default_rng(i)).program()
                bad.append(repro(prog, i, f"{label}{res.kind}: {res.detail}"))
    finally:
        workers.close()
    return bad


def test_fuzz_slice():
    bad = failures(range(N))
    assert not bad, "\n\n".join(bad)


def test_fuzz_slice_auto():
    # the same programs with every in/out sharding shardc.AUTO: the search's choice,
    # realized and compiled, computes jax.jit's values (seeds past the slice above)
    bad = failures(range(N, N + N_AUTO), {"FUZZ_AUTO": "1"}, "FUZZ_AUTO=1 ")
    assert not bad, "\n\n".join(bad)


def test_slice_has_explicit_programs():
    # the first 30 seeds (generating programs costs): 5 explicit, 2 of them mixed
    progs = [Gen(np.random.default_rng(i)).program() for i in range(30)]
    explicit = [p.explicit for p in progs if p.explicit is not None]
    assert 3 <= len(explicit) <= 10 and any("Auto" in t for t in explicit)


def test_generator_is_deterministic():
    a = Gen(np.random.default_rng(5)).program()
    b = Gen(np.random.default_rng(5)).program()
    assert a.source() == b.source() and a.in_specs == b.in_specs
