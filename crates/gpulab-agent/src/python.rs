//! The Python lines of a call that makes an object, where the program is
//! CPython: the frames of the calling thread's Python stack, innermost first,
//! each as file, line and function. A PyTorch or pyopencl user asks which
//! line of their script holds memory; the native stack names only the
//! extension module that called the driver.
//!
//! The thread is inside a native call made from Python, so its Python
//! frames stand still while they are read; but it may not hold the GIL
//! (PyTorch releases it around its operators), so nothing here calls into
//! Python: the frames are read as memory, the way py-spy reads them from
//! outside, through `process_vm_readv` on the process itself, which fails
//! with an error on an unmapped address instead of faulting (and not at all
//! in a thread under a seccomp filter, which might not allow it). Only the layouts
//! of interpreter versions this file knows are read ([`Layout::of`]); any
//! other CPython gets no Python lines, and nothing is guessed.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_void};
use std::sync::OnceLock;

/// Frames walked at most per call, and Python frames kept.
const WALKED: usize = 64;
pub const KEPT: usize = 16;
/// Longest file name and function name read, bytes.
const NAME_MAX: usize = 512;
/// Largest line table read, bytes.
const TABLE_MAX: usize = 1 << 16;

/// One Python frame: where the call was when the object was made.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PyFrame {
    pub file: Box<str>,
    pub line: u32,
    pub function: Box<str>,
}

impl PyFrame {
    /// Whether the frame is the program's own code, not an installed
    /// package's (`site-packages`, `dist-packages`) or the standard
    /// library's (`lib/pythonX.Y/`, frozen modules).
    pub fn is_users(&self) -> bool {
        is_users(&self.file)
    }
}

