//! Subprocesses end with their process group (#17 item 4): a command step,
//! a `run_command` tool call and a CLI agent that started a background
//! child leave nothing running after cancellation or a timeout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Map;
use tokio_util::sync::CancellationToken;
use transcript_exec::{ExecutionService, RunOutcome, Status, Workflow, WorkflowSet};

use support::*;

/// Starts `sleep 30` in the background, writes its pid, waits for it.
const SPAWNS_GRANDCHILD: &str = "sleep 30 & echo $! > pidfile; wait";

fn service(ws: &Path) -> ExecutionService {
    ExecutionService::deterministic_builder(ws, ts0())
        .recorder_factory(MemoryFactory::new())
        .kill_grace(Duration::from_millis(300))
        .build()
        .unwrap()
}

fn set_of(yaml: &str) -> WorkflowSet {
    WorkflowSet::new("w.yaml", Workflow::from_yaml(yaml, "w.yaml").unwrap())
}

/// Polls until `cond` holds; fails after a generous bound.
async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "gave up waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn read_pid(ws: &Path) -> Option<u32> {
    std::fs::read_to_string(ws.join("pidfile"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// Gone, or a zombie nobody reaps (PID 1 in a container may not): dead.
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
    }
}

/// Runs `set`, cancelling once the grandchild's pid is written (when
/// `cancel_on_pid`); returns the outcome and the grandchild's pid.
async fn run_and_find_grandchild(
    ws: PathBuf,
    set: WorkflowSet,
    cancel_on_pid: bool,
) -> (RunOutcome, u32) {
    let svc = service(&ws);
    let cancel = CancellationToken::new();
    let run = {
        let cancel = cancel.clone();
        tokio::spawn(async move { svc.run(&set, Map::new(), cancel).await.unwrap() })
    };
    wait_until("the pidfile", || read_pid(&ws).is_some()).await;
    let pid = read_pid(&ws).unwrap();
    assert!(!is_dead(pid), "the grandchild runs while the step runs");
    if cancel_on_pid {
        cancel.cancel();
    }
    let out = run.await.unwrap();
    (out, pid)
}

