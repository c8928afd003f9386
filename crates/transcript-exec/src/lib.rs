//! Sample workflow execution service, tools router and agent seam that emit
//! canonical agent exchange transcripts **only through the
//! [`transcript_domain::Recorder`] port**.
//!
//! This crate is the runner integration tests drive and that teams composing
//! their own runner can copy from. It owns no storage: every transcript byte
//! goes through a `Recorder` (one per run, from a
//! [`transcript_domain::RecorderFactory`]), and it reads no wall clock and
//! generates no randomness itself (the composition root passes a
//! [`transcript_domain::Clock`] and a [`transcript_domain::RunIdGenerator`]).
//!
//! # Run a workflow into a transcript and watch it live
//!
//! transcript-infra's `JsonlRecorderFactory` writes `<storage>/<run-id>.jsonl`; its
//! `TapFactory` hands every run the factory opens (child runs included) to a consumer, from
//! seq 1, while the run is recorded. `examples/custom-runner` is the whole runner a team
//! would copy; `cargo run -p transcript-exec --example run_workflow` runs this one.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use transcript_exec::{ExecutionService, Step, Workflow, WorkflowSet};
//! use transcript_infra::{JsonlRecorderFactory, RandomRunIds, SystemClock, TapFactory};
//!
//! # let dir = tempfile::tempdir()?;
//! # let (workspace, storage) = (dir.path().to_path_buf(), dir.path().join("transcripts"));
//! let live = Arc::new(TapFactory::new(
//!     Arc::new(JsonlRecorderFactory::new(&storage)),
//!     Box::new(|mut events| {
//!         Some(tokio::spawn(async move {
//!             while let Some(e) = events.next().await {
//!                 println!("#{} {} {}", e.seq, e.event_type().as_str(), e.path);
//!             }
//!         }))
//!     }),
//! ));
//! // Steps are confined by Landlock and, through the `transcript-netns` helper, kept off the
//! // network; this example ships no helper, so its steps use the host's network.
//! let policy = transcript_exec::sandbox::SandboxPolicy::confined().host_network();
//! let service = ExecutionService::builder(&workspace, Arc::new(SystemClock), Arc::new(RandomRunIds))
//!     .recorder_factory(live.clone())
//!     .sandbox(policy)
//!     .build()?;
//! let workflow = Workflow::new("hello").step(Step::command_argv("greet", ["echo", "hi"]));
//! let outcome = service
//!     .run(
//!         &WorkflowSet::new("hello", workflow),
//!         serde_json::Map::new(),
//!         tokio_util::sync::CancellationToken::new(),
//!     )
//!     .await?;
//! live.drain("the live view").await?; // every live event was seen
//! assert!(outcome.succeeded());
//! assert!(storage.join(format!("{}.jsonl", outcome.run_id)).is_file());
//! # Ok(())
//! # }
//! ```
//!
//! # Model
//!
//! A [`Workflow`] is a name, declared inputs, output templates and a list of
//! [`Step`]s run in order. Workflows come from YAML ([`Workflow::from_yaml`],
//! [`WorkflowSet::load`]) or are built in Rust ([`Workflow::new`],
//! [`Step::command`], …). A [`WorkflowSet`] is a root workflow plus every
//! workflow its `call_workflow` steps can reach.
//!
//! | kind | does | `result` on `step.completed` |
//! |---|---|---|
//! | `agent` | runs an agent: a CLI subprocess ([`CliAgentRunner`]; without `command:` the `claude`, `codex` and `gemini` presets run the real CLIs, [`preset`]), the OpenAI-compatible HTTP tool loop ([`HttpAgentRunner`]) or any registered [`AgentRunner`] | the final answer text; `{"output", "warnings"}` when the provider reported errors the agent survived ([`AgentReply::warnings`]) |
//! | `command` | a string: shell source run by `/bin/sh -c` in the workspace, values through `env:` only; a list: the argv, no shell | `{"command", "env"?, "stdout", "exit_code"}` (`command`: the source, or the rendered argv list; `env`: the rendered variables, when the step has some) |
//! | `operation` | one tool call through the [`ToolRouter`] | the tool's output |
//! | `terminal` | ends the run with success or failure and a message | `{"status", "message"}` |
//! | `parallel` | branches (each a step), `all_succeed` or `first_success` | `{"branches": {branch: status}}` (outputs are in the branches' own events) |
//! | `for_each` | the body once per item (`{{loop.item}}`, `{{loop.index}}`) | `{"iterations": n}` |
//! | `while` | the body while a condition holds, at most `max_iterations` | `{"iterations": n}` |
//! | `call_workflow` | another workflow as a child run | the child's outputs |
//! | custom | a [`CustomStep`] registered from Rust by type name | its serialized return value |
//!
//! A parent's `result` refers to its children rather than repeating their
//! outputs, so a file grows linearly in what its steps produced; templates
//! still read a parallel block's output as `{branch: output}` and a
//! `for_each`'s as `[last output per iteration]`.
//!
//! Every value recorded is bounded ([`ServiceBuilder::max_value_bytes`],
//! default 1 MiB): a larger command output, tool input or output, step
//! result or message block keeps a prefix followed by
//! `…[truncated: N bytes, sha256 H]` (other values become a
//! `{"_truncated": true, ...}` stub, [`bounded`]), so no line exceeds
//! `MAX_LINE_BYTES`. Subprocess output is captured under the same cap (the
//! rest is counted and hashed as it streams), and templates see the
//! bounded text.
//!
//! Templates (`{{inputs.x}}`, `{{steps.build.output}}`,
//! `{{steps.build.exit_code}}`, `{{steps.build.error}}`, `{{loop.item}}`,
//! `{{loop.item.field}}`, `{{loop.index}}`) are compiled once, when the
//! workflow is built or loaded ([`compiled`]; a run renders them and parses
//! none), and checked before a run: an unknown kind, a reference to an undeclared input or to a step
//! that has not run at that point, a malformed template, a value spliced
//! into shell source (see [Template sinks](#template-sinks)), a duplicate name or a `call_workflow`
//! cycle is a [`WorkflowError`] naming file, step path and reason, and
//! nothing is emitted. Literal braces: a lone `}}` is text,
//! `{{ "{{" }}` writes `{{`, and `{% raw %}…{% endraw %}` keeps a block
//! verbatim ([`template`]).
//!
//! Outside workflows, [`ChatClient`] makes single Chat Completions requests on the HTTP
//! agent's transport (endpoint and key as the HTTP agent takes them, the key named by an
//! environment variable and masked in errors): `transcript check` grades its `judge:`
//! expectations with it, through transcript-compare's `Grader` port.
//!
//! # Event emission
//!
//! * `run.started` / `run.completed` bracket every run with a `StepPayload`
//!   whose name is the workflow's and kind `workflow` (decision 2);
//!   `run.completed` carries `error` on failure or cancellation and `result`
//!   = the rendered outputs of a successful run.
//! * Every step but `call_workflow` writes `step.started` and
//!   `step.completed` (`error` on failure, the result above on success).
//!   A `command` step's `step.started` carries what it is about to run as
//!   its `result`, `{"command": <shell source or argv>, "env": [<names>]}`,
//!   so a step cancelled or killed before it completes still records it
//!   (StepPayload's only open field; variable values are not written there).
//!   `call_workflow` writes `step.call_workflow.started` / `.completed`
//!   carrying `child_run_id` instead (decision 12); the child run gets a new
//!   id and its own recorder from the factory, so every child line carries
//!   `parent_run_id` and its own seq series (decision 7).
//! * `path` is the dot-joined step names (`block.branch`, `loop.step`,
//!   nested freely) and `iteration` the index of the innermost enclosing loop
//!   (decision 4); a loop step itself carries its enclosing iteration.
//!   Two executions of the same path are never open at once, which is what
//!   lets `transcript_domain::tree::build_run_tree` rebuild the executed
//!   tree from the file alone (tested, also with branches running on real
//!   threads).
//! * Tools: every [`ToolRouter::call_tool`] writes `tool.call` (output
//!   `null`) then `tool.result` (input `null`, decision 6) with one
//!   `call_id`, fidelity `router`, the error in `tool.result.error`, at the
//!   calling step's path and iteration (decision 5).
//! * Agents: `message.user` (prompt, then system prompt; fidelity `router`)
//!   before the agent starts; one `message.assistant` per provider turn with
//!   provider, model and usage (decisions 10, 11; when the provider reports
//!   no model, as Codex's `exec --json` does not, the step's configured
//!   `model:` is recorded instead, so receipts name it; a reported model
//!   always wins); agent-reported tool calls
//!   at fidelity `agent_emitted`. Each call id gets one `tool.call` and one
//!   `tool.result`, whichever of the router and the agent's report comes
//!   first, and **every executed call is recorded** (#28): a provider id
//!   that already ran (or was refused, or whose result a report already
//!   gave) is recorded under `<id>~2`, `<id>~3`, …, so a model reusing an
//!   id never runs a tool unrecorded; the HTTP agent renames such ids in
//!   the recorded turn too, so `tool_use` blocks and tool events pair.
//! * Call ids of agent steps are unique per run file: the provider's id is
//!   recorded as `<path>#<iteration>/<id>` (`agents.review#0/item_1`, with
//!   `~<n>` after the iteration when the same path and iteration ran
//!   before, e.g. an inner loop inside an outer one), in `tool.*` events
//!   and `tool_use` / `tool_result` blocks alike, so pairing by `call_id`
//!   (the seed's jq recipe) never merges calls of two executions; the
//!   provider's id stays visible after the `/`. Router-generated ids
//!   (`router-<n>`) are counted per run and are left as they are.
//! * The resolved command of a `command` step is in its result
//!   (`command`). No `command` block is written: blocks belong to
//!   messages, a command step has none, and decision 11 fixes an agent's
//!   `message.user` as `[text(prompt), text(system_prompt)?]`.
//!
//! # Exit-path guarantees
//!
//! Every started step writes its completion, and every run its
//! `run.completed`, whatever happens: a step error (the enclosing sequence
//! stops unless the step has `continue_on_error`), a panic in a custom step,
//! tool or agent runner (caught at the boundary and turned into the step's
//! error), a step timeout (the step's own cancellation token fires; nested
//! steps close as `cancelled`, the step as `timed out after Nms`), and run
//! cancellation through the [`tokio_util::sync::CancellationToken`] given to
//! [`ExecutionService::run`] (running subprocesses are ended with their
//! whole process group: `SIGTERM`, then `SIGKILL` after
//! [`ServiceBuilder::kill_grace`], see [`process`]; steps not yet
//! started never start, open ones close with `cancelled`). The engine never
//! drops a future that opened events; custom steps and agent runners (user
//! code) see the cancellation and get a grace period to finish
//! ([`ServiceBuilder::cancel_grace`], default 5 s) before they are dropped,
//! and their step still closes. Dropping the future returned by
//! [`ExecutionService::run`] abandons the run mid-way: cancel through the
//! token instead.
//!
//! # When the transcript cannot be written
//!
//! A run **stops** rather than continue without its transcript (#17): the
//! first failed record (disk full, I/O error, a refused line) cancels the
//! run, which ends as [`Status::Failed`] with the error
//! `transcript write failed: <cause>` (the OS cause included, e.g. `No
//! space left on device (os error 28)`). Open steps still close and
//! `run.completed` is still attempted (space may have come back), so the
//! part of the file that is on disk stays valid. Every failure, including
//! each child run's (prefixed `child run <id>:`), is in
//! [`RunOutcome::transcript_errors`]; a child whose transcript fails (or
//! cannot be opened) fails its `call_workflow` step; a failed close
//! turns a successful run into a failed one. A run with any transcript
//! error never reports success: the audit trail, the display and the
//! caller all see the failure.
//!
//! # Determinism
//!
//! [`ServiceBuilder::deterministic`] runs parallel branches one at a time in
//! declaration order (loop iterations are always sequential); with a
//! `ManualClock` for the recorder, another for audit/display, and
//! `SequentialRunIds`, a run's files are byte-for-byte reproducible
//! ([`ExecutionService::deterministic_builder`] sets the exec side up). In
//! the default mode branches run as concurrent tokio tasks, each on its own
//! copy of the template scope, so no loop state is shared between them.
//!
//! # Coexistence
//!
//! The service also writes an `audit.jsonl` trail (paired `step_start` /
//! `step_end` records, plus `run_start` / `run_end`, see [`AuditRecord`])
//! and emits [`DisplayEvent`]s to a [`DisplaySink`]. Both read their own
//! clock and never depend on whether a recorder is wired, so they are
//! byte-identical with and without a transcript (golden-tested).
//!
//! # Tools and plugins
//!
//! Builtins `read_file`, `write_file`, `list_dir` and `run_command` work in
//! the service's workspace directory; file paths are resolved by the kernel
//! beneath the workspace (`openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS`, [`confined`]): anything outside, any symlink and
//! any absolute path is refused ([`ToolError::PathEscapes`], the same answer
//! as for a path that does not exist); FIFOs, devices and sockets
//! ([`ToolError::NotRegular`]) and files with more than one hard link
//! ([`ToolError::HardLinked`]) are refused without being opened for I/O;
//! `read_file` reads at most its cap. Every tool declares the JSON Schema of its
//! input ([`Tool::parameters`]), which the HTTP agent offers to the model. Plugins are Rust
//! [`Plugin`]s or external processes spoken to over NDJSON on stdio
//! ([`ExternalPlugin`]; the protocol is documented in [`plugin`]).
//!
//! # Threat model
//!
//! **First, the kernel bounds every process a run starts** ([`sandbox`], #56; on by
//! default, [`sandbox::SandboxPolicy`] on [`ServiceBuilder::sandbox`]): command steps,
//! `run_command`, plugins, MCP servers and agent CLIs, and all they start, read and write
//! only their bounds (Landlock: the workspace, a private `TMPDIR`, declared paths, the
//! system trees read-only; the storage and audit file hidden even beneath the workspace;
//! no capability, no new Unix socket, no terminal). Whatever the rules below miss runs
//! inside those bounds. A service built with confinement on a kernel without Landlock
//! fails to build ([`ExecError::Sandbox`]), never runs unconfined silently.
//!
//! **And the network** ([`sandbox::net`], #57): each of those processes starts in a user and
//! network namespace of its own, loopback only, and reaches only the literal `host:port`s its
//! step's `network:` (or the workflow's `defaults:`) names, through a proxy the runner serves
//! inside the namespace; an agent CLI also reaches its model endpoint and the runner's MCP
//! proxy. Every refusal at the proxy is recorded in the step's `step.completed`
//! (`network_refused`). `network: all` (or [`sandbox::SandboxPolicy::host_network`]) is the
//! host's network, said in `step.started`. A process whose namespace cannot be made does not
//! start.
//!
//! **Workflow files are trusted; inputs, agent output and tool output are
//! not.** A workflow is code its author runs with the service's privileges:
//! `command` steps and `run_command` run what the author wrote. Everything
//! that reaches a run from elsewhere (`--input` values, an agent's answer,
//! which may follow a prompt injected into a page it read, a tool's or a
//! step's output or error) is data, and stays data:
//!
//! * Templates: a value is inserted as text, never parsed again. `while`
//!   conditions find their `==` / `!=` in the condition's own text, so data
//!   containing an operator is only ever compared
//!   ([`condition::Condition`]).
//! * Commands: **no value is ever spliced into shell source** (#28), and
//!   **no value becomes code in any list-form command either** (#39,
//!   decided by structure: see [Template sinks](#template-sinks)). The
//!   string form of `command:` (and a string `run_command` input) is the
//!   author's shell source, run by `/bin/sh -c` (by absolute path, never a
//!   `sh` looked up on `PATH`); a `{{…}}` in it is refused when the
//!   workflow loads, naming the step and showing the fix, unless it is
//!   `{{ x | raw }}`, the author vouching for that value as shell code.
//!   Values reach a shell through the step's `env:` (the script says
//!   `"$NAME"`), the way GitHub Actions' hardening guide has `run:` scripts
//!   use an intermediate environment variable; the list form runs the
//!   program with each rendered element as one argument, no shell, never
//!   split. No shell grammar is re-implemented here to quote data.
//!   What a script does with a variable is its own: `eval "$X"`,
//!   `sh -c "$X"`, `python -c "$X"` run it, and **bash** evaluates a
//!   variable used as a number (`[[ $N -eq 1 ]]`, `(( N ))`, `$(( N ))`,
//!   `declare -i`, array subscripts) as an arithmetic expression whose
//!   `a[$(cmd)]` runs `cmd`: check a value is a number (`case $N in
//!   ''|*[!0-9]*) exit 1;; esac`) before bash does arithmetic with it.
//!   (`/bin/sh` as dash does no such thing: it refuses a non-number.)
//! * Tools: an agent reaches only the router tools its step lists in
//!   `tools:`; a call to any other (unknown names included) is recorded as
//!   `tool.call` plus an error `tool.result` and never runs
//!   ([`AgentSeam::call_tool`]). Listing `run_command` gives the model a
//!   shell with the service's environment: list it only for agents you
//!   would give one.
//! * Files: the file tools stay inside the workspace and answer a missing
//!   path and one outside the workspace alike, so a model cannot probe what
//!   exists elsewhere. The kernel does the confinement during the open
//!   itself ([`confined`]), so a concurrent swap of a file and a symlink
//!   (another branch, a command, a local user) has no window to exploit; a
//!   hard link (another name for a file that may lie outside) is refused.
//!
//! * Environment: a process the engine starts (command step, `run_command`,
//!   CLI agent, plugin) inherits the runner's environment, less what the
//!   composition root consumed for itself ([`ServiceBuilder::withheld_env`],
//!   [`PluginLimits::withheld_env`]; the CLI withholds the `NATS_*`
//!   credentials of its `--storage nats://` connection): a step printing its
//!   environment, or an agent told to by an injected prompt, cannot put the
//!   fleet's credential into the transcript stored with it. The rule is what
//!   the runner consumed, not a list of secret-looking names: the rest
//!   (`OTEL_*` included) is passed on, and a step's own `env:` may set a
//!   withheld name ([`withheld_env`]; cli: `nats_env_withheld.rs`).
//!
//! Prompts, tool inputs and outputs are recorded verbatim; masking is the
//! recorder's opt-in `EventMask` stage.
//!
//! # Template sinks
//!
//! Every place a `{{…}}` value can go, what becomes of it, and the test that guards it (a
//! value is inserted as text exactly once and never parsed again, except where noted).
//! **Values never become code, decided by structure** (#39): every place a command is
//! written goes through one rule, `workflow::argv_rule::check_argv`, at load: a template is
//! a whole argv element or the value of a literal `--name=` prefix, else it is refused
//! naming the file, step and element (whichever program reads it: a spliced value builds
//! source text); element 0 (the program) is never templated; `{{ x | raw }}` is the
//! author vouching for a value as code. **Free text never reaches a program as an argument**
//! (#48): whether a position is code depends on the program (`split --filter=`, `git
//! ls-remote --upload-pack=`, `vim -c`, a make operand), so the value's declared shape
//! decides, not the program. Only typed values stand in argv: an input declared `type:
//! integer | number | boolean | enum | path | url` (or `string` with a whole-match
//! `pattern`), a reference with a shape filter (`| int`, `| number`, `| bool`, `| enum(a, b)`,
//! `| match('…')`, `| path`, `| url`: [`shape`]), `| file`, `loop.index`, `exit_code`, an item
//! of a literal list; free text is refused at load with the fix, and goes through `stdin:`,
//! `{{ x | file }}` (a `0600` file in the run's private directory: [`file_channel`]) or
//! `env:`. A typed value never starts with `-` or `+` unless `| option`. A `pattern` that
//! admits anything (`.*`) is vouching, as `| raw` is. An agent's endpoint and credentials
//! are the author's: its `env:` takes literals and secret inputs only. A list of
//! interpreters and wrappers that reads options as each program does (`inline_script`,
//! `options`: clusters, `--name value`, code options, script operands, the program a
//! wrapper runs) and of environment families (`env_rule`) is the second line, never the
//! rule: it refuses even a typed value in a code position (a closed one, an enum value,
//! a number or a boolean, excepted). Tests named `cli:` are through the binary
//! (`crates/transcript-cli/tests/`).
//!
//! | sink | what the value becomes | guarded by |
//! |---|---|---|
//! | `command:` string (shell source) | nothing: refused at load unless `\| raw` (the author's own shell code, inserted verbatim) | cli: `adversarial_shell.rs` |
//! | `command:` list (argv) | only a typed value (#48; free text: refused at load naming the element and how to pass it), one argument per whole element (or the value of `--name=`), never split, no shell; spliced into a larger element: refused at load; element 0: refused; a whole value in a code position of a program we know (`sh -c`, `python3.11 -Ic`, `perl -le`, `node -r fs -e`, `env -S`, `script -qc`, `flock -c`, `bash --rcfile X -c`, `awk -W x`, `sed`, `sqlite3`, `ssh -o`, `python -m timeit -s`, behind `env`/`timeout`/`nice`/`setsid`/`sudo`), or the program a wrapper runs (`timeout 5 {{x}}`, `env A=1 {{x}}`, `find -exec {{x}}`): refused at load | cli: `values_never_code.rs` (`no_value_becomes_code_in_any_shape_from_any_source`), `adversarial_inline_code.rs`; unit: `argv_rule`, `inline_script` |
//! | a whole element (option injection) | at run time, a value starting with `-` or `+` fails the step before the program starts, naming the element and the value's source, unless `{{ x \| option }}` (`git log -1 {{ref}}` with `--output=/x`, `vim {{f}}` with `+cmd`) | cli: `values_never_code.rs`, `typed_values*.rs` |
//! | an input's value (`--input`, a default, a `call_workflow` step's `inputs:`) | checked against its declared shape when the run starts (exit 2 from the binary, naming the input, the value's source and the rule; nothing runs) and at every call (the calling step fails); a `secret: true` input's rule only, never its value; a `path` names no hidden component (`.git`, `.envrc`) unless `hidden: true`, and is resolved beneath the workspace by the kernel (`openat2`, no symlink on it: refused naming the input, before any step; exit 1 from the binary) | unit: `shape`; `tests/contain_data.rs`; cli: `typed_values*.rs`, `contain_data_paths.rs`, `contain_data_secrets.rs` |
//! | a shaped reference (`{{ x \| path }}`, …) | checked when rendered: a value without its shape fails the step naming the reference (the value masked whole before the message cuts it); a `\| path` is resolved beneath the workspace by the kernel, no hidden component; nothing is spawned | unit: `template`, `shape`; `tests/contain_data.rs` |
//! | `stdin:` of a `command` step, `stdin` input of `run_command` | the process's standard input, written whole then closed: free text welcome | `tests/untrusted.rs`; cli: `adversarial_shell.rs` (`argv`) |
//! | `{{ x \| file }}` | the path of a `0600` file holding the value in the run's private `0700` directory (never an existing one; a random name, nothing of the content), removed when the run ends | unit: `file_channel`; `tests/untrusted.rs`; cli: `adversarial_inline_code.rs` |
//! | `env:` of a `command` step, `env` input of `run_command` | one environment variable's value (name: `[A-Za-z_][A-Za-z0-9_]*`); never in a name of the families programs read as code, configuration, the program to run or where requests go (`PERL5*`, `GIT_*`, `NODE_*`, `*_OPTIONS`, `*OPT(S)`, `TRANSCRIPT_*`, `*_BIN`, `LD_*`, `PATH`, `EDITOR`, make's `MAKEFLAGS`/`CC`/`*FLAGS`, `*INIT`, `*_BUS_ADDRESS`, `*_BASE_URL`, `*_ENDPOINT`, `*_API_BASE`, `*_PROXY`, …: `env_rule`, a second line: names are the author's); free text never reaches make (a command that runs it, behind any wrapper or in shell source); a NUL byte fails the step |
//! | `env:` of an agent step | literals and `secret: true` inputs only: an agent's endpoint, credentials and configuration are the author's; data reaches an agent through its prompt (#48) | unit: `workflow::tests` | cli: `values_never_code.rs` (`PERL5OPT`, `GIT_CONFIG_PARAMETERS`, `NODE_OPTIONS`, `TRANSCRIPT_CLAUDE_BIN`); unit: `env_rule` |
//! | `run_command` `command` string (operation input) | as a `command:` string: refused at load unless `\| raw` | cli: `adversarial_inline_code.rs`, `values_never_code.rs` |
//! | `run_command` `command` list | as a `command:` list, the same rule (structure, second line, option injection at run time) | cli: `values_never_code.rs` (`run_command list: …`) |
//! | `run_command` whole input, or its whole `command` | nothing: the input is an object written in the workflow and its `command` a string or list written there; a template in their place is refused at load (data never chooses the program) | cli: `values_never_code.rs` (`run_command whose whole input…`, `…whose command is the value`) |
//! | agent step `command:` (argv) | as a `command:` list (it used to be unchecked) | cli: `values_never_code.rs` (`agent step command: …`) |
//! | plugin declarations (`plugins:`), MCP stdio servers (`mcp_servers:` `command`/`args`/`env`) | nothing: literal lists, never rendered; a `{{` is refused at load | cli: `values_never_code.rs` (`plugin_declarations_and_mcp_servers_are_literal_lists`) |
//! | `call_workflow` `inputs:` | the child's input values; the child's commands meet the same rule (the whole set is validated at load; option injection at the child's run time) | cli: `values_never_code.rs` (`a_value_passed_through_call_workflow_…`) |
//! | other tool inputs (`operation` `input:` string leaves) | JSON string values handed to the tool; a single-reference leaf keeps the value's JSON type | `tests/exec.rs` |
//! | file paths (`read_file`/`write_file`/`list_dir` `path`) | a path the tool resolves beneath the workspace, refused outside it | `tests/confined.rs` |
//! | `while` condition | compared as data: the `==`/`!=` operator is found in the condition's own text before rendering ([`Condition`]) | `tests/untrusted.rs` |
//! | `for_each` `items:` template | a JSON array when the text parses as one, else lines; items are data for the body (and meet every rule above there) | cli: `values_never_code.rs` (every case from a `for_each` item) |
//! | agent `prompt` / `system_prompt` | the message text (`message.user`), and for a CLI preset one argv element that stays a prompt even when it starts with `-` ([`preset`]) | cli: `adversarial_prompts.rs` |
//! | custom step `with:` | parameters handed to Rust code | `tests/exec.rs` |
//! | `terminal` `message:`, `outputs:` | text in the transcript and the run's result | `tests/exec.rs` |
//!
//! **Run time.** An agent's own `run_command` call (the HTTP agent's tool loop) holds no
//! template: its whole input is the model's, and the step's `tools:` list is the boundary
//! (list `run_command` only for an agent you would give a shell). An operation step's
//! `run_command` input is rendered at run time from the templates checked at load, and
//! the run-time part of the rule (option injection) is applied to the rendered argv.
//!
//! **Processes.** Every descendant of a step is the step's ([`reaper`]): when the step
//! ends, success included, every process it started dies, including those that `setsid`,
//! double-fork, `nohup` or daemonize; the `transcript` runner is a child subreaper and ends
//! every descendant left at the run's end (cli: `no_pid_survives.rs`).
//!
//! **Secrets.** An input declared `secret: true` is written `"***"` in `run.started`
//! (wire decision 16); the binary adds its value to the recorder's mask, so it is masked in
//! every record, the audit trail, the plugins' stderr and every message printed, with or
//! without `--redact` (cli: `typed_values*.rs`). A library caller composing its own runner
//! gives its recorder factory such a mask itself (`transcript-redact`'s
//! `Redactor::with_secret`): this crate writes `"***"` in `run.started` and records the rest
//! as the run gives it.
//!
//! # Versioning
//!
//! The wire format is the domain crate's; this crate adds no field (the
//! shapes of step results, which 000 leaves to each kind, are listed in
//! the table above). The
//! YAML workflow format, the audit record and the plugin protocol (version
//! 1, announced in `describe`) are additive-only within a major version:
//! new optional fields and step kinds may appear, existing ones keep their
//! meaning. The Rust API is pre-1.0 and may change in a minor version:
//! [`ProcessLimits`] and [`PluginLimits`] are `Clone` but no longer `Copy`
//! since they carry the [`WithheldEnv`] names.
#![forbid(unsafe_code)]

