//! The redaction flags every command that writes or prints content shares (`--redact`,
//! `--redact-pattern`, `--privacy`), and the redactor they build (see `transcript-redact`).

use crate::CliError;

/// Opt-in masking (see `transcript-redact`).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RedactionArgs {
    /// Mask secrets (API keys, bearer tokens, AWS keys, private keys, JWTs, password=… values).
    #[arg(long)]
    pub(crate) redact: bool,
    /// Also mask matches of this regular expression (a named group `secret` limits the mask), repeatable.
    #[arg(long = "redact-pattern", value_name = "REGEX")]
    pub(crate) redact_patterns: Vec<String>,
    /// `structure-only` keeps envelopes, names, timings and usage but drops all content.
    #[arg(long, value_enum)]
    pub(crate) privacy: Option<PrivacyArg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum PrivacyArg {
    /// Keep content (masking secrets when --redact is given).
    Full,
    /// Drop all content.
    StructureOnly,
}

impl RedactionArgs {
    pub(crate) fn redactor(&self) -> Result<Option<transcript_redact::Redactor>, CliError> {
        if self.privacy == Some(PrivacyArg::StructureOnly) {
            return Ok(Some(transcript_redact::Redactor::structure_only()));
        }
        if !self.redact && self.redact_patterns.is_empty() {
            return Ok(None);
        }
        let mut r = if self.redact {
            transcript_redact::Redactor::builtin()
        } else {
            transcript_redact::Redactor::empty()
        };
        for p in &self.redact_patterns {
            r = r
                .with_pattern(p)
                .map_err(|e| CliError::Usage(e.to_string()))?;
        }
        Ok(Some(r))
    }
}
