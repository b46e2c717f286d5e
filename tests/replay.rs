//! Playing recordings back: cursor, clock, speed, pause and scrub driven by keys
//! and frame ticks alone (no terminal, no real clock), the replay screen, the run
//! history's bounds, and `gpulab replay` on damaged and missing files.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use common::dash::{app, key, keys, open, screen};
use gpulab::history;
use gpulab::tui::App;
use gpulab::tui::app::{A, Msg};
use gpulab::tui::keys::Mode;
use ratatui::crossterm::event::KeyCode;

const RECORDING: &str = "pocl--cl-finish--no-wait";

fn replaying() -> App {
    let mut a = app();
    open(&mut a, RECORDING, false);
    a
}

fn cursor(a: &App) -> usize {
    a.playback.as_ref().map_or(0, |p| p.cursor)
}

fn calls(a: &App) -> usize {
    a.slots[A].as_ref().map_or(0, |r| r.run.calls().len())
}

#[test]
fn a_recording_opens_at_its_end_paused_in_replay_mode() {
    let a = replaying();
    let pb = a.playback.as_ref().expect("playback");
    assert!(pb.at_end() && pb.paused);
    assert_eq!(a.mode(), Mode::Replay);
    // The recorded verdicts are shown as recorded.
    assert!(!a.slots[A].as_ref().expect("run").run.claims().is_empty());
}

#[test]
fn space_at_the_end_plays_from_the_start_and_ticks_move_the_clock() {
    let mut a = replaying();
    key(&mut a, KeyCode::Char(' '));
    let pb = a.playback.as_ref().expect("playback");
    assert!(!pb.paused);
    let start = pb.cursor;
    assert!(start < pb.len());
    let mut ticks = 0;
    while !a.playback.as_ref().expect("playback").at_end() {
        a.update(Msg::Tick);
        ticks += 1;
        assert!(ticks < 100_000, "playback never ends");
    }
    assert!(cursor(&a) > start);
    assert!(a.playback.as_ref().expect("playback").paused);
}

#[test]
fn pause_stops_the_clock() {
    let mut a = replaying();
    key(&mut a, KeyCode::Home);
    key(&mut a, KeyCode::Char(' '));
    a.update(Msg::Tick);
    key(&mut a, KeyCode::Char(' '));
    let (c, clock) = {
        let pb = a.playback.as_ref().expect("playback");
        (pb.cursor, pb.clock)
    };
    for _ in 0..50 {
        a.update(Msg::Tick);
    }
    let pb = a.playback.as_ref().expect("playback");
    assert_eq!((pb.cursor, pb.clock), (c, clock));
}

#[test]
fn speed_keys_stay_between_a_tenth_and_ten() {
    let mut a = replaying();
    let speed = |a: &App| a.playback.as_ref().expect("playback").speed();
    // A run this short starts slowed, so that it lasts long enough to narrate.
    let secs = a.playback.as_ref().expect("playback").duration() as f64 / 1e9;
    assert!(secs < 5.0, "the fixture is a short run: {secs} s");
    assert!(speed(&a) < 1.0, "{}", speed(&a));
    assert!(secs / speed(&a) >= 5.0 || speed(&a) == 0.1, "{}", speed(&a));
    keys(&mut a, "++++++++++++");
    assert_eq!(speed(&a), 10.0);
    keys(&mut a, "[[[[[[[[[[[[[[");
    assert_eq!(speed(&a), 0.1);
    keys(&mut a, "]");
    keys(&mut a, "-");
    assert_eq!(speed(&a), 0.1);
}

#[test]
fn faster_playback_takes_fewer_ticks() {
    let ticks = |speed_keys: &str| {
        let mut a = replaying();
        keys(&mut a, speed_keys);
        key(&mut a, KeyCode::Char(' '));
        let mut n = 0;
        while !a.playback.as_ref().expect("playback").at_end() && n < 100_000 {
            a.update(Msg::Tick);
            n += 1;
        }
        n
    };
    assert!(ticks("++++++") < ticks(""));
}

