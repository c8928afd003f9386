//! Step tree reconstruction.
