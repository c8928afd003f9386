//! One module per subcommand.

pub mod import;
pub mod otel;
pub mod run;
pub mod show;
pub mod stats;
pub mod tail;
pub mod tree;
pub mod validate;
