//! NVLink multicast stays off in every process gpulab starts: on the shared
//! hosts gpulab runs on, multicast objects (`cuMulticastCreate`, which NCCL's
//! NVLS algorithms, PyTorch's symmetric memory and NVSHMEM make) can take the
//! GPUs out of service. gpulab itself never calls `cuMulticastCreate`.

use std::ffi::OsStr;
use std::process::Command;

/// Each library's switch, and the value that turns multicast off.
pub const OFF: [(&str, &str); 3] = [
    ("NCCL_NVLS_ENABLE", "0"),
    ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
    ("NVSHMEM_DISABLE_NVLS", "1"),
];

/// Sets every switch of [`OFF`] for `cmd`. Returns the switches that
/// `current` (a variable's value in gpulab's environment) had set otherwise,
/// as `NAME=value`, for a watched program to be told of.
pub fn keep_off(cmd: &mut Command, current: impl Fn(&str) -> Option<String>) -> Vec<String> {
    let mut overridden = Vec::new();
    for (name, off) in OFF {
        if let Some(was) = current(name)
            && was != off
        {
            overridden.push(format!("{name}={was}"));
        }
        cmd.env(name, OsStr::new(off));
    }
    overridden
}

/// [`keep_off`] against gpulab's own environment.
pub fn keep_off_here(cmd: &mut Command) -> Vec<String> {
    keep_off(cmd, |name| std::env::var(name).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(cmd: &Command, name: &str) -> Option<String> {
        cmd.get_envs()
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
    }

    #[test]
    fn every_switch_is_set_off_and_a_different_setting_is_told() {
        let mut cmd = Command::new("true");
        let told = keep_off(&mut cmd, |name| match name {
            "NCCL_NVLS_ENABLE" => Some("1".into()),
            "NVSHMEM_DISABLE_NVLS" => Some("1".into()),
            _ => None,
        });
        assert_eq!(env_of(&cmd, "NCCL_NVLS_ENABLE").as_deref(), Some("0"));
        assert_eq!(
            env_of(&cmd, "TORCH_SYMM_MEM_DISABLE_MULTICAST").as_deref(),
            Some("1")
        );
        assert_eq!(env_of(&cmd, "NVSHMEM_DISABLE_NVLS").as_deref(), Some("1"));
        assert_eq!(told, vec!["NCCL_NVLS_ENABLE=1".to_string()]);
    }
}
