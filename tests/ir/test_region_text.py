"""The control-flow and remat ops in IR text: every one prints, parses back to the same
text, and verifies (its regions checked through its shape rule); checkpoint's standard
policies survive the round trip by name."""
import re

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc import lax
from shardc.ir.parse import ParseError, parse_program
from shardc.ir.program import print_program
from shardc.ir.verify import VerifyError, verify

cp = shardc.checkpoint_policies


def _sds(mesh, shape, *spec, dtype=np.float32):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, P(*spec)))


def _scan(c, xs):
    def body(c, x):
        y = snp.tanh(c * x)
        return y, (y + 1, y.sum())
    return lax.scan(body, c, xs)


def _scan_reverse_no_xs(c, xs):
    return lax.scan(lambda c, _: (snp.sin(c) + xs[0], None), c, None, length=3,
                    reverse=True)


def _switch(p, a):
    return lax.switch(p, [snp.sin, snp.cos, lambda a: a * 2], a)


def _cond(p, a):
    return lax.cond(p > 0, lambda a: (a, a.sum()), lambda a: (-a, a.max()), a)


def _while(a):
    k = a.sum()
    return lax.while_loop(lambda c: (c[0] < 5) & (k > -1e9),
                          lambda c: (c[0] + 1, snp.tanh(c[1]) + k), (0, a))


def _fori(a):
    return lax.fori_loop(0, 4, lambda i, c: c * 2 + i, a)


def _ckpt(policy):
    def f(a, w):
        def g(a, w):
            h = shardc.ad_checkpoint.checkpoint_name(a @ w, "h")
            return snp.tanh(h), lax.optimization_barrier((h, a))[0]
        return shardc.checkpoint(g, policy=policy)(a, w)
    return f


POLICIES = {
    "none": None,
    "dots_saveable": cp.dots_saveable,
    "nothing_saveable": cp.nothing_saveable,
    "everything_saveable": cp.everything_saveable,
    "dots_no_batch": cp.dots_with_no_batch_dims_saveable,
    "only_names": cp.save_only_these_names("h", "g"),
    "but_names": cp.save_any_names_but_these("h"),
    "both": cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("h")),
}


def _programs(mesh):
    a = _sds(mesh, (8, 16), "x")
    return {
        "scan": (_scan, (_sds(mesh, (8,), "x"), _sds(mesh, (5, 8), None, "y"))),
        "scan_reverse_no_xs": (_scan_reverse_no_xs, (_sds(mesh, (8,), "x"),
                                                     _sds(mesh, (2, 8)))),
        "switch": (_switch, (jax.ShapeDtypeStruct((), np.int32), a)),
        "cond": (_cond, (jax.ShapeDtypeStruct((), np.float32), a)),
        "while": (_while, (a,)),
        "fori": (_fori, (a,)),
        **{f"checkpoint_{k}": (_ckpt(pol), (a, _sds(mesh, (16, 16), None, "y")))
           for k, pol in POLICIES.items()},
    }


NAMES = ["scan", "scan_reverse_no_xs", "switch", "cond", "while", "fori"] + \
    [f"checkpoint_{k}" for k in POLICIES]


def _round_trip(text):
    p = parse_program(text)
    verify(p)
    assert print_program(p) == text
    return p


@pytest.mark.parametrize("name", NAMES)
def test_region_ops_round_trip_traced_and_propagated(name, mesh2x4):
    f, args = _programs(mesh2x4)[name]
    traced = shardc.jit(f).trace(*args)
    for text in (print_program(traced.program), traced.ir):
        p = _round_trip(text)
        if text == traced.ir:      # every value, block arguments too, has its sharding
            verify(p, propagated=True)
        ops = {op.prim.name for op in p.walk()}
        want = {"scan": "scan", "switch": "cond", "cond": "cond", "while": "while",
                "fori": "scan"}.get(name.split("_")[0] if name != "scan_reverse_no_xs"
                                    else "scan", "checkpoint")
        assert want in ops, text
    if name.startswith("checkpoint"):
        assert {"name", "optimization_barrier"} <= ops


def test_switch_prints_one_region_per_branch(mesh2x4):
    f, args = _programs(mesh2x4)["switch"]
    p = _round_trip(shardc.jit(f).trace(*args).ir)
    (op,) = [op for op in p.ops if op.prim.name == "cond"]
    assert len(op.regions) == 3


def test_while_prints_its_predicate_and_body(mesh2x4):
    f, args = _programs(mesh2x4)["while"]
    p = _round_trip(shardc.jit(f).trace(*args).ir)
    (op,) = [op for op in p.ops if op.prim.name == "while"]
    assert len(op.regions) == 2
    assert op.params["cond_nconsts"] == 1 and op.params["body_nconsts"] == 1


@pytest.mark.parametrize("key", list(POLICIES))
def test_checkpoint_policy_parses_back_to_the_same_policy(key, mesh2x4):
    """A standard policy prints by name and parses back to one deciding the same; an
    absent one prints None."""
    f, args = _programs(mesh2x4)[f"checkpoint_{key}"]
    text = shardc.jit(f).trace(*args).ir
    (op,) = [op for op in _round_trip(text).ops if op.prim.name == "checkpoint"]
    pol = POLICIES[key]
    if pol is None:
        assert "policy=None" in text and op.params["policy"] is None
        return
    assert "policy=<callback " in text, text
    got = op.params["policy"]
    from shardc.ops.linalg import dot_general_p
    from shardc.ops.remat import name_p
    from shardc.ops.elementwise import tanh_p
    probes = [(dot_general_p, {"batch": ((), ())}), (dot_general_p, {"batch": ((0,), (0,))}),
              (name_p, {"name": "h"}), (name_p, {"name": "g"}), (name_p, {"name": "k"}),
              (tanh_p, {})]
    assert [bool(got(p, **kw)) for p, kw in probes] == [bool(pol(p, **kw)) for p, kw in probes]


