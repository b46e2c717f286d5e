//! Whether a stream-ordered free comes after every use of its memory.
//!
//! `cudaFreeAsync(p, s)` frees `p` when stream `s` reaches the free. Memory
//! a kernel or a copy on another stream used is then freed under it, unless
//! something orders that use before the free: an event recorded after the
//! use and waited by `s`, the host having waited for the use, or the legacy
//! default stream, which waits for (and is waited by) every blocking stream.
//! CUDA's programming guide asks the program for that order; nothing checks
//! it (compute-sanitizer's racecheck reads shared memory only).
//!
//! The model is a vector clock per stream, as ThreadSanitizer keeps one per
//! thread: each stream counts its operations, and knows, per other stream,
//! how many of that stream's operations come before its next one. An event
//! keeps the clock of its stream when recorded. A use is a stream and its
//! operation's number; a free is ordered after it if the freeing stream's
//! clock, or the host's, reaches that number.
//!
//! It never invents an order it does not see, and it never says a free is
//! unordered on an order it could not see: what it cannot model (a graph's
//! own records and waits, a wait on a value or a semaphore, an event
//! another process recorded) counts as ordering everything before it.
//! Pure: the driver's parameter blocks are read in [`crate::cuda_order`].

use std::collections::{BTreeMap, HashMap};

/// The key of every default stream: `0`, `CU_STREAM_LEGACY` and
/// `CU_STREAM_PER_THREAD` are one stream here. Taken as the legacy stream,
/// which orders the most: a per-thread default stream orders less, and a
/// use it did not order may go unsaid, never the reverse.
const DEFAULT: usize = 0;

/// Per stream, how many of its operations are ordered before a point.
#[derive(Clone, Debug, Default, PartialEq)]
struct Clock(HashMap<usize, u64>);

impl Clock {
    fn get(&self, stream: usize) -> u64 {
        self.0.get(&stream).copied().unwrap_or(0)
    }

    fn raise(&mut self, stream: usize, ops: u64) {
        let at = self.0.entry(stream).or_insert(0);
        *at = (*at).max(ops);
    }

    fn join(&mut self, other: &Clock) {
        for (&s, &n) in &other.0 {
            self.raise(s, n);
        }
    }
}

#[derive(Debug, Default)]
struct Stream {
    /// Its operations the model numbered so far.
    ops: u64,
    /// What comes before its next operation, on other streams.
    before: Clock,
    /// Whether the legacy default stream and it wait for each other (not
    /// made with `CU_STREAM_NON_BLOCKING`). A stream the agent did not see
    /// made is taken as blocking: that orders more.
    non_blocking: bool,
}

impl Stream {
    /// Its clock at its last operation: what an operation after it waits for.
    fn now(&self, key: usize) -> Clock {
        let mut c = self.before.clone();
        c.raise(key, self.ops);
        c
    }
}

/// What a recorded event stands for.
#[derive(Clone, Debug)]
enum Recorded {
    Clock(Clock),
    /// Recorded where the model cannot see (a graph, a capture, another
    /// process): a wait on it is taken to order everything so far.
    Unknown,
}

/// The last use of some memory on one stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Use {
    /// The stream's handle as the program named it.
    pub stream: usize,
    /// The stream's operation that used it.
    op: u64,
    /// The call that used it (`cuLaunchKernel`, `cuMemAllocAsync`).
    pub call: &'static str,
}

#[derive(Debug)]
struct Alloc {
    end: usize,
    id: u64,
    /// The last use on each stream (a later one on a stream orders after
    /// every earlier one there).
    uses: Vec<Use>,
}

/// A stream-ordered free that no order the model saw puts after a use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Unordered {
    /// The ledger id of the memory.
    pub object: u64,
    /// The use the free is not ordered after.
    pub after: Use,
}

/// The streams, events and stream-ordered memory of one process.
#[derive(Debug, Default)]
pub struct Order {
    streams: HashMap<usize, Stream>,
    events: HashMap<usize, Recorded>,
    /// What the host knows has finished.
    host: Clock,
    /// Live stream-ordered memory by its address.
    allocs: BTreeMap<usize, Alloc>,
}

