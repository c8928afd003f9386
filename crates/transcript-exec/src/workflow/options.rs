//! Reading a program's options as the program does (#48 item 5), for the second line of
//! the argv rule ([`super::inline_script`]): which short letters and long names take a
//! value (in a cluster, `-vo VALUE` or `-voVALUE`; `--name VALUE`; `--name=VALUE`), so the
//! operand that follows them is found where the program finds it; which options take code
//! (`split --filter=`, `tar --to-command`, `gdb -ex`, `vim -c`, `git rebase -x`, `make
//! --eval`, …); and which programs run another program (wrappers, followed to any depth
//! because every element of a list is tried as a program).
//!
//! This is a list, so it is the second line: the first is structure and shape (only typed
//! values stand in argv). A program or an option missing here is missed by this line only.

/// How a program reads its options.
pub(super) struct Spec {
    /// The program names (normalised: last path component, no version).
    pub(super) names: &'static [&'static str],
    /// Short option letters that take a value.
    pub(super) valued: &'static str,
    /// Long options that take a value (`--name VALUE` or `--name=VALUE`).
    pub(super) long_valued: &'static [&'static str],
    /// Short option letters whose value is code (a subset of, or beside, `valued`).
    pub(super) code: &'static str,
    /// Long options whose value is code.
    pub(super) long_code: &'static [&'static str],
    /// Every operand is code (`watch CMD…` joins them for `sh -c`; make evaluates `X=…`).
    pub(super) operands_are_code: bool,
    /// Operands before the program it runs (`flock FILE PROG`, `setarch ARCH PROG`); `None`
    /// when it runs no program.
    pub(super) runs_after: Option<usize>,
    /// Options are read anywhere, not only before the first operand (git's subcommands
    /// take theirs after it).
    pub(super) anywhere: bool,
    /// Short options cluster (`-vo X`); vim's and gdb's do not (`-es` is one option).
    pub(super) clusters: bool,
}

const fn spec(names: &'static [&'static str]) -> Spec {
    Spec {
        names,
        valued: "",
        long_valued: &[],
        code: "",
        long_code: &[],
        operands_are_code: false,
        runs_after: None,
        anywhere: false,
        clusters: true,
    }
}

