#!/bin/bash
# The observer's cost (#47), measured as users would feel it: each program
# times itself, bare and under `gpulab watch` (defaults), in alternating rounds
# (the order turns each round, so drift in the machine falls on every side
# alike). Medians and spreads of ROUNDS rounds, as Markdown rows for
# docs/benchmarks.md; one column per gpulab binary given, so two builds are
# compared on the same machine in the same minutes.
#
#   benches/watch/overhead.sh OUT ROUNDS GPULAB [GPULAB...]
#
# Programs: benches/watch/launches.cu (empty kernel launches; small
# cudaMallocAsync/cudaFreeAsync pairs) and benches/watch/torch_mlp.py (the
# launch-heavy training loop), when python3 has torch; ONLY=launches (or
# torch_mlp) runs one of them. Needs nvcc.
set -u
OUT=$(mkdir -p "$1" && cd "$1" && pwd); ROUNDS=${2:-8}; shift 2
BINS=("$@")
HERE=$(cd "$(dirname "$0")" && pwd)
export PATH=$PATH:/usr/local/cuda/bin
nvcc -O2 -o "$OUT/launches" "$HERE/launches.cu" || exit 1
PROGS=("launches|$OUT/launches")
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null \
  && PROGS+=("torch_mlp|python3 $HERE/torch_mlp.py")
if [ -n "${ONLY:-}" ]; then
  for i in "${!PROGS[@]}"; do [ "${PROGS[$i]%%|*}" = "$ONLY" ] || unset 'PROGS[i]'; done
fi
CONFIGS=(bare)
for i in "${!BINS[@]}"; do CONFIGS+=("w$i"); done
: > "$OUT/runs.txt"
# One run: the program's own summary line and, watched, what its agents dropped.
one() { # config name command...
  local config=$1 name=$2; shift 2
  local line drops=-
  if [ "$config" = bare ]; then
    line=$("$@" 2>&1 >/dev/null | grep "^$name:" | tail -1)
  else
    local b=${BINS[${config#w}]}
    line=$("$b" watch --json -o "$OUT/last.json" -- "$@" 2>&1 >/dev/null | grep "^$name:" | tail -1)
    drops=$(python3 -c "import json;d=json.load(open('$OUT/last.json'));print(sum(p.get('dropped') or 0 for p in d['processes']))" 2>/dev/null || echo '?')
  fi
  echo "$ROUND $config $name dropped=$drops $line" >> "$OUT/runs.txt"
}
for r in $(seq 1 "$ROUNDS"); do
  ROUND=$r
  n=${#CONFIGS[@]}
  for k in $(seq 0 $((n - 1))); do
    config=${CONFIGS[$(( (k + r) % n ))]}
    for p in "${PROGS[@]}"; do one "$config" "${p%%|*}" ${p#*|}; done
  done
done
python3 - "$OUT/runs.txt" "${#BINS[@]}" <<'PY'
import re, statistics, sys
runs = [l.split() for l in open(sys.argv[1])]
nbins = int(sys.argv[2])
metrics = [("launches", "launch_ns", "empty kernel launch, ns"), ("launches", "pair_ns", "cudaMallocAsync + cudaFreeAsync of 256 B, ns"), ("torch_mlp", "loop_s", "PyTorch MLP loop, 3,000 steps, s"), ("torch_mlp", "loop_cpu_s", "the same loop, its thread's CPU s")]
def values(config, prog, key):
    """{round: value} of one configuration's runs of one program."""
    out = {}
    for r in runs:
        if r[1] == config and r[2] == prog:
            m = re.search(rf"\b{key}=([0-9.]+)", " ".join(r))
            if m: out[r[0]] = float(m.group(1))
    return out
# Each watched cell: the median and spread of its own runs, then the median of
# its rounds' ratios to bare in the same round (drift between rounds cancels).
head = "| what | bare | " + " | ".join(f"watched ({i + 1})" for i in range(nbins)) + " |"
print(head); print("|" + "---|" * (2 + nbins))
for prog, key, label in metrics:
    bare = values("bare", prog, key)
    if not bare: continue
    b = list(bare.values())
    cells = [f"{statistics.median(b):.4g} [{min(b):.4g}-{max(b):.4g}]"]
    for i in range(nbins):
        w = values(f"w{i}", prog, key)
        if not w: cells.append("-"); continue
        v = list(w.values())
        paired = [(w[r] / bare[r] - 1) * 100 for r in w if r in bare and bare[r] > 0]
        cells.append(f"{statistics.median(v):.4g} [{min(v):.4g}-{max(v):.4g}], paired {statistics.median(paired):+.1f}% [{min(paired):+.1f} to {max(paired):+.1f}]")
    print(f"| {label} (median of {len(b)} [spread]) | " + " | ".join(cells) + " |")
drops = [r for r in runs if r[1] != "bare" and r[3] not in ("dropped=0",)]
print(f"\nwatched runs with records dropped: {len(drops)} of {sum(1 for r in runs if r[1] != 'bare')}")
PY
