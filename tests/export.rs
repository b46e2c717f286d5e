//! Chrome trace export, checked structurally on real recordings: every event has
//! the fields the format requires, timestamps never go back, every async begin has
//! its end, and the tracks are the ones the run had.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use std::collections::HashMap;

use serde_json::Value;

fn export(fixture: &str) -> Value {
    export_file(&format!("tests/fixtures/recordings/{fixture}"))
}

fn export_file(recording: &str) -> Value {
    let dir = common::temp_dir();
    let out = dir.path().join("trace.json");
    let r = common::run(&[
        "export",
        &common::repo_file(recording).display().to_string(),
        "--chrome",
        &out.display().to_string(),
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", common::stderr(&r));
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).expect("valid JSON")
}

#[test]
fn chrome_traces_are_well_formed() {
    for fixture in [
        "h100-opencl--cl-premature-release--release-then-finish.jsonl",
        "h100-opencl--cl-forgotten-events--forgotten.jsonl",
        "pocl--cl-finish--no-wait.jsonl",
    ] {
        let doc = export(fixture);
        let events = doc["traceEvents"].as_array().expect("traceEvents");
        let mut last_ts = f64::MIN;
        let mut open: HashMap<(String, String), i32> = HashMap::new();
        for e in events {
            let ph = e["ph"].as_str().expect("ph");
            assert!(e["name"].is_string(), "{fixture}: {e}");
            assert!(e["pid"].is_u64(), "{fixture}: {e}");
            if ph == "M" {
                continue;
            }
            let ts = e["ts"].as_f64().expect("ts");
            assert!(ts >= last_ts, "{fixture}: time went back at {e}");
            last_ts = ts;
            match ph {
                "X" => assert!(
                    e["dur"].as_f64().is_some_and(|d| d >= 0.0),
                    "{fixture}: {e}"
                ),
                "b" | "e" => {
                    let key = (
                        e["cat"].as_str().unwrap_or("").to_string(),
                        e["id"].as_str().unwrap_or("").to_string(),
                    );
                    *open.entry(key).or_default() += if ph == "b" { 1 } else { -1 };
                }
                "C" => assert!(e["args"]["MiB"].is_number(), "{fixture}: {e}"),
                "i" => {}
                // A flow from an enqueue to its device span: one start, one end.
                "s" | "f" => {
                    let key = (
                        "flow".to_string(),
                        e["id"].as_str().unwrap_or("").to_string(),
                    );
                    *open.entry(key).or_default() += if ph == "s" { 1 } else { -1 };
                    if ph == "f" {
                        assert_eq!(e["bp"], "e", "{fixture}: {e}");
                    }
                }
                other => panic!("{fixture}: unexpected phase {other}"),
            }
        }
        assert!(
            open.values().all(|n| *n == 0),
            "{fixture}: unmatched async slices {open:?}"
        );
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .filter_map(|e| e["args"]["name"].as_str())
            .collect();
        assert!(
            names.contains(&"host") && names.contains(&"queue q"),
            "{fixture}: {names:?}"
        );
        assert!(
            events.iter().any(|e| e["cat"] == "device"),
            "{fixture}: no device spans"
        );
    }
}

/// Each kernel's span has an arrow from the call that enqueued it (the flow starts
/// inside that call's slice on the host lane), and the memory counter says what it
/// reads: NVML's device memory on the H100, the worker's RSS on PoCL.
#[test]
fn enqueues_point_at_their_device_work_and_the_counter_names_its_source() {
    for (fixture, counter) in [
        (
            "h100-opencl--cl-premature-release--release-then-finish.jsonl",
            "device memory",
        ),
        ("pocl--cl-finish--no-wait.jsonl", "worker RSS"),
    ] {
        let doc = export(fixture);
        let events = doc["traceEvents"].as_array().unwrap();
        let spans = events.iter().filter(|e| e["cat"] == "device").count();
        let ends: Vec<&Value> = events.iter().filter(|e| e["ph"] == "f").collect();
        assert_eq!(ends.len(), spans, "{fixture}: one arrow per device span");
        for end in &ends {
            let start = events
                .iter()
                .find(|e| e["ph"] == "s" && e["id"] == end["id"])
                .unwrap_or_else(|| panic!("{fixture}: no start for {end}"));
            let ts = start["ts"].as_f64().unwrap();
            let call = events
                .iter()
                .filter(|e| e["ph"] == "X" && e["cat"] == "call")
                .find(|c| {
                    let (b, d) = (c["ts"].as_f64().unwrap(), c["dur"].as_f64().unwrap());
                    b <= ts && ts <= b + d
                })
                .unwrap_or_else(|| panic!("{fixture}: the arrow starts outside a call: {start}"));
            assert!(
                call["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("clEnqueue")),
                "{fixture}: {call}"
            );
            assert!(end["ts"].as_f64().unwrap() >= ts, "{fixture}: {end}");
        }
        assert!(
            events
                .iter()
                .any(|e| e["ph"] == "C" && e["name"] == counter),
            "{fixture}: no `{counter}` counter"
        );
    }
}

#[test]
fn a_forgotten_event_shows_its_context_held_by_the_driver() {
    let doc = export("h100-opencl--cl-forgotten-events--forgotten.jsonl");
    let held = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "b" && e["name"] == "context ctx")
        .filter(|e| {
            e["cat"]
                .as_str()
                .is_some_and(|c| c.starts_with("held by the driver (never"))
        })
        .count();
    assert_eq!(held, 20);
}

fn figure(args: &[&str], out_name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = common::temp_dir();
    let out = dir.path().join(out_name);
    let fx = |f: &str| {
        common::repo_file(&format!("tests/fixtures/recordings/{f}"))
            .display()
            .to_string()
    };
    let mut full: Vec<String> = vec![
        "export".into(),
        fx("h100-opencl--cl-premature-release--release-then-finish.jsonl"),
    ];
    for a in args {
        full.push(if a.ends_with(".jsonl") {
            fx(a)
        } else {
            a.to_string()
        });
    }
    full.push(out.display().to_string());
    let refs: Vec<&str> = full.iter().map(String::as_str).collect();
    let r = common::run(&refs);
    assert_eq!(r.status.code(), Some(0), "{}", common::stderr(&r));
    (dir, out)
}

#[test]
fn svg_figures_hold_the_memory_series_and_the_lanes() {
    let (_dir, out) = figure(
        &[
            "--compare",
            "h100-opencl--cl-premature-release--finish-then-release.jsonl",
            "--svg",
        ],
        "fig.svg",
    );
    let text = std::fs::read_to_string(out).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    let polylines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .count();
    assert!(polylines >= 2, "one memory series per run, got {polylines}");
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(str::to_string))
        .collect();
    for needle in [
        "release-then-finish",
        "finish-then-release",
        "host",
        "queue q",
        "clReleaseMemObject [release]",
        "host calls",
        "memory above baseline",
        // The lab's lesson expects the release not to wait; the H100 waits.
        "◆ does not hold (unlike the lesson, on this device)",
        "✓ holds (as the lesson expects)",
    ] {
        assert!(
            texts.iter().any(|t| t.contains(needle)),
            "{needle} not in {texts:?}"
        );
    }
    let rects = doc.descendants().filter(|n| n.has_tag_name("rect")).count();
    assert!(rects > 20, "timeline spans are drawn ({rects} rects)");
}

