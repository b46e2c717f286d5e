//! A class's predictions beside what its devices showed (`gpulab class`):
//! each student's run of a lab is a recording, with what they predicted of
//! each claim before the run (`prediction` events) and the verdict the run
//! reached. Per lab, variant and claim: how many predicted each outcome,
//! what each device showed, and the share whose prediction their own run
//! bore out, the most missed first. Duplicated recordings (the same run
//! copied twice) count once and are named.

mod render;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::report::Provenance;
use crate::run::Run;
use crate::trace::{Predicted, Verdict};

pub use render::{html, markdown};

/// The class's table.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Class {
    /// Where and when this table was made.
    pub recorded: Provenance,
    /// Lab runs counted.
    pub runs: usize,
    /// Of them, runs with at least one prediction.
    pub predicting_runs: usize,
    /// Recordings set aside: a copy of a run already counted, a watched
    /// program, a file that does not read as a recording.
    pub set_aside: Vec<SetAside>,
    /// One row per lab, variant and claim, the most missed first.
    pub rows: Vec<ClassRow>,
    /// One row per lab, variant and value whose range was predicted
    /// (`--predict 'host_ms(wait)=150..250'`), the most missed first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub estimates: Vec<EstimateRow>,
}

/// The ranges a class predicted for one value of one lab variant, against
/// what each run measured.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EstimateRow {
    pub lab: String,
    pub variant: String,
    /// The value, as the lab's claims read it (`host_ms(wait)`).
    pub value: String,
    /// Runs with a range for it.
    pub estimates: u64,
    /// Of them, runs whose own measurement fell in their range.
    pub within: u64,
    /// Runs that measured no value for it (their claims could not read it).
    pub unmeasured: u64,
    /// The lowest and the highest value the runs measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_lo: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_hi: Option<f64>,
}

/// A recording not counted, and why.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SetAside {
    pub file: String,
    pub why: String,
}

/// One claim of one lab variant, across the class.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ClassRow {
    pub lab: String,
    pub variant: String,
    pub claim: String,
    /// The claim's words.
    pub text: String,
    /// What the lab's lesson expects, where it says (`holds`, `does_not_hold`, `either`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lesson: Option<gpulab_events::Expected>,
    /// Runs of this variant that judged the claim.
    pub runs: u64,
    /// How many predicted each outcome; `none`: runs without a prediction.
    pub predicted: Predictions,
    /// What each device showed, by its name (runs on the same model of
    /// device are counted together).
    pub devices: Vec<DeviceShowed>,
    /// Predictions of `holds` or `does_not_hold` the run's own verdict bore
    /// out.
    pub right: u64,
    /// Predictions made on runs with a conclusive verdict (`not_sure` among
    /// them): what `right` is a share of.
    pub judged: u64,
    /// `right` / `judged`; absent when nothing was judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub right_share: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Predictions {
    pub holds: u64,
    pub does_not_hold: u64,
    pub not_sure: u64,
    pub none: u64,
}

/// What the runs on one device showed of a claim.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceShowed {
    pub device: String,
    pub holds: u64,
    pub does_not_hold: u64,
    pub inconclusive: u64,
    /// Of these runs, those on a host that was loaded as it ran (its load
    /// average above its cores, or a task waiting for a CPU half the time):
    /// their timings are the load's as much as the device's.
    pub loaded: u64,
}

impl EstimateRow {
    /// The ranges `run` of `lab`'s variant predicted, each beside what it
    /// measured, counted into `rows`.
    fn tally(
        rows: &mut BTreeMap<(String, String, String), EstimateRow>,
        (lab, variant): (&str, &str),
        run: &Run,
    ) {
        for e in crate::report::Estimated::of(run) {
            let row = rows
                .entry((lab.to_string(), variant.to_string(), e.value.clone()))
                .or_insert_with(|| EstimateRow {
                    lab: lab.to_string(),
                    variant: variant.to_string(),
                    value: e.value.clone(),
                    estimates: 0,
                    within: 0,
                    unmeasured: 0,
                    measured_lo: None,
                    measured_hi: None,
                });
            row.estimates += 1;
            row.within += u64::from(e.within == Some(true));
            match e.measured {
                Some(m) => {
                    row.measured_lo = Some(row.measured_lo.map_or(m, |lo| lo.min(m)));
                    row.measured_hi = Some(row.measured_hi.map_or(m, |hi| hi.max(m)));
                }
                None => row.unmeasured += 1,
            }
        }
    }
}

