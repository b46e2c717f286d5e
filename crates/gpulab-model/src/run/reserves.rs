//! What an object whose size its making call does not say holds of the
//! process's memory (a context, a module, a queue, a stream): the step in the
//! process's memory across the call that made it, less the sized objects made
//! or let go meanwhile. Measured from the readings the run already has, never
//! guessed: a step without a reading on each side stays unmeasured, and a step
//! two such objects share (made with no reading between them) is said as
//! theirs together.

use std::collections::VecDeque;

use crate::trace::ObjKind;

/// Readings kept to find the one before a call that arrives after it.
const READINGS_KEPT: usize = 4096;
/// Sized objects a window can take into account; a window crowded past this
/// stays unmeasured.
const SIZED_KEPT: usize = 64;
/// Windows a reading or a sized object looks back over.
const OPEN_WINDOWS: usize = 64;
/// The unit NVML counts a process's device memory in, and the driver maps
/// it in: 2 MiB.
pub(crate) const PAGE: u64 = 2 << 20;
/// How long past a window's end reading a sized object still counts for it.
const SIZED_SLACK_NS: u64 = 50_000_000;

/// The kinds whose making call says no size, yet which hold memory of their own.
pub fn unsized_kind(kind: ObjKind) -> bool {
    matches!(
        kind,
        ObjKind::Context | ObjKind::Program | ObjKind::Queue | ObjKind::Stream
    )
}

/// The kinds whose making call's size is device memory, as NVML counts a
/// process's: not the unsized ones, not pinned host memory
/// (`cuMemHostAlloc`), which is the host's, and not managed memory, which
/// the driver moves between the two and NVML counts in no process's figure.
pub fn device_sized_kind(kind: ObjKind) -> bool {
    !unsized_kind(kind) && !matches!(kind, ObjKind::HostBuffer | ObjKind::Managed)
}

/// One measurement: the objects made in it, their making calls' span, and the
/// readings on each side.
#[derive(Debug, Clone, PartialEq)]
struct Window {
    ids: Vec<u64>,
    begin_ns: u64,
    end_ns: u64,
    /// The latest reading at or before `begin_ns`: (time, bytes).
    before: Option<(u64, u64)>,
    /// The first reading at or after `end_ns`.
    after: Option<(u64, u64)>,
    /// Sized objects made (+bytes) or let go (-bytes) since `begin_ns`: (time, bytes).
    sized: Vec<(u64, i64)>,
    crowded: bool,
    /// When its context went, or the last of its objects (destroyed, or let
    /// go where no agent watches deletion): no reading from then on is its
    /// "after" side, which would count the memory given back.
    gone_ns: Option<u64>,
    /// Its objects gone so far.
    gone: Vec<u64>,
    /// Each object's making call: (id, begin, end).
    calls: Vec<(u64, u64, u64)>,
    /// Whether the memory went when they went ([`Window::went`]).
    went: Went,
}

/// What the readings around a measurement's end said of its memory: NVIDIA's
/// OpenCL deletes a released context at once and keeps its memory until the
/// process exits (Hands On OpenCL's `vadd_abc` on the H200: 518 MiB, all of
/// it unexplained at exit while its reserve was counted as gone).
#[derive(Debug, Clone, Default, PartialEq)]
struct Went {
    /// The latest reading at or before the end: (time, bytes).
    before: Option<(u64, u64)>,
    /// The first reading after it, and by how much the memory fell between
    /// the two beyond what sized objects made and let go meanwhile.
    after: Option<(u64, u64)>,
    fell: Option<i64>,
    /// The first later reading at which the memory fell by half the reserve
    /// or more below the one after the end (sized objects counted out).
    fell_later: Option<u64>,
    /// Whether the next reading after `after` held what it held, to a page
    /// (sized objects counted out): the memory stood still after the
    /// objects went, so `after` was taken after no teardown. None until
    /// that reading.
    steady: Option<bool>,
}

impl Went {
    /// A reading of the process's memory (`t_ns`, `bytes`) beside a
    /// measurement whose objects went at `gone`: the last one at or before
    /// it, the first after it (and by how much the memory fell between,
    /// `sized_between` counted out), whether the next held still, and the
    /// first later one at which the memory fell by half of `reserve` (its
    /// bytes, given only once the rest is known). True when it changed.
    fn reading(
        &mut self,
        gone: u64,
        (t_ns, bytes): (u64, u64),
        sized_between: impl Fn(u64, u64) -> i64,
        reserve: Option<u64>,
    ) -> bool {
        if t_ns <= gone {
            if self.before.is_none_or(|(b, _)| t_ns >= b) && self.after.is_none() {
                self.before = Some((t_ns, bytes));
                return true;
            }
            return false;
        }
        match (self.before, self.after) {
            (Some((bt, bb)), None) => {
                self.after = Some((t_ns, bytes));
                self.fell = Some(bb as i64 + sized_between(bt, t_ns) - bytes as i64);
                true
            }
            (_, Some((at, ab))) if t_ns > at && self.steady.is_none() => {
                let moved = ab as i64 + sized_between(at, t_ns) - bytes as i64;
                self.steady = Some(moved.unsigned_abs() <= PAGE);
                true
            }
            (_, Some((at, ab))) if t_ns > at && self.fell_later.is_none() => {
                let Some(r) = reserve.filter(|r| *r > 0) else {
                    return false;
                };
                let fell = ab as i64 + sized_between(at, t_ns) - bytes as i64;
                if fell * 2 >= r as i64 {
                    self.fell_later = Some(t_ns);
                    return true;
                }
                false
            }
            _ => false,
        }
    }

    /// Whether the memory of a reserve of `bytes` stayed after its objects
    /// went: the first reading after fell by less than half of it, and from
    /// when until when.
    fn kept(&self, bytes: u64) -> Option<Kept> {
        let fell = self.fell?;
        let (from_ns, _) = self.after?;
        (bytes > 0 && fell * 2 < bytes as i64).then_some(Kept {
            from_ns,
            until_ns: self.fell_later,
        })
    }

