"""shardc.debug.print / shardc.debug.callback against jax.debug's on the same programs.

Host callbacks run on XLA's threads; both write to sys.stdout, which capsys replaces.
jax's are waited for at jax.effects_barrier(); shardc's before the call returns."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.ir.parse import parse_program
from shardc.ir.program import print_program
from shardc.propagate import passes


def lines(capsys):
    return capsys.readouterr().out.splitlines()


def both(capsys, make, *args, jit=True, sort=False):
    """The lines jax's and shardc's versions of `make(lib)` print, called on args."""
    out = []
    for lib in (jax, shardc):
        fn = make(lib)
        got = (lib.jit(fn) if jit else fn)(*args)
        jax.block_until_ready(got)
        jax.effects_barrier()
        ls = lines(capsys)
        out.append(sorted(ls) if sort else ls)
    return out


def test_eager_print_and_callback_run_now(capsys):
    x = np.arange(4, dtype=np.float32)
    for lib in (jax, shardc):
        lib.debug.print("x={} y={y} {s}", x, y=3, s="txt")
        lib.debug.print("no placeholders", x, skip_format_check=True)
        lib.debug.callback(lambda a, b: print(type(a).__name__, a.dtype, b), x, 2.5)
    got = lines(capsys)
    assert got[:3] == got[3:], got
    assert got[0] == "x=[0. 1. 2. 3.] y=3 txt"
    assert got[2] == "ArrayImpl float32 2.5"


def test_log_is_print_as_logging_records_at_the_callers_line(caplog):
    """debug.log: jax's and shardc's each log the message at INFO naming the user's line,
    under jit and eagerly, and in the two-call form; jax's log traced by shardc too."""
    x = jnp.arange(3.0)
    for lib in (jax, shardc):
        with caplog.at_level("INFO"):
            lib.jit(lambda x: lib.debug.log("x={x}", x=x * 2))(x)
            jax.effects_barrier()
            line = test_log_is_print_as_logging_records_at_the_callers_line.__code__. \
                co_firstlineno + 6
            lib.debug.log(ordered=True)("eager {}", x)
        recs = [r for r in caplog.records if r.msg.startswith(("x=", "eager"))]
        assert [r.msg for r in recs] == ["x=[0. 2. 4.]", "eager [0. 1. 2.]"], recs
        assert {r.levelname for r in recs} == {"INFO"}
        assert recs[0].lineno == line and recs[0].filename == "test_debug_print.py"
        caplog.clear()
    with caplog.at_level("INFO"):
        shardc.jit(lambda x: jax.debug.log("jax's x={x}", x=x + 1))(x)
    assert [r.msg for r in caplog.records if "jax's" in r.msg] == ["jax's x=[1. 2. 3.]"]


def test_print_inside_jit_prints_runtime_values_each_call(capsys):
    def make(lib):
        def f(x, y):
            lib.debug.print("x={x} sum={}", x + y, x=x)
            lib.debug.print("hello")
            return x * 2
        return f
    want, got = both(capsys, make, jnp.arange(3.0), 1.0, sort=True)   # unordered: any order
    assert got == want == ["hello", "x=[0. 1. 2.] sum=[1. 2. 3.]"]
    f = shardc.jit(make(shardc))
    f(jnp.arange(3.0), 1.0)
    f(jnp.arange(3.0) + 10, 1.0)
    assert [g for g in lines(capsys) if g != "hello"] == ["x=[0. 1. 2.] sum=[1. 2. 3.]",
                                  "x=[10. 11. 12.] sum=[11. 12. 13.]"]


def test_a_print_of_an_unused_value_is_not_dead_code(capsys):
    def make(lib):
        def f(x):
            lib.debug.print("unused {}", x * 3)
            return x
        return f
    want, got = both(capsys, make, jnp.arange(2.0))
    assert got == want == ["unused [0. 3.]"]


def test_jit_level_print_of_a_sharded_array_prints_it_whole_once(capsys, mesh8):
    x = jax.device_put(jnp.arange(16.0), NamedSharding(mesh8, P("x")))

    def make(lib):
        def f(a):
            lib.debug.print("whole {}", a + 1)
            return a * 2
        return f
    want, got = both(capsys, make, x)
    assert got == want and len(got) == 1
    out = shardc.jit(make(shardc))(x)
    assert out.sharding.is_equivalent_to(x.sharding, 1)


def test_partitioned_prints_each_devices_shard(capsys, mesh8):
    x = jax.device_put(jnp.arange(16.0), NamedSharding(mesh8, P("x")))

    def make(lib):
        def f(a):
            lib.debug.print("part {}", a, partitioned=True)
            return a
        return f
    want, got = both(capsys, make, x, sort=True)
    assert got == want and len(got) == 8 and "part [0. 1.]" in got


