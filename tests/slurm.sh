#!/usr/bin/env bash
# A sharded report on a real Slurm: a single-node cluster from Debian's packages (slurmctld,
# slurmd, munge; scripts/setup.sh installs them), started as root in a temporary folder with its
# own munge key and socket and stopped afterwards whatever happens. Submits a 4-shard report of
# the edge suite with scripts/slurm/submit.sh (an array, then the merge after it) and checks that
# the merged summary.json has the unsharded run's cells, verdicts and digests, in its order;
# then cancels one shard mid-run and checks that the merge names its cells missing and exits 1.
# Prints the times (sharded and merged against unsharded).
#   tests/slurm.sh MLAREF_BINARY
set -uo pipefail
M=$(readlink -f "$1")
here=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "slurm: $*" >&2; }
for p in slurmctld slurmd munged sbatch squeue scancel scontrol; do
  command -v $p >/dev/null ||
    { say "$p is missing: bash scripts/setup.sh installs slurmctld, slurmd and munge"; exit 1; }
done
[ "$(id -u)" = 0 ] || { say "the daemons start as root here (munge's key, slurmd)"; exit 1; }
D=$(mktemp -d /tmp/mlaref-slurm.XXXXXX)
chmod 755 "$D"
export SLURM_CONF=$D/slurm.conf
stop() {
  scontrol shutdown >/dev/null 2>&1
  for f in "$D"/slurmd.pid "$D"/slurmctld.pid; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  munged --stop --socket="$D/munge/sock" >/dev/null 2>&1
  sleep 1
  rm -rf "$D"
}
trap stop EXIT

# the cluster: munge with its own key and socket, one node with this machine's CPUs, ports of
# this run's own (two runs at once do not meet)
mkdir -p "$D/munge" "$D/state" "$D/spool" && chmod 700 "$D/munge"
head -c 1024 /dev/urandom > "$D/munge/key" && chmod 600 "$D/munge/key"
munged --force --key-file="$D/munge/key" --socket="$D/munge/sock" --pid-file="$D/munge/pid" \
  --seed-file="$D/munge/seed" --log-file="$D/munge/log" || { say "munged did not start"; exit 1; }
port=$((20000 + $$ % 20000))
node=$(hostname -s)
cat > "$SLURM_CONF" <<EOF
ClusterName=mlaref
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$D/munge/sock
CredType=cred/munge
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
SlurmctldPort=$port
SlurmdPort=$((port + 1))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
NodeName=$node CPUs=$(nproc) State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
slurmctld -f "$SLURM_CONF" && slurmd -f "$SLURM_CONF" ||
  { say "the daemons did not start"; exit 1; }
for _ in $(seq 60); do sinfo -h -o %t 2>/dev/null | grep -q idle && break; sleep 0.5; done
sinfo -h -o %t | grep -q idle ||
  { say "the node never came up: $(tail -3 "$D/slurmd.log")"; exit 1; }

# wait_gone JOB...: until the jobs leave the queue (at most 10 minutes)
wait_gone() {
  for _ in $(seq 1200); do
    [ -z "$(squeue -h -j "$(IFS=,; echo "$*")" 2>/dev/null)" ] && return 0
    sleep 0.5
  done
  say "jobs $* still queued after 10 minutes"
  return 1
}
now() { date +%s.%N; }
fail=0
export MLAREF=$M

# the unsharded run, the reference
t0=$(now)
"$M" report --suite edge --gpu off --out "$D/whole" >/dev/null
t1=$(now)

# the sharded run: 4 shards and the merge
read -r array merge < <(bash "$here/scripts/slurm/submit.sh" "$D/run" edge 4) ||
  { say "submit.sh failed"; exit 1; }
wait_gone "$array" "$merge" || exit 1
t2=$(now)
if [ "$(cat "$D/run/merged.status" 2>/dev/null)" != 0 ]; then
  say "the merge exited $(cat "$D/run/merged.status" 2>/dev/null)"
  cat "$D"/run/*.out >&2
  fail=1
fi
python3 - "$D/whole/summary.json" "$D/run/merged/summary.json" <<'PY' || fail=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
key = lambda c: (c["shape"], c["recipe"], c["policy"], c["pass"], c.get("o_sha256"),
                 c.get("golden"), c["column"])
ka, kb = [key(c) for c in a["cells"]], [key(c) for c in b["cells"]]
if ka != kb or a["failures"] != b["failures"] or b["missing"]:
    sys.exit(f"slurm: the merged cells differ from the unsharded run's ({len(kb)} vs {len(ka)})")
if [s["i"] for s in b["shards"]] != [1, 2, 3, 4]:
    sys.exit(f"slurm: shards {b['shards']}")
print(f"slurm: merged {len(kb)} cells of 4 shards = the unsharded run's", file=sys.stderr)
PY

# a shard cancelled mid-run: the merge names its cells missing, exit 1
slow="if [ \$SLURM_ARRAY_TASK_ID = 2 ]; then sleep 300; fi; exec bash"
sbatch_array() {
  local script dir
  script=$(printf %q "$here/scripts/slurm/report-array.sbatch")
  dir=$(printf %q "$D/kill")
  sbatch --parsable --export=ALL --array=0-3 --output "$D/kill/slurm-%A_%a.out" \
    --wrap "$slow $script $dir edge --gpu off"
}
mkdir -p "$D/kill"
array=$(sbatch_array) && merge=$(sbatch --parsable --export=ALL --dependency=afterany:"$array" \
  --output "$D/kill/merge.out" "$here/scripts/slurm/report-merge.sbatch" "$D/kill") ||
  { say "sbatch failed"; exit 1; }
for _ in $(seq 240); do
  squeue -h -j "${array}_2" -o %t 2>/dev/null | grep -q R && break
  sleep 0.5
done
scancel "${array}_2"
wait_gone "$array" "$merge" || exit 1
[ "$(cat "$D/kill/merged.status" 2>/dev/null)" = 1 ] ||
  { say "with a shard cancelled the merge exited $(cat "$D/kill/merged.status")"; fail=1; }
python3 - "$D/kill/merged/summary.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
if not d["missing"] or any(s["i"] == 3 for s in d["shards"]):
    sys.exit(f"slurm: the cancelled shard's cells are not listed missing: {d['missing'][:3]}")
print(f"slurm: cancelled shard 3/4: {len(d['missing'])} cells missing, exit 1", file=sys.stderr)
PY
awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN {
  printf "slurm: unsharded %.1f s; 4 shards and the merge %.1f s (%.2fx)\n", b - a, c - b,
         (c - b) / (b - a) }' >&2
exit $fail
