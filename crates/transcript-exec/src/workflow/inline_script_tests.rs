//! Tests of the second line's list (`inline_script`, `options`).
use super::*;

#[test]
fn make_is_found_behind_wrappers_and_in_shell_source() {
    assert!(runs_make(&args(&["make", "-C", "x"])));
    assert!(runs_make(&args(&["env", "A=1", "nice", "/usr/bin/gmake"])));
    assert!(!runs_make(&args(&["cmake", "--build", "."])));
    assert!(mentions_make("cd x && make test"));
    assert!(mentions_make("timeout 5 gmake -j2"));
    assert!(!mentions_make("cmake --build . && makeinfo x"));
}

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
        // The programs env and timeout run (2, 4), and bash's script (7).
        vec![2, 4, 7]
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
    // The script file itself is the code a shell or an interpreter runs (#48); its
    // arguments are data.
    assert_eq!(code_arguments(&args(&["sh", "script.sh", "x"])), vec![1]);
    assert_eq!(
        code_arguments(&args(&["python3", "tool.py", "-c", "x"])),
        vec![1]
    );
    assert_eq!(
        code_arguments(&args(&["bash", "--norc", "script.sh"])),
        vec![2]
    );
    assert!(code_arguments(&args(&["awk", "-f", "prog.awk", "x"])).is_empty());
}

#[test]
fn the_second_line_sees_through_names_clusters_options_and_wrappers() {
    let cases: &[(&[&str], &[usize])] = &[
        (&["python3.11", "-c", "x"], &[2]),
        (&["/usr/bin/python3", "-Ic", "x"], &[2]),
        (&["python3", "-W", "ignore", "-c", "x"], &[4]),
        (
            &["python3", "-m", "timeit", "-n", "1", "-s", "x", "pass"],
            &[2, 6, 7],
        ),
        // #48: clusters ending in a letter that takes a value, modules, perl's `<>`.
        (&["bash", "-eo", "pipefail", "-c", "x"], &[4]),
        (&["ssh", "-vo", "x", "host"], &[2]),
        (&["ssh", "-voProxyCommand=x", "host"], &[1]),
        (&["python3", "-m", "x"], &[2]),
        (&["git", "--git-dir", ".git", "-c", "x", "log"], &[4]),
        (&["perl", "-ne", "print", "x", "y"], &[2, 3, 4]),
        (&["perl", "-le", "x"], &[2]),
        // `-n`: the file operands are opened by `<>` (a name ending in `|` runs).
        (&["perl5.36", "-ne", "x", "file"], &[2, 3]),
        // `-r MODULE` runs the module's code (#48).
        (&["node", "-r", "fs", "-e", "x"], &[2, 4]),
        (&["node", "--eval=x"], &[1]),
        (&["rbash", "-c", "x"], &[2]),
        (&["bash", "--rcfile", "/dev/null", "-c", "x"], &[4]),
        (&["env", "-S", "x"], &[2]),
        (&["script", "-qc", "x", "/dev/null"], &[2]),
        (&["flock", "LOCK", "-c", "x"], &[3]),
        // The program a wrapper runs is a code position too (3: setsid, 4: sh).
        (&["nice", "-n", "5", "setsid", "sh", "-c", "x"], &[3, 4, 6]),
        (&["awk", "-W", "interactive", "x"], &[3]),
        (&["sed", "-n", "x", "file"], &[2]),
        (&["sed", "-e", "x", "-e", "y", "file"], &[2, 4]),
        (&["sqlite3", ":memory:", "x", "y"], &[2, 3]),
        (&["sqlite3", "-cmd", "x", "db"], &[2]),
        (&["ssh", "-o", "x", "host"], &[2]),
        (&["git", "-c", "x", "log"], &[2]),
        (&["timeout", "-s", "KILL", "5", "x"], &[4]),
        (&["env", "A=1", "x"], &[2]),
        (&["sudo", "-u", "bob", "x"], &[3]),
        (&["xargs", "-I", "{}", "x", "{}"], &[3]),
        (&["find", ".", "-exec", "x", "{}", ";"], &[3]),
    ];
    for (argv, want) in cases {
        assert_eq!(code_arguments(&args(argv)), want.to_vec(), "{argv:?}");
    }
    // Not code: a script file, sed from a file, git log's own -c.
    assert!(code_arguments(&args(&["sed", "-f", "s.sed", "x"])).is_empty());
    assert!(code_arguments(&args(&["git", "log", "-c", "x"])).is_empty());
    assert_eq!(
        code_arguments(&args(&["perl", "tool.pl", "-e", "x"])),
        vec![1]
    );
}
