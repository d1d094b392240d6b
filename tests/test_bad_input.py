"""Bad input, one row per kind: each gives a clear error (a ShardcError, or the type jax
raises), naming the user's file:line where there is one, with no shardc frames at the
end of the traceback and no internal text (internal error, MLIR, Python reprs of IR)."""
import os
import traceback

import pytest

import shardc
from shardc.tools import cli
from shardc.ir.parse import ParseError, parse_program

USER = "/tmp/shardc_bad_input/user_code.py"    # the "user's file" snippets run as
LEAK = ("internal error", "Traceback", "stablehlo.", "func.func", "tensor<", "shardc/",
        "object at 0x", "KeyError", "IndexError")

SETUP = """\
import jax, numpy as np, shardc, shardc.numpy as snp
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = shardc.make_mesh((2, 4), ("x", "y"), axis_types=(shardc.AxisType.Auto,) * 2)
x = np.ones((8, 4), np.float32)
xi = np.arange(8, dtype=np.int32)
def two(a, b):
    return a + b
"""

# (id, snippet: the error is raised by the line marked `#!`, else the last line,
#  expected exception type, a substring of the message, whether it names file:line)
API = [
    ("static_argnums_range", "shardc.jit(two, static_argnums=5)", ValueError,
     "static_argnums=(5,)", True),
    ("static_argnums_negative_range", "shardc.jit(two, static_argnums=-3)", ValueError,
     "static_argnums", True),
    ("static_argnums_not_int", "shardc.jit(two, static_argnums='a')", TypeError,
     "must be ints", True),
    ("static_argnames_unknown", "shardc.jit(two, static_argnames='zz')", ValueError,
     "['zz']", True),
    ("static_argnames_unknown_list", "shardc.jit(two, static_argnames=('a', 'q'))",
     ValueError, "['q']", True),
    ("jit_not_callable", "shardc.jit(3)", TypeError, "needs a function", False),
    ("mesh_duplicate_names", "shardc.make_mesh((2, 4), ('x', 'x'))", ValueError,
     "more than once", True),
    ("mesh_zero_size", "shardc.make_mesh((0,), ('x',))", ValueError, "positive", True),
    ("mesh_negative_size", "shardc.make_mesh((-2,), ('x',))", ValueError, "positive", True),
    ("mesh_float_size", "shardc.make_mesh((2.5,), ('x',))", ValueError, "positive", True),
    ("mesh_axis_count", "shardc.make_mesh((2, 4), ('x',))", ValueError, "one name per axis",
     True),
    ("mesh_too_many_devices", "shardc.make_mesh((4, 4), ('x', 'y'))", ValueError,
     "needs 16 devices", True),
    ("mesh_empty_name", "shardc.make_mesh((8,), ('',))", ValueError, "non-empty", True),
    ("too_few_args", "shardc.jit(two)(x)", TypeError, "missing 1 required positional", False),
    ("too_many_args", "shardc.jit(two)(x, x, x)", TypeError, "positional argument", False),
    ("unknown_keyword", "shardc.jit(two)(x, x, z=1)", TypeError, "unexpected keyword", False),
    ("static_argnames_not_str", "shardc.jit(two, static_argnames=(1,))", TypeError,
     "must be strings", True),
    # (raised by jaxlib's C++ dispatch, as for jax.jit)
    ("unhashable_static", "shardc.jit(two, static_argnums=1)(x, [1, 2])", ValueError,
     "Non-hashable static arguments", False),
    ("in_shardings_tree", "shardc.jit(lambda a: a, in_shardings=((None, None),))"
     "(np.arange(1000.))", shardc.ShardcError, "f64[1000]", True),
    ("in_shardings_count", "shardc.jit(two, in_shardings=(None,))(x, x)", shardc.ShardcError,
     "in_shardings has 1 entries", True),
    ("in_shardings_bare_spec", "shardc.jit(lambda a: a, in_shardings=P('x'))(x)",
     shardc.ShardcError, "needs a mesh", True),
    ("in_shardings_unknown_axis", "with shardc.set_mesh(mesh):\n"
     "    shardc.jit(lambda a: a, in_shardings=P('z'))(x)", shardc.ShardcError, "'z'", True),
    ("in_shardings_indivisible",
     "shardc.jit(lambda a: a, in_shardings=NamedSharding(mesh, P('y')))(np.ones(6))",
     shardc.ShardcError, "6", True),
    ("grad_non_scalar", "shardc.grad(lambda a: a * 2.0)(x)", shardc.ShardcError,
     "scalar output", True),
    ("grad_argnums_range", "shardc.grad(lambda a: a.sum(), argnums=3)(x)",
     shardc.ShardcError, "out of range", True),
    ("grad_int_input", "shardc.grad(lambda a: a.sum())(xi)", TypeError, "int32",
     True),
    ("grad_not_callable", "shardc.grad(3)", TypeError, "callable", True),
    ("grad_argnums_str", "shardc.grad(lambda a: a.sum(), argnums='a')(x)", TypeError,
     "argnums", True),
    ("eager_broadcast", "snp.add(np.ones(3), np.ones(4))", shardc.ShardcError,
     "cannot be broadcast", True),
    ("eager_reshape", "snp.reshape(np.ones(3), (2, 2))", shardc.ShardcError,
     "cannot reshape", True),
    ("jit_reshape", "f = shardc.jit(lambda a: snp.reshape(a, (3, 3)))  #!\nf(x)",
     shardc.ShardcError, "cannot reshape", True),
    ("jit_matmul_mismatch", "shardc.jit(lambda a: a @ a)(x)", shardc.ShardcError,
     "", True),
    ("sum_axis_range", "shardc.jit(lambda a: snp.sum(a, axis=5))(x)", shardc.ShardcError,
     "axis", True),
    ("transpose_bad_perm", "shardc.jit(lambda a: snp.transpose(a, (0, 0)))(x)",
     shardc.ShardcError, "", True),
    ("concat_rank", "shardc.jit(lambda a: snp.concatenate([a, a[0]]))(x)",
     shardc.ShardcError, "", True),
    ("setitem", "def f(a):\n    a[0] = 1.0  #!\n    return a\nshardc.jit(f)(x)",
     shardc.ShardcError, "immutable", True),
    ("bool_of_tracer", "def f(a):\n    if a.sum() > 0:  #!\n        return a\n    return -a\n"
     "shardc.jit(f)(x)", TypeError, "", True),
    ("float_of_tracer", "shardc.jit(lambda a: float(a.sum()))(x)", TypeError, "", True),
    ("shift_float", "shardc.jit(lambda a: a << 1)(x)", TypeError, "integer", True),
    ("rshift_float", "shardc.jit(lambda a: 1 >> a)(x)", TypeError, "integer", True),
    ("round_bool", "shardc.jit(lambda a: snp.round(a > 0))(x)", shardc.ShardcError,
     "boolean", True),
    ("wsc_unknown_axis", "with shardc.set_mesh(mesh):\n"
     "    shardc.jit(lambda a: shardc.with_sharding_constraint(a, P('q')))(x)",
     shardc.ShardcError, "'q'", True),
    ("spec_axis_twice", "with shardc.set_mesh(mesh):\n"
     "    shardc.jit(lambda a: a, in_shardings=P('x', 'x'))(x)", shardc.ShardcError, "'x'",
     True),
    ("compiled_wrong_shape", "c = shardc.jit(lambda a: a).lower(x).compile()\n"
     "c(np.ones((2, 2), np.float32))", shardc.ShardcError, "compiled for", True),
    ("compiled_wrong_count", "c = shardc.jit(lambda a: a).lower(x).compile()\nc(x, x)",
     shardc.ShardcError, "takes 1 array", True),
    ("string_argument", "shardc.jit(lambda a: a)('hello')", shardc.ShardcError, "dtype <U5",
     True),
    ("string_operand", "shardc.jit(lambda a: snp.exp('a'))(x)", TypeError, "", True),
    ("astype_unknown", "shardc.jit(lambda a: a.astype('q99'))(x)", shardc.ShardcError, "q99",
     True),
    ("zeros_negative", "snp.zeros((-1,))", TypeError, "negative", True),
    ("jit_zeros_negative", "shardc.jit(lambda a: a + snp.zeros((8, -4)))(x)", TypeError,
     "negative", True),
    ("axis_float", "shardc.jit(lambda a: snp.sum(a, axis=1.5))(x)", TypeError,
     "axis must be an int", True),
    ("axis_float_in_tuple", "shardc.jit(lambda a: snp.sum(a, axis=(0, 1.5)))(x)", TypeError,
     "axis must be an int", True),
    ("wsc_string", "shardc.jit(lambda a: shardc.with_sharding_constraint(a, 'x'))(x)",
     TypeError, "got 'x'", True),
    ("in_shardings_string", "shardc.jit(lambda a: a, in_shardings='x')(x)", TypeError,
     "got 'x'", True),
    ("donate_argnums_range", "shardc.jit(two, donate_argnums=5)", ValueError,
     "donate_argnums=(5,)", True),
    ("list_operand", "shardc.jit(lambda a: snp.exp([1.0, 2.0]))(x)", TypeError, "a list",
     True),
]


