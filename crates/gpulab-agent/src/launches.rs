//! Which kernel launches the agent watches. CUPTI calling a callback costs a
//! launch about 0.57 µs before the agent does anything (`benches/watch/
//! cupti_floor.cu` on the H200), more than a launch-heavy training loop can
//! pay; and what the agent needs of a launch is its function's first one,
//! where the driver loads that function's code (the memory it takes is read
//! on each side of it). So launches are watched while they bring functions
//! the process has not launched yet, and not once they repeat: after
//! [`SETTLE`] launches in a row of known functions the launch callbacks are
//! turned off. They are turned on again by a regular look ([`LOOK_EVERY`],
//! from the agent's ticker), and at once wherever the driver loads code a
//! later launch may run (a module loaded, lazily or by a call): so a
//! function first launched while launches are not watched is seen at the
//! next look at the latest, and the memory its code took is left to the
//! readings between.
//!
//! Every change is said to gpulab ([`gpulab_events::AgentState::Launches`]),
//! so a launch count or a timeline says which stretches it covers.
//!
//! The hot path (a watched launch) is one relaxed atomic add; turning the
//! callbacks on or off takes [`TOGGLE`], which a callback only ever tries
//! (CUPTI may hold its own lock while it calls back: a callback that waited
//! on a thread inside CUPTI could wait forever).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use gpulab_events::LaunchesWhy;

/// Launches in a row of functions already launched after which launches are
/// no longer watched.
pub const SETTLE: u32 = 256;
/// How long launches go unwatched before the agent looks again, ns.
pub const LOOK_EVERY_NS: u64 = 250_000_000;

/// What turns CUPTI's launch callbacks on (`true`) or off; false when CUPTI
/// refused.
pub type Switch = fn(bool) -> bool;
/// What says a change to gpulab.
type Say = fn(bool, LaunchesWhy);

/// The process's launch watch.
pub static LAUNCHES: Watch = Watch::new(crate::transport::launches);

/// Whether a process's launches are watched, and what turns them on and off.
pub struct Watch {
    /// Whether launches are watched now.
    watching: AtomicBool,
    /// Whether launches are always watched (device spans need every launch).
    always: AtomicBool,
    /// Launches in a row of known functions, while watched.
    repeats: AtomicU32,
    /// When launches stopped being watched.
    off_at: AtomicU64,
    /// A callback that would have turned launches on found `toggle` taken:
    /// the ticker does it.
    owed: AtomicBool,
    /// Held while the callbacks are turned on or off and the change said.
    toggle: Mutex<()>,
    switch: OnceLock<Switch>,
    say: Say,
}

impl Watch {
    const fn new(say: Say) -> Watch {
        Watch {
            watching: AtomicBool::new(true),
            always: AtomicBool::new(false),
            repeats: AtomicU32::new(0),
            off_at: AtomicU64::new(0),
            owed: AtomicBool::new(false),
            toggle: Mutex::new(()),
            switch: OnceLock::new(),
            say,
        }
    }

    /// Launches are watched from now on through `switch`; `always`: every
    /// one, never turned off.
    pub fn arm(&self, switch: Switch, always: bool) {
        self.always.store(always, Ordering::Relaxed);
        let _ = self.switch.set(switch);
    }

    /// Whether launches are watched now.
    pub fn watching(&self) -> bool {
        self.watching.load(Ordering::Relaxed)
    }

    /// A watched launch returned; `first`: its function's first launch in
    /// the process. Turns launches off once they repeat (the clock is read
    /// then only).
    pub fn launched(&self, first: bool, now_ns: impl FnOnce() -> u64) {
        if first {
            self.repeats.store(0, Ordering::Relaxed);
            return;
        }
        if self.repeats.fetch_add(1, Ordering::Relaxed) + 1 < SETTLE
            || self.always.load(Ordering::Relaxed)
        {
            return;
        }
        if let Ok(_held) = self.toggle.try_lock() {
            self.set(false, LaunchesWhy::Repeated, now_ns());
        }
    }

