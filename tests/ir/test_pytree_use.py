"""shardc's transforms flatten users' pytrees through shardc.trace.pytree, which takes a
typed key apart into its data (a key is a leaf to jax): a direct jax.tree_util call on a
traced pytree would carry keys as leaves shardc cannot trace."""
import pathlib
import re

SHARDC = pathlib.Path(__file__).resolve().parents[2] / "shardc"
# concrete values only (the runtime; jax key arrays and device shardings at the boundary),
# registrations, and the module itself
ALLOWED = {"trace/pytree.py", "api/random/_keys.py", "api/device.py", "tools/loader.py",
           "api/scipy_interpolate.py", "api/scipy_stats/kde.py"}
DIRECT = re.compile(r"jax\.tree_util\.tree_|jax\.tree\.|from jax\.tree_util import|"
                    r"=\s*jax\.tree_util\b")


def test_transforms_flatten_through_shardc_pytree():
    bad = []
    for path in sorted(SHARDC.rglob("*.py")):
        rel = path.relative_to(SHARDC).as_posix()
        if rel in ALLOWED or rel.startswith("runtime/"):
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if DIRECT.search(line.split("#")[0]):
                bad.append(f"shardc/{rel}:{i}: {line.strip()}")
    assert not bad, "use shardc.trace.pytree, not jax.tree_util:\n" + "\n".join(bad)


def test_a_typed_key_is_a_leaf_to_jax_and_its_data_to_shardc():
    import jax
    import numpy as np

    from shardc.api.random._keys import KeyArray
    from shardc.trace import pytree
    data = np.zeros((3, 2), np.uint32)
    tree = {"k": KeyArray(data), "x": 1.0}
    assert jax.tree_util.tree_leaves(tree)[0] is tree["k"]
    leaves, treedef = pytree.tree_flatten(tree)
    assert leaves[0] is data and len(leaves) == 2
    back = pytree.tree_unflatten(treedef, leaves)
    assert jax.dtypes.issubdtype(back["k"].dtype, jax.dtypes.prng_key)
    assert pytree.tree_map(lambda a: a, tree)["k"].shape == (3,)
