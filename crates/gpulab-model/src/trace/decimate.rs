//! Thinning a recording's telemetry: the sampler reads memory at up to 1 kHz, which
//! makes a recording mostly idle samples. Kept: every sample within `NEAR_NS` of a
//! call's begin or end or a device span's edge (the curve around a call is the
//! lesson), every sample whose value moved by more than `STEP_BYTES` from the last
//! kept one, and one sample per `IDLE_NS` otherwise. Every other event is kept.

//!
//! One policy, two ways to run it: [`decimate`] over a whole recording, and
//! [`Thinner`] over a stream as it arrives (a watched program's recording is
//! written as it goes), which holds back at most [`HOLD_EVENTS`] events or
//! [`HOLD_NS`] of stream time to see the calls around each sample first.

use std::collections::{BTreeMap, VecDeque};

use super::{Event, Sample};

/// Samples this close to a call or span edge are always kept.
pub const NEAR_NS: u64 = 5_000_000;
/// An idle stretch keeps one sample per this interval.
pub const IDLE_NS: u64 = 50_000_000;
/// A change bigger than this is never dropped.
pub const STEP_BYTES: u64 = crate::units::MIB;
/// The most events [`Thinner`] holds back before it decides on a sample with
/// what it has seen: 1 MiB or so of events, a few ms at 100,000 calls/s.
pub const HOLD_EVENTS: usize = 4096;
/// How far stream time may pass a held sample before it is decided: an agent's
/// records reach the parent within milliseconds.
pub const HOLD_NS: u64 = 500_000_000;

/// The policy: which samples to keep, given the call and span edges seen.
/// Edges are kept per `NEAR_NS` bucket as the earliest and latest in it, which
/// answers "an edge within `NEAR_NS` of t" exactly.
#[derive(Debug, Default)]
struct Policy {
    edges: BTreeMap<u64, (u64, u64)>,
    last: Option<(u64, u64)>,
}

impl Policy {
    fn see(&mut self, event: &Event) {
        let (a, b) = match event {
            Event::Call(c) => (c.begin_ns, c.end_ns),
            Event::DeviceSpan(s) => (s.begin_ns, s.end_ns),
            _ => return,
        };
        for t in [a, b] {
            let e = self.edges.entry(t / NEAR_NS).or_insert((t, t));
            e.0 = e.0.min(t);
            e.1 = e.1.max(t);
        }
    }

    fn near(&self, t: u64) -> bool {
        let b = t / NEAR_NS;
        self.edges.contains_key(&b)
            || b.checked_sub(1)
                .and_then(|p| self.edges.get(&p))
                .is_some_and(|&(_, hi)| t - hi <= NEAR_NS)
            || self
                .edges
                .get(&(b + 1))
                .is_some_and(|&(lo, _)| lo - t <= NEAR_NS)
    }

    /// Whether an edge may lie in `[lo, hi]` (each bucket keeps its first and
    /// last edge only, so this errs towards yes: a sample more is kept).
    fn edge_within(&self, lo: u64, hi: u64) -> bool {
        lo <= hi
            && self
                .edges
                .range(lo / NEAR_NS..=hi / NEAR_NS)
                .any(|(_, &(first, last))| first <= hi && last >= lo)
    }

    /// `prev_ns` and `next_ns`: the samples on each side of `s` in the
    /// stream, kept or not. The last reading before a call and the first
    /// after it always stay, however far from it they were taken: they are
    /// what the memory a call took is measured between, and a replay must
    /// measure what the live run did.
    fn keep(&mut self, s: &Sample, prev_ns: Option<u64>, next_ns: Option<u64>) -> bool {
        let brackets = prev_ns.is_some_and(|p| self.edge_within(p, s.t_ns))
            || next_ns.is_some_and(|n| self.edge_within(s.t_ns, n));
        let keep = match self.last {
            None => true,
            Some((t, v)) => {
                brackets
                    || self.near(s.t_ns)
                    || s.used_bytes.abs_diff(v) > STEP_BYTES
                    || s.t_ns.saturating_sub(t) >= IDLE_NS
            }
        };
        if keep {
            self.last = Some((s.t_ns, s.used_bytes));
        }
        keep
    }

    /// Forgets edges no sample at `t` or later can be near.
    fn forget_before(&mut self, t: u64) {
        let keep_from = (t / NEAR_NS).saturating_sub(1);
        self.edges = self.edges.split_off(&keep_from);
    }
}

pub fn decimate(events: &[Event]) -> Vec<&Event> {
    let mut policy = Policy::default();
    for e in events {
        policy.see(e);
    }
    let times: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Sample(s) => Some(s.t_ns),
            _ => None,
        })
        .collect();
    let mut i = 0usize;
    events
        .iter()
        .filter(|e| match e {
            Event::Sample(s) => {
                let prev = i.checked_sub(1).and_then(|p| times.get(p)).copied();
                let next = times.get(i + 1).copied();
                i += 1;
                policy.keep(s, prev, next)
            }
            _ => true,
        })
        .collect()
}

/// [`decimate`] over a stream: events go in as they arrive and come out, in the
/// same order, once the samples among them are decided.
#[derive(Debug, Default)]
pub struct Thinner {
    policy: Policy,
    held: VecDeque<Event>,
    /// The latest time of any event in.
    now_ns: u64,
    /// The last sample decided on, kept or not.
    prev_ns: Option<u64>,
}

