//! The door gpulab's Python startup hook reports through
//! (`crates/gpulab-source/src/watch/python/sitecustomize.py`): what PyTorch, CuPy and JAX say of
//! their own device memory, taken as records like the hooks' and written
//! into gpulab's memory like theirs, on the same clock. The hook finds
//! these functions only in a process the driver has already loaded the agent
//! into; when the agent does not record (no memory of gpulab's), each says so
//! and the hook stops sending.

use std::ffi::{CStr, c_char};

use gpulab_events::{AliveGroup, AliveMoment, Framework, FrameworkSaid, PyLine};

use crate::clock::now_ns;
use crate::queue::Record;
use crate::transport;

/// `u64::MAX` as a limit: the framework has none.
const NO_LIMIT: u64 = u64::MAX;
/// The most of a reason kept, in bytes.
const REASON_MAX: usize = 300;
/// The most groups of live tensors kept of one look (the rest are summed),
/// the most bytes of their text, and of a group's file and function.
const ALIVE_GROUPS: usize = 256;
const ALIVE_TEXT_MAX: usize = 64 << 10;
const FILE_MAX: usize = 4096;
const FUNCTION_MAX: usize = 256;

/// The framework a C string names; None for a null pointer or another name.
///
/// # Safety
/// `name` is null or a NUL-terminated string that stays valid for the call.
unsafe fn framework(name: *const c_char) -> Option<Framework> {
    if name.is_null() {
        return None;
    }
    // SAFETY: not null, and NUL-terminated as the caller promises.
    let name = unsafe { CStr::from_ptr(name) };
    Framework::parse(name.to_str().ok()?)
}

/// Queues what `framework` said; 0 when the agent records it, -1 when not.
fn said(framework: Option<Framework>, device: u32, said: FrameworkSaid) -> i32 {
    said_with(framework, device, said, || None)
}

/// [`said`], with the calling thread's stack where `stack` takes one (only
/// once the agent records).
fn said_with(
    framework: Option<Framework>,
    device: u32,
    said: FrameworkSaid,
    stack: impl FnOnce() -> Option<crate::stack::Captured>,
) -> i32 {
    let Some(framework) = framework else {
        return -1;
    };
    if !transport::running() {
        return -1;
    }
    transport::send(Record::Framework {
        t_ns: now_ns(),
        framework,
        device,
        said,
        stack: stack(),
    });
    0
}

/// The framework's allocator on `device` holds `reserved` bytes from the
/// driver, of which the program's tensors or arrays use `allocated`; `limit`
/// is the most it will hold (`u64::MAX`: none).
///
/// # Safety
/// `framework` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpulab_framework_memory(
    framework: *const c_char,
    device: u32,
    allocated: u64,
    reserved: u64,
    limit: u64,
) -> i32 {
    // SAFETY: as this function's caller promises.
    let framework = unsafe { self::framework(framework) };
    said(
        framework,
        device,
        FrameworkSaid::Memory {
            allocated,
            reserved,
            limit: (limit != NO_LIMIT).then_some(limit),
        },
    )
}

/// The framework refused an allocation of `asked` bytes on `device`, which
/// had `free` bytes free of the `limit` it may use.
///
/// # Safety
/// `framework` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpulab_framework_refused(
    framework: *const c_char,
    device: u32,
    asked: u64,
    free: u64,
    limit: u64,
) -> i32 {
    // SAFETY: as this function's caller promises.
    let framework = unsafe { self::framework(framework) };
    let refused = FrameworkSaid::Refused {
        asked,
        free,
        limit,
        stack: None,
    };
    // The observer runs on the thread that asked: its stack names the line.
    said_with(framework, device, refused, || {
        crate::stack::capture(gpulab_events::ObjKind::Buffer)
    })
}

/// The framework's live tensors at `moment` (0: its highest reading so far,
/// 1: a refusal), grouped by the line that allocated them. `groups` is text,
/// one group a line, fields apart by tabs: `tensors`, `bytes`, `line`,
/// `function`, `file` (last: the rest of the line); an empty file is a group
/// no line of the program's own code allocated. `other_tensors` and
/// `other_bytes` are lines the hook summed rather than sent; `took_ns` how
/// long the look took (it ends now). A line that does
/// not read so is left out; 64 KiB are read, and groups past the 256 largest
/// are summed into the others.
///
/// # Safety
/// `framework` and `groups` are null or NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpulab_framework_alive(
    framework: *const c_char,
    device: u32,
    moment: u32,
    groups: *const c_char,
    other_tensors: u64,
    other_bytes: u64,
    took_ns: u64,
) -> i32 {
    // SAFETY: as this function's caller promises.
    let framework = unsafe { self::framework(framework) };
    let moment = match moment {
        0 => AliveMoment::Highest,
        1 => AliveMoment::Refused,
        _ => return -1,
    };
    if groups.is_null() {
        return -1;
    }
    // SAFETY: not null, and NUL-terminated as the caller promises.
    let text = unsafe { CStr::from_ptr(groups) }.to_bytes();
    let (groups, tensors, bytes) = alive_groups(&text[..text.len().min(ALIVE_TEXT_MAX)]);
    let other_tensors = other_tensors.saturating_add(tensors);
    let other_bytes = other_bytes.saturating_add(bytes);
    let allocated = groups
        .iter()
        .fold(other_bytes, |sum, g| sum.saturating_add(g.bytes));
    said(
        framework,
        device,
        FrameworkSaid::Alive {
            moment,
            allocated,
            groups,
            other_tensors,
            other_bytes,
            took_ns,
        },
    )
}

