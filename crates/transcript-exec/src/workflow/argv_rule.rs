//! The one rule of every list-form command (#39, #48): **a value never becomes code, decided by
//! structure and by the value's declared shape**. It is applied, at load, to every place a
//! command is written (the table of sinks is in the crate docs, [Template sinks](crate#template-sinks)):
//!
//! 1. **A template is a whole argv element**, or the value of a literal `--name=` prefix
//!    (`["tool", "--out={{inputs.o}}"]`). A `{{…}}` spliced into a larger string builds
//!    source text for whatever program reads that element (`sh -c`, `python3 -c`, `sed`,
//!    `sqlite3`, `env -S`, … and any program nobody listed): that is the mistake, whichever
//!    program it is, so it is refused without asking which program runs.
//! 2. **Data never chooses the program**: element 0 is never templated (`{{workflow.dir}}`,
//!    the directory of the workflow file, is the author's, not data).
//! 3. **Only typed values in argv** (#48): whether a position is code depends on the program
//!    (`split --filter=`, `git ls-remote --upload-pack=`, `vim -c`, `make X:=$(shell …)`),
//!    and no rule over argv can know every program, so free text never stands there. A data
//!    reference must have a shape: a typed input (`type: integer | number | boolean | enum |
//!    path | url`, or `string` with a `pattern`), a shape filter (`| int`, `| number`,
//!    `| bool`, `| enum(a, b)`, `| match('…')`, `| path`, `| url`), `| file` (the path of a
//!    private file holding the value), `loop.index`, `steps.X.exit_code`, or `loop.item` of a
//!    `for_each` over a literal list. Free text reaches a program through `stdin:`,
//!    `{{ x | file }}` or `env:`.
//! 4. `{{ x | raw }}` is the author vouching for a value as code: it passes every rule. A
//!    `pattern` that admits anything (`.*`) is the same vouching.
//!
//! The list of interpreters ([`super::inline_script`]) is the second line: a *whole* value
//! in the code position of a program we know (`["python3", "-c", "{{x}}"]`) is refused even
//! when typed. Structure decides first; the list only catches what structure lets through.
//!
//! At run time, [`check_options`] refuses a whole-element value that starts with `-` or `+`
//! (it would be read as an option, or as vim's `+cmd`), unless the author marks it
//! `{{ x | option }}`.

use std::collections::HashSet;

use crate::shape::Shape;
use crate::template::{Reference, Segment, StepField, Template};

/// Whether `reference` is data (anything but the workflow file's own directory).
fn is_data(reference: &Reference) -> bool {
    !matches!(reference, Reference::WorkflowDir)
}

/// What the rule needs to know of the references of one place: which are typed by their
/// declaration (an input's `type:`, a `for_each` over a literal list).
pub(crate) struct Typing<'a> {
    /// The inputs declared with a type other than free text (`None`: every input, in tests).
    pub(crate) typed_inputs: Option<&'a HashSet<&'a str>>,
    /// Whether `loop.item` here is an item of a literal list written in the workflow.
    pub(crate) literal_item: bool,
    /// The inputs whose values are closed: `enum` (the author's values), `integer`,
    /// `number`, `boolean` (`None`: none, in tests).
    pub(crate) closed_inputs: Option<&'a HashSet<&'a str>>,
}