    /// Whether a side of it was taken strictly inside `begin..end`.
    fn sided_within(&self, begin: u64, end: u64) -> bool {
        let inside = |r: Option<(u64, u64)>| r.is_some_and(|(t, _)| t > begin && t < end);
        inside(self.before) || inside(self.after)
    }

    /// The moments its memory may begin or end being kept: the reading
    /// after the end, and the one at which it fell.
    fn edges(&self) -> impl Iterator<Item = u64> {
        self.after
            .map(|(t, _)| t)
            .into_iter()
            .chain(self.fell_later)
    }

    /// Whether the later reading it waits for is the one that says the
    /// memory fell (the only use of the reserve's bytes).
    fn waits_to_fall(&self) -> bool {
        self.after.is_some() && self.steady.is_some() && self.fell_later.is_none()
    }
}

/// A reserve the agent measured across its call, and what the readings
/// said after its objects went.
#[derive(Debug, Clone, PartialEq)]
struct Direct {
    reserve: Reserve,
    gone: Vec<u64>,
    gone_ns: Option<u64>,
    went: Went,
}

/// The readings kept, and the sized objects and calls that tell which of
/// them can be a side of a measurement.
struct Sides<'a> {
    readings: &'a VecDeque<(u64, u64)>,
    sized_log: &'a VecDeque<(u64, i64)>,
    sized_calls: &'a VecDeque<(u64, u64)>,
}

impl Sides<'_> {
    /// What the readings so far say of objects that went at `gone`, those
    /// after it included (the sampler's run ahead of the agents' records:
    /// PoCL's `vadd_chain` read at 63.4 ms, then its context's deletion at
    /// 63.3 arrived); `reserve` as in [`Went::reading`]. A reading taken
    /// while a sized call ran is no side of it.
    fn went(&self, gone: u64, reserve: impl Fn(&Went) -> Option<u64>) -> Went {
        let usable = self
            .readings
            .iter()
            .filter(|(t, _)| !while_sized(self.sized_calls, *t));
        let mut went = Went {
            before: usable
                .clone()
                .filter(|(t, _)| *t <= gone)
                .max_by_key(|(t, _)| *t)
                .copied(),
            ..Went::default()
        };
        // Only those after it are taken in order (few: what went is read
        // again near its end).
        let mut after: Vec<(u64, u64)> = usable.filter(|(t, _)| *t > gone).copied().collect();
        after.sort_unstable();
        for (t, bytes) in after {
            let r = reserve(&went);
            went.reading(
                gone,
                (t, bytes),
                |a, b| sized_between(self.sized_log, a, b),
                r,
            );
        }
        went
    }
}

impl Direct {
    /// What went with its objects at `gone`, read again from every reading.
    fn went_from(&mut self, gone: u64, sides: &Sides) {
        let bytes = self.reserve.bytes;
        self.went = sides.went(gone, |w| w.waits_to_fall().then_some(bytes));
    }
}

/// Kept by the driver after its objects went: the memory did not fall when
/// they did, from the first reading after their end until `until_ns` (the
/// reading at which it fell; None: not yet).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Kept {
    pub from_ns: u64,
    pub until_ns: Option<u64>,
}

impl Kept {
    /// Whether the driver kept it at `t_ns`.
    pub fn at(&self, t_ns: u64) -> bool {
        t_ns >= self.from_ns && self.until_ns.is_none_or(|u| t_ns < u)
    }
}

/// A measured reserve.
#[derive(Debug, Clone, PartialEq)]
pub struct Reserve {
    /// The objects it belongs to, together.
    pub ids: Vec<u64>,
    pub bytes: u64,
    /// The readings it was measured between (the call's span, when the
    /// agent measured it).
    pub from_ns: u64,
    pub to_ns: u64,
    /// The reading it was measured from (0 for the agent's).
    pub from_bytes: u64,
    /// Measured by the agent across the call, not from the sampler's readings.
    pub by_agent: bool,
    /// Code loaded into the object (a context) at a function's first launch.
    pub at_launch: bool,
    /// Kept by the driver after its objects went, while readings say so.
    pub kept: Option<Kept>,
}

/// Every reserve of the run, measured as the readings and objects arrive.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reserves {
    windows: Vec<Window>,
    /// Reserves the agent measured itself, reading the device's free memory
    /// right before and after the making call (or a function's first launch,
    /// which loads its code): they need no reading of the sampler's.
    direct: Vec<Direct>,
    readings: VecDeque<(u64, u64)>,
    /// The latest sized objects made or deleted, to count into a window that
    /// opens after they arrived: (time, bytes).
    sized_log: VecDeque<(u64, i64)>,
    /// The spans of the latest calls that made or freed a sized object: a
    /// reading that arrives after such a call and was taken while it ran is
    /// no side of any measurement ([`Reserves::sized_call`]).
    sized_calls: VecDeque<(u64, u64)>,
    /// When the device memory moved by an amount the run cannot know: no
    /// step across such a moment measures anything ([`Reserves::unsure`]).
    unsure: VecDeque<u64>,
    /// The moments at which a reserve's memory began or ended being kept
    /// after its objects went: a composition holds for a later reading only
    /// if none lies between them ([`Reserves::kept_changes_between`]).
    kept_edges: std::collections::BTreeSet<u64>,
    /// Which of `direct` have gone, in the order they went.
    direct_gone: Vec<usize>,
}

/// Sized calls' spans kept, to tell readings taken while one ran.
const SIZED_CALLS_KEPT: usize = 256;

/// What sized objects made (+) and let go (-) from just after `from` to `to`.
fn sized_between(log: &VecDeque<(u64, i64)>, from: u64, to: u64) -> i64 {
    log.iter()
        .filter(|(t, _)| *t > from && *t <= to)
        .map(|(_, b)| b)
        .sum()
}

/// Whether `t` fell strictly inside one of `calls`.
fn while_sized(calls: &VecDeque<(u64, u64)>, t: u64) -> bool {
    calls.iter().any(|(b, e)| t > *b && t < *e)
}

