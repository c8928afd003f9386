//! Templates are compiled once, when the workflow is built or loaded
//! (#32 item 3): a run renders the compiled form and parses no template,
//! however many iterations it makes (before, every render parsed its
//! template again, and a run's validation parsed them all once more).

use std::sync::Arc;

use serde_json::{Map, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::Timestamp;

use super::ExecutionService;
use crate::custom::{CustomStepContext, FnStep};
use crate::template::parse_count;
use crate::workflow::{Items, Step, Workflow, WorkflowSet};

/// A workflow with a template in every kind of place a run renders one:
/// loop items, argv, env, custom params, a `while` condition, a terminal
/// message and the outputs.
fn workflow(items: u64) -> WorkflowSet {
    let wf = Workflow::new("compiled")
        .input("who", Some(json!("world")))
        .step(Step::for_each(
            "each",
            Items::list((0..items).map(|i| json!(format!("item {i} {{{{inputs.who}}}}")))),
            vec![
                Step::command_argv(
                    "echo",
                    [
                        "echo",
                        "{{ loop.item | match('item [0-9]+ [a-z]+') }}",
                        "{{loop.index}}",
                    ],
                )
                .with_env("WHO", "{{inputs.who}}"),
                Step::custom("stamp", "stamp", json!({"label": "{{steps.echo.output}}"})),
            ],
        ))
        .step(Step::while_loop(
            "poll",
            "{{loop.index}} != 3",
            10,
            vec![Step::command("tick", "echo tick")],
        ))
        .output("last", "{{steps.each.output}}")
        .output("ticks", "{{steps.poll.output}}");
    WorkflowSet::new("compiled", wf)
}

#[test]
#[allow(clippy::unwrap_used)]
fn a_run_parses_no_template() {
    let dir = tempfile::tempdir().unwrap();
    let svc = ExecutionService::deterministic_builder(
        dir.path(),
        Timestamp::saturating_from_unix_millis(0),
    )
    .custom_step(
        "stamp",
        Arc::new(FnStep(|ctx: &CustomStepContext| {
            Ok(json!({"label": ctx.params["label"]}))
        })),
    )
    .unwrap()
    .build()
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for items in [1, 20] {
        let set = workflow(items);
        let before = parse_count::get();
        let out = rt
            .block_on(svc.run(&set, Map::new(), CancellationToken::new()))
            .unwrap();
        let parsed = parse_count::get() - before;
        assert!(out.succeeded(), "{:?}", out.error);
        assert_eq!(out.outputs["ticks"], json!("tick"));
        assert_eq!(
            out.outputs["last"][items as usize - 1],
            json!({"label": format!("item {} world {}", items - 1, items - 1)})
        );
        assert_eq!(
            parsed, 0,
            "a run of {items} iterations parsed {parsed} templates"
        );
    }
}

#[test]
#[allow(clippy::unwrap_used)]
fn a_template_that_does_not_parse_is_refused_before_the_run_naming_file_and_step() {
    let dir = tempfile::tempdir().unwrap();
    let svc = ExecutionService::deterministic_builder(
        dir.path(),
        Timestamp::saturating_from_unix_millis(0),
    )
    .build()
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cases = [
        (
            Workflow::new("w").step(Step::command_argv("a", ["echo", "{{ loop.item"])),
            Some("a"),
            "command: bad template",
        ),
        (
            Workflow::new("w")
                .step(Step::terminal("end", true, "ok"))
                .output("o", "{{ steps.end.output | upper }}"),
            None,
            "output 'o': bad template",
        ),
        (
            Workflow::new("w").step(Step::for_each(
                "each",
                Items::list([json!({"k": ["{{ nope }}"]})]),
                vec![Step::terminal("t", true, "x")],
            )),
            Some("each"),
            "items: bad template",
        ),
    ];
    for (wf, step, reason) in cases {
        let set = WorkflowSet::new("w.yaml", wf);
        let err = match rt.block_on(svc.run(&set, Map::new(), CancellationToken::new())) {
            Err(super::ExecError::Invalid(e)) => e,
            other => panic!("expected a load error, got {other:?}"),
        };
        assert_eq!(err.file, "w.yaml");
        assert_eq!(err.step.as_deref(), step);
        assert!(err.reason.contains(reason), "{err}");
    }
}
