//! Calls on objects the program had released, as compute-sanitizer's API
//! checks and CLIntercept's error checks report them: what the call did,
//! where, and the object's history (what made it, when it was released).

use std::fmt::Write as _;

use serde::Serialize;

use crate::run::Run;
use crate::text::fit;
use crate::trace::{Frame, MisuseKind, ObjKind};

use crate::report::format::FRAME_WIDTH;

/// One call that named an object the program had released.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MisuseRow {
    pub what: MisuseKind,
    /// The call, as the agent hooked it (`clEnqueueReadBuffer`).
    pub call: String,
    pub pid: u32,
    pub thread: u64,
    /// When the call began, ms from the program's start.
    pub at_ms: f64,
    pub kind: ObjKind,
    /// The object, by its number (`#5`).
    pub object: String,
    /// The call that made it and who called it, when the stream says.
    pub made_by: Option<String>,
    /// Where it was made (`--backtrace`, or the calling frame).
    pub made_at: Vec<Frame>,
    /// When the program's last reference to it went, ms from the start.
    pub released_ms: Option<f64>,
    /// Where the misusing call was made.
    pub backtrace: Vec<Frame>,
    /// `unordered_free`: the use the free is not ordered after, and its
    /// stream (`cuLaunchKernel on stream #3`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// The misuses of `run`, oldest first, and how many there were in all.
pub(super) fn rows(run: &Run, start_ns: u64) -> (Vec<MisuseRow>, u64) {
    let ms = |t: u64| t.saturating_sub(start_ns) as f64 / 1e6;
    let frames = |id: Option<u64>| {
        id.and_then(|id| run.stacks().get(&id))
            .cloned()
            .unwrap_or_default()
    };
    let (misuses, seen) = run.misuses();
    let rows = misuses
        .iter()
        .map(|m| {
            let state = run.ledger().get(&m.object);
            MisuseRow {
                what: m.what,
                call: m.api.to_string(),
                pid: m.pid,
                thread: m.thread,
                at_ms: ms(m.t_ns),
                kind: m.kind,
                object: state.map_or_else(|| format!("#{}", m.object & 0xffff_ffff), |s| s.name()),
                made_by: state
                    .and_then(|s| s.made_by.as_ref())
                    .map(|b| crate::run::maker_text(&b.api, "", b.pid, b.thread)),
                made_at: frames(state.and_then(|s| s.stack)),
                released_ms: state.and_then(|s| s.released_ns).map(ms),
                backtrace: frames(m.stack),
                after: m.after.as_ref().map(|u| {
                    let on = match u.stream {
                        Some(id) => run.ledger().get(&id).map_or_else(
                            || format!("stream #{}", id & 0xffff_ffff),
                            |s| format!("stream {}", s.name()),
                        ),
                        None => "a default stream".to_owned(),
                    };
                    format!("{} on {on}", u.api)
                }),
            }
        })
        .collect();
    (rows, seen)
}

impl MisuseRow {
    /// The row in words: `use after release: clEnqueueReadBuffer named buffer #5`.
    pub fn headline(&self) -> String {
        format!(
            "{}: {} named {} {} (pid {}, thread {}) at {:.3} ms",
            self.what.words(),
            self.call,
            self.kind.as_str().replace('_', " "),
            self.object,
            self.pid,
            self.thread,
            self.at_ms
        )
    }

    /// The report's lines for it.
    pub(super) fn text(&self, s: &mut String) {
        let _ = writeln!(s, "  {}", self.headline());
        if let Some(after) = &self.after {
            let _ = writeln!(
                s,
                "      the free is not ordered after its use by {after} \
                 (no event recorded after the use and waited by the freeing stream, \
                 no wait of the host)"
            );
        }
        for f in &self.backtrace {
            let _ = writeln!(s, "      at {}", fit(&f.describe(), FRAME_WIDTH));
        }
        let made = self
            .made_by
            .as_deref()
            .unwrap_or("a call the stream does not name");
        let released = match self.released_ms {
            Some(t) => format!("; the program released it at {t:.3} ms"),
            None => String::new(),
        };
        let _ = writeln!(s, "      made by {made}{released}");
        for f in &self.made_at {
            let _ = writeln!(s, "        at {}", fit(&f.describe(), FRAME_WIDTH));
        }
    }
}
