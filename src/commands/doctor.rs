//! `gpulab doctor`: what this machine can run, and how to fix what it cannot.

use gpulab::backend::discover;

use super::EXIT_OK;

pub fn doctor(json: bool, icd_note: Option<String>) -> anyhow::Result<i32> {
    let report = discover::doctor();
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        if let Some(note) = icd_note {
            println!("note: {note}\n");
        }
        print!("{}", report.render_text());
    }
    Ok(EXIT_OK)
}
