//! One request, one bill across everything a report reads (#51): the billed turns of many
//! runs (a store imported twice, a session and its resumed copy, file imports beside live
//! runs, a directory or NATS) counted once per provider request.
//!
//! The normalizers bill a request once within one transcript (a ledger keyed by the request
//! identity): each `message.assistant` carries only what its request had not been billed on
//! earlier turns of that transcript. Across transcripts nothing did: Claude Code writes a
//! resumed or forked session to a new file repeating earlier requests with the same
//! `message.id` and `requestId`, and the same log imported twice is two runs. This module
//! is the rule across them, ccusage's:
//!
//! - the **key** is the turn's `request_id` (wire decision 17). A Claude
//!   `<message.id>/<requestId>` is global (the same request in any run is one); any other
//!   id (a message id alone, an OpenAI response id, a Gemini message id) is keyed within its
//!   session ([`Requests::add`]'s `session`). A turn without a `request_id` is its own bill.
//! - one **copy** of a request is what one run billed for it (the sum of its turns with that
//!   key there, the ledger's split included). Of several copies, a main-chain copy wins over
//!   a side-chain one (a sub-agent's log), then the larger usage (a streaming copy cut before
//!   its last `output_tokens`), then the first read. The other copies' turns are set aside
//!   and counted ([`Deduplicated::duplicates`]).
//! - a kept request counts as **one request** however many turns carry it
//!   ([`Kept::first`]).

use std::collections::HashMap;

use transcript_domain::Usage;

/// A request's key: global for a Claude `<message.id>/<requestId>`, else within a session.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Global(String),
    Session(String, String),
}

impl Key {
    fn of(request_id: &str, session: &str) -> Self {
        if request_id.contains('/') {
            Key::Global(request_id.to_owned())
        } else {
            Key::Session(session.to_owned(), request_id.to_owned())
        }
    }
}

/// What one run billed for one request.
#[derive(Debug)]
struct Copy {
    run: String,
    sidechain: bool,
    usage: Usage,
}

/// Billed turns being read, each with the request it belongs to.
#[derive(Debug)]
pub struct Requests<T> {
    turns: Vec<(T, Option<(usize, usize)>)>,
    keys: HashMap<Key, usize>,
    copies: Vec<Vec<Copy>>,
}

impl<T> Default for Requests<T> {
    fn default() -> Self {
        Self {
            turns: Vec::new(),
            keys: HashMap::new(),
            copies: Vec::new(),
        }
    }
}

/// A turn kept, and whether it is the first kept turn of its request (a request counts once).
#[derive(Debug, Clone, PartialEq)]
pub struct Kept<T> {
    /// The caller's turn.
    pub turn: T,
    /// Whether it is the first kept turn of its request (always, without a request id).
    pub first: bool,
}

/// The turns to bill, in the order read, and how many were set aside.
#[derive(Debug, Clone, PartialEq)]
pub struct Deduplicated<T> {
    /// The turns billed.
    pub kept: Vec<Kept<T>>,
    /// Turns set aside: copies of a request another run's copy bills.
    pub duplicates: u64,
}

impl<T> Requests<T> {
    /// No turn yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// One billed turn of run `run` (its `session`: the imported session, else the run;
    /// `sidechain`: the run is a sub-agent's log), with its `request_id` and `usage`.
    pub fn add(
        &mut self,
        turn: T,
        request_id: Option<&str>,
        (run, session, sidechain): (&str, &str, bool),
        usage: &Usage,
    ) {
        let Some(id) = request_id.filter(|r| !r.is_empty()) else {
            self.turns.push((turn, None));
            return;
        };
        let next = self.copies.len();
        let k = *self.keys.entry(Key::of(id, session)).or_insert(next);
        if k == next {
            self.copies.push(Vec::new());
        }
        let copies = &mut self.copies[k];
        let c = match copies.iter().position(|c| c.run == run) {
            Some(c) => c,
            None => {
                copies.push(Copy {
                    run: run.to_owned(),
                    sidechain,
                    usage: Usage::default(),
                });
                copies.len() - 1
            }
        };
        copies[c].usage.accumulate(usage);
        self.turns.push((turn, Some((k, c))));
    }

