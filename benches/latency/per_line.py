#!/usr/bin/env python3
"""What gpulab's worker adds per script line, from `run --json` of a per-line-cost lab.

    gpulab --labs benches/labs run per-line-cost --variant V --json | python3 per_line.py

The loop line's mean time per iteration less the mean host time of the calls in
its body, divided by the number of calls in the body: the readings, the ledger
and the event of each line. Prints one line per run in the report.
"""
import json
import sys


def per_line(run):
    lines = run["lines"]
    loop = next(l for l in lines if l["text"].startswith("repeat"))
    body = [l for l in lines if l["line"] > loop["line"] and l["calls"] == loop["calls"]]
    calls_us = sum(l["host_ms"] for l in body) * 1e3
    iteration_us = loop["host_ms"] * 1e3
    return (iteration_us - calls_us) / len(body), calls_us / len(body), len(body)


def main():
    report = json.load(sys.stdin)
    for run in report.get("runs", [report]):
        cost, call, n = per_line(run)
        # The worker's probe says so when NVML contradicted a move it counted.
        notes = [n for n in run.get("notes", []) if "outside the worker" in n]
        print(
            f"{run['lab']}/{run['variant']}: {cost:.1f} us per line added, "
            f"calls {call:.1f} us each ({n} in the loop's body); contradicted: {len(notes)}"
        )
        for text in notes:
            print(f"  {text}")


if __name__ == "__main__":
    main()
