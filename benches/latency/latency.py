#!/usr/bin/env python3
"""Where a `gpulab run` spends its wall time, and how soon an allocation is seen.

    benches/latency/latency.py GPULAB_BINARY OUT_DIR [repeats=5]

Needs an NVIDIA GPU (the CUDA labs, NVML, nvidia-smi) and CuPy for the nvidia-smi
side. Prints Markdown for docs/benchmarks.md. Every figure comes from this run:
phases are read from the recording's own CLOCK_MONOTONIC timestamps, against the
same clock read here before the process started and after it exited.
"""
import json, os, statistics, subprocess, sys, time

B = os.path.realpath(sys.argv[1])
OUT = os.path.realpath(sys.argv[2])
N = int(sys.argv[3]) if len(sys.argv) > 3 else 5
HERE = os.path.dirname(os.path.realpath(__file__))
LABS = os.path.join(HERE, "..", "labs")
os.makedirs(OUT, exist_ok=True)


def events(path):
    with open(path) as f:
        for line in f:
            if line.strip():
                e = json.loads(line)
                yield e["type"], e["data"]


def med(v):
    return statistics.median(v) if v else float("nan")


def run_phases(lab, extra=()):
    """One run: wall time split into the recording's phases, in ms."""
    rec = os.path.join(OUT, f"{lab}.jsonl")
    t0 = time.monotonic_ns()
    subprocess.run([B, *extra, "run", lab, "--record", rec], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    t1 = time.monotonic_ns()
    meta = first = last = end = after = None
    for kind, d in events(rec):
        if kind == "meta":
            meta = d["t_ns"]
        elif kind == "call":
            first = d["begin_ns"] if first is None else first
            last = d["end_ns"]
        elif kind == "end":
            end = d["t_ns"]
        elif kind == "sample" and end is not None:
            after = d["t_ns"]
    after = after or end
    ms = lambda a, b: (b - a) / 1e6
    return {
        "start: process, discovery, worker spawn, until `meta`": ms(t0, meta),
        "`meta` to the first line (context, module)": ms(meta, first),
        "the lab's lines (first call to last call)": ms(first, last),
        "after the last line: settle, destructor callbacks, `end`": ms(last, end),
        "after the worker exited: memory back to baseline": ms(end, after),
        "report and exit": ms(after, t1),
        "wall": ms(t0, t1),
    }


def latency_table(lab):
    runs = [run_phases(lab) for _ in range(N)]
    print(f"\n`gpulab run {lab}`, {N} runs, medians (ms), the phases read from each run's recording:\n")
    print("| phase | median ms | min | max |")
    print("|---|---:|---:|---:|")
    for k in runs[0]:
        v = [r[k] for r in runs]
        print(f"| {k} | {med(v):.1f} | {min(v):.1f} | {max(v):.1f} |")


PARTS = r"""
import ctypes, time
t = time.monotonic_ns
a = t(); cuda = ctypes.CDLL("libcuda.so.1"); cuda.cuInit(0); b = t()
ctx = ctypes.c_void_p(); cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0); c = t()
nvml = ctypes.CDLL("libnvidia-ml.so.1"); nvml.nvmlInit_v2(); d = t()
print((b - a) / 1e6, (c - b) / 1e6, (d - c) / 1e6)
"""


def parts_table():
    """What the start phase is made of, each timed alone in a fresh process: the
    driver's own costs that any CUDA program pays, and gpulab's process start."""
    rows = {"cuInit": [], "primary context": [], "nvmlInit": [], "`gpulab --version` (process start)": []}
    for _ in range(N):
        out = subprocess.run([sys.executable, "-c", PARTS], capture_output=True, text=True).stdout.split()
        if len(out) == 3:
            for k, v in zip(("cuInit", "primary context", "nvmlInit"), out):
                rows[k].append(float(v))
        t0 = time.monotonic_ns()
        subprocess.run([B, "--version"], stdout=subprocess.DEVNULL, check=False)
        rows["`gpulab --version` (process start)"].append((time.monotonic_ns() - t0) / 1e6)
    print(f"\nThe start phase's parts, each alone in a fresh process, {N} times (ms):\n")
    print("| part | median ms | min | max |")
    print("|---|---:|---:|---:|")
    for k, v in rows.items():
        if v:
            print(f"| {k} | {med(v):.1f} | {min(v):.1f} | {max(v):.1f} |")


def gpulab_visible(size_mib, times):
    rec = os.path.join(OUT, "alloc-visible.jsonl")
    subprocess.run([B, "--labs", LABS, "run", "alloc-visible", "--record", rec,
                    "--param", f"size_mib={size_mib}", "--param", f"times={times}"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    allocs, samples = [], []
    for kind, d in events(rec):
        if kind == "call" and d.get("tag") == "alloc":
            allocs.append((d["begin_ns"], d["end_ns"]))
        elif kind == "sample" and d.get("source") == "nvml":
            samples.append((d["t_ns"], d["used_bytes"]))
    delays = []
    for begin, end in allocs:
        before = [u for t, u in samples if t <= begin]
        if not before:
            continue
        want = before[-1] + (size_mib << 20) // 2
        seen = next((t for t, u in samples if t >= end and u >= want), None)
        if seen is not None:
            delays.append((seen - end) / 1e6)
    gaps = [(b[0] - a[0]) / 1e6 for a, b in zip(samples, samples[1:])]
    return delays, len(allocs), med(gaps)


def smi_visible(size_mib, times):
    # Line-buffered into a file: a pipe's block buffer is lost when nvidia-smi is
    # stopped, and with it the seconds the allocations happened in.
    smi_path = os.path.join(OUT, "nvidia-smi.csv")
    with open(smi_path, "w") as log:
        smi = subprocess.Popen(["stdbuf", "-oL", "nvidia-smi",
                                "--query-gpu=timestamp,memory.used",
                                "--format=csv,noheader,nounits", "-i", "0", "-lms", "1"],
                               stdout=log)
        time.sleep(1.0)
        prog = subprocess.run([sys.executable, os.path.join(HERE, "alloc_visible.py"),
                               str(size_mib), str(times)], capture_output=True, text=True)
        time.sleep(0.5)
        smi.send_signal(2)
        smi.wait()
    with open(os.path.join(OUT, "allocs.txt"), "w") as f:
        f.write(prog.stdout)
    with open(smi_path) as f:
        raw = f.read()
    lines = raw.splitlines()
    samples = []
    for line in lines:
        try:
            stamp, used = [x.strip() for x in line.split(",")]
            t = time.mktime(time.strptime(stamp.split(".")[0], "%Y/%m/%d %H:%M:%S"))
            t += int(stamp.split(".")[1]) / 1000
            samples.append((t, int(used)))
        except (ValueError, IndexError):
            continue
    allocs = [float(l.split()[1]) for l in prog.stdout.splitlines() if l.startswith("alloc ")]
    delays = []
    for a in allocs:
        before = [u for t, u in samples if t <= a - 0.002]
        if not before:
            continue
        want = before[-1] + size_mib // 2
        seen = next((t for t, u in samples if t >= a - 0.001 and u >= want), None)
        if seen is not None:
            delays.append(max(0.0, (seen - a) * 1e3))
    gaps = [(b[0] - a[0]) * 1e3 for a, b in zip(samples, samples[1:])]
    return delays, len(allocs), med(gaps), prog.stderr.strip()[-300:]


def visible_table(size_mib=256, times=20):
    g, gn, ggap = gpulab_visible(size_mib, times)
    s, sn, sgap, err = smi_visible(size_mib, times)
    print(f"\nFrom a {size_mib} MiB cudaMalloc returning to the first sample showing half of it, {times} allocations each:\n")
    print("| sampler | seen | median ms | max ms | median gap between samples, ms |")
    print("|---|---:|---:|---:|---:|")
    for name, d, n, gap in (("gpulab's parent sampler (recording's t_ns, CLOCK_MONOTONIC)", g, gn, ggap),
                            ("nvidia-smi -lms 1 (its own timestamps, 1 ms resolution)", s, sn, sgap)):
        mx = max(d) if d else float("nan")
        print(f"| {name} | {len(d)}/{n} | {med(d):.2f} | {mx:.2f} | {gap:.2f} |")
    if err and not s:
        print(f"\n(nvidia-smi side failed: {err})")


if __name__ == "__main__":
    latency_table("cuda-free-sync")
    parts_table()
    visible_table()
