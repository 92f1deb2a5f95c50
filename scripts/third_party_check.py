#!/usr/bin/env python3
"""Holds what other people's kernels returned (scripts/gpu/third_party_run.py) to their recipes,
bit for bit, and to the default rules; prints one line a run and a table a kernel and suite.

    scripts/third_party_check.py CLI INPUTS OUTPUTS

CLI: an mlaref; INPUTS: the folder of SUITE/CELL.safetensors the runner was given; OUTPUTS: its
SUITE-CELL.KERNEL[.sN].safetensors (and SUITE-CELL.KERNEL.in.safetensors where the kernel took
other inputs). A run is held with `CLI check --rule exact --rule fa3 --rule structure` under its
kernel's recipe (split.count = N for AITER). Exit 1 if any run fails the default rules (fa3,
structure), a run with a planted bug (KERNEL~BUG) passes them, or a recipe's run is not
bit-identical where STRICT names the kernel (a comma list, MLAREF_TP_STRICT); 2 on bad arguments.
Standard library only."""
import os
import re
import subprocess
import sys

RECIPE = {"aiter-dot": "aiter-triton-decode-dot", "aiter-sum": "aiter-triton-decode",
          "seeds-single": "triton-fp8-single-sm90",
          "seeds-split": "triton-fp8-split-sm90", "flashmla-fp8": "flashmla-fp8",
          "flashmla-bf16": "flashmla-bf16"}
LINE = re.compile(r"tensor '(o|lse)'.*?: (\d+) elements, (\d+) bit-identical")
ULP = re.compile(r"^ulp: max (\d+)")
RULE = re.compile(r"^rule (lse )?(\S+)\s+(pass|FAIL)")


def hold(cli, inputs, out):
    """(per tensor: elements, identical, max ulp), {rule: pass} for one output file"""
    base = os.path.basename(out)[:-len(".safetensors")]
    cell, kernel = base.split(".")[0], base.split(".")[1]
    ns = base.split(".s")[-1] if ".s" in base[len(cell) + len(kernel) + 1:] else None
    given = os.path.join(os.path.dirname(out), f"{cell}.{kernel}.in.safetensors")
    suite, name = cell.split("-", 1)
    inp = given if os.path.exists(given) else os.path.join(inputs, suite, name + ".safetensors")
    recipe = RECIPE[kernel.split("~")[0]]  # KERNEL~BUG: the kernel with a planted bug
    cmd = [cli, "check", "--inputs", inp, "--output", out, "--recipe", recipe, "--rule", "exact",
           "--rule", "fa3", "--rule", "structure"]
    if ns:
        cmd += ["--set", f"split.count={ns}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        return None, p.stderr.strip().splitlines()[-1:] or ["no output"]
    stats, rules, cur = {}, {}, None
    for ln in p.stdout.splitlines():
        m = LINE.search(ln)
        if m:
            cur = m.group(1)
            stats[cur] = [int(m.group(2)), int(m.group(3)), 0]
        m = ULP.match(ln)
        if m and cur:
            stats[cur][2] = int(m.group(1))
        m = RULE.match(ln)
        if m:
            rules[("lse " if m.group(1) else "") + m.group(2)] = m.group(3) == "pass"
    if not rules or "o" not in stats:
        return None, ["check printed no rule lines: " + (p.stdout.strip().splitlines() or [""])[-1]]
    return (suite, kernel, stats), rules


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    cli, inputs, outputs = sys.argv[1:]
    strict = set(filter(None, os.environ.get("MLAREF_TP_STRICT", "").split(",")))
    table, bugs, status = {}, {}, 0
    for f in sorted(os.listdir(outputs)):
        if not f.endswith(".safetensors") or f.endswith(".in.safetensors"):
            continue
        if f.split(".")[1].split("~")[0] not in RECIPE:
            continue
        got, rules = hold(cli, inputs, os.path.join(outputs, f))
        if got is None:
            print(f"{f}: error: {rules[0]}")
            status = 1
            continue
        suite, kernel, stats = got
        default = all(v for k, v in rules.items() if not k.endswith("exact"))
        exact = all(v for k, v in rules.items() if k.endswith("exact"))
        if "~" in kernel:  # a planted bug: the default rules must find it
            print(f"{f}: planted bug {'caught' if not default else 'NOT caught'}")
            row = bugs.setdefault((kernel, suite), [0, 0])
            row[0] += not default
            row[1] += 1
            status |= default
            continue
        print(f"{f}: " + ", ".join(f"{t} {s[1]}/{s[0]} identical (max {s[2]} ulp)"
                                   for t, s in stats.items()) +
              f"; default rules {'pass' if default else 'FAIL'}")
        if not default or (kernel in strict and not exact):
            status = 1
        row = table.setdefault((kernel, suite), [0, 0, 0, 0, 0, 0, 0])
        for i, t in enumerate(("o", "lse")):
            if t in stats:
                row[3 * i] += stats[t][0]
                row[3 * i + 1] += stats[t][1]
                row[3 * i + 2] = max(row[3 * i + 2], stats[t][2])
        row[6] += 1
    print("| kernel | suite | runs | o bit-identical | max ulp | lse bit-identical | max ulp |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (k, s), r in sorted(table.items()):
        pct = [100.0 * r[1] / r[0] if r[0] else 100.0, 100.0 * r[4] / r[3] if r[3] else 100.0]
        print(f"| {k} | {s} | {r[6]} | {r[1]}/{r[0]} ({pct[0]:.4f}%) | {r[2]} | "
              f"{r[4]}/{r[3]} ({pct[1]:.4f}%) | {r[5]} |")
    if bugs:
        print("| kernel~planted bug | suite | runs the default rules fail |")
        print("| --- | --- | --- |")
        for (k, s), r in sorted(bugs.items()):
            print(f"| {k} | {s} | {r[0]} of {r[1]} |")
    sys.exit(status)


if __name__ == "__main__":
    main()
