#!/usr/bin/env python3
"""Turn run.sh's files into RESULTS/results.jsonl (one object per program) and
RESULTS/results.md (the tables).   summarize.py RESULTS CORPUS_DIR

Per program: bare and watched exit status, stdout identical (exactly, and with
every run of digits masked, for programs that print timings), wall times,
NVML's peak (the process's own figure, and the device's growth), and from
gpulab's JSON report `holders.at_peak` / `holders.at_exit`: the share named,
(total - unexplained) / total, and whether any share is negative; the report's
own peak; the objects it lists alive at exit that neither an allocator nor the
runtime keeps ("leaks"); and compute-sanitizer's leak summary (CUDA only).
"""
import hashlib
import json
import os
import re
import sys

R, C = sys.argv[1], sys.argv[2]
MIB = 1 << 20
SHARES = ["objects_held_bytes", "cached_by_allocators_bytes", "released_not_deleted_bytes",
          "reserves_held_bytes", "reserves_released_bytes", "kept_by_pool_bytes",
          "held_by_graphs_bytes", "unexplained_bytes"]
SHORT = {"objects_held_bytes": "obj", "cached_by_allocators_bytes": "cache",
         "released_not_deleted_bytes": "rel", "reserves_held_bytes": "resv",
         "reserves_released_bytes": "resv_rel", "kept_by_pool_bytes": "pool",
         "held_by_graphs_bytes": "graph", "unexplained_bytes": "unexpl"}


def load(p):
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read(p):
    try:
        with open(p, "rb") as f:
            return f.read()
    except OSError:
        return None


def norm(b):
    if b is None:
        return None
    s = b.decode("utf-8", "replace")
    s = re.sub(r"0x[0-9a-fA-F]+", "0x#", s)
    s = re.sub(r"[0-9]+", "#", s)
    return s


def sha(b):
    return None if b is None else hashlib.sha256(b).hexdigest()[:12]


def programs():
    text = open(os.path.join(C, "run.sh")).read()
    block = text.split("PROGRAMS='", 1)[1].split("'", 1)[0]
    out = []
    for line in block.strip().splitlines():
        n, g, d, c = line.split("|", 3)
        out.append((n, g, c))
    return out


def holders(rep, when):
    h = (rep or {}).get("holders") or {}
    x = h.get(when)
    if not x:
        return None
    tot = x["total_bytes"]
    d = {k: x.get(k) for k in SHARES}
    d["total_bytes"] = tot
    d["t_ms"] = x.get("t_ms")
    d["unmeasured"] = x.get("unmeasured")
    d["named_share"] = None if not tot else (tot - x["unexplained_bytes"]) / tot
    d["negative"] = [SHORT[k] for k in SHARES if (x.get(k) or 0) < 0]
    d["objects_held_by"] = x.get("objects_held_by")
    return d


def leaks(rep):
    out = []
    for a in (rep or {}).get("alive_at_exit") or []:
        if a.get("kept_by_allocator") or a.get("kept_by_runtime"):
            continue
        out.append({"kind": a["kind"], "count": a["count"], "bytes": a["bytes"],
                    "created_by": a.get("created_by"), "owner": a.get("owner"),
                    "uncertain": a.get("uncertain", False)})
    return out


def sanitizer(n):
    t = read(os.path.join(R, n + ".san.out"))
    m = load(os.path.join(R, n + ".san.m.json"))
    if t is None:
        return None
    s = t.decode("utf-8", "replace")
    d = {"rc": (m or {}).get("rc"), "wall_s": (m or {}).get("wall_s")}
    lk = re.search(r"LEAK SUMMARY: (\d+) bytes leaked in (\d+) allocations", s)
    d["leak_bytes"] = int(lk.group(1)) if lk else None
    d["leak_allocs"] = int(lk.group(2)) if lk else None
    er = re.search(r"ERROR SUMMARY: (\d+) error", s)
    d["errors"] = int(er.group(1)) if er else None
    d["leaked_lines"] = len(re.findall(r"Leaked \d+ bytes", s))
    if lk is None:
        first = [l for l in s.splitlines() if l.startswith("========")][:3]
        d["said"] = " / ".join(first)[:300]
    return d


