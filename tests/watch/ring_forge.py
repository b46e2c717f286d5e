#!/usr/bin/env python3
"""A process of a watched program that writes into the agents' memory itself,
as any process of the program can: it maps the region GPULAB_AGENT_RING names,
claims a segment the way an agent does, and writes the records it is told to.
Not an agent; the tests use it to check that gpulab reads that memory as
untrusted input (crates/gpulab-events/src/ring.rs has the layout).

  ring_forge.py junk            a non-UTF-8 record, forged meta/end events, one call
  ring_forge.py flood N         N call records, waiting for room as an agent would
  ring_forge.py scribble        one call, then a header that names a length past the ring
"""
import mmap
import os
import struct
import sys
import time

SEGMENTS = 64
SEGMENT_BYTES = 2 << 20
HEADER_WORDS = 16
SEG_HEADER_WORDS = 24
JSON = 3

dev, ino, nonce, path = os.environ["GPULAB_AGENT_RING"].split(":", 3)
nonce = int(nonce, 16)
fd = os.open(path, os.O_RDWR)
size = (HEADER_WORDS + SEGMENTS * (SEG_HEADER_WORDS + SEGMENT_BYTES // 8)) * 8
m = mmap.mmap(fd, size, mmap.MAP_SHARED)
os.close(fd)


def word(i, value=None):
    if value is None:
        return struct.unpack_from("<Q", m, i * 8)[0]
    struct.pack_into("<Q", m, i * 8, value & (2**64 - 1))


def claim():
    for i in range(SEGMENTS):
        h = HEADER_WORDS + i * SEG_HEADER_WORDS
        if word(h) == 0:
            word(h, 1)
            word(h + 1, os.getpid() | (os.getppid() << 32))
            word(h + 2, 1000 + i)
            word(h, 2)
            return i
    sys.exit("no free segment")


seg = claim()
head = HEADER_WORDS + seg * SEG_HEADER_WORDS
data = HEADER_WORDS + SEGMENTS * SEG_HEADER_WORDS + seg * (SEGMENT_BYTES // 8)


def write(kind, payload, length=None):
    total = 16 + (len(payload) + 7) // 8 * 8
    while True:
        w, r = word(head + 8), word(head + 16)
        rem = SEGMENT_BYTES - w % SEGMENT_BYTES
        skip = rem if (rem < 16 or total > rem) else 0
        if w + skip + total - r <= SEGMENT_BYTES:
            break
        time.sleep(0.0005)
    if skip >= 16:
        at = data + (w % SEGMENT_BYTES) // 8
        word(at + 1, skip - 16)
        word(at, w ^ nonce)
    pos = w + skip
    word(head + 8, pos + total)
    at = data + (pos % SEGMENT_BYTES) // 8
    padded = payload + b"\0" * ((-len(payload)) % 8)
    m[(at + 2) * 8 : (at + 2) * 8 + len(padded)] = padded
    word(at + 1, (len(payload) if length is None else length) | (kind << 32))
    word(at, pos ^ nonce)


CALL = (
    b'{"type":"call","data":{"seq":0,"pid":7,"thread":0,"line":null,"iter":[],'
    b'"tag":null,"api":"clRetainContext","driver":"clRetainContext","begin_ns":1000,'
    b'"end_ns":1005,"status":{"kind":"ok"},"expect_error":false,"mem_before":null,'
    b'"mem_after":null,"object":null}}'
)
FORGED = b'{"type":"meta","data":{"forged":true}}'
END = b'{"type":"end","data":{"t_ns":5,"status":{"kind":"finished"},"leaked":[]}}'

mode = sys.argv[1]
if mode == "junk":
    write(JSON, b"\xff\xfe")
    for _ in range(3):
        write(JSON, FORGED)
        write(JSON, END)
    write(JSON, CALL)
elif mode == "flood":
    for _ in range(int(sys.argv[2])):
        write(JSON, CALL)
elif mode == "scribble":
    write(JSON, CALL)
    write(JSON, b"{}", length=SEGMENT_BYTES * 4)
    write(JSON, CALL)
else:
    sys.exit("mode: junk | flood N | scribble")
