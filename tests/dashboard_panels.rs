//! Each panel alone: snapshots from a recording at 80×24, and no panic at any size
//! from 0×0 up, with and without a run.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use common::dash::{app, open, text};
use gpulab::tui::App;
use gpulab::tui::app::A;
use gpulab::tui::panels::Axes;
use gpulab::tui::panels::help::HelpOverlay;
use gpulab::tui::panels::labs::LabsPanel;
use gpulab::tui::panels::memory::MemoryPanel;
use gpulab::tui::panels::objects::ObjectsPanel;
use gpulab::tui::panels::params::ParamsOverlay;
use gpulab::tui::panels::script::ScriptPanel;
use gpulab::tui::panels::status::StatusBar;
use gpulab::tui::panels::timeline::TimelinePanel;
use gpulab::tui::panels::verdict::VerdictPanel;
use gpulab::tui::screen::Dashboard;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::Widget;

const SIZES: [(u16, u16); 4] = [(0, 0), (1, 1), (80, 24), (200, 60)];

/// Every panel of `app`, by name, rendered into a `w`×`h` buffer.
#[expect(
    clippy::too_many_lines,
    reason = "a test helper: every panel of a frame, one after the other"
)]
fn panels(app: &App, w: u16, h: u16) -> Vec<(&'static str, String)> {
    let area = Rect::new(0, 0, w, h);
    let run = app.slots[A].as_ref();
    let lab = run.and_then(|r| app.lab_for(r)).or(app.labs.first());
    let t = app.theme;
    let entries = app.entries();
    let axes = run.map(|r| Axes::of(&[r]));
    let mut out = Vec::new();
    let mut draw = |name: &'static str, f: &dyn Fn(&mut Buffer)| {
        let mut buf = Buffer::empty(area);
        f(&mut buf);
        out.push((name, text(&buf)));
    };
    draw("labs", &|b| {
        LabsPanel {
            labs: &app.labs,
            invalid: &app.invalid,
            recordings: &app.recording_labels,
            entries: &entries,
            selected: app.selected,
            variant: 0,
            filter: "",
            filtering: false,
            availability: app.availability.as_ref(),
            lab_recording: None,
            theme: t,
            focused: true,
        }
        .render(area, b)
    });
    draw("script", &|b| {
        ScriptPanel {
            lab,
            variant: 0,
            params: None,
            run,
            scroll: 0,
            theme: t,
            focused: false,
        }
        .render(area, b)
    });
    draw("memory", &|b| {
        MemoryPanel {
            run,
            axes,
            theme: t,
            focused: false,
            curve: t.memory(),
        }
        .render(area, b)
    });
    draw("objects", &|b| {
        ObjectsPanel {
            rank: None,
            run,
            theme: t,
            focused: false,
        }
        .render(area, b)
    });
    draw("timeline", &|b| {
        TimelinePanel {
            run,
            axes,
            theme: t,
            focused: false,
        }
        .render(area, b)
    });
    draw("verdict", &|b| {
        VerdictPanel {
            rank: None,
            variant: 0,
            lab,
            run,
            scroll: 0,
            theme: t,
            focused: false,
            class_mode: false,
            predicted: None,
            step: None,
        }
        .render(area, b)
    });
    draw("status", &|b| {
        StatusBar {
            run,
            availability: app.availability.as_ref(),
            sample_hz: 1000.0,
            message: None,
            mode: gpulab::tui::keys::Mode::Main,
            theme: t,
        }
        .render(area, b)
    });
    draw("help", &|b| {
        HelpOverlay {
            theme: t,
            scroll: 0,
        }
        .render(area, b)
    });
    if let Some(lab) = lab {
        let values = lab.default_params();
        draw("params", &|b| {
            ParamsOverlay {
                lab,
                values: &values,
                selected: 0,
                typed: "",
                theme: t,
            }
            .render(area, b)
        });
    }
    draw("dashboard", &|b| (&Dashboard { app }).render(area, b));
    out
}

