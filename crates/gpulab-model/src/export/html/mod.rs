//! `export --html`: one self-contained page to share a run, for a reader with no
//! GPU and no gpulab. The memory chart and the timeline as inline SVG (each
//! call's numbers on hover, through `<title>`), the script table, the claims with
//! their verdicts (beside the lab's lesson), and the lab's teaching text; a
//! watched program's findings on its charts (`findings`). One
//! small inline script zooms and scrubs the charts; no network, no font but
//! the reader's own, a dark variant where the reader's system asks for one. Every string from a recording or a lab file is escaped:
//! both are shared files. The recording is read twice (`Outline`, then
//! `Decimated` at the charts' width), and the tables come from the run's
//! per-line and per-API folds, so a page of a million calls costs what one of
//! ten thousand does. Renders to a string; never prints.

mod axis;
mod chart;
mod compare;
mod findings;

pub use compare::compare;

use std::fmt::Write;
use std::io;

use crate::export::decimate::Decimated;
use crate::export::outline::Outline;
use crate::export::svg::esc;
use crate::report::{Summary, fmt_delta, fmt_value, memory_label, program_memory_label};
use crate::run::Run;
use crate::teaching::Inline;
use crate::trace::{ClaimVerdict, Event, Tone};
use crate::units::{MIB_F64 as MIB, mib, signed_mib};
use axis::TimeAxis;
use findings::Findings;
use gpulab_lab::Teaching;

/// What a page shows beside the recording, which holds neither.
#[derive(Debug, Default, Clone, Copy)]
pub struct Extras<'a> {
    /// The lab's teaching text, from its lab file.
    pub teaching: Option<&'a Teaching>,
    /// A watched program's report, as `gpulab report` prints it.
    pub watch_report: Option<&'a str>,
}

