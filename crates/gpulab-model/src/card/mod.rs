//! The driver card: every lab and variant run on the devices of one machine,
//! each claim's verdict and the numbers that decided it (a [`Card`]); and the
//! matrix of several cards, a fleet's or a course's, devices as columns and the
//! claims whose verdicts differ between devices first (a [`Matrix`]). A card is
//! the matrix of itself: one renderer draws both (`markdown`, `html`).
//!
//! Built from the runs' summaries, never from a lab's lesson: the lesson's
//! expectation travels beside each verdict, as in every report.

mod html;
pub mod link;
mod markdown;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::report::{Provenance, Summary};
use crate::trace::{ClaimVerdict, MemorySource, Verdict};

pub use html::html;
pub use markdown::markdown;

/// One machine's card.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Card {
    /// Where, when and by which gpulab the card was made.
    pub recorded: Provenance,
    /// Every device a run of the card ran on.
    pub devices: Vec<CardDevice>,
    /// Every run, in the order they ran (or the recordings were read).
    pub runs: Vec<CardRun>,
}

/// A device of a card, as its runs said it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CardDevice {
    /// Its key in the card (`host/name`), which each run names.
    pub id: String,
    pub host: String,
    pub name: String,
    /// The OpenCL platforms and CUDA the runs went through, as they said them.
    pub platforms: Vec<String>,
    /// The driver versions the runs reported (OpenCL's, CUDA's).
    pub drivers: Vec<String>,
    pub memory_source: MemorySource,
}

/// One run of a lab's variant on a device.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CardRun {
    /// The device's `id`.
    pub device: String,
    pub lab: String,
    pub variant: String,
    /// How the run ended, as its report says it.
    pub status: String,
    pub duration_ms: Option<f64>,
    /// When it ran, UTC, RFC 3339 (null in recordings made before it was kept).
    pub at: Option<String>,
    /// The gpulab that ran it.
    pub gpulab_version: String,
    /// Its recording, relative to the card's folder (absent when none was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<String>,
    /// The host was loaded as the run ran: the load it measured (`load
    /// average 4.1 on 2 cores, …`). Its timed claims were inconclusive where a
    /// kernel ran far from the time asked; the rest stand, said beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded: Option<String>,
    pub claims: Vec<ClaimVerdict>,
}

impl Card {
    /// The card of `runs`, each with its recording's path (relative to where
    /// the card is written), made `recorded`.
    pub fn of(recorded: Provenance, runs: &[(Summary, Option<String>)]) -> Card {
        let mut devices: Vec<CardDevice> = Vec::new();
        let mut out = Vec::new();
        for (s, recording) in runs {
            let id = format!("{}/{}", s.recorded.host, s.device);
            let at = match devices.iter().position(|d| d.id == id) {
                Some(at) => at,
                None => {
                    devices.push(CardDevice {
                        id: id.clone(),
                        host: s.recorded.host.clone(),
                        name: s.device.clone(),
                        platforms: Vec::new(),
                        drivers: Vec::new(),
                        memory_source: s.memory_source,
                    });
                    devices.len() - 1
                }
            };
            let device = &mut devices[at];
            for (list, value) in [
                (&mut device.platforms, &s.platform),
                (&mut device.drivers, &s.driver),
            ] {
                if !value.is_empty() && !list.contains(value) {
                    list.push(value.clone());
                }
            }
            out.push(CardRun {
                device: id,
                lab: s.lab.clone(),
                variant: s.variant.clone(),
                status: s.status.clone(),
                duration_ms: s.duration_ms,
                at: s.recorded.at.clone(),
                gpulab_version: s.recorded.gpulab_version.clone(),
                recording: recording.clone(),
                loaded: s.load.as_ref().filter(|l| l.loaded).map(|l| l.figures()),
                claims: s.claims.clone(),
            });
        }
        Card {
            recorded,
            devices,
            runs: out,
        }
    }
}

/// Several cards as one table: a column per device, a row per claim of a lab's
/// variant, the rows whose verdicts differ between devices first.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Matrix {
    /// Where, when and by which gpulab the matrix was made.
    pub recorded: Provenance,
    /// The cards merged, as they were named.
    pub cards: Vec<String>,
    pub columns: Vec<Column>,
    /// Rows whose verdicts differ first, then those two devices or more agree
    /// on, then those one device ran; each in the order the cards hold them.
    pub rows: Vec<Row>,
    /// What could not be merged, and why (a card from another schema, a
    /// truncated one, a device two cards hold): the rest is merged.
    pub problems: Vec<String>,
}

