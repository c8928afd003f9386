//! Shared syntax walking for the source checks, on `syn` (the parser rustc's proc macros use).
//!
//! What this module knows, and nothing else:
//! - which items are test-only (`#[cfg(test)]`, `#[test]`, `#![cfg(test)]` files) so that every
//!   check skips them, like dev-dependencies may reach for anything;
//! - how `use` declarations name paths, renames included (`use std::time::SystemTime as T`
//!   makes `T::now()` resolve to `std::time::SystemTime::now`), so a path is matched by what
//!   it resolves to, not by how it is spelled;
//! - the line of a span (proc-macro2's `span-locations`).
//!
//! Macro bodies are token streams to `syn`: their paths are recovered as runs of
//! `ident :: ident` tokens, resolved through the same imports.

use std::collections::HashMap;

use proc_macro2::{TokenStream, TokenTree};
use syn::spanned::Spanned;

/// A path as a list of segment names, plus the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathAt {
    /// Segment names (`["std", "fs", "read"]`); a leading `::` is dropped.
    pub segments: Vec<String>,
    /// 1-based line of the path's first token.
    pub line: usize,
}

/// True when an attribute list marks the item as test-only code.
pub fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        if a.path().is_ident("test") {
            return true;
        }
        if !a.path().is_ident("cfg") {
            return false;
        }
        match &a.meta {
            syn::Meta::List(list) => list.tokens.to_string().trim() == "test",
            _ => false,
        }
    })
}

/// True when the file opens with `#![cfg(test)]`.
pub fn is_test_only_file(file: &syn::File) -> bool {
    is_test_only(&file.attrs)
}

/// The attributes of an item, whatever its kind.
pub fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item;
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// 1-based line where a span starts.
pub fn line_of(span: proc_macro2::Span) -> usize {
    span.start().line
}

/// One `use` leaf: the full path it imports and the name it binds (none for a glob).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UseLeaf {
    /// The imported path, `self` leaves folded into their parent (`io::{self}` → `io`).
    pub path: PathAt,
    /// The name the leaf binds in scope (`T` for `SystemTime as T`), or `None` for `*`.
    pub binds: Option<String>,
}

/// Expands a `use` tree into its leaves.
pub fn use_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<UseLeaf>) {
    use syn::UseTree;
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(n) => {
            let name = n.ident.to_string();
            let (segments, binds) = if name == "self" {
                (prefix.clone(), prefix.last().cloned())
            } else {
                let mut s = prefix.clone();
                s.push(name.clone());
                (s, Some(name))
            };
            out.push(UseLeaf {
                path: PathAt {
                    segments,
                    line: line_of(n.ident.span()),
                },
                binds,
            });
        }
        UseTree::Rename(r) => {
            let name = r.ident.to_string();
            let mut segments = prefix.clone();
            if name != "self" {
                segments.push(name);
            }
            out.push(UseLeaf {
                path: PathAt {
                    segments,
                    line: line_of(r.ident.span()),
                },
                binds: Some(r.rename.to_string()),
            });
        }
        UseTree::Glob(g) => out.push(UseLeaf {
            path: PathAt {
                segments: prefix.clone(),
                line: line_of(g.star_token.span()),
            },
            binds: None,
        }),
        UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix, out);
            }
        }
    }
}

/// Everything the checks need from one file's non-test code.
#[derive(Debug, Default, Clone)]
pub struct FileFacts {
    /// Every `use` leaf.
    pub uses: Vec<UseLeaf>,
    /// Every path in code (expressions, types, patterns, macro bodies), as written.
    pub paths: Vec<PathAt>,
    /// Names of out-of-line modules declared `#[cfg(test)] mod name;`.
    pub test_modules: Vec<String>,
    /// Names of out-of-line modules declared without `#[cfg(test)]`.
    pub child_modules: Vec<String>,
}

impl FileFacts {
    /// Reads the facts of a file's source; `None` when the whole file is test-only.
    pub fn of(src: &str) -> Result<Option<Self>, syn::Error> {
        let file = syn::parse_file(src)?;
        if is_test_only_file(&file) {
            return Ok(None);
        }
        let mut facts = FileFacts::default();
        let mut walker = Walker { facts: &mut facts };
        syn::visit::Visit::visit_file(&mut walker, &file);
        Ok(Some(facts))
    }

    /// The name each `use` binds, mapped to the full path it stands for.
    pub fn aliases(&self) -> HashMap<&str, &[String]> {
        self.uses
            .iter()
            .filter_map(|u| Some((u.binds.as_deref()?, u.path.segments.as_slice())))
            .collect()
    }

