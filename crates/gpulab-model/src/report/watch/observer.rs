//! What observing cost the program, as its agents timed themselves: the
//! agent's own time inside the calls it timed (one in 16 of each thread),
//! scaled to the calls it saw, beside the program's time inside those calls,
//! and whether every record arrived. Every figure is the run's own.

use serde::Serialize;

use crate::run::Run;
use crate::trace::Observed;

use super::ProcessReport;

/// What observing cost the program.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ObserverCost {
    /// Calls the agents recorded, and the kernel launches among them.
    pub calls: u64,
    pub launches: u64,
    /// Calls the agents timed: one in `every` of each thread's.
    pub launches_timed: u64,
    pub calls_timed: u64,
    pub every: u32,
    /// The agent's mean time inside a timed launch and inside another timed
    /// call, ns; absent when none was timed. For a CUDA call, the time in
    /// CUPTI's two callbacks (not what CUPTI spends calling them); for an
    /// OpenCL call, the hook's work after the driver returned.
    pub launch_ns: Option<f64>,
    pub call_ns: Option<f64>,
    /// Those means times the calls recorded: the agent's time inside the
    /// program's calls, ms (estimated from the timed ones).
    pub agent_ms: f64,
    /// The program's time inside the calls recorded, from each call's entry
    /// to the end of its record (the agent's time is part of it), ms.
    pub api_ms: f64,
    /// `agent_ms` over what the calls took without it (`api_ms - agent_ms`):
    /// what observing added to the program's time inside its API calls.
    pub added: Option<f64>,
    /// Records that had no room and were dropped, never arrived (held by a
    /// process when it ended), or were cut by its end, over every process.
    pub dropped: u64,
    pub lost: u64,
    pub cut: u64,
    /// The agents' own reads of the device inside the program's calls (their
    /// time is part of `agent_ms` where a timed call made one): calls read
    /// on each side, readings of the stream-ordered pool, reads said apart.
    pub calls_read_around: u64,
    pub pool_reads: u64,
    pub device_reads: u64,
    /// gpulab's own readings of the device while the program ran (NVML, or a
    /// CPU device's resident memory), taken from its process, not the
    /// program's: what they cost the program is not in `agent_ms`.
    pub readings: u64,
    /// Launches the agents did not watch: once a process's launches repeated
    /// functions its agent had seen, until its next look or code load. The
    /// time, over every process, ms (to the run's end, or to the latest turn
    /// while it runs), the stretches, and whether one is open now. Launches
    /// in them are neither recorded nor counted above.
    pub launches_unwatched_ms: f64,
    pub unwatched_stretches: u32,
    pub launches_unwatched_now: bool,
    /// The plain verdict, as the text says it.
    pub verdict: String,
    /// Whether the agents watched CUDA and OpenCL: what the timing holds.
    #[serde(skip)]
    families: (bool, bool),
}

/// The calls whose agent time counts as a launch's (the agent's hooks of
/// that role).
fn is_launch(api: &str) -> bool {
    api.starts_with("cuLaunch")
}

impl ObserverCost {
    /// None when no process said what it cost (a stream written before
    /// gpulab measured it, or nothing was timed).
    pub fn of(run: &Run, processes: &[ProcessReport]) -> Option<ObserverCost> {
        let all = processes
            .iter()
            .filter_map(|p| p.observed.as_ref())
            .fold(None, |sum: Option<Observed>, o| {
                Some(sum.unwrap_or_default().and(o))
            })?;
        let Observed {
            launches: launches_timed,
            launch_ns,
            calls: calls_timed,
            call_ns,
            every,
        } = all;
        let folds = &run.folds().apis;
        let launches: u64 = folds
            .iter()
            .filter(|a| is_launch(&a.api))
            .map(|a| u64::from(a.calls))
            .sum();
        let calls: u64 = folds.iter().map(|a| u64::from(a.calls)).sum();
        let api_ns: u64 = folds.iter().map(|a| a.host_ns).fold(0, u64::saturating_add);
        let mean = |ns: u64, n: u64| (n > 0).then(|| ns as f64 / n as f64);
        let (launch_mean, call_mean) =
            (mean(launch_ns, launches_timed), mean(call_ns, calls_timed));
        let agent_ns = launch_mean.unwrap_or(0.0) * launches as f64
            + call_mean.unwrap_or(0.0) * calls.saturating_sub(launches) as f64;
        let api_ms = api_ns as f64 / 1e6;
        let agent_ms = agent_ns / 1e6;
        let without = api_ms - agent_ms;
        let added = (without > 0.0).then(|| agent_ms / without);
        let of = |f: fn(&ProcessReport) -> Option<u64>| processes.iter().filter_map(f).sum::<u64>();
        let (dropped, lost, cut) = (of(|p| p.dropped), of(|p| p.lost), of(|p| p.cut));
        let end_ns = run.end().map(|e| e.t_ns);
        let unwatched: Vec<_> = processes
            .iter()
            .filter_map(|p| run.unwatched_launches(p.pid))
            .collect();
        let unwatched_ns: u64 = unwatched
            .iter()
            .map(|u| end_ns.map_or(u.ended_ns, |end| u.unwatched_ns(end)))
            .fold(0, u64::saturating_add);
        let mut cost = ObserverCost {
            calls,
            launches,
            launches_timed,
            calls_timed,
            every,
            launch_ns: launch_mean,
            call_ns: call_mean,
            agent_ms,
            api_ms,
            added,
            dropped,
            lost,
            cut,
            calls_read_around: run.folds().reads.around,
            pool_reads: run.folds().reads.pool,
            device_reads: run.folds().reads.device,
            readings: run.sample_stats().during,
            launches_unwatched_ms: unwatched_ns as f64 / 1e6,
            unwatched_stretches: unwatched.iter().map(|u| u.spells).sum(),
            launches_unwatched_now: end_ns.is_none() && unwatched.iter().any(|u| u.since.is_some()),
            verdict: String::new(),
            families: (
                processes.iter().any(|p| p.apis.iter().any(|a| a == "cuda")),
                processes
                    .iter()
                    .any(|p| p.apis.iter().any(|a| a == "opencl")),
            ),
        };
        cost.verdict = cost.said();
        Some(cost)
    }

