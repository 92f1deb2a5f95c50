#!/usr/bin/env bash
# The CI examples (examples/ci) parse as YAML, and every mlaref command they run exists with the
# options they give it (checked against the command's own usage, `mlaref CMD --help`).
#   tests/ci_examples.sh MLAREF_BINARY
set -euo pipefail
M=$1
here=$(cd "$(dirname "$0")/.." && pwd)
python3 - "$M" "$here"/examples/ci/*.yml <<'PY'
import re, subprocess, sys, yaml

def commands(x):
    """the shell text of every step: GitHub's run:, Buildkite's command:"""
    if isinstance(x, dict):
        for k, v in x.items():
            if k in ("run", "command") and isinstance(v, str):
                yield v
            else:
                yield from commands(v)
    elif isinstance(x, list):
        for v in x:
            yield from commands(v)

mlaref, files, bad, seen = sys.argv[1], sys.argv[2:], [], 0
for f in files:
    doc = yaml.safe_load(open(f))
    if not isinstance(doc, dict):
        bad.append(f"{f}: not a YAML mapping")
        continue
    for s in commands(doc):
        for line in s.splitlines():
            m = re.search(r"\bmlaref (\w[\w-]*)(?: (merge))?((?: [^|;&]*)?)", line)
            if not m:
                continue
            seen += 1
            cmd = [m.group(1)] + ([m.group(2)] if m.group(2) else [])
            usage = subprocess.run([mlaref, *cmd, "--help"], capture_output=True, text=True)
            if usage.returncode != 0 or "usage: mlaref" not in usage.stdout:
                bad.append(f"{f}: 'mlaref {' '.join(cmd)}' is not a command")
                continue
            for opt in re.findall(r"(--[a-z][a-z-]*)", m.group(3)):
                if not re.search(re.escape(opt) + r"(?![\w-])", usage.stdout):
                    bad.append(f"{f}: mlaref {' '.join(cmd)}: no option {opt}")
if not seen:
    bad.append("no mlaref command found in the examples")
for b in bad:
    print("ci_examples:", b, file=sys.stderr)
print(f"ci_examples: {len(files)} files, {seen} mlaref commands checked", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