fn is_users(file: &str) -> bool {
    if file.contains("/site-packages/") || file.contains("/dist-packages/") {
        return false;
    }
    if file.starts_with("<frozen ") {
        return false;
    }
    // The standard library: a `pythonX.Y` directory under a `lib` one.
    let parts: Vec<&str> = file.split('/').collect();
    !parts.windows(2).any(|w| {
        (w[0] == "lib" || w[0] == "lib64")
            && w[1]
                .strip_prefix("python3.")
                .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Where CPython keeps what the walk reads, for one minor version (x86-64
/// and aarch64 alike: pointers of 8 bytes). From the interpreter's own
/// headers (`Include/cpython/pystate.h`, `Include/internal/pycore_frame.h`,
/// `Include/cpython/code.h`, `Include/cpython/unicodeobject.h`), read with
/// `offsetof` against each version's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    /// The thread's running frame: `tstate.cframe->current_frame` (3.11,
    /// 3.12: `tstate_frame` is `cframe`'s offset, `cframe_current` the
    /// frame's in it), or `tstate.current_frame` (3.13).
    tstate_frame: usize,
    cframe_current: Option<usize>,
    /// `_PyInterpreterFrame`: its code (`f_code`, 3.13 `f_executable`),
    /// `previous`, the instruction running (`prev_instr`, 3.13 `instr_ptr`),
    /// `owner`.
    frame_code: usize,
    frame_previous: usize,
    frame_instr: usize,
    frame_owner: usize,
    frame_size: usize,
    /// `PyCodeObject`: the fields read, and its instructions.
    code_firstlineno: usize,
    code_filename: usize,
    code_qualname: usize,
    code_linetable: usize,
    code_firsttraceable: usize,
    code_instructions: usize,
    /// Where a compact `str`'s characters start: ASCII, then other.
    ascii_data: usize,
    compact_data: usize,
}

/// `FRAME_OWNED_BY_GENERATOR` (pycore_frame.h): such a frame is never
/// incomplete; `FRAME_OWNED_BY_CSTACK` (3.12 and later): the interpreter's
/// own entry frame, no code of the program's.
const OWNED_BY_GENERATOR: u8 = 1;
const OWNED_BY_CSTACK: u8 = 3;

impl Layout {
    /// The layout of CPython `major.minor` (from `Py_Version`), if known.
    fn of(version: u64) -> Option<Layout> {
        let frame = |code, previous, instr, owner| Layout {
            tstate_frame: 56,
            cframe_current: Some(8),
            frame_code: code,
            frame_previous: previous,
            frame_instr: instr,
            frame_owner: owner,
            frame_size: 80,
            code_firstlineno: 72,
            code_filename: 112,
            code_qualname: 128,
            code_linetable: 136,
            code_firsttraceable: 168,
            code_instructions: 184,
            ascii_data: 48,
            compact_data: 72,
        };
        match version >> 16 {
            0x030B => Some(frame(32, 48, 56, 69)),
            0x030C => Some(Layout {
                cframe_current: Some(0),
                code_firstlineno: 68,
                code_firsttraceable: 176,
                code_instructions: 192,
                ascii_data: 40,
                compact_data: 56,
                ..frame(0, 8, 56, 70)
            }),
            0x030D => Some(Layout {
                tstate_frame: 72,
                cframe_current: None,
                code_firstlineno: 68,
                code_firsttraceable: 184,
                code_instructions: 200,
                ascii_data: 40,
                compact_data: 56,
                ..frame(0, 8, 56, 70)
            }),
            _ => None,
        }
    }
}

/// The interpreter in this process, once it is there.
struct Runtime {
    layout: Layout,
    /// `PyCode_Type`: a frame's code is read only where its object is one.
    code_type: usize,
    /// `PyGILState_GetThisThreadState`: the calling thread's state, read
    /// from thread-specific storage; it takes no lock and needs no GIL.
    this_thread: unsafe extern "C" fn() -> *mut c_void,
}

/// What the process says of Python: None before CPython is loaded; then
/// its version, and a runtime where the layout is known.
fn runtime() -> Option<&'static Runtime> {
    static FOUND: OnceLock<Option<Runtime>> = OnceLock::new();
    static LOOKED_AT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);
    if let Some(found) = FOUND.get() {
        return found.as_ref();
    }
    // Not loaded yet: looked for again once the process loaded a library.
    let generation = crate::loaded::generation();
    if LOOKED_AT.swap(generation, std::sync::atomic::Ordering::Relaxed) == generation {
        return None;
    }
    let this_thread = symbol(c"PyGILState_GetThisThreadState")?;
    // CPython is here: from now on it is read, or said not to be.
    let version = symbol(c"Py_Version")
        // SAFETY: `Py_Version` is CPython's `const unsigned long` (3.11 and later).
        .map(|v| unsafe { *v.cast::<u64>() });
    let layout = version.and_then(Layout::of);
    let code_type = symbol(c"PyCode_Type");
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if (layout.is_none() || code_type.is_none())
        && !SAID.swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        crate::transport::python_unread(format!(
            "the program's Python lines are not read in CPython {} (this gpulab reads 3.11, \
             3.12 and 3.13): its objects are named by their native frames alone",
            said_version()
        ));
    }
    // Known or not, it is settled for the process's life (said once).
    let runtime = layout.zip(code_type).map(|(layout, code_type)| Runtime {
        layout,
        code_type: code_type as usize,
        // SAFETY: the symbol is this C function.
        this_thread: unsafe {
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> *mut c_void>(this_thread)
        },
    });
    FOUND.get_or_init(|| runtime).as_ref()
}

/// The interpreter's version as it says it (`Py_GetVersion`: a static
/// string, read without the GIL), up to its first space.
fn said_version() -> String {
    let Some(f) = symbol(c"Py_GetVersion") else {
        return "(of a version it does not say)".into();
    };
    // SAFETY: CPython's `const char *Py_GetVersion(void)`.
    let f = unsafe { std::mem::transmute::<*mut c_void, extern "C" fn() -> *const c_char>(f) };
    let s = f();
    if s.is_null() {
        return "(of a version it does not say)".into();
    }
    // SAFETY: a NUL-terminated static string.
    let v = unsafe { CStr::from_ptr(s) }.to_string_lossy();
    v.split(' ').next().unwrap_or("").chars().take(16).collect()
}

