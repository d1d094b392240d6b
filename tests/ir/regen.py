"""Rewrite the corpus's expectations from the compiler's current output.

    python tests/ir/regen.py            # show which cases would change (writes nothing)
    python tests/ir/regen.py --write    # rewrite them (never the xfail cases' expectations)

Run by hand only, then READ every changed expectation: the corpus is only worth
anything if each one is what Shardy would decide."""
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# this checkout's shardc, not whichever one the environment installed
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from corpus import CASES_DIR, header_of, parse_file, render  # noqa: E402

from shardc.propagate.passes import propagate_text  # noqa: E402


def main(argv):
    write = "--write" in argv
    only = [a for a in argv if not a.startswith("--")]
    changed = 0
    for path in sorted(CASES_DIR.glob("*.txt")):
        if only and path.stem not in only:
            continue
        cases = parse_file(path)
        for c in cases:
            try:
                got = propagate_text(c.src)
            except Exception as e:      # noqa: BLE001 - report and keep going
                got = f"ERROR {type(e).__name__}: {e}\n"
            if got != c.want:
                if c.xfail:
                    print(f"{c.id}: xfail, output differs (expectation kept)")
                    continue
                changed += 1
                print(f"{c.id}: {'rewritten' if write else 'differs'}")
                c.want = got
        if write:
            path.write_text(render(cases, header_of(path)))
    print(f"{changed} case(s) {'rewritten' if write else 'differ'}")


if __name__ == "__main__":
    main(sys.argv[1:])
