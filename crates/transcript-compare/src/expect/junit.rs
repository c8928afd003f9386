//! JUnit XML of a check: one `<testcase>` per expectation (one per `judge:` too), a
//! `<failure>` in each that does not hold, an `<error>` in each that could not be decided (a
//! judge that could not grade), and what the run did as `<system-out>` of each that holds
//! (a judge's reason). Written by quick-xml's writer, which escapes every name, attribute and text;
//! characters XML 1.0 cannot carry at all (most C0 controls) are shown as `\u{..}` first.

use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesText, Event};

use super::Outcome;

/// The JUnit XML document of the outcomes of checking `run` (its id or name) against the
/// file `expectations`.
pub fn junit_xml(run: &str, expectations: &str, outcomes: &[Outcome]) -> String {
    let mut writer = Writer::new_with_indent(Vec::new(), b' ', 2);
    // Writing into a Vec cannot fail; a failure would leave an empty document.
    let _ = write(&mut writer, run, expectations, outcomes);
    String::from_utf8(writer.into_inner()).unwrap_or_default()
}

fn write(
    w: &mut Writer<Vec<u8>>,
    run: &str,
    expectations: &str,
    outcomes: &[Outcome],
) -> std::io::Result<()> {
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let tests = outcomes.len().to_string();
    let failures = outcomes
        .iter()
        .filter(|o| !o.passed && !o.errored)
        .count()
        .to_string();
    let errors = outcomes.iter().filter(|o| o.errored).count().to_string();
    let suite = xml_chars(&format!("transcript check {run} against {expectations}"));
    w.create_element("testsuites")
        .with_attributes([
            ("name", suite.as_str()),
            ("tests", tests.as_str()),
            ("failures", failures.as_str()),
            ("errors", errors.as_str()),
        ])
        .write_inner_content(|w| {
            w.create_element("testsuite")
                .with_attributes([
                    ("name", suite.as_str()),
                    ("tests", tests.as_str()),
                    ("failures", failures.as_str()),
                    ("errors", errors.as_str()),
                ])
                .write_inner_content(|w| {
                    for o in outcomes {
                        testcase(w, expectations, o)?;
                    }
                    Ok(())
                })?;
            Ok(())
        })?;
    Ok(())
}

fn testcase(w: &mut Writer<Vec<u8>>, expectations: &str, o: &Outcome) -> std::io::Result<()> {
    let classname = xml_chars(&o.scope);
    let name = xml_chars(&format!("{} ({expectations}:{})", o.expectation, o.line));
    let case = w
        .create_element("testcase")
        .with_attributes([("classname", classname.as_str()), ("name", name.as_str())]);
    let detail = xml_chars(&o.detail);
    case.write_inner_content(|w| {
        if o.passed {
            w.create_element("system-out")
                .write_text_content(BytesText::new(&detail))?;
            return Ok(());
        }
        let (element, kind) = if o.errored {
            ("error", "not graded")
        } else {
            ("failure", "expectation")
        };
        w.create_element(element)
            .with_attributes([("message", detail.as_str()), ("type", kind)])
            .write_text_content(BytesText::new(&detail))?;
        Ok(())
    })?;
    Ok(())
}

/// `text` with the characters XML 1.0 cannot represent (C0 controls other than tab, line
/// feed and carriage return; U+FFFE, U+FFFF) shown as `\u{..}`; markup characters are left to
/// the writer's escaping.
fn xml_chars(text: &str) -> String {
    let bad = |c: char| {
        (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{fffe}' | '\u{ffff}')
    };
    if !text.chars().any(bad) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| {
            if bad(c) {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}
