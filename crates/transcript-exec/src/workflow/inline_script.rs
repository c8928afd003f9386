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

/// Shells whose `-c` flag (alone or in a group like `-ec`, `-lc`) takes the script;
/// restricted and versioned names are normalised first ([`normalise`]).
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "pdksh", "oksh", "ash", "yash", "fish", "busybox",
    "csh", "tcsh", "posh", "su",
];

/// Shell options that take a value (`bash --rcfile X -c`, `sh -o pipefail -c`).
const SHELL_VALUE_OPTIONS: &[&str] = &["-o", "+o", "-O", "+O", "--rcfile", "--init-file"];

/// An interpreter: its code flags (single letters may be clustered, `-Ic`, `-le`), its long
/// code flags (`--eval CODE`, `--eval=CODE`), and its options that take a value.
struct Interpreter {
    name: &'static str,
    letters: &'static str,
    long: &'static [&'static str],
    valued: &'static [&'static str],
}

const INTERPRETERS: &[Interpreter] = &[
    Interpreter {
        name: "python",
        letters: "c",
        long: &[],
        valued: &["-W", "-X", "-Q"],
    },
    Interpreter {
        name: "pypy",
        letters: "c",
        long: &[],
        valued: &["-W", "-X"],
    },
    Interpreter {
        name: "node",
        letters: "ep",
        long: &["--eval", "--print"],
        valued: &[
            "-r",
            "--require",
            "--import",
            "--loader",
            "--conditions",
            "-C",
        ],
    },
    Interpreter {
        name: "nodejs",
        letters: "ep",
        long: &["--eval", "--print"],
        valued: &["-r", "--require", "--import", "--loader"],
    },
    Interpreter {
        name: "bun",
        letters: "ep",
        long: &["--eval", "--print"],
        valued: &["-r", "--preload"],
    },
    Interpreter {
        name: "perl",
        letters: "eE",
        long: &[],
        valued: &["-I", "-M", "-m"],
    },
    Interpreter {
        name: "ruby",
        letters: "e",
        long: &[],
        valued: &["-I", "-r", "-C", "-E"],
    },
    Interpreter {
        name: "php",
        letters: "rBRE",
        long: &[],
        valued: &["-d", "-c", "-z"],
    },
    Interpreter {
        name: "lua",
        letters: "e",
        long: &[],
        valued: &["-l"],
    },
    Interpreter {
        name: "luajit",
        letters: "e",
        long: &[],
        valued: &["-l", "-j", "-O"],
    },
    Interpreter {
        name: "pwsh",
        letters: "c",
        long: &["-Command", "-command", "--command", "-EncodedCommand"],
        valued: &[],
    },
    Interpreter {
        name: "osascript",
        letters: "e",
        long: &[],
        valued: &["-l"],
    },
];

/// The program name of an argv element, normalised: its last path component
/// (`/usr/bin/bash` → `bash`), without a version (`python3.11` → `python`, `perl5.36` →
/// `perl`), a restricted shell as its shell (`rbash` → `bash`).
pub(super) fn normalise(element: &str) -> &str {
    let name = element.rsplit('/').next().unwrap_or(element);
    let name = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    match name {
        "rbash" => "bash",
        "rksh" => "ksh",
        "rzsh" => "zsh",
        _ if name.is_empty() => element,
        _ => name,
    }
}

/// Whether `arg` is a short option group (`-c`, `-ec`, `-Ic`; not `--x`, not `-`).
fn short_group(arg: &str) -> bool {
    arg.len() >= 2
        && arg.starts_with('-')
        && !arg.starts_with("--")
        && arg[1..].chars().all(|c| c.is_ascii_alphanumeric())
}

