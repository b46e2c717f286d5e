//! The agent's own threads: started with every signal blocked (a thread
//! inherits its creator's mask), so not one of the program's signals is ever
//! delivered to a thread the program does not know.

/// Spawns `f` on a thread named `name` that blocks every signal.
pub fn spawn<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    let mask = block_all();
    let spawned = std::thread::Builder::new().name(name.into()).spawn(f);
    restore(&mask);
    spawned
}

/// Blocks every signal on the calling thread; returns the mask it had.
fn block_all() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, filled by sigfillset; the old mask is
    // written by pthread_sigmask.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        old
    }
}

/// Gives the calling thread back the mask [`block_all`] returned.
fn restore(old: &libc::sigset_t) {
    // SAFETY: a mask pthread_sigmask filled.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_thread_blocks_every_signal_and_the_caller_keeps_its_mask() {
        let blocked = |sig| {
            // SAFETY: reads the calling thread's mask into plain data.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set);
                libc::sigismember(&set, sig) == 1
            }
        };
        let inside = super::spawn("t", move || blocked(libc::SIGTERM))
            .expect("spawn")
            .join()
            .expect("join");
        assert!(inside);
        assert!(!blocked(libc::SIGTERM));
    }
}
