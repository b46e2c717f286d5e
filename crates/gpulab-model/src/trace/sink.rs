//! Where a run's events go: a consumer's channel, or a message to the
//! dashboard's loop. Every thread that makes events (a worker's reader, the
//! agents' reader, a sampler, the supervisor) holds a clone and sends its
//! batches straight in, so no thread of the source's own stands between them
//! and the consumer. When the last clone is dropped the sink closes, and the
//! consumer hears it once.

use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};

use super::Event;

type SendFn = dyn Fn(Vec<Event>) -> bool + Send + Sync;
type CloseFn = Box<dyn FnOnce() + Send>;

/// A run's events, batch by batch, to its consumer; cloned into every thread
/// that makes them.
#[derive(Clone)]
pub struct Sink(Arc<Inner>);

struct Inner {
    send: Box<SendFn>,
    /// Said once, when the last clone goes.
    close: Mutex<Option<CloseFn>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let close = match self.close.get_mut() {
            Ok(c) => c.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(close) = close {
            close();
        }
    }
}

impl Sink {
    /// A sink that calls `send` with each batch (false: nobody listens any
    /// more) and `close` once every clone is gone.
    pub fn new(
        send: impl Fn(Vec<Event>) -> bool + Send + Sync + 'static,
        close: impl FnOnce() + Send + 'static,
    ) -> Sink {
        Sink(Arc::new(Inner {
            send: Box::new(send),
            close: Mutex::new(Some(Box::new(close))),
        }))
    }

    /// A sink into a channel of at most `bound` batches: a sender waits while
    /// it is full. The channel closes with the sink.
    pub fn channel(bound: usize) -> (Sink, Receiver<Vec<Event>>) {
        let (tx, rx) = mpsc::sync_channel(bound);
        (Sink::new(move |batch| tx.send(batch).is_ok(), || {}), rx)
    }

    /// Sends a batch (an empty one is not sent); false when nobody listens.
    pub fn send(&self, batch: Vec<Event>) -> bool {
        batch.is_empty() || (self.0.send)(batch)
    }

    /// Sends one event.
    pub fn event(&self, event: Event) -> bool {
        self.send(vec![event])
    }
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sink")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Note, NoteLevel};
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn note() -> Event {
        Event::Note(Note {
            t_ns: 1,
            level: NoteLevel::Info,
            text: "x".into(),
            line: None,
        })
    }

    #[test]
    fn closes_once_when_the_last_clone_goes() {
        let closed = Arc::new(AtomicUsize::new(0));
        let sent = Arc::new(AtomicUsize::new(0));
        let (c, s) = (closed.clone(), sent.clone());
        let sink = Sink::new(
            move |b| {
                s.fetch_add(b.len(), Ordering::SeqCst);
                true
            },
            move || {
                c.fetch_add(1, Ordering::SeqCst);
            },
        );
        let other = sink.clone();
        let thread = std::thread::spawn(move || other.event(note()));
        assert!(thread.join().unwrap_or(false));
        assert!(sink.send(Vec::new()), "an empty batch is no news");
        assert_eq!(closed.load(Ordering::SeqCst), 0);
        drop(sink);
        assert_eq!(closed.load(Ordering::SeqCst), 1);
        assert_eq!(sent.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_channel_closes_with_the_sink_and_says_when_nobody_listens() {
        let (sink, rx) = Sink::channel(4);
        assert!(sink.event(note()));
        drop(sink);
        assert_eq!(rx.iter().flatten().count(), 1);
        let (sink, rx) = Sink::channel(4);
        drop(rx);
        assert!(!sink.event(note()));
    }
}