impl Reserves {
    /// A reading of the process's memory; true when it changed a measurement.
    pub fn reading(&mut self, t_ns: u64, bytes: u64) -> bool {
        if self.readings.len() == READINGS_KEPT {
            self.readings.pop_front();
        }
        self.readings.push_back((t_ns, bytes));
        if while_sized(&self.sized_calls, t_ns) {
            return false;
        }
        let open = self.windows.len().saturating_sub(OPEN_WINDOWS);
        let mut changed = false;
        for i in open..self.windows.len() {
            changed |= self.windows[i].take(t_ns, bytes);
            changed |= self.went_reading(i, t_ns, bytes);
        }
        let log = &self.sized_log;
        for d in &mut self.direct {
            let Some(g) = d.gone_ns else { continue };
            let reserve = d.went.waits_to_fall().then_some(d.reserve.bytes);
            if d.went
                .reading(g, (t_ns, bytes), |a, b| sized_between(log, a, b), reserve)
            {
                changed = true;
                self.kept_edges.extend(d.went.edges());
            }
        }
        changed
    }

    /// Whether a reserve began or ended being kept after `from_ns`, up to
    /// `to_ns`: what a composition at `from_ns` counted as kept may not be
    /// at `to_ns` (simpleDrvRuntime's second context, kept until a reading
    /// 60 ms after its deletion, was counted at exit 40 ms after that: 200%).
    pub fn kept_changes_between(&self, from_ns: u64, to_ns: u64) -> bool {
        from_ns < to_ns
            && self
                .kept_edges
                .range(from_ns.saturating_add(1)..=to_ns)
                .next()
                .is_some()
    }

    /// A reading past the end of window `i`'s objects: the first one says
    /// whether the memory went with them, a later one when it went after.
    fn went_reading(&mut self, i: usize, t_ns: u64, bytes: u64) -> bool {
        let Some(g) = self.windows[i].gone_ns else {
            return false;
        };
        let reserve = if self.windows[i].went.waits_to_fall() {
            let floor = self.floor_of(i);
            self.windows[i]
                .reserve(floor, &self.unsure)
                .map(|r| r.bytes)
        } else {
            None
        };
        let log = &self.sized_log;
        let went = &mut self.windows[i].went;
        let changed = went.reading(g, (t_ns, bytes), |a, b| sized_between(log, a, b), reserve);
        if changed {
            self.kept_edges.extend(went.edges());
        }
        changed
    }

    /// The reading window `i`'s predecessor ended at ([`Reserves::chained`]).
    fn floor_of(&self, i: usize) -> Option<(u64, u64)> {
        i.checked_sub(1).and_then(|p| self.windows[p].after_side())
    }

    /// The call that made `id` arrived after the object (an agent sends them
    /// so): the measurement spans the call, not the moment the object was seen.
    pub fn made_by(&mut self, id: u64, begin_ns: u64, end_ns: u64) {
        let Some(w) = self.windows.iter_mut().rev().find(|w| w.ids.contains(&id)) else {
            return;
        };
        w.begin_ns = w.begin_ns.min(begin_ns);
        w.end_ns = w.end_ns.max(end_ns);
        for c in w.calls.iter_mut().filter(|c| c.0 == id) {
            (c.1, c.2) = (c.1.min(begin_ns), c.2.max(end_ns));
        }
        w.before = None;
        w.after = None;
        w.retake(&self.readings, &self.sized_log, &self.sized_calls);
    }

    /// An object whose size its call does not say was made by a call running
    /// from `begin_ns` to `end_ns`.
    pub fn made_unsized(&mut self, id: u64, begin_ns: u64, end_ns: u64) {
        if let Some(last) = self.windows.last_mut()
            && last.after.is_none_or(|(t, _)| t > begin_ns)
            && last.gone_ns.is_none()
        {
            // No reading between the two calls: one step, theirs together
            // (a program's build joins its making call's step).
            if !last.ids.contains(&id) {
                last.ids.push(id);
            }
            last.calls.push((id, begin_ns, end_ns));
            last.end_ns = last.end_ns.max(end_ns);
            last.after = None;
            last.retake(&self.readings, &self.sized_log, &self.sized_calls);
            return;
        }
        let mut w = Window {
            ids: vec![id],
            calls: vec![(id, begin_ns, end_ns)],
            begin_ns,
            end_ns,
            before: None,
            after: None,
            sized: Vec::new(),
            crowded: false,
            gone_ns: None,
            gone: Vec::new(),
            went: Went::default(),
        };
        w.retake(&self.readings, &self.sized_log, &self.sized_calls);
        self.windows.push(w);
    }

    /// The agent read the device's memory on each side of the call that made
    /// `ids` (or loaded code into their context) from `begin_ns` to `end_ns`:
    /// it took `step` bytes. The objects leave any sampler measurement they
    /// were in, and the step is taken out of every measurement that spans it,
    /// as a sized object's bytes are. A step below zero (memory let go
    /// meanwhile) says nothing of them: it is left to the sampler's readings.
    ///
    /// With `more`, the step is more of what the objects hold (code loaded
    /// into a context at a launch), and they keep the measurement of their
    /// own making call.
    pub fn direct(&mut self, ids: &[u64], step: i64, begin_ns: u64, end_ns: u64, more: bool) {
        // The agent reads the whole device: a sized object another thread
        // made or let go while the call ran is in the step, and is its own.
        let others: i64 = self
            .sized_log
            .iter()
            .filter(|(t, _)| *t > begin_ns && *t < end_ns)
            .map(|(_, b)| b)
            .sum();
        let Ok(bytes) = u64::try_from(step - others) else {
            return;
        };
        if !more {
            for w in &mut self.windows {
                w.ids.retain(|id| !ids.contains(id));
            }
            self.windows.retain(|w| !w.ids.is_empty());
        }
        // Pushed as a sized change before the reserve is: its own step is
        // no other thread's object. A reading taken while the call ran holds
        // an unknown part of the step, so it is no side of any measurement
        // (PoCL's `vadd_chain`: a reading 6 ms before its build returned
        // already held the program's 7 MiB, and as the "before" of the
        // context's release it made the memory seem to fall by all of it).
        self.sized(end_ns, step);
        self.sized_call(begin_ns, end_ns);
        self.direct.push(Direct {
            reserve: Reserve {
                ids: ids.to_vec(),
                bytes,
                from_ns: begin_ns,
                to_ns: end_ns,
                from_bytes: 0,
                by_agent: true,
                at_launch: more,
                kept: None,
            },
            gone: Vec::new(),
            gone_ns: None,
            went: Went::default(),
        });
    }

