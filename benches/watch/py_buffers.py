"""What a Python line costs a creating call (#48): 5,000 clCreateBuffer +
clReleaseMemObject pairs through ctypes, from a function 20 Python frames deep,
timed by the script. Run bare, under `gpulab watch` and `gpulab watch
--backtrace=off` (docs/benchmarks.md, session 28).

    python3 benches/watch/py_buffers.py
"""
import ctypes, sys, time
cl = ctypes.CDLL("libOpenCL.so.1")
cl.clCreateContext.restype = ctypes.c_void_p
cl.clCreateContext.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
cl.clCreateBuffer.restype = ctypes.c_void_p
cl.clCreateBuffer.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
cl.clReleaseMemObject.argtypes = [ctypes.c_void_p]
p = ctypes.c_void_p(); d = ctypes.c_void_p(); err = ctypes.c_int()
cl.clGetPlatformIDs(1, ctypes.byref(p), None); cl.clGetDeviceIDs(p, 0xFFFFFFFF, 1, ctypes.byref(d), None)
ctx = cl.clCreateContext(None, 1, ctypes.byref(d), None, None, ctypes.byref(err))
def deep(n):
    if n == 0:
        t0 = time.perf_counter()
        for i in range(5000):
            b = cl.clCreateBuffer(ctx, 1, 4096, None, ctypes.byref(err))
            cl.clReleaseMemObject(b)
        return time.perf_counter() - t0
    return deep(n - 1)
print("bufloop: pair_us=%.2f" % (deep(20) / 5000 * 1e6), file=sys.stderr)