def one(n, g, cmd):
    r = {"name": n, "group": g, "cmd": cmd}
    if g == "opencl":
        rp = load(os.path.join(R, "raw", n + ".pocl.json"))
        mp = load(os.path.join(R, n + ".pocl.m.json")) or {}
        if mp:
            r["pocl"] = {"rc": mp.get("rc"), "wall_s": mp.get("wall_s"), "report": report(rp)}
    mb = load(os.path.join(R, n + ".bare.m.json")) or {}
    mw = load(os.path.join(R, n + ".watch.m.json")) or {}
    if mb.get("skipped"):
        r["skipped"] = mb["skipped"]
        return r
    if not mb:
        r["skipped"] = "not run"
        return r
    ob, ow = read(os.path.join(R, n + ".bare.out")), read(os.path.join(R, n + ".watch.out"))
    eb, ew = read(os.path.join(R, n + ".bare.err")), read(os.path.join(R, n + ".watch.err"))
    r["bare"] = {"rc": mb.get("rc"), "wall_s": mb.get("wall_s"), "timed_out": mb.get("timed_out"),
                 "stdout_sha": sha(ob), "stderr_sha": sha(eb), "out_err_sha": sha((ob or b"") + b"\0" + (eb or b"")),
                 "nvml_peak_growth": mb.get("peak_growth"), "nvml_proc_peak": mb.get("peak_proc_bytes"),
                 "nvml_max_procs": mb.get("max_procs")}
    r["watch"] = {"rc": mw.get("rc"), "wall_s": mw.get("wall_s"), "timed_out": mw.get("timed_out"),
                  "stdout_sha": sha(ow), "stderr_sha": sha(ew),
                  "nvml_peak_growth": mw.get("peak_growth"), "nvml_proc_peak": mw.get("peak_proc_bytes")}
    r["same_rc"] = mb.get("rc") == mw.get("rc")
    r["stdout_same"] = ob == ow
    r["stdout_same_masked"] = norm(ob) == norm(ow)
    r["stderr_same_masked"] = norm(eb) == norm(ew)
    rep = load(os.path.join(R, "raw", n + ".json"))
    r["report"] = report(rep)
    if g == "cuda":
        r["sanitizer"] = sanitizer(n)
    return r


def report(rep):
    if rep is None:
        return None
    lk = leaks(rep)
    return {"exit_code": rep.get("exit_code"), "memory_source": rep.get("memory_source"),
            "peak_memory_bytes": rep.get("peak_memory_bytes"),
            "peak_device_growth_bytes": rep.get("peak_device_growth_bytes"),
            "processes": len(rep.get("processes") or []), "calls": rep.get("calls"),
            "failed_calls": rep.get("failed_calls"),
            "at_peak": holders(rep, "at_peak"), "at_exit": holders(rep, "at_exit"),
            "leaks": lk, "leak_count": sum(x["count"] for x in lk), "leak_bytes": sum(x["bytes"] for x in lk),
            "alive_at_exit_total": sum(a["count"] for a in rep.get("alive_at_exit") or []),
            "held_by_driver": len(rep.get("held_by_driver") or []),
            "frameworks": rep.get("frameworks"),
            "warnings": rep.get("warnings") or [], "notes": rep.get("notes") or []}


def pct(x):
    return "–" if x is None else "%.1f%%" % (100 * x)


def mib(x):
    return "–" if x is None else "%.0f" % (x / MIB)


def shares_cell(h):
    if not h:
        return "–"
    parts = ["%s %s" % (SHORT[k], mib(h[k])) for k in SHARES if h.get(k)]
    return "total %s: %s" % (mib(h["total_bytes"]), ", ".join(parts) or "0")


