//! The dashboard loop, generic over ratatui's `Backend` so tests drive it on a
//! `TestBackend`. It waits on one channel that every producer feeds (input, run
//! events, the doctor, the frame tick), folds each message into the app, carries
//! out the effects, and draws on the tick only when something changed: at 1 kHz
//! sampling a redraw per message would burn a core. What the user does shows on
//! the next tick; a live run's data alone every `DATA_TICKS` ticks (`Pace`).

use std::fs::File;
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender};
use std::thread;
use std::time::SystemTime;

use ratatui::Terminal;
use ratatui::backend::Backend;

use crate::source::{Recorder, RunControl, RunSource, Sink, Workload};
use crate::{history, trace};

use super::app::{App, Cmd, Msg};
use super::in_flight::{self, InFlight};
use super::screen::Dashboard;

/// Where the events of the run in `slot` go: messages to the loop, at most
/// [`in_flight::BATCHES`] batches on the way (a producer waits for the loop
/// beyond that), and `Closed` once its stream has ended.
pub fn run_sink(tx: &Sender<Msg>, slot: usize, epoch: u64) -> Sink {
    let (events_tx, closed_tx) = (tx.clone(), tx.clone());
    let in_flight = InFlight::new(in_flight::BATCHES);
    Sink::new(
        move |events| {
            let ticket = in_flight.take();
            events_tx
                .send(Msg::Run {
                    slot,
                    epoch,
                    events,
                    ticket,
                })
                .is_ok()
        },
        move || {
            let _ = closed_tx.send(Msg::Closed {
                slot,
                epoch,
                error: None,
            });
        },
    )
}

/// The controls of the runs in each slot.
pub type Controls = [Option<Box<dyn RunControl>>; 2];

/// `mouse` is told each time the app asks for mouse reporting on or off (`m`).
/// `controls` holds runs started before the loop (`gpulab watch --dashboard`),
/// whose events come on `rx` through [`run_sink`].
pub fn run<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    (tx, rx): (&Sender<Msg>, &Receiver<Msg>),
    source: &dyn RunSource,
    mut controls: Controls,
    mouse: &mut dyn FnMut(bool),
) -> Result<(), B::Error> {
    let mut mouse_on = app.mouse;
    let mut pace = Pace::default();
    draw(terminal, app)?;
    while let Ok(msg) = rx.recv() {
        let tick = matches!(msg, Msg::Tick);
        let closed = matches!(msg, Msg::Closed { .. });
        for effect in app.update(msg) {
            carry_out(effect, app, &mut controls, tx, source);
        }
        if closed && let Some(dir) = history::dir() {
            // The run's recording in the history is finished: the oldest go.
            let _ = history::prune(&dir, history::MAX_RUNS, history::MAX_BYTES);
        }
        if app.mouse != mouse_on {
            mouse_on = app.mouse;
            mouse(mouse_on);
        }
        if app.quit {
            break;
        }
        if tick && pace.tick(app.dirty, app.streamed) {
            draw(terminal, app)?;
        }
    }
    // Dropping a control kills its worker: none outlives the dashboard.
    for c in controls.iter_mut().flatten() {
        c.cancel();
    }
    drain_watched(terminal, app, rx)
}

/// A watched program's last events still count (its report comes after the
/// dashboard): once it has been asked to stop, its stream is followed to its
/// end, the screen saying why it has not closed yet.
fn drain_watched<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    rx: &Receiver<Msg>,
) -> Result<(), B::Error> {
    if !app.watching() {
        return Ok(());
    }
    // Short enough for an 80-column status bar.
    app.message = Some("stopping the program: SIGTERM, SIGKILL in 5 s".into());
    draw(terminal, app)?;
    while app.watching() {
        let Ok(msg) = rx.recv() else { break };
        match msg {
            Msg::Run { .. } | Msg::Closed { .. } => {
                app.update(msg);
            }
            Msg::Tick if app.streamed => draw(terminal, app)?,
            _ => {}
        }
    }
    Ok(())
}

pub fn draw<B: Backend>(terminal: &mut Terminal<B>, app: &mut App) -> Result<(), B::Error> {
    if let Ok(size) = terminal.size() {
        app.size = (size.width, size.height);
    }
    // What the panels read is made here, once a frame; they draw with `&self`.
    app.refresh_findings();
    // PgDn stops where the verdicts' last line reaches the panel's bottom, as
    // a pager does: PgUp then moves the text at once.
    if app.verdict_scroll > 0 {
        app.verdict_scroll = app
            .verdict_scroll
            .min(crate::screen::verdict_scroll_max(app));
    }
    terminal.draw(|f| f.render_widget(&Dashboard { app }, f.area()))?;
    app.dirty = false;
    app.streamed = false;
    Ok(())
}

/// A live run's data alone is drawn every this many frame ticks (every 120 ms,
/// 8 frames a second): a frame costs ~1.4 ms of CPU on the H100 host at
/// 160x48, and drawing each of 25 a second during a run was 3.3-3.8% of a core
/// beside the sampler's 4.4%. Keys, the mouse, a resize, a run's end and a
/// playing recording still draw on the next tick.
pub const DATA_TICKS: u32 = 3;

