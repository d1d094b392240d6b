"""The `shardc` command line: every subcommand in a subprocess (exit codes, outputs),
bad input as one message without a traceback, and --help everywhere."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from shardc.tools import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODEL = textwrap.dedent("""\
    import shardc
    import shardc.numpy as snp
    from shardc import P


    def mlp(x, w1, w2):
        h = shardc.nn.relu(x @ w1)
        return h @ w2


    def constrained(x):
        h = snp.exp(x)
        h = shardc.with_sharding_constraint(h, P(None, "model"))
        return h * 2


    @shardc.jit(in_shardings=(P("data", None), P(None, "model")))
    def layer(x, w):
        return x @ w


    def mismatched(x, w):
        return x @ w


    def buggy(x):
        return x + undefined_name


    def pair(params, x):
        return params["w"] @ x + params["b"]


    def pair_args():
        import jax
        import numpy as np
        from jax.sharding import NamedSharding
        mesh = shardc.make_mesh((2, 4), ("data", "model"), axis_types=(shardc.AxisType.Auto,) * 2)
        w = jax.device_put(np.ones((8, 16), np.float32), NamedSharding(mesh, P("model", None)))
        x = jax.ShapeDtypeStruct((16, 4), np.float32, sharding=NamedSharding(mesh, P(None, "data")))
        return {"w": w, "b": jax.ShapeDtypeStruct((8, 4), np.float32)}, x


    def unsharded_args():
        w, b, x = np.ones((8, 16), "f4"), np.zeros((8, 4), "f4"), np.ones((16, 4), "f4")
        return {"w": w, "b": b}, x


    def broken_args():
        return 1 / 0


    def dict_args():
        return {"x": 1}


    import numpy as np
    """)
MLP_ARGS = ["--mesh", "data=2,model=4", "--arg", "f32[64,256]@P('data',None)",
            "--arg", "f32[256,1024]@P(None,'model')", "--arg", "f32[1024,256]@P('model',None)"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    path = d / "model.py"
    path.write_text(MODEL)
    return str(path)


def shardc_cmd(*args, expect=0):
    """Run `python -m shardc ARGS` in a fresh process; returns (stdout, stderr)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("XLA_FLAGS", None)          # the command sets the device count itself
    env.pop("SHARDC_TRACEBACK", None)
    p = subprocess.run([sys.executable, "-m", "shardc", *args], capture_output=True,
                       text=True, env=env, timeout=120)
    assert p.returncode == expect, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout, p.stderr


def test_ir_explain_names_argument_and_lines(model):
    out, err = shardc_cmd("ir", f"{model}:mlp", *MLP_ARGS, "--explain")
    assert out.startswith("mesh <data=2, model=4>\nfunc @mlp(%x: f32[64,256] [{data}, {}]")
    assert '%4: f32[64,256] [{data}, {}] = dot_general(%1, %w2)' in out
    assert 'loc("model.py":8)' in out
    # relu is a custom_vjp: its max is in the region of a custom_vjp_call op
    assert ("// %3: dim 0 {data} from argument x via max@model.py:7 <- custom_vjp_call "
            "boundary@model.py:7 <- dot_general@model.py:7; dim 1 {model} from argument w1"
            ) in out
    assert err == ""


def test_traced_stage_then_propagate_matches_ir(model, tmp_path):
    traced, _ = shardc_cmd("ir", f"{model}:constrained", "--mesh", "data=2,model=4",
                           "--arg", "f32[64,256]@P('data',None)", "--stage", "traced")
    assert "%0: f32[64,256] = exp(%x)" in traced          # no shardings decided yet
    f = tmp_path / "constrained.ir"
    f.write_text(traced)
    propagated, _ = shardc_cmd("propagate", str(f), "--explain")
    assert "%0: f32[64,256] [{}, {model}] = exp(%x)" in propagated
    assert "from with_sharding_constraint at model.py:13" in propagated
    direct, _ = shardc_cmd("ir", f"{model}:constrained", "--mesh", "data=2,model=4",
                           "--arg", "f32[64,256]@P('data',None)", "--explain")
    assert propagated == direct


def test_ir_json(model):
    out, _ = shardc_cmd("ir", f"{model}:mlp", *MLP_ARGS, "--format", "json")
    j = json.loads(out)
    assert j["function"] == "mlp" and j["mesh"] == {"data": 2, "model": 4}
    assert [v["name"] for v in j["inputs"]] == ["%x", "%w1", "%w2"]
    assert [op["op"] for op in j["ops"]] == ["dot_general", "custom_vjp_call", "dot_general"]
    last = j["ops"][2]
    assert last["loc"] == "model.py:8" and last["operands"] == ["%1", "%w2"]
    [why] = last["results"][0]["why"]
    assert why["from"] == "argument x" and why["axes"] == ["data"]
    assert [h["loc"] for h in why["via"]] == ["model.py:8"] + ["model.py:7"] * 4
    assert j["outputs"] == [{"value": "%4", "type": "f32[64,256]", "sharding": "[{data}, {}]"}]