def _run(snippet, tmp_path):
    src = SETUP + snippet
    lines = src.splitlines()
    marked = [i for i, ln in enumerate(lines) if ln.rstrip().endswith("#!")]
    line = (marked[0] if marked else len(lines) - 1) + 1
    code = compile(src, USER, "exec")
    exec(code, {"__name__": "user_code"})
    return line


@pytest.mark.parametrize("row", API, ids=[r[0] for r in API])
def test_api_bad_input(row, tmp_path):
    _, snippet, exc, phrase, names_line = row
    with pytest.raises(exc) as ei:
        line = _run(snippet, tmp_path)
    e = ei.value
    msg = str(e)
    lines = (SETUP + snippet).splitlines()
    marked = [i for i, ln in enumerate(lines) if ln.rstrip().endswith("#!")]
    line = (marked[0] if marked else len(lines) - 1) + 1
    assert phrase in msg, msg
    if names_line:
        assert msg.startswith(f"{USER}:"), msg
        if "\n" not in snippet or marked:
            assert msg.startswith(f"{USER}:{line}:"), msg
    assert len(msg) < 600, msg
    for leak in LEAK:
        assert leak not in msg.replace(USER, ""), (leak, msg)
    # the traceback ends at the user's frame: shardc's own frames are filtered out
    frames = traceback.extract_tb(e.__traceback__)
    assert frames[-1].filename == USER, [(f.filename, f.lineno) for f in frames]
    assert not any(os.sep + "shardc" + os.sep in f.filename for f in frames), frames