#[test]
fn every_panel_renders_at_any_size_without_panicking() {
    let empty = app();
    let mut with_run = app();
    open(
        &mut with_run,
        "h100-opencl--cl-forgotten-events--forgotten",
        false,
    );
    let mut pocl = app();
    open(&mut pocl, "pocl--cl-finish--no-wait", false);
    for a in [&empty, &with_run, &pocl] {
        for (w, h) in SIZES {
            let drawn = panels(a, w, h);
            assert!(drawn.len() >= 10);
        }
    }
}

#[test]
fn panel_snapshots_from_the_h100_recording() {
    let mut a = app();
    open(
        &mut a,
        "h100-opencl--cl-premature-release--release-then-finish",
        false,
    );
    for (name, text) in panels(&a, 80, 24) {
        if name == "dashboard" || name == "help" {
            continue;
        }
        insta::assert_snapshot!(format!("panel_{name}_80x24"), text);
    }
}

/// The H100 PyTorch recording (`tests/watch/torch_cache.py` under watch), cut
/// between `del x` and `torch.cuda.empty_cache()`: the GiB is alive *now* (not
/// "at exit"), named as the process's own (its caching allocator's), and the
/// objects panel lists CUDA's kinds, not OpenCL's.
#[test]
fn a_watched_pytorch_program_mid_run_holds_its_cached_gib() {
    use gpulab::trace::{Event, ObjKind, ObjectAction};
    use gpulab::tui::runstate::{Feed, RunState};
    use gpulab::tui::theme::Theme;

    let path = common::repo_file("assets/watch-recordings/nvidia-h100/torch-cache.jsonl");
    let text_in = std::fs::read_to_string(path).expect("the shipped recording");
    let events = gpulab::trace::read_events(text_in.as_bytes()).expect("it reads");
    let freed_at = events
        .iter()
        .find_map(|e| match e {
            Event::Object(o) if o.kind == ObjKind::Buffer && o.action == ObjectAction::Released => {
                Some(o.t_ns)
            }
            _ => None,
        })
        .expect("empty_cache freed the GiB");
    let before: Vec<&Event> = events
        .iter()
        .filter(|e| e.t_ns().is_none_or(|t| t < freed_at))
        .collect();
    let mut run = RunState::from_events(Feed::Recording("torch".into()), before);
    run.closed = false;
    let area = Rect::new(0, 0, 120, 12);
    let mut buf = Buffer::empty(area);
    VerdictPanel {
        rank: None,
        variant: 0,
        lab: None,
        run: Some(&run),
        scroll: 0,
        theme: Theme::PLAIN,
        focused: false,
        class_mode: false,
        predicted: None,
        step: None,
    }
    .render(area, &mut buf);
    let verdict = text(&buf);
    assert!(
        verdict.contains("1 buffer alive now (1024.00 MiB), made by cuMemAlloc"),
        "{verdict}"
    );
    assert!(!verdict.contains("at exit"), "{verdict}");
    assert!(verdict.contains("caching allocator"), "{verdict}");

    let area = Rect::new(0, 0, 40, 14);
    let mut buf = Buffer::empty(area);
    ObjectsPanel {
        rank: None,
        run: Some(&run),
        theme: Theme::PLAIN,
        focused: false,
    }
    .render(area, &mut buf);
    let objects = text(&buf);
    assert!(objects.contains("streams"), "{objects}");
    assert!(!objects.contains("queues"), "{objects}");
}

