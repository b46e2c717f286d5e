//! Driving the dashboard without a terminal: an app over the shipped labs and the
//! fixture recordings, key presses, recorded events fed as a run would feed them,
//! and frames rendered on ratatui's `TestBackend` as plain text.

use std::sync::mpsc;

use gpulab::lab::{Lab, Origin, catalog};
use gpulab::source::Availability;
use gpulab::trace::{Event, read_events};
use gpulab::tui::app::{App, Cmd, Entry, Msg};
use gpulab::tui::event_loop;
use gpulab::tui::{Theme, recordings};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

pub const DEVICE: &str = "test-cpu · Portable Computing Language · driver 0";

pub fn shipped_labs() -> Vec<Lab> {
    catalog::SHIPPED
        .iter()
        .map(|(f, t)| catalog::parse(f, t, Origin::Builtin).expect("shipped lab parses"))
        .collect()
}

/// An app that knows one (fake) device, as the doctor child would report it.
pub fn app() -> App {
    let mut app = App::new(
        shipped_labs(),
        recordings::find(&super::repo_file("")),
        Theme::PLAIN,
    );
    app.update(Msg::Doctor(Availability::device(DEVICE)));
    app
}

pub fn key(app: &mut App, code: KeyCode) -> Vec<Cmd> {
    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

/// Types each character as a key press; effects of all of them.
pub fn keys(app: &mut App, text: &str) -> Vec<Cmd> {
    text.chars()
        .flat_map(|c| key(app, KeyCode::Char(c)))
        .collect()
}

pub fn events(recording: &str) -> Vec<Event> {
    let path = super::repo_file(&format!("tests/fixtures/recordings/{recording}.jsonl"));
    let file = std::fs::File::open(&path).expect("fixture recording");
    read_events(std::io::BufReader::new(file)).expect("fixture reads")
}

/// Selects the lab of id `part`, or the recording whose path contains it
/// (`nvidia-h100/cl-finish--finish`).
pub fn select(app: &mut App, part: &str) {
    let pos = app.entries().iter().position(|e| match *e {
        Entry::Lab(i) => app.labs[i].id == part,
        Entry::Invalid(i) => app.invalid[i].0 == part,
        Entry::Recording(i) => app.recordings[i].to_string_lossy().contains(part),
    });
    app.selected = pos.unwrap_or_else(|| panic!("no entry {part}"));
}

/// Carries out `Open` effects the way the loop does (synchronously here).
pub fn carry_out(app: &mut App, effects: Vec<Cmd>) {
    for e in effects {
        if let Cmd::Open { slot, epoch, path } = e {
            let (tx, rx) = mpsc::channel();
            event_loop::replay(
                &super::repo_file(&path.display().to_string()),
                slot,
                epoch,
                &tx,
            );
            drop(tx);
            for msg in rx {
                app.update(msg);
            }
        }
    }
}

/// Opens a fixture recording like a user: select it, press Enter (or `c`).
pub fn open(app: &mut App, part: &str, compare: bool) {
    select(app, part);
    let fx = key(
        app,
        if compare {
            KeyCode::Char('c')
        } else {
            KeyCode::Enter
        },
    );
    carry_out(app, fx);
}

/// Feeds events into the run an effect started, as its worker would.
pub fn feed(app: &mut App, effects: &[Cmd], events: &[Event], close: bool) {
    let Some(Cmd::Start { slot, epoch, .. }) = effects.first() else {
        panic!("expected a started run, got {effects:?}");
    };
    for e in events {
        app.update(Msg::Run {
            slot: *slot,
            epoch: *epoch,
            events: vec![e.clone()],
            ticket: gpulab::tui::in_flight::Ticket::none(),
        });
    }
    if close {
        app.update(Msg::Closed {
            slot: *slot,
            epoch: *epoch,
            error: None,
        });
    }
}

pub fn text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in 0..area.height {
        let mut line = String::new();
        for x in 0..area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// One frame of the whole dashboard at `w`×`h`, as text.
pub fn screen(app: &mut App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    event_loop::draw(&mut t, app).expect("draws");
    text(t.backend().buffer())
}
