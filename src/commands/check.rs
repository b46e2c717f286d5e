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
    let mut stdin_read = false;
    for f in files {
        // `-` is stdin, named `<stdin>` in messages; it can be read once.
        if f.as_path() == std::path::Path::new("-") {
            if std::mem::replace(&mut stdin_read, true) {
                errln!("-: stdin was read already, by an earlier `-`");
                bad += 1;
                continue;
            }
            let mut bytes = Vec::new();
            if let Err(e) = std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes) {
                errln!("-: cannot read stdin: {e}");
                bad += 1;
                continue;
            }
            let name = "<stdin>";
            let is_lesson = std::str::from_utf8(&bytes).is_ok_and(lesson::looks_like_lesson);
            let result = if is_lesson {
                let labs = labs.get_or_insert_with(|| super::load_labs(dirs));
                // A lesson is text: `parse_bytes` said what is not UTF-8 above.
                let text = String::from_utf8_lossy(&bytes);
                lesson::parse(name, &text, labs).map(|l| {
                    format!(
                        "lesson {}, {} step(s), {} min",
                        l.id,
                        l.steps.len(),
                        l.minutes()
                    )
                })
            } else {
                catalog::parse_bytes(name, bytes, gpulab::lab::Origin::File("-".into())).map(
                    |lab| {
                        format!(
                            "{}, {} variant(s), {} claim(s)",
                            lab.id,
                            lab.variants.len(),
                            lab.claims.len()
                        )
                    },
                )
            };
            match result {
                Ok(what) => outln!("ok    {name} ({what})"),
                Err(e) => {
                    bad += 1;
                    said(&e, std::path::Path::new(name), color);
                }
            }
            continue;
        }
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