/// A lab run cut while its kernel runs (the enqueue returned, the span has not
/// come): the timeline draws the kernel in flight from its enqueue to the
/// latest reading, and no longer once the span arrives.
#[test]
fn a_kernel_still_running_is_drawn_in_flight_until_its_span_comes() {
    use gpulab::trace::Event;
    use gpulab::tui::runstate::{Feed, RunState};
    use gpulab::tui::theme::Theme;

    let events = common::dash::events("h100-opencl--cl-premature-release--release-then-finish");
    let enqueue = events
        .iter()
        .find_map(|e| match e {
            Event::Call(c) if c.api == "clEnqueueNDRangeKernel" => Some(c.clone()),
            _ => None,
        })
        .expect("the lab enqueues a kernel");
    let span_end = events
        .iter()
        .find_map(|e| match e {
            Event::DeviceSpan(s) if s.call_seq == enqueue.seq => Some(s.end_ns),
            _ => None,
        })
        .expect("its span");
    let draw = |events: Vec<&Event>| {
        let mut run = RunState::from_events(Feed::Recording("cut".into()), events);
        run.closed = false;
        let area = Rect::new(0, 0, 100, 8);
        let mut buf = Buffer::empty(area);
        TimelinePanel {
            run: Some(&run),
            axes: None,
            theme: Theme::PLAIN,
            focused: false,
        }
        .render(area, &mut buf);
        text(&buf)
    };
    // Everything before the kernel's span was reported (and before the end).
    let running: Vec<&Event> = events
        .iter()
        .filter(|e| !matches!(e, Event::DeviceSpan(_) | Event::End(_) | Event::Claim(_)))
        .filter(|e| e.t_ns().is_none_or(|t| t < span_end))
        .collect();
    let during = draw(running);
    assert!(during.contains("pending"), "{during}");
    assert!(during.contains('░'), "{during}");
    let after = draw(events.iter().collect());
    assert!(!after.contains("pending"), "{after}");
}

/// A live run inside a blocking call (H100 cuda-free-sync `free-used`, cut
/// while its cudaFree waits for the kernel): the host lane draws the call from
/// the previous call's end to the latest reading, and not once it returned.
#[test]
fn a_blocking_call_is_drawn_on_the_host_lane_while_it_runs() {
    use gpulab::trace::Event;
    use gpulab::tui::runstate::{Feed, RunState};
    use gpulab::tui::theme::Theme;

    let path = common::repo_file("assets/recordings/nvidia-h100/cuda-free-sync--free-used.jsonl");
    let file = std::fs::File::open(&path).expect("the shipped recording");
    let events = gpulab::trace::read_events(std::io::BufReader::new(file)).expect("it reads");
    let free = events
        .iter()
        .find_map(|e| match e {
            Event::Call(c) if c.api == "cudaFree" => Some(c.clone()),
            _ => None,
        })
        .expect("the lab frees its buffer");
    // Just before it returned: the recording keeps the readings near a call's
    // edges (idle stretches are thinned), as a live run has them all.
    let cut = free.end_ns - 1;
    let draw = |events: Vec<&Event>| {
        let origin = Feed::Live {
            lab: "cuda-free-sync".into(),
            variant: "free-used".into(),
            step: false,
        };
        let mut run = RunState::from_events(origin, events);
        // Still coming in, as a live run is.
        run.closed = false;
        let area = Rect::new(0, 0, 100, 8);
        let mut buf = Buffer::empty(area);
        TimelinePanel {
            run: Some(&run),
            axes: None,
            theme: Theme::PLAIN,
            focused: false,
        }
        .render(area, &mut buf);
        text(&buf)
    };
    let during: Vec<&Event> = events
        .iter()
        .filter(|e| match e {
            Event::Call(c) => c.end_ns < cut,
            Event::End(_) | Event::Claim(_) | Event::DeviceSpan(_) => false,
            e => e.t_ns().is_none_or(|t| t < cut),
        })
        .collect();
    let drawn = draw(during);
    let host = drawn
        .lines()
        .find(|l| l.starts_with("│host"))
        .unwrap_or_default();
    assert!(host.matches('┅').count() >= 10, "{drawn}");
    let after = draw(events.iter().collect());
    assert!(!after.contains('┅'), "{after}");
}

