//! The batches of one run on their way to the dashboard's loop, at most a few
//! dozen at a time. A producer (a worker's reader, a watched program's reader,
//! a sampler) takes a ticket before it sends a batch and waits while none is
//! free; the loop frees one when it has folded the batch. So a dashboard that
//! falls behind holds its run back as a headless consumer's full channel does,
//! and its memory stays bounded however fast the run goes.

use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// Batches one run may have on the way: 64 batches of at most a few hundred
/// events, a few frames' worth.
pub const BATCHES: usize = 64;

/// The tickets of one run.
#[derive(Clone)]
pub struct InFlight {
    shared: Arc<Shared>,
}

struct Shared {
    taken: Mutex<usize>,
    freed: Condvar,
    limit: usize,
}

impl InFlight {
    pub fn new(limit: usize) -> InFlight {
        InFlight {
            shared: Arc::new(Shared {
                taken: Mutex::new(0),
                freed: Condvar::new(),
                limit: limit.max(1),
            }),
        }
    }

    /// A ticket for one more batch, once one is free.
    pub fn take(&self) -> Ticket {
        let s = &self.shared;
        let mut taken = s.taken.lock().unwrap_or_else(PoisonError::into_inner);
        while *taken >= s.limit {
            taken = s.freed.wait(taken).unwrap_or_else(PoisonError::into_inner);
        }
        *taken += 1;
        Ticket(Some(s.clone()))
    }

    /// Tickets out now.
    pub fn taken(&self) -> usize {
        *self
            .shared
            .taken
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// One batch's place on the way; dropping it (the loop folded the batch, or
/// the message was dropped with the channel) frees the place.
pub struct Ticket(Option<Arc<Shared>>);

impl Ticket {
    /// A ticket of no run's: for a batch made where nothing waits on it (a
    /// test, a benchmark).
    pub fn none() -> Ticket {
        Ticket(None)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            let mut taken = s.taken.lock().unwrap_or_else(PoisonError::into_inner);
            *taken = taken.saturating_sub(1);
            s.freed.notify_one();
        }
    }
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ticket")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_producer_waits_for_the_loop_and_never_has_more_than_the_limit_out() {
        let in_flight = InFlight::new(3);
        let (tx, rx) = mpsc::channel::<(u32, Ticket)>();
        let producer = {
            let in_flight = in_flight.clone();
            std::thread::spawn(move || {
                for i in 0..100 {
                    let ticket = in_flight.take();
                    if tx.send((i, ticket)).is_err() {
                        return i;
                    }
                }
                100
            })
        };
        let mut got = Vec::new();
        while got.len() < 100 {
            let (i, ticket) = rx.recv().expect("a batch");
            // The producer is held at the limit: never more out than it.
            assert!(in_flight.taken() <= 3);
            got.push(i);
            drop(ticket);
        }
        assert_eq!(producer.join().expect("producer"), 100);
        assert_eq!(got, (0..100).collect::<Vec<_>>());
        assert_eq!(in_flight.taken(), 0);
    }

    #[test]
    fn a_loop_that_goes_away_frees_a_waiting_producer() {
        let in_flight = InFlight::new(1);
        let (tx, rx) = mpsc::channel::<Ticket>();
        tx.send(in_flight.take()).expect("first");
        let producer = {
            let in_flight = in_flight.clone();
            std::thread::spawn(move || {
                let ticket = in_flight.take();
                tx.send(ticket).is_ok()
            })
        };
        // The loop ends without reading: the queued batch's ticket goes with
        // the channel, the producer gets its place and finds nobody listening.
        drop(rx);
        assert!(!producer.join().expect("producer"));
    }
}
