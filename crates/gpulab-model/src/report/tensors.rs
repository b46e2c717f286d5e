//! A framework's live tensors by the line of the program's own code that
//! allocated them, as PyTorch's own allocator state said it under
//! `gpulab watch --torch-history` ([`crate::run::frameworks::AliveTaking`]):
//! at the allocator's highest look, with each line's change since the first
//! look, and as it refused.

use serde::Serialize;

use crate::run::frameworks::{AliveAtHighest, AliveTaking};
use crate::text::fit;
use crate::units::mib;

use super::format::FRAME_WIDTH;

/// A framework's live tensors at one look, by line.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TensorsByLine {
    /// When the hook's look began, from the program's start.
    pub t_ms: f64,
    /// How long the look took the thread that took it: PyTorch's snapshot
    /// (its first imports `torch._inductor` where the program had not) and
    /// the grouping.
    pub took_ms: f64,
    /// What the live tensors held then, in all, and how many there were.
    pub allocated_bytes: u64,
    pub tensors: u64,
    /// How many looks the hook took as the allocator's readings rose (this
    /// one the highest); absent for the look at a refusal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub looks: Option<u64>,
    /// The first of those looks, which `lines[].change_bytes` is measured
    /// from; absent when this is the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since_t_ms: Option<f64>,
    /// Most bytes first.
    pub lines: Vec<TensorsAtLine>,
    /// Tensors of lines past the most listed (the hook sends 200, the agent
    /// keeps 256), summed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other: Option<OtherTensors>,
}

/// Tensors of lines summed rather than listed.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OtherTensors {
    pub tensors: u64,
    pub bytes: u64,
}

/// Live tensors one line allocated.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TensorsAtLine {
    /// The innermost frame of the program's own code that allocated them:
    /// its file, line and function. All three are absent for the tensors no
    /// such frame allocated (another thread's, as autograd's backward, or a
    /// library's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    pub tensors: u64,
    pub bytes: u64,
    /// How this line's live bytes changed since the first look
    /// (`since_t_ms`); absent at a refusal and at the first look.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_bytes: Option<i64>,
}

/// Lines the text lists before it sums the rest.
const LISTED: usize = 8;

impl TensorsByLine {
    pub(crate) fn at_refusal(taking: &AliveTaking, start_ns: u64) -> TensorsByLine {
        TensorsByLine::of(taking, None, start_ns)
    }

    pub(crate) fn at_highest(alive: &AliveAtHighest, start_ns: u64) -> TensorsByLine {
        let mut t = TensorsByLine::of(&alive.highest, Some(&alive.first), start_ns);
        t.looks = Some(alive.looks);
        t
    }

    fn of(taking: &AliveTaking, first: Option<&AliveTaking>, start_ns: u64) -> TensorsByLine {
        let ms = |t_ns: u64| t_ns.saturating_sub(start_ns) as f64 / 1e6;
        let first = first.filter(|f| f.t_ns != taking.t_ns);
        let lines = taking
            .groups
            .iter()
            .map(|g| {
                let before = first.map(|f| {
                    f.groups
                        .iter()
                        .filter(|h| h.at == g.at)
                        .map(|h| h.bytes)
                        .sum::<u64>()
                });
                TensorsAtLine {
                    file: g.at.as_ref().map(|a| a.file.clone()),
                    line: g.at.as_ref().map(|a| a.line),
                    function: g.at.as_ref().map(|a| a.function.clone()),
                    tensors: g.tensors,
                    bytes: g.bytes,
                    change_bytes: before.map(|b| signed(g.bytes) - signed(b)),
                }
            })
            .collect();
        TensorsByLine {
            t_ms: ms(taking.t_ns.saturating_sub(taking.took_ns)),
            took_ms: taking.took_ns as f64 / 1e6,
            allocated_bytes: taking.allocated,
            tensors: taking.groups.iter().map(|g| g.tensors).sum::<u64>() + taking.other_tensors,
            looks: None,
            since_t_ms: first.map(|f| ms(f.t_ns)),
            lines,
            other: (taking.other_tensors > 0).then_some(OtherTensors {
                tensors: taking.other_tensors,
                bytes: taking.other_bytes,
            }),
        }
    }

    /// The text's lines under `heading`: each line's bytes, tensors, place
    /// and change, [`LISTED`] at most and the rest summed.
    pub fn lines(&self, heading: &str) -> Vec<String> {
        let mut out = vec![format!(
            "  {heading} at {:.1} ms: {:.2} MiB in {} tensors, by the line of the program \
             that allocated them (PyTorch's memory history, on under --torch-history; the \
             look took {:.1} ms):",
            self.t_ms,
            mib(self.allocated_bytes),
            self.tensors,
            self.took_ms
        )];
        for l in self.lines.iter().take(LISTED) {
            let at = match (&l.file, l.line, &l.function) {
                (Some(file), Some(line), Some(function)) => {
                    format!(
                        "at {}",
                        fit(&format!("{function} ({file}:{line})"), FRAME_WIDTH)
                    )
                }
                _ => "by no line of the program (another thread's, as autograd's backward, \
                      or a library's own)"
                    .into(),
            };
            let change = match (l.change_bytes, self.since_t_ms) {
                (Some(c), Some(since)) => {
                    format!(
                        ", {:+.2} MiB since {since:.1} ms",
                        c as f64 / (1 << 20) as f64
                    )
                }
                _ => String::new(),
            };
            out.push(format!(
                "    {:>10.2} MiB {:>6} {} {at}{change}",
                mib(l.bytes),
                l.tensors,
                if l.tensors == 1 { "tensor" } else { "tensors" }
            ));
        }
        let rest = &self.lines[self.lines.len().min(LISTED)..];
        let other = self.other.as_ref();
        let bytes = rest.iter().map(|l| l.bytes).sum::<u64>() + other.map_or(0, |o| o.bytes);
        let tensors = rest.iter().map(|l| l.tensors).sum::<u64>() + other.map_or(0, |o| o.tensors);
        if tensors > 0 {
            out.push(format!(
                "    {:>10.2} MiB {tensors:>6} tensors at other lines",
                mib(bytes)
            ));
        }
        out
    }
}

fn signed(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}