/// Programs with options that take code, and wrappers with the position of the program
/// they run.
pub(super) const SPECS: &[Spec] = &[
    Spec {
        long_valued: &[
            "--lines",
            "--bytes",
            "--line-bytes",
            "--number",
            "--suffix-length",
        ],
        valued: "abCdlnt",
        long_code: &["--filter"],
        ..spec(&["split"])
    },
    Spec {
        valued: "bCfgHIKLNTVFX",
        long_valued: &["--directory", "--file", "--exclude"],
        code: "IFT",
        long_code: &[
            "--files-from",
            "--checkpoint-action",
            "--to-command",
            "--use-compress-program",
            "--info-script",
            "--new-volume-script",
            "--rsh-command",
        ],
        anywhere: true,
        ..spec(&["tar", "bsdtar", "gtar"])
    },
    Spec {
        valued: "C",
        long_valued: &[
            "--git-dir",
            "--work-tree",
            "--namespace",
            "--config-env",
            "--exec-path",
        ],
        code: "xu",
        long_code: &[
            "--upload-pack",
            "--receive-pack",
            "--exec",
            "--extcmd",
            "--config",
        ],
        anywhere: true,
        ..spec(&["git"])
    },
    Spec {
        valued: "CfIjlOoW",
        long_valued: &["--directory", "--include-dir", "--jobs"],
        code: "Ef",
        long_code: &["--eval", "--file", "--makefile"],
        operands_are_code: true,
        ..spec(&["make", "gmake", "bmake", "pmake", "remake"])
    },
    Spec {
        long_valued: &["-p", "-c", "--pid", "--core", "--directory", "--cd", "-d"],
        long_code: &[
            "-ex",
            "--ex",
            "-eval-command",
            "--eval-command",
            "-iex",
            "--iex",
            "-init-eval-command",
            "--init-eval-command",
            "-x",
            "--x",
            "-command",
            "--command",
            "-ix",
            "--init-command",
        ],
        clusters: false,
        ..spec(&["gdb"])
    },
    Spec {
        long_valued: &["-r", "-T", "-t", "-W", "-w", "-u", "-U", "-i", "-q"],
        // (vim's `-s FILE` outside ex mode reads keystrokes: the stdin rule's business)
        // `-s` is silent mode in ex mode (`vim -e -s`), a script only outside it: not read
        // as code here, or it would hide the `-c` after it.
        long_code: &["-c", "--cmd", "-S"],
        clusters: false,
        ..spec(&[
            "vim", "vi", "nvim", "view", "ex", "gvim", "vimdiff", "rvim", "evim", "rview",
        ])
    },
    Spec {
        valued: "bnPt",
        long_code: &["-TT", "--unzip-command"],
        ..spec(&["zip"])
    },
    Spec {
        valued: "oIDLlxU",
        long_code: &["-wrapper", "-fplugin"],
        ..spec(&["cc", "gcc", "g++", "c++", "clang", "clang++"])
    },
    Spec {
        long_code: &["-exec", "--exec", "-toolexec", "--toolexec"],
        anywhere: true,
        ..spec(&["go"])
    },
    Spec {
        valued: "cp",
        code: "c",
        long_code: &["--call"],
        long_valued: &["--package"],
        ..spec(&["npx"])
    },
    Spec {
        valued: "rC",
        long_code: &["--import", "--require", "--loader", "--experimental-loader"],
        code: "r",
        ..spec(&["node", "nodejs", "bun", "deno"])
    },
    Spec {
        valued: "cp",
        code: "c",
        long_code: &["--call"],
        long_valued: &["--package", "--workspace", "--prefix"],
        anywhere: true,
        ..spec(&["npm", "pnpm"])
    },
    Spec {
        valued: "LSfcnstFxy",
        operands_are_code: true,
        anywhere: true,
        ..spec(&["tmux"])
    },
    Spec {
        valued: "oduHXxTbcAeEwmyYzrCDFQ",
        code: "K",
        long_code: &["--config"],
        anywhere: true,
        ..spec(&["curl"])
    },
    Spec {
        valued: "fvF",
        code: "f",
        long_code: &["--file", "--exec", "--source", "--include"],
        ..spec(&["awk", "gawk", "mawk", "nawk"])
    },
    // Wrappers: the program they run comes after their options (and fixed operands).
    Spec {
        valued: "uCS",
        long_valued: &["--unset", "--chdir", "--split-string"],
        runs_after: Some(0),
        ..spec(&["env"])
    },
    Spec {
        valued: "sk",
        long_valued: &["--signal", "--kill-after"],
        runs_after: Some(1),
        ..spec(&["timeout"])
    },
    Spec {
        valued: "wEc",
        long_valued: &["--timeout", "--wait", "--conflict-exit-code", "--command"],
        code: "c",
        long_code: &["--command"],
        runs_after: Some(1),
        anywhere: true,
        ..spec(&["flock"])
    },
    Spec {
        valued: "ugGcwl",
        long_valued: &[
            "--user",
            "--group",
            "--supp-group",
            "--whitelist-environment",
        ],
        code: "c",
        long_code: &["--command", "--session-command"],
        runs_after: Some(0),
        ..spec(&["runuser", "su"])
    },
    Spec {
        code: "c",
        runs_after: Some(1),
        anywhere: true,
        ..spec(&["sg"])
    },
    Spec {
        long_valued: &["--uname-2.6"],
        runs_after: Some(1),
        ..spec(&["setarch", "linux32", "linux64"])
    },
    Spec {
        valued: "p",
        long_valued: &["--pid", "--output"],
        runs_after: Some(0),
        ..spec(&["prlimit"])
    },
    Spec {
        long_valued: &[
            "--reuid",
            "--regid",
            "--groups",
            "--inh-caps",
            "--ambient-caps",
            "--bounding-set",
            "--securebits",
            "--selinux-label",
            "--apparmor-profile",
            "--pdeathsig",
            "--landlock-access",
            "--landlock-rule",
        ],
        runs_after: Some(0),
        ..spec(&["setpriv"])
    },
    Spec {
        runs_after: Some(0),
        ..spec(&[
            "valgrind",
            "ld.so",
            "ld-linux",
            "ld-linux-x86-64.so",
            "ld-linux-aarch64.so",
        ])
    },
    Spec {
        valued: "dn",
        long_valued: &["--differences", "--interval"],
        operands_are_code: true,
        ..spec(&["watch"])
    },
    Spec {
        valued: "EIdLnPs",
        code: "a",
        long_code: &["--arg-file"],
        long_valued: &[
            "--max-args",
            "--max-lines",
            "--max-procs",
            "--max-chars",
            "--eof",
            "--delimiter",
            "--process-slot-var",
        ],
        runs_after: Some(0),
        ..spec(&["xargs"])
    },
];

/// Whether `arg` names one of `options`: exactly, or as GNU getopt and git read a long
/// option, by a prefix of at least two letters (`--to-comm` for `--to-command`); any
/// prefix counts here, ambiguity is the program's business.
fn names(options: &[&str], arg: &str) -> bool {
    options.iter().any(|o| {
        *o == arg
            || (arg.starts_with("--")
                && o.starts_with("--")
                && arg.len() >= 4
                && o.starts_with(arg))
    })
}

