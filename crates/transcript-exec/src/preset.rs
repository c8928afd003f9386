//! Provider presets: an agent step with `provider: claude | codex | gemini`
//! and no `command:` runs the real CLI with the flags below (a `command:`
//! still overrides the preset). The CLI's stdout goes through the
//! provider's normalizer like any CLI agent's ([`crate::cli_agent`]).
//!
//! # Finding the binary
//!
//! `TRANSCRIPT_<PROVIDER>_BIN` (`TRANSCRIPT_CLAUDE_BIN`, `TRANSCRIPT_CODEX_BIN`,
//! `TRANSCRIPT_GEMINI_BIN`; the step's `env:` first, then the runner's
//! environment), else the executable (`claude`, `codex`, `gemini`) on
//! `PATH` (the step's `PATH` when it sets one). A missing binary fails the
//! step with an error naming the npm package to install
//! (`@anthropic-ai/claude-code`, `@openai/codex`, `@google/gemini-cli`).
//!
//! # Endpoint and credentials
//!
//! The process inherits the runner's environment plus the step's `env:`
//! (values templated), so the provider's endpoint and key come from there:
//! `ANTHROPIC_BASE_URL` / `ANTHROPIC_API_KEY` / `CLAUDE_CONFIG_DIR` for
//! Claude Code, `CODEX_HOME` (a `config.toml` with a `model_provider`) for
//! Codex, `GOOGLE_GEMINI_BASE_URL` / `GEMINI_API_KEY` and
//! `~/.gemini/settings.json` for Gemini CLI.
//!
//! # Command lines
//!
//! `tools:` lists what the CLI may run **without asking** (there is nobody
//! to ask in a workflow). The router's builtin names map to each CLI's own
//! tools; for Claude Code and Gemini CLI any other name is passed through
//! as the CLI's own tool name (e.g. `Grep`, `google_web_search`).
//!
//! | router tool | Claude Code | Codex | Gemini CLI |
//! |---|---|---|---|
//! | `read_file` | `Read` | `--sandbox read-only` (the default) | `read_file` |
//! | `list_dir` | `Glob` | `--sandbox read-only` | `list_directory` |
//! | `write_file` | `Write`, `Edit` | `--sandbox workspace-write` | `write_file`, `replace` |
//! | `run_command` | `Bash` | `--dangerously-bypass-approvals-and-sandbox` | `run_shell_command` |
//!
//! - **claude**: `claude -p --output-format stream-json --verbose
//!   [--model=M] [--max-turns=N] [--append-system-prompt=S]
//!   [--allowedTools=T1,T2] -- PROMPT`. The system prompt is appended to Claude
//!   Code's own (which tells the model how to use its tools).
//! - **codex**: `codex exec --json --skip-git-repo-check [--model=M]
//!   [-c developer_instructions=S] (--sandbox MODE |
//!   --dangerously-bypass-approvals-and-sandbox) -- PROMPT`, stdin closed. Codex
//!   has no per-tool list: the most permissive tool listed picks the
//!   sandbox (table above); names it cannot map are an error.
//! - **gemini**: `gemini --output-format stream-json --skip-trust [--model=M]
//!   [--policy=FILE] --prompt=PROMPT`, where FILE holds [`Preset::policy_toml`] of the
//!   step's tools (written by the runner, mode `0o600` in a private `0o700` directory;
//!   `--allowed-tools` is deprecated since Gemini CLI 0.61), and where the system
//!   prompt, when given, is put before the prompt (`S\n\nPROMPT`): Gemini
//!   CLI has no flag for it (`GEMINI_SYSTEM_MD` would replace its whole
//!   system prompt, tool instructions included).
//!
//! Templated values (prompt, system prompt, model) are always one argv
//! element that no CLI reads as an option, even when they start with `-`:
//! after `--` (Claude Code's and Codex's positional prompt) or after `=`
//! (every option value). Checked against the real CLIs' parsers:
//! `crates/transcript-cli/tests/adversarial_prompts.rs`.
//!
//! Codex and Gemini CLI have no turn-limit flag: `max_turns` on those
//! presets is refused when the workflow is validated.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::agent::AgentRequest;
use crate::provider::AgentProvider;

