//! Draw time of one full dashboard frame at 200×60 with a heavy run: 60 s of 1 kHz
//! memory samples, 1,000 host calls and 1,000 device spans (and a long one of
//! 200,000 of each). Bar: under 2 ms a frame on the 2-core development VM.
//! Figures in docs/benchmarks.md.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::Widget;

use gpulab::lab::{LabSet, ObjKind};
use gpulab::source::Availability;
use gpulab::trace::{self, BackendKind, DeviceKind, Event, MemorySource};
use gpulab::tui::app::{App, Cmd, Msg};
use gpulab::tui::playback::Playback;
use gpulab::tui::runstate::{Feed, RunState};
use gpulab::tui::{Dashboard, Theme};

const SECOND: u64 = 1_000_000_000;

/// Loads a run of `calls` host calls, as many device spans and 60 s of 1 kHz
/// samples into `app`'s first slot; then `leaked` more live events, as a lab
/// that forgets them leaves them (see [`leaked_events`]).
#[expect(
    clippy::too_many_lines,
    reason = "a benchmark fixture: one run of every kind of event"
)]
fn heavy_run(app: &mut App, calls: u64, leaked: u64) -> Vec<Event> {
    app.update(Msg::Doctor(Availability::device("bench device")));
    let pos = app
        .labs
        .iter()
        .position(|l| l.id == "cl-forgotten-events")
        .expect("shipped lab");
    app.selected = pos;
    let fx = app.update(Msg::Key(ratatui::crossterm::event::KeyEvent::from(
        ratatui::crossterm::event::KeyCode::Char('r'),
    )));
    let Some(Cmd::Start {
        slot, epoch, req, ..
    }) = fx.into_iter().next()
    else {
        panic!("the run starts");
    };
    let lab = &req.lab;
    let script = lab.variants[0].lines();
    let mut events = vec![Event::Meta(Box::new(trace::Meta {
        format_version: trace::FORMAT_VERSION,
        gpulab_version: "bench".into(),
        t_ns: 0,
        pid: 1,
        hostname: "bench".into(),
        backend: BackendKind::OpenCl,
        platform: "bench".into(),
        device: trace::DeviceMeta {
            name: "bench GPU".into(),
            vendor: "bench".into(),
            driver_version: "0".into(),
            kind: DeviceKind::Gpu,
            total_bytes: Some(80 << 30),
            memory_source: MemorySource::Nvml,
            pci_bus_id: None,
            clock_error_ns: Some(7000),
        },
        lab: Some(trace::LabMeta {
            id: lab.id.clone(),
            title: lab.title.clone(),
            variant: req.variant_name().to_string(),
            params: lab.default_params(),
            script,
            stepped: false,
            until_failure: false,
            every_gpu: false,
        }),
        baseline_bytes: Some(0),
        budget_bytes: Some(40 << 30),
        recorded_at: None,
        watch: None,
        destruction: None,
        gpus: Vec::new(),
    }))];
    let mut mem = 0u64;
    for i in 0..calls {
        let t = i * 60 * SECOND / calls;
        let before = mem;
        mem = (mem + (17 << 20)) % (12 << 30);
        events.push(Event::Call(trace::Call {
            seq: i,
            pid: 1,
            line: Some(48 + (i % 14) as u32),
            iter: vec![(i / 14) as u32],
            api: "clEnqueueNDRangeKernel".into(),
            driver: "clEnqueueNDRangeKernel".into(),
            begin_ns: t,
            end_ns: t + 2_000_000,
            mem_before: Some(before),
            mem_after: Some(mem),
            object: Some(i),
            ..Default::default()
        }));
        events.push(Event::Object(trace::ObjectEvent {
            t_ns: t,
            id: i,
            kind: ObjKind::Event,
            action: trace::ObjectAction::Created,
            handle: Some("ev".into()),
            bytes: 0,
            refcount: 1,
            refs: vec![],
            line: Some(54),
            stack: None,
        }));
        events.push(Event::DeviceSpan(trace::DeviceSpan {
            queue: 2,
            queue_name: Some("q".into()),
            name: "spin".into(),
            call_seq: i,
            line: Some(54),
            queued_ns: t,
            begin_ns: t + 1_000_000,
            end_ns: t + 40_000_000,
        }));
    }
    events.extend(leaked_events(calls, leaked));
    for s in 0..60_000u64 {
        events.push(Event::Sample(trace::Sample {
            t_ns: s * 1_000_000,
            source: MemorySource::Nvml,
            used_bytes: (s * 7919 % 4096) << 20,
            total_bytes: Some(80 << 30),
            process_bytes: None,
            others: None,
        }));
    }
    for event in &events {
        app.update(Msg::Run {
            slot,
            epoch,
            events: vec![event.clone()],
            ticket: gpulab::tui::in_flight::Ticket::none(),
        });
    }
    events
}

