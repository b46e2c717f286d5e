//! Playing a recording back: the recorded events, a cursor into them and a play
//! clock. Pure state: the frame tick advances the clock, keys move the cursor,
//! and the run shown is the fold of the events before the cursor. Claims and
//! verdicts are the recorded ones, never recomputed; the one addition is a claim
//! comparing two recordings shown side by side, appended after both are read.
//! Never reads a file or a clock.

use crate::trace::{Event, Meta};

use super::runstate::{Feed, RunState};

/// Speeds `-`/`+` step through.
pub const SPEEDS: [f64; 9] = [0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 4.0, 6.0, 10.0];
const REAL_SPEED: usize = 3;
const SECOND: u64 = 1_000_000_000;
/// A replay lasts at least this long where a slower speed allows: long enough
/// to talk over (a 0.4 s run played at 1× is over before anyone looks).
const NARRATE_NS: u64 = 5 * SECOND;

/// The speed a recording of `duration` ns starts at: real time when it lasts
/// long enough to narrate, else the fastest slower speed that makes it last
/// [`NARRATE_NS`], or the slowest there is.
fn default_speed(duration: u64) -> usize {
    (0..=REAL_SPEED)
        .rev()
        .find(|&i| duration as f64 / SPEEDS[i] >= NARRATE_NS as f64)
        .unwrap_or(0)
}

#[derive(Debug, Clone)]
pub struct Playback {
    events: Vec<Event>,
    /// Release time of each event, relative to the run start. Kept non-decreasing
    /// in file order (a running maximum), so the cursor and the clock agree.
    times: Vec<u64>,
    /// Events before it are shown.
    pub cursor: usize,
    /// Play time since the run start, ns.
    pub clock: u64,
    speed: usize,
    pub paused: bool,
}

/// When an event happened, if it says; claims have no time of their own.
fn event_time(e: &Event) -> Option<u64> {
    Some(match e {
        Event::Meta(m) => m.t_ns,
        Event::Calling(c) => c.t_ns,
        Event::Call(c) => c.end_ns,
        Event::Object(o) => o.t_ns,
        Event::DeviceSpan(s) => s.end_ns,
        Event::Block(b) => b.end_ns,
        Event::Sample(s) => s.t_ns,
        Event::Note(n) => n.t_ns,
        Event::End(e) => e.t_ns,
        Event::Agent(a) => a.t_ns,
        Event::Stack(s) => s.t_ns,
        Event::Framework(f) => f.t_ns,
        Event::Load(l) => l.t_ns,
        Event::GpuReading(g) => g.t_ns,
        Event::DeviceRead(r) => r.t_ns,
        Event::Prediction(p) => p.t_ns,
        Event::Estimate(e) => e.t_ns,
        Event::Misuse(m) => m.t_ns,
        Event::Claim(_) => return None,
    })
}

