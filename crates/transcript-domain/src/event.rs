//! The `ExchangeEvent` envelope (writer side) and its canonical encoding.

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::ids::{RunId, Seq};
use crate::payload::Payload;
use crate::timestamp::Timestamp;
use crate::vocab::EventType;

/// One transcript line, as written.
///
/// Fields serialize in 000's wire order: `seq`, `run_id`, `parent_run_id`,
/// `child_run_id` (both omitted when absent), `type` (derived from the
/// payload variant), `path`, `iteration`, `timestamp`, `payload`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExchangeEvent {
    /// Per-file sequence number, from 1.
    pub seq: Seq,
    /// The run this file belongs to.
    pub run_id: RunId,
    /// The invoking run, on every event of a child run.
    pub parent_run_id: Option<RunId>,
    /// The spawned run, on `step.call_workflow.*` in the parent.
    pub child_run_id: Option<RunId>,
    /// Dot-separated step path; `""` for run-level events.
    pub path: String,
    /// Zero-based index of the innermost enclosing loop (0 outside loops).
    pub iteration: u64,
    /// Emission time (assigned together with `seq`, decision 15).
    pub timestamp: Timestamp,
    /// The typed payload; determines `type`.
    pub payload: Payload,
}

impl ExchangeEvent {
    /// The event type (derived from the payload).
    pub const fn event_type(&self) -> EventType {
        self.payload.event_type()
    }

    /// Appends the canonical line (compact JSON and `\n`) to `out`.
    pub fn encode_line(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        let pre = PreEncoded::from_parts(
            self.run_id,
            self.parent_run_id,
            self.child_run_id,
            &self.path,
            self.iteration,
            &self.payload,
        )?;
        pre.write_line(self.seq, self.timestamp, out);
        Ok(())
    }

    /// The canonical line as a `String` (with the trailing `\n`).
    pub fn to_line(&self) -> Result<String, serde_json::Error> {
        let mut out = Vec::with_capacity(256);
        self.encode_line(&mut out)?;
        // serde_json only produces UTF-8.
        String::from_utf8(out).map_err(|e| serde::ser::Error::custom(e.to_string()))
    }
}

impl Serialize for ExchangeEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let len = 7
            + usize::from(self.parent_run_id.is_some())
            + usize::from(self.child_run_id.is_some());
        let mut s = serializer.serialize_struct("ExchangeEvent", len)?;
        s.serialize_field("seq", &self.seq)?;
        s.serialize_field("run_id", &self.run_id)?;
        if let Some(parent) = &self.parent_run_id {
            s.serialize_field("parent_run_id", parent)?;
        } else {
            s.skip_field("parent_run_id")?;
        }
        if let Some(child) = &self.child_run_id {
            s.serialize_field("child_run_id", child)?;
        } else {
            s.skip_field("child_run_id")?;
        }
        s.serialize_field("type", self.event_type().as_str())?;
        s.serialize_field("path", &self.path)?;
        s.serialize_field("iteration", &self.iteration)?;
        s.serialize_field("timestamp", &self.timestamp)?;
        s.serialize_field("payload", &self.payload)?;
        s.end()
    }
}

/// What a caller submits to a [`crate::Recorder`]: everything but `seq`,
/// `timestamp`, `run_id` and `parent_run_id`, which the recorder owns.
#[derive(Debug, Clone, PartialEq)]
pub struct EventDraft {
    /// The spawned run (only on `step.call_workflow.*`).
    pub child_run_id: Option<RunId>,
    /// Dot-separated step path; `""` for run-level events.
    pub path: String,
    /// Innermost loop iteration.
    pub iteration: u64,
    /// The payload.
    pub payload: Payload,
}

impl EventDraft {
    /// A draft at `path` / `iteration`.
    pub fn new(path: impl Into<String>, iteration: u64, payload: Payload) -> Self {
        Self {
            child_run_id: None,
            path: path.into(),
            iteration,
            payload,
        }
    }

    /// A run-level draft (`path` = `""`, iteration 0).
    pub fn run_level(payload: Payload) -> Self {
        Self::new("", 0, payload)
    }

    /// Sets `child_run_id`.
    pub fn with_child(mut self, child: RunId) -> Self {
        self.child_run_id = Some(child);
        self
    }

    /// The event type.
    pub const fn event_type(&self) -> EventType {
        self.payload.event_type()
    }

    /// Completes the draft into an event.
    pub fn into_event(
        self,
        seq: Seq,
        run_id: RunId,
        parent_run_id: Option<RunId>,
        timestamp: Timestamp,
    ) -> ExchangeEvent {
        ExchangeEvent {
            seq,
            run_id,
            parent_run_id,
            child_run_id: self.child_run_id,
            path: self.path,
            iteration: self.iteration,
            timestamp,
            payload: self.payload,
        }
    }
}

/// A draft serialized ahead of time, so a writer's critical section only
/// splices in `seq` and `timestamp` (both assigned there, decision 15).
///
/// `write_line` produces exactly the bytes of
/// [`ExchangeEvent::encode_line`] for the completed event.
///
/// The encoded form is two byte runs kept in one buffer: the envelope
/// fields between `seq` and `timestamp`, then the payload. Writers that
/// batch many records can skip the per-record allocation: encode with
/// [`PreEncoded::encode_into`] into a buffer of their own and splice with
/// [`EncodedParts::write_line_with`].
#[derive(Debug, Clone)]
pub struct PreEncoded {
    /// `,"run_id":…` through `"iteration":N`, then the serialized payload.
    bytes: Vec<u8>,
    /// Where the payload starts in `bytes`.
    split: usize,
}

