//! Which workflow a replay runs, and in which workspace terms (#58 items 3 and 4): `--workflow`
//! when given; else the file the recording names, found in this checkout (an absolute path
//! under the recorded workspace root is mapped to the replay's workspace); else the text the
//! recording keeps (wire decision 20), written to a private temporary file. A recording thus
//! replays from any checkout, and an edited file there is what runs.

use std::path::{Path, PathBuf};

use transcript_domain::WorkflowSource;

use crate::CliError;

/// The workflow a replay runs.
pub struct Chosen {
    /// The file to run.
    pub file: PathBuf,
    /// Holds the recorded text's temporary file while the replay runs.
    _text: Option<tempfile::TempDir>,
}

/// The workflow to run: `given`, else the recorded file found here, else the recorded text.
/// `roots` is (recorded workspace root, this replay's workspace root). `shown` names the
/// recording in errors.
pub fn choose(
    given: Option<PathBuf>,
    source: Option<&WorkflowSource>,
    roots: Option<(&Path, &Path)>,
    shown: &Path,
) -> Result<Chosen, CliError> {
    if let Some(file) = given {
        return Ok(Chosen { file, _text: None });
    }
    let Some(source) = source else {
        return Err(CliError::Usage(format!(
            "{}: the recorded run does not name its workflow file: give --workflow FILE",
            shown.display()
        )));
    };
    let file = mapped(Path::new(&source.path), roots);
    if file.is_file() {
        return Ok(Chosen { file, _text: None });
    }
    let Some(text) = &source.text else {
        return Err(CliError::Read {
            path: file,
            message: "the recorded run's workflow file is not here and the recording does not \
                      keep its text (give --workflow FILE)"
                .to_owned(),
        });
    };
    let dir = tempfile::Builder::new()
        .prefix("transcript-replay-")
        .tempdir()
        .map_err(|e| CliError::Failed(format!("cannot write the recorded workflow: {e}")))?;
    let name = file.file_name().map_or_else(
        || std::ffi::OsString::from("workflow.yaml"),
        ToOwned::to_owned,
    );
    let copy = dir.path().join(name);
    std::fs::write(&copy, text)
        .map_err(|e| CliError::Failed(format!("cannot write the recorded workflow: {e}")))?;
    crate::diag!(
        "transcript: replay: note: {} is not here: running the workflow text the recording keeps",
        crate::style::clean(&file.display().to_string())
    );
    Ok(Chosen {
        file: copy,
        _text: Some(dir),
    })
}

/// `path` with the recorded workspace root replaced by the replay's, when it lies beneath it
/// (whole components only: `/a/work` is not beneath `/a/workshop`'s root).
fn mapped(path: &Path, roots: Option<(&Path, &Path)>) -> PathBuf {
    match roots {
        Some((recorded, now)) => match path.strip_prefix(recorded) {
            Ok(rest) => now.join(rest),
            Err(_) => path.to_path_buf(),
        },
        None => path.to_path_buf(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn source(path: &str, text: Option<&str>) -> WorkflowSource {
        WorkflowSource {
            path: path.into(),
            sha256: "00".into(),
            text: text.map(str::to_owned),
            text_omitted_bytes: None,
        }
    }

    #[test]
    fn the_recorded_file_under_the_old_root_is_found_under_the_new_one() {
        let now = tempfile::tempdir().unwrap();
        std::fs::write(now.path().join("w.yaml"), "name: w\n").unwrap();
        let src = source("/old/root/w.yaml", None);
        let roots = (Path::new("/old/root"), now.path());
        let chosen = choose(None, Some(&src), Some(roots), Path::new("r.jsonl")).unwrap();
        assert_eq!(chosen.file, now.path().join("w.yaml"));
        assert_eq!(
            mapped(Path::new("/old/rootx/w.yaml"), Some(roots)),
            Path::new("/old/rootx/w.yaml")
        );
    }

    #[test]
    fn a_missing_file_runs_the_recorded_text_else_is_an_error() {
        let src = source("/gone/w.yaml", Some("name: kept\n"));
        let chosen = choose(None, Some(&src), None, Path::new("r.jsonl")).unwrap();
        assert_eq!(
            std::fs::read_to_string(&chosen.file).unwrap(),
            "name: kept\n"
        );
        assert!(chosen.file.ends_with("w.yaml"));
        let dir = chosen.file.parent().unwrap().to_path_buf();
        drop(chosen);
        assert!(!dir.exists(), "the copy goes with the replay");
        let err = choose(
            None,
            Some(&source("/gone/w.yaml", None)),
            None,
            Path::new("r"),
        )
        .err();
        assert_eq!(err.unwrap().exit_code(), 3);
        let err = choose(None, None, None, Path::new("r")).err();
        assert_eq!(err.unwrap().exit_code(), 2);
    }
}
