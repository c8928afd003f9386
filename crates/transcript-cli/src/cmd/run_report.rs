//! How `run` reports a run's end on stderr: the verdict (never "succeeded" for a run whose
//! transcript lost events, the error whole once with its own newlines), the storage and audit
//! problems, and the exit status; every text masked like the transcript and escaped.

use transcript_redact::Redactor;

use crate::CliError;

/// A text made safe to print (masked like the transcript, escaped).
pub(super) type Mask<'a> = &'a dyn Fn(&str) -> String;

/// Says how the run ended; never "succeeded" for a run whose transcript lost events.
pub(super) fn verdict(
    outcome: &transcript_exec::RunOutcome,
    storage_errors: &[String],
    (masked, masked_lines): (Mask<'_>, Mask<'_>),
) {
    let word = match (outcome.succeeded(), storage_errors.is_empty()) {
        (true, true) => "succeeded",
        (true, false) => "ran to the end but its transcript is incomplete",
        (false, _) => "failed",
    };
    match &outcome.error {
        // The one place the error is printed whole, with its own newlines (a mismatch's diff).
        Some(err) => crate::diag!(
            "transcript: run {} {word}: {}",
            masked(&outcome.workflow),
            masked_lines(err)
        ),
        None => crate::diag!("transcript: run {} {word}", masked(&outcome.workflow)),
    }
}

/// The exit status of a run no signal ended: an incomplete transcript (4) before an internal
/// error before a failed run (1).
pub(super) fn exit_status(
    outcome: &transcript_exec::RunOutcome,
    storage_errors: &[String],
    internal: &[String],
) -> Result<(), CliError> {
    if !storage_errors.is_empty() {
        return Err(CliError::Reported(4));
    }
    if let Some(first) = internal.first() {
        return Err(CliError::Failed(format!("internal error: {first}")));
    }
    if !outcome.succeeded() {
        return Err(CliError::Reported(1));
    }
    Ok(())
}

/// [`masked`], its newlines kept (other control characters escaped).
pub(super) fn masked_lines(redactor: Option<&Redactor>, text: &str) -> String {
    match redactor {
        Some(r) => crate::style::clean(&r.mask_text(text)),
        None => crate::style::clean(text),
    }
}

/// What is printed about the run is masked like the transcript: errors can quote content.
pub(super) fn masked(redactor: Option<&Redactor>, text: &str) -> String {
    let text = match redactor {
        Some(r) => r.mask_text(text).into_owned(),
        None => text.to_owned(),
    };
    crate::style::one_line(&text)
}

/// The transcript's and the audit trail's failures: the first with its cause, then how many
/// more.
pub(super) fn report_problems(
    storage_errors: &[String],
    audit_errors: &[String],
    masked: &dyn Fn(&str) -> String,
) {
    if let Some(first) = storage_errors.first() {
        crate::diag!(
            "transcript: error: the transcript is incomplete: {}{}",
            masked(first),
            match storage_errors.len() {
                1 => String::new(),
                n => format!(" (and {} more recorder errors)", n - 1),
            }
        );
    }
    if let Some(first) = audit_errors.first() {
        crate::diag!(
            "transcript: warning: audit trail incomplete: {}{}",
            masked(first),
            match audit_errors.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            }
        );
    }
}
