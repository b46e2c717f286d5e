//! What a variant asks of the device and the host, read from its script before
//! it runs: how many calls it makes and how much time its kernels and sleeps
//! ask for. The run's time limit and the dashboard's "stuck" are made from it;
//! nothing here judges a claim.

use std::time::Duration;

use crate::model::{Arg, Params, Stmt, StmtKind, Variant};

/// Every run may take this long before its calls count: a driver's first
/// context (half a second on the H100), NVRTC, and the spin kernel's
/// calibration all come before the first line.
const START_ALLOWANCE: Duration = Duration::from_secs(30);
/// What one call may take beyond the time it asks for (a context, a program
/// build; NVIDIA's clBuildProgram took up to 0.2 s on the H200).
const PER_CALL: Duration = Duration::from_millis(100);
/// How many times the time a script asks for a run may take: more than
/// [`STUCK_FACTOR`], so a run is shown stuck before its limit ends it.
const ASKED_FACTOR: f64 = 6.0;
/// A call is stuck after this many times what the whole script asks for...
const STUCK_FACTOR: f64 = 5.0;
/// ...and never sooner than this.
const STUCK_AT_LEAST: Duration = Duration::from_secs(5);

/// A variant's script, counted with its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// Calls and directives the script makes, every iteration counted.
    pub calls: u64,
    /// The time its durations ask for (kernel times, sleeps), every iteration
    /// counted, in ms.
    pub asked_ms: f64,
}

impl Variant {
    /// The calls and the time this variant asks for with `params`.
    pub fn plan(&self, params: &Params) -> Plan {
        let mut plan = Plan {
            calls: 0,
            asked_ms: 0.0,
        };
        // Depth-first without recursion, each level with how many times it runs.
        let mut stack: Vec<(std::slice::Iter<'_, Stmt>, f64)> = vec![(self.script.iter(), 1.0)];
        while let Some((top, times)) = stack.last_mut() {
            let times = *times;
            let Some(s) = top.next() else {
                stack.pop();
                continue;
            };
            match &s.kind {
                StmtKind::Repeat { count, body } => {
                    let n = count.resolve(params);
                    let n = if n.is_finite() && n > 0.0 {
                        n.round()
                    } else {
                        0.0
                    };
                    stack.push((body.iter(), times * n));
                }
                StmtKind::Sleep { duration } => {
                    plan.calls += times as u64;
                    plan.asked_ms += times * finite(duration.resolve(params));
                }
                StmtKind::Call { args, .. } => {
                    plan.calls += times as u64;
                    plan.asked_ms += times * asked_ms(args, params);
                }
                StmtKind::Mark { .. } | StmtKind::Forget { .. } | StmtKind::Verify { .. } => {}
            }
        }
        plan
    }
}

impl Variant {
    /// The time each line's call asks the device for (a timed kernel's
    /// length), in ms, by script line: what a device span of that line is
    /// measured against.
    pub fn asked_ms_by_line(&self, params: &Params) -> std::collections::BTreeMap<u32, f64> {
        let mut out = std::collections::BTreeMap::new();
        let mut stack: Vec<std::slice::Iter<'_, Stmt>> = vec![self.script.iter()];
        while let Some(top) = stack.last_mut() {
            let Some(s) = top.next() else {
                stack.pop();
                continue;
            };
            match &s.kind {
                StmtKind::Repeat { body, .. } => stack.push(body.iter()),
                StmtKind::Call { args, .. } => {
                    let asked = asked_ms(args, params);
                    if asked > 0.0 {
                        out.insert(s.line, asked);
                    }
                }
                StmtKind::Sleep { .. }
                | StmtKind::Mark { .. }
                | StmtKind::Forget { .. }
                | StmtKind::Verify { .. } => {}
            }
        }
        out
    }
}

impl Plan {
    /// The default time limit of a run: generous for any driver that works
    /// (30 s, plus 100 ms a call, plus six times what the script asks for).
    pub fn time_limit(&self) -> Duration {
        let asked = Duration::from_secs_f64(self.asked_ms * ASKED_FACTOR / 1e3);
        START_ALLOWANCE
            .saturating_add(PER_CALL.saturating_mul(u32::try_from(self.calls).unwrap_or(u32::MAX)))
            .saturating_add(asked)
    }

    /// How long one call may be in flight before it is shown as stuck: five
    /// times what the whole script asks for, at least 5 s. A call can wait for
    /// everything enqueued before it (a clFinish), never for more.
    pub fn stuck_after(&self) -> Duration {
        STUCK_AT_LEAST.max(Duration::from_secs_f64(self.asked_ms * STUCK_FACTOR / 1e3))
    }
}

/// The time a call's arguments ask for (a timed kernel's length), in ms.
fn asked_ms(args: &[Arg], params: &Params) -> f64 {
    args.iter()
        .filter_map(|a| match a {
            Arg::Quantity(q) if q.unit.is_time() => Some(finite(q.resolve(params))),
            _ => None,
        })
        .sum()
}

fn finite(ms: f64) -> f64 {
    if ms.is_finite() && ms > 0.0 { ms } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LabSet;

    fn variant_plan(id: &str, variant: &str, overrides: &[&str]) -> Plan {
        let set = LabSet::load_with(None, &[]);
        let lab = set.get(id).unwrap();
        let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        let params = crate::catalog::resolve_params(lab, &overrides).unwrap();
        lab.find_variant(variant).unwrap().plan(&params)
    }

    #[test]
    fn a_loop_counts_its_body_once_per_iteration() {
        // 14 calls an iteration, the sleep after the loop; 5 ms a kernel.
        let p = variant_plan("cl-forgotten-events", "released", &["iterations=8"]);
        assert_eq!(p.calls, 8 * 14 + 1);
        assert_eq!(p.asked_ms, 8.0 * 5.0 + 50.0);
        let p = variant_plan("cl-forgotten-events", "released", &["iterations=16"]);
        assert_eq!(p.calls, 16 * 14 + 1);
    }

    #[test]
    fn the_limit_grows_with_what_the_script_asks_for() {
        let short = variant_plan("cl-finish", "finish", &["kernel_ms=10"]);
        let long = variant_plan("cl-finish", "finish", &["kernel_ms=1000"]);
        assert!(long.asked_ms > short.asked_ms);
        assert!(long.time_limit() > short.time_limit());
        assert!(short.time_limit() >= START_ALLOWANCE);
        assert_eq!(short.stuck_after(), STUCK_AT_LEAST);
        // Shown stuck before its limit ends it.
        assert!(long.stuck_after() < long.time_limit());
    }

    #[test]
    fn every_shipped_variant_has_a_finite_limit_of_minutes_at_most() {
        let set = LabSet::load_with(None, &[]);
        for lab in set.labs() {
            let params = crate::catalog::resolve_params(lab, &[]).unwrap();
            for v in &lab.variants {
                let limit = v.plan(&params).time_limit();
                assert!(
                    limit >= START_ALLOWANCE && limit < Duration::from_secs(600),
                    "{} [{}]: {limit:?}",
                    lab.id,
                    v.name
                );
            }
        }
    }
}
