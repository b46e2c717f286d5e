//! Verdicts from hand-made runs: the numbers decide, nothing else.

use super::*;
use crate::testing;
use crate::trace::*;

const MS: u64 = 1_000_000;

fn meta(baseline: Option<u64>) -> Event {
    Event::Meta(Box::new(Meta {
        lab: Some(LabMeta {
            title: "x".into(),
            variant: "v1".into(),
            params: [("kernel_ms".to_string(), 100.0)].into_iter().collect(),
            ..testing::lab("x", vec![])
        }),
        baseline_bytes: baseline,
        ..testing::cpu_meta()
    }))
}

fn call(
    seq: u64,
    tag: &str,
    api: &str,
    t: (u64, u64),
    mem: Option<(u64, u64)>,
    object: Option<u64>,
) -> Event {
    Event::Call(Call {
        seq,
        pid: 1,
        line: Some(seq as u32 + 1),
        tag: Some(tag.into()),
        api: api.into(),
        driver: api.into(),
        begin_ns: t.0,
        end_ns: t.1,
        mem_before: mem.map(|m| m.0),
        mem_after: mem.map(|m| m.1),
        object,
        ..Default::default()
    })
}

fn buffer(action: ObjectAction, t_ns: u64) -> Event {
    Event::Object(ObjectEvent {
        t_ns,
        id: 7,
        kind: ObjKind::Buffer,
        action,
        handle: Some("buf".into()),
        bytes: 100 << 20,
        refcount: if action == ObjectAction::Created {
            1
        } else {
            0
        },
        refs: vec![],
        line: None,
        stack: None,
    })
}

fn span(call_seq: u64, begin: u64, end: u64) -> Event {
    Event::DeviceSpan(DeviceSpan {
        queue: 1,
        queue_name: Some("q".into()),
        name: "spin".into(),
        call_seq,
        line: None,
        queued_ns: begin,
        begin_ns: begin,
        end_ns: end,
    })
}

fn end() -> Event {
    Event::End(End {
        t_ns: 1_000 * MS,
        status: EndStatus::Finished,
        leaked: vec![],
    })
}

fn claim(expr: Expr, requires: Option<Expr>) -> Claim {
    Claim {
        name: "c".into(),
        text: "t".into(),
        expr,
        expr_src: "e".into(),
        requires,
        requires_src: Some("r".into()),
        variants: vec![],
        expect: Default::default(),
    }
}

fn metric(name: &str, arg: &str) -> Expr {
    Expr::Metric {
        name: name.into(),
        arg: arg.into(),
    }
}

fn bin(op: BinOp, l: Expr, r: Expr) -> Expr {
    Expr::Bin(op, Box::new(l), Box::new(r))
}

fn judge_events(c: &Claim, events: &[Event]) -> ClaimVerdict {
    let run = Run::from_events(events);
    judge_one(
        c,
        &run,
        &run.meta().unwrap().lab.as_ref().unwrap().params,
        &Others::new(),
    )
}

/// A release that took 2 ms while a 100 ms kernel ran; memory gone 98 ms later.
fn premature_release(mem: bool) -> Vec<Event> {
    let m = |a, b| mem.then_some((a, b));
    vec![
        meta(mem.then_some(0)),
        call(
            0,
            "create",
            "clCreateBuffer",
            (0, MS),
            m(0, 100 << 20),
            Some(7),
        ),
        buffer(ObjectAction::Created, MS),
        call(
            1,
            "enqueue",
            "clEnqueueNDRangeKernel",
            (2 * MS, 3 * MS),
            m(100 << 20, 100 << 20),
            None,
        ),
        call(
            2,
            "release",
            "clReleaseMemObject",
            (4 * MS, 6 * MS),
            m(100 << 20, 100 << 20),
            Some(7),
        ),
        buffer(ObjectAction::Released, 6 * MS),
        span(1, 3 * MS, 104 * MS),
        Event::Sample(Sample {
            t_ns: 50 * MS,
            source: MemorySource::Rss,
            used_bytes: 100 << 20,
            total_bytes: None,
            process_bytes: None,
            others: None,
        }),
        Event::Sample(Sample {
            t_ns: 104 * MS,
            source: MemorySource::Rss,
            used_bytes: 1 << 20,
            total_bytes: None,
            process_bytes: None,
            others: None,
        }),
        buffer(ObjectAction::Destroyed, 103 * MS),
        end(),
    ]
}

