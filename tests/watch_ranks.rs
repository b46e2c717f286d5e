//! `gpulab watch` on a job of ranks (#33): a torchrun job of PyTorch ranks,
//! each on its own GPU over NCCL where the host has a GPU per rank, else
//! sharing GPU 0 over gloo. Checks each rank's place against what the rank
//! printed of itself (its pid, its GPU), NCCL's share per rank, and that the
//! rank that ran out of memory first is the one named; not what a driver
//! decides.
//!
//! The live tests need an NVIDIA GPU, PyTorch and libcupti: ignored unless
//! run with `GPULAB_REQUIRE_CUDA=1 cargo test --test watching watch_ranks:: -- --ignored`.
//! The shipped recordings of the same job on two H200s are read on every
//! machine, each figure of the report checked against the recording's own
//! events.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Output;

use common::watch::{count, watch_json_with};
use common::{gpulab, repo_file, stderr, stdout, temp_dir};
use serde_json::Value;

fn require_cuda() {
    assert!(
        gpulab::backend::cuda::tests_require_cuda(),
        "set GPULAB_REQUIRE_CUDA=1 to run this on a GPU machine"
    );
}

/// `python3 -m torch.distributed.run --nproc-per-node 2 nccl_ranks.py [oom]`
/// under `gpulab watch`, with `flags`.
fn torchrun(port: u16, oom: bool, flags: &[&str]) -> (Output, Value) {
    let script = repo_file("tests/watch/nccl_ranks.py");
    let port = format!("--master-port={port}");
    let mut args = vec![
        "python3",
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        &port,
        script.to_str().expect("a UTF-8 path"),
    ];
    if oom {
        args.push("oom");
    }
    watch_json_with(flags, &args)
}

/// What rank `rank` printed at `step`: `name=value` pairs.
fn said(out: &Output, rank: u64, step: &str) -> Vec<(String, u64)> {
    let text = stderr(out);
    let line = text
        .lines()
        .find(|l| {
            l.starts_with(&format!("nccl_ranks: rank={rank} "))
                && l.contains(&format!("step={step} "))
        })
        .unwrap_or_else(|| panic!("rank {rank} said no {step}:\n{text}"));
    common::watch::counts(line, "nccl_ranks:")
}

fn gpus_on_host(report: &Value) -> usize {
    report["gpus"].as_array().map_or(0, Vec::len)
}

