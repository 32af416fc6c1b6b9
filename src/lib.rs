//! greenhook
