//! The rule of an `env:` entry (command steps, `run_command`'s `env` input, agent steps and
//! their MCP servers): a portable variable name, and no templated (untrusted) value in a
//! variable that programs read as code, as configuration or as the program to run.
//!
//! **This list is a second line of defence** (#39 item 6). Environment variables are how
//! values reach a command as data, and a variable's *name* is written by the workflow's
//! author, never by the data: choosing a name that a program reads as code is the author's
//! responsibility, as choosing `sh -c` is. No list of names can be complete (every program
//! may read its own `FOO_OPTS`), so the families below are the ones known to run code or to
//! pick a program: `PERL5OPT` (`-M…;system(…)`), `GIT_CONFIG_PARAMETERS`
//! (`core.fsmonitor=…`), `NODE_OPTIONS` (read by the claude, codex and gemini CLIs, all Node
//! programs: `--require …`), `TRANSCRIPT_<PROVIDER>_BIN` (picks a preset's executable),
//! `LD_PRELOAD`, `BASH_ENV`, `PATH`, … A templated value there is refused when the workflow
//! loads; a literal value is the author's and stays legal.

/// Names a templated value never binds to (exact matches).
const EXACT: &[&str] = &[
    "ENV",
    "PS1",
    "PS2",
    "PS3",
    "PS4",
    "PROMPT_COMMAND",
    "SHELLOPTS",
    "BASHOPTS",
    "GCONV_PATH",
    "HOME",
    "PATH",
    "IFS",
    "CDPATH",
    "GLOBIGNORE",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "BROWSER",
    "SHELL",
    "TERMINAL",
    "MANPAGER",
    "LESSOPEN",
    "LESSCLOSE",
    "TMPDIR",
    "ZDOTDIR",
    "INPUTRC",
    // make reads these as its own flags and programs (#48).
    "MAKEFLAGS",
    "GNUMAKEFLAGS",
    "MFLAGS",
    "MAKEFILES",
    "MAKEOVERRIDES",
    "CC",
    "CXX",
    "CPP",
    "LD",
    "AR",
    "AS",
    "FC",
    "RANLIB",
    "NM",
    "STRIP",
    "OBJCOPY",
    "OBJDUMP",
];

/// Name prefixes of the families programs read as code or configuration.
const PREFIXES: &[&str] = &[
    "PERL5",
    "PERL_",
    "RUBY",
    "PYTHON",
    "NODE_",
    "NPM_CONFIG_",
    "JAVA_",
    "JDK_",
    "_JAVA_",
    "GIT_",
    "SSH_",
    "LD_",
    "DYLD_",
    "BASH_",
    "TRANSCRIPT_",
    "LUA_",
    "PHP_",
    "GEM_",
];

/// Name suffixes of the families (`NODE_OPTIONS`, `PERL5OPT`, `MAVEN_OPTS`, `CC_BIN`, …):
/// compiler and make flags (`CFLAGS`, `LDFLAGS`), editors' start-up commands (`VIMINIT`,
/// `EXINIT`), D-Bus addresses (`DBUS_SESSION_BUS_ADDRESS`), and the endpoints and proxies
/// that choose where a program's requests, and its credentials, go (`OPENAI_BASE_URL`,
/// `AZURE_OPENAI_ENDPOINT`, `OPENAI_API_BASE`, `HTTPS_PROXY`).
const SUFFIXES: &[&str] = &[
    "_OPTIONS",
    "OPT",
    "OPTS",
    "_BIN",
    "_COMMAND",
    "_CMD",
    "_PROGRAM",
    "FLAGS",
    "INIT",
    "_BUS_ADDRESS",
    "_BASE_URL",
    "_ENDPOINT",
    "_API_BASE",
    "_PROXY",
];

/// Whether a templated value may bind to `name` (see the module docs).
fn takes_no_value(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    EXACT.contains(&upper.as_str())
        || PREFIXES.iter().any(|p| upper.starts_with(p))
        || SUFFIXES.iter().any(|s| upper.ends_with(s))
}

/// An `env:` entry: a portable name (`[A-Za-z_][A-Za-z0-9_]*`), and no templated value in
/// a variable of the families of the module docs (`PATH`, `LD_*`, `NODE_OPTIONS`, …).
pub(crate) fn check_env_entry(name: &str, value: &str) -> Result<(), String> {
    let portable = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !portable {
        return Err(format!(
            "'{name}' is not a variable name a shell can read ([A-Za-z_][A-Za-z0-9_]*)"
        ));
    }
    if value.contains("{{") && takes_no_value(name) {
        return Err(format!(
            "'{name}' is read by programs as code, configuration or the program to run: it takes \
             no templated value (give the value a name of your own, e.g. `VALUE`, and read it \
             in the command)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_families_take_no_template_and_plain_names_do() {
        for name in [
            "PERL5OPT",
            "PERL5LIB",
            "GIT_CONFIG_PARAMETERS",
            "NODE_OPTIONS",
            "TRANSCRIPT_CLAUDE_BIN",
            "JAVA_TOOL_OPTIONS",
            "MAVEN_OPTS",
            "LD_PRELOAD",
            "DYLD_INSERT_LIBRARIES",
            "BASH_ENV",
            "BASH_FUNC_x%%",
            "PS4",
            "PYTHONSTARTUP",
            "RUBYOPT",
            "SSH_ASKPASS",
            "GIT_SSH_COMMAND",
            "EDITOR",
            "HOME",
            "IFS",
            "ENV",
        ] {
            let e = check_env_entry(name, "{{inputs.x}}");
            assert!(e.is_err(), "{name}");
            // A literal value is the author's.
            if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                check_env_entry(name, "literal").unwrap();
            }
        }
        for name in [
            "MAKEFLAGS",
            "GNUMAKEFLAGS",
            "MFLAGS",
            "CC",
            "CXX",
            "CPP",
            "LD",
            "AR",
            "CFLAGS",
            "LDFLAGS",
            "VIMINIT",
            "EXINIT",
            "DBUS_SESSION_BUS_ADDRESS",
            "OPENAI_BASE_URL",
            "ANTHROPIC_BASE_URL",
            "AZURE_OPENAI_ENDPOINT",
            "OPENAI_API_BASE",
            "https_proxy",
            "ALL_PROXY",
            "NO_PROXY",
        ] {
            assert!(check_env_entry(name, "{{inputs.x}}").is_err(), "{name}");
            check_env_entry(name, "literal").unwrap();
        }
        for name in ["VALUE", "TITLE", "REF", "MESSAGE"] {
            check_env_entry(name, "{{inputs.x}}").unwrap();
        }
    }
}