#[test]
fn a_comparison_over_measurements_holds_or_not() {
    let events = premature_release(true);
    let quick = claim(
        bin(
            BinOp::Lt,
            metric("host_ms", "release"),
            bin(BinOp::Mul, Expr::Num(0.2), Expr::Var("kernel_ms".into())),
        ),
        None,
    );
    let v = judge_events(&quick, &events);
    assert_eq!(v.verdict, Verdict::Holds, "{v:?}");
    assert_eq!(v.values["host_ms(release)"], 2.0);
    assert_eq!(v.values["kernel_ms"], 100.0);

    let slow = claim(
        bin(
            BinOp::Ge,
            metric("host_ms", "release"),
            Expr::Var("kernel_ms".into()),
        ),
        None,
    );
    assert_eq!(judge_events(&slow, &events).verdict, Verdict::DoesNotHold);
}

#[test]
fn release_lag_and_destroy_lag_are_measured_from_the_end_of_the_release() {
    let events = premature_release(true);
    let lag = claim(
        bin(
            BinOp::Gt,
            metric("release_lag_ms", "release"),
            Expr::Num(0.0),
        ),
        None,
    );
    let v = judge_events(&lag, &events);
    assert_eq!(v.values["release_lag_ms(release)"], 98.0);
    let d = claim(
        bin(
            BinOp::Gt,
            metric("destroy_lag_ms", "release"),
            Expr::Num(0.0),
        ),
        None,
    );
    assert_eq!(
        judge_events(&d, &events).values["destroy_lag_ms(release)"],
        97.0
    );
    let busy = claim(
        bin(BinOp::Gt, metric("busy_ms", "release"), Expr::Num(50.0)),
        None,
    );
    let v = judge_events(&busy, &events);
    assert_eq!(
        (v.verdict, v.values["busy_ms(release)"]),
        (Verdict::Holds, 100.0)
    );
}

#[test]
fn memory_that_never_comes_back_has_an_infinite_lag() {
    let mut events = premature_release(true);
    events.retain(|e| !matches!(e, Event::Sample(s) if s.used_bytes < 100 << 20));
    let c = claim(
        bin(
            BinOp::Lt,
            metric("release_lag_ms", "release"),
            Expr::Num(1000.0),
        ),
        None,
    );
    let v = judge_events(&c, &events);
    assert_eq!(v.verdict, Verdict::DoesNotHold);
    assert!(v.values["release_lag_ms(release)"].is_infinite());
}

#[test]
fn no_telemetry_means_inconclusive_with_the_reason() {
    let events = premature_release(false);
    let c = claim(
        bin(
            BinOp::Lt,
            metric("vram_delta_mib", "release"),
            Expr::Num(0.0),
        ),
        None,
    );
    let v = judge_events(&c, &events);
    assert_eq!(v.verdict, Verdict::Inconclusive);
    assert_eq!(
        v.reason.as_deref(),
        Some("no memory telemetry on this device")
    );
}

#[test]
fn a_failed_precondition_means_the_claim_was_never_tested() {
    let events = premature_release(true);
    let c = claim(
        bin(BinOp::Lt, metric("host_ms", "release"), Expr::Num(1.0)),
        Some(bin(
            BinOp::Gt,
            metric("busy_ms", "release"),
            Expr::Num(500.0),
        )),
    );
    let v = judge_events(&c, &events);
    assert_eq!(v.verdict, Verdict::Inconclusive);
    assert!(v.reason.unwrap().contains("precondition not met"));
}

#[test]
fn a_tag_that_never_ran_is_inconclusive() {
    let events = premature_release(true);
    let c = claim(
        bin(BinOp::Lt, metric("host_ms", "finish"), Expr::Num(1.0)),
        None,
    );
    let v = judge_events(&c, &events);
    assert_eq!(v.verdict, Verdict::Inconclusive);
    assert_eq!(v.reason.as_deref(), Some("`finish` never ran in this run"));
}

