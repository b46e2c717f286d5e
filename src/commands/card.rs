//! `gpulab card`: every lab, every variant, on every device gpulab can use here
//! (or from recordings, `--from`), as one card: `card.json`, `card.md`,
//! `card.html` and the runs' recordings under `recordings/`. `gpulab card
//! merge`: several cards as one matrix.
//!
//! The devices are listed by a `gpulab doctor --json` child: the parent never
//! initialises a GPU API itself (NVIDIA's OpenCL then fails to appear in the
//! workers), and each run is a worker of its own, as `gpulab run` starts it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use gpulab::backend::discover::DoctorReport;
use gpulab::card::{Card, Matrix};
use gpulab::lab::{BackendKind, Lab, LabSet, catalog};
use gpulab::output::{self, Body};
use gpulab::report::{Provenance, Summary, printable};
use gpulab::run::Run;
use gpulab::source::{LocalSource, Recorded, Recorder, RunRequest};
use gpulab::trace::{Event, Verdict};

use super::{EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, fail};
use crate::cli::{CardArgs, CardCmd};

pub fn card(dirs: &[PathBuf], args: &CardArgs) -> anyhow::Result<i32> {
    if let Some(CardCmd::Merge { cards, out, json }) = &args.merge {
        return merge(cards, out, *json);
    }
    let set = super::load_labs(dirs);
    for p in &set.problems {
        errln!("gpulab: skipped a lab file: {p}");
    }
    for id in &args.only {
        set.get(id).map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
    }
    let (runs, title, cancelled) = match &args.from {
        Some(from) => (
            from_recordings(&set, from, &args.out, &args.only)?,
            format!("gpulab card of {}", from.display()),
            false,
        ),
        None => {
            let (runs, cancelled) = run_everything(&set, args)?;
            (
                runs,
                format!("gpulab card: {}", gpulab::hostname()),
                cancelled,
            )
        }
    };
    let card = Card::of(Provenance::here(gpulab::hostname()), &runs);
    let matrix = Matrix::merge(
        card.recorded.clone(),
        &[("card.json".to_string(), card.clone())],
        Vec::new(),
    );
    write_all(
        &args.out,
        &[
            ("card.json", output::json(Body::Card(&card))?),
            ("card.md", gpulab::card::markdown(&matrix, &title)),
            ("card.html", gpulab::card::html(&matrix, &title)),
        ],
    )?;
    if args.json {
        out!("{}", output::json(Body::Card(&card))?);
    }
    errln!(
        "gpulab: {} runs on {} devices, {} claims: {}/card.md, card.json, card.html",
        card.runs.len(),
        card.devices.len(),
        matrix.rows.len(),
        args.out.display()
    );
    Ok(if cancelled {
        gpulab::signals::cancelled_status()
    } else {
        EXIT_OK
    })
}

/// One run on the card: its summary and its recording, relative to the card.
type Carded = (Summary, Option<String>);

