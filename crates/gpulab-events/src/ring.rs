//! The memory `gpulab watch` shares with its agents: one region of 64-bit
//! words, which gpulab creates and every process of the watched program maps.
//! Each process claims a segment of its own and its threads write records into
//! it, each with a single reservation and a single publishing store; gpulab
//! reads them from its side. Nothing is flushed: a record is gpulab's the
//! moment its publishing store is made, so a process that crashes, execs,
//! `_exit`s or is killed loses nothing it recorded, and a process can never
//! write into the program's files (there is no descriptor to reuse).
//!
//! The layout and every operation on it are here, in safe code over
//! `&[AtomicU64]`: the two sides map the memory their own way
//! (`gpulab-host`'s `shared`, the agent's `transport`) and hand this module
//! the words. Every word may be written by any process of the program, so the
//! reader trusts nothing in it: a record is read only when its publishing word
//! names its own position (XORed with the region's nonce), and only within its
//! segment.
//!
//! A segment's data is a ring of bytes; positions count bytes from the
//! segment's claim and never wrap, so `pos % SEGMENT_BYTES` is the place. A
//! record is a 16-byte header (the publishing word, then the payload's length
//! and kind) and its payload, padded to 8 bytes; one that would cross the ring's
//! end is preceded by a padding record to the end.

use std::sync::atomic::{AtomicU64, Ordering};

/// "gpulabR1", the first word of a formatted region.
pub const MAGIC: u64 = u64::from_le_bytes(*b"gpulabR1");
/// Segments in a region: processes of the program that record at one time.
pub const SEGMENTS: usize = 64;
/// The bytes of one segment's ring.
pub const SEGMENT_BYTES: u64 = 2 << 20;
const SEGMENT_WORDS: usize = (SEGMENT_BYTES / 8) as usize;
/// The region's own header.
const HEADER_WORDS: usize = 16;
/// A segment's header: three cache lines, so the writers' counters, the
/// claim and the reader's position never share one.
const SEG_HEADER_WORDS: usize = 24;
/// The longest payload a record may have.
pub const MAX_PAYLOAD: usize = 256 << 10;
const RECORD_HEADER: u64 = 16;

/// The region's size in words.
pub const fn region_words() -> usize {
    HEADER_WORDS + SEGMENTS * (SEG_HEADER_WORDS + SEGMENT_WORDS)
}

/// The region's size in bytes.
pub const fn region_bytes() -> usize {
    region_words() * 8
}

// Region header words.
const R_MAGIC: usize = 0;
const R_NONCE: usize = 1;
const R_SEGMENTS: usize = 2;
const R_SEGMENT_BYTES: usize = 3;
/// Claims made so far: each claim's number orders a pid's segments.
const R_CLAIMS: usize = 4;
/// Processes that found every segment taken and record nothing.
const R_UNCLAIMED: usize = 5;
/// gpulab's heartbeat: it moves while gpulab runs, even when its reading is
/// held up, so a writer waiting for room can tell "behind" from "stopped".
const R_HEARTBEAT: usize = 6;

// Segment header words.
const S_STATE: usize = 0;
const S_PIDS: usize = 1;
const S_CLAIM: usize = 2;
const S_WRITE: usize = 8;
const S_DROPPED: usize = 9;
const S_COALESCED: usize = 10;
const S_PENDING: usize = 11;
/// One call in this many of each thread of an agent's is timed for what
/// observing costs ([`Segment::observed`]).
pub const OBSERVED_EVERY: u32 = 16;
/// What observing cost the process ([`Segment::observed`]): the agent's ns
/// inside timed launches and their count, then the same of other calls.
const S_OBSERVED: usize = 12;
const S_READ: usize = 16;

/// A segment's state word.
const FREE: u64 = 0;
const CLAIMING: u64 = 1;
const LIVE: u64 = 2;

/// The kind of a padding record, which the reader skips.
const PAD: u16 = 0;

/// A mapped region, as either side sees it.
#[derive(Clone, Copy)]
pub struct Region<'a> {
    words: &'a [AtomicU64],
    nonce: u64,
}

