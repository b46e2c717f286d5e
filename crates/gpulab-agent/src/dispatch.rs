//! The OpenCL ICD dispatch table: the loader hands the layer the table it would
//! call (`target`), and the layer hands back its own, where the entries gpulab
//! hooks point at [`crate::opencl`] and every other entry is the target's.
//!
//! Entry positions are those of `struct _cl_icd_dispatch` in Khronos' `cl_icd.h`,
//! fixed since each OpenCL version added its entries at the end.

use std::ffi::c_void;
use std::sync::OnceLock;

/// Entries up to `clSetContextDestructorCallback`, the last of OpenCL 3.0.
pub const LEN: usize = 149;

pub const CREATE_CONTEXT: usize = 4;
pub const CREATE_CONTEXT_FROM_TYPE: usize = 5;
pub const RETAIN_CONTEXT: usize = 6;
pub const RELEASE_CONTEXT: usize = 7;
pub const CREATE_COMMAND_QUEUE: usize = 9;
pub const RETAIN_COMMAND_QUEUE: usize = 10;
pub const RELEASE_COMMAND_QUEUE: usize = 11;
pub const CREATE_BUFFER: usize = 14;
pub const CREATE_IMAGE_2D: usize = 15;
pub const CREATE_IMAGE_3D: usize = 16;
pub const RETAIN_MEM_OBJECT: usize = 17;
pub const RELEASE_MEM_OBJECT: usize = 18;
pub const GET_MEM_OBJECT_INFO: usize = 20;
pub const CREATE_PROGRAM_WITH_SOURCE: usize = 26;
pub const CREATE_PROGRAM_WITH_BINARY: usize = 27;
pub const RETAIN_PROGRAM: usize = 28;
pub const RELEASE_PROGRAM: usize = 29;
pub const BUILD_PROGRAM: usize = 30;
pub const CREATE_KERNEL: usize = 34;
pub const CREATE_KERNELS_IN_PROGRAM: usize = 35;
pub const RETAIN_KERNEL: usize = 36;
pub const RELEASE_KERNEL: usize = 37;
pub const SET_KERNEL_ARG: usize = 38;
pub const WAIT_FOR_EVENTS: usize = 41;
pub const RETAIN_EVENT: usize = 43;
pub const RELEASE_EVENT: usize = 44;
pub const FLUSH: usize = 46;
pub const FINISH: usize = 47;
pub const ENQUEUE_READ_BUFFER: usize = 48;
pub const ENQUEUE_WRITE_BUFFER: usize = 49;
pub const ENQUEUE_COPY_BUFFER: usize = 50;
pub const ENQUEUE_MAP_BUFFER: usize = 56;
pub const ENQUEUE_UNMAP_MEM_OBJECT: usize = 58;
pub const ENQUEUE_ND_RANGE_KERNEL: usize = 59;
pub const ENQUEUE_TASK: usize = 60;
pub const ENQUEUE_MARKER: usize = 62;
pub const CREATE_SUB_BUFFER: usize = 82;
pub const SET_MEM_OBJECT_DESTRUCTOR_CALLBACK: usize = 83;
pub const CREATE_USER_EVENT: usize = 84;
pub const ENQUEUE_READ_BUFFER_RECT: usize = 86;
pub const ENQUEUE_WRITE_BUFFER_RECT: usize = 87;
pub const ENQUEUE_COPY_BUFFER_RECT: usize = 88;
pub const CREATE_IMAGE: usize = 96;
pub const CREATE_PROGRAM_WITH_BUILT_IN_KERNELS: usize = 97;
pub const LINK_PROGRAM: usize = 99;
pub const ENQUEUE_FILL_BUFFER: usize = 102;
pub const ENQUEUE_MIGRATE_MEM_OBJECTS: usize = 104;
pub const ENQUEUE_MARKER_WITH_WAIT_LIST: usize = 105;
pub const ENQUEUE_BARRIER_WITH_WAIT_LIST: usize = 106;
pub const CREATE_COMMAND_QUEUE_WITH_PROPERTIES: usize = 123;
pub const CREATE_PROGRAM_WITH_IL: usize = 138;
pub const CREATE_BUFFER_WITH_PROPERTIES: usize = 146;
pub const CREATE_IMAGE_WITH_PROPERTIES: usize = 147;
pub const SET_CONTEXT_DESTRUCTOR_CALLBACK: usize = 148;

/// A table of entry addresses (kept as integers, which are `Sync`).
struct Table(Vec<usize>);

static TARGET: OnceLock<Table> = OnceLock::new();
static LAYER: OnceLock<Table> = OnceLock::new();

/// The target's entry `index`, or null where the target table is shorter or has
/// no such function.
pub fn target(index: usize) -> *const c_void {
    TARGET
        .get()
        .and_then(|t| t.0.get(index))
        .map_or(std::ptr::null(), |&p| p as *const c_void)
}

/// Copies the first `entries` of the loader's table (at most [`LEN`]) and builds
/// the layer's table from it: `hooks` where the target has the function, the
/// target's own entry everywhere else. Returns the layer table, which lives as
/// long as the process. Later calls return the first table built.
///
/// # Safety
/// `table` must point to at least `entries` readable function pointers.
pub unsafe fn install(
    table: *const *const c_void,
    entries: usize,
    hooks: &[(usize, *const c_void)],
) -> &'static [usize] {
    let n = entries.min(LEN);
    let copy: Vec<usize> = (0..n)
        // SAFETY: the caller guarantees `entries` readable entries; i < n <= entries.
        .map(|i| unsafe { *table.add(i) } as usize)
        .collect();
    let target = TARGET.get_or_init(|| Table(copy));
    let layer = LAYER.get_or_init(|| {
        let mut own = target.0.clone();
        for &(index, hook) in hooks {
            if let Some(slot) = own.get_mut(index)
                && *slot != 0
            {
                *slot = hook as usize;
            }
        }
        Table(own)
    });
    &layer.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_replace_only_entries_the_target_has_and_never_past_its_length() {
        let table: Vec<*const c_void> = (0..10)
            .map(|i| {
                if i == 3 {
                    std::ptr::null()
                } else {
                    (0x1000 + i) as *const c_void
                }
            })
            .collect();
        let hook = 0xdead as *const c_void;
        // SAFETY: the table has 10 entries.
        let layer = unsafe { install(table.as_ptr(), 10, &[(2, hook), (3, hook), (40, hook)]) };
        assert_eq!(layer.len(), 10);
        assert_eq!(layer[2], 0xdead);
        assert_eq!(layer[3], 0, "no hook where the target has no function");
        assert_eq!(layer[4], 0x1004);
        assert_eq!(target(4) as usize, 0x1004);
        assert!(target(40).is_null());
    }
}
