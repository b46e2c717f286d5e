//! Claim expressions: the AST, and the catalog of metrics a claim may name.
//! Parsing lives in `claim_parse.rs`; evaluation over a run lives in the model crate's `verdict`.

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Num(f64),
    /// A number with a unit (`5 ms`, `1 s`, `64 MiB`), held in the unit the
    /// metrics of its kind are in (`ms`, `MiB`): `1 s` is 1000 ms.
    Qty(f64, &'static str),
    /// A parameter (`kernel_ms`) or an argument-less metric (`bytes_live_mib`).
    Var(String),
    /// A metric over a tag or an object kind: `host_ms(release)`, `live(events)`.
    Metric {
        name: String,
        arg: String,
    },
    /// A metric measured in another variant of the same lab:
    /// `host_ms(free) in variant sync`. The inner expression is a `Metric` or a
    /// `Var` naming an argument-less metric.
    InVariant(Box<Expr>, String),
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
        name: "peak_mib",
        arg: MetricArg::Tag,
        help: "the highest device memory above the run's baseline while the tagged line or block ran (every execution), from every reading in that time: the worker's before and after each call and the parent sampler's, MiB",
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
        name: "custom_pool_reserved_mib",
        arg: MetricArg::Tag,
        help: "CUDA: memory the lab's own pool (`cudaMemPoolCreate`, when exactly one is alive) holds right after the tagged line's last execution, MiB",
        paced: true,
    },
    MetricSpec {
        name: "custom_pool_used_mib",
        arg: MetricArg::Tag,
        help: "CUDA: memory the lab's own pool has handed out and not yet freed right after the tagged line's last execution, MiB",
        paced: true,
    },
    MetricSpec {
        name: "graph_mem_reserved_mib",
        arg: MetricArg::Tag,
        help: "CUDA: memory the device keeps for graphs (`CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT`: mapped for graph allocations, in use or not) right after the tagged line's last execution, MiB. Read once the run has made a graph",
        paced: true,
    },
    MetricSpec {
        name: "graph_mem_used_mib",
        arg: MetricArg::Tag,
        help: "CUDA: graph memory in use by graph allocations not yet freed (`CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT`) right after the tagged line's last execution, MiB",
        paced: true,
    },
    MetricSpec {
        name: "complete",
        arg: MetricArg::Tag,
        help: "1 when the event the tagged call asked about had completed (`clGetEventInfo` reading `CL_COMPLETE`, `cudaEventQuery` answering `cudaSuccess`), 0 when not (its first execution): what the driver said, not a timing",
        paced: true,
    },
    MetricSpec {
        name: "free_mib",
        arg: MetricArg::Tag,
        help: "the device's free memory the tagged `cudaMemGetInfo` answered (its first execution), MiB",
        paced: true,
    },
    MetricSpec {
        name: "elapsed_ms",
        arg: MetricArg::Tag,
        help: "the time between two events the tagged `cudaEventElapsedTime` answered (its first execution), ms",
        paced: false,
    },
    MetricSpec {
        name: "limit_mib",
        arg: MetricArg::Tag,
        help: "the device limit the tagged `cudaDeviceGetLimit` answered (its first execution), MiB (a stack size is per thread)",
        paced: true,
    },
    MetricSpec {
        name: "pattern",
        arg: MetricArg::Tag,
        help: "the share (0 to 1) of the words that hold the pattern kernel's values in what the tagged line read back (its first execution): a blocking `clEnqueueReadBuffer`, a `cudaMemcpy` to the host, or `verify h` of a host buffer",
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
    /// The other variants the expression reads a measurement of, each once, in
    /// order of first mention.
    pub fn other_variants(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        self.walk(&mut |e| {
            if let Expr::InVariant(_, v) = e
                && !out.contains(&v.as_str())
            {
                out.push(v);
            }
        });
        out
    }

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
            Expr::Neg(e) | Expr::Not(e) | Expr::InVariant(e, _) => e.walk(f),
            Expr::Bin(_, l, r) => {
                l.walk(f);
                r.walk(f);
            }
            Expr::Num(_) | Expr::Qty(..) | Expr::Var(_) | Expr::Metric { .. } => {}
        }
    }
}

