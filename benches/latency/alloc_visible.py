"""The same measure for nvidia-smi: allocate with CuPy (cudaMalloc), print the
wall-clock time when the call returned, and let `nvidia-smi -lms 1` (started by
latency.py beside it) log memory.used with its own wall-clock timestamps."""
import sys, time
import cupy as cp

size = int(sys.argv[1]) << 20
times = int(sys.argv[2])
cp.cuda.runtime.setDevice(0)
cp.cuda.runtime.free(cp.cuda.runtime.malloc(1 << 20))  # context first
time.sleep(0.5)
for _ in range(times):
    p = cp.cuda.runtime.malloc(size)
    print(f"alloc {time.time():.6f}", flush=True)
    time.sleep(0.1)
    cp.cuda.runtime.free(p)
    time.sleep(0.1)
