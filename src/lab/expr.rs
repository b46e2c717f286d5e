//! Claim expressions: the AST, and the catalog of metrics a claim may name.
//! Parsing lives in `claim_parse.rs`; evaluation over a run lives in `crate::verdict`.

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Num(f64),
    /// A parameter (`kernel_ms`) or an argument-less metric (`bytes_live_mib`).
    Var(String),
    /// A metric over a tag or an object kind: `host_ms(release)`, `live(events)`.
    Metric {
        name: String,
        arg: String,
    },
    Neg(Box<Expr>),
    Not(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "and",
            BinOp::Or => "or",
        }
    }
}

/// What a metric's argument names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricArg {
    /// A `# name:` tag of a line or `repeat` block.
    Tag,
    /// An object kind, plural (`events`) or singular (`event`).
    Kind,
    /// No argument: written as a bare name.
    None,
}

pub struct MetricSpec {
    pub name: &'static str,
    pub arg: MetricArg,
    pub help: &'static str,
    /// The value depends on how much time passed between script lines: on what
    /// device work was still running, or what memory had not come back yet, when
    /// a line began. Stepping changes that (the device finishes while the user
    /// reads the screen: a stepped `clFinish` waits for nothing), so a stepped
    /// run cannot decide a claim that reads it.
    pub paced: bool,
}

/// Every metric a claim can use. `docs/lab-format.md` documents the same list.
pub static METRICS: &[MetricSpec] = &[
    MetricSpec {
        name: "host_ms",
        arg: MetricArg::Tag,
        help: "host time of the tagged call, ms (the mean when the line ran several times; the whole duration for a tagged block)",
        paced: true,
    },
    MetricSpec {
        name: "vram_delta_mib",
        arg: MetricArg::Tag,
        help: "device memory after minus before the tagged call or block, MiB (summed over every execution of a call)",
        paced: true,
    },
    MetricSpec {
        name: "vram_mib",
        arg: MetricArg::Tag,
        help: "device memory above the run's baseline right after the tagged call or block (its last execution), MiB",
        paced: true,
    },
    MetricSpec {
        name: "release_lag_ms",
        arg: MetricArg::Tag,
        help: "from the end of the tagged release (its first execution) to the first reading, the worker's or the sampler's, that shows half its bytes gone, ms (inf if never while the worker lived)",
        paced: true,
    },
    MetricSpec {
        name: "destroy_lag_ms",
        arg: MetricArg::Tag,
        help: "from the end of the tagged release (its first execution) to the driver's destructor callback, ms (0 when it fired inside the call; inf if never while the worker lived)",
        paced: true,
    },
    MetricSpec {
        name: "span_ms",
        arg: MetricArg::Tag,
        help: "device time of the work the tagged enqueue started, ms (the mean over its executions)",
        paced: false,
    },
    MetricSpec {
        name: "busy_ms",
        arg: MetricArg::Tag,
        help: "device work enqueued earlier and still outstanding when the tagged call (its first execution) began, ms (0 if the device was idle)",
        paced: true,
    },
    MetricSpec {
        name: "per_iter_mib",
        arg: MetricArg::Tag,
        help: "device memory growth per iteration of the tagged repeat block from its second iteration on, MiB (memory after the last iteration minus after the first, over iterations − 1): a one-time reserve in the first iteration does not count",
        paced: true,
    },
    MetricSpec {
        name: "iterations",
        arg: MetricArg::Tag,
        help: "iterations the tagged repeat block really ran (the budget may stop it early)",
        paced: false,
    },
    MetricSpec {
        name: "overlap",
        arg: MetricArg::Tag,
        help: "of the device-busy time of work enqueued inside the tagged block (or by the tagged lines), the fraction during which two or more streams/queues ran at once (0 = serialized, 1 = always side by side)",
        paced: true,
    },
    MetricSpec {
        name: "errors",
        arg: MetricArg::Tag,
        help: "executions of the tagged line that returned an error",
        paced: false,
    },
    MetricSpec {
        name: "pool_reserved_mib",
        arg: MetricArg::Tag,
        help: "CUDA: memory the device's default pool holds (in use or cached) right after the tagged line's last execution, MiB",
        paced: true,
    },
    MetricSpec {
        name: "pool_used_mib",
        arg: MetricArg::Tag,
        help: "CUDA: pool memory handed out and not yet freed (a pending cudaFreeAsync counts) right after the tagged line's last execution, MiB",
        paced: true,
    },
    MetricSpec {
        name: "live",
        arg: MetricArg::Kind,
        help: "objects of that kind alive in the ledger at the end of the script",
        paced: false,
    },
    MetricSpec {
        name: "bytes_live_mib",
        arg: MetricArg::None,
        help: "bytes of buffers alive in the ledger at the end of the script, MiB",
        paced: false,
    },
];

pub fn metric(name: &str) -> Option<&'static MetricSpec> {
    METRICS.iter().find(|m| m.name == name)
}

/// The metrics of `e` (with their argument) whose value stepping changes, as
/// claims write them: `host_ms(finish)`, `bytes_live_mib`.
pub fn paced_metrics(e: &Expr) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    e.walk(&mut |x| {
        let (name, shown) = match x {
            Expr::Metric { name, arg } => (name.as_str(), format!("{name}({arg})")),
            Expr::Var(name) => (name.as_str(), name.clone()),
            _ => return,
        };
        if metric(name).is_some_and(|m| m.paced) && !out.contains(&shown) {
            out.push(shown);
        }
    });
    out
}

impl Expr {
    /// Every (metric, argument) pair the expression reads, in order.
    pub fn metrics(&self) -> Vec<(&str, &str)> {
        let mut out = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Metric { name, arg } = e {
                out.push((name.as_str(), arg.as_str()));
            }
        });
        out
    }

    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Expr)) {
        f(self);
        match self {
            Expr::Neg(e) | Expr::Not(e) => e.walk(f),
            Expr::Bin(_, l, r) => {
                l.walk(f);
                r.walk(f);
            }
            Expr::Num(_) | Expr::Var(_) | Expr::Metric { .. } => {}
        }
    }
}
