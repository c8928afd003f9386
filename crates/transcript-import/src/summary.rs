//! What an import learns besides its events: the normalizer's diagnostics summarised per
//! kind, and the facts a capture states about itself (times, duration, final answer, whether it
//! is whole).

use transcript_providers::{ClockSource, DiagnosticKind};

/// Diagnostics summarised per kind: how many, and the first one in full.
#[derive(Default)]
pub(super) struct DiagnosticSummary {
    pub(super) kinds: std::collections::BTreeMap<&'static str, (usize, String)>,
    pub(super) total: usize,
    pub(super) provider_errors: Vec<String>,
    /// Whether anything but noise (malformed, unknown, repaired) was seen:
    /// a capture with only such diagnostics holds no agent output.
    pub(super) recognized: bool,
}

impl DiagnosticSummary {
    pub(super) fn add(&mut self, d: &transcript_providers::Diagnostic) {
        self.total += 1;
        self.recognized |= !matches!(
            d.kind,
            DiagnosticKind::Malformed | DiagnosticKind::Unknown | DiagnosticKind::Repaired
        );
        let entry = self
            .kinds
            .entry(d.kind.as_str())
            .or_insert_with(|| (0, d.to_string()));
        entry.0 += 1;
        // A few are enough to say why the step failed; the count says how many there were.
        if d.kind == DiagnosticKind::ProviderError && self.provider_errors.len() < 8 {
            self.provider_errors.push(d.to_string());
        }
    }

    pub(super) fn malformed(&self) -> usize {
        self.kinds.get("malformed").map_or(0, |(n, _)| *n)
    }

    /// `{kind: {"count": n, "first": "..."}}`, kept in the agent step's result.
    pub(super) fn to_json(&self) -> serde_json::Value {
        self.kinds
            .iter()
            .map(|(kind, (n, first))| {
                (
                    (*kind).to_owned(),
                    serde_json::json!({"count": n, "first": first}),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}

/// What the facts of a capture said, besides its outputs.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) provider_time: bool,
    pub(super) duration_ms: Option<u64>,
    pub(super) result_text: Option<String>,
    pub(super) unfinished: Option<&'static str>,
    pub(super) torn: Option<String>,
}

impl Seen {
    pub(super) fn clock(&self) -> ClockSource {
        match (self.provider_time, self.duration_ms) {
            (true, _) => ClockSource::Provider,
            (false, Some(_)) => ClockSource::Duration,
            (false, None) => ClockSource::Import,
        }
    }

    /// Why the capture is incomplete, if it is.
    pub(super) fn incomplete(&self) -> Option<String> {
        let mut why = Vec::new();
        if let Some(missing) = self.unfinished {
            why.push(format!(
                "the capture ends without its terminal record ({missing})"
            ));
        }
        if let Some(torn) = &self.torn {
            why.push(format!("its last line is torn ({torn})"));
        }
        (!why.is_empty()).then(|| format!("incomplete: {}", why.join("; ")))
    }
}
