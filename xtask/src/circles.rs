//! Circles between the modules of one crate, for `arch-check`.
//!
//! A crate's layering inside is as important as between crates: when `service/run.rs` uses
//! `steps::agent` and `steps/agent.rs` uses `run::RunCtx`, neither can be read or changed
//! alone. This module builds each crate's module graph from its sources and reports every
//! circle.
//!
//! The graph: each `.rs` file under `src/` is a module (`lib.rs` the crate root, `a/mod.rs` and
//! `a.rs` both `a`). Every path in the file's non-test code that names another module of the
//! crate (`crate::…`, `super::…`, `self::…`, a `use` of them, and paths through those imports)
//! is an edge from the file's module to the deepest module the path names. A reference into
//! one's own ancestors or descendants is not an edge (a parent owns its children; a child
//! using its parent's types is how Rust modules share them). Every other edge is lifted to the
//! two siblings under the modules' lowest common ancestor (`service::run` →
//! `service::steps::agent` is `run → steps` under `service`), and a strongly connected set of
//! siblings is a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::syntax::FileFacts;

/// A module path inside a crate, without `crate` (the root is empty).
pub type ModPath = Vec<String>;

/// One circle: siblings under `parent` that reach each other.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Circle {
    /// The common parent (`service`), empty for the crate root.
    pub parent: ModPath,
    /// The sibling modules in the circle, sorted.
    pub members: Vec<String>,
    /// For each edge of the circle, one witness: `from_file:line uses path`.
    pub witnesses: Vec<String>,
}

impl Circle {
    /// `parent::{a, b}` (or `{a, b}` at the root).
    pub fn name(&self) -> String {
        let members = self.members.join(", ");
        if self.parent.is_empty() {
            format!("{{{members}}}")
        } else {
            format!("{}::{{{members}}}", self.parent.join("::"))
        }
    }
}

/// A source file that is not valid Rust.
#[derive(Debug, thiserror::Error)]
#[error("{path}:{line}: cannot parse: {message}")]
pub struct CirclesError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// The parser's message.
    pub message: String,
}

/// The module a file defines, from its path under `src/`.
pub fn module_of(src_dir: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src_dir).unwrap_or(file);
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.strip_suffix(".rs").unwrap_or(&last).to_owned();
        if !matches!(stem.as_str(), "lib" | "main" | "mod") {
            parts.push(stem);
        }
    }
    parts
}

/// Resolves a path written in `module` to an absolute module path inside the crate, if it
/// starts with `crate`, `self` or `super`.
fn absolute(module: &ModPath, segments: &[String]) -> Option<ModPath> {
    let first = segments.first()?;
    let mut base: ModPath = match first.as_str() {
        "crate" => Vec::new(),
        "self" => module.clone(),
        "super" => {
            let mut b = module.clone();
            b.pop()?;
            b
        }
        _ => return None,
    };
    let mut rest = segments[1..].iter().peekable();
    while rest.peek().is_some_and(|s| s.as_str() == "super") {
        base.pop()?;
        rest.next();
    }
    base.extend(rest.cloned());
    Some(base)
}

/// The deepest known module that `path` names (a prefix of it).
fn deepest_module<'a>(modules: &'a BTreeSet<ModPath>, path: &[String]) -> Option<&'a ModPath> {
    (0..=path.len())
        .rev()
        .find_map(|n| modules.get(&path[..n].to_vec()))
}

/// Finds every circle among the modules of a crate, given its sources (path, text) under
/// `src_dir`. Pure: the caller reads the files.
pub fn circles(src_dir: &Path, sources: &[(PathBuf, String)]) -> Result<Vec<Circle>, CirclesError> {
    let mut facts = Vec::new();
    for (file, src) in sources {
        let parsed = FileFacts::of(src).map_err(|e| CirclesError {
            path: file.clone(),
            line: e.span().start().line,
            message: e.to_string(),
        })?;
        facts.push((file.clone(), module_of(src_dir, file), parsed));
    }
    // Test-only modules declared out of line are not part of the graph.
    let mut test_only: BTreeSet<ModPath> = BTreeSet::new();
    for (_, module, f) in &facts {
        for name in f.iter().flat_map(|f| &f.test_modules) {
            let mut m = module.clone();
            m.push(name.clone());
            test_only.insert(m);
        }
    }
    let live = |m: &ModPath| !test_only.iter().any(|t| m.starts_with(t));
    let modules: BTreeSet<ModPath> = facts
        .iter()
        .filter(|(_, m, f)| f.is_some() && live(m))
        .map(|(_, m, _)| m.clone())
        .collect();

    let edges = lifted_edges(src_dir, &facts, &modules, &live);
    let mut out = Vec::new();
    for (parent, pairs) in edges {
        for component in strongly_connected(&pairs) {
            if component.len() < 2 {
                continue;
            }
            let witnesses = pairs
                .iter()
                .filter(|((a, b), _)| component.contains(a) && component.contains(b))
                .map(|(_, w)| w.clone())
                .collect();
            out.push(Circle {
                parent: parent.clone(),
                members: component.into_iter().collect(),
                witnesses,
            });
        }
    }
    out.sort();
    Ok(out)
}

