//! The clock every gpulab process reads: CLOCK_MONOTONIC in nanoseconds, so agent
//! records line up with the parent's samples without any exchange.

pub fn now_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}

thread_local! {
    static TID: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The calling thread's kernel id, as `ps -L` and the parent's samples name it.
pub fn thread_id() -> u64 {
    TID.with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid has no preconditions.
            t.set(unsafe { libc::gettid() } as u64);
        }
        t.get()
    })
}

/// In a forked child: the one thread left has a new id (its process's).
pub fn forget_thread_id() {
    TID.with(|t| t.set(0));
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_clock_moves_forward_and_threads_have_ids() {
        let a = super::now_ns();
        assert!(super::now_ns() >= a);
        let here = super::thread_id();
        let there = std::thread::spawn(super::thread_id).join().expect("thread");
        assert_ne!(here, there);
        assert_eq!(here, super::thread_id());
    }
}
