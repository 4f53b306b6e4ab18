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
///
/// A file depends on the files whose modules its paths name, on the file
/// defining a type it writes an `impl` block for, and on the file whose
/// `impl` block defines a method it calls (`.m(`, `Type::m(`): a method of
/// a type spread over several files is a call between them, though no
/// path names it. A method name defined by more than one file, or that
/// std's types also have (`get`, `insert`, ...), tells nothing and is left
/// out.
fn graph_of(crate_dir: &str) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(crate_dir);
    let all = modules(&root);
    let code: BTreeMap<&Vec<String>, String> = all
        .iter()
        .map(|(m, path)| (m, code_of(&std::fs::read_to_string(path).unwrap())))
        .collect();
    let mut graph = BTreeMap::new();
    for (module, code) in &code {
        graph.insert((*module).clone(), dependencies(module, code, &all));
    }
    let code: BTreeMap<&Vec<String>, String> = code
        .into_iter()
        .map(|(m, c)| (m, without_literals(&c)))
        .collect();
    let items: BTreeMap<&Vec<String>, Items> =
        code.iter().map(|(m, c)| (*m, items_of(c))).collect();
    // Where each type and each method is defined, when only one file does.
    let mut types: BTreeMap<&str, BTreeSet<&Vec<String>>> = BTreeMap::new();
    // Each method name with the files defining it and the type of each.
    let mut methods: BTreeMap<&str, BTreeSet<(&Vec<String>, &str)>> = BTreeMap::new();
    for (m, it) in &items {
        for t in &it.types {
            types.entry(t).or_default().insert(m);
        }
        for (f, ty) in it.methods.iter() {
            if !STD_METHODS.contains(&f.as_str()) {
                methods.entry(f).or_default().insert((m, ty));
            }
        }
    }
    let only = |defs: Option<&BTreeSet<&Vec<String>>>| -> Option<Vec<String>> {
        let defs = defs?;
        (defs.len() == 1).then(|| (*defs.iter().next().unwrap()).clone())
    };
    for (module, it) in &items {
        let deps = graph.get_mut(*module).unwrap();
        for t in &it.impl_for {
            deps.extend(only(types.get(t.as_str())).filter(|d| d != *module));
        }
        let words = words_of(&code[module]);
        for call in calls_of(&code[module]) {
            // A call goes to the one file defining a method of that name,
            // for a type this file names (a receiver of a type it never
            // names is a std type or another crate's more often than not).
            if let Some(defs) = methods.get(call.as_str())
                && defs.len() == 1
                && let Some((to, ty)) = defs.iter().next()
                && to != module
                && words.contains(*ty)
            {
                deps.insert((*to).clone());
            }
        }
    }
    graph
}

/// Methods of std's types and traits that the crate's own types define too:
/// a call of one says nothing about which file it goes to.
const STD_METHODS: &[&str] = &[
    "new",
    "default",
    "get",
    "get_mut",
    "insert",
    "remove",
    "len",
    "is_empty",
    "iter",
    "iter_mut",
    "into_iter",
    "push",
    "pop",
    "extend",
    "clone",
    "from",
    "into",
    "as_str",
    "as_ref",
    "as_mut",
    "contains",
    "contains_key",
    "keys",
    "values",
    "map",
    "take",
    "replace",
    "next",
    "entry",
    "split",
    "join",
    "parse",
    "fmt",
    "eq",
    "cmp",
    "hash",
    "read",
    "write",
    "send",
    "lock",
    "first",
    "last",
    "to_owned",
    "to_string",
    "collect",
    "filter",
    "find",
    "count",
    "min",
    "max",
    "sort",
    "clear",
    "load",
    "store",
    "now",
    "elapsed",
    "is_some",
    "is_none",
    "name",
    "kind",
    "build",
    "call",
    "run",
    "drop",
    "deref",
    "poll",
    "next_back",
    "with_capacity",
    "as_slice",
    "as_bytes",
    "chunks",
    "key",
    "value",
    "values_mut",
    "retain",
    "drain",
    "append",
    "delete",
    "update",
    "flush",
    "close",
    "wait",
    "abort",
    "source",
    "description",
    "as_uuid",
    "partial_cmp",
    "is_finished",
    "and",
    "or",
    "not",
    "add",
    "sub",
    "set",
    "reset",
    "size",
    "start",
    "end",
    "query",
    "execute",
    "batch",
    "list",
    "create",
    "open",
    "release",
    "renew",
    "acquire",
];

/// What a file's code defines: types, and methods in inherent `impl`
/// blocks; and the types it writes inherent `impl` blocks for.
#[derive(Debug, Default)]
struct Items {
    types: BTreeSet<String>,
    /// Method names, each with the type of its `impl` block.
    methods: BTreeSet<(String, String)>,
    impl_for: BTreeSet<String>,
}

