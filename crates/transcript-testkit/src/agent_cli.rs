//! Running the real agent CLIs (Claude Code, Codex, Gemini CLI) against a [`ModelServer`]:
//! where to find them, and the configuration files, environment and arguments that make each
//! one talk to the server only, quickly and without touching the user's home.
//!
//! What each CLI needs, measured with the versions in [`AgentCli::pinned_version`]:
//!
//! - **Claude Code**: `ANTHROPIC_BASE_URL=<url>`, `ANTHROPIC_API_KEY`, `CLAUDE_CONFIG_DIR` (its
//!   session log goes to `<dir>/projects/<cwd-slug>/<session>.jsonl`), `DISABLE_TELEMETRY=1`,
//!   `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`, `DISABLE_AUTOUPDATER=1`; `claude -p PROMPT
//!   --output-format stream-json --verbose --allowedTools Read,Bash`. It then calls only
//!   `POST /v1/messages?beta=true` (streaming; after a cut stream one non-streaming retry).
//!   `CLAUDE_CODE_MAX_RETRIES=0` stops its retries (by default ~10 with backoff: minutes).
//! - **Codex**: `CODEX_HOME/config.toml` with `model_provider = "testkit"` and
//!   `[model_providers.testkit]` (`base_url = <url>/v1`, `env_key`, `wire_api = "responses"`,
//!   `request_max_retries`/`stream_max_retries = 0` to stop its 4 retries); `codex exec --json
//!   --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox PROMPT` with stdin closed.
//!   It calls only `POST /v1/responses`. An unknown model name yields its "Model metadata ...
//!   not found" warning item.
//! - **Gemini CLI**: `~/.gemini/settings.json` must choose `security.auth.selectedType =
//!   "gemini-api-key"` (with `GOOGLE_GEMINI_BASE_URL` set and no choice it picks "gateway" and
//!   exits: "Invalid auth method selected."); `general.maxAttempts = 1` stops its 10 retries
//!   (5–30 s backoff); `GEMINI_CLI_NO_RELAUNCH=true` saves ~2 s of start-up; a fixed `--model`
//!   avoids the default "auto" router, which first asks a classifier model through a
//!   non-streaming `:generateContent`. `gemini --model M --output-format stream-json --yolo
//!   --skip-trust --prompt PROMPT`; it then calls only `:streamGenerateContent?alt=sse`.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::json;
use tempfile::TempDir;

use crate::model_server::{ModelServer, Provider};

/// One of the real agent CLIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AgentCli {
    /// Claude Code.
    Claude,
    /// OpenAI Codex CLI.
    Codex,
    /// Google Gemini CLI.
    Gemini,
}

/// The variable that makes a missing CLI a test failure instead of a skip.
pub const REQUIRE_AGENTS_VAR: &str = "TRANSCRIPT_REQUIRE_AGENTS";

/// Whether a missing agent CLI fails the test instead of skipping it:
/// `TRANSCRIPT_REQUIRE_AGENTS=1`, or `CI=true` (under CI a skip is a failure).
pub fn agents_required() -> bool {
    std::env::var(REQUIRE_AGENTS_VAR).is_ok_and(|v| v == "1")
        || std::env::var("CI").is_ok_and(|v| v == "true")
}

impl AgentCli {
    /// Every CLI.
    pub const ALL: [AgentCli; 3] = [AgentCli::Claude, AgentCli::Codex, AgentCli::Gemini];

