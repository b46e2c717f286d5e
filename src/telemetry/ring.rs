//! A fixed-capacity ring that overwrites its oldest item: the last few seconds of
//! samples, kept without growing however long a run lasts.

#[derive(Debug, Clone)]
pub struct Ring<T> {
    items: Vec<T>,
    capacity: usize,
    /// Index of the oldest item once the ring is full.
    head: usize,
}

impl<T: Clone> Ring<T> {
    /// A ring of `capacity` items (at least one).
    pub fn new(capacity: usize) -> Ring<T> {
        let capacity = capacity.max(1);
        Ring {
            items: Vec::with_capacity(capacity),
            capacity,
            head: 0,
        }
    }

    pub fn push(&mut self, item: T) {
        if self.items.len() < self.capacity {
            self.items.push(item);
        } else {
            self.items[self.head] = item;
            self.head = (self.head + 1) % self.capacity;
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        let (newer, older) = self.items.split_at(self.head);
        older.iter().chain(newer)
    }

    /// Oldest first.
    pub fn to_vec(&self) -> Vec<T> {
        self.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Ring;

    #[test]
    fn keeps_the_newest_in_order() {
        let mut ring = Ring::new(3);
        assert!(ring.is_empty());
        ring.push(1);
        ring.push(2);
        assert_eq!(ring.to_vec(), vec![1, 2]);
        for i in 3..=7 {
            ring.push(i);
        }
        assert_eq!(ring.to_vec(), vec![5, 6, 7]);
        assert_eq!((ring.len(), ring.capacity()), (3, 3));
    }

    #[test]
    fn zero_capacity_holds_one() {
        let mut ring = Ring::new(0);
        ring.push('a');
        ring.push('b');
        assert_eq!(ring.to_vec(), vec!['b']);
    }
}
