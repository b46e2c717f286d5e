//! What the frameworks inside a watched program say of their own memory:
//! PyTorch's, CuPy's and JAX's allocators keep device memory the program's
//! tensors no longer use, and only they know how much. Their figures arrive
//! as [`FrameworkEvent`]s (the startup hook reads them through the agent); the
//! run keeps the latest of each allocator, its highest, and the first
//! allocation a framework refused. Under `--torch-history` it also keeps what
//! PyTorch's own allocator said of its live tensors by line: the first look
//! and the highest of each allocator, and the look at its first refusal.

use std::collections::BTreeMap;

use gpulab_events::{AliveGroup, AliveMoment, Framework, FrameworkEvent, FrameworkSaid};

use super::live::HeldThen;

/// One allocator: a framework on one device of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Allocator {
    pub pid: u32,
    pub framework: Framework,
    pub device: u32,
}

/// An allocator's figures at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Figures {
    pub t_ns: u64,
    /// Bytes the program's tensors or arrays use.
    pub allocated: u64,
    /// Bytes the allocator holds from the driver, used or cached.
    pub reserved: u64,
    pub limit: Option<u64>,
}

impl Figures {
    /// What the allocator keeps that the program does not use.
    pub fn cached(&self) -> u64 {
        self.reserved.saturating_sub(self.allocated)
    }
}

/// A refused allocation, as the framework said it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub t_ns: u64,
    pub allocator: Allocator,
    pub asked: u64,
    pub free: u64,
    pub limit: u64,
    /// The allocator's latest figures before it refused, if it had said any.
    pub before: Option<Figures>,
    /// The refused thread's stack ([`crate::run::Run::stacks`]): the line of
    /// the program's own code that asked.
    pub stack: Option<u64>,
}

/// A framework's live tensors at one moment, grouped by the line of the
/// program's own code that allocated them, most bytes first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliveTaking {
    pub t_ns: u64,
    pub allocated: u64,
    pub groups: Vec<AliveGroup>,
    /// Tensors of lines the hook or the agent summed rather than listed.
    pub other_tensors: u64,
    pub other_bytes: u64,
    /// How long the look took; it began at `t_ns` less this.
    pub took_ns: u64,
}

/// An allocator's looks at its live tensors at its highest readings: the
/// first (what the growth is measured from) and the one with the most.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliveAtHighest {
    pub first: AliveTaking,
    pub highest: AliveTaking,
    /// How many looks the hook took.
    pub looks: u64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frameworks {
    latest: BTreeMap<Allocator, Figures>,
    /// Each allocator's reading with the most reserved (the latest at that value).
    highest: BTreeMap<Allocator, Figures>,
    first_refusal: Option<Refusal>,
    /// What the refused process held when the first refusal came.
    held_at_first_refusal: Vec<HeldThen>,
    refusals: u64,
    /// Frameworks the hook could not read, with the first reason it gave.
    unreadable: BTreeMap<Framework, String>,
    alive_at_highest: BTreeMap<Allocator, AliveAtHighest>,
    /// Each allocator's first look at a refusal.
    alive_at_refusal: BTreeMap<Allocator, AliveTaking>,
}

impl Frameworks {
    /// Folds one event in; true when what the allocators cache changed.
    pub fn apply(&mut self, e: &FrameworkEvent) -> bool {
        let allocator = Allocator {
            pid: e.pid,
            framework: e.framework,
            device: e.device,
        };
        match &e.said {
            FrameworkSaid::Memory {
                allocated,
                reserved,
                limit,
            } => {
                let now = Figures {
                    t_ns: e.t_ns,
                    allocated: *allocated,
                    reserved: *reserved,
                    limit: *limit,
                };
                let highest = self.highest.entry(allocator).or_insert(now);
                if now.reserved >= highest.reserved {
                    *highest = now;
                }
                let before = self.latest.insert(allocator, now);
                before.is_none_or(|b| b.cached() != now.cached())
            }
            FrameworkSaid::Refused {
                asked,
                free,
                limit,
                stack,
            } => {
                self.refusals += 1;
                if self.first_refusal.is_none() {
                    self.first_refusal = Some(Refusal {
                        t_ns: e.t_ns,
                        allocator,
                        asked: *asked,
                        free: *free,
                        limit: *limit,
                        before: self.latest.get(&allocator).copied(),
                        stack: *stack,
                    });
                }
                false
            }
            FrameworkSaid::Unreadable { reason } => {
                self.unreadable
                    .entry(allocator.framework)
                    .or_insert_with(|| reason.clone());
                false
            }
            FrameworkSaid::Alive {
                moment,
                allocated,
                groups,
                other_tensors,
                other_bytes,
                took_ns,
            } => {
                let taking = AliveTaking {
                    t_ns: e.t_ns,
                    allocated: *allocated,
                    groups: groups.clone(),
                    other_tensors: *other_tensors,
                    other_bytes: *other_bytes,
                    took_ns: *took_ns,
                };
                match moment {
                    AliveMoment::Highest => match self.alive_at_highest.get_mut(&allocator) {
                        Some(a) => {
                            a.looks += 1;
                            if taking.allocated >= a.highest.allocated {
                                a.highest = taking;
                            }
                        }
                        None => {
                            self.alive_at_highest.insert(
                                allocator,
                                AliveAtHighest {
                                    first: taking.clone(),
                                    highest: taking,
                                    looks: 1,
                                },
                            );
                        }
                    },
                    AliveMoment::Refused => {
                        self.alive_at_refusal.entry(allocator).or_insert(taking);
                    }
                }
                false
            }
        }
    }

