//! The `transcript` command.
#![forbid(unsafe_code)]

fn main() {
    println!("transcript");
}