/// A provider whose CLI the runner knows how to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Preset {
    /// Claude Code (`claude`).
    Claude,
    /// OpenAI Codex CLI (`codex`).
    Codex,
    /// Google Gemini CLI (`gemini`).
    Gemini,
}

/// Why a preset cannot build its command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PresetError {
    /// The CLI is not installed (nor named by its variable).
    #[error(
        "{executable} not found on PATH (nor named by {var}); install it with `npm install -g {package}`"
    )]
    NotInstalled {
        /// The executable looked for.
        executable: &'static str,
        /// The variable that can name it.
        var: &'static str,
        /// The npm package that ships it.
        package: &'static str,
    },
    /// `{var}` names a file that is not there.
    #[error("{var}={path} does not name a file")]
    BadBinVar {
        /// The variable.
        var: &'static str,
        /// Its value.
        path: String,
    },
    /// A listed tool has no equivalent in this CLI.
    #[error("the {provider} preset cannot map tool '{tool}' (it knows {known})")]
    UnknownTool {
        /// The preset's provider name.
        provider: &'static str,
        /// The tool.
        tool: String,
        /// The names it maps.
        known: String,
    },
    /// The step's tools are confined by a policy file the caller did not give
    /// ([`Preset::args_with_policy`]).
    #[error(
        "the {provider} preset confines tools with a policy file (Preset::policy_toml) and none was given"
    )]
    PolicyFileNeeded {
        /// The preset's provider name.
        provider: &'static str,
    },
    /// The CLI has no option for this step field.
    #[error("the {provider} preset has no {field} option (give a command: to set it yourself)")]
    Unsupported {
        /// The preset's provider name.
        provider: &'static str,
        /// The field.
        field: &'static str,
    },
}

impl Preset {
    /// The preset of a provider, when it has one.
    pub fn of(provider: transcript_providers::Provider) -> Option<Preset> {
        match provider {
            transcript_providers::Provider::Claude => Some(Preset::Claude),
            transcript_providers::Provider::Codex => Some(Preset::Codex),
            transcript_providers::Provider::Gemini => Some(Preset::Gemini),
            _ => None,
        }
    }

    /// The preset of an agent step's provider, when it has one.
    pub fn of_agent(provider: &AgentProvider) -> Option<Preset> {
        provider.known().and_then(Self::of)
    }