impl<'a> Region<'a> {
    /// Writes a fresh region's header into `words` (zeroed, [`region_words`]
    /// long); gpulab's side, once, before any process maps it.
    pub fn format(words: &'a [AtomicU64], nonce: u64) -> Option<Region<'a>> {
        if words.len() < region_words() {
            return None;
        }
        words[R_NONCE].store(nonce, Ordering::Relaxed);
        words[R_SEGMENTS].store(SEGMENTS as u64, Ordering::Relaxed);
        words[R_SEGMENT_BYTES].store(SEGMENT_BYTES, Ordering::Relaxed);
        words[R_MAGIC].store(MAGIC, Ordering::Release);
        Some(Region { words, nonce })
    }

    /// The region in `words`, when it is one this build formats with `nonce`
    /// (the value gpulab named in the program's environment).
    pub fn open(words: &'a [AtomicU64], nonce: u64) -> Option<Region<'a>> {
        let ok = words.len() >= region_words()
            && words[R_MAGIC].load(Ordering::Acquire) == MAGIC
            && words[R_NONCE].load(Ordering::Relaxed) == nonce
            && words[R_SEGMENTS].load(Ordering::Relaxed) == SEGMENTS as u64
            && words[R_SEGMENT_BYTES].load(Ordering::Relaxed) == SEGMENT_BYTES;
        ok.then_some(Region { words, nonce })
    }

    /// The region in `words` as the side that formatted it sees it, whatever
    /// its header says now (the program can write over it). Words too few
    /// for the layout give a region without segments.
    pub fn view(words: &'a [AtomicU64], nonce: u64) -> Region<'a> {
        let words = if words.len() >= region_words() {
            words
        } else {
            &[]
        };
        Region { words, nonce }
    }

    pub fn segment(&self, index: usize) -> Option<Segment<'a>> {
        if index >= SEGMENTS {
            return None;
        }
        let header = HEADER_WORDS + index * SEG_HEADER_WORDS;
        let data = HEADER_WORDS + SEGMENTS * SEG_HEADER_WORDS + index * SEGMENT_WORDS;
        Some(Segment {
            header: self.words.get(header..header + SEG_HEADER_WORDS)?,
            data: self.words.get(data..data + SEGMENT_WORDS)?,
            heartbeat: self.words.get(R_HEARTBEAT)?,
            nonce: self.nonce,
            index,
        })
    }

    /// Claims a free segment for process `pid` (child of `parent_pid`); None,
    /// counted, when every one is taken.
    pub fn claim(&self, pid: u32, parent_pid: u32) -> Option<Segment<'a>> {
        for i in 0..SEGMENTS {
            let Some(seg) = self.segment(i) else { break };
            let state = &seg.header[S_STATE];
            if state
                .compare_exchange(FREE, CLAIMING, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            // The reader reset the positions and counts before it freed it.
            seg.header[S_PIDS].store(
                u64::from(pid) | (u64::from(parent_pid) << 32),
                Ordering::Relaxed,
            );
            let claim = self.words[R_CLAIMS].fetch_add(1, Ordering::Relaxed) + 1;
            seg.header[S_CLAIM].store(claim, Ordering::Relaxed);
            state.store(LIVE, Ordering::Release);
            return Some(seg);
        }
        if let Some(w) = self.words.get(R_UNCLAIMED) {
            w.fetch_add(1, Ordering::Relaxed);
        }
        None
    }

    /// gpulab's side, regularly while it runs: the heartbeat moves.
    pub fn beat(&self) {
        if let Some(w) = self.words.get(R_HEARTBEAT) {
            w.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Processes that found no free segment.
    pub fn unclaimed(&self) -> u64 {
        self.words
            .get(R_UNCLAIMED)
            .map_or(0, |w| w.load(Ordering::Relaxed))
    }
}

/// Who holds a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    Free,
    /// Being claimed: its process is writing who it is.
    Claiming,
    Live {
        pid: u32,
        parent_pid: u32,
        /// The claim's number in the region: a process that execs claims a
        /// new segment, with a higher number.
        claim: u64,
    },
}

/// One process's segment.
#[derive(Clone, Copy)]
pub struct Segment<'a> {
    header: &'a [AtomicU64],
    data: &'a [AtomicU64],
    heartbeat: &'a AtomicU64,
    nonce: u64,
    index: usize,
}

/// Room reserved in a segment for one record, not yet published.
pub struct Reserved<'a> {
    segment: Segment<'a>,
    at: u64,
    len: usize,
}

impl Reserved<'_> {
    /// Writes the record and publishes it. A payload of another length than
    /// reserved is cut or padded with zeros to it.
    pub fn publish(self, kind: u16, payload: &[u8]) {
        let seg = &self.segment;
        let first = seg.word_index(self.at);
        let payload = &payload[..payload.len().min(self.len)];
        for (i, chunk) in payload.chunks(8).enumerate() {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            seg.data[first + 2 + i].store(u64::from_le_bytes(word), Ordering::Relaxed);
        }
        for i in payload.len().div_ceil(8)..self.len.div_ceil(8) {
            seg.data[first + 2 + i].store(0, Ordering::Relaxed);
        }
        seg.put_header(self.at, kind, self.len as u64);
    }
}