    /// The executable's name (`claude`, `codex`, `gemini`), also the capture folder name.
    pub fn executable(self) -> &'static str {
        match self {
            AgentCli::Claude => "claude",
            AgentCli::Codex => "codex",
            AgentCli::Gemini => "gemini",
        }
    }

    /// The variable naming its binary (`TRANSCRIPT_CLAUDE_BIN`, ...).
    pub fn bin_var(self) -> &'static str {
        match self {
            AgentCli::Claude => "TRANSCRIPT_CLAUDE_BIN",
            AgentCli::Codex => "TRANSCRIPT_CODEX_BIN",
            AgentCli::Gemini => "TRANSCRIPT_GEMINI_BIN",
        }
    }

    /// The npm package that ships it.
    pub fn npm_package(self) -> &'static str {
        match self {
            AgentCli::Claude => "@anthropic-ai/claude-code",
            AgentCli::Codex => "@openai/codex",
            AgentCli::Gemini => "@google/gemini-cli",
        }
    }

    /// The version `.ci/install-agent-clis` pins (a test keeps the two equal).
    pub fn pinned_version(self) -> &'static str {
        match self {
            AgentCli::Claude => "2.1.331",
            AgentCli::Codex => "0.169.0",
            AgentCli::Gemini => "0.61.0",
        }
    }

    /// The API it speaks to the server.
    pub fn provider(self) -> Provider {
        match self {
            AgentCli::Claude => Provider::Anthropic,
            AgentCli::Codex => Provider::OpenAiResponses,
            AgentCli::Gemini => Provider::Gemini,
        }
    }

    /// The binary: `$TRANSCRIPT_<CLI>_BIN`, else the first match on `PATH`, else the cache
    /// folder `.ci/install-agent-clis` installs into (`$TRANSCRIPT_AGENT_CLIS_DIR` or
    /// `$HOME/.cache/transcript-agent-clis`, under `node_modules/.bin`).
    pub fn locate(self) -> Option<PathBuf> {
        if let Some(bin) = std::env::var_os(self.bin_var()) {
            return Some(PathBuf::from(bin));
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        let cache = std::env::var_os("TRANSCRIPT_AGENT_CLIS_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(|h| PathBuf::from(h).join(".cache/transcript-agent-clis"))
            })
            .map(|d| d.join("node_modules/.bin"));
        std::env::split_paths(&path)
            .chain(cache)
            .map(|dir| dir.join(self.executable()))
            .find(|p| p.is_file())
    }

    /// For tests: the binary, or `None` after printing `skipped: <cli> not installed (run
    /// .ci/install-agent-clis)`.
    ///
    /// # Panics
    /// When the CLI is missing and `TRANSCRIPT_REQUIRE_AGENTS=1` or `CI=true` (under CI a
    /// skip is a failure): the test then fails.
    pub fn require(self) -> Option<PathBuf> {
        let found = self.locate();
        if found.is_none() {
            assert!(
                !agents_required(),
                "{} not installed and {REQUIRE_AGENTS_VAR}=1 or CI=true (run \
                 .ci/install-agent-clis to install {}@{}, or set {})",
                self.executable(),
                self.npm_package(),
                self.pinned_version(),
                self.bin_var()
            );
            println!(
                "skipped: {} not installed (run .ci/install-agent-clis)",
                self.executable()
            );
        }
        found
    }
}

/// How to configure a run.
#[derive(Debug, Clone, Default)]
pub struct CliOptions {
    /// Let the CLI retry failed requests as it does by default (minutes of backoff for Claude
    /// Code and Gemini CLI). Off by default: a failure then takes one request (Claude Code
    /// still makes one non-streaming attempt after a cut stream).
    pub retries: bool,
    /// The model to ask for; `None` uses [`CliOptions::default_model`].
    pub model: Option<String>,
}

impl CliOptions {
    /// The model asked for when none is given: Claude Code's own default; for Codex a name it
    /// does not know (so it prints its metadata warning, as with any custom model); for Gemini
    /// CLI a fixed model, which keeps it off the "auto" router.
    pub fn default_model(cli: AgentCli) -> Option<&'static str> {
        match cli {
            AgentCli::Claude => None,
            AgentCli::Codex => Some("testkit-model"),
            AgentCli::Gemini => Some("gemini-2.5-pro"),
        }
    }

    fn model(&self, cli: AgentCli) -> Option<String> {
        self.model
            .clone()
            .or_else(|| CliOptions::default_model(cli).map(str::to_owned))
    }
}

/// A throw-away home for one CLI run: `home/` (`HOME`), `work/` (the working directory),
/// `config/` (`CLAUDE_CONFIG_DIR` / `CODEX_HOME`) and `tmp/` (`TMPDIR`); removed when dropped.
#[derive(Debug)]
pub struct AgentSandbox {
    root: TempDir,
}

impl AgentSandbox {
    /// Creates the directories under a new temporary directory.
    pub fn new() -> io::Result<AgentSandbox> {
        let root = tempfile::tempdir()?;
        for dir in ["home", "work", "config", "tmp"] {
            std::fs::create_dir(root.path().join(dir))?;
        }
        Ok(AgentSandbox { root })
    }

    /// `HOME` of the run.
    pub fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    /// The working directory (the agent's workspace).
    pub fn work(&self) -> PathBuf {
        self.root.path().join("work")
    }

    /// `CLAUDE_CONFIG_DIR` or `CODEX_HOME`.
    pub fn config(&self) -> PathBuf {
        self.root.path().join("config")
    }

    /// `TMPDIR` (Gemini CLI writes error reports, Claude Code its sockets there).
    pub fn tmp(&self) -> PathBuf {
        self.root.path().join("tmp")
    }

