//! Whether the host was busy enough during a run to bend its timings, judged from
//! the figures the parent measured (`HostLoad`), never from this machine now, so
//! it is tested on given numbers. It is stated next to the verdicts; where a
//! kernel also ran far from the time asked, the claims that read a time are
//! inconclusive for it (`crate::verdict::off_time`).

use serde::Serialize;

use crate::trace::HostLoad;

/// The host's load during a run, as the reports and the dashboard state it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Load {
    /// The highest 1-minute load average read during the run.
    pub load_avg: f64,
    /// CPUs the run could use.
    pub cores: u32,
    /// The share of the run's time some task waited for a CPU (the kernel's
    /// pressure stall information); absent where it keeps none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_waiting: Option<f64>,
    /// More tasks wanted a CPU than there were CPUs, over the last minute or
    /// during the run (see `loaded`).
    pub loaded: bool,
}

/// Some task waited for a CPU at least this share of the run: the run's own
/// CPUs were contended while it ran. An idle 2-core VM here read 25%; four
/// busy loops on its 2 cores, close to all of it.
pub const WAITING_LOADED: f64 = 0.5;

/// More runnable tasks than CPUs: something waited for a CPU, the lab's own
/// threads (and on a CPU device such as PoCL, its kernels) included. Under such
/// load PoCL once ran a calibrated 500 ms spin in 168 ms, and a timing claim
/// flipped. No CPU count (0) says nothing.
pub fn loaded(load_avg: f64, cores: u32) -> bool {
    cores > 0 && load_avg.is_finite() && load_avg > f64::from(cores)
}

impl Load {
    pub fn of(h: &HostLoad) -> Load {
        let waited = h.cpu_waiting.filter(|w| w.is_finite());
        Load {
            load_avg: h.load_avg,
            cores: h.cores,
            cpu_waiting: waited,
            loaded: loaded(h.load_avg, h.cores) || waited.is_some_and(|w| w >= WAITING_LOADED),
        }
    }

    /// "load average 5.2 on 2 cores during the run", the measured figures.
    pub fn figures(&self) -> String {
        let waited = self
            .cpu_waiting
            .map(|w| format!(", a task waiting for a CPU {:.0}% of the run", w * 100.0))
            .unwrap_or_default();
        format!(
            "load average {:.1} on {} core{} during the run{waited}",
            self.load_avg,
            self.cores,
            if self.cores == 1 { "" } else { "s" }
        )
    }

    /// What a report says beside the verdicts when the host was loaded; nothing
    /// when it was not.
    pub fn warning(&self) -> Option<String> {
        self.loaded.then(|| {
            format!(
                "the machine was loaded: {}; timings (host_ms, busy_ms, spin lengths) \
                 may differ from an idle machine's; a claim that reads a time is \
                 inconclusive where a kernel ran far from the time asked",
                self.figures()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loaded_means_more_runnable_tasks_than_cores() {
        assert!(loaded(5.2, 2));
        assert!(loaded(2.01, 2));
        assert!(!loaded(2.0, 2));
        assert!(!loaded(0.3, 2));
        assert!(!loaded(7.9, 8));
        assert!(loaded(1.5, 1));
    }

    #[test]
    fn a_run_whose_cpus_were_contended_is_loaded_whatever_the_minutes_average() {
        let h = |w: Option<f64>| HostLoad {
            t_ns: 0,
            load_avg: 1.1,
            cores: 2,
            cpu_waiting: w,
        };
        let busy = Load::of(&h(Some(0.93)));
        assert!(busy.loaded);
        assert!(
            busy.figures()
                .ends_with("a task waiting for a CPU 93% of the run"),
            "{}",
            busy.figures()
        );
        assert!(!Load::of(&h(Some(0.25))).loaded);
        assert!(!Load::of(&h(None)).loaded);
        assert!(!Load::of(&h(Some(f64::NAN))).loaded);
    }

    #[test]
    fn unknown_figures_never_say_loaded() {
        assert!(!loaded(5.0, 0));
        assert!(!loaded(f64::NAN, 2));
        assert!(!loaded(f64::INFINITY, 2));
    }

    #[test]
    fn a_loaded_run_says_its_figures() {
        let l = Load::of(&HostLoad {
            t_ns: 0,
            load_avg: 5.2,
            cores: 2,
            cpu_waiting: None,
        });
        assert!(l.loaded);
        let w = l.warning().unwrap();
        assert!(
            w.contains("load average 5.2 on 2 cores during the run"),
            "{w}"
        );
        let idle = Load::of(&HostLoad {
            t_ns: 0,
            load_avg: 0.4,
            cores: 1,
            cpu_waiting: None,
        });
        assert_eq!(idle.warning(), None);
        assert_eq!(idle.figures(), "load average 0.4 on 1 core during the run");
    }
}