@pytest.mark.parametrize("spec", [P("x", "y"), P("x", None)])
def test_shard_map_prints_once_per_device_with_its_block(capsys, mesh2x4, spec):
    x = jax.device_put(jnp.arange(32.0).reshape(4, 8), NamedSharding(mesh2x4, spec))

    def make(lib):
        def body(a):
            lib.debug.print("block {} {}", a, a.shape)
            return a
        return lib.shard_map(body, mesh=mesh2x4, in_specs=spec, out_specs=spec)
    want, got = both(capsys, make, x, sort=True)
    assert got == want and sum(g.startswith("block") for g in got) == 8


def test_ordered_prints_in_program_order(capsys):
    def make(lib):
        def f(x):
            for k in range(6):
                lib.debug.print("step {} {}", k, x * k, ordered=True)
            return x
        return f
    want, got = both(capsys, make, jnp.arange(2.0))
    assert got == want and [g.split()[1] for g in got] == [str(k) for k in range(6)]
    x = shardc.debug.print(ordered=True)       # the two-call form
    assert callable(x)


def test_ordered_keeps_program_order_across_regions(capsys):
    def make(lib):
        def f(x):
            lib.debug.print("A {}", x, ordered=True)

            def body(c, a):
                lib.debug.print("in {}", a, ordered=True)
                return c * a, None
            c, _ = lib.lax.scan(body, 1.0, x)
            lib.debug.print("B {}", c, ordered=True)
            y = lib.lax.cond(c > 0, lambda v: (lib.debug.print("T", ordered=True), v)[1],
                             lambda v: v, c)
            lib.debug.print("C {}", x * 2, ordered=True)
            return y
        return f
    for _ in range(3):      # unordered, C ran before the cond's T on some runs
        want, got = both(capsys, make, jnp.arange(1.0, 4.0))
        assert got == want == ["A [1. 2. 3.]", "in 1.0", "in 2.0", "in 3.0", "B 6.0", "T",
                               "C [2. 4. 6.]"]
    want, got = both(capsys, lambda lib: lib.grad(make(lib)), jnp.arange(1.0, 4.0))
    assert got == want and got[-1] == "C [2. 4. 6.]"


def test_ordered_under_vmap_prints_each_call_for_every_example_in_turn(capsys):
    def make(lib):
        return lib.vmap(lambda a: (lib.debug.print("v1 {}", a, ordered=True),
                                   lib.debug.print("v2 {}", a, ordered=True)))
    want, got = both(capsys, make, jnp.arange(3.0))
    assert got == want == ["v1 0.0", "v1 1.0", "v1 2.0", "v2 0.0", "v2 1.0", "v2 2.0"]


def test_ordered_on_several_devices_is_refused_as_jax(mesh8):
    x = jax.device_put(jnp.arange(16.0), NamedSharding(mesh8, P("x")))

    def f(a):
        shardc.debug.print("o {}", a, ordered=True)
        return a
    with pytest.raises(ValueError, match="ordered effects are not supported"):
        jax.jit(lambda a: (jax.debug.print("o {}", a, ordered=True), a)[1])(x)
    with pytest.raises(shardc.ShardcError, match=r"test_debug_print.py:\d+: .*ordered effects "
                       "are not supported for more than 1 device"):
        shardc.jit(f)(x)


def test_callback_gets_arrays_and_static_leaves(capsys):
    def make(lib):
        def f(x):
            lib.debug.callback(lambda a, s, k=None: print(type(a).__name__, repr(a), s,
                                                          repr(k)), x, "static", k={"v": x[0]})
            return x
        return f
    want, got = both(capsys, make, jnp.arange(3, dtype=jnp.int32))
    assert got == want and got[0].startswith("ArrayImpl Array([0, 1, 2]")


def test_callback_argument_errors_as_jax():
    with pytest.raises(TypeError, match="must be callable"):
        shardc.debug.callback(3, 1)
    with pytest.raises(TypeError, match="two-call form"):
        shardc.debug.callback(None, 1)


def test_print_under_grad_prints_the_primal_once(capsys):
    def make(lib):
        def loss(x):
            lib.debug.print("primal {}", x)
            return (x ** 2).sum()
        return lib.grad(loss)
    want, got = both(capsys, make, jnp.arange(3.0))
    assert got == want == ["primal [0. 1. 2.]"]
    g = shardc.jit(make(shardc))(jnp.arange(3.0))
    np.testing.assert_array_equal(g, [0.0, 2.0, 4.0])