    /// "observing added about 0.4% to ..., nothing dropped: ...".
    fn said(&self) -> String {
        let added = match self.added {
            Some(f) => format!(
                "observing added about {:.1}% to the program's time inside its {} API calls \
                 ({:.1} ms of {:.1} ms",
                f * 100.0,
                self.calls,
                self.agent_ms,
                self.api_ms
            ),
            None => format!(
                "the agent's time inside the program's {} API calls was about {:.1} ms ({:.1} ms \
                 recorded in them",
                self.calls, self.agent_ms, self.api_ms
            ),
        };
        let per = match (self.launch_ns, self.call_ns) {
            (Some(l), Some(c)) => format!("; {:.0} ns a launch, {:.0} ns another call", l, c),
            (Some(l), None) => format!("; {l:.0} ns a launch"),
            (None, Some(c)) => format!("; {c:.0} ns a call"),
            (None, None) => String::new(),
        };
        let what = match self.families {
            (true, true) => {
                "; CUPTI's own dispatch of its callbacks is not in it, nor an OpenCL hook's \
                 work before the driver's call"
            }
            (true, false) => "; CUPTI's own dispatch of its callbacks is not in it",
            (false, _) => "; an OpenCL hook's work after the driver returned",
        };
        let timed = format!(
            "{per}, timed on 1 call in {} of each thread{what})",
            self.every
        );
        let lost = self.dropped + self.lost + self.cut;
        let records = if lost == 0 && self.unwatched_stretches > 0 {
            "nothing dropped: every object, and every call the agents watched, was recorded"
                .to_string()
        } else if lost == 0 {
            "nothing dropped: every call and object above was recorded".to_string()
        } else {
            format!(
                "{} records dropped, {} lost at a process's end, {} cut: the counts above are \
                 short by them",
                self.dropped, self.lost, self.cut
            )
        };
        let launches = match (self.unwatched_stretches, self.launches_unwatched_now) {
            (0, _) => String::new(),
            (n, now) => format!(
                "; launches were watched while they brought functions new to the program: \
                 {} recorded, none counted in {} stretch{} of repeats ({:.1} ms{}), where the \
                 agent costs a launch nothing but CUPTI's subscription",
                self.launches,
                n,
                if n == 1 { "" } else { "es" },
                self.launches_unwatched_ms,
                if now { " so far, one still open" } else { "" }
            ),
        };
        let count = |n: u64, one: &str, many: &str| {
            (n > 0).then(|| format!("{n} {}", if n == 1 { one } else { many }))
        };
        let read: Vec<String> = [
            count(
                self.calls_read_around,
                "call on each side",
                "calls on each side",
            ),
            count(self.pool_reads, "pool reading", "pool readings"),
            count(self.device_reads, "read apart", "reads apart"),
        ]
        .into_iter()
        .flatten()
        .collect();
        let reads = if read.is_empty() {
            format!(
                "; the agents read nothing of the device themselves; gpulab read it {} from its \
                 own process",
                count(self.readings, "time", "times").unwrap_or_else(|| "0 times".into())
            )
        } else {
            format!(
                "; the agents read the device at {} (in the agent's time); gpulab read it {} \
                 from its own process",
                read.join(", "),
                count(self.readings, "time", "times").unwrap_or_else(|| "0 times".into())
            )
        };
        format!("{added}{timed}; {records}{launches}{reads}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{AgentEvent, AgentState, Call, CallStatus, Event, LaunchesWhy};

    fn call(seq: u64, api: &str, ns: u64) -> Event {
        Event::Call(Call {
            seq,
            pid: 7,
            begin_ns: seq * 10_000,
            end_ns: seq * 10_000 + ns,
            api: api.into(),
            status: CallStatus::Ok,
            ..Call::default()
        })
    }

    fn agent(state: AgentState) -> Event {
        agent_at(0, state)
    }

    fn agent_at(t_ns: u64, state: AgentState) -> Event {
        Event::Agent(AgentEvent {
            t_ns,
            pid: 7,
            parent_pid: 1,
            api: "cuda".into(),
            state,
        })
    }

    #[test]
    fn the_agents_time_is_scaled_to_the_calls_it_saw_and_set_beside_theirs() {
        let mut events = vec![agent(AgentState::Attached {
            exe: "loop".into(),
            destruction: Vec::new(),
            rank: None,
        })];
        // 32 launches of 5 µs and 16 other calls of 2 µs.
        for seq in 0..32 {
            events.push(call(seq, "cuLaunchKernel", 5_000));
        }
        for seq in 32..48 {
            let mut alloc = call(seq, "cuMemAlloc_v2", 2_000);
            // Half of them read on each side.
            if let Event::Call(c) = &mut alloc
                && seq % 2 == 0
            {
                c.memory_step = Some(1 << 20);
            }
            events.push(alloc);
        }
        events.push(agent(AgentState::Detached {
            records: 48,
            dropped: 0,
            coalesced: 0,
            signal: None,
            lost: 0,
            cut: 0,
            // Two launches timed at 1 µs each, one other call at 400 ns.
            observed: Some(Observed {
                launches: 2,
                launch_ns: 2_000,
                calls: 1,
                call_ns: 400,
                every: 16,
            }),
        }));
        let run = Run::from_events(&events);
        let report = super::super::WatchReport::from_run(&run);
        let cost = report.observer.clone().expect("a cost");
        assert_eq!((cost.calls, cost.launches), (48, 32));
        assert_eq!((cost.launch_ns, cost.call_ns), (Some(1000.0), Some(400.0)));
        // 32 x 1 µs + 16 x 0.4 µs = 38.4 µs of 192 µs.
        assert!((cost.agent_ms - 0.0384).abs() < 1e-9, "{cost:?}");
        assert!((cost.api_ms - 0.192).abs() < 1e-9);
        let added = cost.added.expect("added");
        assert!((added - 0.0384 / (0.192 - 0.0384)).abs() < 1e-9);
        assert!(
            cost.verdict.starts_with("observing added about 25.0%"),
            "{}",
            cost.verdict
        );
        assert!(
            cost.verdict
                .contains("nothing dropped: every call and object above was recorded")
        );
        assert_eq!((cost.calls_read_around, cost.pool_reads), (8, 0));
        assert!(
            cost.verdict.ends_with(
                "the agents read the device at 8 calls on each side (in the agent's time); \
                 gpulab read it 0 times from its own process"
            ),
            "{}",
            cost.verdict
        );
        assert!(report.text().contains(&cost.verdict));
    }

    #[test]
    fn launches_the_agent_did_not_watch_are_said_with_how_long() {
        let launches = |watching, t_ns, why| agent_at(t_ns, AgentState::Launches { watching, why });
        let mut events = vec![agent(AgentState::Attached {
            exe: "loop".into(),
            destruction: Vec::new(),
            rank: None,
        })];
        events.extend((0..4).map(|seq| call(seq, "cuLaunchKernel", 5_000)));
        // Unwatched 250 ms, then 100 ms more from the second turn-off until
        // the process ended (at 400 ms) without a look.
        events.push(launches(false, 50_000_000, LaunchesWhy::Repeated));
        events.push(launches(true, 300_000_000, LaunchesWhy::Look));
        events.push(launches(false, 300_500_000, LaunchesWhy::Repeated));
        let detached = |t_ns| {
            agent_at(
                t_ns,
                AgentState::Detached {
                    records: 8,
                    dropped: 0,
                    coalesced: 0,
                    signal: None,
                    lost: 0,
                    cut: 0,
                    observed: Some(Observed {
                        launches: 1,
                        launch_ns: 800,
                        calls: 0,
                        call_ns: 0,
                        every: 16,
                    }),
                },
            )
        };
        let mut running = Run::from_events(&events);
        let report = super::super::WatchReport::from_run(&running);
        assert!(running.launches_unwatched_now());
        assert!(report.observer.is_none(), "said once the process ended");
        events.push(detached(400_000_000));
        running = Run::from_events(&events);
        assert!(!running.launches_unwatched_now());
        let report = super::super::WatchReport::from_run(&running);
        assert!(report.processes[0].complete(), "the turns are records too");
        let cost = report.observer.expect("a cost");
        assert_eq!(cost.unwatched_stretches, 2);
        assert!(
            (cost.launches_unwatched_ms - 349.5).abs() < 1e-9,
            "{cost:?}"
        );
        assert!(
            cost.verdict
                .contains("4 recorded, none counted in 2 stretches of repeats (349.5 ms)"),
            "{}",
            cost.verdict
        );
        assert!(cost.verdict.contains("every call the agents watched"));
    }

    #[test]
    fn a_stream_from_before_the_agents_timed_themselves_says_nothing_of_it() {
        let events = vec![agent(AgentState::Detached {
            records: 0,
            dropped: 3,
            coalesced: 0,
            signal: None,
            lost: 0,
            cut: 0,
            observed: None,
        })];
        let report = super::super::WatchReport::from_run(&Run::from_events(&events));
        assert_eq!(report.observer, None);
    }
}
