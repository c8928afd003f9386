//! The transcript file-name rule read backwards: which run a file is named after
//! (`<run-id>.jsonl`, [`RunId::file_name`] the other way). One home for every listing, lookup
//! and check that recognises a transcript by its name.

use std::path::Path;

use crate::RunId;

impl RunId {
    /// The run a transcript file is named after: the last component of `path` is exactly
    /// `<run-id>.jsonl` (the 36-character form, either case). `None` for anything else
    /// (`audit.jsonl`, `<run-id>.jsonl.torn`, a directory name, a non-UTF-8 name).
    pub fn from_file_name(path: &Path) -> Option<RunId> {
        let stem = path.file_name()?.to_str()?.strip_suffix(".jsonl")?;
        RunId::parse(stem).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "00000000-0000-4000-8000-00000000000a";

    #[test]
    fn reads_the_run_a_file_is_named_after_and_nothing_else() {
        let id = RunId::parse(ID).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(RunId::from_file_name(Path::new(&id.file_name())), Some(id));
        let nested = format!("/storage/dir/{ID}.jsonl");
        assert_eq!(RunId::from_file_name(Path::new(&nested)), Some(id));
        let upper = format!("{}.jsonl", ID.to_uppercase());
        assert_eq!(RunId::from_file_name(Path::new(&upper)), Some(id));
        for other in [
            "audit.jsonl".to_owned(),
            format!("{ID}.jsonl.torn"),
            format!("{ID}.json"),
            ID.to_owned(),
            format!("{ID}.jsonl/"),
            format!("x{ID}.jsonl"),
            ".jsonl".to_owned(),
            String::new(),
        ] {
            let got = RunId::from_file_name(Path::new(&other));
            // `Path` drops a trailing slash: `<id>.jsonl/` still names the file.
            if other.ends_with(".jsonl/") {
                assert_eq!(got, Some(id), "{other}");
            } else {
                assert_eq!(got, None, "{other}");
            }
        }
    }
}