/// The devices `gpulab doctor --json` lists, each lab of their backend, each
/// variant: run, recorded under `out/recordings/`, in that order. Ctrl-C stops
/// after the run in progress; what ran makes the card.
fn run_everything(set: &LabSet, args: &CardArgs) -> anyhow::Result<(Vec<Carded>, bool)> {
    let (out, only) = (args.out.as_path(), args.only.as_slice());
    let devices = devices_here()?;
    let mut plan: Vec<(&Lab, String, &Device)> = Vec::new();
    for device in &devices {
        for lab in set
            .labs()
            .iter()
            .filter(|l| l.backend == device.backend && chosen(only, &l.id))
        {
            for v in &lab.variants {
                plan.push((lab, v.name.clone(), device));
            }
        }
    }
    if plan.is_empty() {
        return Err(fail(
            EXIT_UNAVAILABLE,
            "no device here to run a lab on: `gpulab doctor` says what is missing",
        ));
    }
    let cancel = Arc::new(AtomicBool::new(false));
    {
        let cancel = cancel.clone();
        let _ = gpulab::signals::on_termination(move || cancel.store(true, Ordering::SeqCst));
    }
    let source = LocalSource::new()?;
    let mut carded = Vec::new();
    let total = plan.len();
    let mut done = 0;
    // One lab on one device at a time: its variants, then the claims that
    // compare them, judged from those runs alone.
    let mut i = 0;
    while i < plan.len() && !cancel.load(Ordering::SeqCst) {
        let (lab, _, device) = plan[i];
        let group: Vec<String> = plan[i..]
            .iter()
            .take_while(|(l, _, d)| {
                l.id == lab.id && d.arg == device.arg && d.backend == device.backend
            })
            .map(|(_, v, _)| v.clone())
            .collect();
        i += group.len();
        let mut sessions = Vec::new();
        for variant in &group {
            if cancel.load(Ordering::SeqCst) {
                break;
            }
            done += 1;
            let started = Instant::now();
            let rel = format!("recordings/{}/{}--{variant}.jsonl", device.folder, lab.id);
            let path = out.join(&rel);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| {
                    fail(EXIT_USAGE, format!("cannot create {}: {e}", dir.display()))
                })?;
            }
            let recording = Recorder::create(&path)
                .map_err(|e| fail(EXIT_USAGE, format!("cannot create {}: {e}", path.display())))?;
            let params =
                catalog::resolve_params(lab, &[]).map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
            let time_limit = args.time_limit.for_run(lab, variant, &params);
            let mut req = RunRequest::new(lab.clone(), variant, params, super::run::SAMPLE_HZ)
                .map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
            req.time_limit = time_limit;
            req.device = Some(device.arg.clone());
            let session = super::run::run_variant(
                &source,
                req,
                false,
                Some(recording),
                &super::run::Foretold::default(),
                &cancel,
            )?;
            errln!(
                "[{done}/{total}] {} [{variant}] on {}: {} in {:.1} s",
                lab.id,
                device.label,
                tally(&session.run),
                started.elapsed().as_secs_f64()
            );
            sessions.push((session, rel));
        }
        if sessions.len() > 1 {
            let runs: Vec<&Run> = sessions.iter().map(|(s, _)| &s.run).collect();
            for (k, verdict) in gpulab::verdict::judge_across(lab, &runs) {
                if let Some((s, _)) = sessions.get_mut(k) {
                    s.apply(Event::Claim(verdict));
                }
            }
        }
        for (session, rel) in sessions {
            let (run, recorded) = session.finish();
            for r in &recorded {
                if let (Recorded::Partial { .. } | Recorded::Removed(_), Some(p)) = (r, r.problem())
                {
                    errln!("gpulab: {p}");
                }
            }
            carded.push((Summary::of(&run), Some(rel)));
        }
    }
    Ok((carded, cancel.load(Ordering::SeqCst)))
}

/// Whether `--lab` chose the lab `id` (none given: every lab).
fn chosen(only: &[String], id: &str) -> bool {
    only.is_empty() || only.iter().any(|o| o == id)
}

/// A run's verdicts counted: `3 hold, 1 does not hold` (or how it ended).
fn tally(run: &Run) -> String {
    let count = |v: Verdict| run.claims().iter().filter(|c| c.verdict == v).count();
    let status = run
        .end()
        .as_ref()
        .map(|e| e.status.label())
        .unwrap_or_else(|| "no end".into());
    format!(
        "{} hold, {} do not, {} inconclusive ({status})",
        count(Verdict::Holds),
        count(Verdict::DoesNotHold),
        count(Verdict::Inconclusive)
    )
}

/// A device a lab can run on, as `--device` takes it.
struct Device {
    backend: BackendKind,
    /// What `--device` takes: the OpenCL index, or the CUDA ordinal.
    arg: String,
    label: String,
    /// Its recordings' folder under `recordings/`.
    folder: String,
}

