//! The habits of other command-line tools: completions, a man page, `--color`
//! with NO_COLOR, exit statuses in `--help` and kept by the commands. Every test
//! spawns the real binary with absolute paths, so none depends on the folder it
//! runs in.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use crate::common;

use std::process::Output;

fn run_env(args: &[&str], env: &[(&str, Option<&str>)]) -> Output {
    let mut cmd = common::gpulab();
    cmd.args(args);
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.output().expect("the gpulab binary starts")
}

/// The visible subcommands, as `--help` lists them.
fn subcommands() -> Vec<String> {
    let out = common::run(&["--help"]);
    let help = common::stdout(&out);
    let names: Vec<String> = help
        .split_once("Commands:\n")
        .map(|(_, rest)| rest)
        .unwrap_or_default()
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect();
    for expected in [
        "list",
        "run",
        "check",
        "doctor",
        "export",
        "completions",
        "man",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected}: {help}");
    }
    names
}

fn fixture(name: &str) -> String {
    common::repo_file(&format!("tests/fixtures/recordings/{name}.jsonl"))
        .display()
        .to_string()
}

/// What gpulab offers a shell for the last word of `line` (after `gpulab`),
/// asked as the registered script asks it at a TAB; user labs from `config`.
fn complete(shell: &str, config: &std::path::Path, line: &[&str]) -> Vec<String> {
    let out = common::gpulab()
        .env("GPULAB_COMPLETE", shell)
        .env("_CLAP_COMPLETE_INDEX", line.len().to_string())
        .env("XDG_CONFIG_HOME", config)
        .arg("--")
        .arg("gpulab")
        .args(line)
        .output()
        .expect("gpulab starts");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{line:?}: {}",
        common::stderr(&out)
    );
    common::stdout(&out)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Each shell's script registers gpulab's completions, which it asks of
/// gpulab at each TAB: every subcommand is offered, the hidden worker never.
#[test]
fn completion_scripts_register_and_offer_every_subcommand() {
    let config = common::temp_dir();
    let commands = subcommands();
    for (shell, marker) in [
        ("bash", "complete -o nospace -o bashdefault"),
        ("zsh", "#compdef gpulab"),
        ("fish", "complete --keep-order --exclusive --command gpulab"),
        ("elvish", "set edit:completion:arg-completer[gpulab]"),
        (
            "powershell",
            "Register-ArgumentCompleter -Native -CommandName gpulab",
        ),
    ] {
        let out = common::run(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = common::stdout(&out);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("GPULAB_COMPLETE"), "{shell}: {script}");
    }
    let offered = complete("bash", config.path(), &[""]);
    for c in &commands {
        assert!(offered.contains(c), "`{c}` is not offered: {offered:?}");
    }
    // `worker` is gpulab's own (it starts it); no shell offers it.
    assert!(!offered.iter().any(|c| c == "worker"), "{offered:?}");
    let out = common::run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "an unknown shell is bad input");
}

/// `gpulab run <TAB>` offers the catalog's lab ids (fish with each lab's
/// title), and `--variant <TAB>` the variants of the lab the line names, by
/// `run ID` or `--lab ID`; a user's own lab and one in `--labs DIR` too.
#[test]
fn completion_offers_the_lab_ids_and_the_named_labs_variants() {
    let config = common::temp_dir();
    let set = gpulab::lab::LabSet::load(&[]);
    let ids = complete("bash", config.path(), &["run", ""]);
    for lab in set.labs() {
        assert!(ids.contains(&lab.id), "no {}: {ids:?}", lab.id);
        let names: Vec<String> = lab.variants.iter().map(|v| v.name.clone()).collect();
        let by_run = complete("bash", config.path(), &["run", &lab.id, "--variant", ""]);
        assert_eq!(by_run, names, "run {} --variant", lab.id);
        let by_lab = complete("bash", config.path(), &["--lab", &lab.id, "--variant", ""]);
        assert_eq!(by_lab, names, "--lab {} --variant", lab.id);
    }
    let fish = complete("fish", config.path(), &["run", "cl-f"]);
    assert!(
        fish.iter()
            .any(|l| l.starts_with("cl-finish\tWho waits for the kernel")),
        "fish names each lab with its title: {fish:?}"
    );
    // A prefix narrows the variants; an unknown lab offers every name.
    let finish = complete(
        "bash",
        config.path(),
        &["run", "cl-finish", "--variant", "no"],
    );
    assert_eq!(finish, ["no-wait"]);
    let any = complete(
        "bash",
        config.path(),
        &["run", "no-such-lab", "--variant", ""],
    );
    assert!(any.len() > 10, "{any:?}");
    // A lab of the user's own, and one in a folder the line names: cl-finish
    // under other ids.
    let text = std::fs::read_to_string(common::repo_file("labs/cl-finish.toml")).expect("lab");
    let user = config.path().join("gpulab/labs");
    let folder = common::temp_dir();
    std::fs::create_dir_all(&user).expect("user lab folder");
    for (dir, id) in [
        (user.as_path(), "my-finish"),
        (folder.path(), "their-finish"),
    ] {
        let own = text.replacen("id = \"cl-finish\"", &format!("id = \"{id}\""), 1);
        std::fs::write(dir.join(format!("{id}.toml")), own).expect("a lab file");
    }
    let dir = folder.path().display().to_string();
    let with_dir = complete("bash", config.path(), &["--labs", &dir, "run", ""]);
    assert!(with_dir.iter().any(|l| l == "my-finish"), "{with_dir:?}");
    assert!(with_dir.iter().any(|l| l == "their-finish"), "{with_dir:?}");
    let theirs = complete(
        "bash",
        config.path(),
        &["--labs", &dir, "run", "their-finish", "--variant", ""],
    );
    assert_eq!(theirs, ["finish", "no-wait", "blocking-read"]);
}

