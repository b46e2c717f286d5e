//! `gpulab watch` on real programs gpulab did not write, on PoCL: clinfo, a C
//! program compiled here, and a pyopencl program. These check completeness (every
//! create and release seen, the stream ends, counts equal the program's own), not
//! what any driver decides.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use std::path::Path;
use std::process::Command;

use common::watch::{
    assert_complete, count, counts, kind, program, tool_or_skip, watch_json, watch_json_with,
};
use common::{device_lock, gpulab, opencl_or_skip, repo_file, stderr, stdout};
use serde_json::Value;

/// A child forked without exec after the parent's first OpenCL calls has no
/// agent thread (threads do not survive fork): it gets its own, with its own
/// pid on its objects, and each process's counts are its own. The program's
/// own lines are the truth: a child whose OpenCL fails (NVIDIA's driver under
/// ocl-icd, with or without gpulab) made nothing, and its status passes through.
#[test]
fn a_child_forked_without_exec_is_followed_with_its_own_counts() {
    let test = "a_child_forked_without_exec_is_followed_with_its_own_counts";
    let Some((_dir, exe)) = program(test, "fork_children") else {
        return;
    };
    let _device = device_lock();
    let (out, report) = watch_json(&[&exe.to_string_lossy()]);
    assert_eq!(
        report["exit_code"],
        out.status.code().unwrap_or(-1),
        "{report:#}"
    );
    assert_complete(&report, None);
    let text = stderr(&out);
    let parent = counts(&text, "fork_children: in=parent");
    let child_pid = count(&parent, "child");
    let child: Vec<(String, u64)> = match text
        .lines()
        .find(|l| l.starts_with("fork_children: in=child"))
    {
        Some(line) => counts(line, "fork_children: in=child"),
        None => vec![("contexts".into(), 0), ("buffers".into(), 0)],
    };
    let processes = report["processes"].as_array().expect("processes");
    assert_eq!(processes.len(), 2, "{report:#}");
    let child_report = processes
        .iter()
        .find(|p| p["pid"] == child_pid)
        .unwrap_or_else(|| panic!("no process {child_pid}: {report:#}"));
    assert_eq!(child_report["parent_pid"], count(&parent, "pid"));
    for name in ["context", "buffer"] {
        let k = kind(&report, name);
        let made = count(&parent, &format!("{name}s")) + count(&child, &format!("{name}s"));
        assert_eq!(k["created"], made, "{name}: {k}");
        assert_eq!(k["released"], made, "{name}: {k}");
    }
}

