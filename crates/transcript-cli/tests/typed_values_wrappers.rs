//! Issue #48, the attacker on wrappers and environments (harness: `typed_support::attack`):
//! data in a wrapper's program position (`xargs --max-args 1`, `env -vu X`, `timeout -vk 1
//! 5`, `flock FILE`, `runuser -u`, `setarch`, `prlimit`, `setpriv`, `valgrind`, `ld.so`,
//! `watch -x`, `nice`, `stdbuf`, `nohup`, `setsid`, `time`), environment names read as code
//! or endpoints (`MAKEFLAGS`, `CC`, `CFLAGS`, `VIMINIT`, `EXINIT`, `DBUS_*_BUS_ADDRESS`,
//! `*_BASE_URL`, `*_ENDPOINT`, `*_API_BASE`, proxies), free text in make's environment
//! directly or behind wrappers, a make goal and perl's file operand. Code, program and env-name
//! positions end refused at load (exit 3) from every source; a data position refuses free text
//! at load and a typed value breaking its type where it is checked (2 or 1).
#![allow(clippy::unwrap_used)]

mod common;
mod typed_support;

use typed_support::attack::{Case, Pos, Ty, attack, data, env_name, program, report};

const CASES: &[Case] = &[
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

#[test]
fn a_value_in_a_wrappers_program_position_is_refused_from_every_source() {
    report("program", attack(CASES, |c| c.pos == Pos::Program));
}

#[test]
fn a_value_in_an_environment_name_read_as_code_is_refused_from_every_source() {
    report("env", attack(CASES, |c| c.pos == Pos::EnvName));
}

#[test]
fn free_text_never_reaches_make_and_a_typed_value_must_fit_its_type() {
    report("data", attack(CASES, |c| c.pos == Pos::Data));
}
