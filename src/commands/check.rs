//! `gpulab check FILE...`: validate lab and lesson files, every mistake with
//! its place. A file with `[[steps]]` and no `[[variants]]` is a lesson, checked
//! against the labs (shipped, the user's and `--labs`).

use std::io::IsTerminal;
use std::path::PathBuf;

use gpulab::lab::{LabError, catalog, lesson};

use super::{EXIT_OK, EXIT_USAGE};

pub fn check(
    dirs: &[PathBuf],
    files: &[PathBuf],
    color: gpulab::color::Choice,
) -> anyhow::Result<i32> {
    // Mistakes go to stderr: its being a terminal is what `auto` asks about.
    let color = gpulab::color::for_stream(color, std::io::stderr().is_terminal());
    let mut bad = 0;
    let mut labs = None;
    for f in files {
        let is_lesson = std::fs::read_to_string(f).is_ok_and(|t| lesson::looks_like_lesson(&t));
        if is_lesson {
            let labs = labs.get_or_insert_with(|| super::load_labs(dirs));
            match lesson::load_file(f, labs) {
                Ok(l) => outln!(
                    "ok    {} (lesson {}, {} step(s), {} min)",
                    f.display(),
                    l.id,
                    l.steps.len(),
                    l.minutes()
                ),
                Err(e) => {
                    bad += 1;
                    said(&e, f, color);
                }
            }
            continue;
        }
        match catalog::load_file(f) {
            Ok(lab) => outln!(
                "ok    {} ({}, {} variant(s), {} claim(s))",
                f.display(),
                lab.id,
                lab.variants.len(),
                lab.claims.len()
            ),
            Err(e) => {
                bad += 1;
                said(&e, f, color);
            }
        }
    }
    Ok(if bad == 0 { EXIT_OK } else { EXIT_USAGE })
}

/// Each mistake of a file, drawn with its line; any other error in one line.
fn said(e: &LabError, f: &std::path::Path, color: bool) {
    match e {
        LabError::Invalid(d) => {
            for mistake in std::iter::once(d.as_ref()).chain(&d.more) {
                let drawn = gpulab::color::printable_styled(&mistake.render(color));
                super::write_stderr_raw(&format!("{drawn}\n"));
            }
        }
        e => errln!("{}: {e}", f.display()),
    }
}