#[test]
fn live_counts_come_from_the_end_event() {
    let mut events = premature_release(true);
    events.pop();
    events.push(Event::End(End {
        t_ns: 1,
        status: EndStatus::Finished,
        leaked: vec![Leak {
            id: 9,
            kind: ObjKind::Event,
            handle: Some("ev".into()),
            bytes: 0,
            forgotten: true,
        }],
    }));
    let c = claim(
        bin(BinOp::Eq, metric("live", "events"), Expr::Num(1.0)),
        None,
    );
    assert_eq!(judge_events(&c, &events).verdict, Verdict::Holds);
    // Without an end, the end state is unknown.
    events.pop();
    assert_eq!(judge_events(&c, &events).verdict, Verdict::Inconclusive);
}

/// A loop whose first iteration also makes a one-time 500 MiB reserve and then
/// holds 10 MiB more each iteration: growth per iteration is 10 MiB, not the
/// total over the count (which the reserve would inflate to 130 MiB).
#[test]
fn growth_per_iteration_leaves_out_the_first_iterations_reserve() {
    const MIB: u64 = 1 << 20;
    let mut events = vec![meta(Some(0))];
    let mut after = 0;
    for i in 0..4u32 {
        let before = after;
        after = before + 10 * MIB + if i == 0 { 500 * MIB } else { 0 };
        if let Event::Call(mut c) = call(
            u64::from(i),
            "alloc",
            "clCreateBuffer",
            (u64::from(i) * 10 * MS + MS, u64::from(i) * 10 * MS + 2 * MS),
            Some((before, after)),
            None,
        ) {
            c.iter = vec![i];
            c.tag = None;
            events.push(Event::Call(c));
        }
    }
    events.push(Event::Block(Block {
        line: 1,
        tag: Some("loop".into()),
        iterations: 4,
        planned: 4,
        begin_ns: 0,
        end_ns: 50 * MS,
        mem_before: Some(0),
        mem_after: Some(after),
    }));
    let grows = claim(
        bin(BinOp::Gt, metric("per_iter_mib", "loop"), Expr::Num(100.0)),
        None,
    );
    let v = judge_events(&grows, &events);
    assert_eq!(v.values["per_iter_mib(loop)"], 10.0, "{v:?}");
    assert_eq!(v.verdict, Verdict::DoesNotHold);
    // The old way, total over iterations, is fooled by the reserve.
    let old = claim(
        bin(
            BinOp::Gt,
            bin(
                BinOp::Div,
                metric("vram_delta_mib", "loop"),
                metric("iterations", "loop"),
            ),
            Expr::Num(100.0),
        ),
        None,
    );
    assert_eq!(judge_events(&old, &events).verdict, Verdict::Holds);
}

/// `events` as a stepped run would record them.
fn stepped(mut events: Vec<Event>) -> Vec<Event> {
    if let Some(Event::Meta(m)) = events.first_mut()
        && let Some(lab) = m.lab.as_mut()
    {
        lab.stepped = true;
    }
    events
}

#[test]
fn a_stepped_run_leaves_claims_over_time_between_lines_inconclusive() {
    let quick = claim(
        bin(
            BinOp::Lt,
            metric("host_ms", "release"),
            bin(BinOp::Mul, Expr::Num(0.2), Expr::Var("kernel_ms".into())),
        ),
        None,
    );
    assert_eq!(
        judge_events(&quick, &premature_release(true)).verdict,
        Verdict::Holds
    );
    let v = judge_events(&quick, &stepped(premature_release(true)));
    assert_eq!(v.verdict, Verdict::Inconclusive, "{v:?}");
    let why = v.reason.unwrap_or_default();
    assert!(
        why.starts_with("stepped run: host_ms(release) depends on the time between lines"),
        "{why}"
    );
    // What it measured is still shown.
    assert_eq!(v.values["host_ms(release)"], 2.0);
}

#[test]
fn a_stepped_run_still_decides_claims_that_stepping_does_not_change() {
    // The kernel's own device time: how long the host paused before or after it
    // changes nothing of it.
    let span = claim(
        bin(BinOp::Gt, metric("span_ms", "enqueue"), Expr::Num(50.0)),
        None,
    );
    let v = judge_events(&span, &stepped(premature_release(true)));
    assert_eq!(v.verdict, Verdict::Holds, "{v:?}");
    // A precondition over a paced metric is enough to leave the claim open.
    let guarded = claim(
        bin(BinOp::Gt, metric("span_ms", "enqueue"), Expr::Num(50.0)),
        Some(bin(BinOp::Ge, metric("busy_ms", "release"), Expr::Num(0.0))),
    );
    let v = judge_events(&guarded, &stepped(premature_release(true)));
    assert_eq!(v.verdict, Verdict::Inconclusive, "{v:?}");
    assert!(v.reason.unwrap_or_default().contains("busy_ms(release)"));
}

