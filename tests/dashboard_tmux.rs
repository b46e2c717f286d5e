//! End to end: the real binary in tmux on the OpenCL device here (PoCL in CI).
//! Keys select `cl-finish` and run it; `capture-pane` reads the screen back.
//! Skipped with a notice when tmux is missing (`.ci/run` installs it).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
}

impl Tmux {
    /// A detached 120x36 session `e2e` on a socket of its own, running `command`
    /// in `dir`; runs keep their history in `dir` too.
    fn start(name: &str, dir: &std::path::Path, command: &str) -> Tmux {
        Tmux::sized(name, dir, command, (120, 36))
    }

    /// As [`Tmux::start`], `w`×`h`.
    fn sized(name: &str, dir: &std::path::Path, command: &str, (w, h): (u16, u16)) -> Tmux {
        let tmux = Tmux {
            socket: format!("gpulab-{name}-{}", std::process::id()),
        };
        let out = Command::new("tmux")
            .args(["-L", &tmux.socket, "new-session", "-d", "-s", "e2e"])
            .args(["-x", &w.to_string(), "-y", &h.to_string(), "-c"])
            .arg(dir)
            .arg(command)
            .env("NO_COLOR", "1")
            .env("GPULAB_DATA_DIR", dir.join("data"))
            .output()
            .expect("tmux starts");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        tmux
    }

    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "e2e"]).stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.cmd(&["send-keys", "-t", "e2e", k]);
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool, secs: u64) -> String {
        let until = Instant::now() + Duration::from_secs(secs);
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            assert!(
                Instant::now() < until,
                "waited {secs} s for {what}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

#[test]
fn dashboard_runs_cl_finish_in_tmux() {
    if Command::new("tmux").arg("-V").output().is_err() {
        common::say_skipped(format_args!(
            "skipping dashboard_runs_cl_finish_in_tmux: tmux is not installed"
        ));
        return;
    }
    let _device = common::device_lock();
    if !common::opencl_or_skip("dashboard_runs_cl_finish_in_tmux") {
        return;
    }
    let dir = common::temp_dir();
    let tmux = Tmux::start("e2e", dir.path(), env!("CARGO_BIN_EXE_gpulab"));

    tmux.wait_for(
        "the doctor's answer",
        |s| s.contains("Labs") && !s.contains("checking devices"),
        60,
    );
    // R: this run is also recorded, into the data folder (never the working one).
    tmux.keys(&["/", "cl-finish", "Enter", "R", "Enter"]);
    // The worker's end, then its verdicts, judged once its stream has ended
    // (its memory watched coming back first).
    tmux.wait_for(
        "the run to finish and be judged",
        |s| s.contains("[finish] · finished") && !s.contains("verdicts come"),
        120,
    );
    // The status bar says the recording is done, not that it goes on.
    let s = tmux.wait_for(
        "the status bar to say the run was recorded",
        |s| s.contains("recorded this run to"),
        30,
    );
    assert!(!s.contains("recording this run to"), "{s}");
    let recorded: Vec<_> = std::fs::read_dir(dir.path().join("data/recordings"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    assert_eq!(
        recorded.len(),
        1,
        "R wrote one recording: {recorded:?}\n{s}"
    );
    assert!(
        recorded[0]
            .to_string_lossy()
            .ends_with("-cl-finish--finish.jsonl"),
        "{recorded:?}"
    );
    let stray: Vec<_> = std::fs::read_dir(dir.path())
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    assert!(
        stray
            .iter()
            .all(|p| p.extension().is_none_or(|x| x != "jsonl")),
        "nothing recorded into the working directory: {stray:?}"
    );
    // Once it has run, the lines its claims measure are in view: the lesson.
    assert!(s.contains("clFinish(q)"), "{s}");
    // A verdict is shown with what it was measured against; which verdict it is
    // is this device's answer under this host's load, not the dashboard's.
    assert!(s.contains("Verdicts on this device"), "{s}");
    assert!(
        [
            "✓ holds (as the lesson expects) —",
            "◆ does not hold (unlike the lesson, on this device) —",
            "? inconclusive (the lesson is untested here) —"
        ]
        .iter()
        .any(|v| s.contains(v)),
        "a verdict is shown:\n{s}"
    );
    // `name = 12.3`: a measured value beside the verdict (the script's own
    // `ctx = clCreateContext()` lines are names, not numbers).
    assert!(
        s.match_indices(" = ")
            .any(|(i, _)| s[i + 3..].starts_with(|c: char| c.is_ascii_digit())),
        "the verdict shows the values it was judged on:\n{s}"
    );
    assert!(
        s.contains("Host memory") || s.contains("Device memory"),
        "{s}"
    );
    assert!(s.contains("█"), "the queue lane shows the kernel:\n{s}");
    tmux.keys(&["q"]);
    let until = Instant::now() + Duration::from_secs(10);
    while tmux.cmd(&["has-session", "-t", "e2e"]).status.success() {
        assert!(Instant::now() < until, "q did not quit:\n{}", tmux.screen());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Started outside the checkout (its working directory a temporary folder), the
/// dashboard still opens the shipped H100 recordings: their paths keep the
/// folder they were found in.
#[test]
fn shipped_recordings_open_from_another_working_directory() {
    if Command::new("tmux").arg("-V").output().is_err() {
        common::say_skipped(format_args!(
            "skipping shipped_recordings_open_from_another_working_directory: no tmux"
        ));
        return;
    }
    let dir = common::temp_dir();
    let tmux = Tmux::start("cwd", dir.path(), env!("CARGO_BIN_EXE_gpulab"));
    tmux.wait_for("the labs list", |s| s.contains("Labs"), 60);
    tmux.keys(&["/", "nvidia-h100/cl-finish--no-wait", "Enter", "Enter"]);
    let s = tmux.wait_for(
        "the recording to open",
        |s| s.contains("RECORDING") || s.contains("unreadable"),
        60,
    );
    assert!(!s.contains("unreadable"), "{s}");
    assert!(s.contains("cl-finish [no-wait]"), "{s}");
    assert!(s.contains("NVIDIA H100"), "{s}");
}

/// SIGTERM (a `kill`, a closing session manager) ends the dashboard as `q` does:
/// the shell gets its terminal back, out of the alternate screen, cursor shown,
/// mouse reporting off.
#[test]
fn sigterm_gives_the_terminal_back() {
    if Command::new("tmux").arg("-V").output().is_err() {
        common::say_skipped(format_args!(
            "skipping sigterm_gives_the_terminal_back: tmux is not installed"
        ));
        return;
    }
    let dir = common::temp_dir();
    let command = format!(
        "'{}'; echo gpulab-exited-$?; sleep 60",
        env!("CARGO_BIN_EXE_gpulab")
    );
    let tmux = Tmux::start("e2e-term", dir.path(), &command);
    tmux.wait_for("the dashboard", |s| s.contains("Labs"), 60);
    let flag = |name: &str| {
        let out = tmux.cmd(&[
            "display-message",
            "-p",
            "-t",
            "e2e",
            &format!("#{{{name}}}"),
        ]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(
        flag("alternate_on"),
        "1",
        "the dashboard is drawn on the alternate screen"
    );
    // The shell started by tmux runs gpulab as its child.
    let shell = flag("pane_pid");
    let children =
        std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap_or_default();
    let pid: i32 = children
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no gpulab under the shell {shell}"));
    let pid = rustix::process::Pid::from_raw(pid).expect("a pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("kill");
    let s = tmux.wait_for(
        "the shell to get the terminal back",
        |s| s.contains("gpulab-exited-"),
        10,
    );
    assert!(s.contains("gpulab-exited-0"), "{s}");
    assert_eq!(
        flag("alternate_on"),
        "0",
        "still in the alternate screen:\n{s}"
    );
    assert_eq!(flag("cursor_flag"), "1", "the cursor is still hidden");
    assert_eq!(flag("mouse_any_flag"), "0", "mouse reporting is still on");
}

/// `tests/watch/forgotten_events.c` built in `dir`, when there is an OpenCL
/// device and a C compiler with its headers (required with
/// `GPULAB_REQUIRE_OPENCL=1`); None (said) to skip.
fn forgotten_events(dir: &std::path::Path, test: &str) -> Option<std::path::PathBuf> {
    if !common::opencl_or_skip(test) {
        return None;
    }
    let program = dir.join("forgotten_events");
    let cc = Command::new("cc")
        .arg("-o")
        .arg(&program)
        .arg(common::repo_file("tests/watch/forgotten_events.c"))
        .arg("-lOpenCL")
        .output();
    if !cc.as_ref().is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var("GPULAB_REQUIRE_OPENCL").as_deref() != Ok("1"),
            "no C compiler or OpenCL headers: {cc:?}"
        );
        return None;
    }
    Some(program)
}

/// `gpulab watch --dashboard -- CMD`: the program's calls and objects live in the
/// dashboard, its output in the log, and after `q` the same exit report as
/// without the dashboard, with the program's exit status.
#[test]
fn watch_dashboard_shows_the_program_live_then_reports() {
    if Command::new("tmux").arg("-V").output().is_err() {
        common::say_skipped(format_args!(
            "skipping watch_dashboard_shows_the_program_live_then_reports: no tmux"
        ));
        return;
    }
    let _device = common::device_lock();
    let dir = common::temp_dir();
    let Some(program) = forgotten_events(
        dir.path(),
        "watch_dashboard_shows_the_program_live_then_reports",
    ) else {
        return;
    };
    let log = dir.path().join("program.log");
    let report = dir.path().join("report.txt");
    let command = format!(
        "'{}' watch --dashboard --log '{}' -o '{}' -- '{}' 3 1; echo watch-exited-$?; sleep 60",
        env!("CARGO_BIN_EXE_gpulab"),
        log.display(),
        report.display(),
        program.display()
    );
    let tmux = Tmux::start("watch", dir.path(), &command);
    let s = tmux.wait_for(
        "the program to finish in the dashboard",
        |s| s.contains("Calls · ") && s.contains("· finished"),
        60,
    );
    assert!(s.contains("clBuildProgram") && s.contains("ok ×3"), "{s}");
    assert!(
        s.lines()
            .any(|l| l.contains("│events ") && l.split_whitespace().nth(1) == Some("3")),
        "the ledger counts the program's 3 events:\n{s}"
    );
    tmux.keys(&["q"]);
    let s = tmux.wait_for("gpulab to end", |s| s.contains("watch-exited-"), 30);
    assert!(s.contains("watch-exited-0"), "{s}");
    let text = std::fs::read_to_string(&report).unwrap_or_default();
    assert!(text.contains("3 events"), "{text}");
    let out = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(out.contains("forgotten_events: iterations=3"), "{out}");
}

/// `q` while the watched program still runs: the dashboard asks it to stop,
/// follows its stream to the end, and the report keeps every event it sent
/// before, says gpulab stopped it, and gpulab exits as cancelled.
#[test]
fn watch_dashboard_quit_stops_the_program_and_keeps_its_events() {
    if Command::new("tmux").arg("-V").output().is_err() {
        common::say_skipped(format_args!(
            "skipping watch_dashboard_quit_stops_the_program_and_keeps_its_events: no tmux"
        ));
        return;
    }
    let _device = common::device_lock();
    let dir = common::temp_dir();
    let Some(program) = forgotten_events(
        dir.path(),
        "watch_dashboard_quit_stops_the_program_and_keeps_its_events",
    ) else {
        return;
    };
    let report = dir.path().join("report.txt");
    // The program's work, then a shell that waits far longer than the test.
    let command = format!(
        "'{}' watch --dashboard -o '{}' -- sh -c \"'{}' 3 1; exec sleep 600\"; \
         echo watch-exited-$?; sleep 60",
        env!("CARGO_BIN_EXE_gpulab"),
        report.display(),
        program.display()
    );
    let tmux = Tmux::start("watch-quit", dir.path(), &command);
    tmux.wait_for(
        "the program's three events in the dashboard",
        |s| {
            s.lines()
                .any(|l| l.contains("│events ") && l.split_whitespace().nth(1) == Some("3"))
        },
        60,
    );
    tmux.keys(&["q"]);
    let s = tmux.wait_for("gpulab to end", |s| s.contains("watch-exited-"), 30);
    assert!(s.contains("watch-exited-130"), "{s}");
    let text = std::fs::read_to_string(&report).unwrap_or_default();
    assert!(text.contains("3 events"), "{text}");
    assert!(text.contains("stopped by gpulab"), "{text}");
}

/// `m` hands the mouse back to the terminal (its own text selection works without
/// Shift) and takes it again, as the terminal's mouse reporting flag shows.
#[test]
fn m_turns_mouse_reporting_off_and_on() {
    if Command::new("tmux").arg("-V").output().is_err() {
        common::say_skipped(format_args!(
            "skipping m_turns_mouse_reporting_off_and_on: tmux is not installed"
        ));
        return;
    }
    let dir = common::temp_dir();
    let command = format!("'{}'; sleep 60", env!("CARGO_BIN_EXE_gpulab"));
    let tmux = Tmux::start("e2e-mouse", dir.path(), &command);
    tmux.wait_for("the dashboard", |s| s.contains("Labs"), 60);
    let mouse = || {
        let out = tmux.cmd(&["display-message", "-p", "-t", "e2e", "#{mouse_any_flag}"]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(mouse(), "1", "the dashboard starts with mouse reporting on");
    tmux.keys(&["m"]);
    tmux.wait_for("mouse off", |s| s.contains("mouse off"), 10);
    assert_eq!(mouse(), "0", "mouse reporting is still on after m");
    tmux.keys(&["m"]);
    tmux.wait_for("mouse on", |s| s.contains("mouse on"), 10);
    assert_eq!(mouse(), "1", "mouse reporting did not come back");
    tmux.keys(&["q"]);
}

/// `watch --dashboard` killed with SIGKILL leaves no file behind (#44): the
/// program's output goes to a file that has no name, so nothing is left in the
/// temporary folder however gpulab ends.
#[test]
fn watch_dashboard_killed_leaves_no_file() {
    if Command::new("tmux").arg("-V").output().is_err() {
        common::say_skipped(format_args!(
            "skipping watch_dashboard_killed_leaves_no_file: no tmux"
        ));
        return;
    }
    let dir = common::temp_dir();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let pid_file = dir.path().join("gpulab.pid");
    // The shell writes gpulab's pid before it becomes gpulab (exec).
    let command = format!(
        "sh -c 'echo $$ > \"{}\"; TMPDIR=\"{}\" exec \"{}\" watch --dashboard -- sh -c \"echo said; exec sleep 600\"'; sleep 60",
        pid_file.display(),
        tmp.display(),
        env!("CARGO_BIN_EXE_gpulab"),
    );
    let tmux = Tmux::start("watch-killed", dir.path(), &command);
    tmux.wait_for("the dashboard", |s| s.contains("Calls"), 60);
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The program, in a process group of its own, is gpulab's child.
    let children = common::procs::children(pid as u32);
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
    for c in children {
        let _ = Command::new("kill")
            .args(["-KILL", &c.to_string()])
            .status();
    }
    assert!(
        common::procs::gone_within(pid as u32, Duration::from_secs(10)),
        "gpulab outlived SIGKILL"
    );
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left in the temporary folder: {left:?}");
}

/// A watched program whose stdin is not the terminal may still read the
/// terminal (`/dev/tty`: a password prompt), as it can bare (#44): gpulab in
/// the terminal's foreground keeps it there. In a group of its own it was
/// stopped (SIGTTIN) at that read, for ever.
#[test]
fn a_watched_program_with_piped_stdin_can_read_the_terminal() {
    if Command::new("tmux").arg("-V").output().is_err() {
        common::say_skipped(format_args!(
            "skipping a_watched_program_with_piped_stdin_can_read_the_terminal: no tmux"
        ));
        return;
    }
    let dir = common::temp_dir();
    let command = format!(
        "echo piped | '{}' watch -- sh -c 'read line; echo got-$line; read answer < /dev/tty; echo tty-$answer'; echo watch-exited-$?; sleep 60",
        env!("CARGO_BIN_EXE_gpulab"),
    );
    let tmux = Tmux::start("watch-tty", dir.path(), &command);
    tmux.wait_for("the piped line", |s| s.contains("got-piped"), 60);
    tmux.keys(&["yes", "Enter"]);
    let s = tmux.wait_for("gpulab to end", |s| s.contains("watch-exited-"), 30);
    assert!(s.contains("tty-yes"), "{s}");
    assert!(s.contains("watch-exited-0"), "{s}");
}

/// #49: the shipped lesson at 80x24, as a class meets it: the first step's
/// question and its numbered claims fill the screen with nothing of the
/// answer, a digit predicts, Enter runs it on this machine's OpenCL device,
/// and once the verdicts are in, `z` shows the hint and the prediction
/// beside the verdict; `>` goes to the next step's question.
#[test]
fn the_shipped_lesson_runs_end_to_end_at_80x24() {
    if Command::new("tmux").arg("-V").output().is_err() {
        common::say_skipped(format_args!(
            "skipping the_shipped_lesson_runs_end_to_end_at_80x24: tmux is not installed"
        ));
        return;
    }
    let _device = common::device_lock();
    if !common::opencl_or_skip("the_shipped_lesson_runs_end_to_end_at_80x24") {
        return;
    }
    let dir = common::temp_dir();
    let command = format!(
        "{} --lesson when-memory-comes-back",
        env!("CARGO_BIN_EXE_gpulab")
    );
    let tmux = Tmux::sized("lesson", dir.path(), &command, (80, 24));
    let s = tmux.wait_for(
        "the first step's question",
        |s| s.contains("step 1 of 5") && s.contains("question:"),
        60,
    );
    for answer in ["the lesson expects", "hint:", "Look:"] {
        assert!(!s.contains(answer), "{answer} before the run:\n{s}");
    }
    assert!(s.contains("1 release-does-not-wait"), "{s}");
    tmux.keys(&["1"]);
    tmux.wait_for("the prediction", |s| s.contains("you predict: holds"), 10);
    tmux.keys(&["Enter"]);
    tmux.wait_for(
        "the run's verdicts",
        |s| s.contains("the verdicts are in with the hint"),
        120,
    );
    tmux.keys(&["z"]);
    let s = tmux.wait_for(
        "the hint and the prediction beside the verdict",
        |s| s.contains("hint:") && s.contains("you predicted: holds"),
        10,
    );
    assert!(s.contains("· the device: "), "{s}");
    tmux.keys(&["z", ">"]);
    tmux.wait_for(
        "the second step's question",
        |s| s.contains("step 2 of 5") && s.contains("question:") && !s.contains("hint:"),
        10,
    );
    tmux.keys(&["q"]);
    let until = Instant::now() + Duration::from_secs(10);
    while tmux.cmd(&["has-session", "-t", "e2e"]).status.success() {
        assert!(Instant::now() < until, "q did not quit:\n{}", tmux.screen());
        std::thread::sleep(Duration::from_millis(100));
    }
}