    /// The session logs Claude Code wrote under `config/projects/<cwd-slug>/`.
    pub fn claude_session_logs(&self) -> Vec<PathBuf> {
        let projects = std::fs::read_dir(self.config().join("projects"));
        let mut logs: Vec<PathBuf> = projects
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|p| std::fs::read_dir(p.path()).into_iter().flatten().flatten())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        logs.sort();
        logs
    }

    /// Writes what `cli` needs to talk to `server` (Codex's `config.toml`, Gemini CLI's
    /// `settings.json`) and returns the run's environment and arguments around `prompt`.
    pub fn invocation(
        &self,
        cli: AgentCli,
        bin: &Path,
        server: &ModelServer,
        prompt: &str,
        options: &CliOptions,
    ) -> io::Result<Invocation> {
        let mut env = vec![
            ("HOME".to_owned(), path_text(&self.home())),
            ("TMPDIR".to_owned(), path_text(&self.tmp())),
            ("TERM".to_owned(), "dumb".to_owned()),
            ("NO_COLOR".to_owned(), "1".to_owned()),
        ];
        let part = match cli {
            AgentCli::Claude => self.claude_part(server, prompt, options),
            AgentCli::Codex => self.codex_part(server, prompt, options)?,
            AgentCli::Gemini => self.gemini_part(server, prompt, options)?,
        };
        env.extend(part.env);
        Ok(Invocation {
            program: bin.to_path_buf(),
            args: part.args,
            env,
            cwd: self.work(),
        })
    }

    /// Claude Code: the server as `ANTHROPIC_BASE_URL`, its config dir in the sandbox, no
    /// telemetry or updates; stream-json output with `Read` and `Bash` allowed.
    fn claude_part(&self, server: &ModelServer, prompt: &str, options: &CliOptions) -> CliPart {
        let mut part = CliPart::default();
        part.set("ANTHROPIC_BASE_URL", server.url());
        part.set("ANTHROPIC_API_KEY", "sk-ant-testkit");
        part.set("CLAUDE_CONFIG_DIR", path_text(&self.config()));
        part.set("DISABLE_TELEMETRY", "1");
        part.set("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
        part.set("DISABLE_AUTOUPDATER", "1");
        if !options.retries {
            part.set("CLAUDE_CODE_MAX_RETRIES", "0");
        }
        part.args(&["--output-format", "stream-json", "--verbose"]);
        part.args(&["--allowedTools", "Read,Bash"]);
        if let Some(model) = options.model(AgentCli::Claude) {
            part.args(&["--model", &model]);
        }
        part.args(&["-p", prompt]);
        part
    }

    /// Codex: a `config.toml` in `CODEX_HOME` naming the server as a Responses-API provider;
    /// `exec --json` with approvals and the sandbox off (the sandbox is this directory).
    fn codex_part(
        &self,
        server: &ModelServer,
        prompt: &str,
        options: &CliOptions,
    ) -> io::Result<CliPart> {
        let retries = if options.retries {
            String::new()
        } else {
            "request_max_retries = 0\nstream_max_retries = 0\n".to_owned()
        };
        let model = options
            .model(AgentCli::Codex)
            .unwrap_or_else(|| "testkit-model".to_owned());
        let config = format!(
            "model = {}\nmodel_provider = \"testkit\"\n\n[model_providers.testkit]\n\
             name = \"testkit\"\nbase_url = {}\nenv_key = \"TESTKIT_API_KEY\"\n\
             wire_api = \"responses\"\n{retries}",
            json!(model),
            json!(server.openai_base_url())
        );
        std::fs::write(self.config().join("config.toml"), config)?;
        let mut part = CliPart::default();
        part.set("CODEX_HOME", path_text(&self.config()));
        part.set("TESTKIT_API_KEY", "sk-testkit");
        part.args(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            prompt,
        ]);
        Ok(part)
    }

    /// Gemini CLI: `~/.gemini/settings.json` (API-key auth, no statistics, telemetry or
    /// updates) and the server as `GOOGLE_GEMINI_BASE_URL`; stream-json output in yolo mode.
    fn gemini_part(
        &self,
        server: &ModelServer,
        prompt: &str,
        options: &CliOptions,
    ) -> io::Result<CliPart> {
        let dir = self.home().join(".gemini");
        std::fs::create_dir_all(&dir)?;
        let mut general = json!({"enableAutoUpdate": false, "enableAutoUpdateNotification": false});
        if !options.retries {
            general["maxAttempts"] = json!(1);
        }
        let settings = json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false},
            "general": general,
        });
        std::fs::write(dir.join("settings.json"), settings.to_string())?;
        let mut part = CliPart::default();
        part.set("GOOGLE_GEMINI_BASE_URL", server.url());
        part.set("GEMINI_API_KEY", "testkit-key");
        part.set("GEMINI_CLI_NO_RELAUNCH", "true");
        if let Some(model) = options.model(AgentCli::Gemini) {
            part.args(&["--model", &model]);
        }
        part.args(&["--output-format", "stream-json", "--yolo", "--skip-trust"]);
        part.args(&["--prompt", prompt]);
        Ok(part)
    }
}