/// What the reader found at its position.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// A record: its kind and payload (in the reader's buffer).
    Record(u16),
    /// Nothing published there (yet).
    Nothing,
    /// A header no writer makes (the program wrote over the segment): the
    /// reading of this segment cannot go on.
    Corrupt,
}

impl<'a> Segment<'a> {
    pub fn index(&self) -> usize {
        self.index
    }

    pub fn holder(&self) -> Holder {
        match self.header[S_STATE].load(Ordering::Acquire) {
            FREE => Holder::Free,
            LIVE => {
                let pids = self.header[S_PIDS].load(Ordering::Relaxed);
                Holder::Live {
                    pid: pids as u32,
                    parent_pid: (pids >> 32) as u32,
                    claim: self.header[S_CLAIM].load(Ordering::Relaxed),
                }
            }
            _ => Holder::Claiming,
        }
    }

    /// Writes one record; false (nothing written) when the ring has no room
    /// for it, or it is longer than [`MAX_PAYLOAD`]. Never waits: a full ring
    /// means gpulab is behind, and the caller decides what waits.
    pub fn write(&self, kind: u16, payload: &[u8]) -> bool {
        if kind == PAD {
            return false;
        }
        match self.reserve(payload.len()) {
            Some(room) => {
                room.publish(kind, payload);
                true
            }
            None => false,
        }
    }

    /// [`Segment::write`], where `limit` (the writers' own, in their
    /// process's memory; 0 at first) keeps how far the reader's last seen
    /// position lets them write: the reader's word, which it stores as it
    /// reads, is loaded only when a record would pass that. Read at every
    /// record, it cost each a cache line taken back from gpulab's reader.
    pub fn write_within(&self, kind: u16, payload: &[u8], limit: &AtomicU64) -> bool {
        if kind == PAD {
            return false;
        }
        match self.reserve_within(payload.len(), Some(limit)) {
            Some(room) => {
                room.publish(kind, payload);
                true
            }
            None => false,
        }
    }