fn key(stream: usize) -> usize {
    // CU_STREAM_LEGACY is 0x1, CU_STREAM_PER_THREAD 0x2.
    if stream <= 2 { DEFAULT } else { stream }
}

impl Order {
    /// Whether any stream-ordered memory is live: until some is, no
    /// operation needs numbering.
    pub fn live(&self) -> bool {
        !self.allocs.is_empty()
    }

    /// The program made `stream` (again, if the handle was a destroyed
    /// stream's: its count goes on, so the old stream's numbers never name
    /// the new one's operations).
    pub fn stream_made(&mut self, stream: usize, non_blocking: bool) {
        let s = self.streams.entry(key(stream)).or_default();
        s.before = Clock::default();
        s.non_blocking = non_blocking;
    }

    /// Every stream's operations so far: what a wait the model cannot see
    /// into is taken to order.
    fn everything(&self) -> Clock {
        let mut c = Clock::default();
        for (&k, s) in &self.streams {
            c.raise(k, s.ops);
        }
        c
    }

    /// The legacy default stream's waits: an operation on it waits for
    /// every blocking stream's operations so far, and one on a blocking
    /// stream for the default stream's.
    fn implicit(&mut self, k: usize) {
        let blocking = self.streams.get(&k).is_none_or(|s| !s.non_blocking);
        let mut joined = Clock::default();
        if k == DEFAULT {
            for (&other, s) in &self.streams {
                if other != DEFAULT && !s.non_blocking {
                    // Its clock now, joined without a copy.
                    joined.join(&s.before);
                    joined.raise(other, s.ops);
                }
            }
        } else if blocking && let Some(d) = self.streams.get(&DEFAULT) {
            joined = d.now(DEFAULT);
        }
        self.streams.entry(k).or_default().before.join(&joined);
    }

    /// An operation on `stream` (a launch, a copy, a record): numbered, and
    /// ordered after what the default stream's rules put before it.
    pub fn op(&mut self, stream: usize) -> u64 {
        let k = key(stream);
        self.implicit(k);
        let s = self.streams.entry(k).or_default();
        s.ops += 1;
        s.ops
    }

    /// Stream-ordered memory `[addr, addr + bytes)` made on `stream`: its
    /// allocation is its first use. Memory it overlaps is gone.
    pub fn allocated(
        &mut self,
        addr: usize,
        bytes: usize,
        id: u64,
        stream: usize,
        call: &'static str,
    ) {
        let end = addr.saturating_add(bytes.max(1));
        let over: Vec<usize> = self
            .allocs
            .range(..end)
            .filter(|(_, a)| a.end > addr)
            .map(|(&at, _)| at)
            .collect();
        for at in over {
            self.allocs.remove(&at);
        }
        let op = self.op(stream);
        let first = Use { stream, op, call };
        self.allocs.insert(
            addr,
            Alloc {
                end,
                id,
                uses: vec![first],
            },
        );
    }

    /// The live stream-ordered memory that holds `addr`.
    fn holding(&mut self, addr: usize) -> Option<&mut Alloc> {
        self.allocs
            .range_mut(..=addr)
            .next_back()
            .map(|(_, a)| a)
            .filter(|a| addr < a.end)
    }

    /// One operation on `stream` (numbered by [`Order::op`]) named these
    /// addresses; those in stream-ordered memory are its uses.
    pub fn used(&mut self, op: u64, stream: usize, addrs: &[usize], call: &'static str) {
        let k = key(stream);
        for &addr in addrs {
            if let Some(a) = self.holding(addr) {
                let u = Use { stream, op, call };
                match a.uses.iter_mut().find(|u| key(u.stream) == k) {
                    Some(last) if last.op <= op => *last = u,
                    Some(_) => {}
                    None => a.uses.push(u),
                }
            }
        }
    }

    /// `event` recorded on `stream`: it stands for the stream's operations
    /// so far and what they wait for.
    pub fn recorded(&mut self, event: usize, stream: usize) {
        let k = key(stream);
        self.implicit(k);
        let now = self.streams.get(&k).map(|s| s.now(k)).unwrap_or_default();
        self.events.insert(event, Recorded::Clock(now));
    }

    /// `event` recorded where the model cannot see.
    pub fn recorded_unseen(&mut self, event: usize) {
        self.events.insert(event, Recorded::Unknown);
    }

