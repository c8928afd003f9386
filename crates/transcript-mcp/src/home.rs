//! The private home a wired Codex or Gemini CLI runs in (#40): the user's home linked in,
//! entry by entry, but for the configuration the wiring writes itself.

use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

/// Creates the private home `ours` (mode `0o700`) and links every entry of the user's `real`
/// home into it but `config` (and `extensions`, whose servers the wiring turns off), whose
/// text is returned (empty when there is none): the wiring writes its own. So the CLI keeps
/// its credentials, and its sessions land where they always do: the `sessions` folder
/// (Codex `sessions`, Gemini CLI `tmp`) is made in the user's home first (mode `0o700`, the
/// home too when missing; best effort), so a first run's sessions outlive the private home.
///
/// # Errors
/// The private home that cannot be made, a link that cannot be made, or a `config` that exists
/// but cannot be read (named in the message).
pub fn link_private_home(
    real: Option<&Path>,
    ours: &Path,
    config: &str,
    sessions: &str,
) -> std::io::Result<String> {
    let mut dirs = std::fs::DirBuilder::new();
    dirs.recursive(true).mode(0o700).create(ours)?;
    if let Some(real) = real {
        // Best effort: a home the user cannot write to is the CLI's own business, as it
        // would be without the wiring (its sessions then stay in the private home).
        let _ = dirs.create(real.join(sessions));
    }
    let Some(real) = real.filter(|r| r.is_dir()) else {
        return Ok(String::new());
    };
    for entry in std::fs::read_dir(real)? {
        let name = entry?.file_name();
        if name != config && name != "extensions" {
            std::os::unix::fs::symlink(real.join(&name), ours.join(&name))?;
        }
    }
    match std::fs::read_to_string(real.join(config)) {
        Ok(text) => Ok(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", real.join(config).display()),
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_first_run_gets_its_sessions_folder_in_the_users_home() {
        let dir = tempfile::tempdir().unwrap();
        let (real, ours) = (
            dir.path().join("home/.gemini"),
            dir.path().join("ours/.gemini"),
        );
        let text = link_private_home(Some(&real), &ours, "settings.json", "tmp").unwrap();
        assert_eq!(text, "");
        let made = std::fs::metadata(real.join("tmp")).unwrap();
        assert_eq!(made.permissions().mode() & 0o777, 0o700);
        assert_eq!(
            std::fs::read_link(ours.join("tmp")).unwrap(),
            real.join("tmp")
        );
        let private = std::fs::metadata(&ours).unwrap().permissions().mode() & 0o777;
        assert_eq!(private, 0o700);
    }

    #[test]
    fn everything_but_the_config_and_extensions_is_linked() {
        let dir = tempfile::tempdir().unwrap();
        let (real, ours) = (dir.path().join("codex"), dir.path().join("ours"));
        std::fs::create_dir_all(real.join("extensions")).unwrap();
        std::fs::write(real.join("config.toml"), "model = \"m\"\n").unwrap();
        std::fs::write(real.join("auth.json"), "{}").unwrap();
        let text = link_private_home(Some(&real), &ours, "config.toml", "sessions").unwrap();
        assert_eq!(text, "model = \"m\"\n");
        let mut linked: Vec<String> = std::fs::read_dir(&ours)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        linked.sort();
        assert_eq!(linked, ["auth.json", "sessions"]);
    }

    #[test]
    fn no_home_links_nothing_and_an_unreadable_config_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let ours = dir.path().join("ours");
        assert_eq!(link_private_home(None, &ours, "c", "s").unwrap(), "");
        assert_eq!(std::fs::read_dir(&ours).unwrap().count(), 0);
        let real = dir.path().join("real");
        std::fs::create_dir_all(real.join("config.toml")).unwrap();
        let err =
            link_private_home(Some(&real), &dir.path().join("o2"), "config.toml", "s").unwrap_err();
        assert!(err.to_string().contains("config.toml"), "{err}");
    }
}
