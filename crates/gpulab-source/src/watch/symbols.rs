//! Names the frames of a watched program's stacks (`watch --backtrace`) while
//! the files it mapped are still on disk: the function from the file's symbol
//! table or debug information (demangled), and `file:line` where it has debug
//! information. The agent sends each frame as file + address in that file; this
//! reads the file as `addr2line -f -C -e FILE ADDRESS` would.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::mpsc::{self, SyncSender};

use addr2line::Loader;

use crate::trace::sink::Sink;
use crate::trace::{Event, Frame, Stack};

/// The naming thread: where stacks go in, and the thread to join once the
/// sender is dropped.
pub type Naming = (SyncSender<Stack>, std::thread::JoinHandle<()>);

/// Starts the thread that names stacks and passes them on as events; the
/// returned sender takes them in. None if no thread could be started.
pub fn name_stacks(out: Sink) -> Option<Naming> {
    // Bounded: a flood of stacks waits for the naming, not in memory.
    let (tx, rx) = mpsc::sync_channel::<Stack>(super::STACKS_WAITING);
    let thread = std::thread::Builder::new()
        .name("gpulab-symbols".into())
        .spawn(move || {
            let mut symbols = Symbols::default();
            for mut stack in rx {
                symbols.name(&mut stack.frames);
                if !out.event(Event::Stack(stack)) {
                    return;
                }
            }
        })
        .ok()?;
    Some((tx, thread))
}

/// Each file's symbols, read once; `None` where the file cannot be read.
#[derive(Default)]
pub struct Symbols {
    files: HashMap<String, Option<Loader>>,
}

impl Symbols {
    /// Fills in what the files say about `frames`; what they cannot tell stays
    /// as the agent had it (its dynamic symbol, or none). The static CUDA
    /// runtime's internal frames at the top (`libcudart_static_<hash>`, inside
    /// the program's own file) are left out, so the stack starts at the API
    /// call the program made (`cudaMalloc`).
    pub fn name(&mut self, frames: &mut Vec<Frame>) {
        self.name_each(frames);
        let inside = frames
            .iter()
            .take_while(|f| {
                f.function
                    .as_deref()
                    .is_some_and(|n| n.starts_with("libcudart_static_"))
            })
            .count();
        if inside < frames.len() {
            frames.drain(..inside);
        }
    }

    fn name_each(&mut self, frames: &mut [Frame]) {
        for frame in frames {
            if frame.module.is_empty() {
                continue;
            }
            let full = self.files.len() >= MODULES_KEPT;
            let loader = match self.files.entry(frame.module.clone()) {
                Entry::Occupied(e) => e.into_mut().as_ref(),
                Entry::Vacant(_) if full => None,
                Entry::Vacant(e) => e.insert(open(&frame.module)).as_ref(),
            };
            let Some(loader) = loader else {
                frame.function = frame.function.take().map(|f| demangle(&f));
                continue;
            };
            let (function, location) = describe(loader, frame.address);
            frame.function = function.or_else(|| frame.function.take().map(|f| demangle(&f)));
            frame.location = location.or(frame.location.take());
        }
    }
}

/// Files whose symbols are read at most: a program maps a few hundred.
const MODULES_KEPT: usize = 1024;
/// Files larger than this are not read (a debug build of a large library is a
/// few GiB at most).
const MODULE_MAX_BYTES: u64 = 8 << 30;

/// The loader of `path` when it is a regular file of a sane size. The path comes
/// from the watched program's records: a FIFO or a device there must not block
/// this thread, so the file is opened without blocking and looked at before
/// anything reads it.
fn open(path: &str) -> Option<Loader> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MODULE_MAX_BYTES {
        return None;
    }
    drop(file);
    Loader::new(path).ok()
}

