#!/usr/bin/env bash
# deploy/slurm on a real Slurm: a one-node cluster on this machine (munged,
# slurmctld and slurmd from Debian's packages, as many CPUs as it has), the card
# array submitted with TASKS tasks (default 3) on whatever OpenCL device is here
# (PoCL in CI), each carding LAB (default cl-finish: the scheduling is what is
# tested here, tests/card.rs cards every lab), the merge behind it; then the
# matrix is checked. Every daemon it
# started is ended and its folder removed, however it ends.
#
#   sudo GPULAB=target/debug/gpulab deploy/slurm/test-localhost.sh
#
# Needs root (the daemons run as root here), slurmctld, slurmd, slurm-client and
# munge installed, and no other Slurm running on this machine.
set -euo pipefail
cd "$(dirname "$0")/../.."

GPULAB=$(realpath "${GPULAB:-target/debug/gpulab}")
TASKS=${TASKS:-3}
LAB=${LAB:-cl-finish}
[ "$(id -u)" -eq 0 ] || { echo "run as root (slurmd runs jobs as their user)" >&2; exit 2; }
[ -x "$GPULAB" ] || { echo "no gpulab at $GPULAB (GPULAB=…)" >&2; exit 2; }
for tool in munged mungekey slurmctld slurmd sbatch scontrol; do
  command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install munge slurmctld slurmd slurm-client)" >&2; exit 2; }
done

D=$(mktemp -d "${TMPDIR:-/tmp}/gpulab-slurm.XXXXXX")
chmod 755 "$D"
stop() {
  for pid in "$D/slurmd.pid" "$D/slurmctld.pid" "$D/munged.pid"; do
    [ -s "$pid" ] && kill "$(cat "$pid")" 2>/dev/null || true
  done
  # Give them their second to go, then make sure.
  sleep 1
  for pid in "$D/slurmd.pid" "$D/slurmctld.pid" "$D/munged.pid"; do
    [ -s "$pid" ] && kill -9 "$(cat "$pid")" 2>/dev/null || true
  done
  rm -rf "$D"
}
trap stop EXIT

mkdir -p "$D/state" "$D/spool" "$D/work" "$D/munge"
chmod 700 "$D/munge"
mungekey --create --keyfile="$D/munge/munge.key" --force
munged --force --socket="$D/munge/munge.socket" --key-file="$D/munge/munge.key" \
  --pid-file="$D/munged.pid" --log-file="$D/munged.log" --seed-file="$D/munge/seed"

cpus=$(nproc)
export SLURM_CONF="$D/slurm.conf"
cat >"$SLURM_CONF" <<EOF
ClusterName=gpulab-test
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.socket
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -f "$SLURM_CONF" -i
slurmd -f "$SLURM_CONF" -N localhost

# The node comes up within seconds.
for _ in $(seq 60); do
  scontrol show node localhost 2>/dev/null | grep -qE 'State=(IDLE|MIXED)' && break
  sleep 1
done
scontrol show node localhost | grep -E 'State=(IDLE|MIXED)' >/dev/null \
  || { echo "the node never came up:"; tail -n 20 "$D/slurmd.log" "$D/slurmctld.log"; exit 1; }

cd "$D/work"
ids=$(CARDS="$D/work/cards" MATRIX="$D/work/matrix" GPULAB="$GPULAB" TASKS=$TASKS \
  GPULAB_CARD_ARGS="--lab $LAB" "$OLDPWD/deploy/slurm/submit.sh")
echo "submitted: array and merge $ids"
merge=${ids##* }
# The merge ends after every card; wait for it to leave the queue.
for _ in $(seq 900); do
  squeue -h -j "$merge" 2>/dev/null | grep -q . || break
  sleep 1
done
cat gpulab-card-*.out gpulab-matrix-*.out 2>/dev/null | tail -n 20

fail() { echo "FAILED: $*" >&2; tail -n 30 "$D/slurmctld.log" >&2; exit 1; }
cards=(cards/*/card.json)
[ "${#cards[@]}" -eq "$TASKS" ] || fail "$TASKS cards expected, found ${#cards[@]}"
[ -f matrix/matrix.json ] || fail "no matrix"
python3 - "$TASKS" <<'PY' || fail "the matrix is not the cards'"
import json, sys
tasks = int(sys.argv[1])
m = json.load(open("matrix/matrix.json"))
assert m["kind"] == "matrix", m["kind"]
cards = [json.load(open(c)) for c in m["cards"]]
assert len(cards) == tasks, len(cards)
devices = {d["id"] for c in cards for d in c["devices"]}
# One node: every task carded the same devices; the first card's stand, and
# the merge names each later copy.
assert len(m["columns"]) == len(devices), (m["columns"], devices)
assert len(m["problems"]) == (tasks - 1) * len(devices), m["problems"]
runs = sum(len(c["runs"]) for c in cards)
claims = sum(len(r["claims"]) for c in cards for r in c["runs"])
assert m["rows"] and all(r["judged_on"] >= 1 for r in m["rows"])
print(f"matrix: {len(m['columns'])} device(s), {len(m['rows'])} claims, "
      f"{len(m['problems'])} copies named; {tasks} cards, {runs} runs, {claims} verdicts")
PY
echo "== deploy/slurm ran on a one-node Slurm: $TASKS cards and their matrix"
