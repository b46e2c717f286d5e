//! What a run source does alike with the child it started, a lab's worker or a
//! watched program: reads how it ended (`Exit`), and samples its memory into
//! the run's sink. `source::local` and `watch::supervisor` differ in what the
//! child's end means (a worker always sends its own end event; a program's exit
//! status is its own business) and in when the stream closes after it.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use crate::telemetry::{Pacer, Probe, Sampler, SamplerHandle};
use crate::trace::sink::Sink;
use crate::trace::{EndStatus, Event};

/// How a child ended, as `wait` told it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this status.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
    /// `wait` itself failed: why.
    Unknown(String),
}

impl Exit {
    pub fn of(waited: &io::Result<ExitStatus>) -> Exit {
        match waited {
            Ok(s) => match (s.code(), s.signal()) {
                (Some(code), _) => Exit::Code(code),
                (None, Some(signal)) => Exit::Signal(signal),
                // Stopped or continued: `wait` reports neither for a child it reaped.
                (None, None) => Exit::Unknown(format!("{s}")),
            },
            Err(e) => Exit::Unknown(e.to_string()),
        }
    }

    /// A program's end: status 0 is finished, another status is its own, a
    /// signal is a crash that says which.
    pub fn program_end(&self) -> EndStatus {
        match self {
            Exit::Code(0) => EndStatus::Finished,
            Exit::Code(code) => EndStatus::Exited { code: *code },
            Exit::Signal(signal) => EndStatus::Crashed {
                signal: Some(*signal),
                detail: crate::signals::killed_by(*signal),
            },
            Exit::Unknown(why) => EndStatus::Crashed {
                signal: None,
                detail: format!("could not wait for the program: {why}"),
            },
        }
    }

    /// A worker that ended without its end event: a crash, with the signal or
    /// the status it left with, and the last of what it wrote on stderr.
    pub fn worker_crash(&self, stderr_tail: &str) -> EndStatus {
        let (signal, detail) = match self {
            Exit::Signal(signal) => (Some(*signal), crate::signals::killed_by(*signal)),
            Exit::Code(code) => (
                None,
                format!("exited with exit status: {code} before its end event"),
            ),
            Exit::Unknown(why) => (None, format!("could not wait for it: {why}")),
        };
        let detail = match stderr_tail.trim() {
            "" => detail,
            tail => format!("{detail}; stderr: {tail}"),
        };
        EndStatus::Crashed { signal, detail }
    }
}

/// A sampler of `probe` at `hz`, paced by `pacer`, each batch of readings sent
/// whole into the run's sink.
pub fn sample_into(probe: Probe, hz: f64, pacer: Pacer, sink: &Sink) -> SamplerHandle {
    let sink = sink.clone();
    Sampler::spawn_paced(probe, hz, Some(pacer), move |batch| {
        sink.send(batch.into_iter().map(Event::Sample).collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn exit_of(script: &str) -> Exit {
        Exit::of(&Command::new("sh").args(["-c", script]).status())
    }

    #[test]
    fn a_status_and_a_signal_read_as_wait_gave_them() {
        assert_eq!(exit_of("exit 0"), Exit::Code(0));
        assert_eq!(exit_of("exit 3"), Exit::Code(3));
        assert_eq!(exit_of("kill -9 $$"), Exit::Signal(9));
        let failed = Exit::of(&Err(io::Error::other("no child")));
        assert_eq!(failed, Exit::Unknown("no child".into()));
    }

    #[test]
    fn a_program_and_a_worker_end_as_their_own_rules_say() {
        assert_eq!(Exit::Code(0).program_end(), EndStatus::Finished);
        assert_eq!(Exit::Code(3).program_end(), EndStatus::Exited { code: 3 });
        assert!(matches!(
            Exit::Signal(11).program_end(),
            EndStatus::Crashed { signal: Some(11), detail } if detail.contains("SIGSEGV")
        ));
        // A worker's status 0 without its end event is still a crash, said with
        // std's own words for the status, and what it wrote on stderr.
        assert_eq!(
            Exit::Code(0).worker_crash(" boom \n"),
            EndStatus::Crashed {
                signal: None,
                detail: "exited with exit status: 0 before its end event; stderr: boom".into()
            }
        );
        let std_words = format!("{}", Command::new("true").status().unwrap());
        assert_eq!(std_words, "exit status: 0");
    }
}
