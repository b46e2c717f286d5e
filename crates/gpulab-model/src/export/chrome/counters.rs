//! The trace's counter tracks of one recording: memory as the run reads it
//! (named by what it reads), a CUDA pool's bookkeeping at each call, and who
//! held a watched program's memory, by share. All on the run's own process.

use std::io;

use super::event::{Args, TraceEvent};
use super::sorted::Sorted;
use super::{COUNTERS, SHARES_COUNTER, Tracks};
use crate::trace::{MemorySource, Meta};

impl Tracks<'_> {
    /// A watched program's memory by share at each composition the run took.
    pub(super) fn shares(&self, out: &mut Sorted) -> io::Result<()> {
        let mib = crate::units::mib;
        for (i, p) in self.outline.composition.iter().enumerate() {
            let explained = p.stacked().iter().sum::<u64>();
            let e = TraceEvent {
                ts: Some(self.us(p.t_ns)),
                args: Args::Shares {
                    objects: mib(p.held),
                    cache: mib(p.cached),
                    reserves: mib(p.reserves),
                    kept_by_driver: mib(p.kept),
                    unexplained: (p.total as f64 - explained as f64) / crate::units::MIB_F64,
                },
                ..TraceEvent::new(SHARES_COUNTER, "C", self.pid, 0)
            };
            // After the memory readings' counter events of the same moment.
            out.push(
                self.key(p.t_ns, COUNTERS, u64::MAX / 2 + i as u64, 0),
                |b| serde_json::to_writer(b, &e),
            )?;
        }
        Ok(())
    }

    /// The CUDA pools read right after a call: the default pool's, the
    /// lab's own pool's and the graph memory's, each a counter track of two
    /// series (reserved from the device, used of it).
    pub(super) fn pools(
        &self,
        t: u64,
        m: &crate::trace::CudaMemory,
        out: &mut Sorted,
    ) -> io::Result<()> {
        let mib = crate::units::mib;
        let tracks = [
            (
                "CUDA default pool, MiB",
                Some((m.pool_reserved, m.pool_used)),
            ),
            (
                "CUDA own pool, MiB",
                m.custom_pool.map(|p| (p.reserved, p.used)),
            ),
            (
                "CUDA graph memory, MiB",
                m.graph_mem.map(|p| (p.reserved, p.used)),
            ),
        ];
        for (sub, (name, pool)) in tracks.into_iter().enumerate() {
            let Some((reserved, used)) = pool else {
                continue;
            };
            let e = TraceEvent {
                ts: Some(self.us(t)),
                args: Args::Pool {
                    reserved: mib(reserved),
                    used: mib(used),
                },
                ..TraceEvent::new(name, "C", self.pid, 0)
            };
            out.push(
                self.key(t, COUNTERS, u64::MAX / 4 + self.calls, sub as u8),
                |b| serde_json::to_writer(b, &e),
            )?;
        }
        Ok(())
    }

    pub(super) fn reading(
        &mut self,
        index: u64,
        t: u64,
        bytes: u64,
        sample: bool,
        out: &mut Sorted,
    ) -> io::Result<()> {
        let idx = self.readings;
        self.readings += 1;
        if !self.outline.keeps_reading(index, t, sample) {
            return Ok(());
        }
        let e = TraceEvent {
            ts: Some(self.us(t)),
            args: Args::Counter {
                mib: crate::units::mib(bytes),
            },
            ..TraceEvent::new(self.counter, "C", self.pid, 0)
        };
        out.push(self.key(t, COUNTERS, idx, 0), |b| {
            serde_json::to_writer(b, &e)
        })
    }
}

/// What the memory counter reads, by the run's memory source: NVML's device memory,
/// or on a CPU device (and for a watched program) a process's resident memory.
pub(super) fn counter_name(meta: Option<&Meta>) -> &'static str {
    let Some(meta) = meta else {
        return "device memory";
    };
    match (meta.device.memory_source, meta.watch.is_some()) {
        (MemorySource::Rss, true) => "program RSS",
        (MemorySource::Rss, false) => "worker RSS",
        _ => "device memory",
    }
}