/// A shell's command string: with `-c` among its options, the first argument that is not an
/// option (`bash -e -c CODE`, `sh -o pipefail -c CODE`, `bash --rcfile X -c CODE`,
/// `bash -c -- CODE`).
fn shell_code(args: &[String]) -> Option<usize> {
    let mut c = false;
    let mut j = 0;
    while j < args.len() {
        let a = args[j].as_str();
        if a == "--" {
            j += 1;
            break;
        }
        if SHELL_VALUE_OPTIONS.contains(&a) {
            j += 2;
            continue;
        }
        // A cluster ending in a letter that takes a value (`-eo pipefail`, `-xO extglob`).
        if short_group(a) && a.ends_with(['o', 'O']) {
            c |= a.contains('c');
            j += 2;
            continue;
        }
        if !(a.starts_with('-') || a.starts_with('+')) || a == "-" {
            break;
        }
        c |= (short_group(a) && a.contains('c')) || a == "--command";
        j += 1;
    }
    (c && j < args.len()).then_some(j)
}

/// The script a shell or an interpreter runs as a program (element 0, or the program a
/// wrapper runs) when no inline code is given: its first operand (#48: data never chooses
/// the code, a file holding it included: `[bash, "{{ x | file }}"]`).
fn script_operand(args: &[String]) -> Option<usize> {
    let mut j = 0;
    while j < args.len() {
        let a = args[j].as_str();
        if a == "--" {
            return (j + 1 < args.len()).then_some(j + 1);
        }
        if SHELL_VALUE_OPTIONS.contains(&a) || matches!(a, "-W" | "-X" | "-I" | "-M" | "-r") {
            j += 2;
            continue;
        }
        if !a.starts_with(['-', '+']) || a == "-" {
            return Some(j);
        }
        j += 1;
    }
    None
}

/// An interpreter's inline code, among the options before its script file: the argument
/// after a code flag (`python3 -W ignore -Ic CODE`, `node -r fs -e CODE`), the flag's own
/// element when the code is attached (`--eval=CODE`), and for `python -m timeit` its setup
/// and statements.
fn interpreter_code(args: &[String], it: &Interpreter) -> Vec<usize> {
    let mut j = 0;
    while j < args.len() {
        let a = args[j].as_str();
        if it.name == "python" && a == "-m" {
            // The module chooses the program that runs (`python3 -m MODULE`).
            let mut out = vec![j + 1];
            if args.get(j + 1).is_some_and(|m| m == "timeit") {
                out.extend(timeit_code(&args[j + 2..]).into_iter().map(|k| k + j + 2));
            }
            out.retain(|k| *k < args.len());
            return out;
        }
        if it.valued.contains(&a) {
            j += 2;
            continue;
        }
        if it.long.iter().any(|l| a.starts_with(&format!("{l}="))) {
            return vec![j];
        }
        let lettered = short_group(a) && a[1..].ends_with(|c| it.letters.contains(c));
        if it.long.contains(&a) || lettered {
            let mut out: Vec<usize> = (j + 1 < args.len()).then_some(j + 1).into_iter().collect();
            // perl -n/-p read their operands with `<>`, whose two-argument open runs a
            // name ending in `|` as a command: every operand after the code is code too.
            if it.name == "perl"
                && args[..=j]
                    .iter()
                    .any(|o| short_group(o) && o.contains(['n', 'p']))
            {
                out.extend(j + 2..args.len());
            }
            return out;
        }
        if !a.starts_with('-') || a == "--" {
            // The script file: what follows is its arguments.
            return Vec::new();
        }
        j += 1;
    }
    Vec::new()
}

/// `python -m timeit [-s SETUP] STATEMENT…`: every setup and statement is code.
fn timeit_code(args: &[String]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut j = 0;
    while j < args.len() {
        let a = args[j].as_str();
        if matches!(a, "-s" | "--setup") {
            out.push(j + 1);
            j += 2;
        } else if a.starts_with("--setup=") || (a.starts_with("-s") && a.len() > 2) {
            out.push(j);
            j += 1;
        } else if matches!(a, "-n" | "-r" | "-u" | "--number" | "--repeat" | "--unit") {
            j += 2;
        } else if a.starts_with('-') && a != "-" {
            j += 1;
        } else {
            out.extend(j..args.len());
            break;
        }
    }
    out.retain(|k| *k < args.len());
    out
}

