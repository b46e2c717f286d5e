"""What the parent's sampler costs during a lab run, beside `nvidia-smi -lms 1`.

usage: python3 benches/latency/sampler_cost.py GPULAB OUT [ROUNDS]

For each lab below, `gpulab run LAB --json` runs while this script reads the
parent's `gpulab-sampler` thread's CPU time (utime + stime, /proc/PID/task/TID/stat)
every 20 ms: its share of a core over the whole run (first to last look), and over
a steady window in the middle of a 10 s kernel (2 s after the first call, 6 s).
The report's `readings` field says how many readings the run kept. Then
`nvidia-smi --query-gpu=memory.used --format=csv,noheader -lms 1` runs for 6 s
and its CPU time is read the same way. Prints a Markdown table.
"""
import json
import os
import subprocess
import sys
import time

B = os.path.realpath(sys.argv[1])
OUT = os.path.realpath(sys.argv[2])
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 2
TICK = os.sysconf("SC_CLK_TCK")

LABS = [
    ("cuda-free-sync, kernel 10 s, nothing owed while it runs",
     ["cuda-free-sync", "--variant", "free-used", "--param", "kernel_ms=10000"]),
    ("cl-premature-release, kernel 10 s (a release during the kernel)",
     ["cl-premature-release", "--param", "kernel_ms=10000"]),
    ("cl-finish, defaults (whole run)", ["cl-finish"]),
    ("cuda-free-async, defaults (whole run)", ["cuda-free-async"]),
]


def cpu(path):
    """utime + stime of a /proc stat file, in seconds; None once it is gone."""
    try:
        with open(path) as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def sampler_task(pid):
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() == "gpulab-sampler":
                    return f"/proc/{pid}/task/{tid}/stat"
    except OSError:
        pass
    return None


def one_run(args):
    out = os.path.join(OUT, "run.json")
    with open(out, "w") as f:
        proc = subprocess.Popen([B, "run", *args, "--json"], stdout=f,
                                stderr=subprocess.DEVNULL)
    looks = []  # (wall s, sampler cpu s)
    task = None
    while proc.poll() is None:
        if task is None:
            task = sampler_task(proc.pid)
        if task is not None:
            c = cpu(task)
            if c is not None:
                looks.append((time.monotonic(), c))
        time.sleep(0.02)
    report = json.load(open(out))
    runs = report.get("runs") or [report]
    readings = sum((r.get("readings") or {}).get("count", 0) for r in runs)
    whole = None
    if len(looks) > 1:
        whole = 100 * (looks[-1][1] - looks[0][1]) / (looks[-1][0] - looks[0][0])
    window = None
    if looks and looks[-1][0] - looks[0][0] > 9:
        t0 = looks[0][0] + 2
        inside = [(t, c) for t, c in looks if t0 <= t <= t0 + 6]
        if len(inside) > 1:
            window = 100 * (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])
    wall = looks[-1][0] - looks[0][0] if looks else 0
    return whole, window, readings, wall


def smi():
    proc = subprocess.Popen(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader",
                             "-lms", "1"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    time.sleep(1)
    c0, t0 = cpu(f"/proc/{proc.pid}/stat"), time.monotonic()
    time.sleep(6)
    c1, t1 = cpu(f"/proc/{proc.pid}/stat"), time.monotonic()
    proc.terminate()
    lines = proc.communicate()[0].splitlines()
    return 100 * (c1 - c0) / (t1 - t0), len(lines) / 7


def fmt(v, spec="{:.2f}"):
    return "—" if v is None else spec.format(v)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    print("| what | round | sampler thread, % of a core: whole run | steady 6 s | readings kept | wall s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, args in LABS:
        for r in range(ROUNDS):
            whole, window, readings, wall = one_run(args)
            print(f"| {name} | {r + 1} | {fmt(whole)} | {fmt(window)} | {readings} | {wall:.1f} |")
    for r in range(ROUNDS):
        pct, rate = smi()
        print(f"| `nvidia-smi -lms 1` (whole process; {rate:.0f} lines/s) | {r + 1} | | {pct:.2f} | | 7.0 |")
