use super::*;
use crate::trace::{ClaimVerdict, Event, Meta, Prediction};

/// A student's run of `cl-finish` [`variant`] on `device`, started at `t`:
/// the claim `early` judged `verdict` (the lesson: does not hold), predicted
/// `predicted`.
fn student(t: u64, device: &str, verdict: Verdict, predicted: Option<Predicted>) -> Run {
    let mut meta = Meta {
        t_ns: t,
        lab: Some(crate::testing::lab("cl-finish", Vec::new())),
        ..crate::testing::meta()
    };
    meta.device.name = device.into();
    if let Some(lab) = &mut meta.lab {
        lab.variant = "no-wait".into();
    }
    let mut events = vec![Event::Meta(Box::new(meta))];
    if let Some(p) = predicted {
        events.push(Event::Prediction(Prediction {
            t_ns: t,
            claim: "early".into(),
            predicted: p,
        }));
    }
    events.push(Event::Claim(ClaimVerdict {
        name: "early".into(),
        text: "the release returns before the kernel ends".into(),
        expr: "host_ms(release) < kernel_ms".into(),
        requires: None,
        values: Default::default(),
        verdict,
        reason: None,
        expected: Some(gpulab_events::Expected::DoesNotHold),
    }));
    Run::from_events(&events)
}

fn class(runs: &[(&str, &Run)]) -> Class {
    let entries: Vec<Entry<'_>> = runs
        .iter()
        .map(|(file, run)| Entry {
            file: (*file).into(),
            run,
        })
        .collect();
    Class::of(Provenance::here("teacher".into()), &entries, Vec::new())
}

#[test]
fn each_prediction_is_judged_by_its_own_runs_verdict_and_copies_count_once() {
    use Predicted::*;
    let a = student(1, "NVIDIA H200", Verdict::Holds, Some(Holds));
    let b = student(2, "NVIDIA H200", Verdict::Holds, Some(DoesNotHold));
    let c = student(3, "cpu-haswell", Verdict::DoesNotHold, Some(DoesNotHold));
    let d = student(4, "cpu-haswell", Verdict::Inconclusive, Some(Holds));
    let e = student(5, "cpu-haswell", Verdict::DoesNotHold, Some(NotSure));
    let f = student(6, "NVIDIA H200", Verdict::Holds, None);
    let c = class(&[
        ("a.jsonl", &a),
        ("b.jsonl", &b),
        ("b-copy.jsonl", &b),
        ("c.jsonl", &c),
        ("d.jsonl", &d),
        ("e.jsonl", &e),
        ("f.jsonl", &f),
    ]);
    assert_eq!((c.runs, c.predicting_runs), (6, 5));
    assert_eq!(c.set_aside.len(), 1);
    assert!(c.set_aside[0].why.contains("b.jsonl"), "{:?}", c.set_aside);
    let row = &c.rows[0];
    assert_eq!(
        (
            row.predicted.holds,
            row.predicted.does_not_hold,
            row.predicted.not_sure,
            row.predicted.none
        ),
        (2, 2, 1, 1)
    );
    // a and c were right; b wrong; e not sure (judged, not right); d's run
    // could not tell, so it judges nobody.
    assert_eq!((row.right, row.judged), (2, 4));
    assert_eq!(row.right_share, Some(0.5));
    let showed: Vec<(&str, u64, u64, u64)> = row
        .devices
        .iter()
        .map(|d| (d.device.as_str(), d.holds, d.does_not_hold, d.inconclusive))
        .collect();
    assert_eq!(showed, [("NVIDIA H200", 3, 0, 0), ("cpu-haswell", 0, 2, 1)]);
    assert_eq!(row.lesson, Some(gpulab_events::Expected::DoesNotHold));
    let md = markdown(&c, "class");
    assert!(md.contains("| 2 of 4 (50%) |"), "{md}");
    assert!(
        md.contains("NVIDIA H200: 3 holds; cpu-haswell: 2 does not hold, 1 inconclusive"),
        "{md}"
    );
    let page = html(&c, "class");
    assert!(page.contains("2 of 4 (50%)"), "{page}");
}

