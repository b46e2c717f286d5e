//! `peak_mib`: the highest reading inside the tagged line's or block's time.

use super::*;

const MIB: u64 = 1 << 20;

fn sample(t_ns: u64, used: u64) -> Event {
    Event::Sample(Sample {
        t_ns,
        source: MemorySource::Rss,
        used_bytes: used,
        total_bytes: None,
        process_bytes: None,
        others: None,
    })
}

fn peak(events: &[Event], tag: &str) -> ClaimVerdict {
    let c = claim(
        bin(BinOp::Gt, metric("peak_mib", tag), Expr::Num(0.0)),
        None,
    );
    judge_events(&c, events)
}

#[test]
fn a_blocks_peak_counts_the_samplers_readings_inside_it_only() {
    let mut events = vec![meta(Some(10 * MIB))];
    // Every worker reading around the calls says 40 MiB: the 300 MiB moment
    // between them is seen by the sampler alone.
    for i in 0..3u64 {
        events.push(call(
            i,
            "step",
            "clFinish",
            (i * 10 * MS + MS, i * 10 * MS + 2 * MS),
            Some((40 * MIB, 40 * MIB)),
            None,
        ));
    }
    events.push(sample(15 * MS, 310 * MIB));
    // After the block: not part of its peak.
    events.push(sample(70 * MS, 900 * MIB));
    events.push(Event::Block(Block {
        line: 1,
        tag: Some("loop".into()),
        iterations: 3,
        planned: 3,
        begin_ns: 0,
        end_ns: 30 * MS,
        mem_before: Some(10 * MIB),
        mem_after: Some(40 * MIB),
    }));
    events.push(end());
    let v = peak(&events, "loop");
    assert_eq!(v.values["peak_mib(loop)"], 300.0, "{v:?}");
    // A tagged line: its own executions' windows, the sampler's 15 ms reading
    // falls between them.
    let v = peak(&events, "step");
    assert_eq!(v.values["peak_mib(step)"], 30.0, "{v:?}");
}

#[test]
fn a_peak_without_readings_or_a_run_of_the_tag_is_inconclusive() {
    let v = peak(&premature_release(false), "release");
    assert_eq!(v.verdict, Verdict::Inconclusive);
    assert_eq!(
        v.reason.as_deref(),
        Some("no memory telemetry on this device")
    );
    let v = peak(&premature_release(true), "nowhere");
    assert_eq!(v.verdict, Verdict::Inconclusive);
    assert!(v.reason.unwrap_or_default().contains("never ran"));
    // The release's window holds the worker's readings on both sides.
    let v = peak(&premature_release(true), "release");
    assert_eq!(v.values["peak_mib(release)"], 100.0, "{v:?}");
}