impl Typing<'_> {
    /// Every reference typed (tests and literal lists).
    #[cfg(test)]
    pub(crate) const ALL: Typing<'static> = Typing {
        typed_inputs: None,
        literal_item: true,
        closed_inputs: None,
    };

    /// Whether the value of `segment` (a reference) is closed: it can only be one of the
    /// author's values, a number or a boolean, so it is never code in any position.
    pub(crate) fn closed(&self, segment: &Segment) -> bool {
        let Segment::Ref {
            reference, shape, ..
        } = segment
        else {
            return true;
        };
        matches!(
            shape,
            Some(Shape::Enum(_) | Shape::Integer | Shape::Number | Shape::Boolean)
        ) || match reference {
            Reference::LoopIndex => true,
            Reference::Step { field, .. } => *field == StepField::ExitCode,
            Reference::Input(name) => self
                .closed_inputs
                .is_some_and(|closed| closed.contains(name.as_str())),
            Reference::LoopItem(_) => self.literal_item,
            Reference::WorkflowDir => false,
        }
    }

    /// Whether the value of `segment` (a reference) has a shape.
    pub(crate) fn typed(&self, segment: &Segment) -> bool {
        let Segment::Ref {
            reference,
            raw,
            shape,
            file,
            ..
        } = segment
        else {
            return true;
        };
        *raw || *file
            || shape.is_some()
            || match reference {
                Reference::WorkflowDir | Reference::LoopIndex => true,
                Reference::Step { field, .. } => *field == StepField::ExitCode,
                Reference::Input(name) => self
                    .typed_inputs
                    .is_none_or(|typed| typed.contains(name.as_str())),
                Reference::LoopItem(_) => self.literal_item,
            }
    }
}