    /// A sized object was made (`bytes` > 0) or let go (`bytes` < 0) at `t_ns`.
    pub fn sized(&mut self, t_ns: u64, bytes: i64) {
        if bytes == 0 {
            return;
        }
        if self.sized_log.len() == READINGS_KEPT {
            self.sized_log.pop_front();
        }
        self.sized_log.push_back((t_ns, bytes));
        let open = self.windows.len().saturating_sub(OPEN_WINDOWS);
        for w in &mut self.windows[open..] {
            w.count_sized(t_ns, bytes);
        }
        // One that arrives after an agent's step it fell inside of (another
        // thread's records come in their own order) is taken out of it.
        let recent = self.direct.len().saturating_sub(OPEN_WINDOWS);
        for d in &mut self.direct[recent..] {
            let r = &mut d.reserve;
            if t_ns > r.from_ns && t_ns < r.to_ns {
                r.bytes = r.bytes.saturating_add_signed(-bytes);
            }
        }
        // One that arrives after the reading that said whether memory went
        // with objects it falls before (a buffer freed 30 us before the
        // reading, its record after it) is counted in that again.
        self.went_again(|w| {
            w.after.is_some_and(|(a, _)| t_ns <= a) && w.before.is_none_or(|(b, _)| t_ns > b)
        });
    }

    /// What went is read again from every reading for each measurement
    /// whose objects went and of which `stale` holds.
    fn went_again(&mut self, stale: impl Fn(&Went) -> bool) {
        let sides = Sides {
            readings: &self.readings,
            sized_log: &self.sized_log,
            sized_calls: &self.sized_calls,
        };
        for &i in &self.direct_gone {
            let d = &mut self.direct[i];
            if let Some(g) = d.gone_ns
                && stale(&d.went)
            {
                d.went_from(g, &sides);
                self.kept_edges.extend(d.went.edges());
            }
        }
        let open = self.windows.len().saturating_sub(OPEN_WINDOWS);
        for w in &mut self.windows[open..] {
            if let Some(g) = w.gone_ns
                && stale(&w.went)
            {
                w.went = sides.went(g, |_| None);
                self.kept_edges.extend(w.went.edges());
            }
        }
    }

    /// A call that made or freed a sized object ran from `begin_ns` to
    /// `end_ns`. A reading taken while it ran may hold part of its bytes or
    /// none, so no measurement starts or ends at such a reading: one that did
    /// now spans the call, and takes the readings on each side of it.
    pub fn sized_call(&mut self, begin_ns: u64, end_ns: u64) {
        if self.sized_calls.len() == SIZED_CALLS_KEPT {
            self.sized_calls.pop_front();
        }
        self.sized_calls.push_back((begin_ns, end_ns));
        // A side of what went, taken while this call freed or made memory
        // of a size (its record arrived after the reading: PoCL freed a
        // 4 MiB buffer inside `clReleaseMemObject` right after a program's
        // release, and the reading then made the program's 7 MiB seem given
        // back), is no side: what went is read again without it.
        self.went_again(|w| w.sided_within(begin_ns, end_ns));
        let inside = |r: Option<(u64, u64)>| r.is_some_and(|(t, _)| t > begin_ns && t < end_ns);
        let open = self.windows.len().saturating_sub(OPEN_WINDOWS);
        for w in &mut self.windows[open..] {
            let (before, after) = (inside(w.before), inside(w.after));
            if !before && !after {
                continue;
            }
            if before {
                w.begin_ns = w.begin_ns.min(begin_ns);
            }
            if after {
                w.end_ns = w.end_ns.max(end_ns);
            }
            w.before = None;
            w.after = None;
            w.retake(&self.readings, &self.sized_log, &self.sized_calls);
        }
    }

    /// An unsized object `id` went at `t_ns` (destroyed, or let go where no
    /// agent watches deletion). When it is a context, or the last of its
    /// measurement's objects, the memory they hold goes back: a measurement
    /// that has not ended yet never will, and one whose "after" reading came
    /// later loses it. (On the H200, `vectorAddDrv` held its context 3 ms
    /// with no reading between its calls: the reading taken inside
    /// `cuCtxDestroy` measured 442 MiB of the 522 it held.) A module or a
    /// queue alone going beside its context ends nothing: the driver keeps
    /// the context's reserve, and its own code is small beside it.
    pub fn gone(&mut self, id: u64, kind: ObjKind, t_ns: u64) {
        let sides = Sides {
            readings: &self.readings,
            sized_log: &self.sized_log,
            sized_calls: &self.sized_calls,
        };
        for (i, d) in self.direct.iter_mut().enumerate() {
            if !d.reserve.ids.contains(&id) || d.gone_ns.is_some() {
                continue;
            }
            if !d.gone.contains(&id) {
                d.gone.push(id);
            }
            if kind == ObjKind::Context || d.gone.len() == d.reserve.ids.len() {
                d.gone_ns = Some(t_ns);
                self.direct_gone.push(i);
                d.went_from(t_ns, &sides);
                self.kept_edges.extend(d.went.edges());
            }
        }
        let open = self.windows.len().saturating_sub(OPEN_WINDOWS);
        for w in &mut self.windows[open..] {
            if !w.ids.contains(&id) {
                continue;
            }
            if !w.gone.contains(&id) {
                w.gone.push(id);
            }
            if kind != ObjKind::Context && w.gone.len() < w.ids.len() {
                continue;
            }
            let g = w.gone_ns.map_or(t_ns, |g| g.min(t_ns));
            if w.after.is_some_and(|(t, _)| t > t_ns) {
                w.after = None;
            }
            if w.gone_ns.replace(g) == Some(g) {
                continue;
            }
            w.went = sides.went(g, |_| None);
            self.kept_edges.extend(w.went.edges());
        }
    }

