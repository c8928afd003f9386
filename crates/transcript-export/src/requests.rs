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
//!   session ([`Requests::add`]'s `session`), except a message id that is the message part
//!   of exactly one global key: a live Claude run (stream-json has no `requestId`) and the
//!   import of its session log are one request. A turn without a `request_id` is its own
//!   bill.
//! - one **copy** of a request is what one run billed for it (the sum of its turns with that
//!   key there, the ledger's split included). Of several copies, a main-chain copy wins over
//!   a side-chain one (a sub-agent's log), then the larger usage (a streaming copy cut before
//!   its last `output_tokens`), then the first read, compared over all the requests the
//!   same runs hold (one run bills a shared history whole: a live run's per-request usage
//!   is exact only in sum). The other copies' turns are set aside and counted
//!   ([`Deduplicated::duplicates`]).
//! - a kept request counts as **one request** however many turns carry it
//!   ([`Kept::first`]).

use std::collections::HashMap;

use transcript_domain::Usage;

/// A request's key, within its provider: global for a Claude `<message.id>/<requestId>`,
/// else within a session.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    /// Provider, request id.
    Global(String, String),
    /// Provider, session, request id.
    Session(String, String, String),
}

impl Key {
    fn of(request_id: &str, source: &Source<'_>) -> Self {
        let provider = source.provider.to_owned();
        if request_id.contains('/') {
            Key::Global(provider, request_id.to_owned())
        } else {
            Key::Session(provider, source.session.to_owned(), request_id.to_owned())
        }
    }
}

/// Where a billed turn was read.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// Its run (one copy of a request per run).
    pub run: &'a str,
    /// Its session: the imported session, else the run.
    pub session: &'a str,
    /// The provider that wrote the turn (`""` when unknown): request ids are its own.
    pub provider: &'a str,
    /// The run is a side chain (a sub-agent's log).
    pub sidechain: bool,
}

/// What one run billed for one request.
#[derive(Debug)]
struct Copy {
    run: String,
    sidechain: bool,
    usage: Usage,
    /// When it was first read (its first turn's place among all turns).
    read: usize,
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

