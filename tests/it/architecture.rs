//! The shape of the source tree, checked: no two source files depend on each
//! other (directly or through others), and the crate has one backoff.
//!
//! A file depends on another when it names an item of it: a `use` of a
//! `crate::`, `super::` or `self::` path, or such a path in code. Re-exports
//! (`pub use`, `pub(crate) use`) and `mod` declarations are the module tree's
//! wiring, not dependencies; `#[cfg(test)]` modules are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `src/`, keyed by module path
/// (`["lease", "guard"]`).
fn modules(root: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<Vec<String>, PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                let mut p = prefix.to_vec();
                p.push(name);
                walk(&path, &p, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let mut p = prefix.to_vec();
                if name != "mod" && !(prefix.is_empty() && (name == "lib" || name == "main")) {
                    p.push(name);
                }
                out.insert(p, path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&root.join("src"), &[], &mut out);
    out
}

/// The source without `#[cfg(test)]` items, comments and re-export lines.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    let mut skip_depth: Option<i64> = None;
    let mut depth: i64 = 0;
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if skip_depth.is_none() && trimmed.starts_with("#[cfg(test)]") {
            // Skip the next item: from its first line to its closing brace
            // (or a single-line item ending in `;`).
            skip_depth = Some(depth);
            continue;
        }
        let opens = line.matches('{').count() as i64;
        let closes = line.matches('}').count() as i64;
        if let Some(at) = skip_depth {
            depth += opens - closes;
            if depth <= at && (closes > 0 || trimmed.ends_with(';')) {
                skip_depth = None;
                depth = at;
            }
            continue;
        }
        depth += opens - closes;
        if trimmed.starts_with("//") {
            continue;
        }
        if trimmed.starts_with("pub use ")
            || trimmed.starts_with("pub(crate) use ")
            || trimmed.starts_with("pub(super) use ")
        {
            // A re-export, possibly spanning several lines.
            let mut l = line.to_owned();
            while !l.contains(';') {
                match lines.next() {
                    Some(next) => l = next.to_owned(),
                    None => break,
                }
            }
            continue;
        }
        let code = line.split("//").next().unwrap_or("");
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// The module paths a file's code names, resolved against the module tree.
fn dependencies(
    module: &[String],
    code: &str,
    all: &BTreeMap<Vec<String>, PathBuf>,
) -> BTreeSet<Vec<String>> {
    let mut found = BTreeSet::new();
    // Gather `a::b::{c, d::e}` groups too: expand one level of braces.
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0
            || !(bytes[i - 1].is_alphanumeric() || bytes[i - 1] == '_' || bytes[i - 1] == ':');
        let rest: String = bytes[i..bytes.len().min(i + 7)].iter().collect();
        let anchor = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|a| rest.starts_with(a));
        if !(starts_word && anchor.is_some()) {
            i += 1;
            continue;
        }
        // Read the path: identifiers and `::`, then maybe a `{...}` group.
        let mut j = i;
        let mut path = String::new();
        while j < bytes.len() && (bytes[j].is_alphanumeric() || bytes[j] == '_' || bytes[j] == ':')
        {
            path.push(bytes[j]);
            j += 1;
        }
        let mut paths = vec![path.trim_end_matches(':').to_owned()];
        if path.ends_with("::") && j < bytes.len() && bytes[j] == '{' {
            let mut k = j + 1;
            let mut level = 1;
            let mut group = String::new();
            while k < bytes.len() && level > 0 {
                match bytes[k] {
                    '{' => level += 1,
                    '}' => level -= 1,
                    _ => {}
                }
                if level > 0 {
                    group.push(bytes[k]);
                }
                k += 1;
            }
            for part in group.split(',') {
                let part = part.split_whitespace().next().unwrap_or("");
                let part = part.trim_matches(|c: char| c == '{' || c == '}');
                if !part.is_empty() {
                    paths.push(format!("{path}{part}"));
                }
            }
            j = k;
        }
        for p in paths {
            let mut segs: Vec<String> = p.split("::").map(str::to_owned).collect();
            let base: Vec<String> = match segs[0].as_str() {
                "crate" => vec![],
                "self" => module.to_vec(),
                "super" => {
                    let mut b = module.to_vec();
                    // In `a/b.rs` (module a::b), `super` is `a`; in
                    // `a/b/mod.rs` (module a::b) too.
                    b.pop();
                    while segs.len() > 1 && segs[1] == "super" {
                        b.pop();
                        segs.remove(1);
                    }
                    b
                }
                _ => unreachable!(),
            };
            let mut target = base;
            let mut best = target.clone();
            for s in &segs[1..] {
                target.push(s.clone());
                if all.contains_key(&target) {
                    best = target.clone();
                }
            }
            if best != module && all.contains_key(&best) {
                // Naming an item of an ancestor's mod.rs that only wires the
                // tree counts; naming an ancestor of this file itself counts
                // as well (it is a real use of that file's items).
                found.insert(best);
            }
        }
        i = j.max(i + 1);
    }
    found
}

/// The dependencies between the source files of the crate at `crate_dir`
/// (relative to the workspace root).
fn graph_of(crate_dir: &str) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(crate_dir);
    let all = modules(&root);
    let mut graph = BTreeMap::new();
    for (module, path) in &all {
        let text = std::fs::read_to_string(path).unwrap();
        let deps = dependencies(module, &code_of(&text), &all);
        graph.insert(module.clone(), deps);
    }
    graph
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "lib".to_owned()
    } else {
        m.join("::")
    }
}

