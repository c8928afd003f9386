//! One module per subcommand.

pub mod export;
pub mod import;
pub mod list;
pub mod otel;
pub mod progress;
pub mod run;
pub mod show;
pub mod stats;
pub mod tail;
pub mod tap;
pub mod tree;
pub mod validate;
