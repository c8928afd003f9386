//! The rule of an `env:` entry (command steps, `run_command`'s `env` input, agent steps and
//! their MCP servers): a portable variable name, and no templated (untrusted) value in a
//! variable that a shell, bash or the dynamic loader reads as code or configuration.

/// Environment variables a shell, bash or the dynamic loader reads as code
/// or configuration: a templated (untrusted) value never goes there.
const INTERPRETED_ENV: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "IFS",
    "PATH",
    "CDPATH",
    "GLOBIGNORE",
];

/// An `env:` entry: a portable name (`[A-Za-z_][A-Za-z0-9_]*`), and no
/// templated value in a variable the shell or the loader interprets
/// (`BASH_ENV`, `PATH`, `LD_*`, …).
pub(crate) fn check_env_entry(name: &str, value: &str) -> Result<(), String> {
    let portable = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !portable {
        return Err(format!(
            "'{name}' is not a variable name a shell can read ([A-Za-z_][A-Za-z0-9_]*)"
        ));
    }
    let templated = value.contains("{{");
    if templated
        && (INTERPRETED_ENV.contains(&name)
            || name.starts_with("LD_")
            || name.starts_with("BASH_FUNC_"))
    {
        return Err(format!(
            "'{name}' is read by the shell or the loader as code or configuration: it takes no templated value"
        ));
    }
    Ok(())
}
