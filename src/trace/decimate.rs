//! Thinning a recording's telemetry: the sampler reads memory at up to 1 kHz, which
//! makes a recording mostly idle samples. Kept: every sample within `NEAR_NS` of a
//! call's begin or end or a device span's edge (the curve around a call is the
//! lesson), every sample whose value moved by more than `STEP_BYTES` from the last
//! kept one, and one sample per `IDLE_NS` otherwise. Every other event is kept.

use super::Event;

/// Samples this close to a call or span edge are always kept.
pub const NEAR_NS: u64 = 5_000_000;
/// An idle stretch keeps one sample per this interval.
pub const IDLE_NS: u64 = 50_000_000;
/// A change bigger than this is never dropped.
pub const STEP_BYTES: u64 = crate::units::MIB;

pub fn decimate(events: &[Event]) -> Vec<&Event> {
    let mut edges: Vec<u64> = Vec::new();
    for e in events {
        match e {
            Event::Call(c) => edges.extend([c.begin_ns, c.end_ns]),
            Event::DeviceSpan(s) => edges.extend([s.begin_ns, s.end_ns]),
            _ => {}
        }
    }
    edges.sort_unstable();
    let near = |t: u64| {
        let i = edges.partition_point(|&x| x < t);
        let after = edges.get(i).is_some_and(|&x| x - t <= NEAR_NS);
        let before = i > 0 && t - edges[i - 1] <= NEAR_NS;
        after || before
    };
    let mut last: Option<(u64, u64)> = None;
    events
        .iter()
        .filter(|e| {
            let Event::Sample(s) = e else { return true };
            let keep = match last {
                None => true,
                Some((t, v)) => {
                    near(s.t_ns)
                        || s.used_bytes.abs_diff(v) > STEP_BYTES
                        || s.t_ns.saturating_sub(t) >= IDLE_NS
                }
            };
            if keep {
                last = Some((s.t_ns, s.used_bytes));
            }
            keep
        })
        .collect()
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

    #[test]
    fn a_jump_in_memory_is_never_dropped() {
        let ms = 1_000_000;
        let events = vec![sample(0, 0), sample(ms, 0), sample(2 * ms, 256 << 20)];
        let kept = decimate(&events);
        assert_eq!(kept.len(), 2);
    }
}
