//! What a refused process held of device memory at the refusal, grouped by
//! where each piece was made: the driver's first refusal (`ran_out`) and a
//! framework's (`framework_refused`) both say it, from objects the run folded
//! up to that moment ([`crate::run::HeldThen`]).

use serde::Serialize;

use crate::run::HeldThen;
use crate::run::Run;
use crate::run::owners::Owner;
use crate::text::fit;
use crate::trace::{Frame, ObjKind};
use crate::units::mib;

use super::format::FRAME_WIDTH;

/// Groups the text report lists before it sums the rest.
pub const LISTED: usize = 12;

/// Objects of one kind made at one place, alive at a refusal.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HeldThenReport {
    pub kind: ObjKind,
    pub count: u64,
    pub bytes: u64,
    /// Who called the driver for them (values as `alive_at_exit[].owner`).
    pub owner: String,
    /// The stack that made them, innermost first (as
    /// `alive_at_exit[].backtrace`); empty when none was taken.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub backtrace: Vec<Frame>,
}

/// The frames of a stack the run named, innermost first; none without one.
pub(super) fn frames(run: &Run, stack: Option<u64>) -> Vec<Frame> {
    stack
        .and_then(|id| run.stacks().get(&id))
        .cloned()
        .unwrap_or_default()
}

impl HeldThenReport {
    pub(crate) fn of(run: &Run, held: &[HeldThen]) -> Vec<HeldThenReport> {
        held.iter()
            .map(|h| HeldThenReport {
                kind: h.kind,
                count: h.count,
                bytes: h.bytes,
                owner: h
                    .stack
                    .and_then(|id| run.owners().get(&id).copied())
                    .unwrap_or(Owner::Unknown)
                    .as_str()
                    .into(),
                backtrace: frames(run, h.stack),
            })
            .collect()
    }

    /// The text's lines: a heading, then each place's count, kind, bytes and
    /// first frame (its Python line where it has one), `listed` places at
    /// most and the rest summed; nothing when empty.
    pub(crate) fn lines(held: &[HeldThenReport], listed: usize) -> Vec<String> {
        if held.is_empty() {
            return Vec::new();
        }
        let mut out = vec![
            "  what the process held then, by where it was made (a framework's driver \
             allocations are named by the call that grew its cache; tensors made later in \
             cached memory are not told apart):"
                .to_string(),
        ];
        for h in held.iter().take(listed) {
            let by = match h.owner.as_str() {
                "program" | "unknown" => String::new(),
                _ => format!(", through {}", Owner::label_of(&h.owner)),
            };
            let at = h
                .backtrace
                .first()
                .map(|f| format!(" at {}", fit(&f.describe(), FRAME_WIDTH)))
                .unwrap_or_else(|| " (no stack taken)".into());
            out.push(format!(
                "    {:>5} {:<12} {:>10.2} MiB{by}{at}",
                h.count,
                h.kind.counted(h.count),
                mib(h.bytes)
            ));
        }
        let rest = &held[held.len().min(listed)..];
        if !rest.is_empty() {
            out.push(format!(
                "    and {} more places, {:.2} MiB",
                rest.len(),
                mib(rest.iter().map(|h| h.bytes).sum())
            ));
        }
        out
    }
}