/// Tarjan's strongly connected components; returns those with more than one
/// file.
fn cycles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a [String], usize>,
        low: BTreeMap<&'a [String], usize>,
        stack: Vec<&'a [String]>,
        on_stack: BTreeSet<&'a [String]>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a [String]) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in &s.graph[v] {
            let w: &'a [String] = w.as_slice();
            if !s.graph.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low[v];
                s.low.insert(v, lv.min(lw));
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low[v];
                s.low.insert(v, lv.min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(name(w));
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_slice()) {
            visit(&mut s, v.as_slice());
        }
    }
    s.out
}

fn graph() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    graph_of(".")
}

#[test]
fn no_two_source_files_depend_on_each_other() {
    assert_acyclic(&graph());
}

/// The derive macro's files too.
#[test]
fn no_two_source_files_of_the_derive_depend_on_each_other() {
    let graph = graph_of("derive");
    assert!(graph.len() > 5, "the derive's files were found: {graph:?}");
    assert_acyclic(&graph);
}

fn assert_acyclic(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) {
    let found = cycles(graph);
    let described: Vec<String> = found
        .iter()
        .map(|c| {
            let edges: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    let from: Vec<String> = if a == "lib" {
                        vec![]
                    } else {
                        a.split("::").map(str::to_owned).collect()
                    };
                    graph[&from]
                        .iter()
                        .filter(|to| c.contains(&name(to)))
                        .map(|to| format!("{a} -> {}", name(to)))
                        .collect::<Vec<_>>()
                })
                .collect();
            format!("{{{}}}: {}", c.join(", "), edges.join("; "))
        })
        .collect();
    assert!(
        found.is_empty(),
        "import cycles between source files:\n{}",
        described.join("\n")
    );
}

/// The dependencies between the folders of the crate at `crate_dir` (the
/// files at the crate root, such as `error.rs`, are the shared ground every
/// folder stands on, and are left out).
fn folder_graph(crate_dir: &str) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(crate_dir)
        .join("src");
    let folder = |m: &[String]| {
        m.first()
            .filter(|t| src.join(t.as_str()).is_dir())
            .map(|t| vec![t.clone()])
    };
    let mut folders: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (from, deps) in graph_of(crate_dir) {
        let Some(from) = folder(&from) else {
            continue;
        };
        let to: Vec<Vec<String>> = deps
            .iter()
            .filter_map(|d| folder(d))
            .filter(|d| *d != from)
            .collect();
        folders.entry(from).or_default().extend(to);
    }
    folders
}

/// No two folders depend on each other (the store sits above the indexes,
/// the indexes above the locks, the locks above the tables and the tables
/// above the leases), in the crate and in the derive macro.
#[test]
fn no_two_folders_depend_on_each_other() {
    let graph = folder_graph(".");
    assert!(
        graph.len() > 8 && graph[&vec!["store".to_owned()]].contains(&vec!["index".to_owned()]),
        "the folders were found: {graph:?}"
    );
    let circles = cycles(&graph);
    assert!(
        circles.is_empty(),
        "folders in an import circle: {circles:?}"
    );
    let derive = folder_graph("derive");
    assert!(cycles(&derive).is_empty(), "{:?}", cycles(&derive));
}

#[test]
fn the_cycle_check_sees_a_cycle() {
    let mut g = BTreeMap::new();
    let a = vec!["a".to_owned()];
    let b = vec!["b".to_owned()];
    let c = vec!["c".to_owned()];
    g.insert(a.clone(), BTreeSet::from([b.clone()]));
    g.insert(b.clone(), BTreeSet::from([c.clone()]));
    g.insert(c.clone(), BTreeSet::from([a.clone()]));
    assert_eq!(cycles(&g), vec![vec!["a", "b", "c"]]);
    g.insert(c, BTreeSet::new());
    assert!(cycles(&g).is_empty());
}

#[test]
fn paths_resolve_to_the_files_that_define_them() {
    let mut all = BTreeMap::new();
    for m in [
        &["lease"][..],
        &["lease", "guard"],
        &["lease", "local"],
        &["key"],
    ] {
        all.insert(
            m.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            PathBuf::new(),
        );
    }
    let guard: Vec<String> = vec!["lease".into(), "guard".into()];
    let code = code_of(
        "use super::local::{LocalLeases, Slot};\nuse crate::key::ETag;\npub use super::Thing;\n\
         fn f() { crate::lease::X; }\n#[cfg(test)]\nmod tests {\n    use crate::other::Y;\n}\n",
    );
    let deps = dependencies(&guard, &code, &all);
    let names: Vec<String> = deps.iter().map(|d| name(d)).collect();
    assert_eq!(names, vec!["key", "lease", "lease::local"]);
}

/// The crate's one backoff lives in `src/retry.rs`: nothing else builds
/// pauses from `backon` or a hand-rolled doubling.
#[test]
fn one_backoff_implementation() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut offenders = Vec::new();
    for path in modules(root).values() {
        if path.ends_with("src/retry.rs") {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(path).unwrap());
        for needle in [
            "backon::",
            "ExponentialBuilder",
            "struct Backoff",
            "fn splitmix",
        ] {
            if code.contains(needle) {
                offenders.push(format!("{}: {needle}", path.display()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "backoff outside src/retry.rs: {offenders:?}"
    );
}

/// The README's module map (also the crate docs) names every source file,
/// and only files that exist.
#[test]
fn the_module_map_matches_the_tree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let map = readme
        .split("## Module map")
        .nth(1)
        .expect("a `## Module map` section")
        .split("\n## ")
        .next()
        .unwrap();
    let listed: BTreeSet<String> = map
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_owned)
        .collect();
    fn walk(dir: &Path, root: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap();
                out.insert(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut files = BTreeSet::new();
    for dir in ["src", "cli/src", "rules/src", "derive/src"] {
        walk(&root.join(dir), root, &mut files);
    }
    let missing: Vec<_> = files.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&files).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "module map out of date: not listed {missing:?}; listed but absent {stale:?}"
    );
}
