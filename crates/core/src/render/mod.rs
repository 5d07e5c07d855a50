//! The exact text of every tool result and refusal.

pub mod list;
pub mod read;
pub mod send;
