//! The folds against a from-scratch computation over every event, on seeded
//! generated runs far longer than the run's window (`tests/big_run.rs` compares
//! the reports of a real lab kept whole and in the window).

use std::collections::BTreeMap;

use super::{LineSummary, Run};
use crate::testing::{self, Rng};
use crate::trace::*;

const TAGS: [Option<&str>; 6] = [None, Some("a"), None, Some("b"), Some("a"), None];
const APIS: [&str; 4] = [
    "clFinish",
    "clEnqueueNDRangeKernel",
    "clReleaseMemObject",
    "sleep",
];
const ERRORS: [&str; 3] = [
    "CL_INVALID_VALUE",
    "CL_OUT_OF_RESOURCES",
    "CUDA_ERROR_ILLEGAL_ADDRESS",
];

fn meta() -> Event {
    let mut m = Meta {
        backend: BackendKind::OpenCl,
        lab: Some(testing::lab(
            "generated",
            (1..=6).map(|l| (l, format!("line {l}"))).collect(),
        )),
        baseline_bytes: Some(1 << 20),
        ..testing::meta()
    };
    m.device.total_bytes = Some(1 << 34);
    Event::Meta(Box::new(m))
}

/// A lab-like stream of `n` calls: tagged and untagged lines, errors, calls
/// with and without memory readings, device spans (mostly after their call,
/// a few before it), objects made, released and destroyed, samples, blocks.
#[expect(
    clippy::too_many_lines,
    reason = "a test helper: one generator of every kind of event"
)]
fn generated(seed: u64, n: u64) -> Vec<Event> {
    let mut r = Rng(seed | 1);
    let mut events = vec![meta()];
    let (mut t, mut mem, mut next_obj) = (1_000u64, 1u64 << 24, 1u64);
    let mut live: Vec<u64> = Vec::new();
    for seq in 0..n {
        let line = 1 + r.below(6) as u32;
        let begin = t + r.below(50);
        let end = begin + r.below(5_000);
        t = end + 1;
        let before = mem;
        mem = (mem + r.below(1 << 20)).saturating_sub(r.below(1 << 20));
        let status = match r.below(20) {
            0 => CallStatus::Error {
                code: -5,
                name: ERRORS[r.below(3) as usize].into(),
            },
            1 => CallStatus::Directive,
            _ => CallStatus::Ok,
        };
        let readings = !r.chance(5);
        let object =
            (!live.is_empty() && r.chance(30)).then(|| live[r.below(live.len() as u64) as usize]);
        let span_first = r.chance(3);
        let span = DeviceSpan {
            queue: 7,
            queue_name: Some("q".into()),
            name: "spin".into(),
            call_seq: seq,
            line: Some(line),
            queued_ns: begin,
            begin_ns: end + r.below(100),
            end_ns: end + 100 + r.below(10_000),
        };
        if span_first {
            events.push(Event::DeviceSpan(span.clone()));
        }
        events.push(Event::Call(Call {
            seq,
            pid: 1,
            thread: 0,
            line: Some(line),
            iter: vec![],
            tag: TAGS[line as usize - 1].map(String::from),
            api: APIS[r.below(4) as usize].into(),
            driver: "drv".into(),
            begin_ns: begin,
            end_ns: end,
            status,
            expect_error: line == 6,
            mem_before: readings.then_some(before),
            mem_after: readings.then_some(mem),
            object,
            cuda: r.chance(10).then(|| CudaMemory {
                pool_reserved: r.below(1 << 30),
                pool_used: r.below(1 << 29),
                free: 1 << 33,
                total: 1 << 34,
                custom_pool: None,
                graph_mem: None,
            }),
            memory_step: None,
            refused: None,
            freed_unseen: false,
            returned: None,
        }));
        if !span_first && r.chance(40) {
            events.push(Event::DeviceSpan(span));
        }
        if r.chance(10) {
            let id = next_obj;
            next_obj += 1;
            live.push(id);
            events.push(object_event(id, end, ObjectAction::Created, 1, &mut r));
        }
        if !live.is_empty() && r.chance(8) {
            let id = live.swap_remove(r.below(live.len() as u64) as usize);
            events.push(object_event(id, end + 1, ObjectAction::Released, 0, &mut r));
            if r.chance(70) {
                events.push(object_event(
                    id,
                    end + 2,
                    ObjectAction::Destroyed,
                    0,
                    &mut r,
                ));
            }
        }
        if r.chance(20) {
            events.push(Event::Sample(Sample {
                t_ns: end + r.below(3_000),
                source: MemorySource::Nvml,
                used_bytes: mem + (1 << 20),
                total_bytes: Some(1 << 34),
                process_bytes: Some(mem),
                others: None,
            }));
        }
        if line == 1 && r.chance(20) {
            events.push(Event::Block(Block {
                line: 1,
                tag: Some("blk".into()),
                iterations: 1 + r.below(9) as u32,
                planned: 10,
                begin_ns: begin.saturating_sub(r.below(10_000)),
                end_ns: end,
                mem_before: Some(before),
                mem_after: Some(mem),
            }));
        }
    }
    events.push(Event::End(End {
        t_ns: t + 10,
        status: EndStatus::Finished,
        leaked: vec![],
    }));
    events
}

