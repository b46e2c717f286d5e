use super::*;
use gpulab_events::Expected;

fn claim(name: &str, verdict: Verdict, expected: Option<Expected>) -> ClaimVerdict {
    ClaimVerdict {
        name: name.into(),
        text: format!("{name} in words"),
        expr: "host_ms(release) > 1".into(),
        requires: None,
        values: BTreeMap::from([("host_ms(release)".to_string(), 2.5)]),
        verdict,
        reason: None,
        expected,
    }
}

fn card(host: &str, device: &str, verdicts: &[(&str, Verdict)]) -> Card {
    let id = format!("{host}/{device}");
    Card {
        recorded: Provenance::default(),
        devices: vec![CardDevice {
            id: id.clone(),
            host: host.into(),
            name: device.into(),
            platforms: vec!["a platform".into()],
            drivers: vec!["1.0".into()],
            memory_source: MemorySource::Nvml,
        }],
        runs: vec![CardRun {
            device: id,
            lab: "cl-finish".into(),
            variant: "no-wait".into(),
            status: "finished".into(),
            duration_ms: Some(1.0),
            at: None,
            gpulab_version: "0.1.0".into(),
            recording: Some("recordings/x.jsonl".into()),
            loaded: None,
            claims: verdicts
                .iter()
                .map(|(n, v)| claim(n, *v, Some(Expected::Holds)))
                .collect(),
        }],
    }
}

#[test]
fn the_claims_that_differ_come_first_and_a_missing_run_is_an_empty_cell() {
    let a = card(
        "h1",
        "H100",
        &[("same", Verdict::Holds), ("split", Verdict::Holds)],
    );
    let b = card(
        "h2",
        "H200",
        &[("same", Verdict::Holds), ("split", Verdict::DoesNotHold)],
    );
    let mut c = card("h3", "PoCL", &[]);
    c.runs[0].variant = "finish".into();
    c.runs[0].claims = vec![claim("other", Verdict::Inconclusive, None)];
    let m = Matrix::merge(
        Provenance::default(),
        &[("a".into(), a), ("b".into(), b), ("c".into(), c)],
        Vec::new(),
    );
    assert_eq!(m.columns.len(), 3);
    let names: Vec<&str> = m.rows.iter().map(|r| r.claim.as_str()).collect();
    assert_eq!(names, ["split", "same", "other"]);
    assert!(m.rows[0].differs && !m.rows[1].differs && !m.rows[2].differs);
    assert_eq!(m.differing(), 1);
    assert!(m.rows[0].cells[2].is_none(), "PoCL ran no no-wait");
    assert_eq!(
        m.rows[0].cells[1].as_ref().map(|c| c.verdict),
        Some(Verdict::DoesNotHold)
    );
}

#[test]
fn a_device_two_cards_hold_is_said_and_left_out_of_the_second() {
    let a = card("h1", "H100", &[("c", Verdict::Holds)]);
    let b = card("h1", "H100", &[("c", Verdict::DoesNotHold)]);
    let m = Matrix::merge(
        Provenance::default(),
        &[("a.json".into(), a), ("b.json".into(), b)],
        vec!["c.json: truncated".into()],
    );
    assert_eq!(m.columns.len(), 1);
    assert_eq!(m.rows[0].cells.len(), 1);
    assert_eq!(
        m.rows[0].cells[0].as_ref().map(|c| c.verdict),
        Some(Verdict::Holds)
    );
    assert_eq!(m.problems.len(), 2, "{:?}", m.problems);
    assert!(m.problems[1].contains("a.json"), "{:?}", m.problems);
}

#[test]
fn each_cell_links_the_numbers_that_decided_it() {
    let a = card("h1", "H100", &[("split", Verdict::Holds)]);
    let b = card("h2", "H200", &[("split", Verdict::DoesNotHold)]);
    let m = Matrix::merge(
        Provenance::default(),
        &[("a".into(), a), ("b".into(), b)],
        Vec::new(),
    );
    let md = markdown(&m, "matrix");
    assert!(md.contains("## Claims whose verdicts differ (1)"), "{md}");
    assert!(
        md.contains("[✓ holds (as the lesson expects)](#n-0-0)"),
        "{md}"
    );
    assert!(md.contains("<a id=\"n-0-1\"></a>"), "{md}");
    assert!(md.contains("`host_ms(release)` = 2.5"), "{md}");
    let page = html(&m, "matrix");
    assert!(page.contains("href=\"#n-0-1\""), "{page}");
    assert!(page.contains("id=\"n-0-1\""), "{page}");
    assert!(page.contains("class=\"finding\""), "{page}");
}

#[test]
fn a_card_reads_back_as_it_was_written() {
    let a = card("h1", "H100", &[("c", Verdict::Holds)]);
    let text = serde_json::to_string(&a).unwrap();
    let back: Card = serde_json::from_str(&text).unwrap();
    assert_eq!(back.devices, a.devices);
    assert_eq!(back.runs[0].claims, a.runs[0].claims);
}

/// #49: a run on a loaded host says so in its card's cell and numbers; its
/// verdict is the run's own.
#[test]
fn a_run_on_a_loaded_host_says_so_in_the_card() {
    let mut c = card("h", "PoCL", &[("k", Verdict::Holds)]);
    c.runs[0].loaded = Some("load average 4.2 on 2 cores".into());
    let m = Matrix::merge(
        Provenance::here("h".into()),
        &[("c".into(), c.clone())],
        Vec::new(),
    );
    let loaded: Vec<&Cell> = m
        .rows
        .iter()
        .flat_map(|r| r.cells.iter().flatten())
        .collect();
    assert!(loaded.iter().any(|c| c.loaded.is_some()));
    let md = markdown(&m, "card");
    assert!(md.contains("· on a loaded host"), "{md}");
    assert!(
        md.contains("the host was loaded (load average 4.2 on 2 cores)"),
        "{md}"
    );
}
