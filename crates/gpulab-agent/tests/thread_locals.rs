//! The agent's hooks run on the program's threads at any moment, even after
//! glibc's `exit()` has run a thread's thread-local destructors (a static
//! destructor that frees GPU memory, as cuFFT's and CuPy's do): there
//! `LocalKey::with` on a thread-local that has a destructor panics, and a
//! panic in a hook aborts the program. So no thread-local with a destructor is
//! read with `with` outside tests: `try_with`, and a way on without it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

use std::path::Path;

/// The names of a file's thread-locals whose type has a destructor: a
/// `RefCell`, `Vec`, `HashMap` or `Option` of one, as opposed to a `Cell` of
/// plain data, which registers none.
fn destructible(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    for block in source.split("thread_local!").skip(1) {
        let Some(body) = block.split_once('{').map(|(_, b)| b) else {
            continue;
        };
        // Up to the block's end: the first line that closes it.
        let body = body.split("\n}").next().unwrap_or(body);
        for decl in body.split("static ").skip(1) {
            let Some((name, rest)) = decl.split_once(':') else {
                continue;
            };
            let ty = rest.split('=').next().unwrap_or(rest);
            let plain = ty.trim_start().starts_with("Cell<")
                || ty.trim_start().starts_with("std::cell::Cell<");
            if !plain {
                names.push(name.trim().to_string());
            }
        }
    }
    names
}

/// A file's code outside its tests module.
fn outside_tests(source: &str) -> &str {
    source
        .find("#[cfg(test)]\nmod tests")
        .map_or(source, |i| &source[..i])
}

#[test]
fn no_thread_local_with_a_destructor_is_read_with_with() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files: Vec<_> = walk(&src);
    files.sort();
    let mut seen = 0;
    let mut wrong = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        let code = outside_tests(&source);
        for name in destructible(&source) {
            seen += 1;
            let call = format!("{name}.with(");
            for (i, line) in code.lines().enumerate() {
                if line.contains(&call) {
                    wrong.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
                }
            }
        }
    }
    // The rule has something to hold: the agent keeps such thread-locals.
    assert!(seen >= 5, "found only {seen} destructible thread-locals");
    assert!(
        wrong.is_empty(),
        "thread-locals with a destructor read with `with` (use `try_with`):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_rule_sees_a_with_on_a_destructible_thread_local() {
    let source = "thread_local! {\n    static LIST: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };\n    static N: Cell<u32> = const { Cell::new(0) };\n}\nfn f() { LIST.with(|l| l.borrow().len()); N.with(|n| n.get()); }\n";
    assert_eq!(destructible(source), ["LIST"]);
    assert!(outside_tests(source).contains("LIST.with("));
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}