/// Which ticks draw.
#[derive(Debug, Default)]
pub struct Pace {
    since_draw: u32,
}

impl Pace {
    /// Whether this tick draws, given what changed since the last frame:
    /// `dirty` (the user, the doctor, a run's end, playback) or only `streamed`
    /// (a live run's events).
    pub fn tick(&mut self, dirty: bool, streamed: bool) -> bool {
        self.since_draw = self.since_draw.saturating_add(1);
        let draw = dirty || (streamed && self.since_draw >= DATA_TICKS);
        if draw {
            self.since_draw = 0;
        }
        draw
    }
}

fn carry_out(
    effect: Cmd,
    app: &mut App,
    controls: &mut Controls,
    tx: &Sender<Msg>,
    source: &dyn RunSource,
) {
    match effect {
        Cmd::Start {
            slot,
            epoch,
            req,
            record,
        } => {
            let name = history::file_name(SystemTime::now(), &req.lab.id, req.variant_name());
            match source.start(Workload::Lab(req), run_sink(tx, slot, epoch)) {
                Ok(control) => {
                    controls[slot] = Some(control);
                    // Before any of its events is folded: they wait on `tx`.
                    for recording in recordings(&name, record, app) {
                        app.record_to(slot, epoch, recording);
                    }
                }
                Err(e) => {
                    let _ = tx.send(Msg::Closed {
                        slot,
                        epoch,
                        error: Some(e.to_string()),
                    });
                    app.message = Some(format!("cannot start the worker: {e}"));
                }
            }
        }
        Cmd::Open { slot, epoch, path } => {
            controls[slot] = None;
            let tx = tx.clone();
            thread::spawn(move || replay(&path, slot, epoch, &tx));
        }
        Cmd::Control { slot, cmd } => {
            if let Some(c) = &mut controls[slot] {
                c.send(cmd);
            }
        }
        Cmd::Cancel { slot } => {
            if let Some(c) = &mut controls[slot] {
                c.cancel();
            }
        }
    }
}

/// Files a live run is recorded to, with the thinning every recording
/// shares: the history always (when there is a data folder), and the file
/// `R` asked for. The status bar says where.
fn recordings(name: &str, record: bool, app: &mut App) -> Vec<Recorder> {
    let mut out = Vec::new();
    if let Some(dir) = history::dir()
        && std::fs::create_dir_all(&dir).is_ok()
        && let Ok(r) = Recorder::create(&dir.join(name))
    {
        out.push(r);
    }
    if record {
        match record_to(name) {
            Ok(r) => {
                app.message = Some(format!("recording this run to {}", r.path().display()));
                app.add_recording(r.path().to_path_buf());
                out.push(r);
            }
            Err(why) => app.message = Some(format!("cannot record this run: {why}")),
        }
    }
    out
}

/// The file `R` asked for, in the data folder's `recordings`.
fn record_to(name: &str) -> Result<Recorder, String> {
    let dir = history::recordings_dir()
        .ok_or_else(|| format!("no data folder (set {} or HOME)", history::ENV_DIR))?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(name);
    Recorder::create(&path).map_err(|e| format!("{}: {e}", path.display()))
}

/// A recording, read leniently (damaged lines skipped and named) and handed to
/// the app whole: playback needs every event to scrub.
pub fn replay(path: &Path, slot: usize, epoch: u64, tx: &Sender<Msg>) {
    let read = File::open(path)
        .map_err(|e| e.to_string())
        .and_then(|f| trace::read_recording(std::io::BufReader::new(f)).map_err(|e| e.to_string()));
    match read {
        Ok(rec) => {
            let _ = tx.send(Msg::Loaded {
                slot,
                epoch,
                events: rec.events,
                problems: rec.problems.iter().map(ToString::to_string).collect(),
            });
            let _ = tx.send(Msg::Closed {
                slot,
                epoch,
                error: None,
            });
        }
        Err(e) => {
            let error = Some(format!("{}: {e}", path.display()));
            let _ = tx.send(Msg::Closed { slot, epoch, error });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_data_draws_every_few_ticks_and_the_user_at_once() {
        let mut pace = Pace::default();
        // Nothing changed: no frame.
        assert!(!pace.tick(false, false));
        assert!(!pace.tick(false, false));
        // Data waiting since long ago: drawn at once.
        assert!(pace.tick(false, true));
        // Then data every DATA_TICKS ticks.
        let drawn: Vec<bool> = (0..2 * DATA_TICKS)
            .map(|_| pace.tick(false, true))
            .collect();
        let mut every = vec![false; DATA_TICKS as usize - 1];
        every.push(true);
        assert_eq!(drawn, [every.clone(), every].concat());
        // A key draws on the next tick whatever the data did.
        assert!(pace.tick(true, true));
        assert!(pace.tick(true, false));
        // Data right after a key-driven frame waits its turn.
        assert!(!pace.tick(false, true));
    }
}
