//! Where a connection's credentials come from: a file (`TRANSCRIPT_NATS_CREDS_FILE`, or
//! `nats://…?creds=PATH`), or the environment the NATS way (`NATS_CREDS`, `NATS_USER` +
//! `NATS_PASSWORD`, `NATS_TOKEN`), and for TLS `NATS_CA`, `NATS_CERT` + `NATS_KEY`.
//!
//! The file is the form to use: a secret in an environment variable is in the environment
//! of the shell that launched the runner, and a step of the run, same user, can read that
//! shell's `/proc/<pid>/environ` (the runner makes its own unreadable, not its ancestors').
//! A file holds either a NATS `.creds` file's text (a user JWT and its nkey seed) or lines
//! `token=…`, or `user=…` and `password=…` (`#` comments, blank lines; a `NATS_` prefix and
//! the keys' case are ignored, so an env-file can serve). It must be a regular file that its
//! owner alone can read or write (mode `0600` or `0400`): anything more is refused naming
//! the mode, as ssh refuses a private key.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{NatsError, StorageUrl};

/// The variable naming a credentials file (see the module docs); `?creds=PATH` in the
/// storage URL wins over it.
pub const CREDS_FILE_ENV: &str = "TRANSCRIPT_NATS_CREDS_FILE";

/// The variables [`crate::NatsStore::connect`] reads for credentials and TLS, exactly (they
/// are read through this list): the runner's own, which a composition root withholds from the
/// processes of a run (`transcript_exec::WithheldEnv`).
pub const CREDENTIAL_ENV: [&str; 8] = [
    "NATS_CREDS",
    "NATS_USER",
    "NATS_PASSWORD",
    "NATS_TOKEN",
    "NATS_CA",
    "NATS_CERT",
    "NATS_KEY",
    CREDS_FILE_ENV,
];

/// The largest credentials file read (a `.creds` file is about 1 KiB).
const MAX_FILE: u64 = 64 * 1024;

/// What a credentials file holds.
enum Secret {
    Creds(String),
    Token(String),
    UserPassword(String, String),
}

/// Reads and checks the credentials file at `path`; the error names the file and the cause,
/// never a secret.
fn read_file(path: &Path) -> Result<Secret, String> {
    let name = path.display();
    let mut file = std::fs::File::open(path).map_err(|e| format!("{name}: {e}"))?;
    // The checks are on the open file, not the path: nothing swaps it in between.
    let meta = file.metadata().map_err(|e| format!("{name}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{name}: not a regular file"));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "{name} is open to group or others (mode {mode:04o}): a credentials file must be \
             its owner's alone (chmod 600 {name})"
        ));
    }
    if meta.len() > MAX_FILE {
        return Err(format!("{name}: larger than {MAX_FILE} bytes"));
    }
    let mut text = String::new();
    file.by_ref()
        .take(MAX_FILE)
        .read_to_string(&mut text)
        .map_err(|e| format!("{name}: {e}"))?;
    parse(&text).map_err(|e| format!("{name}: {e}"))
}

/// A `.creds` file's text, or `key=value` lines.
fn parse(text: &str) -> Result<Secret, String> {
    if text.contains("-----BEGIN NATS USER JWT-----") {
        return Ok(Secret::Creds(text.to_owned()));
    }
    let (mut token, mut user, mut password) = (None, None, None);
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!(
                "line {}: expected key=value (token, user, password) or a .creds file",
                i + 1
            ));
        };
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim().trim_matches('"').to_owned();
        match key.strip_prefix("nats_").unwrap_or(&key) {
            "token" => token = Some(value),
            "user" => user = Some(value),
            "password" => password = Some(value),
            _ => {
                return Err(format!(
                    "line {}: unknown key (token, user and password are known)",
                    i + 1
                ));
            }
        }
    }
    match (token, user, password) {
        (Some(token), None, None) if !token.is_empty() => Ok(Secret::Token(token)),
        (None, Some(user), Some(password)) => Ok(Secret::UserPassword(user, password)),
        (None, None, None) => Err("holds no credentials".to_owned()),
        _ => Err("give either token, or user and password".to_owned()),
    }
}

