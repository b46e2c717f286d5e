//! `gpulab watch`'s Python startup hook (#29): a Python program sees no
//! difference (its path, its threads, its own `sitecustomize`, its errors), and
//! what a framework says reaches the report through the agent. The frameworks
//! themselves run on the device (`tests/watch_cuda.rs`); here, on PoCL, a
//! pyopencl program loads the agent and a module of the test's own stands in
//! for a framework, so the hook's whole path is checked on every machine.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::watch::{assert_complete, tool_or_skip};
use common::{device_lock, gpulab, opencl_or_skip, stderr, stdout, temp_dir};

const PYTHON: &str = "/usr/bin/python3";

fn python_or_skip(test: &str) -> bool {
    tool_or_skip(test, Path::new(PYTHON).exists(), "/usr/bin/python3")
}

/// What a Python program can see of its own start: its path, its meta path's
/// finders other than the hook's, its threads, its modules' origins.
const LOOK: &str = r#"
import sys, threading
print("path", sys.path)
print("threads", threading.active_count())
print("argv", sys.argv)
print("theirs", getattr(sys.modules.get("sitecustomize"), "MARK", None))
"#;

/// An OpenCL device, /usr/bin/python3 and its pyopencl (the program that
/// loads the agent on every machine), or the test is skipped and says why.
fn pyopencl_or_skip(test: &str) -> bool {
    if !opencl_or_skip(test) || !python_or_skip(test) {
        return false;
    }
    let has = Command::new(PYTHON)
        .args(["-c", "import pyopencl"])
        .output()
        .is_ok_and(|o| o.status.success());
    tool_or_skip(test, has, "pyopencl for /usr/bin/python3")
}

fn bare(dir: &Path, args: &[&str]) -> Output {
    Command::new(PYTHON)
        .args(args)
        .env("PYTHONPATH", dir)
        .current_dir(dir)
        .output()
        .expect("python starts")
}

fn watched(dir: &Path, args: &[&str]) -> Output {
    watched_with(dir, &[], args)
}

/// [`watched`], with `gpulab watch`'s own `flags`.
fn watched_with(dir: &Path, flags: &[&str], args: &[&str]) -> Output {
    let report = dir.join("report.json");
    gpulab()
        .args(["watch", "--json", "-o"])
        .arg(&report)
        .args(flags)
        .arg("--")
        .arg(PYTHON)
        .args(args)
        .env("PYTHONPATH", dir)
        .current_dir(dir)
        .output()
        .expect("gpulab starts")
}

#[test]
fn a_python_program_sees_its_own_path_threads_and_sitecustomize_under_watch() {
    if !python_or_skip("a_python_program_sees_its_own_path_threads_and_sitecustomize_under_watch") {
        return;
    }
    let dir = temp_dir();
    std::fs::write(
        dir.path().join("sitecustomize.py"),
        "MARK = 'ran'\nprint('their sitecustomize ran')\n",
    )
    .expect("write");
    let args = ["-c", LOOK, "x y"];
    let (bare, watched) = (bare(dir.path(), &args), watched(dir.path(), &args));
    assert!(watched.status.success(), "{}", stderr(&watched));
    let theirs = stdout(&bare);
    assert!(theirs.contains("their sitecustomize ran"), "{theirs}");
    assert!(theirs.contains("theirs ran"), "{theirs}");
    assert_eq!(stdout(&watched), theirs, "the program saw a difference");
}

