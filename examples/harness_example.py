#!/usr/bin/env python3
"""The PyTorch example kernel in mlaref's report through the Python harness (docs/python.md,
"Your kernel in the report"): every edge cell runs through the kernel as a function, in this
process, and is checked as `mlaref report --kernel` checks a command kernel.

    PYTHONPATH=build/default/python /usr/bin/python3 examples/harness_example.py [--out DIR]

Two kernels: the correct one and one that drops each query's last KV token. The report is
written to DIR (default a new folder under $TMPDIR); the script prints the cells that failed and
exits 0 when the correct kernel passes every cell and the broken one fails at least one, else 1.
"""
import argparse
import sys
from pathlib import Path

import mlaref
from mlaref.harness import Kernel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch_mla_decode import mla_decode_inputs  # noqa: E402

RECIPE = "fp32-seq"  # what the kernel claims: fp32 arithmetic, its fp32 o checked as fp32


def correct(inputs):
    """The kernel with 3 splits a batch: (o, lse) on the cell's inputs."""
    return mla_decode_inputs(inputs, splits=3)


def drops_last_token(inputs):
    """The deliberately wrong kernel: each query misses its last KV token."""
    return mla_decode_inputs(inputs, splits=3, bug="drop-last-token")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="the report's folder (default: a new one)")
    ap.add_argument("--suite", default="edge", help="the suite (default edge)")
    a = ap.parse_args(argv)
    kernels = [Kernel("torch", correct, recipe=RECIPE),
               Kernel("torch-drop-last", drops_last_token, recipe=RECIPE)]
    s = mlaref.harness.report(kernels, suite=a.suite, out=a.out, recipes="none", quick=True)
    for c in s.failed_cells:
        print(f"{c.verdict}: {c.reason}")
    ok = {k.name: all(c.verdict in ("pass", "n/a", "skipped") for c in s.cells
                      if c.kernel == k.name) for k in kernels}
    print(f"report: {s.path}; torch {'passes' if ok['torch'] else 'FAILS'}, torch-drop-last "
          f"{'passes (not caught)' if ok['torch-drop-last'] else 'fails (caught)'}")
    return 0 if ok["torch"] and not ok["torch-drop-last"] else 1


if __name__ == "__main__":
    sys.exit(main())
