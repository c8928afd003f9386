//! Which workflow a replay runs (#58 items 3 and 4): the one given; else the file the
//! recording names, found in this checkout (a path under the recorded workspace root is looked
//! for under the replay's, through [`WorkspaceRoots`]); else the text the recording keeps
//! (wire decision 20), written to a private temporary file that lives as long as the
//! [`ChosenWorkflow`]. A recording thus replays from any checkout, and an edited file there is
//! what runs.

use std::path::{Path, PathBuf};

use transcript_domain::WorkflowSource;

use crate::WorkspaceRoots;

/// The workflow a replay runs.
#[derive(Debug)]
pub struct ChosenWorkflow {
    /// The file to run.
    pub file: PathBuf,
    /// The recorded file that is not here, when [`ChosenWorkflow::file`] is a copy of the text
    /// the recording keeps.
    pub instead_of: Option<PathBuf>,
    /// Holds the recorded text's temporary file while the replay runs.
    _text: Option<tempfile::TempDir>,
}

/// Why no workflow can be run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowChoiceError {
    /// The recording names no workflow file and none was given.
    #[error("the recorded run does not name its workflow file: give --workflow FILE")]
    NotNamed,
    /// The recorded file is not here and the recording does not keep its text.
    #[error(
        "{}: the recorded run's workflow file is not here and the recording does not keep its \
         text (give --workflow FILE)",
        .0.display()
    )]
    NotHere(PathBuf),
    /// The recorded text could not be written to a temporary file.
    #[error("cannot write the recorded workflow: {0}")]
    Write(#[from] std::io::Error),
}

/// The workflow to run: `given`, else the recorded `source`'s file found here (mapped through
/// `roots`), else the text the recording keeps.
pub fn choose_workflow(
    given: Option<PathBuf>,
    source: Option<&WorkflowSource>,
    roots: Option<&WorkspaceRoots>,
) -> Result<ChosenWorkflow, WorkflowChoiceError> {
    if let Some(file) = given {
        return Ok(ChosenWorkflow {
            file,
            instead_of: None,
            _text: None,
        });
    }
    let source = source.ok_or(WorkflowChoiceError::NotNamed)?;
    let file = PathBuf::from(match roots {
        Some(r) => r.to_now(&source.path).into_owned(),
        None => source.path.clone(),
    });
    if file.is_file() {
        return Ok(ChosenWorkflow {
            file,
            instead_of: None,
            _text: None,
        });
    }
    let text = source
        .text
        .as_ref()
        .ok_or_else(|| WorkflowChoiceError::NotHere(file.clone()))?;
    let dir = tempfile::Builder::new()
        .prefix("transcript-replay-")
        .tempdir()?;
    let name = Path::new(&file)
        .file_name()
        .map_or_else(|| "workflow.yaml".into(), ToOwned::to_owned);
    let copy = dir.path().join(name);
    std::fs::write(&copy, text)?;
    Ok(ChosenWorkflow {
        file: copy,
        instead_of: Some(file),
        _text: Some(dir),
    })
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
        let roots = WorkspaceRoots::new(Path::new("/old/root"), now.path()).unwrap();
        let src = source("/old/root/w.yaml", None);
        let chosen = choose_workflow(None, Some(&src), Some(&roots)).unwrap();
        assert_eq!(chosen.file, now.path().join("w.yaml"));
        assert_eq!(chosen.instead_of, None);
        // Not beneath the root: taken as it is (and not here).
        let src = source("/old/rootx/w.yaml", None);
        let err = choose_workflow(None, Some(&src), Some(&roots)).unwrap_err();
        assert!(
            matches!(err, WorkflowChoiceError::NotHere(p) if p == Path::new("/old/rootx/w.yaml"))
        );
    }

    #[test]
    fn a_missing_file_runs_the_recorded_text_else_is_an_error() {
        let src = source("/gone/w.yaml", Some("name: kept\n"));
        let chosen = choose_workflow(None, Some(&src), None).unwrap();
        assert_eq!(
            std::fs::read_to_string(&chosen.file).unwrap(),
            "name: kept\n"
        );
        assert!(chosen.file.ends_with("w.yaml"));
        assert_eq!(
            chosen.instead_of.as_deref(),
            Some(Path::new("/gone/w.yaml"))
        );
        let dir = chosen.file.parent().unwrap().to_path_buf();
        drop(chosen);
        assert!(!dir.exists(), "the copy goes with the replay");
        assert!(matches!(
            choose_workflow(None, None, None),
            Err(WorkflowChoiceError::NotNamed)
        ));
        let given = choose_workflow(Some("x.yaml".into()), None, None).unwrap();
        assert_eq!(given.file, Path::new("x.yaml"));
    }
}