/// A Python program that starts Python children (exec'd, as `subprocess`
/// does) and forks: each sees what it would see without gpulab.
#[test]
fn python_children_see_what_they_would_without_gpulab() {
    if !python_or_skip("python_children_see_what_they_would_without_gpulab") {
        return;
    }
    let dir = temp_dir();
    std::fs::write(dir.path().join("look.py"), LOOK).expect("write");
    let parent = r#"
import os, subprocess, sys
sys.stdout.flush()
subprocess.run([sys.executable, "look.py", "child"], check=True)
pid = os.fork()
if pid == 0:
    print("forked child sees", sys.path)
    sys.stdout.flush()
    os._exit(3)
print("the child's status", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"#;
    let args = ["-c", parent];
    let (bare, watched) = (bare(dir.path(), &args), watched(dir.path(), &args));
    assert!(bare.status.success(), "{}", stderr(&bare));
    assert!(watched.status.success(), "{}", stderr(&watched));
    assert_eq!(stdout(&watched), stdout(&bare), "a child saw a difference");
}

#[test]
fn a_sitecustomize_that_raises_says_what_it_would_without_gpulab() {
    if !python_or_skip("a_sitecustomize_that_raises_says_what_it_would_without_gpulab") {
        return;
    }
    let dir = temp_dir();
    std::fs::write(
        dir.path().join("sitecustomize.py"),
        "raise ValueError('their own mistake')\n",
    )
    .expect("write");
    let args = ["-c", "print('the program ran')"];
    let (bare, watched) = (bare(dir.path(), &args), watched(dir.path(), &args));
    assert_eq!(watched.status.code(), bare.status.code());
    assert_eq!(stdout(&watched), stdout(&bare));
    let said = stderr(&bare);
    assert!(said.contains("ValueError: their own mistake"), "{said}");
    assert!(
        stderr(&watched).starts_with(&said),
        "bare:\n{said}\nwatched:\n{}",
        stderr(&watched)
    );
}

/// A stand-in with the calls the hook makes of PyTorch, and none of its
/// out-of-memory observer: the figures must arrive, and the missing observer
/// be said once.
const FRAMEWORK: &str = r#"
class cuda:
    @staticmethod
    def is_initialized():
        return True

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def memory_stats(device):
        return {"allocated_bytes.all.current": 3 << 20, "reserved_bytes.all.current": 8 << 20}


class _C:
    pass
"#;

const PROGRAM: &str = r#"
import time
import pyopencl as cl

ctx = cl.create_some_context(interactive=False)
buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 1 << 20)
import torch

time.sleep(1.0)
print("done")
"#;