#[test]
fn stepping_moves_one_call_at_a_time_and_back() {
    let mut a = replaying();
    let all = calls(&a);
    assert!(all >= 2);
    key(&mut a, KeyCode::Home);
    assert_eq!(calls(&a), 0);
    key(&mut a, KeyCode::Char('.'));
    assert_eq!(calls(&a), 1);
    key(&mut a, KeyCode::Char('s'));
    assert_eq!(calls(&a), 2);
    key(&mut a, KeyCode::Char(','));
    assert_eq!(calls(&a), 1);
    key(&mut a, KeyCode::End);
    assert_eq!(calls(&a), all);
}

#[test]
fn scrubbing_back_refolds_the_same_run() {
    let mut a = replaying();
    let end = a.slots[A].as_ref().expect("run").run.calls().clone();
    key(&mut a, KeyCode::Home);
    key(&mut a, KeyCode::Right);
    let after_a_second = cursor(&a);
    key(&mut a, KeyCode::Left);
    assert!(cursor(&a) <= after_a_second);
    key(&mut a, KeyCode::End);
    assert_eq!(a.slots[A].as_ref().expect("run").run.calls(), &end);
}

#[test]
fn the_replay_screen_says_it_is_a_recording() {
    let mut a = replaying();
    key(&mut a, KeyCode::Home);
    keys(&mut a, "..");
    let s = screen(&mut a, 80, 24);
    assert!(s.contains("RECORDING"), "{s}");
    insta::assert_snapshot!("replay_80x24", s);
}

fn write(dir: &std::path::Path, name: &str, bytes: usize) {
    std::fs::write(dir.join(name), vec![b'x'; bytes]).expect("writes");
}

#[test]
fn the_history_keeps_the_newest_runs_by_count() {
    let dir = common::temp_dir();
    for i in 0..7 {
        write(
            dir.path(),
            &format!("2025010{i}-000000.000-lab--v.jsonl"),
            10,
        );
    }
    let removed = history::prune(dir.path(), 5, u64::MAX).expect("prunes");
    assert_eq!(removed.len(), 2);
    let left = history::list(dir.path());
    assert_eq!(left.len(), 5);
    assert!(left[0].ends_with("20250106-000000.000-lab--v.jsonl"));
    assert!(left[4].ends_with("20250102-000000.000-lab--v.jsonl"));
}

#[test]
fn the_history_keeps_the_newest_runs_by_size() {
    let dir = common::temp_dir();
    for i in 0..4 {
        write(
            dir.path(),
            &format!("2025010{i}-000000.000-lab--v.jsonl"),
            100,
        );
    }
    // Another file type is never the history's to remove.
    write(dir.path(), "notes.txt", 1000);
    history::prune(dir.path(), 50, 250).expect("prunes");
    assert_eq!(history::list(dir.path()).len(), 2);
    assert!(dir.path().join("notes.txt").exists());
    // The newest run stays even when it alone is over the bound.
    history::prune(dir.path(), 50, 10).expect("prunes");
    assert_eq!(history::list(dir.path()).len(), 1);
}

#[test]
fn replay_of_a_missing_file_exits_2_and_says_so() {
    let o = common::run(&["replay", "no/such/recording.jsonl"]);
    assert_eq!(o.status.code(), Some(2));
    let err = common::stderr(&o);
    assert!(err.contains("cannot open no/such/recording.jsonl"), "{err}");
}

#[test]
fn replay_of_a_damaged_file_names_the_skipped_lines_and_plays_the_rest() {
    let dir = common::temp_dir();
    let src = common::repo_file(&format!("tests/fixtures/recordings/{RECORDING}.jsonl"));
    let text = std::fs::read_to_string(src).expect("fixture");
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(3, "{\"type\":\"call\",\"data\":{\"seq\":");
    let path = dir.path().join("damaged.jsonl");
    std::fs::write(&path, lines.join("\n")).expect("writes");
    let o = common::gpulab()
        .arg("replay")
        .arg(&path)
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let err = common::stderr(&o);
    assert!(err.contains("skipped line 4"), "{err}");
    let out = common::stdout(&o);
    assert!(out.contains("1 damaged line(s) skipped"), "{out}");
    assert!(out.contains("cl-finish"), "{out}");
}