    /// Reserves room for a record of `len` bytes; None when there is none.
    /// Room reserved and never published (its writer died) is what the
    /// reader skips once the process is gone ([`Segment::skip_unfinished`]).
    pub fn reserve(&self, len: usize) -> Option<Reserved<'a>> {
        self.reserve_within(len, None)
    }

    fn reserve_within(&self, len: usize, limit: Option<&AtomicU64>) -> Option<Reserved<'a>> {
        if len > MAX_PAYLOAD {
            return None;
        }
        let total = RECORD_HEADER + padded(len);
        let write = &self.header[S_WRITE];
        let (at, skip) = loop {
            let w = write.load(Ordering::Relaxed);
            let rem = SEGMENT_BYTES - w % SEGMENT_BYTES;
            let skip = if rem < RECORD_HEADER || total > rem {
                rem
            } else {
                0
            };
            let end = w + skip + total;
            // Within what the reader was last seen to allow (it only moves
            // on): no need to look at where it is now.
            let known = limit.is_some_and(|l| end <= l.load(Ordering::Relaxed));
            let r = if known {
                0
            } else {
                let r = self.header[S_READ].load(Ordering::Acquire);
                if let Some(l) = limit
                    && r <= w
                {
                    l.fetch_max(r + SEGMENT_BYTES, Ordering::Relaxed);
                }
                r
            };
            // A read position ahead of the writes is not the reader's: nothing
            // is written until it makes sense again.
            if !known && (r > w || end - r > SEGMENT_BYTES) {
                return None;
            }
            if write
                .compare_exchange_weak(w, end, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                break (w, skip);
            }
        };
        if skip >= RECORD_HEADER {
            self.put_header(at, PAD, skip - RECORD_HEADER);
        }
        Some(Reserved {
            segment: *self,
            at: at + skip,
            len,
        })
    }

    /// Publishes a record's header: length and kind, then the word that names
    /// its position, last and with release, so a reader that sees it sees all.
    fn put_header(&self, at: u64, kind: u16, len: u64) {
        let i = self.word_index(at);
        self.data[i + 1].store(len | (u64::from(kind) << 32), Ordering::Relaxed);
        self.data[i].store(at ^ self.nonce, Ordering::Release);
    }

    fn word_index(&self, pos: u64) -> usize {
        ((pos % SEGMENT_BYTES) / 8) as usize
    }

    /// Counts a record the process had no room for and let go.
    pub fn count_dropped(&self, n: u64) {
        self.header[S_DROPPED].fetch_add(n, Ordering::Relaxed);
    }

    /// Counts reference changes of one object merged while the ring was full.
    pub fn count_coalesced(&self, n: u64) {
        self.header[S_COALESCED].fetch_add(n, Ordering::Relaxed);
    }

    /// Records the process holds for a moment with room (`+`), or wrote (`-`):
    /// what is pending when the process ends was lost with it.
    pub fn pending(&self, delta: i64) {
        if delta >= 0 {
            self.header[S_PENDING].fetch_add(delta as u64, Ordering::Relaxed);
        } else {
            self.header[S_PENDING].fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
        }
    }

    /// The agent spent `ns` inside one of the program's calls it timed (a
    /// launch, or another).
    pub fn observed(&self, launch: bool, ns: u64) {
        let at = S_OBSERVED + if launch { 0 } else { 2 };
        self.header[at].fetch_add(ns, Ordering::Relaxed);
        self.header[at + 1].fetch_add(1, Ordering::Relaxed);
    }

    /// What observing cost the process, as [`Segment::observed`] counted:
    /// (launches' ns, launches timed, other calls' ns, other calls timed).
    pub fn observer(&self) -> (u64, u64, u64, u64) {
        let w = |i: usize| self.header[S_OBSERVED + i].load(Ordering::Relaxed);
        (w(0), w(1), w(2), w(3))
    }

    /// The process's own counts: dropped, coalesced, pending.
    pub fn counts(&self) -> (u64, u64, u64) {
        (
            self.header[S_DROPPED].load(Ordering::Relaxed),
            self.header[S_COALESCED].load(Ordering::Relaxed),
            self.header[S_PENDING].load(Ordering::Relaxed),
        )
    }

    /// The reader: the record at `pos`, its payload copied into `buf`. `pos`
    /// moves past it (and past padding); it stays on `Nothing` and `Corrupt`.
    pub fn read(&self, pos: &mut u64, buf: &mut Vec<u8>) -> Next {
        loop {
            let rem = SEGMENT_BYTES - *pos % SEGMENT_BYTES;
            if rem < RECORD_HEADER {
                // No header fits before the end: the writer goes on at the
                // start, once one has reserved past it; never a read position
                // past what is reserved (the writers would wait for it).
                if *pos + rem > self.written() {
                    return Next::Nothing;
                }
                *pos += rem;
                continue;
            }
            let i = self.word_index(*pos);
            if self.data[i].load(Ordering::Acquire) != *pos ^ self.nonce {
                return Next::Nothing;
            }
            let meta = self.data[i + 1].load(Ordering::Relaxed);
            let (len, kind) = (meta & 0xFFFF_FFFF, (meta >> 32) as u16);
            let total = RECORD_HEADER + padded(len as usize);
            if total > rem || (kind != PAD && len as usize > MAX_PAYLOAD) {
                return Next::Corrupt;
            }
            if kind == PAD {
                *pos += total;
                continue;
            }
            buf.clear();
            let words = padded(len as usize) as usize / 8;
            for w in &self.data[i + 2..i + 2 + words] {
                buf.extend_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
            }
            buf.truncate(len as usize);
            *pos += total;
            return Next::Record(kind);
        }
    }

    /// The process is gone and left a record unpublished at `pos` (it died
    /// between reserving and publishing): moves `pos` to the next published
    /// record before the writes' end, or to that end. Returns the bytes passed.
    pub fn skip_unfinished(&self, pos: &mut u64) -> u64 {
        let end = self.header[S_WRITE].load(Ordering::Acquire);
        let start = *pos;
        if end <= start || end - start > SEGMENT_BYTES {
            return 0;
        }
        let mut p = start + 8;
        while p < end {
            let rem = SEGMENT_BYTES - p % SEGMENT_BYTES;
            if rem < RECORD_HEADER {
                p += rem;
                continue;
            }
            if self.data[self.word_index(p)].load(Ordering::Acquire) == p ^ self.nonce {
                break;
            }
            p += 8;
        }
        *pos = p.min(end);
        *pos - start
    }

    /// How far gpulab has read.
    pub fn read_position(&self) -> u64 {
        self.header[S_READ].load(Ordering::Acquire)
    }

    /// What a writer waiting for room watches: gpulab's reading and its
    /// heartbeat. While either moves, gpulab runs and room will come.
    pub fn progress(&self) -> (u64, u64) {
        (self.read_position(), self.heartbeat.load(Ordering::Relaxed))
    }

    /// Where the writers have reserved to.
    pub fn written(&self) -> u64 {
        self.header[S_WRITE].load(Ordering::Acquire)
    }

    /// Tells the writers the ring up to `pos` is read: its room is theirs.
    pub fn consumed(&self, pos: u64) {
        self.header[S_READ].store(pos, Ordering::Release);
    }

    /// Frees the segment for another process: its holder is gone and all it
    /// wrote is read, to `pos`. The counts restart; the positions go on from
    /// there, never back, so no header the last holder left can name a
    /// position the next one reaches.
    pub fn free(&self, pos: u64) {
        for w in [S_DROPPED, S_COALESCED, S_PENDING, S_PIDS, S_CLAIM] {
            self.header[w].store(0, Ordering::Relaxed);
        }
        self.header[S_WRITE].store(pos, Ordering::Relaxed);
        self.header[S_READ].store(pos, Ordering::Relaxed);
        self.header[S_STATE].store(FREE, Ordering::Release);
    }
}

