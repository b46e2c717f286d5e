"""A pyopencl program gpulab did not write: it launches a kernel in a loop and
keeps every event it gets back in a list, as a program that logs its launches
would, so the events stay alive while it runs. Prints its launch count on stderr.

usage: python3 leaky_events.py LAUNCHES
"""
import sys

import numpy as np
import pyopencl as cl

launches = int(sys.argv[1]) if len(sys.argv) > 1 else 10
ctx = cl.Context(dev_type=cl.device_type.ALL)
queue = cl.CommandQueue(ctx)
buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, size=4096 * 4)
prg = cl.Program(ctx, "__kernel void touch(__global uint *b) { b[get_global_id(0)] += 1u; }").build()
kernel = cl.Kernel(prg, "touch")
kernel.set_arg(0, buf)
kept = []
for _ in range(launches):
    kept.append(cl.enqueue_nd_range_kernel(queue, kernel, (4096,), None))
queue.finish()
out = np.zeros(4096, dtype=np.uint32)
cl.enqueue_copy(queue, out, buf).wait()
print(f"leaky_events: launches={launches}", file=sys.stderr)
