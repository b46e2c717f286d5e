"""A CuPy program that runs out of device memory: weights made on one line,
then big arrays kept on another until the driver refuses one (CuPy's pool
asks the driver for each; it frees what it cached and asks again before it
gives up). Not written for gpulab; it prints what it kept (to stderr) and
exits 3 at the refusal.

    python3 cupy_oom.py [gib=8]
"""

import sys

import cupy

gib = int(sys.argv[1]) if len(sys.argv) > 1 else 8
weights = [cupy.empty(64 << 20, dtype=cupy.uint8) for _ in range(4)]  # weights
kept = []
try:
    while True:
        kept.append(cupy.empty(gib << 30, dtype=cupy.uint8))  # big
except cupy.cuda.memory.OutOfMemoryError:
    print(f"cupy_oom: refused kept={len(kept)}", file=sys.stderr)
    sys.exit(3)