const STYLE: &str = "
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
.sub{color:#555;margin-top:0}
table{border-collapse:collapse;width:100%;font-size:.95em}
th,td{border-bottom:1px solid #e3e3e3;padding:.3em .5em;text-align:left;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font-family:ui-monospace,monospace}pre{background:#f6f6f6;padding:1em;white-space:pre-wrap;overflow-wrap:anywhere}
.facts th{width:14em}
svg.chart{width:100%;height:auto;display:block}
.axis{stroke:#444}.grid{stroke:#e6e6e6}.tick,.lane,.desc{font-size:13px;fill:#333}.desc{fill:#555}
.memory{fill:none;stroke:#1f77b4;stroke-width:2.5}
circle.call{fill:#fff;stroke:#1f77b4;stroke-width:1.5}circle.tagged{fill:#ff7f0e;stroke:#ff7f0e}
rect.host{fill:#777}rect.failed{fill:#d62728}rect.device{fill:#d62728;opacity:.85}
circle:hover,rect:hover{stroke:#000;stroke-width:2}
.good{color:#1a7f37}.bad{color:#b3261e}.unsure{color:#8a6d00}.finding{color:#8e24aa}.neutral{color:#57606a}
.verdict{font-weight:bold;white-space:nowrap}
.legend span{margin-right:1.5em;white-space:nowrap;display:inline-block}.sw{display:inline-block;width:1em;height:.8em;margin-right:.3em;vertical-align:middle}
.view{overflow-x:auto}.view>div{width:100%}
.controls{display:flex;gap:1.5em;align-items:center;flex-wrap:wrap;margin:.5em 0}
.controls input[type=range]{width:16em}.readout{font-variant-numeric:tabular-nums}
line.cursor{stroke:#8e24aa;stroke-width:1.5;visibility:hidden}
.sw.refused{width:.25em}
@media (prefers-color-scheme:dark){
body{background:#121212;color:#e4e4e4}h2{border-color:#333}.sub,.desc{color:#aaa}
th,td{border-color:#2c2c2c}pre{background:#1e1e1e}
.axis{stroke:#bbb}.grid{stroke:#2e2e2e}.tick,.lane,.desc{fill:#ccc}
.memory{stroke:#6cb4ee}circle.call{fill:#121212;stroke:#6cb4ee}rect.host{fill:#9a9a9a}
circle:hover,rect:hover{stroke:#fff}
.good{color:#56d364}.bad{color:#ff7b72}.unsure{color:#e3b341}.finding{color:#d2a8ff}.neutral{color:#8b949e}
line.cursor{stroke:#d2a8ff}
svg.gpu-chart text:not(.refused):not(.tick):not(.desc){fill:#ccc}
svg.chart text.refused{fill:#ff8a80}svg.chart line.refused{stroke:#ff8a80}
}
";

/// Zoom and scrub, the page's only script: no network, no text from the
/// recording put into the page (the readout is the chart's own titles, set
/// as text). Without it the page reads as before, titles on hover.
const SCRIPT: &str = r#"
(function(){
var view=document.querySelector('.view'); if(!view) return;
var inner=view.firstElementChild, zoom=document.getElementById('zoom'), scrub=document.getElementById('scrub');
var out=document.getElementById('readout'), span=parseFloat(view.dataset.spanMs);
var left=parseFloat(view.dataset.left), plot=parseFloat(view.dataset.plot);
var cursors=view.querySelectorAll('line.cursor');
var runs=[].map.call(view.querySelectorAll('.run'),function(run){
  var charts=[].map.call(run.querySelectorAll('svg.memory-chart'),function(mem){
    var line=mem.querySelector('polyline.memory,polyline.gpu-used');
    var pts=(line?line.getAttribute('points'):'').trim().split(/\s+/).filter(Boolean).map(function(p){var a=p.split(',');return [parseFloat(a[0]),parseFloat(a[1])];});
    return {name:mem.dataset.name||'', pts:pts, top:parseFloat(mem.dataset.top), bottom:parseFloat(mem.dataset.bottom), max:parseFloat(mem.dataset.max)};
  });
  return {name:run.dataset.name, charts:charts, bars:run.querySelectorAll('svg.timeline rect')};
});
function at(c,x){var v=null;for(var i=0;i<c.pts.length&&c.pts[i][0]<=x;i++){v=c.pts[i][1];}return v===null?null:(c.bottom-v)/(c.bottom-c.top)*c.max;}
function under(r,x){var hit=[];[].forEach.call(r.bars,function(b){var a=parseFloat(b.getAttribute('x')),w=parseFloat(b.getAttribute('width'));if(x>=a-0.5&&x<=a+w+0.5){var t=b.querySelector('title');if(t)hit.push(t.textContent.split('\n')[0]);}});return hit;}
function place(){var f=parseFloat(scrub.value)/1000, x=left+f*plot;
[].forEach.call(cursors,function(c){c.setAttribute('x1',x);c.setAttribute('x2',x);c.style.visibility='visible';});
var parts=runs.map(function(r){var calls=under(r,x);
  var mem=r.charts.map(function(c){var m=at(c,x);return (m===null?'no reading yet':m.toFixed(1)+' MiB above baseline')+(c.name?' on '+c.name:'');}).join(', ');
  return (r.name?r.name+': ':'')+mem+(calls.length?' · '+calls.join(' | '):'');});
out.textContent=(f*span).toFixed(3)+' ms · '+parts.join(' — ');
var w=inner.getBoundingClientRect().width; view.scrollLeft=Math.max(0,(x/1000)*w-view.clientWidth/2);}
zoom.addEventListener('input',function(){var z=parseFloat(zoom.value);inner.style.width=(z*100)+'%';document.getElementById('zoomed').textContent=z+'×';place();});
scrub.addEventListener('input',place);
})();
"#;

/// One recording, read for its page.
#[derive(Debug, Clone)]
pub struct Page {
    axis: TimeAxis,
    drawn: Decimated,
}

impl Page {
    /// Reads `recording` twice (it hands over its events in order, from the
    /// start, each time it is called).
    pub fn read<R>(recording: R) -> io::Result<Page>
    where
        R: Fn(&mut dyn FnMut(Event)) -> io::Result<()>,
    {
        let outline = Outline::of(&recording)?;
        let axis = TimeAxis::of(&outline);
        let drawn = Decimated::fold(&recording, &outline, axis::COLUMNS, |t| axis.x(t))?;
        Ok(Page { axis, drawn })
    }

    /// The run, folded as `report` folds it.
    pub fn run(&self) -> &Run {
        &self.drawn.run
    }

    /// The whole page.
    pub fn html(&self, extras: Extras) -> String {
        page(&self.drawn, &self.axis, extras)
    }

    /// Two recordings (two variants of a lab, or a run here and one on
    /// another device) read for one compare page, on one time scale.
    pub fn read_pair<R>(a: &R, b: &R) -> io::Result<(Page, Page)>
    where
        R: Fn(&mut dyn FnMut(Event)) -> io::Result<()>,
    {
        let (oa, ob) = (Outline::of(a)?, Outline::of(b)?);
        let axes = TimeAxis::shared(&[&oa, &ob]);
        let (xa, xb) = (axes[0], axes[1]);
        let da = Decimated::fold(a, &oa, axis::COLUMNS, |t| xa.x(t))?;
        let db = Decimated::fold(b, &ob, axis::COLUMNS, |t| xb.x(t))?;
        Ok((
            Page {
                axis: xa,
                drawn: da,
            },
            Page {
                axis: xb,
                drawn: db,
            },
        ))
    }
}

fn page(drawn: &Decimated, axis: &TimeAxis, extras: Extras) -> String {
    let run = &drawn.run;
    let summary = Summary::of(run);
    let watch = run.meta().and_then(|m| m.watch.as_ref());
    let heading = match watch {
        Some(w) => format!("gpulab watch -- {}", w.command.join(" ")),
        None if summary.lab.is_empty() => "gpulab run".to_string(),
        None => format!("{} [{}]", summary.lab, summary.variant),
    };
    let mut out = head(&heading);
    if !summary.title.is_empty() {
        let _ = writeln!(out, r#"<p class="sub">{}</p>"#, esc(&summary.title));
    }
    facts(&mut out, run, &summary);

    out.push_str("<h2>Memory</h2>\n");
    let tagged = if summary.claims.is_empty() {
        ""
    } else {
        r#"<span><i class="sw" style="background:#ff7f0e"></i>a call a claim names</span>"#
    };
    let curve = findings::curve_words(&Findings::of(run), watch.is_some());
    let _ = writeln!(
        out,
        r#"<p class="legend"><span><i class="sw" style="background:#1f77b4"></i>{curve}</span>{tagged}<span>hover a dot, a band or a bar for its numbers</span></p>"#
    );
    charts(&mut out, &[(drawn, axis, "")]);

    if watch.is_some() {
        calls_by_api(&mut out, run);
    } else {
        script(&mut out, &summary);
    }
    claims(&mut out, &summary);
    if let Some(t) = extras.teaching {
        teaching(&mut out, t);
    }
    if let Some(report) = extras.watch_report {
        let _ = write!(out, "<h2>Report</h2>\n<pre>{}</pre>\n", esc(report));
    }
    notes(&mut out, &summary);
    foot(&mut out, &[run]);
    out
}

/// The page's start: its title, styles and heading.
pub(crate) fn head(heading: &str) -> String {
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{0} — gpulab</title>
<style>{STYLE}</style>
</head><body>
<h1>{0}</h1>
"#,
        esc(heading)
    )
}

/// Who wrote the page from what, and the zoom and scrub script.
fn foot(out: &mut String, runs: &[&Run]) {
    let versions: Vec<&str> = runs
        .iter()
        .map(|r| r.meta().map_or("?", |m| m.gpulab_version.as_str()))
        .collect();
    let _ = write!(
        out,
        "<p class=\"sub\">Written by gpulab {} from {} made by gpulab {}.</p>\n<script>{SCRIPT}</script>\n</body></html>\n",
        env!("CARGO_PKG_VERSION"),
        if runs.len() == 1 {
            "a recording"
        } else {
            "recordings"
        },
        esc(&versions.join(", "))
    );
}

/// The zoom and scrub controls over each run's memory chart and timeline, on
/// one time axis; each run is named (its variant) where there are several.
fn charts(out: &mut String, runs: &[(&Decimated, &TimeAxis, &str)]) {
    let Some((_, axis, _)) = runs.first() else {
        return;
    };
    // Zoom widens the charts in a box that scrolls; the scrub cursor runs
    // across all of them and reads out the time, the memory and the calls
    // under it.
    let _ = writeln!(
        out,
        r#"<div class="controls"><label>zoom <input type="range" id="zoom" min="1" max="16" step="1" value="1"> <span id="zoomed">1×</span></label><label>scrub <input type="range" id="scrub" min="0" max="1000" value="0"></label><span class="readout" id="readout">move the scrub slider: time, memory and the calls at the cursor</span></div>"#
    );
    let _ = writeln!(
        out,
        r#"<div class="view" {}><div>"#,
        axis::view_attributes(axis)
    );
    for (drawn, axis, name) in runs {
        let _ = writeln!(out, r#"<div class="run" data-name="{}">"#, esc(name));
        if !name.is_empty() {
            let _ = writeln!(out, "<h3>{}</h3>", esc(name));
        }
        // A watched program's findings, as its figure draws them.
        let f = Findings::of(&drawn.run);
        out.push_str(&findings::legend(&drawn.run, &f));
        if f.gpus.is_empty() {
            out.push_str(&chart::memory(drawn, axis, "MiB above baseline", &f));
        } else {
            out.push_str(&findings::gpu_charts(drawn, axis, &f));
        }
        out.push_str(
            r#"<p class="legend"><span><i class="sw" style="background:#777"></i>host call</span><span><i class="sw" style="background:#d62728"></i>device work (or a call that failed, in the host lane)</span></p>"#,
        );
        out.push_str(&chart::timeline(drawn, axis, &f.refusals));
        out.push_str("</div>\n");
    }
    out.push_str("</div></div>\n");
}

/// Device, driver, how the run ended and what memory did.
fn facts(out: &mut String, run: &Run, s: &Summary) {
    let watched = run.meta().is_some_and(|m| m.watch.is_some());
    let mut rows: Vec<(&str, String)> = vec![
        ("device", s.device.clone()),
        ("platform", s.platform.clone()),
        ("driver", s.driver.clone()),
        (
            "memory",
            if watched {
                program_memory_label(s.memory_source)
            } else {
                memory_label(s.memory_source)
            }
            .to_string(),
        ),
        ("ended", s.status.clone()),
    ];
    if let Some(d) = s.duration_ms {
        rows.push(("duration", format!("{d:.1} ms")));
    }
    if !s.params.is_empty() {
        let params: Vec<String> = s
            .params
            .iter()
            .map(|(k, v)| format!("{k} = {}", fmt_value(*v)))
            .collect();
        rows.push(("parameters", params.join(", ")));
    }
    if let Some(p) = s.peak_above_baseline_bytes {
        rows.push(("peak above baseline", format!("{:.1} MiB", mib(p))));
    }
    // A watched program has no worker; its report says what it left.
    let worker = run.meta().is_some_and(|m| m.watch.is_none());
    if let (true, Some(a), Some(against)) = (worker, s.after_exit_bytes, &s.after_exit_against) {
        rows.push((
            "after the worker exited",
            format!("{:+.1} MiB against {against}", signed_mib(a)),
        ));
    }
    if let Some(at) = run.meta().and_then(|m| m.recorded_at.as_deref()) {
        rows.push(("recorded", at.to_string()));
    }
    out.push_str("<table class=\"facts\">\n");
    for (k, v) in rows.iter().filter(|(_, v)| !v.is_empty()) {
        let _ = writeln!(out, "<tr><th>{k}</th><td>{}</td></tr>", esc(v));
    }
    out.push_str("</table>\n");
}

/// One row per script line: what it called, how often, its host time and what
/// memory did across it.
fn script(out: &mut String, s: &Summary) {
    out.push_str(
        "<h2>Script</h2>\n<table class=\"script\"><thead><tr><th class=\"n\">line</th><th>call</th><th class=\"n\">count</th><th class=\"n\">host ms</th><th class=\"n\">max ms</th><th class=\"n\">memory Δ MiB</th><th>result</th></tr></thead><tbody>\n",
    );
    for l in &s.lines {
        let tag = l
            .tag
            .as_deref()
            .map(|t| format!(" <span class=\"sub\">[{}]</span>", esc(t)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "<tr><td class=\"n\">{}</td><td><code>{}</code>{tag}</td><td class=\"n\">{}</td><td class=\"n\">{:.3}</td><td class=\"n\">{:.3}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            l.line,
            esc(&l.text),
            l.calls,
            l.host_ms,
            l.host_ms_max,
            fmt_delta(l.mem_delta_bytes.map(signed_mib)),
            esc(&l.result)
        );
    }
    out.push_str("</tbody></table>\n");
}

/// A watched program has no script (nor a lab's directives): its calls by name,
/// in first-call order, from the run's per-API fold of every call.
fn calls_by_api(out: &mut String, run: &Run) {
    out.push_str(
        "<h2>Calls</h2>\n<table class=\"script\"><thead><tr><th>call</th><th class=\"n\">count</th><th class=\"n\">failed</th><th class=\"n\">host ms (total)</th><th class=\"n\">memory Δ MiB</th></tr></thead><tbody>\n",
    );
    for r in &run.folds().apis {
        let _ = writeln!(
            out,
            "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.3}</td><td class=\"n\">{}</td></tr>",
            esc(&r.api),
            r.calls,
            r.errors,
            r.host_ns as f64 / 1e6,
            fmt_delta(r.mem_delta.map(|m| m as f64 / MIB))
        );
    }
    out.push_str("</tbody></table>\n");
}

/// The colour class of a verdict: how it stands to the lesson where the lab
/// states one, else the verdict's own.
pub(crate) fn lesson_class(c: &ClaimVerdict) -> &'static str {
    match c.tone() {
        Tone::Good => "good",
        Tone::Finding => "finding",
        Tone::Bad => "bad",
        Tone::Unsure => "unsure",
        Tone::Neutral => "neutral",
    }
}

/// Each claim, its verdict on this device and the measurements that decided it.
fn claims(out: &mut String, s: &Summary) {
    if s.claims.is_empty() {
        return;
    }
    out.push_str(
        "<h2>Claims on this device</h2>\n<table class=\"claims\"><thead><tr><th>claim</th><th>verdict</th><th>the lesson</th><th>measured</th></tr></thead><tbody>\n",
    );
    for c in &s.claims {
        let values: Vec<String> = c
            .values
            .iter()
            .map(|(k, v)| format!("{k} = {}", fmt_value(*v)))
            .collect();
        let reason = c
            .reason
            .as_deref()
            .map(|r| format!("<br>{}", esc(r)))
            .unwrap_or_default();
        // Beside the verdict, how it stands to the lab's lesson: an expected
        // "does not hold" is the variant's point, not a failure.
        let class = lesson_class(c);
        let lesson = match c.lesson() {
            Some(l) => format!("<td class=\"{class}\">{} {}</td>", l.mark(), l.label()),
            None => "<td>—</td>".to_string(),
        };
        let _ = writeln!(
            out,
            "<tr><td>{}<br><code>{}</code></td><td class=\"verdict {class}\">{} {}{reason}</td>{lesson}<td>{}</td></tr>",
            esc(&c.text),
            esc(&c.expr),
            c.mark(),
            c.verdict.label(),
            esc(&values.join(", "))
        );
    }
    out.push_str("</tbody></table>\n");
}

fn teaching(out: &mut String, t: &Teaching) {
    out.push_str("<h2>What it teaches</h2>\n");
    for (head, text) in [("Look", &t.look), ("Why", &t.why), ("Instead", &t.instead)] {
        if text.trim().is_empty() {
            continue;
        }
        let _ = writeln!(out, "<h3>{head}</h3>");
        for para in crate::teaching::paragraphs(text) {
            let body: String = para
                .iter()
                .map(|run| match run {
                    Inline::Text(s) => esc(s),
                    Inline::Code(s) => format!("<code>{}</code>", esc(s)),
                    Inline::Emphasis(s) => format!("<em>{}</em>", esc(s)),
                    Inline::Strong(s) => format!("<strong>{}</strong>", esc(s)),
                })
                .collect();
            let _ = writeln!(out, "<p>{body}</p>");
        }
    }
}

/// What the run left alive, and the worker's notes.
fn notes(out: &mut String, s: &Summary) {
    if s.leaked.is_empty() && s.notes.is_empty() {
        return;
    }
    out.push_str("<h2>Notes</h2>\n<ul>\n");
    for l in &s.leaked {
        let _ = writeln!(
            out,
            "<li>{} {} alive at the end{}</li>",
            esc(l.kind.as_str()),
            esc(&l.handle),
            if l.forgotten {
                " (forgotten on purpose)"
            } else {
                ""
            }
        );
    }
    for n in &s.notes {
        let _ = writeln!(out, "<li>{}</li>", esc(n));
    }
    out.push_str("</ul>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Call, CallStatus, read_recording};

    const RECORDING: &str = include_str!("../../../fixtures/pocl--cl-finish--no-wait.jsonl");

    fn events_of(text: &str) -> Vec<Event> {
        read_recording(text.as_bytes()).unwrap().events
    }

    fn page_of(events: &[Event]) -> Page {
        Page::read(|each: &mut dyn FnMut(Event)| {
            events.iter().cloned().for_each(each);
            Ok(())
        })
        .unwrap()
    }

    #[test]
    fn strings_from_a_recording_cannot_add_markup() {
        let run = Run::from_events(&events_of(RECORDING));
        let title = &run.meta().unwrap().lab.as_ref().unwrap().title;
        let hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>\" '";
        let as_json = |s: &str| serde_json::to_string(s).unwrap();
        let events = events_of(&RECORDING.replace(&as_json(title), &as_json(hostile)));
        let page = page_of(&events).html(Extras::default());
        // The page's own zoom and scrub script, and no other.
        assert_eq!(page.matches("<script").count(), 1, "a script got through");
        assert!(!page.contains("<img"), "an element got through");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("&quot; &#39;"));
    }

    #[test]
    fn the_page_holds_every_line_and_claim_of_the_run() {
        let events = events_of(RECORDING);
        let run = Run::from_events(&events);
        let page = page_of(&events).html(Extras::default());
        for l in run.lines() {
            assert!(page.contains(&esc(&l.text)), "line {} missing", l.line);
        }
        assert!(!run.claims().is_empty());
        for c in run.claims() {
            assert!(page.contains(&esc(&c.expr)), "claim {} missing", c.name);
        }
        // Every call outside directives has a bar with its numbers on hover.
        let calls = run
            .calls()
            .iter()
            .filter(|c| c.status != CallStatus::Directive)
            .count();
        assert_eq!(page.matches("<rect class=\"host").count(), calls);
    }

    /// 100,000 calls of one line, one microsecond apart: a bar and a dot per
    /// column of the chart at most, each saying how many calls it stands for,
    /// and one row of the script table that counts them all.
    #[test]
    fn a_long_run_draws_a_mark_per_column_that_counts_its_calls() {
        let mut events = events_of(RECORDING);
        events.retain(|e| !matches!(e, Event::Call(_) | Event::End(_)));
        let Some(Event::Meta(meta)) = events.first() else {
            panic!("the fixture starts with its meta")
        };
        let (t0, line) = (meta.t_ns, meta.lab.as_ref().unwrap().script[0].0);
        let n = 100_000u64;
        events.extend((0..n).map(|i| {
            Event::Call(Call {
                seq: i,
                line: Some(line),
                api: "clFinish".into(),
                driver: "clFinish".into(),
                begin_ns: t0 + i * 1_000,
                end_ns: t0 + i * 1_000 + 500,
                mem_before: Some(1 << 20),
                mem_after: Some((1 << 20) + (i % 7) * 4096),
                status: if i == 4_242 {
                    CallStatus::Error {
                        name: "CL_INVALID_VALUE".into(),
                        code: -30,
                    }
                } else {
                    CallStatus::Ok
                },
                ..Default::default()
            })
        }));
        let page = page_of(&events);
        let html = page.html(Extras::default());
        let bars = html.matches("<rect class=\"host").count();
        assert!((1..=axis::COLUMNS).contains(&bars), "{bars} host bars");
        let dots = html.matches("<circle class=\"call").count();
        assert!((1..=axis::COLUMNS).contains(&dots), "{dots} dots");
        let counted: u64 = html
            .split("<rect class=\"host")
            .skip(1)
            .filter_map(|bar| bar.split("<title>").nth(1)?.split(' ').next())
            .map(|count| count.replace(',', "").parse::<u64>().unwrap())
            .sum();
        assert_eq!(counted, n, "every call is in one bar's count");
        assert_eq!(html.matches("<rect class=\"host failed").count(), 1);
        assert!(html.contains("1 returned an error"));
        assert!(
            html.contains("\nmemory after them "),
            "a dot says its readings"
        );
        assert!(
            html.contains(&format!("<td class=\"n\">{n}</td>")),
            "the script table counts every call"
        );
        assert!(html.len() < 2_000_000, "{} bytes", html.len());
    }
}