def test_vmap_calls_once_per_example(capsys):
    def make(lib):
        def f(x, y):
            lib.debug.print("ex {} {}", x, y)
            lib.debug.callback(lambda a: print("cb", a.shape), x)
            return x + y
        return lib.vmap(f, in_axes=(0, None))
    want, got = both(capsys, make, jnp.arange(6.0).reshape(3, 2), 7.0, sort=True)
    assert got == want and len(got) == 6 and "ex [2. 3.] 7.0" in got


def test_nested_vmap_eager(capsys):
    def make(lib):
        return lib.vmap(lib.vmap(lambda a: lib.debug.print("vv {}", a)))
    want, got = both(capsys, make, jnp.arange(4.0).reshape(2, 2), jit=False, sort=True)
    assert got == want == ["vv 0.0", "vv 1.0", "vv 2.0", "vv 3.0"]


def test_print_in_scan_while_and_cond_bodies(capsys):
    def make(lib):
        def f(x, p):
            def body(c, a):
                lib.debug.print("c={} a={}", c, a)
                return c + a, c
            c, _ = lib.lax.scan(body, 0.0, x)
            n = lib.lax.while_loop(lambda i: i < 2,
                                   lambda i: (lib.debug.print("w {}", i), i + 1)[1], 0)
            y = lib.lax.cond(p, lambda v: (lib.debug.print("T {}", v), v)[1],
                             lambda v: (lib.debug.print("F {}", v), -v)[1], c + n)
            return y
        return f
    for p in (True, False):
        want, got = both(capsys, make, jnp.arange(3.0), p, sort=True)   # unordered
        assert got == want and len(got) == 6, (got, want)


def test_print_in_a_cond_whose_results_are_unused(capsys):
    def make(lib):
        def f(x):
            lib.lax.cond(True, lambda v: lib.debug.print("T {}", v), lambda v: None, x)
            return x
        return f
    want, got = both(capsys, make, jnp.arange(2.0))
    assert got == want == ["T [0. 1.]"]


def test_bad_format_string_is_an_error_at_the_users_line():
    def f(x):
        shardc.debug.print("{} and {}", x)
        return x
    line = f.__code__.co_firstlineno + 1
    with pytest.raises(shardc.ShardcError, match=rf"test_debug_print.py:{line}: debug.print: "
                       r"the format string '\{\} and \{\}' does not fit"):
        shardc.jit(f)(jnp.arange(2.0))
    with pytest.raises(ValueError, match="Unused keyword arguments"):
        shardc.debug.print("x", x=1)


def test_the_op_prints_parses_and_survives_passes():
    def f(x):
        shardc.debug.print("v {}", x * 2)
        return snp.sin(x)
    text = shardc.jit(f).trace(jnp.arange(4.0)).ir
    assert re.search(r"^  debug_callback\(%\d+\) \{callback=<callback>, ordered=False, "
                     r"partitioned=False, manual=False\}", text, re.M), text
    p = parse_program(text)
    again = print_program(p)
    assert print_program(parse_program(again)) == again
    passes.prepare(p)
    assert any(op.prim.name == "debug_callback" for op in p.ops)
    from shardc.lower.emit import lower
    passes.propagate(p)
    with pytest.raises(shardc.ShardcError, match="parsed from IR text"):
        lower(p)


def test_compiled_program_keeps_its_callback_and_saved_text_is_refused(capsys):
    import gc
    from shardc.runtime import backend

    def make():
        return shardc.jit(lambda x: (shardc.debug.print("kept {}", x), x + 1)[1]).lower(
            jnp.arange(2.0)).compile()
    compiled = make()
    gc.collect()
    compiled(jnp.arange(2.0))
    assert lines(capsys) == ["kept [0. 1.]"]
    text = shardc.jit(lambda x: (shardc.debug.print("gone {}", x), x)[1]).lower(
        jnp.arange(2.0)).text
    text = re.sub(r"index = \d+ : ui64", "index = 999999999 : ui64", text)   # a freed one
    with pytest.raises(shardc.ShardcError, match="no longer exists"):
        backend.compile(text, jax.devices()[:1])


def test_print_in_a_partly_manual_shard_map_is_a_clear_error(mesh2x4):
    # jax gathers over the automatic axes and prints once per manual index, with a nested
    # shard_map, which shardc does not support yet
    x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh2x4, P("x")))
    f = shardc.shard_map(lambda a: (shardc.debug.print("pa {}", a), a)[1], mesh=mesh2x4,
                         in_specs=P("x"), out_specs=P("x"), axis_names={"x"})
    with pytest.raises(shardc.ShardcError, match=r"test_debug_print.py:\d+: debug.print inside "
                       "a shard_map over only some mesh axes"):
        shardc.jit(f)(x)