/// awk's program: its first argument that is not an option, unless `-f FILE` gave one.
fn awk_code(args: &[String]) -> Option<usize> {
    let mut j = 0;
    while j < args.len() && args[j].starts_with('-') && args[j] != "--" {
        if args[j] == "-f" || args[j].starts_with("--file") {
            return None;
        }
        j += if matches!(args[j].as_str(), "-v" | "-F" | "-W") {
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

/// sed's script: every `-e SCRIPT` / `--expression=SCRIPT`, else its first argument that is
/// not an option (GNU sed's `e` command and `s///e` flag run shell commands).
fn sed_code(args: &[String]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut j = 0;
    let mut from_file = false;
    while j < args.len() && args[j].starts_with('-') && args[j] != "--" && args[j] != "-" {
        let a = args[j].as_str();
        if a == "-e" || a == "--expression" || (short_group(a) && a.ends_with('e')) {
            out.push(j + 1);
            j += 2;
            continue;
        }
        if a.starts_with("--expression=") || (short_group(a) && a.contains('e')) {
            out.push(j);
        }
        from_file |= a == "-f" || a.starts_with("--file");
        j += if a == "-f" || a == "-l" { 2 } else { 1 };
    }
    if out.is_empty() && !from_file {
        if args.get(j).is_some_and(|a| a == "--") {
            j += 1;
        }
        out.push(j);
    }
    out.retain(|k| *k < args.len());
    out
}

/// sqlite3's SQL: every argument after the database, and each `-cmd` value (dot-commands
/// like `.system` and `.shell` run programs).
fn sqlite_code(args: &[String]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut j = 0;
    while j < args.len() && args[j].starts_with('-') {
        if matches!(args[j].trim_start_matches('-'), "cmd" | "init") {
            out.push(j + 1);
            j += 2;
        } else {
            j += 1;
        }
    }
    // args[j] is the database; every argument after it is SQL.
    out.extend(j + 1..args.len());
    out.retain(|k| *k < args.len());
    out
}

/// ssh's code: every `-o` value (`ProxyCommand`, `LocalCommand` run programs) and every
/// argument after the host (joined and run by the remote shell).
fn ssh_code(args: &[String]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut j = 0;
    while j < args.len() && args[j].starts_with('-') {
        let a = args[j].as_str();
        // A cluster (`-vo X`, `-vp22`): the first letter that takes a value (ssh(1)) ends
        // it, with the rest of the element or the next one as its value; `-o`'s is code
        // (`ProxyCommand`, `LocalCommand` run programs).
        let letters = &a[1..];
        let valued = letters
            .char_indices()
            .find(|(_, c)| "BbcDEeFIiJLlmOoPpQRSWw".contains(*c));
        let step = match valued {
            Some((k, c)) if k + 1 == letters.len() => {
                if c == 'o' {
                    out.push(j + 1);
                }
                2
            }
            Some((_, c)) => {
                if c == 'o' {
                    out.push(j);
                }
                1
            }
            None => 1,
        };
        j += step;
    }
    out.extend(j + 1..args.len());
    out.retain(|k| *k < args.len());
    out
}

/// Wrappers that take a command line or a script in one argument: `env -S LINE`,
/// `script -c CMD`, `flock LOCK -c CMD`, `git -c name=value` (`core.sshCommand`,
/// `alias.x=!cmd`), `su -c CMD` (see [`SHELLS`]).
fn wrapper_code(name: &str, args: &[String]) -> Vec<usize> {
    let (short, long): (char, &[&str]) = match name {
        "env" => ('S', &["--split-string"]),
        "script" | "flock" => ('c', &["--command"]),
        "git" => ('c', &[]),
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    for (j, a) in args.iter().enumerate() {
        if long.iter().any(|l| a == l) {
            out.push(j + 1);
        } else if long.iter().any(|l| a.starts_with(&format!("{l}="))) {
            out.push(j);
        } else if short_group(a) {
            match a[1..].find(short) {
                Some(k) if k + 2 == a.len() => out.push(j + 1),
                Some(_) => out.push(j),
                None => {}
            }
        }
        // git's global options that take a separate value (`git --git-dir .git -c x`).
        let option_value = j > 0
            && matches!(
                args[j - 1].as_str(),
                "-c" | "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env"
            );
        if name == "git" && !a.starts_with('-') && !option_value {
            break; // the git subcommand: its own options follow
        }
    }
    out.retain(|k| *k < args.len());
    out
}

/// Wrappers that run the program named by one of their arguments, and their options that
/// take a value: that argument chooses the program, as element 0 does (`timeout 5 PROG`,
/// `env A=1 PROG`, `sudo -u x PROG`, `xargs -I {} PROG`).
const WRAPPERS: &[(&str, &[&str])] = &[
    ("env", &["-u", "-C", "--unset", "--chdir"]),
    ("timeout", &["-s", "-k", "--signal", "--kill-after"]),
    ("nice", &["-n", "--adjustment"]),
    ("nohup", &[]),
    ("setsid", &[]),
    ("time", &["-f", "-o", "--format", "--output"]),
    ("stdbuf", &["-i", "-o", "-e"]),
    (
        "sudo",
        &["-u", "-g", "-C", "-h", "-p", "-U", "-r", "-t", "-D"],
    ),
    ("doas", &["-u", "-C"]),
    (
        "xargs",
        &[
            "-I",
            "-n",
            "-P",
            "-d",
            "-E",
            "-L",
            "-s",
            "-a",
            "--arg-file",
            "--delimiter",
        ],
    ),
    ("ionice", &["-c", "-n", "-p"]),
    ("chrt", &[]),
    ("taskset", &[]),
    ("chroot", &[]),
    ("unshare", &[]),
    ("strace", &["-o", "-e", "-p", "-s", "-u"]),
];

/// The argument of a wrapper that names the program it runs (see [`WRAPPERS`]); `find`'s
/// `-exec`, `-execdir`, `-ok` and `-okdir` commands too.
fn program_argument(name: &str, args: &[String]) -> Vec<usize> {
    if name == "find" {
        return args
            .iter()
            .enumerate()
            .filter(|(_, a)| matches!(a.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"))
            .map(|(j, _)| j + 1)
            .filter(|k| *k < args.len())
            .collect();
    }
    let Some((_, valued)) = WRAPPERS.iter().find(|(w, _)| *w == name) else {
        return Vec::new();
    };
    let mut j = 0;
    while j < args.len() {
        let a = args[j].as_str();
        if valued.contains(&a) {
            j += 2;
        } else if a == "--" {
            j += 1;
            break;
        } else if a.starts_with('-') || (name == "env" && a.contains('=')) {
            j += 1;
        } else {
            break;
        }
    }
    // timeout DURATION PROG, chrt PRIORITY PROG, taskset MASK PROG, chroot DIR PROG.
    if matches!(name, "timeout" | "chrt" | "taskset" | "chroot") {
        j += 1;
    }
    (j < args.len()).then_some(j).into_iter().collect()
}

/// Indexes of the elements of `argv` that a program in the list reads as source code (or
/// runs as a program). Every element is tried as a program name, so wrappers (`env`,
/// `timeout 5`, `nice`, `setsid`, `sudo`, `nohup`, `xargs`, `busybox sh`) do not hide the
/// program they run.
///
/// `argv` holds the elements as written in the workflow (templates unrendered).
#[cfg(test)]
pub fn code_arguments(argv: &[String]) -> Vec<usize> {
    let mut out: Vec<usize> = code_readers(argv).into_iter().map(|(k, _)| k).collect();
    out.dedup();
    out
}

/// The elements of `argv` that a program in the list reads as source code (or runs as a
/// program), sorted, each with the index of the program that reads it. Every element is
/// tried as a program name, so wrappers (`env`, `timeout 5`, `nice`, `setsid`, `sudo`,
/// `nohup`, `xargs`, `busybox sh`) do not hide the program they run. `argv` holds the
/// elements as written in the workflow (templates unrendered).
pub fn code_readers(argv: &[String]) -> Vec<(usize, usize)> {
    // Where a program runs: element 0, and what each wrapper runs.
    let mut programs = vec![0];
    for (i, element) in argv.iter().enumerate() {
        let name = normalise(element);
        programs.extend(super::options::program_position(argv, i, name));
        programs.extend(
            program_argument(name, &argv[i + 1..])
                .iter()
                .map(|j| i + 1 + j),
        );
    }
    let mut out = Vec::new();
    for (i, element) in argv.iter().enumerate() {
        let name = normalise(element);
        let rest = &argv[i + 1..];
        let at = |j: usize| (i + 1 + j, i);
        let runs = programs.contains(&i);
        let interpreter = INTERPRETERS.iter().any(|it| it.name == name);
        if runs && (SHELLS.contains(&name) || interpreter) && shell_code(rest).is_none() {
            let inline = INTERPRETERS
                .iter()
                .find(|it| it.name == name)
                .is_some_and(|it| !interpreter_code(rest, it).is_empty());
            if !inline {
                out.extend(script_operand(rest).map(at));
            }
        }
        if SHELLS.contains(&name) {
            out.extend(shell_code(rest).map(at));
        } else if matches!(name, "awk" | "gawk" | "mawk" | "nawk") {
            out.extend(awk_code(rest).map(at));
        } else if name == "sed" || name == "gsed" {
            out.extend(sed_code(rest).into_iter().map(at));
        } else if name == "sqlite" {
            out.extend(sqlite_code(rest).into_iter().map(at));
        } else if name == "ssh" {
            out.extend(ssh_code(rest).into_iter().map(at));
        } else if let Some(it) = INTERPRETERS.iter().find(|it| it.name == name) {
            out.extend(interpreter_code(rest, it).into_iter().map(at));
        } else {
            out.extend(wrapper_code(name, rest).into_iter().map(at));
        }
        out.extend(program_argument(name, rest).into_iter().map(at));
        out.extend(
            super::options::code_positions(argv, i, name)
                .into_iter()
                .map(|k| (k, i)),
        );
    }
    out.sort_unstable();
    out.dedup_by_key(|(k, _)| *k);
    out
}

/// Names of make (GNU make, BSD make and their relatives).
const MAKES: &[&str] = &["make", "gmake", "bmake", "pmake", "remake", "colormake"];

/// Whether a list-form command runs make: an element names it, as element 0 or behind any
/// wrapper (every element is tried as a program, as [`code_readers`] does). make evaluates
/// every environment variable as make code (`$(shell …)` in any value runs when a recipe
/// expands it), so free text in `env:` never reaches it (#48). A second line: a list.
pub fn runs_make(argv: &[String]) -> bool {
    argv.iter().any(|e| MAKES.contains(&normalise(e)))
}

/// Whether shell source mentions make as a word (`make test`, `cd x && gmake`): the shell
/// form's second line for [`runs_make`]. Words are split at whitespace and shell
/// punctuation; no shell grammar is parsed, so a mention anywhere counts.
pub fn mentions_make(source: &str) -> bool {
    source
        .split(|c: char| c.is_whitespace() || ";&|()<>`$'\"{}=".contains(c))
        .any(|w| MAKES.contains(&normalise(w)))
}

#[cfg(test)]
#[path = "inline_script_tests.rs"]
mod tests;
