//! The dashboard's state machine driven by key sequences, no terminal: what each
//! key changes and which effects (start, step, cancel, open) it asks the loop for.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use common::dash::{app, carry_out, feed, key, keys, open, screen, select};
use gpulab::source::Steer;
use gpulab::tui::app::{A, B, Cmd, Msg, Overlay};
use gpulab::tui::layout::{Panel, Screen, View};
use ratatui::crossterm::event::{KeyCode, KeyModifiers, MouseEvent, MouseEventKind};

#[test]
fn filter_narrows_the_list_and_esc_clears_it() {
    let mut a = app();
    let all = a.entries().len();
    keys(&mut a, "/cl-forgot");
    assert!(a.filtering);
    assert_eq!(a.filter, "cl-forgot");
    // The lab, and every recording of it (fixtures and the shipped H100 ones).
    let recordings = gpulab::tui::recordings::find(&common::repo_file(""))
        .iter()
        .filter(|p| gpulab::tui::recordings::label(p).contains("cl-forgot"))
        .count();
    assert!(recordings >= 1);
    assert_eq!(a.entries().len(), 1 + recordings);
    key(&mut a, KeyCode::Backspace);
    assert_eq!(a.filter, "cl-forgo");
    key(&mut a, KeyCode::Enter);
    assert!(!a.filtering, "Enter keeps the filter and leaves typing");
    assert_eq!(a.filter, "cl-forgo");
    // `q` is a key again once typing is over, not text.
    keys(&mut a, "/");
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.filter, "");
    assert_eq!(a.entries().len(), all);
}

/// #51: the list goes to its ends as less and htop do: Home/End, g/G.
#[test]
fn home_end_g_and_shift_g_go_to_the_lists_ends() {
    let mut a = app();
    let last = a.entries().len() - 1;
    assert!(last > 2);
    key(&mut a, KeyCode::End);
    assert_eq!(a.selected, last);
    key(&mut a, KeyCode::Home);
    assert_eq!(a.selected, 0);
    keys(&mut a, "G");
    assert_eq!(a.selected, last);
    keys(&mut a, "g");
    assert_eq!(a.selected, 0);
    key(&mut a, KeyCode::Down);
    assert_eq!(a.selected, 1);
}

#[test]
fn run_step_and_cancel_ask_the_worker() {
    let mut a = app();
    select(&mut a, "cl-finish");
    let fx = keys(&mut a, "s");
    match fx.as_slice() {
        [Cmd::Start { slot: A, req, .. }] => {
            assert!(req.step);
            assert_eq!(req.lab.id, "cl-finish");
            assert_eq!(req.variant_name(), "finish");
        }
        other => panic!("{other:?}"),
    }
    feed(&mut a, &fx, &[], false);
    assert!(matches!(
        keys(&mut a, "s").as_slice(),
        [Cmd::Control {
            slot: A,
            cmd: Steer::Step
        }]
    ));
    assert!(matches!(
        key(&mut a, KeyCode::Enter).as_slice(),
        [Cmd::Control {
            slot: A,
            cmd: Steer::Run
        }]
    ));
    assert!(matches!(
        key(&mut a, KeyCode::Esc).as_slice(),
        [Cmd::Cancel { slot: A }]
    ));
    assert!(a.message.as_deref().unwrap_or("").contains("cancelled"));
}

#[test]
fn a_second_run_waits_for_the_first() {
    let mut a = app();
    select(&mut a, "cl-finish");
    let fx = keys(&mut a, "r");
    feed(&mut a, &fx, &[], false);
    assert!(keys(&mut a, "r").is_empty());
    assert!(a.message.as_deref().unwrap_or("").contains("in progress"));
}