#[test]
fn what_a_framework_says_reaches_the_report_and_a_missing_hook_is_said_once() {
    let test = "what_a_framework_says_reaches_the_report_and_a_missing_hook_is_said_once";
    if !pyopencl_or_skip(test) {
        return;
    }
    let _device = device_lock();
    let dir = temp_dir();
    std::fs::write(dir.path().join("torch.py"), FRAMEWORK).expect("write");
    std::fs::write(dir.path().join("program.py"), PROGRAM).expect("write");
    // The stand-in is found on the program's own PYTHONPATH.
    let out = watched(dir.path(), &["program.py"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("report.json")).expect("report"),
    )
    .expect("JSON");
    assert_eq!(stdout(&out), "done\n");
    assert_complete(&report, Some("opencl"));
    let frameworks = report["frameworks"].as_array().expect("frameworks");
    assert_eq!(frameworks.len(), 1, "{report:#}");
    let f = &frameworks[0];
    assert_eq!(f["framework"], "pytorch");
    assert_eq!(f["at_exit"]["allocated_bytes"], 3 << 20);
    assert_eq!(f["at_exit"]["reserved_bytes"], 8 << 20);
    assert_eq!(f["at_exit"]["cached_bytes"], 5 << 20);
    let warnings: Vec<&str> = report["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(|w| w.as_str())
        .filter(|w| w.contains("PyTorch"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("_cuda_attach_out_of_memory_observer"),
        "{warnings:?}"
    );
}

/// Issue #48, `--torch-history` on every machine: a stand-in for PyTorch
/// (`tests/watch/standin/`, shaped as PyTorch's memory history and snapshot
/// are) under the real hook and agent. The tensors alive at the highest look
/// and at the refusal are grouped by the program's own line (a library's
/// tensors by the line that called it), with each line's count and bytes as
/// the script made them, and the line that grew has grown since the first
/// look. Without the flag nothing is looked at and the report says how to.
#[test]
fn torch_history_names_the_tensors_alive_by_the_line_that_allocated_them() {
    let test = "torch_history_names_the_tensors_alive_by_the_line_that_allocated_them";
    if !pyopencl_or_skip(test) {
        return;
    }
    let _device = device_lock();
    let dir = temp_dir();
    let standin = |name: &str| {
        let source = common::repo_file(&format!("tests/watch/standin/{name}"));
        let to = dir.path().join(name);
        std::fs::create_dir_all(to.parent().expect("a folder")).expect("folder");
        std::fs::copy(source, to).expect("copy");
    };
    for name in [
        "history.py",
        "site-packages/torch/__init__.py",
        "site-packages/torch/_inductor.py",
        "site-packages/layers.py",
    ] {
        standin(name);
    }
    let script = dir.path().join("history.py").to_string_lossy().into_owned();
    let line = marked_line("standin/history.py", &script);
    // What the program prints says whether it had imported `torch._inductor`
    // at each step: the hook's looks import nothing.
    let report = |flags: &[&str], args: &[&str]| {
        let bare = bare(dir.path(), args);
        assert!(bare.status.success(), "{}", stderr(&bare));
        let out = watched_with(dir.path(), flags, args);
        assert_eq!(out.status.code(), bare.status.code(), "{}", stderr(&out));
        assert_eq!(stdout(&out), stdout(&bare));
        let text = std::fs::read_to_string(dir.path().join("report.json")).expect("report");
        serde_json::from_str::<serde_json::Value>(&text).expect("JSON")
    };
    let by_line = tensors_by_line;
    let with = report(&["--torch-history"], &["history.py"]);
    assert_complete(&with, Some("opencl"));
    let expected =
        std::collections::BTreeMap::from([(line("grows"), (6, 24)), (line("library"), (3, 3))]);
    let highest = &with["frameworks"][0]["tensors_at_highest"];
    assert_eq!(by_line(highest), expected, "{highest:#}");
    assert_eq!(highest["allocated_bytes"], 27u64 << 20, "{highest:#}");
    assert_eq!(highest["tensors"], 9, "{highest:#}");
    assert!(highest["looks"].as_u64() >= Some(2), "{highest:#}");
    let grows = &highest["lines"][0];
    assert_eq!(grows["function"], "<module>", "{highest:#}");
    // The first look came after the first step, and each step is 4 MiB.
    let change = grows["change_bytes"].as_i64().expect("a change");
    assert!(
        change > 0 && change < 24 << 20 && change % (4 << 20) == 0,
        "{highest:#}"
    );
    let refused = &with["framework_refused"];
    assert_eq!(
        refused["backtrace"][0]["location"].as_str(),
        Some(line("refused").as_str()),
        "{refused:#}"
    );
    assert_eq!(by_line(&refused["tensors_then"]), expected, "{refused:#}");
    assert!(
        refused["tensors_then"].get("looks").is_none(),
        "{refused:#}"
    );

    // A program that never imports `torch._inductor`: no look at its highest
    // readings (one would import it), and the report says why; the look at
    // the refusal runs on the program's own thread.
    let never = report(&["--torch-history"], &["history.py", "never"]);
    assert!(
        never["frameworks"][0].get("tensors_at_highest").is_none(),
        "{never:#}"
    );
    assert_eq!(
        by_line(&never["framework_refused"]["tensors_then"]),
        expected
    );
    let warned = never["warnings"].as_array().expect("warnings");
    assert!(
        warned
            .iter()
            .any(|w| w.as_str().is_some_and(|w| w.contains("torch._inductor"))),
        "{warned:#?}"
    );
    let without = report(&[], &["history.py"]);
    assert!(
        without["frameworks"][0].get("tensors_at_highest").is_none(),
        "{without:#}"
    );
    assert!(
        without["framework_refused"].get("tensors_then").is_none(),
        "{without:#}"
    );
}

/// The H200 recordings of real PyTorch, CuPy, JAX and NCCL programs
/// (`tests/watch/*.py` under `gpulab watch`, shipped so any machine replays
/// them): each allocator's figures in the report are its last said in the
/// file, its cache is what the holders set apart, and what it made is told
/// from what the program made.
#[test]
fn the_frameworks_figures_in_the_h200_recordings_are_what_their_events_say() {
    use gpulab::trace::{Event, FrameworkSaid};
    for name in [
        "torch-losses",
        "torch-cache",
        "cupy-pool",
        "jax-prealloc",
        "nccl-group",
        "torch-oom",
        "torch-oom--lines",
        "torch-oom--history",
    ] {
        let file = common::repo_file(&format!("assets/watch-recordings/nvidia-h200/{name}.jsonl"));
        let text = std::fs::read_to_string(&file).expect("a shipped recording");
        let events = gpulab::trace::read_events(text.as_bytes()).expect("it reads");
        let mut last = std::collections::BTreeMap::new();
        let mut refused = None;
        for e in &events {
            if let Event::Framework(f) = e {
                match &f.said {
                    FrameworkSaid::Memory {
                        allocated,
                        reserved,
                        ..
                    } => {
                        last.insert(
                            (f.pid, f.framework.as_str(), f.device),
                            (*allocated, *reserved),
                        );
                    }
                    FrameworkSaid::Refused { asked, .. } => {
                        refused.get_or_insert(*asked);
                    }
                    FrameworkSaid::Unreadable { .. } | FrameworkSaid::Alive { .. } => {}
                }
            }
        }
        assert!(!last.is_empty(), "{name}: the hook said nothing");
        let out = gpulab()
            .args(["report", "--json"])
            .arg(&file)
            .output()
            .expect("gpulab starts");
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let said = report["frameworks"].as_array().expect("frameworks");
        assert_eq!(said.len(), last.len(), "{name}: {said:#?}");
        for f in said {
            let key = (
                f["pid"].as_u64().expect("pid") as u32,
                f["framework"].as_str().expect("framework"),
                f["device"].as_u64().expect("device") as u32,
            );
            let (allocated, reserved) = last[&key];
            let exit = &f["at_exit"];
            assert_eq!(exit["allocated_bytes"], allocated, "{name}");
            assert_eq!(exit["reserved_bytes"], reserved, "{name}");
            assert_eq!(exit["cached_bytes"], reserved - allocated, "{name}");
        }
        // The holders set the cache apart from the objects, never more than
        // those hold.
        if let Some(at_exit) = report["holders"]["at_exit"].as_object() {
            let cached: u64 = last.values().map(|(a, r)| r - a).sum();
            let set_apart = at_exit["cached_by_allocators_bytes"]
                .as_u64()
                .expect("bytes");
            assert!(set_apart <= cached, "{name}: {at_exit:?}");
            let by: u64 = at_exit["objects_held_by"]
                .as_object()
                .expect("by owner")
                .values()
                .filter_map(serde_json::Value::as_u64)
                .sum();
            assert_eq!(by, at_exit["objects_held_bytes"], "{name}: {at_exit:?}");
        }
        // What a framework's allocator made is its own, not the program's leak.
        for g in report["alive_at_exit"].as_array().expect("alive") {
            let framework_buffer = ["buffer", "mem_handle", "host_buffer"]
                .contains(&g["kind"].as_str().unwrap_or(""))
                && ["pytorch", "cupy", "xla"].contains(&g["owner"].as_str().unwrap_or(""));
            assert_eq!(
                g["kept_by_allocator"].as_bool().unwrap_or(false),
                framework_buffer,
                "{name}: {g}"
            );
        }
        assert_eq!(
            report["framework_refused"]["asked_bytes"].as_u64(),
            refused,
            "{name}"
        );
    }
}

/// PyTorch running out (`torch.empty` of 8 GiB until it raises, on an H200):
/// the report leads with the call the driver refused, then what PyTorch said
/// of its own refusal.
#[test]
fn a_pytorch_out_of_memory_leads_with_the_refused_call_and_what_pytorch_said() {
    let file = common::repo_file("assets/watch-recordings/nvidia-h200/torch-oom.jsonl");
    let out = gpulab()
        .arg("report")
        .arg(&file)
        .output()
        .expect("gpulab starts");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l.contains("import torch\\n")),
        "{text}"
    );
    let lead: Vec<&str> = text.lines().skip(2).take(10).collect();
    assert!(
        lead[0].starts_with("ran out of memory: cuMemAlloc") && lead[0].contains("through PyTorch"),
        "{text}"
    );
    assert!(
        lead.iter()
            .any(|l| l.starts_with("PyTorch refused 8192.0 MiB")),
        "{text}"
    );
}

