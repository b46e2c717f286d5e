//! Claims judged from a run's measurements. Evaluated by the parent (not the
//! worker) because `release_lag_ms` needs the parent's samples; the result goes
//! into the stream as `claim` events, so a replay shows the verdict as recorded.
//!
//! Nothing here knows what any lab is expected to show: a metric that could not be
//! measured makes the claim inconclusive, and says why.

use std::collections::BTreeMap;

use crate::run::{Run, TagFold};
use crate::trace::{CallStatus, ClaimVerdict, Event, Verdict};
use gpulab_lab::api::{Api, Returns};
use gpulab_lab::{BinOp, Claim, Effect, Expr, Lab, ObjKind, Params, expr};

use crate::units::MIB_F64 as MIB;

/// A value a claim computes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Value {
    Num(f64),
    Bool(bool),
}

/// Why a value could not be computed; becomes the "inconclusive" reason.
type Why = String;

struct Env<'a> {
    run: &'a Run,
    params: &'a Params,
    values: BTreeMap<String, f64>,
    /// The other variants' runs a claim may read (`… in variant sync`).
    others: &'a Others<'a>,
}

/// Judges every claim of `lab` that applies to the run's variant. A claim that
/// reads another variant (`… in variant sync`) is inconclusive here: this run
/// alone cannot decide it, `across::judge_across` can when both ran.
pub fn judge(lab: &Lab, run: &Run) -> Vec<ClaimVerdict> {
    let variant = run.variant().unwrap_or_default().to_string();
    let params = params_of(lab, run);
    let off = off_time(lab, run);
    lab.claims
        .iter()
        .filter(|c| c.applies_to(&variant))
        .map(|c| {
            load_decided(
                c,
                judge_one(c, run, &params, &Others::new()),
                off.as_deref(),
            )
        })
        .collect()
}

/// How far a timed kernel may run from the time asked before its timings
/// are not the device's: 30% either way.
const OFF_TIME: f64 = 0.3;

/// On a loaded host (more runnable tasks than CPUs, as the parent measured),
/// the first device span that ran far from the time its line asked: "the
/// kernel at line 42 ran 521 ms of the 200 ms asked, with load average 5.2
/// on 2 cores". None when the host was not loaded or every kernel kept its
/// time: the verdicts are then the device's.
pub fn off_time(lab: &Lab, run: &Run) -> Option<String> {
    let load = crate::run::Load::of(run.load()?);
    if !load.loaded {
        return None;
    }
    let name = run.variant()?;
    let variant = lab.variant(name)?;
    let params = params_of(lab, run);
    let asked = variant.asked_ms_by_line(&params);
    run.spans().iter().find_map(|s| {
        let asked = *asked.get(&s.line?)?;
        let ran = s.end_ns.saturating_sub(s.begin_ns) as f64 / 1e6;
        ((ran - asked).abs() > OFF_TIME * asked).then(|| {
            format!(
                "the machine was loaded ({}) and the kernel at line {} of `{name}` ran \
                 {ran:.0} ms of the {asked:.0} ms asked: its timings are the load's, not the \
                 device's",
                load.figures(),
                s.line.unwrap_or_default()
            )
        })
    })
}

/// A verdict the load decided: a claim that reads a time (`host_ms`,
/// `busy_ms`, `span_ms`, a lag), judged on a loaded host where a kernel ran
/// far from the time asked, is inconclusive with that reason, its values
/// still shown. Decided without the lesson: a holding verdict goes too.
pub fn load_decided(claim: &Claim, mut v: ClaimVerdict, off: Option<&str>) -> ClaimVerdict {
    let Some(off) = off else { return v };
    let timed = std::iter::once(&claim.expr)
        .chain(&claim.requires)
        .flat_map(|e| e.metrics())
        .any(|(name, _)| name.ends_with("_ms"));
    if timed && v.verdict != Verdict::Inconclusive {
        v.verdict = Verdict::Inconclusive;
        v.reason = Some(off.to_string());
    }
    v
}

/// Gives the claims of a recording the lesson's expectation where they were
/// recorded without one (before the lab stated it, or before gpulab could):
/// taken from the lab of the recording's id, claim by claim and variant by
/// variant, where `labs` has it. A recorded expectation is kept as it is; the
/// verdicts are never touched.
pub struct LessonFill<'l> {
    labs: &'l [Lab],
    /// The recording's lab and variant, once its `meta` went by.
    run: Option<(&'l Lab, String)>,
}