/// The H100 run of cuda-cross-stream-free's `unordered` variant, where the
/// kernel faulted: the sync line (51), which the lab now marks `# expect-error`
/// (the recording predates the mark; the call results are as recorded), with
/// the host's load as the parent would have measured it.
#[test]
fn the_verdict_panel_states_the_finding_and_the_hosts_load() {
    use gpulab::trace::{Event, HostLoad, read_events};
    use gpulab::tui::runstate::{Feed, RunState};
    use gpulab::tui::theme::Theme;

    let path =
        common::repo_file("assets/recordings/nvidia-h100/cuda-cross-stream-free--unordered.jsonl");
    let file = std::fs::File::open(&path).expect("the H100 recording");
    let mut events = read_events(std::io::BufReader::new(file)).expect("it reads");
    for e in &mut events {
        if let Event::Call(c) = e
            && c.line == Some(51)
        {
            c.expect_error = true;
        }
    }
    let draw = |events: &[Event]| {
        let run = RunState::from_events(Feed::Recording("h100".into()), events);
        let area = Rect::new(0, 0, 80, 24);
        let mut buf = Buffer::empty(area);
        VerdictPanel {
            rank: None,
            variant: 0,
            lab: None,
            run: Some(&run),
            scroll: 0,
            theme: Theme::PLAIN,
            focused: false,
            class_mode: false,
            predicted: None,
            step: None,
        }
        .render(area, &mut buf);
        text(&buf)
    };
    let quiet = draw(&events);
    assert!(!quiet.contains("loaded"), "{quiet}");
    events.push(Event::Load(HostLoad {
        t_ns: 0,
        load_avg: 5.2,
        cores: 2,
        cpu_waiting: None,
    }));
    let panel = draw(&events);
    assert!(
        panel.contains("load average 5.2 on 2 cores during the run"),
        "{panel}"
    );
    assert!(
        panel.contains("finding: line 51 `cudaStreamSynchronize(sa)` returned"),
        "{panel}"
    );
    insta::assert_snapshot!("panel_verdict_finding_and_load_80x24", panel);
}

/// The H200 PyTorch recording (`tests/watch/torch_losses.py` under watch):
/// the memory chart stacks who held the program's memory under its curve,
/// bottom to top, from the run's own compositions: its objects (PyTorch's
/// tensors) under the context's reserve, never the other way round, with a
/// legend. Without colour the shares are not drawn (the findings say them).
#[test]
fn a_watched_programs_memory_is_stacked_by_who_holds_it() {
    use gpulab::tui::runstate::{Feed, RunState};
    use gpulab::tui::theme::Theme;
    use ratatui::style::Color;

    let path = common::repo_file("assets/watch-recordings/nvidia-h200/torch-losses.jsonl");
    let text_in = std::fs::read_to_string(path).expect("the shipped recording");
    let events = gpulab::trace::read_events(text_in.as_bytes()).expect("it reads");
    let run = RunState::from_events(Feed::Recording("torch".into()), events.iter());
    let last = run
        .run
        .composition()
        .points()
        .last()
        .copied()
        .expect("compositions");
    assert!(last.held > 0 && last.reserves > 0, "{last:?}");
    let area = Rect::new(0, 0, 100, 16);
    let draw = |theme: Theme| {
        let mut buf = Buffer::empty(area);
        MemoryPanel {
            run: Some(&run),
            axes: None,
            theme,
            focused: false,
            curve: theme.memory(),
        }
        .render(area, &mut buf);
        buf
    };
    let color = Theme {
        color: true,
        light: false,
    };
    let buf = draw(color);
    // A narrow chart names the shares short.
    assert!(
        text(&buf).contains("■obj  ■cache  ■res  ■kept"),
        "{}",
        text(&buf)
    );
    let [held, _, reserves, _] = color.shares();
    // Column by column, from the bottom: the objects' cells, then the
    // reserve's, never a reserve cell under an object's (a cell the two share
    // takes the upper one's colour).
    let is = |x: u16, y: u16, fg: Option<Color>| {
        buf.cell((x, y)).is_some_and(|c| {
            c.fg == fg.unwrap_or(Color::Reset)
                && c.symbol()
                    .chars()
                    .next()
                    .is_some_and(|ch| ('\u{2800}'..='\u{28ff}').contains(&ch))
        })
    };
    let mut both = 0;
    for x in 0..area.width {
        let held_rows: Vec<u16> = (1..area.height).filter(|y| is(x, *y, held.fg)).collect();
        let reserve_rows: Vec<u16> = (1..area.height)
            .filter(|y| is(x, *y, reserves.fg))
            .collect();
        if let (Some(lowest_reserve), Some(highest_held)) =
            (reserve_rows.iter().max(), held_rows.iter().min())
        {
            both += 1;
            assert!(
                lowest_reserve < highest_held,
                "column {x}: objects {held_rows:?}, reserves {reserve_rows:?}\n{}",
                text(&buf)
            );
        }
    }
    assert!(both > 0, "{}", text(&buf));
    let plain = draw(Theme::PLAIN);
    assert!(!text(&plain).contains("■obj"), "{}", text(&plain));
}