/// Without a terminal, a watched program's recording gets the report `gpulab
/// watch` printed (who held the memory, what was alive at exit), not a lab's
/// claims and verdicts: it printed "lab: -" and no finding of the program.
#[test]
fn replay_of_a_watch_recording_without_a_terminal_prints_the_watch_report() {
    let path = common::repo_file("assets/watch-recordings/nvidia-h200/cuda-leaks.jsonl");
    let o = common::gpulab()
        .arg("replay")
        .arg(&path)
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let out = common::stdout(&o);
    assert!(out.contains("who holds it"), "{out}");
    assert!(out.contains("alive at exit"), "{out}");
    let report = common::gpulab()
        .arg("report")
        .arg(&path)
        .output()
        .expect("runs");
    // The same report as `gpulab report` gives, after the line that says what was replayed.
    assert_eq!(
        out.split_once('\n').map(|(_, rest)| rest),
        Some(common::stdout(&report).as_str())
    );
}

#[test]
fn capital_r_records_the_next_run_only() {
    use gpulab::tui::app::Cmd;
    let mut a = app();
    common::dash::select(&mut a, "cl-finish");
    key(&mut a, KeyCode::Char('R'));
    assert!(a.message.as_deref().is_some_and(|m| m.contains("recorded")));
    let fx = key(&mut a, KeyCode::Enter);
    assert!(matches!(fx.first(), Some(Cmd::Start { record: true, .. })));
    // That run is over (as if its worker had ended); the next one is not recorded.
    a.slots[A] = None;
    let fx = key(&mut a, KeyCode::Enter);
    assert!(matches!(fx.first(), Some(Cmd::Start { record: false, .. })));
}

/// The banner's date is the one the stream states, whatever the file's mtime: a
/// checkout or a copy sets that, and it is not when the run happened.
#[test]
fn the_banner_dates_a_recording_from_its_meta_never_from_the_file() {
    use gpulab::trace::Event;
    let banner = |recorded_at: Option<&str>| {
        let mut events = common::dash::events(RECORDING);
        if let Some(Event::Meta(m)) = events.first_mut() {
            m.recorded_at = recorded_at.map(str::to_string);
        }
        let mut a = app();
        a.play(
            common::repo_file(&format!("tests/fixtures/recordings/{RECORDING}.jsonl")),
            events,
            &[],
        );
        screen(&mut a, 200, 24)
    };
    let dated = banner(Some("2026-11-22T10:15:42Z"));
    assert!(dated.contains("recorded 2026-11-22 10:15 UTC"), "{dated}");
    let old = banner(None);
    assert!(old.contains("recording date unknown"), "{old}");
    let bad = banner(Some("\u{1b}]0;pwned\u{7}"));
    assert!(bad.contains("recording date unreadable"), "{bad}");
    assert!(!bad.contains("pwned"), "{bad}");
}

/// `gpulab report -` reads the recording from stdin, as `cat FILE | gpulab
/// report -` or a recording fetched with curl would give it; stdin holds one.
#[test]
fn report_reads_a_recording_from_stdin() {
    use std::io::Write;
    use std::process::Stdio;
    let fixture = common::repo_file(&format!("tests/fixtures/recordings/{RECORDING}.jsonl"));
    let mut child = common::gpulab()
        .args(["report", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpulab starts");
    let text = std::fs::read(&fixture).expect("the fixture");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&text)
        .expect("written");
    let out = child.wait_with_output().expect("gpulab ends");
    assert!(out.status.success(), "{}", common::stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&common::stdout(&out)).expect("JSON");
    assert_eq!(json["runs"][0]["variant"], "no-wait", "{json:#}");
    let twice = common::run(&["report", "-", "-"]);
    assert_eq!(twice.status.code(), Some(2), "{}", common::stderr(&twice));
}
