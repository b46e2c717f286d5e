//! The sampler thread: owns its probe, reads it at the rate asked, and sends
//! batches of samples. Batches and status go out by message; the only thing
//! shared is the flag that stops it, so nothing sits behind a lock. It sleeps
//! with `park_timeout` and is woken early only to stop: a channel's
//! `recv_timeout` registered and unregistered a waiter on every tick.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::probe::Probe;
use crate::trace::MemorySource;
use crate::trace::event::Sample;

/// The fastest rate a sampler runs at.
pub const MAX_HZ: f64 = 1000.0;

/// Samples are held back at most this long, so 1 kHz costs ~30 sends a second and a
/// 30 fps chart still sees every batch in its frame.
const BATCH_WINDOW: Duration = Duration::from_millis(33);

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
        let stop = Arc::new(AtomicBool::new(false));
        let (status_tx, status_rx) = mpsc::channel();
        let source = probe.source();
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("gpulab-sampler".into())
            .spawn(move || sample_loop(probe, hz, out, &stopped, status_tx));
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

/// None: no sampling at all.
fn period_of(hz: f64) -> Option<Duration> {
    if hz.is_nan() || hz <= 0.0 {
        return None;
    }
    Some(Duration::from_secs_f64(1.0 / hz.min(MAX_HZ)))
}

fn sample_loop(
    mut probe: Probe,
    hz: f64,
    mut out: impl FnMut(Vec<Sample>) -> bool,
    stop: &AtomicBool,
    status: Sender<Status>,
) {
    let source = probe.source();
    let mut batch: Vec<Sample> = Vec::new();
    let period = period_of(hz);
    let mut next = Instant::now();
    let mut last_send = Instant::now();

    let error = loop {
        if stop.load(Ordering::Acquire) {
            break None;
        }
        let now = Instant::now();
        if let Some(p) = period
            && now >= next
        {
            let sample = match probe.try_read() {
                Ok(reading) => reading.into_sample(source),
                Err(e) => break Some(e.to_string()),
            };
            for note in probe.take_notes() {
                let _ = status.send(Status::Note(note));
            }
            batch.push(sample);
            // Fixed deadlines keep the rate; after a stall (a slow NVML call, a
            // descheduled thread) skip ahead rather than burst to catch up.
            next += p;
            if next < now {
                next = now + p;
            }
            if p >= BATCH_WINDOW || now.duration_since(last_send) >= BATCH_WINDOW {
                if !send_batch(&mut out, &mut batch) {
                    break None;
                }
                last_send = now;
            }
            continue;
        }
        // Woken early only by `stop` (or spuriously): the loop looks again.
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
    use crate::telemetry::TelemetryError;

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
