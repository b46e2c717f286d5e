//! Every shipped OpenCL lab, every variant, through the real binary on the OpenCL
//! device this machine has (PoCL in CI). Checks that the stream is complete and the
//! verdicts were computed — never what they are: that is the device's business.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use std::collections::BTreeMap;

use gpulab::lab::{BackendKind, LabSet, ObjKind};
use gpulab::run::Run;
use gpulab::trace::{EndStatus, Event, ObjectAction, read_events};

/// Small sizes keep the suite quick on two CPU cores; the code paths are the same.
fn params_for(lab: &str) -> Vec<&'static str> {
    match lab {
        "cl-forgotten-events" => vec!["iterations=4", "size_mib=16", "kernel_ms=5"],
        "cl-sub-buffer" => vec!["size_mib=16", "sub_mib=1", "hold_ms=20"],
        "cl-map-release" => vec!["size_mib=16", "hold_ms=20"],
        "cl-host-ptr" => vec!["size_mib=16", "kernel_ms=20", "hold_ms=20"],
        // The free under the kernel waits a quarter of it: time for the kernel
        // to touch its 16 MiB first on a loaded machine.
        "cl-svm-free" => vec!["size_mib=16", "kernel_ms=240"],
        _ => vec!["size_mib=16", "kernel_ms=60"],
    }
}

fn record(lab: &str, variant: &str, dir: &std::path::Path) -> (std::process::Output, Vec<Event>) {
    let file = dir.join(format!("{lab}--{variant}.jsonl"));
    let file_s = file.display().to_string();
    let mut args = vec!["run", lab, "--variant", variant, "--record", &file_s];
    let params = params_for(lab);
    for p in &params {
        args.push("--param");
        args.push(p);
    }
    let out = common::run(&args);
    let events = read_events(std::io::BufReader::new(
        std::fs::File::open(&file).expect("the recording exists"),
    ))
    .expect("the recording reads back");
    (out, events)
}

#[test]
fn every_opencl_lab_runs_to_a_complete_stream() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("every_opencl_lab_runs_to_a_complete_stream") {
        return;
    }
    let set = LabSet::load(&[]);
    let dir = common::temp_dir();
    let mut ran = 0;
    for lab in set
        .labs()
        .iter()
        .filter(|l| l.backend == BackendKind::OpenCl)
    {
        for variant in &lab.variants {
            let what = format!("{} [{}]", lab.id, variant.name);
            let (out, events) = record(&lab.id, &variant.name, dir.path());
            assert_eq!(
                out.status.code(),
                Some(0),
                "{what}: {}",
                common::stderr(&out)
            );
            let run = Run::from_events(&events);

            // The stream is whole: meta first, an end, every script line ran once.
            assert!(matches!(events.first(), Some(Event::Meta(_))), "{what}");
            let end = run.end().expect("an end event");
            assert_eq!(end.status, EndStatus::Finished, "{what}");
            let lines = run.lines();
            assert!(
                lines.iter().all(|l| l.calls > 0),
                "{what}: a line never ran: {lines:?}"
            );
            assert!(lines.iter().all(|l| l.errors == 0), "{what}: {lines:?}");

            // Every kernel reported its device span, in order and after its enqueue.
            let enqueues = run
                .calls()
                .iter()
                .filter(|c| c.api == "clEnqueueNDRangeKernel")
                .count();
            let kernel = |name: &str| gpulab::lab::api::KERNELS.iter().any(|k| k.name == name);
            let spans = run.spans().iter().filter(|s| kernel(&s.name)).count();
            assert_eq!(spans, enqueues, "{what}: spans");
            for s in run.spans() {
                assert!(s.begin_ns <= s.end_ns, "{what}: {s:?}");
            }

            // Verdicts are computed for every claim that applies, whatever they are.
            let expected: Vec<&str> = lab
                .claims
                .iter()
                .filter(|c| c.applies_to(&variant.name))
                .map(|c| c.name.as_str())
                .collect();
            let got: Vec<&str> = run.claims().iter().map(|c| c.name.as_str()).collect();
            assert_eq!(got, expected, "{what}");
            for c in run.claims() {
                assert!(c.reason.is_some() || !c.values.is_empty(), "{what}: {c:?}");
            }

            // The ledger ends at zero except for what the lab leaks on purpose.
            for leak in &end.leaked {
                assert!(leak.forgotten, "{what}: {leak:?} leaked without `forget`");
            }
            let forgets = run.calls().iter().filter(|c| c.api == "forget").count();
            assert_eq!(end.leaked.len(), forgets, "{what}");
            let report = common::stdout(&out);
            if forgets > 0 {
                assert!(
                    report.contains("forgotten on purpose"),
                    "{what}: the report names the leak"
                );
            }

            // Memory measured around every call, and back at the baseline after the
            // worker: on a CPU device the worker's memory is its RSS, gone with it.
            assert!(
                run.calls()
                    .iter()
                    .all(|c| c.mem_before.is_some() && c.mem_after.is_some()),
                "{what}"
            );
            let meta = run.meta().expect("meta");
            if meta.device.memory_source == gpulab::trace::MemorySource::Rss {
                assert!(
                    !pid_alive(meta.pid),
                    "{what}: the worker {} still runs",
                    meta.pid
                );
            }
            ran += 1;
        }
    }
    assert!(ran >= 8, "ran {ran} variants");
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[test]
fn a_forgotten_event_is_counted_per_iteration_and_named() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("a_forgotten_event_is_counted_per_iteration_and_named") {
        return;
    }
    let dir = common::temp_dir();
    let (_, events) = record("cl-forgotten-events", "forgotten", dir.path());
    let run = Run::from_events(&events);
    let block = run.tagged_block("loop").expect("the loop block");
    let end = run.end().expect("end");
    let mut leaked: BTreeMap<ObjKind, usize> = BTreeMap::new();
    for l in &end.leaked {
        *leaked.entry(l.kind).or_default() += 1;
    }
    assert_eq!(
        leaked.get(&ObjKind::Event).copied(),
        Some(block.iterations as usize)
    );
    assert_eq!(leaked.len(), 1, "only events leak: {leaked:?}");
    // gpulab never released the lab's event behind its back.
    assert!(
        !run.objects()
            .iter()
            .any(|o| o.kind == ObjKind::Event && o.action == ObjectAction::Released)
    );
}

