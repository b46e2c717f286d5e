//! The files the process has mapped, as the dynamic loader lists them
//! (`dl_iterate_phdr`): where each lies, how far it was moved, its dynamic
//! section, its read-only-after-relocation range and its build id. Stacks name
//! frames by them ([`crate::stack`]); import slots are found in them
//! ([`crate::got`]).

use std::ffi::{CStr, c_int, c_void};

const PT_DYNAMIC: u32 = 2;
const PT_GNU_RELRO: u32 = 0x6474_e552;

/// One mapped file.
pub struct Loaded {
    /// Its path as the loader has it; the executable's from `/proc/self/exe`.
    pub path: String,
    /// Runtime address minus the file's own addresses.
    pub bias: usize,
    /// Its loaded segments, runtime addresses.
    pub ranges: Vec<(usize, usize)>,
    /// Its dynamic section's runtime address, 0 if it has none.
    pub dynamic: usize,
    /// What relocation leaves read-only, if anything.
    pub relro: Option<(usize, usize)>,
    /// Its GNU build id, hex.
    pub build_id: Option<String>,
}

impl Loaded {
    pub fn holds(&self, addr: usize) -> bool {
        self.ranges
            .iter()
            .any(|(lo, hi)| (*lo..*hi).contains(&addr))
    }
}

/// The loader's count of loads and unloads so far: it changes whenever a
/// library was loaded or unloaded.
pub fn generation() -> u64 {
    let (adds, subs) = counts();
    adds + subs
}

/// How many libraries the loader has unloaded so far.
pub fn unloads() -> u64 {
    counts().1
}

fn counts() -> (u64, u64) {
    unsafe extern "C" fn count(
        info: *mut libc::dl_phdr_info,
        _: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: the loader passes a valid info; `data` is the pair below.
        unsafe {
            *(data as *mut (u64, u64)) = ((*info).dlpi_adds, (*info).dlpi_subs);
        }
        1
    }
    let mut n = (0u64, 0u64);
    // SAFETY: the callback matches dl_iterate_phdr's contract and stops at once.
    unsafe { libc::dl_iterate_phdr(Some(count), &mut n as *mut (u64, u64) as *mut c_void) };
    n
}

/// Every file the process has mapped, the executable first. What it says of
/// a file's memory (its dynamic section, its slots) may be read only while the
/// file stays loaded: for that, see [`each`].
pub fn loaded() -> Vec<Loaded> {
    let mut out = Vec::new();
    each(|file| out.push(file));
    out
}

/// Hands `f` each file the process has mapped, the executable first,
/// while the loader holds the lock it takes to unload one: no file is unmapped
/// during `f`, so `f` may read and write the file's memory. Outside `f` another
/// thread's `dlclose` may unmap it at any moment (hwloc unloading PoCL and its
/// LLVM in mpi4py's `MPI_Init` did, while the agent's thread read LLVM's
/// relocations, and the program died of a SIGSEGV that no handler saw).
///
/// `f` may not call `dlopen`, `dlclose` or anything that loads a library:
/// the loader takes its own lock before this one.
pub fn each(mut f: impl FnMut(Loaded)) {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
        // SAFETY: the loader passes a valid info; `data` is the state below.
        let (info, state) = unsafe { (&*info, &mut *(data as *mut Walk<'_>)) };
        let file = describe(info, state.first);
        state.first = false;
        // A panic may not unwind through the loader's frames: the walk stops.
        let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (state.f)(file)));
        c_int::from(called.is_err())
    }
    struct Walk<'a> {
        f: &'a mut dyn FnMut(Loaded),
        first: bool,
    }
    let mut state = Walk {
        f: &mut f,
        first: true,
    };
    // SAFETY: the callback matches dl_iterate_phdr's contract.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut state as *mut Walk<'_> as *mut c_void) };
}

/// What the loader says of one file; `first` is the executable's turn.
fn describe(info: &libc::dl_phdr_info, first: bool) -> Loaded {
    // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
    let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
    let bias = info.dlpi_addr as usize;
    let span = |h: &libc::Elf64_Phdr| {
        let lo = bias + h.p_vaddr as usize;
        (lo, lo + h.p_memsz as usize)
    };
    let first_of = |kind: u32| headers.iter().find(|h| h.p_type == kind).map(span);
    let name = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: a NUL-terminated path owned by the loader.
        unsafe { CStr::from_ptr(info.dlpi_name) }
            .to_string_lossy()
            .into_owned()
    };
    // The executable comes first, unnamed.
    let path = if name.is_empty() && first {
        std::fs::read_link("/proc/self/exe")
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    } else {
        name
    };
    let build_id = headers
        .iter()
        .filter(|h| h.p_type == libc::PT_NOTE)
        .find_map(|h| {
            let (lo, hi) = span(h);
            // SAFETY: a PT_NOTE segment is mapped at bias + p_vaddr.
            let notes = unsafe { std::slice::from_raw_parts(lo as *const u8, hi - lo) };
            build_id(notes)
        });
    Loaded {
        path,
        bias,
        ranges: headers
            .iter()
            .filter(|h| h.p_type == libc::PT_LOAD)
            .map(span)
            .collect(),
        dynamic: first_of(PT_DYNAMIC).map_or(0, |(lo, _)| lo),
        relro: first_of(PT_GNU_RELRO),
        build_id,
    }
}

/// The `NT_GNU_BUILD_ID` note among `notes` (ELF note records), as hex.
fn build_id(notes: &[u8]) -> Option<String> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(notes.get(at..at + 4)?.try_into().ok()?))
    };
    let align = |n: usize| (n + 3) & !3;
    let mut at = 0;
    while at + 12 <= notes.len() {
        let (namesz, descsz, kind) = (word(at)? as usize, word(at + 4)? as usize, word(at + 8)?);
        let name = at + 12;
        let desc = name + align(namesz);
        if kind == NT_GNU_BUILD_ID && notes.get(name..name + namesz) == Some(b"GNU\0") {
            let id = notes.get(desc..desc + descsz)?;
            return Some(id.iter().map(|b| format!("{b:02x}")).collect());
        }
        at = desc + align(descsz);
    }
    None
}

/// The agent's own file, as the loader names it.
pub fn agent_path() -> String {
    // SAFETY: Dl_info is plain data; dladdr fills it or returns 0.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: the address of one of the agent's functions.
    let found = unsafe { libc::dladdr(agent_path as *const () as *const c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return String::new();
    }
    // SAFETY: NUL-terminated, owned by the loader.
    unsafe { CStr::from_ptr(info.dli_fname) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_ids_are_read_from_notes() {
        let mut notes = Vec::new();
        // A note of another kind first, then the build id.
        for (name, kind, desc) in [
            (&b"GNU\0"[..], 1u32, &[0u8; 16][..]),
            (b"GNU\0", 3, &[0xde, 0xad, 0xbe, 0xef, 1][..]),
        ] {
            notes.extend((name.len() as u32).to_ne_bytes());
            notes.extend((desc.len() as u32).to_ne_bytes());
            notes.extend(kind.to_ne_bytes());
            notes.extend(name);
            notes.extend(desc);
            notes.resize(notes.len().next_multiple_of(4), 0);
        }
        assert_eq!(build_id(&notes).as_deref(), Some("deadbeef01"));
        assert_eq!(build_id(&notes[..20]), None);
        assert_eq!(build_id(&[]), None);
    }

    #[test]
    fn the_executable_comes_first_and_holds_this_code() {
        let files = loaded();
        let here: fn() = the_executable_comes_first_and_holds_this_code;
        assert!(files[0].holds(here as *const () as usize));
        assert_eq!(generation(), generation());
    }
}
