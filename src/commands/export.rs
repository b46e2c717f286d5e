//! `gpulab export FILE --chrome OUT`: a recording for chrome://tracing or Perfetto.

use std::path::Path;

use anyhow::Context;

use gpulab::export::chrome;

use super::EXIT_OK;

pub fn chrome(file: &Path, out: &Path) -> anyhow::Result<i32> {
    let run = super::report::load(file)?;
    let text = serde_json::to_string(&chrome::trace(&run))?;
    std::fs::write(out, text).with_context(|| format!("cannot write {}", out.display()))?;
    eprintln!(
        "wrote {} (open it in ui.perfetto.dev or chrome://tracing)",
        out.display()
    );
    Ok(EXIT_OK)
}
