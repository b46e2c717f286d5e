//! `deploy/`: the Kubernetes manifests, parsed and checked structurally (no
//! Kubernetes schema validator is packaged for the CI machine: kubeconform and
//! kubeval are not in Debian), and the Slurm scripts' syntax. The Slurm scripts
//! run for real on a one-node cluster in CI (`deploy/slurm/test-localhost.sh`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use yaml_rust2::{Yaml, YamlLoader};

fn manifest(name: &str) -> Yaml {
    let path = common::repo_file(&format!("deploy/k8s/{name}"));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut docs = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(docs.len(), 1, "{name}: one object");
    docs.remove(0)
}

fn str_at<'a>(y: &'a Yaml, path: &[&str]) -> &'a str {
    let mut at = y;
    for key in path {
        at = &at[*key];
    }
    at.as_str()
        .unwrap_or_else(|| panic!("{path:?} is not a string: {at:?}"))
}

/// What every Job here must be: batch/v1, pods that never restart in place, a
/// container of the gpulab image, the cards' volume from the claim.
fn job(name: &str, job_name: &str) -> Yaml {
    let job = manifest(name);
    assert_eq!(str_at(&job, &["apiVersion"]), "batch/v1", "{name}");
    assert_eq!(str_at(&job, &["kind"]), "Job", "{name}");
    assert_eq!(str_at(&job, &["metadata", "name"]), job_name);
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(str_at(pod, &["restartPolicy"]), "Never", "{name}");
    assert_eq!(pod["securityContext"]["runAsUser"].as_i64(), Some(1000));
    assert_eq!(pod["securityContext"]["fsGroup"].as_i64(), Some(1000));
    let claim = manifest("cards-pvc.yaml");
    let volumes = pod["volumes"].as_vec().unwrap();
    assert_eq!(
        volumes[0]["persistentVolumeClaim"]["claimName"].as_str(),
        Some(str_at(&claim, &["metadata", "name"])),
        "{name} mounts the cards' claim"
    );
    let container = &pod["containers"][0];
    assert!(
        str_at(container, &["image"]).starts_with("gpulab:"),
        "{name}"
    );
    assert_eq!(
        container["volumeMounts"][0]["name"].as_str(),
        volumes[0]["name"].as_str()
    );
    job
}

#[test]
fn the_claim_is_shared_by_every_node() {
    let pvc = manifest("cards-pvc.yaml");
    assert_eq!(str_at(&pvc, &["kind"]), "PersistentVolumeClaim");
    assert_eq!(str_at(&pvc, &["apiVersion"]), "v1");
    assert_eq!(
        pvc["spec"]["accessModes"][0].as_str(),
        Some("ReadWriteMany")
    );
}

#[test]
fn the_card_job_is_indexed_one_gpu_pod_per_node() {
    let job = job("card-job.yaml", "gpulab-card");
    let spec = &job["spec"];
    assert_eq!(str_at(spec, &["completionMode"]), "Indexed");
    assert_eq!(
        spec["completions"].as_i64(),
        spec["parallelism"].as_i64(),
        "every node at once"
    );
    let pod = &spec["template"]["spec"];
    let anti =
        &pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(str_at(anti, &["topologyKey"]), "kubernetes.io/hostname");
    let component = &spec["template"]["metadata"]["labels"]["app.kubernetes.io/component"];
    assert_eq!(
        &anti["labelSelector"]["matchLabels"]["app.kubernetes.io/component"], component,
        "the anti-affinity selects the card pods themselves"
    );
    let container = &pod["containers"][0];
    assert_eq!(
        container["resources"]["limits"]["nvidia.com/gpu"].as_i64(),
        Some(1)
    );
    let env: Vec<&str> = container["env"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    let args: Vec<&str> = container["args"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    // Every $(VAR) the arguments use is defined in the container's env.
    for arg in &args {
        for var in arg.split("$(").skip(1).filter_map(|v| v.split(')').next()) {
            assert!(env.contains(&var), "{var} is not in the env: {env:?}");
        }
    }
    // And the command is one gpulab takes: run here with the variables filled
    // in and the cards' folder a temporary one (from recordings: no device).
    let dir = common::temp_dir();
    let filled: Vec<String> = args
        .iter()
        .map(|a| {
            a.replace("/cards", &dir.path().display().to_string())
                .replace("$(NODE_NAME)", "node-1")
                .replace("$(JOB_COMPLETION_INDEX)", "0")
        })
        .collect();
    let mut argv: Vec<&str> = filled.iter().map(String::as_str).collect();
    let from = common::repo_file("tests/fixtures/recordings")
        .display()
        .to_string();
    argv.extend(["--from", &from]);
    let out = common::run(&argv);
    assert!(out.status.success(), "{argv:?}: {}", common::stderr(&out));
    assert!(dir.path().join("node-1-0/card.json").is_file());
}

#[test]
fn the_merge_job_merges_every_card_of_the_volume() {
    let job = job("merge-job.yaml", "gpulab-matrix");
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let args = container["args"][0].as_str().unwrap();
    assert!(
        args.starts_with("gpulab card merge /cards/*/card.json -o /cards/"),
        "{args}"
    );
    let mount = container["volumeMounts"][0]["mountPath"].as_str().unwrap();
    assert_eq!(mount, "/cards");
}

#[test]
fn the_slurm_scripts_parse_and_call_gpulab_card() {
    for script in [
        "card.sbatch",
        "merge.sbatch",
        "submit.sh",
        "test-localhost.sh",
    ] {
        let path = common::repo_file(&format!("deploy/slurm/{script}"));
        let out = std::process::Command::new("bash")
            .arg("-n")
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let card = std::fs::read_to_string(common::repo_file("deploy/slurm/card.sbatch")).unwrap();
    assert!(
        card.contains("#SBATCH --exclusive"),
        "the labs time the node alone"
    );
    assert!(card.contains("\"$gpulab\" card -o \"$out\" \"${more[@]}\""));
    let merge = std::fs::read_to_string(common::repo_file("deploy/slurm/merge.sbatch")).unwrap();
    assert!(merge.contains("\"$gpulab\" card merge"));
    let submit = std::fs::read_to_string(common::repo_file("deploy/slurm/submit.sh")).unwrap();
    assert!(submit.contains("--dependency=\"afterany:$array\""));
}
