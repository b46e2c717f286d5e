//! Trace events put in time order with bounded memory: serialised events are
//! gathered in a chunk, each full chunk is sorted and written to an unnamed
//! temporary file, and the chunks are merged at the end. A recording's events
//! arrive nearly but not quite in time order (a call's slice begins before the
//! call returns, an object's life is known only when it ends), and the trace has
//! always been written in time order. Never prints.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

/// Serialised bytes a chunk gathers before it is sorted and written out: the
/// export's memory, whatever the recording's length.
const CHUNK_BYTES: usize = 16 << 20;

/// Where an event sorts: by time, then as the trace built in memory ordered
/// events of equal time (run, then kind of event, then arrival). A complete
/// slice of equal time and kind sorts the longer first, as slices that nest
/// must come (the enclosing one first).
#[derive(Debug, Clone, Copy)]
pub(super) struct Key {
    pub ts: f64,
    pub run: u32,
    /// Calls, spans, flows, counters, notes, object lives (see `Tracks`).
    pub part: u8,
    /// Arrival within its part (an object's id for its life's slices).
    pub idx: u64,
    /// The order of the events one item makes (a flow's start and end).
    pub sub: u8,
    /// A complete slice: where it is drawn and when, for `Nesting`.
    pub slice: Option<Slice>,
}

/// A complete slice: its track (pid, tid) and its times, ns from its run's
/// start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Slice {
    pub track: (u32, u64),
    pub begin: i64,
    pub end: i64,
}

impl Key {
    const LEN: usize = 8 + 4 + 1 + 8 + 1 + 1 + 4 + 8 + 8 + 8;

    fn to_bytes(self) -> [u8; Key::LEN] {
        let mut b = [0; Key::LEN];
        b[0..8].copy_from_slice(&self.ts.to_bits().to_le_bytes());
        b[8..12].copy_from_slice(&self.run.to_le_bytes());
        b[12] = self.part;
        b[13..21].copy_from_slice(&self.idx.to_le_bytes());
        b[21] = self.sub;
        if let Some(s) = self.slice {
            b[22] = 1;
            b[23..27].copy_from_slice(&s.track.0.to_le_bytes());
            b[27..35].copy_from_slice(&s.track.1.to_le_bytes());
            b[35..43].copy_from_slice(&s.begin.to_le_bytes());
            b[43..51].copy_from_slice(&s.end.to_le_bytes());
        }
        b
    }