/// One CLI's own part of an invocation: the environment it adds after the sandbox's
/// (`HOME`, `TMPDIR`, `TERM`, `NO_COLOR`) and all its arguments, in order.
#[derive(Default)]
struct CliPart {
    env: Vec<(String, String)>,
    args: Vec<String>,
}

impl CliPart {
    fn set(&mut self, key: &str, value: impl Into<String>) {
        self.env.push((key.to_owned(), value.into()));
    }

    fn args(&mut self, args: &[&str]) {
        self.args.extend(args.iter().map(|a| (*a).to_owned()));
    }
}

fn path_text(p: &Path) -> String {
    p.display().to_string()
}

/// A prepared CLI run.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// The CLI binary.
    pub program: PathBuf,
    /// Its arguments (the prompt included).
    pub args: Vec<String>,
    /// The whole environment besides `PATH` (home, temp and config dirs, server URL, keys).
    pub env: Vec<(String, String)>,
    /// The working directory.
    pub cwd: PathBuf,
}

impl Invocation {
    /// The command: cleared environment plus `PATH` and [`Invocation::env`], stdin closed (Codex
    /// otherwise waits for more input), run under coreutils `timeout` so that a hang ends after
    /// `limit_secs` (exit 124) instead of blocking the test.
    pub fn command(&self, limit_secs: u64) -> Command {
        let mut cmd = Command::new("timeout");
        cmd.arg("-k")
            .arg("5")
            .arg(limit_secs.to_string())
            .arg(&self.program)
            .args(&self.args)
            .current_dir(&self.cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model_server::Script;

    #[test]
    fn pinned_versions_equal_the_install_script() {
        let script = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/install-agent-clis"),
        )
        .unwrap();
        for (cli, var) in [
            (AgentCli::Claude, "CLAUDE_CODE_VERSION"),
            (AgentCli::Codex, "CODEX_VERSION"),
            (AgentCli::Gemini, "GEMINI_CLI_VERSION"),
        ] {
            let line = format!("{var}=\"{}\"", cli.pinned_version());
            assert!(script.contains(&line), "{line} in .ci/install-agent-clis");
            assert!(script.contains(cli.npm_package()), "{}", cli.npm_package());
        }
    }

    #[test]
    fn invocations_point_each_cli_at_the_server_and_write_its_config() {
        let server = ModelServer::start(Script::new([])).unwrap();
        let sb = AgentSandbox::new().unwrap();
        let opts = CliOptions::default();
        let env_of = |inv: &Invocation, k: &str| {
            inv.env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        };
        let claude = sb
            .invocation(AgentCli::Claude, Path::new("claude"), &server, "hi", &opts)
            .unwrap();
        assert_eq!(env_of(&claude, "ANTHROPIC_BASE_URL"), Some(server.url()));
        assert_eq!(
            env_of(&claude, "CLAUDE_CODE_MAX_RETRIES").as_deref(),
            Some("0")
        );
        assert_eq!(claude.args.last().map(String::as_str), Some("hi"));
        let codex = sb
            .invocation(AgentCli::Codex, Path::new("codex"), &server, "hi", &opts)
            .unwrap();
        let config = std::fs::read_to_string(sb.config().join("config.toml")).unwrap();
        assert!(
            config.contains(&format!("base_url = \"{}/v1\"", server.url())),
            "{config}"
        );
        assert!(config.contains("request_max_retries = 0"), "{config}");
        assert_eq!(codex.args[0], "exec");
        let gemini = sb
            .invocation(AgentCli::Gemini, Path::new("gemini"), &server, "hi", &opts)
            .unwrap();
        let settings = std::fs::read_to_string(sb.home().join(".gemini/settings.json")).unwrap();
        assert!(settings.contains("gemini-api-key"), "{settings}");
        assert!(gemini.args.contains(&"gemini-2.5-pro".to_owned()));
        assert_eq!(gemini.cwd, sb.work());
    }
}
