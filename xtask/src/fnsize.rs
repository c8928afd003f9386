//! Function sizes and long parameter lists, for the tidy tests (#32): a function a newcomer
//! can change fits on a screen and takes few enough values to say what it needs.
//!
//! Counted on non-test code only (see [`crate::syntax::is_test_only`]): free functions, methods
//! and trait methods with a default body. A function's length runs from its signature (after
//! its attributes and doc comment) to its closing brace; a function nested inside another is
//! part of its parent's length and not counted again.

use syn::spanned::Spanned;
use syn::visit::Visit;

use crate::syntax::{is_test_only, item_attrs, line_of};

/// A function and its length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FnSize {
    /// `name` for a free function, `Type::name` for a method, `Trait::name` for a trait's.
    pub name: String,
    /// 1-based line of the signature.
    pub line: usize,
    /// Lines from the signature to the closing brace, both included.
    pub lines: usize,
}

/// What one file holds.
#[derive(Debug, Default, Clone)]
pub struct FileSizes {
    /// Every non-test function with its length.
    pub functions: Vec<FnSize>,
    /// Lines of `#[allow(clippy::too_many_arguments)]` (or `expect`) on non-test code.
    pub too_many_arguments: Vec<usize>,
}

/// Measures one file's functions.
pub fn measure(src: &str) -> Result<FileSizes, syn::Error> {
    let file = syn::parse_file(src)?;
    let mut out = FileSizes::default();
    if crate::syntax::is_test_only_file(&file) {
        return Ok(out);
    }
    let mut walker = Walker {
        out: &mut out,
        owner: None,
        depth: 0,
    };
    walker.visit_file(&file);
    Ok(out)
}

struct Walker<'a> {
    out: &'a mut FileSizes,
    /// The impl's self type or the trait's name, for method names.
    owner: Option<String>,
    /// Functions being walked: only the outermost one is counted.
    depth: usize,
}

impl Walker<'_> {
    fn allows(&mut self, attrs: &[syn::Attribute]) {
        for a in attrs {
            let is_lint = a.path().is_ident("allow") || a.path().is_ident("expect");
            if !is_lint {
                continue;
            }
            if let syn::Meta::List(list) = &a.meta
                && list.tokens.to_string().contains("too_many_arguments")
            {
                self.out.too_many_arguments.push(line_of(a.span()));
            }
        }
    }

    fn function(&mut self, name: &syn::Ident, sig: &syn::Signature, body: &syn::Block) {
        if self.depth == 0 {
            let start = line_of(sig.span());
            let end = body.brace_token.span.close().end().line;
            let name = match &self.owner {
                Some(owner) => format!("{owner}::{name}"),
                None => name.to_string(),
            };
            self.out.functions.push(FnSize {
                name,
                line: start,
                lines: end + 1 - start,
            });
        }
    }
}

impl<'ast> Visit<'ast> for Walker<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_test_only(item_attrs(item)) {
            return;
        }
        self.allows(item_attrs(item));
        syn::visit::visit_item(self, item);
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.function(&f.sig.ident, &f.sig, &f.block);
        self.depth += 1;
        syn::visit::visit_item_fn(self, f);
        self.depth -= 1;
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let ty = &i.self_ty;
        let owner = quote_type(ty);
        let previous = self.owner.replace(owner);
        syn::visit::visit_item_impl(self, i);
        self.owner = previous;
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        let previous = self.owner.replace(t.ident.to_string());
        syn::visit::visit_item_trait(self, t);
        self.owner = previous;
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_test_only(&f.attrs) {
            return;
        }
        self.allows(&f.attrs);
        self.function(&f.sig.ident, &f.sig, &f.block);
        self.depth += 1;
        syn::visit::visit_impl_item_fn(self, f);
        self.depth -= 1;
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        self.allows(&f.attrs);
        if let Some(body) = &f.default {
            self.function(&f.sig.ident, &f.sig, body);
        }
        self.depth += 1;
        syn::visit::visit_trait_item_fn(self, f);
        self.depth -= 1;
    }
}

/// The last path segment of a type (`Foo` for `crate::a::Foo<T>`), for method names.
fn quote_type(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        syn::Type::Reference(r) => quote_type(&r.elem),
        _ => "_".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_run_from_signature_to_closing_brace() {
        let src =
            "/// doc\n#[inline]\nfn a() {\n    1;\n}\nstruct S;\nimpl S {\n    fn m(&self) {}\n}\n";
        let sizes = measure(src).unwrap();
        assert_eq!(
            sizes.functions,
            vec![
                FnSize {
                    name: "a".into(),
                    line: 3,
                    lines: 3
                },
                FnSize {
                    name: "S::m".into(),
                    line: 8,
                    lines: 1
                },
            ]
        );
    }

    #[test]
    fn test_code_and_nested_functions_are_not_counted_twice() {
        let src = "fn outer() {\n    fn inner() {}\n}\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n#[test]\nfn u() {}\n";
        let sizes = measure(src).unwrap();
        assert_eq!(sizes.functions.len(), 1);
        assert_eq!(sizes.functions[0].lines, 3);
    }

    #[test]
    fn too_many_arguments_allows_are_found() {
        let src = "#[allow(clippy::too_many_arguments)]\nfn f(a: u8) {}\nstruct S;\nimpl S {\n    #[expect(clippy::too_many_arguments)]\n    fn g() {}\n}\n";
        assert_eq!(measure(src).unwrap().too_many_arguments, vec![1, 5]);
    }
}