/// The lines of `tests/watch/NAME` marked `# MARK`, as `SCRIPT:LINE` where
/// `script` is the path the program ran it under.
fn marked_line(name: &str, script: &str) -> impl Fn(&str) -> String {
    let source = std::fs::read_to_string(common::repo_file(&format!("tests/watch/{name}")))
        .expect("the script");
    let script = script.to_string();
    move |mark| {
        format!(
            "{script}:{}",
            crate::watch::line_marked(&source, &format!("# {mark}"))
        )
    }
}

/// A refusal's `held_then` buffers as (count, MiB) by their first frame's
/// `file:line`.
fn held_by_line(refusal: &serde_json::Value) -> std::collections::BTreeMap<String, (u64, u64)> {
    refusal["held_then"]
        .as_array()
        .expect("held_then")
        .iter()
        .filter(|h| h["kind"] == "buffer")
        .map(|h| {
            let at = h["backtrace"][0]["location"].as_str().unwrap_or("?");
            let (count, bytes) = (h["count"].as_u64(), h["bytes"].as_u64());
            (
                at.to_string(),
                (count.unwrap_or(0), bytes.unwrap_or(0) >> 20),
            )
        })
        .collect()
}

/// Issue #48, PyTorch running out (`tests/watch/torch_oom.py`: 4 weights of
/// 64 MiB, then a 32 MiB and a 96 MiB tensor a step, kept, until PyTorch's
/// own limit refuses): the refusal names the script's line that asked, and
/// what the process held then is grouped by the lines that made it, each with
/// the count and bytes the script made there. `script` is the path the
/// program ran under, as its interpreter names it.
pub(crate) fn check_torch_oom_lines(report: &serde_json::Value, script: &str) {
    let line = marked_line("torch_oom.py", script);
    let refused = &report["framework_refused"];
    assert_eq!(refused["asked_bytes"], 96u64 << 20, "{refused:#}");
    let asked = &refused["backtrace"][0];
    assert_eq!(asked["python"], true, "{refused:#}");
    assert_eq!(asked["function"], "activations", "{refused:#}");
    assert_eq!(asked["location"].as_str(), Some(line("big").as_str()));
    let held = held_by_line(refused);
    let (weights, small, big) = (line("weights"), line("small"), line("big"));
    assert_eq!(held.get(&weights), Some(&(4, 4 * 64)), "{held:#?}");
    // The step that was refused made its small tensor first.
    let bigs = held.get(&big).map_or(0, |(n, _)| *n);
    assert!(bigs > 0, "{held:#?}");
    assert_eq!(held.get(&big), Some(&(bigs, bigs * 96)), "{held:#?}");
    assert_eq!(
        held.get(&small),
        Some(&(bigs + 1, (bigs + 1) * 32)),
        "{held:#?}"
    );
    assert!(
        refused["held_then"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|h| h["kind"] == "buffer")
            .all(|h| h["owner"] == "pytorch"),
        "{refused:#}"
    );
}

