//! The network-namespace helper of [`transcript_exec::sandbox::net`] as a program of its own,
//! for runners composed from this crate (the `transcript` binary is its own helper:
//! `transcript __netns PROGRAM ARGS…`). Invoked as `transcript-netns __netns PROGRAM ARGS…`.

#![forbid(unsafe_code)]

use transcript_exec::sandbox::net::{HELPER_ARG, helper_main};

fn main() {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new(HELPER_ARG)) {
        eprintln!(
            "transcript-netns: started by a runner only (`transcript-netns {HELPER_ARG} PROGRAM ARGS…`)"
        );
        std::process::exit(2);
    }
    std::process::exit(helper_main(args));
}
