//! Reads a file's import slots from its dynamic section: which pointer slots
//! (`JUMP_SLOT` and `GLOB_DAT` relocations, kinds that differ per machine) a
//! function's name is bound into. Pure over a view of the file's memory, so
//! one reader serves a file the loader mapped and, in tests, a file's bytes;
//! it never writes, and never reads outside what the view holds.

/// The relocation kinds through which a machine's files import a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Machine {
    /// A call through the PLT.
    pub jump_slot: u32,
    /// An address taken.
    pub glob_dat: u32,
}

const EM_X86_64: u16 = 62;
const EM_AARCH64: u16 = 183;

impl Machine {
    /// The kinds of the machine an ELF header names (`e_machine`), for the
    /// machines the agent ships for.
    pub const fn of(e_machine: u16) -> Option<Machine> {
        match e_machine {
            // R_X86_64_JUMP_SLOT, R_X86_64_GLOB_DAT (x86-64 psABI).
            EM_X86_64 => Some(Machine {
                jump_slot: 7,
                glob_dat: 6,
            }),
            // R_AARCH64_JUMP_SLOT, R_AARCH64_GLOB_DAT (ELF for the Arm 64-bit
            // Architecture, "Dynamic relocations").
            EM_AARCH64 => Some(Machine {
                jump_slot: 1026,
                glob_dat: 1025,
            }),
            _ => None,
        }
    }
}

// The tables are read as 64-bit little-endian ELF: other builds have no kinds.
#[cfg(all(target_arch = "x86_64", target_pointer_width = "64"))]
const EM_HERE: Option<u16> = Some(EM_X86_64);
#[cfg(all(
    target_arch = "aarch64",
    target_endian = "little",
    target_pointer_width = "64"
))]
const EM_HERE: Option<u16> = Some(EM_AARCH64);
#[cfg(not(any(
    all(target_arch = "x86_64", target_pointer_width = "64"),
    all(
        target_arch = "aarch64",
        target_endian = "little",
        target_pointer_width = "64"
    )
)))]
const EM_HERE: Option<u16> = None;

/// The kinds of the machine the agent was built for; none where it cannot
/// read the program's files.
pub const HERE: Option<Machine> = match EM_HERE {
    Some(em) => Machine::of(em),
    None => None,
};

/// A file's memory, by the file's addresses moved by some bias.
pub trait Memory {
    /// The `len` bytes at `addr`, or none where they are not all there.
    fn bytes(&self, addr: u64, len: u64) -> Option<&[u8]>;
}

/// One slot a name is imported through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Import {
    /// The slot, by the file's own addresses (`r_offset`).
    pub slot: u64,
    /// Whether the file defines the name itself (an exported function it
    /// calls through its PLT so that another file may take its place).
    pub defined: bool,
}

const DT_NULL: u64 = 0;
const DT_PLTRELSZ: u64 = 2;
const DT_STRTAB: u64 = 5;
const DT_SYMTAB: u64 = 6;
const DT_RELA: u64 = 7;
const DT_RELASZ: u64 = 8;
const DT_STRSZ: u64 = 10;
const DT_PLTREL: u64 = 20;
const DT_JMPREL: u64 = 23;
const DYN_SIZE: u64 = 16;
const RELA_SIZE: u64 = 24;
const SYM_SIZE: u64 = 24;
/// More entries than any linker writes in a dynamic section; where the
/// reader stops when no `DT_NULL` came.
const MOST_DYN: u64 = 1 << 16;