/// `n` events alive at once, ids from `first` on, as `cl-forgotten-events` leaves
/// them: each refers to its queue and to one of 1,000 buffers the lab released
/// (a buffer the events keep from its memory), every other one forgotten.
fn leaked_events(first: u64, n: u64) -> Vec<Event> {
    let object = |id: u64, kind, action, refcount, refs: Vec<u64>| {
        Event::Object(trace::ObjectEvent {
            t_ns: 30 * SECOND,
            id,
            kind,
            action,
            handle: None,
            bytes: if kind == ObjKind::Buffer { 1 << 20 } else { 0 },
            refcount,
            refs,
            line: Some(54),
            stack: None,
        })
    };
    let (queue, buffers) = (first, first + 1);
    let events = buffers + 1000;
    let mut out = vec![object(
        queue,
        ObjKind::Queue,
        trace::ObjectAction::Created,
        1,
        vec![],
    )];
    for b in buffers..events {
        out.push(object(
            b,
            ObjKind::Buffer,
            trace::ObjectAction::Created,
            1,
            vec![],
        ));
    }
    for i in 0..n {
        let refs = vec![queue, buffers + i % 1000];
        out.push(object(
            events + i,
            ObjKind::Event,
            trace::ObjectAction::Created,
            1,
            refs,
        ));
        if i % 2 == 0 {
            out.push(object(
                events + i,
                ObjKind::Event,
                trace::ObjectAction::Forgotten,
                1,
                vec![],
            ));
        }
    }
    for b in buffers..events {
        out.push(object(
            b,
            ObjKind::Buffer,
            trace::ObjectAction::Released,
            0,
            vec![],
        ));
    }
    out
}

fn benches(c: &mut Criterion) {
    let mut app = App::new(
        LabSet::load(&[]).labs().to_vec(),
        vec![],
        Theme::chosen(gpulab::color::Choice::Auto),
    );
    let area = Rect::new(0, 0, 200, 60);
    let mut buf = Buffer::empty(area);
    // A long lab: the frame reads the run's folds and its bounded window, so
    // it costs about the same as a short one.
    let mut big = App::new(
        LabSet::load(&[]).labs().to_vec(),
        vec![],
        Theme::chosen(gpulab::color::Choice::Auto),
    );
    heavy_run(&mut big, 200_000, 0);
    c.bench_function(
        "draw a 200x60 frame: 200,000 calls and spans, 60 s of 1 kHz samples",
        |b| {
            b.iter(|| {
                buf.reset();
                (&Dashboard { app: &big }).render(area, &mut buf);
                black_box(&buf);
            })
        },
    );
    drop(big);
    // 200,000 objects alive and few calls: the live-objects panel and the gap.
    let mut live = App::new(
        LabSet::load(&[]).labs().to_vec(),
        vec![],
        Theme::chosen(gpulab::color::Choice::Auto),
    );
    heavy_run(&mut live, 1000, 200_000);
    c.bench_function(
        "draw a 200x60 frame: 200,000 live objects, 1,000 calls",
        |b| {
            b.iter(|| {
                buf.reset();
                (&Dashboard { app: &live }).render(area, &mut buf);
                black_box(&buf);
            })
        },
    );
    drop(live);
    let events = heavy_run(&mut app, 1000, 0);
    c.bench_function(
        "draw a 200x60 frame: 60 s of 1 kHz samples, 1,000 spans",
        |b| {
            b.iter(|| {
                buf.reset();
                (&Dashboard { app: &app }).render(area, &mut buf);
                black_box(&buf);
            })
        },
    );
    // The same run again, folded from its events, beside the first.
    let twin = app.slots[0].as_ref().map(|a| {
        let mut twin = RunState::from_events(a.origin.clone(), &events);
        twin.closed = a.closed;
        twin
    });
    scrub(c, events);
    app.compare = true;
    app.slots[1] = twin;
    c.bench_function("draw a 200x60 compare frame: two such runs", |b| {
        b.iter(|| {
            buf.reset();
            (&Dashboard { app: &app }).render(area, &mut buf);
            black_box(&buf);
        })
    });
}

/// A backward scrub re-folds the run from its start: the bar is a frame (40 ms).
fn scrub(c: &mut Criterion, events: Vec<Event>) {
    let (mut pb, mut run) = Playback::new(Feed::Recording("bench".into()), events);
    c.bench_function(
        "scrub a second back from the end of that run (re-fold 63k events)",
        |b| {
            b.iter(|| {
                pb.end(&mut run);
                pb.scrub_seconds(&mut run, false);
                black_box(&run);
            })
        },
    );
}

criterion_group!(dashboard, benches);
criterion_main!(dashboard);