#[test]
fn all_variants_print_side_by_side() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("all_variants_print_side_by_side") {
        return;
    }
    let out = common::run(&[
        "run",
        "cl-event-wait",
        "--all-variants",
        "--param",
        "kernel_ms=30",
        "--param",
        "size_mib=8",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let text = common::stdout(&out);
    let header = text.lines().next().unwrap_or_default();
    for v in ["wait-for-event", "finish", "release-then-finish"] {
        assert!(header.contains(v), "{header}");
    }
    // Each variant is counted as it starts, on stderr (#51).
    let said = common::stderr(&out);
    for (i, v) in ["wait-for-event", "finish", "release-then-finish"]
        .iter()
        .enumerate()
    {
        let step = format!("gpulab: [{}/3] cl-event-wait [{v}]", i + 1);
        assert!(said.contains(&step), "{said}");
    }
    assert!(text.contains("wait-blocks"));
}

#[test]
fn json_and_markdown_reports_carry_the_claims() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("json_and_markdown_reports_carry_the_claims") {
        return;
    }
    let out = common::run(&[
        "run",
        "cl-finish",
        "--variant",
        "no-wait",
        "--json",
        "--param",
        "kernel_ms=40",
        "--param",
        "size_mib=8",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(v["kind"], "run");
    let v = &v["runs"][0];
    assert_eq!(v["lab"], "cl-finish");
    assert!(v["claims"].as_array().is_some_and(|c| !c.is_empty()));
    assert!(v["lines"].as_array().is_some_and(|l| l.len() >= 10));
    let md = common::run(&[
        "run",
        "cl-finish",
        "--variant",
        "no-wait",
        "--markdown",
        "--param",
        "kernel_ms=40",
        "--param",
        "size_mib=8",
    ]);
    assert!(common::stdout(&md).contains("| line | call | result |"));
}

#[test]
fn fail_on_turns_a_verdict_into_the_exit_status() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("fail_on_turns_a_verdict_into_the_exit_status") {
        return;
    }
    let dir = common::temp_dir();
    let file = dir.path().join("run.jsonl");
    let file_s = file.display().to_string();
    let out = common::run(&[
        "run",
        "cl-finish",
        "--variant",
        "finish",
        "--record",
        &file_s,
        "--param",
        "kernel_ms=40",
        "--param",
        "size_mib=8",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let events = read_events(std::io::BufReader::new(std::fs::File::open(&file).unwrap())).unwrap();
    let run = Run::from_events(&events);
    // Whatever this device says, --fail-on for that verdict must exit 1 and the
    // other must not: the user states the expectation, the run decides.
    let verdicts: Vec<_> = run.claims().iter().map(|c| c.verdict).collect();
    let any_not = verdicts.contains(&gpulab::trace::Verdict::DoesNotHold);
    let out = common::run(&[
        "run",
        "cl-finish",
        "--variant",
        "finish",
        "--fail-on",
        "does_not_hold",
        "--param",
        "kernel_ms=40",
        "--param",
        "size_mib=8",
    ]);
    // A second run may measure differently; judge by its own report.
    let text = common::stdout(&out);
    // A claim's line: its mark, its verdict (and how it stands to the lesson).
    let holds_all = !text.lines().any(|l| {
        let l = l.trim_start();
        ["✓ ", "✗ ", "◆ ", "◇ ", "? "]
            .iter()
            .any(|m| l.starts_with(m))
            && l.contains(" does not hold")
    });
    assert_eq!(
        out.status.code(),
        Some(if holds_all { 0 } else { 1 }),
        "{text}\nstderr: {}\n(first run had does-not-hold: {any_not})",
        common::stderr(&out)
    );
}

#[test]
fn report_of_a_recording_equals_the_live_report() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("report_of_a_recording_equals_the_live_report") {
        return;
    }
    let dir = common::temp_dir();
    let file = dir.path().join("run.jsonl");
    let file_s = file.display().to_string();
    let live = common::run(&[
        "run",
        "cl-event-wait",
        "--record",
        &file_s,
        "--param",
        "kernel_ms=30",
        "--param",
        "size_mib=8",
    ]);
    assert_eq!(live.status.code(), Some(0), "{}", common::stderr(&live));
    let replay = common::run(&["report", &file_s]);
    assert_eq!(common::stdout(&replay), common::stdout(&live));
    // The recording says when it was made, in a form the reader accepts (which
    // day it is does not matter here).
    let events = read_events(std::io::BufReader::new(std::fs::File::open(&file).unwrap())).unwrap();
    let Some(gpulab::trace::Event::Meta(meta)) = events.first() else {
        panic!("a recording starts with meta");
    };
    let at = meta.recorded_at.as_deref().expect("meta.recorded_at");
    assert!(gpulab::trace::wallclock::Utc::parse(at).is_some(), "{at}");
}

/// `--step` with nobody at the keyboard: when stdin ends the run goes on to its
/// end (it used to wait forever), and a `q` before the worker said anything gives
/// no duration measured from the machine's boot.
#[test]
fn step_mode_finishes_when_stdin_ends_and_an_early_quit_has_no_bogus_duration() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("step_mode_finishes_when_stdin_ends") {
        return;
    }
    let args = [
        "run",
        "cl-finish",
        "--step",
        "--param",
        "kernel_ms=20",
        "--param",
        "size_mib=4",
    ];
    let out = common::gpulab()
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("gpulab starts");
    let (stdout, stderr) = (common::stdout(&out), common::stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("stdin closed"), "{stderr}");
    assert!(stdout.contains("status   finished in "), "{stdout}");

    let mut child = common::gpulab()
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("gpulab starts");
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        let _ = stdin.write_all(b"q\n");
    }
    let out = child.wait_with_output().expect("gpulab ends");
    let stdout = common::stdout(&out);
    let status = stdout
        .lines()
        .find(|l| l.starts_with("status "))
        .unwrap_or_default()
        .to_string();
    assert!(status.contains("cancelled"), "{stdout}");
    // Cancelled before or after the worker's first event: either no duration, or
    // one of this run (seconds, not the hours since the machine booted).
    if let Some(secs) = status
        .split(" in ")
        .nth(1)
        .and_then(|t| t.trim_end_matches(" s").parse::<f64>().ok())
    {
        assert!(secs < 600.0, "{status}");
    }
}

