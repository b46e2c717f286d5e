//! Choosing a variant and editing parameters within their ranges.

use super::{A, App, Entry, Overlay};
use crate::keys::Action;
use crate::runstate::Feed;

impl App {
    pub(super) fn cycle_variant(&mut self, forward: bool) {
        let Some(Entry::Lab(i)) = self.selected_entry() else {
            return;
        };
        let Some(lab) = self.labs.get(i) else { return };
        let n = lab.variants.len().max(1);
        let cur = self.variant_of(lab);
        let next = if forward {
            (cur + 1) % n
        } else {
            (cur + n - 1) % n
        };
        let id = lab.id.clone();
        let kept = self.slots[A]
            .as_ref()
            .filter(|r| matches!(r.origin, Feed::Live { .. }) && !r.running())
            .filter(|r| r.lab_id().as_deref() == Some(id.as_str()))
            .and_then(|r| match &r.origin {
                Feed::Live { variant, .. } => Some(variant.clone()),
                _ => None,
            });
        let name = lab.variants.get(next).map(|v| v.name.clone());
        self.variants.insert(id, next);
        self.script_scroll = 0;
        self.verdict_scroll = 0;
        if let (Some(old), Some(new)) = (kept, name)
            && old != new
        {
            self.message = Some(format!(
                "[{new}] not run yet; the [{old}] run is kept: v/V back shows it"
            ));
        }
    }

    pub(super) fn open_params(&mut self) {
        match self.selected_entry() {
            Some(Entry::Lab(i)) if self.labs.get(i).is_some_and(|l| !l.params.is_empty()) => {
                self.overlay = Overlay::Params {
                    selected: 0,
                    typed: String::new(),
                };
            }
            Some(Entry::Lab(_)) => self.message = Some("this lab has no parameters".into()),
            _ => self.message = Some("parameters belong to a lab: select one first".into()),
        }
    }

    pub(super) fn param_action(&mut self, a: Action) {
        let Some(Entry::Lab(i)) = self.selected_entry() else {
            self.overlay = Overlay::None;
            return;
        };
        let Some(lab) = self.labs.get(i).cloned() else {
            return;
        };
        let Overlay::Params { selected, typed } = &mut self.overlay else {
            return;
        };
        let n = lab.params.len();
        let Some(p) = lab.params.get(*selected) else {
            self.overlay = Overlay::None;
            return;
        };
        let mut values = self
            .params
            .get(&lab.id)
            .cloned()
            .unwrap_or_else(|| lab.default_params());
        let cur = values.get(&p.name).copied().unwrap_or(p.default);
        let new = match a {
            Action::Up => {
                *selected = selected.saturating_sub(1);
                typed.clear();
                None
            }
            Action::Down => {
                *selected = (*selected + 1).min(n.saturating_sub(1));
                typed.clear();
                None
            }
            Action::Less => Some(crate::panels::params::nudge(cur, p.min, p.max, false)),
            Action::More => Some(crate::panels::params::nudge(cur, p.min, p.max, true)),
            Action::Reset => Some(p.default),
            Action::Run => match typed.parse::<f64>() {
                Ok(v) if (p.min..=p.max).contains(&v) => {
                    typed.clear();
                    Some(v)
                }
                _ => {
                    self.message = Some(format!(
                        "`{typed}` is not a value of {} ({}..={} {})",
                        p.name,
                        p.min,
                        p.max,
                        p.unit.as_str()
                    ));
                    typed.clear();
                    None
                }
            },
            Action::Cancel => {
                self.overlay = Overlay::None;
                None
            }
            _ => None,
        };
        if let Some(v) = new {
            values.insert(p.name.clone(), v);
            self.params.insert(lab.id.clone(), values);
        }
    }
}

impl App {
    /// `n`: the next process of slot A's watched program, by rank then pid,
    /// alone in the objects and findings panels; past the last, every
    /// process again.
    pub(super) fn cycle_rank(&mut self) {
        let Some(run) = self.slots[A].as_ref() else {
            return;
        };
        let ranks = &run.run.ranks();
        let order = ranks.colour_order();
        if order.len() < 2 {
            self.rank = None;
            self.message = Some(
                "n shows one rank of a watched job alone: this run has one process on a GPU".into(),
            );
            return;
        }
        let at = self
            .rank
            .and_then(|pid| order.iter().position(|p| *p == pid));
        let next = match at {
            None => Some(0),
            Some(i) => (i + 1 < order.len()).then_some(i + 1),
        };
        self.rank = next.and_then(|i| order.get(i).copied());
        self.verdict_scroll = 0;
        self.message = Some(match self.rank {
            Some(pid) => format!(
                "showing {} (pid {pid}) alone in the objects and findings panels; n: the next",
                crate::panels::gpus::short_name(ranks, pid)
            ),
            None => "showing every process again".into(),
        });
    }
}