pub mod agent;
pub mod agent_network;
pub mod agent_sandbox;
pub mod audit;
pub mod bounded;
pub mod builtins;
mod catch_unwind;
pub mod chat_client;
pub mod cli_agent;
pub mod compiled;
pub mod condition;
pub mod confined;
pub mod custom;
mod display;
pub mod emit;
pub mod file_channel;
mod gemini_session;
pub mod http_agent;
mod http_transport;
pub mod inherited_signals;
pub mod mcp;
pub mod model_endpoint;
pub mod plugin;
pub mod preset;
pub mod process;
pub mod provider;
pub mod reaper;
pub mod sandbox;
mod sandbox_runner;
pub mod service;
pub mod shape;
mod status;
pub mod template;
mod tool;
mod tool_error;
pub mod tools;
pub mod withheld_env;
pub mod workflow;

pub use agent::{AgentError, AgentReply, AgentRequest, AgentRunner, AgentRunners, AgentSeam};
pub use audit::{
    AuditEvent, AuditRecord, AuditTrail, CollectDisplay, DisplayEvent, DisplaySink, Status,
    TextMask,
};
pub use chat_client::{ChatAnswer, ChatClient, ChatError};
pub use cli_agent::CliAgentRunner;
pub use compiled::{Compiled, ConditionText, TemplateJson, TemplateText};
pub use condition::Condition;
pub use custom::{CustomStep, CustomStepContext, CustomSteps, FnStep, RegisterError, StepError};
pub use emit::Emitter;
pub use http_agent::{HttpAgentRunner, RetryPolicy};
pub use plugin::{
    ExternalPlugin, PluginLimits, start_declared_plugins, start_declared_plugins_masked,
    start_declared_plugins_with,
};
pub use preset::{Preset, PresetError};
pub use process::{ProcessLimits, ShellOutput};
pub use provider::AgentProvider;

/// What a secret input's value is recorded as, everywhere (#48, wire decision 16).
pub const SECRET_MASK: &str = "***";
pub use service::{ExecError, ExecNode, ExecutionService, InputSource, RunOutcome, ServiceBuilder};
pub use template::{Scope, StepValue, Template, TemplateError};
pub use tools::{CallScope, Plugin, Tool, ToolContext, ToolError, ToolRouter};
pub use withheld_env::WithheldEnv;
pub use workflow::{
    AgentSpec, CommandLine, InputDef, InputType, Items, ParallelMode, PluginSpec, Step, StepKind,
    Workflow, WorkflowError, WorkflowSet,
};
