//! One run as its consumer lives it: each event folded into the one [`Run`] as
//! it arrives and written to the recording as it goes, so nothing grows with
//! the length of the run but what `Run` itself keeps (bounded, see its docs).
//! Never prints: what went wrong with the recording is returned, for the
//! command to say.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::run::Run;
use crate::trace::decimate::Thinner;
use crate::trace::{self, Event};

/// A `--record` file, created before its run starts (a path that cannot be
/// written costs no run), written as the events come, with idle samples thinned
/// by the policy every recording shares ([`trace::decimate`]).
pub struct Recording {
    path: PathBuf,
    file: BufWriter<File>,
    thinner: Thinner,
    /// Events handed to the file so far.
    written: u64,
    /// The first write that failed; nothing is written after it.
    failed: Option<std::io::Error>,
}

/// What became of a recording.
#[derive(Debug)]
pub enum Recorded {
    /// Every event is in the file.
    Whole(PathBuf),
    /// The run never started: no file (a replay could show nothing).
    Removed(PathBuf),
    /// Writing failed part way: the file holds at most the first `events`
    /// events (what was still buffered when the write failed is lost).
    Partial {
        path: PathBuf,
        events: u64,
        error: std::io::Error,
    },
}

impl Recorded {
    /// What to tell the user, when something went wrong.
    pub fn problem(&self) -> Option<String> {
        match self {
            Recorded::Whole(_) => None,
            Recorded::Removed(path) => Some(format!(
                "{} not written: the run never started",
                path.display()
            )),
            Recorded::Partial {
                path,
                events,
                error,
            } => Some(format!(
                "the recording {} is partial: writing failed after at most {events} events \
                 ({error}); `gpulab report` reads what is there",
                path.display()
            )),
        }
    }
}

impl Recording {
    pub fn create(path: &Path) -> std::io::Result<Recording> {
        Ok(Recording {
            path: path.to_path_buf(),
            file: BufWriter::with_capacity(64 * 1024, File::create(path)?),
            thinner: Thinner::default(),
            written: 0,
            failed: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `event` (once the thinning has decided on it).
    pub fn push(&mut self, event: Event) {
        if self.failed.is_some() {
            return;
        }
        let (file, written) = (&mut self.file, &mut self.written);
        if let Err(e) = self.thinner.push(event, |e| write(file, written, e)) {
            self.failed = Some(e);
        }
    }

    /// Writes what is held back and flushes; `run` is what the events made.
    pub fn finish(mut self, run: &Run) -> Recorded {
        if run.meta.is_none() {
            drop(self.file);
            let _ = std::fs::remove_file(&self.path);
            return Recorded::Removed(self.path);
        }
        if self.failed.is_none() {
            let (file, written) = (&mut self.file, &mut self.written);
            let flushed = self
                .thinner
                .finish(|e| write(file, written, e))
                .and_then(|()| self.file.flush());
            if let Err(e) = flushed {
                self.failed = Some(e);
            }
        }
        match self.failed {
            None => Recorded::Whole(self.path),
            Some(error) => Recorded::Partial {
                events: self.written,
                path: self.path,
                error,
            },
        }
    }
}

fn write(file: &mut BufWriter<File>, written: &mut u64, event: &Event) -> std::io::Result<()> {
    file.write_all(trace::to_line(event).as_bytes())?;
    *written += 1;
    Ok(())
}

/// A run folded once, as its events arrive, and recorded as it goes.
pub struct Session {
    pub run: Run,
    recording: Option<Recording>,
}

impl Session {
    pub fn new(run: Run, recording: Option<Recording>) -> Session {
        Session { run, recording }
    }

    /// The recording, while there is one.
    pub fn recording(&self) -> Option<&Recording> {
        self.recording.as_ref()
    }

    pub fn apply(&mut self, event: Event) {
        self.run.apply(&event);
        if let Some(r) = &mut self.recording {
            r.push(event);
        }
    }

    /// The run, and what became of its recording.
    pub fn finish(mut self) -> (Run, Option<Recorded>) {
        let recorded = self.recording.take().map(|r| r.finish(&self.run));
        (self.run, recorded)
    }
}