async fn assert_grandchild_ends(out: &RunOutcome, pid: u32, status: Status, error: &str) {
    assert_eq!(out.status, status, "{:?}", out.error);
    assert!(
        out.steps[0].error.as_deref().unwrap_or("").contains(error),
        "{:?}",
        out.steps[0].error
    );
    wait_until("the grandchild to end", || is_dead(pid)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_command_step_ends_its_grandchildren() {
    let (_d, ws) = workspace();
    let yaml = format!(
        "name: w\nsteps:\n  - name: c\n    type: command\n    command: \"{SPAWNS_GRANDCHILD}\"\n"
    );
    let (out, pid) = run_and_find_grandchild(ws, set_of(&yaml), true).await;
    assert_grandchild_ends(&out, pid, Status::Cancelled, "cancelled").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_out_command_step_ends_its_grandchildren() {
    let (_d, ws) = workspace();
    let yaml = format!(
        "name: w\nsteps:\n  - name: c\n    type: command\n    timeout_ms: 3000\n    command: \"{SPAWNS_GRANDCHILD}\"\n"
    );
    let (out, pid) = run_and_find_grandchild(ws, set_of(&yaml), false).await;
    assert_grandchild_ends(&out, pid, Status::Failed, "timed out after 3000ms").await;
}

/// The leader records SIGTERM's arrival in `trapfile` and waits on; its
/// background child ignores SIGTERM, so only SIGKILL ends it.
const TRAPS_TERM_CHILD_IGNORES: &str = "trap 'echo term > trapfile' TERM; (trap '' TERM; exec sleep 30) & echo $! > pidfile; wait; wait";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_ignoring_sigterm_gets_sigkill_after_the_grace() {
    let (_d, ws) = workspace();
    let yaml = format!(
        "name: w\nsteps:\n  - name: c\n    type: command\n    command: \"{TRAPS_TERM_CHILD_IGNORES}\"\n"
    );
    // A grace far longer than the few polls below need.
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(MemoryFactory::new())
        .kill_grace(Duration::from_secs(3))
        .build()
        .unwrap();
    let cancel = CancellationToken::new();
    let set = set_of(&yaml);
    let run = {
        let cancel = cancel.clone();
        tokio::spawn(async move { svc.run(&set, Map::new(), cancel).await.unwrap() })
    };
    wait_until("the pidfile", || read_pid(&ws).is_some()).await;
    let pid = read_pid(&ws).unwrap();
    cancel.cancel();
    // SIGTERM came first: the leader lived to run its trap...
    wait_until("the TERM trap", || ws.join("trapfile").exists()).await;
    // ...and the TERM-ignoring child outlives it: no SIGKILL came with it.
    assert!(!is_dead(pid), "SIGKILL came before the grace ended");
    assert!(!run.is_finished(), "the run waits out the grace");
    let out = run.await.unwrap();
    // Only SIGKILL ends the child, and it came once the grace was over.
    assert_grandchild_ends(&out, pid, Status::Cancelled, "cancelled").await;
}

/// The leader records SIGTERM's arrival in `trapfile` and exits.
const TRAPS_TERM: &str =
    "trap 'echo term > trapfile; exit 0' TERM; sleep 30 & echo $! > pidfile; wait";

/// #30 item 1: cancelling a `run_command` tool call ends its group through
/// the grace (SIGTERM, time to clean up), not with an immediate SIGKILL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_run_command_tool_gets_the_kill_grace() {
    let (_d, ws) = workspace();
    let yaml = format!(
        "name: w\nsteps:\n  - name: c\n    type: operation\n    tool: run_command\n    input: {{ command: \"{TRAPS_TERM}\" }}\n"
    );
    let (out, pid) = run_and_find_grandchild(ws.clone(), set_of(&yaml), true).await;
    assert_grandchild_ends(&out, pid, Status::Cancelled, "cancelled").await;
    // The run returned after the leader was reaped: its trap ran or never will.
    assert_eq!(
        std::fs::read_to_string(ws.join("trapfile")).ok().as_deref(),
        Some("term\n"),
        "the TERM trap never ran: the group was killed without its grace"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_run_command_tool_ends_its_grandchildren() {
    let (_d, ws) = workspace();
    let yaml = format!(
        "name: w\nsteps:\n  - name: c\n    type: operation\n    tool: run_command\n    input: {{ command: \"{SPAWNS_GRANDCHILD}\" }}\n"
    );
    let (out, pid) = run_and_find_grandchild(ws, set_of(&yaml), true).await;
    assert_grandchild_ends(&out, pid, Status::Cancelled, "cancelled").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_cli_agent_ends_its_grandchildren() {
    let (_d, ws) = workspace();
    let yaml = format!(
        "name: w\nsteps:\n  - name: c\n    type: agent\n    provider: claude\n    prompt: hi\n    command: [\"sh\", \"-c\", \"{SPAWNS_GRANDCHILD}\"]\n"
    );
    let (out, pid) = run_and_find_grandchild(ws, set_of(&yaml), true).await;
    assert_grandchild_ends(&out, pid, Status::Cancelled, "cancelled").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_out_cli_agent_ends_its_grandchildren() {
    let (_d, ws) = workspace();
    let yaml = format!(
        "name: w\nsteps:\n  - name: c\n    type: agent\n    provider: claude\n    prompt: hi\n    timeout_ms: 3000\n    command: [\"sh\", \"-c\", \"{SPAWNS_GRANDCHILD}\"]\n"
    );
    let (out, pid) = run_and_find_grandchild(ws, set_of(&yaml), false).await;
    assert_grandchild_ends(&out, pid, Status::Failed, "timed out").await;
}

/// #30 item 4: an agent that closes its stdout and lingers (waiting on a
/// TERM-ignoring child) is still ended as a group on cancellation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_cli_agent_that_closed_stdout_ends_its_grandchildren() {
    let (_d, ws) = workspace();
    let script = "exec >&-; (trap '' TERM; exec sleep 60) & echo $! > pidfile; wait";
    let yaml = format!(
        "name: w\nsteps:\n  - name: c\n    type: agent\n    provider: claude\n    prompt: hi\n    command: [\"sh\", \"-c\", \"{script}\"]\n"
    );
    let svc = service(&ws);
    let cancel = CancellationToken::new();
    let set = set_of(&yaml);
    let run = {
        let cancel = cancel.clone();
        tokio::spawn(async move { svc.run(&set, Map::new(), cancel).await.unwrap() })
    };
    wait_until("the pidfile", || read_pid(&ws).is_some()).await;
    let pid = read_pid(&ws).unwrap();
    cancel.cancel();
    // A bound far above the 300 ms grace and far below the child's 60 s:
    // the old code waited for the agent without watching cancellation.
    let out = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the run ignored its cancellation while the agent lingered")
        .unwrap();
    assert_grandchild_ends(&out, pid, Status::Cancelled, "cancelled").await;
}

/// #30 (lost errors): what a command step ran is on its `step.started`,
/// so a step cancelled before it completed still records it (the command
/// and the names of the variables it got; their values may be secrets).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_command_step_records_what_ran_on_step_started() {
    let (_d, ws) = workspace();
    let yaml = format!(
        "name: w\nsteps:\n  - name: c\n    type: command\n    env: {{ GREETING: hello-value }}\n    command: \"{SPAWNS_GRANDCHILD}\"\n"
    );
    let factory = MemoryFactory::new();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .kill_grace(Duration::from_millis(300))
        .build()
        .unwrap();
    let cancel = CancellationToken::new();
    let set = set_of(&yaml);
    let run = {
        let cancel = cancel.clone();
        tokio::spawn(async move { svc.run(&set, Map::new(), cancel).await.unwrap() })
    };
    wait_until("the pidfile", || read_pid(&ws).is_some()).await;
    let pid = read_pid(&ws).unwrap();
    cancel.cancel();
    let out = run.await.unwrap();
    assert_grandchild_ends(&out, pid, Status::Cancelled, "cancelled").await;
    // Read back as raw JSON lines, not through the code under test.
    let lines: Vec<serde_json::Value> = factory
        .text(out.run_id)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let started: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["type"] == "step.started" && l["path"] == "c")
        .collect();
    assert_eq!(started.len(), 1, "{lines:#?}");
    assert_eq!(
        started[0]["payload"]["result"],
        serde_json::json!({"command": SPAWNS_GRANDCHILD, "env": ["GREETING"]}),
    );
    assert!(
        !factory.text(out.run_id).contains("hello-value"),
        "an environment value reached the transcript"
    );
}