/// What a claim's number is measured in, as far as mixing matters: sizes and
/// durations in their unit; counts, ratios and plain numbers are free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    Size(&'static str),
    Time(&'static str),
    Free,
}

impl Dim {
    /// A parameter's `unit` as a dimension: `B`, `KiB`, `MiB`, `GiB`, `us`, `ms`, `s`.
    pub fn of_unit(unit: &str) -> Dim {
        match unit {
            "B" => Dim::Size("B"),
            "KiB" => Dim::Size("KiB"),
            "MiB" => Dim::Size("MiB"),
            "GiB" => Dim::Size("GiB"),
            "us" => Dim::Time("us"),
            "ms" => Dim::Time("ms"),
            "s" => Dim::Time("s"),
            _ => Dim::Free,
        }
    }

    /// A metric's dimension, from its name's suffix.
    fn of_metric(name: &str) -> Dim {
        if name.ends_with("_mib") {
            Dim::Size("MiB")
        } else if name.ends_with("_ms") {
            Dim::Time("ms")
        } else {
            Dim::Free
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Dim::Size(u) | Dim::Time(u) => u,
            Dim::Free => "",
        }
    }
}

/// Two sides of a sum or comparison measured in different units, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mixed {
    pub left: String,
    pub left_unit: &'static str,
    pub right: String,
    pub right_unit: &'static str,
}

/// The first place `e` adds, subtracts or compares a size with a size in
/// another unit, or with a duration (`vram_mib(x) > size_b` where `size_b` is
/// in B). `param_unit` gives each parameter's `unit`. A product or quotient of
/// two measured values has no dimension this checks, so it is never flagged.
pub fn mixed_units(e: &Expr, param_unit: &dyn Fn(&str) -> Option<String>) -> Option<Mixed> {
    fn dim(
        e: &Expr,
        unit: &dyn Fn(&str) -> Option<String>,
        found: &mut Option<Mixed>,
    ) -> Option<Dim> {
        Some(match e {
            Expr::Num(_) => Dim::Free,
            Expr::Qty(_, unit) => Dim::of_unit(unit),
            Expr::Var(name) => match unit(name) {
                Some(u) => Dim::of_unit(&u),
                None => Dim::of_metric(name),
            },
            Expr::Metric { name, .. } => Dim::of_metric(name),
            Expr::Neg(x) | Expr::InVariant(x, _) => dim(x, unit, found)?,
            Expr::Not(x) => {
                dim(x, unit, found);
                Dim::Free
            }
            Expr::Bin(op, l, r) => {
                let (a, b) = (dim(l, unit, found), dim(r, unit, found));
                match op {
                    BinOp::And | BinOp::Or => Dim::Free,
                    BinOp::Mul => match (a?, b?) {
                        (Dim::Free, d) | (d, Dim::Free) => d,
                        _ => return None,
                    },
                    BinOp::Div => match (a?, b?) {
                        (d, Dim::Free) => d,
                        (x, y) if x == y => Dim::Free,
                        _ => return None,
                    },
                    _ => {
                        let (a, b) = (a?, b?);
                        let clash = a != Dim::Free && b != Dim::Free && a != b;
                        if clash && found.is_none() {
                            *found = Some(Mixed {
                                left: l.to_string(),
                                left_unit: a.unit(),
                                right: r.to_string(),
                                right_unit: b.unit(),
                            });
                        }
                        match op {
                            BinOp::Add | BinOp::Sub => {
                                if a == Dim::Free {
                                    b
                                } else {
                                    a
                                }
                            }
                            _ => Dim::Free,
                        }
                    }
                }
            }
        })
    }
    let mut found = None;
    dim(e, param_unit, &mut found);
    found
}

/// The unit a metric's values are in, from its name's suffix (`host_ms` →
/// `ms`, `vram_mib` → `MiB`); empty for a count.
pub fn metric_unit(name: &str) -> &'static str {
    Dim::of_metric(name).unit()
}

