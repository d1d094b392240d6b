"""Every intermediate value's sharding in the corpus, against XLA's Shardy.

The result-sharding oracle (tests/oracle.py) sees only a program's results; this one
reads XLA's HLO right after its Shardy pass (dumped with --xla_dump_to, so it must run
in a process of its own: `python tests/oracle/intermediates.py [family...]`) and
matches each op of a case's *expected* output to the next HLO instruction of the same
opcode and shape (so the corpus's expectations, xfail ones included, are what XLA does).
Each case's results are checked as well, from the compiled executable's output
shardings. Prints one JSON object: {"diff": [...], "unmatched": [...]} (an op XLA folded, fused
or expanded differently is unmatched, not wrong). shard_map cases are left out (their
bodies are separate computations in HLO; tests/oracle/test_corpus_vs_xla.py checks their
results)."""
import glob
import json
import os
import re
import sys
import tempfile

DUMP = tempfile.mkdtemp(prefix="shardc-sdy-dump-")
os.environ["XLA_FLAGS"] = ("--xla_force_host_platform_device_count=8 "
                           f"--xla_dump_to={DUMP} --xla_dump_hlo_pass_re=shardy-xla")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "ir"),
                os.path.dirname(os.path.dirname(HERE))]   # this checkout's shardc

from jax._src.lib import xla_client as xc  # noqa: E402

from corpus import all_cases  # noqa: E402
from oracle import hlo_sharding, shardy_for_text  # noqa: E402
from shardc.ir.parse import parse_program  # noqa: E402

# shardc primitive -> HLO opcode, where the names differ (None: nothing to match)
OPCODE = {
    "exp": "exponential", "neg": "negate", "mul": "multiply", "sub": "subtract",
    "div": "divide", "max": "maximum", "min": "minimum", "rem": "remainder",
    "pow": "power", "sin": "sine", "cos": "cosine", "square": "multiply",
    "dot_general": "dot", "broadcast_in_dim": "broadcast", "rev": "reverse",
    "convert_element_type": "convert", "scatter_add": "scatter", "cumsum": "reduce-window",
    "sharding_constraint": None, "sharding_group": None, "inspect_sharding": None,
    "memory_put": None,     # (on CPU a move between memories is no instruction)
    **{f"reduce_{k}": "reduce" for k in ("sum", "max", "min", "prod", "and", "or")},
    **{k: "compare" for k in ("eq", "ne", "lt", "le", "gt", "ge", "eq_to", "lt_to", "le_to")},
    "shift_left": "shift-left", "shift_right_arithmetic": "shift-right-arithmetic",
    "shift_right_logical": "shift-right-logical", "round": "round-nearest-even",
    "round_afz": "round-nearest-afz", "expm1": "exponential-minus-one",
    "log1p": "log-plus-one", "is_finite": "is-finite", "integer_pow": "multiply",
    **{k: "reduce-window" for k in ("cumprod", "cummax", "cummin", "cumlogsumexp")},
    "dynamic_slice": "dynamic-slice", "dynamic_update_slice": "dynamic-update-slice",
    "gather_along": "gather", "scatter_add_along": "scatter",
    "conv_general_dilated": "convolution", "top_k": "topk",
    "approx_top_k": "slice",        # lowered as a sort of (operand, iota), then slices
    "reduce_precision": "reduce-precision", "clz": "count-leading-zeros",
    "population_count": "popcnt", "bitcast_convert_type": "bitcast-convert",
    "conj": "complex",              # complex(real(z), -imag(z))
    # chlo ops XLA expands into many before Shardy runs (the cases' results check them)
    **{k: None for k in ("erf_inv", "lgamma", "digamma", "bessel_i1e", "polygamma", "zeta",
                         "nextafter")},
    # LAPACK custom calls: tuple-valued (factor and info) but for triangular_solve
    "triangular_solve": "custom-call", "ormqr": "custom-call",
    **{k: None for k in ("cholesky", "lu", "qr", "eigh", "svd", "eig", "geqrf", "schur",
                         "hessenberg", "tridiagonal", "geqp3", "tridiagonal_solve",
                         "lu_pivots_to_permutation")},      # (the last one a loop)
    # identities in the lowering
    "copy": None, "stop_gradient": None, "custom_vjp_out": None,
}
_INSTR = re.compile(r"\s*(?:ROOT )?%(\S+) = \w+\[([\d,]*)\]\S* ([\w-]+)\(")
_SHARDING = re.compile(r"sharding=(\{.*?\})(?:, metadata|, backend|, frontend_attributes|$)")
# a tuple-valued instruction (sort of several operands, topk): its first element
_TUPLE = re.compile(r"\s*(?:ROOT )?%(\S+) = \(\w+\[([\d,]*)\][^)]*\) ([\w-]+)\(")
_TUPLE_SHARDING = re.compile(r"sharding=\{(\{[^{}]*\})")


def _instructions(hlo):
    out = []
    for line in hlo.splitlines():
        m = _INSTR.match(line)
        if m:
            sh = _SHARDING.search(line)
            out.append((m.group(3), m.group(2), sh.group(1) if sh else "{replicated}"))
            continue
        m = _TUPLE.match(line)
        if m:
            sh = _TUPLE_SHARDING.search(line)
            out.append((m.group(3), m.group(2), sh.group(1) if sh else "{replicated}"))
    return out


def check(case):
    before = set(glob.glob(f"{DUMP}/*after_shardy-xla*"))
    results = [b for _, b in shardy_for_text(case.src)]
    new = sorted(set(glob.glob(f"{DUMP}/*after_shardy-xla*")) - before)
    p = parse_program(case.want)     # the corpus's claim (shardc's output but for xfails)
    # the program's results, as XLA compiled them
    diff = [f"{case.id}: result {i} expected {s}, XLA {b}"
            for i, (s, v, b) in enumerate(zip(p.out_shardings, p.outputs, results))
            if hlo_sharding(s, v.aval.ndim, p.mesh) != b]
    if not new:
        return diff, [f"{case.id}: no HLO dump"]
    with open(new[0]) as f:
        instrs = _instructions(f.read())
    unmatched, pos = [], 0
    for op in p.ops:
        opcode = OPCODE.get(op.prim.name, op.prim.name)
        if opcode is None or not op.outputs:
            continue
        v = op.outputs[0]
        dims = ",".join(map(str, v.aval.shape))
        k = next((i for i in range(pos, len(instrs))
                  if instrs[i][0] == opcode and instrs[i][1] == dims), None)
        if k is None:
            unmatched.append(f"{case.id}: {op.prim.name}[{dims}]")
            continue
        pos = k + 1
        if xc.HloSharding.from_string(instrs[k][2]) != \
                hlo_sharding(v.sharding, v.aval.ndim, p.mesh):
            diff.append(f"{case.id}: {op.prim.name}[{dims}] expected {v.sharding}, "
                        f"XLA {instrs[k][2]}")
    return diff, unmatched


def main(families):
    diff, unmatched = [], []
    for c in all_cases():
        if (families and c.file not in families) or "shard_map(" in c.src:
            continue
        d, u = check(c)
        diff += d
        unmatched += u
    print(json.dumps({"diff": diff, "unmatched": unmatched}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