impl<'l> LessonFill<'l> {
    pub fn new(labs: &'l [Lab]) -> LessonFill<'l> {
        LessonFill { labs, run: None }
    }

    /// Looks at one event of the recording, in order.
    pub fn fill(&mut self, event: &mut Event) {
        match event {
            Event::Meta(m) => {
                self.run = m.lab.as_ref().and_then(|l| {
                    let lab = self.labs.iter().find(|x| x.id == l.id)?;
                    Some((lab, l.variant.clone()))
                });
            }
            Event::Claim(c) if c.expected.is_none() => {
                if let Some((lab, variant)) = &self.run {
                    c.expected = lab
                        .claims
                        .iter()
                        .find(|x| x.name == c.name)
                        .and_then(|x| x.expected(variant));
                }
            }
            _ => {}
        }
    }
}

/// The parameters the run used, as its `meta` recorded them.
fn params_of(lab: &Lab, run: &Run) -> Params {
    run.meta()
        .as_ref()
        .and_then(|m| m.lab.as_ref())
        .map(|l| l.params.clone())
        .unwrap_or_else(|| lab.default_params())
}

fn judge_one(claim: &Claim, run: &Run, params: &Params, others: &Others) -> ClaimVerdict {
    let mut env = Env {
        run,
        params,
        values: BTreeMap::new(),
        others,
    };
    let (verdict, reason) = match decide(claim, &mut env) {
        Ok(v) => (v, None),
        Err(why) => (Verdict::Inconclusive, Some(why)),
    };
    // The values are still shown: they are what this stepped run measured.
    let (verdict, reason) = match stepped_out(claim, run) {
        Some(why) => (Verdict::Inconclusive, Some(why)),
        None => (verdict, reason),
    };
    ClaimVerdict {
        name: claim.name.clone(),
        text: claim.text.clone(),
        expr: claim.expr_src.clone(),
        requires: claim.requires_src.clone(),
        values: env.values,
        verdict,
        reason,
        expected: claim.expected(run.variant().unwrap_or_default()),
    }
}

/// Why a stepped run cannot decide `claim`: it reads a measurement that depends
/// on the time between lines, which the user's pauses changed.
fn stepped_out(claim: &Claim, run: &Run) -> Option<Why> {
    let stepped = run
        .meta()
        .as_ref()
        .and_then(|m| m.lab.as_ref())
        .is_some_and(|l| l.stepped);
    if !stepped {
        return None;
    }
    let paced = claim.paced_metrics();
    (!paced.is_empty()).then(|| stepping_reason(&paced))
}

/// "stepped run: host_ms(finish) depends on …", shared by the verdict and the
/// warning a stepped run starts with.
pub fn stepping_reason(paced: &[String]) -> Why {
    format!(
        "stepped run: {} depend{} on the time between lines, and stepping let device work \
         finish while you read the screen",
        paced.join(", "),
        if paced.len() == 1 { "s" } else { "" }
    )
}

/// The claims of `lab` that apply to `variant` and that a stepped run leaves
/// inconclusive, each with what it reads that stepping changes.
pub fn stepping_changes<'l>(lab: &'l Lab, variant: &str) -> Vec<(&'l Claim, Vec<String>)> {
    lab.claims
        .iter()
        .filter(|c| c.applies_to(variant))
        .map(|c| (c, c.paced_metrics()))
        .filter(|(_, m)| !m.is_empty())
        .collect()
}

/// What a stepped run of `variant` says before its first line: the claims it
/// will leave inconclusive and what each reads that stepping changes.
pub fn stepping_warning(lab: &Lab, variant: &str) -> String {
    let changed = stepping_changes(lab, variant);
    if changed.is_empty() {
        return "step mode: no claim of this variant depends on the time between lines; \
                stepping changes no verdict"
            .into();
    }
    let mut o = String::from(
        "step mode: stepping lets device work finish while you read the screen, so these \
         claims will be inconclusive:",
    );
    for (c, paced) in changed {
        o.push_str(&format!("\n  {} — reads {}", c.name, paced.join(", ")));
    }
    o
}

