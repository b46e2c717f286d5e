//! The platforms the program sees: where gpulab preloaded a loader of its own
//! (the program's cannot load layers), exactly those the program's own loader
//! gives it, in that order, named in [`ENV`] by gpulab, which asked that loader
//! before the program started (`gpulab_events::platforms`).
//!
//! The hook calls the preloaded loader's `clGetPlatformIDs` and
//! `clGetPlatformInfo` (never the program's hooks, so nothing is recorded) once,
//! keeps the arrangement for the process's life, and then answers from it.
//! When a platform of the bare list is not there, the program gets the
//! preloaded loader's list unchanged and gpulab is told (a conflict: the
//! program may see another platform than without gpulab).

use std::ffi::c_void;
use std::sync::OnceLock;

use gpulab_events::platforms::{ENV, PlatformKey, arrange, decode};

use crate::dispatch as d;

type Handle = *mut c_void;

const CL_SUCCESS: i32 = 0;
const CL_INVALID_VALUE: i32 = -30;
const CL_PLATFORM_NOT_FOUND_KHR: i32 = -1001;

pub const GET_PLATFORM_IDS: usize = 0;
const GET_PLATFORM_INFO: usize = 1;

type GetIds = unsafe extern "C" fn(u32, *mut Handle, *mut u32) -> i32;
type GetInfo = unsafe extern "C" fn(Handle, u32, usize, *mut c_void, *mut usize) -> i32;

/// The bare list gpulab named, when it named one.
pub fn wanted() -> Option<Vec<PlatformKey>> {
    decode(&std::env::var(ENV).ok()?)
}

/// Platform handles as integers, which are `Sync`.
static ARRANGED: OnceLock<Result<Vec<usize>, i32>> = OnceLock::new();

/// `clGetPlatformIDs` as the program's own loader would answer it.
pub unsafe extern "C" fn get_platform_ids(
    entries: u32,
    platforms: *mut Handle,
    count: *mut u32,
) -> i32 {
    if (entries == 0 && !platforms.is_null()) || (platforms.is_null() && count.is_null()) {
        return CL_INVALID_VALUE;
    }
    let arranged = ARRANGED.get_or_init(arranged);
    let list = match arranged {
        Ok(list) => list,
        Err(status) => return *status,
    };
    if !count.is_null() {
        // SAFETY: the program's out-parameter.
        unsafe { *count = u32::try_from(list.len()).unwrap_or(u32::MAX) };
    }
    if !platforms.is_null() {
        for (i, &p) in list.iter().take(entries as usize).enumerate() {
            // SAFETY: the program gave room for `entries` handles.
            unsafe { *platforms.add(i) = p as Handle };
        }
    }
    if list.is_empty() {
        CL_PLATFORM_NOT_FOUND_KHR
    } else {
        CL_SUCCESS
    }
}

/// The bare list of handles, from the loader's: its own on a mismatch (said).
fn arranged() -> Result<Vec<usize>, i32> {
    let given = given()?;
    let Some(bare) = wanted() else {
        return Ok(given.into_iter().map(|(h, _)| h).collect());
    };
    match arrange(&bare, &given) {
        Some(list) => Ok(list),
        None => {
            let names = |keys: &mut dyn Iterator<Item = &PlatformKey>| {
                keys.map(PlatformKey::name_lossy)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            crate::transport::conflict(
                crate::transport::Family::OpenCl,
                format!(
                    "the program's own OpenCL loader gives the platforms [{}]; the loader \
                     gpulab preloaded for its layer gives [{}], and the program saw those: \
                     it may have taken another platform than without gpulab",
                    names(&mut bare.iter()),
                    names(&mut given.iter().map(|(_, k)| k)),
                ),
            );
            Ok(given.into_iter().map(|(h, _)| h).collect())
        }
    }
}

/// The loader's platforms, each with what it says of itself.
fn given() -> Result<Vec<(usize, PlatformKey)>, i32> {
    let ids = d::target(GET_PLATFORM_IDS);
    let info = d::target(GET_PLATFORM_INFO);
    if ids.is_null() || info.is_null() {
        return Err(CL_PLATFORM_NOT_FOUND_KHR);
    }
    // SAFETY: entries 0 and 1 of the dispatch table have these types (cl_icd.h).
    let (ids, info) = unsafe {
        (
            std::mem::transmute::<*const c_void, GetIds>(ids),
            std::mem::transmute::<*const c_void, GetInfo>(info),
        )
    };
    let mut n = 0u32;
    // SAFETY: asking for the count only.
    let status = unsafe { ids(0, std::ptr::null_mut(), &mut n) };
    if status != CL_SUCCESS {
        return if status == CL_PLATFORM_NOT_FOUND_KHR {
            Ok(Vec::new())
        } else {
            Err(status)
        };
    }
    let mut handles: Vec<Handle> = vec![std::ptr::null_mut(); n as usize];
    // SAFETY: room for `n` handles.
    let status = unsafe { ids(n, handles.as_mut_ptr(), std::ptr::null_mut()) };
    if status != CL_SUCCESS {
        return Err(status);
    }
    Ok(handles
        .into_iter()
        .map(|h| {
            let key = PlatformKey::asked(|param, buffer| {
                let mut size = 0usize;
                let value = if buffer.is_empty() {
                    std::ptr::null_mut()
                } else {
                    buffer.as_mut_ptr().cast()
                };
                // SAFETY: clGetPlatformInfo on a handle the loader gave, with
                // a buffer of `buffer.len()` bytes or none.
                let status = unsafe { info(h, param, buffer.len(), value, &mut size) };
                (status == CL_SUCCESS).then_some(size)
            });
            (h as usize, key)
        })
        .collect())
}