/// One run or two stacked: a 16:9 slide either way.
#[test]
fn png_figures_are_16_9_at_projector_size() {
    for compare in [
        &[][..],
        &[
            "--compare",
            "h100-opencl--cl-premature-release--finish-then-release.jsonl",
        ][..],
    ] {
        let args: Vec<&str> = compare.iter().copied().chain(["--png"]).collect();
        let (_dir, out) = figure(&args, "fig.png");
        let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(out).unwrap()));
        let reader = decoder.read_info().expect("a PNG");
        let info = reader.info();
        assert_eq!(
            (info.width, info.height),
            (
                gpulab::export::figure::WIDTH,
                gpulab::export::figure::HEIGHT
            ),
            "{compare:?}"
        );
        assert_eq!(info.width * 9, info.height * 16);
    }
}

/// Labels are drawn with the font gpulab carries, whatever fonts the machine
/// has (a container often has none, and the PNG used to come out without any
/// text): a white SVG holding only a word must come out with dark pixels.
#[test]
fn png_text_is_drawn_without_any_system_font() {
    let svg = r##"<svg xmlns="http://www.w3.org/2000/svg" width="200" height="60">
        <rect width="200" height="60" fill="#ffffff"/>
        <text x="10" y="40" font-family="sans-serif" font-size="32" fill="#000000">clFinish</text>
    </svg>"##;
    let bytes = gpulab::export::figure::png(svg).expect("a PNG");
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut pixels = vec![0; reader.output_buffer_size().expect("a size")];
    let frame = reader.next_frame(&mut pixels).expect("a frame");
    let channels = frame.color_type.samples();
    let dark = pixels[..frame.buffer_size()]
        .chunks(channels)
        .filter(|p| p[..3].iter().all(|c| *c < 128))
        .count();
    assert!(
        dark > 100,
        "only {dark} dark pixels: the word was not drawn"
    );
}

#[test]
fn html_pages_load_in_a_browser_and_show_the_run() {
    let Some(browser) = common::browser::find("html_pages_load_in_a_browser_and_show_the_run")
    else {
        return;
    };
    for fixture in [
        "pocl--cl-finish--no-wait.jsonl",
        "h100-opencl--cl-premature-release--release-then-finish.jsonl",
    ] {
        let recording = common::repo_file(&format!("tests/fixtures/recordings/{fixture}"));
        let dir = common::temp_dir();
        let page = dir.path().join("run.html");
        let r = common::run(&[
            "export",
            &recording.display().to_string(),
            "--html",
            &page.display().to_string(),
        ]);
        assert_eq!(r.status.code(), Some(0), "{}", common::stderr(&r));
        let (dom, console) = common::browser::open(&browser, &page);
        assert!(console.is_empty(), "{fixture}: console said {console:?}");

        let f = std::fs::File::open(&recording).unwrap();
        let rec = gpulab::trace::read_recording(std::io::BufReader::new(f)).unwrap();
        let run = gpulab::run::Run::from_events(&rec.events);
        for line in run.lines() {
            assert!(
                dom.contains(&format!(
                    "<code>{}</code>",
                    common::browser::as_dom_text(&line.text)
                )),
                "{fixture}: line {} ({}) not on the page",
                line.line,
                line.text
            );
        }
        assert!(!run.claims().is_empty(), "{fixture} has claims");
        for c in run.claims() {
            let row = dom
                .split("<tr>")
                .find(|row| row.contains(&common::browser::as_dom_text(&c.expr)))
                .unwrap_or_else(|| panic!("{fixture}: claim {} not on the page", c.name));
            // After its mark, which says how it stands to the lab's lesson.
            assert!(
                row.contains(&format!(" {}<", c.verdict.label()))
                    || row.contains(&format!(" {}<br>", c.verdict.label())),
                "{fixture}: claim {} without its verdict: {row}",
                c.name
            );
        }
        // The lab's teaching text, from the shipped lab file.
        assert!(dom.contains("<h3>Look</h3>"), "{fixture}: no teaching text");
        // Self-contained: nothing the page could fetch.
        for outside in ["src=", "http://", "https://", "url("] {
            assert!(
                !dom.contains(outside),
                "{fixture}: the page refers to {outside}"
            );
        }
        let svgs = dom.matches("<svg").count();
        assert_eq!(svgs, 2, "{fixture}: the memory chart and the timeline");
        let titles = dom.matches("<title>").count();
        assert!(
            titles > run.calls().len(),
            "{fixture}: {titles} hover titles"
        );
    }
}

