//! Validation of the places a command or an agent is written (#39, #48): a command step's
//! shell source or argv, its `env:` and `stdin:`, `run_command`'s input, an agent step's
//! prompt, `command:`, `env:` and MCP servers. The rules themselves live in `argv_rule`,
//! `env_rule` and `inline_script`; this file applies them to each step. `run_command`'s
//! `env` input takes a command step's rules (#56): the same names, and no free text when the
//! command runs make (`make`, `[sh, -c, "make …"]`, a shell string mentioning make).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{StepCheck, Visible};
use crate::compiled::{TemplateJson, TemplateText};
use crate::template::{Reference, Template};
use crate::workflow::{AgentSpec, CommandLine, WorkflowError, argv_rule, env_rule};

impl StepCheck<'_> {
    /// A command step: its templates, no value in shell source or in the
    /// code argument of a program, its environment names.
    pub(super) fn command(
        &self,
        command: &CommandLine,
        env: &BTreeMap<String, TemplateText>,
        stdin: Option<&TemplateText>,
        visible: &Visible,
    ) -> Result<(), WorkflowError> {
        if let Some(stdin) = stdin {
            self.text(stdin, "stdin", visible)?;
            if let CommandLine::Argv(argv) = command {
                let sources: Vec<String> = argv.iter().map(|a| a.source().to_owned()).collect();
                self.stdin_rule(&sources, self.compiled(stdin, "stdin")?, visible)?;
            }
        }
        match command {
            CommandLine::Shell(command) => {
                self.text(command, "command", visible)?;
                self.compiled(command, "command")?
                    .check_shell_source()
                    .map_err(|e| self.err(format!("command: {e}")))?;
            }
            CommandLine::Argv(argv) => self.argv(argv, visible)?,
        }
        let make = match command {
            CommandLine::Shell(text) => {
                crate::workflow::inline_script::mentions_make(text.source())
            }
            CommandLine::Argv(argv) => argv_runs_make(
                &argv
                    .iter()
                    .map(|a| a.source().to_owned())
                    .collect::<Vec<_>>(),
            ),
        };
        for (name, value) in env {
            self.text(value, &format!("env {name}"), visible)?;
            env_rule::check_env_entry(name, value.source())
                .map_err(|r| self.err(format!("env: {r}")))?;
            if make {
                self.make_env(name, self.compiled(value, "env")?, visible)
                    .map_err(|r| self.err(format!("env: {r}")))?;
            }
        }
        Ok(())
    }

    /// make evaluates every environment variable as make code (`$(shell …)` in any value
    /// runs when a recipe expands it): in the `env:` of a command that runs make (a command
    /// step's or `run_command`'s, #56), a value holds no free text (a second line).
    fn make_env(&self, name: &str, value: &Template, visible: &Visible) -> Result<(), String> {
        let typing = self.typing(visible);
        let free = value.segments.iter().find_map(|s| match s {
            crate::template::Segment::Ref { reference, .. } if !typing.typed(s) => Some(reference),
            _ => None,
        });
        match free {
            Some(reference) => Err(format!(
                "'{name}' takes '{{{{{reference}}}}}', free text, and this command runs make, \
                 which evaluates every environment variable as make code: pass the text \
                 through stdin: or a file ('{{{{ {reference} | file }}}}'), or give it a shape"
            )),
            None => Ok(()),
        }
    }

    /// `stdin:` is a channel for free text only to a program that reads it as data: free
    /// text into a program that reads its input as code (a shell, an interpreter, `xargs`,
    /// `vim -es`, …: [`crate::workflow::inline_script::reads_stdin_as_code`], a second line) is refused.
    fn stdin_rule(
        &self,
        argv: &[String],
        stdin: &Template,
        visible: &Visible,
    ) -> Result<(), WorkflowError> {
        let typing = self.typing(visible);
        let free = stdin.segments.iter().find_map(|s| match s {
            crate::template::Segment::Ref { reference, .. }
                if !typing.closed(s) && !matches!(reference, Reference::WorkflowDir) =>
            {
                Some(reference.clone())
            }
            _ => None,
        });
        if let (Some(r), Some(program)) = (
            free,
            crate::workflow::inline_script::reads_stdin_as_code(argv),
        ) {
            return Err(self.err(format!(
                "stdin: '{{{{{r}}}}}' is data, and `{program}` reads its standard input as code \
                 here: give the program its code in the workflow (`[sh, -c, 'wc -c']`, \
                 `[python3, tool.py]`) and the data on its standard input"
            )));
        }
        Ok(())
    }

    /// A list-form command (a command step's, an agent step's): its templates, then the
    /// one rule of every command sink ([`argv_rule::check_argv`]).
    fn argv(&self, argv: &[TemplateText], visible: &Visible) -> Result<(), WorkflowError> {
        for arg in argv {
            self.text(arg, "command", visible)?;
        }
        let sources: Vec<String> = argv.iter().map(|a| a.source().to_owned()).collect();
        argv_rule::check_argv(
            &sources,
            |i| argv.get(i)?.compiled().ok(),
            &self.typing(visible),
        )
        .map_err(|e| self.err(format!("command: {e}")))
    }

    /// An operation step: a tool name and an input whose templates hold;
    /// for `run_command`, the same rules as a command step.
    pub(super) fn operation(
        &self,
        tool: &str,
        input: &TemplateJson,
        visible: &Visible,
    ) -> Result<(), WorkflowError> {
        if tool.is_empty() {
            return Err(self.err("operation needs a tool name"));
        }
        self.json(input, "input", visible)?;
        if tool != crate::tools::SHELL_TOOL {
            return Ok(());
        }
        // Data never chooses the program: the input is an object written in the workflow,
        // and its `command` a string or a list written there, never one template.
        let Value::Object(fields) = input.source() else {
            return Err(self.err(
                "input: run_command's input is written in the workflow (an object with \
                 `command`), never a template: data never chooses the program",
            ));
        };
        let make = match fields.get("command") {
            Some(Value::String(source)) => {
                if let Some(line) = input.field("command") {
                    line.check_shell_source()
                        .map_err(|e| self.err(format!("input: command: {e}")))?;
                }
                crate::workflow::inline_script::mentions_make(source)
            }
            Some(Value::Array(items)) => {
                let argv: Vec<String> = items
                    .iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                    .collect();
                argv_rule::check_argv(
                    &argv,
                    |i| input.element("command", i),
                    &self.typing(visible),
                )
                .map_err(|e| self.err(format!("input: command: {e}")))?;
                if let Some(stdin) = input.field("stdin") {
                    self.stdin_rule(&argv, stdin, visible)?;
                }
                argv_runs_make(&argv)
            }
            _ => {
                return Err(self.err(
                    "input: run_command needs `command`, a string or a list written in the workflow",
                ));
            }
        };
        self.shell_env(fields.get("env"), make, visible)
    }

    /// `run_command`'s `env` input: a mapping of portable names to strings, numbers or
    /// booleans, under a command step's rules (#56): [`env_rule`]'s names, and no free text
    /// when the command runs make.
    fn shell_env(
        &self,
        env: Option<&Value>,
        make: bool,
        visible: &Visible,
    ) -> Result<(), WorkflowError> {
        let map = match env {
            None => return Ok(()),
            Some(Value::Object(map)) => map,
            Some(_) => return Err(self.err("input: env must be a mapping of names to strings")),
        };
        for (name, value) in map {
            // A literal number or boolean is its text.
            let text = match value {
                Value::String(v) => v.as_str(),
                Value::Number(_) | Value::Bool(_) => "",
                _ => {
                    return Err(self.err(format!(
                        "input: env: '{name}' must be a string, a number or a boolean"
                    )));
                }
            };
            env_rule::check_env_entry(name, text)
                .map_err(|r| self.err(format!("input: env: {r}")))?;
            if make && text.contains("{{") {
                // Load time: the operation's input was compiled whole; this one leaf again.
                let value = Template::parse(text)
                    .map_err(|e| self.err(format!("input: env: '{name}': {e}")))?;
                self.make_env(name, &value, visible)
                    .map_err(|r| self.err(format!("input: env: {r}")))?;
            }
        }
        Ok(())
    }

    /// An agent step: its templates, environment, provider and preset.
    pub(super) fn agent(&self, a: &AgentSpec, visible: &Visible) -> Result<(), WorkflowError> {
        self.text(&a.prompt, "prompt", visible)?;
        if let Some(sp) = &a.system_prompt {
            self.text(sp, "system_prompt", visible)?;
        }
        if !a.command.is_empty() {
            self.argv(&a.command, visible)?;
        }
        for (name, value) in &a.env {
            self.text(value, "env", visible)?;
            env_rule::check_env_entry(name, value.source())
                .map_err(|r| self.err(format!("env: {r}")))?;
            // An agent's endpoint and credentials are the author's (#48): no data in its
            // environment but a secret input (a credential the caller hands over).
            let data = self.compiled(value, "env")?.references().find(|r| match r {
                Reference::WorkflowDir => false,
                Reference::Input(n) => !self.seq.secret_inputs.contains(n.as_str()),
                _ => true,
            });
            // Where the CLI keeps its state is what a confined agent may write (#56): never
            // a value from outside the workflow, a secret input's included.
            let state = crate::sandbox::AGENT_STATE_ENV.contains(&name.as_str());
            if state
                && let Some(r) = self
                    .compiled(value, "env")?
                    .references()
                    .find(|r| !matches!(r, Reference::WorkflowDir))
            {
                return Err(self.err(format!(
                    "env: '{name}' takes '{{{{{r}}}}}': where an agent CLI keeps its state is \
                     what it may write when confined, so it is written in the workflow, never \
                     given by an input (a secret one included)"
                )));
            }
            if let Some(r) = data {
                return Err(self.err(format!(
                    "env: '{name}' takes '{{{{{r}}}}}', data, and an agent's environment is the \
                     author's (its endpoint, credentials and configuration): data reaches an \
                     agent through its prompt; a credential through an input declared \
                     `secret: true`"
                )));
            }
        }
        if a.provider.is_empty() {
            return Err(self.err("agent needs a provider"));
        }
        crate::workflow::mcp_servers::check_step(&a.provider, &a.command, &a.mcp_servers)
            .map_err(|r| self.err(r))?;
        for s in &a.mcp_servers {
            if let crate::workflow::McpTransport::Stdio { env, .. } = &s.transport {
                for name in env.keys() {
                    env_rule::check_env_entry(name, "")
                        .map_err(|r| self.err(format!("mcp_servers '{}': env: {r}", s.name)))?;
                }
            }
        }
        if a.command.is_empty()
            && let Some(preset) = crate::preset::Preset::of_agent(&a.provider)
        {
            preset
                .check(a.max_turns, &a.tools)
                .map_err(|e| self.err(e.to_string()))?;
        }
        Ok(())
    }
}

/// Whether a list-form command runs make: an element names it
/// ([`crate::workflow::inline_script::runs_make`]) or mentions it as a word
/// ([`crate::workflow::inline_script::mentions_make`]: the code of `[sh, -c, "make all"]`,
/// `[bash, -lc, "cd x && make"]`). A second line: the command as written, never a script it
/// runs.
fn argv_runs_make(argv: &[String]) -> bool {
    crate::workflow::inline_script::runs_make(argv)
        || argv
            .iter()
            .any(|e| crate::workflow::inline_script::mentions_make(e))
}