    /// Each allocator's looks at its live tensors at its highest readings.
    pub fn alive_at_highest(&self) -> impl Iterator<Item = (&Allocator, &AliveAtHighest)> {
        self.alive_at_highest.iter()
    }

    /// The allocator's live tensors as it first refused, when the hook looked.
    pub fn alive_at_refusal(&self, allocator: &Allocator) -> Option<&AliveTaking> {
        self.alive_at_refusal.get(allocator)
    }

    /// Bytes all allocators keep cached, by their latest figures.
    pub fn cached(&self) -> u64 {
        self.latest.values().map(Figures::cached).sum()
    }

    /// Each allocator's latest figures.
    pub fn latest(&self) -> impl Iterator<Item = (&Allocator, &Figures)> {
        self.latest.iter()
    }

    /// Each allocator's figures at its highest reserved.
    pub fn highest(&self) -> impl Iterator<Item = (&Allocator, &Figures)> {
        self.highest.iter()
    }

    /// The first allocation a framework refused.
    pub fn first_refusal(&self) -> Option<&Refusal> {
        self.first_refusal.as_ref()
    }

    /// What the refused process held at the first refusal, most bytes first.
    pub fn held_at_first_refusal(&self) -> &[HeldThen] {
        &self.held_at_first_refusal
    }

    /// Keeps what the refused process held at the first refusal: the
    /// objects the run had then, said by whoever folds them.
    pub(super) fn held_then(&mut self, held: Vec<HeldThen>) {
        self.held_at_first_refusal = held;
    }

    /// How many allocations the frameworks refused.
    pub fn refusals(&self) -> u64 {
        self.refusals
    }

    /// Frameworks the hook could not read, and why.
    pub fn unreadable(&self) -> impl Iterator<Item = (&Framework, &String)> {
        self.unreadable.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.latest.is_empty() && self.first_refusal.is_none()
    }

    /// The frameworks that said anything, each once.
    pub fn names(&self) -> Vec<Framework> {
        let mut names: Vec<Framework> = self.latest.keys().map(|a| a.framework).collect();
        names.extend(self.first_refusal.map(|r| r.allocator.framework));
        names.sort();
        names.dedup();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(t_ns: u64, pid: u32, allocated: u64, reserved: u64) -> FrameworkEvent {
        FrameworkEvent {
            t_ns,
            pid,
            framework: Framework::Pytorch,
            device: 0,
            said: FrameworkSaid::Memory {
                allocated,
                reserved,
                limit: None,
            },
        }
    }

    #[test]
    fn the_cache_is_reserved_less_allocated_summed_over_allocators() {
        let mut f = Frameworks::default();
        assert!(f.apply(&memory(1, 10, 100, 160)));
        assert!(f.apply(&memory(2, 11, 5, 5)));
        assert_eq!(f.cached(), 60);
        // Same cache, other figures: nothing to compose again.
        assert!(!f.apply(&memory(3, 10, 110, 170)));
        assert!(f.apply(&memory(4, 10, 170, 170)));
        assert_eq!(f.cached(), 0);
        let highest: Vec<_> = f.highest().map(|(a, h)| (a.pid, h.t_ns)).collect();
        assert_eq!(highest, [(10, 4), (11, 2)]);
    }

    #[test]
    fn the_first_refusal_keeps_the_figures_said_before_it() {
        let mut f = Frameworks::default();
        f.apply(&memory(1, 10, 100, 160));
        let refused = |t_ns| FrameworkEvent {
            t_ns,
            pid: 10,
            framework: Framework::Pytorch,
            device: 0,
            said: FrameworkSaid::Refused {
                asked: 8 << 30,
                free: 1 << 30,
                limit: 140 << 30,
                stack: Some(7),
            },
        };
        f.apply(&refused(5));
        f.apply(&refused(6));
        let r = f.first_refusal().expect("refused");
        assert_eq!(
            (r.t_ns, r.asked, r.before.map(|b| b.reserved), r.stack),
            (5, 8 << 30, Some(160), Some(7))
        );
        assert_eq!(f.refusals(), 2);
        assert_eq!(f.names(), [Framework::Pytorch]);
    }

    fn alive(t_ns: u64, moment: AliveMoment, bytes: &[u64]) -> FrameworkEvent {
        FrameworkEvent {
            t_ns,
            pid: 10,
            framework: Framework::Pytorch,
            device: 0,
            said: FrameworkSaid::Alive {
                moment,
                allocated: bytes.iter().sum(),
                groups: bytes
                    .iter()
                    .map(|b| AliveGroup {
                        at: None,
                        tensors: 1,
                        bytes: *b,
                    })
                    .collect(),
                other_tensors: 0,
                other_bytes: 0,
                took_ns: 0,
            },
        }
    }

    #[test]
    fn the_first_look_and_the_highest_are_kept_and_the_first_at_a_refusal() {
        let mut f = Frameworks::default();
        f.apply(&alive(1, AliveMoment::Highest, &[10]));
        f.apply(&alive(2, AliveMoment::Highest, &[30, 10]));
        // Less than the highest (a look is taken as a reading rises, the
        // events of two threads may cross): the highest stays.
        f.apply(&alive(3, AliveMoment::Highest, &[20]));
        f.apply(&alive(4, AliveMoment::Refused, &[50]));
        f.apply(&alive(5, AliveMoment::Refused, &[60]));
        let (a, h) = f.alive_at_highest().next().expect("looked");
        assert_eq!((h.first.t_ns, h.highest.t_ns, h.looks), (1, 2, 3));
        assert_eq!(h.highest.allocated, 40);
        assert_eq!(f.alive_at_refusal(a).map(|r| r.t_ns), Some(4));
    }
}
