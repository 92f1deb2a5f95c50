"""The cost of checking from Python against the command: `python3 -m mlaref.bench`.

Generates inputs with `mlaref gen` (default bs=64, kv=4096), takes the model's output of the
recipe as the kernel's, then times, best of --repeat runs each:
  python  mlaref.Inputs(...) from torch tensors and mlaref.check(o, inputs, recipe, lse=lse)
          inside this process (after import: no start-up, no file reading);
  command `mlaref check --inputs IN --output OUT --recipe R` on the same inputs and output;
and prints both and their ratio (the target: python within 1.2x of the command).
scripts/bench_python_check.sh runs it with the build's package.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import mlaref


def _default_cli() -> str:
    build = os.path.dirname(os.path.dirname(os.path.dirname(mlaref.library_path())))
    return os.path.join(build, "mlaref")


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None) -> int:
    """Run the benchmark; exit status 0 within the target ratio, 1 beyond it, 2 on bad input."""
    ap = argparse.ArgumentParser(prog="python3 -m mlaref.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="bs=64,kv=4096,seed=1", help="gen's shape spec")
    ap.add_argument("--recipe", default="aiter-a8w8-ps")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each, the best counts")
    ap.add_argument("--mlaref", default=_default_cli(), help="the command (default: the build's)")
    ap.add_argument("--target", type=float, default=1.2, help="the ratio to stay within")
    a = ap.parse_args(argv)
    import torch

    with tempfile.TemporaryDirectory(prefix="mlaref-bench-") as d:
        inp, out = os.path.join(d, "in.safetensors"), os.path.join(d, "out.safetensors")
        r = subprocess.run([a.mlaref, "gen", "--shape", a.shape, "--out", inp],
                           capture_output=True, text=True, check=False)
        if r.returncode:
            print(f"bench: mlaref gen failed: {r.stderr.strip()}", file=sys.stderr)
            return 2
        t = mlaref.read_tensors(inp, framework="torch")
        meta = t.pop("__metadata__")
        kv_format = meta.get("mlaref.format.kv", "e4m3")
        # the kernel's output: the model's, as torch tensors
        o, lse = mlaref.run(a.recipe, mlaref.load(inp, framework="torch"))
        mlaref.save_tensors(out, {"o": o, "lse": lse})
        args = dict(q=t["q"], kv_cache=t["kv"], kv_format=kv_format, kv_scale=t["kv_scale"],
                    qo_indptr=t["qo_indptr"], kv_indptr=t["kv_indptr"],
                    kv_indices=t.get("kv_indices"), kv_last_page_len=t.get("kv_last_page_len"),
                    page_size=int(meta.get("mlaref.page_size", "1")))
        verdicts = []

        def python_check():
            x = mlaref.Inputs(**args)
            verdicts.append(mlaref.check(o, x, a.recipe, lse=lse).passed)

        def command_check():
            c = subprocess.run([a.mlaref, "check", "--inputs", inp, "--output", out, "--recipe",
                                a.recipe], capture_output=True, text=True, check=False)
            verdicts.append(c.returncode == 0)

        tp = _best(python_check, a.repeat)
        tc = _best(command_check, a.repeat)
    ratio = tp / tc
    print(f"mlaref check, {a.shape}, recipe {a.recipe}, torch {torch.__version__}, "
          f"best of {a.repeat}; verdicts {'all pass' if all(verdicts) else 'NOT all pass'}")
    print(f"  python  mlaref.Inputs + mlaref.check (torch tensors, in process): {tp:8.3f} s")
    print(f"  command mlaref check --inputs --output (a new process):            {tc:8.3f} s")
    print(f"  ratio python / command: {ratio:.3f} (target <= {a.target})")
    return 0 if ratio <= a.target and all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
