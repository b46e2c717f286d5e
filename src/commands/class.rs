//! `gpulab class`: a class's recordings (each student's lab run, with what
//! they predicted before it) into one table: class.md, class.json and
//! class.html for the projector, or the table on stdout.

use std::path::{Path, PathBuf};

use gpulab::class::{Class, Entry, SetAside};
use gpulab::output::{self, Body};
use gpulab::report::{Provenance, printable};

use super::{EXIT_OK, EXIT_USAGE, fail};
use crate::cli::ClassArgs;

pub fn class(dirs: &[PathBuf], args: &ClassArgs) -> anyhow::Result<i32> {
    let set = super::load_labs(dirs);
    let files = recordings(&args.paths)?;
    let mut runs = Vec::new();
    let mut unreadable = Vec::new();
    for file in &files {
        let name = file.display().to_string();
        // A file that does not read is set aside and said, not the end of
        // the class's table.
        match super::report::load(file, set.labs()) {
            Ok(run) => runs.push((name, run)),
            Err(e) => unreadable.push(SetAside {
                file: name,
                why: printable(&e.to_string()).into_owned(),
            }),
        }
    }
    let entries: Vec<Entry<'_>> = runs
        .iter()
        .map(|(file, run)| Entry {
            file: file.clone(),
            run,
        })
        .collect();
    let class = Class::of(Provenance::here(gpulab::hostname()), &entries, unreadable);
    if class.runs == 0 {
        return Err(fail(
            EXIT_USAGE,
            format!(
                "no lab run among the {} recording(s) given: {}",
                files.len(),
                class
                    .set_aside
                    .iter()
                    .map(|s| format!("{}: {}", s.file, s.why))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ));
    }
    let title = format!("gpulab class: {} runs", class.runs);
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)
            .map_err(|e| fail(EXIT_USAGE, format!("cannot create {}: {e}", dir.display())))?;
        for (name, text) in [
            ("class.json", output::json(Body::Class(&class))?),
            ("class.md", gpulab::class::markdown(&class, &title)),
            ("class.html", gpulab::class::html(&class, &title)),
        ] {
            let path = dir.join(name);
            gpulab::dirs::write_atomic(&path, text.as_bytes())
                .map_err(|e| fail(EXIT_USAGE, format!("cannot write {}: {e}", path.display())))?;
        }
        errln!(
            "gpulab: {} runs ({} with predictions), {} claims: {}/class.md, class.json, class.html",
            class.runs,
            class.predicting_runs,
            class.rows.len(),
            dir.display()
        );
    }
    if args.json {
        out!("{}", output::json(Body::Class(&class))?);
    } else if args.out.is_none() {
        out!("{}", gpulab::class::markdown(&class, &title));
    }
    Ok(EXIT_OK)
}

/// The recordings `paths` name: files as given, folders searched for
/// `*.jsonl` (links not followed), each folder's sorted.
fn recordings(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if !path.is_dir() {
            files.push(path.clone());
            continue;
        }
        let mut found = Vec::new();
        let mut stack = vec![path.clone()];
        while let Some(d) = stack.pop() {
            let entries = std::fs::read_dir(&d)
                .map_err(|e| fail(EXIT_USAGE, format!("cannot read {}: {e}", d.display())))?;
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let p = entry.path();
                if kind.is_dir() {
                    stack.push(p);
                } else if kind.is_file() && is_recording(&p) {
                    found.push(p);
                }
            }
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

fn is_recording(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "jsonl")
}
