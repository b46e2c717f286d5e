//! The CUDA part of a report: after each line, who held device memory — the
//! default pool (in use by the program, or cached), and the device as cuMemGetInfo
//! saw it. Read from the `cuda` field the worker puts on each call event.

use std::fmt::Write;

use serde::Serialize;

use crate::run::Run;

use crate::units::MIB_F64 as MIB;

#[derive(Debug, Clone, Serialize)]
pub struct PoolRow {
    pub line: u32,
    /// The pool's reserved bytes (held from the device), MiB.
    pub pool_reserved_mib: f64,
    /// Handed out and not yet freed, as the pool counts it.
    pub pool_used_mib: f64,
    /// Freed into the pool and kept there: reserved − used.
    pub pool_cached_mib: f64,
    /// total − free as cuMemGetInfo reports it, all processes.
    pub device_used_mib: f64,
}

/// One row per script line, from the line's last execution; empty for OpenCL runs.
pub fn rows(run: &Run) -> Vec<PoolRow> {
    run.folds
        .pools
        .iter()
        .map(|(line, m)| PoolRow {
            line: *line,
            pool_reserved_mib: m.pool_reserved as f64 / MIB,
            pool_used_mib: m.pool_used as f64 / MIB,
            pool_cached_mib: m.pool_reserved.saturating_sub(m.pool_used) as f64 / MIB,
            device_used_mib: m.total.saturating_sub(m.free) as f64 / MIB,
        })
        .collect()
}

pub fn text(rows: &[PoolRow], o: &mut String) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\nwho holds device memory after each line (CUDA, MiB; pool cached = reserved − used)"
    );
    let _ = writeln!(
        o,
        "{:>5}  {:>13}  {:>10}  {:>12}  {:>12}",
        "line", "pool reserved", "pool used", "pool cached", "device used"
    );
    for r in rows {
        let _ = writeln!(
            o,
            "{:>5}  {:>13.1}  {:>10.1}  {:>12.1}  {:>12.1}",
            r.line, r.pool_reserved_mib, r.pool_used_mib, r.pool_cached_mib, r.device_used_mib
        );
    }
}
