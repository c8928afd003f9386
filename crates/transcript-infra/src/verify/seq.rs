//! The seq check of `verify`: each seq against its predecessor's, with one
//! line of lookahead so a single out-of-place line is one finding (issue
//! 20: a stray `seq 100` among 1..64 used to make every later line "not
//! increasing").

use transcript_domain::Seq;

use super::{Finding, FindingCode};

/// An event's seq and position.
#[derive(Clone, Copy)]
struct At {
    seq: Seq,
    line: u64,
    offset: u64,
}

/// Streaming seq checker: feed every event's seq in file order, then
/// `finish`.
#[derive(Default)]
pub(super) struct SeqCheck {
    /// Seq of the last line that fit (0 before the first).
    prev: Seq,
    /// Whether a line fit yet (the first one is held to "starts at 1").
    started: bool,
    /// The line being judged: it needs its successor to tell a stray line
    /// from a jump.
    pending: Option<At>,
    /// The seq of the last line reported as out of place: when it is the
    /// one missing before a later line (two lines swapped), that gap is
    /// already explained (the line exists, elsewhere).
    stray: Option<Seq>,
}

impl SeqCheck {
    pub(super) fn push(&mut self, seq: Seq, line: u64, offset: u64, errors: &mut Vec<Finding>) {
        if let Some(p) = self.pending.take() {
            let fits = |s: Seq| self.prev.checked_add(1) == Some(s);
            if !fits(p.seq) && fits(seq) {
                // Its neighbours are consecutive: this one line is the fault.
                let what = if p.seq <= self.prev {
                    "duplicate or stray line"
                } else {
                    "stray line"
                };
                errors.push(Finding::at(
                    FindingCode::SeqOutOfPlace,
                    p.line,
                    p.offset,
                    format!(
                        "seq {} is out of place between seq {} and {seq} ({what})",
                        p.seq, self.prev
                    ),
                ));
                self.stray = Some(p.seq);
            } else {
                self.judge(p, errors);
            }
        }
        self.pending = Some(At { seq, line, offset });
    }

    pub(super) fn finish(&mut self, errors: &mut Vec<Finding>) {
        if let Some(p) = self.pending.take() {
            self.judge(p, errors);
        }
    }

    /// Compares `p` with its predecessor and takes it as the new one.
    fn judge(&mut self, p: At, errors: &mut Vec<Finding>) {
        let expected = self.prev.saturating_add(1);
        let swapped =
            self.stray.is_some_and(|s| s == expected) && expected.checked_add(1) == Some(p.seq);
        let finding = if !self.started {
            (p.seq != 1).then(|| {
                (
                    FindingCode::FirstSeqNotOne,
                    format!("first seq is {}, expected 1", p.seq),
                )
            })
        } else if p.seq == expected || swapped {
            None
        } else if p.seq > expected {
            Some((
                FindingCode::SeqGap,
                format!(
                    "seq {} follows {}: {} missing",
                    p.seq,
                    self.prev,
                    p.seq - expected
                ),
            ))
        } else {
            Some((
                FindingCode::SeqNotIncreasing,
                format!(
                    "seq {} after {} (duplicate or out of order)",
                    p.seq, self.prev
                ),
            ))
        };
        if let Some((code, message)) = finding {
            errors.push(Finding::at(code, p.line, p.offset, message));
        }
        self.started = true;
        self.prev = p.seq;
    }
}