/// A device: one column.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Column {
    #[serde(flatten)]
    pub device: CardDevice,
    /// The card it came from (its index in `cards`).
    pub card: usize,
}

/// One claim of one lab's variant, on every device.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Row {
    pub lab: String,
    pub variant: String,
    pub claim: String,
    /// The claim in words.
    pub text: String,
    /// Devices that judged it disagree (inconclusive counts as a verdict).
    pub differs: bool,
    /// How many devices ran it (the cells that are not null).
    pub judged_on: usize,
    /// One per column, in column order; null where the claim was not run there.
    pub cells: Vec<Option<Cell>>,
}

/// A claim's verdict on one device, and what decided it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Cell {
    pub verdict: Verdict,
    /// What the lab's lesson expects, where it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<gpulab_events::Expected>,
    /// The claim's verdict with its values, as the run judged it.
    pub claim: ClaimVerdict,
    /// The run's recording, relative to its card's folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recording: Option<String>,
    /// The load of the run's host, where it was loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loaded: Option<String>,
}

impl Matrix {
    /// The cards, named, merged. A device a card shares with an earlier card
    /// (the same host and device) is left out of it, said in `problems`.
    pub fn merge(recorded: Provenance, cards: &[(String, Card)], problems: Vec<String>) -> Matrix {
        let mut problems = problems;
        let mut columns: Vec<Column> = Vec::new();
        for (i, (name, card)) in cards.iter().enumerate() {
            for d in &card.devices {
                if let Some(c) = columns.iter().find(|c| c.device.id == d.id) {
                    problems.push(format!(
                        "{name}: {} on {} is in {} already: left out of this card",
                        d.name, d.host, cards[c.card].0
                    ));
                    continue;
                }
                columns.push(Column {
                    device: d.clone(),
                    card: i,
                });
            }
        }
        let mut rows: Vec<Row> = Vec::new();
        let mut index: BTreeMap<(String, String, String), usize> = BTreeMap::new();
        for (col, column) in columns.iter().enumerate() {
            let card = &cards[column.card].1;
            for run in card.runs.iter().filter(|r| r.device == column.device.id) {
                for c in &run.claims {
                    let key = (run.lab.clone(), run.variant.clone(), c.name.clone());
                    let at = *index.entry(key).or_insert_with(|| {
                        rows.push(Row {
                            lab: run.lab.clone(),
                            variant: run.variant.clone(),
                            claim: c.name.clone(),
                            text: c.text.clone(),
                            differs: false,
                            judged_on: 0,
                            cells: vec![None; columns.len()],
                        });
                        rows.len() - 1
                    });
                    // A run of the same variant twice on one device: the last stands.
                    rows[at].cells[col] = Some(Cell {
                        verdict: c.verdict,
                        expected: c.expected,
                        claim: c.clone(),
                        recording: run.recording.clone(),
                        loaded: run.loaded.clone(),
                    });
                }
            }
        }
        for row in &mut rows {
            let mut verdicts = row.cells.iter().flatten().map(|c| c.verdict);
            let first = verdicts.next();
            row.differs = verdicts.any(|v| Some(v) != first);
            row.judged_on = row.cells.iter().flatten().count();
        }
        // Those that differ, those two devices or more agree on, those one
        // device ran; stable: within each, the order the rows were met.
        rows.sort_by_key(|r| (!r.differs, r.judged_on < 2));
        Matrix {
            recorded,
            cards: cards.iter().map(|(n, _)| n.clone()).collect(),
            columns,
            rows,
            problems,
        }
    }

    /// How many rows differ.
    pub fn differing(&self) -> usize {
        self.rows.iter().filter(|r| r.differs).count()
    }
}

/// The heads of the table of devices, and each device's cells in it: what the
/// Markdown and the page both show, each escaping it its own way.
pub(crate) const DEVICE_HEADS: [&str; 5] = ["device", "host", "platforms", "drivers", "card"];

pub(crate) fn device_cells(m: &Matrix, c: &Column) -> [String; 5] {
    [
        c.device.name.clone(),
        c.device.host.clone(),
        c.device.platforms.join("; "),
        c.device.drivers.join("; "),
        m.cards.get(c.card).cloned().unwrap_or_default(),
    ]
}

/// A column's header: the device, and where it was when that is not obvious.
pub(crate) fn column_label(c: &Column) -> String {
    format!("{} ({})", c.device.name, c.device.host)
}

#[cfg(test)]
mod tests;
