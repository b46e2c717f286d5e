//! Metrics that CUDA labs need: how much two streams' device work overlapped, how
//! often a line failed, and what the default memory pool held after a line.

use crate::run::Run;

use crate::units::MIB_F64 as MIB;

/// `overlap(tag)`: of the time the device was busy with work enqueued inside the
/// tagged block (or by the tagged lines), the fraction during which work of two or
/// more streams ran at once. 0 = fully serialized, 1 = always side by side.
/// Read from the run's window of calls and spans: a block that no longer lies
/// whole in it is not judged (an error, so the claim is inconclusive).
pub fn overlap(run: &Run, tag: &str) -> Result<f64, String> {
    let (lo, hi) = match run.tagged_block(tag) {
        Some(b) => (b.begin_ns, b.end_ns),
        None => {
            let t = run
                .tagged(tag)
                .ok_or_else(|| format!("`{tag}` never ran in this run"))?;
            (t.begin_min, t.end_max)
        }
    };
    let seqs: Vec<u64> = run
        .calls()
        .iter()
        .filter(|c| c.begin_ns >= lo && c.end_ns <= hi)
        .map(|c| c.seq)
        .collect();
    // The sweep needs every span of the block: judged on part of it, a block
    // that overlapped early and serialized late would read as serialized.
    if !run.window_holds(lo, &seqs) {
        return Err(format!(
            "`{tag}` is longer than the run keeps whole (its last {} calls and {} device \
             spans): overlap is judged on a whole block only",
            crate::run::CALLS_KEPT,
            crate::run::SPANS_KEPT
        ));
    }
    let spans: Vec<(u64, u64, u64)> = run
        .spans()
        .iter()
        .filter(|s| seqs.contains(&s.call_seq))
        .map(|s| (s.queue, s.begin_ns, s.end_ns))
        .collect();
    let queues: std::collections::BTreeSet<u64> = spans.iter().map(|s| s.0).collect();
    if queues.len() < 2 {
        return Err(format!(
            "device spans of `{tag}` came from {} stream(s); overlap needs two",
            queues.len()
        ));
    }
    Ok(overlap_of(&spans))
}

/// Sweep over span edges: time with ≥2 distinct queues busy ÷ time with ≥1 busy.
pub fn overlap_of(spans: &[(u64, u64, u64)]) -> f64 {
    let mut edges: Vec<(u64, bool, u64)> = Vec::new();
    for &(q, b, e) in spans {
        if e > b {
            edges.push((b, true, q));
            edges.push((e, false, q));
        }
    }
    // Ends before begins at the same instant: back-to-back work is not overlap.
    edges.sort_by_key(|&(t, start, _)| (t, start));
    let mut active: std::collections::BTreeMap<u64, u32> = Default::default();
    let (mut busy, mut both, mut last) = (0u64, 0u64, 0u64);
    for (t, start, q) in edges {
        let dt = t.saturating_sub(last);
        if !active.is_empty() {
            busy += dt;
        }
        if active.len() >= 2 {
            both += dt;
        }
        last = t;
        if start {
            *active.entry(q).or_default() += 1;
        } else if let Some(n) = active.get_mut(&q) {
            *n -= 1;
            if *n == 0 {
                active.remove(&q);
            }
        }
    }
    if busy == 0 {
        0.0
    } else {
        both as f64 / busy as f64
    }
}

/// `errors(tag)`: executions of the tagged line that returned an error.
pub fn errors(run: &Run, tag: &str) -> Result<f64, String> {
    let t = run
        .tagged(tag)
        .ok_or_else(|| format!("`{tag}` never ran in this run"))?;
    Ok(t.errors as f64)
}

/// `pool_reserved_mib(tag)` / `pool_used_mib(tag)`: the default pool right after
/// the tagged line's last execution.
pub fn pool_mib(run: &Run, tag: &str, reserved: bool) -> Result<f64, String> {
    let c = run
        .tagged(tag)
        .ok_or_else(|| format!("`{tag}` never ran in this run"))?
        .last;
    let m = c.cuda.ok_or_else(|| {
        format!("no CUDA pool reading after `{tag}` (not a CUDA run, or the context was lost)")
    })?;
    Ok(if reserved {
        m.pool_reserved
    } else {
        m.pool_used
    } as f64
        / MIB)
}

/// `custom_pool_reserved_mib(tag)` / `custom_pool_used_mib(tag)`: the lab's own
/// pool right after the tagged line's last execution.
pub fn custom_pool_mib(run: &Run, tag: &str, reserved: bool) -> Result<f64, String> {
    let c = run
        .tagged(tag)
        .ok_or_else(|| format!("`{tag}` never ran in this run"))?
        .last;
    let p = c.cuda.and_then(|m| m.custom_pool).ok_or_else(|| {
        format!("no reading of the lab's own pool after `{tag}` (none alive then, more than one, or not a CUDA run)")
    })?;
    Ok(if reserved { p.reserved } else { p.used } as f64 / MIB)
}

/// `graph_mem_reserved_mib(tag)` / `graph_mem_used_mib(tag)`: the device's
/// graph memory right after the tagged line's last execution.
pub fn graph_mem_mib(run: &Run, tag: &str, reserved: bool) -> Result<f64, String> {
    let c = run
        .tagged(tag)
        .ok_or_else(|| format!("`{tag}` never ran in this run"))?
        .last;
    let g = c.cuda.and_then(|m| m.graph_mem).ok_or_else(|| {
        format!(
            "no reading of graph memory after `{tag}` (no graph made before it, or not a CUDA run)"
        )
    })?;
    Ok(if reserved { g.reserved } else { g.used } as f64 / MIB)
}

