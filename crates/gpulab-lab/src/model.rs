//! The validated lab: what the engine may trust. Built only by `validate`, never by
//! hand outside tests, so every handle, call and tag in it is known to be consistent.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::api::{Api, ClFlag, KernelSpec};
use super::error::LabError;
use super::expr::Expr;
use super::suggest;

/// Parameter values after defaults and `--param` overrides, in the lab's own units.
pub type Params = BTreeMap<String, f64>;

/// The API a lab's calls belong to: part of the event vocabulary.
pub use gpulab_events::BackendKind;
use gpulab_events::Expected;

/// Where a lab came from: shipped inside the binary or read from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Builtin,
    File(PathBuf),
}

#[derive(Debug, Clone)]
pub struct Lab {
    pub id: String,
    pub title: String,
    pub backend: BackendKind,
    /// The one-line claim shown in `gpulab list`.
    pub claim: String,
    pub teaching: Teaching,
    pub params: Vec<Param>,
    pub variants: Vec<Variant>,
    pub claims: Vec<Claim>,
    pub origin: Origin,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Teaching {
    /// What to look at while it runs.
    pub look: String,
    /// Why it happens.
    pub why: String,
    /// What to write instead.
    pub instead: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub default: f64,
    pub min: f64,
    pub max: f64,
    /// What its values are in.
    pub unit: ParamUnit,
    pub help: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variant {
    pub name: String,
    pub description: String,
    pub script: Vec<Stmt>,
}

/// One script line (or one `repeat` block with its body).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stmt {
    /// 1-based line in the lab file.
    pub line: u32,
    /// The line as written, without its comment.
    pub text: String,
    /// `# name: tag` on this line.
    pub tag: Option<String>,
    /// `# expect-error`: the line is expected to fail (a double free, say).
    pub expect_error: bool,
    /// `# stop-on-error`: a failure of this line ends the script, on any backend
    /// (CUDA errors otherwise let the lab go on; see docs/lab-format.md).
    pub stop_on_error: bool,
    pub kind: StmtKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StmtKind {
    Call {
        bind: Option<String>,
        api: Api,
        args: Vec<Arg>,
    },
    Repeat {
        count: Quantity,
        body: Vec<Stmt>,
    },
    Sleep {
        duration: Quantity,
    },
    Mark {
        text: String,
    },
    /// Drop the name without releasing the object: the leak is real.
    Forget {
        handle: String,
    },
    /// Read a host buffer as the program checks its data: the share of its
    /// words holding the pattern kernel's values (`pattern(tag)`).
    Verify {
        handle: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Arg {
    Handle(String),
    Quantity(Quantity),
    /// A kernel from `labs/kernels/`, e.g. `spin`.
    Kernel(String),
    /// `CL_TRUE` / `CL_FALSE`.
    Bool(bool),
    /// A flag constant (`CL_MEM_USE_HOST_PTR`, `CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE`).
    Flag(ClFlag),
    /// `wait [e1, e2]`: the events an enqueue waits for, in order.
    WaitList(Vec<String>),
    /// Flags C ORs together (`cudaHostAllocMapped | cudaHostAllocWriteCombined`).
    Flags(Vec<ClFlag>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quantity {
    pub value: Number,
    pub unit: Unit,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Number {
    Lit(f64),
    Param(String),
    /// A parameter times a factor (`2 * {kernel_ms}`).
    Scaled(f64, String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unit {
    None,
    Bytes,
    KiB,
    MiB,
    GiB,
    Us,
    Ms,
    S,
}

/// What a parameter's values are in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ParamUnit {
    /// A plain number (no `unit`, or `unit = ""`).
    None,
    /// A unit scripts write (`MiB`, `ms`, …): a quantity made of the
    /// parameter (`{size_mib} MiB`) must say the same one.
    Script(Unit),
    /// What it counts (`lines`, `times`): a plain number in scripts, the
    /// word shown beside its value.
    Count(String),
}

impl ParamUnit {
    /// The unit a script writes with it, if it is one.
    pub fn script(&self) -> Option<Unit> {
        match self {
            ParamUnit::Script(u) => Some(*u),
            _ => None,
        }
    }

    /// How the lab wrote it (`""` for a plain number).
    pub fn as_str(&self) -> &str {
        match self {
            ParamUnit::None => "",
            ParamUnit::Script(u) => u.as_str(),
            ParamUnit::Count(c) => c,
        }
    }

    /// ` MiB` after a value, or nothing for a plain number.
    pub fn suffix(&self) -> String {
        match self.as_str() {
            "" => String::new(),
            u => format!(" {u}"),
        }
    }
}

impl Unit {
    /// How a lab writes it (`""` for a plain number).
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::None => "",
            Unit::Bytes => "B",
            Unit::KiB => "KiB",
            Unit::MiB => "MiB",
            Unit::GiB => "GiB",
            Unit::Us => "us",
            Unit::Ms => "ms",
            Unit::S => "s",
        }
    }

    /// ` MiB` after a number, or nothing for a plain number.
    pub fn suffix(self) -> String {
        match self {
            Unit::None => String::new(),
            u => format!(" {}", u.as_str()),
        }
    }

    pub fn parse(s: &str) -> Option<Unit> {
        Some(match s {
            "B" | "bytes" => Unit::Bytes,
            "KiB" => Unit::KiB,
            "MiB" => Unit::MiB,
            "GiB" => Unit::GiB,
            "us" => Unit::Us,
            "ms" => Unit::Ms,
            "s" => Unit::S,
            _ => return None,
        })
    }

    pub fn is_size(self) -> bool {
        matches!(self, Unit::Bytes | Unit::KiB | Unit::MiB | Unit::GiB)
    }

    pub fn is_time(self) -> bool {
        matches!(self, Unit::Us | Unit::Ms | Unit::S)
    }

    /// Factor to bytes for sizes, to milliseconds for durations, 1 otherwise.
    pub fn factor(self) -> f64 {
        match self {
            Unit::None | Unit::Bytes => 1.0,
            Unit::KiB => gpulab_events::units::KIB as f64,
            Unit::MiB => gpulab_events::units::MIB_F64,
            Unit::GiB => gpulab_events::units::GIB_F64,
            Unit::Us => 1e-3,
            Unit::Ms => 1.0,
            Unit::S => 1e3,
        }
    }
}

impl Quantity {
    /// Bytes for sizes, milliseconds for durations, the plain number otherwise.
    /// Validation guarantees every `Param` here names a parameter of the lab.
    pub fn resolve(&self, params: &Params) -> f64 {
        let v = match &self.value {
            Number::Lit(v) => *v,
            Number::Param(p) => params.get(p).copied().unwrap_or(f64::NAN),
            Number::Scaled(f, p) => f * params.get(p).copied().unwrap_or(f64::NAN),
        };
        v * self.unit.factor()
    }
}

/// A claim: an expression over the run's measurements, and what must be true for
/// the claim to have been tested at all.
#[derive(Debug, Clone)]
pub struct Claim {
    pub name: String,
    pub text: String,
    pub expr: Expr,
    pub expr_src: String,
    pub requires: Option<Expr>,
    pub requires_src: Option<String>,
    /// Variants the claim applies to; all when empty.
    pub variants: Vec<String>,
    /// The lesson: what the lab's author expects the claim to show in each
    /// variant (`holds`, `does not hold`, or `either` where it teaches that
    /// implementations differ). Shown beside the verdict, never used to
    /// reach it; a variant without one has no stated expectation.
    pub expect: BTreeMap<String, Expected>,
}

impl Claim {
    pub fn applies_to(&self, variant: &str) -> bool {
        self.variants.is_empty() || self.variants.iter().any(|v| v == variant)
    }

    /// What the lesson expects the claim to show in `variant`, where it says.
    pub fn expected(&self, variant: &str) -> Option<Expected> {
        self.expect.get(variant).copied()
    }

    /// What the claim (its `requires` too) reads that stepping changes: a stepped
    /// run leaves it inconclusive.
    pub fn paced_metrics(&self) -> Vec<String> {
        let mut out = super::expr::paced_metrics(&self.expr);
        for m in self.requires.iter().flat_map(super::expr::paced_metrics) {
            if !out.contains(&m) {
                out.push(m);
            }
        }
        out
    }
}

impl Variant {
    /// Every line of the script as written, `repeat` bodies included, in order:
    /// what a recording keeps so it replays without the lab file.
    pub fn lines(&self) -> Vec<(u32, String)> {
        let mut out = Vec::new();
        // Depth-first without recursion: nesting depth is the user's to choose.
        let mut stack: Vec<std::slice::Iter<'_, Stmt>> = vec![self.script.iter()];
        while let Some(top) = stack.last_mut() {
            let Some(s) = top.next() else {
                stack.pop();
                continue;
            };
            out.push((s.line, s.text.clone()));
            if let StmtKind::Repeat { body, .. } = &s.kind {
                stack.push(body.iter());
            }
        }
        out
    }
}

impl Variant {
    /// The kernels the script names (`clCreateKernel(prog, spin2)`,
    /// `cudaLaunchKernel(s, copy, …)`), each once, in order: what a backend
    /// calibrates before the first line runs.
    pub fn kernels(&self) -> Vec<&'static KernelSpec> {
        let mut out: Vec<&'static KernelSpec> = Vec::new();
        for s in self.statements() {
            let StmtKind::Call { args, .. } = &s.kind else {
                continue;
            };
            let named = args.iter().filter_map(|a| match a {
                Arg::Kernel(k) => KernelSpec::lookup(k),
                _ => None,
            });
            for k in named {
                if !out.iter().any(|o| o.name == k.name) {
                    out.push(k);
                }
            }
        }
        out
    }

    /// Whether the script calls `api` anywhere, inside `repeat` blocks too.
    pub fn calls(&self, api: gpulab_events::Api) -> bool {
        self.statements()
            .iter()
            .any(|s| matches!(&s.kind, StmtKind::Call { api: a, .. } if *a == api))
    }

    /// Every statement, in script order, a `repeat` block's body after its
    /// line. Depth-first without recursion: nesting depth is the user's.
    fn statements(&self) -> Vec<&Stmt> {
        let mut out = Vec::new();
        let mut stack: Vec<std::slice::Iter<'_, Stmt>> = vec![self.script.iter()];
        while let Some(top) = stack.last_mut() {
            let Some(s) = top.next() else {
                stack.pop();
                continue;
            };
            out.push(s);
            if let StmtKind::Repeat { body, .. } = &s.kind {
                stack.push(body.iter());
            }
        }
        out
    }
}

impl Lab {
    pub fn variant(&self, name: &str) -> Option<&Variant> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// The variant `name`, or an error that names the nearest one and lists them all.
    pub fn find_variant(&self, name: &str) -> Result<&Variant, LabError> {
        self.variant(name).ok_or_else(|| {
            let known: Vec<String> = self.variants.iter().map(|v| v.name.clone()).collect();
            LabError::UnknownVariant {
                lab: self.id.clone(),
                variant: name.to_string(),
                suggestion: suggest::nearest(name, known.iter().map(String::as_str))
                    .map(str::to_string),
                known,
            }
        })
    }

    pub fn default_params(&self) -> Params {
        self.params
            .iter()
            .map(|p| (p.name.clone(), p.default))
            .collect()
    }
}