impl Playback {
    /// A playback of `events`, paused at the end (the whole run, as a recording
    /// opened from the list shows it), and the run it shows there.
    pub fn new(origin: Feed, events: Vec<Event>) -> (Playback, RunState) {
        let mut run = RunState::new(origin);
        let t0 = RunState::from_events(run.origin.clone(), events.iter().take(1)).t0();
        let mut times = Vec::with_capacity(events.len());
        let mut last = 0;
        for e in &events {
            last = last.max(event_time(e).map_or(0, |t| t.saturating_sub(t0)));
            times.push(last);
        }
        let speed = default_speed(last);
        let mut p = Playback {
            events,
            times,
            cursor: 0,
            clock: 0,
            speed,
            paused: true,
        };
        p.seek(&mut run, p.events.len());
        p.clock = p.duration();
        (p, run)
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Every event of the recording, wherever the cursor is.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Adds an event after the last one, at the recording's end time (a
    /// verdict judged from this recording and the one beside it). A playback
    /// at its end shows it at once.
    pub fn append(&mut self, run: &mut RunState, event: Event) {
        let at_end = self.at_end();
        self.times.push(self.times.last().copied().unwrap_or(0));
        self.events.push(event);
        if at_end {
            self.seek(run, self.events.len());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    pub fn at_end(&self) -> bool {
        self.cursor >= self.events.len()
    }

    pub fn duration(&self) -> u64 {
        self.times.last().copied().unwrap_or(0)
    }

    pub fn speed(&self) -> f64 {
        SPEEDS[self.speed]
    }

    pub fn meta(&self) -> Option<&Meta> {
        match self.events.first()? {
            Event::Meta(m) => Some(m),
            _ => None,
        }
    }

    /// One frame of `frame_ns` wall time went by.
    pub fn tick(&mut self, run: &mut RunState, frame_ns: u64) -> bool {
        if self.paused {
            return false;
        }
        self.clock = self
            .clock
            .saturating_add((frame_ns as f64 * self.speed()) as u64);
        let to = self.times.partition_point(|t| *t <= self.clock);
        let moved = to != self.cursor;
        self.seek(run, to);
        if self.at_end() {
            self.paused = true;
            self.clock = self.duration();
        }
        moved
    }

    /// Space: pause or play; playing at the end starts over.
    pub fn toggle(&mut self, run: &mut RunState) {
        if self.paused && self.at_end() {
            self.seek(run, 0);
            self.clock = 0;
        }
        self.paused = !self.paused;
    }

    pub fn faster(&mut self) {
        self.speed = (self.speed + 1).min(SPEEDS.len() - 1);
    }

    pub fn slower(&mut self) {
        self.speed = self.speed.saturating_sub(1);
    }

    /// ←/→: a second of run time back or forward.
    pub fn scrub_seconds(&mut self, run: &mut RunState, forward: bool) {
        let clock = if forward {
            self.clock.saturating_add(SECOND).min(self.duration())
        } else {
            self.clock.saturating_sub(SECOND)
        };
        self.seek_time(run, clock);
    }

    /// Home (start, before the first call) and End (the whole run).
    pub fn home(&mut self, run: &mut RunState) {
        self.seek_time(run, 0);
    }

    pub fn end(&mut self, run: &mut RunState) {
        self.seek_time(run, self.duration());
        self.paused = true;
    }

    /// One call forward: up to and including the next call (the events that came
    /// with it, up to the one after, too), then paused.
    pub fn step_forward(&mut self, run: &mut RunState) {
        self.paused = true;
        let next = (self.cursor..self.events.len())
            .find(|&i| matches!(self.events[i], Event::Call(_)))
            .map(|i| i + 1)
            .unwrap_or(self.events.len());
        // Everything before the following call belongs to this step.
        let to = (next..self.events.len())
            .find(|&i| matches!(self.events[i], Event::Call(_)))
            .unwrap_or(self.events.len());
        self.seek(run, to);
        self.clock = self.cursor_time();
    }

    /// One call back: to just before the last call shown.
    pub fn step_back(&mut self, run: &mut RunState) {
        self.paused = true;
        let last = (0..self.cursor)
            .rev()
            .find(|&i| matches!(self.events[i], Event::Call(_)));
        let to = last.unwrap_or(0);
        self.seek(run, to);
        self.clock = self.cursor_time();
    }

    fn cursor_time(&self) -> u64 {
        self.cursor
            .checked_sub(1)
            .and_then(|i| self.times.get(i))
            .copied()
            .unwrap_or(0)
    }

    fn seek_time(&mut self, run: &mut RunState, clock: u64) {
        self.clock = clock;
        let to = self.times.partition_point(|t| *t <= clock);
        self.seek(run, to);
    }

    /// Moves the cursor: forward folds the new events in, backward re-folds from
    /// the start (a run of 100k events re-folds in milliseconds; see the bench).
    pub fn seek(&mut self, run: &mut RunState, to: usize) {
        let to = to.min(self.events.len());
        if to < self.cursor {
            *run = RunState::new(run.origin.clone());
            self.cursor = 0;
        }
        for e in &self.events[self.cursor..to] {
            run.apply(e);
        }
        self.cursor = to;
        run.closed = self.at_end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_runs_start_slowed_to_last_long_enough_to_narrate() {
        let at = |secs: f64| SPEEDS[default_speed((secs * SECOND as f64) as u64)];
        // Long enough already: real time.
        assert_eq!(at(5.0), 1.0);
        assert_eq!(at(60.0), 1.0);
        // 3 s at 0.5× lasts 6 s.
        assert_eq!(at(3.0), 0.5);
        assert_eq!(at(1.0), 0.1);
        // Nothing slower there is: a 0.39 s run plays at 0.1×, for 3.9 s.
        assert_eq!(at(0.39), 0.1);
        assert_eq!(at(0.0), 0.1);
    }
}
