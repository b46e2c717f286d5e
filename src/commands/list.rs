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
    let set = super::load_labs(dirs);
    if let Some(id) = lab {
        let lab = set.get(id).map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
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
        outln!(
            "\nrun it:  gpulab run {}   (or --all-variants, --step)",
            lab.id
        );
        return Ok(EXIT_OK);
    }
    out!("{}", table(set.labs()));
    outln!(
        "\nrun one:  gpulab run <id>      ·  set-up problems: gpulab doctor  ·  all commands: gpulab --help"
    );
    outln!("(in a terminal, plain `gpulab` opens the live dashboard)");
    Ok(EXIT_OK)
}