    fn from_bytes(b: &[u8; Key::LEN]) -> Key {
        let u64_at = |i: usize| {
            let mut x = [0; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        let u32_at = |i: usize| {
            let mut x = [0; 4];
            x.copy_from_slice(&b[i..i + 4]);
            u32::from_le_bytes(x)
        };
        Key {
            ts: f64::from_bits(u64_at(0)),
            run: u32_at(8),
            part: b[12],
            idx: u64_at(13),
            sub: b[21],
            slice: (b[22] == 1).then(|| Slice {
                track: (u32_at(23), u64_at(27)),
                begin: u64_at(35) as i64,
                end: u64_at(43) as i64,
            }),
        }
    }

    /// Longer slices first: a slice's end, latest first.
    fn longer_first(&self) -> std::cmp::Reverse<Option<i64>> {
        std::cmp::Reverse(self.slice.map(|s| s.end))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        self.ts
            .total_cmp(&other.ts)
            .then(self.run.cmp(&other.run))
            .then(self.part.cmp(&other.part))
            .then(self.longer_first().cmp(&other.longer_first()))
            .then(self.idx.cmp(&other.idx))
            .then(self.sub.cmp(&other.sub))
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Key {}

/// Serialised events, each with its key, given in any order and read back sorted.
#[derive(Default)]
pub(super) struct Sorted {
    bytes: Vec<u8>,
    entries: Vec<(Key, usize, usize)>,
    spill: Option<File>,
    /// Where each written chunk lies in `spill`: (offset, length).
    chunks: Vec<(u64, u64)>,
}

impl Sorted {
    /// Adds one event as `write` serialises it.
    pub fn push(
        &mut self,
        key: Key,
        write: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
    ) -> io::Result<()> {
        let start = self.bytes.len();
        write(&mut self.bytes)?;
        self.entries.push((key, start, self.bytes.len() - start));
        if self.bytes.len() >= CHUNK_BYTES {
            self.spill_chunk()?;
        }
        Ok(())
    }

    fn spill_chunk(&mut self) -> io::Result<()> {
        if self.spill.is_none() {
            self.spill = Some(tempfile::tempfile()?);
        }
        let Some(file) = self.spill.as_mut() else {
            return Ok(());
        };
        let offset = file.seek(SeekFrom::End(0))?;
        self.entries.sort_by_key(|e| e.0);
        let mut w = BufWriter::new(&*file);
        for &(key, start, len) in &self.entries {
            w.write_all(&key.to_bytes())?;
            w.write_all(&(len as u64).to_le_bytes())?;
            w.write_all(&self.bytes[start..start + len])?;
        }
        w.flush()?;
        drop(w);
        let end = file.seek(SeekFrom::End(0))?;
        self.chunks.push((offset, end - offset));
        self.entries.clear();
        self.bytes.clear();
        Ok(())
    }

    /// Hands each event's key and bytes to `each`, in key order.
    pub fn drain(mut self, mut each: impl FnMut(&Key, &[u8]) -> io::Result<()>) -> io::Result<()> {
        if self.spill.is_none() {
            self.entries.sort_by_key(|e| e.0);
            for &(key, start, len) in &self.entries {
                each(&key, &self.bytes[start..start + len])?;
            }
            return Ok(());
        }
        if !self.entries.is_empty() {
            self.spill_chunk()?;
        }
        let Some(file) = &self.spill else {
            return Ok(());
        };
        let mut readers: Vec<_> = self
            .chunks
            .iter()
            .map(|&(offset, len)| {
                BufReader::with_capacity(
                    64 << 10,
                    Chunk {
                        file,
                        pos: offset,
                        end: offset + len,
                    },
                )
            })
            .collect();
        let mut heads = BinaryHeap::new();
        let mut bodies: Vec<Vec<u8>> = vec![Vec::new(); readers.len()];
        for (i, r) in readers.iter_mut().enumerate() {
            if let Some(key) = next(r, &mut bodies[i])? {
                heads.push(std::cmp::Reverse((key, i)));
            }
        }
        while let Some(std::cmp::Reverse((key, i))) = heads.pop() {
            each(&key, &bodies[i])?;
            if let Some(key) = next(&mut readers[i], &mut bodies[i])? {
                heads.push(std::cmp::Reverse((key, i)));
            }
        }
        Ok(())
    }
}

/// The next event of a chunk: its key, its bytes into `body`.
fn next(r: &mut impl Read, body: &mut Vec<u8>) -> io::Result<Option<Key>> {
    let mut head = [0; Key::LEN + 8];
    match r.read_exact(&mut head) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut key = [0; Key::LEN];
    key.copy_from_slice(&head[..Key::LEN]);
    let mut len = [0; 8];
    len.copy_from_slice(&head[Key::LEN..]);
    let len = usize::try_from(u64::from_le_bytes(len)).map_err(io::Error::other)?;
    body.resize(len, 0);
    r.read_exact(body)?;
    Ok(Some(Key::from_bytes(&key)))
}

/// One written chunk of the shared temporary file, read at its own position.
struct Chunk<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for Chunk<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = usize::try_from(self.end - self.pos).unwrap_or(usize::MAX);
        let n = buf.len().min(left);
        if n == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..n], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ts: f64, idx: u64) -> Key {
        Key {
            ts,
            run: 0,
            part: 0,
            idx,
            sub: 0,
            slice: None,
        }
    }

    fn drained(s: Sorted) -> Vec<String> {
        let mut out = Vec::new();
        s.drain(|_, b| {
            out.push(String::from_utf8_lossy(b).into_owned());
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn events_come_back_in_key_order_from_memory_and_from_spilled_chunks() {
        for spill_every in [None, Some(7), Some(1)] {
            let mut s = Sorted::default();
            // Times out of order, and equal times kept in arrival order.
            let items: Vec<(f64, u64)> = (0..50u64).map(|i| (((i * 37) % 11) as f64, i)).collect();
            for (n, &(ts, idx)) in items.iter().enumerate() {
                s.push(key(ts, idx), |b| serde_json::to_writer(b, &idx))
                    .unwrap();
                if spill_every.is_some_and(|k| n % k == 0) {
                    s.spill_chunk().unwrap();
                }
            }
            let mut want = items.clone();
            want.sort_by(|a, b| a.0.total_cmp(&b.0));
            let want: Vec<String> = want.iter().map(|(_, i)| i.to_string()).collect();
            assert_eq!(drained(s), want, "spilled every {spill_every:?}");
        }
    }

    #[test]
    fn a_key_reads_back_as_written() {
        let k = Key {
            ts: -12.5,
            run: 3,
            part: 5,
            idx: u64::MAX - 1,
            sub: 2,
            slice: Some(Slice {
                track: (7, 1 << 31),
                begin: -5,
                end: i64::MAX,
            }),
        };
        let back = Key::from_bytes(&k.to_bytes());
        assert_eq!(back, k);
        assert_eq!(back.ts.to_bits(), k.ts.to_bits());
        assert_eq!(back.slice, k.slice);
    }
}
