"""OpenCL through ctypes, from any CPython (#48): no extension module of its
own, so the interpreter's frames are all that stand between the script and
the driver. It makes a context and a buffer per task in a function, a loop
and a generator, and leaves by `os._exit`, so nothing is released. Prints
its count on stderr.

usage: python3 ctypes_lines.py [TASKS]
"""
import ctypes
import os
import sys

cl = ctypes.CDLL("libOpenCL.so.1")
cl.clCreateContext.restype = ctypes.c_void_p
cl.clCreateContext.argtypes = [
    ctypes.c_void_p, ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int),
]
cl.clCreateBuffer.restype = ctypes.c_void_p
cl.clCreateBuffer.argtypes = [
    ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_int),
]

platform = ctypes.c_void_p()
device = ctypes.c_void_p()
assert cl.clGetPlatformIDs(1, ctypes.byref(platform), None) == 0
assert cl.clGetDeviceIDs(platform, 0xFFFFFFFF, 1, ctypes.byref(device), None) == 0
err = ctypes.c_int()
ctx = cl.clCreateContext(None, 1, ctypes.byref(device), None, None, ctypes.byref(err))  # the context
assert err.value == 0


def make_task(i):
    return cl.clCreateBuffer(ctx, 1, (i + 1) << 16, None, ctypes.byref(err))  # task buffer


def buffers(n):
    for i in range(n):
        yield cl.clCreateBuffer(ctx, 1, 4096, None, ctypes.byref(err))  # yielded buffer


tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 3
kept = [make_task(i) for i in range(tasks)]
kept += list(buffers(2))
print(f"ctypes_lines: buffers={len(kept)}", file=sys.stderr, flush=True)
os._exit(0)