fn symbol(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: a C string; RTLD_DEFAULT looks in every global object.
    let s = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!s.is_null()).then_some(s)
}

/// Reads `out.len()` bytes at `addr` of this process; false where any of
/// them is not mapped (or the kernel refuses).
fn read(addr: usize, out: &mut [u8]) -> bool {
    if addr == 0 || out.is_empty() {
        return false;
    }
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: out.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: out.len(),
    };
    // SAFETY: `local` is our buffer of that length; the kernel checks
    // `remote` and fails on what is not mapped.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    usize::try_from(n).is_ok_and(|n| n == out.len())
}

fn word(bytes: &[u8], at: usize) -> Option<usize> {
    let b = bytes.get(at..at + 8)?;
    Some(u64::from_ne_bytes(b.try_into().ok()?) as usize)
}

fn int(bytes: &[u8], at: usize) -> Option<i32> {
    let b = bytes.get(at..at + 4)?;
    Some(i32::from_ne_bytes(b.try_into().ok()?))
}

/// What a code object says once read, kept per code object by the thread.
#[derive(Clone)]
struct Code {
    /// The pointers it was read through: a code object freed and another
    /// made at its address has others.
    fields: (usize, usize, usize),
    file: Box<str>,
    function: Box<str>,
    firstlineno: i32,
    table: Box<[u8]>,
}

thread_local! {
    static CODES: RefCell<HashMap<usize, Code>> = RefCell::new(HashMap::new());
}

/// The calling thread's Python frames, innermost first: with `all`, up to
/// [`KEPT`] of them; without, the innermost of the program's own code alone
/// (the innermost frame at all when none is). Empty outside Python.
pub fn frames(all: bool) -> Vec<PyFrame> {
    let Some(rt) = runtime() else {
        return Vec::new();
    };
    // A thread under a seccomp filter might be killed for a syscall its
    // filter does not expect (`process_vm_readv` is rare): none is made.
    // SAFETY: PR_GET_SECCOMP takes no argument and changes nothing.
    if unsafe { libc::prctl(libc::PR_GET_SECCOMP) } != 0 {
        return Vec::new();
    }
    // SAFETY: CPython's function of no arguments.
    let tstate = unsafe { (rt.this_thread)() } as usize;
    if tstate == 0 {
        return Vec::new();
    }
    let l = rt.layout;
    let mut ptr = [0u8; 8];
    if !read(tstate + l.tstate_frame, &mut ptr) {
        return Vec::new();
    }
    let mut at = usize::from_ne_bytes(ptr);
    if let Some(current) = l.cframe_current {
        if !read(at + current, &mut ptr) {
            return Vec::new();
        }
        at = usize::from_ne_bytes(ptr);
    }
    let mut out = Vec::new();
    let mut frame = [0u8; 96];
    let frame = &mut frame[..l.frame_size.min(96)];
    for _ in 0..WALKED {
        if at == 0 || !read(at, frame) {
            break;
        }
        let (Some(code), Some(previous), Some(instr)) = (
            word(frame, l.frame_code),
            word(frame, l.frame_previous),
            word(frame, l.frame_instr),
        ) else {
            break;
        };
        let owner = frame.get(l.frame_owner).copied().unwrap_or(0);
        let shim = owner == OWNED_BY_CSTACK;
        if let Some(f) = (!shim).then(|| named(rt, code, instr, owner)).flatten() {
            let users = f.is_users();
            if all {
                out.push(f);
                if out.len() == KEPT {
                    break;
                }
            } else if users {
                return vec![f];
            } else if out.is_empty() {
                out.push(f);
            }
        }
        at = previous;
    }
    out
}

