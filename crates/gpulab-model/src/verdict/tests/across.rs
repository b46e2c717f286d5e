//! Claims that compare two variants: judged from both runs' own numbers, and
//! inconclusive, saying why, whenever the other variant's numbers are missing.

use super::*;
use gpulab_lab::{Origin, catalog};

const LAB: &str = r#"
id = "t"
title = "t"
backend = "opencl"
claim = "c"

[teaching]
look = "l"
why = "w"
instead = "i"

[[variants]]
name = "slow"
script = '''
ctx = clCreateContext()
buf = clCreateBuffer(ctx, 100 MiB)
clReleaseMemObject(buf)     # name: release
clReleaseContext(ctx)
'''

[[variants]]
name = "quick"
script = '''
ctx = clCreateContext()
buf = clCreateBuffer(ctx, 100 MiB)
clReleaseMemObject(buf)     # name: release
clReleaseContext(ctx)
'''

[[claims]]
name = "slower"
text = "the slow release takes ten times the quick one"
expr = "host_ms(release) > 10 * host_ms(release) in variant quick"
variants = ["slow"]

[[claims]]
name = "own"
text = "a claim over one variant"
expr = "host_ms(release) > 0"
"#;

fn lab() -> Lab {
    catalog::parse("t.toml", LAB, Origin::Builtin).unwrap()
}

/// The premature-release run as variant `variant`, its release taking `ms`.
fn run_of(variant: &str, release_ms: u64, status: EndStatus) -> Run {
    run_of_meta(variant, release_ms, status, |_| {})
}

/// As [`run_of`], with `edit` applied to the run's meta event.
fn run_of_meta(
    variant: &str,
    release_ms: u64,
    status: EndStatus,
    edit: impl Fn(&mut gpulab_events::Meta),
) -> Run {
    let mut events = premature_release(true);
    for e in &mut events {
        match e {
            Event::Meta(m) => {
                m.lab.as_mut().unwrap().variant = variant.into();
                edit(m);
            }
            Event::Call(c) if c.tag.as_deref() == Some("release") => {
                c.end_ns = c.begin_ns + release_ms * MS;
            }
            Event::End(end) => end.status = status.clone(),
            _ => {}
        }
    }
    Run::from_events(&events)
}

fn slower(verdicts: &[(usize, ClaimVerdict)]) -> (usize, &ClaimVerdict) {
    let (i, v) = verdicts.iter().find(|(_, v)| v.name == "slower").unwrap();
    (*i, v)
}

#[test]
fn a_comparison_is_judged_from_both_variants_own_numbers() {
    let lab = lab();
    let quick = run_of("quick", 2, EndStatus::Finished);
    for (slow_ms, want) in [(30, Verdict::Holds), (15, Verdict::DoesNotHold)] {
        let slow = run_of("slow", slow_ms, EndStatus::Finished);
        let judged = judge_across(&lab, &[&quick, &slow]);
        // Only the claim that compares, and only for the variant it applies to.
        assert_eq!(judged.len(), 1, "{judged:?}");
        let (i, v) = slower(&judged);
        assert_eq!(i, 1);
        assert_eq!(v.verdict, want, "{v:?}");
        assert_eq!(
            v.values["host_ms(release)"],
            host_ms(&slow, "release").unwrap()
        );
        assert_eq!(
            v.values["host_ms(release) in variant quick"],
            host_ms(&quick, "release").unwrap()
        );
        assert_eq!(v.reason, None);
    }
}

#[test]
fn without_the_other_variant_the_comparison_is_inconclusive_and_says_why() {
    let lab = lab();
    let slow = run_of("slow", 30, EndStatus::Finished);
    // Judged alone, as every run is when it ends.
    let alone = judge(&lab, &slow);
    let v = alone.iter().find(|v| v.name == "slower").unwrap();
    assert_eq!(v.verdict, Verdict::Inconclusive);
    let why = v.reason.as_deref().unwrap_or_default();
    assert!(
        why.starts_with("variant `quick` did not run beside this one"),
        "{why}"
    );
    assert!(why.contains("--all-variants"), "{why}");
    // The claim over one variant is judged as usual.
    let own = alone.iter().find(|v| v.name == "own").unwrap();
    assert_eq!(own.verdict, Verdict::Holds);
    // With the other variant cancelled or failed: its numbers are partial.
    for (status, words) in [
        (EndStatus::Cancelled, "variant `quick` was cancelled"),
        (
            EndStatus::Failed {
                line: Some(3),
                error: "CL_INVALID_MEM_OBJECT".into(),
            },
            "variant `quick` failed at line 3: CL_INVALID_MEM_OBJECT",
        ),
    ] {
        let quick = run_of("quick", 2, status);
        let judged = judge_across(&lab, &[&slow, &quick]);
        let (i, v) = slower(&judged);
        assert_eq!(i, 0);
        assert_eq!(v.verdict, Verdict::Inconclusive, "{v:?}");
        let why = v.reason.as_deref().unwrap_or_default();
        assert!(why.starts_with(words), "{why}");
        assert!(why.ends_with("so its measurements are incomplete"), "{why}");
    }
}

#[test]
fn runs_on_another_device_or_with_other_parameters_do_not_compare() {
    let lab = lab();
    let slow = run_of("slow", 30, EndStatus::Finished);
    let elsewhere = run_of_meta("quick", 2, EndStatus::Finished, |m| {
        m.device.name = "other".into();
    });
    let bigger = run_of_meta("quick", 2, EndStatus::Finished, |m| {
        if let Some(l) = m.lab.as_mut() {
            l.params.insert("kernel_ms".into(), 500.0);
        }
    });
    for (quick, words) in [
        (elsewhere, "variant `quick` ran on other, this run on d"),
        (bigger, "variant `quick` ran with other parameters"),
    ] {
        let judged = judge_across(&lab, &[&slow, &quick]);
        let (_, v) = slower(&judged);
        assert_eq!(v.verdict, Verdict::Inconclusive, "{v:?}");
        let why = v.reason.as_deref().unwrap_or_default();
        assert!(why.starts_with(words), "{why}");
        assert!(why.ends_with("so the two do not compare"), "{why}");
    }
}

#[test]
fn a_later_verdict_of_the_same_claim_replaces_the_earlier_in_the_run() {
    let lab = lab();
    let quick = run_of("quick", 2, EndStatus::Finished);
    let mut slow = run_of("slow", 30, EndStatus::Finished);
    for v in judge(&lab, &slow) {
        slow.apply(&Event::Claim(v));
    }
    for (_, v) in judge_across(&lab, &[&quick, &slow]) {
        slow.apply(&Event::Claim(v));
    }
    let names: Vec<&str> = slow.claims().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["slower", "own"]);
    assert_eq!(slow.claims()[0].verdict, Verdict::Holds);
}
