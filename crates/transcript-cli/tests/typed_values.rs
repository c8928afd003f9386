//! Issue #48, the attacker's side: whatever the program, a value whose shape the workflow has
//! not declared (free text) never becomes an argv element, and a typed value never stands
//! where its program reads code or a program name. Each [`CASES`] entry is one kind the issue
//! found running its payload at 8bc675f (a whole element read as code by the program, the
//! second line misreading options or wrappers, an environment name make or an editor reads as
//! code), run through the binary from every value source ([`Source`]): free and typed
//! `--input`s, a step's output plain and shaped (`| path`, `| url`, `| match(…)`), a
//! `for_each` item shaped, a child workflow's typed input, a `while` body, an agent step's
//! `command:` and a `run_command` list.
//!
//! The payloads are chosen to fit the type where one can: `touch,/abs/MARK` is a lexically
//! relative `path` that `cc -wrapper` runs, `w/abs/MARK` one that sed and vim write to, and
//! `http://h/?;touch${IFS}/abs/MARK` is an `http` URL as the WHATWG parser writes it and
//! shell code for every program that hands its option to `sh -c`.
//!
//! The proof is always the marker, a file *outside* the workspace (`@M@`), and the exit code:
//! refused at load (3) for code and program positions; for a data position (a make goal, a
//! perl file operand, make's environment) free text is refused at load (3) and a typed value
//! that does not fit is refused by its check (2 for an input, 1 for a shaped reference or a
//! child's input) unless the position is refused at load first. Programs missing here still
//! must be refused at load: that needs no program.
#![allow(clippy::unwrap_used)]

mod common;
mod typed_support;

use typed_support::{Sandbox, indent, last_line};

/// A type a payload fits.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ty {
    /// `type: path` / `| path`.
    Path,
    /// `type: url` / `| url`.
    Url,
    /// `type: string` with `pattern: '[a-z0-9]+'` / `| match('[a-z0-9]+')`.
    Word,
}

impl Ty {
    /// The input declaration's fields (YAML at an indentation of 4).
    fn declaration(self) -> &'static str {
        match self {
            Ty::Path => "    type: path\n",
            Ty::Url => "    type: url\n",
            Ty::Word => "    type: string\n    pattern: '[a-z0-9]+'\n",
        }
    }

    /// The reference filter giving the shape.
    fn filter(self) -> &'static str {
        match self {
            Ty::Path => "path",
            Ty::Url => "url",
            Ty::Word => "match('[a-z0-9]+')",
        }
    }
}

/// Where the value stands, which decides how the case must end.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Pos {
    /// The program reads it as code (a shell command, a script, an option that runs one):
    /// refused at load whatever the value's shape.
    Code,
    /// The program position behind a wrapper: refused at load whatever the shape.
    Program,
    /// An environment name make, a compiler or an editor reads as code, or an endpoint:
    /// templated values are refused at load whatever the shape.
    EnvName,
    /// A data position (a make goal, a file operand, make's environment): free text is
    /// refused at load; a typed value that breaks its type is refused by its check.
    Data,
}

/// One kind of attack.
struct Case {
    name: &'static str,
    /// The command, a YAML flow list; `{{V}}` is the reference, `@M@` the marker.
    argv: &'static str,
    /// The environment variable holding the reference (the argv then holds none).
    env: Option<&'static str>,
    /// The payload as free text.
    free: &'static str,
    /// Payloads fitting a type; none: the free payload declared as a `path`.
    typed: &'static [(Ty, &'static str)],
    pos: Pos,
}

/// Shell code that is an http URL the WHATWG parser leaves as it is.
const URL_SH: &str = "http://h/?;touch${IFS}@M@";

const fn code(
    name: &'static str,
    argv: &'static str,
    free: &'static str,
    typed: &'static [(Ty, &'static str)],
) -> Case {
    Case {
        name,
        argv,
        env: None,
        free,
        typed,
        pos: Pos::Code,
    }
}

const fn program(name: &'static str, argv: &'static str) -> Case {
    Case {
        name,
        argv,
        env: None,
        free: "touch",
        typed: &[(Ty::Word, "touch"), (Ty::Path, "touch")],
        pos: Pos::Program,
    }
}

const fn env_name(
    name: &'static str,
    argv: &'static str,
    var: &'static str,
    free: &'static str,
    typed: &'static [(Ty, &'static str)],
) -> Case {
    Case {
        name,
        argv,
        env: Some(var),
        free,
        typed,
        pos: Pos::EnvName,
    }
}

