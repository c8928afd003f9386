//! A step's `sandbox:` as written (#56): `off`, or `{ read: [...], write: [...] }` of literal
//! paths (relative to the workspace, absolute, `~/…` under the runner's home, or
//! `{{workflow.dir}}/…` under the directory of the workflow file, resolved when it loads).
//! No other template: what a step may reach is the author's, never its data's.

use std::path::PathBuf;

use serde_json::Value;

use crate::sandbox::StepSandbox;

/// Reads `sandbox:` (absent: the default bounds).
pub(super) fn parse(value: Option<Value>, file: &str) -> Result<StepSandbox, String> {
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
                *list = paths(&key, v, file)?;
            }
            Ok(out)
        }
        other => Err(format!(
            "sandbox: expected `off` or a mapping with `read:` / `write:` lists, not {other}"
        )),
    }
}

fn paths(key: &str, v: Value, file: &str) -> Result<Vec<PathBuf>, String> {
    let Value::Array(items) = v else {
        return Err(format!("sandbox.{key}: expected a list of paths"));
    };
    let dir = std::path::Path::new(file)
        .parent()
        .map(|d| {
            if d.as_os_str().is_empty() {
                std::path::Path::new(".")
            } else {
                d
            }
        })
        .unwrap_or(std::path::Path::new("."));
    items
        .into_iter()
        .map(|item| match item {
            Value::String(s) if s.starts_with(WORKFLOW_DIR) => {
                let rest = &s[WORKFLOW_DIR.len()..];
                if rest.contains("{{") || rest.contains("{%") {
                    return Err(format!(
                        "sandbox.{key}: '{s}' is a template: sandbox paths are literal (only `{WORKFLOW_DIR}` may start one)"
                    ));
                }
                Ok(crate::sandbox::absolute(&dir.join(rest.trim_start_matches('/'))))
            }
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

/// The one reference a sandbox path may start with: the workflow file's directory.
const WORKFLOW_DIR: &str = "{{workflow.dir}}";

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_at(v: Option<Value>) -> Result<StepSandbox, String> {
        parse(v, "/w/wf.yaml")
    }

    #[test]
    fn off_paths_and_refusals() {
        assert!(parse_at(Some(json!("off"))).unwrap().off);
        assert!(parse_at(Some(json!(false))).unwrap().off);
        assert!(parse_at(None).unwrap().is_default());
        let s = parse_at(Some(
            json!({"read": ["/opt/x"], "write": ["build/out", "~/.cache/x"]}),
        ))
        .unwrap();
        assert_eq!(s.read, vec![PathBuf::from("/opt/x")]);
        assert_eq!(s.write.len(), 2);
        let e = parse_at(Some(json!({"write": ["{{ inputs.dir }}"]}))).unwrap_err();
        assert!(e.contains("literal"), "{e}");
        assert!(
            parse_at(Some(json!({"net": []})))
                .unwrap_err()
                .contains("unknown key")
        );
        assert!(parse_at(Some(json!("on"))).is_err());
        assert!(parse_at(Some(json!({"read": "x"}))).is_err());
        let s = parse_at(Some(json!({"read": ["{{workflow.dir}}/../agents"]}))).unwrap();
        assert_eq!(s.read, vec![PathBuf::from("/agents")]);
        assert!(parse_at(Some(json!({"read": ["{{workflow.dir}}/{{inputs.x}}"]}))).is_err());
    }
}
