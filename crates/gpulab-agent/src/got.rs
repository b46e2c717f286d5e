//! Redirects the program's imports of a function: each loaded file's slots
//! for it (its global offset table: `JUMP_SLOT` and `GLOB_DAT` relocations) are
//! pointed at a function of the agent's, which calls the real one. Used to see
//! a second CUPTI client in the program ([`crate::cuda`]): the agent cannot be
//! preloaded before the program's libraries, and CUPTI tells no subscriber
//! about another.
//!
//! Only slots are written, never code, one aligned pointer at a time, so a
//! thread calling through a slot sees the old function or the new one.

use std::collections::HashSet;
use std::ffi::{CStr, CString, c_void};

use crate::loaded::{Loaded, each, loaded};

const DT_NULL: i64 = 0;
const DT_PLTRELSZ: i64 = 2;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_RELA: i64 = 7;
const DT_RELASZ: i64 = 8;
const DT_JMPREL: i64 = 23;
const R_X86_64_GLOB_DAT: u32 = 6;
const R_X86_64_JUMP_SLOT: u32 = 7;

#[repr(C)]
struct Dyn {
    tag: i64,
    val: u64,
}

#[repr(C)]
struct Rela {
    offset: u64,
    info: u64,
    addend: i64,
}

#[repr(C)]
struct Sym {
    name: u32,
    info: u8,
    other: u8,
    shndx: u16,
    value: u64,
    size: u64,
}

/// One slot pointed at the agent's function: where it was, and what it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirected {
    pub path: String,
    pub slot: usize,
    /// The function the file's calls went to, and must still reach.
    pub real: usize,
}

/// A slot not yet bound (lazy binding) when it was first seen: it holds its
/// file's PLT stub, and its real function is asked of the file's scope.
struct Unbound {
    path: String,
    bias: usize,
    slot: usize,
    stub: usize,
}

/// Points every import of `name` in the loaded files `skip` does not exclude at
/// `to`, unless the slot was seen in `done`. Only slots whose real function is
/// known are changed: the one the slot holds when it is bound, else the one the
/// file's own scope resolves `name` to. Returns what it changed.
///
/// A file's tables are read and its slots written only while the loader holds
/// it loaded ([`each`]): another thread may unload any library at any moment.
pub fn redirect(
    name: &str,
    to: usize,
    skip: impl Fn(&str) -> bool,
    done: &mut HashSet<usize>,
) -> Vec<Redirected> {
    let Ok(wanted) = CString::new(name) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut unbound = Vec::new();
    each(|file| {
        if skip(&file.path) || file.dynamic == 0 {
            return;
        }
        for slot in slots(&file, &wanted) {
            if !done.insert(slot) {
                continue;
            }
            // SAFETY: `slot` is a relocated pointer slot of a file kept loaded.
            let was = unsafe { std::ptr::read_volatile(slot as *const usize) };
            if was == to {
                continue;
            }
            if file.holds(was) {
                unbound.push(Unbound {
                    path: file.path.clone(),
                    bias: file.bias,
                    slot,
                    stub: was,
                });
            } else if write_slot(slot, to, &file) {
                out.push(Redirected {
                    path: file.path.clone(),
                    slot,
                    real: was,
                });
            }
        }
    });
    // The file's scope is asked through dlopen, which may not run while the
    // loader's lock is held; the slot is then written only if the same file
    // is still loaded where it was.
    let resolved: Vec<(Unbound, usize)> = unbound
        .into_iter()
        .filter_map(|u| resolve(&u.path, name).map(|real| (u, real)))
        .collect();
    if resolved.is_empty() {
        return out;
    }
    each(|file| {
        for (u, real) in &resolved {
            if file.path != u.path || file.bias != u.bias {
                continue;
            }
            // SAFETY: as above: the same file, loaded where it was.
            let now = unsafe { std::ptr::read_volatile(u.slot as *const usize) };
            // Bound since: the slot now holds its real function.
            let real = if now == u.stub { *real } else { now };
            if now != to && write_slot(u.slot, to, &file) {
                out.push(Redirected {
                    path: file.path.clone(),
                    slot: u.slot,
                    real,
                });
            }
        }
    });
    out
}