impl ClassRow {
    /// A run on `device` showed `verdict` (on a host `loaded` or not).
    fn showed(&mut self, device: &str, verdict: Verdict, loaded: bool) {
        let at = match self.devices.iter().position(|d| d.device == device) {
            Some(at) => at,
            None => {
                self.devices.push(DeviceShowed {
                    device: device.to_string(),
                    ..DeviceShowed::default()
                });
                self.devices.len() - 1
            }
        };
        let shown = &mut self.devices[at];
        shown.loaded += u64::from(loaded);
        match verdict {
            Verdict::Holds => shown.holds += 1,
            Verdict::DoesNotHold => shown.does_not_hold += 1,
            Verdict::Inconclusive => shown.inconclusive += 1,
        }
    }
}

/// One recording as `gpulab class` reads it: its file and its events' run.
pub struct Entry<'a> {
    pub file: String,
    pub run: &'a Run,
}

impl Class {
    /// The class of `entries`, in the order given (the first copy of a run
    /// counts).
    pub fn of(recorded: Provenance, entries: &[Entry<'_>], unreadable: Vec<SetAside>) -> Class {
        let mut set_aside = unreadable;
        let mut seen: BTreeMap<(String, u32, u64), String> = BTreeMap::new();
        let mut rows: BTreeMap<(String, String, String), ClassRow> = BTreeMap::new();
        let mut estimates: BTreeMap<(String, String, String), EstimateRow> = BTreeMap::new();
        let (mut runs, mut predicting_runs) = (0, 0);
        for e in entries {
            let Some(meta) = e.run.meta() else {
                set_aside.push(SetAside {
                    file: e.file.clone(),
                    why: "no header: not a recording of a run".into(),
                });
                continue;
            };
            let Some(lab) = &meta.lab else {
                set_aside.push(SetAside {
                    file: e.file.clone(),
                    why: "a watched program, not a lab run".into(),
                });
                continue;
            };
            let identity = (meta.hostname.clone(), meta.pid, meta.t_ns);
            if let Some(first) = seen.get(&identity) {
                set_aside.push(SetAside {
                    file: e.file.clone(),
                    why: format!("the same run as {first} (a copy), counted once"),
                });
                continue;
            }
            seen.insert(identity, e.file.clone());
            runs += 1;
            let predictions = e.run.predictions();
            predicting_runs +=
                usize::from(!predictions.is_empty() || !e.run.estimates().is_empty());
            EstimateRow::tally(&mut estimates, (&lab.id, &lab.variant), e.run);
            let device = meta.device.name.clone();
            let loaded = e.run.load().is_some_and(|l| crate::run::Load::of(l).loaded);
            for c in e.run.claims() {
                let row = rows
                    .entry((lab.id.clone(), lab.variant.clone(), c.name.clone()))
                    .or_insert_with(|| ClassRow {
                        lab: lab.id.clone(),
                        variant: lab.variant.clone(),
                        claim: c.name.clone(),
                        text: c.text.clone(),
                        lesson: c.expected,
                        runs: 0,
                        predicted: Predictions::default(),
                        devices: Vec::new(),
                        right: 0,
                        judged: 0,
                        right_share: None,
                    });
                row.runs += 1;
                row.lesson = row.lesson.or(c.expected);
                row.showed(&device, c.verdict, loaded);
                let Some(p) = predictions.get(&c.name) else {
                    row.predicted.none += 1;
                    continue;
                };
                match p {
                    Predicted::Holds => row.predicted.holds += 1,
                    Predicted::DoesNotHold => row.predicted.does_not_hold += 1,
                    Predicted::NotSure => row.predicted.not_sure += 1,
                }
                if c.verdict != Verdict::Inconclusive {
                    row.judged += 1;
                    row.right += u64::from(p.matches(c.verdict));
                }
            }
        }
        let mut rows: Vec<ClassRow> = rows.into_values().collect();
        for r in &mut rows {
            r.right_share = (r.judged > 0).then(|| r.right as f64 / r.judged as f64);
        }
        // The most missed first; rows nobody predicted last, in lab order.
        rows.sort_by(|a, b| {
            let share = |r: &ClassRow| r.right_share.unwrap_or(f64::INFINITY);
            share(a)
                .total_cmp(&share(b))
                .then_with(|| b.judged.cmp(&a.judged))
                .then_with(|| (&a.lab, &a.variant, &a.claim).cmp(&(&b.lab, &b.variant, &b.claim)))
        });
        let mut estimates: Vec<EstimateRow> = estimates.into_values().collect();
        // The most missed first: the smallest share within its range.
        estimates.sort_by(|a, b| {
            let share = |r: &EstimateRow| r.within as f64 / r.estimates.max(1) as f64;
            share(a).total_cmp(&share(b))
        });
        Class {
            recorded,
            runs,
            predicting_runs,
            set_aside,
            rows,
            estimates,
        }
    }
}

#[cfg(test)]
mod tests;