def test_filtering_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("SHARDC_TRACEBACK_FILTERING", "off")
    with pytest.raises(shardc.ShardcError) as ei:
        shardc.make_mesh((2, 4), ("x", "x"))
    frames = traceback.extract_tb(ei.value.__traceback__)
    assert frames[-1].filename.endswith("meshes.py")


GOOD_IR = """mesh <x=2, y=4>
func @f(%a: f32[8,4] [{x}, {}], %b: f32[4,4]) -> (f32[8,4]) {
  %0: f32[8,4] = sin(%a) loc("m.py":3)
  %1: f32[8,4] = dot_general(%0, %b) {contracting=((1,), (0,)), batch=((), ())}
  %2: f32[8,4] = mul(%1, 2.0:f32)
  return %2
}
"""

# (id, edit of GOOD_IR (old, new) or whole text, substring, line of the error)
IR = [
    ("empty", "", "expected 'func @name", 1),
    ("mesh_only", "mesh <x=2>\n", "expected 'func @name", 1),
    ("bad_mesh", ("mesh <x=2, y=4>", "mesh <x=two>"), "malformed line", 1),
    ("mesh_zero_axis", ("mesh <x=2, y=4>", "mesh <x=0, y=4>"), "sizes must be positive", 1),
    ("mesh_same_names", ("mesh <x=2, y=4>", "mesh <x=2, x=4>"), "names distinct", 1),
    ("bad_result_sharding", ("-> (f32[8,4])", "-> (f32[8,4] [{x}, {])"), "unbalanced", 2),
    ("mesh_not_mesh", ("mesh <x=2, y=4>", "mesh 7"), "expected a mesh", 1),
    ("bad_header", ("-> (f32[8,4]) {", "-> f32[8,4] {"), "expected 'func @name", 2),
    ("unknown_dtype_arg", ("%b: f32[4,4]", "%b: q99[4,4]"), "unknown element type 'q99'", 2),
    ("unknown_dtype_op", ("%0: f32[8,4] =", "%0: q99[8,4] ="), "'q99'", 3),
    ("bad_type", ("%0: f32[8,4] =", "%0: f32 ="), "bad type", 3),
    ("negative_dim", ("%b: f32[4,4]", "%b: f32[-4,4]"), "bad type", 2),
    ("bad_dim", ("%b: f32[4,4]", "%b: f32[4,x]"), "malformed line", 2),
    ("bad_float_literal", ("2.0:f32", "2.0x:f32"), "could not convert", 5),
    ("bad_int_param", ("contracting=((1,), (0,))", "contracting=((1q,), (0,))"),
     "malformed line", 4),
    ("param_without_value", ("batch=((), ())", "batch"), "malformed line", 4),
    ("missing_equals", ("%2: f32[8,4] = mul", "%2: f32[8,4] mul"), "expected '%name", 5),
    ("missing_paren", ("mul(%1, 2.0:f32)", "mul %1"), "expected an op", 5),
    ("unbalanced", ("mul(%1, 2.0:f32)", "mul(%1, 2.0:f32"), "unbalanced", 5),
    ("undefined_value", ("mul(%1,", "mul(%9,"), "use of undefined value %9", 5),
    ("defined_twice", ("%2: f32[8,4] = mul", "%1: f32[8,4] = mul"), "defined twice", 5),
    ("arg_defined_twice", ("%b: f32[4,4]", "%a: f32[4,4]"), "defined twice", 2),
    ("unknown_op", ("sin(%a)", "sinx(%a)"), "unknown op 'sinx'", 3),
    ("missing_close", ("  return %2\n}\n", "  return %2\n"), "missing '}'", 6),
    ("text_after_end", GOOD_IR + "%3: f32[1] = sin(%a)\n", "after the end", 8),
    ("bad_sharding", ("[{x}, {}]", "[{x}, {}"), "unbalanced", 2),
    ("bad_sharding_axis", ("[{x}, {}]", "[{x-1}, {}]"), "bad mesh axis", 2),
    ("result_count", ("-> (f32[8,4])", "-> (f32[8,4], f32[8,4])"), "declares 2 results", 2),
    ("bad_result_type", ("-> (f32[8,4])", "-> (f32[8,q])"), "bad result type", 2),
    ("bad_literal_type", ("2.0:f32", "2.0:q7"), "q7", 5),
]


