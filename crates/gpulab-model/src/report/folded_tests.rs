//! Folding what a watched program is done with out of the ledger
//! (`run::gone`) changes no figure of its report: generated streams, reported
//! with and without folding.

use super::WatchReport;
use crate::run::Run;
use crate::trace::{
    AgentEvent, AgentState, Call, CallName, CallStatus, Event, ObjKind, ObjectAction, ObjectEvent,
};

/// A small generator of numbers, the same on every machine.
struct Draw(u64);

impl Draw {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn attached(pid: u32, destruction: Vec<ObjKind>) -> Event {
    Event::Agent(AgentEvent {
        t_ns: 0,
        pid,
        parent_pid: 1,
        api: if destruction.is_empty() {
            "cuda"
        } else {
            "opencl"
        }
        .into(),
        state: AgentState::Attached {
            exe: "app".into(),
            destruction,
            rank: None,
        },
    })
}

fn object(t_ns: u64, id: u64, kind: ObjKind, action: ObjectAction, refs: Vec<u64>) -> Event {
    Event::Object(ObjectEvent {
        t_ns,
        id,
        kind,
        action,
        handle: None,
        bytes: if kind == ObjKind::Buffer { 4096 } else { 0 },
        refcount: u32::from(action == ObjectAction::Created),
        refs,
        line: None,
        stack: None,
    })
}

/// A process whose driver does not say when it deletes buffers, and with
/// `opencl` one whose driver does, each making buffers and events on
/// several threads: most
/// released, some destroyed late, some never released, events that
/// outlive the buffer they refer to, some making calls missing.
fn program(seed: u64, objects: u64, opencl: bool) -> Vec<Event> {
    let mut draw = Draw(seed | 1);
    let mut events = vec![attached(9, Vec::new())];
    if opencl {
        events.push(attached(7, vec![ObjKind::Buffer, ObjKind::Context]));
    }
    let mut t = 1_000u64;
    // (time, event) of what is to come later.
    let mut later: Vec<(u64, Event)> = Vec::new();
    for i in 0..objects {
        t += 1 + draw.below(40_000);
        let pid: u64 = if opencl && draw.below(2) == 0 { 7 } else { 9 };
        let id = (pid << 32) | (i + 1);
        let kind = if draw.below(5) == 0 {
            ObjKind::Event
        } else {
            ObjKind::Buffer
        };
        let refs = if kind == ObjKind::Event && i > 0 {
            vec![(pid << 32) | i]
        } else {
            Vec::new()
        };
        events.push(object(t, id, kind, ObjectAction::Created, refs));
        if draw.below(10) > 0 {
            events.push(Event::Call(Call {
                seq: i,
                pid: pid as u32,
                thread: draw.below(4),
                api: CallName::from(if pid == 7 {
                    "clCreateBuffer"
                } else {
                    "cuMemAlloc"
                }),
                begin_ns: t,
                end_ns: t + 1,
                status: CallStatus::Ok,
                object: Some(id),
                ..Call::default()
            }));
        }
        if draw.below(50) == 0 {
            continue; // never released
        }
        let long = draw.below(100) == 0;
        let released = t + draw.below(if long { 500_000_000 } else { 200_000 });
        later.push((
            released,
            object(released, id, kind, ObjectAction::Released, Vec::new()),
        ));
        if pid == 7 && draw.below(20) > 0 {
            let destroyed = released + draw.below(3_000_000);
            later.push((
                destroyed,
                object(destroyed, id, kind, ObjectAction::Destroyed, Vec::new()),
            ));
        }
        later.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        while later.last().is_some_and(|(at, _)| *at <= t) {
            events.extend(later.pop().map(|(_, e)| e));
        }
    }
    later.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    events.extend(later.into_iter().rev().map(|(_, e)| e));
    events
}

/// Folding what the program is done with changes no figure of its report,
/// text or JSON, at any moment, and keeps the ledger to what is alive.
#[test]
fn folding_gone_objects_changes_no_figure_of_the_report() {
    for (seed, opencl) in [(1, true), (2, false)] {
        let events = program(seed, 30_000, opencl);
        let mut folded = Run::default();
        let mut whole = Run::keeping_all();
        for (i, e) in events.iter().enumerate() {
            folded.apply(e);
            whole.apply(e);
            if i % 25_000 == 0 || i + 1 == events.len() {
                let (a, b) = (
                    WatchReport::from_run(&folded),
                    WatchReport::from_run(&whole),
                );
                let (ja, jb) = (
                    serde_json::to_value(&a).unwrap_or_default(),
                    serde_json::to_value(&b).unwrap_or_default(),
                );
                let differ: Vec<String> = jb
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(k, v)| ja.get(k.as_str()) != Some(v))
                    .map(|(k, v)| {
                        let short = |v: &serde_json::Value| {
                            v.to_string().chars().take(300).collect::<String>()
                        };
                        format!("{k}: folded {} whole {}", short(&ja[k.as_str()]), short(v))
                    })
                    .collect();
                assert!(
                    differ.is_empty(),
                    "seed {seed}, after {i} events: {differ:#?}"
                );
                assert_eq!(a.text(), b.text(), "seed {seed}, after {i} events");
            }
        }
        // With OpenCL's, the CUDA process's freed buffers stay: another
        // driver says when it deletes buffers, this one never will.
        let least = if opencl { 8_000 } else { 14_000 };
        assert!(
            folded.objects_folded() > least,
            "{}",
            folded.objects_folded()
        );
        assert_eq!(
            folded.ledger().len() as u64 + folded.objects_folded(),
            whole.ledger().len() as u64,
            "each object kept or folded, once"
        );
        assert_eq!(whole.objects_folded(), 0);
    }
}