/// `touch @M@` (a `path` only when inner spaces are allowed) and [`URL_SH`].
const SH_TYPED: &[(Ty, &str)] = &[(Ty::Path, "touch @M@"), (Ty::Url, URL_SH)];

const CASES: &[Case] = &[
    // A whole element is code when the program says so.
    code(
        "split --filter=",
        r#"["split", "--filter={{V}}", "data.txt"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "tar --checkpoint-action=exec=",
        r#"["tar", "-cf", "out.tar", "--checkpoint=1", "--checkpoint-action=exec={{V}}", "data.txt"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "tar --checkpoint-action= (whole)",
        r#"["tar", "-cf", "out.tar", "--checkpoint=1", "--checkpoint-action={{V}}", "data.txt"]"#,
        "exec=touch @M@",
        &[],
    ),
    code(
        "tar --to-command=",
        r#"["tar", "-xf", "a.tar", "--to-command={{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "tar -I",
        r#"["tar", "-cf", "out.tar", "-I", "{{V}}", "data.txt"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "tar --use-compress-program VALUE",
        r#"["tar", "-c", "-f", "out.tar", "--use-compress-program", "{{V}}", "data.txt"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "git ls-remote --upload-pack=",
        r#"["git", "ls-remote", "--upload-pack={{V}}", "."]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "git ls-remote --upload-pack VALUE",
        r#"["git", "ls-remote", "--upload-pack", "{{V}}", "."]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "git push --receive-pack=",
        r#"["git", "push", "--receive-pack={{V}}", ".", "HEAD:refs/heads/x"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "git difftool --extcmd=",
        r#"["git", "difftool", "-y", "--extcmd={{V}}", "HEAD~1", "HEAD"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "git rebase -x",
        r#"["git", "rebase", "-x", "{{V}}", "HEAD~1"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "git clone -u",
        r#"["git", "clone", "--no-local", "-u", "{{V}}", ".", "c2"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "make --eval=",
        r#"["make", "--eval={{V}}", "-f", "Makefile"]"#,
        "$(shell touch @M@)",
        &[],
    ),
    code(
        "make --eval VALUE",
        r#"["make", "--eval", "{{V}}", "-f", "Makefile"]"#,
        "$(shell touch @M@)",
        &[],
    ),
    code(
        "gdb -ex",
        r#"["gdb", "-batch", "-ex", "{{V}}"]"#,
        "shell touch @M@",
        &[(Ty::Path, "shell touch @M@")],
    ),
    code(
        "gdb --batch --eval-command VALUE",
        r#"["gdb", "--batch", "--eval-command", "{{V}}"]"#,
        "shell touch @M@",
        &[(Ty::Path, "shell touch @M@")],
    ),
    code(
        "vim -c",
        r#"["vim", "-es", "-c", "{{V}}", "-c", "qa!"]"#,
        "w@M@",
        &[(Ty::Path, "w@M@")],
    ),
    code(
        "vim +cmd (spliced)",
        r#"["vim", "-es", "+{{V}}", "+qa!"]"#,
        "w@M@",
        &[(Ty::Path, "w@M@")],
    ),
    code(
        "vim --cmd",
        r#"["vim", "-es", "--cmd", "{{V}}", "-c", "qa!"]"#,
        "w@M@",
        &[(Ty::Path, "w@M@")],
    ),
    code(
        "zip -TT",
        r#"["zip", "-q", "-T", "-TT", "{{V}}", "out.zip", "data.txt"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "zip --unzip-command=",
        r#"["zip", "-q", "-T", "--unzip-command={{V}}", "out.zip", "data.txt"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "cc -wrapper",
        r#"["cc", "-wrapper", "{{V}}", "-c", "x.c", "-o", "x.o"]"#,
        "mkdir,--,@M@",
        &[(Ty::Path, "mkdir,--,@M@")],
    ),
    code(
        "go run -exec",
        r#"["go", "run", "-exec", "{{V}}", "main.go"]"#,
        "touch @M@",
        &[(Ty::Path, "touch @M@")],
    ),
    code("npx -c", r#"["npx", "-c", "{{V}}"]"#, "touch @M@", SH_TYPED),
    code(
        "npx --call=",
        r#"["npx", "--call={{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "node --import= (data: URL)",
        r#"["node", "--import={{V}}", "-e", "1"]"#,
        "data:text/javascript,import fs from 'fs';fs.writeFileSync('@M@','')",
        &[],
    ),
    code(
        "node --import VALUE (data: URL)",
        r#"["node", "--import", "{{V}}", "-e", "1"]"#,
        "data:text/javascript,import fs from 'fs';fs.writeFileSync('@M@','')",
        &[],
    ),
    code(
        "bash -eo pipefail -c",
        r#"["bash", "-eo", "pipefail", "-c", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "bash -o pipefail -ec",
        r#"["bash", "-o", "pipefail", "-ec", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code("sh -xc", r#"["sh", "-xc", "{{V}}"]"#, "touch @M@", SH_TYPED),
    code(
        "ssh -vo",
        r#"["ssh", "-vo", "{{V}}", "-o", "BatchMode=yes", "localhost", "true"]"#,
        "ProxyCommand=touch @M@",
        &[(Ty::Path, "ProxyCommand touch @M@")],
    ),
    code(
        "ssh -o (a space-separated option)",
        r#"["ssh", "-o", "{{V}}", "-o", "BatchMode=yes", "localhost", "true"]"#,
        "ProxyCommand touch @M@",
        &[(Ty::Path, "ProxyCommand touch @M@")],
    ),
    code(
        "git --git-dir .git -c",
        r#"["git", "--git-dir", ".git", "-c", "{{V}}", "status"]"#,
        "core.fsmonitor=touch @M@",
        &[],
    ),
    code(
        "git -C . -c diff.external=",
        r#"["git", "-C", ".", "-c", "{{V}}", "difftool", "-y", "HEAD~1", "HEAD"]"#,
        "diff.external=touch @M@ #",
        &[],
    ),
    code(
        "sed --line-length 5 SCRIPT",
        r#"["sed", "--line-length", "5", "{{V}}", "data.txt"]"#,
        "w@M@",
        &[(Ty::Path, "w@M@")],
    ),
    code(
        "sed -n --expression=",
        r#"["sed", "-n", "--expression={{V}}", "data.txt"]"#,
        "w@M@",
        &[(Ty::Path, "w@M@")],
    ),
    code(
        "sed -s -l 5 SCRIPT",
        r#"["sed", "-s", "-l", "5", "{{V}}", "data.txt"]"#,
        "1e touch @M@",
        &[(Ty::Path, "w@M@")],
    ),
    code(
        "su -c",
        r#"["su", "-c", "{{V}}", "root"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "python3 -m MODULE -c @M@ (zipfile)",
        r#"["python3", "-m", "{{V}}", "-c", "@M@", "data.txt"]"#,
        "zipfile",
        &[(Ty::Word, "zipfile"), (Ty::Path, "zipfile")],
    ),
    // Wrappers the second line did not know, or misread: data in the program position.
    program(
        "xargs --max-args 1",
        r#"["xargs", "--max-args", "1", "{{V}}", "@M@"]"#,
    ),
    program("env -vu X", r#"["env", "-vu", "X", "{{V}}", "@M@"]"#),
    program(
        "env -u X -C . (clusters and values)",
        r#"["env", "-iu", "X", "{{V}}", "@M@"]"#,
    ),
    program(
        "timeout -vk 1 5",
        r#"["timeout", "-vk", "1", "5", "{{V}}", "@M@"]"#,
    ),
    program(
        "timeout --kill-after 1 5",
        r#"["timeout", "--kill-after", "1", "5", "{{V}}", "@M@"]"#,
    ),
    program("flock FILE", r#"["flock", "LOCK", "{{V}}", "@M@"]"#),
    program(
        "flock -w 5 FILE",
        r#"["flock", "-w", "5", "LOCK", "{{V}}", "@M@"]"#,
    ),
    program(
        "runuser -u root",
        r#"["runuser", "-u", "root", "{{V}}", "@M@"]"#,
    ),
    program(
        "runuser -u root --",
        r#"["runuser", "-u", "root", "--", "{{V}}", "@M@"]"#,
    ),
    program("setarch x86_64", r#"["setarch", "x86_64", "{{V}}", "@M@"]"#),
    program(
        "setarch -R x86_64",
        r#"["setarch", "-R", "x86_64", "{{V}}", "@M@"]"#,
    ),
    program(
        "prlimit --nofile=1024",
        r#"["prlimit", "--nofile=1024", "{{V}}", "@M@"]"#,
    ),
    program("setpriv --nnp", r#"["setpriv", "--nnp", "{{V}}", "@M@"]"#),
    program(
        "valgrind -q",
        r#"["valgrind", "-q", "--log-file=/dev/null", "{{V}}", "@M@"]"#,
    ),
    Case {
        name: "ld.so",
        argv: r#"["ld.so", "{{V}}", "@M@"]"#,
        env: None,
        free: "/usr/bin/touch",
        typed: &[],
        pos: Pos::Program,
    },
    Case {
        name: "/lib64/ld-linux-x86-64.so.2",
        argv: r#"["/lib64/ld-linux-x86-64.so.2", "{{V}}", "@M@"]"#,
        env: None,
        free: "/usr/bin/touch",
        typed: &[],
        pos: Pos::Program,
    },
    program(
        "watch -x (behind timeout)",
        r#"["timeout", "5", "watch", "-n", "1", "-g", "-x", "{{V}}", "@M@"]"#,
    ),
    program(
        "nice -n 5 (behind env -i)",
        r#"["env", "-i", "nice", "-n", "5", "{{V}}", "@M@"]"#,
    ),
    program(
        "timeout 5 stdbuf -o0 nohup",
        r#"["timeout", "5", "stdbuf", "-o0", "nohup", "{{V}}", "@M@"]"#,
    ),
    program("setsid -w", r#"["setsid", "-w", "{{V}}", "@M@"]"#),
    program("time -p", r#"["time", "-p", "{{V}}", "@M@"]"#),
    // Environment names read as code, or an endpoint.
    env_name(
        "MAKEFLAGS",
        r#"["make", "-f", "Makefile"]"#,
        "MAKEFLAGS",
        "X=$(shell touch @M@)",
        &[],
    ),
    env_name(
        "GNUMAKEFLAGS",
        r#"["make", "-f", "Makefile"]"#,
        "GNUMAKEFLAGS",
        "X=$(shell touch @M@)",
        &[],
    ),
    env_name(
        "MFLAGS",
        r#"["make", "-f", "Makefile"]"#,
        "MFLAGS",
        "X=$(shell touch @M@)",
        &[],
    ),
    env_name(
        "CC",
        r#"["make", "-f", "Makefile", "x.o"]"#,
        "CC",
        "touch @M@ #",
        &[(Ty::Path, "touch @M@ #")],
    ),
    env_name(
        "CXX",
        r#"["make", "-f", "Makefile", "y.o"]"#,
        "CXX",
        "touch @M@ #",
        &[(Ty::Path, "touch @M@ #")],
    ),
    env_name(
        "CFLAGS",
        r#"["make", "-f", "Makefile", "x.o"]"#,
        "CFLAGS",
        "-w; touch @M@ #",
        &[],
    ),
    env_name(
        "LDFLAGS",
        r#"["make", "-f", "Makefile", "x"]"#,
        "LDFLAGS",
        "-w; touch @M@ #",
        &[],
    ),
    env_name(
        "CPP",
        r#"["true"]"#,
        "CPP",
        "touch @M@",
        &[(Ty::Path, "touch @M@")],
    ),
    env_name(
        "LD",
        r#"["true"]"#,
        "LD",
        "touch @M@",
        &[(Ty::Path, "touch @M@")],
    ),
    env_name(
        "AR",
        r#"["true"]"#,
        "AR",
        "touch @M@",
        &[(Ty::Path, "touch @M@")],
    ),
    env_name(
        "VIMINIT",
        r#"["timeout", "10", "vim", "-n", "-c", "qa!", "data.txt"]"#,
        "VIMINIT",
        "call writefile([], '@M@')",
        &[],
    ),
    env_name(
        "EXINIT",
        r#"["timeout", "10", "vim", "-n", "-c", "qa!", "data.txt"]"#,
        "EXINIT",
        "call writefile([], '@M@')",
        &[],
    ),
    env_name(
        "DBUS_SESSION_BUS_ADDRESS",
        r#"["true"]"#,
        "DBUS_SESSION_BUS_ADDRESS",
        "unixexec:path=/usr/bin/touch,argv1=@M@",
        &[],
    ),
    env_name(
        "DBUS_SYSTEM_BUS_ADDRESS",
        r#"["true"]"#,
        "DBUS_SYSTEM_BUS_ADDRESS",
        "unixexec:path=/usr/bin/touch,argv1=@M@",
        &[],
    ),
    env_name(
        "OPENAI_BASE_URL (command step)",
        r#"["true"]"#,
        "OPENAI_BASE_URL",
        "http://127.0.0.1:9/v1",
        &[(Ty::Url, "http://127.0.0.1:9/v1")],
    ),
    env_name(
        "MY_SERVICE_ENDPOINT",
        r#"["true"]"#,
        "MY_SERVICE_ENDPOINT",
        "http://127.0.0.1:9/",
        &[(Ty::Url, "http://127.0.0.1:9/")],
    ),
    env_name(
        "OPENAI_API_BASE",
        r#"["true"]"#,
        "OPENAI_API_BASE",
        "http://127.0.0.1:9/",
        &[(Ty::Url, "http://127.0.0.1:9/")],
    ),
    env_name(
        "https_proxy",
        r#"["curl", "-sS", "https://example.invalid/"]"#,
        "https_proxy",
        "http://127.0.0.1:9/",
        &[(Ty::Url, "http://127.0.0.1:9/")],
    ),
    env_name(
        "HTTPS_PROXY",
        r#"["true"]"#,
        "HTTPS_PROXY",
        "http://127.0.0.1:9/",
        &[(Ty::Url, "http://127.0.0.1:9/")],
    ),
    env_name(
        "http_proxy",
        r#"["true"]"#,
        "http_proxy",
        "http://127.0.0.1:9/",
        &[(Ty::Url, "http://127.0.0.1:9/")],
    ),
    env_name(
        "ALL_PROXY",
        r#"["true"]"#,
        "ALL_PROXY",
        "http://127.0.0.1:9/",
        &[(Ty::Url, "http://127.0.0.1:9/")],
    ),
    env_name(
        "NO_PROXY",
        r#"["true"]"#,
        "NO_PROXY",
        "*",
        &[(Ty::Word, "localhost")],
    ),
    // make reads its whole environment as make code: free text never reaches it, directly
    // or behind a wrapper; a typed value (no `$(`) may, and breaks its type here.
    data(
        "make with X in env:",
        r#"["make", "-f", "Makefile"]"#,
        Some("X"),
    ),
    data(
        "env -u Y make",
        r#"["env", "-u", "Y", "make", "-f", "Makefile"]"#,
        Some("X"),
    ),
    data(
        "nice -n 5 make",
        r#"["nice", "-n", "5", "make", "-f", "Makefile"]"#,
        Some("X"),
    ),
    data(
        "timeout -k 1 5 make",
        r#"["timeout", "-k", "1", "5", "make", "-f", "Makefile"]"#,
        Some("X"),
    ),
    data(
        "xargs make",
        r#"["xargs", "make", "-f", "Makefile"]"#,
        Some("X"),
    ),
    data(
        "flock LOCK make",
        r#"["flock", "LOCK", "make", "-f", "Makefile"]"#,
        Some("X"),
    ),
    data(
        "sudo make",
        r#"["sudo", "make", "-f", "Makefile"]"#,
        Some("X"),
    ),
    data(
        "nohup make",
        r#"["nohup", "make", "-f", "Makefile"]"#,
        Some("X"),
    ),
    data(
        "setsid make",
        r#"["setsid", "make", "-f", "Makefile"]"#,
        Some("X"),
    ),
    data(
        "stdbuf -oL make",
        r#"["stdbuf", "-oL", "make", "-f", "Makefile"]"#,
        Some("X"),
    ),
    data(
        "time make",
        r#"["time", "make", "-f", "Makefile"]"#,
        Some("X"),
    ),
    data(
        "timeout 5 nice env make (depth 3)",
        r#"["timeout", "5", "nice", "env", "make", "-f", "Makefile"]"#,
        Some("X"),
    ),
    data(
        "/usr/bin/make",
        r#"["/usr/bin/make", "-f", "Makefile"]"#,
        Some("X"),
    ),
    data("gmake", r#"["gmake", "-f", "Makefile"]"#, Some("X")),
    // A make goal and a perl file: free text refused; a typed value breaks its type.
    data(
        "make -f Makefile GOAL (X:=$(shell …))",
        r#"["make", "-f", "Makefile", "{{V}}"]"#,
        None,
    ),
    Case {
        name: "perl -n with a file ending in |",
        argv: r#"["perl", "-ne", "print", "{{V}}"]"#,
        env: None,
        free: "touch @M@|",
        typed: &[],
        pos: Pos::Data,
    },
    Case {
        name: "perl -p with a file ending in |",
        argv: r#"["perl", "-pe", "1", "{{V}}"]"#,
        env: None,
        free: "touch @M@|",
        typed: &[],
        pos: Pos::Data,
    },
    Case {
        name: "perl -n with a file starting with >",
        argv: r#"["perl", "-ne", "print", "{{V}}"]"#,
        env: None,
        free: ">@M@",
        typed: &[],
        pos: Pos::Data,
    },
];

/// A data position whose free payload is make code.
const fn data(name: &'static str, argv: &'static str, env: Option<&'static str>) -> Case {
    Case {
        name,
        argv,
        env,
        free: "X:=$(shell touch @M@)",
        typed: &[],
        pos: Pos::Data,
    }
}

/// Where the value comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Source {
    /// `--input v=…`, `v` declared without a type.
    InputFree,
    /// `--input v=…`, `v` declared with the payload's type.
    InputTyped,
    /// A step's output, referenced as it is.
    OutputFree,
    /// A step's output, shaped at the reference (`| path`…).
    OutputShaped,
    /// A `for_each` item from a step's JSON output, shaped at the reference.
    LoopShaped,
    /// A child workflow's typed input, passed the parent's free `--input`.
    ChildTyped,
    /// A typed input, the step in a `while` body.
    WhileTyped,
    /// A typed input, the command an agent step's `command:`.
    AgentTyped,
    /// A typed input, the command a `run_command` list.
    RunCommandTyped,
}

const SOURCES: [Source; 9] = [
    Source::InputFree,
    Source::InputTyped,
    Source::OutputFree,
    Source::OutputShaped,
    Source::LoopShaped,
    Source::ChildTyped,
    Source::WhileTyped,
    Source::AgentTyped,
    Source::RunCommandTyped,
];

impl Source {
    fn is_free(self) -> bool {
        matches!(self, Source::InputFree | Source::OutputFree)
    }

    /// The exit codes this source may end with for a case at `pos`.
    fn ends(self, pos: Pos) -> &'static [i32] {
        match (pos, self) {
            (Pos::Code | Pos::Program | Pos::EnvName, _) => &[3],
            (Pos::Data, s) if s.is_free() => &[3],
            (Pos::Data, Source::InputTyped | Source::WhileTyped)
            | (Pos::Data, Source::AgentTyped | Source::RunCommandTyped) => &[3, 2],
            (Pos::Data, _) => &[3, 1],
        }
    }
}

/// The workflow (and child) running `case` with its value from `source`, typed `ty`.
fn workflow(case: &Case, source: Source, ty: Ty) -> (String, Option<String>) {
    let reference = match source {
        Source::InputFree
        | Source::InputTyped
        | Source::WhileTyped
        | Source::AgentTyped
        | Source::RunCommandTyped => "inputs.v".to_owned(),
        Source::OutputFree => "steps.src.output".to_owned(),
        Source::OutputShaped => format!("steps.src.output | {}", ty.filter()),
        Source::LoopShaped => format!("loop.item | {}", ty.filter()),
        Source::ChildTyped => "inputs.x".to_owned(),
    };
    let template = format!("{{{{ {reference} }}}}");
    let argv = case.argv.replace("{{V}}", &template);
    let env = case.env.map(|name| format!("{{ {name}: \"{template}\" }}"));
    let step = match source {
        Source::AgentTyped => {
            format!(
                "- name: s\n  type: agent\n  provider: claude\n  prompt: hi\n  command: {argv}\n"
            )
        }
        Source::RunCommandTyped => {
            let mut s = format!(
                "- name: s\n  type: operation\n  tool: run_command\n  input:\n    command: {argv}\n"
            );
            if let Some(env) = &env {
                s.push_str(&format!("    env: {env}\n"));
            }
            s
        }
        _ => {
            let mut s = format!("- name: s\n  type: command\n  command: {argv}\n");
            if let Some(env) = &env {
                s.push_str(&format!("  env: {env}\n"));
            }
            s
        }
    };
    let mut inputs = String::from("inputs:\n  - name: v\n");
    if matches!(
        source,
        Source::InputTyped | Source::WhileTyped | Source::AgentTyped | Source::RunCommandTyped
    ) {
        inputs.push_str(ty.declaration());
    }
    let (steps, child) = match source {
        Source::OutputFree | Source::OutputShaped => (
            format!(
                "  - name: src\n    type: command\n    command: [cat, payload.txt]\n{}",
                indent(&step, 2)
            ),
            None,
        ),
        Source::LoopShaped => (
            format!(
                "  - name: items\n    type: command\n    command: [cat, items.json]\n  - name: each\n    type: for_each\n    items: \"{{{{steps.items.output}}}}\"\n    steps:\n{}",
                indent(&step, 6)
            ),
            None,
        ),
        Source::WhileTyped => (
            format!(
                "  - name: w\n    type: while\n    condition: go\n    max_iterations: 1\n    steps:\n{}",
                indent(&step, 6)
            ),
            None,
        ),
        Source::ChildTyped => (
            "  - name: call\n    type: call_workflow\n    workflow: child.yaml\n    inputs: { x: \"{{inputs.v}}\" }\n".to_owned(),
            Some(format!(
                "name: child\ninputs:\n  - name: x\n{}steps:\n{}",
                ty.declaration(),
                indent(&step, 2)
            )),
        ),
        _ => (indent(&step, 2), None),
    };
    (format!("name: attack\n{inputs}steps:\n{steps}"), child)
}

/// The workspace a case runs in: the files its programs read.
fn prepare(sb: &Sandbox, case: &Case, payload: &str) {
    sb.ws_file("data.txt", "a\nb\n");
    sb.ws_file("LOCK", "");
    sb.ws_file("Makefile", "all:\n\t@echo $(X)\n");
    sb.ws_file("x.c", "int main(void) { return 0; }\n");
    sb.ws_file("y.cc", "int main() { return 0; }\n");
    sb.ws_file("main.go", "package main\nfunc main() {}\n");
    sb.ws_file("payload.txt", &sb.fill(payload));
    sb.ws_file(
        "items.json",
        &serde_json::json!([sb.fill(payload)]).to_string(),
    );
    if case.argv.contains("\"git\"") {
        sb.git_repo();
    }
    if case.argv.contains("a.tar") {
        let ok = std::process::Command::new("tar")
            .current_dir(sb.ws())
            .args(["-cf", "a.tar", "data.txt"])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
}

/// Runs every case matching `pick` from every source; returns the count and the failures.
fn attack(pick: impl Fn(&Case) -> bool) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    let mut runs = 0;
    for case in CASES.iter().filter(|c| pick(c)) {
        for source in SOURCES {
            if source == Source::AgentTyped && case.env.is_some() {
                continue; // an agent step's env: has its own rule (typed_values_agent_env)
            }
            let variants: Vec<(Ty, &str)> = if source.is_free() || case.typed.is_empty() {
                vec![(Ty::Path, case.free)]
            } else {
                case.typed.to_vec()
            };
            for (ty, payload) in variants {
                runs += 1;
                let sb = Sandbox::new();
                prepare(&sb, case, payload);
                let (wf, child) = workflow(case, source, ty);
                sb.write_workflow(&wf, child.as_deref());
                let label = format!("{} [{source:?}, {ty:?} {payload:?}]", case.name);
                let Some(out) = sb.run(&[("v", payload)], &[]) else {
                    failures.push(format!("{label}: HUNG"));
                    continue;
                };
                let code = out.status.code().unwrap_or(-1);
                let want = source.ends(case.pos);
                if sb.marker().exists() {
                    failures.push(format!(
                        "{label}: RAN THE PAYLOAD (exit {code}): {}",
                        last_line(&out)
                    ));
                } else if !want.contains(&code) {
                    failures.push(format!(
                        "{label}: exit {code}, want {want:?}: {}",
                        last_line(&out)
                    ));
                }
            }
        }
    }
    (runs, failures)
}

fn report(what: &str, (runs, failures): (usize, Vec<String>)) {
    eprintln!("{what}: {runs} runs, {} failures", failures.len());
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn a_value_in_a_position_its_program_reads_as_code_is_refused_from_every_source() {
    report("code", attack(|c| c.pos == Pos::Code));
}

#[test]
fn a_value_in_a_wrappers_program_position_is_refused_from_every_source() {
    report("program", attack(|c| c.pos == Pos::Program));
}

#[test]
fn a_value_in_an_environment_name_read_as_code_is_refused_from_every_source() {
    report("env", attack(|c| c.pos == Pos::EnvName));
}

#[test]
fn free_text_never_reaches_make_and_a_typed_value_must_fit_its_type() {
    report("data", attack(|c| c.pos == Pos::Data));
}
