"""Named scopes (shardc.named_scope / named_call, which are jax's; flax module paths; jax's
jvp/transpose names inside shardc.jit) name ops in the IR, the lowered module and XLA's op
metadata, as jax's lowering names them."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp
from shardc.ir.parse import parse_program
from shardc.ir.program import print_program
from jax.sharding import PartitionSpec as P


def f(x):
    with shardc.named_scope("block"):
        y = snp.sin(x)
        with jax.named_scope("inner"):        # the same stack as shardc's
            y = y @ x
    return shardc.named_call(lambda v: v + 1, name="head")(y)


def _scopes(text):
    return re.findall(r'(\w+)\(.*loc\("([^"]+)"\(', text)


def test_ir_names_and_round_trip():
    prog = shardc.jit(f).trace(np.ones((4, 4), np.float32))._program
    text = print_program(prog)
    assert _scopes(text) == [("sin", "block"), ("dot_general", "block/inner"),
                             ("add", "head")]
    assert print_program(parse_program(text)) == text


def test_lowered_and_compiled_op_names():
    low = shardc.jit(f).lower(np.ones((4, 4), np.float32))
    text = low.as_text(debug_info=True)
    for name in ("block/sin", "block/inner/dot_general", "head/add"):
        assert f'loc("{name}"' in text
    assert 'op_name="block/inner/dot_general"' in low.compile().as_text()


def test_backward_ops_are_named_after_their_forward_ops():
    def loss(x):
        with jax.named_scope("outer"):        # open around the differentiation too
            return shardc.grad(lambda v: f(v).sum())(x)
    got = _scopes(print_program(shardc.jit(loss).trace(np.ones((4, 4), np.float32))._program))
    assert ("sin", "outer/block") in got and ("cos", "outer/transpose(block)") in got
    assert ("dot_general", "outer/transpose(block/inner)") in got


def test_jax_code_and_transforms():
    def g(x):
        with jax.named_scope("jblock"):
            return jnp.cos(x) * 3
    got = _scopes(print_program(shardc.jit(jax.grad(g)).trace(1.0)._program))
    assert ("sin", "jvp(jblock)") in got and ("neg", "transpose(jvp(jblock))") in got
    # jax's own names for the same program
    want = jax.jit(jax.grad(g)).lower(1.0).as_text(debug_info=True)
    assert "jvp(jblock)/sin" in want and "transpose(jvp(jblock))/neg" in want


def test_flax_module_paths():
    nn = pytest.importorskip("flax.linen")

    class M(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(4)(nn.relu(nn.Dense(8)(x)))
    m = M()
    x = jnp.ones((2, 3))
    p = m.init(jax.random.key(0), x)
    got = _scopes(print_program(shardc.jit(m.apply).trace(p, x)._program))
    assert ("dot_general", "M/Dense_0") in got and ("dot_general", "M/Dense_1") in got
    assert ("add", "M/Dense_1") in got       # the bias: a shardc op on a shardc value


def test_errors():
    with pytest.raises(TypeError, match="named_scope name argument must be a string"):
        with shardc.named_scope(3):
            pass


def test_backward_of_a_retraced_body_is_transposed_once():
    # shard_map's gradient rule re-traces its body inside the rule's own scope
    mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))

    def loss(x):
        with shardc.named_scope("sm"):
            y = shardc.shard_map(lambda v: snp.sin(v) * 2, mesh=mesh, in_specs=P("x"),
                                 out_specs=P("x"))(x)
        return y.sum()
    text = print_program(shardc.jit(shardc.grad(loss)).trace(np.ones(8, np.float32))._program)
    assert {s for _, s in _scopes(text)} == {"sm", "transpose(sm)"}


@pytest.mark.parametrize("name", ['we"ird\\ {x}\nscope {', "a//b", "tab\there\r\u2028é"])
def test_any_scope_name_prints_parses_and_lowers(name):
    """jax.named_scope takes any string: a quote, backslash, newline, '//' or '{' in it
    neither ends the IR's literal, line or op nor breaks the lowered module."""
    def g(x):
        with jax.named_scope(name):
            y = snp.sin(x) * 2
            return shardc.lax.fori_loop(0, 2, lambda i, c: c + y, y)
    x = np.ones(4, np.float32)
    text = print_program(shardc.jit(g).trace(x)._program)
    back = parse_program(text)
    assert print_program(back) == text
    assert {op.loc.scope for op in back.ops} == {name}
    np.testing.assert_allclose(shardc.jit(g)(x), 3 * 2 * np.sin(x), rtol=1e-6)