#[test]
fn the_most_missed_claim_comes_first_and_a_watch_recording_is_set_aside() {
    let mut watched = crate::testing::meta();
    watched.watch = Some(crate::testing::watched("./app", 1));
    let watch = Run::from_events(&[Event::Meta(Box::new(watched))]);
    let right = student(1, "d", Verdict::Holds, Some(Predicted::Holds));
    let mut other = Meta {
        t_ns: 2,
        lab: Some(crate::testing::lab("cl-event-wait", Vec::new())),
        ..crate::testing::meta()
    };
    if let Some(lab) = &mut other.lab {
        lab.variant = "finish".into();
    }
    let missed = Run::from_events(&[
        Event::Meta(Box::new(other)),
        Event::Prediction(Prediction {
            t_ns: 2,
            claim: "waited".into(),
            predicted: Predicted::Holds,
        }),
        Event::Claim(ClaimVerdict {
            name: "waited".into(),
            text: "the wait returned after the kernel".into(),
            expr: "x".into(),
            requires: None,
            values: Default::default(),
            verdict: Verdict::DoesNotHold,
            reason: None,
            expected: None,
        }),
    ]);
    let c = class(&[
        ("w.jsonl", &watch),
        ("r.jsonl", &right),
        ("m.jsonl", &missed),
    ]);
    let order: Vec<&str> = c.rows.iter().map(|r| r.lab.as_str()).collect();
    assert_eq!(order, ["cl-event-wait", "cl-finish"]);
    assert_eq!(c.rows[0].right_share, Some(0.0));
    assert!(
        c.set_aside
            .iter()
            .any(|s| s.file == "w.jsonl" && s.why.contains("watched"))
    );
}

/// #49: a run on a loaded host is counted as such beside what its device
/// showed, in the table and its words; an idle one is not.
#[test]
fn runs_on_a_loaded_host_are_counted_beside_what_their_device_showed() {
    let with_load = |t: u64, load_avg: f64| {
        let run = student(t, "cpu-haswell", Verdict::Inconclusive, None);
        let mut events: Vec<Event> = Vec::new();
        let mut meta = Meta {
            t_ns: t,
            lab: Some(crate::testing::lab("cl-finish", Vec::new())),
            ..crate::testing::meta()
        };
        meta.device.name = "cpu-haswell".into();
        if let Some(lab) = &mut meta.lab {
            lab.variant = "no-wait".into();
        }
        events.push(Event::Meta(Box::new(meta)));
        events.push(Event::Load(gpulab_events::HostLoad {
            t_ns: t,
            load_avg,
            cores: 2,
            cpu_waiting: None,
        }));
        events.extend(run.claims().iter().cloned().map(Event::Claim));
        Run::from_events(&events)
    };
    let busy = with_load(1, 4.2);
    let idle = with_load(2, 0.3);
    let c = class(&[("busy.jsonl", &busy), ("idle.jsonl", &idle)]);
    let d = &c.rows[0].devices[0];
    assert_eq!((d.inconclusive, d.loaded), (2, 1));
    assert!(markdown(&c, "t").contains("2 inconclusive, 1 on a loaded host"));
}

/// A class's ranges for a value: each judged by its own run's measurement,
/// the measured spread said, a run that measured nothing counted apart.
#[test]
fn ranges_are_judged_by_each_runs_own_measurement() {
    let with = |t: u64, lo: f64, hi: f64, measured: Option<f64>| {
        let run = student(t, "NVIDIA H200", Verdict::Holds, None);
        let mut events: Vec<Event> = Vec::new();
        let mut meta = Meta {
            t_ns: t,
            lab: Some(crate::testing::lab("cl-finish", Vec::new())),
            ..crate::testing::meta()
        };
        if let Some(lab) = &mut meta.lab {
            lab.variant = "no-wait".into();
        }
        events.push(Event::Meta(Box::new(meta)));
        events.push(Event::Estimate(gpulab_events::Estimate {
            t_ns: t,
            value: "host_ms(release)".into(),
            lo,
            hi,
        }));
        for mut c in run.claims().iter().cloned() {
            if let Some(m) = measured {
                c.values.insert("host_ms(release)".into(), m);
            }
            events.push(Event::Claim(c));
        }
        Run::from_events(&events)
    };
    let a = with(1, 0.0, 1.0, Some(0.004));
    let b = with(2, 150.0, 250.0, Some(0.004));
    let c = with(3, 0.0, 0.01, Some(0.009));
    let d = with(4, 0.0, 1.0, None);
    let class = class(&[("a", &a), ("b", &b), ("c", &c), ("d", &d)]);
    assert_eq!(class.predicting_runs, 4);
    let [row] = class.estimates.as_slice() else {
        panic!("{:?}", class.estimates)
    };
    assert_eq!(
        (row.estimates, row.within, row.unmeasured),
        (4, 2, 1),
        "{row:?}"
    );
    assert_eq!(
        (row.measured_lo, row.measured_hi),
        (Some(0.004), Some(0.009))
    );
    let md = markdown(&class, "t");
    assert!(
        md.contains("| 4 | 2 of 4 (50%) | 0.004 to 0.009 (1 not measured) |"),
        "{md}"
    );
}
