//! Builds the web UI (`ui/`, into `ui/dist`, which `routes/ui.rs` embeds) when its output is
//! missing or older than its sources, so that any `cargo build` gives a binary serving the UI:
//! `npm ci` when `ui/node_modules` is missing or older than `ui/package-lock.json`, then
//! `npm run build` (type check and Vite), as `scripts/ui.sh build` does. A current `ui/dist` is
//! left alone (no npm), and a missing npm or a failed build is a `cargo:warning`, loud in the
//! build's output: the binary is still built, and answers `/` with a page saying how to build
//! the UI.
//!
//! Cargo runs this again when a source of the UI changes, or `ui/dist` does (built by hand);
//! the crate is recompiled when it does, since the embedding macro alone does not notice new
//! files.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// What the UI is built from, under `ui/`: a change to any of them makes `ui/dist` stale.
const SOURCES: &[&str] =
    &["src", "index.html", "package.json", "package-lock.json", "vite.config.ts", "tsconfig.json"];

fn main() {
    let ui = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ui");
    for source in SOURCES {
        println!("cargo:rerun-if-changed=../../ui/{source}");
    }
    let dist = ui.join("dist");
    let built = dist.join("index.html");
    let newest = newest_source(&ui);
    if let Some(stale) = staleness(newest.as_ref(), &built) {
        let made = build(&ui);
        if let (Ok(()), Some((_, at))) = (&made, &newest) {
            date_back(&dist, *at);
        }
        if let Err(why) = made {
            let served = match built.exists() {
                true => "this needle embeds the UI as it was last built, older than its sources",
                false => {
                    "this needle has no web UI: it answers / with a page saying how to build it"
                }
            };
            warn(&format!("the web UI was not built ({stale}): {why}"));
            warn(&format!(
                "{served}. Install Node.js with npm and run `make ui` (or `cd ui && npm ci && \
                 npm run build`), then build again"
            ));
        }
    }
    if dist.exists() {
        println!("cargo:rerun-if-changed=../../ui/dist");
    } else {
        // Watching a missing path would rerun every build; `ui` changes when `dist` appears.
        println!("cargo:rerun-if-changed=../../ui");
    }
}

/// The UI's most recently modified source (as `ui/...`), with its time.
fn newest_source(ui: &Path) -> Option<(PathBuf, SystemTime)> {
    let (path, at) = SOURCES
        .iter()
        .filter_map(|source| newest_in(&ui.join(source)))
        .max_by_key(|(_, at)| *at)?;
    let shown = path.strip_prefix(ui).map_or(path.clone(), |p| Path::new("ui").join(p));
    Some((shown, at))
}

/// Why `ui/dist` must be built (`None`: it is current).
fn staleness(newest: Option<&(PathBuf, SystemTime)>, built: &Path) -> Option<String> {
    let Some(built_at) = modified(built) else {
        return Some("ui/dist is missing".into());
    };
    let (path, at) = newest?;
    (*at > built_at).then(|| format!("{} changed since ui/dist was built", path.display()))
}

/// Dates what the build wrote back to the time of the newest source it was built from (so it
/// is current, and stale again once a source changes): cargo compares `ui/dist` with the time
/// this script started, and took the files written while it ran for a change made since,
/// recompiling the crate once more for nothing.
fn date_back(path: &Path, to: SystemTime) {
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.filter_map(Result::ok) {
            date_back(&entry.path(), to);
        }
    }
    if let Ok(file) = std::fs::File::open(path) {
        let _ = file.set_modified(to);
    }
}

/// The most recently modified file at or under `path`, with its time.
fn newest_in(path: &Path) -> Option<(PathBuf, SystemTime)> {
    if !path.is_dir() {
        return modified(path).map(|at| (path.to_owned(), at));
    }
    std::fs::read_dir(path)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| newest_in(&entry.path()))
        .max_by_key(|(_, at)| *at)
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// `npm ci` if the installed packages are missing or older than the lock file, then
/// `npm run build`.
fn build(ui: &Path) -> Result<(), String> {
    let npm = if cfg!(windows) { "npm.cmd" } else { "npm" };
    match Command::new(npm).arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => return Err(format!("{npm} (Node.js) was not found on the PATH")),
    }
    let installed = modified(&ui.join("node_modules/.package-lock.json"));
    if installed.is_none() || modified(&ui.join("package-lock.json")) > installed {
        run(Command::new(npm).args(["ci", "--no-audit", "--no-fund"]).current_dir(ui))?;
    }
    run(Command::new(npm).args(["run", "build"]).current_dir(ui))
}

/// Runs `command`; its output, when it fails, goes into the error (and the build's log).
fn run(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    let out = command.output().map_err(|e| format!("{shown} did not start: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{shown} failed:\n{stdout}\n{stderr}");
    let last = stderr.lines().chain(stdout.lines()).rfind(|l| !l.trim().is_empty());
    Err(format!("{shown} failed ({}): {}", out.status, last.unwrap_or("no output").trim()))
}

/// A `cargo:warning`, one line each (cargo shows each in the build's output).
fn warn(message: &str) {
    println!("cargo:warning={message}");
}
