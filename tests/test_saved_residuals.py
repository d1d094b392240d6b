"""ad_checkpoint.print_saved_residuals: what a gradient keeps for its backward pass,
against jax's own report for the checkpoint policies (which pick the same values in
both), with jax's argument names for pytrees and jax's line format."""
import re

import jax
import jax.ad_checkpoint
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src.ad_checkpoint import saved_residuals as jax_saved_residuals

import shardc
import shardc.numpy as snp
from shardc.ad_checkpoint import print_saved_residuals
from shardc.api.residuals import saved_residuals

X = np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8)
W = np.eye(8, dtype=np.float32)


def make(np_, name):
    def f(x, w):
        y = name(np_.sin(x @ w), "a")
        z = name(np_.cos(y @ w), "b")
        return np_.sum(z * y) + x[0, 0]
    return f


def _norm(rows):
    """(type, source) with jax's location suffix `:col (function)` dropped."""
    return [(f"{np.dtype(a.dtype).name}{list(a.shape)}",
             re.sub(r"(:\d+):\d+ \([\w.<>]+\)$", r"\1", s)) for a, s in rows]


POLICIES = ["save_only_these_names", "nothing_saveable", "dots_saveable",
            "save_any_names_but_these", "dots_with_no_batch_dims_saveable"]


@pytest.mark.parametrize("policy", POLICIES)
def test_checkpoint_policies_save_what_jaxs_do(policy):
    def pick(cp):
        p = getattr(cp, policy)
        return p("a") if policy.startswith("save_") else p
    ours = shardc.checkpoint(make(snp, shardc.ad_checkpoint.checkpoint_name),
                             policy=pick(shardc.checkpoint_policies))
    theirs = jax.checkpoint(make(jnp, jax.ad_checkpoint.checkpoint_name),
                            policy=pick(jax.checkpoint_policies))
    want = _norm(jax_saved_residuals(theirs, X, W))
    # jax and shardc name the same lines of this file (jax's from its own trace)
    assert _norm(saved_residuals(ours, X, W)) == want


def test_pytree_arguments_literals_and_printing(capsys):
    def f(p, scale=2.0):
        return snp.sum(snp.sin(p["a"]) * p["b"][0]) * scale
    p = {"a": X, "b": [W]}
    print_saved_residuals(f, p)
    lines = capsys.readouterr().out.splitlines()
    line = f"test_saved_residuals.py:{f.__code__.co_firstlineno + 1}"
    assert lines[:2] == ["f32[8,8] from the argument p['a']",
                         "f32[8,8] from the argument p['b'][0]"], lines
    assert lines[2].startswith("f32[8,8] output of sin from ") and lines[2].endswith(line)
    assert len(lines) == 3, lines
    # abstract arguments: nothing runs
    s = jax.ShapeDtypeStruct((8, 8), np.float32)
    assert _norm(saved_residuals(f, {"a": s, "b": [s]})) == _norm(saved_residuals(f, p))


@pytest.mark.parametrize("policy", POLICIES + ["custom", "custom_sin"])
def test_jax_policies_in_jax_code_save_what_jax_does(policy):
    """jax.checkpoint with jax's policy inside shardc's trace: the policy is asked about
    jax's primitives (its name policies used to save nothing under shardc)."""
    cp = jax.checkpoint_policies
    if policy == "custom":      # a user's policy, written against jax's primitives
        pol = lambda prim, *_, **params: prim is jax.lax.dot_general_p  # noqa: E731
    elif policy == "custom_sin":
        pol = lambda prim, *_, **params: prim is jax.lax.sin_p  # noqa: E731
    else:
        pol = getattr(cp, policy)
        pol = pol("a") if policy.startswith("save_") else pol
    theirs = jax.checkpoint(make(jnp, jax.ad_checkpoint.checkpoint_name), policy=pol)
    ours, want = _norm(saved_residuals(theirs, X, W)), _norm(jax_saved_residuals(theirs, X, W))
    if policy == "custom_sin":
        # jax's derivative of cos is a sin in its forward pass, which this policy saves
        # too; shardc's is in the backward pass. The user's own sin is saved by both.
        sin = [r for r in want if "output of sin" in r[1]][0]
        assert sin in ours and set(ours) <= set(want), (ours, want)
    else:
        assert ours == want
