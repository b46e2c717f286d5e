//! A recording as a chart draws it, in memory that does not grow with its length.
//! The second pass over its events (after [`Outline`], which fixed the time
//! axis) folds them into a `Run` that keeps its usual window (meta, claims and
//! every line's figures, for titles and tables) and, at the chart's width, the
//! memory readings as a [`Series`] and the calls and device spans as [`Marks`]
//! per lane. A run with few of them keeps them whole as well, and its chart
//! draws each as it always did. Never prints.

mod marks;
mod series;

use std::collections::BTreeMap;
use std::io;

pub(crate) use marks::{Item, Mark, Marks};
pub(crate) use series::Series;

use super::outline::Outline;
use crate::run::Run;
use crate::trace::{Call, CallStatus, DeviceSpan, Event};

/// Readings a series draws one by one, per column of its chart: beyond that it
/// draws four a column at most (first, lowest, highest, last).
const READINGS_PER_COLUMN: usize = 8;
/// Calls, device spans or markers a chart draws one by one, per column.
const ITEMS_PER_COLUMN: usize = 2;
/// The narrowest bar a lane draws, in the chart's units: a call of a few
/// microseconds in a run of seconds still gets a visible sliver.
pub(super) const MIN_BAR: f64 = 1.5;

/// Items kept whole while no more than `budget` came.
#[derive(Debug, Clone)]
struct Few<T> {
    items: Vec<T>,
    budget: u64,
    seen: u64,
}

impl<T> Few<T> {
    fn new(budget: usize) -> Self {
        Few {
            items: Vec::new(),
            budget: budget as u64,
            seen: 0,
        }
    }

    fn push(&mut self, item: T) {
        self.seen += 1;
        if self.seen <= self.budget {
            self.items.push(item);
        } else if !self.items.is_empty() {
            self.items = Vec::new();
        }
    }

    /// Every item, when they were few enough to keep.
    fn all(&self) -> Option<&[T]> {
        (self.seen <= self.budget).then_some(&self.items)
    }
}

/// A call a claim names, marked on a figure: where, its label, and how many
/// calls of that label the mark stands for (one, unless they were too many to
/// draw one by one and shared a pixel column).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Tagged {
    pub x: f64,
    pub label: String,
    pub count: u64,
}

/// One recording's second pass, at one chart's width.
#[derive(Debug, Clone)]
pub(super) struct Decimated {
    /// The run, folded as `report` folds it (a bounded window of calls).
    pub run: Run,
    /// The memory readings the run keeps, at the chart's width.
    pub memory: Series,
    /// The calls outside directives: whole while few, and merged by column.
    calls: Few<Call>,
    pub host: Marks,
    /// The calls' readings after them, merged by column.
    pub dots: Marks,
    /// Each device lane's name, in the order its first span came.
    pub lanes: Vec<String>,
    /// The device spans with their lanes: whole while few, and merged per lane.
    spans: Few<(usize, DeviceSpan)>,
    pub device: Vec<Marks>,
    /// The calls a claim names (their first iteration): whole while few, and
    /// one a column and label past that.
    tagged: Few<Tagged>,
    tagged_columns: BTreeMap<(i64, String), Tagged>,
}

impl Decimated {
    /// Folds `recording`, whose first pass was `outline`, for a chart whose plot
    /// is `columns` units wide, where `x` says where a time falls (in the same
    /// units, from the chart's left edge).
    pub fn fold(
        recording: impl FnOnce(&mut dyn FnMut(Event)) -> io::Result<()>,
        outline: &Outline,
        columns: usize,
        x: impl Fn(u64) -> f64,
    ) -> io::Result<Decimated> {
        let mut d = Decimated {
            run: Run::default(),
            memory: Series::new(READINGS_PER_COLUMN * columns),
            calls: Few::new(ITEMS_PER_COLUMN * columns),
            host: Marks::new(MIN_BAR),
            dots: Marks::new(0.0),
            lanes: Vec::new(),
            spans: Few::new(ITEMS_PER_COLUMN * columns),
            device: Vec::new(),
            tagged: Few::new(ITEMS_PER_COLUMN * columns),
            tagged_columns: BTreeMap::new(),
        };
        let mut index = 0u64;
        recording(&mut |e| {
            d.event(&e, index, outline, &x);
            d.run.apply(&e);
            index += 1;
        })?;
        Ok(d)
    }

