#!/usr/bin/env python3
"""Replays the corpus recordings through a gpulab build and prints, per program, the share of
its memory named at the peak and at exit, and whether any share is below zero.

    python3 corpus/replay.py GPULAB [DIR]

DIR: recordings (*.jsonl or *.jsonl.gz; default tests/fixtures/corpus-h200).
"""
import gzip, json, subprocess, sys, os, tempfile
B = sys.argv[1]
D = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), '..', 'tests', 'fixtures', 'corpus-h200')
rows = []
for f in sorted(os.listdir(D)):
    if f.endswith('.jsonl.gz'):
        n = f[:-9]
        data = gzip.open(os.path.join(D, f)).read()
    elif f.endswith('.jsonl'):
        n = f[:-6]
        data = open(os.path.join(D, f), 'rb').read()
    else:
        continue
    with tempfile.NamedTemporaryFile(suffix='.jsonl', delete=False) as t:
        t.write(data); p = t.name
    out = subprocess.run([B, 'report', '--json', p], capture_output=True, text=True).stdout
    os.unlink(p)
    try: r = json.loads(out)
    except Exception: rows.append((n, 'no json')); continue
    h = r.get('holders') or {}
    def named(x):
        if not x: return None
        tot = x['total_bytes']; un = x['unexplained_bytes']
        return None if tot == 0 else (tot - un) / tot * 100
    def neg(x):
        # A share below zero (what the shares name beyond the reading is
        # not one: it shows as more than 100% named).
        if not x: return False
        return any(v < 0 for k, v in x.items() if k.endswith('_bytes') and k != 'unexplained_bytes')
    def row(name, h):
        pk, ex = h.get('at_peak'), h.get('at_exit')
        return (name, named(pk), named(ex), neg(pk) or neg(ex), (pk or {}).get('total_bytes', 0) >> 20, (ex or {}).get('total_bytes', 0) >> 20, (pk or {}).get('t_ms'), (ex or {}).get('t_ms'))
    rows.append(row(n, h))
    # Each process of a program on many GPUs, composed apart.
    for k in r.get('ranks') or []:
        if k.get('holders'):
            who = f"rank {k['rank']['rank']}" if k.get('rank') else f"pid {k['pid']}"
            rows.append(row(f'{n} {who}', k['holders']))
ok_p = ok_e = negs = 0; n_tab = 0
for r in rows:
    if len(r) < 3: print(r); continue
    n, p, e, ng, tp, te, tpk, tex = r
    fmt = lambda v: '–' if v is None else f'{v:.1f}%'
    print(f'{n:28s} peak {fmt(p):>7s} ({tp} MiB @{tpk} ms)  exit {fmt(e):>7s} ({te} MiB @{tex} ms)  {"NEG" if ng else ""}')
    if p is not None or e is not None: n_tab += 1
    ok_p += p is None or 97 <= p <= 101; ok_e += e is None or 97 <= e <= 101; negs += ng
print(f'tables {n_tab}; peak within 97-101%: {ok_p}/{len(rows)}; exit: {ok_e}/{len(rows)}; with a negative share: {negs}')
