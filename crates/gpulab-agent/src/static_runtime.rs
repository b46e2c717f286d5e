//! The CUDA runtime linked into the program itself: nvcc links
//! `libcudart_static` into the executable by default, so its frames lie in
//! the program's own file and cannot be told from the program's code by
//! file, as the shared runtime's are. Its functions carry their library's
//! name (`libcudart_static_<hash>`) in the executable's symbol table: the
//! span they cover is the runtime's, and a stack's calling frame is the
//! first past it (the program's `cudaMalloc` line, where it was the runtime's
//! internals).
//!
//! Read once as the agent starts, from `/proc/self/exe`'s section headers
//! and symbol table only; nothing where the file is stripped, not ELF64
//! little-endian, or its table is larger than [`MOST_READ`].

use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

/// The runtime's functions, at the addresses the program runs, sorted and
/// merged where they touch.
static SPANS: OnceLock<Vec<Range<usize>>> = OnceLock::new();

/// The most bytes of a symbol or string table read.
const MOST_READ: u64 = 64 << 20;

/// The prefix of the static runtime's own function names.
const RUNTIME: &[u8] = b"libcudart_static_";

/// Finds the spans; called as the agent starts.
pub fn prepare() {
    SPANS.get_or_init(|| {
        let Ok(file) = std::fs::File::open("/proc/self/exe") else {
            return Vec::new();
        };
        let bias = program_bias();
        runtime_spans(&|offset, len| read(&file, offset, len))
            .into_iter()
            .filter_map(|r| Some(r.start.checked_add(bias)?..r.end.checked_add(bias)?))
            .collect()
    });
}

/// Whether the instruction at `pc` is the static runtime's.
pub fn holds(pc: usize) -> bool {
    let Some(spans) = SPANS.get() else {
        return false;
    };
    let i = spans.partition_point(|r| r.end <= pc);
    spans.get(i).is_some_and(|r| r.contains(&pc))
}

/// Where the program itself is loaded (0 unless it is position-independent):
/// the first object `dl_iterate_phdr` reports is the program.
fn program_bias() -> usize {
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: glibc passes a valid info; `data` is the usize below.
        unsafe { *data.cast::<usize>() = (*info).dlpi_addr as usize };
        1
    }
    let mut bias = 0usize;
    // SAFETY: the callback writes one usize through `data`, then stops.
    unsafe { libc::dl_iterate_phdr(Some(first), (&raw mut bias).cast()) };
    bias
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn read(file: &impl FileExt, offset: u64, len: u64) -> Option<Vec<u8>> {
    if len > MOST_READ {
        return None;
    }
    let mut buf = vec![0; usize::try_from(len).ok()?];
    file.read_exact_at(&mut buf, offset).ok()?;
    Some(buf)
}

