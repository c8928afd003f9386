//! What a viewer serves and how ([`ViewerConfig`]): the store, the token, and the functions
//! the composition root brings (prices, step definitions, where imported runs came from); and
//! the address rule's [`is_loopback`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use transcript_compare::StepDefinitions;
use transcript_domain::run_store::RunStore;
use transcript_domain::{Clock, DecodedEvent, Usage};
use transcript_export::{Origin, RunTurns};

/// Prices one billed turn: its model and usage in, dollars out (`None`: no price).
pub type Price = Arc<dyn Fn(&str, &Usage) -> Option<f64> + Send + Sync>;

/// A run's step definitions (the workflow text its `run.started` keeps), for the diff.
pub type Definitions = Arc<dyn Fn(&[DecodedEvent]) -> StepDefinitions + Send + Sync>;

/// Where a run's turns come from (its imported session and project, whether it is a
/// sub-agent's log), as `/receipts` groups them.
pub type OriginFn = Box<dyn Fn(&RunTurns) -> Origin + Send>;

/// Gives the [`OriginFn`] of one `/receipts` (called for each, so the CLI reads its import
/// index as it is then); an error is the page's (500, the message shown).
pub type Origins = Arc<dyn Fn() -> Result<OriginFn, String> + Send + Sync>;

/// What the viewer serves, and how.
pub struct ViewerConfig {
    /// The store, read through the read port only.
    pub store: Arc<dyn RunStore>,
    /// The token every request must carry; required on a non-loopback address.
    pub token: Option<String>,
    /// Prices billed turns (the CLI passes its price table's); `None` shows no cost.
    pub price: Option<Price>,
    /// The price table's name, shown on run pages.
    pub price_table: String,
    /// Step definitions for the diff (the CLI passes transcript-exec's reader of the
    /// recorded workflow text); `None` compares what the runs did only.
    pub definitions: Option<Definitions>,
    /// Where imported runs came from, for `/receipts` (the CLI passes the one
    /// `receipts --by` reads: its import index); `None`: a run is its own session and its
    /// project is the one its step result records, else its workflow.
    pub origins: Option<Origins>,
    /// The wall clock (the CLI passes infra's `SystemClock`; tests a manual one).
    pub clock: Arc<dyn Clock>,
    /// How often the live list looks at the store while a page watches (default 500 ms).
    pub poll: Duration,
}

impl ViewerConfig {
    /// A viewer of `store` on loopback: no token, no prices, no definitions, 500 ms polls.
    pub fn new(store: Arc<dyn RunStore>, clock: Arc<dyn Clock>) -> Self {
        ViewerConfig {
            store,
            clock,
            token: None,
            price: None,
            price_table: "no price table".to_owned(),
            definitions: None,
            origins: None,
            poll: Duration::from_millis(500),
        }
    }
}

/// Whether `addr` is a loopback address (`127.0.0.0/8`, `::1`); the unspecified address
/// (`0.0.0.0`, `::`) is not: it listens on every interface.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}
