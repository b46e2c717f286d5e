//! What gpulab sets in a watched program's environment so that its agent
//! reaches the program's OpenCL and CUDA calls, and only that: the loader the
//! program finds (preloading one that loads layers, with the program's own
//! platforms in its order), CUDA's injection library, NVLink multicast kept
//! off. Each returns the notes the report says of it.

use std::process::Command;

use crate::machine::platforms::Bare;
use crate::machine::{Loader, LoaderPlan, cupti, icd};
use crate::run::OPENCL_SET_UP;
use crate::trace::NoteLevel;

/// Makes the program load an OpenCL loader that reads `OPENCL_LAYERS`
/// (preloading another loader when the default one has no layers), and nothing
/// more: the program sees the platforms and devices it sees bare, so the NVIDIA
/// ICD gpulab registers for its own labs is not passed on. `bare` asks the
/// program's own loader which platforms it gives ([`platforms::ask`]), needed
/// only when another is preloaded. Returns what it did, for the stream.
///
/// Its notes start with [`OPENCL_SET_UP`]: a report leaves them out for a
/// program that never made an OpenCL call.
pub(super) fn reach_the_loader(
    cmd: &mut Command,
    plan: &LoaderPlan,
    bare: impl FnOnce(&Loader) -> Result<Bare, String>,
) -> Vec<(NoteLevel, String)> {
    let mut notes = Vec::new();
    match plan {
        LoaderPlan::AsIs(_) => {}
        LoaderPlan::Preload { instead_of, loader } => {
            // ocl-icd sorts platforms by their devices unless told not to:
            // asking every driver for its devices starts each one, and a
            // driver may change the program's process as it starts (PoCL
            // installs signal handlers), where the program's own loader
            // starts none before the program asks.
            cmd.env("OCL_ICD_PLATFORM_SORT", "none");
            notes.extend(same_platforms_through(cmd, instead_of, loader, bare));
            let mut preload = loader.path.clone();
            if let Ok(old) = std::env::var("LD_PRELOAD")
                && !old.is_empty()
            {
                preload = format!("{preload}:{old}");
            }
            cmd.env("LD_PRELOAD", preload);
        }
        LoaderPlan::NoLayers(loader) => {
            notes.push((
                NoteLevel::Warning,
                format!(
                    "the only OpenCL loader here, {}, cannot load layers, so the agent \
                     cannot attach: install one that can (`apt-get install \
                     ocl-icd-libopencl1`, ocl-icd 2.3 or later)",
                    loader.path
                ),
            ));
        }
        LoaderPlan::NoLoader => {}
    }
    notes
}