/// A borrowed view of pre-encoded parts (see [`PreEncoded::encode_into`]).
#[derive(Debug, Clone, Copy)]
pub struct EncodedParts<'a> {
    /// `,"run_id":…` through `"iteration":N` (everything between `seq` and `timestamp`).
    pub middle: &'a [u8],
    /// The serialized payload.
    pub payload: &'a [u8],
}

impl EncodedParts<'_> {
    /// Appends the complete line (with `\n`) for `seq` and an already
    /// formatted canonical timestamp (24 bytes, see
    /// [`Timestamp::canonical_bytes`]).
    pub fn write_line_with(&self, seq: Seq, timestamp: &[u8; 24], out: &mut Vec<u8>) {
        out.reserve(self.len_hint());
        out.extend_from_slice(b"{\"seq\":");
        write_u64(out, seq);
        out.extend_from_slice(self.middle);
        out.extend_from_slice(b",\"timestamp\":\"");
        out.extend_from_slice(timestamp);
        out.extend_from_slice(b"\",\"payload\":");
        out.extend_from_slice(self.payload);
        out.extend_from_slice(b"}\n");
    }

    /// An upper bound of the line length (for buffer sizing).
    pub fn len_hint(&self) -> usize {
        self.middle.len() + self.payload.len() + 80
    }
}

impl PreEncoded {
    /// Serializes everything but `seq` and `timestamp`.
    pub fn new(
        run_id: RunId,
        parent_run_id: Option<RunId>,
        draft: &EventDraft,
    ) -> Result<Self, serde_json::Error> {
        let mut bytes = Vec::with_capacity(512);
        let split = Self::encode_into(run_id, parent_run_id, draft, &mut bytes)?;
        Ok(Self { bytes, split })
    }

    /// Appends the encoded parts of `draft` to `out` and returns where the
    /// payload starts (an absolute index into `out`). The parts are
    /// `out[start..split]` and `out[split..]`, `start` being `out`'s length
    /// before the call. On error `out` is cut back to that length.
    pub fn encode_into(
        run_id: RunId,
        parent_run_id: Option<RunId>,
        draft: &EventDraft,
        out: &mut Vec<u8>,
    ) -> Result<usize, serde_json::Error> {
        let start = out.len();
        Self::parts_into(
            run_id,
            parent_run_id,
            draft.child_run_id,
            &draft.path,
            draft.iteration,
            &draft.payload,
            out,
        )
        .inspect_err(|_| out.truncate(start))
    }

    fn from_parts(
        run_id: RunId,
        parent_run_id: Option<RunId>,
        child_run_id: Option<RunId>,
        path: &str,
        iteration: u64,
        payload_value: &Payload,
    ) -> Result<Self, serde_json::Error> {
        let mut bytes = Vec::with_capacity(512);
        let split = Self::parts_into(
            run_id,
            parent_run_id,
            child_run_id,
            path,
            iteration,
            payload_value,
            &mut bytes,
        )?;
        Ok(Self { bytes, split })
    }

    fn parts_into(
        run_id: RunId,
        parent_run_id: Option<RunId>,
        child_run_id: Option<RunId>,
        path: &str,
        iteration: u64,
        payload_value: &Payload,
        out: &mut Vec<u8>,
    ) -> Result<usize, serde_json::Error> {
        out.extend_from_slice(b",\"run_id\":\"");
        run_id.write_to(out);
        if let Some(parent) = parent_run_id {
            out.extend_from_slice(b"\",\"parent_run_id\":\"");
            parent.write_to(out);
        }
        if let Some(child) = child_run_id {
            out.extend_from_slice(b"\",\"child_run_id\":\"");
            child.write_to(out);
        }
        out.extend_from_slice(b"\",\"type\":\"");
        out.extend_from_slice(payload_value.event_type().as_str().as_bytes());
        out.extend_from_slice(b"\",\"path\":");
        serde_json::to_writer(&mut *out, path)?;
        out.extend_from_slice(b",\"iteration\":");
        write_u64(out, iteration);
        let split = out.len();
        serde_json::to_writer(&mut *out, payload_value)?;
        Ok(split)
    }

    /// The two encoded parts.
    pub fn parts(&self) -> EncodedParts<'_> {
        let (middle, payload) = self.bytes.split_at(self.split);
        EncodedParts { middle, payload }
    }

    /// Appends the complete line (with `\n`) for `seq` and `timestamp`.
    pub fn write_line(&self, seq: Seq, timestamp: Timestamp, out: &mut Vec<u8>) {
        self.write_line_with(seq, &timestamp.canonical_bytes(), out);
    }

    /// Like [`PreEncoded::write_line`] with an already formatted canonical
    /// timestamp (24 bytes), for writers that cache the per-second prefix.
    pub fn write_line_with(&self, seq: Seq, timestamp: &[u8; 24], out: &mut Vec<u8>) {
        self.parts().write_line_with(seq, timestamp, out);
    }

    /// An upper bound of the line length (for buffer sizing).
    pub fn len_hint(&self) -> usize {
        self.bytes.len() + 80
    }
}

fn write_u64(out: &mut Vec<u8>, mut value: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}