def _ir_text(edit):
    if isinstance(edit, str):
        return edit
    old, new = edit
    assert old in GOOD_IR
    return GOOD_IR.replace(old, new, 1)


@pytest.mark.parametrize("row", IR, ids=[r[0] for r in IR])
def test_ir_parse_bad_input(row):
    _, edit, phrase, line = row
    with pytest.raises(ParseError) as ei:
        parse_program(_ir_text(edit))
    msg = ei.value.message
    assert msg.startswith(f"line {line}:"), msg
    assert phrase in msg, msg
    for leak in LEAK:
        assert leak not in msg, (leak, msg)


def test_good_ir_parses():
    parse_program(GOOD_IR)     # the rows above are mistakes in this text only


def test_truncated_ir_is_always_a_parse_error():
    """Cut a valid program's text anywhere: always a ParseError with line:col."""
    for i in range(len(GOOD_IR) - 2):
        with pytest.raises(ParseError, match=r"^line \d+:\d+: "):
            parse_program(GOOD_IR[:i])


# `shardc propagate FILE.ir`: (id, file bytes, substring, FILE:LINE in the message)
CLI_IR = [
    ("operand_count", GOOD_IR.replace("sin(%a)", "max(%a)"), "takes 2 operands, got 1", 3),
    ("operand_count_extra", GOOD_IR.replace("sin(%a)", "sin(%a, %a)"),
     "takes 1 operand, got 2", 3),
    ("declared_result_type", GOOD_IR.replace("%0: f32[8,4] = sin", "%0: f32[8,5] = sin"),
     "do not match the op's shape rule", 3),
    ("declared_result_dtype", GOOD_IR.replace("%0: f32[8,4] = sin", "%0: i32[8,4] = sin"),
     "do not match the op's shape rule", 3),
    ("bad_params", GOOD_IR.replace("contracting=((1,), (0,)), ", ""), "dot_general", 4),
    ("unknown_axis", GOOD_IR.replace("[{x}, {}]", "[{z}, {}]"), "unknown mesh axis", None),
    ("no_mesh", GOOD_IR.replace("mesh <x=2, y=4>\n", ""), "has no mesh", 1),
    ("parse_error_col", GOOD_IR.replace("sin(%a)", "sinx(%a)"), "unknown op", "3:18"),
    ("constraint_unsharded", GOOD_IR.replace("%2: f32[8,4] = mul(%1, 2.0:f32)",
                                             "%2: f32[8,4] = sharding_constraint(%1) "
                                             "{sharding=[{x}, {}]}"),
     "needs a sharding", 5),
    ("param_kind", GOOD_IR.replace("-> (f32[8,4])", "-> (f32[4])").replace(
        "%2: f32[8,4] = mul(%1, 2.0:f32)", "%2: f32[4] = reduce_sum(%1) {axes=0}"),
     "check the ops' parameters", None),
    ("missing_param", GOOD_IR.replace("{contracting=((1,), (0,)), batch=((), ())}",
                                      "{batch=((), ())}"), "needs the parameter(s)", 4),
    ("unknown_param", GOOD_IR.replace("batch=((), ())}", "batch=((), ()), zz=1}"),
     "unknown parameter(s) ['zz']", 4),
    ("result_sharding_rank", GOOD_IR.replace("-> (f32[8,4])", "-> (f32[8,4] [{x}])"),
     "rank 1", None),
    ("region_op_missing_param", """\
mesh <x=2, y=4>
func @f(%a: f32[8,8] [{}, {}]) -> (f32[8,2]) {
  %0: f32[8,2] = shard_map(%a) {in_specs=([{x}, {y}],), out_specs=([{x}, {}],), \
mesh=<x=2, y=4>, check_vma=True} {
  ^(%1: f32[4,2] [{}, {}]):
    %2: f32[4,2] [{}, {}] = sin(%1)
    return %2
  }
  return %0
}
""", "needs the parameter(s) ['manual_axes']", 3),
    ("non_utf8", b"mesh <x=2>\n\xff\xfe", "not UTF-8", 2),
]


