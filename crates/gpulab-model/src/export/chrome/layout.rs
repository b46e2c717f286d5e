//! Which process and track of the trace each of a recording's events goes
//! on, and their names. A lab's worker is one process with one host lane; a
//! watched program is a process per process it had (each named by its pid and
//! rank, as `rank 1 (pid 765)`), and a track per thread that made calls, as
//! Perfetto and chrome://tracing draw a program of many processes. Names
//! only: never reads the recording.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use super::{Args, TraceEvent};
use crate::export::outline::{Outline, Process};

/// A lab's host lane.
pub(super) const HOST_TID: u64 = 1;
/// Queue and stream tracks sit above every Linux thread id (`pid_max` is at
/// most 2^22) and within the 32 bits Perfetto reads a tid as.
const QUEUE_TID_BASE: u64 = 1 << 30;
/// The track of a watched program's calls whose thread is not in the 32 bits
/// (a stream from before threads were recorded says 0).
const UNKNOWN_TID: u64 = QUEUE_TID_BASE - 1;
/// Tracks for slices that partly overlap another of their thread.
pub(super) const OVERLAP_TID_BASE: u64 = 1 << 31;

/// Where one recording's events go in the trace.
pub(super) struct Layout {
    watched: bool,
    /// The trace's process of the whole run: the lab's worker, or the
    /// watched program's first process (the command `gpulab watch` started).
    pub program: u32,
    /// A watched program's processes: recorded pid to the trace's.
    pids: BTreeMap<u32, u32>,
    /// Each queue or stream: its trace process and track.
    queues: BTreeMap<u64, (u32, u64)>,
}

impl Layout {
    /// `taken`: the trace pids of the recordings before this one (each
    /// recording of `--compare` is a process or processes of its own).
    pub fn new(o: &Outline, taken: &mut BTreeSet<u32>) -> Layout {
        let watched = o.meta.as_ref().is_some_and(|m| m.watch.is_some());
        let mut claim = |pid: u32| {
            let mut p = pid;
            while !taken.insert(p) {
                p = p.wrapping_add(1);
            }
            p
        };
        let meta_pid = o.meta.as_ref().map_or(0, |m| m.pid);
        let program = claim(meta_pid);
        let mut pids = BTreeMap::new();
        if watched {
            pids.insert(meta_pid, program);
            for pid in o.processes.keys() {
                if !pids.contains_key(pid) {
                    pids.insert(*pid, claim(*pid));
                }
            }
        }
        let mut layout = Layout {
            watched,
            program,
            pids,
            queues: BTreeMap::new(),
        };
        for (i, (q, _)) in o.queues.iter().enumerate() {
            // A watched program's stream carries its process in its upper
            // 32 bits, as its objects do.
            let pid = layout.owner(*q);
            layout.queues.insert(*q, (pid, QUEUE_TID_BASE + i as u64));
        }
        layout
    }

    /// The trace process of an id whose upper 32 bits are a watched
    /// process's pid (an object, a stream); the program's otherwise.
    pub fn owner(&self, id: u64) -> u32 {
        if !self.watched {
            return self.program;
        }
        let pid = (id >> 32) as u32;
        self.pids.get(&pid).copied().unwrap_or(self.program)
    }

    /// The track of a call made by thread `thread` of process `pid`.
    pub fn call(&self, pid: u32, thread: u64) -> (u32, u64) {
        if !self.watched {
            return (self.program, HOST_TID);
        }
        let p = self.pids.get(&pid).copied().unwrap_or(self.program);
        (p, thread_tid(thread))
    }

    /// The track of a queue's or stream's device spans.
    pub fn queue(&self, queue: u64) -> (u32, u64) {
        self.queues
            .get(&queue)
            .copied()
            .unwrap_or((self.program, QUEUE_TID_BASE))
    }

