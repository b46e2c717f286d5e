//! Memory after the first and the last iteration of each tagged `repeat` block,
//! folded as calls arrive, for `per_iter_mib`: a block of a million iterations
//! outlives the Run's window of calls, so its calls cannot be read back when its
//! `block` event (sent after its last call) arrives.

use std::collections::BTreeMap;

use crate::trace::{Block, Call};

/// An iteration index and the memory after that iteration's last call.
pub type After = (u32, u64);

/// The first and the last iteration that have a reading, of one block instance.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IterRange {
    pub first: Option<After>,
    pub last: Option<After>,
}

/// Per nesting depth, the block instance being run there; per tag, the first
/// instance's range once its `block` event came.
#[derive(Debug, Clone, Default)]
pub struct Iterations {
    open: Vec<IterRange>,
    /// `iter.len()` of the latest call: how many blocks enclose it.
    depth_of_last_call: usize,
    /// Blocks (that ran) closed since the latest call: each closes one level.
    closed_since_call: usize,
    pub by_tag: BTreeMap<String, IterRange>,
}

impl Iterations {
    pub fn call(&mut self, c: &Call) {
        self.depth_of_last_call = c.iter.len();
        self.closed_since_call = 0;
        let Some(m) = c.mem_after else { return };
        if self.open.len() < c.iter.len() {
            self.open.resize(c.iter.len(), IterRange::default());
        }
        // A call inside a block at depth d carries that block's iteration at d;
        // iterations of one instance run in order, so the first seen is the
        // lowest and the latest the highest.
        for (range, &i) in self.open.iter_mut().zip(&c.iter) {
            match &mut range.first {
                Some((fi, fm)) if *fi == i => *fm = m,
                Some(_) => {}
                None => range.first = Some((i, m)),
            }
            range.last = Some((i, m));
        }
    }

    /// A block ended: the instance open at its depth is complete.
    pub fn block(&mut self, b: &Block) {
        if b.iterations == 0 {
            return;
        }
        let depth = self
            .depth_of_last_call
            .saturating_sub(1 + self.closed_since_call);
        self.closed_since_call += 1;
        let Some(range) = self.open.get_mut(depth).map(std::mem::take) else {
            return;
        };
        if let Some(tag) = &b.tag {
            self.by_tag.entry(tag.clone()).or_insert(range);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(iter: Vec<u32>, mem: u64) -> Call {
        Call {
            seq: 0,
            pid: 1,
            line: Some(1),
            iter,
            api: "clFinish".into(),
            driver: "clFinish".into(),
            begin_ns: 0,
            end_ns: 0,
            mem_before: Some(0),
            mem_after: Some(mem),
            ..Default::default()
        }
    }

    fn block(tag: &str, iterations: u32) -> Block {
        Block {
            line: 1,
            tag: Some(tag.into()),
            iterations,
            planned: iterations,
            begin_ns: 0,
            end_ns: 0,
            mem_before: None,
            mem_after: None,
        }
    }

    /// `repeat A { a; repeat B { b }; c }` with memory as a function of the
    /// iterations: each range is its block's first instance.
    #[test]
    fn nested_blocks_keep_their_first_instances_first_and_last_iteration() {
        let (a_n, b_n) = (4u32, 3u32);
        let mut it = Iterations::default();
        let mem = |i: u32, j: u32, k: u64| u64::from(i) * 1000 + u64::from(j) * 10 + k;
        for i in 0..a_n {
            it.call(&call(vec![i], mem(i, 0, 1)));
            for j in 0..b_n {
                it.call(&call(vec![i, j], mem(i, j, 2)));
            }
            it.block(&block("inner", b_n));
            it.call(&call(vec![i], mem(i, 9, 3)));
        }
        it.block(&block("outer", a_n));
        assert_eq!(
            it.by_tag["inner"],
            IterRange {
                first: Some((0, mem(0, 0, 2))),
                last: Some((b_n - 1, mem(0, b_n - 1, 2))),
            }
        );
        assert_eq!(
            it.by_tag["outer"],
            IterRange {
                first: Some((0, mem(0, 9, 3))),
                last: Some((a_n - 1, mem(a_n - 1, 9, 3))),
            }
        );
    }

    #[test]
    fn a_block_that_ends_last_in_its_parent_closes_the_right_depth() {
        // `repeat 2 { a; repeat 2 { b } }`: the inner block is the outer's last line.
        let mut it = Iterations::default();
        for i in 0..2 {
            it.call(&call(vec![i], 10 + u64::from(i)));
            for j in 0..2 {
                it.call(&call(vec![i, j], 100 * u64::from(i) + u64::from(j)));
            }
            it.block(&block("inner", 2));
        }
        it.block(&block("outer", 2));
        assert_eq!(it.by_tag["outer"].first, Some((0, 1)));
        assert_eq!(it.by_tag["outer"].last, Some((1, 101)));
        assert_eq!(it.by_tag["inner"].last, Some((1, 1)));
    }
}
