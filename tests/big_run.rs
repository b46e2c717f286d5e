//! A real lab longer than the Run's window of calls, run on PoCL and recorded: its
//! report (text, JSON, Markdown) and the watch report of it are the same folded
//! into the default, bounded Run as into one that keeps every call. What a report
//! says may not depend on the calls the window forgot.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use gpulab::report::WatchReport;
use gpulab::report::{self, Summary};
use gpulab::run::{CALLS_KEPT, Run};
use gpulab::trace::Event;

#[test]
fn a_report_of_a_lab_longer_than_the_window_is_the_one_of_every_call() {
    if !common::opencl_or_skip("a_report_of_a_lab_longer_than_the_window_is_the_one_of_every_call")
    {
        return;
    }
    let _device = common::device_lock();
    let dir = common::temp_dir();
    let rec = dir.path().join("long.jsonl");
    let lines = CALLS_KEPT + 2_000;
    let r = common::run(&[
        "--labs",
        &common::repo_file("benches/labs").display().to_string(),
        "run",
        "per-line-cost-cl",
        "--param",
        &format!("lines={lines}"),
        "--record",
        &rec.display().to_string(),
        "--json",
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", common::stderr(&r));
    let f = std::fs::File::open(&rec).expect("the recording");
    let events: Vec<Event> =
        gpulab::trace::read_events(std::io::BufReader::new(f)).expect("a readable recording");

    let bounded = Run::from_events(&events);
    let whole = Run::folding(Run::keeping_all(), &events);
    assert_eq!(bounded.calls().len(), CALLS_KEPT);
    assert!(whole.calls().len() > lines, "{} calls", whole.calls().len());
    assert_eq!(bounded.calls().seen(), whole.calls().len() as u64);

    let (a, b) = (Summary::of(&bounded), Summary::of(&whole));
    let json = |s: &Summary| serde_json::to_string_pretty(s).expect("json");
    assert_eq!(json(&a), json(&b));
    assert_eq!(report::text(&a), report::text(&b));
    assert_eq!(report::markdown(&a), report::markdown(&b));
    let loop_line = a.lines.iter().find(|l| l.tag.as_deref() == Some("finish"));
    assert_eq!(loop_line.map(|l| l.calls), Some(lines as u32));
    let watch = |run: &Run| serde_json::to_string(&WatchReport::from_run(run)).expect("json");
    assert_eq!(watch(&bounded), watch(&whole));
    assert_eq!(bounded.finding(), whole.finding());
}
