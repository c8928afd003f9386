//! Shared helpers of the end-to-end tests: the built binary, the repository
//! root, and the deterministic demo run command.
#![allow(dead_code, clippy::unwrap_used)]

pub mod html_page;
pub mod network;
pub mod otlp_receiver;
pub mod sandbox;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A finished command as a failing assertion shows it: exit code, stdout, stderr.
pub fn describe(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// The built `transcript` binary, with the environment the tests control.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_transcript"));
    c.env_remove("NO_COLOR").env_remove("TRANSCRIPT_STORAGE");
    c
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Lossy UTF-8 of captured output.
pub fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

/// The demo workflow run deterministically (run id
/// `00000000-0000-4000-8000-000000000001`) into `storage`, working in `workspace`.
pub fn demo_command(storage: &Path, workspace: &Path) -> Command {
    let mut c = bin();
    c.current_dir(repo())
        .args([
            "run",
            "fixtures/workflows/demo.yaml",
            "--deterministic",
            "--storage",
        ])
        .arg(storage)
        .arg("--workspace")
        .arg(workspace);
    c
}

/// The demo's root run id in deterministic mode.
pub const DEMO_RUN_ID: &str = "00000000-0000-4000-8000-000000000001";

#[allow(dead_code)] // not every test binary uses it
/// Waits until process `pid` (not our child) has exited, at most `limit`: its pidfd becomes
/// readable when it does (pidfd_open(2)). A process already gone returns at once.
pub fn wait_until_exited(pid: &str, limit: std::time::Duration) {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    let Some(pid) = pid.parse().ok().and_then(Pid::from_raw) else {
        panic!("bad pid {pid}")
    };
    let Ok(fd) = pidfd_open(pid, PidfdFlags::empty()) else {
        return; // ESRCH: gone (and reaped) already
    };
    let timeout = Timespec {
        tv_sec: limit.as_secs() as i64,
        tv_nsec: 0,
    };
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let _ = poll(&mut fds, Some(&timeout));
}

#[allow(dead_code)] // not every test binary uses it
/// The folder of real provider captures (`$TRANSCRIPT_REAL_FIXTURES`, relative to the
/// repository when relative), or `None` with a "skipped" line when unset. Under `CI=true` an
/// unset variable is a failure, and a variable naming no folder always is.
pub fn real_fixtures() -> Option<std::path::PathBuf> {
    let Some(dir) = std::env::var_os("TRANSCRIPT_REAL_FIXTURES") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "under CI=true a skip is a failure: TRANSCRIPT_REAL_FIXTURES is unset"
        );
        eprintln!("skipped: TRANSCRIPT_REAL_FIXTURES is unset");
        return None;
    };
    let mut dir = std::path::PathBuf::from(dir);
    if dir.is_relative() {
        dir = repo().join(dir);
    }
    assert!(
        dir.is_dir(),
        "TRANSCRIPT_REAL_FIXTURES={} is not a directory",
        dir.display()
    );
    Some(dir)
}

#[allow(dead_code)] // not every test binary uses it
/// One real capture, `<folder>/<name>` under [`real_fixtures`]; a missing file is a failure.
pub fn real_fixture(folder: &str, name: &str) -> Option<std::path::PathBuf> {
    let path = real_fixtures()?.join(folder).join(name);
    assert!(path.is_file(), "{} is missing", path.display());
    Some(path)
}

/// A workflow run by the binary with a real agent CLI, as the real-agent tests start it.
pub struct RealCliRun<'a> {
    /// The workflow's YAML text.
    pub workflow: &'a str,
    /// Where the workflow file is written.
    pub dir: &'a Path,
    /// The run's workspace.
    pub workspace: &'a Path,
    /// The sandbox's environment for the CLI (its home, its endpoint…).
    pub env: &'a [(String, String)],
    /// The variable the step sets itself from the `endpoint` input (left out of `env`).
    pub step_var: &'a str,
    /// The variable naming the CLI's binary, and the binary.
    pub bin: (&'a str, &'a Path),
    /// The scripted server's endpoint, passed as the `endpoint` input.
    pub endpoint: &'a str,
}