#[test]
fn the_man_page_renders_and_names_every_subcommand() {
    let out = common::run(&["man"]);
    assert_eq!(out.status.code(), Some(0));
    let page = common::stdout(&out);
    assert!(
        page.starts_with(".ie") || page.contains(".TH gpulab"),
        "{page}"
    );
    assert!(page.contains(".SH NAME") && page.contains(".SH SYNOPSIS"));
    for section in [
        "EXIT STATUS",
        "ENVIRONMENT",
        "FILES",
        "COMMANDS",
        "EXAMPLES",
    ] {
        assert!(
            page.contains(&format!(".SH {section}"))
                || page.contains(&format!(".SH \"{section}\"")),
            "no {section}"
        );
    }
    assert!(
        page.contains("143"),
        "128 + SIGTERM is among the exit statuses"
    );
    assert!(
        page.contains("\\-\\-color"),
        "global options are in the page"
    );
    // Every subcommand with its own options, and no pointer to pages that
    // do not exist (`gpulab-run(1)`).
    for c in subcommands() {
        assert!(
            page.contains(&format!(".SS \"gpulab {c}\"")),
            "the man page lacks `{c}`"
        );
    }
    assert!(
        page.contains("\\-\\-fail\\-on"),
        "watch's and run's options are in the page"
    );
    assert!(
        !page.contains("gpulab\\-run(1)"),
        "a page that does not exist is named"
    );
}

#[test]
fn help_lists_the_exit_statuses() {
    let help = common::stdout(&common::run(&["--help"]));
    let statuses = help
        .split_once("Exit status:")
        .map(|(_, s)| s)
        .unwrap_or("");
    for (code, words) in [
        ("0", "ok"),
        ("1", "--fail-on"),
        ("2", "bad input"),
        ("3", "no device"),
        ("4", "the run failed"),
        ("130", "Ctrl-C"),
    ] {
        assert!(
            statuses
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{code} ")) && l.contains(words)),
            "{code} {words}: {help}"
        );
    }
}

/// A lab file with a misspelt call: `check` draws the mistake, coloured or not.
fn bad_lab(dir: &std::path::Path) -> String {
    let file = dir.join("bad.toml");
    let text = std::fs::read_to_string(common::repo_file("labs/cl-finish.toml"))
        .expect("shipped lab")
        .replace("clFinish(q)", "clFinsh(q)");
    std::fs::write(&file, text).expect("temp file");
    file.display().to_string()
}