/// The real `name` as the file at `path` would bind it: its own scope (itself,
/// then its dependencies), or the global one for the executable.
pub fn resolve(path: &str, name: &str) -> Option<usize> {
    let name = CString::new(name).ok()?;
    let handle = if path.is_empty() || is_executable(path) {
        // SAFETY: dlopen(NULL) is the main program's global scope.
        unsafe { libc::dlopen(std::ptr::null(), libc::RTLD_LAZY) }
    } else {
        let c = CString::new(path).ok()?;
        // SAFETY: NOLOAD only looks the loaded file up.
        unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) }
    };
    if handle.is_null() {
        return None;
    }
    // SAFETY: an open handle and a C string.
    let sym = unsafe { libc::dlsym(handle, name.as_ptr()) };
    // SAFETY: balances the dlopen above (the file stays loaded: NOLOAD).
    unsafe { libc::dlclose(handle) };
    (!sym.is_null()).then_some(sym as usize)
}

/// The first loaded file whose name starts with `prefix` (`libcupti.so`).
pub fn loaded_file(prefix: &str) -> Option<String> {
    loaded()
        .into_iter()
        .map(|f| f.path)
        .find(|p| p.rsplit('/').next().is_some_and(|f| f.starts_with(prefix)))
}

fn is_executable(path: &str) -> bool {
    std::fs::read_link("/proc/self/exe").is_ok_and(|exe| exe.as_os_str() == path)
}

/// The slots of `file` that import `wanted`.
fn slots(file: &Loaded, wanted: &CStr) -> Vec<usize> {
    let mut tables = [0u64; 24];
    // SAFETY: PT_DYNAMIC is mapped and ends with DT_NULL.
    unsafe {
        let mut d = file.dynamic as *const Dyn;
        while (*d).tag != DT_NULL {
            if let Ok(i) = usize::try_from((*d).tag)
                && i < tables.len()
            {
                tables[i] = (*d).val;
            }
            d = d.add(1);
        }
    }
    // glibc relocates the dynamic section's addresses in place; other loaders
    // leave them file-relative.
    let at = |v: u64| -> usize {
        let v = v as usize;
        if v != 0 && v < file.bias {
            v + file.bias
        } else {
            v
        }
    };
    let (symtab, strtab) = (
        at(tables[DT_SYMTAB as usize]),
        at(tables[DT_STRTAB as usize]),
    );
    if symtab == 0 || strtab == 0 {
        return Vec::new();
    }
    let mut found = Vec::new();
    for (table, size) in [(DT_JMPREL, DT_PLTRELSZ), (DT_RELA, DT_RELASZ)] {
        let start = at(tables[table as usize]);
        let count = tables[size as usize] as usize / size_of::<Rela>();
        if start == 0 {
            continue;
        }
        // SAFETY: the loader mapped `count` relocations at `start`.
        let relas = unsafe { std::slice::from_raw_parts(start as *const Rela, count) };
        for r in relas {
            let kind = (r.info & 0xffff_ffff) as u32;
            if kind != R_X86_64_JUMP_SLOT && kind != R_X86_64_GLOB_DAT {
                continue;
            }
            let index = (r.info >> 32) as usize;
            // SAFETY: a relocation's symbol index is in the file's symbol table,
            // and its name offset in the string table.
            let name = unsafe {
                let sym = &*(symtab as *const Sym).add(index);
                CStr::from_ptr((strtab + sym.name as usize) as *const libc::c_char)
            };
            if name == wanted {
                found.push(file.bias + r.offset as usize);
            }
        }
    }
    found
}