impl RealCliRun<'_> {
    /// Runs the workflow into a fresh storage: the storage, the run id and the binary's output.
    /// Panics naming the workflow and stderr when the binary prints no run id.
    pub fn run(&self) -> (tempfile::TempDir, String, std::process::Output) {
        let wf = self.dir.join("workflow.yaml");
        // An agent's endpoint is the author's, never data (#48): the workflow names the
        // scripted server literally (the `endpoint` input stays declared and given).
        std::fs::write(
            &wf,
            self.workflow.replace("{{inputs.endpoint}}", self.endpoint),
        )
        .unwrap();
        let storage = tempfile::tempdir().unwrap();
        let output = bin()
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(
                self.env
                    .iter()
                    .filter(|(k, _)| k != self.step_var)
                    .map(|(k, v)| (k, v)),
            )
            .env(self.bin.0, self.bin.1)
            .arg("run")
            .arg(&wf)
            .arg("--storage")
            .arg(storage.path())
            .arg("--workspace")
            .arg(self.workspace)
            .arg("--input")
            .arg(format!("endpoint={}", self.endpoint))
            .output()
            .unwrap();
        let run_id = text(&output.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("run_id: "))
            .unwrap_or_else(|| panic!("no run id\n{}\n{}", self.workflow, text(&output.stderr)))
            .to_owned();
        (storage, run_id, output)
    }
}

/// `transcript run --deterministic --color never [--redact]` of `wf` into `storage` with
/// `ws` as the workspace; asserts the exit code and returns stdout and stderr.
pub fn run_workflow(
    wf: &Path,
    storage: &Path,
    ws: &Path,
    redact: bool,
    code: i32,
) -> (String, String) {
    let mut c = bin();
    c.args(["run", "--deterministic", "--color", "never"]);
    if redact {
        c.arg("--redact");
    }
    let out = c
        .arg("--storage")
        .arg(storage)
        .arg("--workspace")
        .arg(ws)
        .arg(wf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(code), "{}", text(&out.stderr));
    (text(&out.stdout), text(&out.stderr))
}

/// The run id a `transcript run` printed (`run_id: …`).
pub fn printed_run_id(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("run_id: ").map(str::to_owned))
        .unwrap()
}

/// The cli's `mcp_fault_server` example (the testkit's fault-injecting MCP server as a
/// process): in `TRANSCRIPT_EXAMPLES_DIR` when set (`cargo xtask coverage` builds the examples
/// apart), else beside the test, where `cargo test -p transcript-cli` builds it.
pub fn mcp_fault_server() -> PathBuf {
    let dir = match std::env::var_os("TRANSCRIPT_EXAMPLES_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let exe = std::env::current_exe().unwrap();
            exe.parent()
                .and_then(Path::parent)
                .unwrap()
                .join("examples")
        }
    };
    let path = dir.join("mcp_fault_server");
    assert!(
        path.exists(),
        "{} is missing: `cargo test -p transcript-cli` builds the examples",
        path.display()
    );
    path
}

/// Waits for `child` at most `limit`; past that it is SIGKILLed and the test fails naming
/// `what` ("the run", "tail -f").
pub fn finish(
    child: std::process::Child,
    limit: std::time::Duration,
    what: &str,
) -> std::process::Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("{what} did not end within {limit:?}");
        }
    }
}

/// Waits (at most 30 s, listing every 100 ms) until `list --all --json` on `storage` says
/// `status` of run `run`: a NATS run's lease lapses on the servers' clock, a lease after its
/// runner's last renewal.
pub fn await_status(storage: &str, run: &str, status: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let o = bin()
            .args(["list", "--all", "--json", "--storage", storage])
            .output()
            .unwrap();
        let list: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        let now = list
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["run_id"] == run)
            .map(|r| r["status"].clone());
        if now.as_ref().is_some_and(|s| s == status) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run {run} in {storage} is {now:?}, not {status}, after 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The variable of each CLI that carries the scripted server's endpoint (or, for Codex, its