/// Every OpenCL device and every CUDA device here, from a `gpulab doctor
/// --json` child.
fn devices_here() -> anyhow::Result<Vec<Device>> {
    let exe = std::env::current_exe()?;
    let out = std::process::Command::new(exe)
        .args(["doctor", "--json"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()?;
    let report: DoctorReport = serde_json::from_slice(&out.stdout).map_err(|e| {
        fail(
            EXIT_UNAVAILABLE,
            format!("`gpulab doctor --json` said no devices: {e}"),
        )
    })?;
    let mut devices = Vec::new();
    for d in &report.opencl_devices {
        devices.push(Device {
            backend: BackendKind::OpenCl,
            arg: d.index.to_string(),
            label: format!("{} (OpenCL {}, {})", d.name, d.index, d.platform),
            folder: slug(&format!("opencl-{}-{}", d.index, d.name)),
        });
    }
    for d in &report.cuda_devices {
        devices.push(Device {
            backend: BackendKind::Cuda,
            arg: d.ordinal.to_string(),
            label: format!("{} (CUDA {})", d.name, d.ordinal),
            folder: slug(&format!("cuda-{}-{}", d.ordinal, d.name)),
        });
    }
    Ok(devices)
}

/// A folder name: lower case letters, digits and single dashes.
fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// The lab recordings under `dir` (any depth), read and judged as `gpulab
/// report` judges several: the claims that compare variants from each lab's
/// runs on one device. Watch recordings are left out, said.
fn from_recordings(
    set: &LabSet,
    dir: &Path,
    out: &Path,
    only: &[String],
) -> anyhow::Result<Vec<Carded>> {
    let mut files = Vec::new();
    let mut links = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d)
            .map_err(|e| fail(EXIT_USAGE, format!("--from {}: {e}", d.display())))?;
        for entry in entries {
            let entry = entry?;
            // The entry's own type, links not followed: a link to a folder
            // above would walk in circles, one elsewhere would walk out.
            let kind = entry.file_type()?;
            let path = entry.path();
            if kind.is_symlink() {
                links += 1;
            } else if kind.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                files.push(path);
            }
        }
    }
    if links > 0 {
        errln!(
            "gpulab: --from {}: {links} link(s) not followed (only files and folders under it are read)",
            printable(&dir.display().to_string())
        );
    }
    files.sort();
    let mut runs = Vec::new();
    let mut kept = Vec::new();
    for file in files {
        let run = super::report::load(&file, set.labs())?;
        let Some(id) = run.lab_id() else {
            errln!(
                "gpulab: {} is not a lab run: left out of the card",
                printable(&file.display().to_string())
            );
            continue;
        };
        if !chosen(only, id) {
            continue;
        }
        runs.push(run);
        kept.push(file);
    }
    if runs.is_empty() {
        return Err(fail(
            EXIT_USAGE,
            format!("--from {}: no lab recordings there", dir.display()),
        ));
    }
    super::report::judge_groups(set, &kept, &mut runs)?;
    Ok(runs
        .iter()
        .zip(&kept)
        .map(|(run, file)| (Summary::of(run), Some(relative(file, out))))
        .collect())
}

