//! The run's part that only a watched program has: its processes' agents as
//! they attached and detached, the native stacks of its calls and who made
//! them, what its frameworks said, and its processes per rank and GPU.

use std::collections::{BTreeMap, BTreeSet};

use crate::trace::{AgentEvent, AgentState, Frame, FrameworkEvent, GpuReading, Stack};

use super::frameworks::Frameworks;
use super::owners::Owner;
use super::ranks::Ranks;

#[derive(Debug, Clone, Default)]
pub(super) struct Program {
    /// Agents in the program's processes, as they attached and detached.
    pub(super) agents: Vec<AgentEvent>,
    /// Processes whose agent attached and has not detached yet.
    running: BTreeSet<u32>,
    /// When the latest agent detached.
    last_detached: Option<u64>,
    /// Native call stacks, by id (`watch --backtrace`).
    pub(super) stacks: BTreeMap<u64, Vec<Frame>>,
    /// Who made the objects of each stack, by its calling frame.
    pub(super) owners: BTreeMap<u64, Owner>,
    /// What the frameworks inside the program said of their memory.
    pub(super) frameworks: Frameworks,
    /// The program per process (its rank) and per GPU.
    pub(super) ranks: Ranks,
    /// Counts every change of what a composition reads of the program.
    changes: u64,
    /// Per process, the stretches in which its agent did not watch kernel
    /// launches.
    pub(super) launches: BTreeMap<u32, UnwatchedLaunches>,
}

/// The stretches in which a process's agent did not watch its kernel
/// launches (they repeated functions it had seen): launches in them are
/// neither recorded nor counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnwatchedLaunches {
    /// Stretches begun.
    pub spells: u32,
    /// The time in those that ended, ns.
    pub ended_ns: u64,
    /// When the stretch still open began.
    pub since: Option<u64>,
}

impl UnwatchedLaunches {
    /// Launches watched from `t_ns` on, or not.
    fn watching(&mut self, watching: bool, t_ns: u64) {
        match (watching, self.since) {
            (false, None) => {
                self.spells += 1;
                self.since = Some(t_ns);
            }
            (true, Some(since)) => {
                self.ended_ns = self.ended_ns.saturating_add(t_ns.saturating_sub(since));
                self.since = None;
            }
            // Said twice (a process's images each say): the first holds.
            _ => {}
        }
    }

    /// The time launches went unwatched up to `t_ns`, ns.
    pub fn unwatched_ns(&self, t_ns: u64) -> u64 {
        self.ended_ns
            .saturating_add(self.since.map_or(0, |s| t_ns.saturating_sub(s)))
    }
}

impl Program {
    /// Changes so far of what the program tells who holds memory.
    pub(super) fn changes(&self) -> u64 {
        self.changes
    }

    pub(super) fn agent(&mut self, a: &AgentEvent) {
        match &a.state {
            // Not kept: a long run says it a few times a second.
            AgentState::Launches { watching, .. } => {
                let spells = self.launches.entry(a.pid).or_default();
                spells.watching(*watching, a.t_ns);
                return;
            }
            AgentState::Detached { .. } => {
                // What the process did not watch ends with it.
                if let Some(spells) = self.launches.get_mut(&a.pid) {
                    spells.watching(true, a.t_ns);
                }
                self.running.remove(&a.pid);
                if self.ranks.detached(a.pid, a.t_ns) {
                    self.changes += 1;
                }
                self.last_detached = self.last_detached.max(Some(a.t_ns));
            }
            other => {
                self.running.insert(a.pid);
                if let AgentState::Attached { exe, rank, .. } = other {
                    self.ranks.attached(a.pid, a.parent_pid, exe, rank.as_ref());
                }
            }
        }
        self.agents.push(a.clone());
    }

    /// A stack's frames; `held`: whether objects of a size made by the stack
    /// of that id are held now (then a new owner changes who holds memory).
    pub(super) fn stack(&mut self, s: &Stack, held: impl FnOnce(u64) -> bool) {
        let owner = Owner::of(&s.frames);
        if self.owners.insert(s.id, owner) != Some(owner) && held(s.id) {
            self.changes += 1;
        }
        self.stacks.insert(s.id, s.frames.clone());
    }

    /// Folds what a framework said; `held` gives what the refused process
    /// holds, asked only at the first refusal.
    pub(super) fn framework(
        &mut self,
        f: &FrameworkEvent,
        held: impl FnOnce(u32) -> Vec<super::live::HeldThen>,
    ) {
        let first_refusal = self.frameworks.refusals() == 0
            && matches!(f.said, gpulab_events::FrameworkSaid::Refused { .. });
        if self.frameworks.apply(f) {
            self.changes += 1;
        }
        if first_refusal {
            self.frameworks.held_then(held(f.pid));
            self.changes += 1;
        }
    }

    /// A reading of the GPUs: the processes whose memory peaked at it.
    pub(super) fn gpu_reading(&mut self, g: &GpuReading) -> Vec<u32> {
        let gone = self.ranks.gone_by(u64::MAX).len();
        let peaked = self.ranks.reading(g);
        if self.ranks.gone_by(u64::MAX).len() != gone {
            self.changes += 1;
        }
        peaked
    }

    /// When the program's last process said its last record: every process
    /// whose agent attached has detached. None while one runs, and for a lab.
    pub(super) fn gone(&self) -> Option<u64> {
        self.last_detached.filter(|_| self.running.is_empty())
    }

    /// Whether `t_ns` is after the program's last process detached.
    pub(super) fn gone_by(&self, t_ns: u64) -> bool {
        !self.agents.is_empty() && self.gone().is_some_and(|gone| t_ns > gone)
    }
}
