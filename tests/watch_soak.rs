//! A soak of `gpulab watch` (issue #27): many watched runs of mixed programs
//! (crashing, forking, threaded, tight loops, descriptor reusing, killed by a
//! default signal), each checked for harm: the program's exit status is its
//! own, no file of the program was touched, nothing is invented (what is
//! reported alive at exit is what the program says it leaked), every record
//! arrived, no process of the program is left, and gpulab's peak RSS stays
//! bounded. `GPULAB_WATCH_SOAK_RUNS` sets the number of runs (default: two of
//! each program); docs/reliability.md has the long run's figures.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::watch::{Resident, program};
use common::{device_lock, gpulab, stderr};
use serde_json::Value;

/// gpulab's own resident memory (anonymous pages: not the files it maps to
/// name frames) may not pass this in any run.
const RSS_LIMIT_KIB: u64 = 100 * 1024;

/// One program of the mix: its arguments (`{dir}` is the run's folder), the
/// exit status a bare run has, and how many objects it leaks on purpose.
struct Mode {
    args: &'static [&'static str],
    status: i32,
    leaked: u64,
}

const MIX: &[Mode] = &[
    Mode {
        args: &["fds", "{dir}"],
        status: 0,
        leaked: 0,
    },
    Mode {
        args: &["pairs", "20000"],
        status: 0,
        leaked: 0,
    },
    Mode {
        args: &["segv"],
        status: 139,
        leaked: 0,
    },
    // A context, a queue and a buffer, left when it crashes.
    Mode {
        args: &["segv-leak"],
        status: 139,
        leaked: 3,
    },
    Mode {
        args: &["forks", "5"],
        status: 0,
        leaked: 0,
    },
    Mode {
        args: &["term"],
        status: 143,
        leaked: 0,
    },
    Mode {
        args: &["threads", "4", "20"],
        status: 0,
        leaked: 0,
    },
];

fn runs_wanted() -> usize {
    std::env::var("GPULAB_WATCH_SOAK_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2 * MIX.len())
}

/// Processes still running the program (by its executable's path).
fn left_behind(exe: &Path) -> Vec<u32> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe)
                && common::procs::alive(*pid)
        })
        .collect()
}

#[test]
fn many_watched_runs_of_mixed_programs_do_no_harm_and_invent_nothing() {
    let test = "many_watched_runs_of_mixed_programs_do_no_harm_and_invent_nothing";
    let Some((dir, exe)) = program(test, "harms") else {
        return;
    };
    let _device = device_lock();
    let mut peak = Resident::default();
    let runs = runs_wanted();
    for i in 0..runs {
        let mode = &MIX[i % MIX.len()];
        let run_dir = dir.path().join(format!("run-{i}"));
        std::fs::create_dir(&run_dir).expect("run folder");
        let canary = run_dir.join("canary.txt");
        std::fs::write(&canary, "the program's own file\n").expect("canary");
        let report_file = run_dir.join("report.json");
        let args: Vec<String> = mode
            .args
            .iter()
            .map(|a| a.replace("{dir}", &run_dir.to_string_lossy()))
            .collect();
        let mut child = gpulab()
            .args(["watch", "--json", "-o"])
            .arg(&report_file)
            .arg("--")
            .arg(&exe)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gpulab starts");
        let pid = child.id();
        let mut run_peak = Resident::default();
        let status = loop {
            run_peak.sample(pid);
            match child.try_wait().expect("wait") {
                Some(s) => break s,
                None => std::thread::sleep(Duration::from_millis(5)),
            }
        };
        let err = child
            .wait_with_output()
            .map(|o| stderr(&o))
            .unwrap_or_default();
        let what = format!("run {i}: harms {}", args.join(" "));
        assert_eq!(status.code(), Some(mode.status), "{what}: {err}");
        let text = std::fs::read_to_string(&report_file).unwrap_or_default();
        let report: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{what}: no report ({e}): {err}"));
        let alive: u64 = report["kinds"].as_array().map_or(0, |k| {
            k.iter().filter_map(|k| k["alive_at_exit"].as_u64()).sum()
        });
        assert_eq!(alive, mode.leaked, "{what}: {report:#}");
        let processes = report["processes"].as_array().cloned().unwrap_or_default();
        assert!(!processes.is_empty(), "{what}: {report:#}");
        for p in &processes {
            assert_eq!(p["records"], p["received"], "{what}: {p}");
        }
        assert_eq!(
            std::fs::read_to_string(&canary).unwrap_or_default(),
            "the program's own file\n",
            "{what}"
        );
        let left = left_behind(&exe);
        assert!(left.is_empty(), "{what}: left running: {left:?}");
        assert!(
            run_peak.own_kib < RSS_LIMIT_KIB,
            "{what}: gpulab peaked at {run_peak}"
        );
        peak.own_kib = peak.own_kib.max(run_peak.own_kib);
        peak.hwm_kib = peak.hwm_kib.max(run_peak.hwm_kib);
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    eprintln!("{runs} watched runs, gpulab's peak: {peak}");
}