fn padded(len: usize) -> u64 {
    (len as u64).div_ceil(8) * 8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words() -> Vec<AtomicU64> {
        (0..region_words()).map(|_| AtomicU64::new(0)).collect()
    }

    fn drain(seg: &Segment<'_>, pos: &mut u64) -> Vec<(u16, Vec<u8>)> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        while let Next::Record(kind) = seg.read(pos, &mut buf) {
            out.push((kind, buf.clone()));
        }
        // Never past what the writers reserved: they would wait for it.
        assert!(
            *pos <= seg.written(),
            "read to {pos}, written {}",
            seg.written()
        );
        seg.consumed(*pos);
        out
    }

    #[test]
    fn a_region_opens_only_with_its_nonce_and_segments_are_claimed_once() {
        let w = words();
        let region = Region::format(&w, 42).expect("formats");
        assert!(Region::open(&w, 41).is_none());
        let opened = Region::open(&w, 42).expect("opens");
        let a = opened.claim(7, 1).expect("a segment");
        let b = region.claim(8, 7).expect("another");
        assert_ne!(a.index(), b.index());
        assert_eq!(
            a.holder(),
            Holder::Live {
                pid: 7,
                parent_pid: 1,
                claim: 1
            }
        );
        for pid in 0..SEGMENTS as u32 - 2 {
            assert!(region.claim(100 + pid, 1).is_some());
        }
        assert!(region.claim(1000, 1).is_none(), "every segment is taken");
        assert_eq!(region.unclaimed(), 1);
        a.free(0);
        assert_eq!(region.claim(1001, 1).map(|s| s.index()), Some(a.index()));
    }

    #[test]
    fn records_of_any_length_go_round_the_ring_in_order() {
        let w = words();
        let region = Region::format(&w, 0xDEAD_BEEF).expect("formats");
        let seg = region.claim(1, 0).expect("claims");
        let mut pos = 0;
        let mut expected = 0u64;
        let mut seen = 0u64;
        // Lengths that do not divide the ring, so records meet its end at
        // every offset; several laps.
        for round in 0..20_000u64 {
            let len = (round * 37 % 700) as usize;
            let payload: Vec<u8> = (0..len).map(|i| (i as u64 + round) as u8).collect();
            if !seg.write(1 + (round % 3) as u16, &payload) {
                for (kind, got) in drain(&seg, &mut pos) {
                    let r = seen;
                    let len = (r * 37 % 700) as usize;
                    assert_eq!(kind, 1 + (r % 3) as u16);
                    assert_eq!(got.len(), len);
                    assert!(
                        got.iter()
                            .enumerate()
                            .all(|(i, b)| *b == (i as u64 + r) as u8)
                    );
                    seen += 1;
                }
                assert!(
                    seg.write(1 + (round % 3) as u16, &payload),
                    "room after reading"
                );
            }
            expected += 1;
        }
        seen += drain(&seg, &mut pos).len() as u64;
        assert_eq!(seen, expected);
        assert!(pos > 3 * SEGMENT_BYTES, "went round the ring");
    }

    #[test]
    fn many_threads_write_and_every_record_arrives_whole() {
        let w = words();
        let region = Region::format(&w, 7).expect("formats");
        let seg = region.claim(1, 0).expect("claims");
        let done = std::sync::atomic::AtomicUsize::new(0);
        // Half the writers keep the reader's limit as an agent's threads do.
        let limit = AtomicU64::new(0);
        let mut got = std::collections::HashMap::<u8, u64>::new();
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let (seg, done, limit) = (seg, &done, &limit);
                s.spawn(move || {
                    for i in 0..50_000u64 {
                        let payload = [[t; 8], i.to_le_bytes()].concat();
                        let write = |p: &[u8]| {
                            if t % 2 == 0 {
                                seg.write(3, p)
                            } else {
                                seg.write_within(3, p, limit)
                            }
                        };
                        while !write(&payload) {
                            std::thread::yield_now();
                        }
                    }
                    done.fetch_add(1, Ordering::Release);
                });
            }
            let mut pos = 0;
            let mut buf = Vec::new();
            loop {
                let finished = done.load(Ordering::Acquire) == 4;
                match seg.read(&mut pos, &mut buf) {
                    Next::Record(3) => {
                        assert!(buf[..8].iter().all(|b| *b == buf[0]));
                        let i = u64::from_le_bytes(buf[8..16].try_into().expect("8"));
                        let next = got.entry(buf[0]).or_default();
                        assert_eq!(i, *next, "one thread's records in its order");
                        *next += 1;
                    }
                    Next::Nothing if finished && pos == seg.written() => break,
                    Next::Nothing => seg.consumed(pos),
                    other => panic!("{other:?}"),
                }
            }
        });
        assert_eq!(got.values().sum::<u64>(), 200_000);
    }

    /// Writers that keep the reader's last seen limit fill the ring exactly
    /// as far as those that look at the reader every time, and never past
    /// what it has read.
    #[test]
    fn a_writers_kept_limit_never_passes_the_reader() {
        let w = words();
        let region = Region::format(&w, 5).expect("formats");
        let seg = region.claim(1, 0).expect("claims");
        let limit = AtomicU64::new(0);
        let mut n = 0;
        while seg.write_within(2, &[7; 100], &limit) {
            n += 1;
        }
        assert_eq!(n, SEGMENT_BYTES / (RECORD_HEADER + 104));
        // The reader takes ten; ten more fit, then none.
        let (mut pos, mut buf) = (0, Vec::new());
        for _ in 0..10 {
            assert_eq!(seg.read(&mut pos, &mut buf), Next::Record(2));
        }
        seg.consumed(pos);
        let mut more = 0;
        while seg.write_within(2, &[8; 100], &limit) {
            more += 1;
        }
        assert_eq!(more, 10);
        assert!(!seg.write(2, &[9; 100]));
    }

    #[test]
    fn a_segment_claimed_again_never_shows_its_last_holders_records() {
        let w = words();
        let region = Region::format(&w, 11).expect("formats");
        let seg = region.claim(1, 0).expect("claims");
        for i in 0..100u8 {
            assert!(seg.write(1, &[i; 40]));
        }
        let mut pos = 0;
        assert_eq!(drain(&seg, &mut pos).len(), 100);
        seg.free(pos);
        let again = region.claim(2, 0).expect("claims again");
        assert_eq!(again.index(), seg.index());
        assert!(again.write(2, b"new"));
        let mut from = again.read_position();
        assert_eq!(from, pos, "positions go on");
        assert_eq!(drain(&again, &mut from), vec![(2, b"new".to_vec())]);
    }

    #[test]
    fn a_gap_too_small_for_a_header_is_passed_only_once_a_writer_did() {
        let w = words();
        let region = Region::format(&w, 3).expect("formats");
        let seg = region.claim(1, 0).expect("claims");
        // Records that leave exactly 8 bytes before the ring's end.
        let payload = vec![7u8; 4096 - 16];
        let mut pos = 0;
        while seg.written() + 4096 <= SEGMENT_BYTES - 8 {
            assert!(seg.write(1, &payload));
        }
        let last = (SEGMENT_BYTES - 8 - seg.written() - 16) as usize;
        assert!(seg.write(1, &vec![1u8; last]));
        assert_eq!(seg.written(), SEGMENT_BYTES - 8);
        let read = drain(&seg, &mut pos).len();
        assert!(read > 500);
        assert_eq!(pos, SEGMENT_BYTES - 8, "the reader waits at the gap");
        assert_eq!(seg.read_position(), SEGMENT_BYTES - 8);
        assert!(
            seg.write(2, b"after the gap"),
            "the writers are not held up"
        );
        assert_eq!(drain(&seg, &mut pos), vec![(2, b"after the gap".to_vec())]);
    }

    #[test]
    fn a_record_its_writer_never_finished_is_skipped_once_the_process_is_gone() {
        let w = words();
        let region = Region::format(&w, 99).expect("formats");
        let seg = region.claim(1, 0).expect("claims");
        assert!(seg.write(1, b"before"));
        // A writer that reserved and died: the reservation without a header.
        let _never_published = seg.reserve(24);
        assert!(seg.write(1, b"after"));
        let mut pos = 0;
        assert_eq!(drain(&seg, &mut pos), vec![(1, b"before".to_vec())]);
        assert_eq!(seg.skip_unfinished(&mut pos), RECORD_HEADER + 24);
        assert_eq!(drain(&seg, &mut pos), vec![(1, b"after".to_vec())]);
        assert_eq!(pos, seg.written());
    }

    #[test]
    fn words_a_program_scribbled_are_never_read_as_records() {
        let w = words();
        let region = Region::format(&w, 5).expect("formats");
        let seg = region.claim(1, 0).expect("claims");
        assert!(seg.write(1, b"real"));
        // A length past the ring, behind a header that names its position.
        seg.data[3].store(24 ^ 5, Ordering::Relaxed);
        seg.data[4].store(u64::MAX >> 1, Ordering::Relaxed);
        let mut pos = 0;
        let mut buf = Vec::new();
        assert_eq!(seg.read(&mut pos, &mut buf), Next::Record(1));
        assert_eq!(pos, 24);
        assert_eq!(seg.read(&mut pos, &mut buf), Next::Corrupt);
        // A read position ahead of the writes stops the writers, not the program.
        seg.consumed(1 << 40);
        assert!(!seg.write(1, b"x"));
    }
}