    /// Every event may have been recorded unseen (a graph launched: its
    /// record nodes record the program's events).
    pub fn events_unseen(&mut self) {
        for e in self.events.values_mut() {
            *e = Recorded::Unknown;
        }
    }

    /// `event` destroyed: a handle given again starts unrecorded.
    pub fn event_gone(&mut self, event: usize) {
        self.events.remove(&event);
    }

    /// What waiting for `event` orders: nothing if never recorded (the
    /// wait returns at once).
    fn of_event(&self, event: usize) -> Clock {
        match self.events.get(&event) {
            Some(Recorded::Clock(c)) => c.clone(),
            Some(Recorded::Unknown) => self.everything(),
            None => Clock::default(),
        }
    }

    /// `stream` waits for `event` (`cuStreamWaitEvent`). The wait is an
    /// operation of the stream, which the default stream's rules order.
    pub fn waits(&mut self, stream: usize, event: usize) {
        let k = key(stream);
        self.implicit(k);
        let c = self.of_event(event);
        self.streams.entry(k).or_default().before.join(&c);
    }

    /// `stream` waits for what the model cannot see (a value in memory, an
    /// external semaphore, a graph's own waits): taken to be everything.
    pub fn waits_unseen(&mut self, stream: usize) {
        let c = self.everything();
        self.streams.entry(key(stream)).or_default().before.join(&c);
    }

    /// The host saw `stream` finish its operations so far (a synchronise, a
    /// query that said done, a host function it runs).
    pub fn host_waited_stream(&mut self, stream: usize) {
        let k = key(stream);
        self.implicit(k);
        let now = self.streams.get(&k).map(|s| s.now(k)).unwrap_or_default();
        self.host.join(&now);
    }

    /// The host saw `event` complete.
    pub fn host_waited_event(&mut self, event: usize) {
        let c = self.of_event(event);
        self.host.join(&c);
    }

    /// The host waited for the whole device (`cuCtxSynchronize`, a
    /// synchronous free or copy).
    pub fn host_waited_all(&mut self) {
        let c = self.everything();
        self.host.join(&c);
    }

    /// `addr` freed on `stream` (`cuMemFreeAsync`): the first of its uses
    /// the free is not ordered after, if any. It is forgotten either way.
    pub fn freed(&mut self, addr: usize, stream: usize) -> Option<Unordered> {
        let alloc = self.allocs.remove(&addr)?;
        self.op(stream);
        let k = key(stream);
        let before = self.streams.get(&k).map(|s| s.now(k)).unwrap_or_default();
        alloc
            .uses
            .iter()
            .find(|u| {
                let on = key(u.stream);
                on != k && before.get(on) < u.op && self.host.get(on) < u.op
            })
            .map(|&after| Unordered {
                object: alloc.id,
                after,
            })
    }

    /// Every context's memory gone (a context destroyed or reset), after
    /// waiting for the device.
    pub fn forget_memory(&mut self) {
        self.host_waited_all();
        self.allocs.clear();
    }

