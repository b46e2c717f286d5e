//! Metrics that CUDA labs need: how much two streams' device work overlapped, how
//! often a line failed, and what the default memory pool held after a line.

use crate::run::Run;

use crate::units::MIB_F64 as MIB;

/// `overlap(tag)`: of the time the device was busy with work enqueued inside the
/// tagged block (or by the tagged lines), the fraction during which work of two or
/// more streams ran at once. 0 = fully serialized, 1 = always side by side.
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
        .calls
        .iter()
        .filter(|c| c.begin_ns >= lo && c.end_ns <= hi)
        .map(|c| c.seq)
        .collect();
    let spans: Vec<(u64, u64, u64)> = run
        .spans
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
    use super::{Run, custom_pool_mib, graph_mem_mib, overlap_of};

    fn recorded(name: &str) -> Run {
        let path = format!(
            "{}/assets/recordings/nvidia-h100/{name}.jsonl",
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