#[test]
fn color_follows_one_rule_with_no_color() {
    let dir = common::temp_dir();
    let file = bad_lab(dir.path());
    let coloured = |args: &[&str], no_color: Option<&str>| {
        let mut all = vec!["check", file.as_str()];
        all.extend_from_slice(args);
        let out = run_env(&all, &[("NO_COLOR", no_color)]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = common::stderr(&out);
        assert!(err.contains("clFinsh"), "{err}");
        err.contains('\u{1b}')
    };
    // stderr is a pipe here: `auto` means no colour, NO_COLOR or not.
    assert!(!coloured(&[], None));
    assert!(!coloured(&["--color", "auto"], None));
    assert!(coloured(&["--color", "always"], None));
    assert!(coloured(&["--color=always"], Some("1")), "a flag wins");
    assert!(!coloured(&["--color", "never"], None));
    let out = common::run(&["--color", "sometimes", "list"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_missing_input_file_is_bad_input() {
    let dir = common::temp_dir();
    let missing = dir.path().join("missing.jsonl").display().to_string();
    let out_svg = dir.path().join("out.svg").display().to_string();
    for args in [
        vec!["report", missing.as_str()],
        vec!["replay", missing.as_str()],
        vec!["export", missing.as_str(), "--svg", out_svg.as_str()],
        vec!["check", missing.as_str()],
    ] {
        let out = common::run(&args);
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("missing.jsonl"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn an_unwritable_output_path_is_bad_input() {
    let dir = common::temp_dir();
    let nowhere = dir.path().join("no-such-folder").join("out.jsonl");
    let nowhere = nowhere.display().to_string();
    let out = common::run(&["watch", "--record", &nowhere, "--", "true"]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot create") && err.contains("out.jsonl"),
        "{err}"
    );

    let recording = fixture("pocl--cl-finish--no-wait");
    let out = common::run(&["export", &recording, "--chrome", &nowhere]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot write"), "{err}");
}

#[test]
fn run_with_an_unwritable_record_path_is_bad_input() {
    if !common::opencl_or_skip("run_with_an_unwritable_record_path_is_bad_input") {
        return;
    }
    let _device = common::device_lock();
    let dir = common::temp_dir();
    let nowhere = dir.path().join("no-such-folder").join("run.jsonl");
    let out = common::run(&[
        "run",
        "cl-finish",
        "--record",
        &nowhere.display().to_string(),
    ]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot create") && err.contains("run.jsonl"),
        "{err}"
    );
}

#[test]
fn export_without_an_output_names_the_outputs_and_exits_2() {
    let out = common::run(&["export", &fixture("pocl--cl-finish--no-wait")]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("one of --chrome OUT, --svg OUT, --png OUT, --html OUT"),
        "{err}"
    );
}

/// `--labs` and `--device` are offered where they do something: `doctor`
/// takes neither, `check` only `--labs` (a lesson's labs), `report` and `export` only `--labs`, `run` both, on
/// either side of the command.
#[test]
fn options_are_offered_only_where_they_apply() {
    let help = |cmd: &str| common::stdout(&common::run(&[cmd, "--help"]));
    for (cmd, labs, device) in [
        ("check", true, false),
        ("doctor", false, false),
        ("report", true, false),
        ("export", true, false),
        ("list", true, false),
        ("run", true, true),
    ] {
        let text = help(cmd);
        assert_eq!(text.contains("--labs"), labs, "{cmd}: {text}");
        assert_eq!(text.contains("--device"), device, "{cmd}: {text}");
    }
    let out = common::run(&["check", "--device", "0", "labs/cl-finish.toml"]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    // After the command or before it, a missing folder is the same mistake.
    for args in [
        vec!["list", "--labs", "/nowhere-gpulab"],
        vec!["--labs", "/nowhere-gpulab", "list"],
    ] {
        let out = common::run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(common::stderr(&out).contains("no such folder"), "{args:?}");
    }
}

/// #49: `gpulab check` checks a lesson against the labs there are, the
/// user's `--labs` among them, every mistake at its place; without a
/// terminal, `gpulab --lesson` prints the teacher's plan.
#[test]
fn lessons_are_checked_against_the_labs_and_planned_without_a_terminal() {
    let shipped = common::repo_file("lessons/when-memory-comes-back.toml");
    let out = common::run(&["check", shipped.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    assert!(common::stdout(&out).contains("lesson when-memory-comes-back, 5 step(s), 45 min"));

    // A lesson over a lab of the user's own: unknown until its folder is given.
    let dir = common::temp_dir();
    let labs = dir.path().join("labs");
    std::fs::create_dir(&labs).unwrap();
    let lab = std::fs::read_to_string(common::repo_file("labs/cl-finish.toml"))
        .unwrap()
        .replace("id = \"cl-finish\"", "id = \"my-finish\"");
    std::fs::write(labs.join("my-finish.toml"), lab).unwrap();
    let lesson = dir.path().join("mine.toml");
    std::fs::write(
        &lesson,
        "id = \"mine\"\ntitle = \"t\"\nintro = \"i\"\n\n[[steps]]\nlab = \"my-finish\"\n\
         variant = \"no-wait\"\nminutes = 5\nquestion = \"q?\"\nhint = \"h\"\n",
    )
    .unwrap();
    let path = lesson.to_str().unwrap();
    let out = common::run(&["check", path]);
    assert_eq!(out.status.code(), Some(2));
    let err = common::stderr(&out);
    assert!(
        err.contains(&format!("{path}:6:7: unknown lab `my-finish`")),
        "{err}"
    );
    let out = common::run(&["check", path, "--labs", labs.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));

    let out = common::run(&["--lesson", "when-memory-comes-back"]);
    assert_eq!(out.status.code(), Some(0));
    let plan = common::stdout(&out);
    assert!(
        plan.contains("1. cl-premature-release [release-then-finish], 8 min"),
        "{plan}"
    );
    assert_eq!(plan.matches("question: ").count(), 5, "{plan}");
    assert_eq!(plan.matches("hint (after the run): ").count(), 5, "{plan}");
    let out = common::run(&["--lesson", "when-memory-come-back"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(common::stderr(&out).contains("did you mean `when-memory-comes-back`"));
}

/// #49: a range predicted for a value must name one a claim of the lab reads
/// in the variants run, and be a range; each mistake says what would do,
/// before anything runs.
#[test]
fn a_predicted_range_names_a_value_the_claims_read() {
    for (said, want) in [
        (
            "host_ms(nope)=1..2",
            "the values they read: busy_ms(wait), host_ms(wait), span_ms(kernel)",
        ),
        ("host_ms(wait)=5..1", "the range 5..1 runs backwards"),
        ("host_ms(wait)=a..1", "write LO..HI"),
        ("host_ms(wait)=1..inf", "write LO..HI"),
    ] {
        let out = common::run(&["run", "cl-finish", "--predict", said]);
        assert_eq!(out.status.code(), Some(2), "{said}");
        let err = common::stderr(&out);
        assert!(err.contains(want), "{said}: {err}");
    }
}

/// #50: a lab file runs by its path, and `--lab PATH` prints the command
/// that does; an id whose file is in the working folder says how to run it;
/// the "run it:" line of a lab found through `--labs` names the folder.
#[test]
fn a_lab_file_is_named_by_its_path() {
    let dir = common::temp_dir();
    let text = std::fs::read_to_string(common::repo_file("labs/cl-finish.toml"))
        .unwrap()
        .replace("id = \"cl-finish\"", "id = \"my-finish\"");
    let file = dir.path().join("my-finish.toml");
    std::fs::write(&file, text).unwrap();
    let path = file.to_str().unwrap();
    let out = common::run(&["--lab", path]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    assert!(
        common::stdout(&out).contains(&format!("run it:  gpulab run {path}")),
        "{}",
        common::stdout(&out)
    );
    let folder = dir.path().to_str().unwrap();
    let out = common::run(&["--labs", folder, "--lab", "my-finish"]);
    assert!(
        common::stdout(&out).contains(&format!("run it:  gpulab run my-finish --labs {folder}")),
        "{}",
        common::stdout(&out)
    );
    let out = common::gpulab()
        .args(["run", "my-finish"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = common::stderr(&out);
    assert!(err.contains("`gpulab run ./my-finish.toml`"), "{err}");
    // A path to no file, or to a file with a mistake, says so with its place.
    let out = common::run(&["run", &format!("{folder}/none.toml")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains("cannot read"),
        "{}",
        common::stderr(&out)
    );
    std::fs::write(&file, "id = 3\n").unwrap();
    let out = common::run(&["run", path]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains(&format!("{path}:1:6")),
        "{}",
        common::stderr(&out)
    );
}

/// #50: a real call the catalog lacks is told from a typo, its nearest calls
/// of its own API only; `cudaFree` of pinned memory names `cudaFreeHost`.
#[test]
fn a_call_the_catalog_lacks_is_told_from_a_typo() {
    let dir = common::temp_dir();
    let lab = std::fs::read_to_string(common::repo_file("labs/cl-finish.toml")).unwrap();
    let file = dir.path().join("l.toml");
    for (line, said, not) in [
        (
            "clEnqueueSVMMemFill(q, 64 MiB)",
            "`clEnqueueSVMMemFill` is a real OpenCL call that gpulab's catalog does not have (yet)",
            "cuda",
        ),
        ("clFinsh(q)", "did you mean `clFinish`?", "catalog"),
    ] {
        std::fs::write(
            &file,
            lab.replacen("clFinish(q)  ", &format!("{line}  "), 1),
        )
        .unwrap();
        let out = common::run(&["check", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2));
        let err = common::stderr(&out);
        assert!(err.contains(said), "{err}");
        assert!(!err.contains(not), "{err}");
    }
    let cuda = std::fs::read_to_string(common::repo_file("labs/cuda-free-sync.toml")).unwrap();
    let pinned = cuda.replacen(
        "cudaFree(buf)",
        "h = cudaMallocHost(1 MiB)\ncudaFree(h)\ncudaFree(buf)",
        1,
    );
    std::fs::write(&file, pinned).unwrap();
    let out = common::run(&["check", file.to_str().unwrap()]);
    assert!(
        common::stderr(&out)
            .contains("memory from `cudaMallocHost` goes back with `cudaFreeHost(h)`"),
        "{}",
        common::stderr(&out)
    );
}

/// #51: `-` reads stdin wherever a command reads a file, as `report -` did:
/// `check -` (a lab or a lesson), `replay -` without a terminal, `export -`.
/// stdin is read once: a second `-` is a clear error.
#[test]
fn a_dash_reads_stdin_wherever_a_file_is_read() {
    let lab = std::fs::read(common::repo_file("labs/cl-finish.toml")).unwrap();
    let out = common::run_with_stdin(&["check", "-"], &lab);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    assert!(common::stdout(&out).contains("ok    <stdin> (cl-finish,"));
    let lesson = std::fs::read(common::repo_file("lessons/when-memory-comes-back.toml")).unwrap();
    let out = common::run_with_stdin(&["check", "-"], &lesson);
    assert!(common::stdout(&out).contains("(lesson when-memory-comes-back,"));
    let typo = String::from_utf8(lab.clone())
        .unwrap()
        .replacen("clFinish(q)  ", "clFinsh(q)  ", 1);
    let out = common::run_with_stdin(&["check", "-"], typo.as_bytes());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out).contains("<stdin>:"),
        "{}",
        common::stderr(&out)
    );
    let out = common::run_with_stdin(&["check", "-", "-"], &lab);
    assert_eq!(out.status.code(), Some(2));
    assert!(common::stderr(&out).contains("stdin was read already"));

    let rec = std::fs::read(common::repo_file(
        "assets/recordings/nvidia-h200/cuda-host-func--same-stream.jsonl",
    ))
    .unwrap();
    let out = common::run_with_stdin(&["replay", "-"], &rec);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    assert!(common::stdout(&out).contains("cuda-host-func"));
    let out = common::run_with_stdin(&["export", "-", "--svg", "-"], &rec);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    assert!(common::stdout(&out).starts_with("<svg") || common::stdout(&out).contains("<svg"));
    let out = common::run_with_stdin(&["export", "-", "--compare", "-", "--svg", "-"], &rec);
    assert_eq!(out.status.code(), Some(2));
    assert!(common::stderr(&out).contains("only one of the two recordings"));
}

/// #51: `--help` fits 100 columns without a terminal, as cargo's and
/// ripgrep's do, and each summary in the command list is one line.
#[test]
fn help_fits_in_a_hundred_columns() {
    let mut pages = vec![vec!["--help".to_string()]];
    for c in subcommands() {
        pages.push(vec![c, "--help".to_string()]);
    }
    pages.push(vec!["card".into(), "merge".into(), "--help".into()]);
    for page in pages {
        let args: Vec<&str> = page.iter().map(String::as_str).collect();
        let out = run_env(&args, &[("COLUMNS", None)]);
        assert!(out.status.success(), "{page:?}");
        let text = common::stdout(&out);
        for line in text.lines() {
            assert!(
                line.chars().count() <= 100,
                "{page:?}: {} columns: {line}",
                line.chars().count()
            );
        }
    }
    let top = common::stdout(&run_env(&["--help"], &[("COLUMNS", None)]));
    let listed = top
        .split_once("Commands:\n")
        .map(|(_, rest)| rest)
        .unwrap_or_default()
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| !l.starts_with("  ") || l.starts_with("   "))
        .count();
    assert_eq!(listed, 0, "a summary ran onto a second line: {top}");
}