/// The credentials file `url` or the environment names.
fn creds_file(url: &StorageUrl) -> Option<PathBuf> {
    url.creds.clone().or_else(|| {
        std::env::var_os(CREDS_FILE_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
}

/// The connect options for `url`: credentials from its file or the environment, TLS from the
/// environment.
pub(crate) fn connect_options(
    url: &StorageUrl,
    timeout: Duration,
) -> Result<async_nats::ConnectOptions, NatsError> {
    let credentials = |message: String| NatsError::Credentials {
        url: url.to_string(),
        message,
    };
    let [creds, user, password, token, ca, cert, key, _] =
        CREDENTIAL_ENV.map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()));
    let mut options = async_nats::ConnectOptions::new()
        .name("transcript")
        .connection_timeout(timeout);
    if let Some(file) = creds_file(url) {
        if creds.is_some() || user.is_some() || password.is_some() || token.is_some() {
            return Err(credentials(format!(
                "both a credentials file ({}) and NATS_CREDS, NATS_USER, NATS_PASSWORD or \
                 NATS_TOKEN are set: keep the file, unset the variables",
                file.display()
            )));
        }
        options = match read_file(&file).map_err(&credentials)? {
            Secret::Creds(text) => options
                .credentials(&text)
                .map_err(|e| credentials(format!("{}: {e}", file.display())))?,
            Secret::Token(token) => options.token(token),
            Secret::UserPassword(user, password) => options.user_and_password(user, password),
        };
    }
    if let Some(path) = creds {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| credentials(format!("NATS_CREDS {path}: {e}")))?;
        options = options
            .credentials(&text)
            .map_err(|e| credentials(format!("NATS_CREDS {path}: {e}")))?;
    }
    match (user, password) {
        (Some(user), Some(password)) => options = options.user_and_password(user, password),
        (Some(_), None) | (None, Some(_)) => {
            return Err(credentials(
                "NATS_USER and NATS_PASSWORD go together".to_owned(),
            ));
        }
        (None, None) => {}
    }
    if let Some(token) = token {
        options = options.token(token);
    }
    if let Some(ca) = ca {
        options = options
            .add_root_certificates(PathBuf::from(ca))
            .require_tls(true);
    }
    match (cert, key) {
        (Some(cert), Some(key)) => {
            options = options.add_client_certificate(PathBuf::from(cert), PathBuf::from(key));
        }
        (Some(_), None) | (None, Some(_)) => {
            return Err(credentials("NATS_CERT and NATS_KEY go together".to_owned()));
        }
        (None, None) => {}
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_file_holds_a_token_a_user_and_password_or_creds_and_is_its_owners_alone() {
        let dir = tempfile::tempdir().unwrap();
        let token = write(dir.path(), "t", "# fleet\nNATS_TOKEN=s3cret\n", 0o600);
        assert!(matches!(read_file(&token), Ok(Secret::Token(t)) if t == "s3cret"));
        let pair = write(dir.path(), "u", "user = runner\npassword=\"pw\"\n", 0o400);
        assert!(
            matches!(read_file(&pair), Ok(Secret::UserPassword(u, p)) if u == "runner" && p == "pw")
        );
        let creds = write(
            dir.path(),
            "c",
            "-----BEGIN NATS USER JWT-----\nx\n------END NATS USER JWT------\n",
            0o600,
        );
        assert!(matches!(read_file(&creds), Ok(Secret::Creds(_))));
        for (name, text, mode, says) in [
            ("g", "token=s3cret", 0o640, "mode 0640"),
            ("o", "token=s3cret", 0o604, "chmod 600"),
            ("k", "secret=s3cret", 0o600, "unknown key"),
            ("b", "token=s3cret\nuser=x", 0o600, "either token"),
            ("e", "", 0o600, "no credentials"),
        ] {
            let e = read_file(&write(dir.path(), name, text, mode))
                .err()
                .unwrap_or_default();
            assert!(e.contains(says) && !e.contains("s3cret"), "{name}: {e}");
        }
        assert!(read_file(dir.path()).is_err());
    }
}
