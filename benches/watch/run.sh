#!/bin/bash
# The cost of `gpulab watch` on real programs, side by side with the same
# programs unwatched and with compute-sanitizer, in one run on one machine.
# Needs an NVIDIA GPU, nvcc, a C compiler with OpenCL headers, and python3 with
# torch (optional). Prints Markdown rows for docs/benchmarks.md.
#
#   benches/watch/run.sh GPULAB_BINARY OUT_DIR [repeats=5]
set -u
B=$(realpath "$1"); OUT=$(realpath "$2"); N=${3:-5}
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p "$OUT/bin"
nvcc -O2 -o "$OUT/bin/cuda_calls" "$HERE/cuda_calls.cu" || exit 1
nvcc -O2 -o "$OUT/bin/cuda_free_wait" "$HERE/cuda_free_wait.cu" || exit 1
nvcc -O2 -o "$OUT/bin/cuda_leaks" "$ROOT/tests/watch/cuda_leaks.cu" || exit 1
cc -O2 -o "$OUT/bin/cl_calls" "$HERE/cl_calls.c" -lOpenCL || exit 1

# The program's own summary line (on stderr) for each run, watched or not.
plain() { "$@" 2>&1 >/dev/null | tail -1; }
watched() { "$B" watch --json -o "$OUT/last.json" -- "$@" 2>&1 >/dev/null | grep -v '^gpulab' | tail -1; }
# Without the calling frame the agent takes by default of calls that make
# memory, contexts, modules, queues and streams.
bare_agent() { "$B" watch --backtrace=off --json -o "$OUT/last.json" -- "$@" 2>&1 >/dev/null | grep -v '^gpulab' | tail -1; }
# The same with --backtrace: a native stack taken at every creating call.
traced() { "$B" watch --backtrace --json -o "$OUT/last.json" -- "$@" 2>&1 >/dev/null | grep -v '^gpulab' | tail -1; }
drops() { python3 -c "import json;d=json.load(open('$OUT/last.json'));print(sum(p.get('dropped') or 0 for p in d['processes']),sum(p.get('records') or 0 for p in d['processes']))"; }
wall() { local s=$(date +%s.%N); "$@" >/dev/null 2>&1; local e=$(date +%s.%N); python3 -c "print(f'{$e-$s:.3f}')"; }
median() { python3 -c "import sys,statistics;v=[float(x) for x in sys.argv[1:]];print(f'{statistics.median(v):.3f}' if v else '-')" "$@"; }
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }

echo "| what | unwatched | under gpulab watch | note |"
echo "|---|---:|---:|---|"
# Per call: as fast as the program goes, then paced at 100k calls/s.
p=(); w=(); for i in $(seq $N); do p+=($(plain "$OUT/bin/cuda_calls" 100000 | field record_ns)); w+=($(watched "$OUT/bin/cuda_calls" 100000 | field record_ns)); done
echo "| cuEventRecord, ns per call (100k calls, unpaced) | $(median ${p[@]}) | $(median ${w[@]}) | drops, records in the last run: $(drops) |"
p=(); w=(); o=(); t=(); for i in $(seq $N); do p+=($(plain "$OUT/bin/cuda_calls" 100000 | field pair_ns)); w+=($(watched "$OUT/bin/cuda_calls" 100000 | field pair_ns)); o+=($(bare_agent "$OUT/bin/cuda_calls" 100000 | field pair_ns)); t+=($(traced "$OUT/bin/cuda_calls" 100000 | field pair_ns)); done
echo "| cudaMalloc+cudaFree 4 KiB, ns per pair | $(median ${p[@]}) | $(median ${w[@]}) | the calling frame is taken: without it (--backtrace=off) $(median ${o[@]}), whole stacks (--backtrace) $(median ${t[@]}) |"
p=(); w=(); o=(); t=(); for i in $(seq $N); do p+=($(plain "$OUT/bin/cuda_calls" 100000 | field event_pair_ns)); w+=($(watched "$OUT/bin/cuda_calls" 100000 | field event_pair_ns)); o+=($(bare_agent "$OUT/bin/cuda_calls" 100000 | field event_pair_ns)); t+=($(traced "$OUT/bin/cuda_calls" 100000 | field event_pair_ns)); done
echo "| cudaEventCreate+cudaEventDestroy, ns per pair | $(median ${p[@]}) | $(median ${w[@]}) | no frame is taken of events by default: --backtrace=off $(median ${o[@]}), whole stacks (--backtrace) $(median ${t[@]}) |"
watched "$OUT/bin/cuda_calls" 200000 100000 > /dev/null
echo "| cuEventRecord paced at 100k calls/s, 2 s | - | drops, records: $(drops) | |"
p=(); w=(); for i in $(seq $N); do p+=($(plain "$OUT/bin/cl_calls" 100000 gpu | field call_ns)); w+=($(watched "$OUT/bin/cl_calls" 100000 gpu | field call_ns)); done
echo "| clRetainMemObject/clReleaseMemObject on NVIDIA OpenCL, ns per call | $(median ${p[@]}) | $(median ${w[@]}) | drops, records in the last run: $(drops) |"
watched "$OUT/bin/cl_calls" 100000 gpu 100000 > /dev/null
echo "| OpenCL calls paced at 100k calls/s, 2 s | - | drops, records: $(drops) | |"
# What the labs measure, in a program of its own: the observer must not change it.
p=(); w=(); pa=(); wa=()
for i in $(seq $N); do
  l=$(plain "$OUT/bin/cuda_free_wait" 200); p+=($(echo "$l" | field free_ms)); pa+=($(echo "$l" | field free_async_ms))
  l=$(watched "$OUT/bin/cuda_free_wait" 200); w+=($(echo "$l" | field free_ms)); wa+=($(echo "$l" | field free_async_ms))
