//! The loaded CUDA driver's own functions, for the agent's reads of it: the
//! hooks (`cuda`) and the streams' order (`cuda_order`) both ask here, and
//! neither asks the other.

use std::ffi::{CStr, c_void};

/// A function of the loaded CUDA driver, or null. The driver is loaded (it
/// loaded the agent), often privately (the runtime opens it RTLD_LOCAL): this
/// asks for its handle, never loads it.
pub fn symbol(name: &CStr) -> *mut c_void {
    // SAFETY: RTLD_NOLOAD only looks among the loaded libraries.
    let lib = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_NOW) };
    let scope = if lib.is_null() {
        libc::RTLD_DEFAULT
    } else {
        lib
    };
    // SAFETY: a symbol lookup in a loaded library.
    unsafe { libc::dlsym(scope, name.as_ptr()) }
}
