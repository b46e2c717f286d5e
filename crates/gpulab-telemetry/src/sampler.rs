//! The sampler thread: owns its probe, reads it at the rate asked, and sends
//! batches of samples. Batches and status go out by message; what is shared
//! (the flag that stops it, and its [`Pacer`]) is atomics, so nothing sits
//! behind a lock. It sleeps with `park_timeout` and is woken early only to stop
//! or to read at once: a channel's `recv_timeout` registered and unregistered
//! a waiter on every tick.
//!
//! Paced, it reads fast only while something can move memory (whoever feeds
//! it events says so through the [`Pacer`]) and at [`IDLE_HZ`] otherwise, and
//! once at every event it is told of: on the H200 a fixed 1 kHz took 2.8% of a
//! core, nearly all of it the wake-ups.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::thread::Thread;
use std::time::{Duration, Instant};

use super::probe::Probe;
use gpulab_events::MemorySource;
use gpulab_events::event::Sample;

/// The fastest rate a sampler runs at.
pub const MAX_HZ: f64 = 1000.0;

/// Samples are held back at most this long, so 1 kHz costs ~30 sends a second and a
/// 30 fps chart still sees every batch in its frame.
const BATCH_WINDOW: Duration = Duration::from_millis(33);

/// A paced sampler's rate while nothing can move memory.
pub const IDLE_HZ: f64 = 20.0;

/// After each batch of events, how long a paced sampler stays fast: a driver
/// may finish a release just after its call returns.
pub const SETTLE: Duration = Duration::from_millis(5);

/// How a sampler is told that memory can move: a reading at once (an event
/// came), fast readings for a while after it, and fast readings for as long as
/// something is held (a destruction the driver has not done yet). Cloned to
/// whoever sees the events; every method is a few atomics and at most one
/// unpark.
#[derive(Clone, Default)]
pub struct Pacer(Arc<PacerState>);

#[derive(Default)]
struct PacerState {
    /// Read at once.
    poked: AtomicBool,
    /// Fast until this time (`clock::now_ns`).
    fast_until_ns: AtomicU64,
    /// Fast for as long as this is set.
    held: AtomicBool,
    /// The sampler's thread, to wake.
    thread: OnceLock<Thread>,
}

impl Pacer {
    /// An event came: read now, and fast for `fast_for` after it.
    pub fn poke(&self, fast_for: Duration) {
        let until = gpulab_host::clock::now_ns().saturating_add(fast_for.as_nanos() as u64);
        self.0.fast_until_ns.fetch_max(until, Ordering::Relaxed);
        self.0.poked.store(true, Ordering::Release);
        self.wake();
    }

    /// Whether something can move memory until said otherwise.
    pub fn hold(&self, fast: bool) {
        if self.0.held.swap(fast, Ordering::AcqRel) != fast {
            self.wake();
        }
    }

    fn wake(&self) {
        if let Some(t) = self.0.thread.get() {
            t.unpark();
        }
    }

    fn take_poke(&self) -> bool {
        self.0.poked.swap(false, Ordering::AcqRel)
    }

    fn fast(&self) -> bool {
        self.0.held.load(Ordering::Acquire)
            || gpulab_host::clock::now_ns() < self.0.fast_until_ns.load(Ordering::Relaxed)
    }
}

enum Status {
    Note(String),
    Ended { error: Option<String> },
}

pub struct Sampler;

impl Sampler {
    /// Starts sampling `probe` at `hz` (above `MAX_HZ` is `MAX_HZ`; 0 takes none) and
    /// handing batches to `out` (false: nobody listens any more). The thread ends when the handle stops or drops, when
    /// the receiver is gone, or at the first failed read (see `last_error`).
    pub fn spawn(
        probe: Probe,
        hz: f64,
        out: impl FnMut(Vec<Sample>) -> bool + Send + 'static,
    ) -> SamplerHandle {
        Sampler::spawn_paced(probe, hz, None, out)
    }

    /// [`Sampler::spawn`] at `hz` while `pacer` says memory can move, at
    /// [`IDLE_HZ`] (or `hz`, if lower) otherwise, and at once when poked.
    /// Without a pacer, always at `hz`.
    pub fn spawn_paced(
        probe: Probe,
        hz: f64,
        pacer: Option<Pacer>,
        out: impl FnMut(Vec<Sample>) -> bool + Send + 'static,
    ) -> SamplerHandle {
        let stop = Arc::new(AtomicBool::new(false));
        let (status_tx, status_rx) = mpsc::channel();
        let source = probe.source();
        let stopped = stop.clone();
        let pace = Pace {
            fast: period_of(hz),
            idle: period_of(hz.min(IDLE_HZ)),
            pacer: pacer.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("gpulab-sampler".into())
            .spawn(move || sample_loop(probe, pace, out, &stopped, status_tx));
        if let (Ok(t), Some(p)) = (&thread, &pacer) {
            let _ = p.0.thread.set(t.thread().clone());
            // A poke before the thread was known woke nobody.
            p.wake();
        }
        let (thread, last_error) = match thread {
            Ok(t) => (Some(t), None),
            Err(e) => (
                None,
                Some(format!("could not start the sampler thread: {e}")),
            ),
        };
        SamplerHandle {
            stop,
            status: status_rx,
            thread,
            source,
            notes: Vec::new(),
            last_error,
        }
    }
}

/// Steers a sampler thread; stopping or dropping it joins the thread.
pub struct SamplerHandle {
    /// Set, and the thread unparked, to stop it.
    stop: Arc<AtomicBool>,
    status: Receiver<Status>,
    thread: Option<JoinHandle<()>>,
    source: MemorySource,
    notes: Vec<String>,
    last_error: Option<String>,
}

impl SamplerHandle {
    /// The probe's source: `nvml`, `rss` or `none`.
    pub fn source(&self) -> MemorySource {
        self.source
    }

    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Why sampling ended early (a read failed, the worker exited), if it did.
    pub fn last_error(&mut self) -> Option<String> {
        self.drain_status();
        self.last_error.clone()
    }