/// The slots through which the file whose dynamic section lies at `dynamic`
/// in `mem` imports `wanted`. `bias` is what was added to the file's own
/// addresses to place it in `mem` (0 for a file's bytes): the loader may
/// have moved the addresses its dynamic section holds by it, or not.
pub fn imports(
    mem: &impl Memory,
    dynamic: u64,
    bias: u64,
    machine: Machine,
    wanted: &[u8],
) -> Vec<Import> {
    let mut tables = [0u64; DT_JMPREL as usize + 1];
    for entry in 0..MOST_DYN {
        let Some(d) = mem.bytes(dynamic.saturating_add(entry * DYN_SIZE), DYN_SIZE) else {
            break;
        };
        let (tag, val) = (word(d, 0), word(d, 8));
        if tag == DT_NULL {
            break;
        }
        if let Some(slot) = usize::try_from(tag).ok().and_then(|t| tables.get_mut(t)) {
            *slot = val;
        }
    }
    let table = |tag: u64| tables[tag as usize];
    // glibc moves the dynamic section's addresses by the bias in place where
    // the section is writable; other loaders, and files on disk, do not.
    let at = |v: u64| if v != 0 && v < bias { v + bias } else { v };
    let (symtab, strtab) = (at(table(DT_SYMTAB)), at(table(DT_STRTAB)));
    // Both machines' files relocate with addends (RELA) only.
    if symtab == 0 || strtab == 0 || ![0, DT_RELA].contains(&table(DT_PLTREL)) {
        return Vec::new();
    }
    let Some(strings) = mem.bytes(strtab, table(DT_STRSZ)) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for (start, size) in [(DT_JMPREL, DT_PLTRELSZ), (DT_RELA, DT_RELASZ)] {
        let start = at(table(start));
        let Some(relas) = (start != 0)
            .then(|| mem.bytes(start, table(size) / RELA_SIZE * RELA_SIZE))
            .flatten()
        else {
            continue;
        };
        for r in relas.chunks_exact(RELA_SIZE as usize) {
            let (offset, info) = (word(r, 0), word(r, 8));
            let kind = (info & 0xffff_ffff) as u32;
            if kind != machine.jump_slot && kind != machine.glob_dat {
                continue;
            }
            let at_sym = symtab.saturating_add((info >> 32) * SYM_SIZE);
            let Some(sym) = mem.bytes(at_sym, SYM_SIZE) else {
                continue;
            };
            let name = u32::from_le_bytes([sym[0], sym[1], sym[2], sym[3]]) as usize;
            let shndx = u16::from_le_bytes([sym[6], sym[7]]);
            let named = strings
                .get(name..)
                .and_then(|s| s.split(|b| *b == 0).next())
                .is_some_and(|s| s == wanted);
            if named {
                found.push(Import {
                    slot: offset,
                    defined: shndx != 0,
                });
            }
        }
    }
    found
}

/// The little-endian word at `at` of a slice known to hold it.
fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// An ELF file's bytes, read by the addresses its loadable segments would
/// have, as the loader would place them with no bias. Only tests read files:
/// the agent opens none inside the program.
#[cfg(test)]
pub struct FileView<'a> {
    bytes: &'a [u8],
    /// Each `PT_LOAD` segment's address, size in the file and offset.
    loads: Vec<(u64, u64, u64)>,
    /// The `PT_DYNAMIC` segment's address.
    pub dynamic: u64,
    /// The `PT_GNU_RELRO` segment's addresses.
    pub relro: Option<(u64, u64)>,
    /// The kinds of the machine its header names.
    pub machine: Option<Machine>,
}

