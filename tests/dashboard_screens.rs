//! Whole dashboard frames and single panels from the fixture recordings, as text
//! snapshots (insta). Deterministic: frames depend on the recorded events only.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use common::dash::{self, app, events, feed, key, keys, open, screen};
use gpulab::trace::{Call, CallStatus, End, EndStatus, Event};
use ratatui::crossterm::event::KeyCode;

const H100_RELEASE: &str = "h100-opencl--cl-premature-release--release-then-finish";
const H100_FINISH: &str = "h100-opencl--cl-premature-release--finish-then-release";
const H100_FORGOTTEN: &str = "h100-opencl--cl-forgotten-events--forgotten";
const POCL_FINISH: &str = "pocl--cl-finish--no-wait";

#[test]
fn h100_recording_full_screens() {
    let mut a = app();
    open(&mut a, H100_RELEASE, false);
    insta::assert_snapshot!("h100_release_80x24", screen(&mut a, 80, 24));
    insta::assert_snapshot!("h100_release_160x48", screen(&mut a, 160, 48));
}

/// What a class sees of the three lessons a teacher opens first, on the
/// shipped H100 recordings, at both sizes, without a key but Enter: the lines
/// the claims measure, the tagged calls labelled on the host lane, and each
/// verdict beside the lesson.
#[test]
fn the_lessons_a_class_sees_at_both_sizes() {
    for (recording, tags, lesson) in [
        (
            "nvidia-h100/cl-finish--no-wait.jsonl",
            &["kernel", "wait"][..],
            "✓ does not hold (as the lesson expects)",
        ),
        (
            "nvidia-h100/cuda-free-async--pipeline-free.jsonl",
            &["free"][..],
            "✓ does not hold (as the lesson expects)",
        ),
        (
            "nvidia-h100/cuda-free-async--pipeline-free-async.jsonl",
            &["free"][..],
            "✓ holds (as the lesson expects)",
        ),
    ] {
        let mut a = app();
        open(&mut a, recording, false);
        for (w, h) in [(80, 24), (160, 48)] {
            let s = screen(&mut a, w, h);
            let host = s
                .lines()
                .find(|l| l.contains("│host "))
                .unwrap_or_else(|| panic!("{recording} {w}x{h}: no host lane\n{s}"));
            for tag in tags {
                assert!(
                    host.contains(tag),
                    "{recording} {w}x{h}: {tag} not labelled: {host}"
                );
            }
            assert!(
                s.contains(lesson),
                "{recording} {w}x{h}: no verdict beside the lesson\n{s}"
            );
            let name = recording
                .trim_end_matches(".jsonl")
                .replace(['/', '-'], "_");
            insta::assert_snapshot!(format!("lesson_{name}_{w}x{h}"), s);
        }
    }
}

#[test]
fn h100_forgotten_events_shows_the_gap_and_its_causes() {
    let mut a = app();
    open(&mut a, H100_FORGOTTEN, false);
    let s = screen(&mut a, 160, 48);
    insta::assert_snapshot!("h100_forgotten_160x48", s);
}

#[test]
fn pocl_recording_full_screens() {
    let mut a = app();
    open(&mut a, POCL_FINISH, false);
    let small = screen(&mut a, 80, 24);
    assert!(
        small.contains("Host memory"),
        "a CPU device says it is host memory"
    );
    insta::assert_snapshot!("pocl_no_wait_80x24", small);
    insta::assert_snapshot!("pocl_no_wait_160x48", screen(&mut a, 160, 48));
}

#[test]
fn compare_mode_puts_two_runs_on_shared_axes() {
    let mut a = app();
    open(&mut a, H100_RELEASE, false);
    open(&mut a, H100_FINISH, true);
    assert!(a.compare);
    insta::assert_snapshot!("compare_80x24", screen(&mut a, 80, 24));
    insta::assert_snapshot!("compare_160x48", screen(&mut a, 160, 48));
}

/// The PoCL recording's events up to (not including) the `n`-th call.
fn first_calls(n: usize) -> Vec<Event> {
    let mut calls = 0;
    let mut out = Vec::new();
    for e in events(POCL_FINISH) {
        if matches!(e, Event::Call(_)) {
            calls += 1;
            if calls > n {
                break;
            }
        }
        out.push(e);
    }
    out
}