    /// Notes the probe raised while sampling (a fallback taken), each handed out once.
    pub fn take_notes(&mut self) -> Vec<String> {
        self.drain_status();
        std::mem::take(&mut self.notes)
    }

    /// Stops the thread and waits for it; pending samples are sent first.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            if thread.join().is_err() {
                self.last_error = Some("the sampler thread panicked".into());
            }
        }
        self.drain_status();
    }

    fn drain_status(&mut self) {
        while let Ok(status) = self.status.try_recv() {
            match status {
                Status::Note(note) => self.notes.push(note),
                Status::Ended { error } => {
                    if error.is_some() {
                        self.last_error = error;
                    }
                }
            }
        }
    }
}

impl Drop for SamplerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The sampler's periods: fast, and idle when a pacer says nothing can move.
struct Pace {
    fast: Option<Duration>,
    idle: Option<Duration>,
    pacer: Option<Pacer>,
}

impl Pace {
    /// The period now, and whether to read at once (poked).
    fn now(&self) -> (Option<Duration>, bool) {
        match &self.pacer {
            None => (self.fast, false),
            Some(p) => {
                let poked = p.take_poke();
                let period = if poked || p.fast() {
                    self.fast
                } else {
                    self.idle
                };
                (period, poked)
            }
        }
    }
}

/// None: no sampling at all.
fn period_of(hz: f64) -> Option<Duration> {
    if hz.is_nan() || hz <= 0.0 {
        return None;
    }
    Some(Duration::from_secs_f64(1.0 / hz.min(MAX_HZ)))
}

fn sample_loop(
    mut probe: Probe,
    pace: Pace,
    mut out: impl FnMut(Vec<Sample>) -> bool,
    stop: &AtomicBool,
    status: Sender<Status>,
) {
    let source = probe.source();
    let mut batch: Vec<Sample> = Vec::new();
    let mut next = Instant::now();
    let mut last_send = Instant::now();
    let mut last_read = Instant::now();
    let mut last_period = None;

    let error = loop {
        if stop.load(Ordering::Acquire) {
            break None;
        }
        let now = Instant::now();
        let (period, poked) = pace.now();
        if period != last_period {
            // The pace changed: the next reading is one new period after the
            // last (the first reading is at the start).
            if let (Some(p), Some(_)) = (period, last_period) {
                next = last_read + p;
            }
            last_period = period;
        }
        if let Some(p) = period
            && (poked || now >= next)
        {
            let sample = match probe.try_read() {
                Ok(reading) => reading.into_sample(source),
                Err(e) => break Some(e.to_string()),
            };
            for note in probe.take_notes() {
                let _ = status.send(Status::Note(note));
            }
            batch.push(sample);
            last_read = now;
            // Fixed deadlines keep the rate; after a stall (a slow NVML call, a
            // descheduled thread) or a reading out of turn, start again from now
            // rather than burst to catch up.
            next += p;
            if next < now || poked {
                next = now + p;
            }
            // A reading an event asked for goes at once: it is what shows an
            // allocation the moment its call returned.
            if poked || p >= BATCH_WINDOW || now.duration_since(last_send) >= BATCH_WINDOW {
                if !send_batch(&mut out, &mut batch) {
                    break None;
                }
                last_send = now;
            }
            continue;
        }
        // Woken early by `stop`, a poke, a change of pace (or spuriously): the
        // loop looks again.
        match period {
            Some(_) => std::thread::park_timeout(next.saturating_duration_since(now)),
            None => std::thread::park(),
        }
    };
    // Samples taken before the end still count; a receiver that is gone does not mind.
    send_batch(&mut out, &mut batch);
    let _ = status.send(Status::Ended { error });
}

