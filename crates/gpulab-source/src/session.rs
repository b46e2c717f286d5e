//! One run as its consumer lives it: each event folded into the one [`Run`] as
//! it arrives and written to the recordings as it goes, so nothing grows with
//! the length of the run but what `Run` itself keeps (bounded, see its docs);
//! once the stream has ended, the lab's claims judged on that fold and
//! recorded too. Never prints: what went wrong with a recording is returned,
//! for the command (or the dashboard) to say.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::lab::Lab;
use crate::run::Run;
use crate::trace::decimate::Thinner;
use crate::trace::{self, Event};

/// A `--record` file, created before its run starts (a path that cannot be
/// written costs no run), written as the events come, with idle samples thinned
/// by the policy every recording shares ([`trace::decimate`]).
pub struct Recorder {
    path: PathBuf,
    file: BufWriter<Box<dyn Write + Send>>,
    /// `-`: the stream goes to stdout, and there is no file to remove.
    to_stdout: bool,
    thinner: Thinner,
    /// Events handed to the file so far.
    written: u64,
    /// The first write that failed; nothing is written after it.
    failed: Option<std::io::Error>,
    /// A `meta` came: the run started, so the file is worth keeping.
    started: bool,
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

impl Recorder {
    /// `-` writes the stream to stdout (`gpulab run … --record - | gpulab
    /// report -`).
    pub fn create(path: &Path) -> std::io::Result<Recorder> {
        let to_stdout = is_stdout(path);
        let out: Box<dyn Write + Send> = if to_stdout {
            Box::new(std::io::stdout())
        } else {
            Box::new(File::create(path)?)
        };
        Ok(Recorder {
            path: path.to_path_buf(),
            file: BufWriter::with_capacity(64 * 1024, out),
            to_stdout,
            thinner: Thinner::default(),
            written: 0,
            failed: None,
            started: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `event` (once the thinning has decided on it).
    pub fn push(&mut self, event: Event) {
        self.started |= matches!(event, Event::Meta(_));
        if self.failed.is_some() {
            return;
        }
        let (file, written) = (&mut self.file, &mut self.written);
        if let Err(e) = self.thinner.push(event, |e| write(file, written, e)) {
            self.failed = Some(e);
        }
    }

    /// Writes what is held back and flushes; a run that never started (no
    /// `meta`) leaves no file.
    pub fn finish(mut self) -> Recorded {
        if !self.started {
            drop(self.file);
            if !self.to_stdout {
                let _ = std::fs::remove_file(&self.path);
            }
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

/// `-` as an output path: stdout.
pub fn is_stdout(path: &Path) -> bool {
    path == Path::new("-")
}

fn write(
    file: &mut BufWriter<Box<dyn Write + Send>>,
    written: &mut u64,
    event: &Event,
) -> std::io::Result<()> {
    file.write_all(trace::to_line(event).as_bytes())?;
    *written += 1;
    Ok(())
}

/// What a consumer keeps beside its fold: the recordings, written as the
/// events come, and the lab whose claims are judged once the stream has ended.
/// The dashboard keeps one per run beside the run it draws; [`Session`] is the
/// two together for everyone else.
#[derive(Default)]
pub struct Keeper {
    recordings: Vec<Recorder>,
    /// The lab a worker ran: its claims are judged when the stream ends.
    judge: Option<Lab>,
    /// The claims were judged.
    closed: bool,
}

impl std::fmt::Debug for Keeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keeper")
            .field(
                "recordings",
                &self.recordings.iter().map(|r| &r.path).collect::<Vec<_>>(),
            )
            .field("judge", &self.judge.as_ref().map(|l| &l.id))
            .field("closed", &self.closed)
            .finish()
    }
}

impl Keeper {
    /// A keeper that judges `lab`'s claims (none for a watched program or a
    /// recording read back, whose claims are in the stream).
    pub fn new(judge: Option<Lab>) -> Keeper {
        Keeper {
            judge,
            ..Keeper::default()
        }
    }

    /// Also writes the run into `recording`.
    pub fn record_to(&mut self, recording: Recorder) {
        self.recordings.push(recording);
    }

    pub fn recordings(&self) -> impl Iterator<Item = &Recorder> {
        self.recordings.iter()
    }

    /// Writes `event` into every recording.
    pub fn push(&mut self, event: Event) {
        if let Some((last, rest)) = self.recordings.split_last_mut() {
            for r in rest {
                r.push(event.clone());
            }
            last.push(event);
        }
    }

    /// The stream has ended and `run` holds all of it: the lab's claims judged
    /// on it, once, as events to fold (they are recorded already). A run that
    /// never started has nothing to judge.
    pub fn close(&mut self, run: &Run) -> Vec<Event> {
        if std::mem::replace(&mut self.closed, true) || run.meta().is_none() {
            return Vec::new();
        }
        let Some(lab) = &self.judge else {
            return Vec::new();
        };
        let claims: Vec<Event> = crate::verdict::judge(lab, run)
            .into_iter()
            .map(Event::Claim)
            .collect();
        for claim in &claims {
            self.push(claim.clone());
        }
        crate::clock::phase("judged");
        claims
    }

    /// Finishes every recording.
    pub fn finish(self) -> Vec<Recorded> {
        self.recordings.into_iter().map(Recorder::finish).collect()
    }
}

/// A run folded once, as its events arrive, recorded as it goes, and judged
/// when its stream has ended.
pub struct Session {
    pub run: Run,
    keeper: Keeper,
}

impl Session {
    pub fn new(keeper: Keeper) -> Session {
        Session {
            run: Run::default(),
            keeper,
        }
    }

    /// Whether the run is being recorded.
    pub fn records(&self) -> bool {
        self.keeper.recordings().next().is_some()
    }

    pub fn apply(&mut self, event: Event) {
        self.run.apply(&event);
        self.keeper.push(event);
    }

    /// The stream has ended: the lab's claims are judged and folded in (once).
    pub fn close(&mut self) {
        for claim in self.keeper.close(&self.run) {
            self.run.apply(&claim);
        }
    }

    /// The run, closed, and what became of its recordings.
    pub fn finish(mut self) -> (Run, Vec<Recorded>) {
        self.close();
        (self.run, self.keeper.finish())
    }
}