/// The frame running `code` at `instr`; None for an incomplete frame (its
/// code not started) or what cannot be read.
fn named(rt: &Runtime, code: usize, instr: usize, owner: u8) -> Option<PyFrame> {
    let l = &rt.layout;
    let mut head = [0u8; 208];
    let head = &mut head[..l.code_instructions.min(208)];
    // Its type first: a code object (3.13's `f_executable` may be another).
    if !read(code, head) || word(head, 8)? != rt.code_type {
        return None;
    }
    let firstlineno = int(head, l.code_firstlineno)?;
    let fields = (
        word(head, l.code_filename)?,
        word(head, l.code_qualname)?,
        word(head, l.code_linetable)?,
    );
    let firsttraceable = int(head, l.code_firsttraceable)?;
    let start = code + l.code_instructions;
    // Index of the instruction running, in 2-byte code units.
    let unit = instr.checked_sub(start)? / 2;
    if owner != OWNED_BY_GENERATOR
        && (instr < start || unit < usize::try_from(firsttraceable).ok()?)
    {
        return None;
    }
    let known = CODES.with(|c| {
        c.borrow()
            .get(&code)
            .filter(|k| k.fields == fields && k.firstlineno == firstlineno)
            .cloned()
    });
    let c = match known {
        Some(c) => c,
        None => {
            let c = Code {
                fields,
                file: text(l, fields.0)?,
                function: text(l, fields.1)?,
                firstlineno,
                table: bytes(fields.2)?,
            };
            CODES.with(|m| {
                let mut m = m.borrow_mut();
                if m.len() > 4096 {
                    m.clear();
                }
                m.insert(code, c.clone());
            });
            c
        }
    };
    let line = line_at(&c.table, c.firstlineno, unit)?;
    Some(PyFrame {
        file: c.file,
        line,
        function: c.function,
    })
}

/// A `str` object's text: compact ASCII or Latin-1 (`PyASCIIObject`,
/// `PyCompactUnicodeObject`); None for other kinds.
fn text(l: &Layout, obj: usize) -> Option<Box<str>> {
    let mut head = [0u8; 72];
    if !read(obj, &mut head) {
        return None;
    }
    let len = word(&head, 16)?;
    let state = u32::from_ne_bytes(head.get(32..36)?.try_into().ok()?);
    let kind = (state >> 2) & 7;
    let compact = state & (1 << 5) != 0;
    let ascii = state & (1 << 6) != 0;
    if !compact || kind != 1 || len > NAME_MAX {
        return None;
    }
    let mut data = vec![0u8; len];
    if !read(
        obj + if ascii { l.ascii_data } else { l.compact_data },
        &mut data,
    ) {
        return None;
    }
    // Latin-1: each byte is its code point.
    Some(data.into_iter().map(char::from).collect::<String>().into())
}

/// A `bytes` object's contents.
fn bytes(obj: usize) -> Option<Box<[u8]>> {
    let mut head = [0u8; 24];
    if !read(obj, &mut head) {
        return None;
    }
    let len = word(&head, 16)?;
    if len > TABLE_MAX {
        return None;
    }
    let mut data = vec![0u8; len];
    (len == 0 || read(obj + 32, &mut data)).then(|| data.into())
}