    /// The objects whose making call was running at `t_ns` (a context being
    /// made): a reading then holds part of what they will hold, and they are
    /// not in the ledger yet.
    pub fn being_made_at(&self, t_ns: u64) -> Vec<u64> {
        self.windows
            .iter()
            .flat_map(|w| &w.calls)
            .filter(|(_, begin, end)| t_ns > *begin && t_ns < *end)
            .map(|(id, ..)| *id)
            .collect()
    }

    /// The device memory may have moved at `t_ns` by an amount the run
    /// cannot know (a stream-ordered pool handed out or took back a block
    /// with no read of the pool then: it grows or reuses, and keeps what is
    /// freed until a synchronisation): a step across that moment measures
    /// nothing.
    pub fn unsure(&mut self, t_ns: u64) {
        if self.unsure.len() == READINGS_KEPT {
            self.unsure.pop_front();
        }
        self.unsure.push_back(t_ns);
    }

    /// Measurements opened so far, measured or not.
    pub fn measurements(&self) -> usize {
        self.windows.len() + self.direct.len()
    }

    /// Every reserve measured so far. Measurements follow each other: one
    /// starts no earlier than the reading the one before it ended at, so a
    /// reading taken while an earlier object was still being made (its call
    /// and the next one overlap the readings between them) is counted once,
    /// and the reserves add up to the growth they were measured across.
    pub fn measured(&self) -> impl Iterator<Item = Reserve> + '_ {
        self.each().filter_map(|(_, r)| r)
    }

    /// Objects made whose reserve is not measured (yet, or at all).
    pub fn unmeasured(&self) -> impl Iterator<Item = u64> + '_ {
        self.each()
            .filter(|(_, r)| r.is_none())
            .flat_map(|(ids, _)| ids.iter().copied())
    }

    /// Each measurement's objects, with its reserve when it is measured: one
    /// pass for a reader that wants both.
    pub fn each(&self) -> impl Iterator<Item = (&[u64], Option<Reserve>)> + '_ {
        self.chained()
            .map(|(w, floor)| (w.ids.as_slice(), w.reserve(floor, &self.unsure)))
            .chain(self.direct.iter().map(|d| {
                let kept = d.went.kept(d.reserve.bytes);
                (
                    d.reserve.ids.as_slice(),
                    Some(Reserve {
                        kept,
                        ..d.reserve.clone()
                    }),
                )
            }))
    }

    /// Each window with the reading the one before it ended at.
    fn chained(&self) -> impl Iterator<Item = (&Window, Option<(u64, u64)>)> + '_ {
        let floors = std::iter::once(None).chain(self.windows.iter().map(Window::after_side));
        self.windows.iter().zip(floors)
    }
}

impl Window {
    /// The reading its step ends at: the first at or after its making calls
    /// ended, before its objects went; with none between, the first after
    /// they went, if the memory stood still from it to the next reading
    /// (NVIDIA's OpenCL keeps a released context's memory until the process
    /// exits: Hands On OpenCL's `vadd_abc` released its context 6 ms after
    /// `clCreateContext` returned, and two readings after held its 518 MiB).
    /// One taken while a teardown gave memory back is no side: the next
    /// reading fell (a CUDA context destroyed 3 ms after it was made: 442
    /// MiB, then nothing).
    fn after_side(&self) -> Option<(u64, u64)> {
        self.after
            .or_else(|| self.went.after.filter(|_| self.went.steady == Some(true)))
    }

    /// Where sized objects start to count: from its "before" reading (or its
    /// call's begin, before it has one).
    fn start(&self) -> u64 {
        self.before
            .map_or(self.begin_ns, |(t, _)| t.min(self.begin_ns))
    }

    /// Counts a sized object made or deleted at `t`, if it can fall in the
    /// window: kept a while past its end reading too, which the call that made
    /// it may yet move later (`sized_call`).
    fn count_sized(&mut self, t: u64, bytes: i64) {
        if t <= self.start() || self.after.is_some_and(|(a, _)| t > a + SIZED_SLACK_NS) {
            return;
        }
        if self.sized.len() == SIZED_KEPT {
            // Past its end reading they count only if that reading moves
            // later, and a move takes them again (`retake`): only a crowd
            // inside the window leaves it unmeasured (UnifiedMemoryPerf's
            // 250 allocations in the 50 ms after its context's reading left
            // the context's 530 MiB unexplained).
            if self.after.is_none_or(|(a, _)| t <= a) {
                self.crowded = true;
            }
        } else {
            self.sized.push((t, bytes));
        }
    }

    /// Takes its readings and its sized objects again, after its span changed.
    fn retake(
        &mut self,
        readings: &VecDeque<(u64, u64)>,
        sized: &VecDeque<(u64, i64)>,
        sized_calls: &VecDeque<(u64, u64)>,
    ) {
        for &(t, b) in readings {
            if !while_sized(sized_calls, t) {
                self.take(t, b);
            }
        }
        self.sized.clear();
        self.crowded = false;
        for &(t, b) in sized {
            self.count_sized(t, b);
        }
    }

    /// Takes a reading for either side; true when it did.
    fn take(&mut self, t: u64, bytes: u64) -> bool {
        let mut took = false;
        if t <= self.begin_ns && self.before.is_none_or(|(b, _)| t >= b) {
            self.before = Some((t, bytes));
            took = true;
        }
        if t >= self.end_ns
            && self.after.is_none_or(|(a, _)| t < a)
            && self.gone_ns.is_none_or(|g| t <= g)
        {
            self.after = Some((t, bytes));
            took = true;
        }
        took
    }

