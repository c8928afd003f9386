//! The list form of `command:` hands each element to the program as one argument, so a value
//! never becomes shell syntax on its way there. But some programs read one of their
//! arguments as source code: `sh -c SCRIPT`, `bash -lc SCRIPT`, `python3 -c CODE`,
//! `node -e CODE`, `perl -e CODE`, `ssh HOST COMMAND…` (the remote shell). A `{{…}}` spliced
//! into such an argument is shell source again (`[sh, -c, "echo {{inputs.x}}"]` with
//! `x = $(touch P)` runs `touch`).
//!
//! This module finds those arguments so validation can refuse a template inside them, like
//! it refuses one in the string form. It does not parse any shell or language: it only
//! recognises an interpreter by its program name (anywhere in the list, so wrappers like
//! `env`, `timeout 5` or `xargs` do not hide it) and the flag that introduces inline code.
//! The element right after that flag is the code; the elements after it are the code's
//! positional arguments (`$1`, `sys.argv[1]`…), which is where values belong:
//! `[sh, -c, 'echo "$1"', sh, "{{inputs.x}}"]`. A false alarm (a program named like a shell
//! given as data) is refused too; `| raw` is the author's way to vouch for a value as code.

/// Shells whose `-c` flag (alone or in a group like `-ec`, `-lc`) takes the script.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "fish", "busybox",
];

/// Interpreters and the flags whose next argument is inline code.
const INTERPRETERS: &[(&str, &[&str])] = &[
    ("python", &["-c"]),
    ("python3", &["-c"]),
    ("python2", &["-c"]),
    ("pypy3", &["-c"]),
    ("node", &["-e", "--eval", "-p", "--print"]),
    ("nodejs", &["-e", "--eval", "-p", "--print"]),
    ("deno", &["eval"]),
    ("perl", &["-e", "-E"]),
    ("ruby", &["-e"]),
    ("php", &["-r"]),
    ("lua", &["-e"]),
    ("pwsh", &["-c", "-Command", "-command"]),
    ("osascript", &["-e"]),
];

/// The program name of an argv element: its last path component (`/usr/bin/bash` → `bash`).
fn program(element: &str) -> &str {
    element.rsplit('/').next().unwrap_or(element)
}

/// Whether `arg` is a shell option group that includes `c` (`-c`, `-ec`, `-lc`; not `--x`).
fn shell_c_flag(arg: &str) -> bool {
    arg.len() >= 2
        && arg.starts_with('-')
        && !arg.starts_with("--")
        && arg[1..].chars().all(|c| c.is_ascii_alphabetic())
        && arg.contains('c')
}

/// A shell's command string: with `-c` among its options, the first argument that is not an
/// option (`bash -e -c CODE`, `sh -o pipefail -c CODE`, `bash -c -- CODE`).
fn shell_code(args: &[String]) -> Option<usize> {
    let mut c = false;
    let mut j = 0;
    while j < args.len() {
        let a = args[j].as_str();
        if a == "--" {
            j += 1;
            break;
        }
        if a == "-o" || a == "+o" || a == "-O" || a == "+O" {
            j += 2;
            continue;
        }
        if !(a.starts_with('-') || a.starts_with('+')) || a == "-" {
            break;
        }
        c |= shell_c_flag(a);
        j += 1;
    }
    (c && j < args.len()).then_some(j)
}

/// An interpreter's inline code: the argument after one of its `flags`, among the options
/// before its script file (`python3 -u -c CODE`; not `python3 tool.py -c X`).
fn interpreter_code(args: &[String], flags: &[&str]) -> Option<usize> {
    for (j, a) in args.iter().enumerate() {
        if flags.contains(&a.as_str()) {
            return (j + 1 < args.len()).then_some(j + 1);
        }
        if !a.starts_with('-') || a == "--" || a == "-m" {
            return None;
        }
    }
    None
}

/// awk's program: its first argument that is not an option, unless `-f FILE` gave one.
fn awk_code(args: &[String]) -> Option<usize> {
    let mut j = 0;
    while j < args.len() && args[j].starts_with('-') && args[j] != "--" {
        if args[j] == "-f" {
            return None;
        }
        j += if matches!(args[j].as_str(), "-v" | "-F") {
            2
        } else {
            1
        };
    }
    if args.get(j).is_some_and(|a| a == "--") {
        j += 1;
    }
    (j < args.len()).then_some(j)
}

/// ssh's remote command: every argument after the host, joined and run by the remote shell.
fn ssh_code(args: &[String]) -> std::ops::Range<usize> {
    let mut j = 0;
    while j < args.len() && args[j].starts_with('-') {
        // Options that take a value (ssh(1)): skip it too.
        let takes_value = args[j].len() == 2 && "BbcDEeFIiJLlmOoPpQRSWw".contains(&args[j][1..]);
        j += if takes_value { 2 } else { 1 };
    }
    (j + 1).min(args.len())..args.len()
}

/// Indexes of the elements of `argv` that a program in the list reads as source code.
///
/// `argv` holds the elements as written in the workflow (templates unrendered).
pub fn code_arguments(argv: &[String]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, element) in argv.iter().enumerate() {
        let name = program(element);
        let rest = &argv[i + 1..];
        let at = |j: usize| i + 1 + j;
        if SHELLS.contains(&name) {
            out.extend(shell_code(rest).map(at));
        } else if matches!(name, "awk" | "gawk" | "mawk" | "nawk") {
            out.extend(awk_code(rest).map(at));
        } else if name == "ssh" {
            out.extend(ssh_code(rest).map(at));
        } else if let Some((_, flags)) = INTERPRETERS.iter().find(|(p, _)| *p == name) {
            out.extend(interpreter_code(rest, flags).map(at));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn inline_code_is_found_behind_wrappers_and_option_groups() {
        assert_eq!(
            code_arguments(&args(&["sh", "-c", "x", "sh", "y"])),
            vec![2]
        );
        assert_eq!(code_arguments(&args(&["/bin/bash", "-lc", "x"])), vec![2]);
        assert_eq!(
            code_arguments(&args(&[
                "env", "A=1", "timeout", "5", "bash", "-e", "-c", "x"
            ])),
            vec![7]
        );
        assert_eq!(
            code_arguments(&args(&["bash", "-c", "-e", "x", "a0"])),
            vec![3]
        );
        assert_eq!(
            code_arguments(&args(&["sh", "-o", "errexit", "-c", "x"])),
            vec![4]
        );
        assert_eq!(
            code_arguments(&args(&["python3", "-u", "-c", "x", "y"])),
            vec![3]
        );
        assert_eq!(code_arguments(&args(&["node", "--eval", "x"])), vec![2]);
        assert_eq!(
            code_arguments(&args(&["awk", "-F", ":", "{print}", "f"])),
            vec![3]
        );
        assert_eq!(
            code_arguments(&args(&["ssh", "-p", "22", "host", "ls", "x"])),
            vec![4, 5]
        );
    }

    #[test]
    fn plain_programs_and_scripts_from_files_have_no_code_argument() {
        assert!(code_arguments(&args(&["grep", "-c", "x", "file"])).is_empty());
        assert!(code_arguments(&args(&["sh", "script.sh", "x"])).is_empty());
        assert!(code_arguments(&args(&["python3", "tool.py", "-c", "x"])).is_empty());
        assert!(code_arguments(&args(&["bash", "--norc", "script.sh"])).is_empty());
        assert!(code_arguments(&args(&["awk", "-f", "prog.awk", "x"])).is_empty());
    }
}
