//! Test support: an in-memory recorder (seq assigned under a mutex, lines
//! encoded exactly as a writer would), a factory of them, and helpers to
//! decode what was written and compare trees.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use transcript_domain::tree::{RunTree, build_run_tree};
use transcript_domain::{
    Clock, DecodedEvent, EventDraft, EventType, ManualClock, PreEncoded, RecordError, Recorder,
    RecorderFactory, RunId, Seq, Subscription, Timestamp, decode_line,
};
use transcript_exec::{ExecNode, RunOutcome};

/// Stores canonical lines in memory.
pub struct MemoryRecorder {
    run_id: RunId,
    parent: Option<RunId>,
    clock: Arc<dyn Clock>,
    state: Mutex<(Seq, Vec<u8>, bool)>,
}

impl MemoryRecorder {
    pub fn new(run_id: RunId, parent: Option<RunId>, clock: Arc<dyn Clock>) -> Self {
        Self {
            run_id,
            parent,
            clock,
            state: Mutex::new((0, Vec::new(), false)),
        }
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.state.lock().unwrap().1.clone()
    }

    pub fn closed(&self) -> bool {
        self.state.lock().unwrap().2
    }
}

#[async_trait]
impl Recorder for MemoryRecorder {
    fn run_id(&self) -> RunId {
        self.run_id
    }
    fn parent_run_id(&self) -> Option<RunId> {
        self.parent
    }
    async fn record(&self, draft: EventDraft) -> Result<Seq, RecordError> {
        let pre = PreEncoded::new(self.run_id, self.parent, &draft)
            .map_err(|e| RecordError::Encode(e.to_string()))?;
        let mut st = self.state.lock().unwrap();
        if st.2 {
            return Err(RecordError::Closed);
        }
        st.0 += 1;
        let seq = st.0;
        let ts = self.clock.now();
        pre.write_line(seq, ts, &mut st.1);
        Ok(seq)
    }
    async fn subscribe(&self, _from: Option<Seq>) -> Result<Box<dyn Subscription>, RecordError> {
        Err(RecordError::Replay {
            requested: 0,
            reason: "memory recorder has no subscriptions".into(),
        })
    }
    async fn close(&self) -> Result<(), RecordError> {
        self.state.lock().unwrap().2 = true;
        Ok(())
    }
}

/// Creates memory recorders and keeps them by run id.
pub struct MemoryFactory {
    pub clock: Arc<dyn Clock>,
    pub runs: Mutex<Vec<Arc<MemoryRecorder>>>,
}

impl MemoryFactory {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            clock: Arc::new(ManualClock::stepping(ts0(), 1)),
            runs: Mutex::new(Vec::new()),
        })
    }

    pub fn recorder(&self, run_id: RunId) -> Option<Arc<MemoryRecorder>> {
        self.runs
            .lock()
            .unwrap()
            .iter()
            .find(|r| r.run_id == run_id)
            .cloned()
    }

    pub fn events(&self, run_id: RunId) -> Vec<DecodedEvent> {
        decode_all(&self.recorder(run_id).expect("run recorded").bytes())
    }

    pub fn tree(&self, run_id: RunId) -> RunTree {
        let events = self.events(run_id);
        build_run_tree(&events, &mut |id| {
            self.recorder(id).map(|r| decode_all(&r.bytes()))
        })
    }

    pub fn text(&self, run_id: RunId) -> String {
        String::from_utf8(self.recorder(run_id).unwrap().bytes()).unwrap()
    }
}

#[async_trait]
impl RecorderFactory for MemoryFactory {
    async fn create(
        &self,
        run_id: RunId,
        parent_run_id: Option<RunId>,
    ) -> Result<Arc<dyn Recorder>, RecordError> {
        let r = Arc::new(MemoryRecorder::new(
            run_id,
            parent_run_id,
            self.clock.clone(),
        ));
        self.runs.lock().unwrap().push(r.clone());
        Ok(r)
    }
}

pub fn ts0() -> Timestamp {
    Timestamp::parse("2026-06-08T08:00:00.000Z").unwrap()
}

/// Decodes every line; panics on anything that is not a valid line.
pub fn decode_all(bytes: &[u8]) -> Vec<DecodedEvent> {
    assert!(
        bytes.is_empty() || bytes.ends_with(b"\n"),
        "file ends mid-line"
    );
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let d = decode_line(l).unwrap_or_else(|e| panic!("bad line {e}"));
            assert!(d.warnings.is_empty(), "warnings: {:?}", d.warnings);
            d.event
        })
        .collect()
}

/// Event types in order.
pub fn types(events: &[DecodedEvent]) -> Vec<String> {
    events.iter().map(|e| e.kind.as_str().to_owned()).collect()
}

/// Seq 1..n, every start has a completion at the same path/iteration, and
/// run.started/run.completed bracket the file.
pub fn assert_well_formed(events: &[DecodedEvent]) {
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "seq gap");
    }
    assert_eq!(
        events.first().unwrap().kind.known(),
        Some(EventType::RunStarted)
    );
    assert_eq!(
        events.last().unwrap().kind.known(),
        Some(EventType::RunCompleted)
    );
    let mut open: HashMap<(String, u64), i64> = HashMap::new();
    for e in events {
        match e.kind.known() {
            Some(EventType::StepStarted | EventType::CallWorkflowStarted) => {
                *open.entry((e.path.clone(), e.iteration)).or_default() += 1
            }
            Some(EventType::StepCompleted | EventType::CallWorkflowCompleted) => {
                let c = open.entry((e.path.clone(), e.iteration)).or_default();
                *c -= 1;
                assert!(*c >= 0, "completion without start at {}", e.path);
            }
            _ => {}
        }
    }
    for ((p, i), c) in open {
        assert_eq!(c, 0, "step {p}#{i} started but never completed");
    }
}

/// The outline of an executed tree in the format of `RunTree::outline`.
pub fn exec_outline(outcome: &RunOutcome) -> String {
    fn go(nodes: &[ExecNode], depth: usize, out: &mut String) {
        for n in nodes {
            for _ in 0..depth {
                out.push_str("  ");
            }
            let status = n.status.as_str();
            out.push_str(&format!(
                "{}#{} {} {} {}\n",
                n.path, n.iteration, n.kind, n.name, status
            ));
            if let Some(child) = &n.child {
                go(&child.steps, depth + 1, out);
            }
            go(&n.children, depth + 1, out);
        }
    }
    let mut out = String::new();
    go(&outcome.steps, 0, &mut out);
    out
}

/// A fresh workspace directory.
pub fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

/// The repository's fixtures directory.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// The demo workflow's `stamp` step (the binary registers the same one): `"<label>#<index>"`
/// from its `with:` parameters.
pub fn with_stamp_step(
    builder: transcript_exec::ServiceBuilder,
) -> transcript_exec::ServiceBuilder {
    builder
        .custom_step(
            "stamp",
            Arc::new(transcript_exec::FnStep(
                |ctx: &transcript_exec::CustomStepContext| match ctx.param_text("label") {
                    label if label.is_empty() => Err("stamp needs a 'label'".into()),
                    label => Ok(serde_json::Value::String(format!(
                        "{label}#{}",
                        ctx.param_text("index")
                    ))),
                },
            )),
        )
        .unwrap()
}