done
echo "| cudaFree behind a 200 ms kernel, ms | $(median ${p[@]}) | $(median ${w[@]}) | it waits for the kernel |"
echo "| cudaFreeAsync behind a 200 ms kernel, ms | $(median ${pa[@]}) | $(median ${wa[@]}) | it returns at once |"
# Whole programs, wall time.
p=(); w=(); s=(); for i in $(seq $N); do p+=($(wall "$OUT/bin/cuda_leaks" 8)); w+=($(wall "$B" watch -o /dev/null -- "$OUT/bin/cuda_leaks" 8)); s+=($(wall compute-sanitizer --leak-check full "$OUT/bin/cuda_leaks" 8)); done
echo "| cuda_leaks 8 iterations, wall s | $(median ${p[@]}) | $(median ${w[@]}) | compute-sanitizer --leak-check full: $(median ${s[@]}) s, leaks only at exit |"
p=(); w=(); for i in $(seq $N); do p+=($(wall true)); w+=($(wall "$B" watch -o /dev/null -- true)); done
echo "| \`true\`, wall s | $(median ${p[@]}) | $(median ${w[@]}) | what gpulab itself adds to any program |"
if python3 -c "import torch" 2>/dev/null; then
  p=(); w=(); for i in $(seq $N); do p+=($(wall python3 "$ROOT/tests/watch/torch_cache.py" 0)); w+=($(wall "$B" watch -o /dev/null -- python3 "$ROOT/tests/watch/torch_cache.py" 0)); done
  echo "| PyTorch torch_cache.py, wall s | $(median ${p[@]}) | $(median ${w[@]}) | import, 1 GiB tensor, del, empty_cache |"
  p=(); w=(); pw=(); ww=()
  for i in $(seq $N); do
    pw+=($(wall python3 "$HERE/torch_loop.py" 2000)); ww+=($(wall "$B" watch -o /dev/null -- python3 "$HERE/torch_loop.py" 2000))
    p+=($(plain python3 "$HERE/torch_loop.py" 2000 | field loop_s)); w+=($(watched python3 "$HERE/torch_loop.py" 2000 | field loop_s))
  done
  echo "| PyTorch torch_loop.py 2000 iterations, loop s | $(median ${p[@]}) | $(median ${w[@]}) | drops, records in the last run: $(drops) |"
  echo "| PyTorch torch_loop.py 2000 iterations, wall s | $(median ${pw[@]}) | $(median ${ww[@]}) | with import and CUDA start |"
  # A training loop (forward, backward, step), timed by itself, watched and
  # not, alternating; the framework hook reads PyTorch's figures meanwhile.
  p=(); w=(); for i in $(seq $N); do p+=($(plain python3 "$ROOT/tests/watch/torch_losses.py" 300 0 | field loop_s)); w+=($(watched python3 "$ROOT/tests/watch/torch_losses.py" 300 0 | field loop_s)); done
  echo "| PyTorch torch_losses.py 300 training steps, loop s | $(median ${p[@]}) | $(median ${w[@]}) | runs: ${p[*]} / ${w[*]} |"
  python3 - <<'PY'
import time, torch
x = torch.empty(1 << 20, device="cuda")
torch.cuda.memory_stats(0); t = time.thread_time()
for _ in range(2000): torch.cuda.memory_stats(0)
c = (time.thread_time() - t) / 2000
print(f"| torch.cuda.memory_stats(), the hook's reading, ms of CPU | - | {c*1e3:.3f} | at 10 readings a second: {c*10*100:.2f}% of a core |")
PY
fi
