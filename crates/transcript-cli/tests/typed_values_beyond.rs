//! Issue #48, the attacker beyond the issue's list (harness: `typed_support::attack`): long
//! options abbreviated as getopt_long and git's parser accept them (`--to-comm=`,
//! `--filt=`, `--upload-p=`, `--exe=`), other spellings of the same code options (`-x`,
//! `--ex`, `-eval-command=`, `-e`, `--expression`, `ex -c`), and shell-string positions of
//! programs a list may not name (`watch CMD`, `find -exec sh -c`, `sg -c`, `tmux new -d`,
//! `npm exec -c`, wrappers such as `ionice`, `taskset`, `chrt`, `strace`, `chroot`,
//! `unshare`, `nsenter`). A typed `url` (`http://h/?;touch${IFS}/abs/MARK`) is shell code in
//! every one and a typed `path` (`w/abs/MARK`) an ex or sed command: each must be refused at
//! load (exit 3); the marker outside the workspace must never appear.
#![allow(clippy::unwrap_used)]

mod common;
mod typed_support;

use typed_support::attack::{Case, Pos, SH_TYPED, Ty, attack, code, report};

const CASES: &[Case] = &[
    // Beyond the issue's list: long options abbreviated as getopt_long and git's parser
    // accept them, other spellings of the same code options, and shell-string positions of
    // programs the lists may not name. A typed `url` is shell code in every one.
    code(
        "tar --to-comm= (abbreviated)",
        r#"["tar", "-xf", "a.tar", "--to-comm={{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "tar --use-compress-prog= (abbreviated)",
        r#"["tar", "-cf", "out.tar", "--use-compress-prog={{V}}", "data.txt"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "split --filt= (abbreviated)",
        r#"["split", "--filt={{V}}", "data.txt"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "git ls-remote --upload-p= (abbreviated)",
        r#"["git", "ls-remote", "--upload-p={{V}}", "."]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "git fetch --upload-pack=",
        r#"["git", "fetch", "--upload-pack={{V}}", "."]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "git pull --upload-pack=",
        r#"["git", "pull", "--upload-pack={{V}}", "."]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "git rebase --exec VALUE",
        r#"["git", "rebase", "--exec", "{{V}}", "HEAD~1"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "git rebase --exe= (abbreviated)",
        r#"["git", "rebase", "--exe={{V}}", "HEAD~1"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "git difftool -x",
        r#"["git", "difftool", "-y", "-x", "{{V}}", "HEAD~1", "HEAD"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "git -C . difftool --extcmd VALUE",
        r#"["git", "-C", ".", "difftool", "-y", "--extcmd", "{{V}}", "HEAD~1", "HEAD"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "git archive --remote=. --exec=",
        r#"["git", "archive", "--remote=.", "--exec={{V}}", "HEAD"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "gdb -batch --ex (double dash)",
        r#"["gdb", "-batch", "--ex", "{{V}}"]"#,
        "shell touch @M@",
        &[(Ty::Path, "shell touch @M@")],
    ),
    code(
        "gdb -batch -eval-command= (single dash, =)",
        r#"["gdb", "-batch", "-eval-command={{V}}"]"#,
        "shell touch @M@",
        &[(Ty::Path, "shell touch @M@")],
    ),
    code(
        "sed -e (sed's w to a typed path)",
        r#"["sed", "-n", "-e", "{{V}}", "data.txt"]"#,
        "w@M@",
        &[(Ty::Path, "w@M@")],
    ),
    code(
        "sed --expression VALUE",
        r#"["sed", "-n", "--expression", "{{V}}", "data.txt"]"#,
        "w@M@",
        &[(Ty::Path, "w@M@")],
    ),
    code(
        "vim -es -c (w to a typed path)",
        r#"["vim", "-e", "-s", "-c", "{{V}}", "-c", "qa!"]"#,
        "w@M@",
        &[(Ty::Path, "w@M@")],
    ),
    code(
        "ex -c",
        r#"["ex", "-s", "-c", "{{V}}", "-c", "qa!"]"#,
        "w@M@",
        &[(Ty::Path, "w@M@")],
    ),
    code(
        "watch COMMAND (a shell string without -x)",
        r#"["timeout", "5", "watch", "-n", "1", "-g", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "find -exec sh -c",
        r#"["find", ".", "-maxdepth", "0", "-exec", "sh", "-c", "{{V}}", ";"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "find -execdir sh -c",
        r#"["find", "data.txt", "-execdir", "sh", "-c", "{{V}}", ";"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "dash -c",
        r#"["dash", "-c", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "unshare -r sh -c",
        r#"["unshare", "-r", "sh", "-c", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "ionice -c3 sh -c",
        r#"["ionice", "-c3", "sh", "-c", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "taskset 1 sh -c",
        r#"["taskset", "1", "sh", "-c", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "chrt -o 0 sh -c",
        r#"["chrt", "-o", "0", "sh", "-c", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "strace -o /dev/null sh -c",
        r#"["strace", "-f", "-o", "/dev/null", "sh", "-c", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "chroot / sh -c",
        r#"["chroot", "/", "sh", "-c", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "sg root -c",
        r#"["sg", "root", "-c", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "script -q -c VALUE FILE",
        r#"["script", "-q", "-e", "-c", "{{V}}", "/dev/null"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "tmux new-session -d COMMAND",
        r#"["tmux", "-L", "typed", "new-session", "-d", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "ssh HOST COMMAND (a remote shell string)",
        r#"["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=2", "localhost", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "npm exec -c",
        r#"["npm", "exec", "-c", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "npm exec --call VALUE",
        r#"["npm", "exec", "--call", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
    code(
        "nsenter -t 1 sh -c",
        r#"["nsenter", "--target", "1", "--mount", "sh", "-c", "{{V}}"]"#,
        "touch @M@",
        SH_TYPED,
    ),
];

#[test]
fn a_value_in_a_code_position_beyond_the_issues_list_is_refused_from_every_source() {
    report("beyond", attack(CASES, |c| c.pos == Pos::Code));
}
