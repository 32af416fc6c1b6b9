//! interpose: filled by the interposer issue.