    /// The driver loaded code: launches are watched from now on.
    pub fn code_loaded(&self, now_ns: u64) {
        if self.watching() {
            return;
        }
        match self.toggle.try_lock() {
            Ok(_held) => self.set(true, LaunchesWhy::CodeLoaded, now_ns),
            Err(_) => self.owed.store(true, Ordering::Relaxed),
        }
    }

    /// The agent's regular look, from its own thread: launches unwatched for
    /// [`LOOK_EVERY_NS`], or owed a look, are watched again.
    pub fn tick(&self, now_ns: u64) {
        if self.watching() {
            return;
        }
        let owed = self.owed.swap(false, Ordering::Relaxed);
        if !owed && !look_due(now_ns, self.off_at.load(Ordering::Relaxed)) {
            return;
        }
        let _held = self.toggle.lock().unwrap_or_else(|e| e.into_inner());
        let why = if owed {
            LaunchesWhy::CodeLoaded
        } else {
            LaunchesWhy::Look
        };
        self.set(true, why, now_ns);
    }

    /// Turns launch callbacks on or off, holding `toggle`, and says so.
    fn set(&self, on: bool, why: LaunchesWhy, now_ns: u64) {
        if self.watching() == on {
            return;
        }
        let Some(switch) = self.switch.get() else {
            return;
        };
        if !switch(on) {
            // CUPTI refused: turn back what it may have done, and watch
            // every launch from now on rather than ask at each.
            if !on {
                switch(true);
                self.always.store(true, Ordering::Relaxed);
            }
            return;
        }
        self.repeats.store(0, Ordering::Relaxed);
        if !on {
            self.off_at.store(now_ns, Ordering::Relaxed);
        }
        self.watching.store(on, Ordering::Relaxed);
        (self.say)(on, why);
    }
}