#[cfg(test)]
impl<'a> FileView<'a> {
    /// The view of `bytes`, if they are a 64-bit little-endian ELF file
    /// with a dynamic section.
    pub fn new(bytes: &'a [u8]) -> Option<FileView<'a>> {
        const PT_LOAD: u32 = 1;
        const PT_DYNAMIC: u32 = 2;
        const PT_GNU_RELRO: u32 = 0x6474_e552;
        let ident = bytes.get(..6)?;
        if ident[..4] != *b"\x7fELF" || ident[4] != 2 || ident[5] != 1 {
            return None;
        }
        let half = |at: usize| Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?));
        let long = |at: usize| Some(word(bytes.get(at..at + 8)?, 0));
        let (phoff, phentsize, phnum) = (long(32)?, half(54)?, half(56)?);
        let mut view = FileView {
            bytes,
            loads: Vec::new(),
            dynamic: 0,
            relro: None,
            machine: Machine::of(half(18)?),
        };
        for i in 0..u64::from(phnum) {
            let h = usize::try_from(phoff.checked_add(i * u64::from(phentsize))?).ok()?;
            let header = bytes.get(h..h.checked_add(56)?)?;
            let kind = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
            let (offset, vaddr) = (word(header, 8), word(header, 16));
            let (filesz, memsz) = (word(header, 32), word(header, 40));
            match kind {
                PT_LOAD => view.loads.push((vaddr, filesz, offset)),
                PT_DYNAMIC => view.dynamic = vaddr,
                PT_GNU_RELRO => view.relro = Some((vaddr, vaddr.saturating_add(memsz))),
                _ => {}
            }
        }
        (view.dynamic != 0).then_some(view)
    }
}