def test_stablehlo_and_hlo(model):
    out, _ = shardc_cmd("stablehlo", f"{model}:mlp", *MLP_ARGS)
    assert 'sdy.mesh @mesh = <["data"=2, "model"=4]>' in out
    assert '#sdy.sharding<@mesh, [{"data"}, {}]>' in out and "stablehlo.dot_general" in out
    out, _ = shardc_cmd("hlo", f"{model}:mlp", *MLP_ARGS)
    assert out.startswith("HloModule jit_mlp") and "num_partitions=8" in out
    [line] = [ln for ln in out.splitlines() if " all-reduce(" in ln]
    assert "replica_groups" in line


def test_report_text_and_json(model):
    out, _ = shardc_cmd("report", f"{model}:mlp", *MLP_ARGS)
    assert out.startswith("@mlp on mesh <data=2, model=4> (8 devices)")
    assert "collectives XLA inserted: 1 (32.0 KiB per device)" in out
    [row] = [ln for ln in out.splitlines() if ln.strip().startswith("all-reduce ")]
    assert re.search(r"all-reduce\s+f32\[32,256\]\s+32.0 KiB\s+\{model\}\s+model.py:8\s+"
                     r"dot_general", row)
    assert re.search(r"%4\s+dot_general.*model.py:8\s+all-reduce\{model\}", out)
    assert "memory per device: arguments 544.0 KiB" in out and "flops" in out
    out, _ = shardc_cmd("report", f"{model}:mlp", *MLP_ARGS, "--format", "json")
    j = json.loads(out)
    [c] = j["collectives"]
    assert (c["kind"], c["axes"], c["line"], c["bytes"]) == ("all-reduce", ["model"], 8, 32768)


def test_decorated_function_needs_only_types_and_devices_flag(model):
    out, _ = shardc_cmd("ir", f"{model}:layer", "--mesh", "data=2,model=2", "--devices", "4",
                        "--arg", "f32[16,8]", "--arg", "f32[8,8]")
    assert "func @layer(%x: f32[16,8] [{data}, {}], %w: f32[8,8] [{}, {model}])" in out
    assert "-> (f32[16,8] [{data}, {model}])" in out


@pytest.mark.parametrize("args,message", [
    (["ir", "{dir}/nope.py:f", "--arg", "f32[2]"], "shardc: error: no such file: {dir}/nope.py"),
    (["ir", "{model}:mismatched", "--arg", "f32[4,8]", "--arg", "f32[4,8]"],
     "{model}:23: error: matmul: shapes (4, 8) and (4, 8) are not aligned"),
    (["report", "{model}:mlp", "--mesh", "data=2", "--arg", "f32[3]@P('data')"],
     "shardc: error: --arg 1 (\"f32[3]@P('data')\"): dimension 0 (size 3) cannot be split "
     "into 2 parts over data"),
])
def test_errors_are_one_line_without_traceback(model, args, message):
    d = os.path.dirname(model)
    args = [a.format(model=model, dir=d) for a in args]
    out, err = shardc_cmd(*args, expect=1)
    assert out == ""
    assert err.strip() == message.format(model=model, dir=d) or \
        (err.count("\n") == 1 and err.startswith(message.format(model=model, dir=d)))
    assert "Traceback" not in err


def test_traceback_flag_shows_it(model):
    _, err = shardc_cmd("ir", f"{model}:buggy", "--arg", "f32[4]", "--traceback", expect=1)
    assert "Traceback (most recent call last)" in err and "NameError" in err


# ------------------------------------------------------------- in-process: cheap checks


