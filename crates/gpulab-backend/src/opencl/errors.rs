//! OpenCL status codes and their names (`CL_INVALID_MEM_OBJECT`), so every error a
//! lab sees carries the name a user would look up in the spec.

use cl3::error_codes::error_text;
use cl3::types::cl_int;

use crate::DriverError;

/// A code gpulab itself returns when the engine hands the backend operands that do
/// not fit the call (a bug in gpulab, never a driver answer).
pub const GPULAB_BAD_OPERANDS: cl_int = -10_000;
/// A host allocation gpulab needs for a call (staging or read/write target) failed.
pub const GPULAB_HOST_ALLOC_FAILED: cl_int = -10_001;

/// The name of an OpenCL status code; unknown codes keep their number.
pub fn name(code: cl_int) -> String {
    match code {
        GPULAB_BAD_OPERANDS => "GPULAB_BAD_OPERANDS".into(),
        GPULAB_HOST_ALLOC_FAILED => "GPULAB_HOST_ALLOC_FAILED".into(),
        _ => match gpulab_events::vocab::opencl_status_name(code) {
            Some(known) => known.into(),
            // cl3's own codes (a driver library it could not load).
            None => match error_text(code) {
                "UNKNOWN_ERROR" => format!("CL_UNKNOWN_ERROR_{code}"),
                cl3_code => cl3_code.into(),
            },
        },
    }
}

pub fn driver_error(code: cl_int) -> DriverError {
    DriverError {
        code: i64::from(code),
        name: name(code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_have_their_cl_names() {
        assert_eq!(name(-38), "CL_INVALID_MEM_OBJECT");
        assert_eq!(name(-36), "CL_INVALID_COMMAND_QUEUE");
        assert_eq!(name(-58), "CL_INVALID_EVENT");
        assert_eq!(name(-5), "CL_OUT_OF_RESOURCES");
        assert_eq!(name(-2000), "DLOPEN_RUNTIME_LOAD_FAILED");
        assert_eq!(name(-12345), "CL_UNKNOWN_ERROR_-12345");
        let e = driver_error(-38);
        assert_eq!((e.code, e.name.as_str()), (-38, "CL_INVALID_MEM_OBJECT"));
    }
}