/// A `tensors_then` or `tensors_at_highest`'s lines as (tensors, MiB) by
/// `file:line` ("none" for the tensors no line of the program allocated).
pub(crate) fn tensors_by_line(
    tensors: &serde_json::Value,
) -> std::collections::BTreeMap<String, (u64, u64)> {
    tensors["lines"]
        .as_array()
        .unwrap_or_else(|| panic!("no lines: {tensors:#}"))
        .iter()
        .map(|l| {
            let at = match (l["file"].as_str(), l["line"].as_u64()) {
                (Some(f), Some(n)) => format!("{f}:{n}"),
                _ => "none".into(),
            };
            let (n, bytes) = (l["tensors"].as_u64(), l["bytes"].as_u64());
            (at, (n.unwrap_or(0), bytes.unwrap_or(0) >> 20))
        })
        .collect()
}

/// Issue #48 under `--torch-history`, PyTorch running out
/// (`tests/watch/torch_oom.py`): the tensors alive as it refused are the
/// script's own, by its lines: its 4 weights, one small tensor more than big
/// ones (the refused step made its small one), and nothing else.
pub(crate) fn check_torch_oom_tensors(report: &serde_json::Value, script: &str) {
    let line = marked_line("torch_oom.py", script);
    let then = &report["framework_refused"]["tensors_then"];
    let by_line = tensors_by_line(then);
    let bigs = by_line.get(&line("big")).map_or(0, |(n, _)| *n);
    assert!(bigs > 0, "{then:#}");
    let expected = std::collections::BTreeMap::from([
        (line("weights"), (4, 4 * 64)),
        (line("small"), (bigs + 1, (bigs + 1) * 32)),
        (line("big"), (bigs, bigs * 96)),
    ]);
    assert_eq!(by_line, expected, "{then:#}");
    assert_eq!(then["lines"][0]["function"], "activations", "{then:#}");
}

