//! hub
