//! Metrics over the memory readings of a tagged block or line: its growth per
//! iteration and its peak. Reads the Run model only.

use crate::run::Run;

use super::{MIB, Why, never_ran, no_memory};

/// Device memory growth per iteration of the tagged repeat block from its
/// second iteration on: (memory after the last iteration − memory after the
/// first) / (iterations − 1). A one-time reserve made in the first iteration
/// (a pool, a context's own memory) is not growth per iteration.
pub(super) fn per_iter_mib(run: &Run, tag: &str) -> Result<f64, Why> {
    run.tagged_block(tag).ok_or_else(|| never_ran(tag))?;
    // Memory after each iteration is the last reading of its last call; the
    // Run folds the first and the last iteration's as the calls arrive, so a
    // block longer than the Run's window of calls is measured whole.
    let span = run.folds().iterations.by_tag.get(tag);
    let (Some((first_i, first)), Some((last_i, last))) =
        (span.and_then(|s| s.first), span.and_then(|s| s.last))
    else {
        return Err(no_memory());
    };
    if last_i == first_i {
        return Err(format!(
            "`{tag}` ran one iteration: growth per iteration needs two"
        ));
    }
    Ok((last as f64 - first as f64) / MIB / f64::from(last_i - first_i))
}

/// `peak_mib(tag)`: the highest reading, above the run's baseline, taken while
/// the tagged block or any execution of the tagged line ran (its begin and end
/// included: the worker's own readings sit exactly there). Readings are the
/// worker's and the parent sampler's alike (`Run::readings`).
pub(super) fn peak_mib(run: &Run, tag: &str) -> Result<f64, Why> {
    let base = run.baseline().ok_or_else(no_memory)?;
    let windows: Vec<(u64, u64)> = match run.tagged_block(tag) {
        Some(b) => vec![(b.begin_ns, b.end_ns)],
        None => {
            let ran = run.tagged(tag).map_or(0, |t| t.calls);
            let kept: Vec<(u64, u64)> = run
                .calls()
                .iter()
                .filter(|c| c.tag.as_deref() == Some(tag))
                .map(|c| (c.begin_ns, c.end_ns))
                .collect();
            // Every execution's own window, or no answer: the time between
            // executions is not the line's.
            if (kept.len() as u64) < ran {
                return Err(format!(
                    "`{tag}` ran {ran} times, more than the run keeps whole; tag the repeat block around it to measure its peak"
                ));
            }
            kept
        }
    };
    if windows.is_empty() {
        return Err(never_ran(tag));
    }
    let peak = windows
        .iter()
        .filter_map(|&(from, to)| {
            let start = run.readings().partition_point(|(t, _)| *t < from);
            let inside = run.readings()[start..]
                .iter()
                .take_while(move |(t, _)| *t <= to)
                .map(|(_, v)| *v)
                .max();
            // A window inside a stretch of equal readings (kept as its first and
            // last only) holds none: the level in force when it began is its peak.
            inside.or_else(|| start.checked_sub(1).map(|i| run.readings()[i].1))
        })
        .max()
        .ok_or_else(no_memory)?;
    Ok((peak as f64 - base as f64) / MIB)
}