/// A buffer retained once more than it is released: the report says it was
/// released, and how many references it still held, not "never released".
#[test]
fn a_buffer_released_but_still_retained_is_not_called_never_released() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("a_buffer_released_but_still_retained_is_not_called_never_released")
    {
        return;
    }
    let labs = common::repo_file("tests/labs/retain");
    let out = common::gpulab()
        .args(["run", "retained-once-more", "--labs"])
        .arg(&labs)
        .output()
        .expect("gpulab starts");
    let text = common::stdout(&out);
    assert!(out.status.success(), "{text}{}", common::stderr(&out));
    assert!(
        text.contains(
            "leaked buf (buffer, 1.0 MiB each): released once, yet 1 reference still held"
        ),
        "{text}"
    );
    assert!(!text.contains("never released"), "{text}");
}

/// `gpulab run` on the lab of errors in `tests/labs/findings`.
fn run_findings(variant: &str, extra: &[&str]) -> std::process::Output {
    let labs = common::repo_file("tests/labs/findings");
    common::gpulab()
        .args(["run", "cl-expected-error", "--variant", variant, "--labs"])
        .arg(&labs)
        .args(extra)
        .output()
        .expect("gpulab starts")
}

/// An error on a line marked `# expect-error` is the lab's finding: every report
/// says so plainly, and the run exits 0.
#[test]
fn an_error_on_a_marked_line_is_stated_as_the_finding() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("an_error_on_a_marked_line_is_stated_as_the_finding") {
        return;
    }
    let out = run_findings("marked", &[]);
    let text = common::stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", common::stderr(&out));
    assert!(
        text.contains("finding  line 27 `clReleaseMemObject(buf)` returned ")
            && text.contains(", the error this lab looks for"),
        "{text}"
    );
    let md = common::stdout(&run_findings("marked", &["--markdown"]));
    assert!(
        md.contains("- finding: line 27 `clReleaseMemObject(buf)` returned "),
        "{md}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&common::stdout(&run_findings("marked", &["--json"])))
            .expect("JSON report");
    let json = &json["runs"][0];
    assert_eq!(json["finding"]["kind"], "expected_error", "{json}");
    assert_eq!(json["finding"]["line"], 27, "{json}");
    assert_eq!(json["finding"]["ended_run"], false, "{json}");
}