    /// The provider name (`claude`, `codex`, `gemini`).
    pub fn name(self) -> &'static str {
        self.executable()
    }

    /// The executable looked for on `PATH`.
    pub fn executable(self) -> &'static str {
        match self {
            Preset::Claude => "claude",
            Preset::Codex => "codex",
            Preset::Gemini => "gemini",
        }
    }

    /// The variable that names the binary.
    pub fn bin_var(self) -> &'static str {
        match self {
            Preset::Claude => "TRANSCRIPT_CLAUDE_BIN",
            Preset::Codex => "TRANSCRIPT_CODEX_BIN",
            Preset::Gemini => "TRANSCRIPT_GEMINI_BIN",
        }
    }

    /// The npm package that ships the CLI.
    pub fn npm_package(self) -> &'static str {
        match self {
            Preset::Claude => "@anthropic-ai/claude-code",
            Preset::Codex => "@openai/codex",
            Preset::Gemini => "@google/gemini-cli",
        }
    }

    /// Refuses step fields the CLI has no option for and tools it cannot
    /// map (checked when the workflow is validated).
    pub fn check(self, max_turns: Option<u32>, tools: &[String]) -> Result<(), PresetError> {
        if max_turns.is_some() && self != Preset::Claude {
            return Err(PresetError::Unsupported {
                provider: self.name(),
                field: "max_turns",
            });
        }
        self.tool_options(tools).map(drop)
    }

    /// The binary: the variable (from `env` first, then the process), else
    /// the executable on `env`'s `PATH` or the process's.
    pub fn locate(self, env: &BTreeMap<String, String>) -> Result<PathBuf, PresetError> {
        self.locate_with(&|k| {
            env.get(k)
                .map(OsString::from)
                .or_else(|| std::env::var_os(k))
        })
    }

    /// [`Preset::locate`] reading variables through `var`.
    pub fn locate_with(
        self,
        var: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<PathBuf, PresetError> {
        let name = self.bin_var();
        if let Some(bin) = var(name).filter(|b| !b.is_empty()) {
            let path = PathBuf::from(&bin);
            return if path.is_file() {
                Ok(path)
            } else {
                Err(PresetError::BadBinVar {
                    var: name,
                    path: path.display().to_string(),
                })
            };
        }
        let path = var("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|dir| dir.join(self.executable()))
            .find(|p| is_executable(p))
            .ok_or(PresetError::NotInstalled {
                executable: self.executable(),
                var: name,
                package: self.npm_package(),
            })
    }

    /// The arguments after the binary for `request` (see the module docs), for a step whose
    /// tools need no policy file ([`Preset::policy_toml`] is `None`; else
    /// [`PresetError::PolicyFileNeeded`]: see [`Preset::args_with_policy`]).
    pub fn args(self, request: &AgentRequest) -> Result<Vec<String>, PresetError> {
        self.args_with_policy(request, None)
    }

    /// [`Preset::args`] with the file holding [`Preset::policy_toml`] of the step's tools,
    /// which the caller wrote (Gemini: `--policy=<file>`; ignored by the other presets).
    pub fn args_with_policy(
        self,
        request: &AgentRequest,
        policy: Option<&Path>,
    ) -> Result<Vec<String>, PresetError> {
        self.check(request.max_turns, &request.tools)?;
        let tools = self.tool_options(&request.tools)?;
        let system = (!request.system_prompt.is_empty()).then_some(&request.system_prompt);
        let mut a: Vec<String> = Vec::new();
        let mut push = |items: &[&str]| a.extend(items.iter().map(|s| (*s).to_owned()));
        match self {
            Preset::Claude => {
                // `-p` is Claude Code's `--print` switch; the prompt is its
                // positional argument, after `--` so a prompt starting with
                // `-` stays a prompt. Values of options go after `=`.
                push(&["-p", "--output-format", "stream-json", "--verbose"]);
                if let Some(m) = &request.model {
                    push(&[&format!("--model={m}")]);
                }
                if let Some(n) = request.max_turns {
                    push(&[&format!("--max-turns={n}")]);
                }
                if let Some(s) = system {
                    push(&[&format!("--append-system-prompt={s}")]);
                }
                if !tools.is_empty() {
                    push(&[&format!("--allowedTools={}", tools.join(","))]);
                }
                push(&["--", &request.prompt]);
            }
            Preset::Codex => {
                push(&["exec", "--json", "--skip-git-repo-check"]);
                if let Some(m) = &request.model {
                    push(&[&format!("--model={m}")]);
                }
                if let Some(s) = system {
                    // `-c` parses a TOML value; a quoted string is always one.
                    let quoted = serde_json::Value::String(s.clone()).to_string();
                    push(&["-c", &format!("developer_instructions={quoted}")]);
                }
                push(&tools.iter().map(String::as_str).collect::<Vec<_>>());
                // `--` keeps a prompt starting with `-` a prompt.
                push(&["--", &request.prompt]);
            }
            Preset::Gemini => {
                push(&["--output-format", "stream-json", "--skip-trust"]);
                if let Some(m) = &request.model {
                    push(&[&format!("--model={m}")]);
                }
                // The tools are allowed by a policy file (#41 item 8), not the deprecated
                // `--allowed-tools`; `=` keeps a path starting with `-` the option's value.
                if !tools.is_empty() {
                    let file = policy.ok_or(PresetError::PolicyFileNeeded {
                        provider: self.name(),
                    })?;
                    push(&[&format!("--policy={}", file.display())]);
                }
                let prompt = match system {
                    Some(s) => format!("{s}\n\n{}", request.prompt),
                    None => request.prompt.clone(),
                };
                // `--prompt=` (yargs): a prompt starting with `-` stays the
                // option's value (`--prompt -x` would read `-x` as a flag).
                push(&[&format!("--prompt={prompt}")]);
            }
        }
        Ok(a)
    }

    /// Gemini CLI's policy file for `tools` (#41 item 8; passed by [`Preset::args_with_policy`]):
    /// Gemini CLI 0.61 warns "--allowed-tools cli argument and tools.allowed in settings.json
    /// are deprecated and will be removed in 1.0: Migrate to Policy Engine"; the Policy
    /// Engine reads rules only from TOML files (`--policy <file>`, no inline or environment
    /// form), so the runner must write this text to a private file and pass `--policy=<file>`
    /// instead of `--allowed-tools`. One rule allows the mapped tools without asking (what
    /// `--allowed-tools` did, at priority 300 of the user tier, as Gemini CLI ranks its own
    /// `--allowed-tools` rules); `None` for another preset or no tools. Names are TOML basic
    /// strings (JSON's quoting, valid TOML).
    pub fn policy_toml(self, tools: &[String]) -> Result<Option<String>, PresetError> {
        if self != Preset::Gemini {
            return Ok(None);
        }
        let names = self.tool_options(tools)?;
        if names.is_empty() {
            return Ok(None);
        }
        let quoted: Vec<String> = names
            .iter()
            .map(|n| serde_json::Value::String(n.clone()).to_string())
            .collect();
        Ok(Some(format!(
            "# The step's tools: run without asking (written by transcript).\n[[rule]]\n\
             toolName = [{}]\ndecision = \"allow\"\npriority = 300\n",
            quoted.join(", ")
        )))
    }

    /// `tools:` as this CLI's options: tool names (Claude, Gemini) or the
    /// sandbox arguments (Codex).
    fn tool_options(self, tools: &[String]) -> Result<Vec<String>, PresetError> {
        let mut names: Vec<String> = Vec::new();
        let mut add = |n: &str| {
            if !names.iter().any(|x| x == n) {
                names.push(n.to_owned());
            }
        };
        match self {
            Preset::Claude | Preset::Gemini => {
                for tool in tools {
                    let mapped: &[&str] = match (self, tool.as_str()) {
                        (Preset::Claude, "read_file") => &["Read"],
                        (Preset::Claude, "list_dir") => &["Glob"],
                        (Preset::Claude, "write_file") => &["Write", "Edit"],
                        (Preset::Claude, "run_command") => &["Bash"],
                        (Preset::Gemini, "list_dir") => &["list_directory"],
                        (Preset::Gemini, "write_file") => &["write_file", "replace"],
                        (Preset::Gemini, "run_command") => &["run_shell_command"],
                        (_, other) => {
                            add(other);
                            continue;
                        }
                    };
                    mapped.iter().for_each(|n| add(n));
                }
                Ok(names)
            }
            Preset::Codex => {
                // 0 read-only, 1 workspace-write, 2 no sandbox.
                let mut level = 0;
                for tool in tools {
                    level = level.max(match tool.as_str() {
                        "read_file" | "list_dir" => 0,
                        "write_file" => 1,
                        "run_command" => 2,
                        // MCP tools (`mcp__<server>…`) are allowed by the step's MCP proxy.
                        mcp if mcp.starts_with("mcp__") => 0,
                        other => {
                            return Err(PresetError::UnknownTool {
                                provider: self.name(),
                                tool: other.to_owned(),
                                known: "read_file, list_dir, write_file, run_command".into(),
                            });
                        }
                    });
                }
                Ok(match level {
                    0 => vec!["--sandbox".into(), "read-only".into()],
                    1 => vec!["--sandbox".into(), "workspace-write".into()],
                    _ => vec!["--dangerously-bypass-approvals-and-sandbox".into()],
                })
            }
        }
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn request(provider: &str) -> AgentRequest {
        AgentRequest {
            step: "s".into(),
            provider: provider.into(),
            command: vec![],
            prompt: "Read notes.txt".into(),
            system_prompt: String::new(),
            model: None,
            max_turns: None,
            tools: vec![],
            env: BTreeMap::new(),
            workspace: PathBuf::from("/w"),
            private_dirs: vec![],
            reach: vec![],
        }
    }

    fn strs(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn presets_exist_for_the_three_clis_only() {
        assert_eq!(
            Preset::of_agent(&crate::provider::AgentProvider::parse("claude")),
            Some(Preset::Claude)
        );
        assert_eq!(
            Preset::of_agent(&crate::provider::AgentProvider::parse("claude-code")),
            Some(Preset::Claude)
        );
        assert_eq!(
            Preset::of_agent(&crate::provider::AgentProvider::parse("codex")),
            Some(Preset::Codex)
        );
        assert_eq!(
            Preset::of_agent(&crate::provider::AgentProvider::parse("gemini")),
            Some(Preset::Gemini)
        );
        assert_eq!(
            Preset::of_agent(&crate::provider::AgentProvider::parse("openai")),
            None
        );
        assert_eq!(
            Preset::of_agent(&crate::provider::AgentProvider::parse("copilot")),
            None
        );
    }

    #[test]
    fn claude_argv_maps_every_field() {
        let mut r = request("claude");
        assert_eq!(
            Preset::Claude.args(&r).unwrap(),
            strs(&[
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--",
                "Read notes.txt"
            ])
        );
        r.model = Some("claude-sonnet-4-5".into());
        r.max_turns = Some(3);
        r.system_prompt = "Be terse.".into();
        r.tools = strs(&["read_file", "run_command", "write_file", "Grep", "Read"]);
        assert_eq!(
            Preset::Claude.args(&r).unwrap(),
            strs(&[
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--model=claude-sonnet-4-5",
                "--max-turns=3",
                "--append-system-prompt=Be terse.",
                "--allowedTools=Read,Bash,Write,Edit,Grep",
                "--",
                "Read notes.txt"
            ])
        );
    }

    #[test]
    fn codex_argv_picks_the_sandbox_from_the_tools() {
        let mut r = request("codex");
        assert_eq!(
            Preset::Codex.args(&r).unwrap(),
            strs(&[
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--sandbox",
                "read-only",
                "--",
                "Read notes.txt"
            ])
        );
        r.model = Some("gpt-5-codex".into());
        r.system_prompt = "Say \"hi\"\nfirst".into();
        r.tools = strs(&["read_file", "write_file"]);
        assert_eq!(
            Preset::Codex.args(&r).unwrap(),
            strs(&[
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--model=gpt-5-codex",
                "-c",
                "developer_instructions=\"Say \\\"hi\\\"\\nfirst\"",
                "--sandbox",
                "workspace-write",
                "--",
                "Read notes.txt"
            ])
        );
        r.tools.push("run_command".into());
        let args = Preset::Codex.args(&r).unwrap();
        assert!(args.contains(&"--dangerously-bypass-approvals-and-sandbox".to_owned()));
        assert!(!args.contains(&"--sandbox".to_owned()));
        r.tools = strs(&["Grep"]);
        let err = Preset::Codex.args(&r).unwrap_err();
        assert!(err.to_string().contains("cannot map tool 'Grep'"), "{err}");
    }

    #[test]
    fn gemini_argv_puts_the_system_prompt_before_the_prompt() {
        let mut r = request("gemini");
        r.model = Some("gemini-2.5-pro".into());
        r.system_prompt = "Be terse.".into();
        r.tools = strs(&["read_file", "run_command", "google_web_search"]);
        assert_eq!(
            Preset::Gemini
                .args_with_policy(&r, Some(Path::new("/p/policy.toml")))
                .unwrap(),
            strs(&[
                "--output-format",
                "stream-json",
                "--skip-trust",
                "--model=gemini-2.5-pro",
                "--policy=/p/policy.toml",
                "--prompt=Be terse.\n\nRead notes.txt"
            ])
        );
        // Tools without the policy file are refused, never passed unconfined.
        let err = Preset::Gemini.args(&r).unwrap_err();
        assert!(matches!(err, PresetError::PolicyFileNeeded { .. }), "{err}");
        r.tools.clear();
        assert!(Preset::Gemini.args(&r).is_ok());
    }

    #[test]
    fn a_prompt_starting_with_a_dash_is_never_an_option() {
        for preset in [Preset::Claude, Preset::Codex, Preset::Gemini] {
            let mut r = request("x");
            r.prompt = "--version -p x".into();
            r.system_prompt = "-s".into();
            r.model = Some("-m".into());
            let args = preset.args(&r).unwrap();
            let dashdash = args.iter().position(|a| a == "--");
            for (i, a) in args.iter().enumerate() {
                // A value starting with '-' is never an element of its own before `--`
                // (glued after an option's `=` it is that option's value).
                let value = a.starts_with('-')
                    && (a.contains("--version -p x") || a == "-s" || a == "-m")
                    && !a.starts_with("--prompt=");
                if value {
                    assert!(
                        dashdash.is_some_and(|d| i > d),
                        "{preset:?}: {a:?} could be read as an option: {args:?}"
                    );
                }
            }
            assert!(
                args.iter().any(|a| a.ends_with("--version -p x")),
                "{preset:?}: {args:?}"
            );
        }
    }

    #[test]
    fn max_turns_is_refused_where_the_cli_has_no_flag() {
        for p in [Preset::Codex, Preset::Gemini] {
            let err = p.check(Some(2), &[]).unwrap_err();
            assert_eq!(
                err,
                PresetError::Unsupported {
                    provider: p.name(),
                    field: "max_turns"
                }
            );
        }
        assert!(Preset::Claude.check(Some(2), &[]).is_ok());
    }

    #[test]
    fn a_missing_binary_names_the_npm_package() {
        let dir = tempfile::tempdir().unwrap();
        let mut env = BTreeMap::from([("PATH".to_owned(), dir.path().display().to_string())]);
        // Only the map: the test must not depend on the runner's own variables.
        let locate = |env: &BTreeMap<String, String>| {
            Preset::Codex.locate_with(&|k| env.get(k).map(OsString::from))
        };
        let err = locate(&env).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("npm install -g @openai/codex"), "{text}");
        assert!(text.contains("TRANSCRIPT_CODEX_BIN"), "{text}");
        // On PATH (executable), then named by the variable (which wins).
        let bin = dir.path().join("codex");
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        assert!(locate(&env).is_err(), "not executable");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(locate(&env).unwrap(), bin);
        let other = dir.path().join("my-codex");
        std::fs::write(&other, "").unwrap();
        env.insert("TRANSCRIPT_CODEX_BIN".into(), other.display().to_string());
        assert_eq!(locate(&env).unwrap(), other);
        env.insert("TRANSCRIPT_CODEX_BIN".into(), "/nope/codex".into());
        assert!(matches!(locate(&env), Err(PresetError::BadBinVar { .. })));
    }

    #[test]
    fn gemini_policy_allows_the_mapped_tools_as_toml() {
        let tools = strs(&["read_file", "run_command", "we\"ird"]);
        let text = Preset::Gemini.policy_toml(&tools).unwrap().unwrap();
        assert!(
            text.contains(
                "toolName = [\"read_file\", \"run_shell_command\", \"we\\\"ird\"]\ndecision = \"allow\"\npriority = 300\n"
            ),
            "{text}"
        );
        assert_eq!(Preset::Gemini.policy_toml(&[]).unwrap(), None);
        assert_eq!(Preset::Claude.policy_toml(&tools).unwrap(), None);
    }
}
