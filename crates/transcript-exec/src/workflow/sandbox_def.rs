//! A step's `sandbox:` as written (#56): `off`, or `{ read: [...], write: [...] }` of literal
//! paths (relative to the workspace, absolute, or `~/…` under the runner's home). A path is
//! never a template: what a step may reach is the author's, never its data's.

use std::path::PathBuf;

use serde_json::Value;

use crate::sandbox::StepSandbox;

/// Reads `sandbox:` (absent: the default bounds).
pub(super) fn parse(value: Option<Value>) -> Result<StepSandbox, String> {
    let Some(value) = value else {
        return Ok(StepSandbox::default());
    };
    match value {
        // YAML 1.1 readers take `off` for false; both mean the same here.
        Value::String(s) if s == "off" => Ok(StepSandbox::off()),
        Value::Bool(false) => Ok(StepSandbox::off()),
        Value::Object(map) => {
            let mut out = StepSandbox::default();
            for (key, v) in map {
                let list = match key.as_str() {
                    "read" => &mut out.read,
                    "write" => &mut out.write,
                    other => {
                        return Err(format!(
                            "sandbox: unknown key '{other}' (expected `off`, or `read:` and `write:` lists of paths)"
                        ));
                    }
                };
                *list = paths(&key, v)?;
            }
            Ok(out)
        }
        other => Err(format!(
            "sandbox: expected `off` or a mapping with `read:` / `write:` lists, not {other}"
        )),
    }
}

fn paths(key: &str, v: Value) -> Result<Vec<PathBuf>, String> {
    let Value::Array(items) = v else {
        return Err(format!("sandbox.{key}: expected a list of paths"));
    };
    items
        .into_iter()
        .map(|item| match item {
            Value::String(s) if s.contains("{{") || s.contains("{%") => Err(format!(
                "sandbox.{key}: '{s}' is a template: sandbox paths are literal (what a step may reach is never chosen by data)"
            )),
            Value::String(s) if s.is_empty() || s.contains('\0') => {
                Err(format!("sandbox.{key}: an empty path or one with a NUL byte"))
            }
            Value::String(s) => Ok(PathBuf::from(s)),
            other => Err(format!("sandbox.{key}: expected a path string, not {other}")),
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn off_paths_and_refusals() {
        assert!(parse(Some(json!("off"))).unwrap().off);
        assert!(parse(Some(json!(false))).unwrap().off);
        assert!(parse(None).unwrap().is_default());
        let s = parse(Some(
            json!({"read": ["/opt/x"], "write": ["build/out", "~/.cache/x"]}),
        ))
        .unwrap();
        assert_eq!(s.read, vec![PathBuf::from("/opt/x")]);
        assert_eq!(s.write.len(), 2);
        let e = parse(Some(json!({"write": ["{{ inputs.dir }}"]}))).unwrap_err();
        assert!(e.contains("literal"), "{e}");
        assert!(
            parse(Some(json!({"net": []})))
                .unwrap_err()
                .contains("unknown key")
        );
        assert!(parse(Some(json!("on"))).is_err());
        assert!(parse(Some(json!({"read": "x"}))).is_err());
    }
}