/// A marked error does not excuse a later, different failure: exit 4.
#[test]
fn an_error_on_an_unmarked_line_still_fails_the_run() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("an_error_on_an_unmarked_line_still_fails_the_run") {
        return;
    }
    // The allocation fails on its own (past any address space), not for the budget.
    let out = run_findings("then-unmarked", &["--budget", "2000000000"]);
    let text = common::stdout(&out);
    assert_eq!(out.status.code(), Some(4), "{text}{}", common::stderr(&out));
    assert!(text.contains("status   failed at line 39"), "{text}");
    assert!(text.contains("finding  line 38"), "{text}");
}

/// `--until-failure` runs until a call fails: reaching it is the point, so the
/// run exits 0 and the report names the failure as the finding. Without the
/// flag the same lab stops at the budget and fails.
#[test]
fn until_failure_exits_0_when_it_reaches_the_failure() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("until_failure_exits_0_when_it_reaches_the_failure") {
        return;
    }
    let out = run_findings("too-big", &["--until-failure", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&common::stdout(&out)).expect("JSON report");
    let json = &json["runs"][0];
    assert_eq!(json["finding"]["kind"], "until_failure", "{json}");
    assert_eq!(json["finding"]["line"], 49, "{json}");
    let said = json["finding"]["said"].as_str().unwrap_or_default();
    assert!(
        said.contains("the failure this --until-failure run went on until"),
        "{said}"
    );
    assert!(
        json["status"]
            .as_str()
            .unwrap_or_default()
            .starts_with("failed at line 49")
    );

    let out = run_findings("too-big", &[]);
    let text = common::stdout(&out);
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(!text.contains("finding "), "{text}");
}