/// A unit a number in a claim may carry, and what it is worth in the unit
/// the metrics of its kind are in (`ms` for times, `MiB` for sizes).
pub fn claim_unit(unit: &str) -> Option<(f64, &'static str)> {
    Some(match unit {
        "us" | "µs" => (1e-3, "ms"),
        "ms" => (1.0, "ms"),
        "s" => (1e3, "ms"),
        "B" => (1.0 / (1024.0 * 1024.0), "MiB"),
        "KiB" => (1.0 / 1024.0, "MiB"),
        "MiB" => (1.0, "MiB"),
        "GiB" => (1024.0, "MiB"),
        _ => return None,
    })
}

impl std::fmt::Display for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expr::Num(n) => write!(f, "{n}"),
            Expr::Qty(n, unit) => write!(f, "{n} {unit}"),
            Expr::Var(v) => f.write_str(v),
            Expr::Metric { name, arg } => write!(f, "{name}({arg})"),
            Expr::InVariant(e, v) => write!(f, "{e} in variant {v}"),
            Expr::Neg(e) => write!(f, "-{e}"),
            Expr::Not(e) => write!(f, "not {e}"),
            Expr::Bin(op, l, r) => write!(f, "{l} {} {r}", op.symbol()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str, arg: &str) -> Box<Expr> {
        Box::new(Expr::Metric {
            name: name.into(),
            arg: arg.into(),
        })
    }

    fn var(v: &str) -> Box<Expr> {
        Box::new(Expr::Var(v.into()))
    }

    fn units(p: &str) -> Option<String> {
        match p {
            "size_b" => Some("B".into()),
            "size_mib" => Some("MiB".into()),
            "kernel_ms" => Some("ms".into()),
            "iterations" => Some("".into()),
            _ => None,
        }
    }

    /// A number with a unit has its unit's dimension: against a metric of
    /// the other kind it is a mistake, against one of its own it is not.
    #[test]
    fn a_quantity_is_checked_against_what_it_is_compared_with() {
        let time = Expr::Bin(BinOp::Lt, m("host_ms", "x"), Box::new(Expr::Qty(5.0, "ms")));
        assert!(mixed_units(&time, &units).is_none());
        let size = Expr::Bin(
            BinOp::Lt,
            m("host_ms", "x"),
            Box::new(Expr::Qty(5.0, "MiB")),
        );
        let mixed = mixed_units(&size, &units).unwrap();
        assert_eq!((mixed.left_unit, mixed.right_unit), ("ms", "MiB"));
        assert_eq!(size.to_string(), "host_ms(x) < 5 MiB");
    }

    #[test]
    fn a_size_in_bytes_against_mib_is_mixed_and_named() {
        let e = Expr::Bin(BinOp::Gt, m("vram_mib", "alloc"), var("size_b"));
        let mixed = mixed_units(&e, &units).expect("mixed");
        assert_eq!(
            (
                mixed.left.as_str(),
                mixed.left_unit,
                mixed.right.as_str(),
                mixed.right_unit
            ),
            ("vram_mib(alloc)", "MiB", "size_b", "B")
        );
        // A duration against a size, inside a sum.
        let sum = Expr::Bin(BinOp::Add, m("host_ms", "free"), var("size_mib"));
        assert!(mixed_units(&sum, &units).is_some());
    }

    #[test]
    fn same_units_scaled_by_numbers_and_ratios_are_not_mixed() {
        let scaled = Expr::Bin(
            BinOp::Lt,
            m("vram_mib", "after"),
            Box::new(Expr::Bin(
                BinOp::Mul,
                Box::new(Expr::Num(0.1)),
                var("size_mib"),
            )),
        );
        assert_eq!(mixed_units(&scaled, &units), None);
        let timed = Expr::Bin(BinOp::Gt, m("host_ms", "free"), var("kernel_ms"));
        assert_eq!(mixed_units(&timed, &units), None);
        let counted = Expr::Bin(BinOp::Eq, m("live", "events"), var("iterations"));
        assert_eq!(mixed_units(&counted, &units), None);
        // MiB per ms against MiB is a product of measured values: not judged.
        let rate = Expr::Bin(
            BinOp::Gt,
            Box::new(Expr::Bin(BinOp::Div, m("vram_mib", "a"), m("host_ms", "a"))),
            var("size_mib"),
        );
        assert_eq!(mixed_units(&rate, &units), None);
    }
}
