#!/bin/bash
# Measure gpulab's "who holds it" table on every program of the corpus.
#
#   bash corpus/run.sh RESULTS [STEP...]
#
# STEP: a group (cuda opencl cupy torch jax) runs its programs bare and under
# `gpulab watch` on the GPU; `sanitizer` runs the CUDA programs under
# compute-sanitizer's leak check; `pocl` runs the OpenCL programs under
# `gpulab watch` on PoCL (CPU device); a program's name runs that one bare and
# watched.  Default: all groups, then sanitizer, then pocl.  Then
# corpus/summarize.py writes RESULTS/results.md and RESULTS/results.jsonl.
#
# Environment: BIN (build dir, default /tmp/corpus-bin; built when missing),
# GPULAB (default .dev/corpus/gpulab under the repository root), WORK (scratch,
# default /tmp/corpus-work), DEADLINE (epoch seconds: steps not begun by
# DEADLINE-60 are skipped and say so), TO_BARE / TO_WATCH / TO_SAN (timeouts, s),
# SAN_JOBS (sanitizer runs at a time, default 6).
#
# Every run starts in a fresh copy of the program's build folder, so files a
# program writes (checkpoints, caches) never reach the next run.  Measured runs
# (bare, watched) go one at a time: NVML's figures are the whole device's.
set -u
C=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$C/.." && pwd)
R=${1:?usage: run.sh RESULTS [STEP...]}; shift
mkdir -p "$R/raw" "$R/logs"; R=$(cd "$R" && pwd)
BIN=${BIN:-/tmp/corpus-bin}; WORK=${WORK:-/tmp/corpus-work}
GPULAB=${GPULAB:-$ROOT/.dev/corpus/gpulab}
TO_BARE=${TO_BARE:-120}; TO_WATCH=${TO_WATCH:-180}; TO_SAN=${TO_SAN:-150}
SAN_JOBS=${SAN_JOBS:-6}
DEADLINE=${DEADLINE:-0}
NVOCL=/usr/local/nvidia/lib64/libnvidia-opencl.so.1
POCL=$(ldconfig -p 2>/dev/null | awk '/libpocl\.so\.2 /{print $NF; exit}'); POCL=${POCL:-libpocl.so.2}
export MPLBACKEND=Agg   # programs that plot: no display there

# name | group | folder to start in (inside its build folder) | command
PROGRAMS='
vectorAdd|cuda|.|./vectorAdd
vectorAddDrv|cuda|.|./vectorAddDrv
vectorAddMMAP|cuda|.|./vectorAddMMAP
simpleDrvRuntime|cuda|.|./simpleDrvRuntime
matrixMul|cuda|.|./matrixMul
asyncAPI|cuda|.|./asyncAPI
simpleStreams|cuda|.|./simpleStreams
simpleCallback|cuda|.|./simpleCallback
simpleZeroCopy|cuda|.|./simpleZeroCopy
UnifiedMemoryStreams|cuda|.|./UnifiedMemoryStreams
UnifiedMemoryPerf|cuda|.|./UnifiedMemoryPerf
graphMemoryNodes|cuda|.|./graphMemoryNodes
graphMemoryFootprint|cuda|.|./graphMemoryFootprint
simpleCudaGraphs|cuda|.|./simpleCudaGraphs
streamOrderedAllocation|cuda|.|./streamOrderedAllocation
simpleCUBLAS|cuda|.|./simpleCUBLAS
simpleCUFFT|cuda|.|./simpleCUFFT
conjugateGradientPrecond|cuda|.|./conjugateGradientPrecond
cl_enumopencl|opencl|.|./enumopencl
cl_copybuffer|opencl|.|./copybuffer
cl_copybufferkernel|opencl|.|./copybufferkernel
hoocl_deviceinfo|opencl|C|./DeviceInfo
hoocl_vadd|opencl|C|./vadd
hoocl_vadd_chain|opencl|C|./vadd_chain
hoocl_vadd_abc|opencl|C|./vadd_abc
hoocl_matmul|opencl|C|./mult
hoocl_pi|opencl|C|./pi_ocl
hoocl_pi_vocl|opencl|C|./pi_vocl 4
cupy_stream_cublas|cupy|.|python3 cublas.py
cupy_stream_memcpy|cupy|.|python3 cupy_memcpy.py
cupy_stream_map_reduce|cupy|.|python3 map_reduce.py
cupy_kmeans|cupy|.|python3 kmeans.py
cupy_sgemm|cupy|.|python3 sgemm.py --m 1024 --n 1024 --k 1024
cupy_black_scholes|cupy|.|python3 black_scholes.py
cupy_cg|cupy|.|python3 cg.py
cupy_gmm|cupy|.|python3 gmm.py
torch_dcgan|torch|.|python3 main.py --dataset fake --accel --dry-run --outf out
torch_ddp_single_gpu|torch|.|python3 single_gpu.py 2 1
torch_ddp_torchrun|torch|.|python3 -m torch.distributed.run --standalone --nproc_per_node=1 multigpu_torchrun.py 2 1
torch_nanogpt_bench|torch|.|python3 bench.py --real_data=False --compile=False
torch_mingpt_adder|torch|.|env PYTHONPATH=. python3 projects/adder/adder.py --trainer.max_iters=501
torch_lightning_boring|torch|.|python3 bug_report_model.py
jax_gp_regression|jax|.|python3 gaussian_process_regression.py
jax_kernel_lsq|jax|.|python3 kernel_lsq.py
jax_advi|jax|.|python3 advi.py
'