/// Sibling edges per parent module: parent → (from, to) → one witness.
type Edges = BTreeMap<ModPath, BTreeMap<(String, String), String>>;

/// Every reference between modules that are not each other's ancestors, lifted to the two
/// siblings under their lowest common ancestor.
fn lifted_edges(
    src_dir: &Path,
    facts: &[(PathBuf, ModPath, Option<FileFacts>)],
    modules: &BTreeSet<ModPath>,
    live: &dyn Fn(&ModPath) -> bool,
) -> Edges {
    let mut edges = Edges::new();
    for (file, module, f) in facts {
        let Some(f) = f else { continue };
        if !live(module) {
            continue;
        }
        for path in f.resolved_paths() {
            let Some(abs) = absolute(module, &path.segments) else {
                continue;
            };
            let Some(target) = deepest_module(modules, &abs) else {
                continue;
            };
            if target.starts_with(module) || module.starts_with(target) {
                continue;
            }
            let common = module
                .iter()
                .zip(target.iter())
                .take_while(|(a, b)| a == b)
                .count();
            let parent = module[..common].to_vec();
            let from = module[common].clone();
            let to = target[common].clone();
            let witness = format!(
                "{}:{} uses {}",
                file.strip_prefix(src_dir).unwrap_or(file).display(),
                path.line,
                path.segments.join("::")
            );
            edges
                .entry(parent)
                .or_default()
                .entry((from, to))
                .or_insert(witness);
        }
    }

    edges
}

/// Strongly connected components of a small directed graph (each node's reach, intersected
/// with what reaches it: quadratic, and these graphs have a dozen nodes).
fn strongly_connected(edges: &BTreeMap<(String, String), String>) -> Vec<BTreeSet<String>> {
    let nodes: BTreeSet<&String> = edges.keys().flat_map(|(a, b)| [a, b]).collect();
    let reach = |start: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start.clone()];
        while let Some(n) = todo.pop() {
            for (a, b) in edges.keys() {
                if *a == n && seen.insert(b.clone()) {
                    todo.push(b.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for n in &nodes {
        if done.contains(*n) {
            continue;
        }
        let component: BTreeSet<String> = nodes
            .iter()
            .filter(|m| {
                **m == *n || (reaches[*n].contains(**m) && reaches[**m].contains(n.as_str()))
            })
            .map(|m| (*m).clone())
            .collect();
        done.extend(component.iter().cloned());
        out.push(component);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_of(files: &[(&str, &str)]) -> Vec<Circle> {
        let src = Path::new("/c/src");
        let sources: Vec<(PathBuf, String)> = files
            .iter()
            .map(|(rel, text)| (src.join(rel), (*text).to_owned()))
            .collect();
        circles(src, &sources).unwrap()
    }

    #[test]
    fn siblings_that_use_each_other_are_a_circle() {
        let found = crate_of(&[
            ("lib.rs", "mod service;\n"),
            (
                "service/mod.rs",
                "mod run;\nmod steps;\npub struct Error;\n",
            ),
            (
                "service/run.rs",
                "use super::steps::agent;\npub struct RunCtx;\nfn f() { agent::go(); }\n",
            ),
            ("service/steps/mod.rs", "pub mod agent;\n"),
            (
                "service/steps/agent.rs",
                "use crate::service::run::RunCtx;\nuse super::super::Error;\npub fn go() {}\n",
            ),
        ]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].name(), "service::{run, steps}");
        assert_eq!(found[0].witnesses.len(), 2);
    }

    #[test]
    fn parents_children_and_one_way_uses_are_not_circles() {
        let found = crate_of(&[
            ("lib.rs", "pub mod a;\npub mod b;\npub use a::A;\n"),
            ("a.rs", "pub struct A;\nfn f() { crate::b::g(); }\n"),
            (
                "b.rs",
                "pub fn g() {}\n#[cfg(test)]\nmod tests { use crate::a::A; }\n",
            ),
        ]);
        assert_eq!(found, vec![]);
    }
}