/// Writes `to` into `slot`, making its page writable for the moment if it is
/// read-only after relocation (RELRO). Only inside [`each`]: the page is the
/// file's for as long as the loader holds it.
fn write_slot(slot: usize, to: usize, file: &Loaded) -> bool {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let start = slot & !(page - 1);
    let read_only = file.relro.is_some_and(|(lo, hi)| (lo..hi).contains(&slot));
    // SAFETY: the page holds the file's slots; it stays mapped.
    if unsafe {
        libc::mprotect(
            start as *mut c_void,
            page,
            libc::PROT_READ | libc::PROT_WRITE,
        )
    } != 0
    {
        return false;
    }
    // SAFETY: an aligned pointer slot, writable now.
    unsafe { std::ptr::write_volatile(slot as *mut usize, to) };
    if read_only {
        // SAFETY: as above; back to what RELRO made it.
        unsafe { libc::mprotect(start as *mut c_void, page, libc::PROT_READ) };
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn fake_getpgrp() -> libc::pid_t {
        4242
    }

    /// The test binary's own import of `getpgrp` is redirected and put back;
    /// the real function is found again through the file's scope.
    #[test]
    fn an_import_is_redirected_and_the_real_function_found() {
        let exe = std::fs::read_link("/proc/self/exe")
            .expect("exe")
            .display()
            .to_string();
        // SAFETY: getpgrp has no preconditions.
        let real = unsafe { libc::getpgrp() };
        let mut done = HashSet::new();
        let only_exe = |p: &str| p != exe;
        let changed = redirect(
            "getpgrp",
            fake_getpgrp as *const () as usize,
            only_exe,
            &mut done,
        );
        assert!(!changed.is_empty(), "the test binary imports getpgrp");
        // SAFETY: as above; the call goes through the redirected slot.
        assert_eq!(unsafe { libc::getpgrp() }, 4242);
        let original = resolve(&exe, "getpgrp").expect("getpgrp resolves");
        for r in &changed {
            assert_eq!(r.real, original);
        }
        // Already redirected: nothing more to do.
        assert!(
            redirect(
                "getpgrp",
                fake_getpgrp as *const () as usize,
                only_exe,
                &mut done
            )
            .is_empty()
        );
        let mut back = HashSet::new();
        redirect("getpgrp", original, only_exe, &mut back);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getpgrp() }, real);
    }

    /// Imports are looked for while another thread loads and unloads a
    /// library: a file's tables are read only while the loader keeps it
    /// loaded (read outside its lock, a library another thread had just
    /// unmapped killed the process).
    #[test]
    fn imports_are_looked_for_while_another_thread_unloads_libraries() {
        let open = |name: &CStr| {
            // SAFETY: a C string; RTLD_NOW binds everything at once.
            unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) }
        };
        // One that dlclose really unmaps (not one marked to stay, as libcrypto is).
        let mapped = |name: &CStr| {
            let name = name.to_string_lossy();
            loaded().iter().any(|f| f.path.ends_with(name.as_ref()))
        };
        let lib = [
            c"libz.so.1",
            c"libexpat.so.1",
            c"libsqlite3.so.0",
            c"libOpenCL.so.1",
        ]
        .into_iter()
        .find(|name| {
            let h = open(name);
            // SAFETY: a handle dlopen gave.
            !h.is_null() && unsafe { libc::dlclose(h) } == 0 && !mapped(name)
        })
        .expect("a library dlclose unmaps: libz, libexpat, libsqlite3 or libOpenCL");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let churn = std::thread::spawn({
            let stop = stop.clone();
            move || {
                let mut loads = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let h = open(lib);
                    assert!(!h.is_null());
                    // SAFETY: the handle just opened.
                    unsafe { libc::dlclose(h) };
                    loads += 1;
                }
                loads
            }
        });
        for _ in 0..3000 {
            let changed = redirect("gpulab_imported_nowhere", 1, |_| false, &mut HashSet::new());
            assert!(changed.is_empty());
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let loads = churn.join().expect("the loading thread ends");
        assert!(loads > 0);
    }
}
