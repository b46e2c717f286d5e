//! Each panel alone: snapshots from a recording at 80×24, and no panic at any size
//! from 0×0 up, with and without a run.

mod common;

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
            recordings: &app.recordings,
            entries: &entries,
            selected: app.selected,
            variant: 0,
            filter: "",
            filtering: false,
            availability: app.availability.as_ref(),
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
            lab,
            run,
            scroll: 0,
            theme: t,
            focused: false,
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
    draw("help", &|b| HelpOverlay { theme: t }.render(area, b));
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