    /// Every path of the file resolved through its imports: the `use` leaves themselves, then
    /// each code path whose first segment is an imported name, spelled out in full.
    pub fn resolved_paths(&self) -> Vec<PathAt> {
        let aliases = self.aliases();
        let mut out: Vec<PathAt> = self.uses.iter().map(|u| u.path.clone()).collect();
        for p in &self.paths {
            let resolved = match p.segments.first().and_then(|s| aliases.get(s.as_str())) {
                Some(full) => full
                    .iter()
                    .chain(p.segments.iter().skip(1))
                    .cloned()
                    .collect(),
                None => p.segments.clone(),
            };
            out.push(PathAt {
                segments: resolved,
                line: p.line,
            });
        }
        out
    }
}

struct Walker<'a> {
    facts: &'a mut FileFacts,
}

impl Walker<'_> {
    fn macro_tokens(&mut self, tokens: &TokenStream) {
        let mut run: Vec<String> = Vec::new();
        let mut line = 0;
        let mut colons = 0;
        let flush = |run: &mut Vec<String>, line: usize, facts: &mut FileFacts| {
            if !run.is_empty() {
                facts.paths.push(PathAt {
                    segments: std::mem::take(run),
                    line,
                });
            }
        };
        for tt in tokens.clone() {
            match tt {
                TokenTree::Ident(id) => {
                    if run.is_empty() || colons == 2 {
                        if run.is_empty() {
                            line = line_of(id.span());
                        }
                        run.push(id.to_string());
                    } else {
                        flush(&mut run, line, self.facts);
                        line = line_of(id.span());
                        run.push(id.to_string());
                    }
                    colons = 0;
                }
                TokenTree::Punct(p) if p.as_char() == ':' => {
                    colons += 1;
                    if colons > 2 {
                        flush(&mut run, line, self.facts);
                        colons = 0;
                    }
                }
                TokenTree::Group(g) => {
                    flush(&mut run, line, self.facts);
                    colons = 0;
                    self.macro_tokens(&g.stream());
                }
                _ => {
                    flush(&mut run, line, self.facts);
                    colons = 0;
                }
            }
        }
        flush(&mut run, line, self.facts);
    }
}

impl<'ast> syn::visit::Visit<'ast> for Walker<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_test_only(item_attrs(item)) {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
            {
                self.facts.test_modules.push(m.ident.to_string());
            }
            return;
        }
        if let syn::Item::Mod(m) = item
            && m.content.is_none()
        {
            self.facts.child_modules.push(m.ident.to_string());
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        use_leaves(&u.tree, &mut Vec::new(), &mut self.facts.uses);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.facts.paths.push(PathAt {
            segments: path.segments.iter().map(|s| s.ident.to_string()).collect(),
            line: line_of(path.span()),
        });
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.macro_tokens(&mac.tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(src: &str) -> Vec<(usize, String)> {
        FileFacts::of(src)
            .unwrap()
            .unwrap()
            .resolved_paths()
            .into_iter()
            .map(|p| (p.line, p.segments.join("::")))
            .collect()
    }

    #[test]
    fn renamed_imports_resolve_to_what_they_name() {
        let src = "use std::time::SystemTime as T;\nfn f() { T::now(); }\n";
        let got = resolved(src);
        assert!(
            got.contains(&(2, "std::time::SystemTime::now".to_owned())),
            "{got:?}"
        );
    }

    #[test]
    fn self_leaves_bind_their_parent() {
        let src = "use std::io::{self as inout};\nfn f() { inout::stdout(); }\n";
        assert!(resolved(src).contains(&(2, "std::io::stdout".to_owned())));
    }

    #[test]
    fn macro_bodies_yield_their_paths() {
        let src = "fn f() { println!(\"{}\", std::fs::read(\"x\").is_ok()); }\n";
        assert!(resolved(src).contains(&(1, "std::fs::read".to_owned())));
    }

    #[test]
    fn test_items_and_modules_are_skipped_and_named() {
        let src = "#[cfg(test)]\nmod t;\nmod child;\n#[test]\nfn t() { std::fs::read(\"x\"); }\n";
        let facts = FileFacts::of(src).unwrap().unwrap();
        assert_eq!(facts.test_modules, vec!["t".to_owned()]);
        assert_eq!(facts.child_modules, vec!["child".to_owned()]);
        assert!(facts.paths.iter().all(|p| p.segments[0] != "std"));
        assert!(
            FileFacts::of("#![cfg(test)]\nuse std::fs;\n")
                .unwrap()
                .is_none()
        );
    }
}
