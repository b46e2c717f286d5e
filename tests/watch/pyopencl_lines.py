"""A pyopencl program that leaks a buffer per task (#48): each buffer should be
named by the line of this file that made it, the innermost frame of the
program's own code, through pyopencl's own Python code where it goes through
it (`pyopencl.array`). It leaves by `os._exit`, as a crash would, so nothing is
released. Prints its count on stderr.

usage: python3 pyopencl_lines.py [TASKS]
"""
import os
import sys

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 3
ctx = cl.Context(dev_type=cl.device_type.ALL)
queue = cl.CommandQueue(ctx)
kept = []


def make_task(i):
    return cl.Buffer(ctx, cl.mem_flags.READ_WRITE, size=(i + 1) << 16)  # task buffer


def make_array():
    return cl_array.empty(queue, 1 << 14, dtype=np.float32)  # array buffer


for i in range(tasks):
    kept.append(make_task(i))
kept.append(make_array())
queue.finish()
print(f"pyopencl_lines: buffers={len(kept)}", file=sys.stderr, flush=True)
os._exit(0)
