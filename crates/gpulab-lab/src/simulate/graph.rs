//! CUDA graphs in the simulator: what each graph's nodes name, the snapshot an
//! exec takes of them, and the allocations alloc nodes make. A graph keeps what
//! its nodes name; an exec keeps its own copy from the moment it is made, so the
//! graph may be destroyed (or grow) without changing it. An alloc node's buffer
//! has memory only from a launch to its free: a free node of the same graph (then
//! only that graph's nodes between the two may name it), or `cudaFree` /
//! `cudaFreeAsync` after the launch. A second launch while it is still allocated
//! is the driver's `CUDA_ERROR_INVALID_VALUE`.

use super::{Handle, Res, Simulator};
use crate::api::{Api, ApiSpec};
use crate::mistake::{Mistake, Problem, Span};
use crate::model::Arg;
use crate::raw::Sp;
use crate::script::{RawArg, RawStmt};

/// The allocation an alloc node names.
#[derive(Debug, Clone)]
pub(super) struct GraphAlloc {
    graph: String,
    node_line: u32,
    /// The free node of its own graph that frees it, if any.
    free_node: Option<u32>,
    state: AllocState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AllocState {
    /// No launch has mapped it yet.
    NotLaunched,
    /// The launch on this line allocated it, and nothing freed it since.
    Live(u32),
    /// Freed on this line: by `cudaFree`/`cudaFreeAsync`, or by the launch
    /// whose graph frees it.
    Freed(u32),
}

/// What a graph's nodes name (or an exec's copy of them).
#[derive(Debug, Clone, Default)]
pub(super) struct Nodes {
    /// Allocations its alloc nodes make.
    allocs: Vec<String>,
    /// Allocations its free nodes free.
    frees: Vec<String>,
    /// Buffers its memset nodes name, with each node's line.
    uses: Vec<(String, u32)>,
    /// The live exec made from it, and the line of `cudaGraphInstantiate`.
    exec: Option<(String, u32)>,
}

impl Nodes {
    fn has_memory_nodes(&self) -> bool {
        !self.allocs.is_empty() || !self.frees.is_empty()
    }
}

fn name_at(args: &[Arg], i: usize) -> Option<String> {
    match args.get(i) {
        Some(Arg::Handle(n)) => Some(n.clone()),
        _ => None,
    }
}

fn span_at(raw: &[Sp<RawArg>], i: usize) -> Span {
    raw.get(i).map_or(0..0, |a| a.span.clone())
}

impl Simulator<'_> {
    fn alloc_of(&self, name: &str) -> Option<&GraphAlloc> {
        self.handles.get(name).and_then(|h| h.alloc.as_ref())
    }

    fn alloc_mut(&mut self, name: &str) -> Option<&mut GraphAlloc> {
        self.handles.get_mut(name).and_then(|h| h.alloc.as_mut())
    }

    /// The exec made from graph `g` that still lives, with its line.
    fn live_exec(&self, g: &str) -> Option<(String, u32)> {
        let (e, at) = self.graphs.get(g)?.exec.clone()?;
        let alive = self.handles.get(&e).is_some_and(|h| h.refs > 0);
        alive.then_some((e, at))
    }

    /// Checks a call against the graphs' state and moves that state on. A line
    /// marked `# expect-error` is reported nothing; a launch it marks changes no
    /// allocation when it breaks a rule (the driver refuses it).
    pub(super) fn graph_edges(
        &mut self,
        s: &RawStmt,
        line: u32,
        spec: &ApiSpec,
        raw: &[Sp<RawArg>],
        args: &[Arg],
    ) -> Res<()> {
        let mistake = match spec.api {
            Api::CudaGraphAddMemAllocNode
            | Api::CudaGraphAddMemsetNode
            | Api::CudaGraphAddMemFreeNode => self.node(line, spec.api, raw, args),
            Api::CudaGraphInstantiate => self.instantiate(raw, args),
            Api::CudaGraphLaunch => self.launch(s, line, raw, args),
            Api::CudaGraphExecDestroy => {
                if let Some(e) = name_at(args, 0)
                    && let Some(g) = self.execs.get(&e).and_then(|x| x.exec.clone())
                    && let Some(nodes) = self.graphs.get_mut(&g.0)
                    && nodes.exec.as_ref().is_some_and(|(x, _)| *x == e)
                {
                    nodes.exec = None;
                }
                None
            }
            Api::CudaFree | Api::CudaFreeAsync => self.free(line, raw, args),
            _ => self.stream_use(line, raw, args),
        };
        match mistake {
            Some(p) if !s.expect_error => Err(p),
            _ => Ok(()),
        }
    }