    /// The turns to bill: every turn without a request id, and each request's winning copy.
    pub fn finish(self) -> Deduplicated<T> {
        let winners: Vec<usize> = self.copies.iter().map(|c| winner(c)).collect();
        let mut counted = vec![false; self.copies.len()];
        let mut out = Deduplicated {
            kept: Vec::with_capacity(self.turns.len()),
            duplicates: 0,
        };
        for (turn, key) in self.turns {
            match key {
                None => out.kept.push(Kept { turn, first: true }),
                Some((k, c)) if winners.get(k) == Some(&c) => {
                    let first = counted.get(k).is_some_and(|done| !done);
                    if let Some(done) = counted.get_mut(k) {
                        *done = true;
                    }
                    out.kept.push(Kept { turn, first });
                }
                Some(_) => out.duplicates += 1,
            }
        }
        out
    }
}

/// The copy that bills a request: main chain over side chain, then the larger usage, then
/// the first read.
fn winner(copies: &[Copy]) -> usize {
    let mut best = 0;
    for (i, c) in copies.iter().enumerate().skip(1) {
        let b = &copies[best];
        let better = match (c.sidechain, b.sidechain) {
            (false, true) => true,
            (true, false) => false,
            _ => size(&c.usage) > size(&b.usage),
        };
        if better {
            best = i;
        }
    }
    best
}

/// A usage's size: its token counts summed, output first on a tie.
fn size(u: &Usage) -> (u64, u64) {
    let n = |c: Option<u64>| c.unwrap_or(0);
    let total = [
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cache_write_tokens,
        u.reasoning_tokens,
    ]
    .into_iter()
    .map(n)
    .fold(0u64, u64::saturating_add);
    (total, n(u.output_tokens))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: Some(input),
            output_tokens: Some(output),
            ..Usage::default()
        }
    }

    fn kept(d: &Deduplicated<&'static str>) -> Vec<(&'static str, bool)> {
        d.kept.iter().map(|k| (k.turn, k.first)).collect()
    }

    /// A resumed copy repeats a request: billed once, from the larger copy; a request split
    /// over two turns of one run counts once; an id without `/` is keyed per session.
    #[test]
    fn a_request_is_billed_once_from_its_best_copy() {
        let mut r = Requests::new();
        r.add("a1", Some("m1/r1"), ("run-a", "s-a", false), &usage(10, 5));
        r.add("a2", Some("m1/r1"), ("run-a", "s-a", false), &usage(0, 2));
        r.add("b1", Some("m1/r1"), ("run-b", "s-b", false), &usage(10, 6));
        r.add("b2", Some("m2/r2"), ("run-b", "s-b", false), &usage(3, 3));
        r.add("c1", Some("m1/r1"), ("run-c", "s-c", false), &usage(10, 9));
        r.add("x", None, ("run-c", "s-c", false), &usage(1, 1));
        r.add("s1", Some("msg"), ("run-a", "s-a", false), &usage(1, 1));
        r.add("s2", Some("msg"), ("run-b", "s-b", false), &usage(1, 1));
        let d = r.finish();
        // m1/r1: run-a 10+7, run-b 10+6, run-c 10+9: run-c wins.
        assert_eq!(
            kept(&d),
            [
                ("b2", true),
                ("c1", true),
                ("x", true),
                ("s1", true),
                ("s2", true)
            ]
        );
        assert_eq!(d.duplicates, 3);
    }

    /// The main chain wins over a larger side-chain copy; a tie keeps the first read, and a
    /// request split over two turns of the winner counts once.
    #[test]
    fn the_main_chain_wins_then_the_first_read() {
        let mut r = Requests::new();
        r.add("side", Some("m/r"), ("sub", "s", true), &usage(100, 100));
        r.add("main1", Some("m/r"), ("main", "s", false), &usage(1, 1));
        r.add("main2", Some("m/r"), ("main", "s", false), &usage(0, 1));
        r.add("t1", Some("n/q"), ("one", "s", false), &usage(2, 2));
        r.add("t2", Some("n/q"), ("two", "s", false), &usage(2, 2));
        let d = r.finish();
        assert_eq!(kept(&d), [("main1", true), ("main2", false), ("t1", true)]);
        assert_eq!(d.duplicates, 2);
    }
}