#[test]
fn step_mode_highlights_the_line_that_runs_next() {
    let mut a = app();
    dash::select(&mut a, "cl-finish");
    keys(&mut a, "v"); // the recording's variant: no-wait
    let started = keys(&mut a, "s");
    feed(&mut a, &started, &first_calls(3), false);
    let s = screen(&mut a, 160, 48);
    assert!(s.contains("paused (step mode)"), "{s}");
    assert!(s.contains("▶  58"), "the next line is marked:\n{s}");
    insta::assert_snapshot!("step_160x48", s);
    insta::assert_snapshot!("step_80x24", screen(&mut a, 80, 24));
}

#[test]
fn a_failed_lab_shows_the_failing_line_and_why() {
    let mut a = app();
    dash::select(&mut a, "cl-finish");
    keys(&mut a, "v");
    let started = keys(&mut a, "r");
    let mut evs = first_calls(3);
    let t = match evs.iter().rev().find(|e| matches!(e, Event::Call(_))) {
        Some(Event::Call(c)) => c.end_ns,
        _ => 0,
    };
    let failed = Call {
        seq: 3,
        pid: 693,
        line: Some(58),
        api: "clCreateProgramWithSource".into(),
        driver: "clCreateProgramWithSource".into(),
        begin_ns: t + 1_000,
        end_ns: t + 51_000,
        status: CallStatus::Error {
            code: -5,
            name: "CL_OUT_OF_RESOURCES".into(),
        },
        ..Default::default()
    };
    evs.push(Event::Call(failed));
    evs.push(Event::End(End {
        t_ns: t + 60_000,
        status: EndStatus::Failed {
            line: Some(58),
            error: "CL_OUT_OF_RESOURCES (-5)".into(),
        },
        leaked: vec![],
    }));
    feed(&mut a, &started, &evs, true);
    let s = screen(&mut a, 160, 48);
    assert!(s.contains("failed at line 58"), "{s}");
    insta::assert_snapshot!("failed_160x48", s);
}

#[test]
fn a_tiny_terminal_gets_a_clear_message() {
    let mut a = app();
    let s = screen(&mut a, 60, 20);
    assert!(s.contains("at least 80×24"), "{s}");
    insta::assert_snapshot!("tiny_60x20", s);
}

#[test]
fn without_a_device_the_dashboard_says_why_and_offers_recordings() {
    let mut a = app();
    a.update(gpulab::tui::Msg::Doctor(
        gpulab::source::Availability::none(
            "no OpenCL device: libOpenCL.so.1 not found; fix: apt-get install ocl-icd-libopencl1",
        ),
    ));
    let fx = key(&mut a, KeyCode::Enter);
    assert!(fx.is_empty(), "nothing starts without a device");
    let s = screen(&mut a, 80, 24);
    assert!(s.contains("recordings"), "{s}");
    insta::assert_snapshot!("no_device_80x24", s);
}

#[test]
fn help_and_parameter_overlays() {
    let mut a = app();
    keys(&mut a, "?");
    let help = screen(&mut a, 160, 48);
    for b in gpulab::tui::keys::KEYS {
        assert!(help.contains(b.help), "help lists `{}`:\n{help}", b.help);
    }
    insta::assert_snapshot!("help_160x48", help);
    // At 80x24 every key's help is there whole, scrolled into view with PgDn.
    let small = screen(&mut a, 80, 24);
    let mut seen = small.replace(['│', '┃'], " ");
    for _ in 0..10 {
        key(&mut a, KeyCode::PageDown);
        seen.push_str(&screen(&mut a, 80, 24).replace(['\n', '│', '┃'], " "));
    }
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let seen = squash(&seen);
    for b in gpulab::tui::keys::KEYS {
        assert!(
            seen.contains(&squash(b.help)),
            "80x24 help shows `{}` whole",
            b.help
        );
    }
    insta::assert_snapshot!("help_80x24", small);
    key(&mut a, KeyCode::Esc);
    dash::select(&mut a, "cl-finish");
    keys(&mut a, "p");
    key(&mut a, KeyCode::Right);
    insta::assert_snapshot!("params_80x24", screen(&mut a, 80, 24));
}

#[test]
fn a_cuda_pool_that_keeps_freed_memory_is_named_as_the_gap() {
    let mut a = app();
    dash::open(&mut a, "cuda-pool-retention--trim-pending", false);
    let s = screen(&mut a, 160, 48);
    assert!(s.contains("pool cache: 256.0 MiB freed"), "{s}");
    assert!(!s.contains("the program holds nothing"), "{s}");
}

