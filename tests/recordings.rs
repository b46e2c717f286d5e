//! Real runs recorded on an H100 (NVIDIA OpenCL) and on PoCL stay readable: the
//! format they were written in is the one this gpulab reads, and their reports and
//! verdicts come back as recorded.

mod common;

use gpulab::run::Run;
use gpulab::trace::{Event, read_events};

fn fixtures() -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(common::repo_file("tests/fixtures/recordings"))
        .expect("fixtures folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_fixture_recording_reads_and_reports() {
    let files = fixtures();
    assert!(files.len() >= 4);
    for f in files {
        let events = read_events(std::io::BufReader::new(std::fs::File::open(&f).unwrap()))
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let run = Run::from_events(&events);
        assert!(run.end.is_some(), "{}", f.display());
        assert!(!run.claims.is_empty(), "{}", f.display());
        assert!(
            events.iter().any(|e| matches!(e, Event::Sample(_))),
            "{}",
            f.display()
        );
        let out = common::run(&["report", &f.display().to_string()]);
        assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
        assert!(common::stdout(&out).contains("claims (on this device and driver)"));
    }
}

#[test]
fn the_h100_recording_keeps_its_device_and_verdicts() {
    let f = common::repo_file(
        "tests/fixtures/recordings/h100-opencl--cl-premature-release--release-then-finish.jsonl",
    );
    let events = read_events(std::io::BufReader::new(std::fs::File::open(f).unwrap())).unwrap();
    let run = Run::from_events(&events);
    let meta = run.meta.as_ref().unwrap();
    assert_eq!(meta.device.name, "NVIDIA H100 80GB HBM3");
    assert_eq!(meta.device.memory_source, gpulab::trace::MemorySource::Nvml);
    // Verdicts are replayed as they were computed on the device, not recomputed.
    let release = run
        .claims
        .iter()
        .find(|c| c.name == "release-does-not-wait")
        .unwrap();
    assert!(release.values["host_ms(release)"] > 100.0);
}
