//! One module per subcommand.

pub mod show;
pub mod stats;
pub mod tail;
pub mod tree;
pub mod validate;