/// `code` with the contents of its string and character literals left out
/// (a message naming `Store::commit_outcome(` calls nothing).
fn without_literals(code: &str) -> String {
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '"' => {
                out.push('"');
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                out.push('"');
                i += 1;
            }
            '\'' if chars.get(i + 1) == Some(&'\\') => {
                // `'\n'`, `'\''`, `'\u{7f}'`: past the escaped character,
                // to the closing quote.
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                out.push_str("' '");
                i += 1;
            }
            '\'' if chars.get(i + 2) == Some(&'\'') => {
                out.push_str("' '");
                i += 3;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// The identifiers of a file's code.
fn words_of(code: &str) -> BTreeSet<&str> {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The identifier at the start of `s`.
fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// `s` without leading visibility and qualifiers (`pub(crate) async fn` ->
/// `fn`).
fn unqualified(mut s: &str) -> &str {
    loop {
        let before = s;
        for q in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "async ",
            "const ",
            "unsafe ",
        ] {
            s = s.strip_prefix(q).unwrap_or(s);
        }
        if s == before {
            return s;
        }
    }
}

fn items_of(code: &str) -> Items {
    let mut items = Items::default();
    let mut depth: i64 = 0;
    // The depth inside an inherent impl block's body, while in one.
    let mut inherent: Option<(i64, String)> = None;
    let mut header: Option<String> = None;
    for line in code.lines() {
        let trimmed = unqualified(line.trim_start());
        if let Some(h) = header.as_mut() {
            h.push(' ');
            h.push_str(trimmed);
        } else if trimmed.starts_with("impl") && depth == 0 {
            header = Some(trimmed.to_owned());
        }
        if let Some(h) = header.clone()
            && h.contains('{')
        {
            header = None;
            let head = &h[..h.find('{').unwrap()];
            if !head.contains(" for ") {
                // `impl<T: X> Type<T> where ... {`: the type follows the generics.
                let mut rest = head.strip_prefix("impl").unwrap_or(head);
                if rest.starts_with('<') {
                    let mut level = 0;
                    for (i, c) in rest.char_indices() {
                        match c {
                            '<' => level += 1,
                            '>' => level -= 1,
                            _ => {}
                        }
                        if level == 0 {
                            rest = &rest[i + 1..];
                            break;
                        }
                    }
                }
                let ty = ident(rest.trim_start());
                if !ty.is_empty() {
                    items.impl_for.insert(ty.to_owned());
                    inherent = Some((depth + 1, ty.to_owned()));
                }
            }
        }
        if depth == 0 {
            for kw in ["struct ", "enum ", "trait ", "type "] {
                if let Some(rest) = trimmed.strip_prefix(kw) {
                    items.types.insert(ident(rest).to_owned());
                }
            }
        }
        if let Some((at, ty)) = &inherent
            && *at == depth
            && let Some(rest) = trimmed.strip_prefix("fn ")
        {
            items.methods.insert((ident(rest).to_owned(), ty.clone()));
        }
        depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
        if inherent.as_ref().is_some_and(|(d, _)| depth < *d) {
            inherent = None;
        }
    }
    items
}

/// The names of the methods a file's code calls: `.m(`, `.m::<`, `X::m(`.
fn calls_of(code: &str) -> BTreeSet<String> {
    let mut calls = BTreeSet::new();
    for (sep, at) in code
        .match_indices('.')
        .map(|(i, _)| (1, i))
        .chain(code.match_indices("::").map(|(i, _)| (2, i)))
    {
        let rest = &code[at + sep..];
        let name = ident(rest);
        if name.is_empty() || name.starts_with(|c: char| c.is_uppercase() || c.is_numeric()) {
            continue;
        }
        let after = &rest[name.len()..];
        if after.starts_with('(') || after.starts_with("::<") {
            calls.insert(name.to_owned());
        }
    }
    calls
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

/// A method of a type defined in another file's `impl` block is a
/// dependency on that file, as a path would be; so is the `impl` block
/// itself on the type's file.
#[test]
fn method_calls_and_impl_blocks_are_dependencies() {
    let unit = items_of(
        "pub struct Unit {}\nimpl Unit {\n    pub fn commit(&self) {}\n}\n\
         impl fmt::Debug for Unit {\n    fn fmt(&self) {}\n}\n",
    );
    assert_eq!(unit.types, BTreeSet::from(["Unit".to_owned()]));
    assert_eq!(
        unit.methods,
        BTreeSet::from([("commit".into(), "Unit".into())])
    );
    let commit = items_of(
        "impl<'a> Unit<'a>\nwhere\n    X: Y,\n{\n    pub(crate) async fn finish_marks(&self) {\n        \
         if x { self.decide_now(); }\n    }\n}\nfn helper() {}\n",
    );
    assert_eq!(commit.impl_for, BTreeSet::from(["Unit".to_owned()]));
    assert_eq!(
        commit.methods,
        BTreeSet::from([("finish_marks".into(), "Unit".into())])
    );
    let calls = calls_of("unit.finish_marks().await; Decision::read_from(x); v.len(); a.b");
    assert_eq!(
        calls,
        BTreeSet::from(["finish_marks".into(), "len".into(), "read_from".into()])
    );
    // A message naming a call calls nothing.
    let message = without_literals("Err(a.x(\"ask Store::commit_outcome(p, t)\", '\\'', '\"'))");
    assert_eq!(calls_of(&message), BTreeSet::from(["x".to_owned()]));
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