    /// A node added to graph `args[0]`: the exec already made would not see it;
    /// a memset or free node of an allocation its graph already frees comes too
    /// late; a free node frees an allocation of its own graph only.
    fn node(&mut self, line: u32, api: Api, raw: &[Sp<RawArg>], args: &[Arg]) -> Option<Problem> {
        let g = name_at(args, 0)?;
        if let Some((exec, at)) = self.live_exec(&g) {
            return Some(Problem::new(
                span_at(raw, 0),
                Mistake::NodeAfterInstantiate {
                    graph: g,
                    exec,
                    line: at,
                },
            ));
        }
        let b = name_at(args, 1)?;
        let own = self.alloc_of(&b).filter(|a| a.graph == g).cloned();
        if let Some(at) = own.as_ref().and_then(|a| a.free_node) {
            return Some(Problem::new(
                span_at(raw, 1),
                Mistake::GraphAllocFreedInGraph { name: b, line: at },
            ));
        }
        match api {
            Api::CudaGraphAddMemFreeNode => {
                if own.is_none() {
                    return Some(Problem::new(
                        span_at(raw, 1),
                        Mistake::FreeNodeNotOwn { name: b, graph: g },
                    ));
                }
                if let Some(a) = self.alloc_mut(&b) {
                    a.free_node = Some(line);
                }
                self.graphs.entry(g).or_default().frees.push(b);
            }
            _ => self.graphs.entry(g).or_default().uses.push((b, line)),
        }
        None
    }

    /// A graph with memory nodes has one exec at a time.
    fn instantiate(&self, raw: &[Sp<RawArg>], args: &[Arg]) -> Option<Problem> {
        let g = name_at(args, 0)?;
        let (exec, at) = self.live_exec(&g)?;
        if !self.graphs.get(&g)?.has_memory_nodes() {
            return None;
        }
        Some(Problem::new(
            span_at(raw, 0),
            Mistake::InstantiatedTwice {
                graph: g,
                exec,
                line: at,
            },
        ))
    }

    /// A launch maps the exec's allocations (none may still be allocated from an
    /// earlier launch), needs every other buffer its nodes name alive, and frees
    /// what its free nodes free.
    fn launch(
        &mut self,
        s: &RawStmt,
        line: u32,
        raw: &[Sp<RawArg>],
        args: &[Arg],
    ) -> Option<Problem> {
        let e = name_at(args, 0)?;
        let nodes = self.execs.get(&e)?.clone();
        let span = span_at(raw, 0);
        let problem = nodes
            .allocs
            .iter()
            .find_map(|a| match self.alloc_of(a)?.state {
                AllocState::Live(at) => Some(Mistake::RelaunchWithLiveAlloc {
                    exec: e.clone(),
                    name: a.clone(),
                    line: at,
                }),
                _ => None,
            })
            .or_else(|| {
                nodes
                    .uses
                    .iter()
                    .filter(|(b, _)| !nodes.allocs.contains(b))
                    .find_map(|(b, node_line)| self.dead_in_launch(&e, b, *node_line))
            });
        if let Some(m) = problem {
            return Some(Problem::new(span, m));
        }
        if s.expect_error {
            return None;
        }
        for a in &nodes.allocs {
            let freed = nodes.frees.contains(a);
            if let Some(alloc) = self.alloc_mut(a) {
                alloc.state = if freed {
                    AllocState::Freed(line)
                } else {
                    AllocState::Live(line)
                };
            }
        }
        None
    }

