//! The four entry points an OpenCL loader looks up in a layer library, and the
//! exit hook that sends the process's last record.

use std::ffi::c_void;

use crate::{dispatch, opencl, platforms, transport};

const CL_SUCCESS: i32 = 0;
const CL_INVALID_VALUE: i32 = -30;
const CL_LAYER_API_VERSION: u32 = 0x4240;
const CL_LAYER_NAME: u32 = 0x4241;
const CL_LAYER_API_VERSION_100: u32 = 100;
const NAME: &[u8] = b"gpulab watch agent\0";

/// `clGetLayerInfo`: the layer API version the loader checks, and a name.
///
/// # Safety
/// The loader passes `value` with room for `size` bytes, or null.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clGetLayerInfo(
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    let version = CL_LAYER_API_VERSION_100.to_ne_bytes();
    let bytes: &[u8] = match param {
        CL_LAYER_API_VERSION => &version,
        CL_LAYER_NAME => NAME,
        _ => return CL_INVALID_VALUE,
    };
    if !size_ret.is_null() {
        // SAFETY: the loader's out-parameter.
        unsafe { *size_ret = bytes.len() };
    }
    if !value.is_null() {
        if size < bytes.len() {
            return CL_INVALID_VALUE;
        }
        // SAFETY: `value` has room for `size` >= len bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), value.cast(), bytes.len()) };
    }
    CL_SUCCESS
}

/// `clInitLayer`: takes the loader's table, returns the layer's.
///
/// # Safety
/// `target` holds `entries` function pointers; the out-pointers are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clInitLayer(
    entries: u32,
    target: *const *const c_void,
    entries_ret: *mut u32,
    layer_ret: *mut *const usize,
) -> i32 {
    if target.is_null() || entries_ret.is_null() || layer_ret.is_null() {
        return CL_INVALID_VALUE;
    }
    let recording = transport::start();
    let hooks = if recording {
        let mut hooks = opencl::hooks();
        if platforms::wanted().is_some() {
            hooks.push((
                platforms::GET_PLATFORM_IDS,
                platforms::get_platform_ids as *const c_void,
            ));
        }
        hooks
    } else {
        // Loaded without `gpulab watch`: pass everything through.
        Vec::new()
    };
    // SAFETY: the loader's table has `entries` entries.
    let table = unsafe { dispatch::install(target, entries as usize, &hooks) };
    if recording {
        transport::attached(transport::Family::OpenCl, opencl::destruction_watched());
    }
    // SAFETY: the loader's out-parameters.
    unsafe {
        *entries_ret = table.len() as u32;
        *layer_ret = table.as_ptr();
    }
    CL_SUCCESS
}

/// `clInitLayerWithProperties`, which newer Khronos loaders call instead.
///
/// # Safety
/// As [`clInitLayer`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clInitLayerWithProperties(
    entries: u32,
    target: *const *const c_void,
    entries_ret: *mut u32,
    layer_ret: *mut *const usize,
    _properties: *const isize,
) -> i32 {
    // SAFETY: same contract.
    unsafe { clInitLayer(entries, target, entries_ret, layer_ret) }
}

/// `clDeinitLayer`: the loader is unloading; send what is queued.
#[unsafe(no_mangle)]
pub extern "C" fn clDeinitLayer() -> i32 {
    transport::at_exit();
    CL_SUCCESS
}

/// The process is exiting. A library's finaliser runs after every `atexit`
/// handler, so objects a program releases in its own exit handlers (C++ static
/// destructors) are still recorded before the last record goes out.
#[used]
#[unsafe(link_section = ".fini_array")]
static AT_EXIT: extern "C" fn() = at_exit;

extern "C" fn at_exit() {
    transport::at_exit();
}