/// A watched program's recording (the H100 run of the C program that forgets its
/// kernels' events): its calls by API where a lab's script would be, the events
/// it still holds counted from the ledger (it writes no list at exit), and the
/// gap's causes naming objects by number.
#[test]
fn a_watched_programs_recording_shows_its_calls_and_what_it_holds() {
    let mut a = app();
    a.add_recording(std::path::PathBuf::from(
        "assets/watch-recordings/nvidia-h100/forgotten-events--forgotten.jsonl",
    ));
    open(&mut a, "nvidia-h100/forgotten-events--forgotten", false);
    let s = screen(&mut a, 160, 48);
    assert!(s.contains("Calls · "), "{s}");
    assert!(s.contains("clEnqueueNDRangeKernel"), "{s}");
    assert!(s.contains("live event #6 refers to released"), "{s}");
    // The agent watches context deletion: none at all is itself the finding.
    assert!(s.contains("context #1 released, not destroyed"), "{s}");
    // Where a lab's verdicts would be: what it holds, and what pins what the
    // driver still holds for it.
    assert!(s.contains("What the program holds, and why"), "{s}");
    // The four pinned contexts of the recording in one line, with the bytes
    // their reserves hold and the chain of kinds that pins them.
    assert!(
        s.contains("4 contexts released, not deleted by the driver: 2072.00 MiB"),
        "{s}"
    );
    assert!(s.contains("event -> queue, made by clCreateContext"), "{s}");
    insta::assert_snapshot!("watch_forgotten_160x48", s);
}

/// The misuses of a watched program are in its panel as in its report: each
/// call, what it named and where it was made (`misuse.c` on PoCL: a read of a
/// released buffer, the buffer set as an argument, a wait on a released
/// event). The dashboard showed none of them.
#[test]
fn a_watched_programs_misuses_are_in_its_panel() {
    let mut a = app();
    a.add_recording(std::path::PathBuf::from(
        "tests/fixtures/corpus-pocl/misuse-c.jsonl",
    ));
    open(&mut a, "misuse-c", false);
    let s = screen(&mut a, 200, 60);
    assert!(
        s.contains("misuse: use after release: clEnqueueReadBuffer named buffer"),
        "{s}"
    );
    assert!(s.contains("at main (/"), "{s}");
    assert!(
        s.contains("misuse: use after release: clEnqueueBarrierWithWaitList named event"),
        "{s}"
    );
}

/// A Python program the driver refused (CuPy on the H200, issue #48): the
/// findings lead with the refused call, the script's line that asked, and
/// what the process held then by the line that made it.
#[test]
fn a_refused_python_program_leads_its_findings_with_the_line_that_asked() {
    let mut a = app();
    open(&mut a, "nvidia-h200/cupy-oom--lines", false);
    let s = screen(&mut a, 160, 48);
    let findings: Vec<&str> = s
        .lines()
        .skip_while(|l| !l.contains("What the program holds"))
        .collect();
    let text = findings.join("\n");
    assert!(
        findings.get(1).is_some_and(
            |l| l.contains("ran out of memory: cuMemAlloc of 8192.0 MiB, through CuPy")
        ),
        "{s}"
    );
    assert!(
        text.contains("at <module> (/work/main/tests/watch/cupy_oom.py:19)"),
        "{s}"
    );
    assert!(
        text.contains("17 buffers       139264.00 MiB, through CuPy at <module>"),
        "{s}"
    );
}

/// PyTorch's refusal recorded under `--torch-history`: the findings say its
/// tensors alive then by the line that allocated them, the most first.
#[test]
fn a_refusal_under_torch_history_shows_its_tensors_by_line() {
    let mut a = app();
    open(&mut a, "nvidia-h200/torch-oom--history", false);
    let s = screen(&mut a, 200, 60);
    let findings: Vec<&str> = s
        .lines()
        .skip_while(|l| !l.contains("What the program holds"))
        .collect();
    let text = findings.join("\n");
    let heading = text
        .find("PyTorch's tensors alive as it refused")
        .unwrap_or_else(|| panic!("{s}"));
    let first = text[heading..]
        .find("20 tensors at activations (/work/main/tests/watch/torch_oom.py:22)")
        .unwrap_or_else(|| panic!("{s}"));
    let second = text[heading..]
        .find("21 tensors at activations (/work/main/tests/watch/torch_oom.py:21)")
        .unwrap_or_else(|| panic!("{s}"));
    assert!(first < second, "{s}");
}