#[test]
fn clinfo_under_watch_releases_everything_it_creates() {
    let test = "clinfo_under_watch_releases_everything_it_creates";
    if !opencl_or_skip(test) {
        return;
    }
    let has_clinfo = Command::new("clinfo").arg("-l").output().is_ok();
    if !tool_or_skip(test, has_clinfo, "clinfo") {
        return;
    }
    let _device = device_lock();
    let (out, report) = watch_json(&["clinfo"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_complete(&report, None);
    assert!(
        report["calls"].as_u64().unwrap_or(0) > 0,
        "no call seen: {report:#}"
    );
    let contexts = kind(&report, "context");
    assert!(contexts["created"].as_u64().unwrap_or(0) > 0);
    for k in report["kinds"].as_array().expect("kinds") {
        assert_eq!(k["alive_at_exit"], 0, "clinfo releases all it makes: {k}");
        assert_eq!(k["created"], k["released"], "{k}");
    }
    assert!(
        report["warnings"].as_array().is_some_and(|w| w.is_empty()),
        "{report:#}"
    );
}

/// Every report says what observing cost, from the agent's own timing of
/// one call in 16: the calls it saw, those it timed, its time inside them
/// beside the program's, and whether anything was dropped.
#[test]
fn the_report_says_what_observing_cost_the_program() {
    let test = "the_report_says_what_observing_cost_the_program";
    let Some((_dir, exe)) = program(test, "forgotten_events") else {
        return;
    };
    let exe = exe.to_string_lossy().into_owned();
    let _device = device_lock();
    let (out, report) = watch_json(&[exe.as_str(), "40", "1", "release"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_complete(&report, None);
    let cost = &report["observer"];
    let calls = cost["calls"].as_u64().expect("calls");
    assert_eq!(cost["calls"], report["calls"], "{cost:#}");
    assert_eq!(cost["every"], 16);
    // One thread: every 16th of the calls that go through a hook's record.
    let timed = cost["calls_timed"].as_u64().expect("timed");
    assert!(timed >= 1 && timed <= calls / 16 + 1, "{cost:#}");
    assert_eq!(cost["launches"], 0);
    assert!(
        cost["call_ns"].as_f64().is_some_and(|ns| ns > 0.0),
        "{cost:#}"
    );
    let (agent, api) = (
        cost["agent_ms"].as_f64().expect("agent"),
        cost["api_ms"].as_f64().expect("api"),
    );
    assert!(agent > 0.0 && agent < api, "{cost:#}");
    assert_eq!(cost["dropped"], 0);
    let verdict = cost["verdict"].as_str().expect("verdict");
    assert!(verdict.starts_with("observing added about "), "{verdict}");
    assert!(
        verdict.contains("an OpenCL hook's work after the driver returned"),
        "{verdict}"
    );
    assert!(
        verdict.contains("nothing dropped: every call and object above was recorded"),
        "{verdict}"
    );
    // And what the agents and gpulab read of the device, and where.
    assert!(
        verdict.contains("gpulab read it") && verdict.ends_with("from its own process"),
        "{verdict}"
    );
}

#[test]
fn a_c_program_that_forgets_its_kernel_events_is_counted_exactly() {
    let test = "a_c_program_that_forgets_its_kernel_events_is_counted_exactly";
    let Some((_dir, exe)) = program(test, "forgotten_events") else {
        return;
    };
    let exe = exe.to_string_lossy().into_owned();
    let _device = device_lock();
    for release in [false, true] {
        let mut args = vec![exe.as_str(), "4", "1"];
        if release {
            args.push("release");
        }
        let (out, report) = watch_json(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_complete(&report, None);
        let own = counts(&stderr(&out), "forgotten_events:");
        let iterations = count(&own, "iterations");
        let per_kind = count(&own, "objects_created") / 5;
        assert_eq!(per_kind, iterations);
        for name in ["context", "queue", "buffer", "program", "kernel"] {
            let k = kind(&report, name);
            assert_eq!(k["created"], iterations, "{name}: {k}");
            assert_eq!(
                k["released"],
                count(&own, "objects_released") / 5,
                "{name}: {k}"
            );
            assert_eq!(k["alive_at_exit"], 0, "{name}: {k}");
        }
        let events = kind(&report, "event");
        assert_eq!(events["created"], count(&own, "events_created"));
        assert_eq!(events["released"], count(&own, "events_released"));
        let forgotten = count(&own, "events_created") - count(&own, "events_released");
        assert_eq!(events["alive_at_exit"], forgotten);
        let alive = report["alive_at_exit"].as_array().expect("alive_at_exit");
        if forgotten > 0 {
            assert_eq!(alive.len(), 1, "{alive:?}");
            assert_eq!(alive[0]["kind"], "event");
            assert_eq!(alive[0]["count"], forgotten);
            assert_eq!(alive[0]["created_by"], "clEnqueueNDRangeKernel");
        } else {
            assert!(alive.is_empty(), "{alive:?}");
        }
        // Whatever the driver kept past a release is named with what pins it, and
        // only an object the program still holds can pin one.
        for held in report["held_by_driver"].as_array().expect("held_by_driver") {
            if release {
                assert!(
                    held["pinned_by"].as_array().is_some_and(|p| p.is_empty()),
                    "{held}"
                );
            }
        }
    }
}

/// `--backtrace` names where the program made what it left alive: the source
/// line of its `clEnqueueNDRangeKernel` call (read from the C file, not
/// assumed), as the innermost frame, with the loader's and the agent's own
/// frames left out.
#[test]
fn backtraces_name_the_source_line_that_made_each_leak() {
    let test = "backtraces_name_the_source_line_that_made_each_leak";
    let Some((_dir, exe)) = program(test, "forgotten_events") else {
        return;
    };
    let source = std::fs::read_to_string(repo_file("tests/watch/forgotten_events.c"))
        .expect("the C program's source");
    let line = 1 + source
        .lines()
        .position(|l| l.contains("clEnqueueNDRangeKernel(q,"))
        .expect("the program enqueues its kernel");
    let _device = device_lock();
    let exe = exe.to_string_lossy().into_owned();
    let (out, report) = watch_json_with(&["--backtrace"], &[exe.as_str(), "3", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_complete(&report, None);
    let alive = report["alive_at_exit"].as_array().expect("alive_at_exit");
    assert_eq!(alive.len(), 1, "one call site made them: {alive:?}");
    let frames = alive[0]["backtrace"].as_array().expect("a backtrace");
    assert_eq!(frames[0]["function"], "main", "{frames:#?}");
    let at = frames[0]["location"].as_str().unwrap_or_default();
    assert!(
        at.ends_with(&format!("forgotten_events.c:{line}")),
        "{at}: {frames:#?}"
    );
    assert!(
        frames[0]["module"].as_str() == Some(exe.as_str()),
        "{frames:#?}"
    );
    assert!(frames.len() > 1, "the whole stack: {frames:#?}");
    // Without the flag, the calling frame alone, of what holds memory (not of
    // events, made at every launch): who made each buffer.
    let frames_of_buffers = |flags: &[&str]| {
        let dir = common::temp_dir();
        let file = dir.path().join("r.jsonl");
        let out = gpulab()
            .args(["watch", "-o", "/dev/null", "--record"])
            .arg(&file)
            .args(flags)
            .args(["--", exe.as_str(), "1", "1"])
            .output()
            .expect("gpulab starts");
        assert!(out.status.success(), "{}", stderr(&out));
        let text = std::fs::read_to_string(&file).expect("recorded");
        let events = gpulab::trace::read_events(text.as_bytes()).expect("it reads");
        let stacks: std::collections::BTreeMap<u64, Vec<gpulab::trace::Frame>> = events
            .iter()
            .filter_map(|e| match e {
                gpulab::trace::Event::Stack(s) => Some((s.id, s.frames.clone())),
                _ => None,
            })
            .collect();
        events
            .iter()
            .filter_map(|e| match e {
                gpulab::trace::Event::Object(o)
                    if o.kind == gpulab::trace::ObjKind::Buffer
                        && o.action == gpulab::trace::ObjectAction::Created =>
                {
                    Some(o.stack.and_then(|id| stacks.get(&id).cloned()))
                }
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let plain = frames_of_buffers(&[]);
    assert!(!plain.is_empty());
    for frames in &plain {
        let frames = frames.as_ref().expect("a buffer's calling frame");
        assert_eq!(frames.len(), 1, "{frames:#?}");
        assert_eq!(frames[0].function.as_deref(), Some("main"), "{frames:#?}");
    }
    // With none asked for, no stacks are taken.
    assert!(
        frames_of_buffers(&["--backtrace=off"])
            .iter()
            .all(Option::is_none)
    );
}

/// The line (from 1) of `source` that ends with `mark`.
pub(crate) fn line_marked(source: &str, mark: &str) -> usize {
    1 + source
        .lines()
        .position(|l| l.ends_with(mark))
        .unwrap_or_else(|| panic!("no line marked {mark}"))
}

/// The groups alive at exit named by a Python frame, as `function
/// (file:line)` with their counts, sorted.
fn python_named(report: &Value) -> Vec<(String, u64)> {
    let mut named: Vec<(String, u64)> = report["alive_at_exit"]
        .as_array()
        .expect("alive_at_exit")
        .iter()
        .filter(|g| g["backtrace"][0]["python"] == true)
        .map(|g| {
            let f = &g["backtrace"][0];
            let at = format!(
                "{} ({})",
                f["function"].as_str().unwrap_or("?"),
                f["location"].as_str().unwrap_or("?")
            );
            (at, g["count"].as_u64().unwrap_or(0))
        })
        .collect();
    named.sort();
    named
}

/// The Python with pyopencl and numpy the pyopencl tests run (Debian's,
/// as CI installs it), or None when the test is skipped for want of it.
fn pyopencl_python(test: &str) -> Option<&'static str> {
    if !opencl_or_skip(test) {
        return None;
    }
    let python = "/usr/bin/python3";
    let has = Command::new(python)
        .args(["-c", "import pyopencl, numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    tool_or_skip(
        test,
        has,
        "pyopencl for /usr/bin/python3 (python3-pyopencl)",
    )
    .then_some(python)
}

#[test]
fn a_pyopencl_program_keeps_its_events_alive_while_it_runs() {
    let test = "a_pyopencl_program_keeps_its_events_alive_while_it_runs";
    let Some(python) = pyopencl_python(test) else {
        return;
    };
    let _device = device_lock();
    let script = repo_file("tests/watch/leaky_events.py");
    let (out, report) = watch_json(&[python, &script.to_string_lossy(), "30"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_complete(&report, None);
    let launches = count(&counts(&stderr(&out), "leaky_events:"), "launches");
    let events = kind(&report, "event");
    assert!(
        events["peak_alive"].as_u64().unwrap_or(0) >= launches,
        "the kept events were alive together: {events}"
    );
    assert_eq!(
        events["created"],
        events["released"].as_u64().unwrap_or(0) + events["alive_at_exit"].as_u64().unwrap_or(0)
    );
}

/// Issue #48: a pyopencl program's leaks are named by the lines of the
/// script that made them (the innermost frame of its own code, past
/// pyopencl's Python where the buffer was made inside it), in the JSON, the
/// text and `--fail-on`'s message; with `--backtrace`, every Python frame
/// before the native ones.
#[test]
fn a_pyopencl_leak_is_named_by_the_line_of_the_script_that_made_it() {
    let test = "a_pyopencl_leak_is_named_by_the_line_of_the_script_that_made_it";
    let Some(python) = pyopencl_python(test) else {
        return;
    };
    let _device = device_lock();
    let script = repo_file("tests/watch/pyopencl_lines.py");
    let source = std::fs::read_to_string(&script).expect("the script");
    let line_of = |mark: &str| line_marked(&source, mark);
    let path = script.to_string_lossy().into_owned();
    let at = |function: &str, mark: &str| format!("{function} ({path}:{})", line_of(mark));
    let (task, array) = (
        at("make_task", "# task buffer"),
        at("make_array", "# array buffer"),
    );
    let (out, report) = watch_json_with(&["--fail-on", "leak"], &[python, &path, "3"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let buffers: Vec<&Value> = report["alive_at_exit"]
        .as_array()
        .expect("alive_at_exit")
        .iter()
        .filter(|g| g["kind"] == "buffer")
        .collect();
    let named = |g: &Value| {
        let f = &g["backtrace"][0];
        assert_eq!(f["python"], true, "{g:#}");
        format!(
            "{} ({})",
            f["function"].as_str().unwrap_or("?"),
            f["location"].as_str().unwrap_or("?")
        )
    };
    let mut found: Vec<(u64, String)> = buffers
        .iter()
        .map(|g| (g["count"].as_u64().unwrap_or(0), named(g)))
        .collect();
    found.sort();
    assert_eq!(found, [(1, array.clone()), (3, task.clone())]);
    // The native caller is still there, after the Python line.
    assert!(
        buffers.iter().all(|g| g["backtrace"][1]["module"]
            .as_str()
            .is_some_and(|m| m.contains("_cl"))),
        "{buffers:#?}"
    );
    let gate = stderr(&out);
    assert!(
        gate.contains(&format!("3 buffers made by clCreateBuffer at {task}")),
        "{gate}"
    );
    let text = gpulab()
        .args(["watch", "--backtrace", "--", python, &path, "2"])
        .output()
        .expect("gpulab starts");
    let text = stdout(&text) + &stderr(&text);
    // With the whole stack: the function's line, then the loop's that
    // called it, before any native frame.
    let task_frames = text
        .split("made by clCreateBuffer")
        .find(|s| s.contains("make_task"))
        .expect("the task buffers' group");
    let lines: Vec<&str> = task_frames.lines().skip(1).take(3).collect();
    assert!(lines[0].trim() == format!("at {task}"), "{lines:?}");
    assert!(
        lines[1]
            .trim()
            .starts_with(&format!("at <module> ({path}:")),
        "{lines:?}"
    );
}

/// Issue #48 across interpreters: OpenCL through ctypes, so CPython's own
/// frames alone stand between the script and the driver: a function's, a
/// generator's and the module's lines are named in 3.9 to 3.13; an
/// interpreter whose frames gpulab does not read is said to be, and no line
/// is guessed. `/usr/bin/python3` always; the interpreters named in
/// `GPULAB_TEST_PYTHONS` (colon-separated) too.
#[test]
fn every_cpython_names_the_lines_it_can_and_says_when_it_cannot() {
    let test = "every_cpython_names_the_lines_it_can_and_says_when_it_cannot";
    if !opencl_or_skip(test) {
        return;
    }
    let script = repo_file("tests/watch/ctypes_lines.py");
    let path = script.to_string_lossy().into_owned();
    let source = std::fs::read_to_string(&script).expect("the script");
    let line_of = |mark: &str| line_marked(&source, mark);
    let extra = std::env::var("GPULAB_TEST_PYTHONS").unwrap_or_default();
    let pythons: Vec<&str> = std::iter::once("/usr/bin/python3")
        .chain(extra.split(':').filter(|p| !p.is_empty()))
        .collect();
    let _device = device_lock();
    for python in pythons {
        let version = Command::new(python)
            .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
            .output()
            .unwrap_or_else(|e| panic!("{python}: {e}"));
        let version = stdout(&version).trim().to_string();
        let (out, report) = watch_json(&[python, &path, "3"]);
        assert!(out.status.success(), "{python}: {}", stderr(&out));
        let named = python_named(&report);
        let warned = report["warnings"].as_array().is_some_and(|w| {
            w.iter().any(|w| {
                w.as_str()
                    .is_some_and(|w| w.contains("Python lines are not read"))
            })
        });
        if ["3.9", "3.10", "3.11", "3.12", "3.13"].contains(&version.as_str()) {
            let at = |f: &str, mark: &str| format!("{f} ({path}:{})", line_of(mark));
            let mut expected = vec![
                (at("<module>", "# the context"), 1),
                (at("buffers", "# yielded buffer"), 2),
                (at("make_task", "# task buffer"), 3),
            ];
            expected.sort();
            assert_eq!(named, expected, "{python} {version}");
            assert!(!warned, "{python} {version}: {report:#}");
        } else {
            assert!(named.is_empty(), "{python} {version}: {named:?}");
            assert!(warned, "{python} {version}: {report:#}");
        }
    }
}

/// Issue #48's odd sources: the same script run as `python3 -c SOURCE` and as
/// a zipapp. Each frame is named by the file CPython itself gives it (`<string>`,
/// `app.pyz/__main__.py`), as its tracebacks would, with the same lines;
/// nothing is looked up or guessed.
#[test]
fn a_script_from_c_or_a_zipapp_is_named_as_python_names_it() {
    let test = "a_script_from_c_or_a_zipapp_is_named_as_python_names_it";
    if !opencl_or_skip(test) {
        return;
    }
    let python = "/usr/bin/python3";
    let source =
        std::fs::read_to_string(repo_file("tests/watch/ctypes_lines.py")).expect("the script");
    let line_of = |mark: &str| line_marked(&source, mark);
    let dir = common::temp_dir();
    let app = dir.path().join("app");
    std::fs::create_dir(&app).expect("a folder");
    std::fs::write(app.join("__main__.py"), &source).expect("written");
    let pyz = dir.path().join("app.pyz");
    let made = Command::new(python)
        .args(["-m", "zipapp"])
        .arg(&app)
        .arg("-o")
        .arg(&pyz)
        .output()
        .expect("python starts");
    assert!(made.status.success(), "{}", stderr(&made));
    let pyz = pyz.to_string_lossy().into_owned();
    let zipped = format!("{pyz}/__main__.py");
    let _device = device_lock();
    for (args, file) in [
        (
            vec![python, "-c", source.as_str(), "3"],
            "<string>".to_string(),
        ),
        (vec![python, pyz.as_str(), "3"], zipped),
    ] {
        let (out, report) = watch_json(&args);
        assert!(out.status.success(), "{file}: {}", stderr(&out));
        let named = python_named(&report);
        let at = |f: &str, mark: &str| format!("{f} ({file}:{})", line_of(mark));
        let mut expected = vec![
            (at("<module>", "# the context"), 1),
            (at("buffers", "# yielded buffer"), 2),
            (at("make_task", "# task buffer"), 3),
        ];
        expected.sort();
        assert_eq!(named, expected, "{file}");
    }
}

#[test]
fn a_program_that_never_calls_opencl_gets_a_warning_not_a_clean_ledger() {
    let out = gpulab()
        .args(["watch", "--", "sh", "-c", "exit 7"])
        .output()
        .expect("gpulab starts");
    assert_eq!(
        out.status.code(),
        Some(7),
        "the program's status passes through"
    );
    let err = stderr(&out);
    assert!(err.contains("the agent never reported"), "{err}");
    assert!(err.contains("exited with status 7"), "{err}");
}

#[test]
fn a_missing_program_is_a_clear_error() {
    let out = gpulab()
        .args(["watch", "--", "/nonexistent/gpulab-test-program"])
        .output()
        .expect("gpulab starts");
    // 127, as env, timeout and shells say "not found" (it was 2, which the
    // program's own 2 looked like).
    assert_eq!(out.status.code(), Some(127));
    assert!(
        stderr(&out).contains("cannot start /nonexistent/gpulab-test-program"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_watch_recording_reports_as_the_watch_did() {
    let test = "a_watch_recording_reports_as_the_watch_did";
    let Some((dir, exe)) = program(test, "forgotten_events") else {
        return;
    };
    let file = dir.path().join("watch.jsonl");
    let _device = device_lock();
    let report_file = dir.path().join("watch.json");
    let out = gpulab()
        .arg("watch")
        .arg("--json")
        .arg("-o")
        .arg(&report_file)
        .arg("--record")
        .arg(&file)
        .arg("--")
        .arg(&exe)
        .args(["2", "1"])
        .output()
        .expect("gpulab starts");
    assert!(out.status.success(), "{}", stderr(&out));
    let live = report_json_file(&report_file);
    let replayed = gpulab()
        .arg("report")
        .arg(&file)
        .arg("--json")
        .output()
        .expect("gpulab starts");
    let replayed: Value = serde_json::from_str(&stdout(&replayed)).expect("json");
    for key in [
        "kinds",
        "alive_at_exit",
        "held_by_driver",
        "processes",
        "calls",
        "exit_code",
    ] {
        assert_eq!(live[key], replayed[key], "{key}");
    }
    // The page to share holds the same report and the program's calls.
    let page = dir.path().join("watch.html");
    let out = gpulab()
        .arg("export")
        .arg(&file)
        .arg("--html")
        .arg(&page)
        .output()
        .expect("gpulab starts");
    assert!(out.status.success(), "{}", stderr(&out));
    let Some(browser) = common::browser::find(test) else {
        return;
    };
    let (dom, console) = common::browser::open(&browser, &page);
    assert!(console.is_empty(), "console said {console:?}");
    for call in [
        "clCreateContext",
        "clEnqueueNDRangeKernel",
        "clReleaseContext",
    ] {
        assert!(
            dom.contains(&format!("<td><code>{call}</code></td>")),
            "{call} not in the calls table"
        );
    }
    let calls = live["calls"].as_u64().expect("a call count");
    assert!(
        dom.contains(&format!("{calls} calls (0 failed)")),
        "the watch report is on the page"
    );
}

/// `gpulab report --json FILE`.
fn report_json(file: &Path) -> Value {
    let out = gpulab()
        .args(["report", "--json"])
        .arg(file)
        .output()
        .expect("gpulab starts");
    assert!(out.status.success(), "{}: {}", file.display(), stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("JSON")
}

/// The H100 watch recordings (NVIDIA OpenCL, the C program above) report what
/// their own events say: each context released but never destroyed is listed as
/// held by the driver, with what pins it; the released variant holds none.
#[test]
fn the_shipped_h100_watch_recordings_report_what_their_events_say() {
    for name in ["forgotten-events--forgotten", "forgotten-events--released"] {
        let file = repo_file(&format!("assets/watch-recordings/nvidia-h100/{name}.jsonl"));
        let text = std::fs::read_to_string(&file).expect("a shipped recording");
        let events = gpulab::trace::read_events(text.as_bytes()).expect("it reads");
        let run = gpulab::run::Run::from_events(&events);
        let held_contexts = run
            .ledger()
            .values()
            .filter(|o| {
                o.kind == gpulab::trace::ObjKind::Context
                    && o.released_ns.is_some()
                    && !o.destroyed()
            })
            .count();
        let report = report_json(&file);
        let held: Vec<&Value> = report["held_by_driver"]
            .as_array()
            .expect("a list")
            .iter()
            .filter(|h| h["kind"] == "context")
            .collect();
        assert_eq!(held.len(), held_contexts, "{name}");
        for h in held {
            assert!(
                h["pinned_by"].as_array().is_some_and(|p| !p.is_empty()),
                "{name}: {h}"
            );
        }
        assert_eq!(report["memory_source"], "nvml", "{name}");
        assert_complete(&report, None);
    }
}

/// The H100 CUDA watch recordings (the nvcc leak program, PyTorch, CuPy) report
/// what their events say: per kind, created and released equal the object
/// records in the file, and the agent was complete.
#[test]
fn the_shipped_h100_cuda_watch_recordings_report_what_their_events_say() {
    use gpulab::trace::{Event, ObjectAction};
    for name in [
        "cuda-leaks",
        "torch-cache",
        "cupy-pool",
        "cuda-free-wait--spans",
    ] {
        let file = repo_file(&format!("assets/watch-recordings/nvidia-h100/{name}.jsonl"));
        let text = std::fs::read_to_string(&file).expect("a shipped recording");
        let events = gpulab::trace::read_events(text.as_bytes()).expect("it reads");
        let mut expected: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
        for e in &events {
            if let Event::Object(o) = e {
                let k = expected.entry(o.kind.as_str().to_string()).or_default();
                match o.action {
                    ObjectAction::Created => k.0 += 1,
                    ObjectAction::Released if o.refcount == 0 => k.1 += 1,
                    _ => {}
                }
            }
        }
        let report = report_json(&file);
        assert_complete(&report, None);
        assert!(
            report["processes"][0]["apis"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x == "cuda")),
            "{name}: {report:#}"
        );
        for (kind_name, (created, released)) in expected {
            let k = kind(&report, &kind_name);
            assert_eq!(k["created"], created, "{name} {kind_name}");
            assert_eq!(k["released"], released, "{name} {kind_name}");
        }
    }
}

/// A `gpulab watch` inside another one loaded both agents, and both wrote into
/// the inner pipe: every count doubled. The inner watch now takes the program's
/// agent over and says so.
#[test]
fn a_nested_watch_counts_each_call_once_and_says_it_took_the_agent_over() {
    let test = "a_nested_watch_counts_each_call_once_and_says_it_took_the_agent_over";
    let Some((dir, exe)) = program(test, "forgotten_events") else {
        return;
    };
    let _device = device_lock();
    let inner = dir.path().join("inner.json");
    let gpulab = common::gpulab_exe();
    let (out, _outer) = watch_json(&[
        &gpulab.to_string_lossy(),
        "watch",
        "--json",
        "-o",
        &inner.to_string_lossy(),
        "--",
        &exe.to_string_lossy(),
        "2",
        "1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = report_json_file(&inner);
    let own = counts(&stderr(&out), "forgotten_events:");
    let k = kind(&report, "buffer");
    assert_eq!(k["created"], count(&own, "iterations"), "{report:#}");
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("took the program's agent over"),
        "{warnings}"
    );
}

fn report_json_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("no report in {path:?} ({e})"))
}

/// A CUDA program that filled an H200 (`tests/watch/cuda_oom.cu`, recorded
/// there): its report opens with the call the driver refused and who held the
/// memory then, every byte of the program's reading in a named share.
#[test]
fn an_out_of_memory_leads_the_report_with_the_refused_call_and_its_holders() {
    let file = repo_file("assets/watch-recordings/nvidia-h200/cuda-oom.jsonl");
    let out = gpulab()
        .arg("report")
        .arg(&file)
        .output()
        .expect("gpulab starts");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lead: Vec<&str> = text.lines().skip(2).take(6).collect();
    // The command line the program was given asked for 8 GiB blocks.
    assert!(
        lead[0].starts_with("ran out of memory: cuMemAlloc of 8192.0 MiB")
            && lead[0].contains("CUDA_ERROR_OUT_OF_MEMORY"),
        "{text}"
    );
    assert!(
        lead[1].trim_start().starts_with("at "),
        "its calling frame: {text}"
    );
    assert!(lead[2].contains("the driver said"), "{text}");
    assert!(lead[3].contains("free of"), "{text}");
    let json = gpulab()
        .args(["report", "--json"])
        .arg(&file)
        .output()
        .expect("gpulab starts");
    let report: Value = serde_json::from_slice(&json.stdout).expect("json");
    let held = &report["ran_out"]["holders"];
    let total = held["total_bytes"].as_u64().expect("a reading");
    let shares = ["objects_held_bytes", "reserves_held_bytes"]
        .iter()
        .map(|k| held[k].as_u64().unwrap_or(0))
        .sum::<u64>();
    assert!(total > 100 << 30, "{held}");
    assert_eq!(
        held["unexplained_bytes"].as_i64(),
        Some(total as i64 - shares as i64)
    );
    // The recording's own numbers, not a figure written here: every byte
    // of the reading falls in a share.
    assert!(
        held["unexplained_bytes"]
            .as_i64()
            .is_some_and(|u| u.abs() < 4 << 20),
        "{held}"
    );
}

/// Another process held most of the H200 when this one ran out
/// (`tests/watch/cuda_oom.cu hold 122880` beside `cuda_oom 4096`): the report
/// names it with the bytes NVML's list gave it in the recording.
#[test]
fn an_out_of_memory_on_a_shared_card_names_the_other_processes() {
    use gpulab::trace::Event;
    let file = repo_file("assets/watch-recordings/nvidia-h200/cuda-oom--shared-card.jsonl");
    let text = std::fs::read_to_string(&file).expect("a shipped recording");
    let events = gpulab::trace::read_events(text.as_bytes()).expect("it reads");
    let listed: Vec<(u32, Option<u64>)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Sample(s) => s.others.clone(),
            _ => None,
        })
        .next_back()
        .expect("the recording lists the other processes")
        .iter()
        .map(|o| (o.pid, o.bytes))
        .collect();
    assert!(!listed.is_empty());
    let report = report_json(&file);
    let named: Vec<(u32, Option<u64>)> = report["ran_out"]["other_processes"]
        .as_array()
        .expect("other processes")
        .iter()
        .map(|o| (o["pid"].as_u64().expect("pid") as u32, o["bytes"].as_u64()))
        .collect();
    assert_eq!(named, listed);
    let out = gpulab()
        .arg("report")
        .arg(&file)
        .output()
        .expect("gpulab starts");
    let lead = stdout(&out);
    let line = lead
        .lines()
        .find(|l| l.contains("other processes on the device then"))
        .unwrap_or_else(|| panic!("{lead}"));
    assert!(line.contains(&format!("(pid {})", listed[0].0)), "{line}");
}

/// A job launched as torchrun and mpirun launch one (fork and exec per rank,
/// the rank in the environment): the report has each rank with its own pid,
/// and what each rank left alive is its own.
#[test]
fn each_rank_of_a_job_is_reported_with_what_it_left_alive() {
    let test = "each_rank_of_a_job_is_reported_with_what_it_left_alive";
    let Some((_dir, exe)) = program(test, "ranks") else {
        return;
    };
    let _device = device_lock();
    let (out, report) = watch_json(&[&exe.to_string_lossy(), "2"]);
    assert_eq!(report["exit_code"], 0, "{}\n{report:#}", stderr(&out));
    assert_complete(&report, None);
    let text = stderr(&out);
    let ranks = report["ranks"].as_array().expect("ranks");
    assert_eq!(ranks.len(), 2, "{report:#}");
    for (i, r) in ranks.iter().enumerate() {
        let said = text
            .lines()
            .find(|l| l.starts_with(&format!("ranks: rank={i} ")))
            .unwrap_or_else(|| panic!("rank {i} said nothing: {text}"));
        let said = counts(said, "ranks:");
        assert_eq!(r["rank"]["rank"], i, "{r}");
        assert_eq!(r["rank"]["world_size"], 2, "{r}");
        assert_eq!(r["rank"]["from"], "RANK", "{r}");
        assert_eq!(r["pid"], count(&said, "pid"), "{r}");
        // What it left alive is its own: by its pid, its bytes.
        let kept: u64 = report["alive_at_exit"]
            .as_array()
            .expect("alive_at_exit")
            .iter()
            .filter(|g| g["pid"] == r["pid"] && g["kind"] == "buffer")
            .map(|g| g["bytes"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(kept, count(&said, "kept"), "rank {i}: {report:#}");
        assert_eq!(r["objects_at_end_bytes"], count(&said, "kept"), "{r}");
    }
    // The launcher is a process of the program, with no rank and no GPU:
    // not a line of its own.
    assert!(ranks.iter().all(|r| r["rank"].is_object()), "{report:#}");
}

/// `--fail-on leak`: a CI job fails on what the report finds, on PoCL: the
/// program that forgets its events exits 0 and gpulab 1, naming the leak; the
/// same program releasing everything passes every gate.
#[test]
fn fail_on_turns_what_the_report_finds_into_an_exit_status() {
    let test = "fail_on_turns_what_the_report_finds_into_an_exit_status";
    let Some((dir, exe)) = program(test, "forgotten_events") else {
        return;
    };
    let _device = device_lock();
    let report_file = dir.path().join("report.json");
    let run = |extra: &[&str]| {
        gpulab()
            .arg("watch")
            .args(["--json", "--fail-on", "leak,oom,error", "-o"])
            .arg(&report_file)
            .arg("--")
            .arg(&exe)
            .args(["2", "1"])
            .args(extra)
            .output()
            .expect("gpulab starts")
    };
    let leaky = run(&[]);
    assert_eq!(leaky.status.code(), Some(1), "{}", stderr(&leaky));
    assert!(
        stderr(&leaky).contains("gpulab: --fail-on: leak: alive at exit"),
        "{}",
        stderr(&leaky)
    );
    // The report is still whole.
    let report = report_json_file(&report_file);
    assert!(
        !report["alive_at_exit"]
            .as_array()
            .expect("a list")
            .is_empty()
    );
    let clean = run(&["release"]);
    assert_eq!(clean.status.code(), Some(0), "{}", stderr(&clean));
    assert!(!stderr(&clean).contains("--fail-on"), "{}", stderr(&clean));
}

/// `-o -`: the report on stdout once the program has ended (`| jq`), and no
/// file named `-`.
#[test]
fn a_report_to_dash_goes_to_stdout_after_the_program() {
    let dir = common::temp_dir();
    let out = gpulab()
        .current_dir(dir.path())
        .args(["watch", "--json", "-o", "-", "--", "sh", "-c", "exit 0"])
        .output()
        .expect("gpulab starts");
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).expect("the JSON report on stdout");
    assert_eq!(report["kind"], "watch");
    assert!(!dir.path().join("-").exists(), "a file named - was made");
}

/// A watched program sees the OpenCL platforms it sees bare (#44): gpulab
/// registers an installed but unregistered NVIDIA ICD for its own labs, never
/// for a program it watches (a program that takes the first platform ran on
/// PoCL bare and on the H200 watched). PoCL's library, linked as
/// `libnvidia-opencl.so.1` into a folder on `LD_LIBRARY_PATH`, stands in for
/// NVIDIA's: gpulab's own `doctor` sees one platform more than `clinfo` does
/// bare, and `clinfo -l` under watch lists what it lists bare, with a note.
#[test]
fn a_watched_program_sees_the_platforms_it_sees_bare() {
    let test = "a_watched_program_sees_the_platforms_it_sees_bare";
    if !opencl_or_skip(test) {
        return;
    }
    let bare = Command::new("clinfo").arg("-l").output();
    if !tool_or_skip(test, bare.is_ok(), "clinfo") {
        return;
    }
    let bare = stdout(&bare.unwrap());
    let icd = std::fs::read_to_string("/etc/OpenCL/vendors/pocl.icd").unwrap_or_default();
    let named = icd.lines().next().unwrap_or_default().trim().to_string();
    let pocl = [
        "",
        "/usr/lib/x86_64-linux-gnu/",
        "/usr/lib/aarch64-linux-gnu/",
        "/usr/lib64/",
        "/usr/lib/",
    ]
    .iter()
    .map(|d| std::path::PathBuf::from(format!("{d}{named}")))
    .find(|p| p.is_absolute() && p.is_file());
    let Some(pocl) = pocl.filter(|_| tool_or_skip(test, !named.is_empty(), "PoCL's .icd file"))
    else {
        return;
    };
    let _device = device_lock();
    let dir = common::temp_dir();
    std::os::unix::fs::symlink(&pocl, dir.path().join("libnvidia-opencl.so.1")).unwrap();
    let with_fake_nvidia = |args: &[&str]| {
        gpulab()
            .args(args)
            .env("LD_LIBRARY_PATH", dir.path())
            .env_remove("OCL_ICD_VENDORS")
            .env_remove("OCL_ICD_FILENAMES")
            .env_remove("GPULAB_ICD_ADDED")
            .output()
            .expect("gpulab runs")
    };
    let doctor: Value =
        serde_json::from_str(&stdout(&with_fake_nvidia(&["doctor", "--json"]))).unwrap();
    let seen_bare = bare.matches("Platform #").count();
    assert_eq!(
        doctor["opencl_devices"].as_array().map(Vec::len),
        Some(seen_bare + 1),
        "gpulab registers the stand-in for itself: {doctor:#}"
    );
    let report = dir.path().join("report.json");
    let report_arg = report.display().to_string();
    let out = with_fake_nvidia(&["watch", "--json", "-o", &report_arg, "--", "clinfo", "-l"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), bare, "the program lists what it lists bare");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("libnvidia-opencl.so.1") && notes.contains("leave NVIDIA's out"),
        "{notes}"
    );
}

/// Threads that make and release buffers while others do (#44): the driver
/// hands a released buffer's handle to the next buffer, sometimes before the
/// releasing thread's call returned. The report must say exactly the buffers
/// the program leaked, every run: booking a release by handle after the call
/// invented leaks and hid real ones (7 of 8 runs with 16 threads).
#[test]
fn threads_that_reuse_handles_get_exactly_their_real_leaks() {
    let test = "threads_that_reuse_handles_get_exactly_their_real_leaks";
    let Some((_dir, exe)) = program(test, "thread_churn") else {
        return;
    };
    let exe = exe.to_string_lossy().into_owned();
    let _device = device_lock();
    common::watch::churn_reports_exactly_its_leaks(&exe, 16, 1500, 2);
}

/// On a CPU device the program's memory is its resident host memory, and a
/// sample lands between PoCL's load and a context made in a millisecond only
/// by luck (`cl_copybuffer`, 45 ms: 21.8% named in one run of five on a
/// loaded host). The agent reads its process's resident memory on each side
/// of the calls that move it by megabytes, so the context's and the build's
/// shares are measured across their own calls, and what PoCL loaded before
/// the first of them is the runtime's, however few samples fell: at one
/// sample a second, every byte of the short program is named (to 10%).
#[test]
fn a_short_program_on_a_cpu_device_is_named_from_the_agents_own_reads() {
    let test = "a_short_program_on_a_cpu_device_is_named_from_the_agents_own_reads";
    let Some((_dir, exe)) = program(test, "forgotten_events") else {
        return;
    };
    let exe = exe.to_string_lossy().into_owned();
    let _device = device_lock();
    let (out, report) =
        watch_json_with(&["--sample-hz", "1"], &[exe.as_str(), "1", "4", "release"]);
    assert!(out.status.success(), "{}", stderr(&out));
    if report["memory_source"] != "rss" {
        return; // a GPU device: its memory is NVML's, not the process's
    }
    let holders = &report["holders"];
    let by_agent = |kind: &str| {
        holders["reserves"].as_array().is_some_and(|all| {
            all.iter()
                .any(|r| r["measured_by"] == "agent" && r["objects"].to_string().contains(kind))
        })
    };
    assert!(by_agent("context"), "{holders:#}");
    assert!(by_agent("program"), "{holders:#}");
    for when in ["at_peak", "at_exit"] {
        let s = &holders[when];
        let total = s["total_bytes"].as_f64().expect("a total");
        let unexplained = s["unexplained_bytes"].as_f64().expect("unexplained");
        assert!(
            unexplained.abs() <= 0.1 * total,
            "{when}: {unexplained} of {total} unexplained: {holders:#}"
        );
    }
}

/// On a CPU device a kernel's first run is compiled in PoCL's own threads
/// while the program waits: the agent reads the process's resident memory
/// across the first wait after it, and says which buffers those kernels were
/// the first to use (their pages are touched then, and are theirs). Each
/// iteration of `forgotten_events` makes a fresh 4 MiB buffer that only its
/// kernel uses, then `clFinish`es.
#[test]
fn a_wait_for_a_kernels_first_run_is_read_with_the_buffers_it_touched_first() {
    let test = "a_wait_for_a_kernels_first_run_is_read_with_the_buffers_it_touched_first";
    let Some((dir, exe)) = program(test, "forgotten_events") else {
        return;
    };
    let exe = exe.to_string_lossy().into_owned();
    let record = dir.path().join("run.jsonl");
    let record_arg = record.to_string_lossy().into_owned();
    let _device = device_lock();
    let (out, _) = watch_json_with(
        &["--record", record_arg.as_str()],
        &[exe.as_str(), "2", "4", "release"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&record).expect("the recording");
    let reads: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "device_read" && e["data"]["api"] == "clFinish")
        .map(|e| e["data"].clone())
        .collect();
    let after: Vec<u64> = reads
        .iter()
        .filter(|r| r["side"] == "after")
        .map(|r| {
            r["first_touched_bytes"]
                .as_u64()
                .expect("first_touched_bytes")
        })
        .collect();
    assert_eq!(after, vec![4 << 20, 4 << 20], "{reads:#?}");
    let before = reads.iter().filter(|r| r["side"] == "before").count();
    assert_eq!(before, 2, "{reads:#?}");
    assert!(
        reads
            .iter()
            .all(|r| r["resident_bytes"].as_u64().is_some_and(|b| b > 0)),
        "{reads:#?}"
    );
}

/// #51: a C program that names objects after its last reference to them is
/// gone (a read of a released buffer, a kernel whose argument was released, a
/// released event in a wait list) gets each named in the report, with the
/// source line of the call (read from the C file) and the object's maker,
/// and `--fail-on misuse` fails on it; the same calls in their right order
/// get none. The driver answered CL_SUCCESS to every one of them.
#[test]
fn a_use_after_release_is_named_with_its_line_and_fails_the_gate() {
    let test = "a_use_after_release_is_named_with_its_line_and_fails_the_gate";
    let Some((_dir, exe)) = program(test, "misuse") else {
        return;
    };
    let exe = exe.to_string_lossy().into_owned();
    let _device = device_lock();
    let source = std::fs::read_to_string(repo_file("tests/watch/misuse.c")).unwrap();
    let read_line = source
        .lines()
        .position(|l| l.contains("/* READ */"))
        .map(|i| i + 1)
        .expect("the READ line");

    let (out, report) = watch_json(&[exe.as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(report["misuse_count"], 4, "{}", report["misuse"]);
    let rows = report["misuse"].as_array().expect("misuse");
    let named: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["what"].as_str().unwrap_or_default().to_string(),
                r["call"].as_str().unwrap_or_default().to_string(),
                r["kind"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let expect = |call: &str, kind: &str| {
        (
            "use_after_release".to_string(),
            call.to_string(),
            kind.to_string(),
        )
    };
    assert_eq!(
        named,
        [
            expect("clEnqueueReadBuffer", "buffer"),
            expect("clSetKernelArg", "buffer"),
            expect("clEnqueueNDRangeKernel", "buffer"),
            expect("clEnqueueBarrierWithWaitList", "event"),
        ]
    );
    // The read's own line, and the buffer's history: made by clCreateBuffer,
    // released before the read.
    let read = &rows[0];
    let at = read["backtrace"][0]["location"]
        .as_str()
        .unwrap_or_default();
    assert!(at.ends_with(&format!("misuse.c:{read_line}")), "{read}");
    assert!(
        read["made_by"]
            .as_str()
            .is_some_and(|m| m.starts_with("clCreateBuffer")),
        "{read}"
    );
    assert!(
        read["released_ms"]
            .as_f64()
            .is_some_and(|r| r <= read["at_ms"].as_f64().unwrap()),
        "{read}"
    );

    // The text report says it; the gate fails on it with its line.
    let text = gpulab()
        .args(["watch", "--fail-on", "misuse", "--", exe.as_str()])
        .output()
        .unwrap();
    assert_eq!(text.status.code(), Some(1), "{}", stderr(&text));
    // The report goes to stderr: stdout is the program's.
    let said = stderr(&text);
    assert!(said.contains("misuse: 4 calls named an object"), "{said}");
    assert!(!said.contains("arrived"), "every record counted: {said}");
    assert!(
        stderr(&text).contains("use after release: clEnqueueReadBuffer named buffer"),
        "{}",
        stderr(&text)
    );
    assert!(
        stderr(&text).contains(&format!("misuse.c:{read_line}")),
        "{}",
        stderr(&text)
    );

    // The same calls in their right order: nothing to say, and the gate passes.
    let (out, report) = watch_json(&[exe.as_str(), "clean"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(report["misuse_count"], 0, "{}", report["misuse"]);
    let clean = gpulab()
        .args(["watch", "--fail-on", "misuse", "--", exe.as_str(), "clean"])
        .output()
        .unwrap();
    assert_eq!(clean.status.code(), Some(0), "{}", stderr(&clean));
}

/// valgrind's --error-exitcode and --suppressions, on the misuses of
/// `misuse.c`: the gate's status is the user's, a rule that matches lets its
/// findings pass and says so, one that matches some leaves the rest failing,
/// and a mistake in a rules file stops gpulab before the program runs.
#[test]
fn the_gate_takes_its_status_and_suppressions_as_valgrind_does() {
    let test = "the_gate_takes_its_status_and_suppressions_as_valgrind_does";
    let Some((dir, exe)) = program(test, "misuse") else {
        return;
    };
    let exe = exe.to_string_lossy().into_owned();
    let _device = device_lock();
    let gate = |extra: &[&str]| {
        gpulab()
            .args(["watch", "--fail-on", "misuse"])
            .args(extra)
            .args(["--", exe.as_str()])
            .output()
            .unwrap()
    };
    let out = gate(&["--error-exitcode", "7"]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));

    let rules = dir.path().join("judged.supp");
    std::fs::write(
        &rules,
        "# the events' waits are judged\nmisuse kind=event call=clEnqueue*\n",
    )
    .unwrap();
    let rules = rules.to_string_lossy().into_owned();
    let out = gate(&["--suppressions", &rules]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("--fail-on: misuse: 3 calls"), "{said}");
    assert!(
        said.contains(&format!("--suppressions: {rules}:2 let 1 finding pass")),
        "{said}"
    );

    std::fs::write(&rules, "misuse frame=misuse.c:*\n").unwrap();
    let out = gate(&["--suppressions", &rules]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("{rules}:1 let 4 findings pass")),
        "{}",
        stderr(&out)
    );
    // The report still lists what the rules let pass.
    assert!(
        stderr(&out).contains("misuse: 4 calls named"),
        "{}",
        stderr(&out)
    );

    std::fs::write(&rules, "misuse\tframe=misuse.c:*\nmisuse coulour=red\n").unwrap();
    let out = gate(&["--suppressions", &rules]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("{rules}:2:8: `coulour` is not a key")),
        "{}",
        stderr(&out)
    );
    assert!(
        !stdout(&out).contains("done"),
        "the program ran: {}",
        stdout(&out)
    );
}

/// A program that releases its objects from a destructor at exit, after
/// glibc ran the main thread's thread-local destructors: the agent's hooks
/// touched a thread-local there and Rust aborted the program (SIGABRT, "cannot
/// access a Thread Local Storage value during or after destruction"), as
/// cuFFT's and CuPy's frees at exit did on the H200. Watched, it ends as
/// bare, says the same, and each release is counted.
#[test]
fn calls_from_a_destructor_at_exit_run_as_bare_and_are_counted() {
    let test = "calls_from_a_destructor_at_exit_run_as_bare_and_are_counted";
    let Some((_dir, exe)) = program(test, "exit_calls") else {
        return;
    };
    let _device = device_lock();
    let bare = Command::new(&exe).output().unwrap();
    assert!(bare.status.success(), "bare: {}", stderr(&bare));
    let exe = exe.to_string_lossy().into_owned();
    let (out, report) = watch_json(&[exe.as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), stdout(&bare));
    assert!(
        !stderr(&out).contains("panicked"),
        "the agent panicked: {}",
        stderr(&out)
    );
    let buffers = kind(&report, "buffer");
    assert_eq!(buffers["created"], 2, "{buffers}");
    assert_eq!(buffers["released"], 2, "{buffers}");
    assert_eq!(report["alive_at_exit"].as_array().map(Vec::len), Some(0));
}