/// A stepped run says first which claims stepping leaves inconclusive, then
/// leaves exactly those inconclusive, saying why; the others are judged.
#[test]
fn a_stepped_run_warns_and_leaves_claims_over_time_between_lines_inconclusive() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("a_stepped_run_warns_and_leaves_claims_over_time") {
        return;
    }
    let out = common::gpulab()
        .args([
            "run",
            "cl-finish",
            "--step",
            "--json",
            "--param",
            "kernel_ms=20",
            "--param",
            "size_mib=4",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("gpulab starts");
    let stderr = common::stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("host-waits — reads host_ms(wait), busy_ms(wait)"),
        "{stderr}"
    );
    let json: serde_json::Value = serde_json::from_str(&common::stdout(&out)).expect("JSON report");
    let claims = json["runs"][0]["claims"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let claim = |name: &str| {
        claims
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_default()
    };
    let waits = claim("host-waits");
    assert_eq!(waits["verdict"], "inconclusive", "{waits}");
    assert!(
        waits["reason"].as_str().unwrap_or_default().starts_with(
            "stepped run: host_ms(wait), busy_ms(wait) depend on the time between lines"
        ),
        "{waits}"
    );
    let span = claim("kernel-took-its-time");
    assert!(
        !span["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("stepped"),
        "{span}"
    );
}

/// The host's load is measured for every run and stated as figures; whether it
/// counts as loaded follows from them alone (this machine's load is whatever
/// it is, so only the consistency is checked here).
#[test]
fn the_report_carries_the_hosts_load_during_the_run() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("the_report_carries_the_hosts_load_during_the_run") {
        return;
    }
    let out = run_findings("marked", &["--json"]);
    let json: serde_json::Value = serde_json::from_str(&common::stdout(&out)).expect("JSON report");
    let load = &json["runs"][0]["load"];
    let (avg, cores) = (
        load["load_avg"].as_f64().expect("load_avg"),
        load["cores"].as_u64().expect("cores"),
    );
    assert!(cores >= 1, "{load}");
    assert_eq!(
        load["loaded"].as_bool(),
        Some(gpulab::run::loaded(avg, cores as u32)),
        "{load}"
    );
}

/// Issue #14: every new OpenCL call (sub-buffer, map/unmap, copy, fill, marker,
/// barrier), wait lists and the buffer and queue flags run on the device, each
/// line once and without an error, and the device reports a span for each enqueue.
#[test]
fn the_new_opencl_calls_run_on_the_device() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("the_new_opencl_calls_run_on_the_device") {
        return;
    }
    let labs = common::repo_file("tests/labs/calls").display().to_string();
    let (out, events) = common::run_recorded(&["run", "cl-new-calls", "--labs", &labs]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        common::stdout(&out),
        common::stderr(&out)
    );
    let run = Run::from_events(&events);
    let end = run.end().expect("an end event");
    assert_eq!(end.status, EndStatus::Finished);
    let lines = run.lines();
    assert!(
        lines.iter().all(|l| l.calls == 1 && l.errors == 0),
        "{lines:?}"
    );
    // Work the device does is timed. Markers and barriers do none: PoCL times
    // them anyway, NVIDIA's OpenCL answers 0 for every counter (measured on the
    // H100), so either a span or none is right for them, never one at time 0.
    // So for an SVM free and a migration: PoCL times them, NVIDIA's OpenCL
    // (driver 580, H200) reports no span for either.
    // PoCL's device here is the CPU, its memory the worker's RSS.
    let pocl = run
        .meta()
        .is_some_and(|m| m.device.memory_source == gpulab::trace::MemorySource::Rss);
    let timed: &[&str] = if pocl {
        &[
            "copy", "fill", "map", "unmap", "write", "svm free", "migrate",
        ]
    } else {
        &["copy", "fill", "map", "unmap", "write"]
    };
    for name in timed {
        assert!(
            run.spans().iter().any(|s| s.name == *name),
            "no `{name}` span: {:?}",
            run.spans()
        );
    }
    let start = run.meta().map_or(0, |m| m.t_ns);
    assert!(
        run.spans().iter().all(|s| s.begin_ns >= start),
        "a span before the run: {:?}",
        run.spans()
    );
    // The parent and its sub-buffer were both destroyed by the driver (the ledger
    // heard their destructor callbacks), and nothing is left.
    let destroyed = events
        .iter()
        .filter(|e| matches!(e, Event::Object(o) if o.action == ObjectAction::Destroyed && o.kind == ObjKind::Buffer))
        .count();
    assert_eq!(destroyed, 6, "five buffers and one sub-buffer");
    // SVM has no destructor callback: no "never destroyed" is made up for it,
    // and the ledger let go of both pointers at their frees.
    let report = common::stdout(&out);
    assert!(
        !report.contains("never, while the worker lived"),
        "{report}"
    );
    assert!(end.leaked.is_empty(), "{:?}", end.leaked);
}

