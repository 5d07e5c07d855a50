//! The exact text of every tool result and refusal.

pub mod send;
