//! Complete slices that nest on each track, as the trace format asks: two
//! slices of one track either hold one another or are disjoint. A thread's
//! calls nest by nature, and so do an in-order queue's spans; where the
//! recorded times of two partly overlap (an out-of-order queue, a clock that
//! stepped, a hostile recording), the later-starting slice is moved, whole
//! and with its recorded times, to a track of its own beside its thread's
//! (`…, overlapping slices 1`), never clamped: no measured time is changed.
//! Fed the slices in time order, longer first at equal times; holds the open
//! slices of each track only.

use std::collections::HashMap;

/// Where a slice goes: its track, or the `n`th overlap track of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Placed {
    OnItsTrack,
    Overlapping(usize),
}

/// The open slices' ends on each track and on each of its overlap tracks.
#[derive(Debug, Default)]
pub(super) struct Nesting {
    open: HashMap<(u32, u64), Vec<Vec<i64>>>,
    moved: u64,
}

impl Nesting {
    /// Places a slice `begin..end` (ns) of track `(pid, tid)`; slices must
    /// come in order of begin, the longer first at equal begins.
    pub fn place(&mut self, track: (u32, u64), begin: i64, end: i64) -> Placed {
        let lanes = self.open.entry(track).or_default();
        let fits = |lane: &mut Vec<i64>| {
            while lane.last().is_some_and(|&e| e <= begin) {
                lane.pop();
            }
            lane.last().is_none_or(|&e| end <= e)
        };
        let at = match lanes.iter_mut().position(fits) {
            Some(i) => i,
            None => {
                lanes.push(Vec::new());
                lanes.len() - 1
            }
        };
        lanes[at].push(end);
        if at == 0 {
            Placed::OnItsTrack
        } else {
            self.moved += 1;
            Placed::Overlapping(at)
        }
    }

    /// Slices moved to overlap tracks so far.
    pub fn moved(&self) -> u64 {
        self.moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_and_disjoint_slices_stay_and_a_partly_overlapping_one_moves() {
        let mut n = Nesting::default();
        let t = (1, 7);
        assert_eq!(n.place(t, 0, 100), Placed::OnItsTrack);
        assert_eq!(n.place(t, 0, 50), Placed::OnItsTrack);
        assert_eq!(n.place(t, 10, 20), Placed::OnItsTrack);
        // Starts inside 0..100 and ends past it.
        assert_eq!(n.place(t, 90, 150), Placed::Overlapping(1));
        // Inside the moved one: it nests on the overlap track.
        assert_eq!(n.place(t, 95, 140), Placed::Overlapping(1));
        assert_eq!(n.place(t, 99, 160), Placed::Overlapping(2));
        // Past the first: its thread's track again.
        assert_eq!(n.place(t, 120, 130), Placed::OnItsTrack);
        // Another track is apart.
        assert_eq!(n.place((1, 8), 90, 150), Placed::OnItsTrack);
        assert_eq!(n.moved(), 3);
    }
}
