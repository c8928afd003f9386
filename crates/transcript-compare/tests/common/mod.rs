//! Hand-written runs for the library tests: events as the recorder writes them, decoded by
//! the domain's reader.
#![allow(dead_code, clippy::unwrap_used)]

use serde_json::{Value, json};
use transcript_compare::RunRecord;
use transcript_domain::{DecodedEvent, RunId, decode_str};

/// A run being written: its id and lines.
pub struct Run {
    pub id: String,
    pub parent: Option<String>,
    pub events: Vec<DecodedEvent>,
}

impl Run {
    pub fn new(id: &str) -> Self {
        let mut run = Run {
            id: id.to_owned(),
            parent: None,
            events: Vec::new(),
        };
        run.push(
            "run.started",
            "",
            0,
            json!({"name": "wf", "kind": "workflow"}),
            None,
        );
        run
    }

    pub fn child_of(id: &str, parent: &str) -> Self {
        let mut run = Run {
            id: id.to_owned(),
            parent: Some(parent.to_owned()),
            events: Vec::new(),
        };
        run.push(
            "run.started",
            "",
            0,
            json!({"name": "child", "kind": "workflow"}),
            None,
        );
        run
    }

    pub fn push(&mut self, ty: &str, path: &str, it: u64, payload: Value, child: Option<&str>) {
        let seq = self.events.len() + 1;
        let mut e = json!({"seq": seq, "run_id": self.id, "type": ty, "path": path,
            "iteration": it, "timestamp": format!("2026-05-28T10:00:{:02}.000Z", seq % 60),
            "payload": payload});
        if let Some(p) = &self.parent {
            e["parent_run_id"] = json!(p);
        }
        if let Some(c) = child {
            e["child_run_id"] = json!(c);
        }
        self.events.push(decode_str(&e.to_string()).unwrap().event);
    }

    pub fn start(&mut self, path: &str, it: u64, kind: &str) {
        let name = path.rsplit('.').next().unwrap();
        self.push(
            "step.started",
            path,
            it,
            json!({"name": name, "kind": kind}),
            None,
        );
    }

    pub fn end(&mut self, path: &str, it: u64, kind: &str, result: Value, error: Option<&str>) {
        let name = path.rsplit('.').next().unwrap();
        let mut p = json!({"name": name, "kind": kind, "result": result});
        if let Some(e) = error {
            p["error"] = json!(e);
        }
        self.push("step.completed", path, it, p, None);
    }

    /// A command step that printed `stdout` and exited with `code`.
    pub fn command(&mut self, path: &str, stdout: &str, code: i64) {
        self.start(path, 0, "command");
        let error = (code != 0).then(|| format!("command exited with code {code}"));
        self.end(
            path,
            0,
            "command",
            json!({"command": "make", "stdout": stdout, "exit_code": code}),
            error.as_deref(),
        );
    }

    /// An agent step: a prompt, then one assistant turn calling `tool` with `args` (a router
    /// call with `call_id`), then a final answer.
    pub fn agent(&mut self, path: &str, tool: &str, args: Value, call_id: &str, answer: &str) {
        self.start(path, 0, "agent");
        self.push(
            "message.user",
            path,
            0,
            json!({"role": "user", "blocks": [
            {"type": "text", "fidelity": "router", "text": "do it"}]}),
            None,
        );
        self.push(
            "message.assistant",
            path,
            0,
            json!({"role": "assistant", "model": "m",
            "usage": {"input_tokens": 100, "output_tokens": 10},
            "blocks": [{"type": "thinking", "fidelity": "agent_emitted", "thinking": "hmm"},
                {"type": "tool_use", "fidelity": "agent_emitted", "tool_name": tool,
                 "tool_id": call_id, "tool_input": args}]}),
            None,
        );
        self.push(
            "tool.call",
            path,
            0,
            json!({"name": tool, "call_id": call_id,
            "input": args, "output": null, "fidelity": "router"}),
            None,
        );
        self.push(
            "tool.result",
            path,
            0,
            json!({"name": tool, "call_id": call_id,
            "input": null, "output": "ok", "fidelity": "router"}),
            None,
        );
        self.push(
            "message.assistant",
            path,
            0,
            json!({"role": "assistant", "model": "m",
            "usage": {"input_tokens": 120, "output_tokens": 5},
            "blocks": [{"type": "text", "fidelity": "agent_emitted", "text": answer}]}),
            None,
        );
        self.end(path, 0, "agent", json!(answer), None);
    }

    /// One message of `role` on step `path` with `extra` fields (`provider`, `model`,
    /// `usage`, …) and `blocks` (each given `fidelity: agent_emitted` when it has none).
    pub fn message(&mut self, path: &str, role: &str, extra: Value, blocks: Value) {
        let mut payload = json!({"role": role});
        if let Value::Object(fields) = extra {
            for (k, v) in fields {
                payload[k] = v;
            }
        }
        let mut blocks = blocks;
        if let Value::Array(items) = &mut blocks {
            for b in items {
                if b.get("fidelity").is_none() {
                    b["fidelity"] = json!("agent_emitted");
                }
            }
        }
        payload["blocks"] = blocks;
        let ty = if role == "assistant" {
            "message.assistant"
        } else {
            "message.user"
        };
        self.push(ty, path, 0, payload, None);
    }

    /// A router call of `tool` with `args` answered by `output`.
    pub fn router_call(&mut self, path: &str, tool: &str, args: Value, id: &str, output: Value) {
        self.push(
            "tool.call",
            path,
            0,
            json!({"name": tool, "call_id": id, "input": args, "output": null, "fidelity": "router"}),
            None,
        );
        self.push(
            "tool.result",
            path,
            0,
            json!({"name": tool, "call_id": id, "input": null, "output": output, "fidelity": "router"}),
            None,
        );
    }

    pub fn complete(&mut self, error: Option<&str>) {
        let mut p = json!({"name": "wf", "kind": "workflow"});
        if let Some(e) = error {
            p["error"] = json!(e);
        }
        self.push("run.completed", "", 0, p, None);
    }

    /// The record, with child runs from `children`, priced at $1 per input token of model `m`.
    pub fn record(&self, children: &[&Run]) -> RunRecord {
        let price = |model: &str, u: &transcript_domain::Usage| {
            (model == "m").then(|| u.input_tokens.unwrap_or(0) as f64)
        };
        RunRecord::build(
            &self.events,
            &mut |id: RunId| {
                children
                    .iter()
                    .find(|c| c.id == id.to_string())
                    .map(|c| c.events.clone())
            },
            Some(&price),
        )
    }
}

pub const A: &str = "00000000-0000-4000-8000-00000000000a";
pub const B: &str = "00000000-0000-4000-8000-00000000000b";
pub const CA: &str = "00000000-0000-4000-8000-0000000000ca";
pub const CB: &str = "00000000-0000-4000-8000-0000000000cb";

/// A painter that paints nothing (the text views' tests read plain text).
pub struct Plain;

impl transcript_compare::Painter for Plain {
    fn paint(&self, _tone: transcript_compare::Tone, text: &str) -> String {
        text.to_owned()
    }
    fn clean(&self, text: &str) -> String {
        text.to_owned()
    }
    fn one_line(&self, text: &str) -> String {
        text.replace('\n', "\\n")
    }
}