#[test]
fn the_stepping_warning_names_the_claims_it_will_leave_open() {
    let set = gpulab_lab::LabSet::load(&[]);
    let lab = set.get("cl-finish").unwrap();
    let variant = &lab.variants[0].name;
    let w = stepping_warning(lab, variant);
    assert!(
        w.contains("host-waits — reads host_ms(wait), busy_ms(wait)"),
        "{w}"
    );
    assert!(!w.contains("kernel-took-its-time"), "{w}");
    let changed: Vec<&str> = stepping_changes(lab, variant)
        .iter()
        .map(|(c, _)| c.name.as_str())
        .collect();
    // The comparison with `no-wait` reads the same paced times.
    assert_eq!(changed, ["host-waits", "waiting-costs-the-kernel"]);
}

#[test]
fn a_recording_without_the_lesson_gets_it_from_its_lab_and_keeps_its_verdict() {
    let set = gpulab_lab::LabSet::load(&[]);
    let mut lab = set.get("cl-finish").unwrap().clone();
    lab.id = "x".into();
    lab.variants[0].name = "v1".into();
    let c = lab
        .claims
        .iter_mut()
        .find(|c| c.name == "host-waits")
        .unwrap();
    c.expect = [("v1".to_string(), gpulab_events::Expected::DoesNotHold)]
        .into_iter()
        .collect();
    let recorded = |name: &str, expected| {
        Event::Claim(ClaimVerdict {
            name: name.into(),
            text: String::new(),
            expr: String::new(),
            requires: None,
            values: BTreeMap::new(),
            verdict: Verdict::Holds,
            reason: None,
            expected,
        })
    };
    let mut fill = LessonFill::new(std::slice::from_ref(&lab));
    let mut events = [
        meta(None),
        recorded("host-waits", None),
        recorded("kernel-took-its-time", Some(gpulab_events::Expected::Holds)),
        recorded("not-in-the-lab", None),
    ];
    events.iter_mut().for_each(|e| fill.fill(e));
    let claims: Vec<&ClaimVerdict> = events
        .iter()
        .filter_map(|e| match e {
            Event::Claim(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(
        claims[0].expected,
        Some(gpulab_events::Expected::DoesNotHold)
    );
    assert_eq!(claims[0].verdict, Verdict::Holds);
    assert_eq!(claims[0].lesson(), Some(Lesson::Unlike));
    // What the recording says stays; a claim the lab lacks gets nothing.
    assert_eq!(claims[1].expected, Some(gpulab_events::Expected::Holds));
    assert_eq!(claims[1].lesson(), Some(Lesson::AsExpected));
    assert_eq!(claims[2].expected, None);
    assert_eq!(claims[2].lesson(), None);
}

mod across;
mod peak;

/// `destroy_lag_ms` is judged only for the kinds the worker asked the driver
/// about: a buffer never destroyed then did not go (infinite lag), but one
/// whose destruction nobody asked for is inconclusive, saying why, whatever
/// other callbacks fired. Streams from before the worker said which kinds
/// keep the old rule.
#[test]
fn destroy_lag_is_judged_only_for_the_kinds_the_driver_was_asked_about() {
    let never_destroyed = |destruction: Option<Vec<ObjKind>>| {
        let mut events = premature_release(true);
        events.retain(|e| !matches!(e, Event::Object(o) if o.action == ObjectAction::Destroyed));
        if let Some(Event::Meta(m)) = events.first_mut() {
            m.destruction = destruction;
        }
        events
    };
    let d = claim(
        bin(
            BinOp::Lt,
            metric("destroy_lag_ms", "release"),
            Expr::Num(100.0),
        ),
        None,
    );
    let asked = judge_events(&d, &never_destroyed(Some(vec![ObjKind::Buffer])));
    assert_eq!(asked.verdict, Verdict::DoesNotHold);
    assert!(asked.values["destroy_lag_ms(release)"].is_infinite());
    for kinds in [vec![ObjKind::Context], vec![]] {
        let unasked = judge_events(&d, &never_destroyed(Some(kinds.clone())));
        assert_eq!(unasked.verdict, Verdict::Inconclusive, "{kinds:?}");
        let why = unasked.reason.clone().unwrap_or_default();
        assert!(why.contains("did not ask this driver"), "{why}");
    }
    // An old stream without a callback at all: as before, inconclusive.
    let old = judge_events(&d, &never_destroyed(None));
    assert_eq!(old.verdict, Verdict::Inconclusive);
}

/// PoCL's recording of `cl-finish` [no-wait] (`tests/fixtures/recordings`),
/// its kernel made to run `ran_ms`, with the host's load average `load` on 2
/// cores.
fn cl_finish_under(load: f64, ran_ms: u64) -> (gpulab_lab::Lab, Run) {
    let lab = gpulab_lab::catalog::SHIPPED
        .iter()
        .find(|(f, _)| f.contains("cl-finish"))
        .map(|(f, t)| gpulab_lab::catalog::parse(f, t, gpulab_lab::Origin::Builtin))
        .expect("shipped")
        .expect("parses");
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/recordings/pocl--cl-finish--no-wait.jsonl"
    );
    let text = std::fs::read_to_string(file).expect("the fixture");
    let mut events = read_events(text.as_bytes()).expect("reads");
    for e in &mut events {
        if let Event::DeviceSpan(s) = e
            && s.name == "spin"
        {
            s.end_ns = s.begin_ns + ran_ms * MS;
        }
    }
    events.retain(|e| !matches!(e, Event::Load(_) | Event::Claim(_)));
    events.push(Event::Load(HostLoad {
        t_ns: 0,
        load_avg: load,
        cores: 2,
        cpu_waiting: None,
    }));
    (lab, Run::from_events(&events))
}

/// #49: on a loaded host where the kernel ran far from the time asked, a
/// claim that reads a time is inconclusive with that reason, whatever it
/// would have said; on an idle host, or where the kernel kept its time, the
/// measurement decides as before. The lesson plays no part.
#[test]
fn a_verdict_the_load_decided_is_inconclusive_and_says_so() {
    let asked = lab_param(&cl_finish_under(0.0, 1).1, "kernel_ms");
    let far = (asked * 2.6) as u64;
    let (lab, run) = cl_finish_under(5.2, far);
    let why = off_time(&lab, &run).expect("the load decided");
    assert!(
        why.contains(&format!("ran {far} ms of the {asked:.0} ms asked")),
        "{why}"
    );
    assert!(why.contains("load average 5.2 on 2 cores"), "{why}");
    let took = judge(&lab, &run)
        .into_iter()
        .find(|v| v.name == "kernel-took-its-time")
        .expect("judged");
    assert_eq!(took.verdict, Verdict::Inconclusive, "{took:?}");
    assert_eq!(took.reason.as_deref(), Some(why.as_str()));
    // Its measurement is still shown.
    assert_eq!(took.values["span_ms(kernel)"], far as f64);
    // Idle host: the device's own behaviour, a finding.
    let (lab, run) = cl_finish_under(0.5, far);
    assert_eq!(off_time(&lab, &run), None);
    let took = judge(&lab, &run)
        .into_iter()
        .find(|v| v.name == "kernel-took-its-time")
        .expect("judged");
    assert_eq!(took.verdict, Verdict::DoesNotHold, "{took:?}");
    // Loaded, but the kernel kept its time: the verdicts stand.
    let (lab, run) = cl_finish_under(5.2, (asked * 1.1) as u64);
    assert_eq!(off_time(&lab, &run), None);
}

fn lab_param(run: &Run, name: &str) -> f64 {
    run.meta()
        .and_then(|m| m.lab.as_ref())
        .and_then(|l| l.params.get(name).copied())
        .expect("the parameter")
}

/// A lesson that expects either outcome (implementations differ) makes each
/// decided verdict this device's finding, shown neutral: never ✓ as the
/// lesson expects, never a red ✗ for want of a lesson; an undecided one is
/// untested as any other.
#[test]
fn either_outcome_is_a_neutral_finding_of_the_device() {
    use gpulab_events::{Expected, Tone};
    let claim = |verdict, expected| ClaimVerdict {
        name: "c".into(),
        text: String::new(),
        expr: String::new(),
        requires: None,
        values: BTreeMap::new(),
        verdict,
        reason: None,
        expected,
    };
    for v in [Verdict::Holds, Verdict::DoesNotHold] {
        let c = claim(v, Some(Expected::Either));
        assert_eq!(c.lesson(), Some(Lesson::Either));
        assert_eq!(c.tone(), Tone::Neutral);
        assert_eq!(c.mark(), "◇");
        // Without a lesson, "does not hold" reads as a failure.
        let bare = claim(v, None);
        assert_eq!(bare.tone() == Tone::Bad, v == Verdict::DoesNotHold);
    }
    let c = claim(Verdict::Inconclusive, Some(Expected::Either));
    assert_eq!(c.lesson(), Some(Lesson::Untested));
    assert!(
        Expected::Either.matches(Verdict::Holds)
            && !Expected::Either.matches(Verdict::Inconclusive)
    );
}

/// #49: a release lag read across a stall of the sampler (no reading for
/// far longer than its own interval) is inconclusive, saying so and between
/// which figures the lag lies; the same memory read without the stall keeps
/// its figure.
#[test]
fn a_lag_read_across_a_stalled_sampler_is_inconclusive_with_why() {
    let sample = |t_ns, used_bytes| {
        Event::Sample(Sample {
            t_ns,
            source: MemorySource::Rss,
            used_bytes,
            total_bytes: None,
            process_bytes: None,
            others: None,
        })
    };
    let with_samples = |every_ms: u64, stall: std::ops::Range<u64>| {
        let mut events = premature_release(true);
        events.retain(|e| !matches!(e, Event::Sample(_)));
        let end = events.pop();
        let mut t = 7;
        while t <= 110 {
            if !stall.contains(&t) {
                let used = if t >= 104 { 1 << 20 } else { 100 << 20 };
                events.push(sample(t * MS, used));
            }
            t += every_ms;
        }
        events.extend(end);
        events
    };
    let lag = claim(
        bin(
            BinOp::Gt,
            metric("release_lag_ms", "release"),
            Expr::Num(50.0),
        ),
        None,
    );
    // Every 3 ms: the memory is seen gone at 106 ms, 100 ms after the release.
    let v = judge_events(&lag, &with_samples(3, 0..0));
    assert_eq!(
        (v.verdict, v.values["release_lag_ms(release)"]),
        (Verdict::Holds, 100.0)
    );
    // The sampler stalls after 37 ms until the drop: the lag is anywhere in 31-100 ms.
    let v = judge_events(&lag, &with_samples(3, 40..106));
    assert_eq!(v.verdict, Verdict::Inconclusive, "{v:?}");
    let why = v.reason.unwrap_or_default();
    assert!(why.contains("the sampler fell behind"), "{why}");
    assert!(why.contains("between 31.0 and 100.0 ms"), "{why}");
}

/// #50: a report says what let the driver delete a released object: the
/// call in flight then (a `clFinish` the kernel held it for), or the
/// script's end; nothing when it went in its own release.
#[test]
fn a_destruction_after_its_release_says_what_was_running() {
    let during_finish = |destroyed_at: u64| {
        let mut events = premature_release(true);
        events.retain(|e| {
            !matches!(e, Event::Object(o) if o.action == ObjectAction::Destroyed)
                && !matches!(e, Event::End(_))
        });
        events.push(call(
            3,
            "finish",
            "clFinish",
            (7 * MS, 104 * MS),
            None,
            None,
        ));
        events.push(buffer(ObjectAction::Destroyed, destroyed_at));
        events.push(end());
        crate::report::Summary::of(&Run::from_events(&events))
    };
    let s = during_finish(103 * MS);
    let d = &s.destroyed[0];
    assert_eq!(
        (d.during.as_deref(), d.after_last_line),
        (Some("clFinish at line 4"), false)
    );
    let s = during_finish(150 * MS);
    let d = &s.destroyed[0];
    assert_eq!((d.during.as_deref(), d.after_last_line), (None, true));
    // Gone inside its own release: nothing to add.
    let s = during_finish(5 * MS);
    let d = &s.destroyed[0];
    assert_eq!((d.during.as_deref(), d.after_last_line), (None, false));
}