#[test]
#[ignore = "needs an NVIDIA GPU, PyTorch and libcupti: run with GPULAB_REQUIRE_CUDA=1 -- --ignored"]
fn each_rank_of_a_torchrun_job_is_on_its_own_gpu_with_ncclss_share() {
    require_cuda();
    let (out, report) = torchrun(29611, false, &[]);
    assert_eq!(report["exit_code"], 0, "{}\n{report:#}", stderr(&out));
    let ranks = report["ranks"].as_array().expect("ranks");
    assert_eq!(ranks.len(), 2, "{report:#}");
    let own_gpus = gpus_on_host(&report) >= 2;
    for (i, r) in ranks.iter().enumerate() {
        let me = said(&out, i as u64, "reduced");
        assert_eq!(r["rank"]["rank"], i, "{r}");
        assert_eq!(r["rank"]["from"], "RANK", "{r}");
        assert_eq!(r["pid"], count(&me, "pid"), "{r}");
        // Its GPU, by NVML's index: with CUDA_VISIBLE_DEVICES unset, the
        // ordinal the rank printed.
        assert_eq!(r["gpus"], serde_json::json!([count(&me, "gpu")]), "{r}");
        let peak = &r["peak"];
        let device = peak["device_bytes"].as_u64().expect("NVML's bytes");
        // PyTorch's own figure is inside what NVML says the process holds.
        assert!(device >= count(&me, "reserved"), "{r}");
        if own_gpus {
            let nccl = peak["objects_by"]["nccl"].as_u64().unwrap_or(0);
            assert!(nccl > 0, "rank {i}: no NCCL share: {r}");
        }
    }
    if own_gpus {
        assert_ne!(ranks[0]["gpus"], ranks[1]["gpus"], "{report:#}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU, PyTorch and libcupti: run with GPULAB_REQUIRE_CUDA=1 -- --ignored"]
fn the_rank_that_ran_out_first_is_named_and_each_rank_has_a_dump() {
    require_cuda();
    let dir = temp_dir();
    let oom = dir.path().join("oom.json");
    let oom_arg = oom.to_str().expect("a UTF-8 path");
    let (out, report) = torchrun(29612, true, &["--oom", oom_arg]);
    assert_ne!(report["exit_code"], 0, "{report:#}");
    // The last rank printed that it ran out; the report names it first.
    let last = said(&out, 1, "out-of-memory");
    let dump: Value =
        serde_json::from_str(&std::fs::read_to_string(&oom).expect("the dump")).expect("JSON");
    assert_eq!(dump["first_to_run_out"]["rank"], 1, "{dump:#}");
    assert_eq!(
        dump["first_to_run_out"]["pid"],
        count(&last, "pid"),
        "{dump:#}"
    );
    let ranks = dump["ranks"].as_array().expect("a dump per rank");
    assert_eq!(ranks.len(), 2, "{dump:#}");
    let first = ranks
        .iter()
        .find(|r| r["rank"]["rank"] == 1)
        .expect("rank 1");
    assert_eq!(first["ran_out"]["first"], true, "{first}");
    let other = ranks
        .iter()
        .find(|r| r["rank"]["rank"] == 0)
        .expect("rank 0");
    assert!(other["ran_out"].is_null(), "{other}");
    let then = &other["at_first_ran_out"];
    assert!(then["device_bytes"].as_u64().unwrap_or(0) > 0, "{other}");
}

/// Per pid: the GPUs NVML listed it on, and its most bytes on all of them.
type Listed = BTreeMap<u64, (BTreeSet<u64>, u64)>;

/// What a recording's own events say of each process: the GPUs NVML listed
/// it on and its most bytes on one reading; and the pid of the first call
/// refused for want of memory.
fn what_the_events_say(path: &std::path::Path) -> (Listed, Option<u64>) {
    let text = std::fs::read_to_string(path).expect("the recording");
    let mut gpus_of = Listed::new();
    let mut on: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut first_refused = None;
    for line in text.lines() {
        let e: Value = serde_json::from_str(line).expect("a JSON line");
        let d = &e["data"];
        match e["type"].as_str() {
            Some("gpu_reading") => {
                let gpu = d["gpu"].as_u64().expect("gpu");
                // Gone from the list: nothing on this GPU any more.
                on.retain(|(_, g), _| *g != gpu);
                for p in d["processes"].as_array().into_iter().flatten() {
                    let pid = p["pid"].as_u64().expect("pid");
                    on.insert((pid, gpu), p["bytes"].as_u64().unwrap_or(0));
                    gpus_of.entry(pid).or_default().0.insert(gpu);
                }
                for (pid, entry) in &mut gpus_of {
                    let total: u64 = on
                        .iter()
                        .filter(|((p, _), _)| p == pid)
                        .map(|(_, b)| b)
                        .sum();
                    entry.1 = entry.1.max(total);
                }
            }
            Some("call")
                if first_refused.is_none() && d["status"]["name"] == "CUDA_ERROR_OUT_OF_MEMORY" =>
            {
                first_refused = d["pid"].as_u64();
            }
            _ => {}
        }
    }
    (gpus_of, first_refused)
}

fn report_json(path: &std::path::Path, oom: bool) -> Value {
    let out = gpulab()
        .args(["report", "--json"])
        .arg(path)
        .output()
        .expect("gpulab starts");
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    if oom {
        assert!(report["ran_out"].is_object(), "{report:#}");
    }
    report
}

/// The torchrun job recorded on two H200s, NCCL between them, rank 1 out of
/// memory: each rank on its own GPU with NCCL's share of its own, its peak
/// NVML's most for it, and rank 1 named the first to run out.
#[test]
fn the_two_h200_recording_gives_each_rank_its_gpu_its_nccl_share_and_names_the_first_oom() {
    let path = repo_file("assets/watch-recordings/nvidia-h200-x2/torchrun-oom.jsonl");
    let (events, first_refused) = what_the_events_say(&path);
    let report = report_json(&path, true);
    let ranks = report["ranks"].as_array().expect("ranks");
    assert_eq!(ranks.len(), 2, "{report:#}");
    let mut gpus_seen = BTreeSet::new();
    for r in ranks {
        let pid = r["pid"].as_u64().expect("pid");
        let (gpus, peak) = &events[&pid];
        let said: BTreeSet<u64> = r["gpus"]
            .as_array()
            .expect("gpus")
            .iter()
            .filter_map(Value::as_u64)
            .collect();
        assert_eq!(&said, gpus, "{r}");
        assert_eq!(r["peak"]["device_bytes"], *peak, "{r}");
        assert!(
            r["peak"]["objects_by"]["nccl"].as_u64().unwrap_or(0) > 0,
            "{r}"
        );
        gpus_seen.extend(said);
    }
    assert_eq!(
        gpus_seen.len(),
        2,
        "each rank on a GPU of its own: {report:#}"
    );
    // One GPU's reading is not set against objects on both.
    assert!(report["holders"].is_null(), "{report:#}");
    assert_eq!(
        report["ran_out"]["pid"],
        first_refused.expect("a refused call")
    );
    let first = ranks
        .iter()
        .find(|r| r["ran_out"]["first"] == true)
        .expect("the first");
    assert_eq!(first["pid"], report["ran_out"]["pid"]);
    assert_eq!(first["rank"]["rank"], 1, "{first}");
}

/// The same job with both ranks on one GPU over gloo: two processes of one
/// GPU, each with its own bytes, and the one-GPU holders table kept.
#[test]
fn ranks_sharing_one_gpu_each_have_their_own_bytes_in_the_recording() {
    let path = repo_file("assets/watch-recordings/nvidia-h200-x2/torchrun-gloo-one-gpu.jsonl");
    let (events, _) = what_the_events_say(&path);
    let report = report_json(&path, false);
    let ranks = report["ranks"].as_array().expect("ranks");
    assert_eq!(ranks.len(), 2, "{report:#}");
    for r in ranks {
        let pid = r["pid"].as_u64().expect("pid");
        assert_eq!(r["gpus"], serde_json::json!([0]), "{r}");
        assert_eq!(r["peak"]["device_bytes"], events[&pid].1, "{r}");
    }
    assert!(report["holders"].is_object(), "{report:#}");
}