    /// The processes' and tracks' names, and the order Perfetto lists the
    /// processes in: the program first, then its ranks.
    pub fn header<'a>(&self, o: &'a Outline) -> Vec<TraceEvent<'a>> {
        let meta = |name: &'static str, pid: u32, tid: u64, args: Args<'a>| TraceEvent {
            args,
            ..TraceEvent::new(name, "M", pid, tid)
        };
        let named = |name: &'static str, pid: u32, tid: u64, value: String| {
            meta(name, pid, tid, Args::Name { name: value.into() })
        };
        let sort = |pid: u32, index: u64| {
            meta(
                "process_sort_index",
                pid,
                0,
                Args::Sort { sort_index: index },
            )
        };
        let mut events = vec![named(
            "process_name",
            self.program,
            0,
            title(o, self.program),
        )];
        events.push(sort(self.program, 0));
        if !self.watched {
            events.push(named("thread_name", self.program, HOST_TID, "host".into()));
        }
        let meta_pid = o.meta.as_ref().map_or(0, |m| m.pid);
        for (pid, p) in &o.processes {
            let Some(&at) = self.pids.get(pid) else {
                continue;
            };
            if *pid != meta_pid {
                events.push(named("process_name", at, 0, process_name(*pid, p)));
                let index = p.rank.as_ref().map_or(1 << 32, |r| 1 + u64::from(r.rank));
                events.push(sort(at, index));
            }
            for thread in &p.threads {
                let tid = thread_tid(*thread);
                let name = match *thread {
                    t if tid == UNKNOWN_TID => format!("thread {t} (not recorded)"),
                    t if t == u64::from(*pid) => format!("thread {t} (main)"),
                    t => format!("thread {t}"),
                };
                events.push(named("thread_name", at, tid, name));
            }
        }
        let mut said = BTreeSet::new();
        for (q, name) in &o.queues {
            let (pid, tid) = self.queue(*q);
            if said.insert((pid, tid)) {
                let kind = if name.contains("stream") {
                    ""
                } else {
                    "queue "
                };
                events.push(named("thread_name", pid, tid, format!("{kind}{name}")));
            }
        }
        events
    }
}

/// A watched thread's track: its id, where it fits the tracks' ids.
fn thread_tid(thread: u64) -> u64 {
    if thread == 0 || thread >= UNKNOWN_TID {
        UNKNOWN_TID
    } else {
        thread
    }
}

/// A process of a watched program by its rank, pid and executable:
/// `rank 1 (pid 765) · python3.12`.
fn process_name(pid: u32, p: &Process) -> String {
    let exe = p.exe.as_deref().map(|e| e.rsplit('/').next().unwrap_or(e));
    let who = match &p.rank {
        Some(r) => format!("rank {} (pid {pid})", r.rank),
        None => format!("pid {pid}"),
    };
    match exe {
        Some(exe) if !exe.is_empty() => format!("{who} · {exe}"),
        _ => who,
    }
}

/// The run's process, named after what was run: the lab and variant, or the
/// watched program (and its pid: its children are processes beside it).
fn title(o: &Outline, pid: u32) -> String {
    let watch = o.meta.as_ref().and_then(|m| m.watch.as_ref());
    let lab = o.meta.as_ref().and_then(|m| m.lab.as_ref());
    match (&o.meta, lab, watch) {
        (Some(m), Some(l), _) => format!("gpulab · {} [{}] · {}", l.id, l.variant, m.device.name),
        (Some(m), None, Some(w)) => {
            let ranked = o.processes.get(&m.pid).and_then(|p| p.rank.as_ref());
            let rank = ranked
                .map(|r| format!("rank {} ", r.rank))
                .unwrap_or_default();
            format!(
                "gpulab watch {rank}(pid {}) · {} · {}",
                m.pid,
                w.command.join(" "),
                m.device.name
            )
        }
        (Some(m), None, None) => format!("gpulab · {}", m.device.name),
        _ => format!("gpulab (pid {pid})"),
    }
}

/// A name for the track of the slices of `name`'s track that partly overlap
/// one before them (the `n`th such track of it).
pub(super) fn overlap_name(name: &str, n: usize) -> Cow<'static, str> {
    format!("{name}, overlapping slices {n}").into()
}