def run_main(capsys, monkeypatch, *argv):
    monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))
    code = cli.main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.mark.parametrize("args,message", [
    (["ir", "{model}:nope", "--arg", "f32[2]"],
     "shardc: error: {model} has no function 'nope' (it defines: broken_args, buggy, "
     "constrained, dict_args, layer, mismatched, mlp, pair, pair_args, unsharded_args)"),
    (["ir", "{model}:pair", "--example-args", "broken_args"],
     "{model}:50: error: while building example arguments with broken_args(): "
     "ZeroDivisionError: division by zero"),
    (["ir", "{model}:pair", "--example-args", "nope"],
     "shardc: error: --example-args nope: {model} defines no 'nope'"),
    (["ir", "{model}:pair", "--example-args", "dict_args"],
     "dict_args() returned a dict; it should return a tuple of the function's arguments"),
    (["ir", "{model}:mlp", "--example-args", "pair_args"],
     "mlp(x, w1, w2) needs 3 arguments but pair_args() gave 2"),
    (["ir", "{model}:mlp"], "mlp(x, w1, w2) needs 3 arguments but 0 --arg were given; give "
     "one --arg per argument, or --example-args NAME (or define mlp_args in the file)"),
    (["ir", "{model}:pair", "--example-args", "pair_args", "--arg", "f32[2]"],
     "either with --arg or with --example-args, not both"),
    (["ir", "{model}", "--arg", "f32[2]"], "expected FILE.py:FUNCTION"),
    (["ir", "{model}:buggy", "--arg", "f32[4]"],
     "{model}:27: error: NameError: name 'undefined_name' is not defined"),
    (["ir", "{model}:mlp", "--arg", "f32[4]"],
     "shardc: error: mlp(x, w1, w2) needs 3 arguments but 1 --arg was given"),
    (["ir", "{model}:mlp", "--mesh", "data=2", "--arg", "q8[4]"], "unknown dtype 'q8'"),
    (["ir", "{model}:mlp", "--mesh", "data=2", "--arg", "f32[4"], "expected DTYPE[SHAPE]"),
    (["ir", "{model}:mlp", "--mesh", "data=2", "--arg", "f32[4]@P(data)"], "cannot read"),
    (["ir", "{model}:mlp", "--mesh", "data=2", "--arg", "f32[4]@P('data','data')"],
     "PartitionSpec has 2 entries but the array has rank 1"),
    (["ir", "{model}:mlp", "--mesh", "data=2", "--arg", "f32[4]@P('model')"],
     "unknown mesh axis 'model'; the mesh has axes data"),
    (["ir", "{model}:mlp", "--arg", "f32[4]@P('data')"], "no --mesh was given"),
    (["ir", "{model}:mlp", "--mesh", "data:2", "--arg", "f32[4]"], "expected NAME=SIZE"),
    (["ir", "{model}:mlp", "--mesh", "data=16", "--arg", "f32[4]"],
     "--mesh data=16 needs 16 devices but only 8 are available"),
    (["ir", "{model}:layer", "--arg", "f32[16,8]", "--arg", "f32[8,8]"],
     "pass --mesh"),
    (["propagate", "{dir}/missing.ir"], "cannot read {dir}/missing.ir"),
])
def test_error_messages(model, capsys, monkeypatch, args, message):
    d = os.path.dirname(model)
    code, out, err = run_main(capsys, monkeypatch, *[a.format(model=model, dir=d) for a in args])
    assert code == 1 and out == ""
    assert message.format(model=model, dir=d) in err and err.count("\n") == 1, err


def test_example_args_give_pytrees_with_their_shardings(model, capsys, monkeypatch):
    """pair_args is found by its name (FUNC_args) or named with --example-args; its
    arrays and ShapeDtypeStructs (in a dict) keep their shardings."""
    code, out, err = run_main(capsys, monkeypatch, "ir", f"{model}:pair")
    assert code == 0, err
    assert out.startswith("mesh <data=2, model=4>\nfunc @pair(%params_b: f32[8,4] [{}, {}], "
                          "%params_w: f32[8,16] [{model}, {}], %x: f32[16,4] [{}, {data}])")
    code, again, err = run_main(capsys, monkeypatch, "ir", f"{model}:pair",
                                "--example-args", "pair_args")
    assert code == 0 and again == out, err
    # NumPy leaves have no sharding; --mesh gives the mesh
    code, out, err = run_main(capsys, monkeypatch, "ir", f"{model}:pair", "--mesh",
                              "data=2,model=4", "--example-args", "unsharded_args")
    assert code == 0, err
    assert "func @pair(%params_b: f32[8,4] [{}, {}], %params_w: f32[8,16] [{}, {}]" in out