/// Issue #14: every kernel of `labs/kernels/` runs on the device with the
/// buffers its launch names, each reports a device span under its own name, and
/// a buffer released while `spin2` still runs is destroyed only once that kernel
/// began: the enqueued kernel holds both of its buffers.
#[test]
fn every_kernel_runs_with_its_buffers() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("every_kernel_runs_with_its_buffers") {
        return;
    }
    let labs = common::repo_file("tests/labs/kernels")
        .display()
        .to_string();
    let (out, events) = common::run_recorded(&["run", "cl-kernels", "--labs", &labs]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        common::stdout(&out),
        common::stderr(&out)
    );
    let run = Run::from_events(&events);
    assert_eq!(run.end().map(|e| &e.status), Some(&EndStatus::Finished));
    let lines = run.lines();
    assert!(
        lines.iter().all(|l| l.calls == 1 && l.errors == 0),
        "{lines:?}"
    );
    for name in ["pattern", "copy", "spin", "spin2"] {
        let spans = run.spans().iter().filter(|s| s.name == name).count();
        assert_eq!(spans, 1, "`{name}` spans: {:?}", run.spans());
    }
    let spin2 = run
        .spans()
        .iter()
        .find(|s| s.name == "spin2")
        .expect("a spin2 span");
    let destroyed: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Object(o)
                if o.action == ObjectAction::Destroyed && o.kind == ObjKind::Buffer =>
            {
                Some(o.t_ns)
            }
            _ => None,
        })
        .collect();
    assert_eq!(destroyed.len(), 2, "both buffers destroyed: {destroyed:?}");
    assert!(
        destroyed.iter().all(|&t| t >= spin2.begin_ns),
        "a buffer went before the kernel that names it began: {destroyed:?} vs {spin2:?}"
    );
}

/// Runs variant `variant` of lab `id` from fixture folder `dir` and returns the
/// run, after checking that it finished and every line ran once without error.
fn run_fixture(dir: &str, id: &str, variant: &str, params: &[&str]) -> Run {
    let labs = common::repo_file(dir).display().to_string();
    let mut args = vec!["run", id, "--variant", variant, "--labs", &labs];
    for p in params {
        args.extend(["--param", p]);
    }
    let (out, events) = common::run_recorded(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        common::stdout(&out),
        common::stderr(&out)
    );
    let run = Run::from_events(&events);
    assert_eq!(run.end().map(|e| &e.status), Some(&EndStatus::Finished));
    let lines = run.lines();
    assert!(
        lines.iter().all(|l| l.calls == 1 && l.errors == 0),
        "{lines:?}"
    );
    run
}

/// Issue #14: a user event in a wait list holds its command back until the host
/// sets it: the fill starts no earlier than `clSetUserEventStatus` began.
#[test]
fn a_user_event_holds_back_the_command_that_waits_for_it() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("a_user_event_holds_back_the_command_that_waits_for_it") {
        return;
    }
    let run = run_fixture("tests/labs/calls", "cl-user-events", "held", &[]);
    let set = run
        .calls()
        .iter()
        .find(|c| c.api == "clSetUserEventStatus")
        .expect("the set line ran");
    let fill = run
        .spans()
        .iter()
        .find(|s| s.name == "fill")
        .expect("a fill span");
    assert!(
        fill.begin_ns >= set.begin_ns,
        "the fill began before its user event was set: {fill:?} vs {set:?}"
    );
}

/// Issue #14: `clSetKernelArg` on its own line, then the buffer's release: both
/// variants run, and the claims about what the driver kept are decided from the
/// run (whatever they are: that is the driver's business).
#[test]
fn a_kernel_argument_and_its_released_buffer_are_measured() {
    let _device = common::device_lock();
    if !common::opencl_or_skip("a_kernel_argument_and_its_released_buffer_are_measured") {
        return;
    }
    for variant in ["arg-set", "no-arg"] {
        let params = ["size_mib=16", "hold_ms=20"];
        let run = run_fixture("tests/labs/kernels", "cl-kernel-arg", variant, &params);
        assert_eq!(run.claims().len(), 2, "{variant}");
        for c in run.claims() {
            assert!(!c.values.is_empty(), "{variant}: {c:?}");
        }
    }
}