    fn event(&mut self, e: &Event, index: u64, outline: &Outline, x: &impl Fn(u64) -> f64) {
        // The readings the run keeps, as `Run::apply` keeps them.
        let mut reading = |t: u64, v: u64, sample: bool| {
            if outline.keeps_reading(index, t, sample) {
                self.memory.push(t, v, x(t).floor() as i64);
            }
        };
        match e {
            Event::Call(c) => {
                if let Some(m) = c.mem_before {
                    reading(c.begin_ns, m, false);
                }
                if let Some(m) = c.mem_after {
                    reading(c.end_ns, m, false);
                }
                self.call(c, x);
            }
            Event::Sample(s) => reading(s.t_ns, s.process_bytes.unwrap_or(s.used_bytes), true),
            Event::DeviceSpan(s) => {
                let name = s
                    .queue_name
                    .clone()
                    .unwrap_or_else(|| format!("#{}", s.queue));
                let lane = match self.lanes.iter().position(|n| *n == name) {
                    Some(i) => i,
                    None => {
                        self.lanes.push(name);
                        self.device.push(Marks::new(MIN_BAR));
                        self.lanes.len() - 1
                    }
                };
                self.device[lane].push(&Item {
                    x0: x(s.begin_ns),
                    x1: x(s.end_ns),
                    begin_ns: s.begin_ns,
                    end_ns: s.end_ns,
                    name: &s.name,
                    failed: false,
                    tagged: false,
                    value: None,
                });
                self.spans.push((lane, s.clone()));
            }
            _ => {}
        }
    }

    fn call(&mut self, c: &Call, x: &impl Fn(u64) -> f64) {
        let (x0, x1) = (x(c.begin_ns), x(c.end_ns));
        if let Some(tag) = c.tag.as_deref()
            && c.iter.first().is_none_or(|i| *i == 0)
        {
            let mark = Tagged {
                x: x1,
                label: format!("{} [{tag}]", c.api),
                count: 1,
            };
            self.tagged_columns
                .entry((x1.floor() as i64, mark.label.clone()))
                .and_modify(|m| m.count += 1)
                .or_insert_with(|| mark.clone());
            self.tagged.push(mark);
        }
        if c.status == CallStatus::Directive {
            return;
        }
        let item = Item {
            x0,
            x1,
            begin_ns: c.begin_ns,
            end_ns: c.end_ns,
            name: &c.api,
            failed: matches!(c.status, CallStatus::Error { .. }),
            tagged: c.tag.is_some(),
            value: None,
        };
        self.host.push(&item);
        if let Some(after) = c.mem_after {
            self.dots.push(&Item {
                x0: x1,
                value: Some(after),
                ..item
            });
        }
        self.calls.push(c.clone());
    }

    /// The calls outside directives, in arrival order, when few enough to draw
    /// one by one; else the chart draws [`Decimated::host`] and
    /// [`Decimated::dots`].
    pub fn calls(&self) -> Option<&[Call]> {
        self.calls.all()
    }

    /// The device spans and their lanes, in arrival order, when few enough to
    /// draw one by one; else the chart draws [`Decimated::device`].
    pub fn spans(&self) -> Option<&[(usize, DeviceSpan)]> {
        self.spans.all()
    }

    /// The calls a claim names: in arrival order while few, else one a column
    /// and label, left to right.
    pub fn tagged(&self) -> Vec<Tagged> {
        match self.tagged.all() {
            Some(all) => all.to_vec(),
            None => self.tagged_columns.values().cloned().collect(),
        }
    }
}
