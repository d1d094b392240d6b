"""shardc.report: the collectives XLA inserted (kind, bytes, mesh axes, the user's line)
on known programs, the HLO parser on every replica-group spelling, and the report."""
import inspect

import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.tools import hlo
from shardc.tools.report import axes_of, collectives, report


def put(mesh, shape, spec):
    return shardc.device_put(np.ones(shape, np.float32), NamedSharding(mesh, spec))


def line_of(fun, text):
    """The line number of the first source line of `fun` containing `text`."""
    lines, start = inspect.getsourcelines(fun)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


def mlp(x, w1, w2):
    h = shardc.nn.relu(x @ w1)
    return h @ w2          # second matmul: partial sums over 'y' -> one all-reduce


def test_megatron_mlp_needs_one_all_reduce_at_the_second_matmul(mesh2x4):
    args = [put(mesh2x4, (64, 256), P("x", None)), put(mesh2x4, (256, 1024), P(None, "y")),
            put(mesh2x4, (1024, 256), P("y", None))]
    compiled = shardc.jit(mlp).lower(*args).compile()
    [c] = collectives(compiled.as_text(), mesh2x4)
    assert c.kind == "all-reduce"
    assert c.axes == ("y",)
    assert c.groups == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert c.bytes == 32 * 256 * 4                # the [64/2, 256] f32 partial sum
    assert c.loc[0] == __file__ and c.loc[1] == line_of(mlp, "return h @ w2")
    assert c.op == "dot_general"
    assert str(c).startswith("all-reduce f32[32,256] 32.0 KiB over {y} at test_report.py:")

    r = report(compiled)
    by_name = {row.name: row for row in r.rows}
    # relu is a custom_vjp: a custom_vjp_call op, then the max of its region
    assert [row.op for row in r.rows] == ["dot_general", "custom_vjp_call", "max",
                                          "dot_general"]
    assert by_name["%4"].collectives == [c] and not by_name["%0"].collectives
    assert by_name["%0"].sharding == "[{x}, {y}]" and by_name["%0"].local == "f32[32,256]"
    assert by_name["%0"].bytes == 32 * 256 * 4
    assert r.memory["argument"] == (32 * 256 + 256 * 256 + 256 * 256) * 4
    assert r.cost["flops"] > 0
    text = r.text()
    assert "collectives XLA inserted: 1 (32.0 KiB per device)" in text
    assert f"test_report.py:{c.loc[1]}" in text and "memory per device: arguments" in text
    j = r.json()
    assert j["collective_bytes"] == c.bytes and j["collectives"][0]["axes"] == ["y"]
    assert j["ops"][3]["collectives"] == [c.name]      # the rows: the region's max too


def test_replicating_constraint_all_gathers_both_axes(mesh2x4):
    def f(x):
        return shardc.with_sharding_constraint(x * 2, P(None, None))
    with shardc.set_mesh(mesh2x4):
        text = shardc.jit(f).lower(put(mesh2x4, (64, 256), P("x", "y"))).compile().as_text()
    cs = collectives(text, mesh2x4)
    assert sorted(c.kind for c in cs) == ["all-gather", "all-gather"]
    assert sorted(c.axes for c in cs) == [("x",), ("y",)]
    # gathering 4 column tiles gives [32, 256], then 2 row tiles [64, 256]
    assert sorted(c.bytes for c in cs) == [32 * 256 * 4, 64 * 256 * 4]
    assert {c.loc[1] for c in cs} == {line_of(f, "with_sharding_constraint")}


def test_moving_a_sharded_dim_is_an_all_to_all(mesh2x4):
    def f(x):
        return shardc.with_sharding_constraint(x * 2, P(None, "y"))
    with shardc.set_mesh(mesh2x4):
        text = shardc.jit(f).lower(put(mesh2x4, (64, 256), P("y", None))).compile().as_text()
    [c] = collectives(text, mesh2x4)
    assert c.kind == "all-to-all" and c.axes == ("y",)
    assert c.bytes == 16 * 256 * 4               # the [64/4, 256] shard, in 4 pieces


def test_shifting_a_sharded_dim_is_a_collective_permute(mesh2x4):
    def f(x):
        return snp.concatenate([x[1:], x[:1]], axis=0)
    text = shardc.jit(f).lower(put(mesh2x4, (64, 8), P("y", None))).compile().as_text()
    [c] = collectives(text, mesh2x4)
    assert c.kind == "collective-permute" and c.axes == ("y",)
    assert (1, 0) in c.pairs and (0, 3) in c.pairs and len(c.pairs) == 8
    assert c.bytes == 8 * 4 and c.op == "concatenate"


def test_no_collectives_when_shardings_agree(mesh2x4):
    text = shardc.jit(lambda x: snp.sin(x) * 2).lower(
        put(mesh2x4, (16, 16), P("x", "y"))).compile().as_text()
    assert collectives(text, mesh2x4) == []


# ------------------------------------------------------------- the parser on text