def main():
    rows = [one(*p) for p in programs()]
    with open(os.path.join(R, "results.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    L = []
    L.append("# gpulab corpus results\n")
    L.append("Sizes in MiB. *named* = (total - unexplained) / total of `holders.at_peak` / `holders.at_exit`; "
             "*neg*: shares below zero; *NVML proc* = the bare run's peak of NVML's per-process figure "
             "(device growth when NVML lists no process); *rep peak* = the report's `peak_memory_bytes`; "
             "*leaks* = `alive_at_exit` entries kept by neither an allocator nor the runtime (count/bytes); "
             "*san* = compute-sanitizer's LEAK SUMMARY (allocations/bytes); *out*: stdout bare vs watched, "
             "`=` identical, `~` identical once digits are masked, `≠` differs.\n")
    L.append("| program | grp | rc bare/watch | out | wall s bare/watch | NVML proc | rep peak | named @peak | named @exit | neg | leaks | san | warnings |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r.get("skipped"):
            L.append("| %s | %s | skipped: %s |||||||||||" % (r["name"], r["group"], r["skipped"]))
            continue
        b, w, rep = r["bare"], r["watch"], r["report"] or {}
        out = "=" if r["stdout_same"] else ("~" if r["stdout_same_masked"] else "≠")
        proc = b["nvml_proc_peak"] if b["nvml_proc_peak"] else b["nvml_peak_growth"]
        ap, ae = rep.get("at_peak"), rep.get("at_exit")
        neg = sorted(set((ap or {}).get("negative", []) + (ae or {}).get("negative", [])))
        s = r.get("sanitizer")
        san = "–" if not s else ("%s/%s" % (s["leak_allocs"], s["leak_bytes"]) if s["leak_bytes"] is not None
                                 else "n/a rc=%s" % s["rc"])
        L.append("| %s | %s | %s/%s | %s | %s/%s | %s | %s | %s | %s | %s | %s | %s | %d |" % (
            r["name"], r["group"], b["rc"], w["rc"], out, b["wall_s"], w["wall_s"], mib(proc),
            mib(rep.get("peak_memory_bytes")), pct((ap or {}).get("named_share")), pct((ae or {}).get("named_share")),
            ",".join(neg) or "no", "%d/%d" % (rep.get("leak_count", 0), rep.get("leak_bytes", 0)) if rep else "no report",
            san, len(rep.get("warnings", []))))
    L.append("\n## Shares (MiB)\n")
    L.append("| program | at peak | at exit |")
    L.append("|---|---|---|")
    for r in rows:
        rep = (r.get("report") or {})
        if rep:
            L.append("| %s | %s | %s |" % (r["name"], shares_cell(rep.get("at_peak")), shares_cell(rep.get("at_exit"))))
    L.append("\n## OpenCL on PoCL (CPU device; memory is the process's RSS)\n")
    L.append("| program | rc | named @peak | named @exit | neg | leaks | at peak | at exit |")
    L.append("|---|---|---|---|---|---|---|---|")
    for r in rows:
        p = r.get("pocl")
        if not p:
            continue
        rep = p.get("report") or {}
        ap, ae = rep.get("at_peak"), rep.get("at_exit")
        neg = sorted(set((ap or {}).get("negative", []) + (ae or {}).get("negative", [])))
        L.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["name"], p["rc"], pct((ap or {}).get("named_share")), pct((ae or {}).get("named_share")),
            ",".join(neg) or "no", "%d/%d" % (rep.get("leak_count", 0), rep.get("leak_bytes", 0)) if rep else "no report",
            shares_cell(ap), shares_cell(ae)))
    L.append("\n## Leaks listed, sanitizer, warnings\n")
    for r in rows:
        rep = r.get("report") or {}
        s = r.get("sanitizer")
        bits = []
        if rep.get("leaks"):
            bits.append("leaks: " + "; ".join("%s×%d %dB by %s (%s)%s" % (x["kind"], x["count"], x["bytes"], x["created_by"],
                                                                         x["owner"], " uncertain" if x["uncertain"] else "")
                                              for x in rep["leaks"]))
        if s:
            bits.append("sanitizer: rc=%s errors=%s leaks=%s/%sB%s" % (s["rc"], s["errors"], s["leak_allocs"], s["leak_bytes"],
                                                                   (" said: " + s["said"]) if s.get("said") else ""))
        for wn in rep.get("warnings", []):
            bits.append("warning: " + wn[:300])
        prep = (r.get("pocl") or {}).get("report") or {}
        if prep.get("leaks"):
            bits.append("PoCL leaks: " + "; ".join("%s×%d %dB by %s" % (x["kind"], x["count"], x["bytes"], x["created_by"])
                                                   for x in prep["leaks"]))
        for wn in prep.get("warnings", []):
            bits.append("PoCL warning: " + wn[:300])
        if bits:
            L.append("- **%s**: %s" % (r["name"], " | ".join(bits)))
    with open(os.path.join(R, "results.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    print("\n".join(L[:len(rows) + 5]))


if __name__ == "__main__":
    main()