    /// The reserve, measured from the later of its own "before" reading and
    /// `floor` (the reading the window before it ended at) when that one lies
    /// before its own end.
    fn reserve(&self, floor: Option<(u64, u64)>, unsure: &VecDeque<u64>) -> Option<Reserve> {
        let (mut before, (to, b1)) = (self.before?, self.after_side()?);
        if let Some(f) = floor.filter(|(t, _)| *t > before.0 && *t < to) {
            before = f;
        }
        let (from, b0) = before;
        if self.crowded || unsure.iter().any(|t| *t > from && *t <= to) {
            return None;
        }
        let others: i64 = self
            .sized
            .iter()
            .filter(|(t, _)| *t > from && *t <= to)
            .map(|(_, b)| b)
            .sum();
        let step = b1 as i64 - b0 as i64 - others;
        // Memory that fell across the call: something let go that the run did
        // not see; the step says nothing of the object then.
        let bytes = u64::try_from(step).ok()?;
        // Readings in whole pages hold sized objects in whole pages too: what
        // their bytes leave of a page is theirs, not the reserve's (a 1.95
        // MiB buffer in a 2 MiB page made matrixMul's context 530.05 MiB and
        // its exit -0.05 MiB unexplained).
        let bytes = if b0 % PAGE == 0 && b1 % PAGE == 0 {
            bytes / PAGE * PAGE
        } else {
            bytes
        };
        Some(Reserve {
            ids: self.ids.clone(),
            bytes,
            from_ns: from,
            to_ns: to,
            from_bytes: b0,
            by_agent: false,
            at_launch: false,
            kept: self.went.kept(bytes),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_context_holds_the_step_across_its_call() {
        let mut r = Reserves::default();
        r.reading(10, 100 * MIB);
        r.made_unsized(1, 20, 30);
        assert_eq!(r.measured().count(), 0, "no reading after it yet");
        assert_eq!(r.unmeasured().collect::<Vec<_>>(), vec![1]);
        r.reading(40, 618 * MIB);
        let m: Vec<Reserve> = r.measured().collect();
        assert_eq!(
            m,
            vec![Reserve {
                ids: vec![1],
                bytes: 518 * MIB,
                from_ns: 10,
                to_ns: 40,
                from_bytes: 100 * MIB,
                by_agent: false,
                at_launch: false,
                kept: None,
            }]
        );
    }

    /// NVIDIA's OpenCL deletes a released context at once and its memory
    /// stays: the reserve is kept from the first reading after, until a
    /// reading falls by it (sized objects let go meanwhile counted out). A
    /// CUDA context's memory goes with it: nothing is kept.
    #[test]
    fn memory_that_stays_after_its_objects_went_is_kept_until_it_falls() {
        let kept = |r: &Reserves| r.measured().next().and_then(|m| m.kept);
        let mut r = Reserves::default();
        r.reading(10, 0);
        r.made_unsized(1, 20, 30);
        r.reading(40, 518 * MIB);
        r.sized(45, 64 * MIB as i64);
        r.reading(50, 582 * MIB);
        r.sized(55, -(64 * MIB as i64));
        r.gone(1, ObjKind::Context, 60);
        assert_eq!(kept(&r), None, "no reading after it yet");
        // The buffer's 64 MiB went; the context's did not.
        r.reading(70, 518 * MIB);
        assert_eq!(
            kept(&r),
            Some(Kept {
                from_ns: 70,
                until_ns: None
            })
        );
        // Another buffer let go is no fall of the reserve's.
        r.sized(75, 32 * MIB as i64);
        r.reading(80, 550 * MIB);
        r.sized(85, -(32 * MIB as i64));
        r.reading(90, 518 * MIB);
        assert_eq!(kept(&r).and_then(|k| k.until_ns), None);
        r.reading(100, 0);
        let k = kept(&r).expect("kept");
        assert_eq!(k.until_ns, Some(100));
        assert!(k.at(90) && !k.at(100) && !k.at(60));

        let mut cuda = Reserves::default();
        cuda.reading(10, 0);
        cuda.made_unsized(1, 20, 30);
        cuda.reading(40, 530 * MIB);
        cuda.gone(1, ObjKind::Context, 60);
        cuda.reading(70, 0);
        assert_eq!(kept(&cuda), None);
        // A reading that arrives late, from before the end, still counts
        // as its "before" side.
        let mut late = Reserves::default();
        late.reading(10, 0);
        late.made_unsized(1, 20, 30);
        late.gone(1, ObjKind::Context, 60);
        late.reading(40, 530 * MIB);
        late.reading(70, 530 * MIB);
        assert_eq!(kept(&late).map(|k| k.from_ns), Some(70));
    }

    #[test]
    fn sized_objects_made_meanwhile_are_theirs_not_the_contexts() {
        let mut r = Reserves::default();
        r.reading(10, 0);
        r.made_unsized(1, 20, 30);
        // A 64 MiB buffer made before the next reading, and one after it.
        r.sized(35, 64 * MIB as i64);
        r.reading(40, 582 * MIB);
        r.sized(45, 64 * MIB as i64);
        let m: Vec<Reserve> = r.measured().collect();
        assert_eq!(m[0].bytes, 518 * MIB);
    }

    /// Readings count whole 2 MiB pages; a buffer of 1.95 MiB takes one.
    #[test]
    fn what_a_sized_object_leaves_of_its_page_is_not_the_reserves() {
        let mut r = Reserves::default();
        r.reading(10, 0);
        r.made_unsized(1, 20, 30);
        r.sized(35, (195 * MIB / 100) as i64);
        r.reading(40, 532 * MIB);
        assert_eq!(r.measured().next().map(|m| m.bytes), Some(530 * MIB));
        // Readings of another unit are taken as they are.
        let mut odd = Reserves::default();
        odd.reading(10, 0);
        odd.made_unsized(1, 20, 30);
        odd.sized(35, MIB as i64);
        odd.reading(40, 531 * MIB + 512);
        assert_eq!(
            odd.measured().next().map(|m| m.bytes),
            Some(530 * MIB + 512)
        );
    }

    #[test]
    fn a_reading_that_arrives_late_still_counts() {
        let mut r = Reserves::default();
        r.made_unsized(1, 20, 30);
        // The sampler's batch arrives after the call's record.
        r.reading(15, 5 * MIB);
        r.reading(31, 7 * MIB);
        assert_eq!(r.measured().next().map(|m| m.bytes), Some(2 * MIB));
    }

    #[test]
    fn a_call_that_arrives_after_its_object_sets_the_span() {
        let mut r = Reserves::default();
        r.reading(10, 0);
        // Seen at 30, made by a call from 12 to 28; a reading at 20 falls
        // inside the call, so it is neither side.
        r.reading(20, 300 * MIB);
        r.made_unsized(1, 30, 30);
        r.made_by(1, 12, 28);
        r.reading(40, 518 * MIB);
        assert_eq!(
            r.measured().next().map(|m| (m.bytes, m.from_ns)),
            Some((518 * MIB, 10))
        );
    }

    #[test]
    fn overlapping_calls_count_each_reading_once() {
        // Seen on the H200: a context's call starts while the readings still
        // climb from the one before, so its own "before" reading predates
        // the first context's end.
        let mut r = Reserves::default();
        r.reading(10, 0);
        r.made_unsized(1, 20, 30);
        r.reading(32, 518 * MIB);
        r.reading(40, 600 * MIB);
        // An agent sends the object, then its call.
        r.made_unsized(2, 60, 60);
        r.made_by(2, 35, 60);
        r.reading(65, 1036 * MIB);
        let m: Vec<(u64, u64)> = r.measured().map(|m| (m.bytes, m.from_ns)).collect();
        assert_eq!(m, vec![(518 * MIB, 10), (518 * MIB, 32)]);
        assert_eq!(m.iter().map(|(b, _)| b).sum::<u64>(), 1036 * MIB);
    }

    /// A context made and destroyed with no reading between its calls (on
    /// the H200, `vectorAddDrv` held its context 3 ms): a reading taken after
    /// its destruction began measures nothing, whether it arrives before the
    /// destruction or after; and an object made next is measured apart.
    #[test]
    fn no_reading_after_an_objects_end_measures_it() {
        for reading_first in [true, false] {
            let mut r = Reserves::default();
            r.reading(10, 0);
            r.made_unsized(1, 20, 30);
            if reading_first {
                r.reading(40, 442 * MIB);
                r.gone(1, ObjKind::Context, 35);
            } else {
                r.gone(1, ObjKind::Context, 35);
                r.reading(40, 442 * MIB);
            }
            r.reading(95, 0);
            assert_eq!(r.measured().count(), 0, "reading first: {reading_first}");
            r.made_unsized(2, 100, 110);
            r.reading(120, 300 * MIB);
            let m: Vec<(Vec<u64>, u64)> = r.measured().map(|m| (m.ids, m.bytes)).collect();
            assert_eq!(
                m,
                vec![(vec![2], 300 * MIB)],
                "reading first: {reading_first}"
            );
        }
        // A queue destroyed beside its context ends no measurement; the
        // context's end does.
        let mut r = Reserves::default();
        r.reading(10, 0);
        r.made_unsized(1, 20, 30);
        r.made_unsized(2, 30, 32);
        r.gone(2, ObjKind::Queue, 33);
        r.reading(40, 500 * MIB);
        assert_eq!(
            r.measured().map(|m| m.bytes).collect::<Vec<_>>(),
            vec![500 * MIB]
        );
        // A reading between the making call and the end measures it.
        let mut r = Reserves::default();
        r.reading(10, 0);
        r.made_unsized(1, 20, 30);
        r.reading(32, 522 * MIB);
        r.reading(40, 442 * MIB);
        r.gone(1, ObjKind::Context, 35);
        let m: Vec<(u64, u64, u64)> = r
            .measured()
            .map(|m| (m.bytes, m.from_ns, m.to_ns))
            .collect();
        assert_eq!(m, vec![(522 * MIB, 10, 32)]);
    }

    /// Hands On OpenCL's `vadd_abc` on the H200: `clCreateContext` returned
    /// and the program released the context 6 ms later, with no reading
    /// between; NVIDIA's OpenCL kept its 518 MiB, and two readings after
    /// held it. The first of them measures the context, kept by the driver
    /// from then on. Had the next fallen, the first was taken during a
    /// teardown and measures nothing.
    #[test]
    fn a_reading_after_an_objects_end_measures_it_when_the_memory_stood_still() {
        for (next, measured) in [(518 * MIB, Some(518 * MIB)), (0, None)] {
            let mut r = Reserves::default();
            r.reading(10, 0);
            r.made_unsized(1, 20, 30);
            r.sized(31, 4096);
            r.sized(34, -4096);
            r.gone(1, ObjKind::Context, 36);
            r.reading(40, 518 * MIB);
            assert_eq!(r.measured().count(), 0, "not before the next reading");
            r.reading(60, next);
            let m: Vec<_> = r.measured().collect();
            assert_eq!(m.first().map(|m| m.bytes), measured, "{m:?}");
            if let Some(m) = m.first() {
                assert_eq!((m.from_ns, m.to_ns), (10, 40));
                assert_eq!(m.kept.map(|k| k.from_ns), Some(40));
            }
        }
    }

    /// A reading taken while a context's making call ran falls inside its
    /// measurement's span; one before or after does not.
    #[test]
    fn what_was_being_made_at_a_reading_is_known() {
        let mut r = Reserves::default();
        r.made_unsized(1, 20, 30);
        assert_eq!(r.being_made_at(25), vec![1]);
        assert!(r.being_made_at(20).is_empty());
        assert!(r.being_made_at(31).is_empty());
        // Made with no reading between: one measurement, but a reading
        // between the two calls was inside neither.
        r.made_unsized(2, 40, 50);
        assert!(r.being_made_at(35).is_empty());
        assert_eq!(r.being_made_at(45), vec![2]);
        // The call arrives after the object and widens its span.
        r.made_by(2, 33, 50);
        assert_eq!(r.being_made_at(35), vec![2]);
    }

    #[test]
    fn a_reading_taken_during_an_allocation_ends_no_measurement() {
        // Seen on the H200: the runtime's context, then 8 GiB blocks back to
        // back; a reading lands in the middle of the fourth block's call.
        let gib8 = 8192 * MIB;
        let mut r = Reserves::default();
        r.reading(10, 0);
        r.reading(43, 530 * MIB + 4 * gib8);
        r.made_unsized(1, 20, 20);
        r.made_by(1, 12, 20);
        for (i, (b, e)) in [(20, 25), (25, 30), (30, 35), (35, 45), (45, 50)]
            .into_iter()
            .enumerate()
        {
            r.sized(e, gib8 as i64);
            r.sized_call(b, e);
            assert!(i < 5);
        }
        r.reading(55, 530 * MIB + 5 * gib8);
        let m: Vec<(u64, u64, u64)> = r
            .measured()
            .map(|m| (m.bytes, m.from_ns, m.to_ns))
            .collect();
        assert_eq!(m, vec![(530 * MIB, 10, 55)]);
    }

    #[test]
    fn a_sized_object_that_came_before_the_module_is_still_taken_out() {
        // Seen in PyTorch: a 1 GiB segment, then a module loaded, with no
        // reading between them.
        let mut r = Reserves::default();
        r.reading(10, 530 * MIB);
        r.sized(15, 1024 * MIB as i64);
        r.sized_call(14, 15);
        r.made_unsized(2, 20, 20);
        r.made_by(2, 16, 20);
        r.reading(25, 1646 * MIB);
        assert_eq!(r.measured().next().map(|m| m.bytes), Some(92 * MIB));
    }

    #[test]
    fn objects_made_with_no_reading_between_share_one_step() {
        let mut r = Reserves::default();
        r.reading(10, 0);
        r.made_unsized(1, 20, 30);
        r.made_unsized(2, 32, 33);
        r.reading(40, 520 * MIB);
        let m: Vec<Reserve> = r.measured().collect();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].ids, vec![1, 2]);
        assert_eq!(m[0].bytes, 520 * MIB);
        // A reading between two calls keeps them apart.
        r.made_unsized(3, 50, 60);
        r.reading(70, 1040 * MIB);
        assert_eq!(
            r.measured().map(|m| m.bytes).collect::<Vec<_>>(),
            vec![520 * MIB, 520 * MIB]
        );
    }

    #[test]
    fn memory_that_fell_or_a_crowded_window_stays_unmeasured() {
        let mut r = Reserves::default();
        r.reading(10, 100 * MIB);
        r.made_unsized(1, 20, 30);
        r.reading(40, 50 * MIB);
        assert_eq!(r.measured().count(), 0);
        let mut crowded = Reserves::default();
        crowded.reading(10, 0);
        crowded.made_unsized(1, 20, 30);
        for i in 0..=SIZED_KEPT as u64 {
            crowded.sized(21 + i % 5, 1);
        }
        crowded.reading(40, 10 * MIB);
        assert_eq!(crowded.measured().count(), 0);
        assert_eq!(crowded.unmeasured().count(), 1);
    }

    #[test]
    fn a_step_the_agent_read_is_the_objects_and_out_of_the_samplers_measurements() {
        let mut r = Reserves::default();
        r.reading(10, 0);
        r.made_unsized(1, 20, 30);
        // A module made in the same step, measured by the agent: 40 MiB.
        r.made_unsized(2, 32, 34);
        r.direct(&[2], 40 * MIB as i64, 32, 34, false);
        r.reading(50, 558 * MIB);
        let mut m: Vec<(Vec<u64>, u64)> = r.measured().map(|m| (m.ids, m.bytes)).collect();
        m.sort();
        assert_eq!(m, [(vec![1], 518 * MIB), (vec![2], 40 * MIB)]);
        // Memory let go across a call says nothing of its object.
        r.made_unsized(3, 60, 61);
        r.direct(&[3], -(2 * MIB as i64), 60, 61, false);
        assert!(r.measured().all(|m| m.ids != [3]));
        // Code loaded into context 1 at a launch: more of what it holds, and
        // its own measurement stays.
        r.direct(&[1], 90 * MIB as i64, 70, 71, true);
        r.reading(80, 648 * MIB);
        let held: u64 = r.measured().filter(|m| m.ids == [1]).map(|m| m.bytes).sum();
        assert_eq!(held, 608 * MIB);
    }

    /// The agent's step is of the whole device: a 64 MiB buffer another
    /// thread made while a module loaded is the buffer's, whether its record
    /// came before the module's call or after it.
    #[test]
    fn another_threads_object_inside_an_agents_step_is_its_own() {
        let mut r = Reserves::default();
        r.sized(15, 64 * MIB as i64);
        r.made_unsized(1, 10, 20);
        r.direct(&[1], 100 * MIB as i64, 10, 20, false);
        r.made_unsized(2, 30, 40);
        r.direct(&[2], 100 * MIB as i64, 30, 40, false);
        r.sized(35, 64 * MIB as i64);
        let mut m: Vec<(Vec<u64>, u64)> = r.measured().map(|m| (m.ids, m.bytes)).collect();
        m.sort();
        assert_eq!(m, [(vec![1], 36 * MIB), (vec![2], 36 * MIB)]);
    }

    /// NVML's reading arrives after the call that allocated while it was
    /// taken (a PyTorch job filling an H200 in 8 GiB blocks, 0.5 ms each):
    /// it is no side of the context's measurement, however late it comes.
    #[test]
    fn a_reading_taken_while_a_sized_call_ran_is_no_side_even_when_it_arrives_late() {
        let mut r = Reserves::default();
        r.reading(10, 30 * MIB);
        r.made_unsized(1, 20, 21);
        // The first block's call runs 22..40 and makes the context's
        // window's end move past it; the next reading is right after it.
        r.sized(40, 8192 * MIB as i64);
        r.sized_call(22, 40);
        // The second block's call (42..50) arrives before the reading taken
        // while it ran (at 45, with its block already in).
        r.sized(50, 8192 * MIB as i64);
        r.sized_call(42, 50);
        r.reading(45, 16944 * MIB);
        assert_eq!(r.measured().count(), 0, "no side after the context yet");
        r.reading(51, 16944 * MIB);
        let m: Vec<u64> = r.measured().map(|m| m.bytes).collect();
        assert_eq!(m, [530 * MIB]);
    }
}
