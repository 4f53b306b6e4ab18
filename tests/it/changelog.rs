//! `scripts/changelog-dates.sh`, which CI runs: every changelog entry
//! starts with the day it landed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn check(file: &Path) -> Output {
    Command::new("bash")
        .arg(root().join("scripts/changelog-dates.sh"))
        .arg(file)
        .output()
        .expect("bash runs the script")
}

/// A file of this test's own in the temporary directory.
fn sample(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "leasehold-changelog-{}-{name}.md",
        std::process::id()
    ));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn the_changelog_dates_every_entry() {
    let out = check(&root().join("CHANGELOG.md"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_entry_without_a_date_is_refused_with_its_line() {
    let path = sample(
        "undated",
        "# Changelog\n\n## How to read this\n\n- not an entry: no date needed\n\n\
         ## [Unreleased]\n\n### Changed\n\n- *(2026-11-29)* dated\n  and continued\n\
         - undated, say `old` → `new`\n  - a nested item is part of its entry\n\n\
         ### Fixed\n\n* *(2026-11-29)* a star bullet is refused too\n\
         - (2026-11-29) a date without its emphasis\n",
    );
    let out = check(&path);
    let stderr = String::from_utf8_lossy(&out.stderr);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for line in [":13: ", ":18: ", ":19: "] {
        assert!(stderr.contains(line), "line{line}not reported: {stderr}");
    }
    assert!(!stderr.contains(":5: "), "{stderr}");
    assert!(!stderr.contains(":11: "), "{stderr}");
    assert!(stderr.contains("3 undated entries"), "{stderr}");
}

#[test]
fn a_dated_changelog_passes() {
    let path = sample(
        "dated",
        "## [Unreleased]\n\n### Added\n\n- *(2026-11-29)* one\n- *(2026-11-21)* two\n",
    );
    let out = check(&path);
    std::fs::remove_file(&path).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
