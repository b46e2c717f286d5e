//! `gpulab report FILE…`: the report of a recorded run, exactly as `run` prints
//! it; of several variants' recordings, as `run --all-variants` prints them.

use std::path::{Path, PathBuf};

use gpulab::lab::{Lab, LabSet};
use gpulab::output::{Body, Runs, json, json_line};
use gpulab::report::WatchReport;
use gpulab::report::{self, Summary};
use gpulab::run::Run;
use gpulab::trace::{Event, stream_recording};
use gpulab::verdict::LessonFill;

use super::{EXIT_OK, EXIT_USAGE, fail};
use crate::cli::Format;

pub fn report(dirs: &[PathBuf], files: &[PathBuf], format: Format) -> anyhow::Result<i32> {
    if files
        .iter()
        .filter(|f| f.as_path() == Path::new("-"))
        .count()
        > 1
    {
        return Err(fail(
            EXIT_USAGE,
            "stdin (`-`) holds one recording: name it once",
        ));
    }
    let set = super::load_labs(dirs);
    if let [file] = files {
        let run = load(file, set.labs())?;
        if run.meta().is_some_and(|m| m.watch.is_some()) {
            // A watched program, not a lab: the same report `gpulab watch` printed.
            out!("{}", watch_report(&run, &format)?);
        } else {
            out!("{}", render(&Summary::of(&run), format)?);
        }
        return Ok(EXIT_OK);
    }
    let mut runs = files
        .iter()
        .map(|f| load(f, set.labs()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let groups = judge_groups(&set, files, &mut runs)?;
    let summaries: Vec<Summary> = runs.iter().map(Summary::of).collect();
    if format.json {
        out!("{}", json(Body::Run(Runs { runs: &summaries }))?);
        return Ok(EXIT_OK);
    }
    if !format.markdown && !format.jsonl {
        for members in &groups {
            let group: Vec<Summary> = members.iter().map(|&i| summaries[i].clone()).collect();
            if groups.len() > 1 {
                outln!("{} · {}", group[0].lab, group[0].device);
            }
            outln!("{}\n", report::printable(&report::side_by_side(&group)));
        }
    }
    for s in &summaries {
        out!("{}", render(s, format)?);
        if !format.jsonl {
            outln!();
        }
    }
    Ok(EXIT_OK)
}

/// Any set of lab recordings: grouped by lab and device, each group's claims
/// that compare its variants judged from that group alone (a run on the H100
/// is never compared with one on the H200). The groups, as `groups` makes them.
pub(super) fn judge_groups(
    set: &LabSet,
    files: &[PathBuf],
    runs: &mut [Run],
) -> anyhow::Result<Vec<Vec<usize>>> {
    let groups = groups(files, runs)?;
    for members in &groups {
        let mut group: Vec<Run> = members
            .iter()
            .map(|&i| std::mem::take(&mut runs[i]))
            .collect();
        let names: Vec<PathBuf> = members.iter().map(|&i| files[i].clone()).collect();
        if group.len() > 1 {
            judge_across(set, &names, &mut group)?;
        }
        for (&i, run) in members.iter().zip(group) {
            runs[i] = run;
        }
    }
    Ok(groups)
}

/// The recordings' indices grouped by lab and device, in the order each group
/// first appears; a recording that is not of a lab run is refused, named.
fn groups(files: &[PathBuf], runs: &[Run]) -> anyhow::Result<Vec<Vec<usize>>> {
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let Some(id) = run.lab_id() else {
            return Err(fail(
                EXIT_USAGE,
                format!(
                    "{} is not the recording of a lab run: several files are lab runs, grouped by lab and device",
                    files[i].display()
                ),
            ));
        };
        let device = run.meta().map_or("", |m| m.device.name.as_str());
        let key = (id.to_string(), device.to_string());
        match keys.iter().position(|k| *k == key) {
            Some(g) => out[g].push(i),
            None => {
                keys.push(key);
                out.push(vec![i]);
            }
        }
    }
    Ok(out)
}

/// Recordings of several variants of one lab: the claims that compare those
/// variants, judged from the recordings' own numbers. Each replaces what its
/// recording holds (inconclusive when it was recorded alone; the same verdict,
/// from the same numbers, when it came from `--all-variants`).
fn judge_across(set: &LabSet, files: &[PathBuf], runs: &mut [Run]) -> anyhow::Result<()> {
    let ids: Vec<Option<&str>> = runs.iter().map(Run::lab_id).collect();
    let Some(Some(id)) = ids.first().copied() else {
        return Err(fail(
            EXIT_USAGE,
            format!(
                "{} is not the recording of a lab run: several files are the variants of one lab",
                files[0].display()
            ),
        ));
    };
    if let Some(i) = ids.iter().position(|x| *x != Some(id)) {
        return Err(fail(
            EXIT_USAGE,
            format!(
                "{} is not a recording of {id}: several files are the variants of one lab",
                files[i].display()
            ),
        ));
    }
    let lab = set.get(id).map_err(|e| {
        fail(
            EXIT_USAGE,
            format!("{e}; the claims that compare variants need the lab file (--labs DIR)"),
        )
    })?;
    let judged = gpulab::verdict::judge_across(lab, &runs.iter().collect::<Vec<_>>());
    for (i, verdict) in judged {
        runs[i].apply(&Event::Claim(verdict));
    }
    Ok(())
}

/// A recording as a Run, folded as it is read (the events are not kept beside
/// it, and the Run keeps its bounded window of them). A damaged recording still
/// shows what it holds; each skipped line is named on stderr.
/// Claims recorded without the lesson's expectation get it from `labs`.
/// `-` reads the recording from stdin (`gpulab run … --record - | …`, a
/// recording fetched with curl).
pub fn load(file: &Path, labs: &[Lab]) -> anyhow::Result<Run> {
    let mut run = Run::default();
    let input: Box<dyn std::io::BufRead> = if file == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(file)
            .map_err(|e| fail(EXIT_USAGE, format!("cannot open {}: {e}", file.display())))?;
        Box::new(std::io::BufReader::new(f))
    };
    let mut lessons = LessonFill::new(labs);
    let problems = stream_recording(input, |mut e| {
        lessons.fill(&mut e);
        run.apply(&e);
    })
    .map_err(|e| fail(EXIT_USAGE, format!("{}: {e}", file.display())))?;
    for p in &problems {
        errln!(
            "gpulab: {}: {}",
            file.display(),
            report::printable(&p.to_string())
        );
    }
    Ok(run)
}

pub fn watch_report(run: &Run, format: &Format) -> anyhow::Result<String> {
    render_watch(&WatchReport::from_run(run), format)
}

/// A watched program's report, made already, in `format`.
pub fn render_watch(r: &WatchReport, format: &Format) -> anyhow::Result<String> {
    Ok(if format.jsonl {
        json_line(Body::Watch(r))?
    } else if format.json {
        json(Body::Watch(r))?
    } else if format.markdown {
        report::printable(&r.markdown()).into_owned()
    } else {
        report::printable(&r.text()).into_owned()
    })
}

/// A lab run's report. Text and Markdown go to a terminal: every string in them
/// that came from a recording or a lab file is made `printable` (JSON escapes
/// control characters itself).
pub fn render(s: &Summary, format: Format) -> anyhow::Result<String> {
    Ok(if format.jsonl {
        json_line(Body::Run(Runs {
            runs: std::slice::from_ref(s),
        }))?
    } else if format.json {
        // One run is a list of one: the shape of `run --all-variants`.
        json(Body::Run(Runs {
            runs: std::slice::from_ref(s),
        }))?
    } else if format.markdown {
        report::printable(&report::markdown(s)).into_owned()
    } else {
        report::printable(&report::text(s)).into_owned()
    })
}