    /// Why buffer `b`, named by exec `e`'s node of `node_line`, has no memory
    /// at the launch; `None` when it has.
    fn dead_in_launch(&self, e: &str, b: &str, node_line: u32) -> Option<Mistake> {
        let h: &Handle = self.handles.get(b)?;
        let released = match &h.alloc {
            Some(a) => match a.state {
                AllocState::Live(_) => return None,
                AllocState::Freed(at) => at,
                AllocState::NotLaunched => {
                    return Some(Mistake::GraphAllocNotLaunched {
                        name: b.to_owned(),
                        node_line: a.node_line,
                    });
                }
            },
            None if h.refs > 0 => return None,
            None => h.released_at?,
        };
        Some(Mistake::GraphNamesDead {
            exec: e.to_owned(),
            name: b.to_owned(),
            node_line,
            line: released,
        })
    }

    /// `cudaFree`/`cudaFreeAsync` of an allocation: allowed once a launch has
    /// mapped it, and only when its graph does not free it itself.
    fn free(&mut self, line: u32, raw: &[Sp<RawArg>], args: &[Arg]) -> Option<Problem> {
        let b = name_at(args, 0)?;
        let a = self.alloc_of(&b)?.clone();
        let span = span_at(raw, 0);
        let mistake = match (a.free_node, a.state) {
            (Some(at), _) => Mistake::GraphAllocFreedInGraph { name: b, line: at },
            (None, AllocState::Live(_)) => {
                if let Some(a) = self.alloc_mut(&b) {
                    a.state = AllocState::Freed(line);
                }
                return None;
            }
            (None, AllocState::NotLaunched) => Mistake::GraphAllocNotLaunched {
                name: b,
                node_line: a.node_line,
            },
            (None, AllocState::Freed(at)) => Mistake::DoubleRelease {
                name: b,
                line: at,
                earlier_iteration: at >= line,
            },
        };
        Some(Problem::new(span, mistake))
    }

    /// Any other call (a memset, a launch, a copy on a stream) may name an
    /// allocation only while a launch has it allocated.
    fn stream_use(&self, line: u32, raw: &[Sp<RawArg>], args: &[Arg]) -> Option<Problem> {
        args.iter().enumerate().find_map(|(i, arg)| {
            let Arg::Handle(b) = arg else { return None };
            let a = self.alloc_of(b)?;
            let mistake = match (a.state, a.free_node) {
                (AllocState::Live(_), _) => return None,
                (AllocState::NotLaunched, _) => Mistake::GraphAllocNotLaunched {
                    name: b.clone(),
                    node_line: a.node_line,
                },
                (AllocState::Freed(_), Some(at)) => Mistake::GraphAllocFreedInGraph {
                    name: b.clone(),
                    line: at,
                },
                (AllocState::Freed(at), None) => Mistake::UseAfterRelease {
                    name: b.clone(),
                    line: at,
                    earlier_iteration: at >= line,
                },
            };
            Some(Problem::new(span_at(raw, i), mistake))
        })
    }

    /// After a call's effect: a new graph starts with no nodes, an alloc node's
    /// name becomes its allocation, and an exec copies its graph's nodes.
    pub(super) fn graph_made(
        &mut self,
        spec: &ApiSpec,
        line: u32,
        bind: Option<&Sp<String>>,
        args: &[Arg],
    ) {
        let Some(b) = bind.map(|b| b.value.clone()) else {
            return;
        };
        match spec.api {
            Api::CudaGraphCreate => {
                self.graphs.insert(b, Nodes::default());
            }
            Api::CudaGraphAddMemAllocNode => {
                let Some(g) = name_at(args, 0) else { return };
                if let Some(h) = self.handles.get_mut(&b) {
                    h.alloc = Some(GraphAlloc {
                        graph: g.clone(),
                        node_line: line,
                        free_node: None,
                        state: AllocState::NotLaunched,
                    });
                }
                self.graphs.entry(g).or_default().allocs.push(b);
            }
            Api::CudaGraphInstantiate => {
                let Some(g) = name_at(args, 0) else { return };
                let mut copy = self.graphs.get(&g).cloned().unwrap_or_default();
                // The exec's own `exec` names its graph, for its destroy.
                copy.exec = Some((g.clone(), line));
                self.execs.insert(b.clone(), copy);
                self.graphs.entry(g).or_default().exec = Some((b, line));
            }
            _ => {}
        }
    }
}