fn object_event(id: u64, t_ns: u64, action: ObjectAction, refcount: u32, r: &mut Rng) -> Event {
    Event::Object(ObjectEvent {
        t_ns,
        id,
        kind: if r.chance(50) {
            ObjKind::Buffer
        } else {
            ObjKind::Event
        },
        action,
        handle: Some(format!("o{id}")),
        bytes: 1 << 20,
        refcount,
        refs: vec![],
        line: None,
        stack: None,
    })
}

fn calls(events: &[Event]) -> impl Iterator<Item = &Call> {
    events.iter().filter_map(|e| match e {
        Event::Call(c) => Some(c),
        _ => None,
    })
}

fn spans(events: &[Event]) -> impl Iterator<Item = &DeviceSpan> {
    events.iter().filter_map(|e| match e {
        Event::DeviceSpan(s) => Some(s),
        _ => None,
    })
}

/// `Run::lines` as it was computed before the fold: every call, every block.
fn lines_from_scratch(events: &[Event]) -> Vec<LineSummary> {
    let mut by_line: BTreeMap<u32, LineSummary> = (1..=6)
        .map(|l| (l, LineSummary::empty(l, format!("line {l}"))))
        .collect();
    for c in calls(events) {
        let Some(line) = c.line else { continue };
        let s = by_line
            .entry(line)
            .or_insert_with(|| LineSummary::empty(line, c.api.to_string()));
        s.calls += 1;
        s.tag = c.tag.clone();
        s.expect_error = c.expect_error;
        if c.status != CallStatus::Directive {
            s.driver = Some(c.driver.clone());
        }
        if let CallStatus::Error { name, .. } = &c.status {
            s.errors += 1;
            s.error = Some(name.clone());
        }
        let d = c.end_ns.saturating_sub(c.begin_ns);
        s.host_ns_total += d;
        s.host_ns_max = s.host_ns_max.max(d);
        if let (Some(b), Some(a)) = (c.mem_before, c.mem_after) {
            *s.mem_delta.get_or_insert(0) += a as i64 - b as i64;
        }
    }
    for e in events {
        let Event::Block(b) = e else { continue };
        if let Some(s) = by_line.get_mut(&b.line) {
            s.tag = b.tag.clone();
            s.calls = b.iterations;
            s.host_ns_total = b.end_ns.saturating_sub(b.begin_ns);
            s.host_ns_max = s.host_ns_total;
            s.mem_delta = match (b.mem_before, b.mem_after) {
                (Some(x), Some(y)) => Some(y as i64 - x as i64),
                _ => None,
            };
        }
    }
    by_line.into_values().collect()
}

