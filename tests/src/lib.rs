//! Helpers for the end-to-end suites.
