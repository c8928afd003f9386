//! Issue 20: `verify` reports the root cause of a seq fault once, instead
//! of cascading over every later line.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Cursor;

use common::run_id;
use transcript_infra::{FileReport, FindingCode, TranscriptReader, verify_reader};

fn verify(seqs: &[u64]) -> FileReport {
    let run = run_id(1);
    let text: String = seqs
        .iter()
        .map(|seq| {
            format!(
                r#"{{"seq":{seq},"run_id":"{run}","type":"step.started","path":"s","iteration":0,"timestamp":"2026-01-01T00:00:00.000Z","payload":{{"name":"s","kind":"agent"}}}}"#
            ) + "\n"
        })
        .collect();
    verify_reader(TranscriptReader::new(Cursor::new(text)))
}

/// (code, line) of every error.
fn errors(seqs: &[u64]) -> Vec<(FindingCode, u64)> {
    verify(seqs)
        .errors
        .iter()
        .map(|f| (f.code, f.line.unwrap()))
        .collect()
}

fn with_insert(range: std::ops::RangeInclusive<u64>, at: usize, seq: u64) -> Vec<u64> {
    let mut v: Vec<u64> = range.collect();
    v.insert(at, seq);
    v
}

#[test]
fn one_stray_line_among_64_is_one_error_naming_it() {
    let seqs = with_insert(1..=64, 10, 100);
    let report = verify(&seqs);
    assert_eq!(report.errors.len(), 1, "{:#?}", report.errors);
    let e = &report.errors[0];
    assert_eq!((e.code, e.line), (FindingCode::SeqOutOfPlace, Some(11)));
    assert_eq!(
        e.message,
        "seq 100 is out of place between seq 10 and 11 (stray line)"
    );
}

#[test]
fn a_duplicated_line_is_one_error() {
    assert_eq!(
        errors(&with_insert(1..=20, 3, 3)),
        [(FindingCode::SeqOutOfPlace, 4)]
    );
}

#[test]
fn two_swapped_lines_are_one_error() {
    assert_eq!(
        errors(&[1, 2, 4, 3, 5, 6]),
        [(FindingCode::SeqOutOfPlace, 3)]
    );
}

#[test]
fn a_stray_first_line_is_one_error() {
    assert_eq!(errors(&[100, 1, 2, 3]), [(FindingCode::SeqOutOfPlace, 1)]);
}

#[test]
fn a_gap_a_restart_and_a_wrong_start_are_one_error_each() {
    assert_eq!(errors(&[1, 2, 3, 7, 8, 9]), [(FindingCode::SeqGap, 4)]);
    assert_eq!(
        errors(&[1, 2, 3, 4, 5, 4, 5, 6]),
        [(FindingCode::SeqNotIncreasing, 6)]
    );
    assert_eq!(errors(&[3, 4, 5]), [(FindingCode::FirstSeqNotOne, 1)]);
    assert_eq!(errors(&[1, 2, 3, 100]), [(FindingCode::SeqGap, 4)]);
    assert!(errors(&[1, 2, 3]).is_empty());
    assert_eq!(errors(&[2]), [(FindingCode::FirstSeqNotOne, 1)]);
}