#[test]
fn folds_equal_a_computation_over_every_call() {
    for seed in [1, 7, 42, 2024, 0xdead_beef] {
        let events = generated(seed, 3_000);
        // A window far smaller than the run: nearly every call is forgotten.
        let run = Run::folding(Run::bounded(16, 16, 16), &events);
        assert_eq!(run.calls().len(), 16);
        assert_eq!(run.calls().seen(), 3_000);
        assert_eq!(run.calls().last().map(|c| c.seq), Some(2_999));
        assert!(run.spans().seen() > 16 && run.objects().seen() > 16);
        assert_eq!((run.spans().len(), run.objects().len()), (16, 16));
        assert_eq!(run.lines(), lines_from_scratch(&events), "seed {seed}");

        let all: Vec<&Call> = calls(&events).collect();
        for tag in ["a", "b"] {
            let tagged: Vec<&&Call> = all
                .iter()
                .filter(|c| c.tag.as_deref() == Some(tag))
                .collect();
            let t = run.tagged(tag).expect("the tag ran");
            assert_eq!(t.calls, tagged.len() as u64);
            let host: u64 = tagged.iter().map(|c| c.end_ns - c.begin_ns).sum();
            assert_eq!(t.host_ns, host);
            let errors = tagged
                .iter()
                .filter(|c| !c.status.is_ok() && c.status != CallStatus::Directive)
                .count();
            assert_eq!(t.errors, errors as u64);
            let mut mem = Some(0.0);
            for c in &tagged {
                mem = match (mem, c.mem_before, c.mem_after) {
                    (Some(s), Some(x), Some(y)) => Some(s + (y as f64 - x as f64)),
                    _ => None,
                };
            }
            assert_eq!(t.mem_delta, mem);
            assert_eq!(
                (t.first.seq, t.last.seq),
                (tagged[0].seq, tagged[tagged.len() - 1].seq)
            );
            let seqs: Vec<u64> = tagged.iter().map(|c| c.seq).collect();
            let of_tag: Vec<&DeviceSpan> = spans(&events)
                .filter(|s| seqs.contains(&s.call_seq))
                .collect();
            assert_eq!(t.spans, of_tag.len() as u64, "seed {seed} tag {tag}");
            let span_ns: u64 = of_tag.iter().map(|s| s.end_ns - s.begin_ns).sum();
            assert_eq!(t.span_ns, span_ns);
            let busy = spans(&events)
                .filter(|s| s.call_seq < t.first.seq)
                .map(|s| s.end_ns)
                .max();
            assert_eq!(t.busy_end, busy, "seed {seed} tag {tag}");
        }

        let failed = all.iter().filter(|c| !c.status.is_ok()).count();
        assert_eq!(run.folds.failed_calls, failed as u64);
        type ApiRow = (String, u32, u64, u32, Option<String>, Option<i64>);
        let mut apis: Vec<ApiRow> = Vec::new();
        for c in &all {
            let i = match apis.iter().position(|a| c.api == a.0) {
                Some(i) => i,
                None => {
                    apis.push((c.api.to_string(), 0, 0, 0, None, None));
                    apis.len() - 1
                }
            };
            apis[i].1 += 1;
            apis[i].2 += c.end_ns - c.begin_ns;
            if let CallStatus::Error { name, .. } = &c.status {
                apis[i].3 += 1;
                apis[i].4 = Some(name.clone());
            }
            if let (Some(b), Some(a)) = (c.mem_before, c.mem_after) {
                *apis[i].5.get_or_insert(0) += a as i64 - b as i64;
            }
        }
        let folded: Vec<ApiRow> = run
            .folds
            .apis
            .iter()
            .map(|a| {
                let (calls, errors) = (a.calls, a.errors);
                (
                    a.api.clone(),
                    calls,
                    a.host_ns,
                    errors,
                    a.error.clone(),
                    a.mem_delta,
                )
            })
            .collect();
        assert_eq!(folded, apis);
        let ran_out = all.iter().find(|c| {
            !c.expect_error
                && matches!(&c.status, CallStatus::Error { name, .. } if name == "CL_OUT_OF_RESOURCES")
        });
        assert_eq!(
            run.folds.ran_out.as_ref().map(|c| c.seq),
            ran_out.map(|c| c.seq)
        );
    }
}

/// The call the worker went into is in flight until a call of its seq (or a
/// later one) answers it; a stream of calls alone (a watched program, an old
/// recording) never has one.
#[test]
fn a_call_is_in_flight_from_its_calling_to_its_call() {
    let mut run = Run::default();
    run.apply(&meta());
    let calling = |seq: u64| {
        Event::Calling(Calling {
            seq,
            line: Some(7),
            iter: vec![3],
            api: "clReleaseContext".into(),
            t_ns: 10,
        })
    };
    let answered = |seq: u64| {
        Event::Call(Call {
            seq,
            api: "clReleaseContext".into(),
            begin_ns: 10,
            end_ns: 20,
            ..Call::default()
        })
    };
    run.apply(&calling(4));
    assert_eq!(run.in_flight().map(|c| c.seq), Some(4));
    run.apply(&answered(3));
    assert!(run.in_flight().is_some(), "an earlier call answers nothing");
    run.apply(&answered(4));
    assert!(run.in_flight().is_none());
    for seq in 0..100 {
        run.apply(&answered(10 + seq));
        assert!(run.in_flight().is_none());
    }
}
