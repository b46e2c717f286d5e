//! Where the figure's marker labels go: in rows above the plot, so that no label
//! overlaps another or runs off the figure. Pure geometry; draws nothing.

use super::{CHAR_WIDTH, W};

/// A tagged call's marker: where it is, and the label that names it.
pub(super) struct Marker {
    pub(super) x: f64,
    pub(super) label: String,
}

/// Where each label goes: its row (None where no row has room), x and anchor.
pub(super) type Placed = (Option<usize>, f64, &'static str);

/// The row of each label, so that no label overlaps another label, nor (where
/// any row allows) the marker line of a label in a row above it, and none runs
/// off either edge. Markers close to the right edge carry their labels to their left, across
/// the lines of markers before them: placing from the right first then fits
/// more of them, so both orders are tried and the one that drops fewer wins.
pub(super) fn place(markers: &[Marker], rows: usize, size: f64) -> Vec<Placed> {
    let forward = place_in_order(markers.iter().enumerate(), rows, size);
    let backward = place_in_order(markers.iter().enumerate().rev(), rows, size);
    let dropped = |p: &[(usize, Placed)]| p.iter().filter(|(_, p)| p.0.is_none()).count();
    let mut best = if dropped(&backward) < dropped(&forward) {
        backward
    } else {
        forward
    };
    best.sort_by_key(|(i, _)| *i);
    best.into_iter().map(|(_, p)| p).collect()
}

fn place_in_order<'a>(
    order: impl Iterator<Item = (usize, &'a Marker)>,
    rows: usize,
    size: f64,
) -> Vec<(usize, Placed)> {
    let mut taken: Vec<Vec<(f64, f64)>> = vec![Vec::new(); rows];
    let mut lines: Vec<(usize, f64)> = Vec::new();
    let gap = 8.0;
    order
        .map(|(i, m)| {
            let width = m.label.chars().count() as f64 * size * CHAR_WIDTH;
            // Right of the marker, or left of it where the right edge is too near.
            let (start, anchor) = if m.x + 4.0 + width <= W - 4.0 {
                (m.x + 4.0, "start")
            } else {
                (m.x - 4.0 - width, "end")
            };
            let span = (start - gap, start + width + gap);
            let clear = |r: usize| taken[r].iter().all(|(a, b)| span.1 <= *a || span.0 >= *b);
            let free = |r: usize| {
                clear(r)
                    && lines
                        .iter()
                        .all(|(row, x)| *row >= r || *x < start - 2.0 || *x > start + width + 2.0)
                    && (r + 1..rows).all(|below| {
                        taken[below]
                            .iter()
                            .all(|(a, b)| m.x + 3.0 <= *a || m.x - 3.0 >= *b)
                    })
            };
            // Where every row is crossed by other markers' lines, a label over a
            // thin dashed line still reads; over another label it would not.
            let row = (0..rows)
                .find(|r| free(*r))
                .or_else(|| (0..rows).find(|r| clear(*r)));
            if let Some(r) = row {
                taken[r].push(span);
                lines.push((r, m.x));
            }
            let text_x = if anchor == "start" { start } else { m.x - 4.0 };
            (i, (row, text_x, anchor))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(x: f64, label: &str) -> Marker {
        Marker {
            x,
            label: label.to_string(),
        }
    }

    /// Each placed label's horizontal extent, as `place` reckons it.
    fn extent(m: &Marker, x: f64, anchor: &str, size: f64) -> (f64, f64) {
        let w = m.label.chars().count() as f64 * size * CHAR_WIDTH;
        if anchor == "start" {
            (x, x + w)
        } else {
            (x - w, x)
        }
    }

    #[test]
    fn labels_close_in_time_take_different_rows_and_stay_inside() {
        let markers = [
            marker(900.0, "clEnqueueNDRangeKernel [kernel]"),
            marker(905.0, "clReleaseMemObject [release]"),
            marker(W - 10.0, "clFinish [finish]"),
        ];
        let placed = place(&markers, 3, 20.0);
        let rows: Vec<_> = placed.iter().map(|p| p.0).collect();
        assert_eq!(rows[0], Some(0));
        assert_eq!(rows[1], Some(1));
        for (m, (row, x, anchor)) in markers.iter().zip(&placed) {
            assert!(row.is_some());
            let (a, b) = extent(m, *x, anchor, 20.0);
            assert!(a >= 0.0 && b <= W, "{} runs off: {a}..{b}", m.label);
        }
        // Labels sharing a row never overlap.
        for (i, p) in placed.iter().enumerate() {
            for (j, q) in placed.iter().enumerate().skip(i + 1) {
                if p.0 == q.0 {
                    let (a0, a1) = extent(&markers[i], p.1, p.2, 20.0);
                    let (b0, b1) = extent(&markers[j], q.1, q.2, 20.0);
                    assert!(a1 <= b0 || b1 <= a0, "{i} and {j} overlap");
                }
            }
        }
    }

    #[test]
    fn a_label_with_no_room_left_is_dropped_not_drawn_over_another() {
        let markers: Vec<Marker> = (0..4)
            .map(|i| marker(500.0 + i as f64, "clReleaseMemObject [release]"))
            .collect();
        let rows: Vec<_> = place(&markers, 2, 20.0).iter().map(|p| p.0).collect();
        assert_eq!(rows, [Some(0), Some(1), None, None]);
    }
}
