//! One file per built-in step kind: each runs its kind's body inside the
//! lifecycle (`step.started` / `step.completed`, audit, display, timeout)
//! that [`super::run`] puts around every step.

pub(super) mod agent;
pub(super) mod call_workflow;
pub(super) mod command;
pub(super) mod custom;
pub(super) mod for_each;
pub(super) mod operation;
pub(super) mod parallel;
pub(super) mod terminal;
pub(super) mod while_loop;