/// Whether `prefix` is a literal `--name=` (a long option taking the value).
fn long_option_prefix(prefix: &str) -> bool {
    prefix
        .strip_prefix("--")
        .and_then(|p| p.strip_suffix('='))
        .is_some_and(|name| {
            name.starts_with(|c: char| c.is_ascii_alphanumeric())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
}

/// The data references of `t` that are not vouched for with `| raw`.
fn unvouched(t: &Template) -> impl Iterator<Item = &Reference> {
    t.segments.iter().filter_map(|s| match s {
        Segment::Ref {
            reference,
            raw: false,
            ..
        } if is_data(reference) => Some(reference),
        _ => None,
    })
}

/// Whether `t` is a legal element shape: no unvouched data reference, or exactly one that
/// is the whole element or follows a literal `--name=`.
fn whole_or_long_option(t: &Template) -> bool {
    if unvouched(t).next().is_none() {
        return true;
    }
    match t.segments.as_slice() {
        [Segment::Ref { .. }] => true,
        [Segment::Lit { text, .. }, Segment::Ref { .. }] => long_option_prefix(text),
        _ => false,
    }
}

/// The free text reference of `t` (a data reference without a shape), if any.
fn free_text<'t>(t: &'t Template, typing: &Typing<'_>) -> Option<&'t Reference> {
    t.segments.iter().find_map(|s| match s {
        Segment::Ref { reference, .. } if is_data(reference) && !typing.typed(s) => Some(reference),
        _ => None,
    })
}

/// The rule of a list-form command: `sources` are the elements as written, `template(i)`
/// the compiled element `i` (none for a non-string element: it holds no value), `typing`
/// which references are typed by their declaration. Checks structure (rules 1 to 3 of the
/// module docs), then the second line ([`super::inline_script::code_readers`]). The error
/// names the element and why.
pub(crate) fn check_argv<'t>(
    sources: &[String],
    template: impl Fn(usize) -> Option<&'t Template>,
    typing: &Typing<'_>,
) -> Result<(), String> {
    if sources.is_empty() {
        return Err("the argv list is empty".into());
    }
    if let Some(r) = template(0).and_then(|t| t.references().find(|r| is_data(r))) {
        return Err(format!(
            "element 0 ({:?}) is the program, and data never chooses the program: \
             '{{{{{r}}}}}' cannot be templated there; write the program in the workflow",
            sources[0]
        ));
    }
    let code = super::inline_script::code_readers(sources);
    for (i, source) in sources.iter().enumerate().skip(1) {
        let Some(t) = template(i) else { continue };
        if !whole_or_long_option(t) {
            // In the code position of a program we know, say which program runs it.
            if let Some((_, reader)) = code.iter().find(|(k, _)| *k == i) {
                return code_error(sources, i, *reader, t, typing);
            }
            let r = unvouched(t)
                .next()
                .map(ToString::to_string)
                .unwrap_or_default();
            return Err(format!(
                "element {i} ({source:?}) splices '{{{{{r}}}}}' into a larger string, which \
                 builds source text for the program that reads it; make the value a whole \
                 element (`[prog, \"--\", \"{{{{{r}}}}}\"]`), the value of a `--name=` option \
                 (`\"--out={{{{{r}}}}}\"`) or an env: variable; '{{{{{r} | raw}}}}' only if you \
                 vouch for the value as code"
            ));
        }
        if let Some(r) = free_text(t, typing) {
            return Err(free_text_error(i, source, r));
        }
    }
    // The second line: a whole value in the code position of a program we know.
    for (i, reader) in code {
        if let Some(t) = template(i) {
            code_error(sources, i, reader, t, typing)?;
        }
    }
    Ok(())
}

/// The error of free text `r` standing as element `i` of a command: what to do instead.
fn free_text_error(i: usize, source: &str, r: &Reference) -> String {
    let what = match r {
        Reference::Input(_) => "an input declared without a type",
        Reference::Step { .. } => "a step's output or error",
        Reference::LoopItem(_) => "an item of a list that is not written in the workflow",
        Reference::LoopIndex | Reference::WorkflowDir => "a value",
    };
    let decl = match r {
        Reference::Input(n) => format!(
            "declare the input's type (`inputs: [{{name: {n}, type: path}}]`: integer, number, \
             boolean, enum with values, path, url, or string with a pattern) or "
        ),
        _ => String::new(),
    };
    format!(
        "element {i} ({source:?}) is free text ('{{{{{r}}}}}' is {what}), and free text never \
         reaches a program as an argument, whichever program it is: {decl}give the reference \
         a shape ('{{{{ {r} | int }}}}', '| path', '| url', '| enum(a, b)', \
         \"| match('[a-z0-9._-]+')\"), or pass the text as data: `stdin: \"{{{{{r}}}}}\"`, a \
         file ('{{{{ {r} | file }}}}' is the path of a private file holding it) or an env: \
         variable; '{{{{{r} | raw}}}}' only if you vouch for the value as code"
    )
}

/// A list written as literal text, never rendered (plugin declarations, MCP stdio servers):
/// a `{{` there would be passed on verbatim, so it is refused as the mistake it is.
pub(crate) fn check_literal_argv(argv: &[String]) -> Result<(), String> {
    if argv.first().is_none_or(String::is_empty) {
        return Err("the argv list is empty".into());
    }
    match argv.iter().position(|a| a.contains("{{")) {
        Some(i) => Err(format!(
            "element {i} ({:?}): values are literal here, {{{{…}}}} is not rendered",
            argv[i]
        )),
        None => Ok(()),
    }
}

/// The error of element `i` of `argv`, a code argument of the program at `reader`
/// ([`super::inline_script`]), when it holds a value not vouched for with `| raw`.
fn code_error(
    argv: &[String],
    i: usize,
    reader: usize,
    t: &Template,
    typing: &Typing<'_>,
) -> Result<(), String> {
    // A closed value (one of the author's enum values, a number, a boolean, an item of a
    // literal list) is not code, whatever reads it.
    let Some(r) = t.segments.iter().find_map(|s| match s {
        Segment::Ref {
            reference,
            raw: false,
            ..
        } if is_data(reference) && !typing.closed(s) => Some(reference),
        _ => None,
    }) else {
        return Ok(());
    };
    Err(format!(
        "element {i} ({:?}) is code that `{}` runs (its code or the program it starts): \
         '{{{{{r}}}}}' would become code; pass the value as an argument after the code \
         (`[sh, -c, 'echo \"$1\"', sh, \"{{{{inputs.x}}}}\"]`) or through env:; \
         '{{{{{r} | raw}}}}' only if you vouch for the value as code",
        argv[i], argv[reader]
    ))
}

/// The run-time rule of option injection: `rendered` is the argv about to run, `template(i)`
/// the compiled element `i`. A whole-element data value whose rendered text starts with `-`
/// or `+` would be read as an option (`git log --output=/x`, `tar
/// --use-compress-program=…`) or as vim's `+cmd`: refused unless marked `{{ x | option }}`
/// (`| raw` is the author's vouching). The error names the element and the value's source.
pub(crate) fn check_options<'t>(
    rendered: &[String],
    template: impl Fn(usize) -> Option<&'t Template>,
) -> Result<(), String> {
    for (i, value) in rendered.iter().enumerate().skip(1) {
        let Some(
            [
                Segment::Ref {
                    reference,
                    raw: false,
                    option: false,
                    ..
                },
            ],
        ) = template(i).map(|t| t.segments.as_slice())
        else {
            continue;
        };
        if is_data(reference) && value.starts_with(['-', '+']) {
            // The value is not shown: a cut of it (a secret's first characters) is nothing a
            // mask could recognise later (#56).
            let lead = &value[..1];
            return Err(format!(
                "element {i}: the value of '{{{{{reference}}}}}' starts with '{lead}' \
                 and would be read as an option by `{}`; mark it '{{{{ {reference} | option }}}}' \
                 if an option is meant",
                rendered[0]
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(argv: &[&str]) -> Result<(), String> {
        let sources: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
        let compiled: Vec<Template> = argv.iter().map(|s| Template::parse(s).unwrap()).collect();
        check_argv(&sources, |i| compiled.get(i), &Typing::ALL)
    }

    #[test]
    fn a_typed_value_in_a_code_position_is_refused_unless_closed() {
        let none = HashSet::new();
        let untyped = Typing {
            typed_inputs: Some(&none),
            literal_item: false,
            closed_inputs: None,
        };
        let one = |argv: &[&str]| {
            let sources: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
            let compiled: Vec<Template> =
                argv.iter().map(|s| Template::parse(s).unwrap()).collect();
            check_argv(&sources, |i| compiled.get(i), &untyped)
        };
        one(&["make", "{{ steps.s.output | enum(build, test) }}"]).unwrap();
        one(&["split", "--filter={{ steps.s.output | int }}", "f"]).unwrap();
        one(&[
            "sh",
            "-c",
            "echo \"$1\"",
            "sh",
            "{{ steps.s.output | path }}",
        ])
        .unwrap();
        one(&["python3", "tool.py", "{{ steps.s.output | file }}"]).unwrap();
        for code in [
            &["make", "-f", "m", "{{ steps.s.output | path }}"][..],
            &["split", "--filter={{ steps.s.output | path }}", "f"],
            &[
                "tar",
                "-xf",
                "a.tar",
                "--to-command",
                "{{ steps.s.output | match('.+') }}",
            ],
            &[
                "git",
                "ls-remote",
                "--upload-pack={{ steps.s.output | path }}",
                ".",
            ],
            &[
                "bash",
                "-eo",
                "pipefail",
                "-c",
                "{{ steps.s.output | path }}",
            ],
            &["timeout", "-vk", "1", "5", "{{ steps.s.output | path }}"],
            &["flock", "LOCK", "{{ steps.s.output | path }}"],
            &["python3", "-m", "{{ steps.s.output | path }}"],
            &["perl", "-ne", "print", "{{ steps.s.output | file }}"],
            &["bash", "{{ steps.s.output | file }}"],
            &["nice", "python3", "{{ steps.s.output | path }}"],
        ] {
            let e = one(code).unwrap_err();
            assert!(e.contains("is code that"), "{code:?}: {e}");
        }
    }

    #[test]
    fn free_text_never_stands_in_argv() {
        let sources: Vec<String> = ["git", "log", "-1", "{{inputs.r}}"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let compiled: Vec<Template> = sources
            .iter()
            .map(|s| Template::parse(s).unwrap())
            .collect();
        let none = HashSet::new();
        let untyped = Typing {
            typed_inputs: Some(&none),
            literal_item: false,
            closed_inputs: None,
        };
        let e = check_argv(&sources, |i| compiled.get(i), &untyped).unwrap_err();
        assert!(
            e.contains("free text") && e.contains("type: path") && e.contains("stdin"),
            "{e}"
        );
        check_argv(&sources, |i| compiled.get(i), &Typing::ALL).unwrap();
        for typed in [
            "{{ steps.s.output | int }}",
            "{{ steps.s.output | match('[a-z]+') }}",
            "{{ steps.s.output | file }}",
            "{{ steps.s.exit_code }}",
            "{{ steps.s.output | enum(a, b) }}",
        ] {
            let t = Template::parse(typed).unwrap();
            check_argv(
                &["p".into(), typed.into()],
                |i| (i == 1).then_some(&t),
                &untyped,
            )
            .unwrap();
        }
        for free in [
            "{{ steps.s.output }}",
            "{{ steps.s.error }}",
            "{{ loop.item }}",
            "--x={{ steps.s.output | option }}",
        ] {
            let t = Template::parse(free).unwrap();
            let e = check_argv(
                &["p".into(), free.into()],
                |i| (i == 1).then_some(&t),
                &untyped,
            )
            .unwrap_err();
            assert!(e.contains("free text"), "{free}: {e}");
        }
    }

    #[test]
    fn whole_elements_and_long_option_values_are_legal() {
        check(&["git", "log", "--", "{{inputs.path}}"]).unwrap();
        check(&["tool", "--out={{inputs.o}}"]).unwrap();
        check(&["cat", "{{workflow.dir}}/data.txt"]).unwrap();
        check(&["{{workflow.dir}}/tool.sh", "{{inputs.x}}"]).unwrap();
        check(&["sh", "-c", "echo {{inputs.x | raw}}"]).unwrap();
        check(&["sh", "-c", "echo \"$1\"", "sh", "{{ inputs.x | option }}"]).unwrap();
    }

    #[test]
    fn spliced_values_and_templated_programs_are_refused() {
        for argv in [
            &["anything", "x={{inputs.v}}"][..],
            &["sqlite3", ":memory:", "select '{{inputs.v}}'"],
            &["tool", "--out={{inputs.o}}.txt"],
            &["tool", "-o{{inputs.o}}"],
            &["tool", "--o ut={{inputs.o}}"],
            &["{{inputs.p}}", "-c", "x"],
            &["{{inputs.p | raw}}"],
            &["/usr/bin/{{inputs.p}}"],
        ] {
            assert!(check(argv).is_err(), "{argv:?}");
        }
        assert!(check(&[]).is_err());
    }

    #[test]
    fn a_value_starting_with_dash_or_plus_is_an_option_anywhere() {
        let t: Vec<Template> = ["git", "log", "{{inputs.r}}", "--", "{{inputs.p}}"]
            .iter()
            .map(|s| Template::parse(s).unwrap())
            .collect();
        let argv =
            |r: &str, p: &str| vec!["git".into(), "log".into(), r.into(), "--".into(), p.into()];
        let e = check_options(&argv("--output=/x", "p"), |i| t.get(i)).unwrap_err();
        assert!(e.contains("inputs.r") && e.contains("element 2"), "{e}");
        let e = check_options(&argv("main", "+q"), |i| t.get(i)).unwrap_err();
        assert!(
            e.contains("inputs.p") && e.contains("starts with '+'"),
            "{e}"
        );
        check_options(&argv("main", "p"), |i| t.get(i)).unwrap();
        let marked = Template::parse("{{ inputs.r | option }}").unwrap();
        check_options(&["git".into(), "-v".into()], |i| {
            (i == 1).then_some(&marked)
        })
        .unwrap();
    }

    #[test]
    fn literal_lists_take_no_template() {
        check_literal_argv(&["python3".into(), "tool.py".into()]).unwrap();
        assert!(check_literal_argv(&["python3".into(), "{{inputs.x}}".into()]).is_err());
        assert!(check_literal_argv(&[]).is_err());
    }
}
