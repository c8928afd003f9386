//! `cargo xtask e2e-phoenix`: end to end against a real tracing backend,
//! outside CI. Creates a virtual environment with Arize Phoenix from PyPI
//! (`arize-phoenix`) when missing, starts `phoenix serve` on 127.0.0.1 with
//! a temporary working directory and its telemetry off, runs the demo,
//! exports it with `transcript export --format otlp` configured through the
//! standard environment only (`OTEL_EXPORTER_OTLP_ENDPOINT`, and
//! `OTEL_RESOURCE_ATTRIBUTES=openinference.project.name=…` to choose the
//! Phoenix project), polls Phoenix's REST API until the spans arrive in that
//! project or a deadline passes, checks the span tree, the span kinds Phoenix
//! shows (CHAIN, AGENT, TOOL, LLM: none unknown) and the per-call `chat`
//! spans (under an agent, with a model), that a cost arrives (a chat span's
//! `llm.cost.total`, or the CLI's own total on its agent span: the demo's
//! model has no price in the table, its CLI reports one), and always stops the server (a guard kills it on every
//! exit path).

use std::collections::{BTreeSet, HashMap};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Errors of the end-to-end run.
pub type Error = Box<dyn std::error::Error>;

const STARTUP: Duration = Duration::from_secs(180);
/// The Phoenix project the export selects through `OTEL_RESOURCE_ATTRIBUTES`.
const PROJECT: &str = "transcript-e2e";
/// The project of the live export (the same demo run, recorded again with live export on).
const LIVE_PROJECT: &str = "transcript-e2e-live";
const ARRIVAL: Duration = Duration::from_secs(90);

/// Kills the server when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> Result<u16, Error> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A GET on 127.0.0.1 (30 s timeout); returns status and body. Any status is an answer:
/// the caller decides what is success.
fn get(port: u16, path: &str) -> Result<(u16, Vec<u8>), Error> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        .http_status_as_error(false)
        // 127.0.0.1 only: never through a proxy from the environment.
        .proxy(None)
        .build()
        .into();
    let mut response = agent
        .get(format!("http://127.0.0.1:{port}{path}"))
        .header("Accept", "application/json")
        .call()?;
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .with_config()
        .limit(64 << 20)
        .read_to_vec()?;
    Ok((status, body))
}

fn ensure_phoenix(venv: &Path) -> Result<PathBuf, Error> {
    let phoenix = venv.join("bin/phoenix");
    if phoenix.exists() {
        return Ok(phoenix);
    }
    println!(
        "e2e-phoenix: creating {} with arize-phoenix (takes a few minutes)",
        venv.display()
    );
    let ok = Command::new("python3")
        .args(["-m", "venv"])
        .arg(venv)
        .status()?
        .success()
        && Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "arize-phoenix"])
            .status()?
            .success();
    if !ok || !phoenix.exists() {
        return Err("could not install arize-phoenix into the virtual environment".into());
    }
    Ok(phoenix)
}

/// The CLI through cargo: the release build, or the dev build when `E2E_PHOENIX_DEV=1` (a
/// quicker check on a loaded machine; the spans are the same).
fn transcript(root: &Path) -> Command {
    let mut c = Command::new(env!("CARGO"));
    c.current_dir(root).args(["run", "--quiet"]);
    if std::env::var_os("E2E_PHOENIX_DEV").is_none_or(|v| v != "1") {
        c.arg("--release");
    }
    c.args(["-p", "transcript-cli", "--"]);
    c
}

fn run_checked(mut cmd: Command, what: &str) -> Result<String, Error> {
    let out = cmd.stderr(Stdio::inherit()).output()?;
    if !out.status.success() {
        return Err(format!("{what} failed ({})", out.status).into());
    }
    Ok(String::from_utf8(out.stdout)?)
}

fn step_names(tree: &Value, out: &mut Vec<String>) {
    for key in ["steps", "children"] {
        if let Some(steps) = tree[key].as_array() {
            for s in steps {
                if let Some(n) = s["name"].as_str() {
                    out.push(n.to_owned());
                }
                step_names(s, out);
            }
        }
    }
    if tree["child"].is_object() {
        step_names(&tree["child"], out);
    }
}

