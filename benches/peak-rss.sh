#!/bin/bash
# The peak RSS of one process, not of its children: `/usr/bin/time -v` reports the
# largest of the process and the children it waited for, and a PoCL worker (LLVM
# loaded) outweighs the parent. For docs/benchmarks.md (#12).
#   benches/peak-rss.sh gpulab --labs benches/labs run per-line-cost-cl --param lines=200000 --json
# prints "PEAK_KB KB WALL s rc=RC" on stderr once the command exits.
start=$(date +%s.%N)
"$@" &
pid=$!
hwm=0
# VmHWM is the process's own high-water mark: polling late still sees the peak,
# as long as the process has not exited yet.
while kill -0 "$pid" 2>/dev/null; do
  v=$(awk '/VmHWM/{print $2}' "/proc/$pid/status" 2>/dev/null)
  [ -n "$v" ] && [ "$v" -gt "$hwm" ] && hwm=$v
  sleep 0.2
done
wait "$pid"
rc=$?
end=$(date +%s.%N)
echo "$hwm KB $(echo "$end - $start" | bc | awk '{printf "%.2f", $1}') s rc=$rc" >&2
exit $rc
