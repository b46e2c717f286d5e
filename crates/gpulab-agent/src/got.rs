//! Redirects the program's imports of a function: each loaded file's slots
//! for it (its global offset table: `JUMP_SLOT` and `GLOB_DAT` relocations,
//! read by [`elf`]) are pointed at a function of the agent's, which calls the
//! real one. Used to see a second CUPTI client in the program
//! ([`crate::rival`]): the agent cannot be preloaded before the program's
//! libraries, and CUPTI tells no subscriber about another.
//!
//! Only slots are written, never code, one aligned pointer at a time, so a
//! thread calling through a slot sees the old function or the new one.
//! Built for a machine [`elf`] has no relocation kinds for, it looks nowhere
//! and says so ([`redirect`] returns none).

mod elf;

use std::collections::HashSet;
use std::ffi::{CString, c_void};

use crate::loaded::{Loaded, each, loaded};
use elf::{Import, Machine, Memory};

/// One slot pointed at the agent's function: where it was, and what it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirected {
    pub path: String,
    pub slot: usize,
    /// The function the file's calls went to, and must still reach.
    pub real: usize,
}

/// A slot that held an address inside its own file when it was first seen:
/// one not yet bound (lazy binding), whose real function is asked of the
/// file's scope.
struct Unbound {
    path: String,
    bias: usize,
    slot: usize,
    defined: bool,
}

