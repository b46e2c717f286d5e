//! The dashboard loop, generic over ratatui's `Backend` so tests drive it on a
//! `TestBackend`. It waits on one channel that every producer feeds (input, run
//! events, the doctor, the frame tick), folds each message into the app, carries
//! out the effects, and draws on the tick only when something changed: at 1 kHz
//! sampling a redraw per message would burn a core.

use std::path::Path;
use std::sync::mpsc::{Receiver, Sender};
use std::thread;

use ratatui::Terminal;
use ratatui::backend::Backend;

use crate::source::{RunControl, RunSource};
use crate::trace;

use super::app::{App, Effect, Msg};
use super::screen::Dashboard;

pub fn run<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    rx: &Receiver<Msg>,
    tx: &Sender<Msg>,
    source: &dyn RunSource,
) -> Result<(), B::Error> {
    let mut controls: [Option<Box<dyn RunControl>>; 2] = [None, None];
    draw(terminal, app)?;
    while let Ok(msg) = rx.recv() {
        let tick = matches!(msg, Msg::Tick);
        for effect in app.update(msg) {
            carry_out(effect, app, &mut controls, tx, source);
        }
        if app.quit {
            break;
        }
        if tick && app.dirty {
            draw(terminal, app)?;
        }
    }
    // Dropping a control kills its worker: none outlives the dashboard.
    for c in controls.iter_mut().flatten() {
        c.cancel();
    }
    Ok(())
}

pub fn draw<B: Backend>(terminal: &mut Terminal<B>, app: &mut App) -> Result<(), B::Error> {
    if let Ok(size) = terminal.size() {
        app.size = (size.width, size.height);
    }
    terminal.draw(|f| f.render_widget(&Dashboard { app }, f.area()))?;
    app.dirty = false;
    Ok(())
}

fn carry_out(
    effect: Effect,
    app: &mut App,
    controls: &mut [Option<Box<dyn RunControl>>; 2],
    tx: &Sender<Msg>,
    source: &dyn RunSource,
) {
    match effect {
        Effect::Start { slot, epoch, req } => match source.start(*req) {
            Ok(handle) => {
                controls[slot] = Some(handle.control);
                let tx = tx.clone();
                let events = handle.events;
                thread::spawn(move || {
                    for event in events {
                        if tx
                            .send(Msg::Run {
                                slot,
                                epoch,
                                event: Box::new(event),
                            })
                            .is_err()
                        {
                            return;
                        }
                    }
                    let _ = tx.send(Msg::Closed {
                        slot,
                        epoch,
                        error: None,
                    });
                });
            }
            Err(e) => {
                let _ = tx.send(Msg::Closed {
                    slot,
                    epoch,
                    error: Some(e.to_string()),
                });
                app.message = Some(format!("cannot start the worker: {e}"));
            }
        },
        Effect::Open { slot, epoch, path } => {
            controls[slot] = None;
            let tx = tx.clone();
            thread::spawn(move || replay(&path, slot, epoch, &tx));
        }
        Effect::Control { slot, cmd } => {
            if let Some(c) = &mut controls[slot] {
                c.send(cmd);
            }
        }
        Effect::Cancel { slot } => {
            if let Some(c) = &mut controls[slot] {
                c.cancel();
            }
        }
    }
}

/// A recording, fed through the same messages as a live run.
pub fn replay(path: &Path, slot: usize, epoch: u64, tx: &Sender<Msg>) {
    let read = std::fs::File::open(path)
        .map_err(|e| e.to_string())
        .and_then(|f| trace::read_events(std::io::BufReader::new(f)).map_err(|e| e.to_string()));
    let error = match read {
        Ok(events) => {
            for event in events {
                if tx
                    .send(Msg::Run {
                        slot,
                        epoch,
                        event: Box::new(event),
                    })
                    .is_err()
                {
                    return;
                }
            }
            None
        }
        Err(e) => Some(format!("{}: {e}", path.display())),
    };
    let _ = tx.send(Msg::Closed { slot, epoch, error });
}