/// `file` as a path from `dir` (both made absolute), so the card's links reach
/// it from where the card is; `file` as it is when one cannot be made absolute.
fn relative(file: &Path, dir: &Path) -> String {
    let absolute = |p: &Path| std::path::absolute(p).ok().map(normal);
    let (Some(file_abs), Some(dir_abs)) = (absolute(file), absolute(dir)) else {
        return file.display().to_string();
    };
    let common = file_abs
        .components()
        .zip(dir_abs.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut rel = PathBuf::new();
    for _ in dir_abs.components().skip(common) {
        rel.push("..");
    }
    rel.extend(file_abs.components().skip(common));
    rel.display().to_string()
}

/// `a/./b/../c` as `a/c`, without touching the file system.
fn normal(path: PathBuf) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `gpulab card merge`: each card read, those that cannot be said why and
/// left out, the rest merged.
fn merge(paths: &[PathBuf], out: &Path, json: bool) -> anyhow::Result<i32> {
    let mut cards = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        let file = if path.is_dir() {
            path.join("card.json")
        } else {
            path.clone()
        };
        match read_card(&file) {
            Ok(mut card) => {
                // Recordings are named from their card's folder; the
                // matrix's links start from its own.
                let dir = file.parent().unwrap_or(Path::new(""));
                let mut outside = 0;
                for run in &mut card.runs {
                    // A card is a file others send: only a path from its
                    // folder becomes a link, never a scheme or an absolute path.
                    run.recording = run.recording.take().and_then(|r| {
                        if gpulab::card::link::from_the_card(&r) {
                            Some(relative(&dir.join(r.as_str()), out))
                        } else {
                            outside += 1;
                            None
                        }
                    });
                }
                if outside > 0 {
                    let said = format!(
                        "{}: {outside} recording path(s) are no path from the card's folder \
                         (a scheme, an absolute path, characters that act); those runs have \
                         no link",
                        file.display()
                    );
                    errln!("gpulab: {}", printable(&said));
                    problems.push(said);
                }
                cards.push((file.display().to_string(), card));
            }
            Err(e) => {
                errln!("gpulab: {}; merging the rest", printable(&e));
                problems.push(e);
            }
        }
    }
    if cards.is_empty() {
        return Err(fail(EXIT_USAGE, "no card could be read"));
    }
    let said = problems.len();
    let matrix = Matrix::merge(Provenance::here(gpulab::hostname()), &cards, problems);
    for p in &matrix.problems[said..] {
        errln!("gpulab: {}", printable(p));
    }
    let title = format!("gpulab matrix: {} devices", matrix.columns.len());
    write_all(
        out,
        &[
            ("matrix.json", output::json(Body::Matrix(&matrix))?),
            ("matrix.md", gpulab::card::markdown(&matrix, &title)),
            ("matrix.html", gpulab::card::html(&matrix, &title)),
        ],
    )?;
    if json {
        out!("{}", output::json(Body::Matrix(&matrix))?);
    }
    errln!(
        "gpulab: {} devices, {} claims, {} differ: {}/matrix.md, matrix.json, matrix.html",
        matrix.columns.len(),
        matrix.rows.len(),
        matrix.differing(),
        out.display()
    );
    Ok(EXIT_OK)
}

/// A card file, or why it cannot be merged: not JSON (truncated), not a card,
/// or of another schema than this gpulab's.
fn read_card(file: &Path) -> Result<Card, String> {
    let name = file.display();
    let text = std::fs::read_to_string(file).map_err(|e| format!("{name}: {e}"))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("{name} is not whole JSON ({e}): truncated or not a card"))?;
    if value["kind"] != "card" {
        return Err(format!(
            "{name} is not a card (its kind is {}): `gpulab card` writes card.json",
            value["kind"]
        ));
    }
    let version = value["schema_version"].as_u64().unwrap_or(0);
    let ours = u64::from(output::SCHEMA_VERSION);
    if version != ours {
        let by = value["gpulab_version"].as_str().unwrap_or("?");
        let which = if version > ours { "newer" } else { "older" };
        return Err(format!(
            "{name} was written by a {which} gpulab ({by}, schema {version}; this one reads {ours}): make it again with this gpulab (`gpulab card --from` its recordings)"
        ));
    }
    serde_json::from_value(value).map_err(|e| format!("{name}: not a whole card: {e}"))
}

fn write_all(dir: &Path, files: &[(&str, String)]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| fail(EXIT_USAGE, format!("cannot create {}: {e}", dir.display())))?;
    for (name, text) in files {
        let path = dir.join(name);
        // Whole or not at all: a full disk keeps the old file or none.
        gpulab::dirs::write_atomic(&path, text.as_bytes())
            .map_err(|e| fail(EXIT_USAGE, format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{relative, slug};
    use std::path::Path;

    #[test]
    fn a_recording_is_named_from_the_card_folder() {
        assert_eq!(
            relative(
                Path::new("/r/assets/rec/a.jsonl"),
                Path::new("/r/assets/cards/h100")
            ),
            "../../rec/a.jsonl"
        );
        assert_eq!(
            relative(
                Path::new("/r/out/recordings/a.jsonl"),
                Path::new("/r/out/./")
            ),
            "recordings/a.jsonl"
        );
    }

    #[test]
    fn a_device_becomes_a_folder_name() {
        assert_eq!(slug("opencl-0-NVIDIA H200"), "opencl-0-nvidia-h200");
        assert_eq!(
            slug("opencl-1-cpu-skylake-avx512-Intel(R) Xeon(R)"),
            "opencl-1-cpu-skylake-avx512-intel-r-xeon-r"
        );
    }
}
