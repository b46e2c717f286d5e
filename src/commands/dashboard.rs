//! Plain `gpulab` in a terminal: check `--lab/--variant/--param` before the
//! screen changes (a mistake is a message and exit 2, as everywhere), then hand
//! over to the dashboard.

use gpulab::history;
use gpulab::lab::{LabSet, catalog};
use gpulab::source::LocalSource;
use gpulab::tui::{self, App, Theme};

use super::{EXIT_OK, EXIT_USAGE, fail};
use crate::cli::Cli;

pub fn dashboard(cli: &Cli) -> anyhow::Result<i32> {
    let mut set = super::load_labs(&cli.labs);
    let mut params = None;
    // `--lab ./mine.toml`: the file's lab, by its id from here on.
    let lab_id = match &cli.lab {
        Some(named) => Some(super::lab_named(&mut set, named)?),
        None => None,
    };
    if let Some(id) = &lab_id {
        let lab = set.get(id).map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
        if let Some(v) = &cli.variant {
            lab.find_variant(v)
                .map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
        }
        params = Some(
            catalog::resolve_params(lab, &cli.params)
                .map_err(|e| fail(EXIT_USAGE, e.to_string()))?,
        );
    }
    // Files with mistakes are listed in the dashboard, greyed, with their first
    // mistake; only what it cannot show is said before the screen changes.
    let invalid = set.invalid();
    for p in &set.problems {
        if !invalid.iter().any(|(_, why)| *why == p.to_string()) {
            errln!("gpulab: skipped a lab file: {p}");
        }
    }
    let lesson = match &cli.lesson {
        Some(name) => Some(
            gpulab::lab::lesson::find(name, &set).map_err(|e| fail(EXIT_USAGE, e.to_string()))?,
        ),
        None => None,
    };
    let mut app = new_app(cli, &set);
    if let Some(id) = &lab_id {
        app.select_lab(id, cli.variant.as_deref(), params);
    }
    if let Some(lesson) = lesson {
        app.open_lesson(lesson);
    }
    open(app)
}

/// The dashboard's app: the labs, then the shipped recordings and the history of
/// runs (newest first).
pub fn new_app(cli: &Cli, set: &LabSet) -> App {
    let cwd = std::env::current_dir().unwrap_or_default();
    // The working directory (a checkout), the source tree it was built from
    // (`cargo run` from elsewhere), then beside the binary (an unpacked release:
    // `bin/gpulab` and `share/gpulab/assets/…`): the first that has any.
    let exe = std::env::current_exe().ok();
    let roots = tui::recordings::roots(
        &cwd,
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")),
        exe.as_deref(),
    );
    let mut recordings = roots
        .iter()
        .map(|r| tui::recordings::find(r))
        .find(|found| !found.is_empty())
        .unwrap_or_default();
    if let Some(dir) = history::dir() {
        recordings.extend(history::list(&dir));
    }
    let mut app = App::new(
        set.labs().to_vec(),
        recordings,
        Theme::chosen(cli.color.into()).on_light(cli.theme.light()),
    );
    app.device = cli.device.clone();
    app.class_mode = cli.class;
    app.invalid = set.invalid();
    app
}

pub fn open(app: App) -> anyhow::Result<i32> {
    let source = LocalSource::new()?;
    tui::terminal::open(app, &source)?;
    Ok(EXIT_OK)
}