/// Points every import of `name` in the loaded files `skip` does not exclude at
/// `to`, unless the slot was seen in `done`. Only slots whose real function is
/// known are changed ([`real_function`]). Returns what it changed; none where
/// the agent was built for a machine whose files it cannot read.
///
/// A file's tables are read and its slots written only while the loader holds
/// it loaded ([`each`]): another thread may unload any library at any moment.
pub fn redirect(
    name: &str,
    to: usize,
    skip: impl Fn(&str) -> bool,
    done: &mut HashSet<usize>,
) -> Option<Vec<Redirected>> {
    let machine = elf::HERE?;
    let mut out = Vec::new();
    let mut unbound = Vec::new();
    each(|file| {
        if skip(&file.path) || file.dynamic == 0 {
            return;
        }
        for import in slots(&file, machine, name) {
            let Some(slot) = slot_of(&file, &import) else {
                continue;
            };
            if !done.insert(slot) {
                continue;
            }
            // SAFETY: an aligned pointer slot inside a file kept loaded.
            let held = unsafe { std::ptr::read_volatile(slot as *const usize) };
            if held == to {
                continue;
            }
            match real_function(held, None, |a| file.holds(a), import.defined) {
                Some(real) if write_slot(slot, to, &file) => out.push(Redirected {
                    path: file.path.clone(),
                    slot,
                    real,
                }),
                // Its page would not be made writable: left as it was.
                Some(_) => {}
                None if file.holds(held) => unbound.push(Unbound {
                    path: file.path.clone(),
                    bias: file.bias,
                    slot,
                    defined: import.defined,
                }),
                // An unresolved weak import: the file tests it for null.
                None => {}
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
        return Some(out);
    }
    each(|file| {
        for (u, resolved) in &resolved {
            if file.path != u.path || file.bias != u.bias {
                continue;
            }
            // SAFETY: as above: the same file, loaded where it was.
            let now = unsafe { std::ptr::read_volatile(u.slot as *const usize) };
            // Bound since, the slot holds its real function; else the scope's.
            let real = real_function(now, Some(*resolved), |a| file.holds(a), u.defined);
            if let Some(real) = real.filter(|_| now != to)
                && write_slot(u.slot, to, &file)
            {
                out.push(Redirected {
                    path: file.path.clone(),
                    slot: u.slot,
                    real,
                });
            }
        }
    });
    Some(out)
}

/// The function the calls through a slot that holds `held` reach: `held`,
/// where it lies outside the slot's file (bound); else `resolved`, the name
/// as the file's scope binds it. Never an address inside the file for a name
/// the file does not define: a slot not yet bound holds a stub there (on
/// x86_64 the name's own PLT entry, on aarch64 PLT0, the same for every
/// slot), and an executable's PLT entry may stand as the function's address,
/// which would call back through the slot. None for a null slot (an
/// unresolved weak import, which must stay null).
fn real_function(
    held: usize,
    resolved: Option<usize>,
    in_file: impl Fn(usize) -> bool,
    defined: bool,
) -> Option<usize> {
    if held == 0 {
        None
    } else if !in_file(held) {
        Some(held)
    } else {
        resolved.filter(|r| *r != 0 && (defined || !in_file(*r)))
    }
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

/// A loaded file's memory, readable where its segments lie. Made only inside
/// [`each`], which keeps the file loaded while it is read.
struct Mapped<'a>(&'a Loaded);

impl Memory for Mapped<'_> {
    fn bytes(&self, addr: u64, len: u64) -> Option<&[u8]> {
        let (addr, len) = (usize::try_from(addr).ok()?, usize::try_from(len).ok()?);
        let end = addr.checked_add(len)?;
        let inside = self
            .0
            .ranges
            .iter()
            .any(|&(lo, hi)| lo <= addr && end <= hi);
        // SAFETY: within one of the file's loaded segments, which stay mapped
        // while `each` hands the file out; relocation is over, so nothing
        // writes the tables read through it.
        inside.then(|| unsafe { std::slice::from_raw_parts(addr as *const u8, len) })
    }
}

/// The imports of `wanted` in a loaded `file`.
fn slots(file: &Loaded, machine: Machine, wanted: &str) -> Vec<Import> {
    elf::imports(
        &Mapped(file),
        file.dynamic as u64,
        file.bias as u64,
        machine,
        wanted.as_bytes(),
    )
}

/// The runtime address of an import's slot, if it is an aligned pointer
/// inside its file.
fn slot_of(file: &Loaded, import: &Import) -> Option<usize> {
    let slot = file.bias.checked_add(usize::try_from(import.slot).ok()?)?;
    let end = slot.checked_add(size_of::<usize>())?;
    let inside = file.ranges.iter().any(|&(lo, hi)| lo <= slot && end <= hi);
    (inside && slot % align_of::<usize>() == 0).then_some(slot)
}

/// Whether the loader left the page at `start` read-only after relocation.
/// It protects `relro` rounded down to pages at both ends (glibc's
/// `_dl_protect_relro`; musl alike), so where pages are larger than the
/// linker aligned the range for (64 KiB pages on aarch64 servers, linked for
/// 4 KiB), the range's last page stays writable and may hold the file's data.
fn left_read_only(start: usize, relro: Option<(usize, usize)>, page: usize) -> bool {
    relro.is_some_and(|(lo, hi)| {
        let down = |a: usize| a & !(page - 1);
        down(lo) <= start && start < down(hi)
    })
}

/// Writes `to` into `slot`, making its page writable for the moment if it is
/// read-only after relocation (RELRO). Only inside [`each`]: the page is the
/// file's for as long as the loader holds it.
fn write_slot(slot: usize, to: usize, file: &Loaded) -> bool {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096);
    let start = slot & !(page - 1);
    let read_only = left_read_only(start, file.relro, page);
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
    use std::ffi::CStr;

    /// The test binary's own import of `getpgrp` is redirected and put back;
    /// the real function is found again through the file's scope.
    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn an_import_is_redirected_and_the_real_function_found() {
        extern "C" fn fake_getpgrp() -> libc::pid_t {
            4242
        }
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
        )
        .expect("this machine's files are read");
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
            .is_some_and(|changed| changed.is_empty())
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
            assert!(changed.unwrap_or_default().is_empty());
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let loads = churn.join().expect("the loading thread ends");
        assert!(loads > 0);
    }

    /// The test binary's imports of `getpgrp` as the agent reads them in
    /// memory are the ones it reads in the executable's file, moved by the
    /// executable's bias: one reader, two views.
    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn the_executable_in_memory_and_on_disk_import_the_same_slots() {
        let bytes = std::fs::read("/proc/self/exe").unwrap();
        let view = elf::FileView::new(&bytes).unwrap();
        let machine = view.machine.unwrap();
        assert_eq!(elf::HERE, Some(machine));
        let on_disk = elf::imports(&view, view.dynamic, 0, machine, b"getpgrp");
        assert!(!on_disk.is_empty(), "the test binary imports getpgrp");
        let mut in_memory = Vec::new();
        let mut first = true;
        each(|file| {
            if std::mem::take(&mut first) {
                in_memory = slots(&file, machine, "getpgrp")
                    .iter()
                    .map(|i| (file.bias, slot_of(&file, i)))
                    .collect();
            }
        });
        let bias = in_memory[0].0;
        let expected: Vec<_> = on_disk
            .iter()
            .map(|i| (bias, Some(bias + i.slot as usize)))
            .collect();
        assert_eq!(in_memory, expected);
    }

    /// An aarch64 file's slots not yet bound all hold PLT0, an x86_64 file's
    /// each its own stub: either way an address in the file, which is never
    /// taken for the real function; the name as the file's scope binds it is.
    #[test]
    fn a_slot_not_yet_bound_is_never_taken_for_the_function() {
        let fixtures: [(&[u8], bool); 2] = [
            (
                include_bytes!("../tests/fixtures/elf/imports-aarch64.so"),
                true,
            ),
            (
                include_bytes!("../tests/fixtures/elf/imports-x86_64.so"),
                false,
            ),
        ];
        for (bytes, one_stub) in fixtures {
            let view = elf::FileView::new(bytes).unwrap();
            let machine = view.machine.unwrap();
            // The file as if loaded at `bias`, its slots as relocation left them.
            let bias = 0x7f00_0000_0000_usize;
            let end = bias + bytes.len().max(0x40000);
            let in_file = |a: usize| (bias..end).contains(&a);
            let elsewhere = 0x7e00_0000_1000_usize;
            let mut held = Vec::new();
            for name in ["_exit", "cuptiSubscribe", "cuptiUnsubscribe"] {
                for import in elf::imports(&view, view.dynamic, 0, machine, name.as_bytes()) {
                    let at = view.bytes(import.slot, 8).unwrap();
                    let stub = u64::from_le_bytes(at.try_into().unwrap()) as usize;
                    if stub == 0 {
                        continue; // a GLOB_DAT slot: filled at load, never lazily
                    }
                    let stub = bias + stub;
                    held.push(stub);
                    let real = |resolved| real_function(stub, resolved, in_file, import.defined);
                    assert_eq!(real(Some(elsewhere)), Some(elsewhere), "{name}");
                    assert_eq!(real(None), None, "{name}");
                    // An executable's PLT entry standing for the function.
                    assert_eq!(real(Some(stub)), None, "{name}");
                }
            }
            held.dedup();
            assert_eq!(held.len(), if one_stub { 1 } else { 3 }, "{held:x?}");
        }
        let in_file = |a: usize| (0x1000..0x2000).contains(&a);
        // Bound: the slot's function, wherever the scope would bind it.
        assert_eq!(real_function(0x9000, None, in_file, false), Some(0x9000));
        // The file's own definition, called through its PLT.
        assert_eq!(
            real_function(0x1800, Some(0x1100), in_file, true),
            Some(0x1100)
        );
        // An unresolved weak import stays null.
        assert_eq!(real_function(0, Some(0x9000), in_file, false), None);
    }

    /// With the aarch64 fixture's RELRO range, the page of its `GLOB_DAT`
    /// slots is read-only after relocation on 4 KiB pages, and left writable
    /// on 64 KiB pages, where the loader rounds the range down to nothing:
    /// the slot's page is put back as the loader left it.
    #[test]
    fn a_relro_page_is_one_the_loader_protected() {
        let bytes = include_bytes!("../tests/fixtures/elf/imports-aarch64.so");
        let view = elf::FileView::new(bytes).unwrap();
        let (lo, hi) = view.relro.unwrap();
        let relro = Some((lo as usize, hi as usize));
        let slot = 0x206e8_usize;
        assert!((lo..hi).contains(&(slot as u64)));
        for (page, protected) in [(0x1000, true), (0x10000, false)] {
            let start = slot & !(page - 1);
            assert_eq!(left_read_only(start, relro, page), protected, "{page:#x}");
        }
        assert!(!left_read_only(0x30000, relro, 0x1000));
        assert!(!left_read_only(0x20000, None, 0x1000));
    }
}
