//! The real terminal: raw mode and the alternate screen, restored on every way
//! out (return, error, panic, SIGTERM or SIGHUP), and the threads that feed the loop: input, the
//! frame tick and the doctor probe.

use std::io::{self, Stdout};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;
use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};

use crate::source::RunSource;

use super::app::{App, Msg};
use super::event_loop;

/// 25 frames a second at most; an idle dashboard wakes this often and draws nothing.
pub const FRAME: Duration = Duration::from_millis(40);

fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(io::stdout(), DisableMouseCapture, LeaveAlternateScreen);
    let _ = execute!(io::stdout(), ratatui::crossterm::cursor::Show);
}

/// Restores the terminal when dropped, whichever way the dashboard ends.
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// Opens the dashboard on this terminal and runs it until the user quits.
pub fn open(app: App, source: &dyn RunSource) -> io::Result<App> {
    open_with(app, source, mpsc::channel(), [None, None])
}

/// The dashboard with runs started before it opened (`gpulab watch
/// --dashboard`): their controls in their slots, their events coming on
/// `channel` through [`event_loop::run_sink`]. Returns the app as the user
/// left it, every watched program's stream followed to its end.
pub fn open_with(
    mut app: App,
    source: &dyn RunSource,
    (tx, rx): (Sender<Msg>, Receiver<Msg>),
    controls: event_loop::Controls,
) -> io::Result<App> {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
    enable_raw_mode()?;
    let _guard = Guard;
    execute!(io::stdout(), EnterAlternateScreen, EnableMouseCapture)?;
    let mut terminal: Terminal<CrosstermBackend<Stdout>> =
        Terminal::new(CrosstermBackend::new(io::stdout()))?;
    terminal.hide_cursor()?;
    let size = terminal.size()?;
    app.update(Msg::Resize(size.width, size.height));

    {
        // SIGTERM and SIGHUP (and SIGINT, which raw mode turns into a key anyway)
        // end the dashboard as `q` does. Without a handler the process died in
        // the alternate screen, cursor hidden, mouse reporting on.
        let tx = tx.clone();
        let _ = crate::signals::on_termination(move || {
            let _ = tx.send(Msg::Terminate);
        });
    }
    spawn_input(tx.clone());
    spawn_ticker(tx.clone());
    {
        let tx = tx.clone();
        let availability = source.availability(app.device.clone());
        thread::spawn(move || {
            if let Ok(a) = availability.recv() {
                let _ = tx.send(Msg::Doctor(a));
            }
        });
    }
    let mut mouse = |on: bool| {
        let _ = if on {
            execute!(io::stdout(), EnableMouseCapture)
        } else {
            execute!(io::stdout(), DisableMouseCapture)
        };
    };
    event_loop::run(
        &mut terminal,
        &mut app,
        (&tx, &rx),
        source,
        controls,
        &mut mouse,
    )?;
    terminal.show_cursor()?;
    Ok(app)
}

fn spawn_input(tx: Sender<Msg>) {
    thread::spawn(move || {
        loop {
            let msg = match event::read() {
                Ok(Event::Key(k)) => Msg::Key(k),
                Ok(Event::Mouse(m)) => Msg::Mouse(m),
                Ok(Event::Resize(w, h)) => Msg::Resize(w, h),
                Ok(_) => continue,
                Err(_) => return,
            };
            if tx.send(msg).is_err() {
                return;
            }
        }
    });
}

fn spawn_ticker(tx: Sender<Msg>) {
    thread::spawn(move || {
        while tx.send(Msg::Tick).is_ok() {
            thread::sleep(FRAME);
        }
    });
}
