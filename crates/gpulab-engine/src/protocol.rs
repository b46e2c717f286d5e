//! The worker protocol: events go out through an `Emit`, commands come in through a
//! `Control`. On a real worker these are stdout and stdin; in tests, vectors.

use std::io::{BufRead, Write};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use gpulab_events::{Event, jsonl};

pub use gpulab_events::protocol::Command;

/// The reader of the events is gone (a broken pipe): stop quietly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone;

/// Where the engine's events go: the worker's stdout, or a `Vec` in tests.
pub trait Emit {
    fn emit(&mut self, event: Event) -> Result<(), Gone>;
}

impl Emit for Vec<Event> {
    fn emit(&mut self, event: Event) -> Result<(), Gone> {
        self.push(event);
        Ok(())
    }
}

/// Events as JSON Lines on a writer, one `write` each.
pub struct JsonlOut<W: Write>(pub W);

impl<W: Write> Emit for JsonlOut<W> {
    fn emit(&mut self, event: Event) -> Result<(), Gone> {
        jsonl::write_event(&mut self.0, &event).map_err(|_| Gone)
    }
}

/// Whether the engine may do the next line.
pub trait Control {
    /// Called before each line; `Stop` ends the run.
    fn before_line(&mut self) -> Command;
}

/// Never pauses, never stops: for tests and headless runs without stdin.
pub struct RunToEnd;

impl Control for RunToEnd {
    fn before_line(&mut self) -> Command {
        Command::Run
    }
}

/// Commands from a channel fed by a stdin reader thread.
pub struct ChannelControl {
    rx: Receiver<Command>,
    stepping: bool,
}

impl ChannelControl {
    pub fn new(rx: Receiver<Command>, stepping: bool) -> Self {
        ChannelControl { rx, stepping }
    }
}

impl Control for ChannelControl {
    fn before_line(&mut self) -> Command {
        if !self.stepping {
            return match self.rx.try_recv() {
                Ok(Command::Stop) => Command::Stop,
                Ok(Command::Step) => {
                    self.stepping = true;
                    Command::Step
                }
                _ => Command::Run,
            };
        }
        loop {
            match self.rx.recv_timeout(Duration::from_millis(200)) {
                Ok(Command::Run) => {
                    self.stepping = false;
                    return Command::Run;
                }
                Ok(cmd) => return cmd,
                Err(RecvTimeoutError::Timeout) => continue,
                // stdin closed: the parent is gone or will not steer; finish the run.
                Err(RecvTimeoutError::Disconnected) => return Command::Stop,
            }
        }
    }
}

/// Reads command words from `input` until it closes; unknown words are ignored.
pub fn spawn_command_reader(input: impl BufRead + Send + 'static, tx: Sender<Command>) {
    std::thread::spawn(move || {
        for line in input.lines() {
            let Ok(line) = line else { break };
            if let Some(cmd) = Command::parse(&line)
                && tx.send(cmd).is_err()
            {
                break;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stepping_waits_for_each_step_then_runs_free() {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut c = ChannelControl::new(rx, true);
        tx.send(Command::Step).unwrap();
        assert_eq!(c.before_line(), Command::Step);
        tx.send(Command::Run).unwrap();
        assert_eq!(c.before_line(), Command::Run);
        assert_eq!(c.before_line(), Command::Run);
        tx.send(Command::Stop).unwrap();
        assert_eq!(c.before_line(), Command::Stop);
    }

    #[test]
    fn commands_parse_from_words() {
        assert_eq!(Command::parse("step\n"), Some(Command::Step));
        assert_eq!(Command::parse("jump"), None);
    }
}
