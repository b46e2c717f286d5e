//! Metrics over the memory readings of a tagged block or line: its growth per
//! iteration and its peak. Reads the Run model only.

use std::collections::BTreeMap;

use crate::run::Run;

use super::{MIB, Why, never_ran, no_memory};

/// Device memory growth per iteration of the tagged repeat block from its
/// second iteration on: (memory after the last iteration − memory after the
/// first) / (iterations − 1). A one-time reserve made in the first iteration
/// (a pool, a context's own memory) is not growth per iteration.
pub(super) fn per_iter_mib(run: &Run, tag: &str) -> Result<f64, Why> {
    let block = run.tagged_block(tag).ok_or_else(|| never_ran(tag))?;
    // The block's own iteration index sits in each call's `iter` at its depth:
    // the number of blocks on earlier lines that enclose it.
    let mut outer: Vec<u32> = run
        .blocks
        .iter()
        .filter(|b| b.line < block.line && b.begin_ns <= block.begin_ns && b.end_ns >= block.end_ns)
        .map(|b| b.line)
        .collect();
    outer.sort_unstable();
    outer.dedup();
    let depth = outer.len();
    // Memory after each iteration: the last reading of its last call.
    let mut after: BTreeMap<u32, u64> = BTreeMap::new();
    for c in run
        .calls
        .iter()
        .filter(|c| c.begin_ns >= block.begin_ns && c.end_ns <= block.end_ns)
    {
        if let (Some(i), Some(m)) = (c.iter.get(depth), c.mem_after) {
            after.insert(*i, m);
        }
    }
    let (Some((first_i, first)), Some((last_i, last))) =
        (after.first_key_value(), after.last_key_value())
    else {
        return Err(no_memory());
    };
    if last_i == first_i {
        return Err(format!(
            "`{tag}` ran one iteration: growth per iteration needs two"
        ));
    }
    Ok((*last as f64 - *first as f64) / MIB / f64::from(last_i - first_i))
}

/// `peak_mib(tag)`: the highest reading, above the run's baseline, taken while
/// the tagged block or any execution of the tagged line ran (its begin and end
/// included: the worker's own readings sit exactly there). Readings are the
/// worker's and the parent sampler's alike (`Run::readings`).
pub(super) fn peak_mib(run: &Run, tag: &str) -> Result<f64, Why> {
    let base = run.baseline().ok_or_else(no_memory)?;
    let windows: Vec<(u64, u64)> = match run.tagged_block(tag) {
        Some(b) => vec![(b.begin_ns, b.end_ns)],
        None => run
            .tagged_calls(tag)
            .map(|c| (c.begin_ns, c.end_ns))
            .collect(),
    };
    if windows.is_empty() {
        return Err(never_ran(tag));
    }
    let peak = windows
        .iter()
        .flat_map(|&(from, to)| {
            let start = run.readings.partition_point(|(t, _)| *t < from);
            run.readings[start..]
                .iter()
                .take_while(move |(t, _)| *t <= to)
                .map(|(_, v)| *v)
        })
        .max()
        .ok_or_else(no_memory)?;
    Ok((peak as f64 - base as f64) / MIB)
}