    /// One billed turn read in `source`, with its `request_id` and `usage`.
    pub fn add(&mut self, turn: T, request_id: Option<&str>, source: Source<'_>, usage: &Usage) {
        let Some(id) = request_id.filter(|r| !r.is_empty()) else {
            self.turns.push((turn, None));
            return;
        };
        let (run, sidechain) = (source.run, source.sidechain);
        let next = self.copies.len();
        let k = *self.keys.entry(Key::of(id, &source)).or_insert(next);
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
                    read: self.turns.len(),
                });
                copies.len() - 1
            }
        };
        copies[c].usage.accumulate(usage);
        self.turns.push((turn, Some((k, c))));
    }

    /// The turns to bill: every turn without a request id, and each request's winning copy.
    pub fn finish(mut self) -> Deduplicated<T> {
        self.join_message_ids();
        let winners = self.winners();
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

impl<T> Requests<T> {
    /// A live Claude run's turn names its request by the message id alone (stream-json has
    /// no `requestId`), the session log of the same run by `<message.id>/<requestId>`: a
    /// session's message id that is the message part of exactly one global key is that
    /// request, so a live run and the import of its session log bill it once.
    fn join_message_ids(&mut self) {
        let mut by_message: HashMap<(&str, &str), Option<usize>> = HashMap::new();
        for (key, &k) in &self.keys {
            if let Key::Global(provider, id) = key
                && let Some((message, _)) = id.split_once('/')
            {
                by_message
                    .entry((provider, message))
                    .and_modify(|e| *e = None)
                    .or_insert(Some(k));
            }
        }
        let mut moved: HashMap<usize, (usize, usize)> = HashMap::new();
        for (key, &k) in &self.keys {
            if let Key::Session(provider, _, id) = key
                && let Some(&Some(global)) = by_message.get(&(provider.as_str(), id.as_str()))
            {
                let offset = self.copies[global].len();
                let copies = std::mem::take(&mut self.copies[k]);
                self.copies[global].extend(copies);
                moved.insert(k, (global, offset));
            }
        }
        if moved.is_empty() {
            return;
        }
        for (_, key) in &mut self.turns {
            if let Some((k, c)) = key
                && let Some(&(global, offset)) = moved.get(k)
            {
                *key = Some((global, offset + *c));
            }
        }
    }
}

impl<T> Requests<T> {
    /// Each request's winning copy (its index in the request's copies). Copies are compared
    /// by the runs that hold them: the requests held by the same set of runs are one group
    /// (a session and its resumed copy share its history), and one run bills the whole
    /// group: main chain over side chain, then the larger usage summed over the group, then
    /// the first read. Per group and not per request, because a live run's per-request
    /// usage is exact only in sum (Claude Code's stream-json reports each message's usage
    /// before its last token; the run's `result` settles the difference on its last turn).
    fn winners(&self) -> Vec<usize> {
        let mut groups: HashMap<Vec<&str>, Vec<usize>> = HashMap::new();
        for (k, copies) in self.copies.iter().enumerate() {
            if copies.len() > 1 {
                let mut runs: Vec<&str> = copies.iter().map(|c| c.run.as_str()).collect();
                runs.sort_unstable();
                runs.dedup();
                groups.entry(runs).or_default().push(k);
            }
        }
        let mut winners = vec![0; self.copies.len()];
        for (runs, keys) in groups {
            // Per run: side chain, usage summed over the group, first read.
            let mut sums: Vec<(bool, Usage, usize)> =
                vec![(true, Usage::default(), usize::MAX); runs.len()];
            for &k in &keys {
                for c in &self.copies[k] {
                    if let Ok(r) = runs.binary_search(&c.run.as_str()) {
                        let s = &mut sums[r];
                        s.0 &= c.sidechain;
                        s.1.accumulate(&c.usage);
                        s.2 = s.2.min(c.read);
                    }
                }
            }
            let best = (0..runs.len())
                .max_by_key(|&r| {
                    let (side, usage, read) = &sums[r];
                    (!side, size(usage), std::cmp::Reverse(*read))
                })
                .unwrap_or(0);
            for k in keys {
                winners[k] = self.copies[k]
                    .iter()
                    .position(|c| c.run == runs[best])
                    .unwrap_or(0);
            }
        }
        winners
    }
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

    fn src(run: &'static str, session: &'static str, sidechain: bool) -> Source<'static> {
        Source {
            run,
            session,
            provider: "claude",
            sidechain,
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
        r.add(
            "a1",
            Some("m1/r1"),
            src("run-a", "s-a", false),
            &usage(10, 5),
        );
        r.add(
            "a2",
            Some("m1/r1"),
            src("run-a", "s-a", false),
            &usage(0, 2),
        );
        r.add(
            "b1",
            Some("m1/r1"),
            src("run-b", "s-b", false),
            &usage(10, 6),
        );
        r.add(
            "b2",
            Some("m2/r2"),
            src("run-b", "s-b", false),
            &usage(3, 3),
        );
        r.add(
            "c1",
            Some("m1/r1"),
            src("run-c", "s-c", false),
            &usage(10, 9),
        );
        r.add("x", None, src("run-c", "s-c", false), &usage(1, 1));
        r.add("s1", Some("msg"), src("run-a", "s-a", false), &usage(1, 1));
        r.add("s2", Some("msg"), src("run-b", "s-b", false), &usage(1, 1));
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
        r.add("side", Some("m/r"), src("sub", "s", true), &usage(100, 100));
        r.add("main1", Some("m/r"), src("main", "s", false), &usage(1, 1));
        r.add("main2", Some("m/r"), src("main", "s", false), &usage(0, 1));
        r.add("t1", Some("n/q"), src("one", "s", false), &usage(2, 2));
        r.add("t2", Some("n/q"), src("two", "s", false), &usage(2, 2));
        let d = r.finish();
        assert_eq!(kept(&d), [("main1", true), ("main2", false), ("t1", true)]);
        assert_eq!(d.duplicates, 2);
    }

    /// A live run's message id alone joins the session log's `<message.id>/<requestId>`.
    #[test]
    fn a_live_message_id_joins_its_logged_request() {
        let mut r = Requests::new();
        r.add(
            "live",
            Some("m1"),
            src("live-run", "live-run", false),
            &usage(5, 5),
        );
        r.add(
            "logged",
            Some("m1/r1"),
            src("import", "s", false),
            &usage(5, 5),
        );
        r.add(
            "other",
            Some("m2"),
            src("live-run", "live-run", false),
            &usage(1, 1),
        );
        let d = r.finish();
        assert_eq!(kept(&d), [("live", true), ("other", true)]);
        assert_eq!(d.duplicates, 1);
    }

    /// A live run's stream reports each message before its last tokens and settles the
    /// difference on its last turn: compared per request, the log's first request and the
    /// live run's last would both win (62 + 44 output tokens billed); one run bills the shared
    /// history whole, 62.
    #[test]
    fn one_run_bills_a_shared_history_whole() {
        let mut r = Requests::new();
        r.add(1, Some("m1"), src("live", "live", false), &usage(10, 1));
        r.add(2, Some("m2"), src("live", "live", false), &usage(10, 61));
        r.add(3, Some("m1/r1"), src("log", "s", false), &usage(10, 45));
        r.add(4, Some("m2/r2"), src("log", "s", false), &usage(10, 17));
        let d = r.finish();
        let output: u64 = d.kept.iter().map(|k| [1, 61, 45, 17][k.turn - 1]).sum();
        assert_eq!(output, 62);
        assert_eq!(d.kept.iter().map(|k| k.turn).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(d.duplicates, 2);
    }
}