/// Gives the loader gpulab preloads (`loader`) the ICDs the program's own
/// (`own`) loads, and the agent the platforms `own` gives in its order, so the
/// program sees exactly those: ocl-icd reads no `OCL_ICD_FILENAMES` and orders
/// a vendors folder its own way (on the H200's host, whose environment names
/// PoCL and NVIDIA's ICD there, a program that takes the first platform ran on
/// PoCL bare and on the H200 watched before this). When `own` cannot be
/// asked, says what the program may see instead.
fn same_platforms_through(
    cmd: &mut Command,
    own: &Loader,
    loader: &Loader,
    bare: impl FnOnce(&Loader) -> Result<Bare, String>,
) -> Vec<(NoteLevel, String)> {
    match bare(own) {
        Ok(Bare { platforms, vendors }) => {
            let keys = platforms;
            cmd.env("OCL_ICD_VENDORS", format!("{}/", vendors.display()));
            cmd.env(
                gpulab_events::platforms::ENV,
                gpulab_events::platforms::encode(&keys),
            );
            let names: Vec<String> = keys.iter().map(|k| k.name_lossy()).collect();
            vec![(
                NoteLevel::Info,
                format!(
                    "{OPENCL_SET_UP}the OpenCL loader programs find first here, {}, cannot \
                     load layers; gpulab preloaded {}, which can, with the ICDs {} loads, and \
                     the agent gives the program the platforms it gives, in its order: {}",
                    own.path,
                    loader.path,
                    own.path,
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            )]
        }
        Err(why) => {
            let filenames = std::env::var("OCL_ICD_FILENAMES")
                .ok()
                .filter(|f| !f.is_empty() && own.reads_filenames && !loader.reads_filenames)
                .map(|f| {
                    format!(
                        " (it reads OCL_ICD_FILENAMES={f}; {} does not)",
                        loader.path
                    )
                })
                .unwrap_or_default();
            vec![(
                NoteLevel::Warning,
                format!(
                    "{OPENCL_SET_UP}the OpenCL loader programs find first here, {}, cannot \
                     load layers, so gpulab preloaded {}, which can; gpulab could not ask {} \
                     which platforms it gives ({why}), so the program sees those {} finds, \
                     which may be others, in another order{filenames}",
                    own.path, loader.path, own.path, loader.path
                ),
            )]
        }
    }
}

/// Keeps the NVIDIA ICD gpulab registered for its own labs away from the
/// program, which sees the OpenCL platforms it sees bare, and says what that
/// leaves out.
pub(super) fn same_platforms_as_bare(cmd: &mut Command) -> Vec<(NoteLevel, String)> {
    for name in icd::set_for_gpulab_only() {
        cmd.env_remove(name);
    }
    icd::unregistered_nvidia()
        .map(|(library, system_dir)| {
            (
                NoteLevel::Info,
                format!(
                    "{OPENCL_SET_UP}NVIDIA's OpenCL library is installed here ({library}) but \
                     no .icd file in {system_dir} names it: the program sees the OpenCL \
                     platforms it sees without gpulab, which leave NVIDIA's out (gpulab's own \
                     labs add it for themselves; an .icd file naming it lets programs see it)"
                ),
            )
        })
        .into_iter()
        .collect()
}

/// Makes the CUDA driver load the agent inside the program's first `cuInit`
/// (`CUDA_INJECTION64_PATH`) and tells the agent which libcupti to open. With no
/// libcupti the agent still loads, and says in the stream that CUDA went unseen.
pub(super) fn reach_cuda(
    cmd: &mut Command,
    agent: &str,
    found: &[cupti::Cupti],
    nested: bool,
) -> Vec<(NoteLevel, String)> {
    let mut notes = Vec::new();
    if let Ok(theirs) = std::env::var("CUDA_INJECTION64_PATH")
        && !theirs.is_empty()
        && !nested
    {
        notes.push((
            NoteLevel::Warning,
            format!(
                "CUDA_INJECTION64_PATH was {theirs}; gpulab put its own agent there for \
                 the program, so that tool is not loaded"
            ),
        ));
    }
    cmd.env("CUDA_INJECTION64_PATH", agent);
    if let Some(c) = found.first() {
        cmd.env("GPULAB_CUPTI", &c.path);
    } else {
        cmd.env_remove("GPULAB_CUPTI");
    }
    notes
}

/// What the report says of NVLink multicast, which every watched program runs
/// without: a warning when the user's own setting said otherwise.
pub(super) fn multicast_note(overridden: &[String]) -> (NoteLevel, String) {
    let off = crate::multicast::OFF
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ");
    if overridden.is_empty() {
        return (
            NoteLevel::Info,
            format!(
                "gpulab keeps NVLink multicast off in the programs it starts ({off}): NCCL's \
                 NVLS algorithms, PyTorch's symmetric memory and NVSHMEM run without it, as \
                 on shared hosts they must"
            ),
        );
    }
    (
        NoteLevel::Warning,
        format!(
            "gpulab keeps NVLink multicast off in the programs it starts (on shared hosts \
             it can take the GPUs out of service): {} became {off}",
            overridden.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loader(path: &str, layers: bool) -> Loader {
        Loader {
            path: path.into(),
            layers,
            // So the ICD environment of the machine running the test plays no part.
            reads_filenames: true,
        }
    }

    fn env_of(cmd: &Command, name: &str) -> Option<String> {
        cmd.get_envs()
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
    }

    #[test]
    fn a_loader_without_layers_is_replaced_by_preloading_one_with_them_and_said_so() {
        let mut cmd = Command::new("true");
        let plan = LoaderPlan::Preload {
            instead_of: loader("/usr/local/cuda/lib64/libOpenCL.so.1", false),
            loader: loader("/usr/lib/x86_64-linux-gnu/libOpenCL.so.1", true),
        };
        let key = |name: &str| gpulab_events::platforms::PlatformKey {
            name: name.into(),
            ..Default::default()
        };
        let bare = Bare {
            platforms: vec![key("PoCL"), key("NVIDIA CUDA")],
            vendors: "/run/gpulab/watch-vendors/0f".into(),
        };
        let notes = reach_the_loader(&mut cmd, &plan, |own| {
            assert_eq!(
                own.path, "/usr/local/cuda/lib64/libOpenCL.so.1",
                "asks the program's"
            );
            Ok(bare.clone())
        });
        let preload = env_of(&cmd, "LD_PRELOAD").unwrap_or_default();
        assert!(
            preload.starts_with("/usr/lib/x86_64-linux-gnu/libOpenCL.so.1"),
            "{preload}"
        );
        assert_eq!(
            env_of(&cmd, "OCL_ICD_PLATFORM_SORT").as_deref(),
            Some("none")
        );
        assert_eq!(
            env_of(&cmd, "OCL_ICD_VENDORS").as_deref(),
            Some("/run/gpulab/watch-vendors/0f/")
        );
        let keys = gpulab_events::platforms::decode(
            &env_of(&cmd, gpulab_events::platforms::ENV).unwrap_or_default(),
        );
        assert_eq!(keys, Some(vec![key("PoCL"), key("NVIDIA CUDA")]));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(notes[0].0, NoteLevel::Info);
        assert!(notes[0].1.contains("/usr/local/cuda/lib64/libOpenCL.so.1"));
        assert!(
            notes[0].1.contains("its order: PoCL, NVIDIA CUDA"),
            "{}",
            notes[0].1
        );

        // Not asked: preloaded all the same, and said as a warning naming why.
        let mut cmd = Command::new("true");
        let notes = reach_the_loader(&mut cmd, &plan, |_| Err("it crashed".into()));
        assert!(env_of(&cmd, "LD_PRELOAD").is_some());
        assert_eq!(env_of(&cmd, gpulab_events::platforms::ENV), None);
        assert_eq!(env_of(&cmd, "OCL_ICD_VENDORS"), None);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(notes[0].0, NoteLevel::Warning);
        assert!(notes[0].1.contains("(it crashed)"), "{}", notes[0].1);
    }

    #[test]
    fn no_loader_with_layers_is_a_warning_and_changes_nothing() {
        let mut cmd = Command::new("true");
        let notes = reach_the_loader(
            &mut cmd,
            &LoaderPlan::NoLayers(loader("/x/libOpenCL.so.1", false)),
            |_| unreachable!("only a preloaded loader asks"),
        );
        assert_eq!(env_of(&cmd, "LD_PRELOAD"), None);
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].0, NoteLevel::Warning);
        let mut cmd = Command::new("true");
        let as_is = LoaderPlan::AsIs(loader("/y", true));
        assert!(reach_the_loader(&mut cmd, &as_is, |_| unreachable!()).is_empty());
        assert_eq!(env_of(&cmd, "LD_PRELOAD"), None);
    }
}
