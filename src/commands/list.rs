//! `gpulab list`, and what plain `gpulab` prints when stdout is not a terminal.

use std::path::PathBuf;

use gpulab::lab::Lab;
use gpulab::output::{self, Body, LabRow, Labs};
use gpulab::report::Provenance;

use super::{EXIT_OK, EXIT_USAGE, fail};

pub fn list(dirs: &[PathBuf], json: bool) -> anyhow::Result<i32> {
    let set = super::load_labs(dirs);
    for p in &set.problems {
        errln!("gpulab: skipped a lab file: {p}");
    }
    if json {
        let labs = Labs {
            recorded: Provenance::here(gpulab::hostname()),
            labs: set.labs().iter().map(LabRow::of).collect(),
        };
        out!("{}", output::json(Body::Labs(labs))?);
        return Ok(EXIT_OK);
    }
    out!("{}", table(set.labs()));
    out!("{}", lessons(&set));
    Ok(EXIT_OK)
}

/// The shipped lessons, each with how to open it.
fn lessons(set: &gpulab::lab::LabSet) -> String {
    let mut out =
        String::from("\nlessons (gpulab --lesson ID: the labs in order, in class mode)\n");
    for lesson in gpulab::lab::lesson::shipped(set) {
        match lesson {
            Ok(l) => out.push_str(&format!(
                "{}  {} ({} steps, {} min)\n",
                l.id,
                l.title,
                l.steps.len(),
                l.minutes()
            )),
            // A shipped lesson only fails against a user's lab of the same id.
            Err(e) => out.push_str(&format!("(a shipped lesson does not check: {e})\n")),
        }
    }
    out
}

/// `gpulab --lesson NAME` without a terminal: the teacher's plan, each step's
/// question and hint in order.
pub fn lesson_plan(dirs: &[PathBuf], name: &str) -> anyhow::Result<i32> {
    let set = super::load_labs(dirs);
    let lesson =
        gpulab::lab::lesson::find(name, &set).map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
    outln!(
        "{} — {} ({} steps, {} min)\n\n{}\n",
        lesson.id,
        lesson.title,
        lesson.steps.len(),
        lesson.minutes(),
        lesson.intro
    );
    for (i, s) in lesson.steps.iter().enumerate() {
        outln!(
            "{}. {} [{}], {} min\n   question: {}\n   hint (after the run): {}\n",
            i + 1,
            s.lab,
            s.variant,
            s.minutes,
            s.question,
            s.hint
        );
    }
    outln!(
        "in a terminal, `gpulab --lesson {}` opens it in the dashboard (class mode; > next step)",
        lesson.id
    );
    Ok(EXIT_OK)
}

fn table(labs: &[Lab]) -> String {
    let idw = labs.iter().map(|l| l.id.len()).max().unwrap_or(2).max(2);
    let mut out = format!("{:<idw$}  {:<7}  {}\n", "id", "backend", "title — claim");
    for l in labs {
        out.push_str(&format!(
            "{:<idw$}  {:<7}  {} — {}\n",
            l.id,
            l.backend.as_str(),
            l.title,
            l.claim
        ));
    }
    out
}

/// `gpulab` with no command: the labs, and how to run one.
pub fn overview(dirs: &[PathBuf], lab: Option<&str>) -> anyhow::Result<i32> {
    let mut set = super::load_labs(dirs);
    if let Some(named) = lab {
        let id = super::lab_named(&mut set, named)?;
        let lab = set.get(&id).map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
        outln!("{} — {}\n\nclaim: {}\n", lab.id, lab.title, lab.claim);
        outln!(
            "look:    {}\nwhy:     {}\ninstead: {}\n",
            lab.teaching.look,
            lab.teaching.why,
            lab.teaching.instead
        );
        for v in &lab.variants {
            outln!("variant {}: {}", v.name, v.description);
        }
        // The command that runs it from here: by the path it was named by,
        // or by its id with the folders it was found in.
        let by = if named.ends_with(".toml") || named.contains('/') {
            named.to_string()
        } else {
            let folders: String = dirs
                .iter()
                .map(|d| format!(" --labs {}", d.display()))
                .collect();
            format!("{}{folders}", lab.id)
        };
        outln!("\nrun it:  gpulab run {by}   (or --all-variants, --step)");
        return Ok(EXIT_OK);
    }
    out!("{}", table(set.labs()));
    outln!(
        "\nrun one:  gpulab run <id>      ·  set-up problems: gpulab doctor  ·  all commands: gpulab --help"
    );
    outln!("(in a terminal, plain `gpulab` opens the live dashboard)");
    Ok(EXIT_OK)
}