impl Thinner {
    /// Takes `event` in; `out` gets every event that can be let out now.
    pub fn push<E>(
        &mut self,
        event: Event,
        out: impl FnMut(&Event) -> Result<(), E>,
    ) -> Result<(), E> {
        self.policy.see(&event);
        self.now_ns = self.now_ns.max(event.t_ns().unwrap_or(0));
        self.held.push_back(event);
        self.release(false, out)
    }

    /// Lets out everything held, deciding on what has been seen.
    pub fn finish<E>(&mut self, out: impl FnMut(&Event) -> Result<(), E>) -> Result<(), E> {
        self.release(true, out)
    }

    fn release<E>(
        &mut self,
        all: bool,
        mut out: impl FnMut(&Event) -> Result<(), E>,
    ) -> Result<(), E> {
        while let Some(front) = self.held.front() {
            if let Event::Sample(s) = front {
                let ripe = s.t_ns.saturating_add(HOLD_NS) <= self.now_ns;
                if !(all || ripe || self.held.len() > HOLD_EVENTS) {
                    break;
                }
                let t = s.t_ns;
                let next = self.held.iter().skip(1).find_map(|e| match e {
                    Event::Sample(n) => Some(n.t_ns),
                    _ => None,
                });
                let keep = self.policy.keep(s, self.prev_ns, next);
                self.prev_ns = Some(t);
                if keep {
                    out(front)?;
                }
                self.policy.forget_before(t);
            } else {
                out(front)?;
            }
            self.held.pop_front();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Call, Sample};

    fn sample(t_ns: u64, used: u64) -> Event {
        Event::Sample(Sample {
            t_ns,
            source: crate::trace::MemorySource::Nvml,
            used_bytes: used,
            total_bytes: None,
            process_bytes: None,
            others: None,
        })
    }

    fn call(begin_ns: u64, end_ns: u64) -> Event {
        Event::Call(Call {
            seq: 0,
            pid: 1,
            line: Some(1),
            api: "cudaFree".into(),
            driver: "cuMemFree_v2".into(),
            begin_ns,
            end_ns,
            ..Default::default()
        })
    }

    #[test]
    fn idle_samples_thin_out_and_those_near_calls_stay() {
        let ms = 1_000_000;
        let mut events = vec![call(500 * ms, 501 * ms)];
        for t in 0..1000 {
            events.push(sample(t * ms, 100));
        }
        let kept = decimate(&events);
        let times: Vec<u64> = kept
            .iter()
            .filter_map(|e| match e {
                Event::Sample(s) => Some(s.t_ns / ms),
                _ => None,
            })
            .collect();
        // Every sample from 495 to 506 ms stays; idle stretches keep one per 50 ms.
        for t in 495..=506 {
            assert!(times.contains(&t), "{t} ms dropped");
        }
        assert!(times.len() < 60, "{} samples kept", times.len());
        assert!(matches!(kept[0], Event::Call(_)));
    }

    /// A sampler at 100 Hz reads 10 ms apart: the readings around a call are
    /// further from it than `NEAR_NS`, and still stay, so a replay measures
    /// what the call took between the readings the live run used.
    #[test]
    fn the_readings_on_each_side_of_a_call_stay_however_far() {
        let ms = 1_000_000;
        let mut events = Vec::new();
        for t in 0..100u64 {
            events.push(sample(t * 10 * ms, 100 + t));
        }
        events.push(call(506 * ms, 507 * ms));
        let kept: Vec<u64> = decimate(&events)
            .iter()
            .filter_map(|e| match e {
                Event::Sample(s) => Some(s.t_ns / ms),
                _ => None,
            })
            .collect();
        assert!(kept.contains(&500) && kept.contains(&510), "{kept:?}");
        // The idle ones still thin out.
        assert!(!kept.contains(&520) && !kept.contains(&490), "{kept:?}");
    }

    #[test]
    fn a_jump_in_memory_is_never_dropped() {
        let ms = 1_000_000;
        let events = vec![sample(0, 0), sample(ms, 0), sample(2 * ms, 256 << 20)];
        let kept = decimate(&events);
        assert_eq!(kept.len(), 2);
    }

    /// The stream keeps what the whole recording keeps, in the same order,
    /// while holding back only a bounded number of events.
    #[test]
    fn the_stream_thins_as_the_whole_recording_does() {
        let ms = 1_000_000;
        let mut events = Vec::new();
        for t in 0..20_000u64 {
            events.push(sample(t * ms / 4, 100 + (t / 3000) * (2 << 20)));
            if t % 997 == 0 {
                // A call arrives late, after samples taken during it.
                events.push(call(t * ms / 4 - t.min(8) * ms / 4, t * ms / 4));
            }
        }
        let whole: Vec<Event> = decimate(&events).into_iter().cloned().collect();
        let mut thinner = Thinner::default();
        let mut streamed = Vec::new();
        let mut most_held = 0;
        for e in events {
            thinner
                .push(e, |e| {
                    streamed.push(e.clone());
                    Ok::<(), ()>(())
                })
                .unwrap();
            most_held = most_held.max(thinner.held.len());
        }
        thinner
            .finish(|e| {
                streamed.push(e.clone());
                Ok::<(), ()>(())
            })
            .unwrap();
        assert_eq!(streamed, whole);
        assert!(most_held <= HOLD_EVENTS + 1, "{most_held}");
        assert!(thinner.policy.edges.len() < 1000);
    }
}