/// The line of code unit `unit` from a 3.11 location table
/// (`Objects/locations.md`): entries of a first byte `1CCCCLLL` (code,
/// length - 1 in code units) and the code's operands, lines as deltas
/// from `firstlineno`. None where the table gives no line.
fn line_at(table: &[u8], firstlineno: i32, unit: usize) -> Option<u32> {
    let mut i = 0;
    let mut line = i64::from(firstlineno);
    let mut addr = 0usize;
    let varint = |i: &mut usize| -> Option<u64> {
        let mut b = *table.get(*i)?;
        *i += 1;
        let mut v = u64::from(b & 63);
        let mut shift = 0;
        while b & 64 != 0 {
            b = *table.get(*i)?;
            *i += 1;
            shift += 6;
            if shift > 60 {
                return None;
            }
            v |= u64::from(b & 63) << shift;
        }
        Some(v)
    };
    let signed = |v: u64| -> i64 {
        if v & 1 != 0 {
            -((v >> 1) as i64)
        } else {
            (v >> 1) as i64
        }
    };
    while i < table.len() {
        let first = table[i];
        if first & 0x80 == 0 {
            return None;
        }
        i += 1;
        let code = (first >> 3) & 15;
        let length = usize::from(first & 7) + 1;
        let delta = match code {
            15 => None,
            14 => {
                let d = signed(varint(&mut i)?);
                for _ in 0..3 {
                    varint(&mut i)?;
                }
                Some(d)
            }
            13 => Some(signed(varint(&mut i)?)),
            10..=12 => {
                i += 2;
                Some(i64::from(code) - 10)
            }
            _ => {
                i += 1;
                Some(0)
            }
        };
        if let Some(d) = delta {
            line += d;
        }
        if unit < addr + length {
            return delta.and_then(|_| u32::try_from(line).ok());
        }
        addr += length;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_own_files_are_told_from_packages_and_the_standard_library() {
        assert!(is_users("/home/ann/train.py"));
        assert!(is_users("<string>"), "python -c");
        assert!(is_users("<stdin>"));
        assert!(is_users("/srv/lib/pythonista/run.py"));
        assert!(!is_users(
            "/usr/lib/python3/dist-packages/pyopencl/__init__.py"
        ));
        assert!(!is_users(
            "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py"
        ));
        assert!(!is_users("/usr/lib/python3.11/threading.py"));
        assert!(!is_users(
            "/root/.pyenv/versions/3.11.7/lib/python3.11/json/decoder.py"
        ));
        assert!(!is_users("<frozen importlib._bootstrap>"));
    }

    #[test]
    fn only_known_interpreters_are_read() {
        assert!(Layout::of(0x030B_02F0).is_some(), "3.11.2");
        assert!(Layout::of(0x030B_07F0).is_some(), "3.11.7");
        assert!(Layout::of(0x030C_01F0).is_some(), "3.12.1");
        assert!(Layout::of(0x030D_00F0).is_some(), "3.13.0");
        assert!(Layout::of(0x030E_00F0).is_none(), "3.14: not yet");
        assert!(Layout::of(0x030A_00F0).is_none(), "3.10: no Py_Version");
    }

    #[test]
    fn an_unmapped_address_is_an_error_not_a_fault() {
        let mut out = [0u8; 8];
        assert!(!read(8, &mut out));
        assert!(!read(0, &mut out));
        let here = 0x1122_3344_5566_7788u64;
        assert!(read((&raw const here) as usize, &mut out));
        assert_eq!(u64::from_ne_bytes(out), here);
    }

    /// Tables written as CPython 3.11 writes them: each entry's line delta
    /// in its own form.
    #[test]
    fn a_location_table_gives_the_line_of_each_instruction() {
        // `firstlineno` 10. Entry 1: short form (code 0), 2 units, same line.
        // Entry 2: one-line form code 11 (+1), 1 unit, two column bytes.
        // Entry 3: no-column form (code 13), +3 as a signed varint (6), 3 units.
        // Entry 4: no location (code 15), 1 unit.
        // Entry 5: long form (code 14), -2 (5), then three varints, 1 unit.
        let table = [
            0x80 | 1,
            0x00,
            0x80 | (11 << 3),
            4,
            8,
            0x80 | (13 << 3) | 2,
            6,
            0x80 | (15 << 3),
            0x80 | (14 << 3),
            5,
            0,
            1,
            1,
        ];
        let lines: Vec<Option<u32>> = (0..9).map(|u| line_at(&table, 10, u)).collect();
        assert_eq!(
            lines,
            [
                Some(10),
                Some(10),
                Some(11),
                Some(14),
                Some(14),
                Some(14),
                None,
                Some(12),
                None
            ]
        );
        // A long varint is read across its continuation bytes: +200 is 400,
        // 6 bits at a time.
        let long = [0x80 | (13 << 3), 64 | (400 & 63) as u8, (400 >> 6) as u8];
        assert_eq!(line_at(&long, 1, 0), Some(201));
        // A table cut short says nothing.
        assert_eq!(line_at(&[0x80 | (13 << 3), 64], 1, 0), None);
    }
}
