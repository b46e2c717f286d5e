//! Claims that compare two variants of one lab (`host_ms(free) > 10 * host_ms(free)
//! in variant sync`): judged once every variant of a run has ended, from each
//! variant's own measurements. One run alone leaves them inconclusive, and so does
//! a compared variant that did not run to its end: its numbers would be partial.

use std::collections::BTreeMap;

use crate::run::Run;
use crate::trace::{ClaimVerdict, EndStatus};
use gpulab_lab::{Claim, Lab};

use super::{Why, judge_one, load_decided, off_time, params_of};

/// The runs of the other variants a claim may read, by variant name.
#[derive(Default)]
pub(super) struct Others<'a> {
    runs: BTreeMap<&'a str, &'a Run>,
}

impl<'a> Others<'a> {
    pub(super) fn new() -> Others<'a> {
        Others::default()
    }

    /// The run of `variant`, when it ran to its end (or to the failure that is
    /// its lab's finding) on `home`'s device with `home`'s parameters; else why
    /// its measurements cannot be compared with `home`'s.
    pub(super) fn run_of(&self, variant: &str, home: &Run) -> Result<&'a Run, Why> {
        let Some(run) = self.runs.get(variant) else {
            return Err(format!(
                "variant `{variant}` did not run beside this one; a claim that compares \
                 variants is judged by `gpulab run LAB --all-variants` or the dashboard's compare"
            ));
        };
        if let Some(why) = unlike(run, home) {
            return Err(format!(
                "variant `{variant}` {why}, so the two do not compare"
            ));
        }
        let why = match run.end().map(|e| &e.status) {
            Some(EndStatus::Finished) => return Ok(run),
            Some(EndStatus::Failed { .. }) if run.finding().is_some_and(|f| f.explains_end()) => {
                return Ok(run);
            }
            Some(EndStatus::Cancelled) => "was cancelled".to_string(),
            Some(status) => status.label(),
            None => "did not finish".into(),
        };
        Err(format!(
            "variant `{variant}` {why}, so its measurements are incomplete"
        ))
    }
}

/// How `other` ran differently from `home`, where it matters to a comparison:
/// another device (recordings of two machines side by side) or other parameters.
fn unlike(other: &Run, home: &Run) -> Option<String> {
    let (a, b) = (other.meta()?, home.meta()?);
    if a.device.name != b.device.name {
        return Some(format!(
            "ran on {}, this run on {}",
            a.device.name, b.device.name
        ));
    }
    let params = |m: &crate::trace::Meta| m.lab.as_ref().map(|l| l.params.clone());
    (params(a) != params(b)).then(|| "ran with other parameters".to_string())
}

/// Whether `claim` reads a measurement of another variant.
fn compares_variants(claim: &Claim) -> bool {
    !claim.expr.other_variants().is_empty()
        || claim
            .requires
            .as_ref()
            .is_some_and(|r| !r.other_variants().is_empty())
}

/// The verdicts of `lab`'s claims that compare variants, for each run in `runs`
/// (the variants of one `--all-variants` run or one compare, same parameters),
/// as (index in `runs`, verdict). Each replaces the inconclusive verdict its run
/// got when it ended alone.
pub fn judge_across(lab: &Lab, runs: &[&Run]) -> Vec<(usize, ClaimVerdict)> {
    let mut others = Others::new();
    for run in runs {
        if let Some(v) = run.variant() {
            others.runs.entry(v).or_insert(run);
        }
    }
    let mut out = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let Some(variant) = run.variant() else {
            continue;
        };
        let params = params_of(lab, run);
        // A comparison is the load's where either side's timings were.
        let off = off_time(lab, run).or_else(|| {
            runs.iter()
                .filter(|r| !std::ptr::eq(**r, *run))
                .find_map(|r| off_time(lab, r))
        });
        for claim in lab
            .claims
            .iter()
            .filter(|c| c.applies_to(variant) && compares_variants(c))
        {
            let v = judge_one(claim, run, &params, &others);
            out.push((i, load_decided(claim, v, off.as_deref())));
        }
    }
    out
}