/// The torchrun job recorded on two H200s (NCCL between them, rank 1 out of
/// memory): one lane per GPU with its rank, and `n` shows one rank alone in
/// the objects and findings panels, then every rank again.
#[test]
fn a_watched_job_has_a_lane_per_gpu_and_n_shows_one_rank() {
    let mut a = app();
    a.add_recording(std::path::PathBuf::from(
        "assets/watch-recordings/nvidia-h200-x2/torchrun-oom.jsonl",
    ));
    open(&mut a, "nvidia-h200-x2/torchrun-oom", false);
    let s = screen(&mut a, 160, 48);
    assert!(s.contains("Device memory per GPU"), "{s}");
    assert!(s.contains("GPU 0 NVIDIA H200"), "{s}");
    assert!(s.contains("GPU 1 NVIDIA H200"), "{s}");
    assert!(s.contains("■r0") && s.contains("■r1"), "{s}");
    insta::assert_snapshot!("watch_job_160x48", s);
    keys(&mut a, "n");
    let rank0 = screen(&mut a, 160, 48);
    assert!(rank0.contains("Live objects (ledger) · r0"), "{rank0}");
    assert!(!rank0.contains("rank 1 of 2"), "rank 1 is hidden: {rank0}");
    keys(&mut a, "n");
    let rank1 = screen(&mut a, 160, 48);
    assert!(rank1.contains("Live objects (ledger) · r1"), "{rank1}");
    assert!(rank1.contains("rank 1 of 2"), "{rank1}");
    assert!(rank1.contains("ran out first"), "{rank1}");
    insta::assert_snapshot!("watch_job_rank1_160x48", rank1);
    keys(&mut a, "n");
    let all = screen(&mut a, 160, 48);
    assert!(all.contains("Live objects (ledger) "), "{all}");
    let small = screen(&mut a, 80, 24);
    insta::assert_snapshot!("watch_job_80x24", small);
}

/// Issue #47: while a process's agent does not watch its launches (they
/// repeat), the status line says so; once the process ended, it does not.
/// The torchrun recording, with rank 0's agent turning launches off after it
/// attached, cut before anything ended (as the dashboard sees it mid-run).
#[test]
fn the_status_line_says_while_repeated_launches_go_unwatched() {
    use gpulab::trace::{AgentEvent, AgentState, LaunchesWhy, read_events, to_line};
    let path = common::repo_file("assets/watch-recordings/nvidia-h200-x2/torchrun-oom.jsonl");
    let file = std::fs::File::open(path).expect("the recording");
    let mut all = read_events(std::io::BufReader::new(file)).expect("it reads");
    let at = all
        .iter()
        .position(|e| {
            matches!(e, Event::Agent(a) if a.api == "cuda"
                && matches!(a.state, AgentState::Attached { .. }))
        })
        .expect("a CUDA agent attached");
    let Event::Agent(attached) = &all[at] else {
        unreachable!()
    };
    all.insert(
        at + 1,
        Event::Agent(AgentEvent {
            t_ns: attached.t_ns + 1,
            state: AgentState::Launches {
                watching: false,
                why: LaunchesWhy::Repeated,
            },
            ..attached.clone()
        }),
    );
    let running: Vec<_> = all
        .iter()
        .take_while(|e| {
            !matches!(e, Event::End(_))
                && !matches!(e, Event::Agent(a) if matches!(a.state, AgentState::Detached { .. }))
        })
        .collect();
    let dir = common::temp_dir();
    let status = |events: &[&Event], name: &str| {
        let file = dir.path().join(format!("{name}.jsonl"));
        let text: String = events.iter().map(|e| to_line(e)).collect();
        std::fs::write(&file, text).expect("written");
        let mut a = app();
        a.add_recording(file);
        open(&mut a, name, false);
        let s = screen(&mut a, 200, 48);
        s.lines().last().unwrap_or_default().to_string()
    };
    let mid = status(&running, "launches-unwatched-mid-run");
    assert!(mid.contains("new launches only"), "{mid}");
    let whole: Vec<_> = all.iter().collect();
    let ended = status(&whole, "launches-unwatched-ended");
    assert!(!ended.contains("new launches only"), "{ended}");
}