ASYNC = """HloModule m, num_partitions=8

FileNames
1 "/src/model.py"

FunctionNames
1 "dot_general"

FileLocations
1 {file_name_id=1 function_name_id=1 line=42 end_line=42 column=0 end_column=0}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (p: bf16[16,128], q: f32[64,32], r: f32[8]) -> f32[8] {
  %p = bf16[16,128]{1,0} parameter(0)
  %q = f32[64,32]{1,0} parameter(1)
  %r = f32[8]{0} parameter(2)
  %ags = (bf16[16,128]{1,0}, bf16[64,128]{1,0}) all-gather-start(%p), channel_id=1, replica_groups=[2,4]<=[8], dimensions={0}, use_global_device_ids=true, metadata={op_name="dot_general" stack_frame_id=1}
  %agd = bf16[64,128]{1,0} all-gather-done(%ags)
  %rs = f32[16,32]{1,0} reduce-scatter(%q), channel_id=2, replica_groups=[4,2]<=[2,4]T(1,0), dimensions={0}, to_apply=%add, metadata={op_name="add" source_file="/src/other.py" source_line=7}
  %ar = (f32[8]{0}, f32[64,32]{1,0}) all-reduce(%r, %q), channel_id=3, replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=%add
  %neg = f32[8]{0} negate(%r), metadata={op_name="neg" stack_frame_id=1}
  %cp = f32[8]{0} collective-permute(%neg), channel_id=4, source_target_pairs={{0,4},{4,0}}
  %ars = f32[8]{0} all-reduce-start(%cp), channel_id=5, replica_groups=mesh['a'=2,'b'=4] {'b':(1)2}, to_apply=%add
  ROOT %ard = f32[8]{0} all-reduce-done(%ars)
}
"""  # noqa: E501


def test_parser_async_iota_tuple_permute_and_sub_axes():
    cs = collectives(ASYNC, {"a": 2, "b": 4})
    assert [c.kind for c in cs] == ["all-gather", "reduce-scatter", "all-reduce",
                                    "collective-permute", "all-reduce"]
    ag, rs, ar, cp, ar2 = cs
    # async all-gather: the gathered bf16[64,128] from the -done; groups over 'b'
    assert ag.bytes == 64 * 128 * 2 and ag.type.startswith("bf16[64,128]")
    assert ag.axes == ("b",) and ag.loc == ("/src/model.py", 42) and ag.op == "dot_general"
    # reduce-scatter: the input is the larger side; iota groups {0,4},{1,5},... -> 'a'
    assert rs.bytes == 64 * 32 * 4 and rs.groups[0] == [0, 4] and rs.axes == ("a",)
    assert rs.loc == ("/src/other.py", 7)
    # a tuple all-reduce over every device counts both buffers
    assert ar.bytes == (8 + 64 * 32) * 4 and ar.axes == ("a", "b") and ar.loc is None
    # no metadata on the permute: its operand's line stands in
    assert cp.axes == ("a",) and cp.pairs == [(0, 4), (4, 0)] and cp.loc[1] == 42
    # mesh-axes groups with a sub-axis: the major half of 'b'
    assert ar2.groups == [[0, 2], [1, 3], [4, 6], [5, 7]] and ar2.axes == ("b:(1)2",)


def test_device_group_spellings():
    assert hlo.groups_from_text("{}", 4) == [[0, 1, 2, 3]]
    assert hlo.groups_from_text("{{0,2},{1,3}}", 4) == [[0, 2], [1, 3]]
    assert hlo.groups_from_text("[2,4]<=[8]", 8) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert hlo.groups_from_text("[4,2]<=[2,4]T(1,0)", 8) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    # XLA's mesh form, as CPU jaxlib 0.10 prints it, with a transposed device order
    g = hlo.groups_from_text("mesh['axis_0'=1,'axis_1'=4,'axis_2'=2], "
                             "device_ids=([2,4]T(1,0)) {'axis_1'}", 8)
    assert g == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert hlo.groups_from_text("mesh['x'=2,'y'=4] {'x','y'}", 8) == [list(range(8))]
    assert hlo.groups_from_text("mesh['y'=4] {'y':(2)2}", 4) == [[0, 1], [2, 3]]


def test_axes_of_groups():
    mesh = [("x", 2), ("y", 4)]
    assert axes_of([[0, 4], [1, 5]], mesh) == ("x",)
    assert axes_of([[0, 1, 2, 3]], mesh) == ("y",)
    assert axes_of([list(range(8))], mesh) == ("x", "y")
    assert axes_of([[0, 2], [1, 3]], mesh) == ("y:(1)2",)     # major half of y
    assert axes_of([[0, 1], [2, 3]], mesh) == ("y:(2)2",)     # minor half of y
    assert axes_of([[0, 5]], mesh) == ("?",)                  # no axis pattern
    assert axes_of([[0]], mesh) == ()


def test_type_bytes():
    assert hlo.type_bytes("f32[32,256]{1,0}") == 32 * 256 * 4
    assert hlo.type_bytes("(bf16[2,3], pred[4], s32[])") == 12 + 4 + 4
    assert hlo.type_bytes("f8e4m3fn[10]") == 10


def test_collectives_of_one_of_several_same_ops_on_a_line_say_so():
    # XLA names a collective's cause by primitive and line: with two dot_generals on one
    # line the row cannot say which made the all-reduce, and says so (it showed it on
    # the first, which needs no communication, as a fact)
    mesh = shardc.make_mesh((2, 4), ("data", "model"), axis_types=(shardc.AxisType.Auto,) * 2)
    put = lambda a, *s: shardc.device_put(a, NamedSharding(mesh, P(*s)))     # noqa: E731
    x = put(np.ones((64, 256), np.float32), "data", None)
    w1 = put(np.ones((256, 1024), np.float32), None, "model")
    w2 = put(np.ones((1024, 256), np.float32), "model", None)

    def mlp(x, w1, w2):
        return shardc.nn.relu(x @ w1) @ w2
    r = report(shardc.jit(mlp).lower(x, w1, w2).compile())
    rows = [row for row in r.rows if row.collectives]
    assert [row.shared for row in rows] == [2]
    assert "of one of the 2 dot_general ops at this line" in r.text()
