//! The exact text of every result and refusal: the only place outcomes become text.

pub mod fate;
pub mod list;
pub mod notice;
pub mod read;
pub mod refusal;
pub mod send;
