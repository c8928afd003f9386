//! The network-namespace helper of [`transcript_exec::sandbox::net`] as a program of its own,
//! for runners composed from this crate (the `transcript` binary is its own helper:
//! `transcript __netns PROGRAM ARGS…`). Invoked as `transcript-netns __netns PROGRAM ARGS…`.

#![forbid(unsafe_code)]

use transcript_exec::sandbox::net::{
    EXEC_ARG, GUARD_ARG, HELPER_ARG, exec_main, guard_main, helper_main,
};

fn main() {
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(a) if a == HELPER_ARG => std::process::exit(helper_main(args)),
        Some(a) if a == GUARD_ARG => std::process::exit(guard_main(args)),
        Some(a) if a == EXEC_ARG => std::process::exit(exec_main(args)),
        _ => {
            eprintln!(
                "transcript-netns: started by a runner only (`transcript-netns {HELPER_ARG}|{GUARD_ARG} PROGRAM ARGS…`)"
            );
            std::process::exit(2);
        }
    }
}
