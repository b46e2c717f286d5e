//! A headless Chromium for the tests of `export --html`: the page as the browser
//! built it, and what it logged on its console.

/// A headless Chromium, or None: then the browser tests skip with a notice,
/// unless `GPULAB_REQUIRE_OPENCL=1` (CI, which installs it), where they fail.
pub fn find(test: &str) -> Option<std::path::PathBuf> {
    let found = ["chromium-headless-shell", "chromium", "chromium-browser"]
        .iter()
        .find_map(|name| {
            std::env::split_paths(&std::env::var_os("PATH")?)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        });
    if found.is_none() {
        if std::env::var("GPULAB_REQUIRE_OPENCL").as_deref() == Ok("1") {
            panic!(
                "{test}: no headless Chromium, and CI (GPULAB_REQUIRE_OPENCL=1) requires one (apt-get install chromium-headless-shell)"
            );
        }
        super::say_skipped(format_args!(
            "skipping {test}: no headless Chromium (apt-get install chromium-headless-shell)"
        ));
    }
    found
}

/// The page as the browser built it (`--dump-dom`), and every console message
/// it logged while loading (errors and uncaught exceptions among them).
pub fn open(browser: &std::path::Path, page: &std::path::Path) -> (String, Vec<String>) {
    let profile = super::temp_dir();
    let out = std::process::Command::new(browser)
        // CI's dated pass runs the tests under libfaketime; gpulab made the page
        // under it already, and Chromium under it is minutes slower.
        .env_remove("LD_PRELOAD")
        .args([
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            &format!("--user-data-dir={}", profile.path().display()),
            "--dump-dom",
        ])
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("the browser starts");
    assert!(out.status.success(), "{}", super::stderr(&out));
    let console = super::stderr(&out)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    (super::stdout(&out), console)
}

/// What a browser's serialiser writes for text.
pub fn as_dom_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