/// Sends and empties `batch`; false when the receiver is gone.
fn send_batch(out: &mut impl FnMut(Vec<Sample>) -> bool, batch: &mut Vec<Sample>) -> bool {
    if batch.is_empty() {
        return true;
    }
    out(std::mem::take(batch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TelemetryError;

    fn self_probe() -> Probe {
        match Probe::rss(std::process::id()) {
            Ok(p) => p,
            Err(e) => panic!("rss probe of this process: {e}"),
        }
    }

    fn wait_until(mut done: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn delivers_roughly_the_rate_asked_in_batches() {
        let (tx, rx) = mpsc::channel();
        let mut handle = Sampler::spawn(self_probe(), 200.0, move |b| tx.send(b).is_ok());
        std::thread::sleep(Duration::from_millis(300));
        handle.stop();
        let batches: Vec<Vec<Sample>> = rx.try_iter().collect();
        let samples: Vec<&Sample> = batches.iter().flatten().collect();
        // 60 expected; a loaded 2-core CI box may deliver far fewer.
        assert!(samples.len() >= 10, "{} samples", samples.len());
        assert!(samples.len() <= 80, "{} samples", samples.len());
        assert!(batches.len() < samples.len(), "samples were not batched");
        assert!(samples.windows(2).all(|w| w[0].t_ns < w[1].t_ns));
        assert!(
            samples
                .iter()
                .all(|s| s.source == MemorySource::Rss && s.used_bytes > 0)
        );
        assert_eq!(handle.last_error(), None);
    }

    #[test]
    fn a_rate_of_zero_takes_no_samples_and_still_stops() {
        let (tx, rx) = mpsc::channel();
        let mut handle = Sampler::spawn(self_probe(), 0.0, move |b| tx.send(b).is_ok());
        std::thread::sleep(Duration::from_millis(50));
        assert!(handle.is_running());
        handle.stop();
        assert!(!handle.is_running());
        assert_eq!(rx.try_iter().flatten().count(), 0);
    }

    /// A poke reads at once: at a rate of one reading in 1,000 s, the
    /// reading after the first can only come from the poke.
    #[test]
    fn a_poke_reads_at_once_whatever_the_pace() {
        let (tx, rx) = mpsc::channel();
        let pacer = Pacer::default();
        let mut handle = Sampler::spawn_paced(self_probe(), 0.001, Some(pacer.clone()), move |b| {
            tx.send(b).is_ok()
        });
        let first = rx.recv_timeout(Duration::from_secs(30));
        assert!(
            first.is_ok_and(|b| b.len() == 1),
            "the first reading comes at the start"
        );
        pacer.poke(Duration::ZERO);
        let poked = rx.recv_timeout(Duration::from_secs(30));
        assert!(
            poked.is_ok_and(|b| b.len() == 1),
            "the poke's reading never came"
        );
        pacer.hold(true);
        handle.stop();
        assert_eq!(handle.last_error(), None);
    }

    #[test]
    fn stops_on_drop() {
        let (tx, rx) = mpsc::channel();
        let handle = Sampler::spawn(self_probe(), 1000.0, move |b| tx.send(b).is_ok());
        std::thread::sleep(Duration::from_millis(20));
        drop(handle);
        // Joined: the thread's sender is gone, so the channel ends after what it sent.
        let _ = rx.try_iter().count();
        assert!(matches!(
            rx.try_recv(),
            Err(mpsc::TryRecvError::Disconnected)
        ));
    }

    #[test]
    fn ends_quietly_when_the_receiver_is_gone() {
        let (tx, rx) = mpsc::channel();
        let mut handle = Sampler::spawn(self_probe(), 1000.0, move |b| tx.send(b).is_ok());
        drop(rx);
        assert!(wait_until(|| !handle.is_running()));
        assert_eq!(handle.last_error(), None);
        handle.stop();
    }

    #[test]
    fn vanished_pid_ends_sampling_with_an_error() {
        let Ok(mut child) = std::process::Command::new("sleep").arg("10").spawn() else {
            return; // no `sleep` binary: nothing to test against
        };
        let probe = Probe::rss(child.id());
        let (tx, rx) = mpsc::channel();
        let mut handle = match probe {
            Ok(p) => Sampler::spawn(p, 200.0, move |b| tx.send(b).is_ok()),
            Err(e) => panic!("rss probe of a live child: {e}"),
        };
        std::thread::sleep(Duration::from_millis(30));
        let _ = child.kill();
        let _ = child.wait();
        assert!(wait_until(|| !handle.is_running()));
        let expected = TelemetryError::ProcessGone { pid: child.id() }.to_string();
        assert_eq!(handle.last_error(), Some(expected));
        assert!(rx.try_iter().flatten().all(|s| s.used_bytes > 0));
    }

    #[test]
    fn a_probe_without_source_ends_at_once() {
        let (tx, rx) = mpsc::channel();
        let mut handle = Sampler::spawn(Probe::none(1), 10.0, move |b| tx.send(b).is_ok());
        assert!(wait_until(|| !handle.is_running()));
        assert_eq!(handle.source(), MemorySource::Unavailable);
        assert_eq!(
            handle.last_error(),
            Some(TelemetryError::NoSource.to_string())
        );
        assert!(rx.try_iter().next().is_none());
    }
}