/// The function at `address` (the outermost of inlined ones: the one the
/// return address is in) and the innermost source line.
fn describe(loader: &Loader, address: u64) -> (Option<String>, Option<String>) {
    let location =
        loader
            .find_location(address)
            .ok()
            .flatten()
            .and_then(|l| match (l.file, l.line) {
                (Some(file), Some(line)) => Some(format!("{file}:{line}")),
                _ => None,
            });
    let mut function = None;
    if let Ok(mut frames) = loader.find_frames(address) {
        while let Ok(Some(f)) = frames.next() {
            if let Some(name) = f.function.as_ref().and_then(|n| n.demangle().ok()) {
                function = Some(name.into_owned());
            }
        }
    }
    let function = function.or_else(|| loader.find_symbol(address).map(demangle));
    (function, location)
}

fn demangle(name: &str) -> String {
    addr2line::demangle_auto(name.into(), None).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test's own code, named from the test binary's symbols and debug
    /// information as the agent would send it.
    #[inline(never)]
    fn marker() -> usize {
        std::hint::black_box(42)
    }

    #[test]
    fn frames_are_named_from_the_file_with_function_and_line() {
        let exe = std::env::current_exe().expect("test binary");
        let bias = load_bias();
        let f: fn() -> usize = marker;
        let mut frames = vec![Frame {
            module: exe.display().to_string(),
            address: (f as usize - bias) as u64 + 1,
            build_id: None,
            function: None,
            location: None,
            python: false,
        }];
        Symbols::default().name(&mut frames);
        let name = frames[0].function.clone().unwrap_or_default();
        assert!(name.ends_with("symbols::tests::marker"), "{frames:?}");
        let at = frames[0].location.clone().unwrap_or_default();
        assert!(at.contains("symbols.rs:"), "{frames:?}");
    }

    #[test]
    fn the_static_cuda_runtimes_own_frames_are_left_out_at_the_top() {
        let frame = |f: &str| Frame {
            module: String::new(),
            address: 0,
            build_id: None,
            function: Some(f.into()),
            location: None,
            python: false,
        };
        let mut frames = vec![
            frame("libcudart_static_5382377d"),
            frame("libcudart_static_f74e2f2b"),
            frame("cudaMalloc"),
            frame("main"),
        ];
        Symbols::default().name(&mut frames);
        let names: Vec<_> = frames.iter().filter_map(|f| f.function.clone()).collect();
        assert_eq!(names, ["cudaMalloc", "main"]);
    }

    #[test]
    fn a_file_that_cannot_be_read_keeps_the_agents_name_demangled() {
        let mut frames = vec![Frame {
            module: "/nonexistent/libapp.so".into(),
            address: 0x1234,
            build_id: None,
            function: Some("_Z4leakv".into()),
            location: None,
            python: false,
        }];
        Symbols::default().name(&mut frames);
        assert_eq!(frames[0].function.as_deref(), Some("leak()"));
        assert_eq!(frames[0].describe(), "leak() in libapp.so");
    }

    /// A stack naming a FIFO (any process of the program can send one) is left
    /// as the agent named it; before, opening the FIFO blocked this thread.
    #[test]
    fn a_fifo_named_as_a_module_is_not_opened_for_reading() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        )
        .expect("mkfifo");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut frames = vec![Frame {
                module: fifo.display().to_string(),
                address: 0x1234,
                build_id: None,
                function: Some("leak".into()),
                location: None,
                python: false,
            }];
            Symbols::default().name(&mut frames);
            let _ = tx.send(frames);
        });
        // Generous: it either returns at once or blocks forever.
        let frames = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("naming a FIFO's frames blocked");
        assert_eq!(frames[0].function.as_deref(), Some("leak"));
    }

    /// Where the test binary was loaded: the start of its mapping at file
    /// offset 0 (a PIE's first segment sits at address 0 of the file).
    fn load_bias() -> usize {
        let exe = std::fs::read_link("/proc/self/exe").expect("exe");
        let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
        maps.lines()
            .find_map(|l| {
                let fields: Vec<&str> = l.split_whitespace().collect();
                (fields.len() >= 6
                    && fields[2].chars().all(|c| c == '0')
                    && std::path::Path::new(fields[5]) == exe)
                    .then(|| fields[0].split('-').next())
                    .flatten()
                    .and_then(|lo| usize::from_str_radix(lo, 16).ok())
            })
            .expect("the test binary is mapped")
    }
}