/// The groups [`gpulab_framework_alive`]'s text says, most bytes first, and
/// those past [`ALIVE_GROUPS`] summed (tensors, bytes).
fn alive_groups(text: &[u8]) -> (Vec<AliveGroup>, u64, u64) {
    let mut groups: Vec<AliveGroup> = text
        .split(|b| *b == b'\n')
        .filter_map(alive_group)
        .collect();
    groups.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.at.cmp(&b.at)));
    let rest = groups.split_off(groups.len().min(ALIVE_GROUPS));
    let tensors = rest.iter().fold(0u64, |n, g| n.saturating_add(g.tensors));
    let bytes = rest.iter().fold(0u64, |n, g| n.saturating_add(g.bytes));
    (groups, tensors, bytes)
}

fn alive_group(line: &[u8]) -> Option<AliveGroup> {
    let mut fields = line.splitn(5, |b| *b == b'\t');
    let mut number = || -> Option<u64> { std::str::from_utf8(fields.next()?).ok()?.parse().ok() };
    let (tensors, bytes, line) = (number()?, number()?, number()?);
    let function = fields.next()?;
    let file = fields.next()?;
    if file.len() > FILE_MAX || function.len() > FUNCTION_MAX {
        return None;
    }
    let at = (!file.is_empty()).then(|| PyLine {
        file: String::from_utf8_lossy(file).into_owned(),
        line: u32::try_from(line).unwrap_or(u32::MAX),
        function: String::from_utf8_lossy(function).into_owned(),
    });
    Some(AliveGroup { at, tensors, bytes })
}

/// The hook cannot read `framework`: `reason` says why (kept to 300 bytes).
///
/// # Safety
/// Both are null or NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpulab_framework_unreadable(
    framework: *const c_char,
    reason: *const c_char,
) -> i32 {
    // SAFETY: as this function's caller promises.
    let framework = unsafe { self::framework(framework) };
    let reason = if reason.is_null() {
        String::new()
    } else {
        // SAFETY: not null, and NUL-terminated as the caller promises.
        let bytes = unsafe { CStr::from_ptr(reason) }.to_bytes();
        String::from_utf8_lossy(&bytes[..bytes.len().min(REASON_MAX)]).into_owned()
    };
    said(framework, 0, FrameworkSaid::Unreadable { reason })
}

/// The calling thread is the hook's: its driver calls (a framework's figures
/// may cost one) are left out of the program's.
#[unsafe(no_mangle)]
pub extern "C" fn gpulab_framework_quiet() -> i32 {
    transport::quiet_thread();
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_frameworks_named_are_taken() {
        // SAFETY: literal C strings and a null pointer.
        unsafe {
            assert_eq!(framework(c"pytorch".as_ptr()), Some(Framework::Pytorch));
            assert_eq!(framework(c"torch".as_ptr()), None);
            assert_eq!(framework(std::ptr::null()), None);
        }
    }

    #[test]
    fn nothing_is_taken_where_the_agent_does_not_record() {
        // No memory of gpulab's in a test process: the hook is told to stop.
        // SAFETY: a literal C string.
        let r = unsafe { gpulab_framework_memory(c"pytorch".as_ptr(), 0, 1, 2, NO_LIMIT) };
        assert_eq!(r, -1);
    }

    #[test]
    fn live_tensors_are_read_from_their_lines_and_nothing_else() {
        let text = b"3\t300\t40\tstep\t/home/u/train.py\n\
                     5\t900\t0\t\t\n\
                     not\ta\tgroup\n\
                     1\t100\t7\tf\t/a\tb.py\n\
                     2\t-1\t3\tg\t/x.py\n\
                     \n";
        let (groups, ..) = alive_groups(text);
        assert_eq!(groups.len(), 3, "{groups:?}");
        assert_eq!((groups[0].at.as_ref(), groups[0].bytes), (None, 900));
        let at = groups[1].at.as_ref().expect("a line");
        assert_eq!(
            (at.file.as_str(), at.line, at.function.as_str()),
            ("/home/u/train.py", 40, "step")
        );
        assert_eq!(groups[1].tensors, 3);
        // The file is the rest of the line, tabs and all.
        assert_eq!(
            groups[2].at.as_ref().map(|a| a.file.as_str()),
            Some("/a\tb.py")
        );
    }

    #[test]
    fn no_more_live_groups_are_read_than_the_bound() {
        let text: String = (0..1000)
            .map(|i| format!("1\t{i}\t{i}\tf\t/p.py\n"))
            .collect();
        let (groups, tensors, bytes) = alive_groups(text.as_bytes());
        assert_eq!(groups.len(), ALIVE_GROUPS);
        // The largest are kept, and what is left is summed, not lost.
        assert_eq!(groups[0].bytes, 999);
        assert_eq!(tensors, 1000 - ALIVE_GROUPS as u64);
        assert_eq!(bytes, (0..1000 - ALIVE_GROUPS as u64).sum::<u64>());
        let long = format!("1\t1\t1\tf\t/{}\n", "d/".repeat(FILE_MAX));
        assert!(alive_groups(long.as_bytes()).0.is_empty());
    }

    #[test]
    fn a_quiet_thread_is_its_own() {
        let other = std::thread::spawn(|| {
            gpulab_framework_quiet();
            transport::quiet()
        });
        assert!(other.join().expect("thread"));
        assert!(!transport::quiet());
    }
}