/// Runs the end-to-end check; returns the process exit code.
pub fn e2e_phoenix(root: &Path) -> Result<i32, Error> {
    let venv = root.join("target/phoenix-venv");
    let phoenix = ensure_phoenix(&venv)?;
    let work = std::env::temp_dir().join(format!("transcript-phoenix-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let (port, grpc) = (free_port()?, free_port()?);
    println!(
        "e2e-phoenix: starting phoenix serve on 127.0.0.1:{port} (working dir {})",
        work.display()
    );
    let server = Server(
        Command::new(&phoenix)
            .arg("serve")
            .env("PHOENIX_WORKING_DIR", work.join("phoenix"))
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", grpc.to_string())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .env("DO_NOT_TRACK", "1")
            .stdout(std::fs::File::create(work.join("phoenix.log"))?)
            .stderr(Stdio::null())
            .spawn()?,
    );
    let result = check(root, &work, port);
    drop(server);
    println!("e2e-phoenix: server stopped");
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn check(root: &Path, work: &Path, port: u16) -> Result<i32, Error> {
    wait_until_healthy(port)?;
    let storage = work.join("transcripts");
    let (run_id, expected) = record_and_export(root, &storage, work, port)?;
    let spans = poll_spans(port, PROJECT, expected)?;

    let mut tree = transcript(root);
    tree.args(["tree", &run_id, "--json", "--storage"])
        .arg(&storage);
    let tree: Value = serde_json::from_str(&run_checked(tree, "tree")?)?;
    let mut names = Vec::new();
    step_names(&tree, &mut names);

    let by_id: HashMap<&str, &Value> = spans
        .iter()
        .filter_map(|s| Some((s["context"]["span_id"].as_str()?, s)))
        .collect();
    let mut failures = check_tree(&spans, &names, &by_id);
    failures.extend(check_default_project_empty(port)?);
    failures.extend(check_kinds_and_calls(&spans, &by_id));
    failures.extend(check_live_export(root, work, port, expected, &spans)?);
    let calls = spans
        .iter()
        .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with("chat")))
        .count();
    if failures.is_empty() {
        println!(
            "e2e-phoenix: ok: {} spans in project {PROJECT} (the same from the live export in {LIVE_PROJECT}), 1 trace, 1 root, {} steps, tool spans under steps, child runs under call_workflow, error status on the failing branch, every span of a known kind, {calls} chat spans under agents",
            spans.len(),
            names.len()
        );
        Ok(0)
    } else {
        for f in &failures {
            eprintln!("e2e-phoenix: FAIL: {f}");
        }
        Ok(1)
    }
}

/// Waits for Phoenix's health check (at most [`STARTUP`]).
fn wait_until_healthy(port: u16) -> Result<(), Error> {
    let started = Instant::now();
    while !matches!(get(port, "/healthz"), Ok((200, _))) {
        if started.elapsed() > STARTUP {
            return Err(format!("phoenix did not become healthy within {STARTUP:?}").into());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    println!(
        "e2e-phoenix: healthy after {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Records the demo workflow (deterministic) into `storage` and exports it to Phoenix over
/// OTLP, configured through the environment only. Returns the run id and how many spans the
/// `otlp-json` export of the same run holds.
fn record_and_export(
    root: &Path,
    storage: &Path,
    work: &Path,
    port: u16,
) -> Result<(String, usize), Error> {
    let mut run = transcript(root);
    run.args([
        "run",
        "fixtures/workflows/demo.yaml",
        "--deterministic",
        "--storage",
    ])
    .arg(storage)
    .arg("--workspace")
    .arg(work.join("workspace"));
    let out = run_checked(run, "the demo run")?;
    let run_id = out
        .lines()
        .find_map(|l| l.strip_prefix("run_id: "))
        .ok_or("no run id printed")?
        .to_owned();
    let mut json = transcript(root);
    json.args(["export", &run_id, "--format", "otlp-json", "--storage"])
        .arg(storage);
    let expected: Value = serde_json::from_str(&run_checked(json, "otlp-json export")?)?;
    let expected = expected["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .map_or(0, Vec::len);
    // Configured through the environment only: the endpoint, and the project as a resource
    // attribute (no --endpoint flag).
    let mut export = transcript(root);
    export
        .args(["export", &run_id, "--format", "otlp", "--storage"])
        .arg(storage)
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        )
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            format!("openinference.project.name={PROJECT}"),
        )
        .env("OTEL_SERVICE_NAME", "transcript-e2e");
    run_checked(export, "the OTLP export")?;
    Ok((run_id, expected))
}

/// The trace's shape: one root, one trace, a span per step, tool spans under steps, the
/// child run under its call_workflow step, the failing branch in error.
fn check_tree(spans: &[Value], names: &[String], by_id: &HashMap<&str, &Value>) -> Vec<String> {
    let name_of = |id: &str| by_id.get(id).and_then(|s| s["name"].as_str()).unwrap_or("");
    let mut failures = Vec::new();
    let roots: Vec<&Value> = spans.iter().filter(|s| s["parent_id"].is_null()).collect();
    if roots.len() != 1 || roots[0]["name"] != "invoke_workflow demo" {
        failures.push(format!(
            "expected one root `invoke_workflow demo`, got {:?}",
            roots.iter().map(|s| &s["name"]).collect::<Vec<_>>()
        ));
    }
    let traces: BTreeSet<&str> = spans
        .iter()
        .filter_map(|s| s["context"]["trace_id"].as_str())
        .collect();
    if traces.len() != 1 {
        failures.push(format!("expected one trace, got {}", traces.len()));
    }
    let span_names: Vec<&str> = spans.iter().filter_map(|s| s["name"].as_str()).collect();
    for n in names {
        if !span_names.iter().any(|s| s.ends_with(&format!(" {n}"))) {
            failures.push(format!("no span for step {n}"));
        }
    }
    for s in spans {
        let name = s["name"].as_str().unwrap_or("");
        let parent = s["parent_id"].as_str().map(name_of).unwrap_or("");
        if name.starts_with("execute_tool")
            && (parent.is_empty() || parent.starts_with("invoke_workflow"))
        {
            failures.push(format!(
                "tool span {name} is not under a step (parent {parent:?})"
            ));
        }
        if name == "invoke_workflow child" && !parent.contains("child") {
            failures.push(format!(
                "child run span under {parent:?}, not its call_workflow step"
            ));
        }
        if name.ends_with(" flaky") && s["status_code"] != "ERROR" {
            failures.push(format!(
                "failing branch flaky has status {}",
                s["status_code"]
            ));
        }
    }
    failures
}

/// The project came from OTEL_RESOURCE_ATTRIBUTES: nothing landed in the default one.
fn check_default_project_empty(port: u16) -> Result<Option<String>, Error> {
    let (status, body) = get(port, "/v1/projects/default/spans?limit=1000")?;
    let in_default = if status == 200 {
        serde_json::from_slice::<Value>(&body)?["data"]
            .as_array()
            .map_or(0, Vec::len)
    } else {
        0
    };
    Ok((in_default != 0)
        .then(|| format!("{in_default} spans in the default project, not in {PROJECT}")))
}

/// The demo recorded again, exported live (environment only, no flag): Phoenix shows the
/// same tree as from the stored export. Not `--deterministic`: Phoenix keeps one span per
/// span id, and the same run id would give the same ids. So trees are compared by name,
/// parent's name, kind and status.
fn check_live_export(
    root: &Path,
    work: &Path,
    port: u16,
    expected: usize,
    spans: &[Value],
) -> Result<Option<String>, Error> {
    let mut live = transcript(root);
    live.args(["run", "fixtures/workflows/demo.yaml", "--storage"])
        .arg(work.join("live-transcripts"))
        .arg("--workspace")
        .arg(work.join("live-workspace"))
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        )
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            format!("openinference.project.name={LIVE_PROJECT}"),
        );
    run_checked(live, "the live run")?;
    let live = poll_spans(port, LIVE_PROJECT, expected)?;
    Ok((shape(&live) != shape(spans)).then(|| {
        format!(
            "live export differs from the stored one: {} vs {} spans",
            live.len(),
            spans.len()
        )
    }))
}

/// A trace as sorted `name < parent's name kind status` lines, comparable across span ids.
fn shape(spans: &[Value]) -> Vec<String> {
    let names: HashMap<&str, &str> = spans
        .iter()
        .filter_map(|s| Some((s["context"]["span_id"].as_str()?, s["name"].as_str()?)))
        .collect();
    let mut shape: Vec<String> = spans
        .iter()
        .map(|s| {
            let parent = s["parent_id"]
                .as_str()
                .and_then(|p| names.get(p))
                .unwrap_or(&"");
            format!(
                "{} < {parent} {} {}",
                s["name"], s["span_kind"], s["status_code"]
            )
        })
        .collect();
    shape.sort();
    shape
}

/// Polls the spans of `project` until `expected` have arrived (or [`ARRIVAL`] passes).
fn poll_spans(port: u16, project: &str, expected: usize) -> Result<Vec<Value>, Error> {
    let polled = Instant::now();
    let spans = loop {
        let (status, body) = get(port, &format!("/v1/projects/{project}/spans?limit=1000"))?;
        let spans: Vec<Value> = if status == 200 {
            serde_json::from_slice::<Value>(&body)?["data"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        if spans.len() >= expected {
            break spans;
        }
        if polled.elapsed() > ARRIVAL {
            return Err(format!(
                "{project}: {} of {expected} spans arrived within {ARRIVAL:?}",
                spans.len()
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    println!(
        "e2e-phoenix: {} spans arrived in {project} after {:.1}s",
        spans.len(),
        polled.elapsed().as_secs_f64()
    );
    Ok(spans)
}

/// The kind Phoenix shows for each span (from `openinference.span.kind`) matches its GenAI
/// operation, and each per-call `chat` span sits under an agent span with a model.
fn check_kinds_and_calls(spans: &[Value], by_id: &HashMap<&str, &Value>) -> Vec<String> {
    let name_of = |id: &str| by_id.get(id).and_then(|s| s["name"].as_str()).unwrap_or("");
    let mut failures = Vec::new();
    let mut with_cost = 0;
    for s in spans {
        let name = s["name"].as_str().unwrap_or("");
        let kind = s["span_kind"].as_str().unwrap_or("");
        let expected = match name.split(' ').next().unwrap_or("") {
            "invoke_agent" => "AGENT",
            "execute_tool" => "TOOL",
            "chat" => "LLM",
            _ => "CHAIN",
        };
        let attrs = &s["attributes"];
        if attrs["llm.cost.total"].is_number()
            || attrs["transcript.usage.reported_cost_usd"].is_number()
        {
            with_cost += 1;
        }
        if !kind.eq_ignore_ascii_case(expected) {
            failures.push(format!("span {name} has kind {kind:?}, not {expected}"));
        }
        if expected == "LLM" {
            let parent = s["parent_id"].as_str().map(name_of).unwrap_or("");
            if !parent.starts_with("invoke_agent") {
                failures.push(format!("chat span under {parent:?}, not an agent"));
            }
            if name != "chat" && attrs["gen_ai.request.model"].as_str().is_none() {
                failures.push(format!("chat span {name} without gen_ai.request.model"));
            }
        }
    }
    if !spans
        .iter()
        .any(|s| s["name"].as_str().is_some_and(|n| n.starts_with("chat ")))
    {
        failures.push("no chat span with a model".to_owned());
    }
    if with_cost == 0 {
        failures.push(
            "no span with a cost (llm.cost.total on a chat span, or the CLI's reported total on its agent span; the demo reports one)"
                .to_owned(),
        );
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_reads_status_and_body_of_any_answer() {
        use wiremock::matchers::{header, method, path};
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(async {
            let server = MockServer::start().await;
            Mock::given(method("GET"))
                .and(path("/healthz"))
                .and(header("accept", "application/json"))
                .respond_with(ResponseTemplate::new(503).set_body_string("starting"))
                .expect(1)
                .mount(&server)
                .await;
            server
        });
        let port = server.address().port();
        let (status, body) = get(port, "/healthz").unwrap();
        assert_eq!((status, body.as_slice()), (503, b"starting".as_slice()));
        // wiremock checks `expect(1)` when the server is dropped.
        drop(server);
    }

    #[test]
    fn step_names_walk_children_and_child_runs() {
        let tree = serde_json::json!({"steps": [
            {"name": "a", "children": [{"name": "b"}]},
            {"name": "call", "children": [], "child": {"steps": [{"name": "c"}]}}
        ]});
        let mut names = Vec::new();
        step_names(&tree, &mut names);
        assert_eq!(names, ["a", "b", "call", "c"]);
    }

    #[test]
    fn kinds_and_chat_spans_are_checked() {
        let span = |id: &str, parent: Option<&str>, name: &str, kind: &str, attrs: Value| {
            serde_json::json!({"name": name, "span_kind": kind, "parent_id": parent,
                "context": {"span_id": id}, "attributes": attrs})
        };
        let good = vec![
            span("1", None, "invoke_workflow demo", "CHAIN", Value::Null),
            span("2", Some("1"), "invoke_agent a", "AGENT", Value::Null),
            span(
                "3",
                Some("2"),
                "chat m",
                "LLM",
                serde_json::json!({"gen_ai.request.model": "m", "llm.cost.total": 0.1}),
            ),
            span("4", Some("2"), "execute_tool t", "TOOL", Value::Null),
            span("5", Some("1"), "command c", "CHAIN", Value::Null),
        ];
        let by_id = |spans: &[Value]| -> Vec<String> {
            let map: HashMap<&str, &Value> = spans
                .iter()
                .filter_map(|s| Some((s["context"]["span_id"].as_str()?, s)))
                .collect();
            check_kinds_and_calls(spans, &map)
        };
        assert_eq!(by_id(&good), Vec::<String>::new());
        let mut bad = good.clone();
        bad[4]["span_kind"] = "UNKNOWN".into();
        bad[2]["parent_id"] = "1".into();
        let failures = by_id(&bad);
        assert_eq!(failures.len(), 2, "{failures:?}");
        // The old attribute on a chat span is no cost a backend sums.
        let mut costless = good.clone();
        costless[2]["attributes"] =
            serde_json::json!({"gen_ai.request.model": "m", "transcript.usage.cost_usd": 0.1});
        assert_eq!(by_id(&costless).len(), 1);
        // The CLI's own total on the agent span counts.
        costless[1]["attributes"] =
            serde_json::json!({"transcript.usage.reported_cost_usd": 0.001});
        assert_eq!(by_id(&costless), Vec::<String>::new());
    }
}