/// The H200 recording of `tests/watch/torch_oom.py` (run from the checkout
/// at `/work/main`): the refusal's line and what each line held then.
#[test]
fn a_pytorch_refusal_names_the_line_that_asked_and_what_each_line_held() {
    let file = "assets/watch-recordings/nvidia-h200/torch-oom--lines.jsonl";
    let report = recorded_report(file);
    check_torch_oom_lines(&report, "/work/main/tests/watch/torch_oom.py");
    let text = gpulab()
        .arg("report")
        .arg(common::repo_file(file))
        .output()
        .expect("gpulab starts");
    let text = stdout(&text);
    assert!(
        text.contains("  asked at activations (/work/main/tests/watch/torch_oom.py:"),
        "{text}"
    );
}

/// `gpulab report --json` of a shipped recording.
fn recorded_report(file: &str) -> serde_json::Value {
    let out = gpulab()
        .args(["report", "--json"])
        .arg(common::repo_file(file))
        .output()
        .expect("gpulab starts");
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The H200 recording of `tests/watch/torch_oom.py` under `--torch-history`
/// (from the checkout at `/work/main`): PyTorch's live tensors at the
/// refusal, by line.
#[test]
fn a_pytorch_refusal_under_torch_history_lists_its_tensors_by_line() {
    let file = "assets/watch-recordings/nvidia-h200/torch-oom--history.jsonl";
    let report = recorded_report(file);
    check_torch_oom_tensors(&report, "/work/main/tests/watch/torch_oom.py");
}

/// Issue #48, CuPy running out (`tests/watch/cupy_oom.py`: 4 weights of 64
/// MiB, then arrays of 8 GiB kept until the driver refuses one): the refused
/// call names the script's line, and what the process held then is grouped
/// by the lines that made it. `kept`: the script's own count of big arrays,
/// when its output is at hand.
pub(crate) fn check_cupy_oom_lines(report: &serde_json::Value, script: &str, kept: Option<u64>) {
    let line = marked_line("cupy_oom.py", script);
    let ran_out = &report["ran_out"];
    let asked = &ran_out["backtrace"][0];
    assert_eq!(asked["python"], true, "{ran_out:#}");
    assert_eq!(asked["location"].as_str(), Some(line("big").as_str()));
    assert_eq!(ran_out["asked_bytes"], 8u64 << 30, "{ran_out:#}");
    let held = held_by_line(ran_out);
    assert_eq!(held.get(&line("weights")), Some(&(4, 4 * 64)), "{held:#?}");
    let bigs = held.get(&line("big")).map_or(0, |(n, _)| *n);
    assert!(bigs > 0, "{held:#?}");
    assert_eq!(
        held.get(&line("big")),
        Some(&(bigs, bigs * 8192)),
        "{held:#?}"
    );
    if let Some(kept) = kept {
        assert_eq!(bigs, kept, "{held:#?}");
    }
}

/// The H200 recording of `tests/watch/cupy_oom.py` (run from the checkout at
/// `/work/main`): the refused call's line and what each line held then.
#[test]
fn a_cupy_refusal_names_the_line_that_asked_and_what_each_line_held() {
    let report = recorded_report("assets/watch-recordings/nvidia-h200/cupy-oom--lines.jsonl");
    check_cupy_oom_lines(&report, "/work/main/tests/watch/cupy_oom.py", None);
}
