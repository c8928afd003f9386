//! Tests of [`super`]: parsing, rendering and the shell-source rule of templates.
#![allow(clippy::unwrap_used)]

use super::*;
use serde_json::{Map, json};

fn render_str(text: &str, scope: &Scope) -> String {
    Template::parse(text).unwrap().render(scope).unwrap()
}

#[test]
fn parses_and_renders() {
    let t = Template::parse("a {{ inputs.x }} b {{steps.s.output}}{{loop.index}}").unwrap();
    let mut inputs = Map::new();
    inputs.insert("x".into(), json!("X"));
    let mut s = Scope::new(inputs);
    s.set_step(
        "s",
        StepValue {
            output: json!({"k": 1}),
            exit_code: Some(3),
            error: None,
        },
    );
    s.set_loop(LoopFrame {
        item: json!({"f": [5, 6]}),
        index: 2,
    });
    assert_eq!(t.render(&s).unwrap(), "a X b {\"k\":1}2");
    let v = Template::parse("{{loop.item.f.1}}")
        .unwrap()
        .render_value(&s)
        .unwrap();
    assert_eq!(v, json!(6));
    assert_eq!(
        Template::parse("{{steps.s.exit_code}}")
            .unwrap()
            .render_value(&s)
            .unwrap(),
        json!(3)
    );
    assert_eq!(render_str("{{steps.s.error}}", &s), "");
    assert_eq!(render_str("{{steps.none.output}}", &s), "");
}

#[test]
fn rejects_bad_templates() {
    for bad in [
        "{{",
        "{{}}",
        "{{ inputs.x | upper }}",
        "{{ \"open }}",
        "{{ 'a' b }}",
        "{% raw %} no end",
        "{{inputs}}",
        "{{steps.a.stdout}}",
        "{{loop.count}}",
        "{{env.HOME}}",
        "{{inputs..x}}",
    ] {
        assert!(Template::parse(bad).is_err(), "{bad}");
    }
    let e = Template::parse("{{ nope }}").unwrap_err();
    assert!(e.to_string().contains("unknown reference 'nope'"), "{e}");
}

fn scope_with(name: &str, value: Value) -> Scope {
    let mut inputs = Map::new();
    inputs.insert(name.into(), value);
    Scope::new(inputs)
}

#[test]
fn literal_braces_raw_blocks_and_string_literals() {
    let s = scope_with("x", json!("X"));
    // A lone `}}` (nested JSON) is text.
    assert_eq!(
        render_str(r#"{"a":{"b":"{{inputs.x}}"}}"#, &s),
        r#"{"a":{"b":"X"}}"#
    );
    assert_eq!(
        render_str(
            "Helm: {% raw %}{{ .Values.x }}{% endraw %} and {{inputs.x}}",
            &s
        ),
        "Helm: {{ .Values.x }} and X"
    );
    assert_eq!(
        render_str(r#"{{ "{{" }} .Values.x }}"#, &s),
        "{{ .Values.x }}"
    );
    assert_eq!(render_str("{{ '}}' }}", &s), "}}");
    assert_eq!(render_str("{%raw%}{%endraw%}", &s), "");
    assert_eq!(render_str("{% if %} stays", &s), "{% if %} stays");
    assert_eq!(
        Template::parse("{{ inputs.x | raw }}")
            .unwrap()
            .render_value(&s)
            .unwrap(),
        json!("X")
    );
}

#[test]
fn shell_source_takes_no_value_but_raw_ones() {
    let payload = "x'; touch PWNED; echo '";
    let s = scope_with("x", json!(payload));
    for refused in [
        "echo {{inputs.x}}",
        "echo '{{inputs.x}}'",
        "echo $(( {{inputs.x}} + 1 ))",
        "echo \"{{ inputs.x }}\"",
    ] {
        let t = Template::parse(refused).unwrap();
        let e = t.check_shell_source().unwrap_err();
        assert!(e.reason.contains("env: { X: \"{{inputs.x}}\" }"), "{e}");
        assert!(e.reason.contains("\"$X\""), "{e}");
        assert!(e.reason.contains("list form"), "{e}");
        assert!(t.render_shell_source(&s).is_err());
    }
    let raw = Template::parse("{{inputs.x | raw}}").unwrap();
    assert_eq!(raw.render_shell_source(&s).unwrap(), payload);
    let lit = Template::parse("echo {{ \"{{\" }} \"$X\"").unwrap();
    assert_eq!(lit.render_shell_source(&s).unwrap(), "echo {{ \"$X\"");
    assert_eq!(
        env_name_for(&Reference::Step {
            step: "build-2".into(),
            field: StepField::Output
        }),
        "BUILD_2_OUTPUT"
    );
    assert_eq!(
        env_name_for(&Reference::LoopItem(vec!["id".into()])),
        "ITEM_ID"
    );
    assert_eq!(env_name_for(&Reference::Input("9x".into())), "_9X");
}