/// config) in a step's `env:`; everything else of the sandbox goes in the runner's
/// environment.
pub fn step_env_var(cli: transcript_testkit::agent_cli::AgentCli) -> &'static str {
    use transcript_testkit::agent_cli::AgentCli;
    match cli {
        AgentCli::Claude => "ANTHROPIC_BASE_URL",
        AgentCli::Codex => "CODEX_HOME",
        AgentCli::Gemini => "GOOGLE_GEMINI_BASE_URL",
    }
}

/// What [`record_real`] recorded: the storage, the run id, the binary's output, and the
/// sandbox's environment without the step's endpoint variable (what a replay runs with).
pub struct Recorded {
    /// The storage the run was recorded to.
    pub storage: tempfile::TempDir,
    /// The run's id.
    pub run_id: String,
    /// The binary's output.
    pub output: std::process::Output,
    /// The sandbox's environment for a replay.
    pub env: Vec<(String, String)>,
    /// The scripted server's endpoint the workflow named.
    pub endpoint: String,
}

/// Records `workflow` (its `{{inputs.endpoint}}` the scripted `server`) with the real `cli`
/// (`bin`) in the sandbox `sb`, as the replay tests record a run.
pub fn record_real(
    cli: transcript_testkit::agent_cli::AgentCli,
    bin: &Path,
    sb: &transcript_testkit::agent_cli::AgentSandbox,
    server: &transcript_testkit::model_server::ModelServer,
    workflow: &str,
) -> Recorded {
    let options = transcript_testkit::agent_cli::CliOptions::default();
    let inv = sb.invocation(cli, bin, server, "unused", &options).unwrap();
    let var = step_env_var(cli);
    let endpoint = inv.env.iter().find(|(k, _)| k == var).unwrap().1.clone();
    let (storage, run_id, output) = RealCliRun {
        workflow,
        dir: &sb.tmp(),
        workspace: &sb.work(),
        env: &inv.env,
        step_var: var,
        bin: (cli.bin_var(), bin),
        endpoint: &endpoint,
    }
    .run();
    let env = inv.env.into_iter().filter(|(k, _)| k != var).collect();
    Recorded {
        storage,
        run_id,
        output,
        env,
        endpoint,
    }
}

/// `transcript replay <run_id> --storage S --workspace W` in a real CLI's sandbox: only `PATH`,
/// the sandbox's environment `env` and the variable naming the CLI's binary `program` reach it;
/// the caller adds its own arguments.
pub fn real_replay(
    (cli, program): (transcript_testkit::agent_cli::AgentCli, &Path),
    env: &[(String, String)],
    run_id: &str,
    (storage, work): (&Path, &Path),
) -> std::process::Command {
    let mut cmd = bin();
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(cli.bin_var(), program)
        .arg("replay")
        .arg(run_id)
        .arg("--storage")
        .arg(storage)
        .arg("--workspace")
        .arg(work);
    cmd
}

/// The picks a seed makes, one per request: `true` passes (about two in three). The fork
/// tests' scripted servers answer by them, so trials differ and the pass count is known.
pub fn seeded_picks(seed: u64, n: usize) -> Vec<bool> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            !(x >> 33).is_multiple_of(3)
        })
        .collect()
}

/// The JSON document a command printed after its progress lines (from the first line that
/// opens an object).
pub fn json_after_progress(stdout: &str) -> serde_json::Value {
    let json = stdout
        .lines()
        .skip_while(|l| !l.starts_with('{'))
        .collect::<Vec<_>>()
        .join("\n");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: no JSON document in\n{stdout}"))
}

/// Codex's `config.toml` text with its model provider's `base_url` pointing at `url` (the
/// rest as it was).
pub fn codex_config_with_base_url(config: &str, url: &str) -> String {
    let start = config.find("base_url = ").unwrap();
    let end = start + config[start..].find('\n').unwrap();
    format!(
        "{}base_url = {}{}",
        &config[..start],
        serde_json::Value::from(url),
        &config[end..]
    )
}
