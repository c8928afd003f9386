//! Mapping benchmark (`cargo bench -p transcript-otel --bench mapping`, run
//! by `cargo xtask bench`). Plain `main`, prints a table.
//!
//! A 100k-event transcript (agent steps with prompts, tool calls and usage,
//! command steps in a loop) is generated in memory as canonical lines. The
//! baseline is the plain reader: `transcript_domain::decode_line` over every
//! line. Measured in the same run, median of interleaved rounds:
//!
//! * `read`: decode every line (baseline);
//! * `map`: `map_run` over the decoded events (content capture off / on);
//! * `read+map`: decode and feed a `SpanMapper` line by line, as an offline
//!   export does.
//!
//! Ratios are throughput relative to `read`; the target (issue 12) is
//! `read+map` ≥ 0.5×, i.e. mapping costs no more than reading.
#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use transcript_domain::{
    ContentBlock, DecodedEvent, EventDraft, Fidelity, MessagePayload, Payload, RawJson, Role,
    RunId, StepPayload, Timestamp, ToolPayload, Usage, decode_line,
};
use transcript_otel::{MapOptions, SpanMapper, map_run};

const EVENTS: usize = 100_000;
const ROUNDS: usize = 5;

fn transcript() -> Vec<u8> {
    let run = RunId::from_bytes([0x42; 16]);
    let mut drafts = vec![EventDraft::run_level(Payload::RunStarted(
        StepPayload::new("bench", "workflow"),
    ))];
    let prompt = "Review the change and list every risk you find. ".repeat(4);
    let answer = "The change looks fine; one risk: the retry loop never backs off. ".repeat(4);
    let mut block = 0u64;
    while drafts.len() < EVENTS - 1 {
        block += 1;
        let path = format!("review{}", block % 7);
        drafts.push(EventDraft::new(
            &path,
            0,
            Payload::StepStarted(StepPayload::new(&path, "agent")),
        ));
        drafts.push(EventDraft::new(
            &path,
            0,
            Payload::MessageUser(MessagePayload::new(
                Role::User,
                vec![ContentBlock::text(Fidelity::Router, &prompt)],
            )),
        ));
        for call in 0..2 {
            let call_id = format!("call-{block}-{call}");
            let input =
                RawJson::from_value(&serde_json::json!({"cmd": "grep -rn retry src/"})).unwrap();
            drafts.push(EventDraft::new(
                &path,
                0,
                Payload::ToolCall(ToolPayload::call(
                    "bash",
                    &call_id,
                    input,
                    Fidelity::AgentEmitted,
                )),
            ));
            drafts.push(EventDraft::new(
                &path,
                0,
                Payload::ToolResult(ToolPayload::result(
                    "bash",
                    &call_id,
                    RawJson::string("src/retry.rs:12: loop {"),
                    None,
                    Fidelity::AgentEmitted,
                )),
            ));
        }
        let mut reply = MessagePayload::new(
            Role::Assistant,
            vec![
                ContentBlock::thinking(Fidelity::AgentEmitted, "check the loop"),
                ContentBlock::text(Fidelity::AgentEmitted, &answer),
            ],
        );
        reply.provider = Some("claude".into());
        reply.model = Some("claude-sonnet".into());
        reply.usage = Some(Usage {
            input_tokens: Some(1200),
            output_tokens: Some(300),
            cache_read_tokens: Some(800),
            ..Usage::default()
        });
        drafts.push(EventDraft::new(&path, 0, Payload::MessageAssistant(reply)));
        drafts.push(EventDraft::new(
            &path,
            0,
            Payload::StepCompleted(StepPayload::new(&path, "agent")),
        ));
        for it in 0..2 {
            drafts.push(EventDraft::new(
                "checks.test",
                it,
                Payload::StepStarted(StepPayload::new("test", "command")),
            ));
            drafts.push(EventDraft::new(
                "checks.test",
                it,
                Payload::StepCompleted(StepPayload::new("test", "command")),
            ));
        }
    }
    drafts.truncate(EVENTS - 1);
    drafts.push(EventDraft::run_level(Payload::RunCompleted(
        StepPayload::new("bench", "workflow"),
    )));
    let start = Timestamp::from_unix_millis(1_780_000_000_000).unwrap();
    let mut out = Vec::with_capacity(EVENTS * 300);
    for (i, draft) in drafts.into_iter().enumerate() {
        let ts = start.saturating_add_millis(i as i64);
        draft
            .into_event(i as u64 + 1, run, None, ts)
            .encode_line(&mut out)
            .unwrap();
    }
    out
}

fn read(lines: &[u8]) -> Vec<DecodedEvent> {
    lines
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| decode_line(l).unwrap().event)
        .collect()
}

fn read_and_map(lines: &[u8], options: MapOptions) -> usize {
    let mut mapper = SpanMapper::new(options);
    for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        mapper.ingest(&decode_line(line).unwrap().event);
    }
    mapper.finish().spans.len()
}

/// A benchmark case: runs once, returns a count so the work is not optimized away.
type Case<'a> = Box<dyn Fn() -> usize + 'a>;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let lines = transcript();
    let events = read(&lines);
    assert_eq!(events.len(), EVENTS);
    let spans = map_run(&events, &mut |_| None, MapOptions::default())
        .spans
        .len();

    let cases: [(&str, Case); 5] = [
        (
            "read (decode_line, baseline)",
            Box::new(|| read(&lines).len()),
        ),
        (
            "map (content off)",
            Box::new(|| {
                map_run(&events, &mut |_| None, MapOptions::default())
                    .spans
                    .len()
            }),
        ),
        (
            "map (content on)",
            Box::new(|| {
                map_run(&events, &mut |_| None, MapOptions::with_content(true))
                    .spans
                    .len()
            }),
        ),
        (
            "read+map (content off)",
            Box::new(|| read_and_map(&lines, MapOptions::default())),
        ),
        (
            "read+map (content on)",
            Box::new(|| read_and_map(&lines, MapOptions::with_content(true))),
        ),
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
    // Interleaved rounds, so drift in machine load hits every case alike.
    for _ in 0..ROUNDS {
        for (i, (_, case)) in cases.iter().enumerate() {
            let start = Instant::now();
            black_box(case());
            samples[i].push(start.elapsed());
        }
    }
    let medians: Vec<Duration> = samples.into_iter().map(median).collect();
    let rate = |d: Duration| EVENTS as f64 / d.as_secs_f64();
    let baseline = rate(medians[0]);
    println!(
        "transcript-otel mapping: {EVENTS} events, {} MiB of JSONL, {spans} spans, median of {ROUNDS} rounds",
        lines.len() / (1024 * 1024)
    );
    println!(
        "{:<30} {:>10} {:>14} {:>8}",
        "case", "ms", "events/s", "ratio"
    );
    for ((name, _), d) in cases.iter().zip(&medians) {
        println!(
            "{:<30} {:>10.1} {:>14.0} {:>7.2}x",
            name,
            d.as_secs_f64() * 1e3,
            rate(*d),
            rate(*d) / baseline
        );
    }
    let target = rate(medians[3]) / baseline;
    println!(
        "target: read+map (content off) >= 0.50x of read: {:.2}x {}",
        target,
        if target >= 0.5 { "PASS" } else { "FAIL" }
    );
}