fn decide(claim: &Claim, env: &mut Env) -> Result<Verdict, Why> {
    if let Some(req) = &claim.requires {
        let met = truth(env.eval(req)?)?;
        if !met {
            return Err(format!(
                "precondition not met: {} was false, so the claim was never tested",
                claim.requires_src.as_deref().unwrap_or("requires")
            ));
        }
    }
    if !run_reached_end(env.run) {
        // A partial run can still decide a claim over what it measured, but a
        // claim over the end state needs the end.
        if uses_end_state(&claim.expr) {
            return Err("the run did not finish, so the end state is unknown".into());
        }
    }
    Ok(if truth(env.eval(&claim.expr)?)? {
        Verdict::Holds
    } else {
        Verdict::DoesNotHold
    })
}

fn run_reached_end(run: &Run) -> bool {
    run.end().is_some()
}

fn uses_end_state(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| match x {
        Expr::Metric { name, .. } if name == "live" => found = true,
        Expr::Var(v) if v == "bytes_live_mib" => found = true,
        _ => {}
    });
    found
}

fn truth(v: Value) -> Result<bool, Why> {
    match v {
        Value::Bool(b) => Ok(b),
        Value::Num(_) => Err("the claim computes a number, not a comparison".into()),
    }
}

fn num(v: Value) -> Result<f64, Why> {
    match v {
        Value::Num(n) => Ok(n),
        Value::Bool(_) => Err("a comparison was used where a number is needed".into()),
    }
}

