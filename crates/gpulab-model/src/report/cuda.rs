//! The CUDA part of a report: after each line, who held device memory — the
//! default pool (in use by the program, or cached), the lab's own pool when it
//! has one, the device's graph memory once a graph was made, and the device as
//! cuMemGetInfo saw it. Read from the `cuda` field the worker puts on each call event.

use std::fmt::Write;

use serde::Serialize;

use crate::run::Run;

use crate::units::mib;

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PoolRow {
    pub line: u32,
    /// The pool's reserved bytes (held from the device).
    pub pool_reserved_bytes: u64,
    /// Handed out and not yet freed, as the pool counts it.
    pub pool_used_bytes: u64,
    /// Freed into the pool and kept there: reserved − used.
    pub pool_cached_bytes: u64,
    /// total − free as cuMemGetInfo reports it, all processes.
    pub device_used_bytes: u64,
    /// The lab's own pool (`cudaMemPoolCreate`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_pool: Option<ReservedUsed>,
    /// The device's graph memory (after the run made a graph).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph_mem: Option<ReservedUsed>,
}

/// What a pool holds from the device, and how much of it is handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReservedUsed {
    pub reserved_bytes: u64,
    pub used_bytes: u64,
}

impl ReservedUsed {
    /// Both in MiB, for the text table.
    fn mib(self) -> (f64, f64) {
        (mib(self.reserved_bytes), mib(self.used_bytes))
    }
}

/// One row per script line, from the line's last execution; empty for OpenCL
/// runs, and for a lab on more than one device (the figures are of whichever
/// device was current, one pool of several).
pub fn rows(run: &Run) -> Vec<PoolRow> {
    let every_gpu = run
        .meta()
        .as_ref()
        .and_then(|m| m.lab.as_ref())
        .is_some_and(|l| l.every_gpu);
    if every_gpu {
        return Vec::new();
    }
    run.folds()
        .pools
        .iter()
        .map(|(line, m)| PoolRow {
            line: *line,
            pool_reserved_bytes: m.pool_reserved,
            pool_used_bytes: m.pool_used,
            pool_cached_bytes: m.pool_reserved.saturating_sub(m.pool_used),
            device_used_bytes: m.total.saturating_sub(m.free),
            custom_pool: m.custom_pool.map(|p| ReservedUsed {
                reserved_bytes: p.reserved,
                used_bytes: p.used,
            }),
            graph_mem: m.graph_mem.map(|g| ReservedUsed {
                reserved_bytes: g.reserved,
                used_bytes: g.used,
            }),
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
    let custom = rows.iter().any(|r| r.custom_pool.is_some());
    // So does graph memory, in runs that made a graph.
    let graphs = rows.iter().any(|r| r.graph_mem.is_some());
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
            r.line,
            mib(r.pool_reserved_bytes),
            mib(r.pool_used_bytes),
            mib(r.pool_cached_bytes),
            mib(r.device_used_bytes)
        );
        let own = match r.custom_pool.map(ReservedUsed::mib) {
            Some((reserved, used)) => format!("  {reserved:>17.1} / {used:.1}"),
            None if custom => format!("  {:>17}", "-"),
            None => String::new(),
        };
        let graph = match r.graph_mem.map(ReservedUsed::mib) {
            Some((reserved, used)) => format!("  {reserved:>18.1} / {used:.1}"),
            None if graphs => format!("  {:>18}", "-"),
            None => String::new(),
        };
        let _ = writeln!(o, "{own}{graph}");
    }
}

#[cfg(test)]
mod tests {
    use super::{PoolRow, ReservedUsed, text};
    use crate::units::MIB;

    fn row(line: u32, graph_mem: Option<ReservedUsed>) -> PoolRow {
        PoolRow {
            line,
            pool_reserved_bytes: 0,
            pool_used_bytes: 0,
            pool_cached_bytes: 0,
            device_used_bytes: 1000 * MIB,
            custom_pool: None,
            graph_mem,
        }
    }

    #[test]
    fn graph_memory_gets_columns_only_in_runs_that_made_a_graph() {
        let mut with = String::new();
        let graph = ReservedUsed {
            reserved_bytes: 256 * MIB,
            used_bytes: 0,
        };
        text(&[row(1, None), row(2, Some(graph))], &mut with);
        assert!(with.contains("graph mem reserved / used"), "{with}");
        assert!(with.contains("256.0 / 0.0"), "{with}");
        let mut without = String::new();
        text(&[row(1, None)], &mut without);
        assert!(!without.contains("graph mem"), "{without}");
    }
}