/// Whether launches unwatched since `off_ns` are due a look at `now_ns`.
fn look_due(now_ns: u64, off_ns: u64) -> bool {
    now_ns.saturating_sub(off_ns) >= LOOK_EVERY_NS
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_look_is_due_once_launches_went_unwatched_long_enough() {
        assert!(!look_due(1_000, 1_000));
        assert!(!look_due(LOOK_EVERY_NS - 1, 0));
        assert!(look_due(LOOK_EVERY_NS, 0));
        // A clock that reads before the turn-off (another thread's) waits.
        assert!(!look_due(5, 10));
    }

    /// Each test's own watch, switch and sayings: tests run side by side.
    macro_rules! watch {
        ($refuse:expr) => {{
            static ON: AtomicBool = AtomicBool::new(true);
            static SAID: Mutex<Vec<(bool, LaunchesWhy)>> = Mutex::new(Vec::new());
            static SWITCHED: AtomicUsize = AtomicUsize::new(0);
            static W: Watch = Watch::new(|on, why| SAID.lock().unwrap().push((on, why)));
            W.arm(
                |on| {
                    SWITCHED.fetch_add(1, Ordering::Relaxed);
                    if $refuse {
                        return false;
                    }
                    ON.store(on, Ordering::Relaxed);
                    true
                },
                false,
            );
            (&W, &ON, &SAID, &SWITCHED)
        }};
    }

    #[test]
    fn launches_go_unwatched_after_they_repeat_and_come_back_at_a_look() {
        let (w, on, said, _) = watch!(false);
        // A first launch anywhere in the run starts the count again.
        for _ in 0..SETTLE - 1 {
            w.launched(false, || 10);
        }
        w.launched(true, || 10);
        for _ in 0..SETTLE - 1 {
            w.launched(false, || 20);
        }
        assert!(w.watching() && on.load(Ordering::Relaxed));
        w.launched(false, || 30);
        assert!(!w.watching() && !on.load(Ordering::Relaxed));
        w.tick(30 + LOOK_EVERY_NS - 1);
        assert!(!w.watching(), "not before its time");
        w.tick(30 + LOOK_EVERY_NS);
        assert!(w.watching() && on.load(Ordering::Relaxed));
        assert_eq!(
            *said.lock().unwrap(),
            [(false, LaunchesWhy::Repeated), (true, LaunchesWhy::Look)]
        );
    }

    #[test]
    fn loaded_code_turns_launches_on_at_once_or_owes_the_ticker() {
        let (w, on, said, _) = watch!(false);
        for _ in 0..SETTLE {
            w.launched(false, || 0);
        }
        assert!(!w.watching());
        {
            // Another thread is switching: the callback does not wait.
            let _held = w.toggle.lock().unwrap();
            w.code_loaded(5);
            assert!(!w.watching());
        }
        w.tick(6);
        assert!(w.watching() && on.load(Ordering::Relaxed));
        for _ in 0..SETTLE {
            w.launched(false, || 7);
        }
        w.code_loaded(8);
        assert!(w.watching());
        assert_eq!(
            *said.lock().unwrap(),
            [
                (false, LaunchesWhy::Repeated),
                (true, LaunchesWhy::CodeLoaded),
                (false, LaunchesWhy::Repeated),
                (true, LaunchesWhy::CodeLoaded)
            ]
        );
    }

    /// Any sequence of launches, code loads and looks: CUPTI's callbacks
    /// are on exactly while the watch says so, each turn is said once and
    /// turns alternate, a turn-off follows `SETTLE` repeats in a row since
    /// the last turn-on or first launch, and a look comes no sooner than
    /// `LOOK_EVERY_NS` after it.
    #[test]
    fn the_callbacks_follow_the_watch_whatever_the_program_does() {
        // Turn-offs, looks and code loads that turned launches on.
        let mut turns = [0u32; 3];
        for seed in 0..200 {
            let (w, on, said, _) = watch!(false);
            // The previous seed's state: start each from a watched state.
            if !w.watching() {
                w.code_loaded(0);
            }
            w.repeats.store(0, Ordering::Relaxed);
            said.lock().unwrap().clear();
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut t = 0u64;
            let mut repeats = 0u32;
            let mut off_at = None;
            for _ in 0..5_000 {
                t += rng.u64(0..20_000_000);
                let before = w.watching();
                match rng.u32(0..1000) {
                    0..=4 => w.code_loaded(t),
                    5..=14 => w.tick(t),
                    15 if before => {
                        w.launched(true, || t);
                        repeats = 0;
                    }
                    _ if before => {
                        w.launched(false, || t);
                        repeats += 1;
                    }
                    // Unwatched: CUPTI would not call back.
                    _ => {}
                }
                let after = w.watching();
                assert_eq!(after, on.load(Ordering::Relaxed), "seed {seed}");
                match (before, after) {
                    (true, false) => {
                        assert_eq!(repeats, SETTLE, "seed {seed}");
                        off_at = Some(t);
                        turns[0] += 1;
                    }
                    (false, true) => {
                        let why = said.lock().unwrap().last().copied();
                        if why == Some((true, LaunchesWhy::Look)) {
                            let off = off_at.expect("turned off before");
                            assert!(t - off >= LOOK_EVERY_NS, "seed {seed}");
                            turns[1] += 1;
                        } else {
                            turns[2] += 1;
                        }
                        repeats = 0;
                    }
                    _ => assert!(repeats < SETTLE || !after, "seed {seed}"),
                }
            }
            let said = said.lock().unwrap();
            assert!(
                said.windows(2).all(|p| p[0].0 != p[1].0),
                "seed {seed}: {said:?}"
            );
        }
        assert!(
            turns.iter().all(|n| *n > 100),
            "every kind of turn: {turns:?}"
        );
    }

    #[test]
    fn launches_stay_watched_where_cupti_refuses_or_every_one_is_asked_for() {
        let (w, _, said, switched) = watch!(true);
        for _ in 0..SETTLE {
            w.launched(false, || 0);
        }
        assert!(w.watching());
        // The refused turn-off, then the turn back on; never asked again.
        assert_eq!(switched.load(Ordering::Relaxed), 2);
        for _ in 0..SETTLE {
            w.launched(false, || 0);
        }
        assert_eq!(switched.load(Ordering::Relaxed), 2);
        assert!(said.lock().unwrap().is_empty());

        static ALL: Watch = Watch::new(|_, _| panic!("never said"));
        ALL.arm(|_| panic!("never switched"), true);
        for _ in 0..10 * SETTLE {
            ALL.launched(false, || 0);
        }
        assert!(ALL.watching());
    }
}