/// Whether `arg` is a short option cluster (`-c`, `-eo`, `-vk`; not `--x`, not `-`).
fn cluster(arg: &str) -> bool {
    arg.len() >= 2 && arg.starts_with('-') && !arg.starts_with("--")
}

/// What [`read`] found in a program's arguments.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Read {
    /// Indexes (into the arguments) holding code: an option's value or the option's own
    /// element when the value is attached.
    pub(super) code: Vec<usize>,
    /// The index of the first operand, if any.
    pub(super) first_operand: Option<usize>,
}

/// Reads `args` (the elements after the program's name) as `spec`'s program does.
pub(super) fn read(args: &[String], spec: &Spec) -> Read {
    let mut out = Read::default();
    let mut j = 0;
    while j < args.len() {
        let a = args[j].as_str();
        if a == "--" {
            if out.first_operand.is_none() && j + 1 < args.len() {
                out.first_operand = Some(j + 1);
            }
            break;
        }
        if let Some((name, _)) = a.split_once('=').filter(|_| a.starts_with('-')) {
            if names(spec.long_code, name) {
                out.code.push(j);
            }
            j += 1;
            continue;
        }
        if names(spec.long_code, a) {
            out.code.push(j + 1);
            j += 2;
            continue;
        }
        if names(spec.long_valued, a) {
            j += 2;
            continue;
        }
        if spec.clusters && cluster(a) && !a[1..].starts_with('-') {
            // The first letter that takes a value ends the cluster: its value is the rest,
            // or the next element when it is the last letter.
            let letters = &a[1..];
            let valued = letters
                .char_indices()
                .find(|(_, c)| spec.valued.contains(*c) || spec.code.contains(*c));
            match valued {
                Some((k, c)) if k + c.len_utf8() == letters.len() => {
                    if spec.code.contains(c) {
                        out.code.push(j + 1);
                    }
                    j += 2;
                }
                Some((_, c)) => {
                    if spec.code.contains(c) {
                        out.code.push(j);
                    }
                    j += 1;
                }
                None => j += 1,
            }
            continue;
        }
        if a.starts_with("--") || (!spec.clusters && a.starts_with('-') && a.len() > 1) {
            j += 1;
            continue;
        }
        // An operand.
        if out.first_operand.is_none() {
            out.first_operand = Some(j);
        }
        if spec.operands_are_code {
            out.code.push(j);
        }
        if !spec.anywhere && !spec.operands_are_code {
            break;
        }
        j += 1;
    }
    out.code.retain(|k| *k < args.len());
    out
}

/// The code positions (indexes into `argv`) that [`SPECS`] find for the program at `i`,
/// the program a wrapper runs included.
pub(super) fn code_positions(argv: &[String], i: usize, name: &str) -> Vec<usize> {
    let Some(spec) = SPECS.iter().find(|s| s.names.contains(&name)) else {
        return Vec::new();
    };
    let read = read(&argv[i + 1..], spec);
    let mut out: Vec<usize> = read.code.iter().map(|k| i + 1 + k).collect();
    out.extend(program_position(argv, i, name));
    out
}