/// The static runtime's functions in an ELF64 little-endian file, at their
/// link-time addresses: each function of an object file (the symbols after
/// one `STT_FILE` symbol) that has a function named [`RUNTIME`] (its API
/// entry points, `cudaMalloc`, are named plainly beside its internals), and
/// each function so named. Without file symbols, only those so named.
fn runtime_spans(read: &dyn Fn(u64, u64) -> Option<Vec<u8>>) -> Vec<Range<usize>> {
    let Some((symbols, names)) = symbol_table(read) else {
        return Vec::new();
    };
    /// `STT_FUNC`, `STT_FILE`.
    const FUNC: u8 = 2;
    const FILE: u8 = 4;
    // (object file, start, end, named as the runtime's); globals have none.
    let mut functions: Vec<(Option<usize>, usize, usize, bool)> = Vec::new();
    let mut object = None;
    for sym in symbols.chunks_exact(24) {
        let (kind, local) = (sym[4] & 0xf, sym[4] >> 4 == 0);
        if kind == FILE {
            object = Some(object.map_or(0, |o| o + 1));
            continue;
        }
        if kind != FUNC {
            continue;
        }
        let name = u32_at(sym, 0)
            .and_then(|n| names.get(n as usize..))
            .and_then(|rest| rest.split(|b| *b == 0).next())
            .unwrap_or_default();
        let (Some(value), Some(size)) = (u64_at(sym, 8), u64_at(sym, 16)) else {
            continue;
        };
        let Some(end) = value.checked_add(size.max(1)) else {
            continue;
        };
        let (Ok(start), Ok(end)) = (usize::try_from(value), usize::try_from(end)) else {
            continue;
        };
        let group = if local { object } else { None };
        functions.push((group, start, end, name.starts_with(RUNTIME)));
    }
    let runtime_objects: std::collections::HashSet<usize> = functions
        .iter()
        .filter_map(|&(group, _, _, named)| group.filter(|_| named))
        .collect();
    let mut spans: Vec<Range<usize>> = functions
        .iter()
        .filter(|&&(group, _, _, named)| {
            named || group.is_some_and(|g| runtime_objects.contains(&g))
        })
        .map(|&(_, start, end, _)| start..end)
        .collect();
    spans.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for r in spans {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// The symbol table and its strings, of an ELF64 little-endian file.
fn symbol_table(read: &dyn Fn(u64, u64) -> Option<Vec<u8>>) -> Option<(Vec<u8>, Vec<u8>)> {
    /// `SHT_SYMTAB`.
    const SYMTAB: u32 = 2;
    let head = read(0, 64)?;
    // ELF magic, ELFCLASS64, ELFDATA2LSB.
    if head.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let (shoff, shentsize, shnum) = (
        u64_at(&head, 0x28)?,
        u64::from(u16_at(&head, 0x3a)?),
        u64::from(u16_at(&head, 0x3c)?),
    );
    if shentsize < 64 {
        return None;
    }
    let sections = read(shoff, shentsize.checked_mul(shnum)?)?;
    let section = |i: u64| -> Option<(u32, u64, u64, u32)> {
        let at = usize::try_from(i.checked_mul(shentsize)?).ok()?;
        Some((
            u32_at(&sections, at + 4)?,
            u64_at(&sections, at + 0x18)?,
            u64_at(&sections, at + 0x20)?,
            u32_at(&sections, at + 0x28)?,
        ))
    };
    let (_, sym_off, sym_size, link) =
        (0..shnum).find_map(|i| section(i).filter(|s| s.0 == SYMTAB))?;
    let (_, str_off, str_size, _) = section(u64::from(link))?;
    Some((read(sym_off, sym_size)?, read(str_off, str_size)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function named as the static runtime names its own, in this test
    /// executable.
    #[unsafe(no_mangle)]
    #[inline(never)]
    pub extern "C" fn libcudart_static_0123456789abcdef() -> usize {
        std::hint::black_box(42)
    }

    #[test]
    fn the_runtimes_functions_are_found_in_the_programs_own_file() {
        prepare();
        let f = libcudart_static_0123456789abcdef as *const () as usize;
        assert!(holds(f), "{:?} does not hold {f:#x}", SPANS.get());
        // This test's own code lies outside it, though the function is in
        // this crate's object file: Rust's file symbols are the crate's.
        let own = the_runtimes_functions_are_found_in_the_programs_own_file as *const () as usize;
        assert!(!holds(own) || SPANS.get().is_some_and(|s| s.len() > 1));
    }

    /// Bytes as a file reads them: past their end, nothing.
    fn reader(bytes: &[u8]) -> impl Fn(u64, u64) -> Option<Vec<u8>> + '_ {
        move |offset, len| {
            let start = usize::try_from(offset).ok()?;
            let end = start.checked_add(usize::try_from(len).ok()?)?;
            bytes.get(start..end).map(<[u8]>::to_vec)
        }
    }

    #[test]
    fn files_that_are_not_a_whole_elf64_name_no_span_and_never_panic() {
        for bytes in [
            &b""[..],
            b"#!/bin/sh\necho hello, this is not an ELF file at all\n",
            b"\x7fELF\x01\x01\x01\0\0\0\0\0\0\0\0\0",
        ] {
            assert!(runtime_spans(&reader(bytes)).is_empty());
        }
        // This test's own executable, cut short and bitten at random: the
        // span is found, or none is; nothing panics.
        let exe = std::fs::read("/proc/self/exe").unwrap_or_default();
        assert!(!runtime_spans(&reader(&exe)).is_empty());
        let mut rng = fastrand::Rng::with_seed(35);
        for _ in 0..50 {
            let cut = rng.usize(..exe.len().max(1));
            let _ = runtime_spans(&reader(&exe[..cut]));
        }
        // Bitten where the parse is steered: the ELF header and the section
        // headers.
        let shoff = u64_at(&exe, 0x28).and_then(|o| usize::try_from(o).ok());
        let shnum = usize::from(u16_at(&exe, 0x3c).unwrap_or(0));
        let steering: Vec<usize> = (0..64)
            .chain(shoff.into_iter().flat_map(|o| o..o + 64 * shnum))
            .filter(|&at| at < exe.len())
            .collect();
        let mut bitten = exe.clone();
        for _ in 0..500 {
            let at: Vec<usize> = (0..8)
                .map(|_| steering[rng.usize(..steering.len())])
                .collect();
            for &i in &at {
                bitten[i] = rng.u8(..);
            }
            let _ = runtime_spans(&reader(&bitten));
            for &i in &at {
                bitten[i] = exe[i];
            }
        }
    }
}
