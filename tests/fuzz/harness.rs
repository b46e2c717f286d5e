//! Runs one target over many inputs on a worker thread with a small stack, so a
//! panic, a stack overflow or a hang is a test failure that names its input.
//! Never writes into the source tree: crash candidates go to Cargo's temp dir.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

/// A debug main thread's stack is 8 MiB; the worker gets 1 MiB, so recursion that
/// only just fits at home fails here rather than passing by luck.
const STACK: usize = 1 << 20;

/// Ample for any one input even in a debug build on a loaded machine; a parser that
/// goes quadratic or loops on some input takes far longer.
const PER_INPUT: Duration = Duration::from_secs(60);

const DEFAULT_SEED: u64 = 0x6770_756c_6162; // "gpulab"

/// Iterations per target: `GPULAB_FUZZ_ITERS`, else the given default.
pub fn iterations(default: usize) -> usize {
    std::env::var("GPULAB_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn seed() -> u64 {
    std::env::var("GPULAB_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_SEED)
}

/// Feeds every input from `inputs` to `body` on one small-stack worker. A panic is
/// caught, its input saved and the run goes on; the test fails at the end listing
/// them. A hang fails at once. A stack overflow aborts the process: in a long run
/// each input is written to `<tmp>/fuzz-<target>-current` first, so it survives.
pub fn run(target: &str, inputs: impl Iterator<Item = Vec<u8>>, body: fn(&[u8])) -> usize {
    let (to_worker, work) = mpsc::channel::<Vec<u8>>();
    let (to_main, done) = mpsc::channel::<Result<(), String>>();
    let worker = std::thread::Builder::new()
        .name(format!("fuzz-{target}"))
        .stack_size(STACK)
        .spawn(move || {
            for input in work {
                let outcome = catch_unwind(AssertUnwindSafe(|| body(&input)))
                    .map_err(|e| panic_text(e.as_ref()));
                if to_main.send(outcome).is_err() {
                    break;
                }
            }
        })
        .expect("spawn the fuzz worker");
    let current = std::env::var_os("GPULAB_FUZZ_ITERS")
        .map(|_| crash_dir().join(format!("fuzz-{target}-current")));
    let mut crashes = Vec::new();
    let mut count = 0;
    for input in inputs {
        if let Some(path) = &current {
            std::fs::write(path, &input).expect("save the current input");
        }
        to_worker.send(input.clone()).expect("the worker is alive");
        match done.recv_timeout(PER_INPUT) {
            Ok(Ok(())) => {}
            Ok(Err(message)) => {
                let path = crash_dir().join(format!("crash-{target}-{}", crashes.len()));
                std::fs::write(&path, &input).expect("save a crash");
                crashes.push(format!("{}: {message}", path.display()));
            }
            Err(_) => panic!(
                "{target}: no answer within {PER_INPUT:?} for input {:?}",
                String::from_utf8_lossy(&input)
            ),
        }
        count += 1;
    }
    drop(to_worker);
    worker.join().expect("the worker ends");
    assert!(
        crashes.is_empty(),
        "{target}: {} of {count} inputs panicked:\n{}",
        crashes.len(),
        crashes.join("\n")
    );
    count
}

fn crash_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

fn panic_text(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