#[cfg(test)]
impl Memory for FileView<'_> {
    fn bytes(&self, addr: u64, len: u64) -> Option<&[u8]> {
        let end = addr.checked_add(len)?;
        let &(vaddr, _, offset) = self
            .loads
            .iter()
            .find(|(vaddr, filesz, _)| addr >= *vaddr && end <= vaddr.saturating_add(*filesz))?;
        let from = usize::try_from(offset.checked_add(addr - vaddr)?).ok()?;
        self.bytes.get(from..from + usize::try_from(len).ok()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::{Object, ObjectSymbol, ObjectSymbolTable, RelocationFlags, RelocationTarget};

    /// Built from `tests/fixtures/elf/imports.c` by the commands in the
    /// README beside it.
    const AARCH64: &[u8] = include_bytes!("../../tests/fixtures/elf/imports-aarch64.so");
    const X86_64: &[u8] = include_bytes!("../../tests/fixtures/elf/imports-x86_64.so");

    /// What the `object` crate reads of a file's dynamic relocations
    /// against `name` (through its section headers, not its dynamic section):
    /// each slot with its kind.
    fn relocations_against(bytes: &[u8], name: &str) -> Vec<(u64, u32)> {
        let file = object::File::parse(bytes).unwrap();
        let symbols = file.dynamic_symbol_table().unwrap();
        let mut found: Vec<(u64, u32)> = file
            .dynamic_relocations()
            .unwrap()
            .filter_map(|(offset, r)| {
                let RelocationFlags::Elf { r_type } = r.flags() else {
                    return None;
                };
                let RelocationTarget::Symbol(index) = r.target() else {
                    return None;
                };
                let symbol = symbols.symbol_by_index(index).unwrap();
                (symbol.name() == Ok(name)).then_some((offset, r_type.0))
            })
            .collect();
        found.sort_unstable();
        found
    }

    fn slots_of(bytes: &[u8], machine: Machine, name: &str) -> Vec<u64> {
        let view = FileView::new(bytes).unwrap();
        let mut slots: Vec<u64> = imports(&view, view.dynamic, 0, machine, name.as_bytes())
            .iter()
            .map(|i| {
                assert!(!i.defined, "{name} is undefined in the fixtures");
                i.slot
            })
            .collect();
        slots.sort_unstable();
        slots
    }

    /// Each fixture's import slots, as the agent reads them from the file's
    /// dynamic section by the kinds of the machine its header names, are
    /// the slots a second reader finds of those kinds, and the ones
    /// `readelf -r` listed when the fixtures were made.
    #[test]
    fn each_machines_import_slots_are_found_in_its_file() {
        use object::elf;
        let machines = [
            (
                AARCH64,
                elf::EM_AARCH64,
                elf::R_AARCH64_JUMP_SLOT.0,
                elf::R_AARCH64_GLOB_DAT.0,
            ),
            (
                X86_64,
                elf::EM_X86_64,
                elf::R_X86_64_JUMP_SLOT.0,
                elf::R_X86_64_GLOB_DAT.0,
            ),
        ];
        for (bytes, em, jump_slot, glob_dat) in machines {
            let machine = FileView::new(bytes).unwrap().machine.unwrap();
            assert_eq!(Some(machine), Machine::of(em.0));
            assert_eq!((machine.jump_slot, machine.glob_dat), (jump_slot, glob_dat));
            for name in ["_exit", "cuptiSubscribe", "cuptiUnsubscribe", "leave"] {
                let expected: Vec<u64> = relocations_against(bytes, name)
                    .into_iter()
                    .filter(|(_, kind)| [jump_slot, glob_dat].contains(kind))
                    .map(|(offset, _)| offset)
                    .collect();
                assert_eq!(
                    slots_of(bytes, machine, name),
                    expected,
                    "{name}, e_machine {}",
                    em.0
                );
            }
            // The second reader does see both kinds, and the relocation of
            // another kind against `leave`.
            let kinds: Vec<u32> = relocations_against(bytes, "cuptiSubscribe")
                .into_iter()
                .map(|(_, kind)| kind)
                .collect();
            assert_eq!(kinds, [glob_dat, jump_slot]);
            assert_eq!(relocations_against(bytes, "leave").len(), 1);
        }
        let aarch64 = Machine::of(EM_AARCH64).unwrap();
        let x86_64 = Machine::of(EM_X86_64).unwrap();
        assert_eq!(slots_of(AARCH64, aarch64, "_exit"), [0x206e8, 0x30710]);
        assert_eq!(
            slots_of(AARCH64, aarch64, "cuptiSubscribe"),
            [0x206f0, 0x30718]
        );
        assert_eq!(slots_of(AARCH64, aarch64, "cuptiUnsubscribe"), [0x30720]);
        assert_eq!(slots_of(X86_64, x86_64, "_exit"), [0x2738, 0x3760]);
        assert_eq!(slots_of(X86_64, x86_64, "cuptiSubscribe"), [0x2740, 0x3768]);
        assert_eq!(slots_of(X86_64, x86_64, "leave"), [] as [u64; 0]);
        // Not a prefix, not another machine's kinds.
        assert!(slots_of(AARCH64, aarch64, "cuptiSubscrib").is_empty());
        assert!(slots_of(AARCH64, x86_64, "_exit").is_empty());
        assert!(slots_of(X86_64, aarch64, "_exit").is_empty());
    }

    /// The machine the agent is built for reads its own files.
    #[test]
    fn the_agents_own_machine_has_kinds() {
        let ours = if cfg!(target_arch = "aarch64") {
            Machine::of(EM_AARCH64)
        } else if cfg!(target_arch = "x86_64") {
            Machine::of(EM_X86_64)
        } else {
            None
        };
        assert_eq!(HERE, ours);
        assert_eq!(Machine::of(243), None, "riscv64 has no kinds here");
    }

    /// Bytes that are not what they say stop the reader, never panic it.
    #[test]
    fn a_damaged_file_is_read_as_far_as_it_holds() {
        assert!(FileView::new(b"\x7fELF").is_none());
        assert!(FileView::new(&AARCH64[..64]).is_none());
        let x86_64 = Machine::of(EM_X86_64).unwrap();
        let mut rng = fastrand::Rng::with_seed(51);
        for _ in 0..2000 {
            let mut bytes = X86_64.to_vec();
            for _ in 0..rng.usize(1..8) {
                let at = rng.usize(..bytes.len());
                bytes[at] = rng.u8(..);
            }
            bytes.truncate(rng.usize(bytes.len() / 2..=bytes.len()));
            if let Some(view) = FileView::new(&bytes) {
                imports(&view, view.dynamic, 0, x86_64, b"_exit");
                imports(&view, view.dynamic, 0x7f00_0000_0000, x86_64, b"_exit");
            }
        }
    }
}
