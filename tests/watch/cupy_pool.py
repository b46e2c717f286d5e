"""CuPy's memory pool, as its users meet it: freed arrays stay in the pool until
`free_all_blocks()`. Not written for gpulab; it prints the pool's own figures
at each step for comparison with a run under `gpulab watch`.

    python3 cupy_pool.py [pause_s=0.5]
"""

import sys
import time

import cupy

pause = float(sys.argv[1]) if len(sys.argv) > 1 else 0.5
mib = 1 << 20
pool = cupy.get_default_memory_pool()


def say(step):
    cupy.cuda.Device().synchronize()
    print(
        f"cupy_pool: step={step} used_mib={pool.used_bytes() // mib} "
        f"total_mib={pool.total_bytes() // mib}",
        file=sys.stderr,
        flush=True,
    )
    time.sleep(pause)


say("start")
arrays = [cupy.ones(64 * mib, dtype=cupy.uint8) for _ in range(4)]
say("allocated")
del arrays
say("deleted")
pool.free_all_blocks()
say("freed")
