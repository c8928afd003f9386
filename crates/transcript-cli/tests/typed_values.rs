//! Issue #48, the attacker's side: whatever the program, a value whose shape the workflow has
//! not declared (free text) never becomes an argv element, and a typed value never stands
//! where its program reads code. Each [`CASES`] entry is one kind the issue found running its
//! payload at 8bc675f where a whole element is code because the program says so (harness:
//! `typed_support::attack`; wrappers, env names and data positions are in
//! `typed_values_wrappers.rs`, kinds beyond the issue's list in `typed_values_beyond.rs`),
//! run through the binary from every value source: free and typed `--input`s, a step's
//! output plain and shaped (`| path`, `| url`, `| match(…)`), a `for_each` item shaped, a
//! child workflow's typed input, a `while` body, an agent step's `command:` and a
//! `run_command` list.
//!
//! The payloads are chosen to fit the type where one can: `mkdir,--,/abs/MARK` is a lexically
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

use typed_support::attack::{Case, Pos, SH_TYPED, Ty, attack, code, report};

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
];

#[test]
fn a_value_in_a_position_its_program_reads_as_code_is_refused_from_every_source() {
    report("code", attack(CASES, |c| c.pos == Pos::Code));
}
