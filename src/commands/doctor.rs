//! `gpulab doctor`: what this machine can run, and how to fix what it cannot.

use gpulab::backend::discover;
use gpulab::report::json::{self, Kind};

use super::EXIT_OK;

pub fn doctor(json: bool, icd_note: Option<String>) -> anyhow::Result<i32> {
    let report = discover::doctor();
    if json {
        print!("{}", json::json(Kind::Doctor, &report)?);
    } else {
        if let Some(note) = icd_note {
            println!("note: {note}\n");
        }
        print!("{}", report.render_text());
    }
    Ok(EXIT_OK)
}