#[test]
fn variants_cycle_and_parameters_stay_in_range() {
    let mut a = app();
    select(&mut a, "cl-finish");
    keys(&mut a, "v");
    assert_eq!(a.variants["cl-finish"], 1);
    keys(&mut a, "V");
    assert_eq!(a.variants["cl-finish"], 0);
    keys(&mut a, "p");
    assert!(matches!(a.overlay, Overlay::Params { .. }));
    // kernel_ms: 200 → 500; then type 10 and Enter.
    key(&mut a, KeyCode::Right);
    assert_eq!(a.params["cl-finish"]["kernel_ms"], 500.0);
    keys(&mut a, "99999");
    key(&mut a, KeyCode::Enter);
    assert_eq!(
        a.params["cl-finish"]["kernel_ms"], 500.0,
        "out of range is refused"
    );
    keys(&mut a, "10");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.params["cl-finish"]["kernel_ms"], 10.0);
    for _ in 0..5 {
        key(&mut a, KeyCode::Left);
    }
    assert_eq!(a.params["cl-finish"]["kernel_ms"], 10.0, "min is 10");
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.overlay, Overlay::None);
    match keys(&mut a, "r").as_slice() {
        [Cmd::Start { req, .. }] => assert_eq!(req.params.get("kernel_ms"), Some(&10.0)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn compare_runs_the_next_variant_after_the_first() {
    let mut a = app();
    select(&mut a, "cl-event-wait");
    let fx = keys(&mut a, "c");
    assert!(a.compare);
    let Some(Cmd::Start {
        slot: A,
        epoch,
        req,
        ..
    }) = fx.first().cloned()
    else {
        panic!("{fx:?}");
    };
    assert_eq!(req.variant_name(), "wait-for-event");
    let next = a.update(Msg::Closed {
        slot: A,
        epoch,
        error: None,
    });
    match next.as_slice() {
        [Cmd::Start { slot: B, req, .. }] => assert_eq!(req.variant_name(), "finish"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn recordings_open_and_compare_read_only() {
    let mut a = app();
    open(&mut a, "release-then-finish", false);
    assert!(a.shown().is_some_and(|r| r.closed && r.run.end().is_some()));
    open(&mut a, "finish-then-release", true);
    assert!(a.compare && a.slots[B].is_some());
    // Stale events of a replaced run are ignored.
    select(&mut a, "pocl");
    let fx = key(&mut a, KeyCode::Enter);
    assert!(!a.compare);
    carry_out(&mut a, fx);
    assert_eq!(
        a.shown().and_then(|r| r.lab_id()).as_deref(),
        Some("cl-finish")
    );
}

#[test]
fn nothing_runs_before_the_doctor_answers_or_without_a_device() {
    let mut a = gpulab::tui::App::new(
        common::dash::shipped_labs(),
        vec![],
        gpulab::tui::Theme::PLAIN,
    );
    assert!(keys(&mut a, "r").is_empty());
    assert!(a.message.as_deref().unwrap_or("").contains("still asking"));
    a.update(Msg::Doctor(gpulab::source::Availability::none(
        "no OpenCL platform",
    )));
    assert!(keys(&mut a, "r").is_empty());
    assert!(
        a.message
            .as_deref()
            .unwrap_or("")
            .contains("no OpenCL platform")
    );
}

#[test]
fn help_opens_and_any_key_closes_it_without_acting() {
    let mut a = app();
    keys(&mut a, "?");
    assert_eq!(a.overlay, Overlay::Help);
    assert!(keys(&mut a, "q").is_empty());
    assert_eq!(a.overlay, Overlay::None);
    assert!(!a.quit, "q closed the overlay, it did not quit");
}

#[test]
fn f1_opens_help_and_f10_quits_as_in_htop() {
    let mut a = app();
    key(&mut a, KeyCode::F(1));
    assert_eq!(a.overlay, Overlay::Help);
    key(&mut a, KeyCode::F(1));
    assert_eq!(a.overlay, Overlay::None);
    assert!(!a.quit);
    key(&mut a, KeyCode::F(10));
    assert!(a.quit);
}

#[test]
fn quit_with_q_or_ctrl_c_cancels_running_workers() {
    let mut a = app();
    select(&mut a, "cl-finish");
    let fx = keys(&mut a, "r");
    feed(&mut a, &fx, &[], false);
    let out = a.update(Msg::Key(ratatui::crossterm::event::KeyEvent::new(
        KeyCode::Char('c'),
        KeyModifiers::CONTROL,
    )));
    assert!(a.quit);
    assert!(matches!(out.as_slice(), [Cmd::Cancel { slot: A }]));
    let mut b = app();
    keys(&mut b, "q");
    assert!(b.quit);
}

/// A click focuses the panel under the pointer; a click outside every panel
/// (the status bar) changes nothing.
#[test]
fn a_click_focuses_the_panel_under_the_pointer() {
    let mut a = app();
    a.update(Msg::Resize(160, 48));
    let screen = Screen::new(160, 48, View::default());
    let click = |r: ratatui::layout::Rect| MouseEvent {
        kind: MouseEventKind::Down(ratatui::crossterm::event::MouseButton::Left),
        column: r.x + 2,
        row: r.y + 2,
        modifiers: KeyModifiers::NONE,
    };
    for panel in [Panel::Verdict, Panel::Timeline, Panel::Labs] {
        let r = screen.get(panel, 0).expect("the panel is on screen");
        a.update(Msg::Mouse(click(r)));
        assert_eq!(a.focus, panel);
    }
    a.update(Msg::Mouse(click(screen.status)));
    assert_eq!(a.focus, Panel::Labs);
}

#[test]
fn the_mouse_wheel_scrolls_the_panel_under_the_pointer() {
    let mut a = app();
    a.update(Msg::Resize(160, 48));
    let verdict = Screen::new(160, 48, View::default())
        .get(Panel::Verdict, 0)
        .expect("verdict panel");
    let wheel = |kind| MouseEvent {
        kind,
        column: verdict.x + 2,
        row: verdict.y + 2,
        modifiers: KeyModifiers::NONE,
    };
    a.update(Msg::Mouse(wheel(MouseEventKind::ScrollDown)));
    a.update(Msg::Mouse(wheel(MouseEventKind::ScrollDown)));
    assert_eq!(a.verdict_scroll, 6);
    a.update(Msg::Mouse(wheel(MouseEventKind::ScrollUp)));
    assert_eq!(a.verdict_scroll, 3);
    // Tab moves focus; PgDn scrolls the focused panel.
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.focus, Panel::Script);
    key(&mut a, KeyCode::PageDown);
    assert_eq!(a.script_scroll, 5);
}

#[test]
fn without_cuda_a_cuda_labs_row_offers_its_h100_recording_on_o() {
    let mut a = app();
    select(&mut a, "cuda-free-async");
    let s = common::dash::screen(&mut a, 80, 24);
    assert!(s.contains("o replays its"), "{s}");
    assert!(s.contains("nvidia-h100 run"), "{s}");
    // Enter cannot run it here, and says which key replays it instead.
    assert!(key(&mut a, KeyCode::Enter).is_empty());
    assert!(a.message.as_deref().unwrap_or("").contains("o replays"));
    let fx = keys(&mut a, "o");
    match fx.as_slice() {
        [Cmd::Open { slot: A, path, .. }] => assert!(
            path.ends_with("nvidia-h100/cuda-free-async--same-stream.jsonl"),
            "{}",
            path.display()
        ),
        other => panic!("{other:?}"),
    }
    carry_out(&mut a, fx);
    assert!(a.replaying(), "the recording is shown in replay");
    assert_eq!(
        a.shown().and_then(|r| r.lab_id()).as_deref(),
        Some("cuda-free-async")
    );
}

#[test]
fn c_on_a_recording_compares_it_with_the_other_variants_and_plays_both() {
    let mut a = app();
    open(&mut a, "nvidia-h100/cl-finish--finish", false);
    let fx = keys(&mut a, "c");
    let opened: Vec<_> = fx
        .iter()
        .filter_map(|e| match e {
            Cmd::Open { slot, path, .. } => Some((*slot, path.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(opened.len(), 1, "A is already the recording: {fx:?}");
    assert_eq!(opened[0].0, B);
    assert!(
        !opened[0].1.ends_with("cl-finish--finish.jsonl"),
        "not with itself"
    );
    assert!(
        opened[0]
            .1
            .to_string_lossy()
            .contains("nvidia-h100/cl-finish--")
    );
    carry_out(&mut a, fx);
    assert!(a.compare && a.replaying());
    let vb = a.slots[B].as_ref().map(|r| r.variant());
    assert_ne!(vb.as_deref(), Some("finish"));
    // Space plays both sides from the start; ticks move both.
    keys(&mut a, " ");
    let cursors = |a: &gpulab::tui::App| {
        (
            a.playback.as_ref().map(|p| p.cursor),
            a.playback_b.as_ref().map(|p| p.cursor),
        )
    };
    let start = cursors(&a);
    assert!(a.playback.as_ref().is_some_and(|p| !p.paused));
    assert!(a.playback_b.as_ref().is_some_and(|p| !p.paused));
    for _ in 0..200 {
        a.update(Msg::Tick);
    }
    let later = cursors(&a);
    assert!(
        later.0 > start.0 && later.1 > start.1,
        "{start:?} → {later:?}"
    );
    // Esc leaves compare mode; the first recording stays.
    key(&mut a, KeyCode::Esc);
    assert!(!a.compare && a.slots[B].is_none() && a.playback_b.is_none());
    assert!(a.replaying());
}

#[test]
fn after_v_the_script_shows_the_new_variant_not_the_old_runs_results() {
    let mut a = app();
    select(&mut a, "cl-finish");
    let fx = keys(&mut a, "r");
    feed(
        &mut a,
        &fx,
        &common::dash::events("pocl--cl-finish--no-wait"),
        true,
    );
    let before = common::dash::screen(&mut a, 160, 48);
    assert!(before.contains("· finished"), "{before}");
    keys(&mut a, "v");
    assert!(a.shown().is_none(), "the finish run is not this variant's");
    let after = common::dash::screen(&mut a, 160, 48);
    assert!(after.contains("Script · cl-finish [no-wait]"), "{after}");
    assert!(!after.contains("finished"), "{after}");
    assert!(a.message.as_deref().unwrap_or("").contains("kept"));
    keys(&mut a, "V");
    assert!(a.shown().is_some(), "V brings the kept run back");
}

#[test]
fn z_zooms_the_focused_panel_and_tab_moves_between_them() {
    let mut a = app();
    a.update(Msg::Resize(80, 24));
    key(&mut a, KeyCode::Tab);
    keys(&mut a, "z");
    let screen = Screen::new(80, 24, a.view());
    assert_eq!(screen.panels.len(), 1);
    assert_eq!(screen.panels[0].0, Panel::Script);
    assert_eq!(screen.panels[0].2.height, 23, "the whole body");
    key(&mut a, KeyCode::Tab);
    assert_eq!(Screen::new(80, 24, a.view()).panels[0].0, Panel::Memory);
    key(&mut a, KeyCode::Esc);
    assert!(!a.zoom);
    assert_eq!(Screen::new(80, 24, a.view()).panels.len(), 6);
}

fn shipped(name: &str) -> Vec<gpulab::trace::Event> {
    let path = common::repo_file(&format!("assets/recordings/nvidia-h100/{name}.jsonl"));
    let file = std::fs::File::open(path).expect("shipped recording");
    gpulab::trace::read_events(std::io::BufReader::new(file)).expect("reads")
}

/// The claim of `slot`'s run named `name`, with its verdict and values.
fn claim_of(a: &gpulab::tui::App, slot: usize, name: &str) -> gpulab::trace::ClaimVerdict {
    let run = &a.slots[slot].as_ref().expect("a run").run;
    run.claims()
        .iter()
        .find(|c| c.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no claim {name}: {:?}", run.claims()))
}

/// Checks the comparison `waiting-costs-the-kernel` (cl-finish's `finish`
/// against `no-wait`) was judged from the two runs shown side by side.
fn judged_across_the_sides(a: &gpulab::tui::App) {
    let host_ms = |slot: usize| {
        gpulab::verdict::host_ms(&a.slots[slot].as_ref().expect("a run").run, "wait").unwrap()
    };
    let c = claim_of(a, A, "waiting-costs-the-kernel");
    assert_ne!(c.verdict, gpulab::trace::Verdict::Inconclusive, "{c:?}");
    assert_eq!(c.values["host_ms(wait)"], host_ms(A));
    assert_eq!(c.values["host_ms(wait) in variant no-wait"], host_ms(B));
}

#[test]
fn a_live_compare_judges_the_claims_that_compare_its_two_variants() {
    let mut a = app();
    select(&mut a, "cl-finish");
    let first = keys(&mut a, "c");
    feed(&mut a, &first, &shipped("cl-finish--finish"), false);
    let Some(Cmd::Start { epoch, .. }) = first.first().cloned() else {
        panic!("{first:?}");
    };
    let second = a.update(Msg::Closed {
        slot: A,
        epoch,
        error: None,
    });
    feed(&mut a, &second, &shipped("cl-finish--no-wait"), true);
    judged_across_the_sides(&a);
}

#[test]
fn comparing_two_recordings_judges_the_claims_that_compare_them() {
    let mut a = app();
    open(&mut a, "nvidia-h100/cl-finish--finish", false);
    // Recorded before the comparison existed: not in the file.
    assert!(!a.slots[A].as_ref().is_some_and(|r| {
        r.run
            .claims()
            .iter()
            .any(|c| c.name == "waiting-costs-the-kernel")
    }));
    let fx = keys(&mut a, "c");
    carry_out(&mut a, fx);
    assert_eq!(
        a.slots[B].as_ref().map(|r| r.variant()).as_deref(),
        Some("no-wait")
    );
    judged_across_the_sides(&a);
    // Played again from the start, the verdict comes back at the end.
    keys(&mut a, " ");
    for _ in 0..2000 {
        a.update(Msg::Tick);
    }
    judged_across_the_sides(&a);
}

/// A user lab file with mistakes is listed, greyed, with its first mistake; Enter
/// says why it cannot run instead of starting anything.
#[test]
fn an_invalid_user_lab_is_listed_with_its_mistake_and_does_not_run() {
    let dir = common::lab_with_a_mistake();
    let set = gpulab::lab::LabSet::load(&[dir.path().to_owned()]);
    let mut a = app();
    a.invalid = set.invalid();
    assert_eq!(a.invalid.len(), 1, "{:?}", a.invalid);
    select(&mut a, "my-finish");
    let screen = common::dash::screen(&mut a, 160, 48);
    assert!(
        screen.contains("my-finish") && screen.contains("invalid"),
        "{screen}"
    );
    assert!(
        screen.contains("clFinish"),
        "the mistake's suggestion is shown:\n{screen}"
    );
    let effects = key(&mut a, KeyCode::Enter);
    assert!(effects.is_empty(), "{effects:?}");
    let said = a.message.clone().unwrap_or_default();
    assert!(
        said.starts_with("cannot run:") && said.contains("mine.toml:"),
        "{said}"
    );
}

/// Esc on a watched program stopped nothing and said "the worker was killed"
/// while the program ran on (#27): it now ends the dashboard as q does, and
/// `watch` stops the program's group.
#[test]
fn esc_on_a_watched_program_quits_to_stop_it_without_claiming_a_kill() {
    let mut a = app();
    a.watch("./app", Default::default());
    key(&mut a, KeyCode::Esc);
    assert!(a.quit);
    let said = a.message.clone().unwrap_or_default();
    assert!(!said.contains("worker was killed"), "{said}");
}

/// Class mode (#49): before the run nothing on screen gives the answer (no
/// lesson beside a claim, no teaching text), each claim's number predicts it,
/// the run takes the predictions after its header, and its verdicts show
/// beside them and the lesson, with the teaching text.
#[test]
fn class_mode_hides_the_answer_until_the_verdicts_and_records_the_predictions() {
    let mut a = app();
    select(&mut a, "cl-finish");
    let plain = common::dash::screen(&mut a, 220, 60);
    assert!(plain.contains("the lesson expects"), "{plain}");
    keys(&mut a, "C");
    assert!(a.class_mode);
    let before = common::dash::screen(&mut a, 220, 60);
    for answer in ["the lesson expects", "Look:", "Why:", "Instead:"] {
        assert!(
            !before.contains(answer),
            "{answer} before the run:\n{before}"
        );
    }
    assert!(before.contains("1 host-waits"), "{before}");
    assert!(before.contains("you predict: —"), "{before}");
    // 1: holds; 1 again: does not hold; 2: holds.
    keys(&mut a, "112");
    let predicted = common::dash::screen(&mut a, 220, 60);
    assert!(
        predicted.contains("you predict: does not hold"),
        "{predicted}"
    );
    assert!(predicted.contains("you predict: holds"), "{predicted}");
    let fx = keys(&mut a, "\n");
    let fx = if fx.is_empty() {
        key(&mut a, KeyCode::Enter)
    } else {
        fx
    };
    // While it runs, still nothing of the answer.
    feed(&mut a, &fx, &shipped("cl-finish--finish")[..1], false);
    let running = common::dash::screen(&mut a, 220, 60);
    assert!(
        !running.contains("the lesson expects") && !running.contains("Look:"),
        "{running}"
    );
    feed(&mut a, &fx, &shipped("cl-finish--finish")[1..], true);
    let run = &a.slots[A].as_ref().expect("a run").run;
    let made: Vec<(&str, &str)> = run
        .predictions()
        .iter()
        .map(|(c, p)| (c.as_str(), p.as_str()))
        .collect();
    assert_eq!(
        made,
        [
            ("host-waits", "does_not_hold"),
            ("kernel-took-its-time", "holds")
        ]
    );
    let after = common::dash::screen(&mut a, 220, 60);
    assert!(
        after.contains("you predicted: does not hold · the device: holds · the lesson: holds"),
        "{after}"
    );
    assert!(after.contains("Look:"), "{after}");
}

/// #49: going back to a lab after another run took the screen shows its
/// last run, not "no run yet".
#[test]
fn a_labs_last_run_is_shown_again_when_the_lab_is_selected_again() {
    let mut a = app();
    select(&mut a, "cl-finish");
    let fx = key(&mut a, KeyCode::Enter);
    feed(&mut a, &fx, &shipped("cl-finish--finish"), true);
    assert!(a.shown().is_some());
    // Another run takes slot A: a recording opened from the list.
    open(&mut a, "nvidia-h100/cl-event-wait--finish", false);
    select(&mut a, "cl-finish");
    let run = a.shown().expect("the last run of cl-finish [finish]");
    assert_eq!(run.lab_id().as_deref(), Some("cl-finish"));
    assert!(!run.run.claims().is_empty());
    let s = common::dash::screen(&mut a, 160, 48);
    assert!(!s.contains("no run yet"), "{s}");
    // Another variant of it has no run of its own.
    keys(&mut a, "v");
    assert!(a.shown().is_none());
}

/// #49: the shipped lesson in a room without the device. Each step selects
/// its lab variant and asks its question while nothing gives the answer; the
/// class predicts, `o` replays the shipped recording with the class's
/// predictions beside its verdicts, and the hint opens with them; `>` and
/// `<` move between the steps, every one of which has a recording to replay.
#[test]
fn the_shipped_lesson_runs_from_its_recordings_in_a_room_without_a_device() {
    let mut a = app();
    let set = gpulab::lab::LabSet::load(&[]);
    let lesson = gpulab::lab::lesson::find("when-memory-comes-back", &set).unwrap();
    let steps = lesson.steps.clone();
    a.open_lesson(lesson);
    assert!(a.class_mode, "a lesson is taught in class mode");
    for (k, step) in steps.iter().enumerate() {
        let (lab, variant) = a.selected_variant().expect("the step's lab");
        assert_eq!(
            (lab.id.as_str(), variant.name.as_str()),
            (step.lab.as_str(), step.variant.as_str())
        );
        let before = common::dash::screen(&mut a, 160, 48);
        assert!(
            before.contains(&format!("step {} of {}", k + 1, steps.len())),
            "{before}"
        );
        let question_start: String = step.question.chars().take(30).collect();
        assert!(
            before.contains(&question_start),
            "{question_start:?} not in\n{before}"
        );
        let hint_start: String = step.hint.chars().take(30).collect();
        for answer in ["the lesson expects", "Look:", "Why:", hint_start.as_str()] {
            assert!(
                !before.contains(answer),
                "{answer} before the run:\n{before}"
            );
        }
        // Claim 1: holds; claim 2 (where there is one): does not hold.
        let claims = a.claims_shown().len();
        assert!(claims >= 1);
        keys(&mut a, "122");
        let fx = keys(&mut a, "o");
        assert!(
            matches!(fx.as_slice(), [Cmd::Open { .. }]),
            "step {}: no recording to replay: {:?}",
            k + 1,
            a.message
        );
        carry_out(&mut a, fx);
        let run = &a.slots[A].as_ref().expect("the replay").run;
        let made: Vec<&str> = run.predictions().values().map(|p| p.as_str()).collect();
        assert_eq!(made.len(), claims.min(2), "step {}", k + 1);
        assert!(made.contains(&"holds"), "{made:?}");
        assert_eq!(claims >= 2, made.contains(&"does_not_hold"), "{made:?}");
        let after = common::dash::screen(&mut a, 160, 48);
        assert!(after.contains("you predicted: "), "{after}");
        assert!(after.contains("hint:"), "{after}");
        if k + 1 < steps.len() {
            keys(&mut a, ">");
        }
    }
    keys(&mut a, ">");
    assert!(a.message.as_deref().unwrap_or("").contains("last step"));
    keys(&mut a, "<");
    let (lab, _) = a.selected_variant().unwrap();
    assert_eq!(lab.id, steps[steps.len() - 2].lab);
}

/// #49: the shipped H200 card's runs are in the list, each named by its
/// device and backend, and `c` on one compares it with the other variant run
/// on the same device (its own folder), never the H100's.
#[test]
fn the_h200_cards_runs_are_listed_and_compared_within_their_device() {
    let mut a = app();
    let card = "cards/nvidia-h200/recordings/";
    let listed: Vec<&String> = a
        .recordings
        .iter()
        .zip(&a.recording_labels)
        .filter(|(p, _)| p.to_string_lossy().contains(card))
        .map(|(_, l)| l)
        .collect();
    let on_disk = gpulab::tui::recordings::find(&common::repo_file(""))
        .iter()
        .filter(|p| p.to_string_lossy().contains(card))
        .count();
    assert!(on_disk >= 53, "{on_disk}");
    assert_eq!(listed.len(), on_disk);
    assert!(
        listed
            .iter()
            .any(|l| l.as_str() == "cl-finish finish · h200 opencl"),
        "{listed:?}"
    );
    for device in ["opencl-1-nvidia-h200", "cuda-0-nvidia-h200", "opencl-0-cpu"] {
        let lab = if device.starts_with("cuda") {
            "cuda-free-sync--free-used"
        } else {
            "cl-finish--finish"
        };
        let i = a
            .recordings
            .iter()
            .position(|p| p.to_string_lossy().contains(device) && p.to_string_lossy().contains(lab))
            .unwrap();
        let path = a.recordings[i].to_string_lossy().into_owned();
        open(&mut a, &path, false);
        let fx = keys(&mut a, "c");
        carry_out(&mut a, fx);
        assert!(a.compare, "{:?}", a.message);
        let Some(gpulab::tui::runstate::Feed::Recording(b)) =
            a.slots[B].as_ref().map(|r| r.origin.clone())
        else {
            panic!("no recording beside it: {:?}", a.message);
        };
        assert_eq!(b.parent(), a.recordings[i].parent(), "{}", b.display());
        assert_ne!(&b, &a.recordings[i]);
        key(&mut a, KeyCode::Esc);
    }
}

/// A watched program's objects get the left column; the lab list keeps a few
/// rows (it took half of it, with nothing of the program in it).
#[test]
fn a_watched_programs_objects_fill_the_left_column() {
    let lab = Screen::new(160, 48, View::default());
    let watched = Screen::new(
        160,
        48,
        View {
            watched: true,
            ..View::default()
        },
    );
    let rows = |s: &Screen, p: Panel| s.get(p, 0).expect("on screen").height;
    assert!(rows(&watched, Panel::Objects) > 2 * rows(&lab, Panel::Objects));
    assert_eq!(rows(&watched, Panel::Labs), 5);
    assert_eq!(
        rows(&watched, Panel::Labs) + rows(&watched, Panel::Objects),
        rows(&lab, Panel::Labs) + rows(&lab, Panel::Objects)
    );
}

/// PgDn stops where the verdict panel's last line reaches its bottom, as a
/// pager does (at the next frame): it scrolled on past the end, and PgUp
/// then took as many presses to come back. The last page stays in view.
#[test]
fn pgdn_stops_at_the_end_of_the_verdict_panel() {
    let mut a = app();
    a.update(Msg::Resize(80, 24));
    common::dash::select(&mut a, "cl-finish");
    while a.focus != Panel::Verdict {
        key(&mut a, KeyCode::Tab);
    }
    let end = gpulab::tui::screen::verdict_scroll_max(&a);
    assert!(end > 0, "cl-finish's teaching text fills more than 80x24");
    for _ in 0..500 {
        key(&mut a, KeyCode::PageDown);
    }
    let last = screen(&mut a, 80, 24);
    assert_eq!(a.verdict_scroll, end);
    key(&mut a, KeyCode::PageUp);
    assert!(a.verdict_scroll < end);
    assert_ne!(screen(&mut a, 80, 24), last, "one PgUp moves the text back");
}