    /// `addr` freed by a synchronous free, which waits for the device.
    pub fn freed_sync(&mut self, addr: usize) {
        self.host_waited_all();
        self.allocs.remove(&addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: usize = 0xa000;
    const B: usize = 0xb000;
    const E: usize = 0xe000;
    const P: usize = 0x7f00_0000_0000;

    fn two_streams() -> Order {
        let mut o = Order::default();
        o.stream_made(A, true);
        o.stream_made(B, true);
        o
    }

    /// Alloc on A, a kernel on A uses it, then `between`, then free on B.
    fn freed_on_b(between: impl FnOnce(&mut Order)) -> Option<Unordered> {
        let mut o = two_streams();
        o.allocated(P, 4096, 7, A, "cuMemAllocAsync");
        let op = o.op(A);
        o.used(op, A, &[P + 64], "cuLaunchKernel");
        between(&mut o);
        o.freed(P, B)
    }

    #[test]
    fn a_free_on_another_stream_with_nothing_between_is_unordered() {
        let found = freed_on_b(|_| {}).map(|u| (u.object, u.after.stream, u.after.call));
        assert_eq!(found, Some((7, A, "cuLaunchKernel")));
    }

    #[test]
    fn an_event_recorded_after_the_use_and_waited_orders_the_free() {
        assert_eq!(
            freed_on_b(|o| {
                o.recorded(E, A);
                o.waits(B, E);
            }),
            None
        );
    }

    #[test]
    fn an_event_recorded_before_the_use_does_not() {
        let mut o = two_streams();
        o.allocated(P, 4096, 7, A, "cuMemAllocAsync");
        o.recorded(E, A);
        let op = o.op(A);
        o.used(op, A, &[P], "cuMemsetD8Async");
        o.waits(B, E);
        assert_eq!(o.freed(P, B).map(|u| u.after.call), Some("cuMemsetD8Async"));
    }

    #[test]
    fn the_host_waiting_orders_the_free() {
        assert_eq!(freed_on_b(|o| o.host_waited_stream(A)), None);
        assert_eq!(freed_on_b(Order::host_waited_all), None);
        let found = freed_on_b(|o| {
            o.recorded(E, A);
            o.host_waited_event(E);
        });
        assert_eq!(found, None);
    }

    #[test]
    fn the_legacy_stream_orders_blocking_streams_not_non_blocking_ones() {
        let blocking = |non_blocking: bool| {
            let mut o = Order::default();
            o.stream_made(A, non_blocking);
            o.stream_made(B, non_blocking);
            o.allocated(P, 4096, 7, A, "cuMemAllocAsync");
            // A kernel on the default stream between them.
            o.op(0);
            o.freed(P, B).is_some()
        };
        assert!(!blocking(false));
        assert!(blocking(true));
    }

    #[test]
    fn what_the_model_cannot_see_orders_everything() {
        assert_eq!(freed_on_b(|o| o.waits_unseen(B)), None);
        let found = freed_on_b(|o| {
            o.recorded(E, A);
            o.events_unseen();
            o.waits(B, E);
        });
        assert_eq!(found, None);
    }

    #[test]
    fn a_wait_on_an_event_never_recorded_orders_nothing() {
        assert!(freed_on_b(|o| o.waits(B, E)).is_some());
    }

    #[test]
    fn the_same_stream_and_unknown_memory_are_never_said() {
        let mut o = two_streams();
        o.allocated(P, 4096, 7, A, "cuMemAllocAsync");
        assert_eq!(o.freed(P, A), None);
        assert_eq!(o.freed(P + 8192, B), None);
        assert!(!o.live());
    }

    /// The same rules drawn as a graph: an operation is a node, with an
    /// edge from each operation the rules put before it; a free is ordered
    /// after a use if the use's node reaches the free's. Written apart from
    /// the clocks, to check them on programs nobody wrote.
    #[derive(Default)]
    struct Graph {
        before: Vec<Vec<usize>>,
        last: HashMap<usize, usize>,
        non_blocking: HashMap<usize, bool>,
        host: Vec<usize>,
        events: HashMap<usize, Option<Vec<usize>>>,
        uses: HashMap<usize, Vec<usize>>,
    }

    impl Graph {
        fn all(&self) -> Vec<usize> {
            (0..self.before.len()).collect()
        }

        fn blocking(&self, s: usize) -> bool {
            !self.non_blocking.get(&s).copied().unwrap_or(false)
        }

        /// The nodes stream `s`'s next operation comes after.
        fn preds(&self, s: usize) -> Vec<usize> {
            let mut p: Vec<usize> = self.last.get(&s).copied().into_iter().collect();
            p.extend(self.host.iter().copied());
            if s == DEFAULT {
                for (&o, &n) in &self.last {
                    if o != DEFAULT && self.blocking(o) {
                        p.push(n);
                    }
                }
            } else if self.blocking(s) {
                p.extend(self.last.get(&DEFAULT).copied());
            }
            p
        }

        fn node(&mut self, stream: usize) -> usize {
            self.waiting(stream, Vec::new())
        }

        /// An operation on `stream` that also waits for `on` (a wait is an
        /// operation of its stream: what the legacy stream waits for).
        fn waiting(&mut self, stream: usize, on: Vec<usize>) -> usize {
            let s = key(stream);
            let mut p = self.preds(s);
            p.extend(on);
            self.before.push(p);
            let n = self.before.len() - 1;
            self.last.insert(s, n);
            n
        }

        fn reaches(&self, from: usize, to: usize) -> bool {
            let mut seen = vec![false; self.before.len()];
            let mut todo = vec![to];
            while let Some(n) = todo.pop() {
                if n == from {
                    return true;
                }
                if !std::mem::replace(&mut seen[n], true) {
                    todo.extend(self.before[n].iter().copied());
                }
            }
            false
        }

        fn event_nodes(&self, e: usize) -> Vec<usize> {
            match self.events.get(&e) {
                Some(Some(n)) => n.clone(),
                Some(None) => self.all(),
                None => Vec::new(),
            }
        }

        fn host_stream(&mut self, stream: usize) {
            let s = key(stream);
            let mut p = self.preds(s);
            p.retain(|n| !self.host.contains(n));
            self.host.extend(p);
        }
    }

    #[test]
    fn the_clocks_order_what_the_graph_orders_on_programs_nobody_wrote() {
        const STREAMS: [usize; 6] = [0, 1, 2, 0xa0, 0xb0, 0xc0];
        const EVENTS: [usize; 2] = [0xe1, 0xe2];
        const MEMORY: [usize; 3] = [0x1000, 0x2000, 0x3000];
        let mut rng = fastrand::Rng::with_seed(51);
        let (mut said, mut frees) = (0, 0);
        for program in 0..20_000 {
            let mut o = Order::default();
            let mut g = Graph::default();
            for &s in &STREAMS[3..5] {
                let nb = rng.bool();
                o.stream_made(s, nb);
                g.non_blocking.insert(s, nb);
            }
            // 0xc0 is a stream the agent did not see made.
            let mut live: Vec<usize> = Vec::new();
            let mut log = Vec::new();
            for _ in 0..rng.usize(4..30) {
                let s = STREAMS[rng.usize(..STREAMS.len())];
                let e = EVENTS[rng.usize(..EVENTS.len())];
                let p = MEMORY[rng.usize(..MEMORY.len())];
                let step = rng.u8(..11);
                log.push((step, s, e, p));
                match step {
                    0 if !live.contains(&p) => {
                        o.allocated(p, 0x100, p as u64, s, "alloc");
                        let n = g.node(s);
                        g.uses.insert(p, vec![n]);
                        live.push(p);
                    }
                    1 => {
                        let op = o.op(s);
                        o.used(op, s, &[p + 8], "use");
                        let n = g.node(s);
                        if let Some(u) = g.uses.get_mut(&p) {
                            u.push(n);
                        }
                    }
                    2 => {
                        o.recorded(e, s);
                        let n = g.node(s);
                        g.events.insert(e, Some(vec![n]));
                    }
                    3 => {
                        o.waits(s, e);
                        let n = g.event_nodes(e);
                        g.waiting(s, n);
                    }
                    4 => {
                        o.host_waited_stream(s);
                        g.host_stream(s);
                    }
                    5 => {
                        o.host_waited_event(e);
                        let n = g.event_nodes(e);
                        g.host.extend(n);
                    }
                    6 => {
                        o.waits_unseen(s);
                        let n = g.all();
                        g.waiting(s, n);
                    }
                    7 => {
                        o.events_unseen();
                        for v in g.events.values_mut() {
                            *v = None;
                        }
                    }
                    8 => {
                        o.op(s);
                        g.node(s);
                    }
                    9 | 10 if live.contains(&p) => {
                        live.retain(|&q| q != p);
                        let found = o.freed(p, s);
                        let n = g.node(s);
                        let uses = g.uses.remove(&p).unwrap_or_default();
                        let unordered: Vec<usize> =
                            uses.iter().copied().filter(|&u| !g.reaches(u, n)).collect();
                        frees += 1;
                        said += usize::from(found.is_some());
                        assert_eq!(
                            found.is_some(),
                            !unordered.is_empty(),
                            "program {program}: {log:x?}"
                        );
                    }
                    _ => {}
                }
            }
        }
        // The programs exercise both answers.
        assert!(
            said > frees / 10 && said < frees * 9 / 10,
            "{said} of {frees}"
        );
    }
}