/// #49: a lab whose setup (PoCL's buffer creation, its program build) took
/// most of the run starts its time axis shortly before its first line that
/// gives the device work, and both panels say from when; a run with little
/// setup, and two runs compared, start at 0.
#[test]
fn a_long_setup_is_left_of_the_axis_and_said() {
    let mut a = app();
    open(&mut a, "pocl--cl-finish--no-wait", false);
    let run = a.slots[A].as_ref().unwrap();
    let axes = Axes::of(&[run]);
    let first_work = run
        .run
        .calls()
        .iter()
        .find(|c| c.api.as_str() == "clEnqueueNDRangeKernel")
        .unwrap()
        .begin_ns
        - run.t0();
    let whole = run.duration_ns();
    if first_work * 3 > whole {
        assert!(axes.skip_ns > 0 && axes.skip_ns <= first_work, "{axes:?}");
        assert_eq!(axes.skip_ns + axes.dur_ns, whole);
        let mut buf = Buffer::empty(Rect::new(0, 0, 120, 12));
        (&MemoryPanel {
            run: Some(run),
            axes: None,
            theme: gpulab::tui::Theme::PLAIN,
            focused: false,
            curve: ratatui::style::Style::new(),
        })
            .render(buf.area, &mut buf);
        let memory = text(&buf);
        assert!(memory.contains(", after the setup"), "{memory}");
        let from = gpulab::tui::panels::fmt_dur(axes.skip_ns);
        assert!(memory.contains(&from), "{from} not on the axis:\n{memory}");
    } else {
        assert_eq!(axes.skip_ns, 0);
    }
    // Compared with another run, the axis is shared from both starts.
    assert_eq!(Axes::of(&[run, run]).skip_ns, 0);
    // Every shipped lab recording: the axis never starts after the first
    // line that gave the device work, starts late only where the setup took
    // over a third of the run, and always ends at the run's end.
    for path in gpulab::tui::recordings::find(&common::repo_file("")) {
        let Ok(rec) = gpulab::trace::read_recording(
            std::fs::File::open(&path)
                .map(std::io::BufReader::new)
                .unwrap(),
        ) else {
            continue;
        };
        let run = gpulab::tui::runstate::RunState::from_events(
            gpulab::tui::runstate::Feed::Recording(path.clone()),
            &rec.events,
        );
        let axes = Axes::of(&[&run]);
        let work = run
            .run
            .calls()
            .iter()
            .find(|c| {
                c.api
                    .api()
                    .is_some_and(gpulab::lab::Api::queues_device_work)
            })
            .map(|c| c.begin_ns.saturating_sub(run.t0()));
        let whole = run.duration_ns().max(1);
        match work {
            Some(w) if run.run.meta().is_some_and(|m| m.lab.is_some()) && w * 3 > whole => {
                assert!(axes.skip_ns > 0 && axes.skip_ns <= w, "{}", path.display());
            }
            _ => assert_eq!(axes.skip_ns, 0, "{}", path.display()),
        }
        assert_eq!(axes.skip_ns + axes.dur_ns, whole, "{}", path.display());
    }
}