def _cli(capsys, *argv):
    code = cli.main(list(argv))
    return code, capsys.readouterr().err


@pytest.mark.parametrize("row", CLI_IR, ids=[r[0] for r in CLI_IR])
def test_cli_propagate_bad_input(row, tmp_path, capsys):
    _, content, phrase, line = row
    f = tmp_path / "bad.ir"
    (f.write_bytes if isinstance(content, bytes) else f.write_text)(content)
    code, err = _cli(capsys, "propagate", str(f))
    assert code == 1, err
    where = f"{f}:{line}:" if line is not None else f"{f}:"
    assert err.startswith(where) and phrase in err and err.count("\n") == 1, err
    for leak in LEAK:
        assert leak not in err.replace(str(f), ""), (leak, err)


CLI_PY = [
    ("binary_py", bytes(range(1, 256)) * 2, "SyntaxError", "{f}:1"),
    ("null_bytes_py", b"def f(x):\n    return x\n\x00\x01", "null bytes", "{f}"),
    ("latin1_py", b"s = '\xff'\ndef f(x):\n    return x\n", "utf-8", "{f}:1"),
    ("syntax_error_py", b"def f(x):\n    return x +\n", "SyntaxError", "{f}:2"),
]


@pytest.mark.parametrize("row", CLI_PY, ids=[r[0] for r in CLI_PY])
def test_cli_bad_python_file(row, tmp_path, capsys, monkeypatch):
    _, content, phrase, where = row
    monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))
    f = tmp_path / "prog.py"
    f.write_bytes(content)
    code, err = _cli(capsys, "ir", f"{f}:f", "--arg", "f32[4]")
    assert code == 1, err
    assert err.startswith(where.format(f=f) + ":") and phrase in err, err
    assert "None" not in err and "internal error" not in err, err


def test_mutated_ir_is_always_a_clear_error():
    """Random small edits of valid IR text: parsing, verifying and propagating it either
    work or raise a ShardcError (never a KeyError, IndexError... from inside)."""
    import random

    from shardc.propagate import passes
    from shardc.ir.verify import verify
    rng = random.Random(0)
    alphabet = "%:=(){}[],<>0123456789abxyzf.-~ \n\"'"
    for _ in range(400):
        t = list(GOOD_IR)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(t))
            r = rng.random()
            if r < 0.4:
                del t[i]
            elif r < 0.8:
                t[i] = rng.choice(alphabet)
            else:
                t.insert(i, rng.choice(alphabet))
        text = "".join(t)
        try:
            p = parse_program(text)
            verify(p)
            if p.mesh is not None:
                passes.prepare(p)
                passes.propagate(p)
        except shardc.ShardcError as e:
            assert "internal" not in e.message, (text, e.message)