#[test]
fn html_goes_to_stdout_for_a_dash() {
    let r = common::run(&[
        "export",
        &common::repo_file("tests/fixtures/recordings/pocl--cl-finish--no-wait.jsonl")
            .display()
            .to_string(),
        "--html",
        "-",
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", common::stderr(&r));
    let page = common::stdout(&r);
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert!(page.trim_end().ends_with("</html>"));
}

/// A watched program's page: its calls by name, and the report `gpulab report`
/// prints, from H100 recordings shipped with gpulab.
#[test]
fn html_pages_of_watched_programs_load_in_a_browser() {
    let Some(browser) = common::browser::find("html_pages_of_watched_programs_load_in_a_browser")
    else {
        return;
    };
    for name in ["cuda-free-wait--spans", "torch-cache"] {
        let recording =
            common::repo_file(&format!("assets/watch-recordings/nvidia-h100/{name}.jsonl"));
        let dir = common::temp_dir();
        let page = dir.path().join("watch.html");
        let r = common::run(&[
            "export",
            &recording.display().to_string(),
            "--html",
            &page.display().to_string(),
        ]);
        assert_eq!(r.status.code(), Some(0), "{}", common::stderr(&r));
        let (dom, console) = common::browser::open(&browser, &page);
        assert!(console.is_empty(), "{name}: console said {console:?}");
        let f = std::fs::File::open(&recording).unwrap();
        let rec = gpulab::trace::read_recording(std::io::BufReader::new(f)).unwrap();
        let run = gpulab::run::Run::from_events(&rec.events);
        assert!(!run.calls().is_empty(), "{name} has calls");
        for c in run.calls() {
            assert!(
                dom.contains(&format!(
                    "<td><code>{}</code></td>",
                    common::browser::as_dom_text(&c.api)
                )),
                "{name}: {} not in the calls table",
                c.api
            );
        }
        let command = &run.meta().unwrap().watch.as_ref().unwrap().command;
        assert!(
            dom.contains(&format!(
                "gpulab watch -- {}",
                common::browser::as_dom_text(&command.join(" "))
            )),
            "{name}: the command is the heading"
        );
        assert!(dom.contains("<h2>Report</h2>"), "{name}: the watch report");
        assert_eq!(dom.matches("<svg").count(), 2, "{name}: both charts");
    }
}

/// `--compare` puts a second run in the same Chrome trace as a process of its own,
/// each from its own start, with each run's claims named by variant.
#[test]
fn a_compared_trace_holds_both_runs_as_processes() {
    let dir = common::temp_dir();
    let out = dir.path().join("both.json");
    let fx = |f: &str| {
        common::repo_file(&format!("tests/fixtures/recordings/{f}"))
            .display()
            .to_string()
    };
    let r = common::run(&[
        "export",
        &fx("h100-opencl--cl-premature-release--release-then-finish.jsonl"),
        "--compare",
        &fx("pocl--cl-finish--no-wait.jsonl"),
        "--chrome",
        &out.display().to_string(),
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", common::stderr(&r));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let processes: Vec<(u64, &str)> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(processes.len(), 2, "{processes:?}");
    assert_ne!(processes[0].0, processes[1].0);
    assert!(
        processes[0].1.contains("cl-premature-release"),
        "{processes:?}"
    );
    assert!(processes[1].1.contains("cl-finish"), "{processes:?}");
    for (pid, _) in &processes {
        let calls: Vec<f64> = events
            .iter()
            .filter(|e| e["pid"] == *pid && e["cat"] == "call")
            .map(|e| e["ts"].as_f64().unwrap())
            .collect();
        assert!(!calls.is_empty(), "no calls in process {pid}");
        // Each run's time counts from its own start.
        assert!(calls.iter().all(|t| *t >= 0.0), "{calls:?}");
    }
    let variants: Vec<&str> = doc["otherData"]["claims"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["variant"].as_str())
        .collect();
    assert!(
        variants.contains(&"release-then-finish") && variants.contains(&"no-wait"),
        "{variants:?}"
    );
}

/// `--html --compare`: one page of two variants, their facts and verdicts side
/// by side beside the lesson, both runs' charts under one zoom and scrub.
#[test]
fn a_compare_page_puts_two_variants_side_by_side() {
    let rec = |name: &str| {
        common::repo_file(&format!("assets/recordings/nvidia-h100/{name}.jsonl"))
            .display()
            .to_string()
    };
    let out = common::run(&[
        "export",
        &rec("cuda-free-async--pipeline-free"),
        "--compare",
        &rec("cuda-free-async--pipeline-free-async"),
        "--html",
        "-",
    ]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let page = common::stdout(&out);
    assert!(
        page.contains("<h1>cuda-free-async: pipeline-free and pipeline-free-async</h1>"),
        "{page}"
    );
    assert_eq!(page.matches("class=\"chart memory-chart\"").count(), 2);
    assert_eq!(page.matches("class=\"chart timeline\"").count(), 2);
    assert_eq!(page.matches("<line class=\"cursor\"").count(), 4);
    assert!(page.contains("id=\"scrub\"") && page.contains("id=\"zoom\""));
    // The key comparison: the streams take turns with cudaFree, as the lesson
    // expects; they overlap with cudaFreeAsync, as it expects too.
    let row = page
        .lines()
        .find(|l| l.contains("<b>streams-overlap</b>"))
        .expect("the claim's row");
    assert_eq!(row.matches("as the lesson expects").count(), 2, "{row}");
    assert!(
        row.contains("✓ does not hold") && row.contains("✓ holds"),
        "{row}"
    );
    assert!(
        row.contains("overlap(loop) = 0,") || row.contains("overlap(loop) = 0<"),
        "{row}"
    );
}

/// A recording far longer than a figure is wide, written here event by event: the
/// pocl fixture's meta, then `calls` calls of one line 10 µs apart (one in ten
/// with a device span, one failing, one leaving a 512 MiB spike), 1 kHz samples
/// and the end.
fn long_recording(path: &std::path::Path, calls: u64) {
    use gpulab::trace::{Call, CallStatus, DeviceSpan, End, EndStatus, Event, Sample, to_line};
    use std::io::Write;

    let fixture = common::repo_file("tests/fixtures/recordings/pocl--cl-finish--no-wait.jsonl");
    let f = std::fs::File::open(fixture).unwrap();
    let rec = gpulab::trace::read_recording(std::io::BufReader::new(f)).unwrap();
    let Some(Event::Meta(meta)) = rec.events.first() else {
        panic!("the fixture starts with its meta")
    };
    let (t0, base) = (meta.t_ns, meta.baseline_bytes.unwrap_or(0));
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut put = |e: &Event| out.write_all(to_line(e).as_bytes()).unwrap();
    put(&rec.events[0]);
    let at = |i: u64| t0 + 1_000_000 + i * 10_000;
    for i in 0..calls {
        let mem = base + (i % 1_000) * 4096 + if i == calls / 3 { 512 << 20 } else { 0 };
        put(&Event::Call(Call {
            seq: i,
            line: Some(61),
            api: "clFinish".into(),
            driver: "clFinish".into(),
            begin_ns: at(i),
            end_ns: at(i) + 5_000,
            mem_before: Some(mem),
            mem_after: Some(mem),
            status: if i == calls / 2 {
                CallStatus::Error {
                    name: "CL_INVALID_COMMAND_QUEUE".into(),
                    code: -36,
                }
            } else {
                CallStatus::Ok
            },
            ..Default::default()
        }));
        if i % 10 == 0 {
            put(&Event::DeviceSpan(DeviceSpan {
                queue: 1,
                queue_name: Some("q".into()),
                name: "spin".into(),
                call_seq: i,
                line: Some(61),
                queued_ns: at(i),
                begin_ns: at(i) + 1_000,
                end_ns: at(i) + 9_000,
            }));
        }
        if i % 100 == 0 {
            put(&Event::Sample(Sample {
                t_ns: at(i),
                source: gpulab::trace::MemorySource::Rss,
                used_bytes: mem,
                total_bytes: None,
                process_bytes: None,
                others: None,
            }));
        }
    }
    put(&Event::End(End {
        t_ns: at(calls),
        status: EndStatus::Finished,
        leaked: vec![],
    }));
}

/// The calls a merged mark's title says it stands for ("1,234 calls, …").
fn counted(title: &str) -> u64 {
    title
        .split(' ')
        .next()
        .and_then(|n| n.replace(',', "").parse().ok())
        .unwrap_or(0)
}

/// 200,000 calls draw a figure of a few hundred kB, not tens of MB: the host
/// lane and the queue's lane hold at most one bar per pixel column, each saying
/// how many calls or spans it stands for, and the memory line keeps its spike.
#[test]
fn a_figure_of_200000_calls_draws_a_bounded_number_of_marks() {
    let dir = common::temp_dir();
    let rec = dir.path().join("long.jsonl");
    let calls = 200_000;
    long_recording(&rec, calls);
    let (svg, page) = (dir.path().join("long.svg"), dir.path().join("long.html"));
    let r = common::run(&[
        "export",
        &rec.display().to_string(),
        "--svg",
        &svg.display().to_string(),
        "--html",
        &page.display().to_string(),
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", common::stderr(&r));

    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.len() < 1_000_000, "the SVG is {} bytes", text.len());
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    let plot_width = (gpulab::export::figure::WIDTH - 150 - 40) as usize;
    for (fill, what, want) in [
        ("#787878", "calls", calls),
        ("#d62728", "device spans", calls / 10),
    ] {
        // The legend's swatch is the one bar of its colour without a title.
        let bars: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some(fill))
            .collect();
        assert!(
            bars.len() <= plot_width + 2,
            "{} bars of {what}",
            bars.len()
        );
        let titles: Vec<&str> = bars
            .iter()
            .filter_map(|b| b.children().find(|c| c.has_tag_name("title"))?.text())
            .collect();
        assert_eq!(
            titles.len(),
            bars.len() - 1,
            "every {what} bar says what it stands for"
        );
        assert_eq!(
            titles.iter().map(|t| counted(t)).sum::<u64>(),
            want,
            "{what}"
        );
    }
    let points: Vec<f64> = doc
        .descendants()
        .find(|n| n.has_tag_name("polyline"))
        .and_then(|n| n.attribute("points"))
        .unwrap_or_default()
        .split(' ')
        .filter_map(|p| p.split(',').nth(1)?.parse().ok())
        .collect();
    assert!(
        points.len() <= 4 * (plot_width + 2),
        "{} points",
        points.len()
    );
    let top = points.iter().copied().fold(f64::INFINITY, f64::min);
    let mut ys = points.clone();
    ys.sort_by(f64::total_cmp);
    assert!(ys[ys.len() / 2] - top > 100.0, "the 512 MiB spike is drawn");

    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.len() < 1_000_000, "the page is {} bytes", html.len());
    assert!(html.matches("<rect class=\"host").count() <= plot_width);
    assert_eq!(html.matches("<rect class=\"host failed\"").count(), 1);
    assert!(html.contains("1 returned an error"));
    assert!(
        html.contains(&format!("<td class=\"n\">{calls}</td>")),
        "the script table counts every call of the line"
    );
}

/// A run with few calls draws each one, as before: no merged marks.
#[test]
fn a_short_run_draws_every_call_as_its_own_bar() {
    let (_dir, out) = figure(&["--svg"], "fig.svg");
    let text = std::fs::read_to_string(out).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    let host_bars = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some("#787878"))
        .count();
    let f = std::fs::File::open(common::repo_file(
        "tests/fixtures/recordings/h100-opencl--cl-premature-release--release-then-finish.jsonl",
    ))
    .unwrap();
    let rec = gpulab::trace::read_recording(std::io::BufReader::new(f)).unwrap();
    let run = gpulab::run::Run::from_events(&rec.events);
    let calls = run
        .calls()
        .iter()
        .filter(|c| c.status != gpulab::trace::CallStatus::Directive)
        .count();
    assert_eq!(host_bars, calls + 1, "one bar per call, and the legend's");
    assert!(!text.contains("<title>"), "no bar stands for several calls");
}

/// A watched program's trace carries who held its memory as a counter track
/// whose series Perfetto stacks, from the run's own compositions: the last
/// one adds up to the reading the report composes at exit.
#[test]
fn a_watched_programs_trace_stacks_who_holds_its_memory() {
    let recording = "assets/watch-recordings/nvidia-h200/torch-losses.jsonl";
    let doc = export_file(recording);
    let shares: Vec<&Value> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "who holds the program's memory (MiB)")
        .collect();
    assert!(shares.len() > 1, "{}", shares.len());
    let last = shares.last().unwrap();
    let sum: f64 = [
        "objects",
        "cache",
        "reserves",
        "kept_by_driver",
        "unexplained",
    ]
    .iter()
    .map(|k| last["args"][k].as_f64().expect("a share"))
    .sum();
    let r = common::run(&[
        "report",
        "--json",
        &common::repo_file(recording).display().to_string(),
    ]);
    let report: Value = serde_json::from_slice(&r.stdout).expect("json");
    let total = report["holders"]["at_exit"]["total_bytes"]
        .as_u64()
        .expect("a reading") as f64
        / f64::from(1 << 20);
    assert!((sum - total).abs() < 0.01, "{sum} vs {total}");
    // A lab's trace has no such track.
    let lab = export("h100-opencl--cl-forgotten-events--forgotten.jsonl");
    assert!(
        !lab["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "who holds the program's memory (MiB)")
    );
}

/// Every recording gpulab ships, as fixtures or assets.
fn shipped_recordings() -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    for dir in [
        "tests/fixtures",
        "assets/recordings",
        "assets/watch-recordings",
    ] {
        walk(&common::repo_file(dir), &mut out);
    }
    out.sort();
    out
}

/// A recording's events, as `export` streams them (damaged lines left out).
fn streamed(path: &std::path::Path) -> Option<Vec<gpulab::trace::Event>> {
    let f = std::fs::File::open(path).ok()?;
    let mut events = Vec::new();
    gpulab::trace::stream_recording(std::io::BufReader::new(f), |e| events.push(e)).ok()?;
    Some(events)
}

/// The Chrome trace of `events`, parsed.
fn trace_of(events: &[gpulab::trace::Event]) -> Value {
    let each = |f: &mut dyn FnMut(gpulab::trace::Event)| {
        events.iter().cloned().for_each(f);
        Ok(())
    };
    let mut out = Vec::new();
    gpulab::export::chrome::Trace::outline(vec![each])
        .unwrap()
        .write(&mut out)
        .unwrap();
    serde_json::from_slice(&out).expect("valid JSON")
}

/// The thread a track's name says it draws (`thread 798`, `thread 764
/// (main)`, `thread 798, overlapping calls 1`), or `host` for a lab's.
fn thread_of(name: &str) -> Option<String> {
    if name == "host" {
        return Some(name.to_string());
    }
    let rest = name.strip_prefix("thread ")?;
    Some(rest.split([' ', ',']).next()?.to_string())
}

/// A trace's time in whole ns, as a reader converts the µs it says.
fn ns(us: f64) -> i64 {
    (us * 1e3).round() as i64
}

/// The names a trace gives its processes and its tracks, each process named once.
fn named_tracks(
    name: &str,
    all: &[serde_json::Value],
) -> (
    std::collections::BTreeMap<u64, String>,
    std::collections::BTreeMap<(u64, u64), String>,
) {
    let mut processes = std::collections::BTreeMap::new();
    let mut threads = std::collections::BTreeMap::new();
    for e in all.iter().filter(|e| e["ph"] == "M") {
        let (pid, tid) = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        let said = e["args"]["name"].as_str().unwrap_or("").to_string();
        match e["name"].as_str() {
            Some("process_name") => {
                assert!(
                    processes.insert(pid, said).is_none(),
                    "{name}: process {pid} named twice"
                );
            }
            Some("thread_name") => {
                threads.insert((pid, tid), said);
            }
            _ => {}
        }
    }
    (processes, threads)
}

/// The slices of one track (begin, end in ns) nest: two either hold one
/// another or are disjoint.
fn assert_nested(name: &str, track: Option<&String>, mut v: Vec<(i64, i64)>) {
    v.sort_by_key(|&(b, e)| (b, std::cmp::Reverse(e)));
    let mut open: Vec<i64> = Vec::new();
    for (b, e) in v {
        while open.last().is_some_and(|&end| end <= b) {
            open.pop();
        }
        if let Some(&end) = open.last() {
            assert!(
                e <= end,
                "{name}: on {track:?} a slice {b}..{e} ns partly overlaps one ending at {end}"
            );
        }
        open.push(e);
    }
}

/// Property over every shipped recording: each process is named, each
/// process's threads are tracks of their own (named by their thread id, and
/// the process by its pid and rank), every call lands on the track of its
/// process and thread, and on one track complete slices nest: two either hold
/// one another or are disjoint, never partly overlap (Perfetto draws such
/// slices wrong).
#[test]
fn every_shipped_recordings_trace_has_a_nesting_track_per_process_and_thread() {
    use gpulab::trace::Event;
    use std::collections::{BTreeMap, BTreeSet};

    let recordings = shipped_recordings();
    assert!(recordings.len() > 100, "{} recordings", recordings.len());
    let mut checked = 0;
    for path in &recordings {
        let name = path.display().to_string();
        let Some(events) = streamed(path) else {
            continue;
        };
        let watched = events
            .iter()
            .any(|e| matches!(e, Event::Meta(m) if m.watch.is_some()));
        let mut recorded: BTreeMap<(u64, String), usize> = BTreeMap::new();
        for e in &events {
            if let Event::Call(c) = e {
                let track = if watched {
                    (u64::from(c.pid), c.thread.to_string())
                } else {
                    (0, "host".to_string())
                };
                *recorded.entry(track).or_default() += 1;
            }
        }
        let doc = trace_of(&events);
        let all = doc["traceEvents"].as_array().unwrap();
        let (processes, threads) = named_tracks(&name, all);
        let mut slices: BTreeMap<(u64, u64), Vec<(i64, i64)>> = BTreeMap::new();
        let mut calls: BTreeMap<(u64, String), usize> = BTreeMap::new();
        for e in all.iter().filter(|e| e["ph"] != "M") {
            let pid = e["pid"].as_u64().unwrap();
            assert!(
                processes.contains_key(&pid),
                "{name}: unnamed process {pid}: {e}"
            );
            if e["ph"] != "X" {
                continue;
            }
            let tid = e["tid"].as_u64().unwrap();
            let track = threads
                .get(&(pid, tid))
                .unwrap_or_else(|| panic!("{name}: unnamed track {pid}/{tid}: {e}"));
            let begin = ns(e["ts"].as_f64().unwrap());
            let end = begin + ns(e["dur"].as_f64().unwrap());
            slices.entry((pid, tid)).or_default().push((begin, end));
            if e["cat"] == "call" {
                let thread = thread_of(track)
                    .unwrap_or_else(|| panic!("{name}: call on track {track:?}: {e}"));
                let process = if watched { pid } else { 0 };
                *calls.entry((process, thread)).or_default() += 1;
            }
        }
        assert_eq!(calls, recorded, "{name}: calls by process and thread");
        if watched {
            // A process that made calls says its pid, and its rank where it had one.
            for e in &events {
                if let Event::Agent(a) = e
                    && let gpulab::trace::AgentState::Attached { rank: Some(r), .. } = &a.state
                    && recorded.keys().any(|(p, _)| *p == u64::from(a.pid))
                {
                    let said = &processes[&u64::from(a.pid)];
                    assert!(
                        said.contains(&format!("rank {} (pid {})", r.rank, a.pid)),
                        "{name}: {said}"
                    );
                }
            }
        }
        for (track, v) in slices {
            assert_nested(&name, threads.get(&track), v);
        }
        let tracks: BTreeSet<_> = calls.keys().collect();
        assert_eq!(tracks.len(), recorded.len(), "{name}");
        checked += 1;
    }
    assert!(checked > 100, "{checked} recordings checked");
}

/// The figure of the two-rank torchrun OOM draws a panel for each GPU the
/// program held memory on, the GPU of the refused rank first, marks the
/// refusal, and keeps its long command inside the slide.
#[test]
fn a_two_rank_figure_draws_each_gpu_the_refused_one_first_and_marks_the_refusal() {
    use gpulab::trace::Event;
    let rec = "assets/watch-recordings/nvidia-h200-x2/torchrun-oom.jsonl";
    let path = common::repo_file(rec);
    let events = streamed(&path).unwrap();
    // The GPUs NVML listed the program's processes on, and the refused pid.
    let mut used = std::collections::BTreeSet::new();
    for e in &events {
        if let Event::GpuReading(g) = e
            && g.processes.as_ref().is_some_and(|p| !p.is_empty())
        {
            used.insert(g.gpu);
        }
    }
    assert_eq!(used.len(), 2, "{used:?}");
    let dir = common::temp_dir();
    let out = dir.path().join("fig.svg");
    let r = common::run(&[
        "export",
        &path.display().to_string(),
        "--svg",
        &out.display().to_string(),
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", common::stderr(&r));
    let text = std::fs::read_to_string(out).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    let texts: Vec<(f64, f64, String)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| {
            let num = |a: &str| n.attribute(a).and_then(|v| v.parse().ok()).unwrap_or(0.0);
            (
                num("x"),
                num("font-size"),
                n.text().unwrap_or("").to_string(),
            )
        })
        .collect();
    let panels: Vec<&str> = texts
        .iter()
        .filter(|t| t.2.starts_with("GPU "))
        .map(|t| t.2.as_str())
        .collect();
    assert_eq!(panels.len(), used.len(), "{panels:?}");
    assert!(
        panels[0].starts_with("GPU 1 · "),
        "the refused GPU first: {panels:?}"
    );
    assert!(panels[1].starts_with("GPU 0 · "), "{panels:?}");
    let refused: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("line") && n.attribute("class") == Some("refused"))
        .collect();
    assert_eq!(refused.len(), 1);
    assert!(
        texts
            .iter()
            .any(|t| t.2.starts_with("out of memory: cuMemAlloc refused") && t.2.contains("rank 1")),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.2.contains("rank 0 (pid"))
            && texts.iter().any(|t| t.2.contains("rank 1 (pid")),
        "each rank named in its panel"
    );
    // The title: whole words, within the slide, the full command kept in a <title>.
    let width = f64::from(gpulab::export::figure::WIDTH);
    for (x, size, t) in texts
        .iter()
        .filter(|t| t.2.contains("torch.distributed") || t.2.contains("nccl_ranks"))
    {
        let half = t.chars().count() as f64 * size * 0.6 / 2.0;
        assert!(
            x - half >= 0.0 && x + half <= width,
            "{t:?} runs off the slide"
        );
    }
    assert!(text.contains("<title>program: python3 -m torch.distributed.run"));
}

/// Each inline `<svg>` of a page, parsed.
fn page_svgs(html: &str) -> Vec<String> {
    html.split("<svg")
        .skip(1)
        .filter_map(|s| {
            s.split_once("</svg>")
                .map(|(body, _)| format!("<svg{body}</svg>"))
        })
        .collect()
}

/// The page of `recording` (a path in the repository).
fn page_of(recording: &str) -> String {
    let r = common::run(&[
        "export",
        &common::repo_file(recording).display().to_string(),
        "--html",
        "-",
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", common::stderr(&r));
    common::stdout(&r)
}

/// The page of the two-rank torchrun OOM shows what its figure shows: a
/// chart for each GPU the program's processes were on, the refused rank's
/// GPU first, each rank's bytes stacked in its colour and named, and the
/// refusal marked with its words, on every chart and the timeline.
#[test]
fn a_two_rank_page_draws_each_gpu_the_refused_one_first_and_marks_the_refusal() {
    let rec = "assets/watch-recordings/nvidia-h200-x2/torchrun-oom.jsonl";
    let events = streamed(&common::repo_file(rec)).unwrap();
    let run = gpulab::run::Run::from_events(&events);
    let ranks = run.ranks();
    let refused = ranks
        .members
        .values()
        .find(|m| m.ran_out.is_some())
        .expect("a rank was refused");
    let (pid, rank) = (refused.pid, refused.rank.as_ref().unwrap().rank);
    assert_eq!(rank, 1);
    let html = page_of(rec);
    let svgs = page_svgs(&html);
    let mut gpu_labels = Vec::new();
    let mut refusal_lines = 0;
    let mut refusal_words = Vec::new();
    let mut bands = std::collections::BTreeSet::new();
    for s in &svgs {
        let doc = roxmltree::Document::parse(s).expect("well-formed SVG");
        let class = doc.root_element().attribute("class").unwrap_or("");
        for n in doc.descendants() {
            let text = n.text().unwrap_or("").to_string();
            match (n.tag_name().name(), n.attribute("class")) {
                ("text", _) if class.contains("gpu-chart") && text.starts_with("GPU ") => {
                    gpu_labels.push(text)
                }
                ("line", Some("refused")) => refusal_lines += 1,
                ("text", Some("refused")) => refusal_words.push(text),
                ("path", Some("share")) if class.contains("gpu-chart") => {
                    let title = n.children().find(|c| c.has_tag_name("title"));
                    bands.insert(title.and_then(|t| t.text()).unwrap_or("").to_string());
                }
                _ => {}
            }
        }
    }
    assert_eq!(gpu_labels.len(), 2, "{gpu_labels:?}");
    assert!(gpu_labels[0].starts_with("GPU 1 · "), "{gpu_labels:?}");
    assert!(gpu_labels[1].starts_with("GPU 0 · "), "{gpu_labels:?}");
    // A line on each GPU's chart and across the timeline; its words once.
    assert_eq!(refusal_lines, 3, "{refusal_lines} refusal lines");
    assert_eq!(refusal_words.len(), 1, "{refusal_words:?}");
    let words = &refusal_words[0];
    assert!(
        words.starts_with("out of memory: cuMemAlloc refused")
            && words.contains(&format!("rank 1 (pid {pid})"))
            && words.ends_with("on GPU 1"),
        "{words}"
    );
    // The MiB it asked for, as recorded.
    let asked = refused.ran_out.as_ref().unwrap().asked_bytes.unwrap();
    let mib = asked.div_ceil(1 << 20);
    assert!(
        words.replace(',', "").contains(&format!(" {mib} MiB")),
        "{words} asks {mib} MiB"
    );
    // Both ranks' bytes stacked, each named, and in the legend.
    for m in ranks.members.values().filter(|m| !m.gpus_used.is_empty()) {
        let r = m.rank.as_ref().unwrap().rank;
        let name = format!("rank {r} (pid {})", m.pid);
        assert!(bands.contains(&name), "{name} not stacked: {bands:?}");
        assert!(
            html.contains(&format!("</i>{name}</span>")),
            "{name} not in the legend"
        );
    }
}

/// A single-GPU watched program's page stacks who held its memory under the
/// curve, each share the run's compositions name and the gap no share
/// explains; a lab's page draws none of it.
#[test]
fn a_watched_programs_page_stacks_who_holds_its_memory() {
    let rec = "assets/watch-recordings/nvidia-h200/torch-losses.jsonl";
    let events = streamed(&common::repo_file(rec)).unwrap();
    let run = gpulab::run::Run::from_events(&events);
    let points = run.composition().points();
    assert!(!points.is_empty());
    let names = [
        "objects it held",
        "its allocators' cache",
        "reserves (contexts, code)",
        "kept by the driver",
    ];
    let mut expected: std::collections::BTreeSet<&str> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| points.iter().any(|p| p.stacked()[*i] > 0))
        .map(|(_, n)| *n)
        .collect();
    if points
        .iter()
        .any(|p| p.total > p.stacked().iter().sum::<u64>() + (1 << 20))
    {
        expected.insert("not explained by any share");
    }
    assert!(expected.len() >= 3, "{expected:?}");
    let html = page_of(rec);
    let svgs = page_svgs(&html);
    let memory = svgs
        .iter()
        .find(|s| s.contains("memory-chart"))
        .expect("a memory chart");
    assert!(
        !svgs.iter().any(|s| s.contains("gpu-chart")),
        "one GPU, one chart"
    );
    let doc = roxmltree::Document::parse(memory).expect("well-formed SVG");
    let drawn: std::collections::BTreeSet<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("path") && n.attribute("class") == Some("share"))
        .filter_map(|n| n.children().find(|c| c.has_tag_name("title"))?.text())
        .collect();
    assert_eq!(drawn, expected);
    // Under the curve: the curve is drawn after (over) the bands.
    let curve = memory.find("<polyline class=\"memory\"").unwrap();
    assert!(memory.rfind("class=\"share\"").unwrap() < curve);
    for name in &expected {
        assert!(
            html.contains(&format!("</i>{}</span>", name.replace('\'', "&#39;"))),
            "{name} not in the legend"
        );
    }

    // A framework's refusal (PyTorch at its own limit, no driver call
    // refused) is marked with its words too.
    let rec = "assets/watch-recordings/nvidia-h200/torch-oom--lines.jsonl";
    let run = gpulab::run::Run::from_events(&streamed(&common::repo_file(rec)).unwrap());
    let f = run.frameworks().first_refusal().expect("PyTorch refused");
    let html = page_of(rec);
    let words = format!(
        "out of memory: PyTorch refused {} MiB, pid {}",
        f.asked.div_ceil(1 << 20),
        f.allocator.pid
    );
    assert!(html.contains(&words), "{words} not on the page");
    assert_eq!(html.matches("<line class=\"refused\"").count(), 2);

    let lab = page_of(
        "tests/fixtures/recordings/h100-opencl--cl-premature-release--release-then-finish.jsonl",
    );
    assert!(!lab.contains("class=\"share\""));
    let svgs = page_svgs(&lab);
    assert!(!svgs.iter().any(|s| s.contains("gpu-chart")));
    assert_eq!(svgs.len(), 2, "a lab's memory chart and timeline");
}
