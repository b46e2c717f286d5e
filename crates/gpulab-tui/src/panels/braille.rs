//! A Braille dot grid: 2×4 dots a cell, each cell keeping the style of the highest
//! layer that drew in it. Cheaper than a general canvas for the chart's few lines.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

pub struct Grid {
    pub cols: usize,
    pub rows: usize,
    dots: Vec<u8>,
    layer: Vec<u8>,
}

const BITS: [[u8; 4]; 2] = [[0x01, 0x02, 0x04, 0x40], [0x08, 0x10, 0x20, 0x80]];

impl Grid {
    pub fn new(cols: usize, rows: usize) -> Grid {
        Grid {
            cols,
            rows,
            dots: vec![0; cols * rows],
            layer: vec![0; cols * rows],
        }
    }

    /// Dots across and down.
    pub fn width(&self) -> usize {
        self.cols * 2
    }
    pub fn height(&self) -> usize {
        self.rows * 4
    }

    pub fn set(&mut self, x: usize, y: usize, layer: u8) {
        if x >= self.width() || y >= self.height() {
            return;
        }
        let i = (y / 4) * self.cols + x / 2;
        self.dots[i] |= BITS[x % 2][y % 4];
        self.layer[i] = self.layer[i].max(layer);
    }

    pub fn vline(&mut self, x: usize, y0: usize, y1: usize, layer: u8) {
        let (a, b) = if y0 <= y1 { (y0, y1) } else { (y1, y0) };
        for y in a..=b.min(self.height().saturating_sub(1)) {
            self.set(x, y, layer);
        }
    }

    /// A dotted line across: every other dot, so data drawn over it stays legible.
    pub fn hline(&mut self, y: usize, layer: u8) {
        for x in (0..self.width()).step_by(2) {
            self.set(x, y, layer);
        }
    }

    /// Writes the cells at `area`'s top-left, styling each by its layer.
    pub fn render(&self, area: Rect, buf: &mut Buffer, styles: &[Style]) {
        for row in 0..self.rows.min(area.height as usize) {
            for col in 0..self.cols.min(area.width as usize) {
                let i = row * self.cols + col;
                if self.dots[i] == 0 {
                    continue;
                }
                let ch = char::from_u32(0x2800 + u32::from(self.dots[i])).unwrap_or(' ');
                let style = styles
                    .get(self.layer[i] as usize)
                    .copied()
                    .unwrap_or_default();
                if let Some(cell) = buf.cell_mut((area.x + col as u16, area.y + row as u16)) {
                    cell.set_char(ch).set_style(style);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_land_in_their_cells() {
        let mut g = Grid::new(2, 1);
        g.set(0, 0, 1);
        g.set(3, 3, 1);
        let mut buf = Buffer::empty(Rect::new(0, 0, 2, 1));
        g.render(
            Rect::new(0, 0, 2, 1),
            &mut buf,
            &[Style::new(), Style::new()],
        );
        assert_eq!(buf[(0, 0)].symbol(), "⠁");
        assert_eq!(buf[(1, 0)].symbol(), "⢀");
    }
}