def test_named_policy_text():
    assert "policy=<callback save_only_these_names('g', 'h')>" in print_program(
        parse_program(_CKPT.replace("POLICY", "<callback save_only_these_names('h', 'g')>")))
    both = "<callback save_from_both_policies(<callback dots_saveable>, " \
        "<callback save_any_names_but_these('h')>)>"
    assert both in print_program(parse_program(_CKPT.replace("POLICY", both)))


def test_an_unknown_callback_is_a_parse_error_at_its_line():
    with pytest.raises(ParseError, match=r"line 3:.*unknown callback 'my_policy'"):
        parse_program(_CKPT.replace("POLICY", "<callback my_policy>"))


_CKPT = """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{x}, {}]) -> (f32[8,16]) {
  %0: f32[8,16] = checkpoint(%a) {prevent_cse=True, policy=POLICY, num_out=1} {
  ^(%1: f32[8,16]):
    %2: f32[8,16] = tanh(%1)
    return %2
  }
  return %0
}
"""

_SCAN = """mesh <x=2, y=4>
func @f(%c: f32[8] [{x}], %xs: f32[5,8] [{}, {}]) -> (f32[8], f32[5,8]) {
  %0: f32[8], %1: f32[5,8] = scan(%c, %xs) {num_carry=1, num_xs=1, length=5, \
reverse=False, unroll=1} {
  ^(%2: f32[8], %3: f32[8]):
    %4: f32[8] = mul(%2, %3)
    return %4, %4
  }
  return %0, %1
}
"""

_COND = """func @f(%i: i32[], %a: f32[8]) -> (f32[8]) {
  %0: f32[8] = cond(%i, %a) {
  ^(%1: f32[8]):
    %2: f32[8] = sin(%1)
    return %2
  ^(%3: f32[8]):
    %4: f32[8] = cos(%3)
    return %4
  }
  return %0
}
"""

_WHILE = """func @f(%a: f32[8], %n: i32[]) -> (f32[8], i32[]) {
  %0: f32[8], %1: i32[] = while(%a, %n) {cond_nconsts=0, body_nconsts=0} {
  ^(%2: f32[8], %3: i32[]):
    %4: bool[] = lt(%3, 5:i32)
    return %4
  ^(%5: f32[8], %6: i32[]):
    %7: f32[8] = tanh(%5)
    %8: i32[] = add(%6, 1:i32)
    return %7, %8
  }
  return %0, %1
}
"""


@pytest.mark.parametrize("text", [_SCAN, _COND, _WHILE, _CKPT.replace("POLICY", "None")])
def test_hand_written_region_ops_round_trip(text):
    _round_trip(text)


@pytest.mark.parametrize("text, old, new, phrase", [
    (_SCAN, "^(%2: f32[8], %3: f32[8])", "^(%2: f32[8], %3: f32[5,8])",
     "do not match the carries, xs slices and consts"),
    (_SCAN, "return %4, %4", "return %3, %4", None),       # same type: fine
    (_SCAN, "length=5", "length=4", "does not have leading dim 4"),
    (_SCAN, "%1: f32[5,8] = scan", "%1: f32[4,8] = scan", "do not match the op's shape rule"),
    (_COND, "^(%3: f32[8])", "^(%3: f32[4])", "branch 1's block arguments"),
    (_COND, "%4: f32[8] = cos(%3)\n    return %4", "%4: f32[8] = cos(%3)\n    return %4, %4",
     "branch 1 yields"),
    (_COND, "%0: f32[8] = cond(%i, %a)", "%0: f32[8] = cond(%a, %a)",
     "branch index must be i32[]"),
    (_WHILE, "return %4\n", "return %3\n", "the predicate yields"),
    (_WHILE, "return %7, %8", "return %8, %7", "the body yields"),
    (_WHILE, "^(%5: f32[8], %6: i32[])", "^(%5: f32[8], %6: i32[], %9: f32[2])",
     "the body's block arguments"),
    (_CKPT.replace("POLICY", "None"), "^(%1: f32[8,16])", "^(%1: f32[16,8])",
     "do not match the region's block arguments"),
])
def test_region_op_types_are_verified_through_the_shape_rule(text, old, new, phrase):
    assert old in text
    p = parse_program(text.replace(old, new))
    if phrase is None:
        verify(p)
        return
    with pytest.raises(VerifyError, match=re.escape(phrase)) as e:
        verify(p)
    assert e.value.op is not None


def _custom_vjp(a, w):
    return shardc.nn.relu(a @ w)


def test_custom_vjp_call_round_trips_and_names_its_bwd(mesh2x4):
    # the bwd function prints as <name>: the parsed program propagates as the traced
    # one does, and differentiating it says why it cannot
    args = (_sds(mesh2x4, (8, 16), "x"), _sds(mesh2x4, (16, 16), None, "y"))
    traced = shardc.jit(_custom_vjp).trace(*args)
    for text in (print_program(traced.program), traced.ir):
        p = _round_trip(text)
        (op,) = [o for o in p.walk() if o.prim.name == "custom_vjp_call"]
        assert repr(op.params["bwd"]) == "<_relu_bwd>"
    from shardc.propagate.passes import propagate_text
    assert propagate_text(print_program(traced.program)) == traced.ir
    with pytest.raises(shardc.ShardcError, match="cannot hold it"):
        op.params["bwd"].fn
