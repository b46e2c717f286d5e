//! The trace format's events as serde writes them: one `TraceEvent` per
//! entry of `traceEvents`, its `args` by kind, and the trace's `otherData`
//! (the claims and their verdicts, as the outlines read them). Never writes.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Serialize;

use crate::export::outline::Outline;

/// One trace event; fields a phase does not use are left out.
#[derive(Serialize)]
pub(super) struct TraceEvent<'a> {
    pub(super) name: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cat: Option<&'a str>,
    pub(super) ph: &'static str,
    pub(super) pid: u32,
    pub(super) tid: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) dur: Option<f64>,
    /// Instant events: their scope (`p`, the process).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) s: Option<&'static str>,
    /// Async slices and flows: the id pairing a begin with its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) id: Option<String>,
    /// Flow ends: bind to the slice that encloses them (`e`), the device span.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) bp: Option<&'static str>,
    #[serde(skip_serializing_if = "Args::is_none")]
    pub(super) args: Args<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum Args<'a> {
    None,
    Name {
        name: Cow<'a, str>,
    },
    /// Where Perfetto lists a process among the others.
    Sort {
        sort_index: u64,
    },
    Call {
        line: Option<u32>,
        text: Option<&'a str>,
        driver: &'a str,
        status: Cow<'a, str>,
        tag: Option<&'a str>,
        iteration: &'a [u32],
        mem_before: Option<u64>,
        mem_after: Option<u64>,
    },
    Span {
        line: Option<u32>,
        call_seq: u64,
        queued_us: f64,
    },
    Counter {
        #[serde(rename = "MiB")]
        mib: f64,
    },
    /// A CUDA pool's bookkeeping at a call, MiB: what it holds from the
    /// device, and of that what is handed out (the rest is its cache).
    Pool {
        reserved: f64,
        used: f64,
    },
    /// Who held a watched program's memory, MiB by share: a counter track
    /// whose series Perfetto and chrome://tracing stack.
    Shares {
        objects: f64,
        cache: f64,
        reserves: f64,
        kept_by_driver: f64,
        /// The reading less the shares: negative when they add up to more.
        unexplained: f64,
    },
    Object {
        bytes: u64,
        line: Option<u32>,
        refs: &'a [u64],
        /// A watched program's: the stack that made it, innermost first (its
        /// Python line first, where it has one), each frame as the report
        /// says it.
        #[serde(skip_serializing_if = "<[String]>::is_empty")]
        made_at: &'a [String],
    },
}

impl Args<'_> {
    pub(super) fn is_none(&self) -> bool {
        matches!(self, Args::None)
    }
}

impl<'a> TraceEvent<'a> {
    pub(super) fn new(name: impl Into<Cow<'a, str>>, ph: &'static str, pid: u32, tid: u64) -> Self {
        TraceEvent {
            name: name.into(),
            cat: None,
            ph,
            pid,
            tid,
            ts: None,
            dur: None,
            s: None,
            id: None,
            bp: None,
            args: Args::None,
        }
    }
}

#[derive(Serialize)]
pub(super) struct Claim<'a> {
    pub(super) name: &'a str,
    /// Whose claim, in a trace of several runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) variant: Option<&'a str>,
    pub(super) verdict: &'a str,
    /// How the verdict stands to the lab's lesson, where it states one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) lesson: Option<&'static str>,
    pub(super) values: BTreeMap<&'a str, serde_json::Value>,
}

#[derive(Serialize)]
pub(super) struct OtherData<'a> {
    pub(super) gpulab_version: Option<&'a str>,
    pub(super) device: Option<&'a str>,
    pub(super) driver: Option<&'a str>,
    pub(super) claims: Vec<Claim<'a>>,
    /// Complete slices whose recorded times partly overlapped an earlier
    /// slice of their track, each drawn whole on a track of its own beside it.
    #[serde(skip_serializing_if = "is_zero")]
    pub(super) overlapping_slices_moved: u64,
}

pub(super) fn is_zero(n: &u64) -> bool {
    *n == 0
}

pub(super) fn other_data(outlines: &[Outline]) -> OtherData<'_> {
    let first = outlines.first().and_then(|o| o.meta.as_ref());
    let several = outlines.len() > 1;
    OtherData {
        gpulab_version: first.map(|m| m.gpulab_version.as_str()),
        device: first.map(|m| m.device.name.as_str()),
        driver: first.map(|m| m.device.driver_version.as_str()),
        claims: outlines
            .iter()
            .flat_map(|o| {
                let variant = o
                    .meta
                    .as_ref()
                    .and_then(|m| m.lab.as_ref())
                    .map(|l| l.variant.as_str())
                    .filter(|_| several);
                o.claims.iter().map(move |c| Claim {
                    name: &c.name,
                    variant,
                    verdict: c.verdict.label(),
                    lesson: c.lesson().map(|l| l.label()),
                    values: c
                        .values
                        .iter()
                        .map(|(k, v)| {
                            let v = if v.is_finite() {
                                serde_json::json!(v)
                            } else {
                                serde_json::json!("never")
                            };
                            (k.as_str(), v)
                        })
                        .collect(),
                })
            })
            .collect(),
        overlapping_slices_moved: 0,
    }
}
