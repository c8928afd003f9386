//! Verifying a run and its child runs as any store of the read port holds them.

use transcript_domain::RunId;

use super::{Finding, FindingCode, Opened, RunReport, verify_linked, verify_reader};
use crate::TranscriptReader;

/// [`verify_run`] on any store of the read port (a directory, the JetStream store): the run's
/// transcript and every child run it links to, as the store holds them, each report named by
/// where it was read (a file, or `nats://…#<run-id>`).
pub fn verify_run_in(
    store: &dyn transcript_domain::run_store::RunStore,
    run_id: RunId,
) -> RunReport {
    let open = |run: RunId| -> Opened {
        let (location, mut report) = match store.read(run) {
            Ok(Some(lines)) => {
                let reader = TranscriptReader::new(std::io::BufReader::new(lines.body));
                (lines.location, verify_reader(reader))
            }
            Ok(None) => {
                let mut r = verify_reader(TranscriptReader::new(std::io::empty()));
                r.warnings.clear();
                let missing = format!("no run {run} in {}", store.location());
                r.errors
                    .push(Finding::file(FindingCode::ReadFailed, missing.clone()));
                r.path = Some(format!("{}#{run}", store.location()).into());
                return Err(Box::new((format!("child run {run} has {missing}"), r)));
            }
            Err(e) => {
                let mut r = verify_reader(TranscriptReader::new(std::io::empty()));
                r.warnings.clear();
                r.errors
                    .push(Finding::file(FindingCode::ReadFailed, e.to_string()));
                (format!("{}#{run}", store.location()), r)
            }
        };
        report.path = Some(location.into());
        if let Some(actual) = report.run_id
            && actual != run
        {
            report.errors.push(Finding::file(
                FindingCode::FileNameMismatch,
                format!("stored as run {run} but holds run {actual}"),
            ));
        }
        Ok(report)
    };
    verify_linked(run_id, &open)
}
