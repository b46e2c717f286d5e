#!/usr/bin/env python3
"""Run a command and record its exit status, wall time and NVML's device memory.

    measure.py RESULT.json TIMEOUT_S -- CMD [ARG...]

The command inherits stdin/stdout/stderr and the working directory.  While it
runs, GPU 0 is read every 10 ms through NVML (ctypes on libnvidia-ml.so.1, no
Python package needed): memory in use on the whole device (`used`, as
`nvidia-smi --query-gpu=memory.used` gives it) and the sum of the memory NVML
charges to the compute processes it lists (as `--query-compute-apps`).  Without
NVML (a CPU-only OpenCL run) the memory fields are null.  At TIMEOUT_S the
command's process group gets SIGTERM, then SIGKILL 5 s later; rc is then 124.
Exits with the command's status.
"""
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time


class _Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _Proc(ctypes.Structure):  # nvmlProcessInfo_t (v2/v3)
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class Nvml:
    def __init__(self):
        self.ok = False
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
            if self.lib.nvmlInit_v2() != 0:
                return
            self.h = ctypes.c_void_p()
            if self.lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.h)) != 0:
                return
            self.procs_fn = getattr(self.lib, "nvmlDeviceGetComputeRunningProcesses_v3", None) or \
                getattr(self.lib, "nvmlDeviceGetComputeRunningProcesses_v2", None)
            self.ok = self.used() is not None
        except OSError:
            pass

    def used(self):
        m = _Mem()
        return m.used if self.lib.nvmlDeviceGetMemoryInfo(self.h, ctypes.byref(m)) == 0 else None

    def procs(self):
        if self.procs_fn is None:
            return None
        n = ctypes.c_uint(256)
        arr = (_Proc * 256)()
        if self.procs_fn(self.h, ctypes.byref(n), arr) != 0:
            return None
        total = 0
        for i in range(n.value):
            v = arr[i].usedGpuMemory
            if v < (1 << 62):  # NVML_VALUE_NOT_AVAILABLE is all ones
                total += v
        return {"n": n.value, "bytes": total}


def main():
    out, timeout = sys.argv[1], float(sys.argv[2])
    cmd = sys.argv[sys.argv.index("--") + 1:]
    nv = Nvml()
    res = {"cmd": cmd, "cwd": os.getcwd(), "nvml": nv.ok}
    stop = threading.Event()
    stats = {"peak_used": None, "peak_proc_bytes": None, "max_procs": 0, "samples": 0}
    if nv.ok:
        base = [nv.used() for _ in range(3)]
        res["baseline_used"] = min(base)

        def poll():
            while True:
                u = nv.used()
                p = nv.procs()
                if u is not None and (stats["peak_used"] is None or u > stats["peak_used"]):
                    stats["peak_used"] = u
                if p is not None:
                    stats["max_procs"] = max(stats["max_procs"], p["n"])
                    if stats["peak_proc_bytes"] is None or p["bytes"] > stats["peak_proc_bytes"]:
                        stats["peak_proc_bytes"] = p["bytes"]
                stats["samples"] += 1
                if stop.wait(0.01):
                    break
        t = threading.Thread(target=poll, daemon=True)
        t.start()
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, start_new_session=True)
    timed_out = False
    try:
        rc = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                pass
        rc = 124
    res["wall_s"] = round(time.monotonic() - t0, 3)
    if nv.ok:
        time.sleep(0.05)
        stop.set()
        t.join()
        res["after_used"] = nv.used()
    res.update(stats)
    if res.get("peak_used") is not None:
        res["peak_growth"] = res["peak_used"] - res["baseline_used"]
    res["rc"] = rc
    res["timed_out"] = timed_out
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    sys.exit(rc if 0 <= rc < 256 else 128 + (-rc if rc < 0 else 0))


if __name__ == "__main__":
    main()