/// The index in `argv` of the program that the wrapper at `i` runs, if it is one.
pub(super) fn program_position(argv: &[String], i: usize, name: &str) -> Option<usize> {
    let spec = SPECS.iter().find(|s| s.names.contains(&name))?;
    let rest = &argv[i + 1..];
    let skip = spec.runs_after?;
    let mut p = read(rest, spec).first_operand?;
    // env's `NAME=value` operands come before its program.
    if name == "env" {
        while rest
            .get(p)
            .is_some_and(|a| a.contains('=') && !a.starts_with('-'))
        {
            p += 1;
        }
    }
    let program = p + skip;
    // `flock FILE -c CMD`: an option there, not a program.
    rest.get(program)
        .is_some_and(|a| !a.starts_with('-'))
        .then_some(i + 1 + program)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(argv: &[&str]) -> Vec<usize> {
        let argv: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
        let name = super::super::inline_script::normalise(&argv[0]);
        code_positions(&argv, 0, name)
    }

    #[test]
    fn options_that_take_code_are_found_in_every_form() {
        assert_eq!(at(&["split", "--filter=x", "f"]), vec![1]);
        assert_eq!(at(&["split", "-l", "5", "--filter", "x", "f"]), vec![4]);
        assert_eq!(
            at(&["tar", "-cf", "a.tar", "--checkpoint-action=x", "f"]),
            vec![3]
        );
        assert_eq!(at(&["tar", "-xf", "a.tar", "--to-command", "x"]), vec![4]);
        assert_eq!(at(&["tar", "-I", "x", "-cf", "a", "b"]), vec![2]);
        assert_eq!(at(&["git", "ls-remote", "--upload-pack=x", "."]), vec![2]);
        assert_eq!(at(&["git", "rebase", "-x", "x", "main"]), vec![3]);
        assert_eq!(at(&["git", "clone", "-u", "x", "a", "b"]), vec![3]);
        assert_eq!(at(&["git", "difftool", "--extcmd=x"]), vec![2]);
        // The makefile is code too (#48 red team: `make -f {{ x | file }}`).
        assert_eq!(at(&["make", "-f", "m", "x"]), vec![2, 3]);
        assert_eq!(at(&["make", "--eval=x"]), vec![1]);
        assert_eq!(at(&["gdb", "-ex", "x", "prog"]), vec![2]);
        assert_eq!(at(&["vim", "-c", "x", "f"]), vec![2]);
        assert_eq!(at(&["zip", "-TT", "x", "a.zip", "f"]), vec![2]);
        assert_eq!(at(&["cc", "-wrapper", "x", "a.c"]), vec![2]);
        assert_eq!(at(&["go", "run", "-exec", "x", "."]), vec![3]);
        assert_eq!(at(&["npx", "-c", "x"]), vec![2]);
        assert_eq!(at(&["node", "--import=x", "a.js"]), vec![1]);
        assert_eq!(at(&["watch", "-n", "1", "x", "y"]), vec![3, 4]);
        // The red team's misses: vim's -es is one option, abbreviated long options, more
        // programs, and the files that options read as code.
        assert_eq!(at(&["vim", "-es", "-c", "x", "f"]), vec![3]);
        assert_eq!(at(&["ex", "-c", "x"]), vec![2]);
        assert_eq!(at(&["vim", "-e", "-s", "-c", "x"]), vec![4]);
        assert_eq!(at(&["ex", "-s", "-c", "x"]), vec![3]);
        assert_eq!(at(&["vim", "--cmd", "x"]), vec![2]);
        assert_eq!(at(&["gdb", "-batch", "--ex", "x"]), vec![3]);
        assert_eq!(at(&["tar", "-xf", "a", "--to-comm=x"]), vec![3]);
        assert_eq!(at(&["split", "--filt=x", "f"]), vec![1]);
        assert_eq!(at(&["git", "ls-remote", "--upload-p=x", "."]), vec![2]);
        assert_eq!(at(&["git", "rebase", "--exe=x"]), vec![2]);
        assert_eq!(at(&["npm", "exec", "-c", "x"]), vec![3]);
        assert_eq!(at(&["sg", "root", "-c", "x"]), vec![3]);
        assert_eq!(at(&["tmux", "new-session", "-d", "x"]), vec![1, 3]);
        assert_eq!(at(&["curl", "-K", "x"]), vec![2]);
        assert_eq!(at(&["make", "-f", "x"]), vec![2]);
        assert_eq!(at(&["awk", "-f", "x", "f"]), vec![2]);
        assert_eq!(at(&["xargs", "-a", "x", "touch"]), vec![2, 3]);
        assert_eq!(at(&["tar", "-cf", "a.tar", "-T", "x"]), vec![4]);
    }

    #[test]
    fn wrappers_read_clusters_and_separate_values_before_their_program() {
        assert_eq!(at(&["env", "-vu", "X", "x"]), vec![3]);
        assert_eq!(at(&["env", "-v", "A=1", "x"]), vec![3]);
        assert_eq!(at(&["timeout", "-vk", "1", "5", "x"]), vec![4]);
        assert_eq!(at(&["timeout", "--kill-after", "1", "5", "x"]), vec![4]);
        assert_eq!(at(&["flock", "FILE", "x"]), vec![2]);
        assert_eq!(at(&["flock", "-w", "3", "FILE", "x"]), vec![4]);
        assert_eq!(at(&["runuser", "-u", "bob", "x"]), vec![3]);
        assert_eq!(at(&["su", "-c", "x", "bob"]), vec![2, 3]);
        assert_eq!(at(&["setarch", "x86_64", "x"]), vec![2]);
        assert_eq!(at(&["prlimit", "--nofile=10", "x"]), vec![2]);
        assert_eq!(at(&["setpriv", "--reuid", "1", "x"]), vec![3]);
        assert_eq!(at(&["valgrind", "-q", "x"]), vec![2]);
        assert_eq!(at(&["/lib64/ld-linux-x86-64.so.2", "x"]), vec![1]);
        assert_eq!(at(&["xargs", "--max-args", "1", "x"]), vec![3]);
        assert_eq!(at(&["xargs", "-n1", "x"]), vec![2]);
    }
}