def test_flax_optax_train_step_ir_explain():
    """A flax model and an optax adamw step, its arguments (params and optimizer state:
    pytrees) from train_step_args in the example file."""
    out, err = shardc_cmd("ir", os.path.join(ROOT, "examples", "flax_optax_train.py:train_step"),
                          "--explain")
    assert out.startswith("mesh <data=2, model=4>\nfunc @train_step(")
    header = out.splitlines()[1]
    assert "%params_params_up_kernel: f32[64,256] [{}, {model}]" in header
    assert "%params_params_down_kernel: f32[256,64] [{model}, {}]" in header
    assert "%opt_state_1_0_count: i32[] []" in header
    assert "%x: f32[16,8,64] [{data}, {}, {}]" in header and "%y: i32[16] [{data}]" in header
    # the ops' lines: the user's (the model, the loss, the update) with flax's and optax's,
    # in the module's named scope (under jax.value_and_grad's jvp)
    assert re.search(r'loc\("jvp\(Block\)/down"\("flax_optax_train.py":45 in '
                     r'"flax/linen/linear.py":\d+\)\)', out)
    assert re.search(r"// %\d+: .*from argument params_params_down_kernel via .*"
                     r"@flax_optax_train\.py:\d+", out)
    assert re.search(r"// %\d+: .*@flax_optax_train\.py:69 "
                     r"\(in optax/tree_utils/_tree_math\.py:\d+\)", out)
    assert err == ""


def test_flax_optax_train_step_report():
    out, _ = shardc_cmd("report", os.path.join(ROOT, "examples", "flax_optax_train.py:train_step"))
    assert out.startswith("@train_step on mesh <data=2, model=4> (8 devices)")
    # the row-parallel Dense's partial sums: an all-reduce over model at the model's line
    assert re.search(r"all-reduce\s+f32\[8,8,64\]\s+16.0 KiB\s+\{model\}\s+"
                     r"flax_optax_train.py:45 \(in flax/linen/linear.py:\d+\)\s+dot_general", out)
    # the gradients' sum over the batch
    assert re.search(r"all-reduce\s+\(f32.*\{data\}\s+flax_optax_train.py:68", out)
    # clip_by_global_norm's sum of squares, at the update's line and optax's
    assert re.search(r"all-reduce.*\{model\}\s+flax_optax_train.py:69 "
                     r"\(in optax/tree_utils/_tree_math.py:\d+\)\s+reduce_sum", out)


def test_bad_ir_file_names_its_line(tmp_path, capsys, monkeypatch):
    f = tmp_path / "bad.ir"
    f.write_text("mesh <a=2>\nfunc @f(%x: f32[4] [{a}]) -> (f32[4]) {\n"
                 "  %0: f32[4] = sinx(%x)\n  return %0\n}\n")
    code, _, err = run_main(capsys, monkeypatch, "propagate", str(f))
    assert code == 1 and err == f"{f}:3:16: error: unknown op 'sinx'\n"
    f.write_text("func @f(%x: f32[4]) -> (f32[4]) {\n  return %x\n}\n")
    code, _, err = run_main(capsys, monkeypatch, "propagate", str(f))
    assert code == 1 and err.startswith(f"{f}:1: error: the IR has no mesh")


def test_help_everywhere(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for c in cli.COMMANDS:
        assert c.name in out
    assert "launch" in out
    for c in cli.COMMANDS:
        with pytest.raises(SystemExit) as e:
            cli.main([c.name, "--help"])
        assert e.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: shardc {c.name}") and "--traceback" in out
    assert cli.main([]) == 2
    with pytest.raises(SystemExit) as e:
        cli.main(["frobnicate"])
    assert e.value.code == 2


def test_a_subcommand_is_one_registration(monkeypatch, capsys, tmp_path):
    mod = tmp_path / "shardc_cli_probe.py"
    mod.write_text("def main(argv):\n    print('probe', argv)\n    return 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.EXTERNAL, "probe", ("shardc_cli_probe", "a probe"))
    assert cli.main(["probe", "-n", "2", "--x"]) == 3
    assert capsys.readouterr().out == "probe ['-n', '2', '--x']\n"


def test_console_script_entry_point():
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts["shardc"] == "shardc.tools.cli:main"


def test_readme_command_line_outputs_are_real():
    """Every `$ shardc ...` example in the README's "Command line" section prints what the
    README shows."""
    import shlex
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text[text.index("## Command line"):]
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    examples = []
    for block in re.findall(r"```console\n(.*?)```", section, re.S):
        for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
            lines = chunk.splitlines()
            cmd = ""
            while lines[0].endswith("\\"):
                cmd += lines.pop(0)[:-1] + " "
            cmd += lines.pop(0)
            examples.append((shlex.split(cmd), "\n".join(lines) + "\n"))
    assert len(examples) >= 4
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("XLA_FLAGS", None)
    for argv, want in examples:
        assert argv[0] == "shardc"
        p = subprocess.run([sys.executable, "-m", "shardc", *argv[1:]], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
        assert p.stdout + p.stderr == want, " ".join(argv)
