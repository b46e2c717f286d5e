//! Damaged recordings: each gets its own message, readable lines are still
//! reported, and nothing panics — neither the library nor `gpulab report`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use gpulab::trace::read_recording;

fn good() -> String {
    std::fs::read_to_string(common::repo_file(
        "tests/fixtures/recordings/pocl--cl-finish--no-wait.jsonl",
    ))
    .unwrap()
}

fn lines() -> Vec<String> {
    good().lines().map(str::to_string).collect()
}

fn join(lines: &[String]) -> String {
    lines.join("\n") + "\n"
}

enum Expect {
    /// Refused: the message contains this.
    Refused(&'static str),
    /// Read, with a skipped line whose message contains this.
    Skipped(&'static str),
}

#[expect(
    clippy::too_many_lines,
    reason = "a test table: one case per kind of damage"
)]
fn cases() -> Vec<(&'static str, Vec<u8>, Expect)> {
    let l = lines();
    let n = l.len();
    let mut v: Vec<(&'static str, Vec<u8>, Expect)> = Vec::new();
    let cut = good();
    v.push((
        "truncated last line",
        cut.as_bytes()[..cut.len() - 40].to_vec(),
        Expect::Skipped(format!("line {n}:").leak()),
    ));
    let mut mid = l.clone();
    mid[5] = mid[5][..mid[5].len() / 2].to_string();
    v.push((
        "a line cut in the middle of the file",
        join(&mid).into_bytes(),
        Expect::Skipped("line 6:"),
    ));
    v.push((
        "newer format version",
        good()
            .replacen("\"format_version\":1", "\"format_version\":9", 1)
            .into_bytes(),
        Expect::Refused("format 9"),
    ));
    v.push((
        "format version 0",
        good()
            .replacen("\"format_version\":1", "\"format_version\":0", 1)
            .into_bytes(),
        Expect::Refused("no longer reads"),
    ));
    let mut unknown = l.clone();
    unknown.insert(3, r#"{"type":"telepathy","data":{}}"#.into());
    v.push((
        "unknown event type",
        join(&unknown).into_bytes(),
        Expect::Skipped("unknown variant `telepathy`"),
    ));
    v.push((
        "missing meta",
        join(&l[1..]).into_bytes(),
        Expect::Refused("does not start with a `meta`"),
    ));
    let mut huge = l.clone();
    huge.insert(
        4,
        format!(
            r#"{{"type":"note","data":{{"text":"{}"}}}}"#,
            "x".repeat(17 << 20)
        ),
    );
    v.push((
        "a huge line",
        join(&huge).into_bytes(),
        Expect::Skipped("longer than 16 MiB"),
    ));
    v.push((
        "binary garbage",
        (0..4096u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect(),
        Expect::Refused("meta"),
    ));
    let mut bin_mid = join(&l[..6]).into_bytes();
    bin_mid.extend_from_slice(&[0xff, 0xfe, 0x00, 0x80, b'\n']);
    bin_mid.extend_from_slice(join(&l[6..]).as_bytes());
    v.push((
        "binary bytes in the middle",
        bin_mid,
        Expect::Skipped("not UTF-8"),
    ));
    v.push(("empty file", Vec::new(), Expect::Refused("meta")));
    v.push((
        "only blank lines",
        b"\n\n  \n".to_vec(),
        Expect::Refused("meta"),
    ));
    let mut extra = l.clone();
    extra[2] = extra[2].replacen("\"seq\"", "\"colour\":\"red\",\"seq\"", 1);
    v.push((
        "an unknown field",
        join(&extra).into_bytes(),
        Expect::Skipped("unknown field `colour`"),
    ));
    let mut wrong_type = l.clone();
    let call = l.iter().rposition(|x| x.contains("\"seq\":")).unwrap();
    wrong_type[call] = wrong_type[call].replacen("\"seq\":", "\"seq\":\"first\",\"x\":", 1);
    v.push((
        "a field of the wrong type",
        join(&wrong_type).into_bytes(),
        Expect::Skipped("invalid type: string \"first\""),
    ));
    let mut not_json = l.clone();
    not_json.insert(7, "this is not json".into());
    v.push((
        "a line of prose",
        join(&not_json).into_bytes(),
        Expect::Skipped("line 8:"),
    ));
    let mut no_envelope = l.clone();
    no_envelope.insert(2, r#"{"t_ns":5,"level":"info","text":"bare"}"#.into());
    v.push((
        "an event without its envelope",
        join(&no_envelope).into_bytes(),
        Expect::Skipped("line 3:"),
    ));
    let mut meta_broken = l.clone();
    meta_broken[0] = meta_broken[0].replacen("\"device\":", "\"devise\":", 1);
    v.push((
        "a damaged meta",
        join(&meta_broken).into_bytes(),
        Expect::Refused("meta"),
    ));
    let mut array = l.clone();
    array.insert(2, "[1,2,3]".into());
    v.push((
        "a JSON array line",
        join(&array).into_bytes(),
        Expect::Skipped("line 3:"),
    ));
    v
}

#[test]
fn every_damaged_recording_gets_its_message() {
    let cases = cases();
    assert!(cases.len() >= 15);
    for (name, bytes, expect) in cases {
        let got = read_recording(std::io::Cursor::new(&bytes));
        match (expect, got) {
            (Expect::Refused(needle), Err(e)) => {
                assert!(e.to_string().contains(needle), "{name}: {e}")
            }
            (Expect::Skipped(needle), Ok(rec)) => {
                assert!(!rec.events.is_empty(), "{name}: nothing read");
                let msgs: Vec<String> = rec.problems.iter().map(|p| p.to_string()).collect();
                assert!(msgs.iter().any(|m| m.contains(needle)), "{name}: {msgs:?}");
            }
            (Expect::Refused(_), Ok(rec)) => panic!(
                "{name}: read {} events, expected a refusal",
                rec.events.len()
            ),
            (Expect::Skipped(_), Err(e)) => {
                panic!("{name}: refused ({e}), expected a partial read")
            }
        }
    }
}

#[test]
fn gpulab_report_survives_every_damaged_recording() {
    let dir = common::temp_dir();
    for (i, (name, bytes, expect)) in cases().into_iter().enumerate() {
        let f = dir.path().join(format!("{i}.jsonl"));
        std::fs::write(&f, &bytes).unwrap();
        let out = common::run(&["report", &f.display().to_string()]);
        let err = common::stderr(&out);
        assert!(!err.contains("panicked"), "{name}: {err}");
        match expect {
            Expect::Refused(_) => assert_eq!(out.status.code(), Some(2), "{name}: {err}"),
            Expect::Skipped(_) => {
                assert_eq!(out.status.code(), Some(0), "{name}: {err}");
                assert!(
                    err.contains("skipped") || err.contains("line "),
                    "{name}: {err}"
                );
                assert!(common::stdout(&out).contains("cl-finish"), "{name}");
            }
        }
    }
}

/// Recordings are shared files: escape sequences hidden in one (in the device
/// name, a note, a script line) reach no terminal through `report`; they are
/// written out instead, in every text format.
#[test]
fn a_recording_cannot_send_escape_sequences_to_the_terminal() {
    let evil = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{202e}";
    let mut events = gpulab::trace::read_events(good().as_bytes()).unwrap();
    for e in &mut events {
        match e {
            gpulab::trace::Event::Meta(m) => {
                m.device.name = format!("cpu{evil}");
                if let Some(lab) = &mut m.lab {
                    lab.title = format!("title{evil}");
                    for (_, text) in &mut lab.script {
                        text.push_str(evil);
                    }
                }
            }
            gpulab::trace::Event::Note(n) => n.text.push_str(evil),
            _ => {}
        }
    }
    let mut text: String = events.iter().map(gpulab::trace::to_line).collect();
    // A line no gpulab wrote, whose bad kind serde quotes back in its message
    // (#44: it reached the terminal raw), and a right-to-left override.
    text.push_str("{\"type\":\"\\u001b]0;pwned\\u0007\u{202e}\",\"data\":{}}\n");
    let dir = common::temp_dir();
    let f = dir.path().join("evil.jsonl");
    std::fs::write(&f, text).unwrap();
    let page = dir.path().join("evil.html");
    let out = common::run(&[
        "export",
        &f.display().to_string(),
        "--html",
        &page.display().to_string(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap_or_default();
    assert!(!html.is_empty(), "{}", common::stderr(&out));
    for (what, said) in [
        ("export's stderr", common::stderr(&out)),
        ("the page", html),
    ] {
        assert!(
            !said.contains(['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}']),
            "{what}: characters that act reached it"
        );
    }
    for format in [None, Some("--markdown")] {
        let mut args = vec!["report".to_string(), f.display().to_string()];
        args.extend(format.map(String::from));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = common::run(&args);
        assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
        let stdout = common::stdout(&out);
        assert!(
            !stdout.contains(['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}']),
            "{format:?}: control characters reached stdout"
        );
        let stderr = common::stderr(&out);
        assert!(
            !stderr.contains(['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}']),
            "{format:?}: control characters reached stderr: {stderr:?}"
        );
        assert!(stderr.contains("pwned"), "the bad line is named: {stderr}");
        assert!(stdout.contains("\\u{1b}]0;pwned"), "{format:?}: {stdout}");
    }
}

/// A doctored or spliced recording is read, but each line at odds with the rest
/// is named: a second `meta`, a second `end`, a time before the start, a time no
/// run reaches. The first `meta` and `end` stand.
#[test]
fn lines_at_odds_with_the_stream_are_named() {
    let mut lines = lines();
    let meta = lines[0].clone();
    let end = lines
        .iter()
        .find(|l| l.contains(r#""type":"end""#))
        .cloned()
        .expect("the fixture ends");
    let note = |t: u64| {
        format!(
            r#"{{"type":"note","data":{{"t_ns":{t},"level":"info","text":"late","line":null}}}}"#
        )
    };
    let n = lines.len();
    lines.push(meta);
    lines.push(end);
    lines.push(note(0));
    lines.push(note(u64::MAX));
    let rec = read_recording(join(&lines).as_bytes()).expect("read");
    let said: Vec<String> = rec.problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(said.len(), 4, "{said:#?}");
    for (i, what) in [
        "a second `meta`",
        "a second `end`",
        "before the run's start",
        "more than 30 days after",
    ]
    .iter()
    .enumerate()
    {
        let line = format!("line {}: ", n + i + 1);
        assert!(
            said[i].starts_with(&line) && said[i].contains(what),
            "{said:#?}"
        );
    }
    let run = gpulab::run::Run::from_events(&rec.events);
    let first = gpulab::trace::read_events(good().as_bytes()).unwrap();
    let first = gpulab::run::Run::from_events(&first);
    assert_eq!(run.meta(), first.meta());
    assert_eq!(run.end(), first.end());
}

/// The parent samples the device from before the worker exists: a sample a
/// little before the run's start is part of the run, not a damaged line, while
/// one long before it is.
#[test]
fn samples_from_before_the_worker_started_are_not_damage() {
    let lines = lines();
    let mut meta: serde_json::Value = serde_json::from_str(&lines[0]).expect("meta");
    let start: u64 = 1_000_000_000_000;
    meta["data"]["t_ns"] = start.into();
    let sample = |t: u64| {
        format!(
            r#"{{"type":"sample","data":{{"t_ns":{t},"source":"nvml","used_bytes":1,"total_bytes":null,"process_bytes":0}}}}"#
        )
    };
    let early = vec![meta.to_string(), sample(start - 700_000_000)];
    let rec = read_recording(join(&early).as_bytes()).expect("read");
    assert!(rec.problems.is_empty(), "{:?}", rec.problems);
    let ancient = vec![meta.to_string(), sample(start - 600_000_000_000)];
    let rec = read_recording(join(&ancient).as_bytes()).expect("read");
    assert_eq!(rec.problems.len(), 1, "{:?}", rec.problems);
}