#[cfg(test)]
mod tests {
    use super::{Run, custom_pool_mib, graph_mem_mib, overlap, overlap_of};
    use crate::trace::{Block, Call, DeviceSpan, Event};

    /// A `repeat` block tagged `loop` of `n` iterations from `t0` (ns), each
    /// launching a 10 µs kernel on two streams: side by side in the first
    /// `side_by_side` iterations, one after the other in the rest.
    fn pipeline(seq0: u64, t0: u64, n: u64, side_by_side: u64) -> Vec<Event> {
        let mut events = Vec::new();
        let mut seq = seq0;
        let it = 100_000;
        for i in 0..n {
            let t = t0 + i * it;
            for q in [1u64, 2] {
                let begin = t + q * 10;
                events.push(Event::Call(Call {
                    seq,
                    pid: 1,
                    line: Some(5),
                    iter: vec![i as u32],
                    api: "cudaLaunchKernel".into(),
                    driver: "cuLaunchKernel".into(),
                    begin_ns: begin,
                    end_ns: begin + 5,
                    ..Default::default()
                }));
                let start = if i < side_by_side {
                    t + 100
                } else {
                    t + 100 + (q - 1) * 20_000
                };
                events.push(Event::DeviceSpan(DeviceSpan {
                    queue: q,
                    queue_name: None,
                    name: "spin".into(),
                    call_seq: seq,
                    line: Some(5),
                    queued_ns: begin,
                    begin_ns: start,
                    end_ns: start + 10_000,
                }));
                seq += 1;
            }
        }
        events.push(Event::Block(Block {
            line: 4,
            tag: Some("loop".into()),
            iterations: n as u32,
            planned: n as u32,
            begin_ns: t0,
            end_ns: t0 + n * it,
            mem_before: None,
            mem_after: None,
        }));
        events
    }

    /// A block longer than the window: its early, overlapped half is gone from
    /// the window and only the serialized half is left. Judged on what is left,
    /// it would read 0; it is not judged, and says why.
    #[test]
    fn a_block_longer_than_the_window_is_not_judged_on_its_tail() {
        let n = crate::run::CALLS_KEPT as u64;
        let run = Run::from_events(&pipeline(0, 0, n, n / 2));
        let why = overlap(&run, "loop").unwrap_err();
        assert!(
            why.contains("overlap is judged on a whole block only"),
            "{why}"
        );
        // The same block kept whole is judged: half of it side by side.
        let all = Run::folding(Run::keeping_all(), &pipeline(0, 0, n, n / 2));
        let v = overlap(&all, "loop").unwrap();
        assert!(v > 0.3 && v < 0.4, "{v}");
    }

    /// A short block after a long run still lies whole in the window.
    #[test]
    fn a_short_block_at_the_end_of_a_long_run_is_judged() {
        let n = crate::run::CALLS_KEPT as u64;
        let mut events = pipeline(0, 0, n, n);
        let mut late = pipeline(2 * n, 10 * n * 100_000, 12, 12);
        // Its own tag, so the first block carrying it is this one.
        if let Some(Event::Block(b)) = late.last_mut() {
            b.tag = Some("late".into());
        }
        events.extend(late);
        let run = Run::from_events(&events);
        assert_eq!(overlap(&run, "late"), Ok(1.0));
        assert!(overlap(&run, "loop").is_err());
    }

    fn recorded(name: &str) -> Run {
        let path = format!(
            "{}/../../assets/recordings/nvidia-h100/{name}.jsonl",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(path).unwrap();
        Run::from_events(&crate::trace::read_events(text.as_bytes()).unwrap())
    }

    #[test]
    fn graph_memory_is_inconclusive_in_a_run_without_graphs() {
        let run = recorded("cuda-custom-pool--own-pool");
        let why = graph_mem_mib(&run, "settled", true).unwrap_err();
        assert!(why.contains("no reading of graph memory"), "{why}");
        assert!(graph_mem_mib(&run, "no-such-tag", false).is_err());
    }

    #[test]
    fn the_own_pool_is_read_only_while_the_lab_has_one() {
        let own = recorded("cuda-custom-pool--own-pool");
        assert!(custom_pool_mib(&own, "settled", true).is_ok());
        // Before cudaMemPoolCreate, and in a run that never made one: inconclusive.
        let before = custom_pool_mib(&own, "start", true).unwrap_err();
        assert!(
            before.contains("no reading of the lab's own pool"),
            "{before}"
        );
        let default = recorded("cuda-custom-pool--default-pool");
        assert!(custom_pool_mib(&default, "settled", false).is_err());
        assert!(custom_pool_mib(&default, "no-such-tag", true).is_err());
    }

    #[test]
    fn serialized_spans_do_not_overlap() {
        assert_eq!(overlap_of(&[(1, 0, 10), (2, 10, 20)]), 0.0);
    }

    #[test]
    fn side_by_side_spans_overlap_fully() {
        assert_eq!(overlap_of(&[(1, 0, 10), (2, 0, 10)]), 1.0);
    }

    #[test]
    fn half_overlap_counts_against_the_busy_time() {
        // busy 0..15, two streams 5..10: 5 / 15
        let v = overlap_of(&[(1, 0, 10), (2, 5, 15)]);
        assert!((v - 1.0 / 3.0).abs() < 1e-9, "{v}");
    }

    #[test]
    fn two_spans_on_one_stream_are_not_overlap() {
        assert_eq!(overlap_of(&[(1, 0, 10), (1, 5, 15)]), 0.0);
        assert_eq!(overlap_of(&[]), 0.0);
    }
}
