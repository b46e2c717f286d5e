//! The CUDA part of a report: after each line, who held device memory — the
//! default pool (in use by the program, or cached), the lab's own pool when it
//! has one, the device's graph memory once a graph was made, and the device as
//! cuMemGetInfo saw it. Read from the `cuda` field the worker puts on each call event.

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
    /// The lab's own pool (`cudaMemPoolCreate`): reserved and used, MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_pool_mib: Option<(f64, f64)>,
    /// The device's graph memory (after the run made a graph): reserved and used, MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph_mem_mib: Option<(f64, f64)>,
}

/// One row per script line, from the line's last execution; empty for OpenCL
/// runs, and for a lab on more than one device (the figures are of whichever
/// device was current, one pool of several).
pub fn rows(run: &Run) -> Vec<PoolRow> {
    let every_gpu = run
        .meta
        .as_ref()
        .and_then(|m| m.lab.as_ref())
        .is_some_and(|l| l.every_gpu);
    if every_gpu {
        return Vec::new();
    }
    run.folds
        .pools
        .iter()
        .map(|(line, m)| PoolRow {
            line: *line,
            pool_reserved_mib: m.pool_reserved as f64 / MIB,
            pool_used_mib: m.pool_used as f64 / MIB,
            pool_cached_mib: m.pool_reserved.saturating_sub(m.pool_used) as f64 / MIB,
            device_used_mib: m.total.saturating_sub(m.free) as f64 / MIB,
            custom_pool_mib: m
                .custom_pool
                .map(|p| (p.reserved as f64 / MIB, p.used as f64 / MIB)),
            graph_mem_mib: m
                .graph_mem
                .map(|g| (g.reserved as f64 / MIB, g.used as f64 / MIB)),
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
    // The lab's own pool gets columns only in runs that made one.
    let custom = rows.iter().any(|r| r.custom_pool_mib.is_some());
    // So does graph memory, in runs that made a graph.
    let graphs = rows.iter().any(|r| r.graph_mem_mib.is_some());
    let _ = write!(
        o,
        "{:>5}  {:>13}  {:>10}  {:>12}  {:>12}",
        "line", "pool reserved", "pool used", "pool cached", "device used"
    );
    let _ = writeln!(
        o,
        "{}{}",
        if custom {
            "  own pool reserved / used"
        } else {
            ""
        },
        if graphs {
            "  graph mem reserved / used"
        } else {
            ""
        }
    );
    for r in rows {
        let _ = write!(
            o,
            "{:>5}  {:>13.1}  {:>10.1}  {:>12.1}  {:>12.1}",
            r.line, r.pool_reserved_mib, r.pool_used_mib, r.pool_cached_mib, r.device_used_mib
        );
        let own = match r.custom_pool_mib {
            Some((reserved, used)) => format!("  {reserved:>17.1} / {used:.1}"),
            None if custom => format!("  {:>17}", "-"),
            None => String::new(),
        };
        let graph = match r.graph_mem_mib {
            Some((reserved, used)) => format!("  {reserved:>18.1} / {used:.1}"),
            None if graphs => format!("  {:>18}", "-"),
            None => String::new(),
        };
        let _ = writeln!(o, "{own}{graph}");
    }
}

#[cfg(test)]
mod tests {
    use super::{PoolRow, text};

    fn row(line: u32, graph_mem_mib: Option<(f64, f64)>) -> PoolRow {
        PoolRow {
            line,
            pool_reserved_mib: 0.0,
            pool_used_mib: 0.0,
            pool_cached_mib: 0.0,
            device_used_mib: 1000.0,
            custom_pool_mib: None,
            graph_mem_mib,
        }
    }

    #[test]
    fn graph_memory_gets_columns_only_in_runs_that_made_a_graph() {
        let mut with = String::new();
        text(&[row(1, None), row(2, Some((256.0, 0.0)))], &mut with);
        assert!(with.contains("graph mem reserved / used"), "{with}");
        assert!(with.contains("256.0 / 0.0"), "{with}");
        let mut without = String::new();
        text(&[row(1, None)], &mut without);
        assert!(!without.contains("graph mem"), "{without}");
    }
}