late() { # true when the deadline is near
  [ "$DEADLINE" -gt 0 ] && [ $(date +%s) -gt $((DEADLINE - 60)) ]
}
note() { echo "$(date +%T) $*" | tee -a "$R/logs/run.log"; }

ensure_built() { # GROUP
  local bg=$1 missing=0 n g d c g2
  [ "$bg" = cupy ] || [ "$bg" = torch ] || [ "$bg" = jax ] && bg=python
  while IFS='|' read -r n g d c; do
    [ -z "$n" ] && continue
    case "$g" in cupy|torch|jax) g2=python;; *) g2=$g;; esac
    [ "$g2" = "$bg" ] && [ ! -e "$BIN/$n/BUILD_OK" ] && missing=1
  done <<< "$PROGRAMS"
  if [ $missing = 1 ]; then
    note "building $bg into $BIN"
    bash "$C/build.sh" "$BIN" "$bg" >> "$R/logs/build.log" 2>&1
    cp "$BIN"/logs/*.build.log "$R/logs/" 2>/dev/null
  fi
}

fresh() { # NAME MODE -> prints the folder to start in
  local w=$WORK/$1.$2
  rm -rf "$w"; mkdir -p "$WORK"; cp -a "$BIN/$1" "$w"; echo "$w"
}

envfor() { # GROUP PLATFORM -> env assignments
  local e="CUPY_CACHE_DIR=$WORK/cache.$RANDOM$RANDOM TRITON_CACHE_DIR=$WORK/tcache.$RANDOM$RANDOM"
  if [ "$1" = opencl ]; then
    if [ "$2" = pocl ]; then e="$e OCL_ICD_FILENAMES=$POCL"; else e="$e OCL_ICD_FILENAMES=$NVOCL"; fi
  fi
  echo "$e"
}

measured() { # NAME GROUP DIR CMD
  local n=$1 g=$2 d=$3 cmd=$4 w
  [ -e "$BIN/$n/BUILD_OK" ] || { note "$n: not built, skipped"; echo '{"skipped":"not built"}' > "$R/$n.bare.m.json"; return; }
  if late; then note "$n: skipped (deadline)"; echo '{"skipped":"deadline"}' > "$R/$n.bare.m.json"; return; fi
  w=$(fresh "$n" bare)
  ( cd "$w/$d" && env $(envfor $g gpu) python3 "$C/measure.py" "$R/$n.bare.m.json" "$TO_BARE" -- $cmd \
      > "$R/$n.bare.out" 2> "$R/$n.bare.err" < /dev/null )
  note "$n bare rc=$? $(python3 -c "import json;m=json.load(open('$R/$n.bare.m.json'));print(m['wall_s'],'s growth',m.get('peak_growth'),'proc',m.get('peak_proc_bytes'))")"
  w=$(fresh "$n" watch)
  rm -f "$R/raw/$n.json"
  ( cd "$w/$d" && env $(envfor $g gpu) python3 "$C/measure.py" "$R/$n.watch.m.json" "$TO_WATCH" -- \
      "$GPULAB" watch --json -o "$R/raw/$n.json" --record "$R/raw/$n.jsonl" -- $cmd \
      > "$R/$n.watch.out" 2> "$R/$n.watch.err" < /dev/null )
  note "$n watch rc=$? $(python3 -c "import json;m=json.load(open('$R/$n.watch.m.json'));print(m['wall_s'],'s')")"
  rm -rf "$WORK/$n.bare" "$WORK/$n.watch"
}

sanitizer() {
  command -v compute-sanitizer > /dev/null || { note "no compute-sanitizer"; return; }
  if late; then note "sanitizer skipped (deadline)"; return; fi
  note "sanitizer: $SAN_JOBS at a time"
  export -f fresh; export BIN WORK R TO_SAN C
  grep '|cuda|' <<< "$PROGRAMS" | while IFS='|' read -r n g d c; do
    [ -e "$BIN/$n/BUILD_OK" ] && echo "$n|$d|$c"
  done | xargs -P "$SAN_JOBS" -I{} bash -c '
    IFS="|" read -r n d c <<< "{}"
    w=$(fresh "$n" san)
    cd "$w/$d" && python3 "$C/measure.py" "$R/$n.san.m.json" "$TO_SAN" -- \
      compute-sanitizer --leak-check full --tool memcheck $c > "$R/$n.san.out" 2>&1 < /dev/null
    echo "$(date +%T) $n sanitizer rc=$?"; rm -rf "$w"' | tee -a "$R/logs/run.log"
}

pocl() {
  note "PoCL: $POCL"
  grep '|opencl|' <<< "$PROGRAMS" | while IFS='|' read -r n g d c; do
    [ -e "$BIN/$n/BUILD_OK" ] || continue
    if late; then note "$n pocl skipped (deadline)"; continue; fi
    w=$(fresh "$n" pocl)
    ( cd "$w/$d" && env $(envfor opencl pocl) python3 "$C/measure.py" "$R/$n.pocl.m.json" "$TO_WATCH" -- \
        "$GPULAB" watch --json -o "$R/raw/$n.pocl.json" -- $c \
        > "$R/$n.pocl.out" 2> "$R/$n.pocl.err" < /dev/null )
    note "$n pocl watch rc=$?"
    rm -rf "$w"
  done
}

STEPS=${*:-cuda opencl cupy torch jax sanitizer pocl}
note "gpulab: $("$GPULAB" --version 2>&1 | head -1); steps: $STEPS"
for s in $STEPS; do
  case $s in
    cuda|opencl|cupy|torch|jax)
      ensure_built $s
      while IFS='|' read -r n g d c; do
        [ "$g" = "$s" ] && measured "$n" "$g" "$d" "$c" < /dev/null
      done <<< "$PROGRAMS" ;;
    sanitizer) ensure_built cuda; sanitizer ;;
    pocl) ensure_built opencl; pocl ;;
    *) line=$(grep "^$s|" <<< "$PROGRAMS") || { note "unknown step $s"; continue; }
       IFS='|' read -r n g d c <<< "$line"; ensure_built $g; measured "$n" "$g" "$d" "$c" ;;
  esac
done
python3 "$C/summarize.py" "$R" "$C"
