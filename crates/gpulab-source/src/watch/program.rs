//! The program about to be watched, looked at before it starts: where its
//! output goes, whether an agent can be loaded into it at all (a static binary
//! loads no library), whether gpulab already watches it from outside, and why
//! it could not start. Starts nothing itself.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::Stdio;
use crate::trace::NoteLevel;

/// Sets the program's stdin, stdout and stderr; true when it gets a process
/// group of its own. It does unless it may read the terminal: its stdin is
/// gpulab's terminal, or gpulab runs in the foreground of one (a program with
/// its stdin piped may still open `/dev/tty`, a password prompt, say). A
/// program in a background group would be stopped (SIGTTIN) at its first read
/// from it, for ever. Without a group of its own, Ctrl-C reaches it from the
/// terminal as it would bare, and a stop signals every process descended from it.
pub(super) fn set_stdio(cmd: &mut Command, stdio: &Stdio) -> std::io::Result<bool> {
    use std::os::unix::process::CommandExt;
    let reads_terminal = match stdio {
        Stdio::Inherit => {
            std::io::IsTerminal::is_terminal(&std::io::stdin()) || in_a_terminals_foreground()
        }
        Stdio::Log(file) => {
            cmd.stdin(std::process::Stdio::null())
                .stdout(file.try_clone()?)
                .stderr(file.try_clone()?);
            false
        }
    };
    if !reads_terminal {
        cmd.process_group(0);
    }
    Ok(!reads_terminal)
}

/// Whether this process is in the foreground process group of its controlling
/// terminal: bare, a program started from here could read `/dev/tty`.
fn in_a_terminals_foreground() -> bool {
    // `/dev/tty` is the controlling terminal itself: opening it takes none.
    let Ok(tty) = std::fs::File::open("/dev/tty") else {
        return false;
    };
    rustix::termios::tcgetpgrp(&tty).is_ok_and(|group| group == rustix::process::getpgrp())
}

/// Whether gpulab itself runs inside a `gpulab watch` (its agent's variables
/// are in gpulab's own environment).
pub(super) fn inside_another_watch() -> bool {
    ["GPULAB_AGENT_FD", "GPULAB_AGENT_PIPE", "GPULAB_AGENT_RING"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

/// `OPENCL_LAYERS` without any gpulab agent an outer watch put there (a memory
/// file named `gpulab-agent.so`, loaded through `/proc/<pid>/fd/<n>`).
pub(super) fn without_gpulab_agents(layers: &str) -> String {
    layers
        .split(':')
        .filter(|l| !l.is_empty() && !is_gpulab_agent(l))
        .collect::<Vec<_>>()
        .join(":")
}

fn is_gpulab_agent(path: &str) -> bool {
    std::fs::read_link(path)
        .is_ok_and(|target| target.to_string_lossy().contains("memfd:gpulab-agent.so"))
}

/// What to say before the program starts: that it is statically linked (no
/// agent can be loaded into it), that an outer watch's agent was replaced.
pub(super) fn notes(program: &str, nested: bool) -> Vec<(NoteLevel, String)> {
    let mut notes = Vec::new();
    if let Some(path) = resolve(program)
        && is_static_elf(&path) == Some(true)
    {
        notes.push((
            NoteLevel::Warning,
            format!(
                "{} is statically linked: no agent can be loaded into it; only its memory \
                 is shown",
                path.display()
            ),
        ));
    }
    if nested {
        notes.push((
            NoteLevel::Warning,
            "this gpulab watch runs inside another one: it took the program's agent over, \
             so the outer watch sees none of this program's calls (and none are counted twice)"
                .into(),
        ));
    }
    notes
}

/// The file `program` names, looked up in PATH as exec does.
fn resolve(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// Whether `path` is an ELF executable without a program interpreter (no
/// PT_INTERP: nothing loads shared libraries into it). None when it is not an
/// ELF file this can read (a script: its interpreter is what runs).
fn is_static_elf(path: &Path) -> Option<bool> {
    const PT_INTERP: u32 = 3;
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut head = Vec::new();
    // Program headers sit near the start; 64 KiB holds them in any real file.
    file.take(64 * 1024).read_to_end(&mut head).ok()?;
    if head.get(..4)? != b"\x7fELF" || *head.get(5)? != 1 {
        return None; // not ELF, or big-endian
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(head.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(head.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(head.get(o..o + 8)?.try_into().ok()?));
    let (phoff, phentsize, phnum) = match head.get(4)? {
        2 => (
            usize::try_from(u64_at(0x20)?).ok()?,
            u16_at(0x36)?,
            u16_at(0x38)?,
        ),
        1 => (u32_at(0x1C)? as usize, u16_at(0x2A)?, u16_at(0x2C)?),
        _ => return None,
    };
    let mut interp = false;
    for i in 0..usize::from(phnum) {
        let at = phoff.checked_add(i.checked_mul(usize::from(phentsize))?)?;
        interp |= u32_at(at)? == PT_INTERP;
    }
    Some(!interp)
}

/// Why a program could not start, in words.
pub(super) fn why_not(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or command (exit 127)".into(),
        std::io::ErrorKind::PermissionDenied => "it is not executable (exit 126)".into(),
        _ => format!("{e} (exit 126)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_program_is_not_static_and_a_script_is_neither() {
        let sh = resolve("sh").expect("sh on PATH");
        assert_eq!(is_static_elf(&sh), Some(false), "{}", sh.display());
        let dir = tempfile::tempdir().expect("temp dir");
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/bin/sh\n").expect("write");
        assert_eq!(is_static_elf(&script), None);
    }

    #[test]
    fn an_outer_watchs_agent_is_taken_out_of_the_layers() {
        let lib = super::super::agent::AgentLibrary::new().expect("memfd");
        let layers = format!("/opt/other.so:{}", lib.path());
        assert_eq!(without_gpulab_agents(&layers), "/opt/other.so");
        assert_eq!(without_gpulab_agents(""), "");
    }
}