impl Env<'_> {
    fn eval(&mut self, e: &Expr) -> Result<Value, Why> {
        Ok(match e {
            Expr::Num(n) | Expr::Qty(n, _) => Value::Num(*n),
            Expr::Var(name) => {
                let v = if let Some(p) = self.params.get(name) {
                    *p
                } else {
                    self.metric(name, "")?
                };
                self.values.insert(name.clone(), v);
                Value::Num(v)
            }
            Expr::Metric { name, arg } => {
                let v = self.metric(name, arg)?;
                self.values.insert(format!("{name}({arg})"), v);
                Value::Num(v)
            }
            Expr::InVariant(inner, variant) => {
                let other = Env {
                    run: self.others.run_of(variant, self.run)?,
                    params: self.params,
                    values: BTreeMap::new(),
                    others: self.others,
                };
                let v = match inner.as_ref() {
                    Expr::Metric { name, arg } => other.metric(name, arg)?,
                    Expr::Var(name) => other.metric(name, "")?,
                    _ => return Err("`in variant` follows a metric".into()),
                };
                self.values.insert(e.to_string(), v);
                Value::Num(v)
            }
            Expr::Neg(x) => Value::Num(-num(self.eval(x)?)?),
            Expr::Not(x) => Value::Bool(!truth(self.eval(x)?)?),
            Expr::Bin(op, l, r) => {
                let (a, b) = (self.eval(l)?, self.eval(r)?);
                match op {
                    BinOp::And => Value::Bool(truth(a)? && truth(b)?),
                    BinOp::Or => Value::Bool(truth(a)? || truth(b)?),
                    BinOp::Add => Value::Num(num(a)? + num(b)?),
                    BinOp::Sub => Value::Num(num(a)? - num(b)?),
                    BinOp::Mul => Value::Num(num(a)? * num(b)?),
                    BinOp::Div => Value::Num(num(a)? / num(b)?),
                    cmp => {
                        let (x, y) = (num(a)?, num(b)?);
                        if x.is_nan() || y.is_nan() {
                            return Err(format!("a value in `{}` is not a number", cmp.symbol()));
                        }
                        Value::Bool(match cmp {
                            BinOp::Lt => x < y,
                            BinOp::Le => x <= y,
                            BinOp::Gt => x > y,
                            BinOp::Ge => x >= y,
                            BinOp::Eq => x == y,
                            _ => x != y,
                        })
                    }
                }
            }
        })
    }

    fn metric(&self, name: &str, arg: &str) -> Result<f64, Why> {
        let run = self.run;
        match name {
            "host_ms" => host_ms(run, arg),
            "vram_delta_mib" => {
                if let Some(b) = run.tagged_block(arg) {
                    return match (b.mem_before, b.mem_after) {
                        (Some(x), Some(y)) => Ok((y as f64 - x as f64) / MIB),
                        _ => Err(no_memory()),
                    };
                }
                let t = run.tagged(arg).ok_or_else(|| never_ran(arg))?;
                t.mem_delta.map(|s| s / MIB).ok_or_else(no_memory)
            }
            "vram_mib" => {
                let base = run.baseline().ok_or_else(no_memory)?;
                let after = match run.tagged_block(arg) {
                    Some(b) => b.mem_after,
                    None => {
                        run.tagged(arg)
                            .ok_or_else(|| never_ran(arg))?
                            .last
                            .mem_after
                    }
                };
                let after = after.ok_or_else(no_memory)?;
                Ok((after as f64 - base as f64) / MIB)
            }
            "release_lag_ms" => self.release_lag(arg),
            "destroy_lag_ms" => self.destroy_lag(arg),
            "span_ms" => {
                let t = run.tagged(arg).ok_or_else(|| never_ran(arg))?;
                if t.spans == 0 {
                    return Err(format!("no device span was reported for `{arg}`"));
                }
                Ok(ms(t.span_ns) / t.spans as f64)
            }
            "busy_ms" => {
                let t = run.tagged(arg).ok_or_else(|| never_ran(arg))?;
                let outstanding = t
                    .busy_end
                    .map_or(0, |end| end.saturating_sub(t.first.begin_ns));
                Ok(ms(outstanding))
            }
            "per_iter_mib" => memory::per_iter_mib(run, arg),
            "peak_mib" => memory::peak_mib(run, arg),
            "iterations" => run
                .tagged_block(arg)
                .map(|b| b.iterations as f64)
                .ok_or_else(|| never_ran(arg)),
            "live" => {
                let kind = ObjKind::from_plural(arg)
                    .ok_or_else(|| format!("unknown object kind `{arg}`"))?;
                Ok(run.live_at_end().get(&kind).copied().unwrap_or(0) as f64)
            }
            "overlap" => cuda::overlap(run, arg),
            "errors" => cuda::errors(run, arg),
            "pool_reserved_mib" => cuda::pool_mib(run, arg, true),
            "pool_used_mib" => cuda::pool_mib(run, arg, false),
            "custom_pool_reserved_mib" => cuda::custom_pool_mib(run, arg, true),
            "custom_pool_used_mib" => cuda::custom_pool_mib(run, arg, false),
            "graph_mem_reserved_mib" => cuda::graph_mem_mib(run, arg, true),
            "graph_mem_used_mib" => cuda::graph_mem_mib(run, arg, false),
            name if Returns::read_by(name).is_some() => returned::returned(run, name, arg),
            "bytes_live_mib" => {
                let end = run.end().ok_or("the run did not finish")?;
                Ok(end.leaked.iter().map(|l| l.bytes).sum::<u64>() as f64 / MIB)
            }
            other => Err(match expr::metric(other) {
                Some(_) => format!("metric `{other}` is not measured by this gpulab"),
                None => format!("unknown name `{other}`"),
            }),
        }
    }

    /// The tagged release: its call, folded, and the object it let go of.
    fn release_call<'s>(&'s self, tag: &'s str) -> Result<(&'s TagFold, u64), Why> {
        let run = self.run;
        let t = run.tagged(tag).ok_or_else(|| never_ran(tag))?;
        let c = &t.first;
        let is_release = c
            .api
            .api()
            .is_some_and(|a| matches!(a.effect(), Effect::Release(_)) || a.hands_over().is_some());
        if !is_release {
            return Err(format!("`{tag}` is not a release call"));
        }
        if !matches!(c.status, CallStatus::Ok) {
            return Err(format!("`{tag}` failed, so nothing was released"));
        }
        let id = c
            .object
            .ok_or_else(|| format!("`{tag}` released no object gpulab knows"))?;
        Ok((t, id))
    }

    fn release_lag(&self, tag: &str) -> Result<f64, Why> {
        let (t, _) = self.release_call(tag)?;
        let c = &t.first;
        // The watch holds the object's bytes when the call had a reading before it.
        let Some(watch) = t.release else {
            let bytes = c
                .object
                .and_then(|id| self.run.ledger().get(&id))
                .map_or(0, |o| o.bytes);
            if bytes == 0 {
                return Err(format!("`{tag}` released an object that holds no memory"));
            }
            return Err(no_memory());
        };
        if watch.bytes == 0 {
            return Err(format!("`{tag}` released an object that holds no memory"));
        }
        // Readings taken after the run's end are the device's, not the run's.
        let end = self.run.end().map(|e| e.t_ns);
        let gone = watch.gone_ns.filter(|t| end.is_none_or(|end| *t <= end));
        let Some(gone) = gone else {
            return Ok(f64::INFINITY);
        };
        let lag = ms(gone - c.end_ns);
        if let Some(why) = self.sampler_behind(c.end_ns, gone, lag) {
            return Err(why);
        }
        Ok(lag)
    }

    /// The sampler fell behind before `gone`, the first reading that saw the
    /// memory go: no reading for over four of its own intervals (as this run
    /// measured them) and a quarter of the lag. The memory went somewhere in
    /// that gap, so the lag is known only to within it: the load decided it,
    /// not the device.
    fn sampler_behind(&self, released_ns: u64, gone: u64, lag: f64) -> Option<Why> {
        let readings = self.run.readings();
        let before = readings[..readings.partition_point(|(t, _)| *t < gone)]
            .last()
            .map_or(released_ns, |(t, _)| (*t).max(released_ns));
        let gap = ms(gone.saturating_sub(before));
        // The sampler's own interval: the median between its samples, which
        // a stall does not move.
        let times: Vec<u64> = self.run.samples().iter().map(|s| s.t_ns).collect();
        let mut steps: Vec<u64> = times
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]))
            .collect();
        steps.sort_unstable();
        let every = ms(*steps.get(steps.len() / 2)?);
        (every > 0.0 && gap > 4.0 * every && gap > 0.25 * lag && gap > 2.0).then(|| {
            format!(
                "the sampler fell behind: no memory reading for {gap:.1} ms before the memory \
                 was seen gone (it read every {every:.1} ms otherwise), so the lag is between \
                 {:.1} and {lag:.1} ms",
                lag - gap
            )
        })
    }

    fn destroy_lag(&self, tag: &str) -> Result<f64, Why> {
        let (t, id) = self.release_call(tag)?;
        let c = &t.first;
        let object = self.run.ledger().get(&id);
        // The worker says which kinds it asked the driver about; a stream from
        // before it said so asked about every kind that has a callback.
        let asked = self.run.meta().and_then(|m| m.destruction.clone());
        let watched = object.is_some_and(|o| o.destruction_watched(asked.as_deref()))
            && (asked.is_some() || !self.run.folds().destroyed_kinds.is_empty());
        let svm = object
            .and_then(|o| o.made_by.as_ref())
            .is_some_and(|m| m.api == Api::ClSVMAlloc.name());
        match object.and_then(|o| o.destroyed_ns) {
            Some(t_ns) => Ok(ms(t_ns.saturating_sub(c.end_ns))),
            None if watched => Ok(f64::INFINITY),
            None if svm => Err(
                "shared virtual memory is a pointer, not a cl_mem: no destructor callback can say when it goes (read `release_lag_ms`)".into(),
            ),
            None => Err(match object {
                Some(o)
                    if self
                        .run
                        .meta()
                        .as_ref()
                        .is_some_and(|m| m.destruction.is_some()) =>
                {
                    format!(
                        "gpulab did not ask this driver to report when it destroys a {} \
                         (see the run's notes)",
                        o.kind.as_str().replace('_', " ")
                    )
                }
                _ => "no destructor callback fired in this run (the platform may not support them)"
                    .into(),
            }),
        }
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// `host_ms(tag)`: a tagged block's whole duration, or a tagged line's host time
/// (the mean over its executions), ms. The reports' side-by-side table shows
/// the same figure.
pub fn host_ms(run: &Run, tag: &str) -> Result<f64, Why> {
    if let Some(b) = run.tagged_block(tag) {
        return Ok(ms(b.end_ns.saturating_sub(b.begin_ns)));
    }
    let t = run.tagged(tag).ok_or_else(|| never_ran(tag))?;
    Ok(ms(t.host_ns) / t.calls as f64)
}

fn never_ran(tag: &str) -> Why {
    format!("`{tag}` never ran in this run")
}

fn no_memory() -> Why {
    "no memory telemetry on this device".into()
}

mod across;
mod cuda;
mod memory;
mod returned;
use across::Others;
pub use across::judge_across;
#[cfg(test)]
mod tests;
