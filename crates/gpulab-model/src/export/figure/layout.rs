//! Where a figure's parts go: text sizes by the count of runs, the shared
//! time axis, what every panel shares, and one run's places from its title
//! down. Positions only; draws nothing.

use super::{LEFT, RIGHT, W};
use crate::export::decimate::Decimated;

/// Text sizes and heights of one run's panel: a figure of two runs has half the
/// height for each.
pub(super) struct Sizes {
    pub(super) title: f64,
    pub(super) text: f64,
    pub(super) lane: f64,
    pub(super) label_rows: usize,
}

impl Sizes {
    pub(super) fn for_runs(n: usize) -> Sizes {
        if n <= 1 {
            Sizes {
                title: 30.0,
                text: 20.0,
                lane: 40.0,
                label_rows: 4,
            }
        } else {
            Sizes {
                title: 22.0,
                text: 16.0,
                lane: 24.0,
                label_rows: 3,
            }
        }
    }

    pub(super) fn row(&self) -> f64 {
        self.text * 1.35
    }
}

/// Where the runs' shared time falls across the figure.
pub(super) struct Axis {
    pub(super) t_max: f64,
}

impl Axis {
    pub(super) fn x(&self, ms: f64) -> f64 {
        LEFT + (ms / self.t_max).clamp(0.0, 1.0) * (W - LEFT - RIGHT)
    }
}

/// What every panel of one figure shares: its axes, its sizes, and room for as
/// many claims as the run with the most, so stacked plots have one height.
pub(super) struct Shared {
    pub(super) axis: Axis,
    pub(super) y_max: f64,
    pub(super) claim_rows: usize,
    pub(super) sizes: Sizes,
}

/// Where the parts of one run's figure go, from the top down.
pub(super) struct Place {
    /// Height of a row of text.
    pub(super) row: f64,
    /// The band of call labels above the chart.
    pub(super) band_top: f64,
    pub(super) plot_top: f64,
    pub(super) plot_bottom: f64,
    pub(super) lanes_top: f64,
    pub(super) lanes_bottom: f64,
    /// The run's start, time 0 of the x axis.
    pub(super) t0: u64,
}

impl Place {
    pub(super) fn of(
        d: &Decimated,
        top: f64,
        height: f64,
        shared: &Shared,
        titles: usize,
    ) -> (Place, f64) {
        let s = &shared.sizes;
        let row = s.row();
        let lanes = 1 + d.lanes.len();
        let title_y = top + s.title;
        let band_top = title_y + (titles.max(1) - 1) as f64 * s.title * 1.2 + s.text * 0.6;
        let plot_top = band_top + s.label_rows as f64 * row + 4.0;
        let fixed_below =
            lanes as f64 * s.lane + 8.0 + row * 2.2 + shared.claim_rows as f64 * row + 8.0;
        let plot_bottom = (top + height - fixed_below).max(plot_top + 40.0);
        let lanes_top = plot_bottom + 8.0;
        let place = Place {
            row,
            band_top,
            plot_top,
            plot_bottom,
            lanes_top,
            lanes_bottom: lanes_top + lanes as f64 * s.lane,
            t0: d.run.t0(),
        };
        (place, title_y)
    }

    /// The height of `mib` above the baseline on the chart.
    pub(super) fn y(&self, mib: f64, y_max: f64) -> f64 {
        self.plot_bottom - (mib / y_max) * (self.plot_bottom - self.plot_top)
    }
}
